"""aifabric: a digital twin of the networks that train large AI models.

>>> from aifabric import load_spec, build_fabric, plan_fabric
>>> fabric = build_fabric(load_spec("examples/hpn-pod.yaml"))   # doctest: +SKIP
>>> plan_fabric(fabric)["gpus"]                                  # doctest: +SKIP
15360

The names below import on first use (module ``__getattr__``): ``import aifabric`` and
the command line's start-up stay free of pydantic, scipy and numba until needed.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from aifabric.errors import Problem, SpecError
    from aifabric.plan import plan_fabric
    from aifabric.spec import Spec, load_spec, spec_from_dict
    from aifabric.topology import Fabric, LinkKind, NodeKind, build_fabric

#: public name -> the module that defines it
_LAZY = {
    "Fabric": "aifabric.topology",
    "LinkKind": "aifabric.topology",
    "NodeKind": "aifabric.topology",
    "Problem": "aifabric.errors",
    "Spec": "aifabric.spec",
    "SpecError": "aifabric.errors",
    "build_fabric": "aifabric.topology",
    "load_spec": "aifabric.spec",
    "plan_fabric": "aifabric.plan",
    "spec_from_dict": "aifabric.spec",
}

__all__ = [
    "Fabric",
    "LinkKind",
    "NodeKind",
    "Problem",
    "Spec",
    "SpecError",
    "build_fabric",
    "load_spec",
    "plan_fabric",
    "spec_from_dict",
]

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'aifabric' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
