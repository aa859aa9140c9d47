"""``monitoring/`` of ``aifabric build``: Prometheus and Grafana for the planned fabric.

=================================================== ======================================
file                                                what
=================================================== ======================================
``monitoring/prometheus.yml``                       scrape jobs: ``aifabric`` (``aifabric
                                                    monitor lab`` on 127.0.0.1:9464),
                                                    ``sonic`` (every switch's SONiC
                                                    exporter, port 9101, at its loopback),
                                                    ``node`` (every host's node exporter,
                                                    port 9100, at its first NIC address);
                                                    each target carries the plan's labels
                                                    (device, tier, plane, rail, segment,
                                                    pod); ``rule_files: [alerts.yml]``
``monitoring/alerts.yml``                           :mod:`aifabric.telemetry.alerts`
``monitoring/grafana/provisioning/datasources/``    the Prometheus datasource (uid
                                                    ``aifabric-prometheus``)
``monitoring/grafana/provisioning/dashboards/``     a file provider for the dashboards
``monitoring/grafana/dashboards/*.json``            :mod:`aifabric.telemetry.dashboards`
=================================================== ======================================

With a management network (the spec's ``management:``, :mod:`aifabric.topology.
management`) every target is a management address: a switch's ``eth0``, a host's OS
management NIC; and (``management.bmc``) a ``bmc`` job asks the ipmi_exporter at
``management.bmc_exporter`` (remote mode, ``/ipmi?target=<BMC>``) for every host's BMC.
Without one, a switch is scraped in band at its loopback (reachable over the fabric's
BGP) and a host at the /32 of its first NIC port. Every value that
comes from the spec is written as a JSON string (a valid YAML double-quoted scalar), so
a name cannot add a key or a line. Same fabric, same bytes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np

from aifabric.configs.addressing import ip_str
from aifabric.telemetry.alerts import duration, intervals, render_alerts
from aifabric.telemetry.catalog import device_labels
from aifabric.topology import NodeKind

if TYPE_CHECKING:
    from aifabric.configs.build import BuildContext

__all__ = ["DATASOURCE_UID", "EXPORTER_TARGET", "NODE_EXPORTER_PORT", "SONIC_EXPORTER_PORT",
           "prometheus_yml", "render_monitoring"]

#: vinted/sonic-exporter's default listen port (SONiC's Redis counters)
SONIC_EXPORTER_PORT = 9101
#: prometheus node_exporter's default listen port
NODE_EXPORTER_PORT = 9100
#: where ``aifabric monitor lab`` listens by default
EXPORTER_TARGET = "127.0.0.1:9464"
#: the Grafana datasource every dashboard panel queries
DATASOURCE_UID = "aifabric-prometheus"

_Q = json.encoder.encode_basestring_ascii  # type: ignore[attr-defined]
_LABELS = ("device", "tier", "plane", "rail", "segment", "pod")


def _targets(ctx: BuildContext, nodes: np.ndarray, addr: np.ndarray,
             port: int | None) -> list[str]:
    """``static_configs`` entries, one per device: its address (and ``port``) and the
    plan's labels."""
    f = ctx.fabric
    labels = device_labels(f, nodes)
    pod = f.nodes.pod[nodes].astype(np.int64)
    labels["pod"] = np.where(pod >= 0, pod.astype(str), "").astype(object)
    cols = [np.array([_Q(str(v)) for v in labels[k]], dtype=object) for k in _LABELS]
    target = ip_str(addr) if port is None else np.char.add(ip_str(addr), f":{port}")
    out = []
    for i in range(len(nodes)):
        lab = ", ".join(f"{k}: {c[i]}" for k, c in zip(_LABELS, cols, strict=True)
                        if c[i] != '""')
        out += [f'      - targets: ["{target[i]}"]', f"        labels: {{{lab}}}"]
    return out


def _first_nic_address(ctx: BuildContext) -> tuple[np.ndarray, np.ndarray]:
    """(host node ids, the /32 of each host's first NIC port), in host order."""
    f = ctx.fabric
    nic = f.ids(NodeKind.NIC)
    order = np.lexsort((f.nodes.side[nic], f.nodes.rail[nic], f.nodes.host[nic]))
    nic = nic[order]
    hosts, first = np.unique(f.nodes.host[nic], return_index=True)
    return f.host_node[hosts], f.nodes.ip[nic[first]]


