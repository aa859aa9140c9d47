"""Chakra execution traces (MLCommons, ``mlc-chakra``) as aifabric workloads.

A Chakra trace is one protobuf file per rank (``NAME.<rank>.et``): a ``GlobalMetadata``
record, then ``Node`` records, each length-prefixed. Nodes are compute (``COMP_NODE``:
a duration, or ``num_ops`` FLOPs), collectives (``COMM_COLL_NODE``: ``comm_type``,
``comm_size`` bytes, ``pg_name`` the process group), point-to-point sends and receives
(``COMM_SEND_NODE``/``COMM_RECV_NODE``: ``comm_src``/``comm_dst``, ``comm_tag``,
``comm_size``) and others; ``data_deps`` and ``ctrl_deps`` name the parents.

Reading (:func:`read_rank`) uses the package's own protobuf classes
(``chakra.schema.protobuf.et_def_pb2``). Mapping (:func:`compile_chakra`) turns the
ranks' graphs into aifabric's :class:`~aifabric.workload.dag.TransferDAG`:

* a compute node is a compute stage of its duration (or ``num_ops / gpu_tflops``);
* the k-th collective of process group G on every member rank is one collective of
  aifabric (ring AllReduce, AllGather, ReduceScatter, Broadcast; direct All-to-All) on
  those ranks' GPUs, starting when every member's parents have ended; a ``BARRIER`` is a
  zero-time join of the group;
* the k-th send from rank a to rank b with tag t is matched with the k-th receive on b
  from a with tag t: one transfer, starting when both the send's and the receive's
  parents have ended; both nodes end when it is delivered;
* memory nodes, metadata nodes and collective types aifabric does not model
  (``REDUCE``, ``GATHER``, ``SCATTER``, ...) are listed in :attr:`ChakraTrace.unsupported`
  and kept as zero-time steps, so no dependency is lost.

Ranks whose files decode to the same graph (the same node types, durations, sizes,
groups, peers and dependencies — ids, names and timestamps may differ) are one *class*:
their nodes run in lockstep, one stage per node for all of them. This is exact when the
class's ranks depend on the same collectives (the SPMD case of data parallelism) and
keeps a 1,024-rank trace of identical ranks as small as one rank. Byte-identical files
are decoded once (bytes compared, then hashed); different files are decoded by a compiled
wire-format decoder (:mod:`aifabric.workload._chakra_wire`), in worker processes when
there are many.
"""

from __future__ import annotations

import gzip
import hashlib
import heapq
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from aifabric.errors import Problem, SpecError

__all__ = ["ChakraTrace", "RankGraph", "compile_chakra", "et_classes", "find_rank_files",
           "first_record", "read_rank", "read_trace"]

# Chakra's NodeType and CollectiveCommType values (et_def.proto)
INVALID, METADATA, MEM_LOAD, MEM_STORE, COMP, SEND, RECV, COLL = range(8)
NODE_TYPES = ("INVALID_NODE", "METADATA_NODE", "MEM_LOAD_NODE", "MEM_STORE_NODE",
              "COMP_NODE", "COMM_SEND_NODE", "COMM_RECV_NODE", "COMM_COLL_NODE")
COMM_TYPES = ("ALL_REDUCE", "REDUCE", "ALL_GATHER", "GATHER", "SCATTER", "BROADCAST",
              "ALL_TO_ALL", "REDUCE_SCATTER", "REDUCE_SCATTER_BLOCK", "BARRIER")
#: Chakra collective -> aifabric collective (None: a zero-time join of the group)
COLL_OPS: dict[int, str | None] = {0: "allreduce", 2: "allgather", 5: "broadcast",
                                   6: "alltoall", 7: "reduce_scatter", 9: None}
#: largest rank count / node count we accept in one trace (sanity, not memory)
MAX_RANKS = 1 << 20

_RANK_FILE = re.compile(r"^(?P<prefix>[A-Za-z0-9][A-Za-z0-9._+=@-]{0,127})\.(?P<rank>\d{1,7})"
                        r"\.et(?:\.gz)?$")


def _label(name: str) -> str:
    """A process group name as it may appear in results (letters, digits, ``._:+-``;
    anything else becomes ``_``): trace content reaches tables and pages."""
    return re.sub(r"[^A-Za-z0-9._:+-]", "_", name)[:64] or "_"


@dataclass
class RankGraph:
    """One rank's nodes as arrays (position i = the i-th node record in the file).

    ``dep_ptr``/``dep_idx``: the parents of node i are positions
    ``dep_idx[dep_ptr[i]:dep_ptr[i+1]]`` (data and control dependencies together).
    ``pg``: index into ``pg_names`` (-1: the whole trace); ``src``/``dst``: the peer ranks
    of sends and receives (-1 unknown); ``comm_type`` -1 where none.
    """

    ntype: np.ndarray
    duration_us: np.ndarray
    num_ops: np.ndarray
    comm_type: np.ndarray
    comm_size: np.ndarray
    pg: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    tag: np.ndarray
    dep_ptr: np.ndarray
    dep_idx: np.ndarray
    pg_names: list[str]
    dangling: int = 0  # dependencies on ids not in the file (ignored)

    @property
    def n(self) -> int:
        return len(self.ntype)

    def key(self) -> bytes:
        """A digest of the graph's meaning (ids, names and timestamps left out)."""
        h = hashlib.blake2b(digest_size=20)
        for a in (self.ntype, self.duration_us, self.num_ops, self.comm_type, self.comm_size,
                  self.pg, self.src, self.dst, self.tag, self.dep_ptr, self.dep_idx):
            h.update(np.ascontiguousarray(a).tobytes())
            h.update(b"|")
        h.update("\0".join(self.pg_names).encode())
        return h.digest()


def et_classes():
    """The package's protobuf classes (imported lazily: protobuf is a heavy import)."""
    try:
        from chakra.schema.protobuf import et_def_pb2
    except ImportError as e:  # pragma: no cover - the extra is missing
        raise SpecError(Problem("workload.chakra", f"reading Chakra traces needs the "
                                f"mlc-chakra package ({e}); allowed: pip install "
                                "'aifabric[chakra]'")) from None
    return et_def_pb2


def _attr_value(a: Any) -> Any:
    which = a.WhichOneof("value")
    return None if which is None else getattr(a, which)


