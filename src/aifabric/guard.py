"""Size guard: predict what a fabric or a simulation needs before allocating it.

A spec that asks for 10 million GPUs, or an All-to-All on 15,360 GPUs, would otherwise
allocate gigabytes and die with a MemoryError (or be killed). The guard estimates, in
closed form from the spec fields and the family's arithmetic (the same port plans the
builders use, no arrays of fabric size), how many nodes and links the fabric will have
and how many transfer rows a scenario's collectives, jobs and traffic will make, turns
that into bytes, and refuses with one line when it is more than the limit:

* the limit is ``--max-memory`` (``8G``, ``512M``, ``1.5GiB``, ``0`` = no limit) where
  a command has one, else the environment variable ``AIFABRIC_MAX_MEMORY``, else the
  memory this machine has free (``MemAvailable`` in ``/proc/meminfo``, a cgroup's
  ``memory.max`` and the address-space limit, whichever is least) less a margin;
* bytes per node, per link and per transfer row are measured on real runs (see
  ``benchmarks/bench_guard.py --calibrate``), so the figure is the peak the run needs,
  not just the size of the final arrays.
"""

from __future__ import annotations

import os
import re
import resource
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aifabric.errors import Problem, SpecError

__all__ = ["FabricEstimate", "WorkloadEstimate", "check_classes", "check_fabric",
           "check_traffic", "class_run_bytes", "estimate_fabric", "estimate_traffic",
           "fabric_bytes", "fmt_bytes", "memory_limit", "parse_size", "refuse", "set_limit",
           "traffic_rows"]

# ------------------------------------------------------------------ the memory model
#: bytes of the non-name node columns (NodeTable: 3 x int8, bool, int16, 9 x 32-bit)
NODE_FIXED_BYTES = 42
#: bytes per link (LinkTable: a, b, capacity (2 x f64), latency, ports, pod..rail; 2 x int8)
LINK_BYTES = 54
#: numpy stores names as UCS-4: 4 bytes per character of the name column's width; the
#: width comes from the formatted pieces' dtypes (an int32 as text is 11 wide), not from
#: the names: 31-34 on every example, whatever the size
NAME_CHAR_BYTES = 4
NAME_WIDTH = 34
#: peak memory of a build / the size of the final arrays: the builder holds its blocks
#: while it concatenates them and formats names through temporaries (measured 1.9 on
#: every example spec, 2.0-2.2 with ``plan`` on top; benchmarks/bench_guard.py --calibrate)
BUILD_PEAK_FACTOR = 3.0
#: peak bytes of a simulation (or ``aifabric route``) per transfer row of the DAG (a
#: connection for route), per extra QP of a connection, and fixed, per simulator: the DAG
#: rows, connection keys and their sort, flows (one per QP), their routed arcs and the
#: simulator's own arrays. Measured (numpy allocations traced, All-to-All on the HPN pod,
#: 256/512/1,024 GPUs, benchmarks/bench_guard.py --calibrate): analytic 780/620/590 B per
#: row at 1 QP (+320 per extra QP), flow 3,190/1,680/610 (a ~150 MB fixed part; +1,030
#: per extra QP), route 530/410/390 (+370); rounded up with a margin. The packet
#: simulator is sized as the flow one (its event count is bounded separately).
ROW_BYTES = {"analytic": 700, "flow": 900, "packet": 900, "route": 600}
ROW_BYTES_PER_QP = {"analytic": 400, "flow": 1000, "packet": 1000, "route": 500}
FIXED_BYTES = {"analytic": 64 << 20, "flow": 256 << 20, "packet": 256 << 20, "route": 32 << 20}
#: the rows above were measured with single-path routing: up to this many routed arcs per
#: flow (6.65 on the HPN pod under ECMP). A fluid policy (``spray``, InfiniBand adaptive
#: routing) splits each flow over every equal-cost path: 130 arcs per flow on 256 GPUs of
#: the HPN design, 190 on 512, and the incidence, its copies and the solver's transposes
#: cost ~90 B per arc entry at the peak (traced: 718 MB for 65,280 rows, 4.47 GB for
#: 261,632); each arc past the base is sized at ENTRY_BYTES, a margin of 1.4x
BASE_ENTRIES = 8
ENTRY_BYTES = 128
#: the free memory kept back when the limit is automatic
MARGIN_FRACTION = 0.10
MARGIN_MIN = 256 << 20

