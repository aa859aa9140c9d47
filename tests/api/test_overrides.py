"""Scenario documents, dotted-path overrides and content hashes (aifabric.routing.overrides)."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

import aifabric as af
from aifabric.routing.overrides import apply_overrides, check_override_path, scenario_document
from aifabric.routing.scenario import Scenario, scenario_from_dict
from aifabric.sim.scenario import SimScenario
from tests._require import require_importorskip
from tests.conftest import EXAMPLES, ROOT

SCEN = EXAMPLES / "scenarios"
ALL = sorted(SCEN.glob("*.yaml"))


def _flat(x, prefix=""):
    """A nested dump as {dotted path: leaf value}."""
    if isinstance(x, dict):
        out = {}
        for k, v in x.items():
            out.update(_flat(v, f"{prefix}{k}."))
        return out or {prefix[:-1]: {}}
    if isinstance(x, list):
        out = {}
        for i, v in enumerate(x):
            out.update(_flat(v, f"{prefix}{i}."))
        return out or {prefix[:-1]: []}
    return {prefix[:-1]: x}


def _changed(a, b) -> set[str]:
    fa, fb = _flat(a.model_dump(mode="json")), _flat(b.model_dump(mode="json"))
    return {k for k in fa.keys() | fb.keys() if fa.get(k, "<none>") != fb.get(k, "<none>")}


def test_every_example_scenario_round_trips_through_its_document():
    """scenario_document is plain JSON and validates back to an equal scenario (the spec
    embedded, routing overrides as written), for every example scenario."""
    assert len(ALL) >= 15
    for path in ALL:
        scn = af.load_scenario(path)
        doc = scenario_document(scn)
        assert isinstance(doc["spec"], dict), path
        assert json.loads(json.dumps(doc)) == doc, path
        again = scenario_from_dict(doc, base_dir=scn.base_dir, model=type(scn))
        assert type(again) is type(scn)
        assert again.model_dump(mode="json") == scn.model_dump(mode="json"), path
        assert af.content_hash(again) == af.content_hash(scn), path


def test_the_document_is_what_the_files_hold():
    """The document holds the scenario's routing overrides as written (not the merged
    policy) and the spec file's document as written."""
    import yaml

    path = SCEN / "allreduce-hpn.yaml"
    raw = yaml.safe_load(path.read_text())
    scn = af.load_scenario(path)
    doc = scenario_document(scn)
    assert doc["routing"] == raw["routing"] == {"policy": "source_port",
                                                "qps_per_connection": 2,
                                                "nic_port_choice": "round_robin"}
    assert doc["spec"] == yaml.safe_load((path.parent / raw["spec"]).read_text())
    assert scn.spec.routing.policy == "source_port"
    assert doc["spec"].get("routing", {}).get("policy") != "source_port"


@pytest.mark.parametrize(("file", "path", "value", "changed"), [
    ("allreduce-hpn.yaml", "routing.seed_mode", "per_switch",
     {"routing.seed_mode", "spec.routing.seed_mode"}),
    ("incast-dcqcn.yaml", "packet.ecn.kmin_bytes", 50_000, {"packet.ecn.kmin_bytes"}),
    ("gpt-hpn.yaml", "jobs.0.seed", 7, {"jobs.0.seed"}),
    ("hpn-dual-plane.yaml", "spec.topology.planes", 1, {"spec.topology.planes"}),
    ("allreduce-hpn.yaml", "collectives.0.size_bytes", "2GiB", {"collectives.0.size_bytes"}),
    ("allreduce-hpn.yaml", "seed", 3, {"seed"}),
])
def test_an_override_changes_exactly_that_field(file, path, value, changed):
    """Each override changes the field it names (and, for routing, the merged policy)
    and nothing else; the original is unchanged (scenarios are frozen)."""
    scn = af.load_scenario(SCEN / file)
    before = scn.model_dump(mode="json")
    new = scn.with_overrides({path: value})
    assert type(new) is type(scn)
    assert _changed(scn, new) == changed
    assert scn.model_dump(mode="json") == before
    assert af.content_hash(new) != af.content_hash(scn)