_I64 = (1 << 63) - 1


def _attr_num(a: Any, where: str, i: int, default: int = 0) -> int | float:
    """A numeric attribute's value (``default`` when it has none; integers clamped to
    int64); SpecError when it holds a string, a list or a non-finite number."""
    import math

    v = _attr_value(a)
    if v is None:
        return default
    if isinstance(v, bool | int):
        return max(-_I64 - 1, min(_I64, int(v)))
    if isinstance(v, float) and math.isfinite(v):
        return max(-_I64 - 1, min(_I64, v)) if a.name != "num_ops" else v
    raise SpecError(Problem("workload.chakra", f"{where}: node record {i + 1}: attribute "
                            f"{_label(a.name)!r} is not a number; allowed: a Chakra ET file "
                            "(numeric comm_size, comm_type, comm_src, comm_dst, comm_tag, "
                            "num_ops)"))


def _small(v: np.ndarray, top: int, none: bool = True) -> np.ndarray:
    """Enum values as int8: those outside 0..top become 127 (unknown), never wrapped
    onto a known value (260 must not read as 4); -1 (none given) stays when ``none``."""
    v = np.asarray(v, dtype=np.int64)
    bad = (v < 0) | (v > top)
    if none:
        bad &= v != -1
    return np.where(bad, 127, v).astype(np.int8)


def _records(data: bytes, where: str) -> list[tuple[int, int]]:
    """(start, end) of every length-prefixed record (protolib's framing: a varint length,
    then the message)."""
    out: list[tuple[int, int]] = []
    pos, n = 0, len(data)
    while pos < n:
        size = shift = 0
        while True:
            if pos >= n:
                raise SpecError(Problem("workload.chakra", f"{where}: truncated record "
                                        f"{len(out)} (a length runs past the end of the "
                                        "file); allowed: a Chakra ET file (protobuf)"))
            c = data[pos]
            pos += 1
            size |= (c & 0x7F) << shift
            if not c & 0x80:
                break
            shift += 7
            if shift > 63:
                raise SpecError(Problem("workload.chakra", f"{where}: corrupted record "
                                        f"{len(out)} (bad length); allowed: a Chakra ET "
                                        "file (protobuf)"))
        if pos + size > n:
            raise SpecError(Problem("workload.chakra", f"{where}: truncated record "
                                    f"{len(out)} ({size} bytes announced, {n - pos} left); "
                                    "allowed: a Chakra ET file (protobuf)"))
        out.append((pos, pos + size))
        pos += size
    return out


def read_rank(path: Path, data: bytes | None = None, *, fast: bool = True) -> RankGraph:
    """Decode one rank's ET file (SpecError when it is not one).

    ``fast``: the compiled wire-format decoder (:mod:`._chakra_wire`, field numbers from
    the package's schema); a file it cannot decode, and every file with ``fast=False``,
    goes through Chakra's own protobuf classes."""
    et_classes()
    where = str(path)
    if data is None:
        data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as e:
            raise SpecError(Problem("workload.chakra", f"{where}: bad gzip ({e}); allowed: "
                                    "a Chakra ET file, plain or gzipped")) from None
    if fast:
        g = _read_fast(where, data)
        if g is not None:
            return g
    return _read_protobuf(where, data)


def first_record(data: bytes) -> tuple[int, int]:
    """Where an ET file's first record (its GlobalMetadata) starts and how long it is:
    the varint length prefix read off ``data``."""
    size = shift = pos = 0
    while pos < len(data):
        c = data[pos]
        pos += 1
        size |= (c & 0x7F) << shift
        shift += 7
        if not c & 0x80:
            break
    return pos, size


def _read_fast(where: str, data: bytes) -> RankGraph | None:
    from aifabric.workload._chakra_wire import ATTR_NAMES, decode

    out = decode(data)
    if out is None:
        return None
    # the metadata record, checked by the package's class (the decoder skips it)
    pos, size = first_record(data)
    from google.protobuf.message import DecodeError

    try:
        et_classes().GlobalMetadata.FromString(data[pos:pos + size])
    except DecodeError:
        return None  # the protobuf reader says what is wrong
    _, _, ids, ntype, dur, dcnt, deps, ival, fval, has = out
    col = {n: i for i, n in enumerate(ATTR_NAMES)}
    n = len(ids)

    def iv(name: str, default: int) -> np.ndarray:
        c = col[name]
        return np.where(has[:, c], ival[:, c], default)

    csize = np.where(has[:, col["comm_size"]], ival[:, col["comm_size"]],
                     iv("tensor_size", 0))
    pg = np.full(n, -1, dtype=np.int32)
    names: list[str] = []
    c = col["pg_name"]
    if has[:, c].any():
        rows = np.flatnonzero(has[:, c])
        hashes, first = np.unique(ival[rows, c], return_index=True)
        order = np.argsort(first)  # names in order of first use
        code = np.empty(len(hashes), dtype=np.int32)
        code[order] = np.arange(len(hashes), dtype=np.int32)
        for h in order.tolist():
            enc = int(fval[rows[first[h]], c])
            start, ln = enc >> 16, enc & 0xFFFF
            names.append(bytes(data[start:start + ln]).decode("utf-8", "replace"))
        pg[rows] = code[np.searchsorted(hashes, ival[rows, c])]
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(dcnt, out=ptr[1:])
    if n < 2 or bool((ids[1:] > ids[:-1]).all()):  # the usual case: ids ascending
        order_, sid = np.arange(n, dtype=np.int64), ids
    else:
        order_ = np.argsort(ids, kind="stable")
        sid = ids[order_]
    if n > 1 and (sid[1:] == sid[:-1]).any():
        dup = int(sid[1:][sid[1:] == sid[:-1]][0])
        raise SpecError(Problem("workload.chakra", f"{where}: node id {dup} appears twice; "
                                "allowed: unique node ids per rank"))
    return _link(where, ids, order_, sid, _small(ntype, COLL, none=False),
                 dur.astype(np.float64), np.where(has[:, col["num_ops"]],
                                                  fval[:, col["num_ops"]], 0.0),
                 _small(iv("comm_type", -1), len(COMM_TYPES) - 1), csize.astype(np.int64), pg,
                 iv("comm_src", -1), iv("comm_dst", -1), iv("comm_tag", 0), ptr, deps,
                 names)


