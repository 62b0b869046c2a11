"""Which annotations each cell of a Neuroglancer spatial index holds.

Neuroglancer's annotation format files every annotation in exactly one level of the spatial
index: the coarse levels hold a spatially uniform sample of the annotations themselves, each
finer level only what no coarser level showed. Two ways to get there from a store:

* ``nested``: point clouds whose coarse levels were all built by subsampling (real points,
  every point of level k also a point of level k-1). Index level ``i`` holds the points of its
  store level that the next coarser store level does not hold (a multiset difference by
  coordinates), so a point is shown once, at the coarsest level that has it, and a cell is
  read from two store levels only.
* ``sample``: any other store (averaged points, lines, graphs). The annotations are those of
  level 0; each goes to the index level chosen by a hash of its coordinates against
  cumulative fractions (store level k's share of level 0's vertices), so the coarse levels are
  a deterministic uniform sample of the size the store's levels have. A coarse cell reads
  level 0 under it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from zarr_vectors.pyramid.points import coordinate_hash

__all__ = ["NESTED", "SAMPLE", "coarser_copies", "index_mode", "sample_levels", "thresholds"]

NESTED = "nested"
SAMPLE = "sample"
#: A salt so the index sample is not the pyramid's own choice of points.
_SALT = np.uint64(0x5A17_11DE_C0DE_0001)


def index_mode(ds: Any, levels: list[int], points: bool, objects: bool) -> str:
    """``nested`` when ``levels`` are every level of a point cloud without objects whose coarse
    levels were all built by the subsample strategy (none stale); else ``sample``."""
    if not points or objects or len(levels) < 2 or list(levels) != list(ds.levels):
        return SAMPLE
    metas = [ds.level(k).meta for k in levels[1:]]
    nested = all(m.extra.get("coarsening_algorithm") == "subsample" for m in metas)
    return NESTED if nested else SAMPLE


def thresholds(vertex_counts: list[int]) -> np.ndarray:
    """Cumulative fraction of the annotations shown at index level ``i`` or coarser, for every
    index level but the finest: ``vertex_counts`` are the store levels' counts coarsest first
    (the last is level 0's); the fractions never decrease and never exceed 1."""
    counts = np.asarray(vertex_counts, np.float64)
    frac = np.minimum(1.0, counts[:-1] / max(1.0, counts[-1]))
    return np.maximum.accumulate(frac) if len(frac) else frac


def sample_levels(geometry: np.ndarray, cuts: np.ndarray) -> np.ndarray:
    """The index level (0 coarsest) of each annotation of ``geometry`` (n, width): a uniform
    number in [0, 1) from a hash of its coordinates, placed among ``cuts``
    (:func:`thresholds`). Depends only on the coordinates, so any batching agrees."""
    if not len(geometry):
        return np.zeros(0, np.int64)
    geom = np.ascontiguousarray(np.asarray(geometry, np.float64).reshape(len(geometry), -1))
    h = coordinate_hash((coordinate_hash(geom) ^ _SALT).view(np.float64).reshape(-1, 1))
    u = (h >> np.uint64(11)).astype(np.float64) / float(1 << 53)
    return np.searchsorted(cuts, u, side="right")


def coarser_copies(fine: np.ndarray, coarse: np.ndarray) -> np.ndarray:
    """Mask over the rows of ``fine`` (n, d) that ``coarse`` (m, d) also holds, as multisets
    of exact coordinates: of ``c`` equal rows in ``coarse``, the first ``c`` equal rows of
    ``fine`` (in order) are marked."""
    if not len(fine) or not len(coarse):
        return np.zeros(len(fine), bool)
    width = fine.shape[1]
    both = np.ascontiguousarray(np.concatenate([fine, coarse]).astype(np.float64))
    keys = both.view(np.dtype((np.void, 8 * width))).ravel()
    _, inverse = np.unique(keys, return_inverse=True)
    inverse = inverse.ravel()
    fine_key, coarse_key = inverse[: len(fine)], inverse[len(fine) :]
    in_coarse = np.bincount(coarse_key, minlength=int(inverse.max()) + 1)
    order = np.argsort(fine_key, kind="stable")
    sorted_keys = fine_key[order]
    starts = np.searchsorted(sorted_keys, sorted_keys, side="left")
    rank = np.empty(len(fine), np.int64)
    rank[order] = np.arange(len(fine)) - starts
    return rank < in_coarse[fine_key]
