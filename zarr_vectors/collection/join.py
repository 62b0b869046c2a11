"""``where=`` across a relationship: ``"post_segment.cell_type == 'basket'"`` keeps the rows whose
``post_segment`` names an object whose ``cell_type`` passes, the object attribute read from a
member of the relationship's id space (a join through the shared ids).

A where text is a conjunction (``and``) of comparisons; those whose name is
``<relationship>.<object attribute>`` are join clauses, the rest go to the member's own
``where=``. A join value is a number, a date, or a quoted string (``'basket'``).
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from zarr_vectors.engine import parse_where
from zarr_vectors.errors import InputError

__all__ = ["JoinClause", "split_where", "passing_ids"]

#: A clause ``rel.attr op value``; the value a quoted string or any other text the where
#: parser reads (numbers, dates).
_CLAUSE = re.compile(
    r"\s*([A-Za-z_]\w*)\.([A-Za-z_]\w*)\s*(==|!=|<=|>=|<|>)\s*('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|[^'\"\s]+)\s*"
)
#: ``and`` outside quotes: the text is cut there into clauses.
_PIECES = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|\band\b|[^'\"a]+|a", re.IGNORECASE)
_STRING_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


@dataclass(frozen=True)
class JoinClause:
    """``relationship.attribute op value``: an object attribute of the related id space."""

    relationship: str
    attribute: str
    op: str
    value: str

    def mask(self, column: np.ndarray) -> np.ndarray:
        """(N,) booleans of the objects whose ``column`` value passes."""
        if self.value[:1] in ("'", '"'):
            text = self.value[1:-1].replace("\\" + self.value[0], self.value[0])
            if column.dtype.kind not in "UO":
                raise InputError(f"where: {self.attribute!r} holds numbers; {self.value} is text")
            return np.asarray(_STRING_OPS[self.op](column.astype(str), text), bool)
        (condition,) = parse_where(f"{self.attribute} {self.op} {self.value}")
        return condition.mask(column)


def _clauses(text: str) -> list[str]:
    """``text`` cut at every ``and`` that is outside quotes."""
    out: list[str] = []
    current: list[str] = []
    for m in _PIECES.finditer(text):
        if m.group(0).lower() == "and" and m.group(0)[:1] not in "'\"":
            out.append("".join(current))
            current = []
        else:
            current.append(m.group(0))
    out.append("".join(current))
    return out


def split_where(where: Any, relationships: dict[str, str]) -> tuple[Any, list[JoinClause]]:
    """The member's own ``where`` (a list of clause strings, or ``where`` itself when it is not
    text) and the join clauses of a where text."""
    if not isinstance(where, str):
        return where, []
    own, joins = [], []
    for clause in _clauses(where):
        m = _CLAUSE.fullmatch(clause)
        if m is not None and m.group(1) in relationships:
            joins.append(JoinClause(*m.groups()))
        elif m is not None:
            raise InputError(
                f"where: {m.group(1)!r} in {clause.strip()!r} is not a relationship of the member "
                f"(relationships: {sorted(relationships)})"
            )
        else:
            own.append(clause.strip())
    return (own or None), joins


def passing_ids(object_ids: np.ndarray, values: np.ndarray, clause: JoinClause) -> np.ndarray:
    """The ids (uint64) among ``object_ids`` whose attribute ``values`` pass ``clause``."""
    mask = clause.mask(values.reshape(len(object_ids)))
    return np.asarray(object_ids, np.uint64)[mask]
