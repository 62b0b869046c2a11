"""Reducing groups of rows to one row: metavertex positions and per-attribute reductions.

Every function takes ``group`` (N,) ints in ``[0, M)`` naming each row's group (every
group non-empty) and returns (M, ...) rows, vectorised over all groups at once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from zarr_vectors.errors import InputError, check_choice, choice_message

__all__ = ["REDUCTIONS", "Groups", "centroids", "default_reduction", "reduce_rows", "reduction_for"]

#: Attribute reductions a user may choose.
REDUCTIONS = ("mean", "mode", "sum", "min", "max", "first")


def default_reduction(dtype: np.dtype) -> str:
    """``mean`` for floats, ``mode`` for integers (labels, classes, flags)."""
    return "mean" if np.dtype(dtype).kind == "f" else "mode"


def reduction_for(name: str, dtype: np.dtype, chosen: Mapping[str, str] | None) -> str:
    how = (chosen or {}).get(name) or default_reduction(dtype)
    return check_choice(f"the reduction of attribute {name!r}", how, REDUCTIONS)


@dataclass(frozen=True, eq=False)
class Groups:
    """Rows sorted by group: ``order`` (stable; None when the rows already are) and each
    group's ``starts`` (M + 1,) in that order."""

    order: np.ndarray | None
    starts: np.ndarray

    @classmethod
    def of(cls, group: np.ndarray, m: int) -> Groups:
        group = np.asarray(group, np.int64)
        order = np.argsort(group, kind="stable")
        starts = np.searchsorted(group[order], np.arange(m + 1))
        if m and np.any(np.diff(starts) == 0):
            raise InputError("every group must hold at least one row")
        return cls(order, starts)

    @property
    def size(self) -> int:
        return len(self.starts) - 1

    @property
    def counts(self) -> np.ndarray:
        return np.diff(self.starts)

    def sort(self, values: np.ndarray) -> np.ndarray:
        return values if self.order is None else values[self.order]

    def _at(self, values: np.ndarray, ufunc: np.ufunc, dtype: np.dtype | None = None) -> np.ndarray:
        sorted_values = self.sort(values) if dtype is None else self.sort(values).astype(dtype)
        if self.size == 0:
            return sorted_values[:0]
        return ufunc.reduceat(sorted_values, self.starts[:-1], axis=0)

    def sum(self, values: np.ndarray, dtype: np.dtype | None = None) -> np.ndarray:
        return self._at(values, np.add, dtype)

    def min(self, values: np.ndarray) -> np.ndarray:
        return self._at(values, np.minimum)

    def max(self, values: np.ndarray) -> np.ndarray:
        return self._at(values, np.maximum)

    def first(self, values: np.ndarray) -> np.ndarray:
        head = self.starts[:-1]
        return values[head] if self.order is None else values[self.order[head]]

    def mean(self, values: np.ndarray) -> np.ndarray:
        """Float64 means, clipped to each group's [min, max] (rounding can never leave it)."""
        counts = self.counts.reshape((-1,) + (1,) * (values.ndim - 1))
        mean = self.sum(values, np.dtype(np.float64)) / np.maximum(counts, 1)
        return np.clip(mean, self.min(values), self.max(values))

    def mode(self, values: np.ndarray) -> np.ndarray:
        """Most frequent value per group and column; ties go to the smallest value."""
        flat = values.reshape(len(values), -1)
        out = np.empty((self.size, flat.shape[1]), flat.dtype)
        group = np.empty(len(values), np.int64)
        group[slice(None) if self.order is None else self.order] = np.repeat(
            np.arange(self.size), self.counts
        )
        for col in range(flat.shape[1]):
            v = flat[:, col]
            order = np.lexsort((v, group))
            g, sv = group[order], v[order]
            run = (
                np.flatnonzero(np.r_[True, (g[1:] != g[:-1]) | (sv[1:] != sv[:-1])]) if len(v) else order[:0]
            )
            length = np.diff(np.append(run, len(v)))
            best = np.lexsort((-length, g[run]))  # per group: longest run first, then smallest value
            first_of_group = (
                np.r_[True, g[run][best][1:] != g[run][best][:-1]] if len(run) else run[:0].astype(bool)
            )
            out[:, col] = sv[run[best[first_of_group]]]
        return out.reshape((self.size,) + values.shape[1:])


def _cast(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Float results back to an attribute's dtype (integers rounded to nearest)."""
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return np.clip(np.rint(values), info.min, info.max).astype(dtype)
    return values.astype(dtype)


def _time_mean(values: np.ndarray, groups: Groups, how: str) -> np.ndarray:
    """Date-times: the mean instant of each group (NaT where the group has an absent one);
    a sum of instants means nothing and is refused."""
    if how == "sum":
        raise InputError(
            f"a sum of date-times ({values.dtype}) means nothing; reduce them with mean, min, max, mode or first"
        )
    absent = np.isnat(values)
    counts = np.where(absent, 0, values.view(np.int64))
    mean = _cast(groups.mean(counts), np.dtype(np.int64)).view(values.dtype)
    mean[groups.max(absent.astype(np.uint8)) > 0] = np.array("NaT", values.dtype)
    return mean


def reduce_rows(values: np.ndarray, groups: Groups, how: str) -> np.ndarray:
    """One row per group. ``sum`` widens integers to 64 bits (same signedness); the other
    reductions keep the dtype (``mean`` of integers is rounded; of date-times, the mean
    instant, rounded to their unit)."""
    values = np.asarray(values)
    dtype = values.dtype
    if dtype.kind == "M" and how in ("mean", "sum"):
        return _time_mean(values, groups, how)
    if how == "mean":
        return _cast(groups.mean(values), dtype)
    if how == "mode":
        return groups.mode(values)
    if how == "sum":
        wide = np.dtype(np.int64 if dtype.kind == "i" else np.uint64) if dtype.kind in "iu" else dtype
        return groups.sum(values, wide)
    if how == "min":
        return groups.min(values)
    if how == "max":
        return groups.max(values)
    if how == "first":
        return groups.first(values)
    raise InputError(choice_message("reduction", how, REDUCTIONS))


def centroids(positions: np.ndarray, groups: Groups) -> np.ndarray:
    """Metavertex of each group: the mean position, inside the group's bounding box, in the
    positions' dtype. Because it lies between the group's extreme rows on every axis, it
    falls in the same chunk and bin as the whole group."""
    return _cast(groups.mean(np.asarray(positions)), np.asarray(positions).dtype)
