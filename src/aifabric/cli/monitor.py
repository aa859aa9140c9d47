"""``aifabric monitor lab``: the running lab as a Prometheus exporter.

Serves ``/metrics`` (prometheus-client) on 127.0.0.1:9464 unless ``--listen`` says
otherwise; every scrape reads the lab afresh (see :mod:`aifabric.telemetry.exporter`).
Problems (a bad or busy ``--listen``, no lab up, not root) exit 2 with one line.
"""

from __future__ import annotations

from pathlib import Path

import typer

from aifabric.cli._common import console, err_console

app = typer.Typer(name="monitor", help="Watch the fabric live: serve the running lab's "
                  "counters, BGP sessions, ECMP groups against the twin and ping probes to "
                  "Prometheus.", no_args_is_help=True, add_completion=False,
                  pretty_exceptions_enable=False, rich_markup_mode="markdown")


@app.command("lab")
def lab_cmd(
    lab_dir: Path | None = typer.Option(None, "--dir", metavar="DIR", help="lab folder; default "
                                        "$AIFABRIC_LAB_DIR or /run/aifabric/lab"),
    listen: str = typer.Option("127.0.0.1:9464", "--listen", metavar="HOST:PORT",
                               help="where to serve /metrics; port 0 picks a free one; an "
                               "address other than loopback exposes the lab to the network"),
    probes: int = typer.Option(24, "--probes", metavar="N",
                               help="ping probes per scrape between NIC "
                               "pairs on different hosts (0-1000; 0 = none)"),
    timeout: float = typer.Option(0.5, "--timeout", metavar="SECONDS",
                                  help="seconds a namespace, daemon or "
                                  "probe may take before it counts as down (0.05-10)"),
    once: bool = typer.Option(False, "--once", help="print one scrape to stdout and exit "
                              "instead of serving"),
) -> None:
    """Serve the running lab's metrics to Prometheus (interfaces, BGP, ECMP vs the twin,
    probes).

    Every scrape reads every namespace and daemon of the lab at once: interface
    counters and oper state, BGP session state, uptime and prefixes (FRR), each switch's
    kernel ECMP next hops toward every NIC beside the twin's prediction
    (`aifabric_twin_drift` = 0 when they agree), and ping probes between NIC pairs. A
    namespace or daemon that does not answer is `aifabric_up` 0 for that target.
    """
    import signal
    import threading

    from aifabric.errors import Problem, SpecError
    from aifabric.lab import LabError, preflight
    from aifabric.telemetry.exporter import LabCollector, is_loopback, parse_listen, serve

    host, port = parse_listen(listen)
    if not 0 <= probes <= 1000:
        raise SpecError(Problem("--probes", f"{probes} is out of range; allowed: 0 to 1000"))
    if not 0.05 <= timeout <= 10:
        raise SpecError(Problem("--timeout", f"{timeout:g} s is out of range; allowed: 0.05 "
                                "to 10 seconds"))
    try:
        import prometheus_client  # noqa: F401  (the telemetry extra)
    except ImportError:
        err_console.print("error: monitor lab: needs prometheus-client; install it: pip "
                          "install 'aifabric[telemetry]'", markup=False, soft_wrap=True)
        raise typer.Exit(2) from None
    try:
        collector = LabCollector(lab_dir, probes=probes, timeout_s=timeout)
        preflight()
    except LabError as err:
        err_console.print(f"error: monitor lab: {err}", markup=False, soft_wrap=True)
        raise typer.Exit(2) from None
    try:
        if once:
            from aifabric.telemetry.exporter import scrape_text

            typer.echo(scrape_text(collector), nl=False)
            return
        if not is_loopback(host):
            err_console.print(f"warning: --listen {listen} is not a loopback address: "
                              "whoever reaches it can read the lab's metrics", markup=False,
                              soft_wrap=True)
        server = serve(collector, host, port)
        lab = collector.lab
        port = getattr(server, "server_port", port)  # the one chosen for port 0
        url = f"http://{f'[{host}]' if ':' in host else host}:{port}/metrics"
        console.print(f"monitor lab: serving {url} for {lab.fabric.name} in {lab.dir} "
                      f"({len(lab.layout.switches)} switches, {len(lab.layout.hosts)} hosts, "
                      f"{len(collector.probes)} probes); Ctrl-C stops", markup=False,
                      soft_wrap=True)
        console.file.flush()
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        while not stop.wait(3600):
            pass
        server.shutdown()
        server.server_close()
        console.print("monitor lab: stopped", markup=False)
    finally:
        collector.close()
