"""Attribute filters of queries (``where=``): parsed once, evaluated on decoded rows.

A filter is a conjunction of comparisons, each naming one numeric attribute (a vertex
attribute, else an object attribute), an operator and a value. It is given as

* a mapping ``{name: (op, value)}``, ``{name: [(op, value), ...]}`` or ``{name: value}``
  (equality); ``op`` is one of ``< <= > >= == !=``, or ``in`` / ``not in`` with a list of
  values, or ``between`` with ``(low, high)`` (inclusive);
* a string ``"confidence > 0.8 and type == 3"``: comparisons ``name op value`` (or
  ``value op name``) joined by ``and``, the value a number or an unquoted ISO 8601 date or
  date-time (``day >= 2024-01-01``, ``seen < 2024-03-05T12:30:00.250``; no time zone);
* a sequence of such strings or ``(name, op, value)`` triples, all of which must hold.

A string is read left to right in one pass (time linear in its length); a malformed one is
an :class:`~zarr_vectors.errors.InputError` naming the 1-based character where reading stopped.

Comparisons are made in float64 for floating attributes and exactly for integer ones, ``in``
and ``not in`` included, at any int64/uint64 value (a float value against an integer attribute
compares as the float; ``==`` then matches only whole numbers). NaN fails every comparison but ``!=``.

Date-time attributes (stored as int64 counts of a ``time_unit``, read as ``datetime64``)
compare with dates: ``numpy.datetime64``, ``datetime.datetime`` or ``datetime.date``
(without a time zone) or ISO 8601 text, exactly, in the finer of the two units (``day <
2024-01-02`` keeps every time of 2024-01-01 and before). An absent date (``NaT``) fails
every comparison but ``!=``. A date against a numeric attribute, or a number against a
date-time one, is an :class:`~zarr_vectors.errors.InputError`.
"""

from __future__ import annotations

import datetime
import math
import operator
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from zarr_vectors.errors import InputError
from zarr_vectors.result import Result

__all__ = ["Condition", "OPERATORS", "RowFilter", "apply_filter", "evaluate", "parse_where"]

OPERATORS: dict[str, Callable[[Any, Any], Any]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
}
_SETS = ("in", "not in", "between")
_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}
#: Value and name tokens. Each is matched at one position and splits what it reads in one
#: way only, so reading a string takes time linear in its length (no backtracking).
_NUMBER = re.compile(r"[-+]?(?:(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|inf|nan)")
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}(?:T[0-9]{2}:[0-9]{2}(?::[0-9]{2}(?:\.[0-9]{1,9})?)?)?")
_FINER_THAN_NS = re.compile(r"\.[0-9]{10}")
_INTEGER = re.compile(r"[-+]?[0-9]+")
_NAME = re.compile(r"[A-Za-z_][\w.]*")
_OP = re.compile(r"<=|>=|==|!=|<|>|=")
_SPACE = re.compile(r"\s*")
_AND = re.compile(r"and(?![\w.])", re.IGNORECASE)
#: The longest number a string may hold (every int64, uint64 or float64 value is far shorter).
MAX_NUMBER_CHARS = 1000


