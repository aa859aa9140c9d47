"""``aifabric results query|list|compact``: rows printed as a table (saying how many are
shown), CSV or JSON; the store from --store, AIFABRIC_STORE or ./results; bad SQL, a
missing store and a bad name are one line and exit 2."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("pandas")
pytest.importorskip("pyarrow")
pytest.importorskip("duckdb")

from aifabric.store import Store
from tests.store.rows import row


@pytest.fixture
def store(tmp_path):
    root = tmp_path / "results"
    st = Store(root, compact_every=0)
    for i in range(60):
        st.write_run(row(f"r{i:02d}", makespan_ns=float(i), policy="ecmp" if i % 2 else "spray"),
                     {"links": {"v": np.arange(2)}})
    st.write_run(row("f1", status="failed"))
    st.write_run(row("o1", sweep="other", makespan_ns=1.0))
    return root


def test_query_prints_a_table_and_says_how_many_rows_it_shows(cli, store, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    r = cli("results", "query", "SELECT run_id, makespan_ns FROM runs WHERE sweep = 's1' "
            "AND status = 'ok' ORDER BY run_id", "--store", store)
    assert r.code == 0, r.err
    assert "r00" in r.out and "r49" in r.out and "r50" not in r.out
    assert "50 of 60 rows shown; all with --limit 60" in r.out
    r = cli("results", "query", "SELECT policy, count(*) AS n FROM runs WHERE sweep = 's1' "
            "AND status = 'ok' GROUP BY policy ORDER BY policy", "--store", store)
    assert r.code == 0 and "rows shown" not in r.out
    assert [ln.split()[1:4:2] for ln in r.out.splitlines() if "ecmp" in ln or "spray" in ln] \
        == [["ecmp", "30"], ["spray", "30"]]


def test_query_csv_and_json_print_every_row(cli, store):
    r = cli("results", "query", "SELECT run_id, makespan_ns FROM runs WHERE sweep = 's1' "
            "ORDER BY run_id", "--store", store, "--format", "csv")
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    assert lines[0] == "run_id,makespan_ns" and len(lines) == 62  # 60 ok + f1 + header
    r = cli("results", "query", "SELECT run_id, makespan_ns, error FROM runs WHERE "
            "sweep = 's1' ORDER BY run_id", "--store", store, "--format", "json",
            "--limit", "3")
    assert r.code == 0, r.err
    assert json.loads(r.out) == [{"run_id": "f1", "makespan_ns": None, "error": "boom"},
                                 {"run_id": "r00", "makespan_ns": 0.0, "error": None},
                                 {"run_id": "r01", "makespan_ns": 1.0, "error": None}]
    assert "3 of 61 rows shown" in r.err


def test_json_writes_nan_and_infinities_as_null_and_csv_quotes_text(cli, store):
    r = cli("results", "query", "SELECT 'inf'::DOUBLE AS a, '-inf'::DOUBLE AS b, "
            "'nan'::DOUBLE AS c, 'x, \"y\"' AS t", "--store", store, "--format", "json")
    assert r.code == 0, r.err
    assert json.loads(r.out) == [{"a": None, "b": None, "c": None, "t": 'x, "y"'}]
    r = cli("results", "query", "SELECT [1, 2] AS l, [1.5, 'nan'::DOUBLE] AS m", "--store",
            store, "--format", "json")
    assert r.code == 0, r.err
    assert json.loads(r.out) == [{"l": [1, 2], "m": [1.5, None]}]
    r = cli("results", "query", "SELECT 'x, \"y\"' AS t, 1 AS n", "--store", store,
            "--format", "csv")
    assert r.code == 0, r.err
    assert r.out.splitlines() == ["t,n", '"x, ""y""",1']


def test_list_and_compact(cli, store, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    r = cli("results", "list", "--store", store)
    assert r.code == 0, r.err
    rows = {ln.split()[1]: ln.split()[3:6:2] for ln in r.out.splitlines()
            if ln.startswith("│")}
    assert rows == {"other": ["1", "0"], "s1": ["60", "1"]}
    assert "tables: links" in r.out
    r = cli("results", "compact", "--store", store, "--sweep", "s1")
    assert r.code == 0, r.err
    assert "121 files merged; 61 runs" in r.out  # 61 rows + 60 tables
    assert len(list((store / "runs/sweep=s1").iterdir())) == 1
    assert len(list((store / "runs/sweep=other").iterdir())) == 1  # left as it was


def test_the_store_comes_from_the_environment_else_results(cli, store, monkeypatch):
    monkeypatch.setenv("AIFABRIC_STORE", str(store))
    r = cli("results", "query", "SELECT count(*) AS n FROM runs", "--format", "csv")
    assert r.code == 0 and r.out.splitlines()[1] == "62"
    monkeypatch.delenv("AIFABRIC_STORE")
    monkeypatch.chdir(store.parent)  # ./results
    r = cli("results", "query", "SELECT count(*) AS n FROM runs", "--format", "csv")
    assert r.code == 0 and r.out.splitlines()[1] == "62"


@pytest.mark.parametrize(("args", "field"), [
    (("query", "SELECT nope FROM runs"), "sql"),
    (("query", "SELEC"), "sql"),
    (("query", "SELECT * FROM no_such_table"), "sql"),
    (("compact", "--sweep", "../up"), "--sweep"),
    (("compact", "--sweep", "absent"), "sweep"),
])
def test_bad_input_is_one_line_and_exit_2(cli, store, args, field):
    r = cli("results", *args, "--store", store)
    assert r.code == 2
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {field}: "), r.err
    assert "Traceback" not in r.err


@pytest.mark.parametrize("cmd", [("query", "SELECT 1"), ("list",), ("compact",)])
def test_a_missing_store_is_one_line_and_exit_2(cli, tmp_path, cmd):
    r = cli("results", *cmd, "--store", tmp_path / "nowhere")
    assert r.code == 2
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and "does not exist" in lines[0], r.err
    assert not (tmp_path / "nowhere").exists()


@pytest.mark.parametrize("missing", ["duckdb", "pyarrow"])
def test_a_missing_extra_is_one_line_naming_it(cli, store, monkeypatch, missing):
    monkeypatch.setitem(sys.modules, missing, None)  # import raises ImportError
    r = cli("results", "list", "--store", store)
    assert r.code == 2
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and missing in lines[0], r.err
    assert "pip install 'aifabric[data]'" in lines[0]


def test_importing_the_store_imports_no_heavy_library():
    code = ("import sys, aifabric.store; from aifabric.store import summary_row, Store; "
            "print(sorted(m for m in ('pandas', 'pyarrow', 'duckdb') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    assert out.strip() == "[]"
