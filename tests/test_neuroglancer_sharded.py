"""The sharded uint64 index writer (zarr_vectors.neuroglancer.sharded), read back with the
reader of tests/_ng_decode.py (written from Neuroglancer's sharded.md alone)."""

from __future__ import annotations

import gzip
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests import _ng_decode as dec
from zarr_vectors.errors import InputError
from zarr_vectors.neuroglancer.sharded import (
    ShardingSpec,
    choose_sharding,
    compressed_morton,
    encode_shards,
    murmurhash3_x86_128_low64,
)

# MurmurHash3_x86_128(seed 0) of 8 little-endian bytes, low 64 bits, as the mmh3 package gives them
KNOWN = {0: 5148371408780832321, 123456789012345: 11188472092825156211}


def test_murmurhash_known_values() -> None:
    keys = np.array(list(KNOWN), np.uint64)
    assert murmurhash3_x86_128_low64(keys).tolist() == list(KNOWN.values())
    assert [dec.murmur_low64(k) for k in KNOWN] == list(KNOWN.values())


def test_murmurhash_matches_mmh3() -> None:
    mmh3 = pytest.importorskip("mmh3")
    rng = np.random.default_rng(3)
    edge = np.array([0, 1, 2**64 - 1], np.uint64)
    keys = np.concatenate([rng.integers(0, 2**64 - 1, 2000, np.uint64, endpoint=True), edge])
    want = [mmh3.hash128(int(k).to_bytes(8, "little"), 0, False) & (2**64 - 1) for k in keys.tolist()]
    assert murmurhash3_x86_128_low64(keys).tolist() == want
    assert [dec.murmur_low64(int(k)) for k in keys[:200].tolist()] == want[:200]


@given(st.lists(st.integers(0, 2**64 - 1), max_size=40))
def test_vectorised_hash_equals_the_scalar_reference(keys: list[int]) -> None:
    assert murmurhash3_x86_128_low64(np.array(keys, np.uint64)).tolist() == [
        dec.murmur_low64(k) for k in keys
    ]


@settings(max_examples=60, deadline=None)
@given(
    keys=st.sets(st.integers(0, 2**64 - 1), max_size=120),
    preshift=st.integers(0, 8),
    minishard_bits=st.integers(0, 5),
    shard_bits=st.integers(0, 4),
    hash_=st.sampled_from(["identity", "murmurhash3_x86_128"]),
    index_enc=st.sampled_from(["raw", "gzip"]),
    data_enc=st.sampled_from(["raw", "gzip"]),
    small_keys=st.booleans(),
)
def test_every_key_round_trips(
    keys: set[int],
    preshift: int,
    minishard_bits: int,
    shard_bits: int,
    hash_: str,
    index_enc: str,
    data_enc: str,
    small_keys: bool,
) -> None:
    if small_keys:  # dense small ids, like annotation ids of one chunk
        keys = {k % 512 for k in keys}
    spec = ShardingSpec(preshift, hash_, minishard_bits, shard_bits, index_enc, data_enc)
    ordered = sorted(keys)
    values = [k.to_bytes(8, "little") * (k % 5) + bytes([k % 251]) for k in ordered]
    files = encode_shards(np.array(ordered, np.uint64), values, spec)
    assert len(files) <= 1 << shard_bits
    assert all(len(name) == max(1, -(-shard_bits // 4)) + 6 for name in files)
    read = dec.files_reader(files)
    sharding = spec.to_json()
    for k, v in zip(ordered, values):
        assert dec.sharded_get(read, sharding, k) == v
    absent = (max(keys, default=0) + 1) % 2**64
    if absent not in keys:
        assert dec.sharded_get(read, sharding, absent) is None


def test_hand_built_two_minishards() -> None:
    """Keys 1, 2, 5 with identity hash, one minishard bit, no shard bits: minishard 0 holds
    key 2, minishard 1 holds keys 1 and 5; data follow the 32-byte shard index in minishard
    order, then the minishard indexes."""
    spec = ShardingSpec(0, "identity", 1, 0)
    files = encode_shards([5, 2, 1], [b"EEEEE", b"BB", b"A"], spec)
    assert list(files) == ["0.shard"]
    data = b"BB" + b"A" + b"EEEEE"  # minishard 0: key 2; minishard 1: keys 1, 5
    mini0 = struct.pack("<3Q", 2, 0, 2)  # key 2, offset 0, size 2
    mini1 = struct.pack("<6Q", 1, 4, 2, 0, 1, 5)  # keys 1, 1+4; offsets 2, +0; sizes 1, 5
    index = struct.pack("<4Q", 8, 8 + 24, 8 + 24, 8 + 24 + 48)
    assert files["0.shard"] == index + data + mini0 + mini1


def test_gzip_and_shard_names() -> None:
    spec = ShardingSpec(0, "identity", 0, 5, "gzip", "gzip")
    files = encode_shards([3, 40], [b"x" * 100, b"y"], spec)
    assert sorted(files) == ["03.shard", "08.shard"]  # 40 >> 0 & 31 = 8
    body = files["03.shard"]
    start, end = struct.unpack_from("<QQ", body, 0)
    table = np.frombuffer(gzip.decompress(body[16 + start : 16 + end]), "<u8").reshape(3, 1)
    assert table[0, 0] == 3
    assert gzip.decompress(body[16 + int(table[1, 0]) : 16 + int(table[1, 0] + table[2, 0])]) == b"x" * 100


def test_bad_input() -> None:
    with pytest.raises(InputError):
        ShardingSpec(hash="md5")
    with pytest.raises(InputError):
        ShardingSpec(data_encoding="zstd")
    with pytest.raises(InputError):
        encode_shards([1, 1], [b"a", b"b"], ShardingSpec())
    with pytest.raises(InputError):
        encode_shards([1], [], ShardingSpec())
    with pytest.raises(InputError):
        compressed_morton(np.zeros((1, 3)), [2**30, 2**30, 2**30])


@given(st.lists(st.integers(1, 2000), min_size=1, max_size=4), st.data())
def test_compressed_morton_matches_the_spec(shape: list[int], data: st.DataObject) -> None:
    cells = [tuple(data.draw(st.integers(0, s - 1)) for s in shape) for _ in range(5)]
    got = compressed_morton(np.array(cells), shape).tolist()
    assert got == [dec.morton_key(c, shape) for c in cells]


def test_compressed_morton_spec_example() -> None:
    # grid 8 x 4 x 16: x, y, z bits interleave while each axis has bits left
    assert compressed_morton(np.array([[1, 2, 3], [5, 0, 7], [0, 0, 15]]), [8, 4, 16]).tolist() == [
        0b110101,
        0b11100101,
        0b110100100,
    ]


def test_choose_sharding_sizes() -> None:
    small = choose_sharding(100, 10_000)
    assert (small.shard_bits, small.minishard_bits) == (0, 0)
    big = choose_sharding(10_000_000, 400_000_000)
    assert 8 <= 400_000_000 / 2**big.shard_bits / 2**20 <= 64  # shard files of tens of MB
    per_minishard = 10_000_000 / 2 ** (big.shard_bits + big.minishard_bits)
    assert 64 <= per_minishard <= 512  # a minishard index of a few KB
    assert choose_sharding(0, 0).to_json()["@type"] == "neuroglancer_uint64_sharded_v1"
