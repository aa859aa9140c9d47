"""``aifabric serve``: the web view of a design, a finished run or the running lab.

Loads the twin (:class:`aifabric.web.twin.Twin`), binds the listening socket itself (so
a bad or busy ``--listen`` is one line and exit 2 before anything is served, and port 0
can be printed as the port the system picked), then runs uvicorn on that socket until
Ctrl-C. Loopback only unless ``--listen`` says otherwise, and then with a warning.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from aifabric.cli._common import console, err_console

__all__ = ["serve_cmd"]

#: the Host headers a loopback server answers (others: 400, against DNS rebinding)
_LOOPBACK_HOSTS = ["127.0.0.1", "localhost", "::1", "[::1]"]


def serve_cmd(
    target: Path | None = typer.Argument(None, show_default=False, metavar="TARGET",
                                         help="a fabric spec, "
                                         "a scenario, or the --out folder of simulate or "
                                         "route; omit with --lab"),
    scenario: Path | None = typer.Option(None, "--scenario", metavar="FILE",
                                         help="the scenario of a run "
                                         "folder that has no run.json"),
    lab: bool = typer.Option(False, "--lab", help="serve the running lab, live"),
    lab_dir: Path | None = typer.Option(None, "--dir", metavar="DIR",
                                        help="lab folder (with --lab); "
                                        "default $AIFABRIC_LAB_DIR or /run/aifabric/lab"),
    listen: str = typer.Option("127.0.0.1:8050", "--listen", metavar="HOST:PORT",
                               help="where to serve; port 0 picks a free one; an address "
                               "other than loopback exposes the twin to the network"),
    open_browser: bool = typer.Option(False, "--open/--no-open", help="open the page in "
                                      "the default browser once serving"),
    max_body: str = typer.Option("1MiB", "--max-body", metavar="SIZE",
                                 help="largest request body accepted (a larger one "
                                 "answers 413 before it is parsed): a size, 1MiB, 64kB"),
) -> None:
    """Serve the twin as a web page: topology, heatmap, collective paths, what-if
    failures and the files of a run.

    TARGET is a design (a fabric spec or a scenario: its traffic is routed), a finished
    run (the `--out` folder of `simulate` or `route`), or, with `--lab`, the lab that
    `aifabric lab up` started (counters read live). The page works offline (its scripts
    ship in the package); its JSON API is described at `/openapi.json` and listed at
    `/api`. Ctrl-C stops.
    """
    from aifabric.errors import Problem, SpecError
    from aifabric.spec.units import parse_size
    from aifabric.telemetry.exporter import is_loopback, parse_listen

    host, port = _parse_listen(listen, parse_listen)
    max_body_bytes = parse_size(max_body, "--max-body")
    try:
        import fastapi  # noqa: F401  (the web extra)
        import uvicorn  # noqa: F401
    except ImportError:
        raise SpecError(Problem("serve", "needs fastapi and uvicorn; install them: pip "
                                "install 'aifabric[web]'")) from None
    if lab and target is not None:
        raise SpecError(Problem("TARGET", f"{target} given with --lab; allowed: one of "
                                "TARGET or --lab"))
    if not lab and target is None:
        raise SpecError(Problem("TARGET", "missing; allowed: a fabric spec, a scenario, a "
                                "run folder (simulate/route --out) or --lab"))
    if lab and scenario is not None:
        raise SpecError(Problem("--scenario", "not with --lab; allowed: --scenario with a "
                                "run folder"))
    if not lab and lab_dir is not None:
        raise SpecError(Problem("--dir", "only with --lab"))
    if target is not None and not target.exists():
        raise SpecError(Problem("TARGET", f"{target}: no such file or folder; allowed: a "
                                "fabric spec, a scenario or a run folder"))
    if scenario is not None and not scenario.is_file():
        raise SpecError(Problem("--scenario", f"{scenario}: no such file"))

    sock = _bind(host, port)
    try:
        twin = _open_twin(target, scenario, lab, lab_dir)
        if not is_loopback(sock.getsockname()[0]):  # what was bound (127.1 is loopback)
            err_console.print(f"warning: --listen {listen} is not a loopback address: "
                              "whoever reaches it can read the twin and its run folder",
                              markup=False, soft_wrap=True)
        try:
            _serve(twin, sock, host, open_browser, max_body_bytes)
        finally:
            twin.close()  # the lab collector's threads
    finally:
        sock.close()


def _parse_listen(text: str, parse: Any) -> tuple[str, int]:
    """``HOST:PORT`` as the exporter reads it, but port 0 (any free port) allowed."""
    from aifabric.errors import Problem, SpecError

    if text.endswith(":0"):
        try:
            host, _ = parse(text[:-2] + ":1")
        except SpecError:  # name the text as given, not the stand-in port
            raise SpecError(Problem("--listen", f"{text!r} is not HOST:PORT; allowed: an "
                                    "address and a port 0-65535 (0: any free port), e.g. "
                                    "127.0.0.1:8050")) from None
        return host, 0
    return parse(text)


def _bind(host: str, port: int) -> Any:
    """A listening socket on ``host:port``; SpecError naming ``--listen`` if this machine
    has no such address or the port is taken."""
    import socket

    from aifabric.errors import Problem, SpecError

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                   flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as exc:
        raise SpecError(Problem("--listen", f"{host!r} is not an address of this machine "
                                f"({exc}); allowed: an address such as 127.0.0.1")) from None
    family, kind, proto, _, addr = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind(addr)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        why = "is in use" if exc.errno == 98 else f"cannot be listened on ({exc.strerror or exc})"
        raise SpecError(Problem("--listen", f"{host}:{port} {why}; allowed: a free port on "
                                "an address of this machine")) from None
    sock.set_inheritable(True)
    return sock


def _open_twin(target: Path | None, scenario: Path | None, lab: bool,
               lab_dir: Path | None) -> Any:
    from aifabric.errors import Problem, SpecError
    from aifabric.web.twin import Twin

    if not lab:
        return Twin.open(target, scenario=scenario)
    from aifabric.lab import LabError, default_dir

    try:
        return Twin.open(None, lab_dir=Path(lab_dir or default_dir()))
    except LabError as err:
        raise SpecError(Problem("--lab", str(err))) from None


def _what(twin: Any) -> str:
    """``design hpn-pod``, ``run incast (incast-dcqcn)``, ``lab hpn-pod-lab``."""
    name = str(twin.name)
    return name if name.startswith(f"{twin.mode} ") else f"{twin.mode} {name}"


def _server_class() -> Any:
    import signal

    import uvicorn

    class Server(uvicorn.Server):
        """uvicorn's server, but a SIGINT/SIGTERM only stops it: uvicorn would raise the
        signal again once shut down (a KeyboardInterrupt: 'Aborted!', exit 1)."""

        def handle_exit(self, sig: int, frame: Any) -> None:
            if self.should_exit and sig == signal.SIGINT:
                self.force_exit = True  # a second Ctrl-C: do not wait for connections
            else:
                self.should_exit = True

    return Server


def _serve(twin: Any, sock: Any, host: str, open_browser: bool,
           max_body_bytes: int) -> None:
    """Run uvicorn on ``sock`` until SIGINT/SIGTERM."""
    import threading
    import time

    import uvicorn

    from aifabric.telemetry.exporter import is_loopback
    from aifabric.web.app import create_app

    bound = sock.getsockname()
    shown = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
    # a loopback server answers only Host headers naming loopback (against DNS
    # rebinding): the usual names, the address it is bound to and the host as given
    allowed = [*_LOOPBACK_HOSTS, bound[0], shown, host]
    app = create_app(twin, allowed_hosts=allowed if is_loopback(bound[0]) else None,
                     max_body_bytes=max_body_bytes)
    url = f"http://{shown}:{bound[1]}/"
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off",
                            timeout_graceful_shutdown=2, server_header=False)
    server = _server_class()(config)

    def announce() -> None:
        while not server.started and not server.should_exit:
            time.sleep(0.02)
        if server.started:
            console.print(f"serving {_what(twin)} at {url}; Ctrl-C stops", markup=False,
                          soft_wrap=True)
            console.file.flush()
            if open_browser:
                import webbrowser

                webbrowser.open(url)

    threading.Thread(target=announce, name="announce", daemon=True).start()
    server.run(sockets=[sock])
    console.print("serve: stopped", markup=False)
