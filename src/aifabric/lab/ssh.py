"""``lab up --ssh``: an sshd in every namespace, so Ansible can drive the lab like a fabric.

Each switch's and host's namespace runs its own OpenSSH ``sshd`` listening only on that
device's management address of the plan (a switch's loopback, a host's first NIC /32 --
what ``ansible/inventory.yml`` calls ``ansible_host``), with a key pair generated for the
lab (``<lab>/ssh/id_ed25519``, accepted as root; no passwords) and one host key whose
``known_hosts`` line names every device's address, so host keys are checked.

How the root namespace reaches them: without a ``management:`` section the lab has no
management network and no interface of the lab lives in the root namespace
(:mod:`aifabric.lab.netns`), so an address of the lab is not routable from it. (With one,
:mod:`aifabric.lab.mgmt` bridges the management addresses into the root namespace for
Prometheus, and the sshds listen there; the wrapper below is used either way.) The SSH
*client* is started
inside the device's namespace by a wrapper (``<lab>/ssh/<device>/ssh``: ``nsenter
--net=/run/netns/<ns> ssh "$@"``) that the lab's inventory gives Ansible as
``ansible_ssh_executable``. The connection is real SSH over TCP to the device's own
address, the sshd the device runs answers it, and nothing listens outside the lab.

Every sshd is started with ``-f <lab>/ssh/<device>/sshd_config`` (its pid file is
there) and stopped by that pid; sessions and SSH control masters left in a lab namespace
are stopped by pid too (``ip netns pids``), before the namespaces are deleted.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shlex
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from aifabric.lab._system import LabError, run, run_many, terminate

__all__ = ["SSHD", "inventory_vars", "ssh_pids", "start_sshd", "stop_sshd"]

SSHD = "/usr/sbin/sshd"
INSTALL_HINT = "apt-get install -y openssh-server"


def _dir(lab: Path) -> Path:
    return lab / "ssh"


#: the longest control-socket folder: ssh binds ``<folder>/<10 hex>.<16 random>`` while
#: it sets a master up, and a Unix socket's path holds at most 107 bytes
MAX_CONTROL_DIR = 72


def control_dir(lab: Path) -> Path:
    """Where Ansible's SSH control sockets for the lab go: ``<lab>/ssh/cp``, or, when that
    path is too long for a Unix socket (a deep lab folder), a folder of this lab under
    ``/run/aifabric`` (root's, as the lab is)."""
    d = _dir(Path(lab).absolute()) / "cp"
    if len(str(d)) <= MAX_CONTROL_DIR:
        return d
    h = hashlib.sha1(str(Path(lab).absolute()).encode()).hexdigest()[:16]
    return Path("/run/aifabric") / f"cp-{h}"


def preflight_ssh() -> None:
    """Refuse early when OpenSSH's server or client is missing."""
    if not os.access(SSHD, os.X_OK):
        raise LabError(f"--ssh needs OpenSSH's server ({SSHD} missing); install it: "
                       f"{INSTALL_HINT}")
    for tool in ("ssh", "ssh-keygen"):
        if shutil.which(tool) is None:
            raise LabError(f"--ssh needs `{tool}` (OpenSSH); install it: {INSTALL_HINT}")


def _sshd_config(d: Path, dev_dir: Path, address: str) -> str:
    return "\n".join([
        f"# aifabric lab: sshd of {dev_dir.name}, only on its management address",
        f"ListenAddress {address}:22",
        f"HostKey {d / 'host_ed25519_key'}",
        f"PidFile {dev_dir / 'sshd.pid'}",
        f"AuthorizedKeysFile {d / 'authorized_keys'}",
        "PermitRootLogin prohibit-password",
        "AllowUsers root",
        "AuthenticationMethods publickey",
        "PubkeyAuthentication yes",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "UsePAM no",
        "StrictModes no",
        "PrintMotd no",
        # no forwarding of any kind (TCP, agent, Unix sockets, X11) and no tunnels: a
        # lab device is a shell for Ansible, not a way into another namespace
        "DisableForwarding yes",
        "AllowTcpForwarding no",
        "AllowAgentForwarding no",
        "AllowStreamLocalForwarding no",
        "X11Forwarding no",
        "PermitTunnel no",
        "MaxStartups 100:30:200",
        "MaxSessions 50",
        "LogLevel ERROR",
        "Subsystem sftp internal-sftp",
        ""])


def start_sshd(lab: Path, ns: dict[str, str], address: dict[str, str],
               timeout_s: float = 20.0) -> dict[str, int]:
    """Generate the lab's keys and start one sshd per device (``ns``: device ->
    namespace, ``address``: device -> management address); returns device -> pid."""
    preflight_ssh()
    d = _dir(lab)
    d.mkdir(parents=True, exist_ok=True)
    for key in ("id_ed25519", "host_ed25519_key"):
        if not (d / key).exists():
            run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"aifabric-lab {key}",
                 "-f", str(d / key)])
    (d / "authorized_keys").write_text((d / "id_ed25519.pub").read_text(), encoding="utf-8")
    os.chmod(d / "authorized_keys", 0o600)
    host_pub = " ".join((d / "host_ed25519_key.pub").read_text().split()[:2])
    addrs = sorted(set(address.values()))
    (d / "known_hosts").write_text(f"{','.join(addrs)} {host_pub}\n", encoding="utf-8")
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation dir
    cp = control_dir(lab)  # Ansible's control sockets: only root may reach them
    cp.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    cp.mkdir(mode=0o700, exist_ok=True)
    enter = (["nsenter", "--net=/run/netns/{ns}"] if shutil.which("nsenter")
             else ["ip", "netns", "exec", "{ns}"])
    cmds = []
    for dev, n in ns.items():
        dd = d / dev
        dd.mkdir(exist_ok=True)
        (dd / "sshd_config").write_text(_sshd_config(d, dd, address[dev]), encoding="utf-8")
        wrapper = " ".join(shlex.quote(w.format(ns=n)) for w in enter)
        (dd / "ssh").write_text(
            "#!/bin/sh\n# aifabric lab: the SSH client inside the namespace of "
            f"{dev} (no management network reaches the lab)\nexec {wrapper} ssh \"$@\"\n",
            encoding="utf-8")
        os.chmod(dd / "ssh", 0o755)
        cmds.append(["ip", "netns", "exec", n, SSHD, "-f", str(dd / "sshd_config")])
    run_many(cmds)
    deadline = time.monotonic() + timeout_s
    while True:
        pids = ssh_pids(lab)
        if len(pids) == len(ns):
            return pids
        if time.monotonic() > deadline:
            missing = sorted(set(ns) - set(pids))
            raise LabError(f"sshd did not start in {timeout_s:.0f} s on "
                           f"{', '.join(missing[:3])}")
        time.sleep(0.05)