def _read_protobuf(where: str, data: bytes) -> RankGraph:
    """The reference reader: Chakra's protobuf classes, node by node."""
    pb = et_classes()
    from google.protobuf.message import DecodeError

    recs = _records(data, where)
    if not recs:
        raise SpecError(Problem("workload.chakra", f"{where}: empty file; allowed: a Chakra "
                                "ET file (GlobalMetadata, then nodes)"))
    mv = memoryview(data)
    try:
        pb.GlobalMetadata.FromString(mv[recs[0][0]:recs[0][1]])
    except DecodeError as e:
        raise SpecError(Problem("workload.chakra", f"{where}: corrupted protobuf in the "
                                f"metadata record ({e}); allowed: a Chakra ET file")) from None
    n = len(recs) - 1
    ids = np.zeros(n, dtype=np.uint64)
    ntype = np.zeros(n, dtype=np.int8)
    dur = np.zeros(n, dtype=np.float64)
    ops = np.zeros(n, dtype=np.float64)
    ctype = np.full(n, -1, dtype=np.int8)
    csize = np.zeros(n, dtype=np.int64)
    pg = np.full(n, -1, dtype=np.int32)
    src = np.full(n, -1, dtype=np.int64)
    dst = np.full(n, -1, dtype=np.int64)
    tag = np.zeros(n, dtype=np.int64)
    deps: list[list[int]] = []
    pg_index: dict[str, int] = {}
    node = pb.Node()
    for i, (a, b) in enumerate(recs[1:]):
        try:
            node.ParseFromString(mv[a:b])
        except DecodeError as e:
            raise SpecError(Problem("workload.chakra", f"{where}: corrupted protobuf in node "
                                    f"record {i + 1} ({e}); allowed: a Chakra ET file")) \
                from None
        ids[i] = node.id
        t = node.type
        ntype[i] = t if 0 <= t <= COLL else 127
        dur[i] = node.duration_micros
        deps.append([*node.data_deps, *node.ctrl_deps])
        for at in node.attr:
            name = at.name
            if name == "comm_size" or name == "tensor_size":
                if name == "comm_size" or not csize[i]:
                    csize[i] = int(_attr_num(at, where, i))
            elif name == "comm_type":
                ct = int(_attr_num(at, where, i))
                ctype[i] = ct if -1 <= ct < len(COMM_TYPES) else 127  # as _small
            elif name == "pg_name":
                s = str(_attr_value(at))
                pg[i] = pg_index.setdefault(s, len(pg_index))
            elif name == "comm_src":
                src[i] = int(_attr_num(at, where, i, -1))
            elif name == "comm_dst":
                dst[i] = int(_attr_num(at, where, i, -1))
            elif name == "comm_tag":
                tag[i] = int(_attr_num(at, where, i))
            elif name == "num_ops":
                ops[i] = float(_attr_num(at, where, i))
    return _finish(where, ids, ntype, dur, ops, ctype, csize, pg, src, dst, tag, deps,
                   list(pg_index))


def _finish(where: str, ids: np.ndarray, ntype: np.ndarray, dur: np.ndarray,
            ops: np.ndarray, ctype: np.ndarray, csize: np.ndarray, pg: np.ndarray,
            src: np.ndarray, dst: np.ndarray, tag: np.ndarray, deps: list[list[int]],
            pg_names: list[str]) -> RankGraph:
    """Dependencies by id -> by position (vectorised); checks ids are unique."""
    n = len(ids)
    order = np.argsort(ids, kind="stable")
    sid = ids[order]
    if n > 1 and (sid[1:] == sid[:-1]).any():
        dup = int(sid[1:][sid[1:] == sid[:-1]][0])
        raise SpecError(Problem("workload.chakra", f"{where}: node id {dup} appears twice; "
                                "allowed: unique node ids per rank"))
    cnt = np.fromiter((len(d) for d in deps), dtype=np.int64, count=n)
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(cnt, out=ptr[1:])
    flat = np.fromiter((x for d in deps for x in d), dtype=np.uint64, count=int(ptr[-1]))
    return _link(where, ids, order, sid, ntype, dur, ops, ctype, csize, pg, src, dst, tag,
                 ptr, flat, pg_names)


def _link(where: str, ids: np.ndarray, order: np.ndarray, sid: np.ndarray,
          ntype: np.ndarray, dur: np.ndarray, ops: np.ndarray, ctype: np.ndarray,
          csize: np.ndarray, pg: np.ndarray, src: np.ndarray, dst: np.ndarray,
          tag: np.ndarray, ptr: np.ndarray, flat: np.ndarray,
          pg_names: list[str]) -> RankGraph:
    del where, ids
    n = len(sid)
    pos = np.searchsorted(sid, flat)
    ok = pos < n
    ok[ok] = sid[pos[ok]] == flat[ok]
    child = np.repeat(np.arange(n, dtype=np.int64), np.diff(ptr))
    par = order[pos[ok]].astype(np.int64)
    child = child[ok]
    # unique (child, parent) pairs, sorted by child then parent: deterministic
    key = child * n + par
    if len(key) > 1 and not bool((key[1:] > key[:-1]).all()):
        key = np.sort(key)
    if len(key):
        key = key[np.concatenate(([True], key[1:] != key[:-1]))]
    child, par = key // max(n, 1), key % max(n, 1)
    keep = child != par
    child, par = child[keep], par[keep]
    nptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(child, minlength=n), out=nptr[1:])
    return RankGraph(ntype=ntype, duration_us=dur, num_ops=ops, comm_type=ctype,
                     comm_size=csize, pg=pg, src=src, dst=dst, tag=tag, dep_ptr=nptr,
                     dep_idx=par, pg_names=pg_names, dangling=int((~ok).sum()))


