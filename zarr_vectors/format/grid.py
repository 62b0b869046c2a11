"""Chunk, cell and bin arithmetic of the spatial grid.

Chunk coordinates are absolute: ``chunk = floor(position / chunk_shape)`` per axis.
A chunk's bytes live in the cell ``chunk - origin`` of each per-chunk array, where
``origin = floor(bounds_min / chunk_shape)``. Bounds are inclusive, so the grid has
``floor(bounds_max / chunk_shape) - origin + 1`` cells per axis.

Every comparison below is done in float64 with monotone operations, so a point
``p`` with ``lo <= p <= hi`` always maps to a chunk and bin between those of
``lo`` and ``hi``: a planner built on these functions never misses a point.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from zarr_vectors.errors import InputError

__all__ = [
    "Grid",
    "chunk_coords",
    "chunk_key",
    "parse_chunk_key",
    "cell_key",
    "bins_per_chunk",
]


#: The largest chunk coordinate a grid may reach on either side of 0: cells per axis
#: (``hi - lo + 1``) then stay well inside int64.
MAX_CHUNK_COORD = 2**61


def chunk_coords(positions: np.ndarray, chunk_shape: np.ndarray) -> np.ndarray:
    """Absolute chunk coordinates (N, D) int64 of positions (N, D)."""
    return np.floor(np.asarray(positions, dtype=np.float64) / chunk_shape).astype(np.int64)


def chunk_key(coords: tuple[int, ...] | np.ndarray) -> str:
    """Dot-separated absolute chunk key, e.g. ``"2.-1.0"``."""
    return ".".join(str(int(c)) for c in coords)


def parse_chunk_key(key: str) -> tuple[int, ...]:
    return tuple(int(p) for p in key.split("."))


def cell_key(cell: tuple[int, ...] | np.ndarray) -> str:
    """Zarr v3 default chunk key of a cell index: ``"c/i/j/k"``."""
    return "c/" + "/".join(str(int(c)) for c in cell)


def bins_per_chunk(chunk_shape: np.ndarray, bin_shape: np.ndarray) -> np.ndarray:
    """Integer bins per chunk on each axis; raises InputError when not an integer."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        ratio = np.asarray(chunk_shape, np.float64) / np.asarray(bin_shape, np.float64)
    rounded = np.rint(ratio)
    if (
        not np.all(np.isfinite(ratio))
        or np.any(rounded < 1)
        or np.any(rounded > 1 << 31)
        or not np.allclose(ratio, rounded, rtol=1e-9, atol=0)
    ):
        raise InputError(
            f"chunk_shape {list(map(float, chunk_shape))} must be a whole multiple of "
            f"bin_shape {list(map(float, bin_shape))} on every axis"
        )
    return rounded.astype(np.int64)


@dataclass(frozen=True, eq=False)
class Grid:
    """The chunk grid of one level: chunk and bin shapes plus the cell origin and extent."""

    chunk_shape: np.ndarray  # (D,) float64
    bin_shape: np.ndarray  # (D,) float64
    origin: np.ndarray  # (D,) int64, absolute chunk coordinates of cell 0
    shape: np.ndarray  # (D,) int64, cells per axis

    @classmethod
    def from_bounds(
        cls, bounds: np.ndarray, chunk_shape: np.ndarray, bin_shape: np.ndarray | None = None
    ) -> Grid:
        cs = np.asarray(chunk_shape, np.float64)
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            ends = np.floor(np.asarray([bounds[0], bounds[1]], np.float64) / cs)
        if not np.all(np.abs(ends) <= MAX_CHUNK_COORD):  # NaN too; the cast below would wrap
            raise InputError(
                f"bounds {np.asarray(bounds[0]).tolist()} .. {np.asarray(bounds[1]).tolist()} with chunk_shape "
                f"{cs.tolist()} reach chunk ±{float(np.max(np.abs(ends))):.3g}, past the {MAX_CHUNK_COORD:.3g} chunks a grid may "
                "span from 0: choose a larger chunk_shape or smaller bounds"
            )
        lo = chunk_coords(np.asarray(bounds[0])[None], cs)[0]
        hi = chunk_coords(np.asarray(bounds[1])[None], cs)[0]
        bs = cs if bin_shape is None else np.asarray(bin_shape, np.float64)
        bins_per_chunk(cs, bs)
        return cls(cs, bs, lo, hi - lo + 1)

    @property
    def ndim(self) -> int:
        return len(self.chunk_shape)

    @cached_property
    def bins(self) -> np.ndarray:
        """Bins per chunk on each axis."""
        return bins_per_chunk(self.chunk_shape, self.bin_shape)

    @cached_property
    def n_bins(self) -> int:
        return math.prod(int(b) for b in self.bins)  # Python ints: a product never wraps

    @property
    def n_cells(self) -> int:
        """Cells in the grid, as a Python int (``np.prod`` of int64 wraps past 2**63)."""
        return math.prod(int(s) for s in self.shape)

    def local_bins(self, positions: np.ndarray, chunks: np.ndarray) -> np.ndarray:
        """C-order bin index of each position inside its chunk (N,) int64."""
        nb = self.bins
        rel = (np.asarray(positions, np.float64) - chunks * self.chunk_shape) / self.bin_shape
        b = np.clip(np.floor(rel).astype(np.int64), 0, nb - 1)
        return np.ravel_multi_index(tuple(b.T), tuple(nb)) if len(b) else np.zeros(0, np.int64)

    def chunk_range(self, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """Inclusive absolute chunk range touched by the box [lo, hi], clipped to the grid."""
        c_lo = np.maximum(chunk_coords(np.asarray(lo)[None], self.chunk_shape)[0], self.origin)
        c_hi = np.minimum(
            chunk_coords(np.asarray(hi)[None], self.chunk_shape)[0], self.origin + self.shape - 1
        )
        if np.any(c_lo > c_hi):
            return None
        return c_lo, c_hi

    def box_bins(self, chunks: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Bins of each chunk that a box ``[lo, hi]`` meets, and those it covers wholly.

        Returns two (K, n_bins) boolean masks in C order of the bin index: ``touched``
        (the bin may hold points of the box) and ``inside`` (every point of the bin
        is in the box). Both are widened by a relative 1e-9 of a bin, so stores
        written with slightly different rounding still give every matching point.
        """
        chunks = np.asarray(chunks, np.int64)
        k = len(chunks)
        touched = np.ones((k, 1), bool)
        inside = np.ones((k, 1), bool)
        for ax in range(self.ndim):
            nb, bs = int(self.bins[ax]), self.bin_shape[ax]
            eps = 1e-9 * bs
            base = chunks[:, ax] * self.chunk_shape[ax]
            idx = np.arange(nb)
            b_lo = np.clip(np.floor((lo[ax] - eps - base) / bs), 0, nb - 1)
            b_hi = np.clip(np.floor((hi[ax] + eps - base) / bs), 0, nb - 1)
            t = (idx >= b_lo[:, None]) & (idx <= b_hi[:, None])
            edges = base[:, None] + np.arange(nb + 1) * bs
            w = (edges[:, :-1] - eps >= lo[ax]) & (edges[:, 1:] + eps <= hi[ax])
            touched = (touched[:, :, None] & t[:, None, :]).reshape(k, -1)
            inside = (inside[:, :, None] & w[:, None, :]).reshape(k, -1)
        return touched, inside
