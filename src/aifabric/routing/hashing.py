"""Hashing like a switch ASIC: CRC32, CRC32C, CRC16-CCITT and XOR folding over header
fields, per-switch seeds and hash-bit offsets, and ECMP member selection.

A switch builds a key from the packet's header fields (here the RoCEv2 5-tuple: source
and destination IP, protocol 17, UDP source port = the QP's entropy, UDP destination port
4791), hashes it, and picks a member of the ECMP group either as ``hash mod n`` or through
a fixed-size member table (``table[hash mod T]``, the table filled round-robin with the
members, as Broadcom/Cisco ASICs do). Everything is vectorised over all flows: the CRC is
computed a byte position at a time with a 256-entry table over every key at once.

Seeds. A seed is the CRC's initial register value. Because a CRC is linear over GF(2),
``crc(key, seed) = crc(key, 0) XOR g(seed)`` for keys of one length: a seed alone only
XORs a constant into the hash, and ``hash mod 2^j`` stays correlated between switches.
ASICs therefore also let the operator choose *which* hash bits feed the selection (the
"hash offset"); ``seed_mode: per_switch`` gives every switch its own seed **and** its own
bit offset (a rotation of the hash), which decorrelates successive tiers. With
``seed_mode: same`` every switch computes the identical hash of a packet, so the choice
at one tier fixes part of the choice at the next one (polarization).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = [
    "FIELD_BYTES",
    "HASHES",
    "HASH_WIDTH",
    "SwitchHasher",
    "hash_keys",
    "key_bytes",
    "select_member",
    "switch_seeds",
]

#: header fields a switch can hash, with their size on the wire (bytes, network order)
FIELD_BYTES: dict[str, int] = {"src_ip": 4, "dst_ip": 4, "protocol": 1, "src_port": 2,
                               "dst_port": 2}
#: hash functions and the width of their output in bits
HASH_WIDTH: dict[str, int] = {"crc32": 32, "crc32c": 32, "crc16_ccitt": 16, "xor": 16}
HASHES = tuple(HASH_WIDTH)


def _reflected_table(poly: int) -> np.ndarray:
    t = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        t = np.where(t & 1, (t >> np.uint32(1)) ^ np.uint32(poly), t >> np.uint32(1))
    return t.astype(np.uint32)


def _ccitt_table() -> np.ndarray:
    t = np.arange(256, dtype=np.uint32) << np.uint32(8)
    for _ in range(8):
        t = np.where(t & 0x8000, ((t << np.uint32(1)) ^ np.uint32(0x1021)), t << np.uint32(1))
        t &= np.uint32(0xFFFF)
    return t.astype(np.uint32)


_CRC32 = _reflected_table(0xEDB88320)  # IEEE 802.3 (zlib)
_CRC32C = _reflected_table(0x82F63B78)  # Castagnoli
_CCITT = _ccitt_table()  # x^16 + x^12 + x^5 + 1


def key_bytes(columns: dict[str, np.ndarray], fields: Sequence[str]) -> np.ndarray:
    """The hash key of every flow: the chosen header fields in network byte order.

    ``columns`` maps field names (see :data:`FIELD_BYTES`) to integer arrays. Returns an
    ``(n_flows, n_bytes)`` uint8 array.
    """
    parts = []
    for name in fields:
        width = FIELD_BYTES[name]
        v = np.asarray(columns[name]).astype(np.uint32)
        for i in range(width - 1, -1, -1):
            parts.append(((v >> np.uint32(8 * i)) & np.uint32(0xFF)).astype(np.uint8))
    if not parts:
        n = len(next(iter(columns.values())))
        return np.zeros((n, 0), dtype=np.uint8)
    return np.stack(parts, axis=1)


def _u32(x: int | np.ndarray, n: int) -> np.ndarray:
    return np.broadcast_to(np.asarray(x, dtype=np.uint64).astype(np.uint32), (n,)).copy()


def hash_keys(keys: np.ndarray, function: str, seed: int | np.ndarray = 0) -> np.ndarray:
    """Hash every row of ``keys`` (uint8, ``(n, k)``) with ``function``; uint32 out.

    ``seed`` (one value or one per row) is XORed into the CRC's initial register, so
    seed 0 gives the standard check values: CRC-32 = zlib's crc32, CRC-32C (iSCSI),
    CRC-16/CCITT-FALSE (init 0xFFFF). ``xor`` folds the key into 16-bit words and XORs
    them together with the seed.
    """
    n = keys.shape[0]
    s = _u32(seed, n)
    if function in ("crc32", "crc32c"):
        table = _CRC32 if function == "crc32" else _CRC32C
        r = s ^ np.uint32(0xFFFFFFFF)
        for j in range(keys.shape[1]):
            r = table[(r ^ keys[:, j]) & np.uint32(0xFF)] ^ (r >> np.uint32(8))
        return r ^ np.uint32(0xFFFFFFFF)
    if function == "crc16_ccitt":
        r = (s ^ np.uint32(0xFFFF)) & np.uint32(0xFFFF)
        for j in range(keys.shape[1]):
            idx = ((r >> np.uint32(8)) ^ keys[:, j]) & np.uint32(0xFF)
            r = ((r << np.uint32(8)) & np.uint32(0xFFFF)) ^ _CCITT[idx]
        return r
    if function == "xor":
        r = s & np.uint32(0xFFFF)
        k = keys.shape[1]
        for j in range(0, k, 2):
            hi = keys[:, j].astype(np.uint32) << np.uint32(8)
            lo = keys[:, j + 1].astype(np.uint32) if j + 1 < k else np.uint32(0)
            r = r ^ hi ^ lo
        return r
    raise ValueError(f"unknown hash {function!r}; allowed: {', '.join(HASHES)}")


def _rotr(h: np.ndarray, offset: np.ndarray, width: int) -> np.ndarray:
    """Rotate the ``width``-bit hash right by ``offset`` bits (ASIC hash-bit offset)."""
    mask = np.uint64((1 << width) - 1)
    h64 = h.astype(np.uint64)
    o = offset.astype(np.uint64) % np.uint64(width)
    out = ((h64 >> o) | (h64 << ((np.uint64(width) - o) % np.uint64(width)))) & mask
    return out.astype(np.uint32)


def _splitmix(x: np.ndarray) -> np.ndarray:
    z = x.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def switch_seeds(n_nodes: int, seed: int, mode: str, function: str
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Per node: the hash seed and hash-bit offset a switch is configured with.

    ``same``: every switch has ``seed`` and offset 0. ``per_switch``: seed and offset are
    drawn from ``seed`` and the node id (deterministic), as an operator would set
    ``hash seed``/``hash offset`` per box.
    """
    width = HASH_WIDTH[function]
    if mode == "same":
        return (np.full(n_nodes, seed & 0xFFFFFFFF, dtype=np.uint32),
                np.zeros(n_nodes, dtype=np.uint32))
    with np.errstate(over="ignore"):
        z = _splitmix(np.arange(n_nodes, dtype=np.uint64)
                      + np.uint64((seed & 0xFFFFFFFF) << 20))
    seeds = (z & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    offsets = ((z >> np.uint64(40)) % np.uint64(width)).astype(np.uint32)
    return seeds, offsets


def select_member(h: np.ndarray, n: np.ndarray | int, selection: str = "mod",
                  table_size: int = 256) -> np.ndarray:
    """The ECMP member index chosen by hash ``h`` in a group of ``n`` members.

    ``mod``: ``h mod n``. ``table``: the ASIC's member table of ``table_size`` entries,
    entry ``j`` holding member ``j mod n``; the hash indexes it: ``(h mod T) mod n``.
    """
    h = h.astype(np.int64)
    n = np.maximum(np.asarray(n, dtype=np.int64), 1)
    if selection == "table":
        return (h % table_size) % n
    return h % n


@dataclass
class SwitchHasher:
    """The hash every switch computes for every flow, cheaply.

    The key hash with seed 0 is computed once per flow; a switch's seed only XORs a
    constant into it (CRC linearity, see the module docstring), precomputed per switch,
    and its offset rotates the result.
    """

    function: str
    base: np.ndarray  # uint32 per flow: hash with seed 0
    xor: np.ndarray  # uint32 per node: what the node's seed XORs into the hash
    offset: np.ndarray  # uint32 per node: hash-bit offset

    @classmethod
    def build(cls, keys: np.ndarray, function: str, seed: int, mode: str,
              n_nodes: int) -> SwitchHasher:
        base = hash_keys(keys, function, 0)
        seeds, offsets = switch_seeds(n_nodes, seed, mode, function)
        zeros = np.zeros((1, keys.shape[1]), dtype=np.uint8)
        uniq, inv = np.unique(seeds, return_inverse=True)
        # g(seed) = hash(zeros, seed) ^ hash(zeros, 0), valid for every key of this length
        g = hash_keys(np.repeat(zeros, len(uniq), axis=0), function, uniq) \
            ^ hash_keys(zeros, function, 0)[0]
        return cls(function, base, g[inv].astype(np.uint32), offsets)

    def of_keys(self, keys: np.ndarray, node: np.ndarray) -> np.ndarray:
        """The hash switch ``node[i]`` computes for key row ``i`` (any keys)."""
        h = hash_keys(keys, self.function, 0) ^ self.xor[node]
        off = self.offset[node]
        return _rotr(h, off, HASH_WIDTH[self.function]) if off.any() else h

    def at(self, flow: np.ndarray, node: np.ndarray) -> np.ndarray:
        """The hash that switch ``node[i]`` computes for flow ``flow[i]``."""
        h = self.base[flow] ^ self.xor[node]
        off = self.offset[node]
        if not off.any():
            return h
        return _rotr(h, off, HASH_WIDTH[self.function])
