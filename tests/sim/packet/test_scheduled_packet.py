"""The scheduled fabric cell by cell (aifabric.sim.packet.scheduled): cells conserve
bytes, every frame reaches its host in its flow's order (the egress reorders what the
spraying mixed up), with one uplink the fabric is a single path, grants never exceed the
egress port's rate, the fabric queues stay within the grant window while an incast waits
in the ingress VOQs (PFC toward the hosts only), and the flow-level closed form equals
the packet result on an idle fabric within 1%."""

from __future__ import annotations

import json
import math
from functools import cache

import numpy as np
import pytest

from aifabric import build_fabric
from aifabric.routing.scenario import scenario_from_dict
from aifabric.sim.packet.scheduled import ScheduledNet
from aifabric.sim.run import simulate
from aifabric.sim.scenario import SimScenario
from aifabric.spec.load import spec_from_dict

MTU, HDR, WIRE = 4096, 62, 20


def _clos(hosts: int = 16, down: int | None = None, up: int | None = None, **sched) -> dict:
    leaf: dict = {"model": "s8"}
    if down is not None:
        leaf.update(down_ports=down, up_ports=up)
    return {"name": f"clos{hosts}", "hosts": {"count": hosts, "gpus_per_host": 1,
                                              "nics_per_host": 1, "port_gbps": 100},
            "switch_models": {"s8": {"ports": 8, "port_gbps": 100}},
            "topology": {"family": "clos", "leaf": leaf, "spine": {"model": "s8"}},
            "scheduled": sched}


def _k8(**sched) -> dict:
    return {"name": "k8", "hosts": {"count": 128, "gpus_per_host": 1, "nics_per_host": 1,
                                    "port_gbps": 400},
            "switch_models": {"k8": {"ports": 8, "port_gbps": 400}},
            "topology": {"family": "fat_tree", "k": 8, "switch": {"model": "k8"},
                         "rail_optimized": False},
            "scheduled": sched}


@cache
def _fabric(spec_json: str):
    return build_fabric(spec_from_dict(json.loads(spec_json)))


def fab(spec: dict):
    return _fabric(json.dumps(spec, sort_keys=True))


def _run_net(spec: dict, flows: list[tuple[int, int, int]], **kw) -> ScheduledNet:
    net = ScheduledNet(fab(spec), **kw)
    for s, d, n in flows:
        net.add_flow(s, d, n)
    net.run()
    return net


def _perm(n: int, shift: int) -> list[tuple[int, int]]:
    return [(i, (i + shift) % n) for i in range(n)]


