"""Checks and normalisation of what users hand to the writers.

Every function either returns a clean numpy value or raises
:class:`~zarr_vectors.errors.InputError` saying what is wrong and how to fix it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._ids import DenseIds, IdMap, as_id_array, dense_ids
from .errors import InputError
from .format.zarr_json import absent_fill

__all__ = [
    "NamedArray",
    "positions_array",
    "shape_vector",
    "resolve_bounds",
    "vertex_attributes",
    "object_id_array",
    "table_attributes",
    "group_lists",
]

_NUMERIC_KINDS = "fiu"
_NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*$")


@dataclass(frozen=True)
class NamedArray:
    """A per-row attribute: values (N,) or (N, C) and optional channel names."""

    name: str
    values: np.ndarray
    channel_names: tuple[str, ...] | None = None

    @property
    def row_shape(self) -> list[int]:
        return list(self.values.shape[1:])


def _numeric(values: Any, what: str) -> np.ndarray:
    arr = np.asarray(values)
    if arr.dtype.kind == "b":
        arr = arr.astype(np.uint8)
    if arr.dtype.kind not in _NUMERIC_KINDS:
        raise InputError(f"{what} has dtype {arr.dtype}; use a float or integer dtype")
    if arr.dtype.kind == "f" and arr.dtype.itemsize > 8:
        raise InputError(f"{what} has dtype {arr.dtype}; use float16, float32 or float64")
    return arr


def positions_array(positions: Any) -> np.ndarray:
    """(N, D) float or integer positions, finite, D >= 1."""
    arr = _numeric(positions, "positions")
    if arr.ndim != 2 or arr.shape[1] < 1:
        raise InputError(f"positions must have shape (N, D) with D >= 1, got {arr.shape}")
    # min/max propagate NaN and expose infinities: one cheap pass finds bad data,
    # and only then is the row-wise mask computed for the message.
    if arr.dtype.kind == "f" and len(arr) and not (np.isfinite(arr.min()) and np.isfinite(arr.max())):
        bad = ~np.isfinite(arr).all(axis=1)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise InputError(
                f"positions contain {int(bad.sum())} rows with NaN or infinite values "
                f"(first at row {i}: {arr[i].tolist()}); remove or fix them before writing"
            )
    return np.ascontiguousarray(arr.astype(arr.dtype.newbyteorder("<"), copy=False))


def shape_vector(value: Any, ndim: int, what: str) -> np.ndarray:
    """A positive float (D,) vector from a scalar or a sequence."""
    try:
        arr = np.broadcast_to(np.asarray(value, dtype=np.float64), (ndim,)).copy()
    except (TypeError, ValueError) as exc:
        raise InputError(f"{what} must be a number or {ndim} numbers, got {value!r}") from exc
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise InputError(f"{what} must be positive and finite, got {arr.tolist()}")
    return arr


def resolve_bounds(bounds: Any, positions: np.ndarray) -> np.ndarray:
    """(2, D) float64 inclusive bounds; given bounds must contain every position."""
    d = positions.shape[1]
    if bounds is None:
        if len(positions) == 0:
            raise InputError("cannot infer bounds from zero positions; pass bounds=(lo, hi)")
        return np.stack([positions.min(axis=0), positions.max(axis=0)]).astype(np.float64)
    try:
        b = np.asarray(bounds, dtype=np.float64).reshape(2, d)
    except (TypeError, ValueError) as exc:
        raise InputError(f"bounds must be (lo, hi) with {d} numbers each, got {bounds!r}") from exc
    if not np.all(np.isfinite(b)) or np.any(b[0] > b[1]):
        raise InputError(f"bounds must be finite with lo <= hi on every axis, got {b.tolist()}")
    if len(positions) and (np.any(positions.min(axis=0) < b[0]) or np.any(positions.max(axis=0) > b[1])):
        outside = np.any((positions < b[0]) | (positions > b[1]), axis=1)
        if outside.any():
            i = int(np.flatnonzero(outside)[0])
            raise InputError(
                f"{int(outside.sum())} positions lie outside bounds {b.tolist()} "
                f"(first: row {i} at {positions[i].tolist()}); widen bounds or leave them out"
            )
    return b


def _check_name(name: Any, what: str) -> str:
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise InputError(
            f"{what} name {name!r} is not allowed: use letters, digits, '_', '-' and '.', "
            "not starting with '.' or '-'"
        )
    return name


def vertex_attributes(
    attributes: Mapping[str, Any] | None,
    n: int,
    channel_names: Mapping[str, Sequence[str]] | None = None,
    what: str = "attribute",
) -> list[NamedArray]:
    """Per-row attributes, each (n,) or (n, C) numeric, with optional channel names."""
    out = []
    channel_names = dict(channel_names or {})
    for name, values in (attributes or {}).items():
        _check_name(name, what)
        arr = _numeric(values, f"{what} {name!r}")
        if arr.ndim not in (1, 2) or arr.shape[0] != n:
            raise InputError(f"{what} {name!r} must have shape ({n},) or ({n}, C), got {arr.shape}")
        names = channel_names.pop(name, None)
        if names is not None:
            names = tuple(str(c) for c in names)
            if arr.ndim != 2 or len(names) != arr.shape[1]:
                raise InputError(
                    f"{what} {name!r} has {arr.shape[1] if arr.ndim == 2 else 1} channels "
                    f"but {len(names)} channel names"
                )
        out.append(NamedArray(name, np.ascontiguousarray(arr.astype(arr.dtype.newbyteorder("<"))), names))
    if channel_names:
        raise InputError(f"channel_names given for unknown attributes {sorted(channel_names)}")
    return out


def object_id_array(object_ids: Any, n: int) -> np.ndarray | None:
    """(n,) object ids as given, int64 or uint64 of any value (see :func:`_ids.as_id_array`), or None."""
    if object_ids is None:
        return None
    shape = np.shape(object_ids)
    if shape != (n,):
        raise InputError(f"object_ids must have shape ({n},) (one per vertex), got {shape}")
    return as_id_array(object_ids, "object_ids")


def table_attributes(attributes: Mapping[str, Any] | None, n: int, what: str) -> list[NamedArray]:
    """Per-object or per-group attributes: (B,) or (B, C) with B <= n rows (missing rows are absent)."""
    out = []
    for name, values in (attributes or {}).items():
        _check_name(name, what)
        if isinstance(values, np.ma.MaskedArray):  # masked entries are stored as absent
            values = values.filled(absent_fill(np.asarray(values).dtype))
        arr = np.asarray(values)
        if arr.dtype.kind in "UO" and arr.ndim == 1:  # names, labels: UTF-8 strings
            items = values if isinstance(values, (list, tuple)) or arr.dtype.kind == "O" else ()
            if not all(isinstance(v, (str, np.str_)) for v in items):
                raise InputError(f"{what} {name!r} mixes strings with other values; give all strings or all numbers")
            arr = arr.astype(str)
        else:
            arr = _numeric(values, f"{what} {name!r}")
        if arr.ndim not in (1, 2):
            raise InputError(f"{what} {name!r} must be 1-D or 2-D, got shape {arr.shape}")
        if arr.shape[0] != n:
            raise InputError(f"{what} {name!r} has {arr.shape[0]} rows, expected {n}")
        if arr.dtype.kind != "U":
            arr = arr.astype(arr.dtype.newbyteorder("<"))
        out.append(NamedArray(name, np.ascontiguousarray(arr)))
    return out


def group_lists(groups: Any, objects: IdMap) -> tuple[list[np.ndarray], DenseIds]:
    """Groups (a list of member lists, or a mapping group id -> members) as member OID lists in
    group order, and the groups' own ids numbered densely (ascending when given as mapping keys).

    Members are the user's object ids, translated through ``objects``; group ids may be any
    int64 / uint64 values.
    """
    if groups is None:
        return [], DenseIds.identity(0)
    if isinstance(groups, Mapping):
        keys = list(groups)
        gids = dense_ids(as_id_array(keys, "group ids")) if keys else DenseIds.identity(0)
        seq: list[Any] = [None] * gids.count
        for k, g in zip(keys, gids.dense.tolist()):
            seq[g] = groups[k]
        labels = gids.id_map().ids().tolist()
    else:
        seq = list(groups)
        gids = DenseIds.identity(len(seq))
        labels = list(range(len(seq)))
    out = []
    for label, members in zip(labels, seq):
        arr = np.asarray([] if members is None else members)
        if arr.size and (arr.ndim != 1 or arr.dtype.kind not in "iuO"):
            raise InputError(f"group {label} must be a 1-D list of integer object ids")
        oids, found = objects.lookup(as_id_array(arr.reshape(-1), f"group {label}"))
        if not found.all():
            bad = int(arr.reshape(-1)[np.argmin(found)])
            raise InputError(f"group {label} names object id {bad}, which no vertex has ({objects.describe()})")
        out.append(oids)
    return out, gids
