"""ShardReader remembers where the cells it read lie (while their shard's index is cached) and
reads a batch of such cells again without planning it: the same bytes as an unsharded store,
forgotten with the index (eviction, writes, refresh), damage still named."""

from __future__ import annotations

import numpy as np
import pytest

import zarr_vectors as zv
from zarr_vectors.errors import CorruptShardError
from zarr_vectors.storage import shards
from zarr_vectors.storage.local import LocalBackend

BOUNDS = ([0.0, 0.0, 0.0], [199.0, 199.0, 199.0])


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    rng = np.random.default_rng(3)
    pos = rng.uniform(0, 199, (4000, 3)).astype(np.float32)
    attr = rng.random(4000).astype(np.float32)
    out = tmp_path_factory.mktemp("cell_locations")
    for name, layout in [("plain", None), ("two", 2)]:
        zv.write_points(
            out / f"{name}.zarr", pos, chunk_shape=50, bounds=BOUNDS, attributes={"a": attr}, shards=layout
        )
    return out


def _reader(path) -> shards.ShardReader:
    reader = shards.ShardReader(LocalBackend(path))
    reader.get_many(["0/vertices/zarr.json", "0/vertex_attributes/a/zarr.json"])
    return reader


def _cell_keys(plain: LocalBackend) -> list[str]:
    keys = [k for k in plain.list_keys("0/vertices") if "/c/" in k]
    keys += [k for k in plain.list_keys("0/vertex_attributes/a") if "/c/" in k]
    return sorted(keys)


def _no_planning(reader: shards.ShardReader, monkeypatch) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError("the batch was planned again")

    monkeypatch.setattr(reader, "_split_batch", refuse)


def test_a_batch_read_again_is_served_from_remembered_locations(stores, monkeypatch):
    plain = LocalBackend(stores / "plain.zarr")
    reader = _reader(stores / "two.zarr")
    keys = _cell_keys(plain)
    absent = ["0/vertices/c/3/3/3", "0/vertices/c/0/0/3"]  # inside the grid; empty or not
    batch = [keys[5], *keys[::3], *absent, keys[5]]  # out of order, repeated, absent cells
    want = plain.get_many(batch)
    assert reader.get_many(batch) == want
    indexes, ranges = reader.index_requests, reader.range_requests
    _no_planning(reader, monkeypatch)
    assert reader.get_many(batch) == want
    got = reader.get_many_into(batch, None)  # type: ignore[arg-type]  # views of the runs
    assert [None if g is None else bytes(g) for g in got] == want
    assert reader.index_requests == indexes  # no index read again
    shards_read = {k.rpartition("/")[0] for k in batch if k.startswith("0/vertices")}
    assert reader.range_requests - ranges <= 2 * 2 * len(shards_read)  # one run per shard at most


def test_a_write_or_refresh_forgets_the_locations(stores, tmp_path, monkeypatch):
    path = tmp_path / "two.zarr"
    zv.write_points(
        path, np.array([[1.0, 1.0, 1.0], [60.0, 1.0, 1.0]]), chunk_shape=50, bounds=BOUNDS, shards=2
    )
    reader = _reader(path)
    keys = ["0/vertices/c/0/0/0", "0/vertices/c/1/0/0"]
    before = reader.get_many(keys)
    assert all(before)
    shard = "0/vertices/c/0/0/0"
    old = (path / shard).read_bytes()
    reader.set_many([(shard, old)])  # a write through the reader: its locations are forgotten
    assert not [k for k in reader._cells if k.startswith("0/vertices/c/0/")]
    assert reader.get_many(keys) == before
    reader.refresh_cache()
    assert not reader._cells
    assert reader.get_many(keys) == before


def test_a_shard_cut_short_after_its_cells_were_located_is_named(tmp_path):
    path = tmp_path / "two.zarr"
    rng = np.random.default_rng(1)
    zv.write_points(path, rng.uniform(0, 99, (500, 3)), chunk_shape=50, bounds=BOUNDS, shards=2)
    reader = _reader(path)
    keys = ["0/vertices/c/0/0/0", "0/vertices/c/1/1/1"]
    assert all(reader.get_many(keys))
    shard = path / "0/vertices/c/0/0/0"
    shard.write_bytes(shard.read_bytes()[:40])  # shorter than the cached index says
    with pytest.raises(
        CorruptShardError, match=r"shard c/0/0/0 in array '0/vertices'.*shorter than its index"
    ):
        reader.get_many(keys)
    assert "0/vertices/c/0/0/0" not in reader._indexes and keys[0] not in reader._cells


def test_evicted_indexes_take_their_locations_with_them(stores, monkeypatch):
    monkeypatch.setattr(shards, "MAX_INDEX_BYTES", 3 * (2 * 8 * 8 + 64))  # three indexes of 8 cells
    plain = LocalBackend(stores / "plain.zarr")
    reader = _reader(stores / "two.zarr")
    keys = _cell_keys(plain)
    assert reader.get_many(keys) == plain.get_many(keys)
    assert len(reader._indexes) == 3
    located = {skey for skey, _, _ in reader._cells.values()}
    assert located <= set(reader._indexes)
    assert reader.get_many(keys[:4]) == plain.get_many(keys[:4])
    assert reader.get_many(keys[-4:]) == plain.get_many(keys[-4:])
