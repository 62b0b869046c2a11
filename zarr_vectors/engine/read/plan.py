"""The pure half of a box query: which chunks a box touches and covers, the side tests of the
partly covered ones, and the float32-exact bounds. No I/O: from a level's grid and
``nonempty_chunks`` alone, so it is unit-tested on known boxes."""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from zarr_vectors.engine.level import Level
from zarr_vectors.errors import AttributeNotFoundError, InputError

__all__ = [
    "BoxPlan",
    "CellTests",
    "attribute_names",
    "cell_tests",
    "float32_bounds",
    "inside_box",
    "parse_box",
    "plan_box",
    "rows_passing",
]


@dataclass(frozen=True, eq=False)
class BoxPlan:
    """Chunks (absolute coords) a box needs: ``full`` are wholly inside it, ``partial`` cut by it."""

    lo: np.ndarray
    hi: np.ndarray
    full: np.ndarray  # (K1, D)
    partial: np.ndarray  # (K2, D)


def parse_box(bbox: object, ndim: int, axes: Sequence[str] = ()) -> tuple[np.ndarray, np.ndarray]:
    """``(lo, hi)`` float64 (D,) of an inclusive box; lo <= hi on every axis (named from ``axes``)."""
    lo_in: object
    hi_in: object
    try:
        lo_in, hi_in = bbox  # type: ignore[misc]  # any object: one that is not a pair raises, handled below
        lo = np.broadcast_to(np.asarray(lo_in, np.float64), (ndim,)).copy()
        hi = np.broadcast_to(np.asarray(hi_in, np.float64), (ndim,)).copy()
    except (TypeError, ValueError) as exc:
        raise InputError(f"bbox must be (lo, hi) with {ndim} numbers each, got {bbox!r}") from exc
    if np.any(np.isnan(lo)) or np.any(np.isnan(hi)):
        raise InputError(f"bbox contains NaN: {bbox!r}")
    flipped = np.flatnonzero(lo > hi)
    if len(flipped):
        k = int(flipped[0])
        name = f"axis {k} ({axes[k]})" if k < len(axes) else f"axis {k}"
        raise InputError(
            f"bbox has lo > hi on {name}: {lo[k]:g} > {hi[k]:g}; give the low corner first, then the high corner"
        )
    return lo, hi


#: Cells of the bounding block of a level's listed chunks up to which :func:`plan_box` keeps a
#: dense table of them (4 bytes a cell), so that a box's chunks are one slice of it.
DENSE_CELLS = 1 << 20

_listed: dict[int, tuple[weakref.ref[np.ndarray], np.ndarray, np.ndarray]] = {}


