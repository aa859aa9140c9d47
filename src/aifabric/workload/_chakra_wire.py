"""A compiled (numba) decoder of the Chakra ET fields aifabric uses, straight from the
protobuf wire format.

Decoding through the protobuf classes costs tens of microseconds per node in Python
(field access, attribute loops); a 1,024-rank trace of 10^5 nodes per rank is 10^8
nodes. This decoder reads the same bytes in one compiled pass: per node its id, type,
duration, dependencies and the attributes ``comm_type``, ``comm_size``/``tensor_size``,
``comm_src``, ``comm_dst``, ``comm_tag``, ``num_ops`` and ``pg_name`` (as a 64-bit hash
of its bytes; the names are read back from the first node that carries each).

The field numbers and value types are taken at run time from the package's own schema
(``chakra.schema.protobuf.et_def_pb2`` descriptors), not written here. Anything the
decoder does not understand (a wire type it does not expect, a length past the end)
returns an error code; the caller then decodes the file with the protobuf classes, which
either succeed (and are used) or say what is wrong. Tests compare both readers on the
same files.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["ATTR_NAMES", "decode", "schema_tables"]

#: attributes read, in this order (index = column of the attribute arrays)
ATTR_NAMES = ("comm_type", "comm_size", "tensor_size", "comm_src", "comm_dst", "comm_tag",
              "num_ops", "pg_name")

# value kinds of AttributeProto's oneof fields
K_SKIP, K_VARINT, K_ZIGZAG, K_F32, K_F64, K_FIX32, K_FIX64, K_SFIX32, K_SFIX64, K_STR = \
    range(10)


def schema_tables() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(node field numbers [id, type, ctrl_deps, data_deps, duration_micros, attr],
    [attr name field], value kind per AttributeProto field number) from the package's
    descriptors."""
    from chakra.schema.protobuf import et_def_pb2 as pb
    from google.protobuf.descriptor import FieldDescriptor as F

    nf = pb.Node.DESCRIPTOR.fields_by_name
    node = np.array([nf[k].number for k in ("id", "type", "ctrl_deps", "data_deps",
                                            "duration_micros", "attr")], dtype=np.int64)
    ad = pb.AttributeProto.DESCRIPTOR
    name = np.array([ad.fields_by_name["name"].number], dtype=np.int64)
    kinds = np.zeros(64, dtype=np.int64)
    by_type = {F.TYPE_INT32: K_VARINT, F.TYPE_INT64: K_VARINT, F.TYPE_UINT32: K_VARINT,
               F.TYPE_UINT64: K_VARINT, F.TYPE_BOOL: K_VARINT, F.TYPE_ENUM: K_VARINT,
               F.TYPE_SINT32: K_ZIGZAG, F.TYPE_SINT64: K_ZIGZAG, F.TYPE_FLOAT: K_F32,
               F.TYPE_DOUBLE: K_F64, F.TYPE_FIXED32: K_FIX32, F.TYPE_FIXED64: K_FIX64,
               F.TYPE_SFIXED32: K_SFIX32, F.TYPE_SFIXED64: K_SFIX64, F.TYPE_STRING: K_STR}
    for fd in ad.oneofs_by_name["value"].fields:
        if fd.number < 64:
            kinds[fd.number] = by_type.get(fd.type, K_SKIP)
    return node, name, kinds


def _name_table() -> tuple[np.ndarray, np.ndarray]:
    enc = [n.encode() for n in ATTR_NAMES]
    width = max(len(e) for e in enc)
    tab = np.zeros((len(enc), width), dtype=np.uint8)
    lens = np.zeros(len(enc), dtype=np.int64)
    for i, e in enumerate(enc):
        tab[i, :len(e)] = np.frombuffer(e, dtype=np.uint8)
        lens[i] = len(e)
    return tab, lens


@njit(cache=True, nogil=True)
def _varint(buf: np.ndarray, pos: int, end: int) -> tuple[np.uint64, int]:
    """(value, next position); position -1 on a malformed varint."""
    result = np.uint64(0)
    shift = 0
    while True:
        if pos >= end or shift > 63:
            return np.uint64(0), -1
        c = buf[pos]
        pos += 1
        if shift == 63 and c > 1:  # more than 64 bits
            return np.uint64(0), -1
        result |= np.uint64(c & 0x7F) << np.uint64(shift)
        if c < 0x80:
            return result, pos
        shift += 7


