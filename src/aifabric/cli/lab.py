"""``aifabric lab up|test|fail|restore|heal|deploy|status|down``: prove a design on FRR.

``up`` builds a scaled-down copy of the spec as network namespaces and veth pairs with
FRR in every switch (the configs ``aifabric build`` generates for that copy); ``test``
checks sessions, ECMP groups (kernel vs the routing model), reachability and hops;
``fail`` takes a switch or a link down and measures convergence; ``restore`` undoes it
and ``heal`` reconciles the kernel with the twin (:mod:`aifabric.lab.heal`); ``down`` removes
everything the lab made. Needs root and FRR; problems exit 2 with one line.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import typer
from rich.table import Table

from aifabric.cli._common import MAX_MEMORY, console, err_console, styled

DEFAULT_PORT_MBIT = 10.0  # = aifabric.lab.queues.DEFAULT_PORT_MBIT (imported lazily)

app = typer.Typer(name="lab", help="Prove a design on real FRR daemons in network namespaces "
                  "(needs root and FRR).", no_args_is_help=True, add_completion=False,
                  pretty_exceptions_enable=False, rich_markup_mode="markdown")

F = TypeVar("F", bound=Callable[..., Any])

DIR_OPT = typer.Option(None, "--dir", metavar="DIR",
                       help="lab folder (state, FRR sockets, pid files, logs); "
                       "default $AIFABRIC_LAB_DIR or /run/aifabric/lab")


def _lab_errors(fn: F) -> F:
    """LabError -> one line on stderr, exit 2 (SpecError is the entry point's)."""
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from aifabric.lab import LabError

        try:
            return fn(*args, **kwargs)
        except LabError as err:
            err_console.print(f"error: lab: {err}", markup=False, soft_wrap=True)
            raise typer.Exit(2) from None
    return wrapper  # type: ignore[return-value]


def _more(items: Any, shown: int, what: str) -> None:
    """Say how many of ``items`` a list cut at ``shown`` lines left out."""
    if len(items) > shown:
        console.print(f"  {shown} of {len(items):,} {what} shown", markup=False)


def _nexthops(lab: Any, sw: str, group: Any) -> str:
    """A kernel/model group as neighbour names: ``agg-p00-pl0-00, agg-p00-pl0-01``."""
    from aifabric.lab.verify import DIRECT
    from aifabric.topology import NodeKind

    if group is None:
        return "-"
    if group == DIRECT:
        return "direct"
    f = lab.fabric
    me = f.node_id(sw)
    if f.nodes.kind[me] == NodeKind.HOST:  # a host: its NIC's ports and their ToRs
        return ", ".join(f"{f.port_name(int(f.links.a[lid]), int(f.links.a_port[lid]))}"
                         f"->{f.nodes.name[int(f.links.b[lid])]}" if lid >= 0 else "?"
                         for lid in sorted(group))
    names = []
    for lid in sorted(group):
        if lid < 0:
            names.append("?")
            continue
        a, b = int(f.links.a[lid]), int(f.links.b[lid])
        names.append(str(f.nodes.name[b if a == me else a]))
    return ", ".join(names)


@app.command("up")
@_lab_errors
def up_cmd(
    spec: Path = typer.Argument(..., metavar="SPEC", help="cluster spec (YAML)"),
    scale: str = typer.Option("small", "--scale", metavar="SCALE",
                              help="small, medium, or counts like hosts=2,rails=2 (keys: "
                              "hosts, rails, segments, pods, uplinks, backup)"),
    lab_dir: Path | None = DIR_OPT,
    ssh: bool = typer.Option(False, "--ssh", help="also run an sshd in every namespace "
                             "(only on its own address) and write the lab's build with an "
                             "Ansible inventory that reaches them (DIR/build/ansible)"),
    queues: str = typer.Option("auto", "--queues", metavar="KIND",
                               help="egress queue of every switch port: auto (red where "
                               "the kernel has sch_red, else fifo), red (RED with ECN "
                               "marking), fifo (drop-tail), none (no shaper)"),
    port_mbit: float = typer.Option(DEFAULT_PORT_MBIT, "--port-mbit", metavar="MBIT",
                                    help="the shaped rate of every switch port in Mbit/s "
                                    "(the lab's link capacity; `lab traffic` fills it)"),
    max_memory: str | None = MAX_MEMORY,
) -> None:
    """Build the scaled-down copy and start FRR in every switch (InfiniBand specs: ibsim
    with OpenSM on it)."""
    import time

    from aifabric.cli import _lab_ib

    if _lab_ib.wants_ib(spec):
        with console.status("starting the InfiniBand lab") as status:
            _lab_ib.up(spec, scale, lab_dir, status)
        return

    from aifabric.lab import up
    from aifabric.lab.queues import parse_queues
    from aifabric.telemetry.monitoring import render_monitoring

    q = parse_queues(queues, port_mbit)
    t0 = time.perf_counter()
    with console.status("starting the lab") as status:
        lab = up(spec, scale, lab_dir, progress=lambda msg: status.update(msg), ssh=ssh,
                 build_extra=(render_monitoring,), queues=q)
    f = lab.fabric
    dt = time.perf_counter() - t0
    from aifabric.topology import NodeKind

    counts = {k.label: int((f.nodes.kind == k).sum()) for k in (NodeKind.TOR, NodeKind.AGG,
                                                               NodeKind.CORE)}
    tiers = ", ".join(f"{v} {k}" for k, v in counts.items() if v)
    console.print(f"lab up in {dt:.1f} s: {f.name} ({f.family}, --scale {scale}) in "
                  f"{lab.dir}")
    console.print(f"  {len(lab.layout.switches)} switches ({tiers}), "
                  f"{len(lab.layout.hosts)} hosts, {len(lab.layout.links)} veth pairs, "
                  f"namespaces {lab.prefix}*")
    console.print("  FRR zebra + bgpd (+ staticd on "
                  f"{len(lab.layout.static_tors)} ToRs) with the generated frr.conf; "
                  "next: aifabric lab test")
    _queues_line(lab)
    m = lab.layout.mgmt
    if m is not None:  # the spec's management network, reachable from here
        n_exp = len(lab.state.get("mgmt", {}).get("exporter_pids", {}))
        console.print(f"  management network: bridge {m.bridge} {m.gateway}/{m.prefixlen} "
                      f"here, {len(m.ports)} devices on it (switch eth0, host "
                      f"{m.ports[-1].ifname}); "
                      + (f"node exporter on {n_exp} management addresses" if n_exp else
                         "no node exporter (apt-get install prometheus-node-exporter)"),
                      markup=False)
    if ssh:
        console.print(f"  sshd in {len(lab.layout.namespaces)} namespaces (key "
                      f"{lab.dir / 'ssh' / 'id_ed25519'}); ansible-playbook -i "
                      f"{lab.dir / 'build' / 'ansible' / 'inventory.yml'} ...", markup=False)


def _queues_line(lab: Any) -> None:
    from aifabric.lab.queues import Queues

    q = Queues.from_state(lab.state.get("queues"))
    if q is None:
        console.print("  egress queues: the kernel's default (no shaper; --queues none)")
        return
    rate = f"every port shaped to {q.rate_bps / 1e6:g} Mbit/s (HTB)"
    if q.kind == "red":
        console.print(f"  egress queues: {rate}; switch ports RED with ECN (marks from "
                      f"{q.min_bytes:,} B, p={q.probability:g} at {q.max_bytes:,} B, limit "
                      f"{q.limit_bytes:,} B)", markup=False)
    else:
        console.print(f"  egress queues: {rate}, drop-tail {q.limit_bytes:,} B (kernel "
                      "without sch_red: no ECN marks)", markup=False)


@app.command("traffic")
@_lab_errors
def traffic_cmd(
    scenario: Path = typer.Argument(..., metavar="SCENARIO",
                                    help="scenario (YAML) whose traffic to send"),
    seconds: float = typer.Option(10.0, "--seconds", metavar="N",
                                  help="how long to send (at most 3600)"),
    flow_mbit: float | None = typer.Option(None, "--flow-mbit", metavar="MBIT",
                                           help="rate of each flow (default: the lab's "
                                           "port rate)"),
    lab_dir: Path | None = DIR_OPT,
) -> None:
    """Send a scenario's flows between the lab's hosts for a bounded time: UDP with
    ECT(0), one socket per flow on its source port, paced; counts what arrives and how
    much of it was ECN-marked."""
    from aifabric.cli import _lab_ib
    from aifabric.lab import LabError, load_lab
    from aifabric.lab.traffic import run_traffic

    if _lab_ib.is_ib(lab_dir):
        raise LabError("lab traffic sends UDP over the Ethernet lab's namespaces; this lab "
                       "is InfiniBand (ibsim has no data path)")
    lab = load_lab(lab_dir)
    with console.status("sending") as status:
        r = run_traffic(lab, scenario, seconds, flow_mbit,
                        progress=lambda msg: status.update(msg))
    lost = r.sent_packets - r.received_packets
    console.print(f"lab traffic: {r.flows} flows between hosts ({r.local_flows} inside a "
                  f"host: no packets) for {r.seconds:g} s at {r.flow_bps / 1e6:g} Mbit/s "
                  "each", markup=False)
    console.print(f"  sent {r.sent_packets:,} packets ({r.sent_bytes:,} B payload), "
                  f"received {r.received_packets:,} ({r.received_bytes:,} B), lost "
                  f"{lost:,} ({lost / max(r.sent_packets, 1):.1%}), send errors "
                  f"{r.send_errors:,}", markup=False)
    console.print(f"  arrived ECN-marked (CE): {r.received_ce:,} packets "
                  f"({r.received_ce / max(r.received_packets, 1):.1%}); ECN-capable "
                  f"unmarked (ECT(0)): {r.received_ect:,}", markup=False)
    t = Table("host", "received packets", "bytes", "CE-marked", box=None)
    for host, ph in sorted(r.per_host.items()):
        t.add_row(host, f"{ph['received_packets']:,}", f"{ph['received_bytes']:,}",
                  f"{ph['received_ce']:,}")
    console.print(t)


@app.command("status")
@_lab_errors
def status_cmd(lab_dir: Path | None = DIR_OPT) -> None:
    """Show what is up: switches, daemons, namespaces, failures."""
    from aifabric.cli import _lab_ib

    if _lab_ib.is_ib(lab_dir):
        return _lab_ib.status(lab_dir)
    from aifabric.lab import lab_namespaces, load_lab
    from aifabric.lab.daemons import alive, daemon_pids

    lab = load_lab(lab_dir)
    pids = daemon_pids(lab.dir)
    running = {k for k, p in pids.items() if alive(p, lab.dir)}
    names = set(lab_namespaces(lab.prefix))
    dead = {x["switch"] for x in lab.failures if "switch" in x}
    st = lab.state
    console.print(f"lab {lab.dir}: {st['fabric']} from {st['spec_file']} (--scale "
                  f"{st['scale']}), namespaces {lab.prefix}* ({len(names)})")
    table = Table("switch", "namespace", "zebra", "bgpd", "staticd", "state")
    for sw in lab.layout.switches:
        cells = []
        for d in ("zebra", "bgpd", "staticd"):
            key = f"{sw}/{d}"
            cells.append("-" if key not in pids else
                         (str(pids[key]) if key in running else f"{pids[key]} gone"))
        table.add_row(sw, "yes" if lab.layout.ns[sw] in names else "MISSING", *cells,
                      "failed" if sw in dead else "up")
    console.print(table)
    hosts_up = sum(lab.layout.ns[h] in names for h in lab.layout.hosts)
    console.print(f"hosts: {hosts_up}/{len(lab.layout.hosts)} namespaces")
    _queues_line(lab)
    m = lab.layout.mgmt
    if m is not None:  # reachable from here right now?
        from aifabric.lab.mgmt import answering, bridge_up

        console.print(f"management network: bridge {m.bridge} "
                      f"{'up' if bridge_up(m) else 'MISSING'} ({m.gateway}/{m.prefixlen}), "
                      f"exporters answering {len(answering(m))}/{len(m.ports)}", markup=False)
    if lab.failures:
        console.print("failed: " + ", ".join(x.get("switch") or x.get("port", "")
                                             for x in lab.failures))


@app.command("test")
@_lab_errors
def test_cmd(
    lab_dir: Path | None = DIR_OPT,
    timeout: float = typer.Option(60.0, "--timeout", metavar="SECONDS",
                                  help="seconds to wait for sessions and "
                                  "routes to settle"),
) -> None:
    """Check BGP sessions, kernel ECMP groups vs the model, reachability and hops
    (InfiniBand: every switch's LFT vs the twin's)."""
    from aifabric.cli import _lab_ib

    if _lab_ib.is_ib(lab_dir):
        return _lab_ib.test(lab_dir)
    from aifabric.lab import check_lab, load_lab, preflight

    lab = load_lab(lab_dir)
    preflight()
    with console.status("testing the lab"):
        r = check_lab(lab, timeout_s=timeout)
    table = Table("check", "result", "expected", "verdict", title=f"lab test: {lab.fabric.name}"
                  + (f" (failed: {', '.join(r.failures)})" if r.failures else ""))

    def verdict(ok: bool) -> str:
        return "ok" if ok else "FAIL"

    table.add_row("BGP sessions established", str(r.sessions_up), str(r.sessions_expected),
                  verdict(r.sessions_up == r.sessions_expected))
    table.add_row("ECMP groups equal to the model (kernel)",
                  str(r.groups - len(r.group_diffs)), f"{r.groups} ({r.ecmp_groups} with 2+ "
                  "next hops)", verdict(not r.group_diffs))
    table.add_row("probes (port -> NIC) answered as the model says",
                  str(r.probes - len(r.reach_wrong)),
                  f"{r.probes} ({r.expected_reachable} must reply"
                  + (f", {r.hash_dependent} hash-dependent" if r.hash_dependent else "") + ")",
                  verdict(not r.reach_wrong))
    table.add_row("NIC pairs reachable (some port of the source)", str(r.reachable),
                  str(r.pairs), "ok" if r.reachable == r.pairs else
                  ("cut off: " + ", ".join(r.lost) if r.lost else
                   "as the model" if not r.reach_wrong else "FAIL"))
    hops = ", ".join(f"{n} x {h}" for h, n in sorted(r.hop_counts.items()))
    table.add_row("switch hops match the plan", str(r.hops_checked - len(r.hops_wrong)),
                  f"{r.hops_checked} ({hops} hops)", verdict(not r.hops_wrong))
    console.print(table)
    console.print(f"settled in {r.converged_s:.1f} s")
    for sw, peer, state in r.sessions_bad[:10]:
        console.print(f"  session {sw} -> {peer}: {state}")
    _more(r.sessions_bad, 10, "sessions down")
    for sw, ip, got, want in r.group_diffs[:10]:
        console.print(f"  {sw} -> {ip}: kernel [{_nexthops(lab, sw, got)}], model "
                      f"[{_nexthops(lab, sw, want)}]", markup=False)
    _more(r.group_diffs, 10, "ECMP groups that differ")
    for src, dst, replied in r.reach_wrong[:10]:
        console.print(f"  {src} -> {dst}: {'replied' if replied else 'no reply'}, model says "
                      f"{'no' if replied else 'yes'}")
    _more(r.reach_wrong, 10, "probes against the model")
    for src, dst, h, (lo, hi) in r.hops_wrong[:10]:
        console.print(f"  {src} -> {dst}: {h} hops back, plan {lo}" + (f"-{hi}" if hi != lo
                                                                        else ""))
    _more(r.hops_wrong, 10, "wrong hop counts")
    console.print("PASS" if r.ok else "FAIL")
    if not r.ok:
        raise typer.Exit(1)


@app.command("fail")
@_lab_errors
def fail_cmd(
    target: str = typer.Argument(..., metavar="TARGET",
                                 help="a switch (tor-s01-r0-a) or a link by one end "
                                 "(tor-s01-r0-a:Ethernet0, host-s00-h000:ens0f1)"),
    lab_dir: Path | None = DIR_OPT,
    timeout: float = typer.Option(30.0, "--timeout", metavar="SECONDS",
                                  help="seconds to wait for convergence"),
) -> None:
    """Take a switch or a link down; measure convergence; show the routes that moved
    (InfiniBand: SWITCH or SWITCH:PORT unlinked in ibsim, OpenSM re-sweeps)."""
    from aifabric.cli import _lab_ib

    if _lab_ib.is_ib(lab_dir):
        return _lab_ib.fail(target, lab_dir)
    from aifabric.lab import fail, load_lab, preflight

    lab = load_lab(lab_dir)
    preflight()
    with console.status(styled(f"failing {target}")):
        res = fail(lab, target, timeout_s=timeout)
    console.print(f"{target} down: {res.links_down} link(s)")
    console.print("  routes converged (kernel ECMP groups = model): "
                  + (f"{res.routes_s * 1000:.0f} ms" if res.routes_s is not None
                     else f"NO, {len(res.mismatches)} groups differ after {timeout:.0f} s"))
    console.print("  traffic flows as the model says: "
                  + (f"{res.traffic_s * 1000:.0f} ms" if res.traffic_s is not None
                     else f"NO, {res.wrong} probes disagree after {timeout:.0f} s"))
    console.print(f"  NIC pairs reachable {res.reachable}/{res.pairs}; probes answered "
                  f"{res.probes_ok}/{res.probes} ({res.expected_ok} must, "
                  f"{res.hash_dependent} hash-dependent)")
    if res.lost:
        console.print("  cut off: " + ", ".join(res.lost))
    table = Table("host/switch", "NIC (host) / destination", "before", "after",
                  title=f"routes that moved ({len(res.moved)})")
    for sw, ip, before, after in res.moved[:40]:
        table.add_row(sw, ip, _nexthops(lab, sw, before), _nexthops(lab, sw, after))
    if res.moved:
        console.print(table)
    _more(res.moved, 40, "routes that moved")
    for sw, ip, got, want in res.mismatches[:10]:
        console.print(f"  differs: {sw} -> {ip}: kernel [{_nexthops(lab, sw, got)}], model "
                      f"[{_nexthops(lab, sw, want)}]", markup=False)
    _more(res.mismatches, 10, "ECMP groups that differ")
    if res.routes_s is None or res.traffic_s is None:
        raise typer.Exit(1)


def _heal_lines(lab: Any, h: Any) -> None:
    for dev, what in h.routes_added[:20]:
        console.print(f"  route re-added: {dev} {what}", markup=False)
    _more(h.routes_added, 20, "routes re-added")
    for sw, gid, before, after in h.groups_fixed[:20]:
        console.print(f"  nexthop group {gid} on {sw}: kernel [{before}] -> FRR's [{after}]",
                      markup=False)
    _more(h.groups_fixed, 20, "nexthop groups replaced")
    for dev, what, why in h.routes_left[:10]:
        console.print(f"  not re-added: {dev} {what} ({why})", markup=False)
    _more(h.routes_left, 10, "routes not re-added")


@app.command("restore")
@_lab_errors
def restore_cmd(
    target: str | None = typer.Argument(None, metavar="TARGET",
                                        help="a failure `lab fail` injected (a switch or "
                                        "device:interface); omit with --all"),
    all_: bool = typer.Option(False, "--all", help="undo every injected failure"),
    lab_dir: Path | None = DIR_OPT,
    timeout: float = typer.Option(60.0, "--timeout", metavar="SECONDS",
                                  help="seconds to wait for sessions and routes"),
) -> None:
    """Undo one injected failure (or --all), heal, and wait until routes equal the model."""
    from aifabric.errors import Problem, SpecError
    from aifabric.lab import load_lab, preflight
    from aifabric.lab.heal import restore

    if (target is None) == (not all_):
        raise SpecError(Problem("target", "give one failure to undo or --all; allowed: "
                                "a switch or device:interface that `lab status` lists as "
                                "failed, or --all"))
    lab = load_lab(lab_dir)
    preflight()
    with console.status(styled(f"restoring {target or 'every failure'}")):
        res = restore(lab, target, timeout_s=timeout)
    console.print(f"restored {', '.join(res.restored)}: {res.ports_up} port(s) up, "
                  f"{res.woken} daemon(s) woken", markup=False)
    console.print("  BGP sessions Established: " + (f"{res.sessions_s * 1000:.0f} ms"
                  if res.sessions_s is not None else f"NO, not all after {timeout:.0f} s"))
    console.print("  routes converged (kernel ECMP groups = model): "
                  + (f"{res.routes_s * 1000:.0f} ms" if res.routes_s is not None
                     else f"NO, {len(res.mismatches)} groups differ after {timeout:.0f} s"))
    _heal_lines(lab, res.heal)
    for sw, ip, got, want in res.mismatches[:10]:
        console.print(f"  differs: {sw} -> {ip}: kernel [{_nexthops(lab, sw, got)}], model "
                      f"[{_nexthops(lab, sw, want)}]", markup=False)
    _more(res.mismatches, 10, "ECMP groups that differ")
    if res.remaining:
        console.print("still failed: " + ", ".join(res.remaining), markup=False)
    if res.routes_s is None:
        raise typer.Exit(1)


@app.command("heal")
@_lab_errors
def heal_cmd(lab_dir: Path | None = DIR_OPT) -> None:
    """Reconcile the kernel with the twin: routes the lab made, nexthop groups vs FRR."""
    import numpy as np

    from aifabric.lab import load_lab, preflight, verify
    from aifabric.lab.heal import heal
    from aifabric.lab.inject import alive_links, dead_switches

    lab = load_lab(lab_dir)
    preflight()
    with console.status("healing"):
        h = heal(lab)
        f = lab.fabric
        dead = set(dead_switches(lab.failures))
        sws = [s for s in lab.layout.switches if s not in dead]
        alive = alive_links(f, lab.failures)
        diff = verify.compare_groups(verify.kernel_groups(f, lab.layout.ns, sws),
                                     verify.model_groups(f, np.asarray(alive), sws))
    console.print(f"heal: {len(h.routes_added)} route(s) re-added, {len(h.groups_fixed)} "
                  "nexthop group(s) replaced" + ("; nothing to do" if not h.changed else ""))
    _heal_lines(lab, h)
    console.print("kernel ECMP groups = model: " + ("yes" if not diff else
                                                   f"NO, {len(diff)} differ"))
    for sw, ip, got, want in diff[:10]:
        console.print(f"  differs: {sw} -> {ip}: kernel [{_nexthops(lab, sw, got)}], model "
                      f"[{_nexthops(lab, sw, want)}]", markup=False)
    _more(diff, 10, "ECMP groups that differ")
    if diff:
        raise typer.Exit(1)


@app.command("deploy")
@_lab_errors
def deploy_cmd(
    spec: Path = typer.Argument(..., metavar="SPEC", help="the changed cluster spec (YAML)"),
    lab_dir: Path | None = DIR_OPT,
    canary: int = typer.Option(1, "--canary", min=0, metavar="N",
                               help="switches of each plane deployed and gated first "
                               "(0: none)"),
    batch: str = typer.Option("100%", "--batch", metavar="N|N%",
                              help="switches per batch after the canary"),
    gate_timeout: float = typer.Option(30.0, "--gate-timeout", min=1, max=600,
                                       metavar="SECONDS",
                                       help="how long each switch's health gate waits"),
) -> None:
    """Deploy a changed spec to the running lab (started with lab up --ssh) through the
    build's playbooks: a canary per plane, then batches; a failed batch is rolled back."""
    import re

    from aifabric.errors import Problem, SpecError
    from aifabric.lab import load_lab, preflight
    from aifabric.lab.deploy import deploy
    from aifabric.telemetry.monitoring import render_monitoring

    if not re.fullmatch(r"[1-9][0-9]{0,5}%?", batch) or (batch.endswith("%")
                                                         and int(batch[:-1]) > 100):
        raise SpecError(Problem("--batch", f"got {batch!r}; allowed: a number of switches "
                                "(1, 2, ...) or a share of the plane (1% .. 100%)"))
    lab = load_lab(lab_dir)
    preflight()
    with console.status(styled(f"deploying {spec} to the lab")):
        res = deploy(lab, spec, canary=canary, batch=batch, gate_timeout_s=gate_timeout,
                     build_extra=(render_monitoring,))
    s = res.rollout.get("summary", {})
    plan = res.rollout.get("plan", {})
    console.print(f"deploy {spec} -> {lab.dir} (plan {plan.get('name')} "
                  f"{plan.get('digest')}): {'ok' if res.ok else 'FAILED'} in "
                  f"{res.seconds:.1f} s, {s.get('batches', 0)} batch(es)", markup=False)
    for key, what in (("changed", "changed"), ("unchanged", "unchanged"),
                      ("rolled_back", "rolled back"), ("never_touched", "never touched")):
        names = s.get(key, [])
        console.print(f"  {what}: {len(names)}" + (f" ({', '.join(names[:8])}"
                      + (", ..." if len(names) > 8 else "") + ")" if names else ""),
                      markup=False)
    if s.get("rollback_s"):
        bad = s.get("rolled_back_gate_failed", [])
        console.print(f"  rollback took {', '.join(f'{x:.1f} s' for x in s['rollback_s'])}; "
                      f"gate after it passed on {len(s['rolled_back']) - len(bad)}/"
                      f"{len(s['rolled_back'])}", markup=False)
    for sw, why in sorted(s.get("failed", {}).items()):
        console.print(f"  failed: {sw}: {why}", markup=False)
    if not res.ok:
        if not s:
            tail = [x for x in res.output.splitlines() if x.strip()][-5:]
            for line in tail:
                console.print(f"  {line}", markup=False)
        console.print(f"the lab keeps its spec {lab.state['spec_file']}; the build of "
                      f"{spec} is in {lab.dir / 'build'}", markup=False)
        raise typer.Exit(1)
    console.print(f"the lab's spec is now {spec}; next: aifabric lab test", markup=False)


def _lab_present(d: Path) -> bool:
    """Whether anything of a lab kept in ``d`` is left: its state file, FRR pid files or
    namespaces with its prefix. Only looks (files and ``ip netns list``): no root needed."""
    import shutil

    from aifabric.lab import lab_namespaces, lab_prefix
    from aifabric.lab.core import STATE
    from aifabric.lab.daemons import daemon_pids

    if (d / STATE).is_file() or daemon_pids(d):
        return True
    return shutil.which("ip") is not None and bool(lab_namespaces(lab_prefix(d)))


@app.command("down")
@_lab_errors
def down_cmd(lab_dir: Path | None = DIR_OPT) -> None:
    """Remove every namespace, veth and FRR process the lab made (and nothing else).

    With no lab up in the folder it says so and exits 0 (it only looks: no root needed).
    """
    from aifabric.lab import default_dir, down

    d = Path(lab_dir or default_dir()).absolute()
    from aifabric.cli import _lab_ib

    if _lab_ib.is_ib(d):
        return _lab_ib.down(d)
    if not _lab_present(d):
        console.print(f"lab down: no lab is up in {d}; nothing to take down", markup=False)
        return
    gone = down(d)
    console.print(f"lab down: stopped {gone['daemons']} FRR daemons, removed "
                  f"{gone['namespaces']} namespaces and their veth pairs ({d})")
