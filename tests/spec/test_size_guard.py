"""The size guard: a spec or scenario too big for the memory limit is refused with one
line before anything fabric-sized is allocated, and its closed-form estimate agrees with
what the builders and the workload compiler really make."""

from __future__ import annotations

import tracemalloc
from dataclasses import fields
from pathlib import Path

import pytest
import yaml

from aifabric import load_spec, spec_from_dict
from aifabric.errors import SpecError
from aifabric.guard import (
    estimate_fabric,
    fabric_bytes,
    memory_limit,
    parse_size,
    set_limit,
)
from aifabric.routing.scenario import load_scenario
from aifabric.sim.run import compile_workload, gpu_pool
from aifabric.sim.scenario import SimScenario
from aifabric.topology import NodeKind, build_fabric
from aifabric.workload.estimate import estimate_workload
from tests._require import skip_allowed
from tests.conftest import EXAMPLES
from tests.topology.test_builders import SMALL

HPN = EXAMPLES / "hpn-pod.yaml"


@pytest.fixture(autouse=True)
def _automatic_limit():
    """Every test starts (and leaves) with the automatic limit."""
    set_limit(None)
    yield
    set_limit(None)


def _ten_million(tmp_path: Path) -> Path:
    doc = yaml.safe_load(HPN.read_text())
    doc["hosts"].pop("count")
    doc["hosts"]["gpus"] = 10_000_000
    p = tmp_path / "hpn-10m.yaml"
    p.write_text(yaml.safe_dump(doc))
    return p


def _never_build(monkeypatch):
    """Make any build of a fabric fail the test: the guard must refuse first."""
    def boom(spec):
        raise AssertionError(f"built a fabric of {spec.hosts.gpus or spec.hosts.count}")
    monkeypatch.setattr("aifabric.topology.build_fabric", boom)


# ------------------------------------------------------------------ refusing
@pytest.mark.parametrize("command", [["plan"], ["export"], ["build", "--out", "OUT"]])
def test_ten_million_gpus_are_refused_before_building(cli, tmp_path, monkeypatch, command):
    """hosts.gpus: 10,000,000 on hpn: one line naming the predicted size, the limit and
    --max-memory, exit 2, and no fabric built (a build would need tens of GB)."""
    _never_build(monkeypatch)
    spec = _ten_million(tmp_path)
    args = [a.replace("OUT", str(tmp_path / "out")) for a in command]
    r = cli(args[0], str(spec), *args[1:], "--max-memory", "8G")
    assert r.code == 2, r.err
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.err, r.err
    msg = lines[0]
    assert "hosts.gpus" in msg and "--max-memory" in msg
    assert "10,625,024 GPUs" in msg  # 10M active + 8 backups in each of 9,766 segments
    assert "8.0 GiB" in msg  # the limit in force
    assert not (tmp_path / "out").exists()


def test_ten_million_gpus_refused_under_the_automatic_limit(cli, tmp_path, monkeypatch):
    """Without --max-memory the limit is this machine's free memory: 10M GPUs need more
    than any test machine has (the estimate is ~26 GB)."""
    _never_build(monkeypatch)
    limit, _ = memory_limit()
    est = estimate_fabric(load_spec(_ten_million(tmp_path)))
    if limit is None or est.peak_bytes <= limit:
        skip_allowed("more free memory than the case needs",
                     f"this machine has {limit} bytes free, more than {est.peak_bytes}")
    r = cli("plan", str(_ten_million(tmp_path)))
    assert r.code == 2 and "--max-memory" in r.err and "free on this machine" in r.err


def test_max_memory_lowers_and_raises_the_limit(cli, tmp_path):
    """A tiny --max-memory refuses the small example; a larger one lets it through; 0 is
    no limit; a bad size is one line naming the option."""
    est = estimate_fabric(load_spec(HPN))
    below = f"{est.peak_bytes // 2 // 1024}K"
    above = f"{est.peak_bytes * 2 // 1024}K"
    r = cli("plan", str(HPN), "--json", "--no-bisection", "--max-memory", below)
    assert r.code == 2 and "--max-memory" in r.err and "51,368 nodes" in r.err, r.err
    r = cli("plan", str(HPN), "--json", "--no-bisection", "--max-memory", above)
    assert r.code == 0, r.err
    r = cli("plan", str(HPN), "--json", "--no-bisection", "--max-memory", "0")
    assert r.code == 0, r.err
    # the option lasts one command: the next one without it has the automatic limit
    assert cli("plan", str(HPN), "--max-memory", "1M").code == 2
    assert cli("plan", str(HPN), "--json", "--no-bisection").code == 0
    r = cli("plan", str(HPN), "--max-memory", "lots")
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1
    assert "--max-memory" in r.err and "8G" in r.err


