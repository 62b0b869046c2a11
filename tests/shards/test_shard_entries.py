"""Shard index entries must not share bytes: a crafted index (valid checksum) whose entries
overlap is a CorruptShardError naming the array and shard, never extra rows (issue 28, item 8)."""

from __future__ import annotations

import numpy as np
import pytest

import zarr_vectors as zv
from tests.conftest import brute_force_box
from tests.shards._craft import read_index, write_index
from zarr_vectors.errors import CorruptShardError
from zarr_vectors.format.shards import EMPTY, ShardLayout, decode_index, encode_index, encode_shard

BOUNDS = ([0.0] * 3, [399.0] * 3)
VLEN = ({"name": "vlen-bytes"},)


@pytest.fixture()
def store(tmp_path):
    pos = np.random.default_rng(5).uniform(0, 399, (2000, 3)).astype(np.float32)
    path = tmp_path / "s.zarr"
    zv.write_points(path, pos, chunk_shape=50, bounds=BOUNDS, shards=2)
    return path, pos


@pytest.mark.parametrize("entry", [(1, 0), (3, 2)])
def test_a_box_query_over_shared_entries_raises_instead_of_doubling_rows(store, entry):
    path, pos = store
    lo, hi = np.zeros(3), np.array([99.9, 99.9, 99.9])  # the eight cells of shard c/0/0/0
    assert len(zv.open(path).query((lo, hi))) == int(brute_force_box(pos, lo, hi).sum())
    shard = path / "0/vertices/c/0/0/0"
    data, entries = read_index(shard, 8)
    a, b = entry
    entries[a] = entries[b]  # two cells, one range of bytes; the checksum is recomputed
    write_index(shard, data, entries)
    with pytest.raises(CorruptShardError, match=r"shard c/0/0/0 in array '0/vertices'.*share bytes") as err:
        zv.open(path).query((lo, hi))
    assert err.value.array == "0/vertices" and err.value.chunk == "c/0/0/0"
    with pytest.raises(CorruptShardError, match="share bytes"):
        zv.open(path).read()


def test_partly_overlapping_entries_are_refused():
    layout = ShardLayout((4,), (1,), VLEN, checksum=True)
    blob = encode_shard(layout, {0: b"a" * 10, 1: b"b" * 10, 3: b"c" * 5})
    index = blob[-layout.index_nbytes :]
    assert decode_index(index, layout, shard_size=len(blob))[1].tolist()[:2] == [10, 10]
    offsets = np.array([0, 5, EMPTY, 20], np.uint64)  # entry 1 starts inside entry 0
    nbytes = np.array([10, 10, EMPTY, 5], np.uint64)
    with pytest.raises(CorruptShardError, match=r"shard c/2 in array '0/x'.*entries 0 and 1 share bytes"):
        decode_index(encode_index(offsets, nbytes), layout, shard_size=len(blob), array="0/x", shard="c/2")
    inside = np.array([0, 2, EMPTY, 20], np.uint64)  # entry 1 wholly inside entry 0, later in the index
    short = np.array([10, 3, EMPTY, 5], np.uint64)
    with pytest.raises(CorruptShardError, match="entries 0 and 1 share bytes"):
        decode_index(encode_index(inside, short), layout)
    out_of_order = np.array([20, EMPTY, 0, 8], np.uint64)  # stored in any order: entries 2 and 3 clash
    sizes = np.array([5, EMPTY, 10, 4], np.uint64)
    with pytest.raises(CorruptShardError, match="entries 2 and 3 share bytes"):
        decode_index(encode_index(out_of_order, sizes), layout)


def test_touching_and_empty_ranges_are_allowed():
    layout = ShardLayout((4,), (1,), VLEN, checksum=False)
    offsets = np.array([10, 0, 10, 10], np.uint64)  # [10, 20), [0, 10), two zero-length ranges at 10
    nbytes = np.array([10, 10, 0, 0], np.uint64)
    got = decode_index(encode_index(offsets, nbytes, checksum=False), layout, shard_size=20 + 64)
    assert got[0].tolist() == offsets.tolist() and got[1].tolist() == nbytes.tolist()


def test_an_offset_past_any_blob_is_refused_without_the_shard_size():
    """A ranged read knows only the index: offsets over 2**62 are refused there too (and
    offset + size never wraps around in the overlap check)."""
    layout = ShardLayout((2,), (1,), VLEN, checksum=False)
    offsets = np.array([0, (1 << 64) - 8], np.uint64)
    nbytes = np.array([10, 10], np.uint64)
    with pytest.raises(CorruptShardError, match="index entry 1 points into the index or past any blob"):
        decode_index(encode_index(offsets, nbytes, checksum=False), layout)
