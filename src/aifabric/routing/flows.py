"""Flows as RoCEv2 sees them: one flow per queue pair (QP).

A *connection* moves ``size_bytes`` from one GPU to another; NCCL opens
``qps_per_connection`` QPs for it, and each QP is a flow of its own with its own UDP
source port (the entropy a switch hashes), so a connection's bytes are split over its QPs.
The 5-tuple is (source IP, destination IP, protocol 17, UDP source port, UDP destination
port 4791); IPs are the NICs' /32s from the Fabric (the ports of a dual-ToR NIC share it).

Which NIC carries a flow: the source host's NIC on the *destination's* rail when the
fabric is rail-wired (the data first crosses NVLink to the GPU of that rail, as NCCL's
PXN does), else the source GPU's own NIC. A dual-port NIC puts each QP on one of its
ports, by the Linux bonding layer3+4 hash of the QP's 5-tuple or round-robin over the
NIC's QPs. The port a flow
*arrives* on is decided by the network (which ToR delivers it); :func:`route` fills it in.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from aifabric.errors import Problem, SpecError
from aifabric.routing.hashing import _splitmix
from aifabric.routing.hostside import host_side
from aifabric.topology.domain import host_domains
from aifabric.topology.fabric import Fabric, NodeKind

__all__ = ["ROCE_DPORT", "FlowSet", "bond_hash", "group_rank", "make_flows"]

#: UDP destination port of RoCEv2
ROCE_DPORT = 4791
UDP = 17


@dataclass(eq=False)
class FlowSet:
    """Flows, one entry per QP, as parallel numpy arrays.

    Node ids are Fabric node ids; ``src_nic``/``dst_nic`` are NIC *port* nodes (``-1``
    for same-host flows, which stay on NVLink).
    """

    src_gpu: np.ndarray  # int64 node id
    dst_gpu: np.ndarray  # int64 node id
    conn: np.ndarray  # int64: index of the connection the flow belongs to
    qp: np.ndarray  # int32: QP index within its connection
    src_nic: np.ndarray  # int64 NIC port node that sends it
    dst_nic: np.ndarray  # int64 NIC port node that receives it
    src_ip: np.ndarray  # uint32
    dst_ip: np.ndarray  # uint32
    sport: np.ndarray  # int32 UDP source port (per-QP entropy)
    dport: np.ndarray  # int32 UDP destination port (4791)
    proto: np.ndarray  # int32 IP protocol (17)
    size_bytes: np.ndarray  # int64: the connection's bytes split over its QPs

    def __len__(self) -> int:
        return len(self.src_gpu)

    @property
    def n_connections(self) -> int:
        return int(self.conn.max()) + 1 if len(self) else 0

    def columns(self) -> dict[str, np.ndarray]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def replace(self, **changes: Any) -> FlowSet:
        """A copy with some columns replaced."""
        return FlowSet(**{**self.columns(), **changes})

    def take(self, idx: np.ndarray) -> FlowSet:
        """The flows at ``idx`` (a boolean mask or indices)."""
        return FlowSet(**{k: v[idx] for k, v in self.columns().items()})

    @staticmethod
    def concat(parts: list[FlowSet]) -> FlowSet:
        """Flow sets one after another; connection indices are renumbered to stay unique."""
        if not parts:
            return empty_flows()
        offset, conns = 0, []
        for p in parts:
            conns.append(p.conn + offset)
            offset += p.n_connections
        cols = {k: np.concatenate([getattr(p, k) for p in parts]) for k in parts[0].columns()}
        cols["conn"] = np.concatenate(conns)
        return FlowSet(**cols)

    def hash_columns(self) -> dict[str, np.ndarray]:
        """The header fields a switch hashes, by name (see ``hashing.FIELD_BYTES``)."""
        return {"src_ip": self.src_ip, "dst_ip": self.dst_ip, "protocol": self.proto,
                "src_port": self.sport, "dst_port": self.dport}


def empty_flows() -> FlowSet:
    z = np.zeros(0, dtype=np.int64)
    return FlowSet(z, z, z, z.astype(np.int32), z, z, z.astype(np.uint32),
                   z.astype(np.uint32), z.astype(np.int32), z.astype(np.int32),
                   z.astype(np.int32), z)


def group_rank(group: np.ndarray) -> np.ndarray:
    """Rank of each element among the elements of its group, in array order."""
    n = len(group)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    order = np.argsort(group, kind="stable")
    g = group[order]
    start = np.r_[0, np.flatnonzero(g[1:] != g[:-1]) + 1]
    first = np.repeat(start, np.diff(np.r_[start, n]))
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n) - first
    return rank


def bond_hash(src_ip: np.ndarray, dst_ip: np.ndarray, sport: np.ndarray, dport: np.ndarray
              ) -> np.ndarray:
    """The Linux bonding ``layer3+4`` transmit hash of a 5-tuple (what a NIC bond uses to
    put a flow on one of its ports): ports XOR addresses, folded, shifted by one."""
    h = ((sport.astype(np.uint32) << np.uint32(16)) | dport.astype(np.uint32))
    h = h ^ src_ip.astype(np.uint32) ^ dst_ip.astype(np.uint32)
    h ^= h >> np.uint32(16)
    h ^= h >> np.uint32(8)
    return (h >> np.uint32(1)).astype(np.int64)


def _check_gpus(f: Fabric, ids: np.ndarray, name: str) -> None:
    bad = (ids < 0) | (ids >= f.n_nodes)
    ok = ~bad
    bad[ok] = f.nodes.kind[ids[ok]] != NodeKind.GPU
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise SpecError(Problem(name, f"{int(bad.sum())} entries are not GPUs of fabric "
                                f"{f.name!r} (first: index {i}, node {int(ids[i])}); allowed: "
                                "GPU node ids"))


def make_flows(fabric: Fabric, src_gpu: np.ndarray, dst_gpu: np.ndarray,
               size_bytes: np.ndarray | int, *, qps_per_connection: int | None = None,
               nic_port_choice: str | None = None, seed: int = 0) -> FlowSet:
    """The flows of connections ``src_gpu[i] -> dst_gpu[i]`` carrying ``size_bytes[i]``.

    Parameters
    ----------
    fabric : the built Fabric.
    src_gpu, dst_gpu : GPU node ids (``fabric.ids(NodeKind.GPU)``), one per connection.
    size_bytes : bytes per connection (one value for all, or one per connection).
    qps_per_connection : QPs (= flows) per connection; default the spec's
        ``routing.qps_per_connection``.
    nic_port_choice : ``hash`` or ``round_robin`` for multi-port NICs; default the spec's.
    seed : seeds the UDP source ports (the QP entropy) and the NIC's port hash.

    Returns one flow per QP, connection-major (the QPs of connection 0 first).
    """
    f = fabric
    rt = f.spec.routing
    Q = int(qps_per_connection or rt.qps_per_connection)
    choice = nic_port_choice or rt.nic_port_choice
    if Q < 1:
        raise SpecError(Problem("qps_per_connection", f"must be >= 1 (got {Q})"))
    if choice not in ("hash", "round_robin"):
        raise SpecError(Problem("nic_port_choice", f"unknown choice {choice!r}; allowed: "
                                "hash, round_robin"))
    src = np.asarray(src_gpu, dtype=np.int64).reshape(-1)
    dst = np.asarray(dst_gpu, dtype=np.int64).reshape(-1)
    if src.shape != dst.shape:
        raise SpecError(Problem("dst_gpu", f"{len(dst)} destinations for {len(src)} sources"))
    _check_gpus(f, src, "src_gpu")
    _check_gpus(f, dst, "dst_gpu")
    C = len(src)
    size = np.broadcast_to(np.asarray(size_bytes, dtype=np.int64), (C,))
    if (size < 0).any():
        raise SpecError(Problem("size_bytes", "must be >= 0"))
    hs = host_side(f)
    nodes = f.nodes
    conn = np.repeat(np.arange(C, dtype=np.int64), Q)
    qp = np.tile(np.arange(Q, dtype=np.int32), C)
    s, d = src[conn], dst[conn]
    sh, dh = nodes.host[s].astype(np.int64), nodes.host[d].astype(np.int64)
    local = sh == dh
    dom = host_domains(f)
    if dom is not None:  # a domain over several hosts: its GPUs meet on its NVLink
        local |= (dom[sh] == dom[dh]) & (dom[sh] >= 0)
    rail_d = nodes.rail[d].astype(np.int64)
    rail_s = rail_d if hs.pxn else nodes.rail[s].astype(np.int64)
    src_ip = np.where(local, 0, nodes.ip[hs.nic_port[sh, rail_s, 0]]).astype(np.uint32)
    dst_ip = np.where(local, 0, nodes.ip[hs.nic_port[dh, rail_d, 0]]).astype(np.uint32)
    # UDP source port: 0xC000 | 14 bits of entropy per QP (as RoCE NICs derive it)
    with np.errstate(over="ignore"):
        z = _splitmix((conn.astype(np.uint64) * np.uint64(Q) + qp.astype(np.uint64))
                      ^ (src_ip.astype(np.uint64) << np.uint64(32))
                      ^ (dst_ip.astype(np.uint64) * np.uint64(0x9E3779B1))
                      ^ _splitmix(np.array([seed & 0xFFFFFFFFFFFF], dtype=np.uint64)))
    sport = (0xC000 | (z & np.uint64(0x3FFF)).astype(np.int64)).astype(np.int32)
    n = len(conn)
    dport = np.full(n, ROCE_DPORT, dtype=np.int32)
    proto = np.full(n, UDP, dtype=np.int32)
    P = hs.P
    if P == 1:
        port = np.zeros(n, dtype=np.int64)
    elif choice == "round_robin":
        port = group_rank(sh * hs.N + rail_s) % P
    else:
        port = bond_hash(src_ip, dst_ip, sport, dport) % P
    src_nic = np.where(local, -1, hs.nic_port[sh, rail_s, port])
    dst_nic = np.where(local, -1, hs.nic_port[dh, rail_d, 0])
    per = size[conn] // Q + (qp < size[conn] % Q)
    return FlowSet(src_gpu=s, dst_gpu=d, conn=conn, qp=qp, src_nic=src_nic.astype(np.int64),
                   dst_nic=dst_nic.astype(np.int64), src_ip=src_ip, dst_ip=dst_ip,
                   sport=sport, dport=dport, proto=proto, size_bytes=per.astype(np.int64))
