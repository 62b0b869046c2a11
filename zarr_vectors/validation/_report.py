"""What validation found: :class:`Problem`, :class:`Report`, and the collector the checks write to."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from zarr_vectors.validation.rules import RULES

__all__ = ["Problem", "Report", "Collector", "short"]


def short(value: Any, limit: int = 80) -> str:
    """``repr`` of a metadata value for a message, cut to ``limit`` characters."""
    try:
        text = repr(value)
    except RecursionError:
        text = "<nested too deeply to show>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass(frozen=True)
class Problem:
    """One finding: the ``rule`` it breaks (see :data:`~zarr_vectors.validation.RULES`), the
    conformance ``level`` of that rule, the store ``path`` it concerns (``""`` for the store
    itself, else a key such as ``"0/vertices/c/1/2/3"``) and a plain-sentence ``message``."""

    level: int
    path: str
    message: str
    rule: str

    def __str__(self) -> str:
        where = self.path or "(store)"
        return f"{where}: {self.message} [{self.rule}]"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Report:
    """Result of :func:`~zarr_vectors.validation.validate`.

    ``ok`` is true iff ``problems`` is empty; ``warnings`` never affect it. ``level`` is
    the depth that was checked (1 to :data:`~zarr_vectors.validation.MAX_LEVEL`) and
    ``cells_checked`` the number of per-chunk cells whose bytes were decoded.
    """

    target: str
    level: int
    problems: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)
    cells_checked: int = 0

    @property
    def ok(self) -> bool:
        return not self.problems

    def __bool__(self) -> bool:
        return self.ok

    def rules_broken(self) -> set[str]:
        """Ids of the rules with at least one problem."""
        return {p.rule for p in self.problems}

    def __str__(self) -> str:
        head = (
            "valid" if self.ok else f"INVALID: {len(self.problems)} problem{'s' * (len(self.problems) != 1)}"
        )
        lines = [
            f"{self.target}: {head} (Zarr Vectors 0.9, checked to level {self.level}, "
            f"{self.cells_checked:,} cells decoded, {len(self.warnings)} warning{'s' * (len(self.warnings) != 1)})"
        ]
        lines += [f"  error   L{p.level} {p}" for p in self.problems]
        lines += [f"  warning L{p.level} {p}" for p in self.warnings]
        return "\n".join(lines)

    def to_json(self) -> str:
        return json.dumps(
            {
                "target": self.target,
                "ok": self.ok,
                "level": self.level,
                "cells_checked": self.cells_checked,
                "problems": [p.to_dict() for p in self.problems],
                "warnings": [p.to_dict() for p in self.warnings],
            },
            indent=2,
        )


class Collector:
    """Accumulates problems and warnings; each rule id must be in :data:`RULES`.

    At most ``limit`` problems (and as many warnings) are kept per rule, so a store with a
    million bad cells gives a readable report; the count of the rest is reported once.
    """

    def __init__(self, limit: int = 50) -> None:
        self.problems: list[Problem] = []
        self.warnings: list[Problem] = []
        self.limit = limit
        self._counts: dict[tuple[str, bool], int] = {}

    def _add(self, rule: str, path: str, message: str, warning: bool) -> None:
        level = RULES[rule][0]
        key = (rule, warning)
        n = self._counts.get(key, 0) + 1
        self._counts[key] = n
        if n <= self.limit:
            (self.warnings if warning else self.problems).append(Problem(level, path, message, rule))

    def error(self, rule: str, path: str, message: str) -> None:
        self._add(rule, path, message, False)

    def warn(self, rule: str, path: str, message: str) -> None:
        self._add(rule, path, message, True)

    def finish(self) -> None:
        """Add one line per rule whose findings went past ``limit``."""
        for (rule, warning), n in sorted(self._counts.items()):
            if n > self.limit:
                msg = f"{n - self.limit} more findings of this rule were not listed"
                (self.warnings if warning else self.problems).append(Problem(RULES[rule][0], "", msg, rule))