_LIMIT: int | None = None  # set by --max-memory; None = automatic


def parse_size(text: str, where: str = "--max-memory") -> int:
    """A memory limit -> bytes: ``8G``, ``512M``, ``1.5GiB``, ``2e9`` (K/M/G/T without
    ``B`` are KiB..TiB: the memory grammar of :func:`aifabric.spec.units.parse_size`,
    docs/spec.md "Units"); ``0`` means no limit."""
    from aifabric.spec.units import parse_size as _parse_size  # --help stays light

    return _parse_size(str(text), where, memory=True)


def fmt_bytes(n: float) -> str:
    """Bytes for a message, in binary units (``26.2 GiB``): what ``--max-memory 26.2G``
    means."""
    for unit, div in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div:
            return f"{n / div:,.1f} {unit}"
    return f"{n:,.0f} B"


def set_limit(value: str | int | None) -> None:
    """Set the limit for this process (``--max-memory``); None: automatic again."""
    global _LIMIT
    _LIMIT = parse_size(value) if isinstance(value, str) else value


def _meminfo_available() -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def _cgroup_free() -> int | None:
    base = Path("/sys/fs/cgroup")
    try:
        mx = (base / "memory.max").read_text().strip()
        if mx == "max":
            return None
        return int(mx) - int((base / "memory.current").read_text().strip())
    except (OSError, ValueError):
        return None


def _address_space_free() -> int | None:
    soft, _hard = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY:
        return None
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmSize:"):
                    return soft - int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return soft


def memory_limit() -> tuple[int | None, str]:
    """The limit in bytes (None: none) and where it comes from, for messages."""
    if _LIMIT is not None:
        return (_LIMIT or None), "--max-memory"
    env = os.environ.get("AIFABRIC_MAX_MEMORY")
    if env:
        v = parse_size(env, "AIFABRIC_MAX_MEMORY")
        return (v or None), "AIFABRIC_MAX_MEMORY"
    free = [x for x in (_meminfo_available(), _cgroup_free(), _address_space_free())
            if x is not None]
    if not free:
        return None, "unknown"
    avail = max(0, min(free))
    return max(0, avail - max(MARGIN_MIN, int(avail * MARGIN_FRACTION))), \
        "the memory free on this machine less a margin"


def refuse(path: str, what: str, need: int, file: str | None, held: int = 0,
            note: str = "") -> None:
    """Raise when ``need`` bytes are more than the limit; ``held`` (bytes already in use,
    e.g. the fabric) counts against an explicit limit (free memory already excludes it)."""
    limit, source = memory_limit()
    if limit is not None and source in ("--max-memory", "AIFABRIC_MAX_MEMORY"):
        need += held
    if limit is None or need <= limit:
        return
    # as --max-memory reads it: 32.7G (G = GiB), no thousands separator
    suggest = fmt_bytes(need * 1.25).replace(" ", "").replace("iB", "").replace("B", "") \
        .replace(",", "").replace(".0", "")
    raise SpecError(Problem(path, f"{what} and needs about {fmt_bytes(need)}; the limit is "
                            f"{fmt_bytes(limit)} ({source}); allowed: a smaller run, or "
                            f"raise the limit with --max-memory (e.g. --max-memory "
                            f"{suggest}){note}", file))


# ------------------------------------------------------------------ fabrics
@dataclass(frozen=True)
class FabricEstimate:
    """What a spec's fabric will hold, predicted without building it."""

    hosts: int  # active + backup
    gpus: int
    nodes: int
    links: int
    switches: int
    name_chars: int  # the width of the name column (characters)
    exact_switches: bool  # False: the switch tiers could not be sized (see ``problem``)
    problem: str = ""  # why the switch tiers cannot be built as specified, if known

    @property
    def array_bytes(self) -> int:
        """Bytes of the final node and link arrays."""
        return (self.nodes * (NODE_FIXED_BYTES + NAME_CHAR_BYTES * self.name_chars)
                + self.links * LINK_BYTES)

    @property
    def peak_bytes(self) -> int:
        """Predicted peak memory of building it."""
        return int(self.array_bytes * BUILD_PEAK_FACTOR)