def ssh_pids(lab: Path) -> dict[str, int]:
    """device -> pid of every sshd pid file of the lab."""
    out: dict[str, int] = {}
    root = _dir(lab)
    if not root.is_dir():
        return out
    for pidfile in sorted(root.glob("*/sshd.pid")):
        with contextlib.suppress(OSError, ValueError, IndexError):
            out[pidfile.parent.name] = int(pidfile.read_text().split()[0])
    return out


def _exe(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return ""


def stop_sshd(lab: Path, namespaces: list[str], timeout_s: float = 5.0) -> int:
    """Stop the lab's sshd listeners (by pid file, only while the pid's command line
    names the lab), then any SSH session or client left inside a lab namespace (by the
    pids ``ip netns pids`` lists, only OpenSSH's programs). Returns how many."""
    mine = [p for p in ssh_pids(lab).values()
            if str(lab).encode() in _cmdline(p)]
    ssh_bins = {SSHD, shutil.which("ssh") or "/usr/bin/ssh"}
    for n in namespaces:
        out = run(["ip", "netns", "pids", n], check=False).stdout
        mine += [int(x) for x in out.split() if x.isdigit() and _exe(int(x)) in ssh_bins]
    mine = sorted(set(mine))
    terminate(mine, timeout_s)
    shutil.rmtree(control_dir(lab), ignore_errors=True)
    shutil.rmtree(_dir(lab), ignore_errors=True)
    return len(mine)


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
    except OSError:
        return b""


def inventory_vars(lab: Path, devices: list[str], switches: list[str]
                   ) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """The lab's connection settings and device paths for ``ansible/inventory.yml``:
    ``(per device, all devices)``."""
    d = _dir(lab)
    per: dict[str, dict[str, Any]] = {}
    sw = set(switches)
    for dev in devices:
        v: dict[str, Any] = {"ansible_ssh_executable": str(d / dev / "ssh"),
                             "aifabric_root": str(lab / "root" / dev)}
        if dev in sw:
            frr = lab / "frr" / dev
            v.update(aifabric_config_db=str(lab / "root" / dev / "etc/sonic/config_db.json"),
                     aifabric_frr_conf=str(frr / "frr.conf"), aifabric_frr_socket=str(frr),
                     aifabric_frr_rundir=str(frr))
        per[dev] = v
    # the interpreter itself, never a version manager's shim: 20 sessions at once each
    # running a shell profile that rehashes pyenv's shims made a shim briefly empty (an
    # empty collector output, exit 0)
    python = os.path.realpath(sys.executable)
    common = (f"-o UserKnownHostsFile={d / 'known_hosts'} -o StrictHostKeyChecking=yes "
              "-o IdentitiesOnly=yes -o BatchMode=yes -o ConnectTimeout=5")
    return per, {"ansible_user": "root", "ansible_ssh_private_key_file": str(d / "id_ed25519"),
                 "ansible_ssh_common_args": common,
                 "ansible_control_path_dir": str(control_dir(lab)),
                 "ansible_ssh_transfer_method": "piped", "ansible_python_interpreter": python,
                 "aifabric_python": python, "aifabric_sonic": False, "aifabric_gate_timeout": 30}
