"""Sort vertices into chunks, bins and fragments (vectorised).

Within a chunk, rows are ordered by bin (C order), so each bin is one contiguous
row range; with object ids, rows of a bin are further ordered by object id and
each (bin, object) run becomes its own range fragment.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from zarr_vectors.format.grid import Grid

__all__ = ["cell_indices", "sort_keys", "Partition", "partition"]


@dataclass(frozen=True, eq=False)
class Partition:
    """Where each vertex goes.

    ``order`` lists input rows in stored order. Cell ``k`` (index ``cells[k]``)
    holds stored rows ``row_offsets[k]:row_offsets[k + 1]``. Fragment ``j`` of
    the whole level is stored rows ``frag_start[j]:frag_start[j] + frag_count[j]``
    (relative to its cell) in cell ``frag_cell[j]``, with local index
    ``frag_local[j]``; ``cell_frag_offsets`` delimits each cell's fragments.
    """

    order: np.ndarray
    cells: np.ndarray  # (K, D) cell indices
    row_offsets: np.ndarray  # (K + 1,)
    frag_cell: np.ndarray
    frag_local: np.ndarray
    frag_start: np.ndarray
    frag_count: np.ndarray
    cell_frag_offsets: np.ndarray  # (K + 1,)
    frag_object: np.ndarray | None  # object id of each fragment, when objects are given
    per_bin: bool  # fragments are exactly the chunk's bins in C order (empty bins included)


def _per_bin(order: np.ndarray, cells: np.ndarray, row_offsets: np.ndarray, counts: np.ndarray) -> Partition:
    k, n_bins = counts.shape
    starts = np.cumsum(counts, axis=1) - counts
    return Partition(
        order=order,
        cells=cells,
        row_offsets=row_offsets,
        frag_cell=np.repeat(np.arange(k), n_bins),
        frag_local=np.tile(np.arange(n_bins), k),
        frag_start=starts.ravel(),
        frag_count=counts.ravel(),
        cell_frag_offsets=np.arange(k + 1, dtype=np.int64) * n_bins,
        frag_object=None,
        per_bin=True,
    )


def _partition_dense(key: np.ndarray, n_keys: int, grid: Grid) -> Partition:
    """Per-bin partition by counting: no sorted copy of the keys is made."""
    n_bins = grid.n_bins
    counts_all = np.bincount(key, minlength=n_keys).reshape(-1, n_bins)
    per_cell = counts_all.sum(axis=1)
    cell_lin = np.flatnonzero(per_cell)
    row_offsets = np.zeros(len(cell_lin) + 1, np.int64)
    np.cumsum(per_cell[cell_lin], out=row_offsets[1:])
    compact = len(cell_lin) * n_bins
    if n_keys > 1 << 16 >= compact:
        # Renumber occupied cells 0..K-1 so the keys fit 16 bits and radix sort applies.
        rank = np.cumsum(per_cell > 0) - 1
        small = np.empty(len(key), np.uint16)
        for start in range(0, len(key), _BLOCK):  # in blocks: no full-size temporaries
            part = key[start : start + _BLOCK]
            small[start : start + len(part)] = rank[part // n_bins] * n_bins + part % n_bins
        order = np.argsort(small, kind="stable")
    else:
        order = _argsort_keys(key, n_keys)
    return _per_bin(order, _cells(cell_lin, grid), row_offsets, counts_all[cell_lin])


def _argsort_keys(key: np.ndarray, n_keys: int) -> np.ndarray:
    """Argsort of non-negative integer keys below ``n_keys``.

    Radix sort when keys fit 16 bits, else introsort: rows of one bin carry no
    order of their own, and both are deterministic for the same input.
    """
    if n_keys <= 1 << 16:
        return np.argsort(key.astype(np.uint16), kind="stable")
    return np.argsort(key, kind="quicksort")


#: Rows per block when computing sort keys, so temporaries stay a few MB whatever N is.
_BLOCK = 1 << 16


def sort_keys(positions: np.ndarray, grid: Grid) -> np.ndarray:
    """``cell_linear * n_bins + local_bin`` of every row (int64), computed block by block.

    Chunk and bin of a coordinate ``x`` are ``c = floor(x / chunk)`` and
    ``clip(floor((x - c * chunk) / bin), 0, bins - 1)`` in float64, the same formulas
    :meth:`Grid.local_bins` and the query planner use. Integer sums are accumulated
    in float64, exact below 2**53 (the grid is capped far below that).
    """
    n_bins = grid.n_bins
    cs, bs, nb = grid.chunk_shape, grid.bin_shape, grid.bins
    shape, origin = grid.shape, grid.origin
    key = np.empty(len(positions), np.int64)
    for start in range(0, len(positions), _BLOCK):
        block = positions[start : start + _BLOCK]
        cell = np.zeros(len(block))
        binl = np.zeros(len(block))
        for ax in range(grid.ndim):
            x = block[:, ax].astype(np.float64)
            c = np.floor(x / cs[ax])
            x -= c * cs[ax]
            x /= bs[ax]
            np.floor(x, out=x)
            np.clip(x, 0, nb[ax] - 1, out=x)
            cell *= shape[ax]
            cell += c - origin[ax]
            binl *= nb[ax]
            binl += x
        cell *= n_bins
        cell += binl
        key[start : start + len(block)] = cell
    return key


def cell_indices(positions: np.ndarray, grid: Grid) -> np.ndarray:
    """``sort_keys(positions, grid) // grid.n_bins`` (each row's linear cell, int64) without
    the bins: the same float64 chunk formula, so the two always agree."""
    cs, shape, origin = grid.chunk_shape, grid.shape, grid.origin
    out = np.empty(len(positions), np.int64)
    for start in range(0, len(positions), _BLOCK):
        block = positions[start : start + _BLOCK]
        cell = np.zeros(len(block))
        for ax in range(grid.ndim):
            c = np.floor(block[:, ax].astype(np.float64) / cs[ax])
            cell *= shape[ax]
            cell += c - origin[ax]
        out[start : start + len(block)] = cell
    return out


def _cells(cell_lin: np.ndarray, grid: Grid) -> np.ndarray:
    shape = tuple(int(s) for s in grid.shape)
    return np.stack(np.unravel_index(cell_lin, shape), axis=1).astype(np.int64).reshape(-1, grid.ndim)


def partition(positions: np.ndarray, grid: Grid, object_ids: np.ndarray | None = None) -> Partition:
    """Stored order, cells and fragments of ``positions`` on ``grid``.

    Without objects each chunk gets one range fragment per bin (empty bins too);
    with objects, one range fragment per (bin, object) run.
    """
    n_bins = grid.n_bins
    key = sort_keys(positions, grid)
    n_keys = grid.n_cells * n_bins
    if object_ids is None and n_keys <= 4 * len(key) + (1 << 20):
        return _partition_dense(key, n_keys, grid)
    order = _argsort_keys(key, n_keys) if object_ids is None else np.lexsort((object_ids, key))
    skey = key[order]
    del key
    slin = skey // n_bins
    new_cell = np.ones(len(slin), bool)
    new_cell[1:] = slin[1:] != slin[:-1]
    cell_first = np.flatnonzero(new_cell)
    row_offsets = np.append(cell_first, len(slin)).astype(np.int64)
    cell_lin = slin[cell_first]
    cell_idx = _cells(cell_lin, grid)
    cell_of_row = np.cumsum(new_cell) - 1
    if object_ids is None:
        k = len(cell_lin)
        counts = np.bincount(cell_of_row * n_bins + skey % n_bins, minlength=k * n_bins).reshape(k, n_bins)
        return _per_bin(order, cell_idx, row_offsets, counts)
    sobj = object_ids[order]
    new_frag = new_cell.copy()
    new_frag[1:] |= (skey[1:] != skey[:-1]) | (sobj[1:] != sobj[:-1])
    frag_first = np.flatnonzero(new_frag)
    frag_cell = cell_of_row[frag_first]
    cell_frag_offsets = np.searchsorted(frag_cell, np.arange(len(cell_lin) + 1)).astype(np.int64)
    return Partition(
        order=order,
        cells=cell_idx,
        row_offsets=row_offsets,
        frag_cell=frag_cell,
        frag_local=np.arange(len(frag_first)) - cell_frag_offsets[frag_cell],
        frag_start=frag_first - row_offsets[frag_cell],
        frag_count=np.diff(np.append(frag_first, len(skey))),
        cell_frag_offsets=cell_frag_offsets,
        frag_object=sobj[frag_first],
        per_bin=False,
    )
