"""deploy.dcqcn takes exactly the values the packet simulator can run: a value the
simulator would refuse is refused where the user wrote it (deploy.dcqcn.<field>), and every
value the spec accepts gives a valid packet configuration."""

from __future__ import annotations

import pytest
import yaml

from aifabric.errors import SpecError
from aifabric.sim.packet.config import PacketConfig, effective_packet_config
from aifabric.spec.deploy import Dcqcn, Deploy
from aifabric.spec.load import spec_from_dict


def _spec_data() -> dict:
    with open("examples/hpn-pod.yaml") as fh:
        return yaml.safe_load(fh)


def _bounds() -> list[tuple[str, int]]:
    out = []
    for name, field in Dcqcn.model_fields.items():
        for m in field.metadata:
            for attr in ("ge", "le"):
                v = getattr(m, attr, None)
                if v is not None:
                    out.append((name, int(v)))
    return out


@pytest.mark.parametrize(("name", "value"), _bounds())
def test_every_accepted_deploy_value_runs_in_the_simulator(name: str, value: int) -> None:
    dep = Deploy.model_validate({"dcqcn": {name: value}})
    cfg = effective_packet_config(PacketConfig(), dep)
    got = getattr(cfg.cc.dcqcn, name)
    assert got == (bool(value) if isinstance(got, bool) else value)


@pytest.mark.parametrize(("name", "value"), [("rpg_threshold", 0), ("rpg_gd", 0),
                                             ("rpg_gd", 21), ("dce_tcp_g", 1025),
                                             ("clamp_tgt_rate", 2), ("rpg_min_rate", 0)])
def test_a_value_the_simulator_cannot_run_is_refused_in_deploy(name: str, value: int) -> None:
    data = _spec_data()
    data.setdefault("deploy", {})["dcqcn"] = {name: value}
    with pytest.raises(SpecError) as err:
        spec_from_dict(data)
    (problem,) = err.value.problems
    assert str(problem).startswith(f"deploy.dcqcn.{name}:")