# ------------------------------------------------------------------ the trace's files
def find_rank_files(where: Path, ranks: int | None) -> tuple[str, list[Path]]:
    """The rank files of a trace: ``where`` is a folder holding ``NAME.<rank>.et`` for
    one NAME, or a path prefix ``DIR/NAME``. Returns (NAME, files by rank)."""
    if where.is_dir():
        folder, prefix = where, None
    elif where.parent.is_dir():
        folder, prefix = where.parent, where.name
    else:
        raise SpecError(Problem("workload.chakra", f"{where}: no such folder; allowed: a "
                                "folder of NAME.<rank>.et files, or the path prefix "
                                "DIR/NAME"))
    found: dict[str, dict[int, Path]] = {}
    for p in sorted(folder.iterdir()):
        m = _RANK_FILE.match(p.name)
        if m and p.is_file() and (prefix is None or m["prefix"] == prefix):
            found.setdefault(m["prefix"], {})[int(m["rank"])] = p
    if not found:
        raise SpecError(Problem("workload.chakra", f"{where}: no Chakra rank files "
                                "(NAME.<rank>.et, NAME of letters, digits and ._+=@-); "
                                "allowed: a folder of them, or the path prefix DIR/NAME"))
    if len(found) > 1:
        names = ", ".join(sorted(found)[:5])
        raise SpecError(Problem("workload.chakra", f"{where}: holds several traces ({names}); "
                                f"allowed: the path prefix of one, e.g. {folder / min(found)}"))
    (name, byrank), = found.items()
    top = max(byrank) + 1
    n = top if ranks is None else ranks
    if top > n:
        raise SpecError(Problem("workload.ranks", f"the trace has rank files up to rank "
                                f"{top - 1} ({len(byrank)} files) but the placement has {n} "
                                f"ranks; allowed: ranks >= {top}"))
    missing = [r for r in range(n) if r not in byrank]
    if missing:
        raise SpecError(Problem("workload.chakra", f"{folder}: missing rank file "
                                f"{name}.{missing[0]}.et ({len(missing)} of {n} ranks "
                                "missing); allowed: one file per rank 0..ranks-1"))
    return name, [byrank[r] for r in range(n)]


@dataclass
class ChakraTrace:
    """A trace read from disk: rank classes (ranks with the same graph) and what the
    mapping cannot model."""

    name: str
    n_ranks: int
    graphs: list[RankGraph]  # one per class
    rank_class: np.ndarray  # class of each rank
    files_decoded: int  # distinct file contents decoded
    nodes: int  # nodes over all ranks
    unsupported: dict[str, int] = field(default_factory=dict)  # what -> nodes (all ranks)
    dangling: int = 0


def read_trace(where: Path, ranks: int | None = None, *,
               workers: int | None = None) -> ChakraTrace:
    """Read every rank file of the trace at ``where``; byte-identical files are decoded
    once and ranks with equal graphs share a class.

    First every file is read and grouped by content (bytes compared, then hashed); then
    one file of each group is decoded, by ``workers`` processes when there are many
    (default: ``AIFABRIC_CHAKRA_WORKERS``, else the usable cores up to 8 where there are
    at least 4; 1 = in this process). Classes are numbered by their first rank: the
    result does not depend on the worker count."""
    name, files = find_rank_files(where, ranks)
    by_hash: dict[bytes, int] = {}
    # a few files' bytes kept per size: an identical file is found by comparing bytes
    # (memcmp speed) before any hashing
    kept: dict[int, list[tuple[bytes, int]]] = {}
    first: list[int] = []  # byte group -> its first rank
    group = np.zeros(len(files), dtype=np.int64)
    total = 0
    for r, p in enumerate(files):
        try:
            data = p.read_bytes()
        except OSError as e:
            raise SpecError(Problem("workload.chakra", f"{p}: cannot read ({e.strerror}); "
                                    "allowed: a readable rank file")) from None
        same = kept.get(len(data), [])
        gi = next((k for d, k in same if d == data), None)
        if gi is None:
            h = hashlib.blake2b(data, digest_size=20).digest()
            gi = by_hash.get(h)
            if gi is None:
                gi = by_hash[h] = len(first)
                first.append(r)
                total += len(data)
                if len(same) < 2:
                    kept.setdefault(len(data), []).append((data, gi))
        group[r] = gi
    del kept
    paths = [files[r] for r in first]
    w = _workers(workers, len(paths), total)
    results = _decode_all(paths, w)
    # graphs by meaning, classes numbered by first rank
    by_key: dict[bytes, int] = {}
    graphs: list[RankGraph] = []
    class_of_group = np.zeros(len(paths), dtype=np.int64)
    class_nodes = 0
    for gi, res in enumerate(results):
        g, k = res
        c = by_key.get(k)
        if c is None:
            c = by_key[k] = len(graphs)
            graphs.append(g)
            class_nodes += g.n
            _check_memory(class_nodes, len(graphs), first[gi] + 1, len(files))
        class_of_group[gi] = c
    rank_class = class_of_group[group]
    sizes = np.bincount(rank_class, minlength=len(graphs))
    unsupported: dict[str, int] = {}
    nodes = 0
    dangling = 0
    for c, g in enumerate(graphs):
        k = int(sizes[c])
        nodes += g.n * k
        dangling += g.dangling * k
        for what, cnt in _unsupported(g).items():
            unsupported[what] = unsupported.get(what, 0) + cnt * k
    return ChakraTrace(name=name, n_ranks=len(files), graphs=graphs, rank_class=rank_class,
                       files_decoded=len(paths), nodes=nodes,
                       unsupported=dict(sorted(unsupported.items())), dangling=dangling)


#: decode in worker processes only when there is this much to decode
POOL_MIN_FILES, POOL_MIN_BYTES = 4, 32 << 20


def _workers(workers: int | None, n_files: int, n_bytes: int) -> int:
    import os

    if workers is None:
        env = os.environ.get("AIFABRIC_CHAKRA_WORKERS", "")
        cores = len(os.sched_getaffinity(0))
        # a worker costs its start-up and sending its graph back (~25% more CPU in all,
        # measured): worth it from 4 cores on
        workers = int(env) if env.isdigit() and int(env) > 0 else \
            (min(8, cores) if cores >= 4 else 1)
        if n_files < POOL_MIN_FILES or n_bytes < POOL_MIN_BYTES:
            workers = 1
    return max(1, min(workers, n_files))


def _decode_one(path: Path) -> tuple[RankGraph, bytes] | list[Problem]:
    """One file's graph and its key (problems instead of raising: a worker's exception
    would not cross the process boundary intact)."""
    try:
        g = read_rank(path)
        return g, g.key()
    except SpecError as err:
        return err.problems


