"""Vectorised building blocks shared by the family builders.

A builder decides *who connects to whom*; these helpers turn that decision into node
and link arrays without a Python loop over links: hosts with their GPUs and NIC ports,
switch port plans (breakout, SONiC lane names), access wiring, full-mesh tiers and the
core-group layer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from aifabric.errors import SpecError
from aifabric.spec.models import Spec, SwitchModel, SwitchRole
from aifabric.topology.domain import domain_gbps
from aifabric.topology.fabric import Fabric, LinkKind, LinkTable, Medium, NodeKind, NodeTable

__all__ = [
    "FabricBuilder",
    "HostIds",
    "PortPlan",
    "divisor_at_least",
    "fmt",
    "port_plan",
]

_TIER = {NodeKind.GPU: 0, NodeKind.HOST: 0, NodeKind.NIC: 0,
         NodeKind.TOR: 1, NodeKind.AGG: 2, NodeKind.CORE: 3}


def fmt(*parts: str | np.ndarray | tuple[np.ndarray, int]) -> np.ndarray:
    """Vectorised string formatting: ``fmt("tor-s", (seg, 2), "-r", rail)``.

    A ``(ints, width)`` tuple is zero-padded to ``width`` digits.
    """
    out: np.ndarray | str = ""
    for part in parts:
        if isinstance(part, tuple):
            ints, width = part
            s = np.strings.zfill(np.asarray(ints).astype(np.str_), width)
        elif isinstance(part, np.ndarray):
            s = part.astype(np.str_)
        else:
            s = part
        out = np.strings.add(out, s)
    return np.asarray(out)


def divisor_at_least(n: int, x: float) -> int | None:
    """The smallest divisor of ``n`` that is >= ``x`` (None if ``x > n``)."""
    for d in range(max(1, math.ceil(x - 1e-9)), n + 1):
        if n % d == 0:
            return d
    return None


@dataclass(frozen=True)
class PortPlan:
    """How one switch role spends its physical ports: downs first, then ups.

    Logical port ``i`` at ``gbps`` uses ``breakout = model.port_gbps / gbps`` lanes
    groups of one physical port; its SONiC name is ``Ethernet<lane>``.
    """

    model_name: str
    model: SwitchModel
    down_gbps: int
    n_down: int
    down_breakout: int
    up_gbps: int
    n_up: int
    up_breakout: int

    @property
    def phys_down(self) -> int:
        return -(-self.n_down // self.down_breakout)

    @property
    def phys_up(self) -> int:
        return -(-self.n_up // self.up_breakout)

    def down_lane(self, i: np.ndarray) -> np.ndarray:
        lanes = self.model.lanes_per_port
        b = self.down_breakout
        return (i // b) * lanes + (i % b) * (lanes // b)

    def up_lane(self, j: np.ndarray) -> np.ndarray:
        lanes = self.model.lanes_per_port
        b = self.up_breakout
        return (self.phys_down + j // b) * lanes + (j % b) * (lanes // b)


def resolve_model(spec: Spec, role: SwitchRole, path: str) -> SwitchModel:
    model = spec.switch_model(role.model)
    if model is None:
        raise SpecError.at(f"{path}.model", f"unknown switch model {role.model!r}; "
                           f"allowed: {', '.join(spec.known_models())} or one defined "
                           "under switch_models")
    return model


def _breakout(model: SwitchModel, model_name: str, gbps: int, path: str) -> int:
    if gbps > model.port_gbps or model.port_gbps % gbps:
        speeds = sorted({model.port_gbps // b for b in model.breakouts
                         if model.port_gbps % b == 0})
        raise SpecError.at(path, f"{gbps}G does not divide the {model.port_gbps}G ports of "
                           f"{model_name}; allowed speeds: {', '.join(f'{s}G' for s in speeds)}")
    b = model.port_gbps // gbps
    if b not in model.breakouts or model.lanes_per_port % b:
        allowed = [str(x) for x in model.breakouts if model.lanes_per_port % x == 0]
        raise SpecError.at(path, f"{gbps}G needs a {b}x breakout of {model_name}'s "
                           f"{model.port_gbps}G ports; allowed breakouts: {', '.join(allowed)}")
    return b


def port_plan(spec: Spec, role: SwitchRole, path: str, *, n_down: int | None, n_up: int,
              down_gbps: int | None = None, up_gbps: int | None = None) -> PortPlan:
    """Check that ``n_down`` + ``n_up`` logical ports fit the role's switch model.

    ``n_down=None`` gives the switch every physical port left after the ups.
    """
    model = resolve_model(spec, role, path)
    dg = role.down_gbps or down_gbps or model.port_gbps
    ug = role.up_gbps or up_gbps or model.port_gbps
    db = _breakout(model, role.model, dg, f"{path}.down_gbps")
    ub = _breakout(model, role.model, ug, f"{path}.up_gbps")
    if n_down is None:
        n_down = max(0, model.ports - -(-n_up // ub)) * db
    plan = PortPlan(role.model, model, dg, n_down, db, ug, n_up, ub)
    used = plan.phys_down + plan.phys_up
    if used > model.ports:
        free_up = (model.ports - plan.phys_down) * ub
        allowed = (f"at most {free_up} up ports with {n_down} down" if free_up > 0
                   else f"at most {model.ports * db} down ports")
        raise SpecError.at(
            path, f"{n_down} x {dg}G down + {n_up} x {ug}G up need {used} physical ports; "
            f"{role.model} has {model.ports}; allowed: {allowed}")
    return plan


@dataclass(frozen=True)
class HostIds:
    """Node ids of the hosts added by :meth:`FabricBuilder.add_hosts`."""

    host: np.ndarray  # (H,)
    gpu: np.ndarray  # (H, G)
    nic: np.ndarray  # (H, N, P)

    def port_grid(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(host, NIC, port) index of every NIC port, in the order of ``nic.reshape(-1)``."""
        h, n, p = np.meshgrid(*(np.arange(d) for d in self.nic.shape), indexing="ij")
        return h.reshape(-1), n.reshape(-1), p.reshape(-1)


