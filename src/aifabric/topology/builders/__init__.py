"""Topology builders, one per family, registered by name (like Mininet's ``TOPOS``).

A builder is a pure function ``Spec -> Fabric``: it never simulates, prints or writes.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from aifabric.spec.models import Spec
from aifabric.topology.domain import resolve_domain
from aifabric.topology.fabric import Fabric, NodeKind
from aifabric.topology.frontend import plan_frontend

__all__ = ["BUILDERS", "build_fabric", "register"]

Builder = Callable[[Spec], Fabric]

#: family name -> builder
BUILDERS: dict[str, Builder] = {}


def register(family: str) -> Callable[[Builder], Builder]:
    """Register a builder under ``family`` (the value of ``topology.family``)."""

    def deco(fn: Builder) -> Builder:
        BUILDERS[family] = fn
        return fn

    return deco


def build_fabric(spec: Spec) -> Fabric:
    """Build the fabric described by ``spec`` (raises SpecError if it cannot be built)."""
    f = BUILDERS[spec.topology.family](spec)
    if spec.scheduled is not None:  # a scheduled fabric: its edge and reorder buffers
        from aifabric.topology.scheduled import check_scheduled

        check_scheduled(f)
    if spec.scaleup_domain is not None or spec.frontend is not None:
        hosts = int(np.sum(f.nodes.kind == NodeKind.HOST)
                    - np.sum(f.nodes.backup[f.nodes.kind == NodeKind.HOST]))
        resolve_domain(spec, hosts)  # refuse a domain that does not fit the hosts
        plan_frontend(spec, hosts)  # and a frontend that cannot be built
    return f


# the families register themselves on import
from aifabric.topology.builders import (  # noqa: E402, F401
    clos,
    fat_tree,
    hpn,
    multiplane,
    rail,
    single_tor,
)