def prometheus_yml(ctx: BuildContext, scrape_interval_s: float | None = None,
                   exporter: str = EXPORTER_TARGET,
                   evaluation_interval_s: float | None = None) -> str:
    """``prometheus.yml`` for the fabric of ``ctx`` (``promtool check config`` passes
    with ``alerts.yml`` beside it); the intervals default to the spec's
    ``deploy.monitoring``."""
    f = ctx.fabric
    scrape, evaluation = intervals(f.spec, scrape_interval_s, evaluation_interval_s)
    iv, ev = duration(scrape), duration(evaluation)
    sw = ctx.plan.switches
    hosts, host_ip = _first_nic_address(ctx)
    sw_ip = ctx.plan.loopback[sw]
    where_sw, where_host = "at its loopback", "at its first NIC port's address"
    if ctx.mgmt is not None:  # out of band: every target at its management address
        sw_ip, host_ip = ctx.mgmt.node_address[sw], ctx.mgmt.node_address[hosts]
        where_sw = "at its management address (eth0, out of band)"
        where_host = "at its management address (OS management NIC, out of band)"
    lines = [
        f"# Prometheus for the fabric {_Q(f.spec.name)}, from aifabric build",
        "# (promtool check config prometheus.yml); targets carry the plan's labels",
        "global:",
        f"  scrape_interval: {iv}",
        f"  evaluation_interval: {ev}",
        "  external_labels:",
        f"    fabric: {_Q(str(f.spec.name))}",
        "rule_files:",
        "  - alerts.yml",
        "scrape_configs:",
        "  # aifabric monitor lab: the live lab's counters, BGP, ECMP and twin drift",
        "  - job_name: aifabric",
        "    static_configs:",
        f"      - targets: [{_Q(exporter)}]",
        f"  # every switch: SONiC exporter {where_sw}",
        "  - job_name: sonic",
        *_EXPORTER_RELABEL,
        "    static_configs:",
        *_targets(ctx, sw, sw_ip, SONIC_EXPORTER_PORT),
        f"  # every host: node exporter {where_host}",
        "  - job_name: node",
        *_EXPORTER_RELABEL,
        "    static_configs:",
        *_targets(ctx, hosts, host_ip, NODE_EXPORTER_PORT),
    ]
    mg = ctx.mgmt
    if mg is not None and mg.spec.bmc:  # every BMC, through the IPMI exporter
        lines += [
            "  # every host's BMC (out of band): ipmi_exporter in remote mode at "
            "management.bmc_exporter",
            "  - job_name: bmc",
            "    metrics_path: /ipmi",
            "    params:",
            "      module: [default]",
            "    relabel_configs:",
            "      - source_labels: [__address__]",
            "        target_label: __param_target",
            "      - source_labels: [__param_target]",
            "        target_label: instance",
            "      - target_label: __address__",
            f"        replacement: {_Q(mg.spec.bmc_exporter)}",
            "    static_configs:",
            *_targets(ctx, hosts, mg.bmc_address[hosts], None),
        ]
    return "\n".join(lines) + "\n"


#: node_exporter and the SONiC exporter name the interface `device`; the target's own
#: `device` (the plan's switch or host) wins, and Prometheus keeps theirs as
#: `exported_device`: moved to `port`, as in aifabric's own series
_EXPORTER_RELABEL = (
    "    metric_relabel_configs:",
    "      - source_labels: [exported_device]",
    "        regex: (.+)",
    "        target_label: port",
    "      - regex: exported_device",
    "        action: labeldrop",
)


_DATASOURCE = f"""\
# Grafana provisioning: the fabric's Prometheus (edit url to where it runs)
apiVersion: 1
datasources:
  - name: aifabric Prometheus
    type: prometheus
    uid: {DATASOURCE_UID}
    access: proxy
    url: http://127.0.0.1:9090
    isDefault: true
    jsonData:
      timeInterval: {{iv}}
"""

_PROVIDER = """\
# Grafana provisioning: the dashboards of aifabric build (copy monitoring/grafana/dashboards
# to the path below, or edit it)
apiVersion: 1
providers:
  - name: aifabric
    folder: {folder}
    type: file
    disableDeletion: false
    allowUiUpdates: true
    options:
      path: /var/lib/grafana/dashboards/aifabric
"""


def render_monitoring(ctx: BuildContext, scrape_interval_s: float | None = None,
                      evaluation_interval_s: float | None = None
                      ) -> Iterator[tuple[str, str]]:
    """Every file of ``monitoring/`` as ``(relative path, text)``, in a fixed order; the
    intervals default to the spec's ``deploy.monitoring``.

    The dashboards need grafana-foundation-sdk (the ``telemetry`` extra); without it the
    folder holds ``grafana/dashboards/MISSING.md`` saying so instead.
    """
    spec = ctx.fabric.spec
    scrape, evaluation = intervals(spec, scrape_interval_s, evaluation_interval_s)
    yield "monitoring/prometheus.yml", prometheus_yml(ctx, scrape, EXPORTER_TARGET,
                                                      evaluation)
    yield "monitoring/alerts.yml", render_alerts(spec, scrape, evaluation)
    yield ("monitoring/grafana/provisioning/datasources/aifabric.yml",
           _DATASOURCE.replace("{iv}", duration(scrape)))
    yield ("monitoring/grafana/provisioning/dashboards/aifabric.yml",
           _PROVIDER.format(folder=_Q(f"aifabric {spec.name}")))
    try:
        from aifabric.telemetry.dashboards import dashboards
    except ModuleNotFoundError as e:
        if not (e.name or "").startswith("grafana_foundation_sdk"):
            raise
        yield ("monitoring/grafana/dashboards/MISSING.md",
               "The dashboards need grafana-foundation-sdk: pip install "
               "'aifabric[telemetry]', then run aifabric build again.\n")
        return
    for name, text in dashboards():
        yield f"monitoring/grafana/dashboards/{name}", text
