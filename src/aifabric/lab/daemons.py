"""The FRR process manager: one zebra + bgpd (+ staticd where the config has static
routes) per switch, each inside its switch's namespace.

Everything of one switch lives in ``<lab>/frr/<switch>/``: its generated ``frr.conf``,
the zserv socket zebra and the other daemons talk over, the vty sockets ``vtysh``
reaches them by, one pid file and one log per daemon. Daemons run as root in FRR's vty
group (``-u root -g frrvty``: no ``frr`` user needs to read the lab folder), with no
TCP vty port (``-P 0``), started by ``ip netns exec`` and stopped by the pid in their pid file --
never by name, so a user's own FRR is never touched. A pid is only signalled while its
``/proc/<pid>/cmdline`` still names this lab folder (a recycled pid is left alone).

``bfdd`` is not started: BFD is configured in ``frr.conf`` but a veth that goes down
loses carrier at once, which zebra reports and bgpd acts on (fast external failover),
so BFD would add nothing here.
"""

from __future__ import annotations

import os
import shutil
import signal
import time
from collections.abc import Iterable
from pathlib import Path

from aifabric.lab._system import FRR_DIR, VTY_GROUP, LabError, run, run_many, terminate

__all__ = ["DAEMONS", "alive", "daemon_pids", "start_frr", "stop_pids", "vtysh"]

DAEMONS = ("zebra", "bgpd", "staticd")


def _dir(lab: Path, switch: str) -> Path:
    return lab / "frr" / switch


def _cmd(lab: Path, ns: str, switch: str, daemon: str) -> list[str]:
    d = _dir(lab, switch)
    # its own UTS namespace named after the switch, so BGP peers see its real hostname
    uts = (["unshare", "--uts", "sh", "-c", 'hostname "$0" && exec "$@"', switch]
           if shutil.which("unshare") else [])
    cmd = ["ip", "netns", "exec", ns, *uts, os.path.join(FRR_DIR, daemon), "-d",
           "-f", str(d / "boot.conf"), "-i", str(d / f"{daemon}.pid"),
           "-z", str(d / "zserv.api"), "--vty_socket", str(d), "-u", "root", "-g", VTY_GROUP,
           "-P", "0", "--log", f"file:{d / (daemon + '.log')}"]
    if daemon == "bgpd":
        cmd += ["-l", "0.0.0.0"]
    return cmd


def start_frr(lab: Path, ns: dict[str, str], confs: dict[str, str], static: Iterable[str],
              timeout_s: float = 30.0) -> None:
    """Write every switch's ``frr.conf`` and start its daemons, all switches in parallel:
    every zebra first, then (once each zserv socket exists) bgpd and staticd, all from an
    empty boot config; then ``vtysh -f frr.conf`` applies the generated integrated config,
    the way FRR boots one (``vtysh -b``): vtysh hands every line to the daemon that owns
    it and fails on a line that none accepts."""
    static = set(static)
    for sw, text in confs.items():
        d = _dir(lab, sw)
        d.mkdir(parents=True, exist_ok=True)
        (d / "frr.conf").write_text(text, encoding="utf-8")
        (d / "boot.conf").write_text("", encoding="utf-8")
    run_many([_cmd(lab, ns[sw], sw, "zebra") for sw in confs])
    _wait_for(lab, confs, "zserv.api", timeout_s)
    cmds = [_cmd(lab, ns[sw], sw, "bgpd") for sw in confs]
    cmds += [_cmd(lab, ns[sw], sw, "staticd") for sw in confs if sw in static]
    run_many(cmds)
    _wait_for(lab, confs, "bgpd.vty", timeout_s)
    _wait_for(lab, [sw for sw in confs if sw in static], "staticd.vty", timeout_s)
    results = run_many([["vtysh", "--vty_socket", str(_dir(lab, sw)), "-f",
                         str(_dir(lab, sw) / "frr.conf")] for sw in confs], check=False)
    for sw, proc in zip(confs, results, strict=True):
        out = (proc.stdout + proc.stderr).strip()
        if proc.returncode != 0 or "% " in out:
            first = next((x for x in out.splitlines() if x.strip()), f"exit {proc.returncode}")
            raise LabError(f"FRR rejected the generated frr.conf of {sw}: {first}")


def _wait_for(lab: Path, switches: Iterable[str], name: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    waiting = set(switches)
    while waiting:
        waiting = {sw for sw in waiting if not (_dir(lab, sw) / name).exists()}
        if not waiting:
            return
        if time.monotonic() > deadline:
            raise LabError(f"FRR did not create {name} in {timeout_s:.0f} s on "
                           f"{', '.join(sorted(waiting)[:3])} (see {lab}/frr/*/*.log)")
        time.sleep(0.05)


def daemon_pids(lab: Path) -> dict[str, int]:
    """``{"<switch>/<daemon>": pid}`` of every pid file in the lab folder."""
    out: dict[str, int] = {}
    root = lab / "frr"
    if not root.is_dir():
        return out
    for pidfile in sorted(root.glob("*/*.pid")):
        try:
            out[f"{pidfile.parent.name}/{pidfile.stem}"] = int(pidfile.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue
    return out


def _ours(pid: int, lab: Path) -> bool:
    """True while ``pid`` is an FRR daemon of this lab (its command line names the lab)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
    except OSError:
        return False
    return str(lab).encode() in cmdline


def alive(pid: int, lab: Path) -> bool:
    """True if ``pid`` runs and belongs to this lab (zombies count as gone)."""
    if not _ours(pid, lab):
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def stop_pids(lab: Path, pids: Iterable[int], timeout_s: float = 5.0) -> list[int]:
    """Stop the given daemons of this lab: SIGCONT (a failed switch is frozen) and
    SIGTERM, then SIGKILL what is left after ``timeout_s``. Returns the pids that
    survived (none, normally)."""
    return terminate([p for p in set(pids) if _ours(p, lab)], timeout_s,
                     alive=lambda p: alive(p, lab), first=(signal.SIGCONT, signal.SIGTERM))


def vtysh(lab: Path, switch: str, command: str, timeout_s: float = 20) -> str:
    """Run one ``vtysh`` command against the daemons of ``switch``."""
    proc = run(["vtysh", "--vty_socket", str(_dir(lab, switch)), "-c", command],
               check=False, timeout=timeout_s)
    return proc.stdout
