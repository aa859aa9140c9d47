"""NCCL's choice of algorithm and protocol over two dimensions, as a cost model.

A collective on D domains of N GPUs costs ``latency(algorithm, protocol) + bandwidth
time / protocol efficiency``, as NCCL's tuner (``src/graph/tuning.cc``) models it:

* the **bandwidth time** is the closed form of the algorithm on the two dimensions
  (:func:`bandwidth_ns`): bytes on each GPU's busiest link over that link's rate, with
  the scale-up rate U (NVLink per GPU, point to point), the NVLS rate (the share of U
  that in-switch reduction sustains) and the scale-out rate R (NIC per GPU);
* the **latency** follows NCCL's table: a base latency per algorithm and protocol plus a
  hardware latency per step, NVLink for steps inside a domain and the network for steps
  between domains (:data:`BASE_LAT_US`, :data:`HW_LAT_US`);
* the **protocols**: LL moves 8 bytes of data with 8 bytes of flags (half the rate),
  LL128 120 of 128 bytes, Simple the full rate with a higher latency. NVLS, NVLS tree
  and PAT run Simple only.

:func:`choose` returns the cheapest enabled pair for one message size; a user pins an
algorithm or protocol by passing it. The flow simulator (:mod:`aifabric.sim.twodim`)
replaces the bandwidth time with a simulation of the same transfers.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from aifabric.workload.collectives.tree import binary_tree
from aifabric.workload.collectives.twodim import ALGORITHMS_2D, busbw_factor_2d, pat_steps

__all__ = ["BASE_LAT_US", "HW_LAT_US", "PROTOCOLS", "PROTO_EFFICIENCY", "Choice", "TwoDim",
           "bandwidth_ns", "choose", "enabled", "latency_us", "tree_load"]

PROTOCOLS = ("LL", "LL128", "Simple")

#: fraction of the link rate each protocol carries as data (NCCL: LL 1/2 for rings and
#: 1/3.8 for trees, LL128 120/128, Simple all; trees lose 8% more in NCCL's model)
PROTO_EFFICIENCY: dict[str, dict[str, float]] = {
    "ring": {"LL": 0.5, "LL128": 120 / 128, "Simple": 1.0},
    "hierarchical": {"LL": 0.5, "LL128": 120 / 128, "Simple": 1.0},
    "tree": {"LL": 0.92 / 3.8, "LL128": 0.92 * 120 / 128, "Simple": 0.92},
    "nvls": {"Simple": 1.0},
    "nvls_tree": {"Simple": 1.0},
    "pat": {"Simple": 1.0},
}

#: base latency in microseconds per algorithm and protocol (NCCL's baseLat; PAT's 8 us)
BASE_LAT_US: dict[str, dict[str, float]] = {
    "ring": {"LL": 6.6, "LL128": 14.0, "Simple": 8.4},
    "hierarchical": {"LL": 6.6, "LL128": 14.0, "Simple": 8.4},
    "tree": {"LL": 6.8, "LL128": 14.0, "Simple": 8.4},
    "nvls": {"Simple": 0.0},
    "nvls_tree": {"Simple": 0.0},
    "pat": {"Simple": 8.0},
}

#: hardware latency in microseconds of one step: NVLink (inside a domain) and network
#: (between domains), per algorithm and protocol (NCCL's hwLat)
HW_LAT_US: dict[str, dict[str, dict[str, float]]] = {
    "nvlink": {
        "ring": {"LL": 0.6, "LL128": 1.9, "Simple": 3.4},
        "hierarchical": {"LL": 0.6, "LL128": 1.9, "Simple": 3.4},
        "tree": {"LL": 0.6, "LL128": 1.25, "Simple": 4.0},
        "nvls": {"Simple": 25.0}, "nvls_tree": {"Simple": 25.0}, "pat": {"Simple": 3.4},
    },
    "net": {
        "ring": {"LL": 2.7, "LL128": 4.0, "Simple": 14.0},
        "hierarchical": {"LL": 2.7, "LL128": 4.0, "Simple": 14.0},
        "tree": {"LL": 5.0, "LL128": 8.5, "Simple": 14.0},
        "nvls": {"Simple": 18.0}, "nvls_tree": {"Simple": 14.0}, "pat": {"Simple": 14.0},
    },
}


@dataclass(frozen=True)
class TwoDim:
    """The two dimensions a collective crosses: D domains of N GPUs.

    Rates are Gbit/s per GPU per direction: ``scaleup_gbps`` NVLink point to point,
    ``nvls_gbps`` what NVLS traffic sustains (0: the switch does not reduce),
    ``scaleout_gbps`` the NIC; ``channels`` the rings NCCL runs in parallel.
    """

    domains: int
    per_domain: int
    scaleup_gbps: float
    scaleout_gbps: float
    nvls_gbps: float = 0.0
    channels: int = 1

    @property
    def n(self) -> int:
        return self.domains * self.per_domain


def enabled(op: str, algorithm: str, p: TwoDim) -> bool:
    """Whether ``algorithm`` can run ``op`` on ``p`` (NVLS needs a reducing switch; plain
    NVLS stays inside one domain, NVLS tree spans several)."""
    if algorithm not in ALGORITHMS_2D.get(op, ()):
        return False
    if algorithm == "nvls":
        return p.nvls_gbps > 0 and p.domains == 1
    if algorithm == "nvls_tree":
        return p.nvls_gbps > 0 and p.domains > 1
    if algorithm == "hierarchical":
        return p.domains > 1 and p.per_domain > 1
    return True


def tree_load(n: int, per_domain: int, k: int = 1) -> list[tuple[int, int, int]]:
    """The pipelined double binary tree on n domain-major ranks, step by step: a list of
    ``(steps, su, so)``, ``steps`` consecutive pipeline steps in which the busiest GPU
    moves ``su`` chunks over NVLink and ``so`` over its NIC (sent or received, whichever
    is more), for ``k`` chunks per tree.

    Chunk c crosses the up edge of level L at step c + (depth - L) and the down edge at
    step c + depth + L - 1 (the builder's schedule); the active edges change only where a
    level's window opens or closes, so at most 4 x depth + 1 intervals are counted, each
    in O(n)."""
    par, dep = binary_tree(n)
    if n < 2:
        return []
    depth = int(dep.max())
    child = np.flatnonzero(par >= 0)
    lev = dep[child]
    r = np.arange(n)
    starts = np.concatenate([depth - lev, depth + lev - 1])
    total = k + 2 * depth - 1
    bounds = np.unique(np.clip(np.concatenate([starts, starts + k, [0, total]]), 0, total))
    out = []
    for lo, hi in itertools.pairwise(bounds):
        up = (depth - lev <= lo) & (lo < depth - lev + k)
        dn = (depth + lev - 1 <= lo) & (lo < depth + lev - 1 + k)
        load = np.zeros((4, n), dtype=np.int64)  # su send, su recv, so send, so recv
        for pos in (r, r[::-1]):  # tree 2 is tree 1 on the reversed rank list
            for act, a, b in ((up, pos[child], pos[par[child]]),
                              (dn, pos[par[child]], pos[child])):
                src, dst = a[act], b[act]
                same = (src // per_domain) == (dst // per_domain)
                load[0] += np.bincount(src[same], minlength=n)
                load[1] += np.bincount(dst[same], minlength=n)
                load[2] += np.bincount(src[~same], minlength=n)
                load[3] += np.bincount(dst[~same], minlength=n)
        m = load.max(axis=1)
        out.append((int(hi - lo), int(max(m[0], m[1])), int(max(m[2], m[3]))))
    return out


def _tree_ns(n: int, per_domain: int, size: float, chunk_bytes: float, U: float,
             R: float) -> float:
    """Bandwidth time of the pipelined double binary tree AllReduce of ``size``."""
    half = size / 2
    k = max(1, math.ceil(half / chunk_bytes))
    chunk = half / k
    return sum(steps * max(su * chunk / U, so * chunk / R if so else 0.0)
               for steps, su, so in tree_load(n, per_domain, k))


def bandwidth_ns(op: str, algorithm: str, p: TwoDim, size_bytes: float, *,
                 chunk_bytes: float = 4 << 20, pipeline: int = 1) -> float:
    """The bandwidth time (ns, no latency) of one collective by the closed form of
    ``algorithm`` on the two dimensions; ValueError when it cannot run. ``pipeline`` K
    > 1: ``hierarchical``'s three phases pipelined over K chunks, ``max(rs/K + inter +
    ag/K, rs + ag)``: the scale-out steps of the chunks back to back between the first
    chunk's reduce-scatter and the last chunk's all-gather, or the NVLink busy with
    both intra-domain phases the whole time, whichever is longer."""
    if not enabled(op, algorithm, p):
        raise ValueError(f"{algorithm} cannot run {op} on {p.domains} domain(s) of "
                         f"{p.per_domain} GPUs" + ("" if p.nvls_gbps else " without NVLS"))
    D, N, n = p.domains, p.per_domain, p.n
    if n < 2:
        return 0.0
    U, R = p.scaleup_gbps / 8, p.scaleout_gbps / 8  # bytes per ns
    V = min(p.nvls_gbps, p.scaleup_gbps) / 8  # NVLS traffic also crosses the NVLink
    S = float(size_bytes)
    if algorithm == "ring":
        C = max(1, p.channels)
        steps = 2 * (n - 1) if op == "allreduce" else n - 1
        chunk = S / (n * C)  # one channel's block per step
        if D == 1:
            return steps * C * chunk / U
        # channel c leaves domain h from local GPU (c - h - 1) mod N: a GPU leaves in
        # C // N or ceil(C / N) channels and sends the others over NVLink
        return steps * max((C - C // N) * chunk / U, math.ceil(C / N) * chunk / R)
    if algorithm == "tree":
        return _tree_ns(n, N, S, chunk_bytes, U, R)
    if algorithm == "nvls":
        up = {"allreduce": S + S / N, "reduce_scatter": S, "allgather": S}[op]
        return up / V
    if algorithm == "nvls_tree":
        # NVLS reduce-scatter, one tree per rail across the domains on S/N, NVLS all-gather
        return S / V + _tree_ns(D, 1, S / N, chunk_bytes, U, R) + S / V
    if algorithm == "hierarchical":
        intra = 2 * (N - 1) * (S / N) / U
        inter = 2 * (D - 1) * (S / N / D) / R
        if pipeline > 1 and D > 1 and N > 1:
            return max(intra / pipeline + inter, intra)
        return intra + inter
    # pat: every step of a multi-domain run has senders crossing domains
    slow = min(U, R) if D > 1 else U
    return sum(blocks * S / n for _, blocks in pat_steps(n)) / slow


def latency_us(op: str, algorithm: str, protocol: str, p: TwoDim) -> float:
    """NCCL's latency model for the pair (us)."""
    D, N, n = p.domains, p.per_domain, p.n
    base = BASE_LAT_US[algorithm][protocol]
    intra = HW_LAT_US["nvlink"][algorithm][protocol]
    inter = HW_LAT_US["net"][algorithm][protocol]
    log_d = math.log2(D) if D > 1 else 0.0
    if algorithm == "hierarchical":  # 2(N-1) steps inside a domain, 2(D-1) across
        return base + 2 * (N - 1) * intra + 2 * (D - 1) * inter
    if algorithm == "ring":
        nsteps = 2 * (n - 1) if op == "allreduce" else n - 1
        ninter = (2 * (D - 1) if op == "allreduce" else D - 1) if D > 1 else 0
        if D > 1:  # the network's per-step post overhead (1 us, 3x for Simple)
            intra = max(intra, 3.0 if protocol == "Simple" else 1.0)
        return base + (nsteps - ninter) * intra + ninter * inter
    if algorithm == "tree":
        return base + 2 * ((N - 1) * intra + log_d * inter)
    if algorithm == "nvls":
        return intra
    if algorithm == "nvls_tree":
        return intra + 2 * log_d * inter
    return base + math.log2(max(2, n)) * (inter / 3.5 if D > 1 else intra)  # pat


