"""Leaf/spine arithmetic shared by the 2- and 3-tier families (clos, rail, single_tor,
multiplane, fat_tree)."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from aifabric.errors import SpecError
from aifabric.spec.models import Spec, SwitchRole
from aifabric.topology._build import (
    FabricBuilder,
    PortPlan,
    divisor_at_least,
    port_plan,
    resolve_model,
)
from aifabric.topology.fabric import LinkKind, NodeKind

__all__ = ["leaf_plan", "spine_layer"]


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
