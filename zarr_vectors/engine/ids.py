"""Users' object and group ids against the format's dense ones (DECISIONS 8).

On disk, objects are numbered ``0 .. B-1`` (OIDs) and groups ``0 .. G-1``. Users' ids may be
any int64 or uint64 values. Ids that are all non-negative and whose largest value is below
``max(65,536, 4 x the number of distinct ids)`` (:func:`kept_as_given`) are the OIDs
themselves, with no id table: ids between them have empty manifests (groups: no members)
and are not listed. Other ids are numbered in ascending order and stored as the object
attribute ``object_id`` (groups: the group attribute ``group_id``), with the dtype they
were given. Readers
translate through an :class:`IdMap`; every cost here is in the number of distinct ids
(or the bounded id space of kept ids), never in a large id.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from zarr_vectors.errors import IdTableWarning, InputError, UnknownIdError
from zarr_vectors.format.groups import GROUP_ID_ATTRIBUTE, NO_OBJECT, OBJECT_ID_ATTRIBUTE, owned

__all__ = [
    "table_rows",
    "OBJECT_ID_ATTRIBUTE",
    "GROUP_ID_ATTRIBUTE",
    "NO_OBJECT",
    "check_not_reserved",
    "as_id_array",
    "DenseIds",
    "dense_ids",
    "kept_as_given",
    "KEPT_IDS_FLOOR",
    "IdMap",
    "owned",
    "IdTableWarning",
    "ids_from_names",
    "file_ids",
]


_RESERVED = {"object attribute": OBJECT_ID_ATTRIBUTE, "group attribute": GROUP_ID_ATTRIBUTE}


def check_not_reserved(name: str, what: str) -> None:
    """Refuse a user attribute named like the id table the library writes (``object_id``, ``group_id``)."""
    if _RESERVED.get(what) == name:
        noun = what.split()[0]
        raise InputError(
            f"{what} name {name!r} is reserved: the library stores each {noun}'s own id there "
            f"(give the ids as the {noun} ids instead, or rename the attribute)"
        )


def as_id_array(values: Any, what: str) -> np.ndarray:
    """1-D int64 or uint64 ids from integers of any width or Python ints up to ``2**64 - 1``.

    Signed input becomes int64 and unsigned uint64; Python ints become int64 unless one
    exceeds ``2**63 - 1`` (then uint64, when none is negative). Integral floats are taken
    below ``2**53`` only, where they are exact.
    """
    if isinstance(values, (int, np.integer)):
        values = [values]
    arr = np.asarray(values)
    if (
        arr.dtype.kind == "f"
        and isinstance(values, (list, tuple))
        and all(isinstance(v, (int, np.integer)) for v in values)
    ):
        arr = np.asarray(values, dtype=object)  # numpy took ints beyond int64 as floats
    if arr.dtype.kind == "O":  # Python ints beyond int64 mixed with others
        try:
            arr = np.asarray([int(v) for v in arr.reshape(-1)], dtype=object).reshape(arr.shape)
        except (TypeError, ValueError) as exc:
            raise InputError(f"{what} must be integers ({exc})") from exc
        neg = any(v < 0 for v in arr.reshape(-1))
        big = any(v > np.iinfo(np.int64).max for v in arr.reshape(-1))
        if neg and big:
            raise InputError(f"{what} mix negative ids with ids above 2**63 - 1; no integer dtype holds both")
        try:
            arr = arr.astype(np.uint64 if big else np.int64)
        except OverflowError as exc:
            raise InputError(f"{what} must fit in 64 bits (0 .. 2**64 - 1, or int64)") from exc
    if arr.dtype.kind == "b":
        raise InputError(f"{what} must be integers, got booleans")
    if arr.dtype.kind == "f":
        if arr.size and (not np.all(np.isfinite(arr)) or not np.all(arr == np.round(arr))):
            raise InputError(f"{what} must be integers; got non-integer floating-point values")
        if arr.size and np.abs(arr).max() >= 2.0**53:
            raise InputError(
                f"{what} are floats of 2**53 or more, which cannot hold every integer: "
                "give them as int64 or uint64"
            )
        arr = arr.astype(np.int64)
    elif arr.dtype.kind not in "iu":
        raise InputError(f"{what} must be integers, got dtype {arr.dtype}")
    return arr.astype(np.uint64 if arr.dtype.kind == "u" else np.int64, copy=False)


#: Ids below this are always kept as given (when none is negative), however few objects there are.
KEPT_IDS_FLOOR = 1 << 16


def kept_as_given(largest: int, distinct: int) -> bool:
    """Whether non-negative ids up to ``largest`` (``distinct`` of them) are stored as the OIDs
    themselves: ``largest < max(65,536, 4 x distinct)`` (DECISIONS 8 as amended)."""
    return largest < max(KEPT_IDS_FLOOR, 4 * distinct)


@dataclass(frozen=True, eq=False)
class DenseIds:
    """Users' ids as OIDs: ``dense[i]`` is the OID of entry i and ``count`` the size of the OID
    space; ``user`` the sorted distinct ids when they are remapped (``count`` of them), or None
    when the ids are the OIDs. ``present`` lists the distinct ids (ascending) when they are kept
    as given with gaps (``count > len(present)``: the ids between are empty); else None."""

    dense: np.ndarray  # int64
    count: int
    user: np.ndarray | None
    present: np.ndarray | None = None

    @classmethod
    def identity(cls, n: int) -> DenseIds:
        return cls(np.arange(n, dtype=np.int64), n, None)

    @property
    def distinct(self) -> int:
        """Number of distinct ids given (``count`` unless kept ids have gaps)."""
        return self.count if self.present is None else len(self.present)

    def id_map(self) -> IdMap:
        return IdMap(self.user, self.count)

    def has(self, oids: np.ndarray) -> np.ndarray:
        """Which OIDs (in ``0 .. count-1``) are ids that were given, not gaps."""
        if self.present is None:
            return np.ones(len(oids), bool)
        return np.isin(oids, self.present)


def dense_ids(ids: np.ndarray) -> DenseIds:
    """The OIDs of ``ids`` (int64 or uint64): the ids themselves when :func:`kept_as_given`,
    else the distinct values numbered ``0 .. B-1`` in ascending order.

    Small non-negative ids are counted (time and memory in ``len(ids) + max``, bounded by a
    few times ``len(ids)`` or 65,536); others are sorted.
    """
    n = len(ids)
    if n == 0:
        return DenseIds(np.zeros(0, np.int64), 0, None)
    lo, hi = ids.min(), ids.max()
    if (ids.dtype.kind == "u" or lo >= 0) and kept_as_given(int(hi), n):  # n bounds the distinct ids
        present = np.zeros(int(hi) + 1, bool)
        present[ids] = True
        distinct = int(np.count_nonzero(present))
        if kept_as_given(int(hi), distinct):
            gaps = None if distinct == int(hi) + 1 else np.flatnonzero(present)
            return DenseIds(ids.astype(np.int64), int(hi) + 1, None, gaps)
        rank = np.cumsum(present) - 1
        return DenseIds(rank[ids], distinct, np.flatnonzero(present).astype(ids.dtype))
    user, inverse = np.unique(ids, return_inverse=True)
    return DenseIds(inverse.reshape(-1).astype(np.int64), len(user), user)


def _in_dtype(ids: np.ndarray, dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """``ids`` cast to ``dtype`` (int64 or uint64) and which of them are representable there."""
    if ids.dtype == dtype:
        return ids, np.ones(len(ids), bool)
    if dtype.kind == "u":  # int64 query, uint64 table: negatives cannot be there
        ok = ids >= 0
        return np.where(ok, ids, ids.dtype.type(0)).astype(np.uint64), ok
    ok = ids <= np.uint64(np.iinfo(np.int64).max)  # uint64 query, int64 table
    return np.where(ok, ids, ids.dtype.type(0)).astype(np.int64), ok


@dataclass(frozen=True, eq=False)
class IdMap:
    """OID ``i`` <-> user id ``user[i]`` (``user`` strictly increasing), or the identity on
    ``0 .. size-1`` when ``user`` is None. ``noun`` names the ids in messages."""

    user: np.ndarray | None
    size: int
    noun: str = "object"
    where: str = ""

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(np.int64) if self.user is None else self.user.dtype

    def ids(self) -> np.ndarray:
        """Every user id, ascending."""
        return np.arange(self.size, dtype=np.int64) if self.user is None else self.user

    def to_user(self, oids: np.ndarray) -> np.ndarray:
        """User ids of OIDs; :data:`NO_OBJECT` (-1) stays -1 (``2**64 - 1`` for uint64)."""
        if self.user is None:
            return oids
        oids = np.asarray(oids, np.int64)
        if len(oids) and self.size and int(oids.min()) >= 0 and int(oids.max()) < self.size:
            return self.user[oids]  # every row has an object: a plain gather
        out = (
            self.user[np.clip(oids, 0, max(self.size - 1, 0))]
            if self.size
            else np.zeros(len(oids), self.dtype)
        )
        missing = oids < 0
        if missing.any():
            out[missing] = np.array(NO_OBJECT).astype(self.dtype)
        return out

    def lookup(self, ids: Any) -> tuple[np.ndarray, np.ndarray]:
        """``(OIDs, found)`` of user ids (vectorised ``searchsorted``); OID 0 where not found."""
        q = as_id_array(ids, f"{self.noun} ids").reshape(-1)
        if self.user is None:
            q64, ok = _in_dtype(q, np.dtype(np.int64))
            found = ok & (q64 >= 0) & (q64 < self.size)
            return np.where(found, q64, 0).astype(np.int64), found
        qt, ok = _in_dtype(q, self.user.dtype)
        pos = np.searchsorted(self.user, qt)
        pos = np.minimum(pos, max(self.size - 1, 0))
        found = ok & (self.user[pos] == qt) if self.size else np.zeros(len(q), bool)
        return pos.astype(np.int64), found

    def to_oids(self, ids: Any) -> np.ndarray:
        """OIDs of user ids; an id not held raises :class:`UnknownIdError` naming it."""
        q = as_id_array(ids, f"{self.noun} ids").reshape(-1)
        oids, found = self.lookup(q)
        if not found.all():
            bad = q[np.argmin(found)]
            where = self.where or "this level"
            raise UnknownIdError(f"{self.noun} id {int(bad)} is not in {where}: {self.describe()}")
        return oids

    def describe(self) -> str:
        """``'its 12 objects have ids 0 .. 11'`` (used in messages)."""
        if self.size == 0:
            return f"it has no {self.noun}s"
        ids = self.ids()
        return f"its {self.size:,} {self.noun}s have ids {int(ids[0])} .. {int(ids[-1])}"


def _rows_at(rows: Any, oids: np.ndarray, count: int) -> Any:
    """``rows`` placed at ``oids`` of ``count`` rows: strings as a list ('' elsewhere), other
    values as a masked array (masked elsewhere, stored as the attribute's fill value)."""
    rows = np.asarray(rows)
    if rows.dtype.kind == "U" or rows.dtype.kind == "O":
        out = np.full(count, "", dtype=object)
        out[oids] = rows
        return [str(v) for v in out]
    out = np.ma.masked_all((count, *rows.shape[1:]), dtype=rows.dtype if rows.dtype.kind != "b" else np.uint8)
    out[oids] = rows
    return out


def table_rows(values: Any, ids: DenseIds, name: str, what: str, item_order: bool) -> Any:
    """Rows of a per-object (or per-group) input in OID order.

    ``values`` is a mapping ``{user id: row}`` (ids left out are absent) or a sequence of
    rows: with ``item_order`` one per input item (item ``i`` is OID ``ids.dense[i]``), else
    one per distinct id, ascending, or (ids kept as given with gaps) one per id of the OID
    space or more, indexed by id. Sequences for dense ids without ``item_order`` pass
    through unchanged (their own length rules apply). Rows of ids kept as given are placed at
    their ids, the gaps absent. Returns an array, a list of strings or a masked array.
    """
    if isinstance(values, Mapping):
        keys = list(values)
        oids, found = ids.id_map().lookup(keys) if keys else (np.zeros(0, np.int64), np.zeros(0, bool))
        found &= ids.has(oids)
        if not found.all():
            bad = keys[int(np.argmin(found))]
            raise InputError(
                f"{what} {name!r} names {what.split()[0]} id {bad!r}, which no vertex has "
                f"({ids.id_map().describe()})"
            )
        return _rows_at([values[k] for k in keys], oids, ids.count)
    if not item_order and ids.user is None and ids.present is None:
        return values
    n_rows = len(values) if hasattr(values, "__len__") else len(np.asarray(values))
    if ids.present is not None and not item_order and n_rows >= ids.count:
        return values  # indexed by id: row i is object i
    if n_rows != ids.distinct:
        order = "one per item, in the order given" if item_order else "one per distinct id, ascending"
        raise InputError(
            f"{what} {name!r} has {n_rows} rows but there are {ids.distinct} {what.split()[0]}s; give "
            f"{order}, or a mapping {{id: value}}"
        )
    if item_order:  # rows in ascending OID
        item_of = np.argsort(ids.dense, kind="stable")
        if isinstance(values, (list, tuple)):
            values = [values[i] for i in item_of.tolist()]
        else:
            values = (values if isinstance(values, np.ndarray) else np.asarray(values))[item_of]
    return values if ids.present is None else _rows_at(values, ids.present, ids.count)


_DECIMAL = re.compile(r"^[0-9]+$")


def ids_from_names(names: Sequence[str]) -> np.ndarray | None:
    """uint64 ids when every name is a decimal integer below ``2**64`` (segment ids used as
    file names, ``720575940621039145.swc``); None when one is not."""
    if not names or not all(_DECIMAL.match(n) for n in names):
        return None
    values = [int(n) for n in names]
    return np.array(values, dtype=np.uint64) if max(values) < 1 << 64 else None


def file_ids(files: Sequence[Any], object_ids: Any, from_names: bool, flag: str) -> np.ndarray:
    """One distinct object id per input file: ``object_ids`` when given, else the file names'
    stems when ``from_names`` and all are integers, else ``0 .. n-1`` in the order given.
    ``flag`` names the switch that turns names off, for the duplicate-id message."""
    n = len(files)
    if object_ids is not None:
        ids = as_id_array(object_ids, "object_ids")
        if ids.shape != (n,):
            raise InputError(f"object_ids must have one id per file ({n}), got shape {ids.shape}")
        stems = None
    else:
        stems = ids_from_names([getattr(f, "stem", str(f)) for f in files]) if from_names else None
        ids = np.arange(n, dtype=np.int64) if stems is None else stems
    order = np.argsort(ids, kind="stable")
    dup = np.flatnonzero(ids[order][1:] == ids[order][:-1])
    if len(dup):
        a, b = (files[i] for i in order[dup[0] : dup[0] + 2])
        how = f"rename one or pass {flag}" if stems is not None else "give each file its own id"
        raise InputError(f"{a} and {b} both have object id {int(ids[order][dup[0]])}; {how}")
    return ids
