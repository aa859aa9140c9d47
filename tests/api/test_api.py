"""The public Python API (aifabric.api): the same numbers as the command line, which is
a thin layer over it; tables as pandas DataFrames equal to the CSVs the CLI writes."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import aifabric as af
from tests.conftest import EXAMPLES, ROOT

SCEN = EXAMPLES / "scenarios"


def _same_table(df: pd.DataFrame, csv_path) -> None:
    """A DataFrame equals the CSV the CLI wrote: same columns in order, same rows;
    numbers equal to the CSV's 10 significant digits, text equal (missing = empty)."""
    got = pd.read_csv(csv_path, keep_default_na=False, dtype=str)
    assert list(got.columns) == list(df.columns), csv_path
    assert len(got) == len(df), csv_path
    for col in df.columns:
        ours = df[col]
        theirs = got[col]
        if ours.dtype.kind in "fiub":
            if ours.dtype.kind == "b":
                assert list(theirs) == [str(bool(x)) for x in ours], (csv_path, col)
                continue
            t = pd.to_numeric(theirs.replace("", "nan")).to_numpy(dtype=float)
            o = ours.to_numpy(dtype=float)
            assert np.allclose(o, t, rtol=1e-9, atol=0, equal_nan=True), (csv_path, col)
        else:
            assert [("" if x is None else x) for x in ours] == list(theirs), (csv_path, col)


@pytest.mark.parametrize("name", ["incast-dcqcn", "rail-permutation"])
def test_simulate_json_is_the_api_summary(cli, name):
    """``simulate --json`` prints exactly af.simulate(...).summary (packet and flow)."""
    path = SCEN / f"{name}.yaml"
    r = cli("simulate", path, "--json")
    assert r.code in (0, 1), r.err
    res = af.simulate(af.load_scenario(path))
    assert json.loads(r.out) == res.summary
    assert res.summary["makespan_ns"] > 0 and res.sim == res.summary["sim"]


def test_result_tables_match_the_cli_csvs_and_save_writes_the_same_folder(cli, tmp_path):
    """Every DataFrame of a Result equals the CSV ``simulate --out`` wrote, and
    Result.save writes the same files with the same bytes."""
    path = SCEN / "incast-dcqcn.yaml"
    out_cli = tmp_path / "cli"
    r = cli("simulate", path, "--out", out_cli)
    assert r.code in (0, 1), r.err
    res = af.simulate(path)
    tables = res.tables()
    assert {"collectives", "jobs", "links", "transfers", "timeline", "packet_fct"} <= set(tables)
    for name, df in tables.items():
        _same_table(df, out_cli / f"{name}.csv")
    assert res.flows is tables["transfers"] and res.links is tables["links"]
    assert len(res.flows) == res.summary["engine"]["transfers"] == 8
    out_api = res.save(tmp_path / "api")
    cli_files = sorted(p.name for p in out_cli.iterdir())
    assert sorted(p.name for p in out_api.iterdir()) == cli_files
    assert "run.json" in cli_files and "report.md" in cli_files
    for name in cli_files:
        if name.endswith((".csv", ".json", ".md")):
            assert (out_api / name).read_bytes() == (out_cli / name).read_bytes(), name


def test_object_columns_are_text():
    res = af.simulate(SCEN / "rail-permutation.yaml", sim="analytic")
    links = res.links
    assert links["tier"].map(type).eq(str).all()
    assert links["bytes"].dtype.kind in "fi"


def test_simulate_overrides_and_bad_input():
    """sim= overrides the scenario's simulator; bad sim / max_events / scenario types are
    one SpecError before any work; a packet run above max_events is refused."""
    scn = af.load_scenario(SCEN / "incast-dcqcn.yaml")
    assert af.simulate(scn, sim="flow").sim == "flow"
    for kw, where in (({"sim": "fluid"}, "sim"), ({"max_events": -1}, "max_events"),
                      ({"max_events": float("nan")}, "max_events")):
        with pytest.raises(af.SpecError) as e:
            af.simulate(scn, **kw)
        assert e.value.problems[0].path == where
    with pytest.raises(af.SpecError, match="events"):
        af.simulate(scn, max_events=10)
    with pytest.raises(af.SpecError, match="allowed: a scenario"):
        af.simulate({"name": "x"})


