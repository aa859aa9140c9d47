"""The generated prometheus.yml keeps the standard exporters' interface label: node_exporter
and the SONiC exporter call the interface ``device``, which the target's own ``device``
(the plan's host or switch) overrides; the relabelling moves theirs to ``port``. Checked
with a real Prometheus scraping a stand-in exporter on 127.0.0.1."""

from __future__ import annotations

import http.server
import threading
import time

import yaml

from aifabric.telemetry.monitoring import prometheus_yml
from tests.configs.conftest import small_ctx


class _Exporter(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b'node_network_receive_bytes_total{device="eth0"} 1234\n'
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_node_exporter_interfaces_keep_their_name_as_port(start_prometheus) -> None:
    ctx = small_ctx("hpn")
    cfg = yaml.safe_load(prometheus_yml(ctx, 1))
    node = next(j for j in cfg["scrape_configs"] if j["job_name"] == "node")
    host_labels = node["static_configs"][0]["labels"]
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Exporter)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        node["static_configs"] = [{"targets": [f"127.0.0.1:{srv.server_address[1]}"],
                                   "labels": host_labels}]
        cfg["scrape_configs"] = [node]
        cfg.pop("rule_files", None)
        prom = start_prometheus(yaml.safe_dump(cfg))
        deadline = time.monotonic() + 30
        got: list = []
        while not got and time.monotonic() < deadline:
            got = prom.query("node_network_receive_bytes_total")
            time.sleep(0.3)
        (series,) = got
        labels = series["metric"]
        assert labels["port"] == "eth0" and labels["device"] == host_labels["device"]
        assert "exported_device" not in labels
    finally:
        srv.shutdown()
        srv.server_close()