@pytest.mark.parametrize("command", [["plan"], ["export"], ["route"], ["simulate"],
                                     ["compare"], ["build"], ["check"], ["demo"],
                                     ["lab", "up"]])
def test_every_command_that_builds_or_simulates_has_the_option(cli, command):
    r = cli(*command, "--help")
    assert r.code == 0 and "--max-memory" in r.out, r.out


def test_environment_variable_sets_the_default_limit(cli, monkeypatch):
    monkeypatch.setenv("AIFABRIC_MAX_MEMORY", "1M")
    r = cli("plan", str(HPN))
    assert r.code == 2 and "AIFABRIC_MAX_MEMORY" in r.err and "--max-memory" in r.err
    # the option wins over the environment
    r = cli("plan", str(HPN), "--json", "--no-bisection", "--max-memory", "4G")
    assert r.code == 0, r.err


@pytest.mark.parametrize("text,value", [("8G", 8 << 30), ("512M", 512 << 20),
                                        ("1.5GiB", 3 << 29), ("2GB", 2 * 10**9),
                                        ("1000", 1000), ("0", 0)])
def test_sizes_parse(text, value):
    assert parse_size(text) == value


@pytest.mark.parametrize("text", ["", "G", "-1G", "8X", "eight", "1e400"])
def test_bad_sizes_are_one_problem(text):
    with pytest.raises(SpecError) as exc:
        parse_size(text)
    assert exc.value.problems[0].path == "--max-memory"


def _alltoall_scenario(tmp_path: Path, gpus: int, spec: str | dict = str(HPN),
                       sim: str = "flow") -> Path:
    p = tmp_path / f"a2a-{gpus}.yaml"
    p.write_text(yaml.safe_dump({
        "name": "a2a", "spec": spec, "sim": sim,
        "collectives": [{"op": "alltoall", "size_bytes": "1GiB", "gpus": gpus}]}))
    return p


def test_alltoall_on_15360_gpus_is_refused_before_compiling(cli, tmp_path, monkeypatch):
    """All-to-All on the whole HPN pod: 235,914,240 transfers; refused in one line before
    the DAG is compiled or routed."""
    def boom(*a, **k):
        raise AssertionError("routed")
    monkeypatch.setattr("aifabric.sim.run.route_dag", boom)
    monkeypatch.setattr("aifabric.sim.run.add_collective", boom)
    r = cli("simulate", str(_alltoall_scenario(tmp_path, 15360)), "--max-memory", "16G")
    assert r.code == 2, r.err
    assert len(r.err.strip().splitlines()) == 1, r.err
    assert "235,914,240 transfers" in r.err  # 15,360 x 15,359
    assert "collectives[0]" in r.err and "--max-memory" in r.err


def test_small_fabric_with_a_big_workload_is_refused_by_its_flows(cli, tmp_path, monkeypatch):
    """The fabric fits the limit, the transfers do not: refused before routing."""
    def boom(*a, **k):
        raise AssertionError("routed")
    spec = {**SMALL["fat_tree"], "name": "ft"}  # 80 GPUs
    scn = _alltoall_scenario(tmp_path, 80, spec)
    assert cli("simulate", str(scn), "--max-memory", "1G").code == 0
    monkeypatch.setattr("aifabric.sim.run.route_dag", boom)
    r = cli("simulate", str(scn), "--max-memory", "2M")
    assert r.code == 2 and "6,320 transfers" in r.err and "--max-memory" in r.err, r.err


def test_route_refuses_traffic_too_big(cli, tmp_path, monkeypatch):
    def boom(*a, **k):
        raise AssertionError("flows built")
    p = tmp_path / "route.yaml"
    p.write_text(yaml.safe_dump({"name": "r", "spec": str(HPN),
                                 "traffic": [{"pattern": "all_to_all", "gpus": "all"}]}))
    monkeypatch.setattr("aifabric.routing.traffic.build_traffic", boom)
    r = cli("route", str(p), "--max-memory", "16G")
    assert r.code == 2 and "235,914,240 connections" in r.err and "traffic.0" in r.err, r.err


def test_memory_error_is_one_line(cli, monkeypatch):
    """Whatever the guard misses: a MemoryError is one line and exit 2, no traceback."""
    def oom(*a, **k):
        raise MemoryError
    monkeypatch.setattr("aifabric.cli.plan.plan_fabric", oom)
    r = cli("plan", str(HPN))
    assert r.code == 2
    assert r.err.strip().splitlines() == [r.err.strip()] and "out of memory" in r.err
    assert "Traceback" not in r.err


# ------------------------------------------------------------------ the estimates
def _specs():
    out = [(p.stem, load_spec(p)) for p in sorted(EXAMPLES.glob("*.yaml"))]
    out += [(k, spec_from_dict({**d, "name": k.replace("_", "-")})) for k, d in SMALL.items()]
    return out


