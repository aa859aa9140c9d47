"""Bad packet settings are refused with one clear line each (field path + what is allowed)."""

from __future__ import annotations

import pytest

from aifabric.errors import SpecError
from aifabric.sim.packet.config import PacketConfig, packet_config_from_dict
from aifabric.sim.packet.sim import Topology


@pytest.mark.parametrize(("doc", "path", "words"), [
    ({"ecn": {"kmin_bytes": 500_000, "kmax_bytes": 100_000}}, "packet.ecn",
     "kmin_bytes (500000) is above kmax_bytes"),
    ({"ecn": {"pmax": 1.5}}, "packet.ecn.pmax", "less than or equal to 1"),
    ({"ecn": {"pmax": -0.1}}, "packet.ecn.pmax", "greater than or equal to 0"),
    ({"pfc": {"xoff_bytes": 1000, "xon_bytes": 2000}}, "packet.pfc",
     "xoff_bytes (1000) is below xon_bytes"),
    ({"buffer": {"size_bytes": 100_000}, "pfc": {"headroom_bytes": 60_000,
                                                 "priorities": [3, 4]}},
     "packet", "smaller than the headroom"),
    ({"cc": {"algorithm": "bbr"}}, "packet.cc.algorithm", "'dcqcn'"),
    ({"cc": {"dcqcn": {"rpg_ai_rate": 5, "rpg_bogus": 1}}}, "packet.cc.dcqcn.rpg_bogus",
     "unknown field"),
])
def test_bad_input_is_one_line_naming_the_field(doc, path, words):
    """Kmin above Kmax, a probability outside [0, 1], XOFF below XON, a buffer smaller
    than the headroom it must hold, an unknown CC name: one problem each."""
    with pytest.raises(SpecError) as err:
        packet_config_from_dict(doc, file="s.yaml")
    probs = err.value.problems
    assert len(probs) == 1
    assert probs[0].path == path
    assert words in probs[0].message
    assert probs[0].file == "s.yaml"


def test_buffer_must_hold_the_headroom_of_every_port():
    """A switch whose buffer cannot reserve PFC headroom for all its ports is refused
    when the network is built (the port count is known only then)."""
    t = Topology()
    s = t.switch("s")
    for i in range(8):
        t.link(t.host(f"h{i}"), s, 100, 1000)
    cfg = PacketConfig.model_validate({"buffer": {"size_bytes": 200_000},
                                       "pfc": {"headroom_bytes": 50_000}})
    with pytest.raises(SpecError, match=r"buffer\.size_bytes"):
        t.sim(cfg)


def test_nvidia_dcqcn_defaults():
    """The DCQCN defaults are the values mlx5 NICs report."""
    p = PacketConfig().cc.dcqcn
    assert (p.rpg_ai_rate, p.rpg_hai_rate, p.rpg_time_reset, p.rpg_byte_reset,
            p.rpg_threshold, p.rpg_gd, p.rpg_min_dec_fac, p.rpg_min_rate, p.dce_tcp_g,
            p.dce_tcp_rtt, p.initial_alpha_value, p.rate_reduce_monitor_period) == \
        (5, 50, 300, 32767, 1, 11, 50, 1, 1019, 1, 1023, 4)