def _decode_all(paths: list[Path], workers: int):
    """Yield (graph, key) per path, in order (a generator: the caller keeps only the
    distinct graphs, so memory follows the distinct graphs, not the files)."""
    def check(res: Any) -> tuple[RankGraph, bytes]:
        if isinstance(res, list):
            raise SpecError(res)
        return res

    if workers <= 1:
        for p in paths:
            yield check(_decode_one(p))
        return
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    ex = ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn"))
    try:
        for res in ex.map(_decode_one, paths, chunksize=1):
            yield check(res)
    finally:  # on a problem: drop the files not started, wait for the running ones
        ex.shutdown(wait=True, cancel_futures=True)


#: bytes per node of a distinct rank graph, decoded and compiled (arrays, the step it
#: becomes, the DAG stage): measured on benchmarks/bench_chakra.py, rounded up
BYTES_PER_CLASS_NODE = 1000


def _check_memory(class_nodes: int, classes: int, read: int, ranks: int) -> None:
    """Refuse (SpecError) a trace whose distinct rank graphs will not fit in memory:
    ranks with different graphs each compile into their own stages."""
    from aifabric.guard import refuse as _refuse

    _refuse("workload.chakra", f"the trace has {classes:,} different rank graph(s) "
            f"among the first {read:,} of {ranks:,} ranks, {class_nodes:,} nodes to compile "
            "(identical ranks share their nodes)", class_nodes * BYTES_PER_CLASS_NODE, None)


def _unsupported(g: RankGraph) -> dict[str, int]:
    out: dict[str, int] = {}
    t = g.ntype
    for v in (INVALID, MEM_LOAD, MEM_STORE, METADATA):
        k = int((t == v).sum())
        if k:
            out[NODE_TYPES[v]] = k
    unk = (t < 0) | (t > COLL)
    if unk.any():
        out["unknown node type"] = int(unk.sum())
    coll = t == COLL
    for ct in np.unique(g.comm_type[coll]):
        if int(ct) not in COLL_OPS:
            name = (COMM_TYPES[ct] if 0 <= ct < len(COMM_TYPES) else
                    "without comm_type" if ct == -1 else "unknown comm_type")
            out[f"COMM_COLL_NODE {name}"] = int((g.comm_type[coll] == ct).sum())
    p2p = (t == SEND) | (t == RECV)
    nopeer = p2p & (((t == SEND) & (g.dst < 0)) | ((t == RECV) & (g.src < 0)))
    if nopeer.any():
        out["send/recv without comm_src/comm_dst"] = int(nopeer.sum())
    return out


def load_groups(folder: Path, given: dict[str, list[int]] | None) -> dict[str, list[int]] | None:
    """Process groups: the scenario's ``comm_groups``, else the trace folder's
    ``comm_group.json`` (ASTRA-sim's ``{"name": [ranks]}``), else None (inferred)."""
    if given is not None:
        return {str(k): [int(x) for x in v] for k, v in given.items()}
    p = folder / "comm_group.json"
    if not p.is_file():
        return None
    from aifabric.spec.load import load_json

    try:
        doc = load_json(p)
        if not isinstance(doc, dict):
            raise ValueError("not a mapping")
        return {str(k): [int(x) for x in v] for k, v in doc.items()}
    except SpecError as e:  # unreadable, invalid JSON, too large
        raise SpecError(Problem("workload.chakra", f"{p}: not a comm_group.json "
                                f"({e.problems[0].message}); allowed: {{\"group name\": "
                                "[ranks]}")) from None
    except (ValueError, TypeError, UnicodeDecodeError) as e:
        raise SpecError(Problem("workload.chakra", f"{p}: not a comm_group.json ({e}); "
                                "allowed: {\"group name\": [ranks]}")) from None


# ------------------------------------------------------------------ mapping to a DAG
@dataclass
class ChakraMapping:
    """What compiling a trace produced, for the results and the tests."""

    trace: ChakraTrace
    last_stage: int
    node_stage: list[np.ndarray]  # per class: the stage whose end ends each node
    stages: int
    collectives: int
    transfers_p2p: int


# unit kinds
_LOCAL, _COLL, _SEND, _JOIN = range(4)


def compile_chakra(b: Any, trace: ChakraTrace, gpus: np.ndarray, host: np.ndarray,
                   local: np.ndarray, *, groups: dict[str, list[int]] | None = None,
                   gpu_tflops: float | None = None, channels: int = 1,
                   name: str = "chakra", sim: str = "flow", qps: int = 1) -> ChakraMapping:
    """Add ``trace`` to the DAGBuilder ``b`` with rank r on GPU ``gpus[r]`` (``host``,
    ``local``: its host and index in the host, for rail-aware rings). SpecError when the
    ranks' graphs do not match up (collective counts, sizes, unmatched sends)."""
    graphs = trace.graphs
    C = len(graphs)
    members_of = [np.flatnonzero(trace.rank_class == c) for c in range(C)]
    off = np.zeros(C + 1, dtype=np.int64)
    np.cumsum([g.n for g in graphs], out=off[1:])
    K = int(off[-1])

    gmembers = _process_groups(trace, groups, members_of)
    # units: their kind, the class-nodes whose parents they wait for, and the unit whose
    # end ends each class-node (rep)
    units = _Units(np.full(K, -1, dtype=np.int64))
    _add_local_units(units, graphs, off, gpu_tflops)
    _add_coll_units_all(units, trace, gmembers, off)
    n_p2p = _add_p2p_units(units, trace, members_of, off)
    assert (units.rep >= 0).all()
    _check_rows(units.ukind, units.uinfo, n_p2p, channels, sim, qps)

    U = len(units.ukind)
    eu, ev = _unit_edges(units, graphs, off)
    order = _topo(U, eu, ev)
    stage_of, n_coll = _emit_stages(b, units, order, eu, ev, graphs, members_of, gpus, host,
                                    local, channels, name)
    node_stage = [stage_of[units.rep[off[c]:off[c + 1]]] for c in range(C)]
    sinks = np.setdiff1d(np.arange(U), ev)  # units nothing waits for
    last = b.barrier(stage_of[sinks], label=f"{name} end")
    return ChakraMapping(trace=trace, last_stage=last, node_stage=node_stage,
                         stages=b.n_stages, collectives=n_coll, transfers_p2p=n_p2p)