SPECS = _specs()


@pytest.mark.parametrize("name,spec", SPECS, ids=[n for n, _ in SPECS])
def test_fabric_estimate_matches_the_build(name, spec):
    """Every example and a small fabric of every family: hosts and GPUs exact; nodes,
    links and switches within 25% and never below the real counts by more than that;
    the array bytes within 25%; the predicted peak at least the measured peak of the
    build (numpy allocations, traced). The build is traced the second time in this
    process: the first one also loads lazily imported modules and fills one-time caches,
    whose size depends on which test ran first (alone, the scheduled example's first
    build traced 482 KB against 251 KB for every later one)."""
    est = estimate_fabric(spec)
    build_fabric(spec)
    tracemalloc.start()
    try:
        f = build_fabric(spec)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    nodes = f.nodes
    assert est.hosts == int((nodes.kind == NodeKind.HOST).sum())
    assert est.gpus == int((nodes.kind == NodeKind.GPU).sum())
    for got, real in ((est.nodes, f.n_nodes), (est.links, f.n_links),
                      (est.switches, int(f.is_switch.sum()))):
        assert 0.75 * real <= got <= 1.25 * real, (name, got, real)
    real_bytes = sum(getattr(t, x.name).nbytes for t in (f.nodes, f.links) for x in fields(t))
    assert real_bytes == fabric_bytes(f)
    assert 0.75 * real_bytes <= est.array_bytes <= 1.25 * real_bytes
    assert est.peak_bytes >= peak, (name, est.peak_bytes, peak)


SCENARIOS = sorted(p for p in (EXAMPLES / "scenarios").glob("*.yaml")
                   if "\ngoodput:" not in p.read_text()  # aifabric goodput's
                   # a Chakra trace is sized by its reader as it decodes (its own guard,
                   # tests/workload/test_chakra.py), not by estimate_workload
                   and "\nworkload:" not in p.read_text())


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_workload_estimate_bounds_the_compiled_transfers(path):
    """Every example scenario: the predicted transfer rows are at least the compiled
    ones and at most twice as many."""
    scn = load_scenario(path, SimScenario)
    f = build_fabric(scn.spec)
    est = estimate_workload(scn, len(gpu_pool(f).node))
    real = compile_workload(scn, f).dag.n_transfers
    assert real <= est.rows <= max(2 * real, real + 4), (est.rows, real)


COLLECTIVES = [
    {"op": "allreduce", "algorithm": "ring", "channels": 4},
    {"op": "allreduce", "algorithm": "tree", "size_bytes": "256MiB"},
    {"op": "allreduce", "algorithm": "tree", "size_bytes": "1MiB"},
    {"op": "allreduce", "algorithm": "halving_doubling"},
    {"op": "allreduce", "algorithm": "hierarchical", "channels": 2},
    {"op": "reduce_scatter", "algorithm": "halving_doubling"},
    {"op": "allgather"},
    {"op": "broadcast", "size_bytes": "64MiB"},
    {"op": "broadcast", "size_bytes": "2GiB"},
    {"op": "alltoall"},
]
JOBS = [
    {"gpus": 64, "parallel": {"dp": 4, "tp": 4, "pp": 4}, "micro_batches": 3},
    {"gpus": 64, "parallel": {"dp": 8, "tp": 2, "pp": 4, "ep": 4}, "model": {"moe_every": 2,
                                                                           "layers": 8}},
    {"gpus": 64, "parallel": {"dp": 16, "tp": 4}, "dp_algorithm": "tree", "iterations": 2},
    {"gpus": 64, "parallel": {"dp": 16, "tp": 4}, "dp_algorithm": "halving_doubling"},
]


@pytest.mark.parametrize("entry", [("collectives", c) for c in COLLECTIVES]
                         + [("jobs", j) for j in JOBS], ids=lambda e: f"{e[0]}-{e[1]}")
def test_workload_estimate_bounds_every_algorithm(tmp_path, entry):
    """Collectives of every algorithm and jobs with TP/PP/EP/DP: the estimate is an upper
    bound of the compiled transfers, and not a loose one."""
    kind, body = entry
    body = {"size_bytes": "16MiB", "gpus": 64, **body} if kind == "collectives" else body
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump({"name": "s", "spec": str(HPN), kind: [body]}))
    scn = load_scenario(p, SimScenario)
    f = build_fabric(scn.spec)
    est = estimate_workload(scn, len(gpu_pool(f).node))
    real = compile_workload(scn, f).dag.n_transfers
    assert real <= est.rows <= 2.5 * real, (est.rows, real)


def _traced_run(scn, f) -> tuple:
    """Compile and simulate ``scn`` on ``f``: the workload and the traced peak bytes."""
    from aifabric.sim.run import simulate

    tracemalloc.start()
    try:
        wl = compile_workload(scn, f)
        simulate(scn, f, workload=wl)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return wl, peak


