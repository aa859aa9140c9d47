"""`aifabric build` of an InfiniBand fabric whose switches aggregate (configs/sharp.py):
the SHARP Aggregation Manager's sharp_am.cfg and NCCL's SHARP plugin switches in every
nccl.env; every name written is one NVIDIA documents (configs.sharp.AM_PARAMETERS,
NCCL_SHARP_ENV), the values follow the spec, and a fabric without aggregating switches
gets neither."""

from __future__ import annotations

import copy
import shlex

import yaml

from aifabric.configs.sharp import AM_PARAMETERS, NCCL_SHARP_ENV
from tests.conftest import ROOT

SPEC = ROOT / "examples" / "infiniband-ndr-sharp.yaml"


def _build(tmp_path, cli, change=None):
    doc = copy.deepcopy(yaml.safe_load(SPEC.read_text()))
    if change:
        change(doc)
    spec = tmp_path / "ib.yaml"
    spec.write_text(yaml.safe_dump(doc))
    out = tmp_path / "build"
    r = cli("build", spec, "--out", out)
    assert r.code == 0, r.err
    return out, r, doc


def _cfg(path):
    """sharp_am.cfg as sharp_am reads it: `parameter value` lines, # comments."""
    out = {}
    for ln in path.read_text().splitlines():
        if not ln.strip() or ln.lstrip().startswith("#"):
            continue
        key, value = ln.split(None, 1)
        assert key not in out, f"{key} twice"
        out[key] = value.strip()
    return out


def _env(path):
    """nccl.env as a shell sources it: KEY=value lines."""
    out = {}
    for ln in path.read_text().splitlines():
        if ln.startswith("#") or not ln.strip():
            continue
        key, value = ln.split("=", 1)
        out[key] = shlex.split(value)[0] if value else ""
    return out


def test_sharp_am_cfg_has_only_documented_parameters_derived_from_the_spec(tmp_path, cli):
    """2 spines (the roots), 8 rails, rail-optimized: max_trees_to_build 2 (one per
    root switch), app_resources_default_limit 8 (a tree per rail per job), the
    SuperPOD-oriented dynamic algorithm (0), dynamic (per-job) trees."""
    out, r, doc = _build(tmp_path, cli)
    assert "sharp_am.cfg" in r.out
    cfg = _cfg(out / "subnet-manager" / "sharp_am.cfg")
    assert set(cfg) <= set(AM_PARAMETERS) and set(cfg) == set(AM_PARAMETERS)
    from aifabric.api import build_fabric
    from aifabric.topology import NodeKind

    fab = build_fabric(out / "spec.yaml")
    spines = len(fab.ids(NodeKind.AGG))
    assert spines == 2
    assert cfg == {"dynamic_tree_allocation": "TRUE", "dynamic_tree_algorithm": "0",
                   "max_trees_to_build": str(spines),
                   "app_resources_default_limit": str(doc["hosts"]["nics_per_host"])}
    envs = sorted((out / "hosts").glob("*/nccl.env"))
    assert len(envs) == doc["hosts"]["count"]
    for path in envs:
        env = _env(path)
        sharp = {k: v for k, v in env.items() if "COLLNET" in k or k.startswith("SHARP")}
        assert sharp == {k: "1" for k in NCCL_SHARP_ENV}, path


def test_limits_and_topology_change_the_settings(tmp_path, cli):
    """A switch model holding 1 tree caps both tree counts at 1; a fabric that is not
    rail-optimized gets the quasi-fat-tree algorithm (1)."""
    def change(doc):
        doc["switch_models"]["quantum2"]["sharp_trees"] = 1
        doc["topology"]["rail_optimized"] = False
        doc["infiniband"] = {"routing_engine": "minhop"}  # hosts named otherwise
    out, _, _ = _build(tmp_path, cli, change)
    cfg = _cfg(out / "subnet-manager" / "sharp_am.cfg")
    assert cfg["max_trees_to_build"] == "1" and cfg["app_resources_default_limit"] == "1"
    assert cfg["dynamic_tree_algorithm"] == "1"


def test_switches_that_do_not_aggregate_get_no_sharp_files(tmp_path, cli):
    def change(doc):
        doc["switch_models"]["quantum2"]["sharp"] = False
    out, r, _ = _build(tmp_path, cli, change)
    assert not (out / "subnet-manager" / "sharp_am.cfg").exists()
    assert "sharp_am.cfg" not in r.out
    for path in (out / "hosts").glob("*/nccl.env"):
        env = _env(path)
        assert not set(env) & set(NCCL_SHARP_ENV)
