"""``simulate`` on a fabric whose scale-up domains span several hosts (an NVL72 rack of
trays): GPUs of one domain meet on its NVLink switches, never on the scale-out fabric."""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from aifabric.sim.flow.engine import run_flow
from aifabric.sim.paths import arc_latency_ns, route_dag
from aifabric.sim.run import compile_workload, gpu_pool
from aifabric.sim.scenario import SimScenario
from aifabric.spec import spec_from_dict
from aifabric.topology import build_fabric
from aifabric.topology.domain import host_domains, resolve_domain
from aifabric.topology.fabric import LinkKind

#: 8 trays of 4 GPUs (GB200-like) in domains of 16 (4 trays each), 4 x 400G per tray
TRAYS = {"name": "trays", "hosts": {"count": 8, "gpus_per_host": 4, "nics_per_host": 4,
                                    "port_gbps": 400},
         "topology": {"family": "clos", "rail_optimized": True}}
NVL16 = {"gpus": 16, "switch": "nvswitch4"}


def _run(domain: dict | None, scn: dict):
    spec = spec_from_dict({**TRAYS, "scaleup_domain": domain} if domain else TRAYS)
    f = build_fabric(spec)
    s = SimScenario(name="t", sim="flow", spec=spec, **scn)
    wl = compile_workload(s, f)
    paths, xconn = route_dag(f, wl.dag, spec.routing)
    run = run_flow(wl.dag, paths, xconn)
    return f, wl, paths, run


def _scaleout_bytes(f, run) -> float:
    """Bytes on every arc that is not NVLink: PCIe, NIC-ToR and switch links."""
    kind = np.repeat(f.links.kind, 2)
    return float(run.arc_bytes[kind != LinkKind.SCALEUP].sum())


def test_domains_are_consecutive_trays_and_none_for_one_host():
    f = build_fabric(spec_from_dict({**TRAYS, "scaleup_domain": NVL16}))
    assert host_domains(f).tolist() == [0, 0, 0, 0, 1, 1, 1, 1]
    assert host_domains(build_fabric(spec_from_dict(TRAYS))) is None
    one = build_fabric(spec_from_dict({**TRAYS, "scaleup_domain": {"gpus": 4}}))
    assert host_domains(one) is None


@pytest.mark.parametrize("size", [256 << 20, 8 << 30])
def test_ring_inside_a_domain_never_touches_the_scaleout_and_meets_nvlinks_closed_form(size):
    """A ring AllReduce over the 16 GPUs of one domain (4 trays): 0 bytes on any PCIe, NIC
    or switch link; each GPU's NVLink carries 2(n-1)/n S each way; the time is the NVLink
    closed form 2(n-1) (S/n / B + latency), B the domain's per-GPU rate, within 1%."""
    f, _, _, run = _run(NVL16, {"collectives": [
        {"name": "ar", "op": "allreduce", "algorithm": "ring", "size_bytes": size,
         "gpus": list(range(16))}]})
    assert _scaleout_bytes(f, run) == 0.0
    n = 16
    dom = resolve_domain(f.spec, 8)
    B = dom.gbps_per_gpu  # 18 x 400G
    assert B == 7200
    su = np.flatnonzero(f.links.kind == LinkKind.SCALEUP)
    gpus = gpu_pool(f).node[:n]
    up = run.arc_bytes[2 * su][np.isin(f.links.a[su], gpus)]
    assert np.allclose(up, 2 * (n - 1) / n * size, rtol=1e-9)
    lat = arc_latency_ns(f)[2 * su[0]] + arc_latency_ns(f)[2 * su[0] + 1]
    closed = 2 * (n - 1) * (size / n * 8 / B + lat)
    t = float(run.stage_end_ns.max())
    assert t == pytest.approx(closed, rel=0.01)
    # the trays' own links would not do: a GPU's NIC is 400G, 18x slower than NVLink
    assert t < 2 * (n - 1) / n * size * 8 / 400 / 4


def test_the_same_ring_without_the_domain_crosses_the_fabric():
    """Without the domain (one NVLink island per tray) the same ring leaves the trays:
    the check above can fail."""
    f, _, _, run = _run(None, {"collectives": [
        {"name": "ar", "op": "allreduce", "algorithm": "ring", "size_bytes": 256 << 20,
         "gpus": list(range(16))}]})
    assert _scaleout_bytes(f, run) > 0