@pytest.mark.parametrize("sim", ["analytic", "flow"])
def test_workload_peak_is_at_most_the_prediction(tmp_path, sim):
    """The bytes per transfer row are calibrated: compiling, routing and simulating an
    All-to-All on 128 GPUs (16,256 transfers) peaks below the predicted bytes."""
    scn = load_scenario(_alltoall_scenario(tmp_path, 128, sim=sim), SimScenario)
    f = build_fabric(scn.spec)
    est = estimate_workload(scn, len(gpu_pool(f).node))
    wl, peak = _traced_run(scn, f)
    assert est.rows == wl.dag.n_transfers == 128 * 127
    assert peak <= est.peak_bytes, (peak, est.peak_bytes)


def test_route_peak_is_at_most_the_prediction(tmp_path):
    from aifabric.guard import estimate_traffic
    from aifabric.routing.scenario import run_scenario

    p = tmp_path / "route.yaml"
    p.write_text(yaml.safe_dump({"name": "r", "spec": str(HPN), "routing": {
        "qps_per_connection": 2}, "traffic": [{"pattern": "all_to_all", "gpus": "0:256"}]}))
    sc = load_scenario(p)
    f = build_fabric(sc.spec)
    est = estimate_traffic(sc.traffic, 15360, sc.policy.qps_per_connection)
    tracemalloc.start()
    try:
        run_scenario(sc, f)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert est.rows == 256 * 255 and est.qps == 2
    assert peak <= est.peak_bytes, (peak, est.peak_bytes)


def _sprayed_hpn(tmp_path: Path, gpus: int) -> Path:
    """All-to-All under spray, per transfer, on the HPN pod's design with 16 hosts per
    segment (every flow split over both planes' aggregation switches)."""
    spec = yaml.safe_load(HPN.read_text())
    spec["hosts"]["count"] = gpus // 8
    spec["topology"]["hosts_per_segment"] = 16
    p = tmp_path / f"spray-{gpus}.yaml"
    p.write_text(yaml.safe_dump({
        "name": "spray", "spec": spec, "routing": {"policy": "spray"}, "classes": "off",
        "collectives": [{"op": "alltoall", "size_bytes": "1GiB", "gpus": gpus}]}))
    return p


def test_sprayed_peak_is_at_most_the_prediction_with_sampled_arcs(tmp_path):
    """Under spray each flow is split over ~125 arcs on 256 GPUs of the HPN design (6.65
    under ECMP): the per-row calibration alone predicts less than the run's traced peak;
    with the sampled arcs per flow the prediction holds (the guard once let a 23.6 GB
    run through at 1,024 GPUs)."""
    from aifabric.sim.run import _sampled_entries

    scn = load_scenario(_sprayed_hpn(tmp_path, 256), SimScenario)
    f = build_fabric(scn.spec)
    pool = gpu_pool(f)
    arcs = _sampled_entries(scn, f, pool)
    assert arcs is not None and arcs > 50, arcs
    plain = estimate_workload(scn, len(pool.node))
    est = estimate_workload(scn, len(pool.node), arcs_per_flow=arcs)
    _, peak = _traced_run(scn, f)
    assert plain.peak_bytes < peak <= est.peak_bytes, (plain.peak_bytes, peak, est.peak_bytes)


def test_sprayed_run_refused_with_its_arcs_per_flow(cli, tmp_path):
    """The refusal of a per-transfer sprayed run says how wide each QP is spread."""
    r = cli("simulate", str(_sprayed_hpn(tmp_path, 1024)), "--max-memory", "8G")
    assert r.code == 2, r.err
    assert len(r.err.strip().splitlines()) == 1, r.err
    assert "1,047,552 transfers x 1 QP(s), each QP split over ~" in r.err, r.err


def test_sampled_arcs_leave_out_pairs_the_failures_cut_off(tmp_path):
    """A host down cuts its 8 GPUs off: the sampled pairs that touch them are left out
    (it is the run's to refuse them if it uses them), and the others still measure the
    spray's width, not the single-path calibration (None)."""
    from aifabric.sim.run import _sampled_entries

    p = _sprayed_hpn(tmp_path, 256)
    whole = load_scenario(p, SimScenario)
    f = build_fabric(whole.spec)
    pool = gpu_pool(f)
    d = yaml.safe_load(p.read_text())
    d["failures"] = [{"switch": "host-s00-h000"}]
    p.write_text(yaml.safe_dump(d))
    cut = load_scenario(p, SimScenario)
    full, part = _sampled_entries(whole, f, pool), _sampled_entries(cut, f, pool)
    assert full is not None and part is not None, (full, part)
    assert abs(part - full) <= 0.1 * full, (part, full)