def _digits(n: int) -> int:
    return len(str(max(0, n)))


@dataclass
class _Tiers:
    active: int  # active hosts
    segments: int  # host segments (each gets backup_per_segment standby hosts)
    per_segment: int  # active hosts per segment (name width)
    switches: int = 0
    switch_links: int = 0
    switch_name: int = 16
    problem: str = ""


def _access(spec: Any, role: Any, path: str, ratio: float | None, pph: int, H: int,
            per_leaf: int | None) -> tuple[Any, int]:
    """The leaf port plan and active hosts per leaf, as ``wire_leaves`` finds them."""
    from aifabric.topology import tiers

    h = spec.hosts
    if hasattr(tiers, "access_plan"):
        return tiers.access_plan(spec, role, path, ratio=ratio,
                                  ratio_path="topology.oversubscription", ports_per_host=pph,
                                  hosts=H, down_gbps=h.port_gbps, hosts_per_leaf=per_leaf,
                                  hosts_path="topology.hosts_per_tor")
    bk = h.backup_per_segment
    if per_leaf is not None and role.down_ports is None:
        role = role.model_copy(update={"down_ports": (per_leaf + bk) * pph})
    plan = tiers.leaf_plan(spec, role, path, oversubscription=ratio or 1.0,
                            down_gbps=h.port_gbps)
    return plan, max(1, plan.n_down // pph - bk)


def _middle(spec: Any, role: Any, ratio: float | None, lowers: int, uplinks: int,
            down_gbps: int) -> tuple[Any, int | None]:
    """The agg port plan (and count per pod) of a multi-pod single-ToR fabric."""
    from aifabric.topology import tiers

    if hasattr(tiers, "middle_plan"):
        return tiers.middle_plan(spec, role, "topology.agg", ratio=ratio,
                                  ratio_path="topology.oversubscription", lowers=lowers,
                                  uplinks=uplinks, down_gbps=down_gbps)
    return tiers.leaf_plan(spec, role, "topology.agg", oversubscription=ratio or 1.0,
                            down_gbps=down_gbps), None


def _hosts_layout(spec: Any) -> _Tiers:
    """Segments and switch tiers of the family, from the same port plans the builder uses
    (a SpecError where the builder would raise the same one before placing hosts; a tier
    the builder would refuse later is sized anyway and named in ``problem``)."""
    issues: list[str] = []
    t = _layout(spec, issues)
    t.problem = issues[0] if issues else ""
    return t


def _layout(spec: Any, issues: list[str]) -> _Tiers:
    from aifabric.spec.models import SwitchRole
    from aifabric.topology.parts import (
        active_hosts,
        divisor_at_least,
        port_plan,
        resolve_model,
    )
    from aifabric.topology.tiers import leaf_plan

    topo, h = spec.topology, spec.hosts
    fam = topo.family
    N, P, bk = h.nics_per_host, h.ports_per_nic, h.backup_per_segment
    H = active_hosts(spec, default=None if fam != "fat_tree" else 0)

    def spine(leaves: int, u: int, role: SwitchRole, up_gbps: int, groups: int = 1,
              up_ports: int = 0) -> tuple[int, Any]:
        plan = port_plan(spec, role, "spine", n_down=role.down_ports, n_up=up_ports,
                         down_gbps=up_gbps)
        if leaves > plan.n_down:  # as spine_layer: a spine needs a port for every leaf
            issues.append(f"hosts.count: needs {leaves} leaves under one spine group but a "
                          f"{role.model} spine has {plan.n_down} down ports")
        S = role.count or divisor_at_least(u, leaves * u / max(1, plan.n_down)) or u
        return groups * S, plan

    def cores(pods: int, groups: int, A: int, u: int, k: int) -> int:
        if k < pods:  # as core_layer: a core needs a port for every pod
            issues.append(f"topology.core: {pods} pods need cores with at least {pods} down "
                          f"ports; the core has {k}")
        m = max(1, min(A, k // max(1, pods)))
        C = divisor_at_least(u, pods * m * u / max(1, k)) or u
        return groups * -(-A // m) * C

    if fam in ("clos", "rail", "single_tor"):
        rail = fam == "rail" or (fam == "clos" and topo.rail_optimized)
        role = topo.leaf if fam != "single_tor" else topo.tor
        path = "topology.leaf" if fam != "single_tor" else "topology.tor"
        ratio = topo.oversubscription
        per_tor = topo.hosts_per_tor if fam == "single_tor" else None
        plan, per_seg = _access(spec, role, path, ratio, P if rail else N * P, H, per_tor)
        S = -(-H // per_seg)
        leaves = S * N if rail else S
        u = plan.n_up
        t = _Tiers(H, S, per_seg, leaves, leaves * u)
        if fam != "single_tor":
            n, _ = spine(leaves, u, topo.spine, plan.up_gbps)
            t.switches += n
            return t
        tpp = topo.tors_per_pod or leaves
        pods = -(-leaves // tpp)
        up = 0
        agg_role = topo.agg
        if pods > 1:
            ap, count = _middle(spec, topo.agg, ratio, tpp, u, plan.up_gbps)
            update = {"down_ports": ap.n_down, **({"count": count} if count else {})}
            agg_role = topo.agg.model_copy(update=update)
            up = ap.n_up
        n, aplan = spine(min(tpp, leaves), u, agg_role, plan.up_gbps, pods, up)
        t.switches += n
        if pods > 1:
            cp = port_plan(spec, topo.core, "core", n_down=topo.core.down_ports, n_up=0,
                           down_gbps=aplan.up_gbps)
            t.switches += cores(pods, 1, n // pods, up, cp.n_down)
            t.switch_links += n * up
        return t
    if fam == "multiplane":
        plan = leaf_plan(spec, topo.leaf, "leaf", oversubscription=1.0, down_gbps=h.port_gbps)
        per_leaf = max(1, plan.n_down - bk)
        L = -(-H // per_leaf)
        planes = N * P
        t = _Tiers(H, L, per_leaf, L * planes, L * planes * plan.n_up)
        n, _ = spine(L, plan.n_up, topo.spine, plan.up_gbps, planes)
        t.switches += n
        return t
    if fam == "fat_tree":
        model = resolve_model(spec, topo.switch, "topology.switch")
        k = topo.k or model.ports
        half = max(1, k // 2)
        probe = port_plan(spec, topo.switch, "leaf", n_down=None, n_up=half,
                          down_gbps=h.port_gbps)
        n_down = half * probe.down_breakout
        rail = topo.rail_optimized
        per_seg = max(1, (n_down // P if rail else n_down // (N * P)) - bk)
        spp = max(1, half // N if rail else half)
        hpp = per_seg * spp
        if not H:
            H = active_hosts(spec, default=hpp * k)
        pods = topo.pods or -(-H // hpp)
        t = _Tiers(H, -(-H // per_seg), per_seg, 2 * pods * half, pods * half * half)
        if pods > 1:
            t.switches += cores(pods, 1, half, half, k)
            t.switch_links += pods * half * half
        return t
    if fam == "hpn":
        hps = topo.hosts_per_segment
        S = -(-H // hps)
        R = N
        tps = R  # ToRs of a segment in one agg group
        tor_up = topo.tor.up_ports if topo.tor.up_ports is not None else 60
        agg_down = topo.agg.down_ports or 120
        spp = topo.segments_per_pod or max(1, agg_down // max(1, tps))
        pods = -(-S // spp)
        tors = S * R * 2
        A = topo.agg.count or divisor_at_least(
            max(1, tor_up), min(spp, S) * tps * tor_up / agg_down) or max(1, tor_up)
        t = _Tiers(H, S, hps, tors + pods * 2 * A, tors * tor_up)
        if topo.core is not None:
            agg_up = topo.agg.up_ports if topo.agg.up_ports is not None else 8
            tp = port_plan(spec, topo.tor, "tor", n_down=topo.tor.down_ports or hps + bk,
                           n_up=max(1, tor_up), down_gbps=h.port_gbps)
            ap = port_plan(spec, topo.agg, "agg", n_down=agg_down, n_up=agg_up,
                           down_gbps=tp.up_gbps)
            cp = port_plan(spec, topo.core, "core", n_down=topo.core.down_ports, n_up=0,
                           down_gbps=ap.up_gbps)
            t.switches += cores(pods, 2, A, agg_up, cp.n_down)
            t.switch_links += pods * 2 * A * agg_up
        return t
    raise SpecError.at("topology.family", f"unknown family {fam!r}")


def estimate_fabric(spec: Any) -> FabricEstimate:
    """Nodes, links and bytes of ``spec``'s fabric, in closed form (no fabric-sized
    arrays). Host-side counts are exact; switch tiers follow the builders' port plans."""
    from aifabric.topology.parts import active_hosts

    h = spec.hosts
    G, N, P, bk = h.gpus_per_host, h.nics_per_host, h.ports_per_nic, h.backup_per_segment
    exact, problem = True, ""
    try:
        t = _hosts_layout(spec)
        problem = t.problem
    except (SpecError, ValueError, TypeError, ZeroDivisionError, AttributeError) as err:
        # the build will report the problem; size the hosts alone (they dominate)
        exact = False
        if isinstance(err, SpecError):
            problem = str(err.problems[0])
        H = active_hosts(spec, default=0) if spec.topology.family == "fat_tree" \
            else active_hosts(spec)
        t = _Tiers(H, 1, max(1, H))
    hosts = t.active + t.segments * bk
    scaleup = hosts * G if (h.scaleup == "nvswitch" or G == 1) else hosts * G * (G - 1) // 2
    links = scaleup + hosts * G * P + hosts * N * P + t.switch_links
    nodes = hosts * (1 + G + N * P) + t.switches
    host_name = 6 + max(2, _digits(t.segments - 1)) + 2 + max(3, _digits(t.per_segment - 1))
    suffix = 0 if P == 1 else (1 if P <= 8 else 1 + _digits(P - 1))
    name = max(host_name + 4 + max(_digits(N - 1), _digits(G - 1)) + suffix, t.switch_name,
               NAME_WIDTH)
    return FabricEstimate(hosts=hosts, gpus=hosts * G, nodes=nodes, links=links,
                          switches=t.switches, name_chars=name, exact_switches=exact,
                          problem=problem)


def check_fabric(spec: Any, file: str | os.PathLike[str] | None = None) -> FabricEstimate:
    """Refuse (SpecError naming --max-memory) a spec whose build would need more memory
    than the limit; the estimate otherwise."""
    est = estimate_fabric(spec)
    what = (f"this fabric would have {est.gpus:,} GPUs (backups included), {est.nodes:,} "
            f"nodes and {est.links:,} links")
    # say it now: raising the limit would only lead to this error
    note = f"; besides, it cannot be built as specified: {est.problem}" if est.problem else ""
    field = "hosts.gpus" if spec.hosts.gpus is not None else "hosts.count"
    refuse(field, what, est.peak_bytes, str(file) if file else None, note=note)
    return est


# ------------------------------------------------------------------ workloads
@dataclass(frozen=True)
class WorkloadEstimate:
    """Transfer rows a scenario will make (an upper bound) and their peak bytes."""

    rows: int
    qps: int
    sim: str
    biggest: str  # the entry with the most rows, for the message
    #: routed arcs per flow, sampled with the scenario's routing where it splits flows
    #: over many paths (None: single-path routing, within the calibration)
    arcs_per_flow: float | None = None

    @property
    def peak_bytes(self) -> int:
        """Predicted peak memory of compiling, routing and simulating the rows."""
        per_row = ROW_BYTES[self.sim] + ROW_BYTES_PER_QP[self.sim] * max(0, self.qps - 1)
        if self.arcs_per_flow is not None:
            extra = max(0.0, self.arcs_per_flow - BASE_ENTRIES)
            per_row += int(self.qps * extra * ENTRY_BYTES)
        return FIXED_BYTES[self.sim] + self.rows * per_row


def _gpu_set_size(sel: Any, n_all: int) -> int:
    if isinstance(sel, list):
        return len(sel)
    if sel == "all":
        return n_all
    m = re.fullmatch(r"\s*(-?\d*)\s*:\s*(-?\d*)\s*(?::\s*(-?\d*)\s*)?", str(sel))
    if m:
        a, b, c = (int(x) if x else None for x in m.groups())
        try:
            return len(range(n_all)[slice(a, b, c)])
        except ValueError:
            return n_all
    return n_all


def _csv_rows(file: Path) -> int:
    try:
        n = 0
        with open(file, "rb") as fh:
            while chunk := fh.read(1 << 20):
                n += chunk.count(b"\n")
        return n + 1
    except OSError:
        return 0


def traffic_rows(patterns: Iterable[Any], n_gpus: int, base_dir: Path | None = None
                 ) -> list[tuple[str, int]]:
    """(where, connections) of each traffic pattern."""
    out = []
    for i, pat in enumerate(patterns):
        kind = pat.pattern
        if kind == "all_to_all":
            n = _gpu_set_size(pat.gpus, n_gpus)
            rows = n * (n - 1)
        elif kind == "permutation":
            rows = _gpu_set_size(pat.gpus, n_gpus)
        elif kind == "ring":
            rows = _gpu_set_size(pat.gpus, n_gpus) * pat.channels
        elif kind == "incast":
            rows = _gpu_set_size(pat.senders, n_gpus)
        else:
            f = Path(pat.file)
            rows = _csv_rows(f if f.is_absolute() or base_dir is None else base_dir / f)
        out.append((f"traffic.{i}", rows))
    return out


def fabric_bytes(f: Any) -> int:
    """Bytes of a built fabric's node and link arrays."""
    from dataclasses import fields

    return sum(getattr(t, x.name).nbytes for t in (f.nodes, f.links) for x in fields(t))


def estimate_traffic(patterns: Iterable[Any], n_gpus: int, qps: int,
                     base_dir: Path | None = None) -> WorkloadEstimate:
    patterns = list(patterns)
    qps = max([qps, *(p.qps_per_connection or 1 for p in patterns)])
    entries = traffic_rows(patterns, n_gpus, base_dir)
    rows = sum(r for _, r in entries)
    biggest = max(entries, key=lambda e: e[1])[0] if entries else "traffic"
    return WorkloadEstimate(rows=rows, qps=max(1, qps), sim="route", biggest=biggest)


def check_traffic(patterns: Iterable[Any], n_gpus: int, qps: int,
                  base_dir: Path | None = None, file: str | None = None,
                  fabric_bytes: int = 0) -> WorkloadEstimate:
    """Refuse traffic (``aifabric route``) whose flows would need more than the limit."""
    est = estimate_traffic(patterns, n_gpus, qps, base_dir)
    what = f"this traffic would make about {est.rows:,} connections x {est.qps} QP(s)"
    refuse(est.biggest, what, est.peak_bytes, file, held=fabric_bytes)
    return est


# ------------------------------------------------------------------ All-to-All as classes
#: peak bytes of an All-to-All run as exact classes (:mod:`aifabric.sim.classes`): per
#: entry of a representative's path kept (one member of every transfer group; its switch
#: part is held twice, by rows and by columns, through the refinement), per arc of the
#: fabric (the per-class loads and the refinement's colours), the router's temporaries
#: (a chunk of 1M path entries at a time) and fixed. Measured (peak resident memory of
#: the whole process, benchmarks/bench_a2a_pod.py): see docs/simulate.md.
CLASS_BYTES_PER_PATH_ENTRY = 24
CLASS_BYTES_PER_ARC = 640
CLASS_FIXED_BYTES = 512 << 20


def class_run_bytes(groups: int, path_entries: int, arcs: int) -> int:
    """Predicted peak bytes of an All-to-All run as classes: ``groups`` transfer groups,
    ``path_entries`` on the longest routed path, ``arcs`` in the fabric."""
    return (groups * path_entries * CLASS_BYTES_PER_PATH_ENTRY
            + arcs * CLASS_BYTES_PER_ARC + CLASS_FIXED_BYTES)


def check_classes(path: str, groups: int, path_entries: int, arcs: int, transfers: int,
                  fabric_bytes: int = 0) -> int:
    """Refuse an All-to-All run as classes that would need more than the limit (before
    its representatives are routed); returns the bytes predicted."""
    need = class_run_bytes(groups, path_entries, arcs)
    refuse(path, f"this All-to-All as exact classes would route {groups:,} transfer groups "
           f"(standing for {transfers:,} transfers)", need, None, held=fabric_bytes)
    return need
