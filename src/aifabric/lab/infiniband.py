"""The InfiniBand lab: the scaled-down fabric on a real subnet manager.

``up`` writes the scaled fabric as an ``ibsim`` net file (``ib/net``: every switch and
HCA with the twin's GUIDs and port numbers), starts ``ibsim`` on it and runs ``opensm``
against it with the spec's routing engine and LMC, both under
``LD_PRELOAD=libumad2sim.so`` as ibsim documents (``IBSIM_SOCKNAME`` names this lab's
socket, so labs do not meet). ``test`` reads every switch's forwarding table with
``ibroute`` and the LIDs OpenSM gave with ``ibnetdiscover``, computes the twin's tables
for the same LIDs (:func:`aifabric.routing.infiniband.lfts`) and compares them entry by
entry; ``ibtracert`` follows a path. ``fail`` unlinks a port or a whole switch in ibsim
(OpenSM re-sweeps) and the twin recomputes without them.

Like the RoCE lab (:mod:`aifabric.lab.core`), everything lives in one folder
(``state.json`` with the pids, ``spec.yaml``, ``ib/`` with the net file, the console
FIFO, OpenSM's cache and logs); the state is written before anything starts, and
``down`` stops the processes by pid.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from aifabric.configs.infiniband import net_file, planned_cables
from aifabric.configs.infiniband import node_name as _node
from aifabric.errors import Problem, SpecError
from aifabric.lab._system import LabError, terminate
from aifabric.lab.scale import parse_scale, scale_fabric
from aifabric.outputs import write_file
from aifabric.routing.infiniband import NO_PATH, Lfts, Subnet, lfts, subnet
from aifabric.spec import Spec, dump_spec, load_spec
from aifabric.topology import Fabric

__all__ = [
    "IbLab",
    "compare",
    "down",
    "fail",
    "is_ib_lab",
    "load",
    "net_file",
    "read_lfts",
    "read_lids",
    "test",
    "tracert",
    "up",
]

STATE = "state.json"
SPEC = "spec.yaml"
UMAD2SIM = "/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so"
INSTALL_HINT = "apt-get install -y opensm ibsim-utils infiniband-diags"
PROGRAMS = ("ibsim", "opensm", "ibroute", "ibnetdiscover", "ibtracert")
#: ibsim's table sizes (``MaxNetSwitches``; it prints them when ready): the largest lab
IBSIM_MAX_SWITCHES = 256
#: the processes this Python process started, by pid: reaped by ``teardown`` (a lab left
#: up outlives us; its processes are then stopped by pid from the state file)
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


def preflight() -> None:
    """Raise LabError unless ibsim, OpenSM and the diagnostics are installed."""
    missing = [p for p in PROGRAMS if shutil.which(p) is None]
    if not os.path.isfile(UMAD2SIM):
        missing.append("libumad2sim.so")
    if missing:
        raise LabError(f"the InfiniBand lab needs {', '.join(missing)}; install them: "
                       f"{INSTALL_HINT}")


@dataclass(eq=False)
class IbLab:
    """A running InfiniBand lab."""

    dir: Path
    state: dict[str, Any]
    fabric: Fabric
    subnet: Subnet

    @property
    def env(self) -> dict[str, str]:
        return _env(self.dir)

    @property
    def engine(self) -> str:
        return str(self.state["engine"])

    @property
    def lmc(self) -> int:
        return int(self.state["lmc"])

    def save(self) -> None:
        _write_state(self.dir, self.state)


def _env(lab: Path, sn: Subnet | None = None, attach: int = 0) -> dict[str, str]:
    """The environment of a program on the lab's simulated fabric: preloaded umad2sim,
    this lab's ibsim socket, attached at switch ``attach`` (its subnet)."""
    env = dict(os.environ)
    if sn is not None:
        env["SIM_HOST"] = _node(sn.sw_name(attach))
    env["LD_PRELOAD"] = UMAD2SIM
    env["IBSIM_SOCKNAME"] = _sockname(lab)
    env["OSM_CACHE_DIR"] = str(lab / "ib" / "cache")
    env["OSM_TMP_DIR"] = str(lab / "ib" / "cache")
    return env


def _sockname(lab: Path) -> str:
    import hashlib

    return "aifabric-" + hashlib.sha256(str(lab).encode()).hexdigest()[:12]


