"""``aifabric build SPEC --out DIR``: every file needed to cable and configure a fabric.

Per switch its SONiC ``config_db.json`` and FRR ``frr.conf``, per host its NIC setup
script, NCCL topology XML and environment, fabric-wide the cabling, address and ASN
plans, the bill of materials and the low-level design. The folder is written to a
temporary place and moved into ``DIR`` at the end, so bad input writes nothing.
``--validate`` then checks every config_db.json against SONiC's YANG models (yanglint)
and every frr.conf with FRR (vtysh dry run).
"""

from __future__ import annotations

import time
from pathlib import Path

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from aifabric.cli._common import build, console, err_console, load_specs
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
                                  "with yanglint (SONiC YANG) and FRR afterwards"),
) -> None:
    """Generate switch, NIC and NCCL configs, cabling/address plans, BOM and LLD."""
    (s,) = load_specs([spec])
    fabric = build(s, spec)
    t0 = time.perf_counter()
    try:
        ctx = BuildContext.of(fabric)
    except SpecError as err:
        raise err.with_file(str(spec)) from None
    total = n_files(fabric)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
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
    console.print(f"  ASNs {len(set(ctx.plan.asn[ctx.plan.switches].tolist())):,}   "
                  f"loopbacks {sw:,}   point-to-point /31s {len(ctx.plan.p2p):,}   "
                  f"NIC /32s {len(set(fabric.nodes.ip[fabric.ids(NodeKind.NIC)].tolist())):,}"
                  f"   QoS {s.deploy.qos.mode}")
    if validate:
        _validate(out, ctx)


def _validate(out: Path, ctx: BuildContext) -> None:
    import json

    from aifabric.configs.frrcheck import validate_frr_confs
    from aifabric.configs.yang import validate_config_dbs

    names = [str(ctx.fabric.nodes.name[n]) for n in ctx.plan.switches.tolist()]
    try:
        dbs = [(n, json.loads((out / "switches" / n / "config_db.json").read_text()))
               for n in names]
        yang = validate_config_dbs(dbs)
        frr = validate_frr_confs([(n, (out / "switches" / n / "frr.conf").read_text())
                                  for n in names])
    except FileNotFoundError as exc:
        raise SpecError(Problem("--validate", f"{exc}; install libyang2-tools and frr")) from None
    for label, msg in yang:
        err_console.print(f"config_db.json {label}: {msg}", markup=False, soft_wrap=True)
    for label, msg in frr:
        err_console.print(f"frr.conf {label}: {msg}", markup=False, soft_wrap=True)
    console.print(f"validated {len(names):,} config_db.json with SONiC YANG: "
                  f"{len(yang)} invalid; {len(names):,} frr.conf with FRR: "
                  f"{len({m[0] for m in frr})} rejected")
    if yang or frr:
        raise typer.Exit(1)
