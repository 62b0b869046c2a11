"""The in-memory runs of the point writer: each row's chunk, and rows sorted by chunk, as
numpy brute force gives them, whether the chunks are counted (few) or gathered (sparse)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from zarr_vectors.engine.write import spill
from zarr_vectors.engine.write.partition import cell_indices, sort_keys
from zarr_vectors.format.grid import Grid


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.floats(-1e4, 1e4, allow_nan=False), min_size=3, max_size=90),
    st.sampled_from([0.5, 1.0, 3.7, 100.0]),
    st.sampled_from([1, 2, 4]),
)
def test_cell_indices_agree_with_the_sort_keys(values, chunk, bins_per_axis):
    pos = np.asarray(values[: len(values) // 3 * 3], np.float64).reshape(-1, 3)
    pos[0] = np.floor(pos[0] / chunk) * chunk  # a point on a chunk's corner
    bounds = np.stack([pos.min(axis=0), pos.max(axis=0)])
    grid = Grid.from_bounds(bounds, np.full(3, chunk), np.full(3, chunk / bins_per_axis))
    assert cell_indices(pos, grid).tolist() == (sort_keys(pos, grid) // grid.n_bins).tolist()


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.integers(0, 40), min_size=0, max_size=300),
    st.sampled_from([0, 1, 70_000, 1 << 40]),  # radix or merge sort; counted or gathered
)
def test_a_run_sorts_rows_by_cell_stably_and_delimits_each_cell(small, offset):
    cell = np.asarray(small, np.int64) * (offset or 1) + offset
    column = np.arange(len(cell)) * 3
    run = spill._sorted_run(cell, {"x": column})
    want_order = np.argsort(cell, kind="stable")
    cells, counts = np.unique(cell, return_counts=True)
    assert run.order is not None and run.order.tolist() == want_order.tolist()
    assert run.cells.dtype == np.int64 and run.cells.tolist() == cells.tolist()
    assert run.offsets.tolist() == [0, *np.cumsum(counts).tolist()]
    for i, c in enumerate(cells.tolist()):
        rows = run.column("x", int(run.offsets[i]), int(run.offsets[i + 1]))
        assert rows.tolist() == (np.flatnonzero(cell == c) * 3).tolist()