def test_a_spec_given_as_a_path_is_loaded_into_the_document():
    """Overriding spec.* on a scenario whose spec is a file: the file's document is
    embedded, the override applied, the file itself untouched; other overrides keep the
    spec by path (spec_file stays known)."""
    path = SCEN / "hpn-dual-plane.yaml"
    scn = af.load_scenario(path)
    assert scn.spec_file is not None and scn.spec.topology.planes == 2
    text = (path.parent / json.loads(json.dumps(scn._document))["spec"]).read_text()
    one = scn.with_overrides({"spec.topology.planes": 1})
    assert one.spec.topology.planes == 1 and one.spec_file is None
    assert (path.parent / scn._document["spec"]).read_text() == text
    seeded = scn.with_overrides({"seed": 5})
    assert seeded.spec_file == scn.spec_file and seeded.seed == 5


def test_a_whole_value_is_replaced():
    """"failures" replaced by a list: the failure is there, and an empty list removes it."""
    scn = af.load_scenario(SCEN / "hpn-tor-failure.yaml")
    assert scn.failures
    none = scn.with_overrides({"failures": []})
    assert none.failures == []
    back = none.with_overrides({"failures": [f.model_dump(mode="json", exclude_unset=True)
                                             for f in scn.failures]})
    assert back.failures == scn.failures
    assert af.content_hash(back) == af.content_hash(scn)


def test_relative_paths_keep_resolving_against_the_scenario_folder():
    """A scenario naming a CSV by a relative path still runs after an override."""
    scn = af.load_scenario(SCEN / "pinned-flows.yaml")
    new = scn.with_overrides({"seed": 1})
    assert new.base_dir == scn.base_dir
    r = af.route(new)
    assert r.summary["stats"]["flows"] == af.route(scn).summary["stats"]["flows"] > 0


@pytest.mark.parametrize(("path", "names"), [
    ("routing.seed_mod", ["seed_mode"]),
    ("packet.ecn.kmin", ["kmin_bytes"]),
    ("packet.ecm.kmin_bytes", ["ecn"]),
    ("colectives.0.size_bytes", ["collectives"]),
    ("spec.topology.plane", ["planes"]),
    ("jobs.0.parralel.dp", ["parallel"]),
])
def test_a_bad_path_names_the_closest_valid_names(path, names):
    """A misspelled field: one problem naming the full path, the level and the closest
    names there; check_override_path says the same without a value."""
    scn = af.load_scenario(SCEN / "gpt-hpn.yaml")
    for call in (lambda: scn.with_overrides({path: 1}),
                 lambda: check_override_path(SimScenario, path)):
        with pytest.raises(af.SpecError) as e:
            call()
        (p,) = e.value.problems
        assert p.path == path
        assert "closest: " in p.message
        for n in names:
            assert n in p.message.split("closest: ")[1]


def test_paths_through_lists_maps_and_unions_are_valid():
    """List items by index, mapping values, union members (topology families),
    Optional models: all accepted without a value."""
    from aifabric.reliability.spec import GoodputScenario

    for path in ("jobs.0.parallel.dp", "collectives.3.size_bytes", "spec.topology.planes",
                 "spec.topology.k", "workload.ranks", "packet.cc.dcqcn.rpg_gd", "failures",
                 "traffic.0.size_bytes", "routing", "spec.switch_models.k4.ports"):
        check_override_path(SimScenario, path)
    check_override_path(GoodputScenario, "goodput.failures.nic_port.rate_per_month")
    for bad, what in (("seed.x", "seed is a number"), ("jobs.x", "index"),
                      ("", "not a dotted path"), ("routing..seed", "not a dotted path")):
        with pytest.raises(af.SpecError, match=what):
            check_override_path(SimScenario, bad)
    with pytest.raises(af.SpecError, match="no field 'jobs'"):
        check_override_path(Scenario, "jobs.0.seed")  # route scenarios have no jobs


