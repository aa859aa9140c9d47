"""frr.conf: accepted by the real FRR, eBGP sessions mirrored, HPN host routes."""

from __future__ import annotations

import re
from functools import cache

import pytest

from aifabric.configs.frrcheck import BGPD, validate_frr_confs
from tests.configs.conftest import FAMILIES, config_dbs, need_tool, small_files


def _confs(family: str) -> dict[str, str]:
    return {rel.split("/")[1]: text for rel, text in small_files(family).items()
            if rel.endswith("frr.conf")}


@cache
def _vtysh_failures() -> list[tuple[str, str]]:
    """Every frr.conf of every small fabric, in one vtysh dry run."""
    docs = [(f"{fam}/{n}", t) for fam in FAMILIES for n, t in _confs(fam).items()]
    return validate_frr_confs(docs)


@pytest.mark.parametrize("family", FAMILIES)
def test_every_frr_conf_passes_the_vtysh_dry_run(family):
    """vtysh --dryrun (every daemon's grammar) rejects no line of any frr.conf."""
    need_tool("vtysh")
    assert [f for f in _vtysh_failures() if f[0].startswith(f"{family}/")] == []


@pytest.mark.parametrize("family", ["hpn", "single_tor"])
def test_bgpd_accepts_one_switch_of_each_tier(family):
    """bgpd -C executes the config (ASNs, peer groups, neighbours) and names no rejected
    line, for a ToR, an agg and a core."""
    need_tool("vtysh")  # the bgpd check runs the vtysh dry run first
    need_tool(BGPD)
    confs = _confs(family)
    picks = [next(n for n in sorted(confs) if n.startswith(p)) for p in ("tor", "agg", "core")]
    assert validate_frr_confs([(n, confs[n]) for n in picks], bgpd=True) == []


def test_a_broken_frr_conf_is_rejected_and_located():
    """A bad line is reported with its file and its line number in that file, even
    when several files are checked in one run."""
    need_tool("vtysh")
    need_tool(BGPD)
    confs = _confs("clos")
    name = sorted(confs)[0]
    lines = confs[name].splitlines()
    at = next(i for i, x in enumerate(lines) if x.startswith(" bgp bestpath"))
    lines.insert(at + 1, " bgp bestpath as-path multipath-magic")
    bad = "\n".join(lines) + "\n"
    failures = validate_frr_confs([("ok", confs[name]), ("bad", bad), ("ok2", confs[name])],
                                  bgpd=True)
    assert {f[0] for f in failures} == {"bad"}
    assert any(f"line {at + 2}:" in msg for _, msg in failures)


@pytest.mark.parametrize("family", FAMILIES)
def test_frr_matches_config_db(family):
    """frr.conf's AS, router-id and neighbours (IP, remote AS) are exactly config_db's
    DEVICE_METADATA.bgp_asn, Loopback0 and BGP_NEIGHBOR; maximum-paths covers them."""
    dbs = config_dbs(family)
    for name, text in _confs(family).items():
        db = dbs[name]
        assert re.search(rf"^router bgp {db['DEVICE_METADATA']['localhost']['bgp_asn']}$",
                         text, re.M)
        lo = next(k for k in db["LOOPBACK_INTERFACE"] if "|" in k).split("|")[1][:-3]
        assert f" bgp router-id {lo}\n" in text
        nbrs = dict(re.findall(r"^ neighbor (\d+\.\d+\.\d+\.\d+) remote-as (\d+)$", text, re.M))
        assert nbrs == {ip: nb["asn"] for ip, nb in db.get("BGP_NEIGHBOR", {}).items()}
        assert "bgp bestpath as-path multipath-relax" in text
        paths = int(re.search(r"maximum-paths (\d+)", text).group(1))
        assert paths >= min(len(nbrs), 256)


def test_hpn_tors_redistribute_arp_learned_host_routes():
    """HPN ToRs announce host /32s learned by ARP (kernel routes); other families' ToRs
    the plan's /32s as static routes to the host VLAN; aggs announce only loopbacks."""
    for name, text in _confs("hpn").items():
        if name.startswith("tor-"):
            assert "redistribute kernel route-map REDISTRIBUTE" in text
            assert "permit 10.0.0.0/8 ge 32" in text
        else:
            assert "redistribute kernel" not in text and "HOSTS" not in text
    confs = _confs("clos")
    tor = next(t for n, t in confs.items() if n.startswith("leaf"))
    assert "redistribute static route-map REDISTRIBUTE" in tor
    assert len(re.findall(r"^ip route 10\.\d+\.\d+\.\d+/32 Vlan1000$", tor, re.M)) > 0