@njit(cache=True, nogil=True)
def _span(buf: np.ndarray, pos: int, end: int) -> tuple[int, int]:
    """A length prefix at ``pos``: (first byte, end) of what it announces; end -1 when
    malformed or past ``end``. The length is compared unsigned: a 64-bit length must
    not wrap to a negative int64 and move the position backwards."""
    ln, p = _varint(buf, pos, end)
    if p < 0 or ln > np.uint64(end - p):
        return p, -1
    return p, p + np.int64(ln)


@njit(cache=True, nogil=True)
def _skip(buf: np.ndarray, pos: int, end: int, wire: int) -> int:
    if wire == 0:
        _, pos = _varint(buf, pos, end)
        return pos
    if wire == 1:
        return pos + 8 if pos + 8 <= end else -1
    if wire == 5:
        return pos + 4 if pos + 4 <= end else -1
    if wire == 2:
        _, stop = _span(buf, pos, end)
        return stop
    return -1  # groups (3, 4) and unknown wire types: not in Chakra's schema


@njit(cache=True, nogil=True)
def _le(buf: np.ndarray, pos: int, n: int) -> np.uint64:
    v = np.uint64(0)
    for k in range(n):
        v |= np.uint64(buf[pos + k]) << np.uint64(8 * k)
    return v


@njit(cache=True, nogil=True)
def _attr(buf: np.ndarray, pos: int, end: int, name_field: int, kinds: np.ndarray,
          tab: np.ndarray, lens: np.ndarray, ival: np.ndarray, fval: np.ndarray,
          has: np.ndarray, i: int) -> int:
    """Decode one AttributeProto in [pos, end); stores a known attribute of node i.
    Returns 0, or -1 when malformed."""
    a_start = -1
    a_len = 0
    v_kind = 0
    v_pos = -1
    v_len = 0
    v_int = np.uint64(0)
    while pos < end:
        key, pos = _varint(buf, pos, end)
        if pos < 0:
            return -1
        field = np.int64(key >> np.uint64(3))
        wire = np.int64(key & np.uint64(7))
        if field == name_field and wire == 2:
            pos, stop = _span(buf, pos, end)
            if stop < 0:
                return -1
            a_start, a_len = pos, stop - pos
            pos = stop
            continue
        kind = kinds[field] if field < 64 else 0
        if kind in (K_VARINT, K_ZIGZAG):
            if wire != 0:
                return -1
            v_int, pos = _varint(buf, pos, end)
            if pos < 0:
                return -1
            v_kind = kind
            continue
        if kind in (K_F64, K_FIX64, K_SFIX64):
            if wire != 1 or pos + 8 > end:
                return -1
            v_int = _le(buf, pos, 8)
            v_kind = kind
            pos += 8
            continue
        if kind in (K_F32, K_FIX32, K_SFIX32):
            if wire != 5 or pos + 4 > end:
                return -1
            v_int = _le(buf, pos, 4)
            v_kind = kind
            pos += 4
            continue
        if kind == K_STR:
            if wire != 2:
                return -1
            pos, stop = _span(buf, pos, end)
            if stop < 0:
                return -1
            v_kind, v_pos, v_len = kind, pos, stop - pos
            pos = stop
            continue
        pos = _skip(buf, pos, end, wire)
        if pos < 0:
            return -1
    if a_start < 0 or v_kind == 0:
        return 0
    col = _attr_column(buf, a_start, a_len, tab, lens)
    if col < 0:
        return 0
    if (v_kind == K_STR) != (col == len(lens) - 1):  # pg_name (last) a string, the rest
        return -1  # numbers; anything else: the protobuf reader decides
    if v_kind == K_STR:
        return _store_string(buf, v_pos, v_len, ival, fval, has, i, col)
    _store_number(v_kind, v_int, ival, fval, i, col)
    has[i, col] = True
    return 0