@dataclass(frozen=True)
class Choice:
    """One (algorithm, protocol) priced for one size: time in ns and busbw in GB/s."""

    algorithm: str
    protocol: str
    time_ns: float
    latency_ns: float
    algbw_gbs: float
    busbw_gbs: float


def price(op: str, algorithm: str, protocol: str, p: TwoDim, size_bytes: float,
          bandwidth_time_ns: float | None = None, *, pipeline: int = 1) -> Choice:
    """The cost of one pair; ``bandwidth_time_ns`` replaces the closed form (e.g. by a
    flow simulation of the same transfers)."""
    bw = bandwidth_ns(op, algorithm, p, size_bytes, pipeline=pipeline) \
        if bandwidth_time_ns is None else bandwidth_time_ns
    lat = latency_us(op, algorithm, protocol, p) * 1000.0
    t = lat + bw / PROTO_EFFICIENCY[algorithm][protocol]
    algbw = size_bytes / t if t > 0 else float("inf")  # bytes per ns = GB/s
    return Choice(algorithm, protocol, t, lat, algbw, algbw * busbw_factor_2d(op, p.n))


def choose(op: str, p: TwoDim, size_bytes: float, *, algorithm: str | None = None,
           protocol: str | None = None, pipeline: int = 1) -> tuple[Choice, list[Choice]]:
    """The cheapest enabled (algorithm, protocol) for ``size_bytes`` and every candidate
    priced, cheapest first; ``algorithm``/``protocol`` pin one (ValueError if it cannot
    run); ``pipeline``: see :func:`bandwidth_ns`."""
    algs = [algorithm] if algorithm else list(ALGORITHMS_2D.get(op, ()))
    cands: list[Choice] = []
    for a in algs:
        if not enabled(op, a, p):
            if algorithm:
                bandwidth_ns(op, a, p, size_bytes)  # raises with the reason
            continue
        protos = [protocol] if protocol else list(PROTO_EFFICIENCY[a])
        for pr in protos:
            if pr not in PROTO_EFFICIENCY[a]:
                if algorithm and protocol:
                    raise ValueError(f"{a} runs {', '.join(PROTO_EFFICIENCY[a])} only, "
                                     f"not {pr}")
                continue
            cands.append(price(op, a, pr, p, size_bytes, pipeline=pipeline))
    if not cands:
        raise ValueError(f"no algorithm runs {op}" + (f" with protocol {protocol}"
                                                      if protocol else ""))
    cands.sort(key=lambda c: (c.time_ns, c.algorithm, c.protocol))
    return cands[0], cands
