"""Chakra execution traces in: traces made by the package's own generator and writer
(``mlc-chakra``) run on real small fabrics through the flow simulator."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import cache
from pathlib import Path

import numpy as np
import pytest
import yaml

pytest.importorskip("chakra.schema.protobuf.et_def_pb2",
                    reason="needs the Python package mlc-chakra (the test extra)")

from chakra.schema.protobuf import et_def_pb2 as pb
from chakra.src.third_party.utils.protolib import encodeMessage

from aifabric import build_fabric
from aifabric.errors import SpecError
from aifabric.routing.scenario import scenario_from_dict
from aifabric.sim.run import compile_workload, simulate
from aifabric.sim.scenario import SimScenario
from aifabric.spec.load import spec_from_dict
from aifabric.workload.chakra import read_rank, read_trace

RAIL = {"name": "rail-4x8", "hosts": {"count": 4, "gpus_per_host": 8, "nics_per_host": 8,
                                      "port_gbps": 400},
        "topology": {"family": "rail"}}
HPN = {"name": "hpn-mini", "hosts": {"count": 32, "ports_per_nic": 2, "port_gbps": 200,
                                     "scaleup_gbps": 3200},
       "topology": {"family": "hpn", "planes": 2, "hosts_per_segment": 8,
                    "tor": {"model": "tomahawk5", "down_gbps": 200, "up_ports": 8,
                            "up_gbps": 400},
                    "agg": {"model": "tomahawk5", "down_ports": 32, "up_ports": 0},
                    "core": None}}


@cache
def _fabric(name: str):
    return build_fabric(spec_from_dict({"rail-4x8": RAIL, "hpn-mini": HPN}[name]))


def _scn(spec: dict, body: dict, base: Path | None = None) -> SimScenario:
    return scenario_from_dict({"name": "t", "spec": spec, **body}, base_dir=base,
                              model=SimScenario)


def _generate(tmp: Path, n: int, what: str, size: int) -> Path:
    """Run the package's generator functions (the ``chakra_generator`` microbenchmarks)
    in ``tmp``; returns the trace's path prefix."""
    code = ("import sys; from chakra.src.generator import generator as g; "
            f"g.{what}({n}, {size})")
    subprocess.run([sys.executable, "-c", code], cwd=tmp, check=True, timeout=120)
    return tmp


def _attr(name: str, **kw) -> pb.AttributeProto:
    return pb.AttributeProto(name=name, **kw)