@dataclass(frozen=True)
class Condition:
    """``attribute op value``: ``value`` a number or a ``numpy.datetime64``, a tuple of them
    for ``in``/``not in``, or ``(low, high)`` for ``between``."""

    name: str
    op: str
    value: Any

    def __str__(self) -> str:
        return f"{self.name} {self.op} {self.value!r}"

    def mask(self, column: np.ndarray) -> np.ndarray:
        """(N,) booleans of the rows of ``column`` (N,) that satisfy the condition."""
        if self.op == "between":
            low, high = self.value
            return _compare(column, ">=", low) & _compare(column, "<=", high)
        if self.op in ("in", "not in"):
            hit = _members(column, self.value)
            return ~hit if self.op == "not in" else hit
        return _compare(column, self.op, self.value)

    def check_column(self, dtype: np.dtype, width: int, scope: str) -> None:
        """Refuse a column the condition cannot compare: not one value per row, not numeric
        or date-time, or dates against numbers (either way)."""
        if dtype.kind not in "biufM" or width != 1:
            raise InputError(
                f"where: {scope} attribute {self.name!r} is {dtype} with {width} values per row; filters "
                "compare numeric or date-time attributes with one value per row"
            )
        values = self.value if self.op in _SETS else [self.value]
        dates = [isinstance(v, np.datetime64) for v in values]
        if dtype.kind == "M" and not all(dates):
            raise InputError(
                f"where: {scope} attribute {self.name!r} holds date-times ({dtype}); compare it with a date "
                f"such as {self.name} >= 2024-01-31 or numpy.datetime64('2024-01-31T12:00'), not {self.value!r}"
            )
        if dtype.kind != "M" and any(dates):
            raise InputError(
                f"where: {scope} attribute {self.name!r} holds numbers ({dtype}), not date-times; compare it "
                "with a number"
            )


def _compare(column: np.ndarray, op: str, value: Any) -> np.ndarray:
    """``column op value`` as exact numbers: a floating column in float64, an integer (or
    boolean) column exactly against any int or float, values outside its dtype included;
    dates as dates (numpy compares them in the finer unit)."""
    if isinstance(value, np.datetime64):
        return np.asarray(OPERATORS[op](column, value), bool)
    if column.dtype.kind == "f":
        return _compare_floats(column, op, value)
    if column.dtype.kind == "b":
        column = column.astype(np.uint8)
    if isinstance(value, float):
        if math.isnan(value):
            return np.full(len(column), op == "!=")
        op, value = _as_integer_bound(op, value)
    info = np.iinfo(column.dtype)
    if info.min <= value <= info.max:
        return np.asarray(OPERATORS[op](column, column.dtype.type(value)), bool)
    above = value > info.max  # every row is below the value, or every row above it
    passes = op in (("<", "<=", "!=") if above else (">", ">=", "!="))
    return np.full(len(column), passes)


#: An integer past every integer dtype: what an infinite or non-whole bound compares as.
_FAR = 1 << 65


def _float_or_none(value: float | int) -> float | None:
    """``value`` as a float64, or None for an int past float64's range (equal to no float)."""
    try:
        return float(value)
    except OverflowError:
        return None


def _as_integer_bound(op: str, value: float) -> tuple[str, int]:
    """``(op2, k)`` with ``x op value`` == ``x op2 k`` for every integer ``x`` (``value`` not NaN)."""
    if math.isinf(value):
        return op, _FAR if value > 0 else -_FAR
    if value.is_integer():
        return op, int(value)
    if op in ("==", "!="):  # never equal: compare with a value no row holds
        return op, _FAR
    if op in ("<", ">="):
        return op, math.ceil(value)
    return op, math.floor(value)  # <= and >


def _compare_floats(column: np.ndarray, op: str, value: Any) -> np.ndarray:
    """A floating column against ``value`` in float64; an int past float64's range compares
    as a value between the largest float and infinity (exactly what it is)."""
    try:
        bound = np.float64(value)
    except OverflowError:  # |value| > 1.8e308: beyond every finite float, short of infinity
        if op in ("==", "!="):
            return np.full(len(column), op == "!=")
        inf = np.inf if value > 0 else -np.inf
        strict = (
            {"<": "<", "<=": "<", ">": ">=", ">=": ">="}
            if value > 0
            else {"<": "<=", "<=": "<=", ">": ">", ">=": ">"}
        )
        return np.asarray(OPERATORS[strict[op]](column, inf), bool)
    return np.asarray(OPERATORS[op](column, bound), bool)


