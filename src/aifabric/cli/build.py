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
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import typer

from aifabric.cli._common import MAX_MEMORY, console, err_console

#: fabrics with more devices than this show a progress bar
PROGRESS_DEVICES = 200


@contextmanager
def _bar(kind: str, total: int, label: str) -> Any:
    """The files bar of :func:`aifabric.api.build` (shown above PROGRESS_DEVICES)."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    with Progress(TextColumn("{task.description}", markup=False), BarColumn(),
                  MofNCompleteColumn(), TimeElapsedColumn(), console=err_console,
                  transient=True, disable=total <= PROGRESS_DEVICES) as bar:
        task = bar.add_task(label, total=total)
        yield lambda n: bar.advance(task, n)


def build_cmd(
    spec: Path = typer.Argument(..., metavar="SPEC", help="cluster spec (YAML)"),
    out: Path = typer.Option(..., "--out", "-o", metavar="DIR",
                             help="output folder (replaced if it holds "
                             "a previous build)"),
    validate: bool = typer.Option(False, "--validate", help="validate the switch configs "
                                  "with yanglint (SONiC YANG models in $AIFABRIC_SONIC_YANG) "
                                  "and FRR first; write nothing if any is invalid"),
    max_memory: str | None = MAX_MEMORY,
) -> None:
    """Generate switch, NIC and NCCL configs, cabling/address plans, BOM and LLD."""
    from aifabric.api import build

    t0 = time.perf_counter()
    res = build(spec, out, validate=validate, bars=_bar, option="--out")
    dt = time.perf_counter() - t0
    if validate:
        for label, msg in res.yang_invalid:
            err_console.print(f"config_db.json {label}: {msg}", markup=False, soft_wrap=True)
        for label, msg in res.frr_rejected:
            err_console.print(f"frr.conf {label}: {msg}", markup=False, soft_wrap=True)
        console.print(f"validated {res.validated:,} config_db.json with SONiC YANG: "
                      f"{len(res.yang_invalid)} invalid; {res.validated:,} frr.conf with FRR: "
                      f"{len({m[0] for m in res.frr_rejected})} rejected")
    if not res.written:
        err_console.print(f"nothing written: {out} is left as it was", markup=False,
                          soft_wrap=True)
        raise typer.Exit(1)
    console.print(f"wrote {out}/: {res.files:,} files in {dt:.1f} s")
    if (Path(out) / "subnet-manager").is_dir():  # an InfiniBand build
        console.print("  subnet-manager/ opensm.conf (engine, LMC, QoS SL2VL and VL "
                      "arbitration)   partitions.conf   topology.net"
                      + ("   root-guids.conf" if (Path(out) / "subnet-manager" /
                                                  "root-guids.conf").is_file() else "")
                      + ("   sharp_am.cfg" if (Path(out) / "subnet-manager"
                                                            / "sharp_am.cfg").is_file()
                         else ""),
                      markup=False)
        console.print(f"  hosts/     {res.hosts:,} hosts: nccl-topo.xml, nccl.env "
                      "(InfiniBand)", markup=False)
        console.print(f"  ib-cabling.csv {res.cables:,} cables   addressing.csv   bom.csv   "
                      "spec.yaml", markup=False)
        _mgmt_line(Path(out))
        return
    console.print(f"  switches/  {res.switches:,} switches: config_db.json, frr.conf"
                  + (" (+ lacp.json on HPN ToRs)" if res.family == "hpn" else ""))
    console.print(f"  hosts/     {res.hosts:,} hosts: nic-setup.sh, nccl-topo.xml, nccl.env")
    console.print(f"  cabling.csv {res.cables:,} cables   addressing.csv   bom.csv   LLD.md   "
                  "spec.yaml")
    nvl = Path(out) / "nvlink-cabling.csv"
    if nvl.is_file():  # only with a scale-up domain
        with nvl.open() as fh:
            links = sum(1 for _ in fh) - 1
        console.print(f"  nvlink-cabling.csv {links:,} NVLink links (GPU link, switch chip "
                      "and port, tray, cartridge)")
    fe = Path(out) / "frontend"
    if fe.is_dir():  # only with a frontend network
        n_sw = sum(1 for p in (fe / "switches").iterdir() if p.is_dir())
        n_hosts = sum(1 for p in (fe / "hosts").iterdir() if p.is_dir())
        console.print(f"  frontend/  {n_sw:,} switches: config_db.json, frr.conf   "
                      f"{n_hosts:,} hosts and storage nodes: nic-setup.sh   cabling.csv   "
                      "addressing.csv   bom.csv", markup=False)
    _mgmt_line(Path(out))
    console.print("  monitoring/ prometheus.yml (a target per switch and host)   alerts.yml   "
                  + (f"grafana/ ({res.dashboards} dashboards)" if res.dashboards else
                     "grafana/ (no dashboards: see grafana/dashboards/MISSING.md)"))
    console.print(f"  ASNs {res.asns:,}   loopbacks {res.loopbacks:,}   point-to-point /31s "
                  f"{res.p2p_links:,}   NIC /32s {res.nic_addresses:,}   QoS {res.qos}")


def _mgmt_line(out: Path) -> None:
    """The management network's cabling file, only when the spec has one."""
    mg = out / "mgmt-cabling.csv"
    if mg.is_file():
        with mg.open() as fh:
            cables = sum(1 for _ in fh) - 1
        console.print(f"  mgmt-cabling.csv {cables:,} management cables (switch eth0, host "
                      "OS NIC and BMC ports, uplinks)")