class FabricBuilder:
    """Accumulates node and link blocks, then concatenates them into a :class:`Fabric`."""

    def __init__(self, spec: Spec):
        self.spec = spec
        self._nodes: list[dict[str, np.ndarray]] = []
        self._links: list[dict[str, np.ndarray]] = []
        self._n = 0
        self.models: list[tuple[str, SwitchModel]] = []
        self.meta: dict[str, object] = {}

    def _model_index(self, name: str, model: SwitchModel) -> int:
        for i, (n, _) in enumerate(self.models):
            if n == name:
                return i
        self.models.append((name, model))
        return len(self.models) - 1

    # ------------------------------------------------------------------ nodes
    def add_nodes(self, kind: NodeKind, names: np.ndarray, **attrs: np.ndarray | int) -> np.ndarray:
        """Add ``len(names)`` nodes of ``kind``; returns their ids."""
        n = len(names)
        block: dict[str, np.ndarray] = {
            "kind": np.full(n, kind, dtype=np.int8),
            "name": np.asarray(names),
            "tier": np.full(n, _TIER[kind], dtype=np.int8),
        }
        defaults: dict[str, tuple[type, int]] = {
            "pod": (np.int32, -1), "segment": (np.int32, -1), "plane": (np.int32, -1),
            "rail": (np.int32, -1), "group": (np.int32, -1), "host": (np.int32, -1),
            "index": (np.int32, -1), "side": (np.int8, -1), "backup": (np.bool_, 0),
            "ip": (np.uint32, 0), "model": (np.int16, -1), "latency_ns": (np.int32, 0),
        }
        for key, (dtype, default) in defaults.items():
            value = attrs.pop(key, default)
            block[key] = np.broadcast_to(np.asarray(value, dtype=dtype), (n,)).copy()
        assert not attrs, f"unknown node attributes {sorted(attrs)}"
        ids = np.arange(self._n, self._n + n, dtype=np.int32)
        self._nodes.append(block)
        self._n += n
        return ids

    def add_switches(self, kind: NodeKind, plan: PortPlan, names: np.ndarray,
                     **attrs: np.ndarray | int) -> np.ndarray:
        m = self._model_index(plan.model_name, plan.model)
        return self.add_nodes(kind, names, model=m, latency_ns=plan.model.latency_ns, **attrs)

    def add_hosts(self, *, segment: np.ndarray, pod: np.ndarray, backup: np.ndarray,
                  names: np.ndarray, plane_of_port: np.ndarray | None = None) -> HostIds:
        """Hosts with their GPUs, NIC ports, scale-up and PCIe links.

        ``plane_of_port`` (N, P) gives the plane of each NIC port (default -1).
        """
        h = self.spec.hosts
        H, G, N, P = len(names), h.gpus_per_host, h.nics_per_host, h.ports_per_nic
        hidx = np.arange(H, dtype=np.int32)
        host = self.add_nodes(NodeKind.HOST, names, pod=pod, segment=segment, host=hidx,
                              backup=backup)
        # GPUs: host-major, GPU g uses NIC g * N // G (its rail)
        gh = np.repeat(hidx, G)
        gl = np.tile(np.arange(G, dtype=np.int32), H)
        grail = gl * N // G
        gpu = self.add_nodes(NodeKind.GPU, fmt(names[gh], "-gpu", gl), pod=pod[gh],
                             segment=segment[gh], rail=grail, host=gh, index=gl,
                             backup=backup[gh]).reshape(H, G)
        # NIC ports: host-major, then NIC, then port
        nh = np.repeat(hidx, N * P)
        ni = np.tile(np.repeat(np.arange(N, dtype=np.int32), P), H)
        npp = np.tile(np.arange(P, dtype=np.int32), H * N)
        suffix = (np.array(list("abcdefgh"))[npp] if 1 < P <= 8 else
                  (fmt("p", npp) if P > 8 else np.full(len(nh), "", dtype="<U1")))
        nic_no = nh.astype(np.int64) * N + ni  # one /32 per NIC, shared by its ports
        pool = self.spec.addressing.nic_pool
        if pool.num_addresses - 2 < H * N:
            raise SpecError.at("addressing.nic_pool", f"{pool} holds {pool.num_addresses - 2} "
                               f"addresses; {H * N} NICs need a larger pool")
        ip = (int(pool.network_address) + 1 + nic_no).astype(np.uint32)
        plane = -1 if plane_of_port is None else np.tile(plane_of_port.reshape(-1), H)
        nic = self.add_nodes(NodeKind.NIC, fmt(names[nh], "-nic", ni, suffix), pod=pod[nh],
                             segment=segment[nh], rail=ni, host=nh, index=ni, side=npp,
                             backup=backup[nh], ip=ip, plane=plane).reshape(H, N, P)
        lat = self.spec.latency
        # scale-up: the domain's bandwidth per GPU when the spec has one
        su_gbps = domain_gbps(self.spec)
        if h.scaleup == "nvswitch" or G == 1:
            self.add_links(gpu.reshape(-1), np.repeat(host, G), LinkKind.SCALEUP,
                           su_gbps, lat.scaleup_ns, Medium.INTERNAL)
        else:
            iu, ju = np.triu_indices(G, k=1)
            a = gpu[:, iu].reshape(-1)
            b = gpu[:, ju].reshape(-1)
            self.add_links(a, b, LinkKind.SCALEUP, su_gbps / (G - 1), lat.scaleup_ns,
                           Medium.INTERNAL)
        # PCIe: each GPU to every port of its NIC
        ga = np.repeat(gpu.reshape(-1), P)
        nb = nic[np.repeat(gh, P), np.repeat(grail, P), np.tile(np.arange(P), H * G)]
        self.add_links(ga, nb, LinkKind.PCIE, h.pcie_gbps, lat.pcie_ns, Medium.INTERNAL,
                       b_port=np.tile(np.arange(P, dtype=np.int32), H * G))
        return HostIds(host=host, gpu=gpu, nic=nic)

    # ------------------------------------------------------------------ links
    def add_links(self, a: np.ndarray, b: np.ndarray, kind: LinkKind, gbps: float | np.ndarray,
                  latency_ns: float, medium: Medium, *, a_port: np.ndarray | int = -1,
                  b_port: np.ndarray | int = -1) -> None:
        n = len(a)
        cap = np.broadcast_to(np.asarray(gbps, dtype=np.float64), (n,))
        self._links.append({
            "a": np.asarray(a, dtype=np.int32), "b": np.asarray(b, dtype=np.int32),
            "kind": np.full(n, kind, dtype=np.int8),
            "capacity_gbps": np.repeat(cap[:, None], 2, axis=1),
            "latency_ns": np.full(n, round(latency_ns), dtype=np.int32),
            "a_port": np.broadcast_to(np.asarray(a_port, dtype=np.int32), (n,)).copy(),
            "b_port": np.broadcast_to(np.asarray(b_port, dtype=np.int32), (n,)).copy(),
            "medium": np.full(n, medium, dtype=np.int8),
        })

    def cable(self, tier: LinkKind) -> tuple[float, Medium]:
        """Latency (ns) and medium of a cabled tier, from the spec."""
        lat, cab = self.spec.latency, self.spec.cabling
        metres, medium = {
            LinkKind.ACCESS: (lat.access_m, cab.access),
            LinkKind.LEAF_SPINE: (lat.leaf_spine_m, cab.leaf_spine),
            LinkKind.SPINE_CORE: (lat.spine_core_m, cab.spine_core),
        }[tier]
        return metres * lat.cable_ns_per_m, Medium[medium.upper()]

    def connect_access(self, nic: np.ndarray, tor: np.ndarray, slot: np.ndarray,
                       plan: PortPlan) -> None:
        """NIC ports ``nic`` to down-port ``slot`` of switch ``tor`` (all flat arrays)."""
        lat, medium = self.cable(LinkKind.ACCESS)
        self.add_links(nic, tor, LinkKind.ACCESS, plan.down_gbps, lat, medium,
                       a_port=self._nic_port(nic), b_port=plan.down_lane(slot))

    def _nic_port(self, nic: np.ndarray) -> np.ndarray:
        side = np.concatenate([blk["side"] for blk in self._nodes])
        return side[nic].astype(np.int32)

    def mesh(self, lower: np.ndarray, lower_group: np.ndarray, lower_rank: np.ndarray,
             upper: np.ndarray, uplinks: int, lower_plan: PortPlan, upper_plan: PortPlan,
             tier: LinkKind, *, upper_slot_base: np.ndarray | int = 0) -> None:
        """Each lower switch spreads its ``uplinks`` evenly over the uppers of its group.

        ``upper`` is (groups, U) with U dividing ``uplinks``; lower ``j`` uses
        ``uplinks // U`` parallel links to every upper of group ``lower_group[j]``, on the
        upper's down ports ``upper_slot_base + lower_rank[j] * (uplinks // U) + k``.
        """
        U = upper.shape[1]
        assert uplinks % U == 0, (uplinks, U)
        m = uplinks // U
        L = len(lower)
        t = np.tile(np.arange(uplinks, dtype=np.int64), L)
        lo = np.repeat(np.arange(L), uplinks)
        up = upper[np.asarray(lower_group)[lo], t % U]
        base = np.broadcast_to(np.asarray(upper_slot_base), (L,))[lo]
        slot = base + np.asarray(lower_rank)[lo] * m + t // U
        lat, medium = self.cable(tier)
        self.add_links(lower[lo], up, tier, lower_plan.up_gbps, lat, medium,
                       a_port=lower_plan.up_lane(t), b_port=upper_plan.down_lane(slot))

    # ------------------------------------------------------------------ build
    def build(self, name: str, family: str) -> Fabric:
        cat = {k: np.concatenate([blk[k] for blk in self._nodes]) for k in self._nodes[0]}
        nodes = NodeTable(**cat)
        lcat = {k: np.concatenate([blk[k] for blk in self._links]) for k in self._links[0]}
        a = lcat["a"]
        links = LinkTable(**lcat, pod=nodes.pod[a], segment=nodes.segment[a],
                          plane=nodes.plane[a], rail=nodes.rail[a])
        fabric = Fabric(name=name, family=family, spec=self.spec, models=list(self.models),
                        nodes=nodes, links=links, meta=dict(self.meta))
        fabric.check_consistent()
        return fabric