@pytest.mark.parametrize("spray", ["round_robin", "least_loaded"])
def test_cells_conserve_bytes_and_frames_arrive_in_order(spray):
    spec = _clos(spray=spray)
    flows = [(s, d, 300_000 + 4096 * s + 7) for s, d in _perm(16, 5)]
    flows += [(s, d, 200_000) for s, d in _perm(16, 9)]  # two flows per port, RR frames
    net = _run_net(spec, flows)
    m = net.metrics()
    fl = net.flows()
    # every byte sent is delivered, exactly once
    assert (fl["delivered_bytes"] == fl["size_bytes"]).all()
    assert np.isfinite(fl["done_ns"]).all()
    c = m["cells"]
    # every frame through the fabric is cut into ceil(frame / cell payload) cells of
    # 256 bytes; the cells carry exactly the frames' payload plus headers and padding
    frames_pay = c["fabric_payload_bytes"]
    assert c["fabric_cell_bytes"] == c["cells"] * 256
    assert c["overhead_bytes"] == c["fabric_cell_bytes"] - frames_pay
    assert c["cells"] * 240 >= frames_pay + c["frames_through_fabric"] * HDR
    assert c["cells"] <= c["frames_through_fabric"] * math.ceil((MTU + HDR) / 240)
    # a 2-tier fabric: each cell crosses exactly two fabric links (up, down)
    assert c["cell_bytes_sent_on_links"] == 2 * c["fabric_cell_bytes"]
    assert m["reorder"]["frames_delivered_out_of_order"] == 0
    assert m["reorder"]["max_bytes"] <= m["reorder"]["buffer_bytes"]
    assert m["grants"]["bytes"] == sum(-(-n // MTU) * HDR + n for _, _, n in flows)


@pytest.mark.parametrize("spray", ["round_robin", "least_loaded"])
def test_a_longer_path_reorders_cells_but_every_host_gets_its_frames_in_order(spray):
    """One fabric link 3 us longer than the others (a long cable): the cells sprayed over
    it arrive late, so frames complete out of order at the egress; the reorder buffer
    holds them until the earlier ones are there, and every host receives every flow's
    frames in the order they were sent."""
    from aifabric.sim.packet.scheduled import layout as L

    spec = _clos(spray=spray)
    net = ScheduledNet(fab(spec))
    slow = net.NHA[0]  # an uplink of the first switch toward some edge
    net.AP[slow, L.A_LAT] += 3_000_000
    for s, d in _perm(16, 5):
        net.add_flow(s, d, 500_000)
    net.run()
    m = net.metrics()
    assert m["reorder"]["frames_completed_out_of_order"] > 0
    assert m["reorder"]["frames_delivered_out_of_order"] == 0
    assert (net.flows()["delivered_bytes"] == 500_000).all()
    # what waited for the slow cells: more than one frame's cells per port
    assert m["reorder"]["max_bytes"] > math.ceil((MTU + HDR) / 240) * 256
    assert m["reorder"]["max_bytes"] <= m["reorder"]["buffer_bytes"]


def _lone_ideal_ns(net: ScheduledNet, size: int, lat_ns: float) -> float:
    frames = math.ceil(size / MTU)
    return (size + frames * (HDR + WIRE)) * 8 / 100 + lat_ns + net.sch.request_grant_ns


def test_with_one_uplink_the_scheduled_fabric_is_a_single_path():
    """One uplink per edge: every cell of a flow takes the one path, in order, so nothing
    is reordered, both spray policies give the same run, and a lone flow takes the
    single path's closed form (frames at the port rate, plus its latency, one grant and
    one frame's pipeline)."""
    runs = []
    for spray in ("round_robin", "least_loaded"):
        spec = _clos(hosts=4, down=1, up=1, spray=spray)
        f = fab(spec)
        net = _run_net(spec, [(0, 3, 1_000_000), (1, 2, 500_000), (2, 0, 700_000)])
        m = net.metrics()
        assert m["reorder"]["frames_completed_out_of_order"] == 0
        assert m["reorder"]["max_bytes"] <= math.ceil((MTU + HDR) / 240) * 256
        runs.append(net.flows())
    for k in runs[0]:
        assert np.array_equal(runs[0][k], runs[1][k]), k
    # the lone-flow closed form on the single path (4 hops of links and switches)
    net = _run_net(_clos(hosts=4, down=1, up=1), [(0, 3, 2_000_000)])
    from aifabric.sim.paths import arc_latency_ns

    lat = arc_latency_ns(f)
    src, dst, _ = f.arcs
    hops = (lat[net.up_arc[0]] + lat[net.dn_arc[3]]
            + lat[(src == net.edge_nodes[0]) & f.is_switch[dst]].sum()
            + lat[(dst == net.edge_nodes[3]) & f.is_switch[src]].sum())
    want = _lone_ideal_ns(net, 2_000_000, hops)
    got = float(net.flows()["done_ns"][0])
    # the pipeline adds one frame's cells and its serialization at the egress (< 1 us)
    assert want <= got <= want + 1_000


def test_grants_never_exceed_the_egress_rate():
    """An 8-to-1 incast (many VOQs asking one port): every grant of ``g`` bytes is
    followed by the next no sooner than ``g`` frame bytes take at the port's rate (wire
    overhead included), so over any interval the port is granted at most its rate."""
    spec = _clos()
    net = _run_net(spec, [(s, 0, 400_000) for s in range(1, 9)], log_grants=True)
    log = net.grant_log
    assert len(log) > 100
    for p in np.unique(log[:, 1]):
        g = log[log[:, 1] == p]
        pace = net.PACE[p]
        gaps = np.diff(g[:, 0])
        assert (gaps >= np.floor(g[:-1, 2] * pace)).all()
        span = g[-1, 0] - g[0, 0]
        assert g[:-1, 2].sum() * pace <= span + len(g)  # (1 ps rounding per grant)
    assert (net.grant_log[:, 2] <= net.sch.credit_bytes).all()


def test_an_incast_waits_in_the_voqs_and_never_pauses_the_fabric():
    """32-to-1 on the k=8 fat-tree with small VOQs: the senders' edges pause their hosts
    (PFC toward hosts only), the fabric queues stay within the grant window, and the
    bytes waiting in VOQs dwarf those in the fabric."""
    spec = _k8(voq_depth_bytes=256 * 1024)
    net = _run_net(spec, [(s, 0, 1_000_000) for s in range(1, 33)])
    m = net.metrics()
    assert (net.flows()["delivered_bytes"] == 1_000_000).all()
    assert m["pfc_to_hosts"]["pauses"] > 0 and m["fabric_queue"]["pfc_pauses"] == 0
    assert m["fabric_queue"]["max_bytes"] <= m["fabric_queue"]["window_bytes"]
    assert m["fabric_queue"]["max_outstanding_bytes"] <= m["fabric_queue"]["window_bytes"]
    assert m["voq"]["max_bytes"] > 10 * m["fabric_queue"]["max_bytes"]
    # XOFF leaves a port its headroom; each of the edge's k senders is paused on its own
    # frame past XOFF, so a VOQ passes its depth by at most (k - 1) headrooms
    assert net.hosts_per_edge == 4
    assert m["voq"]["max_bytes"] <= 256 * 1024 + 3 * net.headroom_bytes
    # the port drains at its frame rate: the incast ends when 32 MB have crossed it
    end = float(np.nanmax(net.flows()["done_ns"]))
    wire = 32 * (1_000_000 + math.ceil(1_000_000 / MTU) * (HDR + WIRE))
    assert end >= wire * 8 / 400
    assert end <= wire * 8 / 400 * 1.02 + 20_000


def _scn(spec: dict, traffic: list[dict], sim: str):
    scn = scenario_from_dict({"name": "t", "spec": spec, "traffic": traffic, "sim": sim},
                             model=SimScenario)
    return simulate(scn, fab(spec))


@pytest.mark.parametrize("traffic", [
    [{"pattern": "incast", "senders": ["host-s00-h000-gpu0"], "to": "host-s31-h003-gpu0",
      "size_bytes": 8_000_000}],
    [{"pattern": "permutation", "gpus": "all", "size_bytes": 2_000_000}],
], ids=["lone-flow", "permutation"])
def test_the_flow_closed_form_equals_the_packet_result_on_an_idle_fabric(traffic):
    spec = _k8()
    flow = _scn(spec, traffic, "flow")
    pkt = _scn(spec, traffic, "packet")
    ft, pt = flow.tables["transfers"], pkt.tables["transfers"]
    fd = np.asarray(ft["end_ns"]) - np.asarray(ft["start_ns"])
    pd = np.asarray(pt["end_ns"]) - np.asarray(pt["start_ns"])
    assert pd == pytest.approx(fd, rel=0.01)
    assert pkt.makespan_ns == pytest.approx(flow.makespan_ns, rel=0.01)
    s = pkt.summary["scheduled"]
    assert s["reorder"]["frames_delivered_out_of_order"] == 0
    assert s["invariants"]["bytes_sent"] == s["invariants"]["bytes_delivered"]
    assert pkt.summary["routing"]["policy"] == "scheduled"


def test_the_same_run_twice_is_identical():
    spec = _clos(spray="least_loaded")
    flows = [(s, d, 123_457) for s, d in _perm(16, 3)]
    a, b = _run_net(spec, flows), _run_net(spec, flows)
    assert a.events == b.events
    for k, v in a.flows().items():
        assert np.array_equal(v, b.flows()[k], equal_nan=True), k
    assert a.metrics() == b.metrics()


def test_failures_are_refused_by_the_cell_model_and_routed_around_at_flow_level():
    """The cell model sprays over every link: a scenario with failures is bad input for
    it (one problem naming ``failures``); the flow level routes around them."""
    from aifabric.errors import SpecError

    spec = _clos()
    body = {"name": "t", "spec": spec, "failures": [{"switch": "spine-00"}],
            "traffic": [{"pattern": "permutation", "gpus": "all", "size_bytes": 100_000}]}
    scn = scenario_from_dict({**body, "sim": "packet"}, model=SimScenario)
    with pytest.raises(SpecError) as err:
        simulate(scn, fab(spec))
    assert [p.path for p in err.value.problems] == ["failures"]
    scn = scenario_from_dict({**body, "sim": "flow"}, model=SimScenario)
    r = simulate(scn, fab(spec))
    assert r.summary["finished"] and r.summary["routing"]["policy"] == "scheduled"


def test_a_voq_table_past_the_memory_limit_is_refused_before_it_is_allocated():
    from aifabric import guard
    from aifabric.errors import SpecError

    f = fab(_k8())  # 32 edges x 128 ports = 4,096 VOQs: about 400 KB
    guard.set_limit("64K")
    try:
        with pytest.raises(SpecError) as err:
            ScheduledNet(f)
    finally:
        guard.set_limit(None)
    p = err.value.problems[0]
    assert p.path == "scheduled" and "32 x 128" in p.message and "--max-memory" in p.message


def test_a_ring_allreduce_with_nvlink_hops_matches_the_flow_closed_form():
    """126 repetitions of a ring step through NVLink, PCIe and the edge (8 hosts x 8
    GPUs, every NIC on one leaf: switched locally, no cells): each repetition starts when
    the last transfer reaches its GPU, as at the flow level, so the two agree within 1%."""
    spec = {"name": "clos-8x8", "hosts": {"count": 8, "gpus_per_host": 8, "nics_per_host": 8,
                                          "port_gbps": 400},
            "topology": {"family": "clos"}, "scheduled": {}}
    body = {"collectives": [{"op": "allreduce", "size_bytes": 512 << 20, "gpus": 64,
                             "channels": 8}]}
    res = {}
    for sim in ("flow", "packet"):
        scn = scenario_from_dict({"name": "t", "spec": spec, "sim": sim, **body},
                                 model=SimScenario)
        res[sim] = simulate(scn, fab(spec))
    assert res["packet"].makespan_ns == pytest.approx(res["flow"].makespan_ns, rel=0.01)
    fct = res["packet"].tables["packet_fct"]
    assert len(fct["fct_ns"]) == 512 * 126 and np.isfinite(fct["fct_ns"]).all()
    assert res["packet"].summary["scheduled"]["cells"]["frames_local"] > 0


def test_the_event_estimate_is_close_and_a_run_past_max_events_is_refused(cli, tmp_path):
    """The estimate (frames x (7 + 2 x cells x fabric links)) is within 5% of the events
    the run takes; ``--max-events`` below it is one line naming the option, exit 2,
    nothing written."""
    spec = _k8()
    traffic = [{"pattern": "permutation", "gpus": "all", "size_bytes": 500_000}]
    r = _scn(spec, traffic, "packet")
    s = r.summary["scheduled"]
    assert s["estimated_events"] == pytest.approx(s["events"], rel=0.05)
    from tests.conftest import EXAMPLES

    out = tmp_path / "o"
    res = cli("simulate", EXAMPLES / "scenarios/scheduled/permutation-scheduled.yaml",
              "--max-events", "1e5", "--out", out)
    assert res.code == 2 and "--max-events:" in res.err and "cell-level" in res.err
    assert len([ln for ln in res.err.splitlines() if ln.strip()]) == 1
    assert not out.exists()


def test_simulate_prints_the_cell_models_line(cli):
    from tests.conftest import EXAMPLES

    r = cli("simulate", EXAMPLES / "scenarios/scheduled/incast-scheduled.yaml")
    assert r.code == 0, r.err
    line = next(ln for ln in r.out.splitlines() if ln.startswith("scheduled fabric (cells)"))
    assert "no PFC inside" in line and "0 frames out of order at the hosts" in line


def test_compare_of_roce_nic_spraying_and_scheduled_runs_side_by_side(cli, tmp_path):
    """``compare`` of ECMP + DCQCN, NIC spraying (REPS, ooo receiver, NSCC, trimming) and
    the scheduled fabric on one 16-host permutation: exit 0, every row present; the
    scheduled column has no NAKs or timeouts (its cell model has none: shown "-", not
    made up), and each run delivers every byte."""
    import yaml

    base = _clos()
    del base["scheduled"]
    traffic = [{"pattern": "permutation", "gpus": "all", "size_bytes": 200_000}]
    docs = {
        "ecmp": {"spec": base, "routing": {"policy": "ecmp"}, "sim": "packet",
                 "packet": {"cc": {"algorithm": "dcqcn"}}},
        "uec": {"spec": base, "routing": {"policy": "ecmp"}, "sim": "packet",
                "packet": {"pfc": {"enabled": False}, "switch": {"trim": {"enabled": True}},
                           "nic": {"receiver": "ooo",
                                   "entropy": {"algorithm": "reps", "values": 64}},
                           "cc": {"algorithm": "nscc"}}},
        "sched": {"spec": _clos(), "sim": "packet"},
    }
    files = []
    for name, doc in docs.items():
        p = tmp_path / f"{name}.yaml"
        p.write_text(yaml.safe_dump({"name": name, **doc, "traffic": traffic}))
        files.append(p)
    r = cli("compare", *files)
    assert r.code == 0, r.err
    for row in ("tail FCT", "fabric queue max", "FCT slowdown p99", "NAKs"):
        assert row in r.out, row
    naks = next(line for line in r.out.splitlines() if "NAKs" in line)
    cells = [c.strip() for c in naks.strip("│┃ ").split("│")]
    assert cells[1:4] == ["0", "0", "-"], cells
    res = json.loads(cli("compare", *files, "--json").out)
    assert [x["finished"] for x in res] == [True, True, True]
