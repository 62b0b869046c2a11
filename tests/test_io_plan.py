"""A query fetches exactly the cells it plans: intersecting listed chunks, asked-for arrays, one batch."""

from __future__ import annotations

import numpy as np

import zarr_vectors as zv
from zarr_vectors.engine.read import plan_box


class CountingBackend:
    """Wraps a backend and records every batch of keys read."""

    def __init__(self, inner):
        self.inner = inner
        self.description = inner.description
        self.batches: list[list[str]] = []

    def get_many(self, keys):
        self.batches.append(list(keys))
        return self.inner.get_many(keys)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def _open_counting(path):
    ds = zv.open(path)
    ds.level(0)  # metadata is read here, before counting starts
    counter = CountingBackend(ds._backend)
    ds.level(0).backend = counter
    return ds, counter


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
    ds, counter = _open_counting(path)
    lo, hi = np.array([120.0, 330.0, 510.0]), np.array([260.0, 390.0, 540.0])
    res = ds.query(bbox=(lo, hi), attributes=["a"])
    assert len(counter.batches) == 1
    keys = counter.batches[0]
    chunks = {(i, j, k) for i in (1, 2) for j in (3,) for k in (5,)}
    cells = {f"{i}/{j}/{k}" for i, j, k in chunks}
    expected = {f"0/{arr}/c/{c}" for arr in ("vertices", "vertex_attributes/a") for c in cells}
    expected |= {f"0/vertex_fragments/c/{c}" for c in cells}  # every chunk is cut by this box
    assert set(keys) == expected and len(keys) == len(expected)
    assert not any("vertex_attributes/b" in k for k in keys)
    mask = np.all((pos >= lo) & (pos <= hi), axis=1)
    assert len(res) == int(mask.sum())


def test_wholly_covered_chunks_skip_the_fragment_index(tmp_path, rng):
    pos = rng.uniform(0, 400, (20_000, 2))
    path = tmp_path / "s.zarr"
    zv.write_points(path, pos, chunk_shape=100, bin_shape=25, bounds=([0, 0], [400, 400]))
    ds, counter = _open_counting(path)
    lo, hi = np.array([50.0, 95.0]), np.array([305.0, 205.0])
    plan = plan_box(ds.level(0), lo, hi)
    assert sorted(map(tuple, plan.full.tolist())) == [(1, 1), (2, 1)]
    assert len(plan.partial) == 4 * 3 - 2
    ds.query(bbox=(lo, hi))
    frag_keys = [k for k in counter.batches[0] if "vertex_fragments" in k]
    assert len(frag_keys) == len(plan.partial)
    assert "0/vertex_fragments/c/1/1" not in frag_keys


def test_empty_chunks_are_never_fetched(tmp_path):
    pos = np.array([[5.0, 5.0], [95.0, 95.0]])
    path = tmp_path / "s.zarr"
    zv.write_points(path, pos, chunk_shape=10, bounds=([0, 0], [100, 100]))
    ds, counter = _open_counting(path)
    res = ds.query(bbox=([0, 0], [100, 100]))
    assert len(res) == 2
    assert sorted(counter.batches[0]) == ["0/vertices/c/0/0", "0/vertices/c/9/9"]
