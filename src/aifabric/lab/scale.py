"""The scale-down rule: a small copy of a spec that keeps its structure.

The lab runs one network namespace and one FRR per switch on one machine, so it cannot
run a 15,360-GPU pod. :func:`scale_spec` turns a spec into a copy of the same family
with the same *structure* -- switch tiers, planes, rails, dual-ToR pairs, segments,
pods, core layer, switch models, routing policy, address pools -- but fewer of each:

========  ==============================================================
count     what it bounds
========  ==============================================================
hosts     active hosts per segment (a segment: a ToR pair set, a rail group, a ToR)
rails     NICs per host (each keeps the spec's ports per NIC: dual-ToR stays)
segments  segments per pod
pods      pods where the spec has several (at least 2 where one pod would drop the core tier)
uplinks   uplinks of a leaf/ToR, hence the aggs (spines) per plane or group
backup    standby hosts per segment (only where the spec has them)
========  ==============================================================

Each count is ``min(spec's own, the scale's)``, so a copy never has more of anything
than its original. ``small`` is the default of ``aifabric lab up``; ``medium`` doubles
what fits; explicit counts (``hosts=2,rails=2,segments=2,pods=2,uplinks=2``) override
one preset. A copy with more than :data:`MAX_SWITCHES` switches is refused with the
count and the scale to use.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

from aifabric.errors import Problem, SpecError
from aifabric.spec.models import (
    FatTreeTopology,
    HpnTopology,
    MultiplaneTopology,
    SingleTorTopology,
    Spec,
)
from aifabric.spec.names import NAME_MAX
from aifabric.topology import Fabric, build_fabric

__all__ = ["MAX_SWITCHES", "SCALES", "Scale", "parse_scale", "scale_fabric", "scale_spec"]

#: more switches than this do not belong on one machine (namespaces + 2-3 daemons each)
MAX_SWITCHES = 64


@dataclass(frozen=True)
class Scale:
    """Upper bounds of a scaled-down copy (see the module docstring)."""

    name: str = "custom"
    hosts: int = 2
    rails: int = 2
    segments: int = 2
    pods: int = 2
    uplinks: int = 2
    backup: int = 1

    def describe(self) -> str:
        return ",".join(f"{f.name}={getattr(self, f.name)}" for f in fields(self)
                        if f.name != "name")


#: the presets of ``--scale``
SCALES: dict[str, Scale] = {
    "small": Scale("small", hosts=2, rails=2, segments=2, pods=1, uplinks=2, backup=1),
    "medium": Scale("medium", hosts=3, rails=4, segments=2, pods=2, uplinks=2, backup=1),
}

_COUNTS = [f.name for f in fields(Scale) if f.name != "name"]


def parse_scale(text: str) -> Scale:
    """``small``, ``medium`` or ``[preset,]name=count,...`` (e.g. ``small,hosts=3``)."""
    base = SCALES["small"]
    changes: dict[str, int] = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        if "=" not in part:
            if part not in SCALES:
                raise _bad(text, f"unknown preset {part!r}")
            base = SCALES[part]
            continue
        key, _, value = part.partition("=")
        key = key.strip()
        if key not in _COUNTS:
            raise _bad(text, f"unknown count {key!r}")
        if not value.strip().isdigit() or int(value) < (0 if key == "backup" else 1):
            raise _bad(text, f"{key} must be a whole number >= {0 if key == 'backup' else 1}")
        changes[key] = int(value)
    if not changes:
        return base
    return replace(base, name="custom", **changes)


def _bad(text: str, why: str) -> SpecError:
    return SpecError.at("--scale", f"{text!r}: {why}; allowed: {', '.join(SCALES)} or "
                        f"counts {', '.join(c + '=N' for c in _COUNTS)}")


def _role(role: Any, **update: Any) -> dict[str, Any]:
    """A switch role as a dict with its port counts reset (derived again) and ``update``."""
    d = role.model_dump() if role is not None else {"model": "tomahawk5"}
    for k in ("down_ports", "up_ports", "count"):
        d[k] = None
    d.update(update)
    return d


def scale_spec(spec: Spec, scale: Scale) -> Spec:
    """The scaled-down copy of ``spec`` (same family, same structure, fewer of each).

    Rails, hosts, segments, pods and uplinks are each ``min(spec, scale)``; tiers, planes,
    ports per NIC, switch models, speeds, cabling, routing and deploy settings are kept.
    """
    h = spec.hosts
    topo = spec.topology
    N = min(h.nics_per_host, scale.rails)
    G = N * max(1, h.gpus_per_host // h.nics_per_host)
    bk = min(h.backup_per_segment, scale.backup)
    hps = scale.hosts
    up = scale.uplinks
    data = spec.model_dump(mode="json")
    data["name"] = f"{spec.name[:NAME_MAX - 4]}-lab"  # still a valid name
    hosts = data["hosts"]
    hosts.update(nics_per_host=N, gpus_per_host=G, backup_per_segment=bk, gpus=None)
    t = data["topology"]
    if isinstance(topo, HpnTopology):
        hps = min(hps, topo.hosts_per_segment)
        segs = scale.segments
        multi_pod = topo.core is not None
        pods = scale.pods if multi_pod else 1  # one HPN pod keeps its core layer
        # one pod of `segs` segments, or `pods` pods of them over the core layer
        tors_per_group = N  # dual-plane: a plane's ToRs of a segment; single-plane: a group
        t.update(hosts_per_segment=hps, segments_per_pod=segs,
                 tor=_role(topo.tor, up_ports=up),
                 agg=_role(topo.agg, down_ports=segs * tors_per_group,
                           up_ports=up if multi_pod else 0))
        t["core"] = _role(topo.core) if multi_pod else None
        hosts["count"] = hps * segs * pods
    elif isinstance(topo, FatTreeTopology):
        # k/2 leaves per pod form whole rail groups when rail-optimized: k/2 = rails
        half = max(N, 2) if topo.rail_optimized else max(2, min(hps, 2))
        k = 2 * half
        pods = max(2, min(scale.pods, k))  # a fat-tree copy has at least 2 pods
        t.update(k=k, pods=pods, switch=_role(topo.switch))
        per_pod = half * half // (N * h.ports_per_nic)
        hosts["count"] = max(1, per_pod) * pods
    elif isinstance(topo, SingleTorTopology):
        multi_pod = topo.tors_per_pod is not None
        segs = scale.segments
        pods = max(2, scale.pods) if multi_pod else 1  # one pod would drop the core tier
        ports = (hps + bk) * N * h.ports_per_nic
        t.update(hosts_per_tor=hps, tors_per_pod=segs if multi_pod else None,
                 oversubscription=None,
                 tor=_role(topo.tor, down_ports=ports, up_ports=up),
                 agg=_role(topo.agg, down_ports=segs * up if multi_pod else None,
                           up_ports=up if multi_pod else None, count=up),
                 core=_role(topo.core))
        hosts["count"] = hps * segs * pods
    elif isinstance(topo, MultiplaneTopology):
        segs = scale.segments
        t.update(leaf=_role(topo.leaf, down_ports=hps + bk, up_ports=up),
                 spine=_role(topo.spine, count=up))
        hosts["count"] = hps * segs
    else:  # clos, rail: 2-tier leaf-spine
        segs = scale.segments
        rail = getattr(topo, "rail_optimized", True)
        per_leaf = (hps + bk) * (1 if rail else N) * h.ports_per_nic
        t.update(oversubscription=None, leaf=_role(topo.leaf, down_ports=per_leaf, up_ports=up),
                 spine=_role(topo.spine, count=up))
        hosts["count"] = hps * segs
    try:
        return Spec.model_validate(data)
    except ValueError as err:  # a rule that cannot hold for this spec: say so plainly
        raise SpecError.at("--scale", f"cannot scale {spec.name!r} down with "
                           f"{scale.describe()}: {err}") from None


def scale_fabric(spec: Spec, scale: Scale, *, limit: int = MAX_SWITCHES) -> Fabric:
    """Build the scaled-down copy; refuse one with more than ``limit`` switches."""
    from aifabric.guard import check_fabric

    small = scale_spec(spec, scale)
    try:
        check_fabric(small)  # a copy too big for this machine's memory: one line, first
        fabric = build_fabric(small)
    except SpecError as err:
        raise SpecError([Problem("--scale", f"the {scale.name} copy ({scale.describe()}) of "
                                 f"{spec.name!r} cannot be built: {p}") for p in err.problems]
                        ) from None
    n = int(fabric.is_switch.sum())
    if n > limit:
        fits = [s for s in SCALES.values() if s != scale and _switches(spec, s) <= limit]
        hint = (f"use --scale {fits[0].name}" if fits else
                "use --scale with smaller counts (e.g. hosts=1,rails=1,segments=2,pods=1,"
                "uplinks=1)")
        raise SpecError.at("--scale", f"the {scale.name} copy of {spec.name!r} has {n} "
                           f"switches, more than {limit} fit one machine; {hint}")
    return fabric


def _switches(spec: Spec, scale: Scale) -> int:
    try:
        return int(build_fabric(scale_spec(spec, scale)).is_switch.sum())
    except SpecError:
        return 1 << 30
