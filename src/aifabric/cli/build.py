"""``aifabric build SPEC --out DIR``: every file needed to cable and configure a fabric.

Per switch its SONiC ``config_db.json`` and FRR ``frr.conf``, per host its NIC setup
script, NCCL topology XML and environment, fabric-wide the cabling, address and ASN
plans, the bill of materials and the low-level design. The folder is written to a
temporary place and moved into ``DIR`` at the end, so bad input writes nothing.
``--validate`` checks every config_db.json against SONiC's YANG models (yanglint, models
named by ``AIFABRIC_SONIC_YANG``) and every frr.conf with FRR (vtysh dry run) before
anything is written: a missing tool or models folder is one line and exit 2, an invalid
config exit 1, and in both cases ``DIR`` is left as it was.
"""

from __future__ import annotations

import time
from pathlib import Path

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from aifabric.cli._common import MAX_MEMORY, build, console, err_console, load_specs
from aifabric.configs import BuildContext, write_build
from aifabric.configs.build import n_files
from aifabric.errors import Problem, SpecError
from aifabric.topology import LinkKind, NodeKind

#: fabrics with more devices than this show a progress bar
PROGRESS_DEVICES = 200


def build_cmd(
    spec: Path = typer.Argument(..., help="cluster spec (YAML)"),
    out: Path = typer.Option(..., "--out", "-o", help="output folder (replaced if it holds "
                             "a previous build)"),
    validate: bool = typer.Option(False, "--validate", help="validate the switch configs "
                                  "with yanglint (SONiC YANG models in $AIFABRIC_SONIC_YANG) "
                                  "and FRR first; write nothing if any is invalid"),
    max_memory: str | None = MAX_MEMORY,
) -> None:
    """Generate switch, NIC and NCCL configs, cabling/address plans, BOM and LLD."""
    if validate:
        _check_tools()
    from aifabric.outputs import BUILD, check_target

    check_target(out, option="--out", folder=True, **BUILD)  # before any work
    (s,) = load_specs([spec])
    fabric = build(s, spec)
    t0 = time.perf_counter()
    try:
        ctx = BuildContext.of(fabric)
    except SpecError as err:
        raise err.with_file(str(spec)) from None
    if validate:
        _validate(out, ctx)
    total = n_files(fabric)
    with Progress(TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err_console, transient=True,
                  disable=total <= PROGRESS_DEVICES) as bar:
        task = bar.add_task(f"building {s.name}", total=total)
        count = write_build(fabric, out, progress=lambda n: bar.advance(task, n), ctx=ctx)
    dt = time.perf_counter() - t0
    sw = len(ctx.plan.switches)
    hosts = len(fabric.host_node)
    console.print(f"wrote {out}/: {count:,} files in {dt:.1f} s")
    console.print(f"  switches/  {sw:,} switches: config_db.json, frr.conf"
                  + (" (+ lacp.json on HPN ToRs)" if fabric.family == "hpn" else ""))
    console.print(f"  hosts/     {hosts:,} hosts: nic-setup.sh, nccl-topo.xml, nccl.env")
    console.print(f"  cabling.csv {int((fabric.links.kind >= LinkKind.ACCESS).sum()):,} cables   "
                  f"addressing.csv   bom.csv   LLD.md   spec.yaml")
    dash = sorted((out / "monitoring" / "grafana" / "dashboards").glob("*.json"))
    console.print("  monitoring/ prometheus.yml (a target per switch and host)   alerts.yml   "
                  + (f"grafana/ ({len(dash)} dashboards)" if dash else
                     "grafana/ (no dashboards: see grafana/dashboards/MISSING.md)"))
    console.print(f"  ASNs {len(set(ctx.plan.asn[ctx.plan.switches].tolist())):,}   "
                  f"loopbacks {sw:,}   point-to-point /31s {len(ctx.plan.p2p):,}   "
                  f"NIC /32s {len(set(fabric.nodes.ip[fabric.ids(NodeKind.NIC)].tolist())):,}"
                  f"   QoS {s.deploy.qos.mode}")


def _check_tools() -> None:
    """One line naming exactly what ``--validate`` lacks (exit 2), before any work."""
    import shutil

    from aifabric.configs.yang import models_problem

    problem = models_problem()
    if problem is None and shutil.which("vtysh") is None:
        problem = "vtysh not found on PATH; install FRR (Debian/Ubuntu package frr)"
    if problem is not None:
        raise SpecError(Problem("--validate", problem))


def _validate(out: Path, ctx: BuildContext) -> None:
    """Validate the switch configs as they will be written, before writing anything:
    on any failure print each and exit 1, leaving ``out`` as it was."""
    import json

    from aifabric.configs.build import config_db_json
    from aifabric.configs.frr import render_frr
    from aifabric.configs.frrcheck import validate_frr_confs
    from aifabric.configs.sonic import render_config_db
    from aifabric.configs.yang import validate_config_dbs

    switches = ctx.plan.switches.tolist()
    names = [str(ctx.fabric.nodes.name[n]) for n in switches]
    try:
        dbs = [(name, json.loads(config_db_json(render_config_db(ctx.switches, n))))
               for name, n in zip(names, switches, strict=True)]
        yang = validate_config_dbs(dbs)
        frr = validate_frr_confs([(name, render_frr(ctx.switches, n))
                                  for name, n in zip(names, switches, strict=True)])
    except FileNotFoundError as exc:
        raise SpecError(Problem("--validate", str(exc))) from None
    for label, msg in yang:
        err_console.print(f"config_db.json {label}: {msg}", markup=False, soft_wrap=True)
    for label, msg in frr:
        err_console.print(f"frr.conf {label}: {msg}", markup=False, soft_wrap=True)
    console.print(f"validated {len(names):,} config_db.json with SONiC YANG: "
                  f"{len(yang)} invalid; {len(names):,} frr.conf with FRR: "
                  f"{len({m[0] for m in frr})} rejected")
    if yang or frr:
        err_console.print(f"nothing written: {out} is left as it was", markup=False,
                          soft_wrap=True)
        raise typer.Exit(1)
