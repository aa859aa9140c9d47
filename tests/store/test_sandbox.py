"""``results query`` reaches the store only (issue 31, item 7): DuckDB reads no other file,
writes no file, installs and loads no extension, and a query cannot change the settings
that say so; each attempt is one line and exit 2, and ordinary queries still work."""

from __future__ import annotations

import pytest

pytest.importorskip("pandas")
pytest.importorskip("pyarrow")
pytest.importorskip("duckdb")

from aifabric.errors import SpecError
from aifabric.store import Store
from tests.store.rows import row


@pytest.fixture
def store(tmp_path):
    root = tmp_path / "results"
    st = Store(root, compact_every=0)
    for i in range(3):
        st.write_run(row(f"r{i}", makespan_ns=float(i)), {"links": {"v": [1, 2]}})
    return root


def _escapes(tmp_path, root):
    secret = tmp_path / "secret.csv"
    secret.write_text("a,b\n1,2\n")
    inside = root / "runs" / "sweep=s1" / "evil.parquet"
    return [
        f"SELECT * FROM read_csv('{secret}')",
        "SELECT * FROM read_csv('/etc/passwd')",
        "SELECT * FROM read_text('/etc/hostname')",
        f"SELECT * FROM read_parquet('{root}/../secret.csv')",
        f"COPY (SELECT * FROM runs) TO '{tmp_path / 'out.csv'}'",
        f"COPY (SELECT 1 AS run_id) TO '{inside}' (FORMAT parquet)",
        "INSTALL httpfs",
        "LOAD httpfs",
        "SELECT * FROM read_parquet('https://example.invalid/x.parquet')",
        f"ATTACH '{tmp_path / 'x.db'}'",
        f"EXPORT DATABASE '{tmp_path / 'exp'}'",
        "SET enable_external_access = true",
        "PRAGMA threads = 1",
        "CALL pragma_version()",
        "CREATE TABLE t AS SELECT 1",
        "SELECT 1; COPY (SELECT 1) TO 'out.csv'",
    ]


def test_each_escape_is_refused_in_one_line_with_exit_2_and_nothing_written(
        cli, store, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    escapes = _escapes(tmp_path, store)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    for sql in escapes:
        r = cli("results", "query", sql, "--store", store)
        assert r.code == 2, (sql, r.out, r.err)
        lines = r.err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: sql: "), (sql, r.err)
        assert "Traceback" not in r.err and "a,b" not in r.out and "root:" not in r.out
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


def test_the_refusals_say_why(store, tmp_path):
    st = Store(store)
    with pytest.raises(SpecError, match="a COPY statement is refused: queries read the "
                       "store only"):
        st.query(f"COPY (SELECT 1) TO '{tmp_path / 'o.csv'}'")
    with pytest.raises(SpecError, match="2 statements; allowed: one query"):
        st.query("SELECT 1; SELECT 2")
    with pytest.raises(SpecError, match="disabled by configuration"):
        st.query("SELECT * FROM read_csv('/etc/passwd')")


def test_the_connection_is_locked_and_reads_the_store(store):
    con = Store(store).connect()
    try:
        settings = dict(con.execute(
            "SELECT name, value FROM duckdb_settings() WHERE name IN ("
            "'enable_external_access', 'autoinstall_known_extensions', "
            "'autoload_known_extensions', 'lock_configuration')").fetchall())
        assert settings == {"enable_external_access": "false",
                            "autoinstall_known_extensions": "false",
                            "autoload_known_extensions": "false",
                            "lock_configuration": "true"}
        assert con.execute("SELECT count(*) FROM links").fetchall() == [(6,)]
    finally:
        con.close()


@pytest.mark.parametrize("sql", [
    "SELECT run_id, makespan_ns FROM runs ORDER BY run_id",
    "WITH t AS (SELECT * FROM runs) SELECT run_id, makespan_ns FROM t ORDER BY run_id",
    "EXPLAIN SELECT * FROM runs",
    "DESCRIBE runs",
    "SUMMARIZE runs",
    "SHOW TABLES",
    "SELECT run_id, sum(v) AS v FROM links GROUP BY run_id ORDER BY run_id",
])
def test_ordinary_queries_still_work(cli, store, sql):
    r = cli("results", "query", sql, "--store", store, "--format", "csv")
    assert r.code == 0, r.err
    if "ORDER BY run_id" in sql:
        assert [ln.split(",")[0] for ln in r.out.splitlines()[1:]] == ["r0", "r1", "r2"]