@njit(cache=True, nogil=True, inline="always")
def _attr_column(buf: np.ndarray, a_start: int, a_len: int, tab: np.ndarray,
                 lens: np.ndarray) -> int:
    """Which known attribute the name ``buf[a_start:a_start + a_len]`` is: its row of
    ``tab`` (names as bytes, ``lens`` their lengths), or -1."""
    for c in range(tab.shape[0]):
        if lens[c] != a_len:
            continue
        same = True
        for k in range(a_len):
            if buf[a_start + k] != tab[c, k]:
                same = False
                break
        if same:
            return c
    return -1


@njit(cache=True, nogil=True, inline="always")
def _store_string(buf: np.ndarray, v_pos: int, v_len: int, ival: np.ndarray,
                  fval: np.ndarray, has: np.ndarray, i: int, col: int) -> int:
    """A string value of node i's attribute ``col``: FNV-1a of its bytes in ``ival``, its
    position (offset x 65536 + length) in ``fval``. -1 when 64 KiB or longer."""
    if v_len >= 65536:
        return -1
    h = np.uint64(14695981039346656037)
    for k in range(v_len):
        h = (h ^ np.uint64(buf[v_pos + k])) * np.uint64(1099511628211)
    ival[i, col] = np.int64(h)
    fval[i, col] = float(v_pos) * 65536.0 + float(v_len)
    has[i, col] = True
    return 0


@njit(cache=True, nogil=True, inline="always")
def _store_number(v_kind: int, v_int: np.uint64, ival: np.ndarray, fval: np.ndarray,
                  i: int, col: int) -> None:
    """A numeric value of node i's attribute ``col``, decoded from its wire bits
    ``v_int`` by kind (varint, zigzag, fixed or float, 32 or 64 bits): as an integer in
    ``ival`` (floats truncated; 0 when out of int64 range) and as a float in ``fval``."""
    if v_kind == K_VARINT:
        iv = np.int64(v_int)
        ival[i, col] = iv
        fval[i, col] = float(iv)
    elif v_kind == K_ZIGZAG:
        iv = np.int64(v_int >> np.uint64(1)) ^ -np.int64(v_int & np.uint64(1))
        ival[i, col] = iv
        fval[i, col] = float(iv)
    elif v_kind == K_F64:
        f = np.array([v_int], dtype=np.uint64).view(np.float64)[0]
        ival[i, col] = np.int64(f) if abs(f) < 9.2e18 else 0
        fval[i, col] = f
    elif v_kind == K_F32:
        f = np.float64(np.array([np.uint32(v_int)], dtype=np.uint32).view(np.float32)[0])
        ival[i, col] = np.int64(f) if abs(f) < 9.2e18 else 0
        fval[i, col] = f
    elif v_kind == K_FIX64:
        ival[i, col] = np.int64(v_int)
        fval[i, col] = float(v_int)
    elif v_kind == K_SFIX64:
        ival[i, col] = np.int64(v_int)
        fval[i, col] = float(np.int64(v_int))
    elif v_kind == K_FIX32:
        ival[i, col] = np.int64(v_int)
        fval[i, col] = float(v_int)
    else:  # K_SFIX32
        iv = np.int64(np.int32(np.uint32(v_int)))
        ival[i, col] = iv
        fval[i, col] = float(iv)


