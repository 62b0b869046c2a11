"""``chunk_shape="auto"``: a chunk edge from the data, so that each non-empty chunk holds
about :data:`AUTO_VERTICES_PER_CHUNK` vertices on average.

The rule (``docs/writing.md`` gives the measurements behind the target): chunks are cubes of
edge ``e`` in the data's units, counted from 0 as the format's grid is. For data spread over
its bounds that is the extent-and-count rule ``e = (volume * target / n) ** (1 / d)``
(:func:`expected_chunk_edge`, all that :func:`zarr_vectors.create` can use, as it sees no data
first). For clustered data that edge leaves the clusters' chunks far fuller than the target, so
:func:`auto_chunk_edge` counts the non-empty chunks of a seeded random sample of at most
:data:`SAMPLE_ROWS` vertices (a bitmap of the grid, or a sort of the cell keys) and steps the
edge down in log-log space (by the data's dimension, then by bisection once the target is
bracketed), a few passes over the sample in all. Axes along which the data is flat do not
count as dimensions. A sample misses some sparse chunks, so on large clustered inputs the
true mean per non-empty chunk comes out somewhat below the target.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from zarr_vectors.errors import InputError

__all__ = [
    "AUTO",
    "AUTO_VERTICES_PER_CHUNK",
    "SAMPLE_ROWS",
    "VERTICES_PER_CHUNK_RANGE",
    "chunk_fill_warning",
    "auto_chunk_edge",
    "auto_chunk_shape",
    "chunk_shape_of",
    "expected_chunk_edge",
    "is_auto",
    "mean_chunk_count",
]

AUTO = "auto"
#: Mean vertices per non-empty chunk ``chunk_shape="auto"`` aims at (see ``docs/writing.md``).
AUTO_VERTICES_PER_CHUNK = 16_384
#: Vertices per non-empty chunk (their mean) outside which ``zarr-vectors info`` warns: box
#: queries cost well above their best per kept row there (``docs/writing.md``).
VERTICES_PER_CHUNK_RANGE = (2_048, 131_072)
#: Vertices the rule looks at (a seeded random sample of larger inputs).
SAMPLE_ROWS = 1 << 18
#: The smallest edge the rule picks: the data's largest extent / 2**_DEPTH.
_DEPTH = 16
#: Grids of at most this many chunks along every axis get the edge that wastes least (``_snap``).
_SNAP_BELOW = 8
#: Passes over the sample at most (each counts its non-empty chunks at one edge).
_STEPS = 8
#: Stop when the measured mean is within this of the target (log: about 10 %).
_TOLERANCE = 0.1
#: Most chunks a grid may have along all axes together (the rule raises the edge to stay below).
_MAX_CELLS = 1 << 30


def is_auto(chunk_shape: Any) -> bool:
    """Whether ``chunk_shape`` asks for the automatic rule."""
    return isinstance(chunk_shape, str) and chunk_shape == AUTO


def _round_edge(edge: float) -> float:
    """``edge`` rounded to three significant digits."""
    digits = 2 - math.floor(math.log10(edge))
    return float(round(edge, digits)) or edge


def _snap(edge: float, bounds: np.ndarray) -> float:
    """An edge within 15 % of ``edge`` (three significant digits) whose chunks, counted from 0
    as the format's grid is, cover ``bounds`` with the least waste: the score is the log of
    the covered volume over the bounds' volume plus the log distance from ``edge``, both in
    volume. Used for data that fits one chunk (an edge just above the extent would often
    straddle a multiple of itself); grids of more than ``_SNAP_BELOW`` chunks along an axis are
    left as they are."""
    live = bounds[1] > bounds[0]
    lo, hi = bounds[0][live], bounds[1][live]
    candidates = np.unique([_round_edge(float(e)) for e in edge * np.exp(np.linspace(-0.14, 0.14, 57))])
    if not len(lo) or np.max((hi - lo) / edge) > _SNAP_BELOW:
        return _round_edge(edge)
    with np.errstate(over="ignore", invalid="ignore"):
        chunks = np.floor(hi / candidates[:, None]) - np.floor(lo / candidates[:, None]) + 1
        waste = np.sum(np.log(chunks * candidates[:, None] / (hi - lo)), axis=1)
    score = waste + len(lo) * np.abs(np.log(candidates / edge))  # both in log volume
    score[~np.isfinite(score)] = np.inf
    return float(candidates[int(np.argmin(score))]) if np.isfinite(score).any() else _round_edge(edge)


def auto_chunk_shape(positions: np.ndarray, bounds: Any, bin_shape: np.ndarray | None = None) -> np.ndarray:
    """(D,) chunk shape for ``positions`` (N >= 1, D) in ``bounds`` (2, D): the edge of
    :func:`auto_chunk_edge` on every axis, or with ``bin_shape`` the nearest whole number of
    bins at or above it (at least one bin) per axis."""
    if not len(positions):
        raise InputError(
            "chunk_shape='auto' needs the data to size the chunks: give a chunk_shape, or to "
            "create() bounds and expected_vertices"
        )
    edge = auto_chunk_edge(positions, bounds)
    return chunk_shape_of(edge, positions.shape[1], bin_shape)


def chunk_shape_of(edge: float, ndim: int, bin_shape: np.ndarray | None = None) -> np.ndarray:
    """(ndim,) chunks of edge ``edge``, each rounded up to a whole number of ``bin_shape`` bins."""
    if bin_shape is None:
        return np.full(ndim, edge)
    bs = np.broadcast_to(np.asarray(bin_shape, np.float64), (ndim,))
    return bs * np.maximum(1.0, np.ceil(edge / bs - 1e-9))


def _grid_cap(span: np.ndarray, edge: float) -> float:
    """``edge`` raised so that the grid over ``span`` has at most ``_MAX_CELLS`` chunks."""
    while math.prod(int(s // edge) + 1 for s in span) > _MAX_CELLS:
        edge *= 2.0
    return edge


def expected_chunk_edge(bounds: Any, count: int, target: int = AUTO_VERTICES_PER_CHUNK) -> float:
    """The cube edge that puts ``target`` of ``count`` vertices spread evenly over ``bounds``
    ((2, D), inclusive) in each chunk; axes of zero extent do not count."""
    b = np.asarray(bounds, np.float64)
    span = b[1] - b[0]
    live = span[span > 0]
    if not len(live):
        return 1.0
    if count <= target:
        return _snap(_grid_cap(span, float(np.max(span)) * 1.001), b)
    edge = float(np.exp((np.log(live).sum() + math.log(target / count)) / len(live)))
    return _round_edge(_grid_cap(span, max(edge, float(np.max(live)) * 1e-9)))


def mean_chunk_count(positions: np.ndarray, chunk_shape: Any) -> float:
    """Vertices per non-empty chunk of ``chunk_shape`` (counted from 0, as the format's grid
    is), their mean over the non-empty chunks: exact."""
    return len(positions) / max(_nonempty(np.asarray(positions, np.float64), chunk_shape), 1)


def _nonempty(rows: np.ndarray, chunk_shape: Any) -> int:
    """Distinct chunks of ``chunk_shape`` from 0 that ``rows`` (M, D) fall in."""
    cells = np.floor(rows / np.asarray(chunk_shape, np.float64)).astype(np.int64)
    cols = [cells[:, k] for k in range(cells.shape[1])]  # column-wise: a strided axis-0 reduction is slow
    cells -= np.array([c.min() for c in cols])
    dims = tuple(int(c.max()) + 1 for c in cols)
    size = math.prod(dims)
    if size <= 8 * len(rows):  # a bitmap of the grid: no sort
        seen = np.zeros(size, bool)
        seen[np.ravel_multi_index(tuple(cells.T), dims)] = True
        return int(np.count_nonzero(seen))
    if size < 1 << 62:
        return len(np.unique(np.ravel_multi_index(tuple(cells.T), dims)))
    return len(np.unique(cells, axis=0))


def _sample(positions: np.ndarray) -> np.ndarray:
    n = len(positions)
    if n <= SAMPLE_ROWS:
        return np.asarray(positions, np.float64)
    rows = np.sort(np.random.default_rng(0).integers(0, n, SAMPLE_ROWS))
    return np.asarray(positions[rows], np.float64)


def auto_chunk_edge(
    positions: np.ndarray,
    bounds: Any,
    *,
    target: int = AUTO_VERTICES_PER_CHUNK,
) -> float:
    """The cube edge for ``positions`` (N, D) inside ``bounds`` (2, D) that puts about
    ``target`` vertices in each non-empty chunk, on average (see the module's docstring),
    rounded to three significant digits."""
    if target < 1:
        raise InputError(f"the vertices per chunk target must be positive, got {target}")
    b = np.asarray(bounds, np.float64)
    n = len(positions)
    edge = expected_chunk_edge(b, n, target)  # spread over the bounds: at least target per chunk
    span = b[1] - b[0]
    d = int(np.count_nonzero(span > 0))
    if n <= target or not d:
        return edge
    sample = _sample(positions)
    floor = float(np.max(span)) * 2.0**-_DEPTH
    goal = math.log(target)
    seen: list[tuple[float, float]] = []  # (log edge, log mean per non-empty chunk)
    for _ in range(_STEPS):
        mean = n / _nonempty(sample, edge)  # a sample misses some sparse chunks: >= the true mean
        seen.append((math.log(edge), math.log(mean)))
        if abs(seen[-1][1] - goal) < _TOLERANCE:
            break
        below = [s for s in seen if s[1] < goal]
        above = [s for s in seen if s[1] >= goal]
        if below and above:  # bisect the closest bracketing edges (the counts are jagged)
            edge = math.exp((max(below)[0] + min(above)[0]) / 2)
        else:  # counts grow as edge ** d where the data fills space
            edge = math.exp(seen[-1][0] + (goal - seen[-1][1]) / d)
        edge = max(edge, floor)
    # counts need not grow monotonically with the edge (a cluster split by a chunk boundary
    # or not): keep the measured edge closest to the target
    best = min(seen, key=lambda s: abs(s[1] - goal))
    return _round_edge(_grid_cap(span, math.exp(best[0])))


def chunk_fill_warning(vertices: int, chunks: int) -> str | None:
    """Why ``vertices`` in ``chunks`` non-empty chunks is far from
    :data:`VERTICES_PER_CHUNK_RANGE` (their mean), or None when it is not (or cannot be better:
    one chunk, or fewer vertices than the range's low end)."""
    low, high = VERTICES_PER_CHUNK_RANGE
    if chunks < 1:
        return None
    mean = vertices / chunks
    if mean < low and chunks > 1 and vertices >= low:
        return (
            f"{mean:,.0f} vertices per non-empty chunk is far below {low:,} .. {high:,}: box queries "
            "pay per chunk; rewrite with a larger chunk_shape or chunk_shape='auto'"
        )
    if mean > high:
        return (
            f"{mean:,.0f} vertices per non-empty chunk is far above {low:,} .. {high:,}: small boxes "
            "read many rows they do not keep; rewrite with a smaller chunk_shape or chunk_shape='auto'"
        )
    return None
