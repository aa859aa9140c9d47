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


def test_a_scenario_simulates_the_deployed_qos_unless_it_overrides_it():
    """The spec's deploy section (what `aifabric build` writes into switch and NIC
    configs) is what a packet run uses; the scenario's own `packet:` values win."""
    from aifabric.sim.packet.config import effective_packet_config
    from aifabric.spec.deploy import Deploy

    dep = Deploy.model_validate({
        "qos": {"mode": "lossless", "roce_dscp": 24, "roce_tc": 4, "cnp_dscp": 46,
                "cnp_tc": 5, "ecn": {"min_threshold_bytes": 50_000,
                                     "max_threshold_bytes": 800_000, "max_mark_percent": 10}},
        "dcqcn": {"rpg_time_reset": 55, "rpg_ai_rate": 8, "clamp_tgt_rate": 1}})
    cfg = effective_packet_config(PacketConfig(), dep)
    assert (cfg.ecn.kmin_bytes, cfg.ecn.kmax_bytes, cfg.ecn.pmax) == (50_000, 800_000, 0.1)
    assert cfg.pfc.enabled and cfg.pfc.priorities == [4]
    assert cfg.nic.dscp == 24 and cfg.nic.dscp_to_tc == {24: 4, 46: 5}
    assert cfg.cc.dcqcn.rpg_time_reset == 55 and cfg.cc.dcqcn.rpg_ai_rate == 8
    assert cfg.cc.dcqcn.clamp_tgt_rate is True
    own = packet_config_from_dict({"ecn": {"kmax_bytes": 900_000},
                                   "cc": {"dcqcn": {"rpg_time_reset": 300}}})
    cfg = effective_packet_config(own, dep)
    assert (cfg.ecn.kmin_bytes, cfg.ecn.kmax_bytes) == (50_000, 900_000)
    assert cfg.cc.dcqcn.rpg_time_reset == 300 and cfg.cc.dcqcn.rpg_ai_rate == 8
    lossy = Deploy.model_validate({"qos": {"mode": "lossy"}})
    assert not effective_packet_config(PacketConfig(), lossy).pfc.enabled


def test_an_override_that_contradicts_the_deployed_qos_is_one_clear_line():
    """A scenario Kmax below the deployed Kmin is the same bad input as both in the
    scenario: one problem naming packet.ecn."""
    from aifabric.sim.packet.config import effective_packet_config
    from aifabric.spec.deploy import Deploy

    dep = Deploy.model_validate({"qos": {"ecn": {"min_threshold_bytes": 500_000,
                                                 "max_threshold_bytes": 900_000}}})
    own = packet_config_from_dict({"ecn": {"kmax_bytes": 100_000}})
    with pytest.raises(SpecError) as err:
        effective_packet_config(own, dep, file="s.yaml")
    (p,) = err.value.problems
    assert p.path == "packet.ecn" and "kmin_bytes (500000) is above kmax_bytes" in p.message


def test_byte_settings_take_the_size_grammar():
    """Buffer, PFC, ECN and window sizes read the one size grammar (docs/spec.md, Units):
    ``32MiB`` is 32 x 2^20 bytes, ``100kB`` 10^5, and the value is bounded as a plain
    number is."""
    cfg = packet_config_from_dict({"buffer": {"size_bytes": "32MiB"},
                                   "ecn": {"kmin_bytes": "100kB", "kmax_bytes": "0.4MB"},
                                   "pfc": {"xoff_bytes": "256KiB", "xon_bytes": 240 << 10}})
    assert cfg.buffer.size_bytes == 32 << 20
    assert (cfg.ecn.kmin_bytes, cfg.ecn.kmax_bytes) == (100_000, 400_000)
    assert cfg.pfc.xoff_bytes == 256 << 10


@pytest.mark.parametrize(("doc", "path", "words"), [
    ({"buffer": {"size_bytes": "32 gigs"}}, "packet.buffer.size_bytes", "not a size"),
    ({"ecn": {"kmin_bytes": "4G"}}, "packet.ecn.kmin_bytes", "ambiguous"),
    ({"buffer": {"size_bytes": "1KiB"}}, "packet.buffer.size_bytes", "greater than or equal"),
])
def test_a_bad_size_names_its_field(doc, path, words):
    """A size that does not parse, a bare G, or one outside the field's range: one problem
    naming the field."""
    with pytest.raises(SpecError) as err:
        packet_config_from_dict(doc, file="s.yaml")
    probs = err.value.problems
    assert len(probs) == 1 and probs[0].path == path, probs
    assert words in probs[0].message, probs[0].message
