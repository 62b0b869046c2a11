"""zarr_vectors.format.shards: shard blobs and indexes, byte for byte, against zarr-python."""

from __future__ import annotations

import json
import struct
import warnings

import google_crc32c
import numpy as np
import pytest
import zarr
from hypothesis import given, settings
from hypothesis import strategies as st
from zarr.codecs import ShardingCodec, VLenBytesCodec
from zarr.storage import MemoryStore

from zarr_vectors.errors import CorruptCellError, CorruptShardError, FormatError
from zarr_vectors.format.shards import (
    EMPTY,
    ShardLayout,
    coalesce,
    decode_index,
    decode_shard,
    encode_shard,
    parse_sharding,
)
from zarr_vectors.format.zarr_json import vlen_array_doc

VLEN = ({"name": "vlen-bytes", "configuration": {}},)


def _vlen(payload: bytes) -> bytes:
    return struct.pack("<II", 1, len(payload)) + payload


def test_blob_matches_a_hand_built_vector():
    layout = ShardLayout((2, 2), (1, 1), VLEN)
    blob = encode_shard(layout, {3: b"xy", 0: b"hello"})
    table = struct.pack("<8Q", 0, 5, EMPTY, EMPTY, EMPTY, EMPTY, 5, 2)
    assert blob == b"helloxy" + table + struct.pack("<I", google_crc32c.value(table))
    start = ShardLayout((2, 2), (1, 1), VLEN, "start", checksum=False)
    blob = encode_shard(start, {1: b"abc"})
    assert blob == struct.pack("<8Q", EMPTY, EMPTY, 64, 3, EMPTY, EMPTY, EMPTY, EMPTY) + b"abc"


@settings(max_examples=60, deadline=None)
@given(
    cps=st.lists(st.integers(1, 4), min_size=1, max_size=3),
    data=st.data(),
    location=st.sampled_from(["start", "end"]),
    checksum=st.booleans(),
)
def test_encode_decode_round_trip(cps, data, location, checksum):
    layout = ShardLayout(tuple(cps), (1,) * len(cps), VLEN, location, checksum)
    n = layout.n_inner
    chunks = data.draw(st.dictionaries(st.integers(0, n - 1), st.binary(max_size=40)))
    blob = encode_shard(layout, chunks)
    assert len(blob) == layout.index_nbytes + sum(map(len, chunks.values()))
    assert {p: bytes(v) for p, v in decode_shard(blob, layout).items()} == chunks
    index = blob[: layout.index_nbytes] if location == "start" else blob[len(blob) - layout.index_nbytes :]
    offsets, nbytes = decode_index(index, layout, shard_size=len(blob))
    empty = np.setdiff1d(np.arange(n), list(chunks))
    assert np.all(offsets[empty] == EMPTY) and np.all(nbytes[empty] == EMPTY)
    for p, v in chunks.items():
        assert blob[int(offsets[p]) : int(offsets[p] + nbytes[p])] == v


def test_locate_is_c_order_within_the_shard():
    layout = ShardLayout((2, 3), (1, 1), VLEN)
    shard, inner = layout.locate(np.array([[0, 0], [1, 2], [2, 3], [5, 4]]))
    assert shard.tolist() == [[0, 0], [0, 0], [1, 1], [2, 1]]
    assert inner.tolist() == [0, 5, 0, 4]


def _zarr_sharded(location: str) -> tuple[MemoryStore, np.ndarray]:
    store = MemoryStore()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        arr = zarr.create_array(
            store,
            shape=(4, 4, 2),
            chunks=(2, 2, 2),
            dtype=zarr.core.dtype.VariableLengthBytes(),
            fill_value=b"",
            serializer=ShardingCodec(
                chunk_shape=(1, 1, 1), codecs=[VLenBytesCodec()], index_location=location
            ),
            compressors=None,
        )
    values = np.full((4, 4, 2), b"", dtype=object)
    rng = np.random.default_rng(1)
    for cell in rng.integers(0, [4, 4, 2], (7, 3)).tolist():
        values[tuple(cell)] = rng.bytes(int(rng.integers(1, 30)))
    arr[:] = values
    return store, values


@pytest.mark.parametrize("location", ["start", "end"])
def test_we_parse_what_zarr_python_writes(location):
    store, values = _zarr_sharded(location)
    doc = json.loads(store._store_dict["zarr.json"].to_bytes())
    layout = parse_sharding("a", doc)
    assert layout is not None and layout.index_location == location and layout.checksum
    assert layout.chunks_per_shard == (2, 2, 2)
    got = np.full((4, 4, 2), b"", dtype=object)
    for key, buf in store._store_dict.items():
        if key.startswith("c/"):
            shard = np.array([int(p) for p in key.split("/")[1:]])
            for pos, raw in decode_shard(buf.to_bytes(), layout).items():
                cell = shard * 2 + np.unravel_index(pos, (2, 2, 2))
                got[tuple(cell)] = bytes(raw)[8:]  # one vlen element: count, length, bytes
    assert np.array_equal(got, values)