def core_layer(fb: FabricBuilder, aggs: np.ndarray, agg_plan: PortPlan, core_plan: PortPlan,
               *, group_plane: np.ndarray | None = None, names_prefix: str = "core") -> np.ndarray:
    """Cores over ``aggs`` shaped (pods, groups, A), the fat-tree rule "spine i of every
    pod goes to core group i" generalised so that few pods need few cores.

    Agg ``a`` of every pod goes to core group ``a // m`` with ``m = min(A, k // pods)``
    aggs per pod per group (k = core down ports); a group has ``C`` cores, the fewest
    that divide the agg uplinks ``u`` and have ports for all of them, and every agg sends
    ``u / C`` links to each core of its group. All k pods of a k-ary fat-tree give
    ``m = 1``, ``C = k/2``: the textbook (k/2)^2 cores.

    Returns core ids shaped (groups, core_groups, C).
    """
    pods, groups, A = aggs.shape
    if core_plan.down_gbps != agg_plan.up_gbps:
        raise SpecError.at("topology.core.down_gbps", f"{core_plan.down_gbps}G does not match "
                           f"the {agg_plan.up_gbps}G uplinks below; allowed: "
                           f"{agg_plan.up_gbps}")
    u = agg_plan.n_up
    k = core_plan.n_down
    m = min(A, k // pods)
    if m < 1:
        raise SpecError.at("topology.core", f"{pods} pods need cores with at least "
                           f"{pods} down ports; the core has {k}")
    ncg = -(-A // m)
    C = divisor_at_least(u, pods * m * u / k)
    if C is None:
        raise SpecError.at("topology.core", f"{pods} pods x {m} aggs x {u} uplinks do not fit "
                           f"cores with {k} down ports")
    g_idx, cg_idx, c_idx = (x.reshape(-1) for x in np.meshgrid(
        np.arange(groups), np.arange(ncg), np.arange(C), indexing="ij"))
    names = fmt(f"{names_prefix}-g", g_idx, "-", (cg_idx, 2), "-c", (c_idx, 2))
    gp = np.arange(groups) if group_plane is None else np.asarray(group_plane)
    cores = fb.add_switches(NodeKind.CORE, core_plan, names, group=g_idx, plane=gp[g_idx],
                            index=cg_idx * C + c_idx).reshape(groups, ncg, C)
    p_i, g_i, a_i = np.meshgrid(np.arange(pods), np.arange(groups), np.arange(A), indexing="ij")
    cgroup = (g_i * ncg + a_i // m).reshape(-1)
    rank = (p_i * m + a_i % m).reshape(-1)
    fb.mesh(aggs.reshape(-1), cgroup, rank, cores.reshape(groups * ncg, C), u, agg_plan,
            core_plan, LinkKind.SPINE_CORE)
    return cores


def active_hosts(spec: Spec, default: int | None = None) -> int:
    """The number of active hosts, from ``hosts.count`` or ``hosts.gpus``."""
    h = spec.hosts
    if h.nics_per_host > h.gpus_per_host or h.gpus_per_host % h.nics_per_host:
        raise SpecError.at("hosts.nics_per_host", f"{h.nics_per_host} NICs cannot be shared "
                           f"evenly by {h.gpus_per_host} GPUs; allowed: a divisor of "
                           f"gpus_per_host ({h.gpus_per_host})")
    if h.gpus is not None:
        if h.gpus % h.gpus_per_host:
            raise SpecError.at("hosts.gpus", f"{h.gpus} is not a multiple of gpus_per_host; "
                               f"allowed: a multiple of {h.gpus_per_host}")
        if h.count is not None and h.count * h.gpus_per_host != h.gpus:
            raise SpecError.at("hosts.gpus", f"{h.gpus} GPUs disagree with hosts.count "
                               f"{h.count} x {h.gpus_per_host}; give one of them")
        return h.gpus // h.gpus_per_host
    if h.count is not None:
        return h.count
    if default is None:
        raise SpecError.at("hosts.count", "give hosts.count or hosts.gpus")
    return default


def segment_hosts(n_active: int, per_segment: int, backup_per_segment: int
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Hosts laid out segment by segment: each segment's active hosts, then its backups.

    Returns ``(segment, slot, backup, names)`` per host; ``slot`` is the host's position
    under its ToRs (actives 0.., backups after them).
    """
    S = -(-n_active // per_segment)
    active_in = np.full(S, per_segment, dtype=np.int64)
    active_in[-1] = n_active - (S - 1) * per_segment
    per = active_in + backup_per_segment
    seg = np.repeat(np.arange(S, dtype=np.int32), per)
    start = np.repeat(np.cumsum(per) - per, per)
    slot = (np.arange(len(seg)) - start).astype(np.int32)
    backup = slot >= active_in[seg]
    local = np.where(backup, slot - active_in[seg], slot)
    width = max(3, len(str(per_segment - 1)))
    names = np.where(backup, fmt("host-s", (seg, 2), "-b", (local, 2)),
                     fmt("host-s", (seg, 2), "-h", (local, width)))
    return seg, slot, backup, names
