"""Leaf/spine arithmetic shared by the 2- and 3-tier families (clos, rail, single_tor,
multiplane, fat_tree)."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from aifabric.errors import SpecError
from aifabric.spec.models import Spec, SwitchRole
from aifabric.topology.fabric import LinkKind, NodeKind
from aifabric.topology.parts import (
    FabricBuilder,
    PortPlan,
    divisor_at_least,
    port_plan,
    resolve_model,
)

__all__ = ["access_plan", "leaf_plan", "middle_plan", "reject_unused", "spine_layer"]


def leaf_plan(spec: Spec, role: SwitchRole, path: str, *, oversubscription: float,
              down_gbps: int, top: bool = False) -> PortPlan:
    """Split a leaf's (or agg's) ports into down and up for the given oversubscription.

    Explicit ``down_ports``/``up_ports`` win; otherwise the physical ports are split so
    that down bandwidth / up bandwidth is as close to ``oversubscription`` as possible
    without exceeding it. ``top=True``: no uplinks (the top tier).
    """
    model = resolve_model(spec, role, path)
    if top:
        return port_plan(spec, role, path, n_down=role.down_ports, n_up=0, down_gbps=down_gbps)
    dg = role.down_gbps or down_gbps
    ug = role.up_gbps or model.port_gbps
    if role.down_ports is not None and role.up_ports is not None:
        return port_plan(spec, role, path, n_down=role.down_ports, n_up=role.up_ports,
                         down_gbps=dg, up_gbps=ug)
    probe = port_plan(spec, role, path, n_down=0, n_up=0, down_gbps=dg, up_gbps=ug)
    db, ub, k = probe.down_breakout, probe.up_breakout, model.ports
    if role.up_ports is not None:
        return port_plan(spec, role, path, n_down=None, n_up=role.up_ports, down_gbps=dg,
                         up_gbps=ug)
    if role.down_ports is not None:
        phys_up = k - -(-role.down_ports // db)
        return port_plan(spec, role, path, n_down=role.down_ports, n_up=max(0, phys_up) * ub,
                         down_gbps=dg, up_gbps=ug)
    # physical down ports x, up ports k - x: x * port_gbps <= r * (k - x) * port_gbps
    r = oversubscription
    x = math.floor(k * r / (1 + r) + 1e-9)
    x = max(1, min(x, k - 1))
    return port_plan(spec, role, path, n_down=x * db, n_up=(k - x) * ub, down_gbps=dg,
                     up_gbps=ug)


def reject_unused(role: SwitchRole, path: str, why: str, *fields: str,
                  explicit: bool = True) -> None:
    """Refuse role fields that the family would not use (a field given must take effect).

    ``up_ports`` of 0 is accepted (it says what the family does anyway).
    """
    if not explicit:
        return
    for name in fields:
        value = getattr(role, name)
        if value is None or (name == "up_ports" and value == 0):
            continue
        raise SpecError.at(f"{path}.{name}", f"is not used here: {why}; allowed: leave it unset")


def _fmt_ratio(r: float) -> str:
    return f"{r:g}:1"


def _ratio_floor(need_bw: float, free_phys: int, ub: int, ug: int) -> str:
    """The lowest oversubscription whose uplinks fit ``free_phys`` physical ports."""
    if free_phys <= 0:
        return "no physical port is left for uplinks"
    r_min = math.ceil(need_bw / (free_phys * ub * ug) * 1000 - 1e-6) / 1000
    return f"at least {_fmt_ratio(r_min)}"


def _check_hosts_fit(n: int, bk: int, pph: int, n_down: int, path: str,
                     hosts_per_leaf: int | None, hosts_path: str) -> None:
    if n >= 1 and (n + bk) * pph <= n_down:
        return
    if hosts_per_leaf is not None:
        raise SpecError.at(hosts_path, f"{hosts_per_leaf} hosts (+{bk} backups) need "
                           f"{(hosts_per_leaf + bk) * pph} leaf down ports; {path}.down_ports "
                           f"is {n_down}")
    raise SpecError.at(f"{path}.down_ports", f"{n_down} down ports cannot hold one host "
                       f"({pph} ports) plus {bk} backups per segment")


def access_plan(spec: Spec, role: SwitchRole, path: str, *, ratio: float | None,
                ratio_path: str, ports_per_host: int, hosts: int, down_gbps: int,
                hosts_per_leaf: int | None = None, hosts_path: str = ""
                ) -> tuple[PortPlan, int]:
    """The port plan of a leaf (ToR) and the active hosts it holds.

    ``ratio`` (the spec's ``oversubscription``; None when unset) is active down bandwidth
    over up bandwidth, applied to the links a leaf really has: a leaf with ``n`` active
    hosts gets the fewest uplinks that keep ``n * ports_per_host * down_gbps / (up *
    up_gbps) <= ratio``. Without fixed ports the leaf holds the most hosts (at most
    ``hosts``) for which that fits the switch. Given ports (``up_ports``, or
    ``down_ports``/``hosts_per_leaf`` with the ratio unset) keep their meaning: the
    ports not given all go up (or down). An explicit ratio with ``up_ports`` is a conflict.
    """
    model = resolve_model(spec, role, path)
    bk = spec.hosts.backup_per_segment
    pph = ports_per_host
    dg = role.down_gbps or down_gbps
    ug = role.up_gbps or model.port_gbps
    probe = port_plan(spec, role, path, n_down=0, n_up=0, down_gbps=dg, up_gbps=ug)
    db, ub, k = probe.down_breakout, probe.up_breakout, model.ports
    if role.up_ports is not None and ratio is not None:
        raise SpecError.at(ratio_path, f"{_fmt_ratio(ratio)} conflicts with {path}.up_ports "
                           f"({role.up_ports}), which fixes the ratio; allowed: one of them")
    fixed_down = role.down_ports
    if hosts_per_leaf is not None and fixed_down is None:
        fixed_down = (hosts_per_leaf + bk) * pph
    if role.up_ports is not None or (ratio is None and fixed_down is not None):
        if role.up_ports is not None:
            plan = port_plan(spec, role, path, n_down=fixed_down, n_up=role.up_ports,
                             down_gbps=dg, up_gbps=ug)
        else:
            assert fixed_down is not None
            phys_up = k - -(-fixed_down // db)
            plan = port_plan(spec, role, path, n_down=fixed_down, n_up=max(0, phys_up) * ub,
                             down_gbps=dg, up_gbps=ug)
        n = hosts_per_leaf if hosts_per_leaf is not None else plan.n_down // pph - bk
        _check_hosts_fit(n, bk, pph, plan.n_down, path, hosts_per_leaf, hosts_path)
        return plan, n
    r = 1.0 if ratio is None else ratio

    def ups(n: int) -> int:  # the fewest uplinks with n * pph * dg <= r * up * ug
        return max(1, math.ceil(n * pph * dg / (r * ug) - 1e-9))

    def phys(n_down: int, n_up: int) -> int:
        return -(-n_down // db) + -(-n_up // ub)

    if hosts_per_leaf is not None or fixed_down is not None:
        assert fixed_down is not None
        n = hosts_per_leaf if hosts_per_leaf is not None else fixed_down // pph - bk
        where = hosts_path if hosts_per_leaf is not None else f"{path}.down_ports"
        _check_hosts_fit(n, bk, pph, fixed_down, path, hosts_per_leaf, hosts_path)
        n_down = fixed_down
    else:
        n_down, n, where = 0, 0, f"{path}.model"
        for cand in range(1, max(1, hosts) + 1):
            d = (cand + bk) * pph
            if phys(d, ups(cand)) > k:
                break
            n, n_down = cand, d
        if n == 0:
            n_down = (1 + bk) * pph
            n = 1
    n_up = ups(n)
    if phys(n_down, n_up) > k:
        free = k - -(-n_down // db)
        raise SpecError.at(ratio_path, f"{_fmt_ratio(r)} needs {n_up} x {ug}G uplinks for "
                           f"{n} host(s) x {pph} x {dg}G on a leaf ({where}), but "
                           f"{role.model} has {max(0, free)} free ports; allowed: "
                           f"{_ratio_floor(n * pph * dg, free, ub, ug)}, or fewer hosts "
                           "per leaf")
    return port_plan(spec, role, path, n_down=n_down, n_up=n_up, down_gbps=dg,
                     up_gbps=ug), n


def middle_plan(spec: Spec, role: SwitchRole, path: str, *, ratio: float | None,
                ratio_path: str, lowers: int, uplinks: int, down_gbps: int
                ) -> tuple[PortPlan, int | None]:
    """Port plan and count per group of a middle tier (the aggs of a 3-tier single-ToR).

    Each of the ``lowers`` switches below sends ``uplinks`` links spread evenly over the
    group; with ``S`` switches in the group each gets ``lowers * uplinks / S`` down links.
    The ratio applies to those wired links: ``S`` is the fewest divisor of ``uplinks``
    (or ``role.count``) whose down links plus the uplinks the ratio asks for fit the switch.
    Given ports with the ratio unset keep their meaning (returns count None: derived
    later). An explicit ratio with ``up_ports`` is a conflict.
    """
    model = resolve_model(spec, role, path)
    if uplinks < 1:
        raise SpecError.at(ratio_path.rsplit(".", 1)[0], "the switches below "
                           f"{path} have no uplinks; allowed: an oversubscription, up_ports or "
                           "hosts per switch that leaves ports for uplinks")
    if role.up_ports is not None and ratio is not None:
        raise SpecError.at(ratio_path, f"{_fmt_ratio(ratio)} conflicts with {path}.up_ports "
                           f"({role.up_ports}), which fixes the ratio; allowed: one of them")
    if role.up_ports is not None or (ratio is None and role.down_ports is not None):
        return leaf_plan(spec, role, path, oversubscription=1.0, down_gbps=down_gbps), None
    r = 1.0 if ratio is None else ratio
    dg = role.down_gbps or down_gbps
    ug = role.up_gbps or model.port_gbps
    probe = port_plan(spec, role, path, n_down=0, n_up=0, down_gbps=dg, up_gbps=ug)
    db, ub, k = probe.down_breakout, probe.up_breakout, model.ports
    counts = [role.count] if role.count is not None else [
        s for s in range(1, uplinks + 1) if uplinks % s == 0]
    for S in counts:
        if uplinks % S:
            raise SpecError.at(f"{path}.count", f"{uplinks} uplinks of each switch below "
                               f"cannot spread evenly over {S} switches; allowed: a divisor "
                               f"of {uplinks}")
        d = lowers * (uplinks // S)
        if role.down_ports is not None and d > role.down_ports:
            continue
        n_up = max(1, math.ceil(d * dg / (r * ug) - 1e-9))
        n_down = role.down_ports if role.down_ports is not None else d
        if -(-n_down // db) + -(-n_up // ub) <= k:
            return port_plan(spec, role, path, n_down=n_down, n_up=n_up, down_gbps=dg,
                             up_gbps=ug), S
    S = counts[-1]
    d = lowers * (uplinks // S)
    free = k - -(-(role.down_ports or d) // db)
    raise SpecError.at(ratio_path, f"{_fmt_ratio(r)} at {path} does not fit {role.model} "
                       f"({k} ports) with {lowers} switches below x {uplinks} uplinks; "
                       f"allowed: {_ratio_floor(d * dg, free, ub, ug)}, or fewer switches "
                       "below per group")


def spine_layer(fb: FabricBuilder, spec: Spec, *, leaves: np.ndarray, leaf_group: np.ndarray,
                leaf_rank: np.ndarray, leaves_per_group: int, groups: int,
                leaf_plan_: PortPlan, role: SwitchRole, path: str, kind: NodeKind,
                names: Callable[[np.ndarray, np.ndarray], np.ndarray],
                group_attrs: dict[str, np.ndarray], up_ports: int = 0,
                capacity_hint: str = "hosts.count") -> tuple[np.ndarray, PortPlan]:
    """The switches above ``leaves``: each leaf spreads its uplinks evenly over the
    spines of its group (one group per plane and/or pod).

    The spine count per group is ``role.count`` or the fewest that divide the leaf
    uplinks and have ports for every leaf. Returns spine ids (groups, S) and their plan.
    """
    u = leaf_plan_.n_up
    if u < 1:
        raise SpecError.at(f"{path.rsplit('.', 1)[0]}", "the leaves have no uplinks; allowed: "
                           "an oversubscription or up_ports that leaves ports for uplinks")
    plan = port_plan(spec, role, path, n_down=role.down_ports, n_up=up_ports,
                     down_gbps=leaf_plan_.up_gbps)
    if plan.down_gbps != leaf_plan_.up_gbps:
        raise SpecError.at(f"{path}.down_gbps", f"must match the {leaf_plan_.up_gbps}G uplinks "
                           "below")
    if leaves_per_group > plan.n_down:
        per_leaf = max(1, leaves_per_group)
        raise SpecError.at(capacity_hint, f"needs {per_leaf} leaves under one spine group but a "
                           f"{role.model} spine has {plan.n_down} down ports; allowed: fewer "
                           "hosts, bigger switches, or a family with more tiers (fat_tree)")
    if role.count is not None:
        S = role.count
        if u % S:
            raise SpecError.at(f"{path}.count", f"{u} leaf uplinks cannot spread evenly over "
                               f"{S} switches; allowed: a divisor of {u}")
    else:
        S = divisor_at_least(u, leaves_per_group * u / plan.n_down)
        assert S is not None
    if leaves_per_group * (u // S) > plan.n_down:
        raise SpecError.at(f"{path}.count", f"{S} switches with {plan.n_down} down ports cannot "
                           f"take {leaves_per_group} leaves x {u // S} links")
    g_i, s_i = np.meshgrid(np.arange(groups), np.arange(S), indexing="ij")
    g_i, s_i = g_i.reshape(-1), s_i.reshape(-1)
    attrs = {k: v[g_i] for k, v in group_attrs.items()}
    spines = fb.add_switches(kind, plan, names(g_i, s_i), group=g_i, index=s_i,
                             **attrs).reshape(groups, S)
    tier = LinkKind.LEAF_SPINE if kind == NodeKind.AGG else LinkKind.SPINE_CORE
    fb.mesh(leaves, leaf_group, leaf_rank, spines, u, leaf_plan_, plan, tier)
    return spines, plan