@pytest.mark.parametrize(("path", "value", "what"), [
    ("routing.seed_mode", 5, "Input should be 'same' or 'per_switch'"),
    ("packet.ecn.kmin_bytes", "lots", "not a size"),
    ("collectives.0.size_bytes", 0, "greater than 0"),
    ("seed", True, "got a boolean"),
    ("spec.topology.planes", 7, ""),
])
def test_a_wrong_value_names_the_dotted_path(path, value, what):
    """A value of the wrong type or out of range: SpecError at the dotted path, with
    pydantic's message in the project's format (one line)."""
    file = "incast-dcqcn.yaml" if path.startswith("packet") else "hpn-dual-plane.yaml" \
        if path.startswith("spec") else "allreduce-hpn.yaml"
    scn = af.load_scenario(SCEN / file)
    with pytest.raises(af.SpecError) as e:
        scn.with_overrides({path: value})
    assert any(p.path.startswith(path) and what in p.message for p in e.value.problems), \
        e.value.problems
    assert all("\n" not in str(p) for p in e.value.problems)


def test_a_list_index_past_the_end_is_a_problem():
    scn = af.load_scenario(SCEN / "allreduce-hpn.yaml")
    with pytest.raises(af.SpecError, match=re.escape("collectives.5.gpus: no item 5")):
        scn.with_overrides({"collectives.5.gpus": 8})
    with pytest.raises(af.SpecError, match=re.escape("jobs.0.seed: no item 0: jobs is empty")):
        scn.with_overrides({"jobs.0.seed": 8})


def test_every_bad_path_is_reported_at_once():
    scn = af.load_scenario(SCEN / "allreduce-hpn.yaml")
    with pytest.raises(af.SpecError) as e:
        apply_overrides(scn, {"routing.x": 1, "sed": 2, "seed": 1})
    assert [p.path for p in e.value.problems] == ["routing.x", "sed"]


def test_content_hash_is_the_same_in_another_process():
    """Same scenario, same hash in a fresh interpreter (no dict order, id or hash seed
    leaks in); hashes of different overrides all differ."""
    path = SCEN / "allreduce-hpn.yaml"
    scn = af.load_scenario(path)
    code = ("import aifabric as af, sys; s = af.load_scenario(sys.argv[1]); "
            "print(af.content_hash(s)); "
            "print(af.content_hash(s.with_overrides({'routing.seed_mode': 'per_switch'})))")
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True,
                         text=True, cwd=ROOT, env={"PYTHONHASHSEED": "12345",
                                                   "PATH": "/usr/bin:/bin"}, check=True)
    here = [af.content_hash(scn),
            af.content_hash(scn.with_overrides({"routing.seed_mode": "per_switch"}))]
    assert out.stdout.split() == here
    assert len(here[0]) == 64 and int(here[0], 16) >= 0


def test_content_hash_sees_every_change():
    """Any override, the simulator, and an equivalent override chain back: hashes."""
    scn = af.load_scenario(SCEN / "allreduce-hpn.yaml")
    variants = [scn, scn.with_overrides({"seed": 1}), scn.with_overrides({"seed": 2}),
                scn.with_overrides({"routing.qps_per_connection": 4}),
                scn.with_overrides({"collectives.0.channels": 4}),
                scn.with_overrides({"spec.hosts.backup_per_segment": 0}),
                scn.with_overrides({"name": "other"}),
                scn.model_copy(update={"sim": "analytic"})]
    hashes = [af.content_hash(v) for v in variants]
    assert len(set(hashes)) == len(hashes)
    assert af.content_hash(scn.with_overrides({})) == hashes[0]
    assert af.content_hash(variants[1].with_overrides({"seed": 0})) != hashes[0]  # written


