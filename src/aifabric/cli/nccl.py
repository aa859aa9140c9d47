"""``aifabric nccl SPEC``: NCCL's collectives over the scale-up domain and the scale-out
fabric — the algorithm and protocol NCCL's cost model picks per message size, the
simulated time, algbw and busbw, and the bytes on each dimension; or a job's step on
the domains (``--job``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from aifabric.cli._common import MAX_MEMORY, console, load_specs, styled
from aifabric.errors import Problem, SpecError

__all__ = ["nccl_cmd"]


def _bytes(x: float) -> str:
    for unit, div in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if x >= div:
            return f"{x / div:,.2f} {unit}"
    return f"{x:,.0f} B"


def _size_label(x: float) -> str:
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if x >= div and x % div == 0:
            return f"{int(x // div)}{unit}"
    return f"{int(x)}"


def _sizes(text: str) -> list[int]:
    from aifabric.spec.units import parse_size

    out = [parse_size(t.strip(), "--sizes") for t in text.split(",") if t.strip()]
    if not out or min(out) <= 0:
        raise SpecError(Problem("--sizes", f"got {text!r}; allowed: sizes > 0 separated by "
                                "commas, like 1KiB,1MiB,8GiB"))
    return out


def _header(name: str, net: Any) -> None:
    nv = f", NVLS {net.nvls_gbps:,.0f} Gb/s" if net.nvls_gbps else ", NVLS off"
    console.print(styled((name, "bold"), f" — {net.total_domains:,} domain(s) x "
                         f"{net.per_domain} GPUs; per GPU per direction: scale-up "
                         f"{net.physical_scaleup_gbps:,.0f} Gb/s (NVLink copies "
                         f"{net.scaleup_gbps:,.0f}{nv}), scale-out "
                         f"{net.physical_scaleout_gbps:,.0f} Gb/s (collectives "
                         f"{net.scaleout_gbps:,.0f}); {net.channels} channels"))


def _render_one(r: Any) -> None:
    t = Table(title=f"{r.op} of {_size_label(r.size_bytes)} on {r.gpus:,} GPUs "
              f"({r.domains} x {r.per_domain}): NCCL's cost model, cheapest first",
              title_justify="left")
    for col in ("algorithm", "protocol", "time (us)", "latency (us)", "busbw (GB/s)", ""):
        t.add_column(col, justify="left" if col in ("algorithm", "protocol", "") else "right")
    for i, c in enumerate(r.candidates):
        t.add_row(c.algorithm, c.protocol, f"{c.time_ns / 1000:,.1f}",
                  f"{c.latency_ns / 1000:,.1f}", f"{c.busbw_gbs:,.1f}",
                  "picked" if i == 0 else "")
    console.print(t)
    c = r.choice
    console.print(f"simulated {c.algorithm}/{c.protocol}: {c.time_ns / 1000:,.1f} us  algbw "
                  f"{c.algbw_gbs:,.1f} GB/s  busbw {c.busbw_gbs:,.1f} GB/s  (bandwidth time "
                  f"{r.simulated_ns / 1000:,.1f} us simulated, {r.closed_form_ns / 1000:,.1f} "
                  "us closed form)")
    console.print(f"bytes: scale-up {_bytes(r.bytes['scaleup'])}, scale-out (leaving "
                  f"domains) {_bytes(r.bytes['scaleout'])}; busiest GPU: scale-up "
                  f"{r.peak_gbps_per_gpu['scaleup']:,.0f} Gb/s, scale-out "
                  f"{r.peak_gbps_per_gpu['scaleout']:,.0f} Gb/s")


def _render_sweep(rows: list[Any]) -> None:
    t = Table(title="per message size: the algorithm and protocol NCCL's cost model picks, "
              "simulated", title_justify="left")
    for col in ("size", "algorithm", "protocol", "time (us)", "algbw (GB/s)", "busbw (GB/s)",
                "leaving domains"):
        t.add_column(col, justify="left" if col in ("algorithm", "protocol") else "right")
    for r in rows:
        c = r.choice
        t.add_row(_size_label(r.size_bytes), c.algorithm, c.protocol,
                  f"{c.time_ns / 1000:,.1f}", f"{c.algbw_gbs:,.1f}", f"{c.busbw_gbs:,.1f}",
                  _bytes(r.bytes["scaleout"]))
    console.print(t)


def _render_job(j: dict[str, Any]) -> None:
    c = j["crossing"]
    console.print(f"job {j['job']}: {j['gpus']:,} GPUs = TP {j['tp']} x DP {j['dp']} x PP "
                  f"{j['pp']} (EP {j['ep']} within DP) on {j['domains_used']} domain(s) of "
                  f"{j['gpus_per_domain']} GPUs")
    console.print(f"groups crossing a domain: TP {c['tp_groups']}, EP {c['ep_groups']}, DP "
                  f"{c['dp_groups']}, PP links {c['pp_links']}")
    t = Table(title="one training step", title_justify="left")
    t.add_column("part")
    t.add_column("ms", justify="right")
    t.add_column("bytes leaving domains", justify="right")
    t.add_row("compute", f"{j['compute_ms']:,.1f}", "")
    for k, v in j["comm_ms"].items():
        t.add_row(f"{k.upper()} communication", f"{v:,.1f}",
                  _bytes(j["bytes_leaving_domains_by_phase"].get(k, 0.0)))
    t.add_row("step", f"{j['step_ms']:,.1f}", _bytes(j["bytes_leaving_domains"]))
    console.print(t)


def _render_converged(r: dict[str, Any]) -> None:
    t = Table(title=f"converged: {r['storage_nodes']} storage nodes on the backend; "
              f"{r['op']} of {_size_label(r['size_bytes'])} ({r['algorithm']}/"
              f"{r['protocol']}) on {r['gpus']:,} GPUs and a {_bytes(r['checkpoint_bytes'])} "
              "checkpoint write at once", title_justify="left")
    for col in ("", "alone", "together", "slowdown"):
        t.add_column(col, justify="left" if not col else "right")
    t.add_row("collective (bandwidth time)", f"{r['collective_alone_ms']:,.3f} ms",
              f"{r['collective_with_checkpoint_ms']:,.3f} ms",
              f"{r['collective_slowdown']:.3f}x")
    ck_a, ck_t = r["checkpoint_alone_s"], r["checkpoint_with_collective_s"]
    t.add_row("checkpoint write", f"{ck_a:,.3f} s", f"{ck_t:,.3f} s",
              f"{ck_t / ck_a:.3f}x" if ck_a else "-")
    console.print(t)


def nccl_cmd(
    spec: Path = typer.Argument(..., metavar="SPEC", help="cluster spec (YAML)"),
    op: str = typer.Option("allreduce", "--op", metavar="OP",
                           help="allreduce, reduce_scatter or allgather"),
    size: str = typer.Option("8GiB", "--size", metavar="SIZE",
                             help="message size as nccl-tests counts "
                             "it (8GiB = nccl-tests' 8G)"),
    sizes: str | None = typer.Option(None, "--sizes", metavar="SIZES",
                                     help="several sizes (1KiB,1MiB,8GiB): "
                                     "NCCL's pick and the simulated result per size"),
    gpus: int | None = typer.Option(None, "--gpus", min=1, metavar="N",
                                    help="GPUs of the collective: "
                                    "part of one domain or whole domains (default: all)"),
    algorithm: str | None = typer.Option(None, "--algorithm", metavar="ALGO",
                                         help="pin an algorithm "
                                         "(ring, tree, nvls, nvls_tree, hierarchical, pat)"),
    protocol: str | None = typer.Option(None, "--protocol", metavar="PROTO",
                                        help="pin a protocol (LL, "
                                        "LL128, Simple)"),
    job: Path | None = typer.Option(None, "--job", metavar="FILE",
                                    help="a job (YAML: gpus, tp, ep, pp, "
                                    "sizes) to place on the domains and simulate one step"),
    checkpoint: str | None = typer.Option(
        None, "--checkpoint", metavar="SIZE",
        help="the converged option: the frontend's storage nodes on "
        "the backend, a checkpoint of this size written while the collective runs (the "
        "interference both ways)"),
    pipeline: int = typer.Option(1, "--pipeline", metavar="K",
                                 help="hierarchical: its three phases "
                                 "pipelined over K chunks as NCCL runs them (1: one "
                                 "after the other)"),
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
    max_memory: str | None = MAX_MEMORY,
) -> None:
    """NCCL's collectives over the scale-up domain and the scale-out fabric: the
    algorithm and protocol NCCL's cost model picks per message size, the simulated time,
    algbw and busbw, the bytes on each dimension; or a job's step on the domains."""
    from aifabric.sim.twodim import net_from_spec, run_collective
    from aifabric.spec.units import parse_size
    from aifabric.workload.tuner import PROTOCOLS

    if not 1 <= pipeline <= 65_536:
        raise SpecError(Problem("--pipeline", f"got {pipeline}; allowed: 1 (the phases "
                                "one after the other) to 65536 chunks"))
    (sp,) = load_specs([spec])
    if protocol is not None and protocol not in PROTOCOLS:
        raise SpecError(Problem("--protocol", f"got {protocol!r}; allowed: "
                                f"{', '.join(PROTOCOLS)}"))
    try:
        net = net_from_spec(sp)
    except ValueError as e:
        raise SpecError(Problem("scaleup_domain", str(e), str(spec))) from None
    if job is not None:
        from pydantic import ValidationError

        from aifabric.sim.domain_job import DomainJob, run_job
        from aifabric.spec.load import load_yaml
        from aifabric.spec.problems import problems_from_validation

        data = load_yaml(job)
        try:
            j = DomainJob.model_validate(data if isinstance(data, dict) else {})
        except ValidationError as err:
            raise SpecError(problems_from_validation(err, DomainJob, str(job))) from None
        res = run_job(net, j)
        if as_json:
            console.print_json(json.dumps({"fabric": sp.name, **res}))
            return
        _header(sp.name, net)
        _render_job(res)
        return
    if checkpoint is not None:
        from aifabric.sim.storage import converged

        ck = parse_size(checkpoint, "--checkpoint")
        if ck <= 0:
            raise SpecError(Problem("--checkpoint", f"got {checkpoint!r}; allowed: a size "
                                    "> 0 like 182GB"))
        res = converged(sp, op, parse_size(size, "--size"), ck, gpus=gpus,
                        algorithm=algorithm, protocol=protocol)
        if as_json:
            console.print_json(json.dumps({"fabric": sp.name, **res}))
            return
        _header(sp.name, net)
        _render_converged(res)
        return
    list_sizes = _sizes(sizes) if sizes else [parse_size(size, "--size")]
    if min(list_sizes) <= 0:
        raise SpecError(Problem("--size", f"got {size!r}; allowed: a size > 0 like 8GiB"))
    results = [run_collective(net, op, s, gpus=gpus, algorithm=algorithm, protocol=protocol,
                              pipeline=pipeline) for s in list_sizes]
    if as_json:
        console.print_json(json.dumps({"fabric": sp.name,
                                       "results": [r.as_dict() for r in results]}))
        return
    _header(sp.name, net)
    if pipeline > 1:
        console.print(f"hierarchical: its phases pipelined over {pipeline} chunks")
    if len(results) == 1:
        _render_one(results[0])
    else:
        _render_sweep(results)
