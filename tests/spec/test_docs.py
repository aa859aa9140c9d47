"""docs/spec.md documents every field of the spec."""

from __future__ import annotations

from pydantic import BaseModel

from aifabric.spec import models
from tests.conftest import ROOT

DOC = (ROOT / "docs" / "spec.md").read_text()


def test_every_top_level_and_host_field_is_documented():
    for name in models.Spec.model_fields:
        assert f"`{name}`" in DOC, name
    for name in models.Hosts.model_fields:
        assert f"`hosts.{name}`" in DOC, name
    for group, model in (("latency", models.Latency), ("cabling", models.Cabling),
                         ("addressing", models.Addressing), ("routing", models.Routing)):
        for name in model.model_fields:
            assert f"`{group}.{name}`" in DOC, name


def test_every_switch_and_topology_field_is_documented():
    for name in models.SwitchModel.model_fields:
        assert f"`switch_models.<name>.{name}`" in DOC, name
    for name in models.SwitchRole.model_fields:
        assert f"`<role>.{name}`" in DOC, name
    for cls in (models.ClosTopology, models.RailTopology, models.SingleTorTopology,
                models.FatTreeTopology, models.MultiplaneTopology, models.HpnTopology):
        assert issubclass(cls, BaseModel)
        for name in cls.model_fields:
            if name != "family":
                assert f"topology.{name}" in DOC, (cls.__name__, name)


def test_every_deploy_field_is_documented():
    """Every field of spec.deploy, nested ones included, has a row in docs/spec.md."""
    from aifabric.spec import deploy

    def walk(model: type[BaseModel], prefix: str):
        for name, field in model.model_fields.items():
            ann = field.annotation
            if isinstance(ann, type) and issubclass(ann, BaseModel):
                yield from walk(ann, f"{prefix}.{name}")
            else:
                yield f"{prefix}.{name}"

    paths = list(walk(deploy.Deploy, "deploy"))
    assert len(paths) > 40
    for path in paths:
        assert f"`{path}`" in DOC, path