def _write(folder: Path, prefix: str, ranks: dict[int, list[pb.Node]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for r, nodes in ranks.items():
        with open(folder / f"{prefix}.{r}.et", "wb") as fh:
            encodeMessage(fh, pb.GlobalMetadata(version="0.0.4"))
            for nd in nodes:
                encodeMessage(fh, nd)
    return folder / prefix


def comp(i: int, us: int, deps=(), **kw) -> pb.Node:
    return pb.Node(id=i, name=f"comp{i}", type=pb.COMP_NODE, duration_micros=us,
                   data_deps=list(deps), **kw)


def coll(i: int, ctype: int, size: int, pg: str | None, deps=()) -> pb.Node:
    at = [_attr("comm_type", int64_val=ctype), _attr("comm_size", int64_val=size)]
    if pg is not None:
        at.append(_attr("pg_name", string_val=pg))
    return pb.Node(id=i, name=f"coll{i}", type=pb.COMM_COLL_NODE, data_deps=list(deps),
                   attr=at)


def send(i: int, src: int, dst: int, size: int, deps=(), tag: int = 0) -> pb.Node:
    return pb.Node(id=i, name=f"send{i}", type=pb.COMM_SEND_NODE, data_deps=list(deps),
                   attr=[_attr("comm_src", int32_val=src), _attr("comm_dst", int32_val=dst),
                         _attr("comm_tag", int32_val=tag), _attr("comm_size", int64_val=size)])


def recv(i: int, src: int, dst: int, size: int, deps=(), tag: int = 0) -> pb.Node:
    return pb.Node(id=i, name=f"recv{i}", type=pb.COMM_RECV_NODE, data_deps=list(deps),
                   attr=[_attr("comm_src", int32_val=src), _attr("comm_dst", int32_val=dst),
                         _attr("comm_tag", int32_val=tag), _attr("comm_size", int64_val=size)])


# ------------------------------------------------------------------ generator traces
@pytest.mark.parametrize(("what", "op", "size", "n", "fabric"), [
    ("one_comm_coll_node_allreduce", "allreduce", 1 << 24, 16, "rail-4x8"),
    ("one_comm_coll_node_alltoall", "alltoall", 1 << 22, 16, "rail-4x8"),
    ("one_comm_coll_node_allreduce", "allreduce", 1 << 26, 64, "hpn-mini"),
    ("one_comm_coll_node_alltoall", "alltoall", 1 << 23, 64, "hpn-mini"),
])
def test_generator_collectives_take_the_native_collectives_time(tmp_path, what, op, size, n,
                                                                 fabric):
    """The generator's AllReduce / All-to-All microbenchmarks, imported, take the time of
    aifabric's own collective of the same size on the same GPUs (within 1%)."""
    _generate(tmp_path, n, what, size)
    spec = {"rail-4x8": RAIL, "hpn-mini": HPN}[fabric]
    f = _fabric(fabric)
    routing = {"policy": "source_port", "qps_per_connection": 2}
    tr = _scn(spec, {"routing": routing, "workload": {"chakra": str(tmp_path),
                                                      "placement": "spread"}})
    nat = _scn(spec, {"routing": routing, "collectives": [
        {"op": op, "size_bytes": size, "gpus": n, "placement": "spread"}]})
    a, b = simulate(tr, f), simulate(nat, f)
    assert a.summary["chakra"]["ranks"] == n and a.summary["chakra"]["collectives"] == 1
    ta, tb = a.summary["collectives"][0]["time_ns"], b.summary["collectives"][0]["time_ns"]
    assert tb > 0 and abs(ta - tb) <= 0.01 * tb
    assert abs(a.makespan_ns - b.makespan_ns) <= 0.01 * b.makespan_ns
    # the same GPUs carried the same bytes
    assert a.summary["collectives"][0]["gpus"] == n


def test_generator_other_nodes_are_listed_not_dropped(tmp_path):
    """Memory nodes and sends without a peer are listed (and the run still finishes)."""
    _generate(tmp_path, 4, "one_remote_mem_load_node", 1024)
    tr = read_trace(tmp_path)
    assert tr.unsupported == {"MEM_LOAD_NODE": 4}
    scn = _scn(RAIL, {"workload": {"chakra": str(tmp_path)}})
    wl = compile_workload(scn, _fabric("rail-4x8"))
    assert wl.notes and "MEM_LOAD_NODE" in wl.notes[0] and "4" in wl.notes[0]


def test_protobuf_reader_reads_every_field(tmp_path):
    """The arrays match what was written: types, durations, sizes, peers, parents."""
    pfx = _write(tmp_path, "t", {0: [
        comp(10, 7), coll(11, pb.ALL_GATHER, 4096, "g1", deps=[10]),
        send(12, 0, 1, 99, deps=[11], tag=3),
        pb.Node(id=13, type=pb.COMP_NODE, duration_micros=5, ctrl_deps=[10],
                data_deps=[12], attr=[_attr("num_ops", int64_val=2_000_000)])]})
    g = read_rank(Path(f"{pfx}.0.et"))
    assert g.ntype.tolist() == [pb.COMP_NODE, pb.COMM_COLL_NODE, pb.COMM_SEND_NODE,
                                pb.COMP_NODE]
    assert g.duration_us.tolist() == [7, 0, 0, 5]
    assert g.comm_size.tolist() == [0, 4096, 99, 0]
    assert g.comm_type[1] == pb.ALL_GATHER and g.pg_names == ["g1"] and g.pg[1] == 0
    assert (g.src[2], g.dst[2], g.tag[2]) == (0, 1, 3) and g.num_ops[3] == 2e6
    parents = [sorted(g.dep_idx[g.dep_ptr[i]:g.dep_ptr[i + 1]].tolist()) for i in range(4)]
    assert parents == [[], [0], [1], [0, 2]]


# ------------------------------------------------------------------ a hand-built trace
US = 1000.0  # ns


def _pp_dp_trace(tmp: Path) -> Path:
    """4 ranks, PP 2 x DP 2: stage 0 (ranks 0, 1) computes 200 us, sends 8 MiB of
    activations to stage 1 (ranks 2, 3) and AllReduces 16 MiB of gradients in its DP
    group; stage 1 receives, computes 100 us, then AllReduces in its own DP group."""
    act, grad = 8 << 20, 16 << 20
    ranks = {}
    for r in (0, 1):
        ranks[r] = [comp(1, 200), send(2, r, r + 2, act, deps=[1]),
                    coll(3, pb.ALL_REDUCE, grad, "dp0", deps=[1])]
    for r in (2, 3):
        ranks[r] = [comp(1, 5), recv(2, r - 2, r, act, deps=[1]), comp(3, 100, deps=[2]),
                    coll(4, pb.ALL_REDUCE, grad, "dp1", deps=[3])]
    return _write(tmp, "pp", ranks)


def test_hand_built_trace_honours_every_dependency(tmp_path):
    pfx = _pp_dp_trace(tmp_path)
    f = _fabric("rail-4x8")
    scn = _scn(RAIL, {"routing": {"policy": "source_port"},
                      "workload": {"chakra": str(pfx), "placement": "explicit",
                                   "gpus": [0, 8, 16, 24]}})
    res = simulate(scn, f)
    x = res.tables["transfers"]
    colls = res.summary["collectives"]
    names = [c["collective"] for c in colls]
    by = {n: i for i, n in enumerate(names)}
    xc = np.asarray(x["collective"])
    st, en = np.asarray(x["start_ns"]), np.asarray(x["end_ns"])

    def span(key: str) -> tuple[float, float]:
        (i,) = [by[n] for n in by if key in n]
        return float(st[xc == i].min()), float(en[xc == i].max())

    s_send = [span(f"send {r}->{r + 2}") for r in (0, 1)]
    s_ar0, s_ar1 = span("dp0"), span("dp1")
    for a, _ in s_send:  # each send waits for its rank's 200 us of compute
        assert a >= 200 * US - 1e-6
    assert s_ar0[0] >= 200 * US - 1e-6  # stage 0's AllReduce waits for its compute
    recv_end = max(e for _, e in s_send)
    # stage 1's AllReduce: after the receives (the sends' delivery) + 100 us of compute
    assert s_ar1[0] >= recv_end + 100 * US - 1e-6
    # ... and not later than that: nothing else holds it
    assert s_ar1[0] == pytest.approx(recv_end + 100 * US, rel=1e-6)
    assert res.makespan_ns == pytest.approx(max(s_ar0[1], s_ar1[1]), rel=1e-9)
    assert res.summary["chakra"]["p2p_transfers"] == 2


def test_identical_ranks_share_one_class_and_run_in_lockstep(tmp_path):
    """16 byte-identical rank files: decoded once, one stage per node."""
    nodes = [comp(1, 50), coll(2, pb.ALL_REDUCE, 1 << 20, None, deps=[1]), comp(3, 50, deps=[2])]
    pfx = _write(tmp_path, "same", {r: nodes for r in range(16)})
    tr = read_trace(pfx)
    assert (tr.files_decoded, len(tr.graphs), tr.nodes) == (1, 1, 48)
    res = simulate(_scn(RAIL, {"workload": {"chakra": str(pfx)}}), _fabric("rail-4x8"))
    ar = res.summary["collectives"][0]["time_ns"]
    assert res.makespan_ns == pytest.approx(100 * US + ar, rel=1e-9)


def test_gpu_tflops_turns_num_ops_into_time(tmp_path):
    n = pb.Node(id=1, type=pb.COMP_NODE, duration_micros=1,
                attr=[_attr("num_ops", int64_val=10**12)])
    pfx = _write(tmp_path, "ops", {0: [n], 1: [n]})
    f = _fabric("rail-4x8")
    slow = simulate(_scn(RAIL, {"workload": {"chakra": str(pfx), "gpu_tflops": 100}}), f)
    dur = simulate(_scn(RAIL, {"workload": {"chakra": str(pfx)}}), f)
    assert slow.makespan_ns == pytest.approx(1e7)  # 1e12 FLOPs at 100 TFLOP/s = 10 ms
    assert dur.makespan_ns == pytest.approx(1e3)  # the duration: 1 us


# ------------------------------------------------------------------ bad input
def _problem(scn: SimScenario) -> str:
    with pytest.raises(SpecError) as ei:
        compile_workload(scn, _fabric("rail-4x8"))
    assert len(ei.value.problems) == 1
    return str(ei.value.problems[0])


def test_missing_rank_file(tmp_path):
    pfx = _write(tmp_path, "m", {0: [comp(1, 1)], 2: [comp(1, 1)]})
    assert "missing rank file m.1.et" in _problem(_scn(RAIL, {"workload": {"chakra": str(pfx)}}))


def test_ranks_beyond_the_placement(tmp_path):
    pfx = _write(tmp_path, "big", {r: [comp(1, 1)] for r in range(8)})
    msg = _problem(_scn(RAIL, {"workload": {"chakra": str(pfx), "ranks": 4}}))
    assert "up to rank 7" in msg and "4 ranks" in msg
    # a send to a rank the placement does not have
    pfx = _write(tmp_path / "s", "s", {0: [send(1, 0, 9, 10)], 1: [comp(1, 1)]})
    assert "rank 9" in _problem(_scn(RAIL, {"workload": {"chakra": str(pfx)}}))
    # more ranks than the fabric has GPUs
    pfx = _write(tmp_path / "g", "g", {r: [comp(1, 1)] for r in range(40)})
    assert "larger than the fabric" in _problem(_scn(RAIL, {"workload": {"chakra": str(pfx)}}))


@pytest.mark.parametrize("damage", ["truncate", "garbage"])
def test_corrupted_protobuf(tmp_path, damage):
    pfx = _write(tmp_path, "c", {0: [comp(1, 1), comp(2, 3, deps=[1])], 1: [comp(1, 1)]})
    p = Path(f"{pfx}.0.et")
    data = p.read_bytes()
    p.write_bytes(data[:-3] if damage == "truncate" else data[:6] + b"\xff" * 12 + data[18:])
    msg = _problem(_scn(RAIL, {"workload": {"chakra": str(pfx)}}))
    assert "c.0.et" in msg and ("truncated" in msg or "corrupted" in msg)


def test_unmatched_receive_and_mismatched_collectives(tmp_path):
    pfx = _write(tmp_path / "a", "u", {0: [comp(1, 1)], 1: [recv(1, 0, 1, 64)]})
    assert "more often than rank 0 sends" in _problem(
        _scn(RAIL, {"workload": {"chakra": str(pfx)}}))
    pfx = _write(tmp_path / "b", "v", {0: [coll(1, pb.ALL_REDUCE, 64, None)],
                                       1: [coll(1, pb.ALL_REDUCE, 128, None)]})
    assert "collective #0" in _problem(_scn(RAIL, {"workload": {"chakra": str(pfx)}}))


def test_cli_simulates_a_trace_and_refuses_bad_input_in_one_line(tmp_path):
    pfx = _pp_dp_trace(tmp_path / "tr")
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(RAIL))
    good = tmp_path / "good.yaml"
    good.write_text(yaml.safe_dump({"name": "pp", "spec": "spec.yaml",
                                    "workload": {"chakra": "tr/pp", "ranks": 4}}))
    # numba's cache as the rest of the run has it (not a folder of its own, where the
    # flow kernels and the decoder would compile a second time)
    env = dict(os.environ)
    ok = subprocess.run([sys.executable, "-m", "aifabric", "simulate", str(good)],
                        capture_output=True, text=True, timeout=300, env=env)
    assert ok.returncode == 0, ok.stderr
    assert "chakra pp" in ok.stdout or "dp0" in ok.stdout
    Path(f"{pfx}.1.et").unlink()
    bad = subprocess.run([sys.executable, "-m", "aifabric", "simulate", str(good)],
                         capture_output=True, text=True, timeout=300, env=env)
    assert bad.returncode == 2
    lines = [ln for ln in (bad.stdout + bad.stderr).splitlines() if ln.strip()]
    assert len(lines) == 1 and "missing rank file pp.1.et" in lines[0]


# ------------------------------------------------------------------ the fast decoder
_GEN = ["one_metadata_node_all_types", "one_remote_mem_load_node", "one_comp_node",
        "two_comp_nodes_dependent", "one_comm_coll_node_allgather",
        "one_comm_coll_node_broadcast", "one_comm_send_node"]


def _same(a, b) -> None:
    for k in a.__dataclass_fields__:
        x, y = getattr(a, k), getattr(b, k)
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and np.array_equal(x, y), k
        else:
            assert x == y, k


def test_compiled_decoder_equals_the_protobuf_reader(tmp_path):
    """Every generator microbenchmark (the metadata node carries every attribute type)
    and the hand-built trace decode to the same arrays both ways."""
    code = ("from chakra.src.generator import generator as g\n"
            + "".join(f"g.{w}(2{', 7' if w not in ('one_metadata_node_all_types',) else ''})\n"
                      for w in _GEN))
    subprocess.run([sys.executable, "-c", code], cwd=tmp_path, check=True, timeout=120)
    _pp_dp_trace(tmp_path)
    files = sorted(tmp_path.glob("*.et"))
    assert len(files) >= 2 * len(_GEN) + 4
    from aifabric.workload._chakra_wire import decode

    for p in files:
        assert decode(p.read_bytes()) is not None, p.name  # no silent fallback
        _same(read_rank(p), read_rank(p, fast=False))


def test_a_trace_too_big_for_memory_is_refused_before_compiling(tmp_path, monkeypatch):
    pfx = _write(tmp_path, "big", {r: [comp(1, r + 1), comp(2, 1, deps=[1])]
                                   for r in range(8)})
    import aifabric.workload.chakra as ch

    # 8 different rank graphs of 2 nodes; at a (pretend) terabyte per node they cannot fit
    monkeypatch.setattr(ch, "BYTES_PER_CLASS_NODE", 10**12)
    msg = _problem(_scn(RAIL, {"workload": {"chakra": str(pfx)}}))
    assert "different rank graph" in msg and "--max-memory" in msg


@pytest.mark.parametrize("args", [["--help"], ["simulate", "--help"], ["export", "--help"]])
def test_the_command_line_does_not_import_chakra_or_protobuf_to_start(args):
    code = ("import sys, json\n"
            f"sys.argv = ['aifabric', *{args!r}]\n"
            "from aifabric.cli import main\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "import aifabric.sim.scenario, aifabric.sim.run\n"
            "print(json.dumps(sorted(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=True).stdout.strip().splitlines()[-1]
    mods = json.loads(out)
    assert not [m for m in mods if m.split(".")[0] == "chakra" or m.startswith("google.protobuf")
                or m == "aifabric.workload.chakra"]


def test_trace_names_reach_results_only_as_safe_labels(tmp_path):
    nodes = [coll(1, pb.ALL_REDUCE, 1 << 16, "<b>dp`0`|x")]
    pfx = _write(tmp_path, "n", {0: nodes, 1: nodes})
    res = simulate(_scn(RAIL, {"workload": {"chakra": str(pfx)}}), _fabric("rail-4x8"))
    (name,) = [c["collective"] for c in res.summary["collectives"]]
    assert "dp" in name and not set(name) & set("<>`|")


def test_the_example_trace_is_what_the_script_writes(tmp_path):
    from tests.conftest import ROOT

    subprocess.run([sys.executable, str(ROOT / "scripts" / "make_chakra_example.py"),
                    str(tmp_path)], check=True, timeout=120)
    shipped = ROOT / "examples" / "traces" / "gpt-pp2-dp8"
    names = sorted(p.name for p in shipped.iterdir())
    assert names == sorted(p.name for p in tmp_path.iterdir()) and len(names) == 16
    for n in names:
        assert (shipped / n).read_bytes() == (tmp_path / n).read_bytes()


def test_the_example_scenario_runs_with_its_pipeline_and_dp_groups():
    from aifabric.routing.scenario import load_scenario
    from tests.conftest import ROOT

    scn = load_scenario(ROOT / "examples" / "scenarios" / "chakra-gpt-pp2-dp8.yaml",
                        SimScenario)
    f = build_fabric(scn.spec)
    res = simulate(scn, f)
    ch = res.summary["chakra"]
    assert ch["ranks"] == 16 and ch["p2p_transfers"] == 8 * 4 * 2  # pairs x mb x fwd+bwd
    assert ch["unsupported"] == {"METADATA_NODE": 16}
    ops = sorted(set(np.asarray(res.tables["collectives"]["op"]).tolist()))
    assert ops == ["allreduce", "p2p"]
    # GPipe's critical path: stage 0's forwards (4 x 300 us), stage 1's last forward
    # (300) and its 4 backwards (4 x 600), stage 0's last backward (600), the optimizer
    # (200): 4,700 us of compute, plus the transfers and the AllReduce
    assert res.makespan_ns > (5 * 900 + 200) * 1e3


def test_a_trace_with_too_many_transfers_is_refused(tmp_path, monkeypatch):
    """100 All-to-Alls on 32 ranks: ~99,000 transfer rows; under a 50 MB limit the trace is
    refused before its collectives are compiled."""
    nodes = [coll(i + 1, pb.ALL_TO_ALL, 1 << 20, None, deps=[i] if i else [])
             for i in range(100)]
    pfx = _write(tmp_path, "a2a", {r: nodes for r in range(32)})
    import aifabric.guard as guard

    scn = _scn(RAIL, {"workload": {"chakra": str(pfx)}})
    f = _fabric("rail-4x8")
    compile_workload(scn, f)  # fits in the machine's memory
    base = guard.WorkloadEstimate(rows=0, qps=1, sim="flow", biggest="").peak_bytes
    monkeypatch.setattr(guard, "memory_limit", lambda: (base + 1_000_000, "--max-memory"))
    msg = _problem(scn)
    assert "99,200 transfers" in msg and "workload.chakra" in msg


def test_a_deadlocked_trace_is_refused(tmp_path):
    """Each rank receives before it sends to the other: no transfer can ever start."""
    pfx = _write(tmp_path, "dl", {0: [recv(1, 1, 0, 64), send(2, 0, 1, 64, deps=[1])],
                                  1: [recv(1, 0, 1, 64), send(2, 1, 0, 64, deps=[1])]})
    assert "cycle" in _problem(_scn(RAIL, {"workload": {"chakra": str(pfx)}}))


def test_worker_processes_read_the_same_trace(tmp_path):
    """Decoding in 2 worker processes gives the same classes and graphs as in-process;
    a corrupted file read by a worker is still one problem."""
    from tests.conftest import ROOT

    ex = ROOT / "examples" / "traces" / "gpt-pp2-dp8"
    a, b = read_trace(ex, workers=1), read_trace(ex, workers=2)
    assert np.array_equal(a.rank_class, b.rank_class) and len(a.graphs) == len(b.graphs)
    for x, y in zip(a.graphs, b.graphs, strict=True):
        _same(x, y)
    pfx = _write(tmp_path, "c", {r: [comp(1, r + 1)] for r in range(6)})
    Path(f"{pfx}.3.et").write_bytes(b"\x05\x0a\x09abc\xff\xff")
    with pytest.raises(SpecError) as ei:
        read_trace(pfx, workers=2)
    assert len(ei.value.problems) == 1 and "c.3.et" in str(ei.value.problems[0])


# ------------------------------------------------------------------ hostile bytes
def _varint(v: int) -> bytes:
    out = bytearray()
    while True:
        b, v = v & 0x7F, v >> 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


_HOSTILE_READ = """
import sys
from pathlib import Path
from aifabric.errors import SpecError
from aifabric.workload.chakra import read_rank
data = Path(sys.argv[1]).read_bytes()
for fast in (True, False):
    try:
        read_rank(Path(sys.argv[1]), data, fast=fast)
        print("decoded")
    except SpecError as e:
        print("refused", str(e).splitlines()[0][:60])
"""


@pytest.mark.parametrize("length", [2**64 - 5, 2**63, 2**64 - 1, 2**66])
def test_a_64_bit_record_length_is_refused_not_followed(tmp_path, length):
    """A length prefix of 2^63 or more wrapped to a negative int64 in the compiled
    decoder: the position moved backwards (out-of-bounds reads, a segfault or an
    endless loop). Both readers must refuse it in one line, in a child process so a
    crash shows as a crash."""
    pfx = _write(tmp_path, "h", {0: [comp(1, 1), comp(2, 3, deps=[1])]})
    p = Path(f"{pfx}.0.et")
    data = p.read_bytes()
    meta = data[0] + 1  # the metadata record: its 1-byte length, then the message
    attr = b"\x52" + _varint(length) + b"\x0a\x01x"  # Node.attr (field 10) of 2^6x bytes
    for bad in (data[:meta] + _varint(length) + data[meta:],  # a record's length
                data + _varint(len(attr)) + attr):  # a node's attribute's length
        p.write_bytes(bad)
        r = subprocess.run([sys.executable, "-c", _HOSTILE_READ, str(p)], capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 0, (r.returncode, r.stderr[-400:])
        out = r.stdout.splitlines()
        assert len(out) == 2 and all(ln.startswith("refused") for ln in out), r.stdout


def test_attributes_of_the_wrong_kind_are_refused_or_kept_apart(tmp_path):
    """A send whose comm_dst has no value, a comm_size given as a string, a node type
    or comm_type past the enum: one line, or listed as unknown -- never a traceback, and
    a type of 260 is not read as 4 (COMP_NODE) nor a comm_type of 256 as ALL_REDUCE."""
    empty = pb.Node(id=1, type=pb.COMM_SEND_NODE, attr=[_attr("comm_dst"),
                                                         _attr("comm_size", int64_val=8)])
    pfx = _write(tmp_path / "a", "a", {0: [empty]})
    g = read_rank(Path(f"{pfx}.0.et"))
    assert int(g.dst[0]) == -1  # no value: no peer (listed as such), not a crash
    strsize = pb.Node(id=1, type=pb.COMM_COLL_NODE,
                      attr=[_attr("comm_type", int64_val=0), _attr("comm_size",
                                                                   string_val="1MB")])
    pfx = _write(tmp_path / "b", "b", {0: [strsize]})
    for fast in (True, False):
        with pytest.raises(SpecError, match="comm_size"):
            read_rank(Path(f"{pfx}.0.et"), fast=fast)
    odd = [pb.Node(id=1, type=260, duration_micros=5),
           pb.Node(id=2, type=pb.COMM_COLL_NODE, attr=[_attr("comm_type", int64_val=256),
                                                       _attr("comm_size", int64_val=64)])]
    pfx = _write(tmp_path / "c", "c", {0: odd})
    for fast in (True, False):
        g = read_rank(Path(f"{pfx}.0.et"), fast=fast)
        assert int(g.ntype[0]) != pb.COMP_NODE and int(g.comm_type[1]) != pb.ALL_REDUCE
    tr = read_trace(pfx)
    assert tr.unsupported == {"COMM_COLL_NODE unknown comm_type": 1,
                              "unknown node type": 1}


def test_a_send_counts_both_ends_and_its_busbw_is_its_algbw(tmp_path):
    """A trace's point-to-point send shows its sender and its receiver under GPUs (not
    1), and busbw = algbw as nccl-tests' sendrecv reports it."""
    pfx = _pp_dp_trace(tmp_path)
    scn = _scn(RAIL, {"workload": {"chakra": str(pfx), "placement": "explicit",
                                   "gpus": [0, 8, 16, 24]}})
    res = simulate(scn, _fabric("rail-4x8"))
    sends = [c for c in res.summary["collectives"] if c["op"] == "p2p"]
    assert len(sends) == 2
    for c in sends:
        assert c["gpus"] == 2
        assert c["busbw_GBps"] == pytest.approx(c["algbw_GBps"])
        assert c["algbw_GBps"] == pytest.approx(c["size_bytes"] / c["time_ns"])
