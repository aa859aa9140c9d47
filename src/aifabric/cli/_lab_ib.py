"""``aifabric lab`` on an InfiniBand spec: ibsim + OpenSM instead of FRR in namespaces
(:mod:`aifabric.lab.infiniband`). The ``lab`` commands hand over here when the spec says
``transport: infiniband`` or the lab folder holds an InfiniBand lab."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import typer

from aifabric.cli._common import console


def wants_ib(spec: Path) -> bool:
    from aifabric.spec import load_spec

    return load_spec(spec).transport == "infiniband"


def is_ib(lab_dir: Path | None) -> bool:
    from aifabric.lab.core import default_dir
    from aifabric.lab.infiniband import is_ib_lab

    return is_ib_lab(Path(lab_dir or default_dir()).absolute())


def up(spec: Path, scale: str, lab_dir: Path | None, status: Any) -> None:
    from aifabric.lab import infiniband as ib

    t0 = time.perf_counter()
    lab = ib.up(spec, scale, lab_dir, progress=lambda msg: status.update(msg))
    st = lab.state
    console.print(f"lab up in {time.perf_counter() - t0:.1f} s: {lab.fabric.name} "
                  f"({lab.fabric.family}, --scale {scale}, InfiniBand) in {lab.dir}",
                  markup=False)
    console.print(f"  ibsim: {st['switches']} switches, {st['hca_ports']} HCA ports; "
                  f"OpenSM on {st['subnets']} subnet(s), routing engine {st['engine']}, "
                  f"LMC {st['lmc']}; next: aifabric lab test", markup=False)


def test(lab_dir: Path | None) -> None:
    from aifabric.lab import infiniband as ib

    lab = ib.load(lab_dir)
    with console.status("reading every switch's LFT (ibroute, ibnetdiscover, ibtracert)"):
        r = ib.test(lab)
    console.print(f"lab test: {lab.fabric.name} on OpenSM ({r['engine']}, LMC {r['lmc']}, "
                  f"{r['subnets']} subnet(s))", markup=False)
    console.print(f"  LFT entries equal to the twin's: {r['entries_compared'] - r['differences']}"
                  f"/{r['entries_compared']} ({r['switches']} switches x the "
                  f"destination LIDs of their subnet, {r['destinations']} LIDs)",
                  markup=False)
    console.print(f"  ibtracert paths equal to the twin's table walk: "
                  f"{r['paths_traced'] - r['path_differences']}/{r['paths_traced']}",
                  markup=False)
    if "cabling_deviations" in r:
        console.print(f"  cables as planned (ibnetdiscover): "
                      f"{r['cables_planned'] - r['cabling_deviations']}/{r['cables_planned']}"
                      f"; link speed: {r['speed_check']}", markup=False)
        for d in r["first_cabling_deviations"][:10]:
            console.print(f"  cabling: {d['device']} {d['field']}: expected "
                          f"{d['expected']}, found {d['found']}", markup=False)
    used = r.get("opensm_engines", [])
    if any(u and u != r["engine"] for u in used):
        why = "; ".join(sorted(set(r.get("twin_fallback", {}).values())))
        console.print(f"  OpenSM fell back from {r['engine']} to "
                      f"{', '.join(sorted({u for u in used if u}))} on this fabric; the twin "
                      f"too{(': ' + why) if why else ''}", markup=False)
    for d in r["first_differences"][:10]:
        console.print(f"  differs: {d['switch']} LID {d['lid']}: OpenSM port "
                      f"{d['opensm_port']}, twin port {d['twin_port']}", markup=False)
    ok = r["differences"] == 0 and r["path_differences"] == 0 and \
        r.get("cabling_deviations", 0) == 0
    console.print("PASS" if ok else "FAIL")
    if not ok:
        raise typer.Exit(1)


def fail(target: str, lab_dir: Path | None) -> None:
    from aifabric.lab import infiniband as ib

    lab = ib.load(lab_dir)
    with console.status(f"unlinking {target} in ibsim, waiting for OpenSM's sweep"):
        r = ib.fail(lab, target)
    console.print(f"{target} down: {r['links']} link(s); OpenSM re-swept subnet "
                  f"{r['subnet']} (sweep {r['sweeps']}); next: aifabric lab test",
                  markup=False)


def status(lab_dir: Path | None) -> None:
    from aifabric.lab import infiniband as ib

    lab = ib.load(lab_dir)
    st = lab.state
    alive = {k: ib._alive(int(p), lab.dir) for k, p in st["pids"].items()}
    console.print(f"lab {lab.dir}: {st['fabric']} from {st['spec_file']} (--scale "
                  f"{st['scale']}), InfiniBand", markup=False)
    for k, p in sorted(st["pids"].items()):
        console.print(f"  {k}: pid {p} {'running' if alive[k] else 'GONE'}", markup=False)
    if st.get("failures"):
        console.print("failed: " + ", ".join(f["what"] for f in st["failures"]),
                      markup=False)


def down(lab_dir: Path | None) -> None:
    from aifabric.lab import infiniband as ib
    from aifabric.lab.core import default_dir

    d = Path(lab_dir or default_dir()).absolute()
    gone = ib.down(d)
    console.print(f"lab down: stopped {gone['processes']} processes (ibsim, OpenSM) ({d})",
                  markup=False)