@pytest.mark.parametrize("location", ["start", "end"])
def test_zarr_python_reads_what_we_write(location):
    rng = np.random.default_rng(2)
    layout = ShardLayout((2, 3), (1, 1), VLEN, location)
    doc = vlen_array_doc((3, 5), (1, 1), [], {})
    doc["chunk_grid"]["configuration"]["chunk_shape"] = [2, 3]
    doc["codecs"] = [layout.codec_json()]
    assert parse_sharding("a", doc) == layout
    expected = np.full((3, 5), b"", dtype=object)
    shards: dict[tuple[int, ...], dict[int, bytes]] = {}
    for cell in [(0, 0), (1, 2), (2, 4), (2, 0), (0, 3)]:
        expected[cell] = rng.bytes(int(rng.integers(1, 50)))
        shard, inner = layout.locate(np.array([cell]))
        shards.setdefault(tuple(shard[0].tolist()), {})[int(inner[0])] = _vlen(expected[cell])
    store = MemoryStore()
    items = {"zarr.json": json.dumps(doc).encode()}
    items |= {"c/" + "/".join(map(str, k)): encode_shard(layout, v) for k, v in shards.items()}
    for key, value in items.items():
        zarr.core.sync.sync(store.set(key, zarr.core.buffer.cpu.Buffer.from_bytes(value)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = zarr.open_array(store, mode="r")[:]
    assert np.array_equal(got, expected)


def test_parse_refuses_bad_configurations():
    doc = vlen_array_doc((4,), (2,), [], {})
    assert parse_sharding("a", doc) is None
    doc["codecs"] = [ShardLayout((2,), (1,), VLEN).codec_json()]
    assert parse_sharding("a", doc) is not None
    bad = json.loads(json.dumps(doc))
    bad["codecs"][0]["configuration"]["chunk_shape"] = [3]
    with pytest.raises(FormatError, match="dividing"):
        parse_sharding("0/vertices", bad)
    bad = json.loads(json.dumps(doc))
    bad["codecs"][0]["configuration"]["index_codecs"] = [
        {"name": "bytes", "configuration": {"endian": "big"}}
    ]
    with pytest.raises(FormatError, match="index_codecs"):
        parse_sharding("0/vertices", bad)
    bad["codecs"][0]["configuration"] = {"chunk_shape": [1], "codecs": VLEN, "index_location": "middle"}
    with pytest.raises(FormatError, match="index_location"):
        parse_sharding("0/vertices", bad)


def test_damaged_indexes_name_array_and_shard():
    layout = ShardLayout((2,), (1,), VLEN)
    blob = bytearray(encode_shard(layout, {0: b"abcd", 1: b"ef"}))
    with pytest.raises(CorruptShardError, match=r"shard c/1 in array '0/vertices'.*index is 5 bytes"):
        decode_index(bytes(blob[-5:]), layout, array="0/vertices", shard="c/1")
    flipped = bytearray(blob)
    flipped[-10] ^= 1
    with pytest.raises(CorruptShardError, match="crc32c"):
        decode_shard(bytes(flipped), layout, array="0/vertices", shard="c/1")
    short = ShardLayout((2,), (1,), VLEN, checksum=False)
    blob = encode_shard(short, {0: b"abcd", 1: b"ef"})
    with pytest.raises(CorruptShardError, match="runs past the end") as err:
        decode_shard(blob[:2] + blob[-32:], short, array="0/vertices", shard="c/0")
    assert isinstance(err.value, CorruptCellError) and err.value.array == "0/vertices"
    half = struct.pack("<4Q", 0, EMPTY, EMPTY, EMPTY)
    with pytest.raises(CorruptShardError, match="half empty"):
        decode_index(half, short)


@settings(max_examples=80, deadline=None)
@given(
    ranges=st.lists(st.tuples(st.integers(0, 500), st.integers(0, 60)), min_size=0, max_size=20),
    gap=st.integers(0, 50),
)
def test_coalesce_against_brute_force(ranges, gap):
    starts = np.array([s for s, _ in ranges], np.int64)
    ends = np.array([s + n for s, n in ranges], np.int64)
    lo, hi, group = coalesce(starts, ends, gap)
    assert np.all(lo[1:] > hi[:-1] + gap)  # merged ranges are apart by more than the gap
    for i in range(len(starts)):  # every range inside its group
        assert lo[group[i]] <= starts[i] and ends[i] <= hi[group[i]]
    for g in range(len(lo)):  # every group is the span of its members
        members = group == g
        assert lo[g] == starts[members].min() and hi[g] == ends[members].max()
