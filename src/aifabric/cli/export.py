"""``aifabric export SPEC --format json|graphml|dot``: the fabric for other graph tools;
``aifabric export SCENARIO --format ns3-rdma|htsim|uet-htsim``: a scenario for the
reference packet simulators (:mod:`aifabric.crosscheck`); ``aifabric export SPEC --format
astra-sim|simai``: the fabric as ASTRA-sim's or SimAI's network inputs
(:mod:`aifabric.export_sim`)."""

from __future__ import annotations

import io
from enum import StrEnum
from pathlib import Path
from typing import Any

import typer

from aifabric.cli._common import MAX_MEMORY, console, load_specs, write_atomic

#: the formats that take a scenario and write a folder
SCENARIO_FORMATS = ("ns3-rdma", "htsim", "uet-htsim")
#: the formats that take a spec (or a scenario's spec) and write a folder
SIM_FORMATS = ("astra-sim", "simai")


class Format(StrEnum):
    json = "json"
    graphml = "graphml"
    dot = "dot"
    ns3_rdma = "ns3-rdma"
    htsim = "htsim"
    astra_sim = "astra-sim"
    simai = "simai"
    uet_htsim = "uet-htsim"


class StartTimes(StrEnum):
    zero = "zero"
    flow = "flow"


def _is_scenario(path: Path) -> bool:
    """A scenario names its fabric under ``spec``; a spec has none."""
    from aifabric.spec.load import load_yaml

    doc = load_yaml(path)
    return isinstance(doc, dict) and "spec" in doc


def export(
    spec: Path = typer.Argument(..., metavar="SPEC",
                                help="cluster spec (YAML); a scenario for ns3-rdma "
                                "and htsim (its spec for the graph formats)"),
    format: Format = typer.Option(Format.json, "--format", "-f", help="output format"),
    out: Path | None = typer.Option(None, "--out", "-o", metavar="PATH",
                                    help="output file (default: the spec's name + .json, "
                                    ".graphml or .dot); a folder for ns3-rdma, htsim, uet-htsim, "
                                    "astra-sim and simai (default: the scenario's or "
                                    "spec's name + -FORMAT)"),
    start_times: StartTimes = typer.Option(
        StartTimes.zero, "--start-times", help="ns3-rdma, htsim, uet-htsim: zero = every flow at 0 "
        "(scenarios whose transfers do not wait for others); flow = when the flow-level "
        "simulation starts each transfer"),
    gpu_type: str = typer.Option("H100", "--gpu-type", metavar="NAME",
                                 help="simai: the GPU type label "
                                 "of the topology file's header"),
    max_memory: str | None = MAX_MEMORY,
) -> None:
    """Write the fabric as node-link JSON (NetworkX), GraphML (Gephi) or DOT (Graphviz).

    With ``--format ns3-rdma``, ``htsim`` or ``uet-htsim`` and a scenario: the input files
    of ns-3's RDMA simulator (HPCC repository), htsim (csg-htsim) or the UEC consortium's
    uet-htsim (htsim_uec), for cross-checking ``sim: packet``, in a folder with a NOTES.md
    of which settings map and how.

    With ``--format astra-sim`` or ``simai`` and a spec (or a scenario): ASTRA-sim's
    network, system and memory configs (and, for a scenario, its collectives and jobs as
    Chakra ET files, one per rank), or SimAI's topology file, in a folder with a
    NOTES.md of what maps to what and what is lost."""
    if format.value in SCENARIO_FORMATS:
        _export_scenario(spec, format.value, out, start_times.value)
        return
    if format.value in SIM_FORMATS:
        _export_sim(spec, format.value, out, gpu_type)
        return
    from aifabric.export import FORMATS
    from aifabric.outputs import check_target

    if _is_scenario(spec):
        from aifabric.routing.scenario import load_scenario
        from aifabric.sim.scenario import SimScenario

        sc = load_scenario(spec, SimScenario)
        s, spec_file = sc.spec, sc.spec_file or spec
    else:
        (s,) = load_specs([spec])
        spec_file = spec
    suffix, writer = FORMATS[format.value]
    target = out or Path(f"{s.name}{suffix}")
    check_target(target, option="--out", folder=False)  # before any work
    from aifabric.api import build_fabric

    fabric = build_fabric(s, file=spec_file)
    buf = io.StringIO()
    writer(fabric, buf)
    write_atomic(target, buf.getvalue(), option="--out")
    console.print(f"wrote {target}: {fabric.n_nodes:,} nodes, {fabric.n_links:,} links "
                  f"({format.value})")


