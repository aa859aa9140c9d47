"""Traffic patterns: which GPUs send to which, and how many bytes.

* ``permutation`` — every GPU of a set sends to one other and receives from one other:
  ``shift: k`` sends GPU i to GPU i+k of the set (``shift`` = GPUs per segment gives
  same-rail cross-segment pairs), no shift draws a random derangement from the seed;
* ``all_to_all`` — every GPU of a set to every other (n(n-1) connections);
* ``ring`` — the flows of one step of ring AllReduce: every GPU sends to its successor
  in each of ``channels`` rings (NCCL channels; ring ``c`` visits a host's GPUs starting
  at GPU ``c``, so its host-to-host hops run on rail ``c``);
* ``incast`` — many senders to one GPU;
* ``flows`` — an explicit CSV list (``src,dst[,size_bytes][,qps][,path]``; ``path`` =
  switch names separated by spaces, for the ``pinned`` policy).

GPU sets (``gpus``, ``senders``): ``all`` (the active GPUs, in fabric order: segment by
segment, host by host), a Python-style range ``"start:stop[:step]"`` over that order, or
a list of GPU names (``host-s00-h000-gpu0``).
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Annotated, Literal

import numpy as np
from pydantic import BeforeValidator, ConfigDict, Field, NonNegativeInt, PositiveInt

from aifabric.errors import Problem, SpecError
from aifabric.routing.flows import FlowSet, make_flows
from aifabric.spec.base import StrictModel
from aifabric.spec.units import size_value
from aifabric.topology.fabric import Fabric, NodeKind

__all__ = ["AllToAll", "FlowList", "Incast", "Permutation", "Ring", "TrafficPattern",
           "build_traffic", "select_gpus"]

GpuSet = str | list[str]


class _Pattern(StrictModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    size_bytes: Annotated[NonNegativeInt, BeforeValidator(size_value)] = Field(
        default=1 << 20, le=1 << 50, description="bytes per connection (at most 1 PiB; "
        "1048576, 1MiB: docs/spec.md, Units)")
    qps_per_connection: PositiveInt | None = Field(
        default=None, le=1024, description="QPs per connection (default: the routing policy's)")


class Permutation(_Pattern):
    pattern: Literal["permutation"]
    gpus: GpuSet = "all"
    shift: int | None = Field(default=None, ge=-(1 << 31), le=(1 << 31) - 1,
                              description="GPU i -> GPU i+shift of the set")


class AllToAll(_Pattern):
    pattern: Literal["all_to_all"]
    gpus: GpuSet = "all"


class Ring(_Pattern):
    pattern: Literal["ring"]
    gpus: GpuSet = "all"
    channels: PositiveInt = Field(default=1, le=64, description="rings (NCCL channels, at "
                                  "most 64)")


class Incast(_Pattern):
    pattern: Literal["incast"]
    senders: GpuSet = "all"
    to: str = Field(description="the receiving GPU")


class FlowList(_Pattern):
    pattern: Literal["flows"]
    file: str = Field(description="CSV: src,dst[,size_bytes][,qps][,path]")


TrafficPattern = Annotated[Permutation | AllToAll | Ring | Incast | FlowList,
                           Field(discriminator="pattern")]
PATTERNS = ("permutation", "all_to_all", "ring", "incast", "flows")


def _gpu_by_name(f: Fabric, name: str, path: str) -> int:
    if not f.has_node(name) or f.nodes.kind[f.node_id(name)] != NodeKind.GPU:
        first = f.nodes.name[f.ids(NodeKind.GPU)[0]]
        raise SpecError.at(path, f"no GPU called {name!r} in fabric {f.name!r}; allowed: GPU "
                           f"names such as {first}")
    return f.node_id(name)


def select_gpus(f: Fabric, sel: GpuSet, path: str) -> np.ndarray:
    """GPU node ids of a GPU set (see the module docstring)."""
    active = f.ids(NodeKind.GPU, active_only=True)
    if isinstance(sel, list):
        ids = np.array([_gpu_by_name(f, str(s), f"{path}.{i}") for i, s in enumerate(sel)],
                       dtype=np.int64)
        if len(np.unique(ids)) != len(ids):
            raise SpecError.at(path, "a GPU is listed twice")
        return ids
    if sel == "all":
        return active.astype(np.int64)
    parts = sel.split(":")
    try:
        nums = [int(p) if p.strip() else None for p in parts]
    except ValueError:
        nums = []
    if not 2 <= len(parts) <= 3 or not nums or (len(nums) == 3 and nums[2] == 0):
        raise SpecError.at(path, f"{sel!r}: allowed: all, a range start:stop[:step] over the "
                           f"{len(active):,} active GPUs, or a list of GPU names")
    n = len(active)
    start, stop = nums[0], nums[1]
    for v in (start, stop):
        if v is not None and not -n <= v <= n:
            raise SpecError.at(path, f"{sel!r} is outside the {n:,} active GPUs; allowed: "
                               f"indices in [0, {n}]")
    picked = active[slice(start, stop, nums[2] if len(nums) == 3 else None)]
    if not len(picked):
        raise SpecError.at(path, f"{sel!r} selects no GPU")
    return picked.astype(np.int64)


def _ring(f: Fabric, gpus: np.ndarray, channels: int) -> tuple[np.ndarray, np.ndarray]:
    nodes = f.nodes
    G = f.spec.hosts.gpus_per_host
    host = nodes.host[gpus].astype(np.int64)
    _, host_rank = np.unique(host, return_inverse=True)
    # hosts in the order they first appear in the set
    first_seen = np.full(host_rank.max() + 1, len(gpus), dtype=np.int64)
    np.minimum.at(first_seen, host_rank, np.arange(len(gpus)))
    order_of_host = np.argsort(np.argsort(first_seen, kind="stable"), kind="stable")
    src, dst = [], []
    for c in range(channels):  # a few NCCL channels, not a loop over GPUs
        rot = (nodes.index[gpus].astype(np.int64) - c) % G
        o = np.lexsort((rot, order_of_host[host_rank]))
        seq = gpus[o]
        src.append(seq)
        dst.append(np.roll(seq, -1))
    return np.concatenate(src), np.concatenate(dst)


def _pairs(f: Fabric, p: _Pattern, path: str, seed: int, base: Path | None
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[list[str]] | None]:
    """(src, dst, size per connection, pinned switch names per connection or None)."""
    if isinstance(p, Permutation):
        g = select_gpus(f, p.gpus, f"{path}.gpus")
        n = len(g)
        if n < 2:
            raise SpecError.at(f"{path}.gpus", "a permutation needs at least 2 GPUs")
        if p.shift is not None:
            if p.shift % n == 0:
                raise SpecError.at(f"{path}.shift", f"{p.shift} maps every GPU to itself; "
                                   f"allowed: not a multiple of the {n} GPUs")
            dst = np.roll(g, -p.shift)
        else:
            rng = np.random.default_rng(seed)
            perm = rng.permutation(n)
            # a derangement: rotate the shuffled order by one
            dst_idx = np.empty(n, dtype=np.int64)
            dst_idx[perm] = np.roll(perm, -1)
            dst = g[dst_idx]
        return g, dst, np.full(n, p.size_bytes), None
    if isinstance(p, AllToAll):
        g = select_gpus(f, p.gpus, f"{path}.gpus")
        n = len(g)
        i, j = np.divmod(np.arange(n * n, dtype=np.int64), n)
        keep = i != j
        return g[i[keep]], g[j[keep]], np.full(int(keep.sum()), p.size_bytes), None
    if isinstance(p, Ring):
        g = select_gpus(f, p.gpus, f"{path}.gpus")
        if len(g) < 2:
            raise SpecError.at(f"{path}.gpus", "a ring needs at least 2 GPUs")
        s, d = _ring(f, g, p.channels)
        return s, d, np.full(len(s), p.size_bytes), None
    if isinstance(p, Incast):
        to = _gpu_by_name(f, p.to, f"{path}.to")
        s = select_gpus(f, p.senders, f"{path}.senders")
        s = s[s != to]
        return s, np.full(len(s), to), np.full(len(s), p.size_bytes), None
    assert isinstance(p, FlowList)
    return _read_csv(f, p, path, base)


_CSV_COLUMNS = ("src", "dst", "size_bytes", "qps", "path")
_MAX_BYTES = 1 << 50  # as _Pattern.size_bytes
_MAX_QPS = 1024  # as _Pattern.qps_per_connection


def _csv_rows(file: Path, shown: str, where: str) -> list[tuple[int, dict[str, str]]]:
    """The rows of a flows CSV as ``(line, {column: text})``: the header on line 1, then
    one flow per line (row ``r`` on line ``r + 2``, as problems found later name it),
    blank lines only at the end. A row with more or fewer fields than the header, an
    unknown or repeated column, a blank line or a quoted field across lines, or a file
    that cannot be read is a SpecError naming the file, the line and the columns."""
    allowed = ("allowed: a CSV with a header src,dst[,size_bytes][,qps][,path] and as many "
               "fields on every row")
    try:
        with file.open(newline="", encoding="utf-8") as fh:
            reader = csv.reader(fh)
            header = next(reader, None)
            if header is None:
                raise SpecError.at(where, f"{shown!r} is empty; {allowed}")
            cols = [c.strip() for c in header]
            unknown = [c for c in cols if c not in _CSV_COLUMNS]
            repeated = sorted({c for c in cols if cols.count(c) > 1})
            if unknown or repeated or not {"src", "dst"} <= set(cols):
                what = (f"unknown column(s) {', '.join(map(repr, unknown))}" if unknown else
                        f"repeated column(s) {', '.join(repeated)}" if repeated else
                        "src and dst are required")
                raise SpecError.at(where, f"{shown!r} line {reader.line_num}: {what} in "
                                   f"header {','.join(cols)}; allowed columns: "
                                   f"{', '.join(_CSV_COLUMNS)} (src and dst required)")
            rows, problems = [], []
            blank = 0
            for fields in reader:
                line = reader.line_num
                if not fields or (len(fields) == 1 and not fields[0].strip()):
                    blank = blank or line  # fine at the end of the file
                    continue
                if blank or line != len(rows) + len(problems) + 2:
                    problems.append(Problem(
                        f"{where} line {blank or line}",
                        f"{shown!r}: " + ("a blank line" if blank else "a quoted field "
                                          "across lines") + "; allowed: one flow per line"))
                    break
                if len(fields) != len(cols):
                    problems.append(Problem(
                        f"{where} line {reader.line_num}",
                        f"{shown!r}: {len(fields)} field(s), expected {len(cols)} "
                        f"({','.join(cols)})"))
                    continue
                rows.append((reader.line_num, dict(zip(cols, fields, strict=True))))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise SpecError.at(where, f"{shown!r}: cannot read: {reason}; {allowed}") from None
    if problems:
        raise SpecError(problems)
    if not rows:
        raise SpecError.at(where, f"{shown!r} has no rows; {allowed}")
    return rows


def _csv_int(text: str, shown: str, where: str, lo: int, hi: int) -> int:
    try:
        v = int(text)
    except ValueError:
        raise SpecError.at(where, f"{shown!r}: not an integer: {text!r}; allowed: "
                           f"{lo}..{hi}") from None
    if not lo <= v <= hi:
        raise SpecError.at(where, f"{shown!r}: {v} is out of range; allowed: {lo}..{hi}")
    return v


def _read_csv(f: Fabric, p: FlowList, path: str, base: Path | None):
    file = (base / p.file) if base is not None else Path(p.file)
    where = f"{path}.file"
    if not file.is_file():
        raise SpecError.at(where, f"{p.file!r}: file not found")
    rows = _csv_rows(file, p.file, where)
    src, dst, size, qps, paths = [], [], [], [], []
    problems = []
    for k, row in rows:  # k: the row's line in the file
        try:
            src.append(_gpu_by_name(f, row["src"].strip(), f"{where} line {k}: src"))
            dst.append(_gpu_by_name(f, row["dst"].strip(), f"{where} line {k}: dst"))
            sz = (row.get("size_bytes") or "").strip()
            size.append(_csv_int(sz, p.file, f"{where} line {k}: size_bytes", 0, _MAX_BYTES)
                        if sz else p.size_bytes)
            q = (row.get("qps") or "").strip()
            qps.append(_csv_int(q, p.file, f"{where} line {k}: qps", 1, _MAX_QPS) if q else 0)
            hops = (row.get("path") or "").replace(">", " ").split()
            for nm in hops:
                if not f.has_node(nm):
                    raise SpecError.at(f"{where} line {k}: path", f"no node called {nm!r}")
            paths.append(hops)
        except SpecError as err:
            problems.extend(err.problems)
    if problems:
        raise SpecError(problems)
    return (np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64),
            np.array(size, dtype=np.int64), (paths, qps))


def build_traffic(fabric: Fabric, patterns: list, *, seed: int = 0,
                  base_dir: Path | None = None, path: str = "traffic"
                  ) -> tuple[FlowSet, tuple[np.ndarray, np.ndarray] | None]:
    """The flows of every pattern, one after another, and pinned paths (``(ptr, nodes)``
    per flow, or None when no pattern pins a path). Problems name ``traffic.<i>.<field>``."""
    f = fabric
    parts: list[FlowSet] = []
    pins: list[list[list[str]]] = []
    any_pin = False
    problems: list[Problem] = []
    for i, p in enumerate(patterns):
        where = f"{path}.{i}"
        try:
            s, d, size, extra = _pairs(f, p, where, seed + i, base_dir)
            if extra is not None:  # explicit list: per-row QPs and paths
                names, qps = extra
                q_default = p.qps_per_connection or f.spec.routing.qps_per_connection
                q = np.where(np.array(qps) > 0, np.array(qps), q_default)
                groups, rows = [], []
                for qv in np.unique(q):  # a few distinct QP counts
                    sel = np.flatnonzero(q == qv)
                    fs = make_flows(f, s[sel], d[sel], size[sel],
                                    qps_per_connection=int(qv), seed=seed + i)
                    groups.append(fs)
                    rows.append(sel[fs.conn])
                row = np.concatenate(rows)
                merged = FlowSet.concat(groups)
                order = np.lexsort((merged.qp, row))  # back to the file's row order
                merged = merged.take(order).replace(conn=row[order])
                parts.append(merged)
                pins.append([names[j] for j in row[order]])
                any_pin |= any(names)
            else:
                fs = make_flows(f, s, d, size, qps_per_connection=p.qps_per_connection,
                                seed=seed + i)
                parts.append(fs)
                pins.append([])
        except SpecError as err:
            problems.extend(err.problems)
    if problems:
        raise SpecError(problems)
    flows = FlowSet.concat(parts)
    if not any_pin:
        return flows, None
    lengths, nodes_list = [], []
    for part, pin in zip(parts, pins, strict=True):
        if not pin:
            lengths.append(np.zeros(len(part), dtype=np.int64))
            continue
        for names in pin:  # explicit CSV rows only (small by nature); names checked
            nodes_list.extend(f.node_id(nm) for nm in names)
        lengths.append(np.array([len(x) for x in pin], dtype=np.int64))
    ln = np.concatenate(lengths)
    ptr = np.zeros(len(ln) + 1, dtype=np.int64)
    np.cumsum(ln, out=ptr[1:])
    return flows, (ptr, np.array(nodes_list, dtype=np.int64))
