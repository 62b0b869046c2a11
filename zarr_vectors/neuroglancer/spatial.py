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

__all__ = [
    "NESTED",
    "SAMPLE",
    "coarser_copies",
    "crossed_cells",
    "group_by_cell",
    "index_mode",
    "match_rows",
    "sample_levels",
    "segments_meet_box",
    "thresholds",
]

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


def _void_keys(rows: np.ndarray) -> np.ndarray:
    rows = np.ascontiguousarray(np.asarray(rows, np.float64).reshape(len(rows), -1))
    return rows.view(np.dtype((np.void, rows.dtype.itemsize * rows.shape[1]))).ravel()


def match_rows(table: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """For each row of ``queries`` the index of an equal row of ``table`` (exact values), -1
    when there is none; the j-th of several equal queries gets the j-th equal table row."""
    if not len(queries):
        return np.zeros(0, np.int64)
    if not len(table):
        return np.full(len(queries), -1, np.int64)
    tkeys, qkeys = _void_keys(table), _void_keys(queries)
    order = np.argsort(tkeys, kind="stable")
    first = np.searchsorted(tkeys[order], qkeys, side="left")
    last = np.searchsorted(tkeys[order], qkeys, side="right")
    qorder = np.argsort(qkeys, kind="stable")
    starts = np.searchsorted(qkeys[qorder], qkeys[qorder], side="left")
    rank = np.empty(len(queries), np.int64)
    rank[qorder] = np.arange(len(queries)) - starts
    at = first + rank
    return np.where(at < last, order[np.minimum(at, len(order) - 1)], -1)


def segments_meet_box(p0: np.ndarray, p1: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Whether each segment ``p0[i]``-``p1[i]`` meets the closed box ``[lo, hi]`` (slab test)."""
    d = p1 - p0
    t0 = np.zeros(len(p0))
    t1 = np.ones(len(p0))
    flat = d == 0
    with np.errstate(divide="ignore", invalid="ignore"):
        ta = np.where(flat, -np.inf, (lo - p0) / d)
        tb = np.where(flat, np.inf, (hi - p0) / d)
    inside = np.all(~flat | ((p0 >= lo) & (p0 <= hi)), axis=1)
    t0 = np.maximum(t0, np.max(np.minimum(ta, tb), axis=1))
    t1 = np.minimum(t1, np.min(np.maximum(ta, tb), axis=1))
    return inside & (t0 <= t1)


def crossed_cells(p0: np.ndarray, p1: np.ndarray, box: Any) -> np.ndarray:
    """The distinct cells (m, d) whose closed box meets a segment ``p0[i]``-``p1[i]``:
    ``box(cells)`` gives a cell's ``(lo, hi)`` corners; candidates are the cells of each
    segment's span widened by one, so a segment on a boundary finds both sides."""
    if not len(p0):
        return np.zeros((0, p0.shape[1]), np.int64)
    unit_lo, unit_hi = box(np.zeros((1, p0.shape[1]), np.int64))
    size = unit_hi[0] - unit_lo[0]
    a = np.floor((np.minimum(p0, p1) - unit_lo[0]) / size).astype(np.int64) - 1
    b = np.floor((np.maximum(p0, p1) - unit_lo[0]) / size).astype(np.int64) + 1
    ext = b - a + 1
    n = np.prod(ext, axis=1)
    seg = np.repeat(np.arange(len(p0)), n)
    local = np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n)
    strides = np.cumprod(np.concatenate([np.ones((len(p0), 1), np.int64), ext[:, :0:-1]], axis=1), axis=1)[
        :, ::-1
    ]
    cells = a[seg] + (local[:, None] // strides[seg]) % ext[seg]
    lo, hi = box(cells)
    return np.unique(cells[segments_meet_box(p0[seg], p1[seg], lo, hi)], axis=0)


def group_by_cell(parts: list[Any], names: list[str]) -> dict[tuple[int, ...], Any]:
    """``{cell: (geometry, properties, ids)}`` from pieces ``(cells, geometry, properties,
    ids)`` (properties keyed by ``names``), each cell's rows in the order met (stable)."""
    if not parts or not sum(len(p[0]) for p in parts):
        return {}
    cells = np.concatenate([p[0] for p in parts])
    geom = np.concatenate([p[1] for p in parts])
    props = {n: np.concatenate([p[2][n] for p in parts]) for n in names}
    ids = np.concatenate([p[3] for p in parts])
    order = np.lexsort(cells.T[::-1])
    keys, starts = np.unique(cells[order], axis=0, return_index=True)
    bounds = np.append(starts, len(order))
    out = {}
    for key, a, b in zip(map(tuple, keys.tolist()), bounds[:-1], bounds[1:]):
        rows = order[a:b]
        out[key] = (geom[rows], {n: v[rows] for n, v in props.items()}, ids[rows])
    return out