@dataclass
class _Units:
    """The units a trace compiles to (one stage each, or a collective's stages): their
    kind and details (``ukind``, ``uinfo``); ``feed_u[i]`` waits for the parents of the
    class-nodes ``feed_k[i]`` (concatenated node index over classes); ``extra_u[j]`` waits
    for unit ``extra_v[j]``; ``rep[k]``: the unit whose end ends class-node k."""

    rep: np.ndarray
    ukind: list[int] = field(default_factory=list)
    uinfo: list[Any] = field(default_factory=list)
    feed_u: list[np.ndarray] = field(default_factory=list)
    feed_k: list[np.ndarray] = field(default_factory=list)
    extra_u: list[int] = field(default_factory=list)
    extra_v: list[int] = field(default_factory=list)

    def new(self, kind: int, info: Any) -> int:
        """A new unit of ``kind``; its index."""
        self.ukind.append(kind)
        self.uinfo.append(info)
        return len(self.ukind) - 1


def _coll_ok(g: RankGraph) -> np.ndarray:
    """Which nodes of ``g`` have a collective type that is modelled."""
    return np.isin(g.comm_type, list(COLL_OPS))


def _process_groups(trace: ChakraTrace, groups: dict[str, list[int]] | None,
                    members_of: list[np.ndarray]) -> dict[str, np.ndarray]:
    """Every process group of the trace (by name, sorted) and its member ranks: as listed
    in ``groups`` (comm_groups), else the ranks that run collectives on it. SpecError for
    a group missing from a given list, a rank out of range, a user not a member."""
    P = "workload"
    R = trace.n_ranks
    graphs = trace.graphs
    names = sorted({nm for g in graphs for nm in g.pg_names})
    users: dict[str, set[int]] = {nm: set() for nm in names}
    for c, g in enumerate(graphs):
        used = np.unique(g.pg[(g.ntype == COLL) & (g.pg >= 0)])
        for k in used:
            users[g.pg_names[int(k)]].update(members_of[c].tolist())
    gmembers: dict[str, np.ndarray] = {}
    for nm in names:
        if groups is not None and nm in groups:
            arr = np.array(sorted(set(groups[nm])), dtype=np.int64)
        elif groups is not None and users[nm]:
            raise SpecError(Problem(f"{P}.comm_groups", f"process group {nm!r} of the trace "
                                    "is not listed; allowed: every pg_name the trace uses"))
        else:
            arr = np.array(sorted(users[nm]), dtype=np.int64)
        if len(arr) and (arr.min() < 0 or arr.max() >= R):
            raise SpecError(Problem(f"{P}.ranks", f"process group {nm!r} names rank "
                                    f"{int(arr.max())} but the placement has {R} ranks; "
                                    f"allowed: ranks 0..{R - 1}"))
        stray = sorted(users[nm] - set(arr.tolist()))
        if stray:
            raise SpecError(Problem(f"{P}.comm_groups", f"rank {stray[0]} runs collectives "
                                    f"on group {nm!r} but is not a member"))
        gmembers[nm] = arr
    return gmembers


def _add_local_units(units: _Units, graphs: list[RankGraph], off: np.ndarray,
                     gpu_tflops: float | None) -> None:
    """One unit per node that is not communication (vectorised per class): compute nodes
    take their duration in ns (from ``num_ops`` at ``gpu_tflops`` when given and known,
    else the traced duration), the others none."""
    for c, g in enumerate(graphs):
        t = g.ntype
        is_local = ~((t == COLL) & _coll_ok(g)) & ~((t == SEND) & (g.dst >= 0)) \
            & ~((t == RECV) & (g.src >= 0))
        pos = np.flatnonzero(is_local)
        if not len(pos):
            continue
        if gpu_tflops:
            d_ns = np.where(g.num_ops > 0, g.num_ops / (gpu_tflops * 1e3),
                            g.duration_us * 1e3)
        else:
            d_ns = g.duration_us * 1e3
        d_ns = np.where(t == COMP, d_ns, 0.0)
        first = len(units.ukind)
        units.ukind.extend([_LOCAL] * len(pos))
        units.uinfo.extend(zip([c] * len(pos), d_ns[pos].tolist(), strict=True))
        ids = np.arange(first, first + len(pos), dtype=np.int64)
        units.rep[off[c] + pos] = ids
        units.feed_u.append(ids)
        units.feed_k.append(off[c] + pos)


def _add_coll_units_all(units: _Units, trace: ChakraTrace, gmembers: dict[str, np.ndarray],
                        off: np.ndarray) -> None:
    """Collectives: the k-th of group G on each member rank is one unit; then those with
    no process group, over the whole trace."""
    graphs = trace.graphs
    for nm, mem in gmembers.items():
        if not len(mem):
            continue
        seqs: dict[int, np.ndarray] = {}
        for c in np.unique(trace.rank_class[mem]):
            g = graphs[c]
            if nm not in g.pg_names:
                seqs[int(c)] = np.zeros(0, dtype=np.int64)
                continue
            gi = g.pg_names.index(nm)
            seqs[int(c)] = np.flatnonzero((g.ntype == COLL) & (g.pg == gi) & _coll_ok(g))
        _add_coll_units(nm, mem, seqs, graphs, off, trace.rank_class, units.new, units.rep,
                        units.feed_u, units.feed_k)
    world = np.arange(trace.n_ranks, dtype=np.int64)
    seqs = {c: np.flatnonzero((g.ntype == COLL) & (g.pg < 0) & _coll_ok(g))
            for c, g in enumerate(graphs)}
    if any(len(s) for s in seqs.values()):
        _add_coll_units("(world)", world, seqs, graphs, off, trace.rank_class, units.new,
                        units.rep, units.feed_u, units.feed_k)


