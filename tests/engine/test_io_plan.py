"""A query fetches exactly the cells it plans: intersecting listed chunks, asked-for arrays, one batch."""

from __future__ import annotations

import numpy as np
import zarr

import zarr_vectors as zv
from tests._io import CountingBackend, open_counting
from zarr_vectors.engine.read.plan import plan_box
from zarr_vectors.storage.resolve import open_backend


def test_small_box_reads_only_its_chunks_in_one_batch(tmp_path, rng):
    pos = rng.uniform(0, 1000, (50_000, 3)).astype(np.float32)
    path = tmp_path / "s.zarr"
    zv.write_points(
        path,
        pos,
        chunk_shape=100,
        bin_shape=25,
        attributes={"a": rng.random(len(pos)), "b": rng.random(len(pos))},
    )
    ds, counter = open_counting(path)
    lo, hi = np.array([120.0, 330.0, 510.0]), np.array([260.0, 390.0, 540.0])
    res = ds.query(bbox=(lo, hi), attributes=["a"])
    assert len(counter.gets) == 1
    keys = counter.gets[0]
    chunks = {(i, j, k) for i in (1, 2) for j in (3,) for k in (5,)}
    cells = {f"{i}/{j}/{k}" for i, j, k in chunks}
    expected = {f"0/{arr}/c/{c}" for arr in ("vertices", "vertex_attributes/a") for c in cells}
    # No fragment index: without objects a partly covered cell is tested row by row on the
    # axes the box cuts it, which costs less than a second read per cell.
    assert set(keys) == expected and len(keys) == len(expected)
    assert not any("vertex_attributes/b" in k for k in keys)
    mask = np.all((pos >= lo) & (pos <= hi), axis=1)
    assert len(res) == int(mask.sum())


def test_box_queries_without_objects_read_no_fragment_index(tmp_path, rng):
    pos = rng.uniform(0, 400, (20_000, 2))
    path = tmp_path / "s.zarr"
    zv.write_points(path, pos, chunk_shape=100, bin_shape=25, bounds=([0, 0], [400, 400]))
    ds, counter = open_counting(path)
    lo, hi = np.array([50.0, 95.0]), np.array([305.0, 205.0])
    plan = plan_box(ds.level(0), lo, hi)
    assert sorted(map(tuple, plan.full.tolist())) == [(1, 1), (2, 1)]
    assert len(plan.partial) == 4 * 3 - 2
    res = ds.query(bbox=(lo, hi))
    assert not [k for k in counter.gets[0] if "vertex_fragments" in k]
    assert len(counter.gets[0]) == len(plan.full) + len(plan.partial)
    mask = np.all((pos >= lo) & (pos <= hi), axis=1)
    assert np.array_equal(np.sort(res.positions, axis=0), np.sort(pos[mask], axis=0))


def test_empty_chunks_are_never_fetched(tmp_path):
    pos = np.array([[5.0, 5.0], [95.0, 95.0]])
    path = tmp_path / "s.zarr"
    zv.write_points(path, pos, chunk_shape=10, bounds=([0, 0], [100, 100]))
    ds, counter = open_counting(path)
    res = ds.query(bbox=([0, 0], [100, 100]))
    assert len(res) == 2
    assert sorted(counter.gets[0]) == ["0/vertices/c/0/0", "0/vertices/c/9/9"]


def test_counting_backend_records_every_call_and_passes_answers_through():
    counter = CountingBackend(open_backend(zarr.storage.MemoryStore(), read_only=False))
    counter.set_many([("a/c/0", b"x"), ("a/zarr.json", b"{}")])
    assert counter.get_many(["a/c/0", "missing"]) == [b"x", None]
    assert counter.get_many(["a/zarr.json"]) == [b"{}"]
    assert sorted(counter.list_dir("a")) == ["c", "zarr.json"]
    counter.delete_many(["a/c/0"])
    assert counter.get_many(["a/c/0"]) == [None]
    assert counter.sets == [["a/c/0", "a/zarr.json"]] and counter.deletes == [["a/c/0"]]
    assert counter.gets == [["a/c/0", "missing"], ["a/zarr.json"], ["a/c/0"]]
    assert counter.lists == ["a"] and counter.cells_read() == ["a/c/0", "a/c/0"]
    counter.clear()
    assert counter.gets == counter.sets == counter.deletes == counter.lists == []


def test_count_io_sees_levels_loaded_before_and_after(tmp_path, rng):
    path = tmp_path / "s.zarr"
    zv.write_points(path, rng.uniform(0, 100, (2000, 3)), chunk_shape=50)
    zv.open(path, mode="r+").build_pyramid([2])
    ds, counter = open_counting(path)  # level 0 loaded before counting, level 1 after
    assert counter.gets == []
    ds.query(level=1)
    assert any(k.startswith("1/") and k.endswith("zarr.json") for k in counter.keys_read())
    assert {k.split("/")[0] for k in counter.cells_read()} == {"1"}
    counter.clear()
    ds.query(level=0)
    assert counter.cells_read() and {k.split("/")[0] for k in counter.cells_read()} == {"0"}
