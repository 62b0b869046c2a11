"""Sort vertices into chunks, bins and fragments (vectorised).

Within a chunk, rows are ordered by bin (C order), so each bin is one contiguous
row range; with object ids, rows of a bin are further ordered by object id and
each (bin, object) run becomes its own range fragment.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .format.grid import Grid, chunk_coords

__all__ = ["Partition", "partition"]


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


def _argsort_keys(key: np.ndarray, n_keys: int) -> np.ndarray:
    """Argsort of non-negative integer keys below ``n_keys``.

    Radix sort when keys fit 16 bits, else introsort: rows of one bin carry no
    order of their own, and both are deterministic for the same input.
    """
    if n_keys <= 1 << 16:
        return np.argsort(key.astype(np.uint16), kind="stable")
    return np.argsort(key, kind="quicksort")


def partition(positions: np.ndarray, grid: Grid, object_ids: np.ndarray | None = None) -> Partition:
    n_bins = grid.n_bins
    chunks = chunk_coords(positions, grid.chunk_shape)
    cells = chunks - grid.origin
    shape = tuple(int(s) for s in grid.shape)
    lin = np.ravel_multi_index(tuple(cells.T), shape) if len(cells) else np.zeros(0, np.int64)
    key = lin * n_bins + grid.local_bins(positions, chunks)
    n_keys = int(np.prod(shape)) * n_bins
    if object_ids is None:
        order = _argsort_keys(key, n_keys)
    else:
        order = np.lexsort((object_ids, key))
    skey = key[order]
    slin = skey // n_bins
    new_cell = np.ones(len(slin), bool)
    new_cell[1:] = slin[1:] != slin[:-1]
    cell_first = np.flatnonzero(new_cell)
    row_offsets = np.append(cell_first, len(slin)).astype(np.int64)
    cell_lin = slin[cell_first]
    cell_idx = np.stack(np.unravel_index(cell_lin, shape), axis=1).astype(np.int64)
    cell_of_row = np.cumsum(new_cell) - 1
    if object_ids is None:
        k = len(cell_lin)
        counts = np.bincount(cell_of_row * n_bins + skey % n_bins, minlength=k * n_bins).reshape(k, n_bins)
        starts = np.cumsum(counts, axis=1) - counts
        return Partition(
            order=order,
            cells=cell_idx,
            row_offsets=row_offsets,
            frag_cell=np.repeat(np.arange(k), n_bins),
            frag_local=np.tile(np.arange(n_bins), k),
            frag_start=starts.ravel(),
            frag_count=counts.ravel(),
            cell_frag_offsets=np.arange(k + 1, dtype=np.int64) * n_bins,
            frag_object=None,
            per_bin=True,
        )
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
