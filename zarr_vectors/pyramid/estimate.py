"""Choosing a level without reading vertex data: estimates from level metadata alone.

A level's count in a box is estimated as its ``vertex_count`` times the fraction of the
volume of its listed chunks (``nonempty_chunks``, each clipped to the store's bounds) that
the box covers: vertices are taken as spread evenly over the occupied chunks. Only the
levels' ``zarr.json`` documents are read.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

import numpy as np

from zarr_vectors.errors import InputError, StaleLevelWarning

if TYPE_CHECKING:
    from zarr_vectors.engine import Level, VectorStore

__all__ = ["estimate_count", "estimate_counts", "level_bin_shape", "level_for"]


def level_bin_shape(ds: VectorStore, index: int) -> np.ndarray:
    """Level ``index``'s bin shape as the NGFF transforms record it (the metavertex spacing)."""
    shapes = ds.root.level_bin_shapes
    return np.asarray(shapes[index] if index < len(shapes) else ds.root.effective_bin_shape, np.float64)


def estimate_count(level: Level, lo: np.ndarray | None, hi: np.ndarray | None) -> float:
    """Estimated vertices of ``level`` inside ``[lo, hi]`` (the whole level when ``lo`` is None)."""
    total = float(level.meta.vertex_count)
    chunks = level.vertices.nonempty
    if lo is None or hi is None:
        return total
    if total == 0 or len(chunks) == 0:
        return 0.0
    cs = level.grid.chunk_shape
    b_lo, b_hi = (np.asarray(b, np.float64) for b in level.root.bounds)
    start = np.maximum(chunks * cs, b_lo)
    stop = np.minimum((chunks + 1) * cs, b_hi)
    extent = stop - start
    flat = extent <= 0  # an axis squeezed to a plane by the bounds: covered iff the box meets it
    cover = np.where(
        flat,
        ((start <= hi) & (start >= lo)).astype(np.float64),
        np.clip(np.minimum(stop, hi) - np.maximum(start, lo), 0, None),
    )
    volume = np.prod(np.where(flat, 1.0, extent), axis=1)
    return total * float(np.prod(cover, axis=1).sum() / volume.sum())


def estimate_counts(ds: VectorStore, bbox: Any = None, levels: list[int] | None = None) -> dict[int, float]:
    """Estimated vertex count of every level (or of ``levels``) inside ``bbox`` (None: the whole level)."""
    lo = hi = None
    if bbox is not None:
        from zarr_vectors.engine import parse_box

        lo, hi = parse_box(bbox, ds.ndim, ds.axes)
    return {k: estimate_count(ds.level(k), lo, hi) for k in (ds.levels if levels is None else levels)}


def level_for(
    ds: VectorStore, *, max_vertices: int | None = None, resolution: Any = None, bbox: Any = None
) -> int:
    """The level to read for a vertex budget or a resolution (exactly one of them).

    ``max_vertices``: the finest level whose estimated count in ``bbox`` is at most the
    budget (the coarsest level when none is). ``resolution`` (one length or one per axis):
    the coarsest level whose bin shape is at most that on every axis (level 0 when even its
    bins are larger) - finer levels would add detail smaller than the resolution.
    """
    if (max_vertices is None) == (resolution is None):
        raise InputError("give exactly one of max_vertices= or resolution=")
    levels = [k for k in ds.levels if not ds.is_stale(k)]  # a stale level lacks appended points
    if resolution is not None:
        try:
            res = np.broadcast_to(np.asarray(resolution, np.float64), (ds.ndim,))
        except (TypeError, ValueError) as exc:
            raise InputError(f"resolution must be a number or {ds.ndim} numbers, got {resolution!r}") from exc
        if np.any(~(res > 0)):
            raise InputError(f"resolution must be positive, got {resolution!r}")
        fine_enough = [k for k in levels if np.all(level_bin_shape(ds, k) <= res * (1 + 1e-9))]
        return max(fine_enough) if fine_enough else levels[0]
    if isinstance(max_vertices, bool) or not isinstance(max_vertices, (int, np.integer)) or max_vertices < 0:
        raise InputError(f"max_vertices must be a non-negative integer, got {max_vertices!r}")
    counts = estimate_counts(ds, bbox, levels)
    fits = [k for k in levels if counts[k] <= max_vertices]
    return min(fits) if fits else levels[-1]


def existing_factors(ds: VectorStore) -> tuple[list[Any], list[Any]] | None:
    """Bin growth and chunk steps of the levels above 0 (None without any), so that a
    rebuild after an append makes levels alike."""
    levels = ds.levels
    if len(levels) < 2:
        return None
    bins = [np.asarray(ds.root.level_bin_shapes[k], np.float64) for k in levels]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StaleLevelWarning)  # only the grids are read
        chunks = [ds.level(k).grid.chunk_shape for k in levels]
    factors = [(b / a).tolist() for a, b in zip(bins[:-1], bins[1:])]
    steps = [np.round(b / a).astype(int).tolist() for a, b in zip(chunks[:-1], chunks[1:])]
    return factors, steps