def _add_p2p_units(units: _Units, trace: ChakraTrace, members_of: list[np.ndarray],
                   off: np.ndarray) -> int:
    """Point to point: one unit per send class-node; each receive joins the sends it
    matches (by source, destination and tag, in order). Returns the sends counted per
    rank. SpecError for a peer out of range or a send or receive without its match."""
    P = "workload"
    R = trace.n_ranks
    graphs = trace.graphs
    sends: dict[tuple[int, int, int], list[int]] = {}
    n_p2p = 0
    for c, g in enumerate(graphs):
        for i in np.flatnonzero((g.ntype == SEND) & (g.dst >= 0)).tolist():
            d = int(g.dst[i])
            if d >= R:
                raise SpecError(Problem(f"{P}.ranks", f"rank {int(members_of[c][0])} sends to "
                                        f"rank {d} but the placement has {R} ranks; allowed: "
                                        f"ranks >= {d + 1}"))
            u = units.new(_SEND, (c, i))
            units.rep[off[c] + i] = u
            units.feed_u.append(np.array([u]))
            units.feed_k.append(np.array([off[c] + i]))
            for r in members_of[c].tolist():
                sends.setdefault((r, d, int(g.tag[i])), []).append(u)
                n_p2p += 1
    used = _match_receives(units, trace, members_of, off, sends)
    for key, lst in sends.items():
        if used.get(key, 0) < len(lst):
            raise SpecError(Problem(f"{P}.chakra", f"rank {key[0]} sends to rank {key[1]} "
                                    f"(tag {key[2]}) {len(lst)} time(s), rank {key[1]} "
                                    f"receives {used.get(key, 0)}; allowed: a matching "
                                    "receive for every send"))
    return n_p2p


def _match_receives(units: _Units, trace: ChakraTrace, members_of: list[np.ndarray],
                    off: np.ndarray, sends: dict[tuple[int, int, int], list[int]]
                    ) -> dict[tuple[int, int, int], int]:
    """Each receive class-node waits for the send units it matches on its member ranks
    (a join unit when they differ). Returns how many sends of each (source, destination,
    tag) were matched."""
    P = "workload"
    R = trace.n_ranks
    used: dict[tuple[int, int, int], int] = {}
    for c, g in enumerate(trace.graphs):
        for i in np.flatnonzero((g.ntype == RECV) & (g.src >= 0)).tolist():
            s = int(g.src[i])
            if s >= R:
                raise SpecError(Problem(f"{P}.ranks", f"rank {int(members_of[c][0])} receives "
                                        f"from rank {s} but the placement has {R} ranks; "
                                        f"allowed: ranks >= {s + 1}"))
            matched: list[int] = []
            for r in members_of[c].tolist():
                key = (s, r, int(g.tag[i]))
                k = used.get(key, 0)
                lst = sends.get(key, [])
                if k >= len(lst):
                    raise SpecError(Problem(f"{P}.chakra", f"rank {r} receives from rank {s} "
                                            f"(tag {key[2]}) more often than rank {s} sends "
                                            "to it; allowed: a matching send for every "
                                            "receive"))
                used[key] = k + 1
                matched.append(lst[k])
            uniq = sorted(set(matched))
            for u in uniq:
                units.feed_u.append(np.array([u]))
                units.feed_k.append(np.array([off[c] + i]))
            if len(uniq) == 1:
                units.rep[off[c] + i] = uniq[0]
            else:
                j = units.new(_JOIN, None)
                units.rep[off[c] + i] = j
                units.extra_u.extend([j] * len(uniq))
                units.extra_v.extend(uniq)
    return used


def _unit_edges(units: _Units, graphs: list[RankGraph], off: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray]:
    """The edges unit ``eu`` waits for unit ``ev``, without self-loops or duplicates,
    sorted by ``eu`` then ``ev``."""
    U = len(units.ukind)
    rep = units.rep
    fu = np.concatenate(units.feed_u) if units.feed_u else np.zeros(0, np.int64)
    fk = np.concatenate(units.feed_k) if units.feed_k else np.zeros(0, np.int64)
    cls = np.searchsorted(off, fk, side="right") - 1
    pos = fk - off[cls]
    eu_parts = [np.asarray(units.extra_u, dtype=np.int64)]
    ev_parts = [np.asarray(units.extra_v, dtype=np.int64)]
    for c, g in enumerate(graphs):
        sel = cls == c
        if not sel.any():
            continue
        p, u = pos[sel], fu[sel]
        cnt = g.dep_ptr[p + 1] - g.dep_ptr[p]
        starts = np.repeat(g.dep_ptr[p], cnt)
        inner = np.arange(int(cnt.sum())) - np.repeat(np.cumsum(cnt) - cnt, cnt)
        parents = g.dep_idx[starts + inner]
        eu_parts.append(np.repeat(u, cnt))
        ev_parts.append(rep[off[c] + parents])
    eu = np.concatenate(eu_parts)
    ev = np.concatenate(ev_parts)
    keep = eu != ev
    pair = np.unique(eu[keep] * U + ev[keep])
    return pair // U, pair % U


def _emit_stages(b: Any, units: _Units, order: np.ndarray, eu: np.ndarray, ev: np.ndarray,
                 graphs: list[RankGraph], members_of: list[np.ndarray], gpus: np.ndarray,
                 host: np.ndarray, local: np.ndarray, channels: int, name: str
                 ) -> tuple[np.ndarray, int]:
    """Add every unit to ``b`` in topological ``order``, after the stages of the units it
    waits for: compute (ns) or a zero-time step, a join, a collective or a send. Returns
    each unit's last stage and how many collectives (sends included) were added."""
    from aifabric.workload.collectives import add_collective

    U = len(units.ukind)
    ukind, uinfo = units.ukind, units.uinfo
    dptr = np.zeros(U + 1, dtype=np.int64)
    np.cumsum(np.bincount(eu, minlength=U), out=dptr[1:])  # eu sorted: CSR of waits
    stage_of = np.full(U, -1, dtype=np.int64)
    n_coll = 0
    for u in order.tolist():
        deps = stage_of[ev[dptr[u]:dptr[u + 1]]]
        kind = ukind[u]
        if kind == _LOCAL:
            c, d = uinfo[u]
            st = (b.compute(d, deps=deps, label=f"{name} compute")
                  if d > 0 else b.barrier(deps, label=f"{name} step"))
        elif kind == _JOIN:
            st = b.barrier(deps, label=f"{name} recv")
        elif kind == _COLL:
            nm, k, op, size, ranks = uinfo[u]
            if op is None or size <= 0 or len(ranks) < 2:
                st = b.barrier(deps, label=f"{name} {_label(nm)} #{k} barrier")
            else:
                g_ = gpus[ranks]
                st = add_collective(b, op, g_, float(size), channels=channels,
                                    host=host[ranks], local=local[ranks],
                                    deps=deps, name=f"{name} {op} {_label(nm)} #{k}")
                n_coll += 1
        else:  # _SEND
            c, i = uinfo[u]
            st, added = _emit_send(b, graphs[c], i, members_of[c], gpus, deps, name)
            n_coll += added
        stage_of[u] = st
    return stage_of, n_coll