def test_a_scenario_built_in_python_merges_routing_and_reports_spec_errors():
    """SimScenario(...) in code: the routing overrides are merged into spec.routing as
    from YAML; bad input is a SpecError naming the field; build_scenario gives the same
    scenario as the YAML file."""
    spec = af.load_spec(EXAMPLES / "hpn-pod.yaml")
    scn = af.SimScenario(name="x", spec=spec, routing=af.Routing(seed_mode="per_switch"),
                         collectives=[af.CollectiveSpec(op="allreduce", size_bytes="1GiB",
                                                        gpus=64)])
    assert scn.spec.routing.seed_mode == "per_switch" and spec.routing.seed_mode == "same"
    assert scn.collectives[0].size_bytes == 2**30
    again = scn.with_overrides({"collectives.0.gpus": 128})
    assert again.collectives[0].gpus == 128 and again.spec.routing.seed_mode == "per_switch"
    with pytest.raises(af.SpecError, match=re.escape("collectives.0.size_bytes")):
        af.SimScenario(name="x", spec=spec, collectives=[{"op": "allreduce",
                                                          "size_bytes": 0, "gpus": 8}])
    with pytest.raises(af.SpecError, match=re.escape("routing.seed_mode")):
        af.SimScenario(name="x", spec=spec, routing={"seed_mode": "sometimes"})
    yaml_built = af.load_scenario(SCEN / "allreduce-hpn.yaml")
    built = af.build_scenario(spec=EXAMPLES / "hpn-pod.yaml", name="allreduce-hpn",
                              routing={"policy": "source_port", "qps_per_connection": 2,
                                       "nic_port_choice": "round_robin"}, sim="flow",
                              collectives=yaml_built.collectives)
    assert built.model_dump(mode="json") == yaml_built.model_dump(mode="json")
    with pytest.raises(af.SpecError, match=re.escape("spec.topology")):
        af.build_scenario(spec={"topology": {"family": "nope"}})


def test_a_copy_with_changes_keeps_them_through_overrides():
    """model_copy(update=...) drops the document as written, so a later override starts
    from the copy, not from the file."""
    scn = af.load_scenario(SCEN / "allreduce-hpn.yaml")
    copy = scn.model_copy(update={"sim": "analytic"})
    new = copy.with_overrides({"seed": 4})
    assert (new.sim, new.seed) == ("analytic", 4)
    assert new.spec == scn.spec and new.collectives == scn.collectives
    assert scenario_document(copy)["sim"] == "analytic"


def test_a_scenario_built_in_code_keeps_its_routing_overrides_apart():
    """Built in code with routing overrides, the document holds the spec as given and the
    overrides apart (as a YAML file does): removing or replacing them acts on the spec's
    own routing, not on the merged one."""
    spec = af.load_spec(EXAMPLES / "single-tor-dcn.yaml")
    assert spec.routing.seed_mode == "same" and spec.routing.qps_per_connection == 1
    scn = af.SimScenario(name="x", spec=spec, routing={"seed_mode": "per_switch"},
                         collectives=[af.CollectiveSpec(op="allreduce", size_bytes="1MiB",
                                                        gpus=8)])
    assert scn.spec.routing.seed_mode == "per_switch"
    assert scenario_document(scn)["spec"].get("routing", {}).get("seed_mode") != "per_switch"
    assert scn.with_overrides({"routing": None}).spec.routing == spec.routing
    other = scn.with_overrides({"routing": {"qps_per_connection": 2}}).spec.routing
    assert (other.seed_mode, other.qps_per_connection) == ("same", 2)
    again = scenario_from_dict(scenario_document(scn), model=SimScenario)
    assert again.model_dump(mode="json") == scn.model_dump(mode="json")


def test_a_list_index_past_the_end_names_the_allowed_range():
    scn = af.load_scenario(SCEN / "allreduce-hpn.yaml")
    n = len(scn.collectives)
    for path in (f"collectives.{n}", f"collectives.{n + 3}.gpus"):
        with pytest.raises(af.SpecError) as e:
            scn.with_overrides({path: 8})
        (p,) = e.value.problems
        assert p.path == path and f"allowed: an index from 0 to {n - 1}" in p.message
        assert "\n" not in str(e.value)
    with pytest.raises(af.SpecError, match=re.escape("allowed: an item index")):
        scn.with_overrides({"collectives.-1.gpus": 8})  # no negative indices


