"""benchmarks/bench_htsim_peer.py: its argument handling and the readers of both sides'
outputs (no simulator run: the timings are the benchmark's, not a test's)."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "bench_htsim_peer.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_htsim_peer", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize(("hosts", "k"), [(16, 4), (54, 6), (128, 8), (432, 12), (1024, 16),
                                          (2000, 20)])
def test_full_fat_trees(bench, hosts, k):
    assert bench.fat_tree_k(hosts) == k
    assert f"k: {k}," in bench.scenario(hosts, 1.0)
    assert f"count: {hosts}," in bench.scenario(hosts, 1.0)


@pytest.mark.parametrize("hosts", [0, 2, 17, 100, 1000, 1025])
def test_other_host_counts_are_refused(bench, hosts):
    with pytest.raises(ValueError, match="not a full 3-tier fat-tree"):
        bench.fat_tree_k(hosts)


def test_host_counts_sorted_unique(bench):
    assert bench.host_counts("1024, 128,128,432") == [128, 432, 1024]
    for bad in ("", "a,b", "128,100"):
        with pytest.raises(ValueError):
            bench.host_counts(bad)


def test_bad_arguments_exit_2(bench, capsys):
    for argv in (["--hosts", "100"], ["--htsim", "/nonexistent/htsim_roce"],
                 ["--reps", "0"], ["--mb", "0"]):
        with pytest.raises(SystemExit) as e:
            bench.main(argv)
        assert e.value.code == 2, argv
    assert "not a full 3-tier fat-tree" in capsys.readouterr().err


def test_find_htsim(bench, tmp_path, monkeypatch):
    monkeypatch.delenv("HTSIM", raising=False)
    assert bench.find_htsim(None) is None
    exe = tmp_path / "htsim_roce"
    exe.write_text("#!/bin/sh\n")
    with pytest.raises(ValueError, match="no executable htsim_roce"):
        bench.find_htsim(str(exe))  # not executable
    os.chmod(exe, 0o755)
    assert bench.find_htsim(str(exe)) == exe.resolve()
    assert bench.find_htsim(str(tmp_path)) == exe.resolve()  # the folder, as run.sh's
    monkeypatch.setenv("HTSIM", str(tmp_path))
    assert bench.find_htsim(None) == exe.resolve()


def test_readers_of_both_outputs(bench, tmp_path):
    out = ("Nodes: 128 Connections: 128 Triggers: 0 Failures: 0\n"
           "Flow Roce_67_65 3181 finished at 84.53 total bytes 1007930\n"
           "Flow Roce_87_85 3241 finished at 84.651 total bytes 1007930\n"
           "..........|........Done\nNew: 0 Rtx: 0\n")
    assert bench.htsim_finished(out) == [84.53, 84.651]
    fct = tmp_path / "packet_fct.csv"
    fct.write_text("qp,completion_ns,fct_ns\n0,84530,80000\n1,,\n2,nan,nan\n3,100000.5,9\n")
    assert bench.ours_finished(fct) == [84.53, 100.0005]
    d = bench.dist([5.0, 1.0, 3.0, 2.0, 4.0])
    assert (d["n"], d["min"], d["p50"], d["max"]) == (5, 1.0, 3.0, 5.0)
    assert bench.dist([]) == {"n": 0}


def test_memory_per_host_is_the_slope(bench):
    rows = {128: {"peak_mb": 200.0}, 432: {"peak_mb": 250.0}, 1024: {"peak_mb": 375.0}}
    assert bench.per_host(rows) == pytest.approx(175.0 * 1024 / 896)
    assert bench.per_host({128: {"peak_mb": 1.0}}) is None
