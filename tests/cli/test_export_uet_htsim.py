"""``aifabric export SCENARIO --format uet-htsim``: the files as the UEC consortium's
reference simulator (uet-htsim, ``htsim/sim/datacenter``) reads them, checked by a reader
that follows its parsers rule for rule:

* ``fabric.topo``: ``FatTreeTopologyCfg::read_cfg`` -- a header of ``Nodes``, ``Tiers``
  (2 or 3) and ``Podsize``, then per ``Tier n`` only the attributes it allows, each at
  most once, every tier present; and the switch sizes its FatTreeTopology asserts (at
  most 96 hosts per ToR, 128 ports per ToR or 2-tier spine);
* ``connections.cm``: ``ConnectionMatrix::load`` -- ``Nodes``, ``Connections``, then
  ``src->dst id k start <whole us> size <bytes>`` with nonzero ids, hosts below Nodes;
* ``command.txt``: ``main_uec.cpp``'s flags with their argument counts; ``-mtu`` the
  whole packet (its payload is -mtu - 64), ``-q`` and ``-ecn`` in packets of -mtu bytes.

So each flow's packets must be the packet simulator's frames, the thresholds the
scenario's, the congestion control the scenario's. (The files were also run as-is on a
built uet-htsim; CI does not build it.)"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from tests.sim.packet.nets import ft4_permutation

#: main_uec.cpp's flags this export writes, with their argument counts
UET_FLAGS = {"-tm": 1, "-topo": 1, "-linkspeed": 1, "-mtu": 1, "-q": 1, "-paths": 1,
             "-ecn": 2, "-sender_cc_only": 0, "-receiver_cc_only": 0, "-sender_cc": 0,
             "-receiver_cc": 0, "-target_q_delay": 1, "-cwnd": 1, "-disable_trim": 0,
             "-end": 1, "-seed": 1}
#: FatTreeTopologyCfg::read_cfg's tier attributes (lower-cased)
TIER_KEYS = {"tier", "downlink_speed_gbps", "radix_up", "radix_down", "queue_up",
             "queue_down", "oversubscribed", "bundle", "switch_latency_ns",
             "downlink_latency_ns"}


def read_topo(text: str) -> dict:
    """fabric.topo as read_cfg reads it (errors as assertions)."""
    head: dict[str, int] = {}
    tiers: dict[int, dict[str, int]] = {}
    cur = None
    for ln in text.splitlines():
        tok = ln.split(" ")
        if not ln or tok[0].startswith("#"):
            continue
        key = tok[0].lower()
        if cur is None and key != "tier":
            assert key in ("nodes", "tiers", "podsize"), ln
            head[key] = int(tok[1])
            continue
        assert key in TIER_KEYS, f"unknown attribute {tok[0]}"
        if key == "tier":
            cur = int(tok[1])
            assert 0 <= cur <= 2 and cur not in tiers
            tiers[cur] = {}
            continue
        assert key not in tiers[cur], f"duplicate {key} in tier {cur}"
        assert not (cur == 2 and key in ("radix_up", "queue_up"))
        tiers[cur][key] = int(tok[1])  # (stoi: an integer)
    assert head.get("nodes", 0) > 0 and head.get("podsize", 0) > 0
    assert head.get("tiers") in (2, 3)
    assert set(tiers) == set(range(head["tiers"]))
    return {"head": head, "tiers": tiers}


def read_cm(text: str) -> tuple[int, np.ndarray]:
    """connections.cm as ConnectionMatrix::load reads it: N and rows (src, dst, id,
    start, size)."""
    lines = text.splitlines()
    assert lines[0].split()[0] == "Nodes" and lines[1].split()[0] == "Connections"
    n, m = int(lines[0].split()[1]), int(lines[1].split()[1])
    rows = []
    for ln in lines[2:]:
        tok = ln.split(" ")
        s, d = tok[0].split("->")
        kv = dict(zip(tok[1::2], tok[2::2], strict=True))
        assert set(kv) == {"id", "start", "size"}
        rows.append((int(s), int(d), int(kv["id"]), int(kv["start"]), int(kv["size"])))
    a = np.array(rows, dtype=np.int64)
    assert len(a) == m and (a[:, 2] != 0).all() and len(np.unique(a[:, 2])) == m
    assert ((a[:, :2] >= 0) & (a[:, :2] < n)).all() and (a[:, 0] != a[:, 1]).all()
    assert (a[:, 4] > 0).all() and (a[:, 4] < 1 << 31).all()
    return n, a


def read_cmd(text: str) -> dict[str, list[str]]:
    tok = text.split()
    assert tok[0] == "htsim_uec"
    out: dict[str, list[str]] = {}
    i = 1
    while i < len(tok):
        assert tok[i] in UET_FLAGS, f"htsim_uec has no flag {tok[i]}"
        k = UET_FLAGS[tok[i]]
        out[tok[i]] = tok[i + 1:i + 1 + k]
        i += 1 + k
    return out


def _export(cli, tmp_path: Path, packet: dict, size: int = 1_000_000) -> Path:
    doc = ft4_permutation(size)
    doc.update(sim="packet", packet=packet)
    s = tmp_path / "s.yaml"
    s.write_text(yaml.safe_dump(doc, sort_keys=False))
    out = tmp_path / "uet"
    r = cli("export", s, "--format", "uet-htsim", "--out", out)
    assert r.code == 0, r.err
    return out


@pytest.mark.parametrize(("alg", "flags"), [
    ("nscc", ["-sender_cc_only"]), ("rccc", ["-receiver_cc_only"]),
    ("nscc+rccc", ["-sender_cc", "-receiver_cc"])])
def test_uet_htsim_files_parse_as_its_readers_do_and_carry_the_scenario(cli, tmp_path,
                                                                        alg, flags):
    """The k=4 fat-tree permutation under each UEC congestion control: the three files
    pass uet-htsim's parsers; 16 hosts, every flow once with its frame count x the -mtu
    payload; -mtu = the packet simulator's frame (4096 + 62 + 20); -ecn = kmin/kmax in
    frames; the congestion control's flags."""
    pkt = {"cc": {"algorithm": alg, "rccc": {"receiver_gbps": 100}},
           "pfc": {"enabled": False}, "nic": {"receiver": "ooo"}, "lb": {"mode": "spray"},
           "ecn": {"kmin_bytes": 41780, "kmax_bytes": 167120}}
    out = _export(cli, tmp_path, pkt)
    topo = read_topo((out / "fabric.topo").read_text())
    n, cm = read_cm((out / "connections.cm").read_text())
    cmd = read_cmd((out / "command.txt").read_text())
    assert topo["head"]["nodes"] == n == 16 and topo["head"]["tiers"] == 3
    t0 = topo["tiers"][0]
    assert t0["radix_down"] <= 96 and t0["radix_down"] + t0["radix_up"] <= 128
    assert sorted(cm[:, 0].tolist()) == list(range(16))  # a permutation: each sends once
    assert sorted(cm[:, 1].tolist()) == list(range(16))
    frame = 4096 + 62 + 20
    assert cmd["-mtu"] == [str(frame)]
    pkts = -(-1_000_000 // 4096)
    assert (cm[:, 4] == pkts * (frame - 64)).all()  # the same packets as the simulator's
    assert (cm[:, 3] == 0).all()
    assert cmd["-ecn"] == ["10", "40"]  # 41,780 / 4178, 167,120 / 4178
    assert all(f in cmd for f in flags) and cmd["-paths"] != ["1"]
    assert cmd["-tm"] == ["connections.cm"] and cmd["-topo"] == ["fabric.topo"]
    assert cmd["-linkspeed"] == ["100000"] and "-disable_trim" in cmd
    run = (out / "run.sh").read_text()
    assert (out / "command.txt").read_text().strip() in run


def test_uet_htsim_ecmp_is_one_entropy_value_and_nscc_settings_travel(cli, tmp_path):
    """Without spraying each connection gets one entropy value (one hashed path); NSCC's
    target delay and first window become -target_q_delay and -cwnd (packets)."""
    pkt = {"cc": {"algorithm": "nscc", "nscc": {"target_qdelay_us": 6.5,
                                                "init_window_bytes": 150 * 4178}},
           "pfc": {"enabled": False}, "nic": {"receiver": "ooo"}}
    cmd = read_cmd((_export(cli, tmp_path, pkt) / "command.txt").read_text())
    assert cmd["-paths"] == ["1"] and cmd["-target_q_delay"] == ["6.5"]
    assert cmd["-cwnd"] == ["150"] and "-sender_cc_only" in cmd


def test_uet_htsim_notes_say_what_does_not_map(cli, tmp_path):
    """A DCQCN, lossless, go-back-N scenario still exports (uet-htsim then runs its NSCC),
    and NOTES.md says that the CC, PFC and the receiver have no equivalent."""
    out = _export(cli, tmp_path, {"cc": {"algorithm": "dcqcn"}})
    notes = (out / "NOTES.md").read_text()
    for what in ("| cc.algorithm | no equivalent", "| pfc | no equivalent",
                 "| nic.receiver | no equivalent"):
        assert what in notes
    assert not any(f in read_cmd((out / "command.txt").read_text())
                   for f in ("-sender_cc_only", "-receiver_cc_only"))


def test_ns3_refuses_a_uec_congestion_control_with_one_line(cli, tmp_path):
    """ns-3's RDMA simulator has no NSCC: exit 2, one line naming the field."""
    doc = ft4_permutation(100_000)
    doc.update(sim="packet", packet={"cc": {"algorithm": "nscc"}})
    s = tmp_path / "s.yaml"
    s.write_text(yaml.safe_dump(doc, sort_keys=False))
    r = cli("export", s, "--format", "ns3-rdma", "--out", tmp_path / "ns3")
    assert r.code == 2
    lines = [x for x in r.err.splitlines() if x.strip()]
    assert len(lines) == 1 and "packet.cc.algorithm" in lines[0]
    assert not (tmp_path / "ns3").exists()
