"""``aifabric simulate --store DIR [--sweep NAME]``: the run appended to a results store,
once, under its content hash; bad store options fail before the run."""

from __future__ import annotations

import math

import pytest

import aifabric as af
from tests.conftest import EXAMPLES

pytest.importorskip("duckdb")

SCEN = EXAMPLES / "scenarios" / "rail-permutation.yaml"


def test_simulate_appends_its_run_once(cli, tmp_path):
    store = tmp_path / "results"
    for _ in range(2):  # the same run twice: one row (the run id is the content hash)
        r = cli("simulate", SCEN, "--store", store)
        assert r.code == 0, r.err
    assert cli("simulate", SCEN, "--store", store, "--sweep", "mine").code == 0
    assert cli("simulate", SCEN, "--store", store, "--sim", "analytic").code == 0
    rows = af.results(store=store)
    scn = af.load_scenario(SCEN)
    res = af.simulate(scn)
    want = af.content_hash(scn)
    assert sorted(zip(rows["sweep"], rows["run_id"], rows["sim"], strict=True)) == sorted([
        ("adhoc", want, "flow"), ("mine", want, "flow"),
        ("adhoc", af.content_hash(scn.with_overrides({"sim": "analytic"})), "analytic")])
    row = rows[(rows["sweep"] == "adhoc") & (rows["sim"] == "flow")].iloc[0]
    assert row["status"] == "ok" and row["point"] == 0 and row["overrides"] == "{}"
    assert row["seed"] == scn.seed
    figures = res.figures()
    assert figures["makespan_ns"] == pytest.approx(res.summary["makespan_ns"])
    for k, v in figures.items():
        if isinstance(v, float) and not math.isnan(v):
            assert row[k] == pytest.approx(v, rel=1e-12), k
        elif v is not None and not isinstance(v, float):
            assert row[k] == v, k
    from aifabric.store import Store

    n = Store(store).query(f"SELECT count(*) AS n FROM links WHERE run_id = '{want}' "
                           "AND sweep = 'adhoc'")["n"][0]
    assert n == len(res.links) > 0


def test_result_to_store_is_what_the_cli_stores(tmp_path):
    res = af.simulate(SCEN)
    a, b = tmp_path / "a", tmp_path / "b"
    assert res.to_store(a) == res.to_store(b) == res.run_id
    ra, rb = af.results(store=a), af.results(store=b)
    assert ra.equals(rb) and len(ra) == 1


@pytest.mark.parametrize(("args", "what"), [
    (["--sweep", "x"], "--sweep: needs --store"),
    (["--store", "{store}", "--sweep", "../up"], "--sweep: '../up' is not a valid name"),
    (["--store", "{file}"], "--store: "),
])
def test_bad_store_options_fail_before_the_run(cli, tmp_path, args, what):
    file = tmp_path / "plain.txt"
    file.write_text("x")
    store = tmp_path / "results"
    args = [a.format(store=store, file=file) for a in args]
    r = cli("simulate", SCEN, *args)
    assert r.code == 2 and what in r.err and len(r.err.strip().splitlines()) == 1, r.err
    assert not store.exists() and file.read_text() == "x"
