"""The spatial-index helpers against brute force."""

from __future__ import annotations

import itertools

import numpy as np

from zarr_vectors.neuroglancer.spatial import (
    coarser_copies,
    crossed_cells,
    match_rows,
    sample_levels,
    segments_meet_box,
    thresholds,
)

RNG = np.random.default_rng(9)


def test_coarser_copies_is_a_multiset_difference() -> None:
    fine = RNG.integers(0, 4, (200, 2)).astype(np.float64)  # many duplicates
    coarse = fine[RNG.choice(200, 60, replace=False)]
    hidden = coarser_copies(fine, coarse)
    assert hidden.sum() == 60
    left = [tuple(r) for r in fine[~hidden].tolist()]
    want = [tuple(r) for r in fine.tolist()]
    for r in coarse.tolist():
        want.remove(tuple(r))
    assert sorted(left) == sorted(want)
    assert not coarser_copies(fine, np.zeros((0, 2))).any()


def test_match_rows_pairs_equal_rows_one_to_one() -> None:
    table = RNG.integers(0, 3, (50, 2)).astype(np.float64)
    queries = np.concatenate([table[RNG.permutation(50)[:30]], [[9.0, 9.0]]])
    at = match_rows(table, queries)
    assert at[-1] == -1
    assert len(set(at[:-1].tolist())) == 30  # never the same table row twice
    assert np.array_equal(table[at[:-1]], queries[:-1])


def test_segments_meet_box_agrees_with_dense_sampling() -> None:
    p0 = RNG.uniform(-2, 3, (400, 3))
    p1 = RNG.uniform(-2, 3, (400, 3))
    p1[:20] = p0[:20]  # points
    p1[20:40, 0] = p0[20:40, 0]  # parallel to an axis
    lo, hi = np.zeros(3), np.ones(3)
    got = segments_meet_box(p0, p1, lo, hi)
    t = np.linspace(0, 1, 4001)[:, None, None]
    seg = p0 + t * (p1 - p0)
    sampled = np.any(np.all((seg >= lo) & (seg <= hi), axis=2), axis=0)
    assert np.all(got >= sampled)  # sampling can only miss a meeting
    assert np.count_nonzero(got & ~sampled) <= 2  # and only where it grazes the box
    assert got.any() and not got.all()


def test_crossed_cells_are_the_cells_a_segment_meets() -> None:
    p0 = RNG.uniform(0, 10, (30, 3))
    p1 = p0 + RNG.normal(0, 2, (30, 3))
    size = np.array([2.0, 2.5, 1.0])

    def box(cells: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return cells * size, (cells + 1) * size

    got = {tuple(c) for c in crossed_cells(p0, p1, box).tolist()}
    want = set()
    for cell in itertools.product(range(-3, 9), range(-3, 7), range(-4, 16)):
        lo, hi = box(np.array([cell]))
        if segments_meet_box(p0, p1, lo[0], hi[0]).any():
            want.add(cell)
    assert got == want


def test_sample_levels_follow_the_thresholds() -> None:
    cuts = thresholds([100, 1000, 10000])
    assert cuts.tolist() == [0.01, 0.1]
    levels = sample_levels(RNG.uniform(0, 1, (20000, 3)), cuts)
    share = np.bincount(levels, minlength=3) / 20000
    assert abs(share[0] - 0.01) < 0.004 and abs(share[1] - 0.09) < 0.01
    pts = RNG.uniform(0, 1, (50, 3))
    assert np.array_equal(sample_levels(pts, cuts), sample_levels(pts[::-1], cuts)[::-1])  # order-free