def _listed_block(chunks: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """``(first, table)`` for the listed ``chunks`` (K, D): ``table`` spans their bounding block
    from chunk ``first``, holding each listed chunk's row in ``chunks`` and -1 elsewhere (None
    when the block has more than :data:`DENSE_CELLS` cells). Cached per array object, dropped
    with it (chunk listings are replaced, never changed in place)."""
    key = id(chunks)
    got = _listed.get(key)
    if got is not None and got[0]() is chunks:
        return got[1], got[2]
    first = chunks.min(axis=0)
    span = chunks.max(axis=0) - first + 1
    if float(np.prod(span.astype(np.float64))) > DENSE_CELLS:
        return None
    table = np.full(tuple(span.tolist()), -1, np.int32)
    table[tuple((chunks - first).T)] = np.arange(len(chunks), dtype=np.int32)
    if int(np.count_nonzero(table >= 0)) != len(chunks):
        return None  # a chunk listed twice (a corrupt listing): tested row by row instead
    _listed[key] = (weakref.ref(chunks, lambda _: _listed.pop(key, None)), first, table)
    return first, table


def _chunks_in(chunks: np.ndarray, c_lo: np.ndarray, c_hi: np.ndarray) -> np.ndarray:
    """The rows of ``chunks`` (in their order) with ``c_lo <= chunk <= c_hi`` on every axis."""
    block = _listed_block(chunks)
    if block is None:
        return chunks[np.all((chunks >= c_lo) & (chunks <= c_hi), axis=1)]
    first, table = block
    last = first + np.asarray(table.shape) - 1
    a = np.maximum(c_lo, first)
    b = np.minimum(c_hi, last)
    if np.any(a > b):
        return chunks[:0]
    window = tuple(slice(int(x), int(y) + 1) for x, y in zip(a - first, b - first))
    rows = table[window].ravel()
    return chunks[np.sort(rows[rows >= 0])]


def plan_box(level: Level, lo: np.ndarray, hi: np.ndarray) -> BoxPlan:
    """Which listed chunks intersect ``[lo, hi]``, split into wholly and partly covered."""
    grid = level.grid
    chunks = level.vertices.nonempty
    d = grid.ndim
    if np.any(lo > hi) or len(chunks) == 0:
        empty = np.zeros((0, d), np.int64)
        return BoxPlan(lo, hi, empty, empty)
    c_lo = np.floor(lo / grid.chunk_shape)
    c_hi = np.floor(hi / grid.chunk_shape)
    chunks = _chunks_in(chunks, c_lo, c_hi)
    eps = 1e-9 * grid.chunk_shape
    start = chunks * grid.chunk_shape
    inside = np.all((start - eps >= lo) & (start + grid.chunk_shape + eps <= hi), axis=1)
    return BoxPlan(lo, hi, chunks[inside], chunks[~inside])


def attribute_names(level: Level, attributes: Sequence[str] | bool | None) -> list[str]:
    if attributes is None or attributes is True:
        return list(level.vertex_attributes)
    if attributes is False:
        return []
    names = [attributes] if isinstance(attributes, str) else list(attributes)
    unknown = [n for n in names if n not in level.vertex_attributes]
    if unknown:
        raise AttributeNotFoundError("vertex", unknown, level.index, level.vertex_attributes)
    return names


#: The tests of one cell's rows: ``(axis, bound, upper)``, ``upper`` meaning ``p <= bound``.
CellTests = list[tuple[int, Any, bool]]


def cell_tests(
    level: Level, chunks: np.ndarray, n_full: int, lo: np.ndarray, hi: np.ndarray
) -> list[CellTests]:
    """For each of ``chunks`` (the first ``n_full`` wholly inside the box), the sides of the
    box its rows must be tested against: those that cut the chunk's extent (by more than a
    rounding margin). Bounds are numpy scalars of the comparison's type: float32 rows are
    compared with the bounds rounded inwards (:func:`float32_bounds`), which keeps exactly
    the rows the float64 test keeps; other rows with the float64 bounds."""
    out: list[CellTests] = [[] for _ in range(len(chunks))]
    if n_full == len(chunks):
        return out
    cs = level.grid.chunk_shape
    cell_lo = chunks[n_full:] * cs
    margin = 1e-9 * (np.abs(cs) + 1)
    cut_lo = (cell_lo - margin < lo).tolist()
    cut_hi = (cell_lo + cs + margin > hi).tolist()
    lo_b, hi_b = np.asarray(lo, np.float64), np.asarray(hi, np.float64)
    if level.vertices.dtype == np.float32:
        lo_b, hi_b = float32_bounds(lo_b, hi_b)
    lows, highs = list(lo_b), list(hi_b)  # numpy scalars: no Python float re-rounded to float32
    for i, (cl, ch) in enumerate(zip(cut_lo, cut_hi), start=n_full):
        out[i] = [(ax, lows[ax], False) for ax in range(len(cl)) if cl[ax]]
        out[i] += [(ax, highs[ax], True) for ax in range(len(ch)) if ch[ax]]
    return out


def rows_passing(positions: np.ndarray, tests: CellTests) -> np.ndarray | None:
    """Boolean mask of the rows that pass ``tests`` (None: no test, every row passes)."""
    mask: np.ndarray | None = None
    for ax, bound, upper in tests:
        col = positions[:, ax]
        hit = col <= bound if upper else col >= bound
        if mask is None:
            mask = hit
        else:
            mask &= hit
    return mask


def inside_box(
    positions: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    cell_lo: np.ndarray | None = None,
    cell_hi: np.ndarray | None = None,
) -> np.ndarray:
    """``lo <= p <= hi`` on every axis, per row, with the result of comparing in float64.

    With the extent of the rows' chunk (``cell_lo``, ``cell_hi``), a side of an axis the
    chunk lies within (by more than a rounding margin) is not tested: every row passes it.
    float32 rows are compared with the bounds rounded inwards to float32 (see
    :func:`float32_bounds`), which keeps exactly the same rows without widening them.
    """
    lo, hi = np.asarray(lo, np.float64), np.asarray(hi, np.float64)
    if positions.dtype == np.float32:
        lo, hi = float32_bounds(lo, hi)
    out = np.ones(len(positions), bool)
    margin = None if cell_lo is None or cell_hi is None else 1e-9 * (np.abs(cell_hi - cell_lo) + 1)
    for ax in range(positions.shape[1]):
        col = positions[:, ax]
        if margin is None or cell_lo[ax] - margin[ax] < lo[ax]:  # type: ignore[index]
            out &= col >= lo[ax]
        if margin is None or cell_hi[ax] + margin[ax] > hi[ax]:  # type: ignore[index]
            out &= col <= hi[ax]
    return out


def float32_bounds(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """float32 ``(lo32, hi32)`` with ``x >= lo32 <=> x >= lo`` and ``x <= hi32 <=> x <= hi`` for
    every float32 ``x`` (compared in float64 on the right): the smallest float32 not below
    ``lo`` and the largest not above ``hi``. An empty side (``lo32 > hi32``) selects nothing,
    as the float64 test does."""
    with np.errstate(over="ignore"):
        lo32, hi32 = lo.astype(np.float32), hi.astype(np.float32)
    lo32 = np.where(lo32.astype(np.float64) < lo, np.nextafter(lo32, np.float32(np.inf)), lo32)
    hi32 = np.where(hi32.astype(np.float64) > hi, np.nextafter(hi32, np.float32(-np.inf)), hi32)
    return lo32, hi32