def _write_state(lab: Path, state: dict[str, Any]) -> None:
    tmp = lab / (STATE + ".tmp")
    tmp.write_text(json.dumps(state, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, lab / STATE)


def is_ib_lab(lab: Path) -> bool:
    path = Path(lab) / STATE
    try:
        return json.loads(path.read_text()).get("kind") == "infiniband"
    except (OSError, ValueError, AttributeError):
        return False


def _fabric(spec: Spec, scale_text: str) -> tuple[Fabric, Subnet]:
    from aifabric.routing.infiniband import check_infiniband

    fab = scale_fabric(spec, parse_scale(scale_text), limit=IBSIM_MAX_SWITCHES)
    check_infiniband(fab)
    return fab, subnet(fab)


def up(spec_file: Path, scale_text: str = "small", lab: Path | None = None,
       progress: Any = None, timeout_s: float = 60.0) -> IbLab:
    """Start ibsim with the scaled fabric and OpenSM on it; wait for the subnet to come
    up (OpenSM's "SUBNET UP"). Bad input stops before anything is made (SpecError)."""
    from aifabric.lab.core import default_dir

    lab = Path(lab or default_dir()).absolute()
    spec = load_spec(spec_file)
    if spec.transport != "infiniband":
        raise SpecError(Problem("transport", "the InfiniBand lab needs transport: "
                                "infiniband", str(spec_file)))
    fab, sn = _fabric(spec, scale_text)
    preflight()
    if (lab / STATE).is_file():
        raise LabError(f"a lab is already up in {lab}; take it down first "
                       "(`aifabric lab down`) or use another --dir")
    step = progress or (lambda _msg: None)
    try:
        (lab / "ib" / "cache").mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SpecError(Problem("--dir", f"cannot write {lab}: {exc.strerror or exc}; "
                                "allowed: a folder you can write to")) from None
    write_file(lab / SPEC, dump_spec(spec), option="--dir")
    ib = spec.infiniband
    state: dict[str, Any] = {
        "version": 1, "kind": "infiniband", "spec_file": str(Path(spec_file).absolute()),
        "spec_name": spec.name, "scale": scale_text, "fabric": fab.name,
        "engine": ib.routing_engine, "lmc": ib.lmc, "switches": int(sn.n_switches),
        "hca_ports": int(sn.n_ca_ports), "phase": "building", "failures": [],
        "pids": {}, "started": time.time(), "sweeps": 0,
    }
    _write_state(lab, state)
    try:
        (lab / "ib" / "net").write_text(net_file(sn) + "\n", encoding="utf-8")
        console = lab / "ib" / "console"
        if console.exists():
            console.unlink()
        os.mkfifo(console)
        step(f"starting ibsim with {sn.n_switches} switches and {len(sn.hca_guid)} HCAs")
        env = _env(lab)
        sim_env = {k: v for k, v in env.items() if k != "LD_PRELOAD"}
        fifo = os.open(console, os.O_RDWR)  # read and write: never an end of file
        with open(lab / "ib" / "ibsim.log", "wb") as log:
            sim = subprocess.Popen(["ibsim", "-s", str(lab / "ib" / "net")], stdin=fifo,
                                   stdout=log, stderr=subprocess.STDOUT, env=sim_env,
                                   start_new_session=True, cwd=lab / "ib")
        os.close(fifo)
        _CHILDREN[sim.pid] = sim
        state["pids"]["ibsim"] = sim.pid
        _write_state(lab, state)
        _wait(lambda: "Network simulator ready" in _read(lab / "ib" / "ibsim.log"),
              10.0, "ibsim did not start", lab / "ib" / "ibsim.log")
        subnets = _subnets(sn)
        step(f"starting opensm on {len(subnets)} subnet(s) (routing engine "
             f"{ib.routing_engine}, LMC {ib.lmc})")
        for k, members in enumerate(subnets):
            state["pids"][f"opensm-{k}"] = _start_opensm(
                lab, _env(lab, sn, int(members[0])), k, int(sn.sw_guid[members[0]]), spec,
                sn)
            _write_state(lab, state)
        for k in range(len(subnets)):
            _wait_sweep(lab, k, 1, timeout_s)
        state["subnets"] = len(subnets)
        state["sweeps"] = [_sweeps(lab, k) for k in range(len(subnets))]
        state["phase"] = "up"
        _write_state(lab, state)
    except BaseException:
        teardown(lab)
        raise
    return IbLab(lab, state, fab, sn)


def _subnets(sn: Subnet) -> list[np.ndarray]:
    """The switches of each subnet (a dual-plane fabric has one per plane: an HCA port
    joins one, HCAs do not forward), each run by its own OpenSM."""
    return [np.flatnonzero(sn.component == k) for k in np.unique(sn.component)]


def _start_opensm(lab: Path, env: dict[str, str], k: int, guid: int, spec: Spec,
                  sn: Subnet | None = None) -> int:
    """OpenSM on subnet ``k`` with the build's opensm.conf and partitions.conf (OpenSM
    guesses the up/down roots itself, as the twin does), sweeping every second."""
    from aifabric.configs.infiniband import opensm_conf, partitions_conf

    ib_dir = lab / "ib"
    (ib_dir / "partitions.conf").write_text(partitions_conf(spec, sn),
                                              encoding="utf-8")
    conf = ib_dir / f"opensm-{k}.conf"
    conf.write_text(opensm_conf(spec, root_file=False, sm_dir=str(ib_dir))
                    + "sweep_interval 1\nlog_flags 0x03\nforce_log_flush TRUE\n",
                    encoding="utf-8")
    with open(lab / "ib" / f"opensm-{k}.out", "wb") as out:
        proc = subprocess.Popen(["opensm", "-F", str(conf), "-g", f"0x{guid:x}", "-f",
                                 str(lab / "ib" / f"opensm-{k}.log"), "-s", "1"],
                                stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, env=env, start_new_session=True,
                                cwd=ib_dir)  # umad2sim writes its sysfs copy here
    _CHILDREN[proc.pid] = proc
    return proc.pid


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def _wait(ok: Any, timeout_s: float, what: str, log: Path) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if ok():
            return
        time.sleep(0.1)
    tail = _read(log).strip().splitlines()[-1:] or ["(empty log)"]
    raise LabError(f"{what} in {timeout_s:.0f} s: {tail[0]}")


def _sweeps(lab: Path, k: int) -> int:
    """How many times subnet ``k``'s OpenSM has brought it up (heavy sweeps that ended)."""
    return _read(lab / "ib" / f"opensm-{k}.log").count("SUBNET UP")


def _wait_sweep(lab: Path, k: int, count: int, timeout_s: float) -> None:
    _wait(lambda: _sweeps(lab, k) >= count, timeout_s,
          "OpenSM did not bring the subnet up", lab / "ib" / f"opensm-{k}.log")


def load(lab: Path | None = None) -> IbLab:
    from aifabric.lab.core import default_dir

    lab = Path(lab or default_dir()).absolute()
    try:
        state = json.loads((lab / STATE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise LabError(f"no lab is up in {lab} (start one with `aifabric lab up SPEC`)"
                       ) from None
    spec = load_spec(lab / SPEC)
    fab, sn = _fabric(spec, str(state["scale"]))
    return IbLab(lab, state, fab, sn)


def _alive(pid: int, lab: Path) -> bool:
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    ours = _sockname(lab).encode() in environ
    return ours and stat.rsplit(")", 1)[1].split()[0] != "Z"


def teardown(lab: Path) -> dict[str, int]:
    """Stop this lab's ibsim and OpenSM (by pid) and remove what it wrote."""
    lab = Path(lab).absolute()
    pids: list[int] = []
    with contextlib.suppress(OSError, ValueError):
        pids = [int(p) for p in json.loads((lab / STATE).read_text()).get("pids", {}
                                                                          ).values()]
    mine = [p for p in pids if _alive(p, lab)]
    terminate(mine, 5.0, alive=lambda p: _alive(p, lab))
    for p in pids:  # reap the ones this process started
        child = _CHILDREN.pop(p, None)
        if child is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(timeout=5)
    shutil.rmtree(lab / "ib", ignore_errors=True)
    for name in (SPEC, STATE + ".tmp", STATE):
        (lab / name).unlink(missing_ok=True)
    if lab.is_dir() and not any(lab.iterdir()):
        lab.rmdir()
    return {"processes": len(mine)}


def down(lab: Path | None = None) -> dict[str, int]:
    from aifabric.lab.core import default_dir

    lab = Path(lab or default_dir()).absolute()
    if not (lab / STATE).is_file():
        raise LabError(f"no lab is up in {lab}")
    return teardown(lab)


# --------------------------------------------------------------------- reading

_SW = re.compile(r'^Switch\s+\d+\s+"S-([0-9a-f]+)".*\bbase port 0 lid (\d+) lmc (\d+)')
_CA_PORT = re.compile(r'^\[(\d+)\]\(([0-9a-f]+)\)\s+"[SH]-[0-9a-f]+"\[\d+\].*#\s*lid (\d+) '
                      r'lmc (\d+)')


def _diag(lab: IbLab, cmd: list[str], attach: int = 0, timeout: float = 60) -> str:
    """Run a diagnostic (infiniband-diags) on the subnet of switch ``attach``."""
    env = _env(lab.dir, lab.subnet, attach)
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout,
                          check=False, cwd=lab.dir / "ib")  # umad2sim's sysfs copy: here
    if proc.returncode != 0:
        err = (proc.stderr or proc.stdout).strip().splitlines()
        raise LabError(f"`{' '.join(cmd)}` failed: {err[-1] if err else proc.returncode}")
    return proc.stdout


def read_lids(lab: IbLab) -> tuple[np.ndarray, np.ndarray, str]:
    """The base LIDs OpenSM gave, read with ``ibnetdiscover``: per twin switch and per
    HCA port (0: not seen), and the raw output."""
    sn = lab.subnet
    text = "\n".join(_diag(lab, ["ibnetdiscover"], int(m[0])) for m in _subnets(sn))
    sw_index = {int(g): s for s, g in enumerate(sn.sw_guid)}
    ca_index = {int(g): c for c, g in enumerate(sn.ca_guid)}
    sw_lid = np.zeros(sn.n_switches, dtype=np.int64)
    ca_lid = np.zeros(sn.n_ca_ports, dtype=np.int64)
    for line in text.splitlines():
        m = _SW.match(line)
        if m and int(m.group(1), 16) in sw_index:
            sw_lid[sw_index[int(m.group(1), 16)]] = int(m.group(2))
            continue
        m = _CA_PORT.match(line)
        if m and int(m.group(2), 16) in ca_index:
            ca_lid[ca_index[int(m.group(2), 16)]] = int(m.group(3))
    return sw_lid, ca_lid, text


_ROUTE = re.compile(r"^0x([0-9a-f]+)\s+(\d+)\b")


def read_lfts(lab: IbLab, sw_lid: np.ndarray) -> np.ndarray:
    """Every switch's unicast LFT, read with ``ibroute``: ``(S, max LID + 1)`` uint8,
    255 where the table has no valid entry."""
    sn = lab.subnet
    top = int(sw_lid.max(initial=0))
    tables = []
    for s in range(sn.n_switches):
        if sw_lid[s] <= 0:
            tables.append({})
            continue
        text = _diag(lab, ["ibroute", "-n", str(int(sw_lid[s]))], s)
        rows = {}
        for line in text.splitlines():
            m = _ROUTE.match(line.strip())
            if m:
                rows[int(m.group(1), 16)] = int(m.group(2))
        tables.append(rows)
        top = max(top, max(rows, default=0))
    out = np.full((sn.n_switches, top + 1), NO_PATH, dtype=np.uint8)
    for s, rows in enumerate(tables):
        for lid, port in rows.items():
            out[s, lid] = port
    return out


def tracert(lab: IbLab, src_lid: int, dst_lid: int, attach: int = 0
            ) -> list[tuple[str, int]]:
    """The switches (their GUIDs as hex) and output ports ``ibtracert`` reports from
    ``src_lid`` to ``dst_lid`` in the subnet of switch ``attach``."""
    text = _diag(lab, ["ibtracert", str(src_lid), str(dst_lid)], attach)
    # "[out] -> switch port {guid}[in]": the port left by the previous node, the node
    hops: list[tuple[str, int]] = []
    node: str | None = None
    for line in text.splitlines():
        m = re.match(r"^\[(\d+)\] -> (switch|ca) port \{0x([0-9a-f]+)\}\[(\d+)\]",
                     line.strip())
        if not m:
            continue
        if node is not None:
            hops.append((node, int(m.group(1))))
        node = m.group(3).lstrip("0") if m.group(2) == "switch" else None
    return hops


def compare(lab: IbLab) -> dict[str, Any]:
    """The lab's tables against the twin's, for the LIDs OpenSM gave and the links the
    lab has failed: destinations compared per switch, the differences (at most 20 shown)."""
    sw_lid, ca_lid, discovered = read_lids(lab)
    real = read_lfts(lab, sw_lid)
    sn, twin = twin_tables(lab, sw_lid, ca_lid)
    dests = twin.destinations()
    dests = dests[dests > 0]
    width = max(real.shape[1], twin.lft.shape[1], int(dests.max(initial=0)) + 1)
    a = np.full((sn.n_switches, width), NO_PATH, dtype=np.uint8)
    b = a.copy()
    a[:, :real.shape[1]] = real
    b[:, :twin.lft.shape[1]] = twin.lft
    seen = sw_lid > 0
    # a switch is compared on the destinations of its own subnet (LIDs are per subnet)
    own = np.zeros((sn.n_switches, len(dests)), dtype=bool)
    for members in _subnets(sn):
        mine = np.concatenate([sw_lid[members], (twin.ca_lid[np.isin(sn.ca_sw, members)]
                               [:, None] + np.arange(1 << lab.lmc)[None, :]).ravel()])
        own[np.ix_(members, np.isin(dests, mine[mine > 0]))] = True
    own &= seen[:, None]
    diff = (a[:, dests] != b[:, dests]) & own
    ss, dd = np.nonzero(diff)
    shown = [{"switch": sn.sw_name(int(s)), "lid": int(dests[d]),
              "opensm_port": int(a[s, dests[d]]), "twin_port": int(b[s, dests[d]])}
             for s, d in zip(ss[:20], dd[:20], strict=True)]
    return {"engine": lab.engine, "lmc": lab.lmc, "switches": int(seen.sum()),
            "opensm_engines": opensm_engines(lab),
            "twin_fallback": {int(k): v for k, v in
                              twin.info.get("fallback_why", {}).items()
                              if int(k) in set(sn.component[sn.ca_sw[sn.ca_sw >= 0]]
                                               .tolist())},
            "subnets": len(_subnets(sn)), "destinations": len(dests),
            "entries_compared": int(own.sum()),
            "differences": int(diff.sum()), "first_differences": shown,
            "twin": twin, "ca_lid_now": ca_lid, "discovered": discovered}


def opensm_engines(lab: IbLab) -> list[str]:
    """The engine each subnet's OpenSM last routed with (its log's "<engine> tables
    configured on all switches"): ``minhop`` where the configured engine fell back."""
    out = []
    for k in range(int(lab.state.get("subnets", 1))):
        used = re.findall(r"(\w+) tables configured on all switches",
                          _read(lab.dir / "ib" / f"opensm-{k}.log"))
        out.append(used[-1] if used else "")
    return out


def twin_tables(lab: IbLab, sw_lid: np.ndarray, ca_lid: np.ndarray,
                keep_existing: bool = True) -> tuple[Subnet, Lfts]:
    """The twin's tables for the lab's history: the first sweep's, then after each
    failure a re-sweep that keeps the entries still on a live least-hop port (as OpenSM
    does when it does not ignore the switches' existing tables)."""
    sn = lab.subnet
    first = lab.state.get("lids")
    if first:  # the LIDs of the first sweep: those of ports a failure cut off since
        sw_lid = np.where(np.asarray(first["sw"]) > 0, np.asarray(first["sw"]), sw_lid)
        ca_lid = np.where(np.asarray(first["ca"]) > 0, np.asarray(first["ca"]), ca_lid)
    twin = lfts(sn, lab.engine, lmc=lab.lmc, sw_lid=sw_lid, ca_lid=ca_lid)
    lost: list[int] = []
    for f in lab.state.get("failures", []):
        lost += [int(x) for x in f["links"]]
        sn = lab.subnet.without(np.asarray(lost, dtype=np.int64))
        twin = lfts(sn, lab.engine, lmc=lab.lmc, sw_lid=sw_lid, ca_lid=ca_lid,
                    existing=twin.lft if keep_existing else None)
    return sn, twin


def _failed_subnet(lab: IbLab) -> Subnet:
    down_links = [int(x) for f in lab.state.get("failures", []) for x in f["links"]]
    return lab.subnet.without(np.asarray(down_links, dtype=np.int64)) if down_links \
        else lab.subnet


def test(lab: IbLab) -> dict[str, Any]:
    """Compare the tables (:func:`compare`) and follow one path per HCA pair sample with
    ``ibtracert`` against the twin's table walk; the report (without the tables)."""
    from aifabric.configs.infiniband import SIMULATED_SPEED, check_discovered
    from aifabric.routing.infiniband import trace

    out = compare(lab)
    twin: Lfts = out.pop("twin")
    lid_now = out.pop("ca_lid_now")
    sn = lab.subnet
    paths = bad = 0
    now = _failed_subnet(lab)
    # the pre-flight check on the live ibnetdiscover: every planned cable still up is
    # there and no other; ibsim's speeds are its own (every link 4xSDR), not checked
    # (ibnetdiscover walks from each subnet's SM switch: switches a failure cut off
    # from it are not seen, nor are their cables)
    seen = set(now.component[[int(m[0]) for m in _subnets(sn)]].tolist())
    lost = {_node(sn.sw_name(s)) for s in range(sn.n_switches)
            if int(now.component[s]) not in seen}
    want = {c for c in planned_cables(now) if c[0] not in lost and c[2] not in lost}
    dev = [d for d in check_discovered(now, out.pop("discovered"), speeds=False)
           if not (d["found"] == "not cabled as planned" and (
               d["device"] in lost or d["expected"].rsplit(" port ", 1)[0] in lost))]
    out["cables_planned"] = len(want)
    out["cabling_deviations"] = len(dev)
    out["first_cabling_deviations"] = dev[:20]
    out["speed_check"] = SIMULATED_SPEED
    live = np.flatnonzero((lid_now > 0) & (now.ca_sw >= 0))
    for i in live[:4]:
        for j in live[-4:]:
            if i == j or sn.component[sn.ca_sw[i]] != sn.component[sn.ca_sw[j]] or \
                    now.component[now.ca_sw[i]] != now.component[now.ca_sw[j]]:
                continue
            want = [(f"{int(sn.sw_guid[s]):x}", p)
                    for s, p in trace(twin, int(i), int(twin.ca_lid[j]))]
            got = tracert(lab, int(twin.ca_lid[i]), int(twin.ca_lid[j]),
                          int(sn.ca_sw[i]))
            paths += 1
            bad += int(got != want)
    out["paths_traced"] = paths
    out["path_differences"] = bad
    return out


def fail(lab: IbLab, what: str) -> dict[str, Any]:
    """Take a switch (``SWITCH``) or one switch port's link (``SWITCH:PORT``) down in
    ibsim and wait for OpenSM's next sweep. The state records the fabric links lost."""
    sn = lab.subnet
    name, _, port_text = what.partition(":")
    names = {_node(sn.sw_name(s)): s for s in range(sn.n_switches)}
    if name not in names:
        raise SpecError(Problem("fail", f"unknown switch {name!r}; allowed: "
                                f"{', '.join(sorted(names)[:8])}..."))
    s = names[name]
    if port_text:
        if not port_text.isdigit() or not 1 <= int(port_text) <= int(sn.nports[s]):
            raise SpecError(Problem("fail", f"port {port_text!r} of {name}; allowed: "
                                    f"1..{int(sn.nports[s])}"))
        ports = [int(port_text)]
        cmd = f'Unlink "{name}"[{ports[0]}]'
    else:
        ports = list(range(1, int(sn.nports[s]) + 1))
        cmd = f'Unlink "{name}"'
    links = [int(sn.port_link[s, p]) for p in ports if sn.port_link[s, p] >= 0]
    if "lids" not in lab.state:  # before the first failure: every port has its LID
        sw_lid, ca_lid, _ = read_lids(lab)
        lab.state["lids"] = {"sw": sw_lid.tolist(), "ca": ca_lid.tolist()}
    k = int(np.searchsorted(np.unique(sn.component), sn.component[s]))
    before = _sweeps(lab.dir, k)
    with open(lab.dir / "ib" / "console", "w") as fifo:
        fifo.write(cmd + "\n")
    _wait_sweep(lab.dir, k, before + 1, 60.0)  # the SM's light sweep sees the change
    _settle(lab, k)
    lab.state.setdefault("failures", []).append({"what": what, "links": links})
    lab.state["sweeps"][k] = _sweeps(lab.dir, k)
    lab.save()
    return {"failed": what, "links": len(links), "subnet": k,
            "sweeps": lab.state["sweeps"][k]}


def _settle(lab: IbLab, k: int, quiet_s: float = 2.5, timeout_s: float = 30.0) -> None:
    """Wait until subnet ``k``'s OpenSM has swept and then stayed quiet for ``quiet_s``."""
    deadline = time.monotonic() + timeout_s
    last = _sweeps(lab.dir, k)
    since = time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.2)
        now = _sweeps(lab.dir, k)
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            return
