"""A damaged file does not break the store (issue 31, item 1): a truncated, emptied or
garbled Parquet file (a per-run file or a compacted one, of the rows or of a table) is
named in one warning line, moved to quarantine/ with a note (never deleted), and query,
list, compact, sweep report and sweep --resume go on with every other row; ``results
verify`` lists the damaged files (exit 1), --quarantine moves them."""

from __future__ import annotations

import csv
import json

import pytest

pytest.importorskip("pandas")
pytest.importorskip("pyarrow")
pytest.importorskip("duckdb")

import pyarrow.parquet as pq

from aifabric.store import QUARANTINE, Store
from tests.store.rows import row

PART_RUNS = [f"r{i}" for i in range(6)]  # compacted into one part file
LOOSE_RUNS = ["r6", "r7", "r8"]  # one file each


def _garble(b: bytes, at: int) -> bytes:
    out = bytearray(b)
    for j in range(at, min(at + 16, len(out))):
        out[j] ^= 0x5A
    return bytes(out)


def _footer_start(b: bytes) -> int:
    return len(b) - 8 - int.from_bytes(b[-8:-4], "little")


DAMAGE = {
    "truncated": lambda b: b[: len(b) // 2],
    "zeroed": lambda b: b"",
    "garbled-data": lambda b: _garble(b, 4),  # the first page header: the ends intact
    "garbled-footer": lambda b: _garble(b, _footer_start(b)),  # its thrift, the ends intact
}
#: target -> (folder, file prefix, runs whose rows of that folder the damage takes)
TARGETS = {
    "run-file": ("runs/sweep=s1", "r7.", ["r7"]),
    "runs-part": ("runs/sweep=s1", "part-", PART_RUNS),
    "table-file": ("tables/links/sweep=s1", "r7.", ["r7"]),
    "table-part": ("tables/links/sweep=s1", "part-", PART_RUNS),
}


def _make(root):
    st = Store(root, compact_every=0)
    for rid in PART_RUNS:
        st.write_run(row(rid, makespan_ns=float(rid[1:])), {"links": {"v": [1, 2]}},
                     timing={"wall_s": 1.0})
    st.compact()
    for rid in LOOSE_RUNS:
        st.write_run(row(rid, makespan_ns=float(rid[1:])), {"links": {"v": [1, 2]}})
    st.write_run(row("o1", sweep="other", makespan_ns=1.0))
    return root


def _damage(root, target, how):
    folder, prefix, lost = TARGETS[target]
    (path,) = [p for p in (root / folder).iterdir() if p.name.startswith(prefix)]
    bad = DAMAGE[how](path.read_bytes())
    path.write_bytes(bad)
    return path, bad, lost


def _runs(root):
    df = Store(root).query("SELECT run_id FROM runs WHERE sweep = 's1' ORDER BY run_id")
    return list(df["run_id"])


def _link_runs(root):
    df = Store(root).query("SELECT DISTINCT run_id FROM links ORDER BY run_id")
    return list(df["run_id"])


def _check_quarantined(root, path, bad, err):
    rel = path.relative_to(root)
    moved = root / QUARANTINE / rel
    assert not path.exists() and moved.read_bytes() == bad  # moved, never deleted
    note = json.loads((moved.parent / (moved.name + ".note.json")).read_text())
    assert note["file"] == rel.as_posix() and note["reason"] and note["size_bytes"] == len(bad)
    assert note["quarantined_at"].endswith("Z")
    warnings = [ln for ln in err.splitlines() if ln.startswith("warning:")]
    assert len(warnings) == 1 and str(rel) in warnings[0] and QUARANTINE in warnings[0]
    assert "Traceback" not in err


@pytest.mark.parametrize("how", list(DAMAGE))
@pytest.mark.parametrize("target", list(TARGETS))
def test_a_query_sets_the_damaged_file_aside_and_answers_with_the_rest(tmp_path, target, how,
                                                                       capsys):
    root = _make(tmp_path / "results")
    path, bad, lost = _damage(root, target, how)
    capsys.readouterr()
    every = sorted(PART_RUNS + LOOSE_RUNS)
    if target.startswith("run"):
        assert _runs(root) == [r for r in every if r not in lost]
        assert _link_runs(root) == [r for r in every if r not in lost]
    else:
        assert _link_runs(root) == [r for r in every if r not in lost]
        assert _runs(root) == every
    _check_quarantined(root, path, bad, capsys.readouterr().err)
    assert Store(root).query("SELECT run_id FROM runs WHERE sweep = 'other'")[
        "run_id"].tolist() == ["o1"]
    assert Store(root).verify() == []  # the store is sound again


@pytest.mark.parametrize("cmd", [("query", "SELECT count(*) AS n FROM runs"), ("list",),
                                 ("compact",)])
@pytest.mark.parametrize("target", ["run-file", "runs-part"])
def test_the_results_commands_keep_working(cli, tmp_path, cmd, target):
    root = _make(tmp_path / "results")
    path, bad, lost = _damage(root, target, "truncated")
    r = cli("results", *cmd, "--store", root)
    assert r.code == 0, r.err
    _check_quarantined(root, path, bad, r.err)
    left = 9 - len(lost)
    if cmd[0] == "list":
        assert f"│ s1    │ {left:>7} │" in r.out or f" {left} " in r.out, r.out
    assert _runs(root) == sorted(set(PART_RUNS + LOOSE_RUNS) - set(lost))


def test_verify_lists_then_quarantines(cli, tmp_path):
    root = _make(tmp_path / "results")
    r = cli("results", "verify", "--store", root)
    assert r.code == 0, r.err
    assert "files checked, 0 damaged" in r.out
    paths = [_damage(root, t, h)[0] for t, h in
             (("run-file", "zeroed"), ("table-part", "garbled-data"))]
    r = cli("results", "verify", "--store", root)
    assert r.code == 1
    listed = [ln for ln in r.out.splitlines() if ln.startswith("damaged: ")]
    assert [ln.split(": ")[1] for ln in listed] == sorted(
        str(p.relative_to(root)) for p in paths)
    assert "2 damaged" in r.out and "--quarantine" in r.out
    assert all(p.exists() for p in paths)  # listing moves nothing
    r = cli("results", "verify", "--store", root, "--quarantine")
    assert r.code == 1 and r.out.count("moved to quarantine/") == 2
    assert not any(p.exists() for p in paths)
    r = cli("results", "verify", "--store", root)
    assert r.code == 0 and "0 damaged; 2 in quarantine/" in r.out


@pytest.mark.parametrize("store", ["nowhere", "a-file"])
def test_verify_of_no_store_is_one_line_and_exit_2(cli, tmp_path, store):
    (tmp_path / "a-file").write_text("x")
    r = cli("results", "verify", "--store", tmp_path / store)
    assert r.code == 2
    (line,) = r.err.strip().splitlines()
    assert line.startswith("error: store: ")


def test_run_ids_leave_out_a_damaged_run_file(tmp_path, capsys):
    root = _make(tmp_path / "results")
    _damage(root, "run-file", "truncated")
    st = Store(root)
    assert st.run_ids("s1") == set(PART_RUNS + LOOSE_RUNS) - {"r7"}
    assert len(st.quarantined) == 1


def _split_part(store, sweep):
    """The sweep's compacted rows back into one file per run (as before compaction)."""
    d = store / "runs" / f"sweep={sweep}"
    (part,) = d.glob("part-*.parquet")
    t = pq.read_table(part)
    for i, rid in enumerate(t["run_id"].to_pylist()):
        pq.write_table(t.slice(i, 1), d / f"{rid}.{t['status'][i].as_py()}.parquet")
    part.unlink()
    return sorted(t["run_id"].to_pylist())


def test_sweep_report_and_resume_after_a_damaged_file(cli, tmp_path):
    from tests.sweep.conftest import write_sweep

    sweep = write_sweep(tmp_path, "seeds", "grid: {}\nrepeat: {seeds: 4, fields: "
                        "[collectives.0.seed]}\nfigures: [makespan_ns]\n")
    store = tmp_path / "store"
    assert cli("sweep", "run", sweep, "--out", store).code == 0
    before = Store(store).query("SELECT run_id, makespan_ns FROM runs ORDER BY run_id")
    ids = _split_part(store, "seeds")
    assert len(ids) == 4
    lost = store / "runs" / "sweep=seeds" / f"{ids[1]}.ok.parquet"
    lost.write_bytes(lost.read_bytes()[:100])
    r = cli("sweep", "report", store, "--out", tmp_path / "report")
    assert r.code == 0, r.err
    assert "warning: store: " in r.err and ids[1] in r.err
    with open(tmp_path / "report" / "rows.csv") as fh:
        assert sorted(x["run_id"] for x in csv.DictReader(fh)) == [ids[0], *ids[2:]]
    r = cli("sweep", "run", sweep, "--out", store, "--resume")
    assert r.code == 0, r.err
    after = Store(store).query("SELECT run_id, makespan_ns FROM runs ORDER BY run_id")
    assert after.equals(before)  # the lost point ran again, the same
    assert (store / QUARANTINE / "runs" / "sweep=seeds" / lost.name).is_file()


def test_resume_reruns_a_point_whose_file_is_damaged_before_any_query(tmp_path):
    from aifabric.sweep import load_sweep, run_sweep
    from tests.sweep.conftest import write_sweep

    sw = load_sweep(write_sweep(tmp_path, "seeds", "grid: {}\nrepeat: {seeds: 3, fields: "
                                "[collectives.0.seed]}\n"))
    store = tmp_path / "store"
    run_sweep(sw, store, jobs=1)
    ids = _split_part(store, "seeds")
    (store / "runs" / "sweep=seeds" / f"{ids[0]}.ok.parquet").write_bytes(b"")
    run = run_sweep(sw, store, jobs=1, resume=True)
    assert (run.skipped, run.ok, run.failed) == (2, 1, 0)
    assert Store(store).run_ids("seeds") == set(ids)
