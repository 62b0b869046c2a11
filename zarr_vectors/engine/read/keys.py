"""The keys of one ``get_many`` call, in named sections.

A read fetches the cells of several arrays (vertices, attributes, fragment indexes, link
cells) in one batch. :class:`KeyBatch` lays their keys out section by section and hands each
section's answers back by name, so no caller indexes the answers by arithmetic.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

__all__ = ["KeyBatch"]

T = TypeVar("T")


class KeyBatch:
    """Keys added section by section; ``keys`` is the whole batch in the order added.

    Invariant: section ``name`` is ``keys[start:start + len]`` for the ``(start, len)`` recorded
    when it was added, and sections never overlap. A section's answers are the same slice of
    the list a ``get_many(keys)`` returns.
    """

    __slots__ = ("keys", "_spans")

    def __init__(self) -> None:
        self.keys: list[str] = []
        self._spans: dict[str, tuple[int, int]] = {}

    def add(self, name: str, keys: Sequence[str]) -> None:
        """Append ``keys`` as section ``name`` (each name is added once)."""
        self._spans[name] = (len(self.keys), len(keys))
        self.keys.extend(keys)

    def __contains__(self, name: str) -> bool:
        return name in self._spans

    def take(self, answers: Sequence[T], name: str) -> list[T]:
        """The answers of section ``name`` (``answers``: what ``get_many(self.keys)`` returned);
        empty for a section never added."""
        start, n = self._spans.get(name, (0, 0))
        return list(answers[start : start + n])