def _members(column: np.ndarray, values: tuple[Any, ...]) -> np.ndarray:
    """(N,) booleans: whether each row equals one of ``values``, exactly (integers as
    integers at any value; floats in float64; dates as dates)."""
    if not values:
        return np.zeros(len(column), bool)
    if column.dtype.kind == "M":
        return np.isin(column, np.array(values))
    if column.dtype.kind == "f":
        floats = [f for f in map(_float_or_none, values) if f is not None]
        return np.isin(column.astype(np.float64), np.array(floats, np.float64))
    if column.dtype.kind == "b":
        column = column.astype(np.uint8)
    info = np.iinfo(column.dtype)
    whole = [int(v) for v in values if isinstance(v, int) or (math.isfinite(v) and v.is_integer())]
    fits = [v for v in whole if info.min <= v <= info.max]  # no other value equals a row
    return np.isin(column, np.array(fits, column.dtype))


def _number(value: Any, where: str) -> float | int | np.datetime64:
    """A comparison value: a number as itself, a date or date-time as ``numpy.datetime64``."""
    if isinstance(value, (np.datetime64, datetime.date, str)):
        return _date(value, where)
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise InputError(f"where: {where} needs a number or a date, got {value!r}")
    return value.item() if isinstance(value, (np.integer, np.floating)) else value


def _date(value: Any, where: str) -> np.datetime64:
    """``numpy.datetime64`` of a datetime64, a ``datetime.date``/``datetime`` without a time
    zone, or ISO 8601 text."""
    if isinstance(value, datetime.datetime) and value.tzinfo is not None:
        raise InputError(
            f"where: {where} got {value!r}, which has a time zone; stored date-times have none: give "
            "a naive datetime in the stored convention (e.g. value.astimezone(timezone.utc).replace(tzinfo=None))"
        )
    if isinstance(value, str) and _FINER_THAN_NS.search(value):
        raise InputError(f"where: {where} got {value!r}; give at most 9 decimals of a second (nanoseconds)")
    try:
        out = np.datetime64(value)
    except (ValueError, OverflowError) as exc:  # OverflowError: a unit too fine for the date
        raise InputError(
            f"where: {where} needs a number or a date, got {value!r}; write dates in ISO 8601, such as "
            "2024-01-31 or 2024-01-31T12:00:00"
        ) from exc
    if np.isnat(out) or np.datetime_data(out.dtype)[0] == "generic":
        raise InputError(f"where: {where} got {value!r}; give a date, not NaT")
    if (
        isinstance(value, str)
        and _DATE.match(value)
        and out.astype("datetime64[D]") != np.datetime64(value[:10])
    ):
        raise InputError(  # numpy wraps a date its unit cannot count (nanoseconds: 1678 to 2262)
            f"where: {where} got {value!r}, which lies outside the dates its unit ({np.datetime_data(out.dtype)[0]}) "
            "can count; give fewer decimals of a second"
        )
    return out


def _condition(name: Any, op: Any, value: Any) -> Condition:
    if not isinstance(name, str) or not name:
        raise InputError(f"where: an attribute name must be a non-empty string, got {name!r}")
    op = "==" if op == "=" else op
    if op in OPERATORS:
        return Condition(name, op, _number(value, f"{name} {op}"))
    if op in ("in", "not in"):
        if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
            raise InputError(f"where: {name} {op} needs a list of numbers or dates, got {value!r}")
        values = [_number(v, f"{name} {op}") for v in value]
        kinds = {isinstance(v, np.datetime64) for v in values}
        if len(kinds) > 1:
            raise InputError(f"where: {name} {op} mixes dates and numbers: {value!r}")
        return Condition(name, op, tuple(values))
    if op == "between":
        pair = list(value) if isinstance(value, (list, tuple)) else []
        if len(pair) != 2:
            raise InputError(f"where: {name} between needs (low, high), got {value!r}")
        low, high = (_number(v, f"{name} between") for v in pair)
        return Condition(name, op, (low, high))
    raise InputError(
        f"where: unknown operator {op!r} for {name!r}; use one of {', '.join([*OPERATORS, *_SETS])}"
    )