def test_a_jobs_tp_and_ep_inside_a_domain_stay_on_nvlink():
    """A MoE job of TP 4 x EP 4 on the 16 GPUs of one domain (4 trays): its TP AllReduces
    and EP All-to-Alls cross trays, all on NVLink: 0 bytes on the scale-out; the job on
    both domains (DP 2 across them) sends only its DP traffic out, between the domains."""
    job = {"name": "moe", "gpus": 16, "parallel": {"tp": 4, "dp": 4, "pp": 1, "ep": 4},
           "model": {"params": 1e9, "layers": 2, "hidden": 2048, "seq_len": 1024,
                     "micro_batch": 1, "moe_every": 1, "top_k": 2},
           "compute": {"fwd_ms_per_layer": 0.1}, "placement": "pack"}
    f, _, _, run = _run(NVL16, {"jobs": [job]})
    assert run.arc_bytes.sum() > 0 and _scaleout_bytes(f, run) == 0.0
    f0, _, _, run0 = _run(None, {"jobs": [job]})
    assert _scaleout_bytes(f0, run0) > 0  # on trays alone the groups cross the fabric
    two = {**job, "gpus": 32, "parallel": {"tp": 4, "dp": 8, "pp": 1, "ep": 4}}
    f2, wl2, _, run2 = _run(NVL16, {"jobs": [two]})
    dag = wl2.dag
    dom = host_domains(f2)
    cross = dom[f2.nodes.host[dag.src]] != dom[f2.nodes.host[dag.dst]]
    labels = np.asarray(dag.stage_label)[dag.xfer_stage]
    moved = dag.size_bytes * dag.repeat[dag.xfer_stage]
    assert moved[cross].sum() > 0 and _scaleout_bytes(f2, run2) > 0
    # EP's All-to-Alls stay inside; what crosses joins GPUs of the same TP rank (DP rings)
    assert "alltoall" in set(labels[~cross]) and "alltoall" not in set(labels[cross])
    node = gpu_pool(f2).node
    pos = np.full(f2.n_nodes, -1)
    pos[node] = np.arange(len(node))
    assert (pos[dag.src[cross]] % 4 == pos[dag.dst[cross]] % 4).all()


def test_simulate_cli_has_no_domain_note_and_nvlink_only(cli, tmp_path):
    """`aifabric simulate` on GB200 NVL72 trays: a ring over one 72-GPU domain runs on
    NVLink alone (no note that it does not), the tiers it loads are the scale-up ones."""
    import json

    from tests.conftest import EXAMPLES

    doc = yaml.safe_load((EXAMPLES / "scaleup" / "gb200-nvl72-x8.yaml").read_text())
    doc["hosts"]["gpus"] = 144
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(doc))
    (tmp_path / "scn.yaml").write_text(yaml.safe_dump({
        "name": "r", "spec": "spec.yaml", "sim": "flow", "collectives": [
            {"name": "ar", "op": "allreduce", "algorithm": "ring", "size_bytes": "1GiB",
             "gpus": list(range(72))}]}))
    r = cli("simulate", tmp_path / "scn.yaml", "--json")
    assert r.code == 0, r.err
    out = json.loads(r.out)
    assert "notes" not in out
    assert set(out["tiers"]) == {"scaleup up", "scaleup down"}
    (c,) = out["collectives"]
    n, B, hop = 72, 18 * 400, 2 * 500  # a step: up to the NVSwitch and down, 500 ns each
    assert c["time_ns"] == pytest.approx(2 * (n - 1) * (2**30 / n * 8 / B + hop), rel=0.01)


def test_a_domain_of_one_host_changes_nothing(cli, tmp_path):
    """A domain of one 4-GPU tray (at the default NVLink rate of the trays) simulates a
    job and collectives across trays byte for byte as the spec without a domain."""
    outs = []
    for name, domain in (("plain", None), ("one", {"gpus": 4, "switch": "nvswitch3"})):
        d = tmp_path / name
        d.mkdir()
        doc = dict(TRAYS) if domain is None else {**TRAYS, "scaleup_domain": domain}
        (d / "spec.yaml").write_text(yaml.safe_dump(doc))
        (d / "scn.yaml").write_text(yaml.safe_dump({
            "name": "s", "spec": "spec.yaml", "sim": "flow",
            "collectives": [{"name": "ar", "op": "allreduce", "algorithm": "ring",
                             "size_bytes": "64MiB", "gpus": 16}],
            "jobs": [{"name": "j", "gpus": 16, "parallel": {"tp": 4, "dp": 4, "ep": 2},
                      "model": {"params": 1e8, "layers": 2, "hidden": 1024,
                                "seq_len": 512, "moe_every": 1}}]}))
        r = cli("simulate", d / "scn.yaml", "--json")
        assert r.code == 0, r.err
        outs.append(r.out)
    assert outs[0] == outs[1]
