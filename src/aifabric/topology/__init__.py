"""The Fabric data model and its builders (one per topology family)."""

from aifabric.topology.builders import BUILDERS, build_fabric, register
from aifabric.topology.fabric import Fabric, LinkKind, LinkTable, Medium, NodeKind, NodeTable

__all__ = [
    "BUILDERS",
    "Fabric",
    "LinkKind",
    "LinkTable",
    "Medium",
    "NodeKind",
    "NodeTable",
    "build_fabric",
    "register",
]