def _parse_text(text: str) -> list[Condition]:
    """The comparisons of ``text``, read left to right in one pass (linear time)."""
    reader = _Reader(text)
    out = [reader.comparison()]
    while not reader.at_end():
        out.append(reader.comparison())
    return out


class _Reader:
    """A cursor over a ``where=`` string. Grammar: ``comparison ('and' comparison)*``, a
    comparison being ``name op value`` or ``value op name``; every error names the 1-based
    character where reading stopped."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def fail(self, what: str, pos: int | None = None) -> InputError:
        at = self.pos if pos is None else pos
        text = self.text
        shown = text
        if len(text) > 80:  # an excerpt around the position
            lo, hi = max(0, at - 30), at + 30
            shown = f"{'...' if lo else ''}{text[lo:hi]}{'...' if hi < len(text) else ''}"
        return InputError(
            f"where: cannot read {shown!r} at character {at + 1}: {what}; write comparisons such as "
            "'confidence > 0.8', joined by 'and'"
        )

    def skip_space(self) -> bool:
        """Move past white space; whether there was any."""
        m = _SPACE.match(self.text, self.pos)
        assert m is not None  # \s* always matches
        self.pos = m.end()
        return m.end() > m.start()

    def at_end(self) -> bool:
        """Whether the text is read; otherwise step past the ``and`` before the next comparison."""
        spaced = self.skip_space()
        if self.pos == len(self.text):
            return True
        m = _AND.match(self.text, self.pos)
        if not spaced or m is None:
            raise self.fail(f"expected 'and' or the end, found {self._found()}")
        self.pos = m.end()
        return False

    def _found(self) -> str:
        return repr(self.text[self.pos]) if self.pos < len(self.text) else "the end"

    def comparison(self) -> Condition:
        self.skip_space()
        start = self.pos
        if start == len(self.text):
            raise self.fail("expected a comparison, found the end")
        name = _NAME.match(self.text, start)
        if name is not None and name.group() not in ("inf", "nan"):
            self.pos = name.end()
            op = self.operator()
            return _condition(name.group(), op, self.value())
        if name is not None:  # inf / nan: an attribute of that name, unless a name follows
            self.pos = name.end()
            op = self.operator()
            self.skip_space()
            other = _NAME.match(self.text, self.pos)
            if other is None:
                return _condition(name.group(), op, self.value())
            self.pos = start
        elif self.text[start] not in "0123456789+-.":
            raise self.fail(f"expected an attribute name or a value, found {self._found()}")
        value = self.value()
        op = self.operator()
        self.skip_space()
        other = _NAME.match(self.text, self.pos)
        if other is None:
            raise self.fail(f"expected an attribute name, found {self._found()}")
        self.pos = other.end()
        return _condition(other.group(), _FLIP[op], value)  # the same comparison seen from the name

    def operator(self) -> str:
        self.skip_space()
        m = _OP.match(self.text, self.pos)
        if m is None:
            raise self.fail(f"expected an operator ({', '.join(OPERATORS)}), found {self._found()}")
        self.pos = m.end()
        return "==" if m.group() == "=" else m.group()

    def value(self) -> int | float | np.datetime64:
        """A number or an ISO 8601 date as written: whole numbers stay exact integers (segment
        ids exceed 2**53); a value ends at white space, an operator or the end."""
        self.skip_space()
        start = self.pos
        m = _DATE.match(self.text, start) or _NUMBER.match(self.text, start)
        if m is None:
            raise self.fail(f"expected a number or an ISO 8601 date, found {self._found()}")
        end = m.end()
        if end < len(self.text) and not (self.text[end].isspace() or self.text[end] in "<>=!"):
            raise self.fail(
                f"the value {self.text[start : end + 1][:40]!r} goes on with {self.text[end]!r}", end
            )
        token = m.group()
        if len(token) > MAX_NUMBER_CHARS:
            raise self.fail(
                f"a number of {len(token):,} characters; at most {MAX_NUMBER_CHARS} are read", start
            )
        self.pos = end
        if m.re is _DATE:
            return _date(token, f"the date at character {start + 1}")
        return int(token) if _INTEGER.fullmatch(token) else float(token)


def parse_where(where: Any) -> list[Condition]:
    """The conditions of a ``where=`` filter (see the module docstring); [] for None."""
    if where is None:
        return []
    if isinstance(where, Condition):
        return [where]
    if isinstance(where, str):
        return _parse_text(where)
    if isinstance(where, Mapping):
        out = []
        for name, spec in where.items():
            if isinstance(spec, tuple) and len(spec) == 2 and isinstance(spec[0], str):
                out.append(_condition(name, *spec))
            elif isinstance(spec, list) and spec and all(isinstance(s, tuple) for s in spec):
                out.extend(_condition(name, *s) for s in spec)
            else:
                out.append(_condition(name, "==", spec))
        return out
    if isinstance(where, Sequence):
        out = []
        for item in where:
            if isinstance(item, str):
                out.extend(_parse_text(item))
            elif isinstance(item, (tuple, list)) and len(item) == 3:
                out.append(_condition(*item))
            else:
                raise InputError(f"where: each item must be a string or (name, op, value), got {item!r}")
        return out
    raise InputError(
        f"where must be a mapping, a string or a list of conditions, got {type(where).__name__}; "
        "for example where={'confidence': ('>', 0.8)} or where='confidence > 0.8'"
    )


def evaluate(conditions: Sequence[Condition], columns: Mapping[str, np.ndarray], n: int) -> np.ndarray | None:
    """(n,) booleans of the rows meeting every condition (``columns[name]``: one value per
    row); None when there are no conditions."""
    if not conditions:
        return None
    out = np.ones(n, bool)
    for cond in conditions:
        out &= cond.mask(columns[cond.name])
    return out


@dataclass(frozen=True, eq=False)
class RowFilter:
    """Conditions ready for a level: ``vertex`` ones read a vertex attribute column of the
    rows, ``objects`` ones the value of the row's object (OID-indexed ``values``; rows
    without an object fail them)."""

    vertex: tuple[Condition, ...]
    objects: tuple[Condition, ...]
    values: Mapping[str, np.ndarray]
    #: Vertex attributes of date-times: the datetime64 dtype their stored int64 counts read as.
    times: Mapping[str, np.dtype] = field(default_factory=dict)

    @property
    def vertex_names(self) -> list[str]:
        return list(dict.fromkeys(c.name for c in self.vertex))

    def mask(self, columns: Mapping[str, np.ndarray], oids: np.ndarray | None, n: int) -> np.ndarray:
        """(n,) booleans of the rows that meet every condition."""
        out = np.ones(n, bool)
        for cond in self.vertex:
            column = columns[cond.name].reshape(n)
            dtype = self.times.get(cond.name)
            out &= cond.mask(column if dtype is None or column.dtype == dtype else column.view(dtype))
        if self.objects:
            assert oids is not None  # object conditions are evaluated on rows with owners
            owned = oids >= 0
            at = np.where(owned, oids, 0)
            out &= owned
            for cond in self.objects:
                out &= cond.mask(self.values[cond.name][at])
        return out


def apply_filter(res: Result, row_filter: RowFilter, names: Sequence[str], with_ids: bool) -> Result:
    """The rows of ``res`` meeting ``row_filter`` (connectivity kept consistent, see
    :meth:`Result.subset`), keeping only the attributes ``names`` and, when ``with_ids``, the
    object ids; ``res`` holds the filter's attributes and, for object conditions, the OIDs."""
    oids = None if res.object_ids is None else np.asarray(res.object_ids, np.int64)
    columns = {name: res.attributes[name] for name in row_filter.vertex_names}
    out = res.subset(row_filter.mask(columns, oids, len(res)))
    out.attributes = {name: out.attributes[name] for name in names}
    if not with_ids:
        out.object_ids = None
    return out