def test_a_fabric_built_once_serves_many_runs():
    scn = af.load_scenario(SCEN / "rail-permutation.yaml")
    fab = af.build_fabric(scn.spec)
    a = af.simulate(scn, fabric=fab)
    b = af.simulate(scn.with_overrides({"routing.seed_mode": "per_switch"}), fabric=fab)
    c = af.simulate(scn)
    assert a.summary == c.summary
    assert a.summary["routing"] == b.summary["routing"]  # seed_mode is not in this digest
    with pytest.raises(af.SpecError, match="fabric"):
        af.simulate(scn, fabric="fabric")


def test_plan_is_typed_and_to_dict_is_plan_json(cli):
    path = EXAMPLES / "hpn-pod.yaml"
    r = cli("plan", path, "--json", "--no-bisection")
    assert r.code == 0, r.err
    p = af.plan(af.build_fabric(af.load_spec(path)), bisection=False)
    assert p.to_dict() == json.loads(r.out)
    assert (p.gpus, p.switches["total"], p.planes) == (15360, 368, 2)
    assert p.bisection_gbps is None
    with pytest.raises(AttributeError):
        p.gpus = 1  # frozen
    import aifabric.planning  # noqa: F401  (the subpackage does not replace the function)

    assert callable(af.plan) and af.plan(path, bisection=False) == p


def test_propose_is_plan_gpus_json(cli):
    """af.propose is ``plan --gpus N --json``; the chosen design is rank 1, fits the GPUs,
    and its plan is af.plan of its spec."""
    r = cli("plan", "--gpus", "512", "--json")
    assert r.code == 0, r.err
    prop = af.propose(gpus=512)
    d = prop.to_dict()
    assert d == json.loads(r.out)
    first = d["candidates"][0]
    assert first["rank"] == 1 and first["fits"] and first["design"] == d["chosen"]
    assert [c["fits"] for c in d["candidates"]] == sorted(
        (c["fits"] for c in d["candidates"]), reverse=True)
    assert first["plan"] == af.plan(prop.spec, bisection=False).to_dict()
    assert first["plan"]["gpus"] >= 512
    with pytest.raises(af.SpecError, match="gpus"):
        af.propose(gpus=0)


def test_route_summary_and_tables_are_the_cli_s(cli, tmp_path):
    """af.route: the summary is ``route --json``; links and flows equal the CSVs of
    ``route --out``; per-tier rows are the summary's; --policy and policy= agree."""
    path = SCEN / "rail-permutation.yaml"
    r = cli("route", path, "--json", "--policy", "ecmp")
    assert r.code == 0, r.err
    res = af.route(path, policy="ecmp")
    assert res.summary == json.loads(r.out)
    out = tmp_path / "r"
    assert cli("route", path, "--out", out, "--policy", "ecmp").code == 0
    _same_table(res.links, out / "links.csv")
    _same_table(res.flows, out / "flows.csv")
    assert list(res.tiers["tier"]) == list(res.summary["stats"]["tiers"])
    assert res.tiers["used"].sum() == sum(t["used"] for t in res.summary["stats"]["tiers"]
                                          .values())
    saved = res.save(tmp_path / "api")
    assert (saved / "report.json").read_bytes() == (out / "report.json").read_bytes()
    with pytest.raises(af.SpecError, match="unknown policy 'teleport'"):
        af.route(path, policy="teleport")


def test_route_on_a_fabric_with_traffic_in_python():
    """A Fabric plus traffic patterns: the same loads as the scenario file that says so."""
    scn = af.load_scenario(SCEN / "rail-permutation.yaml")
    fab = af.build_fabric(scn.spec)
    res = af.route(fab, [t.model_dump(mode="json", exclude_unset=True) for t in scn.traffic],
                   seed=scn.seed)
    ref = af.route(scn)
    assert res.summary["stats"] == ref.summary["stats"]
    with pytest.raises(af.SpecError, match="traffic"):
        af.route(fab)


def test_goodput_summary_is_goodput_json(cli):
    path = SCEN / "goodput-single-tor.yaml"
    r = cli("goodput", path, "--json", "--trials", "20")
    assert r.code == 0, r.err
    res = af.goodput(path, trials=20)
    assert res.summary == json.loads(r.out)
    assert set(res.tables()) == set(res.raw.tables)
    assert len(res.table("trials")) == 20
    with pytest.raises(af.SpecError, match="trials"):
        af.goodput(path, trials=0)
    with pytest.raises(af.SpecError, match="goodput"):
        af.goodput(SCEN / "rail-permutation.yaml")


