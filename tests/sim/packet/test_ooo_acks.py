"""The out-of-order receiver's coalesced ACKs (``nic.ooo_acks: coalesced``, uet-htsim's
UecSink): every byte delivered once under spraying, the ACK count in closed form on an
in-order path, bounded by the interval under reordering, an ACK for every ECN-marked
packet, the sender's ack request keeping a window smaller than the interval moving, and
the default (``per_packet``) left as it was."""

from __future__ import annotations

import math

import pytest

from aifabric.sim.packet import layout as L
from aifabric.sim.packet.config import PacketConfig
from tests.sim.packet.nets import incast
from tests.sim.packet.test_lb import diamond, run

PKTS = math.ceil(1_000_000 / 4096)  # 245 frames of a 1 MB flow


def cfg(lb: str = "ecmp", acks: str = "coalesced", every: int = 4, **kw) -> PacketConfig:
    nic = {"receiver": "ooo", "ooo_acks": acks, "ack_interval_packets": every,
           **kw.pop("nic", {})}
    return PacketConfig.model_validate({"lb": {"mode": lb}, "nic": nic,
                                        "ecn": {"enabled": False}, **kw})


def acks_sent(s, q) -> int:
    """ACK frames the receiving NIC of QP ``q`` sent (for all the QPs it receives): the
    bytes its port put on the wire (nothing else goes that way: no data, no CNPs
    without DCQCN's marks) / the ACK's size."""
    p = int(s.net.QR[q, 1, 0])
    b = int(s.net.PI[p, L.P_TXB])
    assert b % s.cfg.nic.ack_bytes == 0
    return b // s.cfg.nic.ack_bytes


@pytest.mark.parametrize("every", [1, 4, 7])
def test_in_order_the_ack_count_is_closed_form(every):
    """One flow on its route (no reordering, no marks, no window): the first frame is
    ACKed at once, then every ``every``-th, and the last frame (the sender's ack
    request): 1 + ceil((245 - 1) / every) ACKs."""
    t, r0, _ = diamond()
    s = run(t, [r0], cfg(every=every), sizes=(1_000_000,))
    assert s.counters()["qps_done"] == 1
    assert acks_sent(s, 0) == 1 + math.ceil((PKTS - 1) / every)


@pytest.mark.parametrize("lb", ["spray", "adaptive"])
def test_sprayed_every_byte_once_and_acks_coalesced(lb):
    """Two flows sprayed over the diamond's paths of unequal delay (frames overtake each
    other): every byte is delivered exactly once, nothing is retransmitted, and the
    receiver sends at most one ACK per interval of frames plus the first and the
    sender's request (the last frame) and its drain, where ``per_packet`` with fast
    retransmit ACKs every frame ahead of a hole as well."""
    t, r0, r1 = diamond()
    s = run(t, [r0, r1], cfg(lb))
    c = s.counters()
    assert c["qps_done"] == 2 and c["delivered_bytes"] == 2_000_000
    assert c["duplicate_bytes"] == 0 and c["retx_bytes"] == 0 and c["drops"] == 0
    for q in s.qps:
        assert q.rcv_nxt == q.size and q.snd_una == q.size
    assert s.reorder()["ooo_packets"].sum() > 20  # it did reorder
    per = run(t, [r0, r1], cfg(lb, "per_packet", nic={"fast_retransmit_packets": 8}))
    # both flows end at h1: its NIC sends the ACKs of both
    assert acks_sent(s, 0) <= 2 * (1 + math.ceil((PKTS - 1) / 4) + 2)
    ooo = int(per.reorder()["ooo_packets"].sum())
    assert acks_sent(per, 0) >= ooo + (2 * PKTS - ooo) // 4
    assert acks_sent(s, 0) < acks_sent(per, 0)


def test_every_marked_packet_is_acked_at_once():
    """An 8-to-1 incast with WRED marking: each marked data frame triggers its own ACK,
    so a receiver sends at least as many ACKs as its QP's frames were marked, and no
    more than the marked ones plus one per interval of the rest plus the first, the
    last and the drain after a request."""
    c = PacketConfig.model_validate({
        "nic": {"receiver": "ooo", "ooo_acks": "coalesced", "ack_interval_packets": 8},
        "cc": {"algorithm": "none"}, "ecn": {"kmin_bytes": 20_000, "kmax_bytes": 200_000,
                                             "pmax": 0.2}})
    sim, qps, _ = incast(c, n=8, size=400_000)
    sim.run()
    cnt = sim.counters()
    assert cnt["qps_done"] == 8 and cnt["drops"] == 0 and cnt["ecn_marks"] > 100
    n = math.ceil(400_000 / 4096)
    total = acks_sent(sim, qps[0].id)  # one receiving NIC
    marks = cnt["ecn_marks"]  # each data frame marked at most once, on the way in
    assert total >= marks
    assert total <= marks + 8 * (1 + math.ceil(n / 8) + 2)


def test_ack_request_keeps_a_small_window_moving():
    """An NSCC window of about 6 frames under an ACK interval of 16: with ``per_packet``
    the receiver waits for 16 in-order frames the window never lets out, and the flow
    moves by retransmission timeouts; coalesced, the frame that fills the window asks
    for an ACK (uet-htsim's ar flag) and the flow never times out."""
    t, r0, _ = diamond()
    kw = {"cc": {"algorithm": "nscc"}, "nic": {"rto_us": 100}}
    co = run(t, [r0], cfg(every=16, **kw), sizes=(1_000_000,))
    per = run(t, [r0], cfg(acks="per_packet", every=16, **kw), sizes=(1_000_000,))
    assert co.counters()["qps_done"] == 1 and co.counters()["timeouts"] == 0
    assert per.counters()["timeouts"] > 0
    assert co.qps[0].done_ps < per.qps[0].done_ps / 5


def test_per_packet_is_the_default_and_go_back_n_ignores_it():
    """The default keeps today's receiver; a go-back-N receiver has no out-of-order
    state to coalesce over: the setting leaves its run unchanged."""
    assert PacketConfig().nic.ooo_acks == "per_packet"
    t, r0, _ = diamond()
    runs = [run(t, [r0], PacketConfig.model_validate(
        {"lb": {"mode": "spray"}, "nic": {"receiver": "go_back_n", "ooo_acks": a}}),
        sizes=(1_000_000,)) for a in ("per_packet", "coalesced")]
    assert int(runs[1].net.CI[L.ACKCO]) == 0
    assert runs[0].counters()["naks"] > 0  # sprayed onto go-back-N: it did NAK
    assert runs[0].qps[0].done_ps == runs[1].qps[0].done_ps
    assert acks_sent(runs[0], 0) == acks_sent(runs[1], 0)


def test_bad_ooo_acks_is_one_line():
    from aifabric.errors import SpecError
    from aifabric.sim.packet.config import packet_config_from_dict

    with pytest.raises(SpecError) as e:
        packet_config_from_dict({"nic": {"ooo_acks": "sometimes"}})
    msg = str(e.value)
    assert "ooo_acks" in msg and "coalesced" in msg and "\n" not in msg
