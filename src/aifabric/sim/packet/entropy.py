"""NIC-side spraying (``packet.nic.entropy``): the switches' real ECMP hash of a packet
whose entropy value (EV: the UDP source port of RoCEv2, the EV of Ultra Ethernet)
changes packet by packet.

A switch hashes the header fields ``routing.hash_fields`` with ``routing.hash`` (CRC32,
CRC32C, CRC16-CCITT or XOR folding: :mod:`aifabric.routing.hashing`), XORs in its seed's
share and rotates by its hash-bit offset (``seed_mode``), and takes member ``hash mod n``
(or through its member table, ``selection: table``). Each of these hashes is affine over
GF(2) in the key bits, so for keys of one length ``hash(k1 ^ k2) = hash(k1) ^ hash(k2) ^
hash(0)``: the hash of a QP's header carrying EV ``v`` is ``base[q] ^ delta[v]`` with
``base[q]`` the hash of its header with source port 0 and ``delta[v]`` the share of the
source port ``v`` (one table of 65,536 entries for every QP). The compiled loop
(:func:`aifabric.sim.packet.kernel.ev_pick`) does the XOR, the switch's seed and offset
and the member choice per packet; this module builds the tables in numpy and predicts
the path of an EV in Python (:func:`ev_path`, for tests and reports).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from aifabric.routing.hashing import HASH_WIDTH, hash_keys, key_bytes, switch_seeds

__all__ = ["ROCE_DPORT", "UDP", "EntropyHash", "entropy_value", "ev_path"]

UDP = 17
ROCE_DPORT = 4791


@dataclass
class EntropyHash:
    """What the switches hash and how they choose (``routing``'s hash settings), and every
    QP's header: ``node_xor``/``node_offset`` per node, ``delta`` per UDP source port, and
    per QP (added with :meth:`add`) the hash of its header with source port 0
    (``base``) and its own source port (``sport``)."""

    function: str
    fields: tuple[str, ...]
    node_xor: np.ndarray
    node_offset: np.ndarray
    selection: str
    table_size: int
    delta: np.ndarray

    @classmethod
    def build(cls, n_nodes: int, routing: Any = None) -> EntropyHash:
        """The tables of ``routing`` (a :class:`~aifabric.spec.models.Routing`; None: its
        defaults) for a network of ``n_nodes`` nodes."""
        from aifabric.spec.models import Routing

        pol = routing if routing is not None else Routing()
        fields = tuple(pol.hash_fields)
        seeds, offsets = switch_seeds(n_nodes, pol.seed, pol.seed_mode, pol.hash)
        z1 = np.zeros((1, _key_len(fields)), dtype=np.uint8)
        h0 = hash_keys(z1, pol.hash, 0)[0]
        uniq, inv = np.unique(seeds, return_inverse=True)
        g = hash_keys(np.repeat(z1, len(uniq), axis=0), pol.hash, uniq) ^ h0
        if "src_port" in fields:
            v = np.arange(1 << 16, dtype=np.int64)
            zero = np.zeros(len(v), dtype=np.int64)
            cols = {"src_ip": zero, "dst_ip": zero, "protocol": zero, "src_port": v,
                    "dst_port": zero}
            delta = hash_keys(key_bytes(cols, fields), pol.hash, 0) ^ h0
        else:  # the switches do not hash the source port: an EV moves nothing
            delta = np.zeros(1 << 16, dtype=np.uint32)
        return cls(pol.hash, fields, g[inv].astype(np.uint32), offsets.astype(np.uint32),
                   pol.selection, int(pol.table_size), delta.astype(np.uint32))

    @property
    def width(self) -> int:
        return HASH_WIDTH[self.function]

    def base(self, src_ip: np.ndarray, dst_ip: np.ndarray, sport: np.ndarray,
             proto: np.ndarray | None = None, dport: np.ndarray | None = None) -> np.ndarray:
        """The hash (seed 0) of each QP's header with UDP source port 0."""
        n = len(src_ip)
        cols = {"src_ip": np.asarray(src_ip), "dst_ip": np.asarray(dst_ip),
                "protocol": np.full(n, UDP) if proto is None else np.asarray(proto),
                "src_port": np.zeros(n, dtype=np.int64),
                "dst_port": np.full(n, ROCE_DPORT) if dport is None else np.asarray(dport)}
        del sport
        return hash_keys(key_bytes(cols, self.fields), self.function, 0)

    def switch_hash(self, base: int | np.ndarray, ev: int | np.ndarray,
                    node: int | np.ndarray) -> np.ndarray:
        """The hash switch ``node`` computes for a QP of ``base`` carrying ``ev`` (the
        routing module's :meth:`~aifabric.routing.hashing.SwitchHasher.at`)."""
        h = (np.asarray(base, dtype=np.uint32) ^ self.delta[np.asarray(ev) & 0xFFFF]
             ^ self.node_xor[node]).astype(np.uint64)
        w = np.uint64(self.width)
        o = np.asarray(self.node_offset[node], dtype=np.uint64) % w
        mask = np.uint64((1 << self.width) - 1)
        return (((h >> o) | (h << ((w - o) % w))) & mask).astype(np.uint32)

    def member(self, h: np.ndarray, n: np.ndarray | int) -> np.ndarray:
        """The member index of hash ``h`` in a group of ``n``."""
        h = np.asarray(h, dtype=np.int64)
        n = np.maximum(np.asarray(n, dtype=np.int64), 1)
        return (h % self.table_size) % n if self.selection == "table" else h % n

    def kernel_tables(self) -> np.ndarray:
        """``delta``, ``node_xor``, ``node_offset`` one after another (int64, for LBT)."""
        return np.concatenate([self.delta.astype(np.int64), self.node_xor.astype(np.int64),
                               self.node_offset.astype(np.int64)])


def _key_len(fields: tuple[str, ...]) -> int:
    from aifabric.routing.hashing import FIELD_BYTES

    return sum(FIELD_BYTES[f] for f in fields)


def entropy_value(sport: int, i: int) -> int:
    """The ``i``-th entropy value of a QP whose own UDP source port is ``sport``."""
    return (int(sport) + int(i)) & 0xFFFF


def ev_path(eh: EntropyHash, lb: Any, base: int, ev: int, first_node: int, dest: int,
            arc_dst: np.ndarray, max_hops: int = 64) -> list[int]:
    """The arcs a data packet of EV ``ev`` takes from switch ``first_node`` to NIC
    ``dest`` through the groups ``lb`` (:class:`~aifabric.sim.packet.lb.LbGroups`), as
    the compiled loop chooses them (a prediction in Python, one packet)."""
    col = int(np.searchsorted(lb.dests, dest))
    node = int(first_node)
    out: list[int] = []
    for _ in range(max_hops):  # the hops of one path
        row = int(lb.node_row[node])
        if node == dest or row < 0:
            break
        g = int(lb.group[row, col])
        if g < 0:
            break
        lo, hi = int(lb.ptr[g]), int(lb.ptr[g + 1])
        h = eh.switch_hash(base, ev, node)
        a = int(lb.arcs[lo + int(eh.member(h, hi - lo))])
        out.append(a)
        node = int(arc_dst[a])
    return out