def test_load_scenario_chooses_the_model():
    assert type(af.load_scenario(SCEN / "goodput-hpn.yaml")) is af.GoodputScenario
    assert type(af.load_scenario(SCEN / "hpn-polarization.yaml")) is af.SimScenario
    assert type(af.load_scenario(SCEN / "hpn-polarization.yaml", kind="route")) is af.Scenario
    with pytest.raises(af.SpecError, match="kind"):
        af.load_scenario(SCEN / "hpn-polarization.yaml", kind="x")


def test_check_is_the_cli_s(cli, tmp_path):
    """af.check on a build folder: the planned facts deviate in nothing; one changed MTU
    is one deviation, as ``check --json`` reports it."""
    from aifabric.configs import write_build
    from tests.configs.conftest import SMALL

    out = tmp_path / "build"
    write_build(af.build_fabric(af.spec_from_dict(SMALL["hpn"])), out)
    inv = af.check_template(out)
    for h in inv["hosts"].values():
        h.update(driver_version="24.04-0.6.6", firmware_version="28.39.1002")
    for s in inv["switches"].values():
        s["os_version"] = "SONiC.202405"
    facts = tmp_path / "facts.json"
    facts.write_text(json.dumps(inv))
    ok = af.check(out, inventory=facts)
    assert ok.ok and (ok.hosts, ok.switches) == (20, 22)
    host = sorted(inv["hosts"])[0]
    nic = next(iter(inv["hosts"][host]["interfaces"]))
    inv["hosts"][host]["interfaces"][nic]["mtu"] = 1500
    facts.write_text(json.dumps(inv))
    bad = af.check(out, inventory=facts)
    r = cli("check", out, "--inventory", facts, "--json")
    assert r.code == 1
    assert bad.to_list() == json.loads(r.out) and len(bad.deviations) == 1
    assert list(bad.table.columns) == ["group", "device", "field", "expected", "found"]
    with pytest.raises(af.SpecError, match="--inventory"):
        af.check(out)


def test_missing_pandas_is_one_line_naming_the_extra(monkeypatch):
    res = af.simulate(SCEN / "rail-permutation.yaml", sim="analytic")
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas -> ImportError
    with pytest.raises(af.SpecError) as e:
        _ = res.collectives
    assert "pip install 'aifabric[data]'" in str(e.value) and "\n" not in str(e.value)
    assert res.summary["makespan_ns"] > 0  # the summary needs no pandas


def test_importing_the_api_imports_no_heavy_module():
    """``import aifabric`` and ``import aifabric.api`` stay light: no pandas, pydantic,
    pyarrow or duckdb until used."""
    code = ("import sys, aifabric, aifabric.api; heavy = [m for m in ('pandas', 'pydantic', "
            "'pyarrow', 'duckdb', 'ray', 'scipy', 'numba') if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]"


def test_every_public_name_resolves():
    for name in af.__all__:
        assert getattr(af, name) is not None, name
    assert {"simulate", "route", "plan", "goodput", "check", "load_scenario", "Result",
            "SimScenario", "CollectiveSpec", "JobSpec", "content_hash", "results"} <= set(
        af.__all__)


def test_docs_name_every_public_name():
    """docs/api.md documents every name `aifabric` exports."""
    text = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    missing = [n for n in af.__all__ if f"`{n}" not in text and f"af.{n}" not in text]
    assert not missing, missing


def test_a_fabric_of_another_spec_is_refused():
    """``fabric=`` skips the build, so it must be the scenario's: another spec (here one
    field of it overridden) is a SpecError before the run, not a silently wrong answer;
    routing overrides alone keep the fabric usable (test above)."""
    scn = af.load_scenario(SCEN / "rail-permutation.yaml")
    fab = af.build_fabric(scn.spec)
    other = scn.with_overrides({"spec.hosts.gpus": 4096})
    assert other.spec != scn.spec
    with pytest.raises(af.SpecError, match="fabric: built from another spec") as e:
        af.simulate(other, fabric=fab)
    assert "\n" not in str(e.value)
    with pytest.raises(af.SpecError, match="fabric: built from another spec"):
        af.route(other, fabric=fab)
    assert af.simulate(other, fabric=af.build_fabric(other.spec)).summary == \
        af.simulate(other).summary
