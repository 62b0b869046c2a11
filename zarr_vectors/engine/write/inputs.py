"""Checks and normalisation of what users hand to the writers.

Every function either returns a clean numpy value or raises
:class:`~zarr_vectors.errors.InputError` saying what is wrong and how to fix it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from zarr_vectors.engine.ids import DenseIds, IdMap, as_id_array, dense_ids
from zarr_vectors.errors import InputError
from zarr_vectors.format.zarr_json import absent_fill

__all__ = [
    "MAX_NAME_BYTES",
    "NAME_KINDS",
    "NamedArray",
    "call_ndim",
    "check_name",
    "check_names",
    "valid_name",
    "looks_transposed",
    "positions_array",
    "positive_numbers",
    "shape_vector",
    "resolve_bounds",
    "extent",
    "vertex_attributes",
    "object_id_array",
    "table_attributes",
    "group_lists",
]

_NUMERIC_KINDS = "fiu"
_NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*$")

#: Longest name, in UTF-8 bytes (names are ASCII, so also characters): one path segment
#: fits every common file system (255 bytes) and the whole key stays far below the
#: 1,024 bytes object stores allow.
MAX_NAME_BYTES = 128

#: Entries zarr keeps inside a node (its metadata, an array's chunks): a child of that
#: name would collide with them.
_ZARR_ENTRIES = {"zarr.json": "a node's metadata", "c": "an array's chunks"}
#: Device names Windows refuses as file names, with or without an extension.
_WINDOWS_DEVICES = frozenset(
    ["con", "prn", "aux", "nul"] + [f"{p}{i}" for p in ("com", "lpt") for i in range(10)]
)

#: Kinds of name a writer takes. Each maps to the names reserved in its family (beyond
#: zarr's own entries, which every kind stored as an array path also refuses); a feature
#: that stores a table of its own under a user-visible family adds the name here.
NAME_KINDS: dict[str, frozenset[str]] = {
    "attribute": frozenset(),
    "edge attribute": frozenset(),
    "object attribute": frozenset(),
    "group attribute": frozenset(),
    "axis": frozenset(),
}
#: Kinds whose names are only metadata (JSON), not array paths.
_METADATA_KINDS = frozenset({"axis"})
_ALLOWED = (
    f"use 1 to {MAX_NAME_BYTES} ASCII letters, digits, '_', '-' and '.', starting with a letter, digit or '_'"
)
_NOT_PATHS = (
    ", not ending in '.' or '.json', and not zarr.json, c or a Windows device name (CON, NUL, COM1, ...)"
)


@dataclass(frozen=True)
class NamedArray:
    """A per-row attribute: values (N,) or (N, C) and optional channel names."""

    name: str
    values: np.ndarray
    channel_names: tuple[str, ...] | None = None
    #: For a datetime attribute: the numpy unit ("s", "ms", "us", "ns", ...) of ``values``,
    #: which then hold int64 counts of that unit since 1970 (NaT: the int64 absent sentinel).
    time_unit: str | None = None

    def __post_init__(self) -> None:
        if self.values.dtype.kind == "M":  # read back from a store (pyramids, appends): store the counts
            unit = np.datetime_data(self.values.dtype)[0]
            if unit == "generic":
                raise InputError(f"attribute {self.name!r} is datetime64 without a unit; give one")
            object.__setattr__(self, "values", self.values.view(np.int64))
            object.__setattr__(self, "time_unit", unit)

    @property
    def row_shape(self) -> list[int]:
        return list(self.values.shape[1:])


def _counts(values: Any, what: str, times: bool) -> tuple[np.ndarray, str | None]:
    """Numeric ``values`` as they are, or ``datetime64`` ones (when ``times``) as int64 counts
    of their unit (NaT: the int64 absent sentinel) and that unit."""
    arr = np.asarray(values)
    if arr.dtype.kind != "M":
        return _numeric(arr, what), None
    unit = np.datetime_data(arr.dtype)[0]
    if not times:
        raise InputError(f"{what} is {arr.dtype}: date-times are kept for vertex and object attributes only")
    if unit == "generic":
        raise InputError(f"{what} is datetime64 without a unit; give one, e.g. datetime64[s]")
    return arr.view(np.int64), unit


def _numeric(values: Any, what: str) -> np.ndarray:
    arr = np.asarray(values)
    if arr.dtype.kind == "b":
        arr = arr.astype(np.uint8)
    if arr.dtype.kind not in _NUMERIC_KINDS:
        raise InputError(f"{what} has dtype {arr.dtype}; use a float or integer dtype")
    if arr.dtype.kind == "f" and arr.dtype.itemsize > 8:
        raise InputError(f"{what} has dtype {arr.dtype}; use float16, float32 or float64")
    return arr


#: More columns than this is no spatial data set: 1 to 4 rows of that many are transposed input.
_MAX_PLAUSIBLE_AXES = 16


def call_ndim(chunk_shape: Any = None, bounds: Any = None, axes: Any = None) -> int | None:
    """The number of axes a writer's other arguments imply (a per-axis ``chunk_shape``,
    ``bounds`` as (lo, hi) or ``axes``), or None when none of them says."""
    for value, per_axis in ((chunk_shape, False), (bounds, True), (axes, False)):
        if value is None or isinstance(value, (str, bytes)):
            continue
        try:
            arr = np.asarray(value, dtype=object)
        except (TypeError, ValueError):
            continue
        if per_axis and arr.ndim == 2 and arr.shape[0] == 2:
            return int(arr.shape[1])
        if not per_axis and arr.ndim == 1 and len(arr) > 0:
            return len(arr)
    return None


def looks_transposed(shape: tuple[int, ...], ndim: int | None) -> bool:
    """Whether a 2-D ``(r, c)`` positions shape reads as ``(D, N)``, one row per axis."""
    r, c = shape
    if ndim is not None:
        return r == ndim and c != ndim
    return 1 <= r <= 4 and c > _MAX_PLAUSIBLE_AXES


def positions_array(positions: Any, ndim: int | None = None, what: str = "positions") -> np.ndarray:
    """(N, D) float or integer positions, finite, D >= 1.

    ``ndim`` is the number of axes the call implies elsewhere (:func:`call_ndim`, or 3 for
    meshes): an input of shape ``(ndim, N)`` is refused as transposed. Without it, 1 to 4
    rows of more than 16 columns are.
    """
    arr = _numeric(positions, what)
    if arr.ndim != 2 or arr.shape[1] < 1:
        raise InputError(f"{what} must have shape (N, D) with D >= 1, got {arr.shape}")
    if looks_transposed(arr.shape, ndim):
        r, c = arr.shape
        told = "" if ndim is None else f", but chunk_shape, bounds or axes give {ndim} axes"
        raise InputError(
            f"{what} have shape {arr.shape}, which reads as {r} points in {c} dimensions{told}; they look "
            f"transposed (one row per axis): pass {what}.T, of shape ({c}, {r})"
        )
    # min/max propagate NaN and expose infinities: one cheap pass finds bad data,
    # and only then is the row-wise mask computed for the message.
    if arr.dtype.kind == "f" and len(arr) and not (np.isfinite(arr.min()) and np.isfinite(arr.max())):
        bad = ~np.isfinite(arr).all(axis=1)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise InputError(
                f"{what} contain {int(bad.sum())} rows with NaN or infinite values "
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


def positive_numbers(value: Any, what: str) -> np.ndarray:
    """A number or a sequence of numbers, each positive and finite (before the axes are known)."""
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{what} must be a number or one number per axis, got {value!r}") from exc
    if arr.ndim > 1 or arr.size == 0 or not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise InputError(f"{what} must be positive and finite, got {value!r}")
    return arr


def extent(positions: np.ndarray) -> np.ndarray:
    """(2, D) float64 per-axis minimum and maximum of (N >= 1, D) positions (a column at a
    time: a strided reduction over ``axis=0`` is an order of magnitude slower)."""
    cols = [positions[:, k] for k in range(positions.shape[1])]
    return np.array([[float(c.min()) for c in cols], [float(c.max()) for c in cols]], np.float64)


def resolve_bounds(bounds: Any, positions: np.ndarray) -> np.ndarray:
    """(2, D) float64 inclusive bounds; given bounds must contain every position."""
    d = positions.shape[1]
    if bounds is None:
        if len(positions) == 0:
            raise InputError("cannot infer bounds from zero positions; pass bounds=(lo, hi)")
        return extent(positions)
    try:
        b = np.asarray(bounds, dtype=np.float64).reshape(2, d)
    except (TypeError, ValueError) as exc:
        raise InputError(f"bounds must be (lo, hi) with {d} numbers each, got {bounds!r}") from exc
    if not np.all(np.isfinite(b)) or np.any(b[0] > b[1]):
        raise InputError(f"bounds must be finite with lo <= hi on every axis, got {b.tolist()}")
    if len(positions) and (np.any((e := extent(positions))[0] < b[0]) or np.any(e[1] > b[1])):
        outside = np.any((positions < b[0]) | (positions > b[1]), axis=1)
        if outside.any():
            i = int(np.flatnonzero(outside)[0])
            raise InputError(
                f"{int(outside.sum())} positions lie outside bounds {b.tolist()} "
                f"(first: row {i} at {positions[i].tolist()}); widen bounds or leave them out"
            )
    return b


def _name_problem(name: Any, kind: str) -> str | None:
    """Why ``name`` cannot be a ``kind`` name, or None when it can."""
    if not isinstance(name, str):
        return f"it is not a string but {type(name).__name__}"
    if not name:
        return "it is empty"
    size = len(name.encode("utf-8", "surrogatepass"))
    if size > MAX_NAME_BYTES:
        return f"it is {size} bytes long (file systems and object stores limit path segments)"
    if not _NAME_RE.match(name):
        bad = next((ch for ch in name if not (ch.isascii() and (ch.isalnum() or ch in "_.-"))), None)
        if bad is not None:
            return f"it contains {bad!r}"
        return f"it starts with {name[0]!r}"
    if name.endswith("."):
        return "it ends in '.' (Windows drops trailing dots from file names)"
    reserved = NAME_KINDS.get(kind, frozenset())
    if kind in _METADATA_KINDS:
        return f"{name!r} is reserved" if name in reserved else None
    if name in _ZARR_ENTRIES:
        return f"zarr keeps {_ZARR_ENTRIES[name]} under {name!r}"
    if name.lower().endswith(".json"):
        return "names ending in '.json' are zarr metadata files, skipped when a store is listed"
    if name.split(".", 1)[0].lower() in _WINDOWS_DEVICES:
        return f"{name.split('.', 1)[0]!r} is a device name on Windows"
    if name in reserved:
        return f"the library stores its own {kind} {name!r}"
    return None


def check_name(name: Any, kind: str) -> str:
    """``name`` when it can name a ``kind`` (a key of :data:`NAME_KINDS`), else InputError
    saying which name, why, and what is allowed.

    Every accepted name is one path segment that round-trips on local file systems
    (including case-insensitive ones, with :func:`check_names`), zip files and object stores.
    """
    why = _name_problem(name, kind)
    if why is not None:
        rules = _ALLOWED + (", not ending in '.'" if kind in _METADATA_KINDS else _NOT_PATHS)
        long = isinstance(name, str) and len(name) > 60
        shown = f"{name[:40]!r}... ({len(name)} characters)" if long else repr(name)
        raise InputError(f"{kind} name {shown} is not allowed: {why}; {rules}")
    return name


def valid_name(name: str, kind: str, taken: Iterable[str] = ()) -> str:
    """``name`` itself when it is allowed and not ``taken`` (ignoring case), else a close
    allowed name: other characters as ``_``, cut to length, ``_`` appended until free."""
    lower = {t.lower() for t in taken}
    if _name_problem(name, kind) is None and name.lower() not in lower:
        return name
    key = re.sub(r"[^A-Za-z0-9_.\-]", "_", name).lstrip(".-")[: MAX_NAME_BYTES - 8] or "name"
    while _name_problem(key, kind) is not None or key.lower() in lower:
        key += "_"
    return key


def check_names(names: Iterable[Any], kind: str) -> list[str]:
    """Every name checked, and no two equal but for case (one file on macOS and Windows)."""
    out = [check_name(n, kind) for n in names]
    seen: dict[str, str] = {}
    for n in out:
        other = seen.setdefault(n.lower(), n)
        if other != n:
            raise InputError(
                f"{kind} names {other!r} and {n!r} differ only in case; case-insensitive file systems "
                "(macOS, Windows) would store them as one: rename one of them"
            )
    return out


def vertex_attributes(
    attributes: Mapping[str, Any] | None,
    n: int,
    channel_names: Mapping[str, Sequence[str]] | None = None,
    what: str = "attribute",
) -> list[NamedArray]:
    """Per-row attributes, each (n,) or (n, C) numeric or (vertex attributes) ``datetime64``
    (then int64 counts of its unit, with ``time_unit``), with optional channel names."""
    out = []
    channel_names = dict(channel_names or {})
    check_names(attributes or {}, what)
    for name, values in (attributes or {}).items():
        arr, unit = _counts(values, f"{what} {name!r}", what == "attribute")
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
        values = np.ascontiguousarray(arr.astype(arr.dtype.newbyteorder("<")))
        out.append(NamedArray(name, values, names, time_unit=unit))
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
    check_names(attributes or {}, what)
    for name, values in (attributes or {}).items():
        dtype = np.asarray(values).dtype
        unit = np.datetime_data(dtype)[0] if dtype.kind == "M" else None
        if unit == "generic":
            raise InputError(f"{what} {name!r} is datetime64 without a unit; give one, e.g. datetime64[s]")
        if isinstance(values, np.ma.MaskedArray):  # masked entries are stored as absent
            # dates and times: absent is NaT (int64's sentinel) in the array's own unit
            fill: Any = np.array("NaT", dtype)[()] if unit else absent_fill(dtype)
            values = values.filled(fill)
        arr = np.asarray(values)
        if arr.dtype.kind == "M":  # dates and times: int64 counts of their unit
            arr = arr.view(np.int64)
        elif arr.dtype.kind in "UO" and arr.ndim == 1:  # names, labels: UTF-8 strings
            items = values if isinstance(values, (list, tuple)) or arr.dtype.kind == "O" else ()
            if not all(isinstance(v, (str, np.str_)) for v in items):
                raise InputError(
                    f"{what} {name!r} mixes strings with other values; give all strings or all numbers"
                )
            arr = arr.astype(str)
            check_utf8(arr, f"{what} {name!r}")
        else:
            arr = _numeric(values, f"{what} {name!r}")
        if arr.ndim not in (1, 2):
            raise InputError(f"{what} {name!r} must be 1-D or 2-D, got shape {arr.shape}")
        if arr.shape[0] != n:
            raise InputError(f"{what} {name!r} has {arr.shape[0]} rows, expected {n}")
        if arr.dtype.kind != "U":
            arr = arr.astype(arr.dtype.newbyteorder("<"))
        out.append(NamedArray(name, np.ascontiguousarray(arr), time_unit=unit))
    return out


def check_utf8(strings: np.ndarray, what: str) -> None:
    """Raise :class:`InputError` naming ``what`` and the row when a string cannot be stored
    as UTF-8 (a lone surrogate, e.g. from ``os.fsdecode`` of bytes that are not UTF-8)."""
    try:
        "".join(strings.tolist()).encode("utf-8")
    except UnicodeEncodeError:
        for row, text in enumerate(strings.tolist()):
            try:
                text.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise InputError(
                    f"{what}: row {row} holds {text[exc.start : exc.end]!r} at character {exc.start}, "
                    f"which UTF-8 cannot encode (a lone surrogate); give valid Unicode text"
                ) from exc


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
            raise InputError(
                f"group {label} names object id {bad}, which no vertex has ({objects.describe()})"
            )
        out.append(oids)
    return out, gids