def _peer_models(spec: Any, fmt: str) -> None:
    """Refuse a peer export of a fabric technology the peer does not model: its files
    would describe a plain RoCE/ECMP fabric, silently another network."""
    from aifabric.errors import Problem, SpecError

    if getattr(spec, "scheduled", None) is not None:
        raise SpecError(Problem("--format", f"{fmt} has no scheduled fabric (VOQs, credit "
                                "grants, cells): its files would describe plain ECMP; "
                                "allowed: a spec without scheduled:, or --format "
                                "json|graphml|dot"))
    if getattr(spec, "transport", "roce") != "roce":
        raise SpecError(Problem("--format", f"{fmt} models RoCE/Ethernet, not "
                                f"transport: {spec.transport}; allowed: a RoCE spec, or "
                                "--format json|graphml|dot"))


def _export_scenario(path: Path, fmt: str, out: Path | None, start_times: str) -> None:
    from aifabric.crosscheck import export_scenario
    from aifabric.errors import Problem, SpecError
    from aifabric.outputs import atomic_folder, check_target
    from aifabric.routing.scenario import load_scenario
    from aifabric.sim.scenario import SimScenario

    if not _is_scenario(path):
        raise SpecError(Problem("--format", f"{fmt} needs a scenario (a YAML file with "
                                f"spec, traffic or collectives); {path} is a cluster spec; "
                                "allowed: a scenario, or --format json|graphml|dot for a "
                                "spec", str(path)))
    scn = load_scenario(path, SimScenario)
    try:
        _peer_models(scn.spec, fmt)
    except SpecError as err:
        raise err.with_file(str(path)) from None
    target = out or Path(_safe_name(f"{scn.name}-{fmt}"))
    marker = {"marker": "NOTES.md", "what": "a previous export"}
    check_target(target, option="--out", folder=True, **marker)  # before any work
    from aifabric.api import build_fabric

    fabric = build_fabric(scn.spec, file=scn.spec_file or path)
    try:
        ex = export_scenario(scn, fabric, fmt, start_times=start_times)
    except SpecError as err:
        raise err.with_file(str(path)) from None
    with atomic_folder(target, option="--out", **marker) as tmp:
        for rel, text in ex.files.items():
            p = tmp / rel
            p.write_text(text, encoding="utf-8", newline="\n")
            if rel.endswith(".sh"):
                from aifabric.outputs import umask

                p.chmod(0o777 & ~umask())
    console.print(f"wrote {target}: {ex.hosts:,} hosts, {ex.switches:,} switches, "
                  f"{ex.links:,} links, {ex.flows:,} flows ({fmt}); see NOTES.md")


def _export_sim(path: Path, fmt: str, out: Path | None, gpu_type: str) -> None:
    """ASTRA-sim's network/system/memory configs or SimAI's topology file, in a folder
    (:mod:`aifabric.export_sim`)."""
    from aifabric.errors import SpecError
    from aifabric.export_sim import astra_sim_files, simai_files
    from aifabric.outputs import atomic_folder, check_target

    sc = None
    if _is_scenario(path):
        from aifabric.routing.scenario import load_scenario
        from aifabric.sim.scenario import SimScenario

        sc = load_scenario(path, SimScenario)
        s, spec_file = sc.spec, sc.spec_file or path
    else:
        (s,) = load_specs([path])
        spec_file = path
    try:
        _peer_models(s, fmt)
    except SpecError as err:
        raise err.with_file(str(path)) from None
    target = out or Path(_safe_name(f"{s.name}-{fmt}"))
    marker = {"marker": "NOTES.md", "what": "a previous export"}
    check_target(target, option="--out", folder=True, **marker)  # before any work
    from aifabric.api import build_fabric

    fabric = build_fabric(s, file=spec_file)
    try:
        ex = astra_sim_files(fabric, scenario=sc) if fmt == "astra-sim" else \
            simai_files(fabric, gpu_type=gpu_type)
    except SpecError as err:
        raise err.with_file(str(path)) from None
    with atomic_folder(target, option="--out", **marker) as tmp:
        for rel, data in ex.files.items():
            p = tmp / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(data, bytes):
                p.write_bytes(data)
            else:
                p.write_text(data, encoding="utf-8", newline="\n")
    console.print(f"wrote {target}: {ex.summary} ({fmt}); see NOTES.md")


def _safe_name(name: str) -> str:
    """A folder name from a scenario title: letters, digits, ``.-_`` (others -> ``_``)."""
    import re

    return re.sub(r"[^A-Za-z0-9._-]", "_", name).lstrip(".") or "export"
