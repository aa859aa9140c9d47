"""``aifabric simulate`` with ``sim: packet``: the flow simulator's tables plus packet time
series, plots and alarm lines; bad packet settings exit 2 with one line each."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.sim.packet.nets import FT4_SCENARIO

EX = Path(__file__).resolve().parents[3] / "examples" / "scenarios"

FT = FT4_SCENARIO


def _scenario(tmp_path: Path, body: str) -> Path:
    p = tmp_path / "s.yaml"
    p.write_text("name: s\n" + FT + body)
    return p


def test_simulate_packet_writes_the_shared_tables_time_series_plots_and_alarms(cli, tmp_path):
    """The incast example: exit 0, the flow simulator's tables plus packet_queues,
    packet_flows, packet_alarms, the two packet plots and an alarm section."""
    out = tmp_path / "rep"
    r = cli("simulate", EX / "incast-dcqcn.yaml", "--out", out)
    assert r.code == 0, r.err
    names = {p.name for p in out.iterdir()}
    assert {"report.md", "collectives.csv", "transfers.csv", "links.csv", "timeline.csv",
            "packet_queues.csv", "packet_flows.csv", "packet_alarms.csv",
            "packet_queues.png", "packet_rates.png"} <= names
    md = (out / "report.md").read_text()
    assert "Alarms" in md and "PFC frames" in md


def test_only_the_sim_field_changes_between_flow_and_packet(cli, tmp_path):
    """The same scenario runs with --sim flow and sim: packet; both deliver the same
    transfers, the packet run a little slower (headers, pauses, congestion control)."""
    pkt = json.loads(cli("simulate", EX / "incast-hpcc.yaml", "--json").out)
    flow = json.loads(cli("simulate", EX / "incast-hpcc.yaml", "--json", "--sim",
                          "flow").out)
    assert pkt["sim"] == "packet" and flow["sim"] == "flow"
    assert pkt["packet"]["delivered_bytes"] == 8 * 2_000_000
    assert flow["makespan_ns"] <= pkt["makespan_ns"] <= 1.3 * flow["makespan_ns"]


def test_a_collective_runs_packet_by_packet(cli, tmp_path):
    """Collectives work unchanged: a ring AllReduce of 4 GPUs completes, with its busbw."""
    s = _scenario(tmp_path, "sim: packet\ncollectives:\n  - {name: ar, op: allreduce, "
                  "size_bytes: 1MiB, gpus: 4}\n")
    res = json.loads(cli("simulate", s, "--json").out)
    ar = res["collectives"][0]
    assert ar["collective"] == "ar" and ar["busbw_GBps"] > 0
    assert res["packet"]["drops"] == 0


@pytest.mark.parametrize(("packet", "where"), [
    ("{ecn: {kmin_bytes: 500000, kmax_bytes: 1000}}", "packet.ecn"),
    ("{ecn: {pmax: 2}}", "packet.ecn.pmax"),
    ("{pfc: {xoff_bytes: 100, xon_bytes: 200}}", "packet.pfc"),
    ("{buffer: {size_bytes: 1000}, pfc: {headroom_bytes: 5000}}", "packet"),
    ("{cc: {algorithm: cubic}}", "packet.cc.algorithm"),
    # per-packet load balancing and the receiver (docs/packet.md)
    ("{lb: {mode: flowlet}}", "packet.lb.mode"),
    ("{lb: {mode: adaptive, flowlet_gap_ns: -5}}", "packet.lb.flowlet_gap_ns"),
    ("{lb: {spray: hash}}", "packet.lb.spray"),
    ("{nic: {receiver: sack}}", "packet.nic.receiver"),
    ("{nic: {receiver: ooo, ooo_bitmap_packets: 0}}", "packet.nic.ooo_bitmap_packets"),
    # the UEC congestion controls: RCCC needs the receiver's rate (docs/packet.md)
    ("{cc: {algorithm: rccc}}", "packet.cc.rccc.receiver_gbps"),
    ("{cc: {algorithm: nscc+rccc}}", "packet.cc.rccc.receiver_gbps"),
    ("{cc: {algorithm: rccc, rccc: {receiver_gbps: 0}}}", "packet.cc.rccc.receiver_gbps"),
    ("{cc: {algorithm: nscc, nscc: {gamma: 2}}}", "packet.cc.nscc.gamma"),
    # NIC-side spraying and trimming (docs/packet.md)
    ("{nic: {entropy: {algorithm: flowlet}}}", "packet.nic.entropy.algorithm"),
    ("{nic: {entropy: {algorithm: oblivious, values: 0}}}", "packet.nic.entropy.values"),
    ("{nic: {entropy: {algorithm: reps, values: 65537}}}", "packet.nic.entropy.values"),
    ("{pfc: {enabled: false}, buffer: {size_bytes: 100000}, switch: {trim: {enabled: true, "
     "threshold_bytes: 200000}}}", "switch.trim.threshold_bytes"),
    ("{pfc: {enabled: false}, switch: {trim: {enabled: true, threshold_bytes: 16GiB}}}",
     "packet.switch.trim.threshold_bytes"),
    ("{pfc: {enabled: true, priorities: [3]}, switch: {trim: {enabled: true}}}",
     "switch.trim.enabled"),
])
def test_bad_packet_settings_exit_2_with_one_line(cli, tmp_path, packet, where):
    """Kmin above Kmax, a probability outside [0, 1], XOFF below XON, a buffer smaller
    than its headroom, an unknown CC, a bad load-balancing or receiver setting: exit 2, one
    line naming file and field, no output."""
    s = _scenario(tmp_path, f"sim: packet\npacket: {packet}\ntraffic:\n"
                  "  - {pattern: permutation, gpus: all, size_bytes: 1000}\n")
    out = tmp_path / "rep"
    r = cli("simulate", s, "--out", out)
    assert r.code == 2
    lines = [x for x in r.err.splitlines() if x.strip()]
    assert len(lines) == 1, r.err
    assert "s.yaml" in lines[0] and where in lines[0]
    assert "Traceback" not in r.err and not out.exists()


def test_compare_puts_packet_load_balancing_side_by_side(cli, tmp_path):
    """``compare`` of ECMP and NIC-side spraying (REPS, ooo receiver) on the k=4
    permutation: the side-by-side rows carry the FCT slowdowns, the fabric's link load
    spread, reordering and retransmissions; spraying has the lower tail and spread and
    reorders, ECMP reorders nothing; the report has the comparison plot; the sprayed
    run's packet_reorder table holds one data arrival per frame."""
    traffic = ("traffic:\n  - {pattern: permutation, gpus: all, size_bytes: 1000000}\n"
               "sim: packet\n")
    a = tmp_path / "ecmp.yaml"
    a.write_text("name: ecmp\n" + FT + traffic)
    b = tmp_path / "reps.yaml"
    b.write_text("name: reps\n" + FT + traffic + "packet: {nic: {receiver: ooo, "
                 "fast_retransmit_packets: 8, entropy: {algorithm: reps}}}\n")
    out = tmp_path / "cmp"
    r = cli("compare", a, b, "--out", out)
    assert r.code == 0, r.err
    for row in ("FCT slowdown p99", "fabric link load", "packets out of order",
                "retransmitted", "NAKs"):
        assert row in r.out, row
    assert (out / "comparison_packet.png").stat().st_size > 10_000
    assert "comparison_packet.png" in (out / "report.md").read_text()
    res = json.loads(cli("compare", a, b, "--json").out)
    e, s = (x["packet"] for x in res)
    assert "reorder" not in e and s["reorder"]["ooo_share"] > 0.3
    assert s["fct"]["slowdown_p99"] < e["fct"]["slowdown_p99"]
    assert s["delivered_bytes"] == e["delivered_bytes"] == 16 * 1_000_000
    hist = (out / "reps" / "packet_reorder.csv").read_text().splitlines()
    assert hist[0] == "qp,distance_packets,packets"
    assert sum(int(x.split(",")[2]) for x in hist[1:]) == 16 * 245