def _emit_send(b: Any, g: RankGraph, i: int, srcs: np.ndarray, gpus: np.ndarray,
               deps: np.ndarray, name: str) -> tuple[int, int]:
    """Send class-node ``i`` of ``g`` from each rank of ``srcs`` as one p2p collective
    (a zero-time step when empty or to itself). Returns its last stage and 1 if a
    collective was added, else 0."""
    from aifabric.workload.collectives import add_collective

    d = int(g.dst[i])
    size = float(g.comm_size[i])
    if size <= 0 or (len(srcs) == 1 and int(srcs[0]) == d):
        return b.barrier(deps, label=f"{name} send"), 0
    st = add_collective(b, "p2p", gpus[srcs], size,
                        peers=np.full(len(srcs), gpus[d]), deps=deps,
                        name=f"{name} send {int(srcs[0])}->{d} tag {int(g.tag[i])}")
    # a send involves its receiver too: the results' "GPUs" counts both ends
    # (busbw stays algbw, as nccl-tests' sendrecv)
    ends = len(np.unique(np.append(gpus[srcs], gpus[d])))
    b.collectives[-1] = replace(b.collectives[-1], n_gpus=ends)
    return st, 1


def _check_rows(ukind: list[int], uinfo: list[Any], n_p2p: int, channels: int, sim: str,
                qps: int) -> None:
    """Refuse (SpecError) a trace whose collectives make more transfers than memory holds
    (the same estimate the scenario guard uses for collectives), before compiling them."""
    from aifabric.guard import WorkloadEstimate
    from aifabric.guard import refuse as _refuse
    from aifabric.workload.collectives.rows import collective_rows

    rows = n_p2p
    for kind, info in zip(ukind, uinfo, strict=True):
        if kind == _COLL and info[2] is not None and info[3] > 0:
            rows += collective_rows(info[2], None, len(info[4]), channels=channels,
                                    size_bytes=info[3])
    est = WorkloadEstimate(rows=rows, qps=max(1, qps), sim=sim, biggest="workload.chakra")
    _refuse("workload.chakra", f"the trace's collectives and transfers would make about "
            f"{rows:,} transfers x {est.qps} QP(s) on the {sim} simulator", est.peak_bytes,
            None)


def _add_coll_units(nm: str, mem: np.ndarray, seqs: dict[int, np.ndarray],
                    graphs: list[RankGraph], off: np.ndarray, rank_class: np.ndarray,
                    new_unit: Callable[[int, Any], int], rep: np.ndarray,
                    feed_u: list[np.ndarray], feed_k: list[np.ndarray]) -> None:
    """One unit per collective instance of group ``nm``; every member class must run the
    same sequence (type and size)."""
    classes = sorted(seqs)
    ref = classes[0]
    gr = graphs[ref]
    rref = int(mem[rank_class[mem] == ref][0])
    for c in classes[1:]:
        g = graphs[c]
        r = int(mem[rank_class[mem] == c][0])
        a, b_ = seqs[ref], seqs[c]
        if len(a) != len(b_):
            raise SpecError(Problem("workload.chakra", f"group {nm!r}: rank {r} runs "
                                    f"{len(b_)} collectives, rank {rref} runs {len(a)}; "
                                    "allowed: the same collectives on every member"))
        bad = (gr.comm_type[a] != g.comm_type[b_]) | (gr.comm_size[a] != g.comm_size[b_])
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            raise SpecError(Problem("workload.chakra", f"group {nm!r}: collective #{k} is "
                                    f"{COMM_TYPES[gr.comm_type[a[k]]]} of "
                                    f"{int(gr.comm_size[a[k]])} bytes on rank {rref} but "
                                    f"{COMM_TYPES[g.comm_type[b_[k]]]} of "
                                    f"{int(g.comm_size[b_[k]])} bytes on rank {r}; allowed: "
                                    "the same collectives on every member"))
    for k, i in enumerate(seqs[ref].tolist()):
        op = COLL_OPS[int(gr.comm_type[i])]
        u = new_unit(_COLL, (nm, k, op, int(gr.comm_size[i]), mem))
        ks = np.array([off[c] + seqs[c][k] for c in classes], dtype=np.int64)
        rep[ks] = u
        feed_u.append(np.full(len(ks), u, dtype=np.int64))
        feed_k.append(ks)


def _topo(U: int, eu: np.ndarray, ev: np.ndarray) -> np.ndarray:
    """Units in an order where each comes after those it waits for (smallest id first
    among the ready ones: deterministic); SpecError on a cycle (a deadlocked trace)."""
    indeg = np.bincount(eu, minlength=U).astype(np.int64)
    order_v = np.argsort(ev, kind="stable")
    sptr = np.zeros(U + 1, dtype=np.int64)
    np.cumsum(np.bincount(ev, minlength=U), out=sptr[1:])
    succ = eu[order_v]
    out = _kahn(indeg, sptr, succ)
    if len(out) < U:
        raise SpecError(Problem("workload.chakra", f"the trace's dependencies form a cycle "
                                f"({U - len(out)} of {U} steps can never start: a deadlock "
                                "across ranks, e.g. a receive that waits for its own "
                                "send); allowed: an acyclic trace"))
    return out


def _kahn(indeg: np.ndarray, sptr: np.ndarray, succ: np.ndarray) -> np.ndarray:
    deg = indeg.tolist()
    sp = sptr.tolist()
    sc = succ.tolist()
    heap = [u for u, d in enumerate(deg) if d == 0]
    heapq.heapify(heap)
    out: list[int] = []
    push, pop = heapq.heappush, heapq.heappop
    while heap:
        u = pop(heap)
        out.append(u)
        for j in range(sp[u], sp[u + 1]):
            v = sc[j]
            deg[v] -= 1
            if deg[v] == 0:
                push(heap, v)
    return np.asarray(out, dtype=np.int64)