def test_content_hash_sees_the_files_the_scenario_names(tmp_path):
    """A traffic CSV is read by the run: editing it changes the hash (a sweep's --resume
    must not skip the point), restoring it gives the hash back; moving the scenario with
    its files keeps the hash."""
    import shutil

    for name in ("pinned-flows.yaml", "pinned-flows.csv"):
        shutil.copy(SCEN / name, tmp_path / name)
    shutil.copy(EXAMPLES / "roce-5000.yaml", tmp_path.parent / "roce-5000.yaml")
    csv = tmp_path / "pinned-flows.csv"
    text = csv.read_text()
    first = af.content_hash(af.load_scenario(tmp_path / "pinned-flows.yaml"))
    assert first == af.content_hash(af.load_scenario(SCEN / "pinned-flows.yaml"))
    lines = text.splitlines(keepends=True)
    csv.write_text("".join([lines[0], *lines[2:]]))  # one flow fewer
    edited = af.content_hash(af.load_scenario(tmp_path / "pinned-flows.yaml"))
    csv.write_text(text)
    assert edited != first
    assert af.content_hash(af.load_scenario(tmp_path / "pinned-flows.yaml")) == first


def test_a_pickled_scenario_keeps_its_file_folder_and_document():
    """Sweeps send scenarios to worker processes and Ray (pickle): the copy keeps its file,
    folder and document, hashes the same and takes overrides (relative paths still
    resolve against the scenario's folder)."""
    import pickle

    for path in (SCEN / "pinned-flows.yaml", SCEN / "incast-dcqcn.yaml",
                 SCEN / "goodput-hpn.yaml"):
        scn = af.load_scenario(path)
        for s in (scn, scn.with_overrides({"seed": 3})):
            q = pickle.loads(pickle.dumps(s))
            assert (q.file, q.base_dir, q.spec_file) == (s.file, s.base_dir, s.spec_file)
            assert scenario_document(q) == scenario_document(s)
            assert af.content_hash(q) == af.content_hash(s)
            assert q.with_overrides({"seed": 5}) == s.with_overrides({"seed": 5})


def test_numpy_values_are_plain_values():
    """A sweep's grid may hold numpy numbers or arrays: they override like the Python
    values they stand for (same scenario, same hash)."""
    np = require_importorskip("numpy")
    scn = af.load_scenario(SCEN / "incast-dcqcn.yaml")
    a = scn.with_overrides({"seed": np.int64(3), "packet.pfc.priorities": np.array([3, 4]),
                            "packet.ecn.pmax": np.float64(0.5)})
    b = scn.with_overrides({"seed": 3, "packet.pfc.priorities": [3, 4],
                            "packet.ecn.pmax": 0.5})
    assert a == b and af.content_hash(a) == af.content_hash(b)
    assert a.packet.pfc.priorities == [3, 4]


def test_spec_replaced_by_a_path_resolves_against_the_scenario_folder(tmp_path, monkeypatch):
    """{"spec": "../x.yaml"} is an edit of the YAML's spec: line, so the path is relative
    to the scenario's folder, not the working folder; later spec.* paths apply to the
    file's document, and the file itself is untouched."""
    monkeypatch.chdir(tmp_path)  # a working folder where ../single-tor-dcn.yaml is not
    scn = af.load_scenario(SCEN / "incast-dcqcn.yaml")  # an embedded spec
    assert scn.spec_file is None
    new = scn.with_overrides({"spec": "../single-tor-dcn.yaml"})
    loaded = af.load_spec(EXAMPLES / "single-tor-dcn.yaml")  # + the scenario's routing
    assert new.spec == loaded.model_copy(update={"routing": new.spec.routing})
    assert new.spec.routing.seed_mode == scn.spec.routing.seed_mode == "per_switch"
    assert new.spec_file is not None and new.base_dir == scn.base_dir
    assert scenario_document(new)["spec"] == scenario_document(
        scn.with_overrides({"spec": str(EXAMPLES / "single-tor-dcn.yaml")}))["spec"]
    text = (EXAMPLES / "single-tor-dcn.yaml").read_text()
    named = scn.with_overrides({"spec": "../single-tor-dcn.yaml", "spec.name": "renamed"})
    assert named.spec.name == "renamed" and (EXAMPLES / "single-tor-dcn.yaml").read_text() \
        == text
    with pytest.raises(af.SpecError, match="file not found"):
        scn.with_overrides({"spec": "single-tor-dcn.yaml"})  # not beside the scenario