def test_spraying_onto_go_back_n_receivers_is_allowed_and_its_cost_printed(cli, tmp_path):
    """NIC-side spraying onto plain RoCE (go-back-N) receivers runs (exit 0) and the
    console's reorder line says what it cost: NAKs and retransmitted bytes, the same
    figures as the JSON summary."""
    s = _scenario(tmp_path, "sim: packet\npacket: {nic: {entropy: {algorithm: oblivious, "
                  "values: 64}}}\ntraffic:\n  - {pattern: permutation, gpus: all, "
                  "size_bytes: 500000}\n")
    r = cli("simulate", s)
    assert r.code == 0, r.err
    line = next(x for x in r.out.splitlines() if x.startswith("reorder:"))
    ro = json.loads(cli("simulate", s, "--json").out)["packet"]["reorder"]
    assert ro["entropy"] == "oblivious" and ro["receiver"] == "go_back_n"
    assert ro["naks"] > 0 and ro["retx_bytes"] > 0
    assert f"{ro['naks']:,} NAKs" in line
    assert f"{ro['retx_bytes'] / 1e6:.2f} MB retransmitted" in line


def test_a_sprayed_run_with_no_transfer_on_the_network_runs(cli, tmp_path):
    """A collective of one GPU under per-packet spraying puts nothing on the network (no
    port at all): it runs and reports zero packets instead of failing in the tables of
    load balancing (found by the scenario fuzzer)."""
    s = tmp_path / "one.yaml"
    s.write_text("name: one\nspec:\n  name: s\n  hosts: {count: 4, nics_per_host: 2, "
                 "gpus_per_host: 2}\n  topology: {family: clos, leaf: {model: tomahawk3}, "
                 "spine: {model: tomahawk3}}\nsim: packet\ncollectives:\n  - {op: allreduce, "
                 "size_bytes: 4KiB, gpus: 1}\nrouting: {policy: spray}\n")
    r = cli("simulate", s, "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["packet"]["delivered_bytes"] == 0
