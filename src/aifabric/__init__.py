"""aifabric: a digital twin of the networks that train large AI models.

>>> from aifabric import load_spec, build_fabric, plan_fabric
>>> fabric = build_fabric(load_spec("examples/hpn-pod.yaml"))   # doctest: +SKIP
>>> plan_fabric(fabric)["gpus"]                                  # doctest: +SKIP
15360
"""

from aifabric.errors import Problem, SpecError
from aifabric.plan import plan_fabric
from aifabric.spec import Spec, load_spec, spec_from_dict
from aifabric.topology import Fabric, LinkKind, NodeKind, build_fabric

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
