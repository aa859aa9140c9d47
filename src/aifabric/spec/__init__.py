"""The cluster spec: pydantic models and YAML loading."""

from aifabric.spec.load import dump_spec, load_spec, load_yaml, spec_from_dict
from aifabric.spec.models import (
    BUILTIN_SWITCH_MODELS,
    Addressing,
    Cabling,
    ClosTopology,
    FatTreeTopology,
    Hosts,
    HpnTopology,
    Latency,
    MultiplaneTopology,
    RailTopology,
    Routing,
    SingleTorTopology,
    Spec,
    SwitchModel,
    SwitchRole,
)
from aifabric.spec.scheduled import ScheduledFabric

__all__ = [
    "BUILTIN_SWITCH_MODELS",
    "Addressing",
    "Cabling",
    "ClosTopology",
    "FatTreeTopology",
    "Hosts",
    "HpnTopology",
    "Latency",
    "MultiplaneTopology",
    "RailTopology",
    "Routing",
    "ScheduledFabric",
    "SingleTorTopology",
    "Spec",
    "SwitchModel",
    "SwitchRole",
    "dump_spec",
    "load_spec",
    "load_yaml",
    "spec_from_dict",
]
