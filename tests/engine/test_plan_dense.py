"""plan_box finds a box's listed chunks through a dense table of the listing's bounding block
(cached per listing): the same chunks, in the listing's order, as testing every listed chunk."""

from __future__ import annotations

import numpy as np
import pytest

from zarr_vectors.engine.read import plan


class _Grid:
    def __init__(self, chunk_shape: np.ndarray) -> None:
        self.chunk_shape = chunk_shape
        self.ndim = len(chunk_shape)


class _Vertices:
    def __init__(self, nonempty: np.ndarray) -> None:
        self.nonempty = nonempty


class _Level:
    def __init__(self, nonempty: np.ndarray, chunk_shape: np.ndarray) -> None:
        self.grid = _Grid(chunk_shape)
        self.vertices = _Vertices(nonempty)


def _brute(level: _Level, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    chunks = level.vertices.nonempty
    cs = level.grid.chunk_shape
    hit = np.all((chunks >= np.floor(lo / cs)) & (chunks <= np.floor(hi / cs)), axis=1)
    chunks = chunks[hit]
    eps = 1e-9 * cs
    start = chunks * cs
    inside = np.all((start - eps >= lo) & (start + cs + eps <= hi), axis=1)
    return chunks[inside], chunks[~inside]


def _listing(rng: np.random.Generator, d: int) -> np.ndarray:
    cells = rng.integers(-6, 7, (400, d))
    cells = np.unique(cells, axis=0)
    return cells[rng.permutation(len(cells))]  # listed in no particular order


@pytest.mark.parametrize("d", [2, 3])
def test_dense_plan_matches_testing_every_listed_chunk(d):
    rng = np.random.default_rng(d)
    cs = rng.uniform(0.5, 3.0, d)
    level = _Level(_listing(rng, d), cs)
    corners = [rng.uniform(-25, 25, d) for _ in range(200)]
    boxes = [(lo, lo + rng.uniform(0, 20, d)) for lo in corners]
    boxes += [(np.full(d, -1e300), np.full(d, 1e300)), (np.full(d, 1e3), np.full(d, 1e3 + 1))]
    boxes += [(np.full(d, -np.inf), np.full(d, np.inf)), (-cs * 6, -cs * 6)]
    for lo, hi in boxes:
        got = plan.plan_box(level, lo, hi)  # type: ignore[arg-type]  # a stand-in level
        full, partial = _brute(level, lo, hi)
        assert np.array_equal(got.full, full) and np.array_equal(got.partial, partial)
        assert got.full.shape[1] == got.partial.shape[1] == d


def test_a_sparse_or_corrupt_listing_is_tested_chunk_by_chunk(monkeypatch):
    rng = np.random.default_rng(7)
    cs = np.ones(3)
    sparse = _Level(np.array([[0, 0, 0], [5000, 5000, 5000], [-3, 2, 1]]), cs)  # a huge block
    twice = _Level(np.array([[0, 0, 0], [1, 1, 1], [0, 0, 0]]), cs)  # a chunk listed twice
    for level in (sparse, twice):
        for _ in range(50):
            lo = rng.uniform(-5, 5, 3)
            hi = lo + rng.uniform(0, 5000, 3)
            got = plan.plan_box(level, lo, hi)  # type: ignore[arg-type]
            full, partial = _brute(level, lo, hi)
            assert np.array_equal(got.full, full) and np.array_equal(got.partial, partial)
    assert len(plan.plan_box(twice, np.full(3, -1.0), np.full(3, 0.5)).partial) == 2  # type: ignore[arg-type]


def test_the_table_is_cached_per_listing_and_dropped_with_it():
    chunks = np.array([[0, 0], [2, 3]])
    level = _Level(chunks, np.ones(2))
    lo, hi = np.array([0.5, 0.5]), np.array([2.5, 3.5])
    first = plan.plan_box(level, lo, hi)  # type: ignore[arg-type]
    assert id(chunks) in plan._listed
    again = plan.plan_box(level, lo, hi)  # type: ignore[arg-type]
    assert np.array_equal(first.partial, again.partial) and len(again.partial) == 2
    key = id(chunks)
    del level, chunks
    assert key not in plan._listed
