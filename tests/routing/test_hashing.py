"""Switch-ASIC hashing: standard CRC check values, seeds, hash-bit offsets, member tables."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from aifabric.routing.hashing import (
    HASH_WIDTH,
    HASHES,
    SwitchHasher,
    _rotr,
    hash_keys,
    key_bytes,
    select_member,
    switch_seeds,
)

CHECK = np.frombuffer(b"123456789", dtype=np.uint8)[None, :]


def test_crc_check_values_match_the_standards():
    """Seed 0 gives the catalogued check values of "123456789": CRC-32 (= zlib),
    CRC-32C (iSCSI) 0xE3069283, CRC-16/CCITT-FALSE 0x29B1."""
    assert hash_keys(CHECK, "crc32")[0] == zlib.crc32(b"123456789")
    assert hash_keys(CHECK, "crc32c")[0] == 0xE3069283
    assert hash_keys(CHECK, "crc16_ccitt")[0] == 0x29B1


def test_crc32_matches_zlib_on_random_keys():
    """The vectorised table CRC equals zlib's on arbitrary 13-byte keys."""
    rng = np.random.default_rng(1)
    keys = rng.integers(0, 256, (200, 13), dtype=np.uint8)
    ours = hash_keys(keys, "crc32")
    ref = np.array([zlib.crc32(k.tobytes()) for k in keys], dtype=np.uint32)
    assert (ours == ref).all()


def test_xor_folds_16_bit_words():
    """XOR folding = XOR of the key's big-endian 16-bit words and the seed."""
    key = np.array([[0x12, 0x34, 0xAB, 0xCD, 0x0F]], dtype=np.uint8)
    assert hash_keys(key, "xor", 0)[0] == 0x1234 ^ 0xABCD ^ 0x0F00
    assert hash_keys(key, "xor", 0xFFFF)[0] == 0x1234 ^ 0xABCD ^ 0x0F00 ^ 0xFFFF


def test_key_bytes_are_the_five_tuple_in_network_order():
    """The key is src IP, dst IP, protocol, source port, destination port, big-endian."""
    cols = {"src_ip": np.array([0x0A000001]), "dst_ip": np.array([0x0A000102]),
            "protocol": np.array([17]), "src_port": np.array([0xC001]),
            "dst_port": np.array([4791])}
    k = key_bytes(cols, ["src_ip", "dst_ip", "protocol", "src_port", "dst_port"])
    assert k.tolist() == [[10, 0, 0, 1, 10, 0, 1, 2, 17, 0xC0, 0x01, 0x12, 0xB7]]
    assert key_bytes(cols, ["src_port"]).tolist() == [[0xC0, 0x01]]


@pytest.mark.parametrize("function", HASHES)
def test_switch_hasher_equals_hashing_with_each_switch_seed(function):
    """The fast per-switch hash (base hash XOR a per-seed constant, then rotated by the
    switch's offset) equals hashing every key with the switch's own seed: a CRC is
    linear, so a seed only XORs a constant into it."""
    rng = np.random.default_rng(2)
    keys = rng.integers(0, 256, (500, 13), dtype=np.uint8)
    hasher = SwitchHasher.build(keys, function, 99, "per_switch", 40)
    seeds, offsets = switch_seeds(40, 99, "per_switch", function)
    node = rng.integers(0, 40, 500)
    direct = _rotr(hash_keys(keys, function, seeds[node]), offsets[node], HASH_WIDTH[function])
    assert (hasher.at(np.arange(500), node) == direct).all()
    assert (hasher.of_keys(keys, node) == direct).all()


def test_same_seed_mode_gives_every_switch_the_same_hash():
    """seed_mode same: one seed and no offset on every switch, so every switch computes
    the identical hash of a packet (the root of polarization)."""
    rng = np.random.default_rng(3)
    keys = rng.integers(0, 256, (100, 13), dtype=np.uint8)
    h = SwitchHasher.build(keys, "crc32", 5, "same", 10)
    a = h.at(np.arange(100), np.zeros(100, dtype=np.int64))
    b = h.at(np.arange(100), np.full(100, 7))
    assert (a == b).all()
    assert (a == hash_keys(keys, "crc32", 5)).all()


def test_a_seed_alone_keeps_low_bits_correlated_but_the_offset_does_not():
    """Two CRC seeds differ by a constant XOR, so hash mod 8 at one switch fixes it at the
    other (a permutation of 8 values); per_switch also rotates the hash bits, which
    breaks the dependence."""
    rng = np.random.default_rng(4)
    keys = rng.integers(0, 256, (4000, 13), dtype=np.uint8)
    h1, h2 = hash_keys(keys, "crc32", 1), hash_keys(keys, "crc32", 2)
    pairs = np.unique((h1 % 8) * 8 + (h2 % 8))
    assert pairs.size == 8  # the map h1 mod 8 -> h2 mod 8 is a bijection
    hasher = SwitchHasher.build(keys, "crc32", 0, "per_switch", 2)
    assert hasher.offset[0] != hasher.offset[1]
    g1 = hasher.at(np.arange(4000), np.zeros(4000, dtype=np.int64))
    g2 = hasher.at(np.arange(4000), np.ones(4000, dtype=np.int64))
    assert np.unique((g1 % 8) * 8 + (g2 % 8)).size == 64


def test_member_selection_mod_and_table():
    """mod: h mod n. table: a T-entry table filled round-robin with the members, indexed
    by h mod T, so member m owns ceil or floor of T/n entries."""
    h = np.arange(1024, dtype=np.uint32)
    assert (select_member(h, 60, "mod") == h % 60).all()
    t = select_member(h, 60, "table", 256)
    assert (t == (h % 256) % 60).all()
    counts = np.bincount(t[:256], minlength=60)
    assert set(counts.tolist()) == {4, 5}
    assert counts.sum() == 256


def test_hashing_a_million_keys_is_fast_enough_to_vectorise():
    """A million 5-tuples hash in one call (no per-flow Python): 13 table lookups over
    arrays. Checked for shape and spread, not timed (speed lives in benchmarks/)."""
    rng = np.random.default_rng(5)
    keys = rng.integers(0, 256, (1_000_000, 13), dtype=np.uint8)
    h = hash_keys(keys, "crc32c")
    assert h.shape == (1_000_000,)
    counts = np.bincount(h % 64, minlength=64)
    assert counts.min() > 0.9 * counts.mean()
