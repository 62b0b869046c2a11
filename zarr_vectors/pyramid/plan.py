"""Planning a pyramid: each coarse level's bin shape, chunk shape and grid (pure arithmetic).

Level ``k`` is built from level ``k - 1`` with a per-axis *factor* ``f >= 1``:
``bin_k = bin_{k-1} * f``. Its chunk shape is ``root_chunk_shape * scale_k`` with an
integer *chunk scale* per axis. Invariants every plan keeps (checked here):

* ``scale_k`` is a whole multiple of ``scale_{k-1}`` (level k's chunks nest over level
  k-1's, so a coarse chunk is built from whole source chunks);
* ``chunk_k / bin_k`` is a whole number on every axis, at most
  :data:`~zarr_vectors.engine.write.level0.MAX_BINS_PER_CHUNK` bins per chunk;
* with ``chunk_scale="auto"`` each level's chunks grow by ``round(f)`` (raised until the
  bins tile them), so the number of vertices per chunk stays roughly constant instead of
  the coarse levels exploding into many tiny chunks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from zarr_vectors.engine import MAX_BINS_PER_CHUNK
from zarr_vectors.errors import InputError
from zarr_vectors.format.grid import Grid

__all__ = ["LevelPlan", "factor_vector", "plan_levels"]

#: Largest chunk-scale step searched for bins that tile the chunk.
_MAX_STEP = 64


@dataclass(frozen=True, eq=False)
class LevelPlan:
    """Where and how level ``index`` is built from level ``parent``."""

    index: int
    parent: int
    factor: np.ndarray  # (D,) bin growth from the parent
    bin_shape: np.ndarray  # (D,)
    chunk_scale: np.ndarray  # (D,) int64, against the root chunk shape
    grid: Grid

    @property
    def chunk_shape(self) -> np.ndarray:
        return self.grid.chunk_shape


def factor_vector(value: Any, ndim: int, where: str) -> np.ndarray:
    """A factor as ``(D,)`` floats: one number or one per axis, each >= 1, at least one > 1."""
    try:
        arr = np.broadcast_to(np.asarray(value, dtype=np.float64), (ndim,)).copy()
    except (TypeError, ValueError) as exc:
        raise InputError(f"{where} must be a number or {ndim} numbers, got {value!r}") from exc
    if not np.all(np.isfinite(arr)) or np.any(arr < 1) or not np.any(arr > 1):
        raise InputError(f"{where} must be >= 1 on every axis and > 1 on at least one, got {arr.tolist()}")
    return arr


def _tiles(chunk: float, bin_edge: float) -> bool:
    ratio = chunk / bin_edge
    return abs(ratio - round(ratio)) <= 1e-9 * max(ratio, 1.0) and round(ratio) >= 1


def _auto_step(chunk: float, bin_edge: float, factor: float) -> int:
    """Smallest integer step >= round(factor) whose grown chunk the bin tiles."""
    for step in range(max(1, int(round(factor))), _MAX_STEP + 1):
        if _tiles(chunk * step, bin_edge):
            return step
    raise InputError(
        f"no chunk scale up to {_MAX_STEP} makes chunk edge {chunk} a whole multiple of bin edge {bin_edge}; "
        "choose factors whose products divide the chunk shape (e.g. 2 or 4), or give chunk_scale explicitly"
    )


def _step_vector(value: Any, ndim: int, where: str) -> np.ndarray:
    arr = np.broadcast_to(np.asarray(value), (ndim,))
    if arr.dtype.kind not in "iuf" or np.any(arr < 1) or np.any(arr != np.round(arr)):
        raise InputError(f"{where} must be a positive integer or {ndim} of them, got {value!r}")
    return arr.astype(np.int64)


def plan_levels(
    *,
    root_chunk_shape: np.ndarray,
    bounds: np.ndarray,
    first_bin: np.ndarray,
    first_scale: np.ndarray,
    first_index: int,
    factors: Sequence[Any],
    chunk_scale: Any = "auto",
) -> list[LevelPlan]:
    """Plans of the levels ``first_index + 1 ...``, one per factor.

    ``first_bin`` / ``first_scale`` describe level ``first_index`` (the source of the first
    new level). ``chunk_scale`` is ``"auto"``, ``None`` (keep the source chunk shape), or
    one step per factor (a positive integer or one per axis) multiplying the previous
    level's chunk shape.
    """
    root_cs = np.asarray(root_chunk_shape, np.float64)
    ndim = len(root_cs)
    if isinstance(factors, (str, bytes)) or not isinstance(factors, Sequence) or not factors:
        raise InputError(f"factors must be a non-empty list (one factor per new level), got {factors!r}")
    steps: list[Any]
    if chunk_scale == "auto" or chunk_scale is None:
        steps = [chunk_scale] * len(factors)
    elif (
        isinstance(chunk_scale, Sequence)
        and not isinstance(chunk_scale, str)
        and len(chunk_scale) == len(factors)
    ):
        steps = list(chunk_scale)
    else:
        raise InputError(
            f"chunk_scale must be 'auto', None or one step per factor ({len(factors)}), got {chunk_scale!r}"
        )
    bin_shape = np.asarray(first_bin, np.float64)
    scale = np.asarray(first_scale, np.int64)
    plans = []
    for i, (factor, step) in enumerate(zip(factors, steps)):
        index = first_index + 1 + i
        f = factor_vector(factor, ndim, f"factors[{i}]")
        bin_shape = bin_shape * f
        cs = root_cs * scale
        if step == "auto":
            grow = np.array([_auto_step(c, b, g) for c, b, g in zip(cs, bin_shape, f)], np.int64)
        elif step is None:
            grow = np.ones(ndim, np.int64)
        else:
            grow = _step_vector(step, ndim, f"chunk_scale[{i}]")
        scale = scale * grow
        cs = root_cs * scale
        bad = [ax for ax in range(ndim) if not _tiles(cs[ax], bin_shape[ax])]
        if bad:
            raise InputError(
                f"level {index}: chunk shape {cs.tolist()} is not a whole multiple of its bin shape "
                f"{bin_shape.tolist()} on axis {bad[0]}; use chunk_scale='auto' or a larger chunk_scale"
            )
        n_bins = int(np.prod(np.rint(cs / bin_shape)))
        if n_bins > MAX_BINS_PER_CHUNK:
            raise InputError(
                f"level {index}: {n_bins} bins per chunk (chunk {cs.tolist()}, bin {bin_shape.tolist()}); at most "
                f"{MAX_BINS_PER_CHUNK} are allowed: grow the chunks less (chunk_scale) or coarsen more"
            )
        grid = Grid.from_bounds(np.asarray(bounds, np.float64), cs, bin_shape)
        plans.append(LevelPlan(index, index - 1, f, bin_shape.copy(), scale.copy(), grid))
    return plans
