"""What parsing a document of the format found: :class:`Finding`, and the reader's policy.

Every parser in :mod:`zarr_vectors.format` returns the parsed value plus a list of
findings. The reader raises one :class:`~zarr_vectors.errors.FormatError` for those that
block reading (:func:`raise_for`); the validator reports every one under its ``code``,
which is the id of the validator rule it breaks (``"metadata.root"``, ...).

Severities:

* ``ERROR``: the document breaks the format in a way that changes what a read returns;
  readers refuse it, the validator reports an error;
* ``UNSUPPORTED``: the document may conform, but this library cannot decode it (a codec it
  lacks); readers refuse it, the validator warns that it could not check the cells;
* ``NONCONFORMING``: the document breaks a rule of the format, but reads correctly (a wrong
  ``zv_array`` discriminator, a forbidden key); readers go on, the validator reports an error;
* ``WARNING``: allowed but worth a word (an unknown key or capability token).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from zarr_vectors.errors import FormatError

__all__ = [
    "ERROR",
    "UNSUPPORTED",
    "NONCONFORMING",
    "WARNING",
    "Finding",
    "Findings",
    "raise_for",
    "short",
]

ERROR = "error"
UNSUPPORTED = "unsupported"
NONCONFORMING = "nonconforming"
WARNING = "warning"
SEVERITIES = (ERROR, UNSUPPORTED, NONCONFORMING, WARNING)

#: Findings named in one FormatError message besides the first.
MESSAGE_MORE = 3


def short(value: Any, limit: int = 80) -> str:
    """``repr`` of a metadata value for a message, cut to ``limit`` characters."""
    try:
        text = repr(value)
    except RecursionError:
        text = "<nested too deeply to show>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass(frozen=True)
class Finding:
    """One thing a parser found in a document.

    ``path`` is the store key of the document (``"zarr.json"`` for the root group,
    ``"0/zarr.json"`` for a level, ``"0/vertices"`` for an array node), ``code`` the id of the
    validator rule it breaks and ``message`` a sentence naming the document and the field.
    """

    path: str
    code: str
    message: str
    severity: str = ERROR

    @property
    def blocks_reading(self) -> bool:
        """Whether a reader must refuse the document (``ERROR`` or ``UNSUPPORTED``)."""
        return self.severity in (ERROR, UNSUPPORTED)

    @property
    def breaks_format(self) -> bool:
        """Whether the document breaks the format (``ERROR`` or ``NONCONFORMING``)."""
        return self.severity in (ERROR, NONCONFORMING)


class Findings(list[Finding]):
    """The findings of one parse, in the order they were found."""

    def add(self, path: str, code: str, message: str, severity: str = ERROR) -> None:
        self.append(Finding(path, code, message, severity))

    @property
    def blocking(self) -> bool:
        """Whether any finding blocks reading."""
        return any(f.blocks_reading for f in self)


def raise_for(findings: Iterable[Finding]) -> None:
    """Raise one FormatError for the findings that block reading; return when there are none.

    The message is the first such finding's, followed by a count of the others (and the
    first few of them); the error's ``problems`` attribute holds them all.
    """
    bad = [f for f in findings if f.blocks_reading]
    if not bad:
        return
    message = bad[0].message
    if len(bad) > 1:
        rest = "; ".join(f.message for f in bad[1 : 1 + MESSAGE_MORE])
        more = "" if len(bad) <= 1 + MESSAGE_MORE else "; ..."
        message += f" (and {len(bad) - 1} more problem{'s' * (len(bad) > 2)}: {rest}{more})"
    exc = FormatError(message)
    exc.problems = tuple(bad)  # type: ignore[attr-defined]
    raise exc
