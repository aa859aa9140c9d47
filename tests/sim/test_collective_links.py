"""The ``collective_links`` table: which link directions each collective crosses and
the bytes it puts on each (from the routed paths, by sparse products)."""

from __future__ import annotations

import json
from functools import cache

import numpy as np
import pytest

from aifabric import build_fabric
from aifabric.routing.scenario import scenario_from_dict
from aifabric.sim.run import simulate
from aifabric.sim.scenario import SimScenario
from aifabric.spec.load import spec_from_dict
from aifabric.topology.fabric import NodeKind

GIB = 1 << 30


def _rail(hosts: int, gpus_per_host: int) -> dict:
    return {"name": f"rail-{hosts}x{gpus_per_host}",
            "hosts": {"count": hosts, "gpus_per_host": gpus_per_host,
                      "nics_per_host": gpus_per_host, "port_gbps": 400},
            "topology": {"family": "rail"}}


def _hpn() -> dict:
    return {"name": "hpn-mini",
            "hosts": {"count": 32, "ports_per_nic": 2, "port_gbps": 200,
                      "scaleup_gbps": 3200},
            "topology": {"family": "hpn", "planes": 2, "hosts_per_segment": 8,
                         "tor": {"model": "tomahawk5", "down_gbps": 200, "up_ports": 8,
                                 "up_gbps": 400},
                         "agg": {"model": "tomahawk5", "down_ports": 32, "up_ports": 0},
                         "core": None}}


@cache
def _fabric(spec_json: str):
    return build_fabric(spec_from_dict(json.loads(spec_json)))


def _run(spec: dict, body: dict, routing: dict, sim: str = "flow"):
    scn = scenario_from_dict({"name": spec["name"], "spec": spec, "routing": routing,
                              "sim": sim, **body}, model=SimScenario)
    f = _fabric(json.dumps(spec, sort_keys=True))
    return f, simulate(scn, f)


def _arcs(t: dict) -> np.ndarray:
    return t["link"].astype(np.int64) * 2 + (t["direction"] == "down")


@pytest.mark.parametrize("sim", ["flow", "analytic"])
def test_per_link_the_collectives_add_up_to_the_links_table(sim: str) -> None:
    """Two AllReduces and an All-to-All on a dual-plane HPN pod (ECMP, several QPs per
    connection, repeats): on every link direction, the bytes of the collectives sum to
    the links table's bytes (the run has nothing else), and each collective's rows name
    the same link as the links table does."""
    body = {"collectives": [
        {"name": "ar0", "op": "allreduce", "size_bytes": 64 << 20, "gpus": 64,
         "placement": "spread", "segments": 4, "channels": 2, "repeat": 2},
        {"name": "ar1", "op": "allreduce", "size_bytes": 32 << 20, "gpus": 64,
         "placement": "spread", "segments": 4},
        {"name": "a2a", "op": "alltoall", "size_bytes": 16 << 20, "gpus": 64}]}
    f, r = _run(_hpn(), body, {"policy": "ecmp", "qps_per_connection": 4,
                              "nic_port_choice": "round_robin"}, sim)
    cl, lk = r.tables["collective_links"], r.tables["links"]
    assert set(cl["collective"]) == {"ar0#0", "ar0#1", "ar1", "a2a"}
    per_arc = np.bincount(_arcs(cl), weights=cl["bytes"], minlength=2 * f.n_links)
    want = np.zeros(2 * f.n_links)
    want[_arcs(lk)] = lk["bytes"]
    # (rows are rounded to whole bytes: half a byte per collective at most)
    np.testing.assert_allclose(per_arc, want, rtol=1e-12, atol=0.5 * len(set(cl["collective"])))
    # naming: the same from/to/tier as the links table for the same arc
    row = {int(a): i for i, a in enumerate(_arcs(lk))}
    for c in ("from", "to", "tier"):
        assert all(cl[c][i] == lk[c][row[int(a)]] for i, a in enumerate(_arcs(cl)))
    # each collective's bytes leaving its GPUs' NICs: every byte that goes between
    # hosts leaves a NIC port once (access up), nothing else does
    src, _dst, _ = f.arcs
    nic_up = (f.nodes.kind[src[_arcs(cl)]] == NodeKind.NIC) & (cl["direction"] == "up")
    tr, co = r.tables["transfers"], r.tables["collectives"]
    host = f.nodes.host
    names = {str(n): i for i, n in enumerate(f.nodes.name)}
    sh = np.array([host[names[s]] for s in tr["src_gpu"]])
    dh = np.array([host[names[d]] for d in tr["dst_gpu"]])
    for j, name in enumerate(co["collective"]):
        mine = (tr["collective"] == j) & (sh != dh)
        sent = float((tr["size_bytes"][mine] * tr["repeat"][mine]).sum())
        rows = nic_up & (cl["collective"] == name)
        got = float(cl["bytes"][rows].sum())
        assert sent > 0
        assert got == pytest.approx(sent, rel=1e-12, abs=0.5 * rows.sum())


def test_a_ring_allreduce_crosses_exactly_its_ring_hops_links() -> None:
    """A ring AllReduce of 8 GPUs, one per host, on a rail fabric (one ToR): ring hop
    g_i -> g_i+1 goes NIC_i -> ToR -> NIC_i+1, so the collective crosses exactly the 8
    access links in both directions (plus the PCIe hops), each direction with
    2 (n-1)/n x S bytes; a second collective on other hosts appears on none of them."""
    n, size = 8, 1 << 30
    spec = _rail(16, 1)
    body = {"collectives": [
        {"name": "ring", "op": "allreduce", "algorithm": "ring", "size_bytes": size,
         "gpus": list(range(n))},
        {"name": "other", "op": "allreduce", "size_bytes": size,
         "gpus": list(range(n, 16))}]}
    _f, r = _run(spec, body, {"policy": "ecmp"})
    cl = r.tables["collective_links"]
    ring = cl["collective"] == "ring"
    acc = ring & (cl["tier"] != "pcie up") & (cl["tier"] != "pcie down")
    hosts = sorted({str(h) for h in np.concatenate([cl["from"][acc], cl["to"][acc]])
                    if not str(h).startswith(("tor", "leaf"))})
    gpus = r.tables["transfers"]["src_gpu"][r.tables["transfers"]["collective"] == 0]
    assert len(set(gpus)) == n
    # every access link of the ring's hosts, both directions, and nothing else
    assert acc.sum() == 2 * n, (cl["from"][acc], cl["to"][acc])
    np.testing.assert_allclose(cl["bytes"][acc], 2 * (n - 1) / n * size, rtol=1e-9)
    assert hosts == sorted(str(g).replace("gpu0", "nic0") for g in set(gpus))
    other = cl["collective"] == "other"
    assert not set(_arcs(cl)[ring]) & set(_arcs(cl)[other])