@njit(cache=True, nogil=True)
def _decode(buf: np.ndarray, nodef: np.ndarray, name_field: int, kinds: np.ndarray,
            tab: np.ndarray, lens: np.ndarray):
    n_bytes = len(buf)
    # pass 1: record boundaries
    starts = np.empty(n_bytes // 1 + 1, dtype=np.int64)
    ends = np.empty(n_bytes // 1 + 1, dtype=np.int64)
    n_rec = 0
    pos = 0
    while pos < n_bytes:
        p, stop = _span(buf, pos, n_bytes)
        if stop < 0:
            return (n_rec, -1, np.zeros(0, np.uint64), np.zeros(0, np.int64),
                    np.zeros(0, np.uint64), np.zeros(0, np.int64), np.zeros(0, np.uint64),
                    np.zeros((0, 0), np.int64), np.zeros((0, 0), np.float64),
                    np.zeros((0, 0), np.bool_))
        starts[n_rec] = p
        ends[n_rec] = stop
        n_rec += 1
        pos = stop
    n = max(n_rec - 1, 0)
    f_id, f_type, f_ctrl, f_data, f_dur, f_attr = (nodef[0], nodef[1], nodef[2], nodef[3],
                                                    nodef[4], nodef[5])
    ids = np.zeros(n, dtype=np.uint64)
    ntype = np.zeros(n, dtype=np.int64)
    dur = np.zeros(n, dtype=np.uint64)
    dcnt = np.zeros(n, dtype=np.int64)
    deps = np.empty(n_bytes, dtype=np.uint64)  # a dependency takes >= 1 byte
    nd = 0
    A = tab.shape[0]
    ival = np.zeros((n, A), dtype=np.int64)
    fval = np.zeros((n, A), dtype=np.float64)
    has = np.zeros((n, A), dtype=np.bool_)
    empty_u = np.zeros(0, np.uint64)
    empty_i = np.zeros(0, np.int64)
    for r in range(1, n_rec):
        i = r - 1
        pos = starts[r]
        end = ends[r]
        while pos < end:
            key, pos = _varint(buf, pos, end)
            if pos < 0:
                return (r, -2, empty_u, empty_i, empty_u, empty_i, empty_u,
                        np.zeros((0, 0), np.int64), np.zeros((0, 0), np.float64),
                        np.zeros((0, 0), np.bool_))
            field = np.int64(key >> np.uint64(3))
            wire = np.int64(key & np.uint64(7))
            ok = True
            if field == f_id and wire == 0:
                v, pos = _varint(buf, pos, end)
                ids[i] = v
            elif field == f_type and wire == 0:
                v, pos = _varint(buf, pos, end)
                ntype[i] = np.int64(v)
            elif field == f_dur and wire == 0:
                v, pos = _varint(buf, pos, end)
                dur[i] = v
            elif (field in (f_ctrl, f_data)) and wire == 2:  # packed
                pos, stop = _span(buf, pos, end)
                if stop < 0:
                    ok = False
                else:
                    while pos < stop and pos >= 0:
                        v, pos = _varint(buf, pos, stop)
                        if pos >= 0:
                            deps[nd] = v
                            nd += 1
                            dcnt[i] += 1
            elif (field in (f_ctrl, f_data)) and wire == 0:  # unpacked
                v, pos = _varint(buf, pos, end)
                if pos >= 0:
                    deps[nd] = v
                    nd += 1
                    dcnt[i] += 1
            elif field == f_attr and wire == 2:
                pos, stop = _span(buf, pos, end)
                if stop < 0:
                    ok = False
                else:
                    if _attr(buf, pos, stop, name_field, kinds, tab, lens,
                             ival, fval, has, i) < 0:
                        ok = False
                    pos = stop
            else:
                pos = _skip(buf, pos, end, wire)
            if not ok or pos < 0:
                return (r, -2, empty_u, empty_i, empty_u, empty_i, empty_u,
                        np.zeros((0, 0), np.int64), np.zeros((0, 0), np.float64),
                        np.zeros((0, 0), np.bool_))
    return (n_rec, 0, ids, ntype, dur, dcnt, deps[:nd].copy(), ival, fval, has)


_TABLES: tuple | None = None


def decode(data: bytes | np.ndarray):
    """Decode a whole (uncompressed) ET file. Returns None when the decoder cannot
    (malformed or unexpected input: the caller falls back to the protobuf classes), else
    (n_records, ids, types, duration_us, dep_counts, deps, ival, fval, has) with one row
    per node (the metadata record excluded); ``ival``/``fval``/``has`` have a column per
    :data:`ATTR_NAMES`."""
    global _TABLES
    if _TABLES is None:
        nodef, name, kinds = schema_tables()
        tab, lens = _name_table()
        _TABLES = (nodef, int(name[0]), kinds, tab, lens)
    nodef, name_field, kinds, tab, lens = _TABLES
    buf = np.frombuffer(data, dtype=np.uint8) if not isinstance(data, np.ndarray) else data
    out = _decode(buf, nodef, name_field, kinds, tab, lens)
    if out[1] < 0 or out[0] < 1:
        return None
    return out
