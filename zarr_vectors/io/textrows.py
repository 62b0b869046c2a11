"""Rows of delimited numbers read within fixed bounds, parsed column by column in their own
types, and the line and column to blame when a row does not parse.

The bounds hold before anything is allocated: a line is at most :data:`MAX_LINE` characters,
a row at most :data:`MAX_COLUMNS` values, and one block at most :data:`BLOCK_CHARS`
characters of text (so its table is at most four times that in bytes: every value takes at
least two characters and eight bytes). Integer columns are parsed as integers, never through
float64, so int64 and uint64 values are exact.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO

import numpy as np

from zarr_vectors.errors import InputError

__all__ = ["BLOCK_CHARS", "MAX_COLUMNS", "MAX_LINE", "diagnose", "integer_type", "parse", "read_lines"]

#: Longest line read (characters, line end included).
MAX_LINE = 1 << 20
#: Most values in one row (and names in a header).
MAX_COLUMNS = 4096
#: Text read into one block at most (characters); a block ends early when it is reached.
BLOCK_CHARS = 32 << 20

_INTEGER = re.compile(r"[+-]?\d+")
_I64 = np.iinfo(np.int64)
_U64 = np.iinfo(np.uint64)


def _clip(word: str) -> str:
    return repr(word if len(word) <= 40 else word[:40] + "...")


def read_line(fh: BinaryIO, path: Path, lineno: int, encoding: str = "utf-8") -> str:
    """Line ``lineno`` (1-based) of ``fh``, decoded; '' at the end of the file."""
    raw = fh.readline(MAX_LINE + 1)
    if len(raw) > MAX_LINE:
        raise InputError(f"{path}: line {lineno} is longer than {MAX_LINE:,} characters (not a point file?)")
    try:
        return raw.decode(encoding)
    except UnicodeDecodeError as exc:
        raise InputError(
            f"{path}: line {lineno} is not UTF-8 text ({exc.reason} at byte {exc.start})"
        ) from exc


def read_lines(fh: BinaryIO, path: Path, rows: int, lineno: int) -> list[str]:
    """Up to ``rows`` lines following line ``lineno`` (fewer at the end of the file or when
    the block reaches :data:`BLOCK_CHARS`), line ends removed; ``fh`` is left after them.

    The bytes are read in one piece and split at newlines; a line longer than
    :data:`MAX_LINE` or that is not UTF-8 is an :class:`InputError` naming its line."""
    start = fh.tell()
    data = fh.read(min(BLOCK_CHARS, max(rows * 256, MAX_LINE + 1)))
    if not data:
        return []
    ends = np.flatnonzero(np.frombuffer(data, np.uint8) == 10)
    at_eof = not fh.read(1)
    end = len(data) if at_eof else (int(ends[-1]) + 1 if len(ends) else 0)
    if len(ends) >= rows:
        end = min(end, int(ends[rows - 1]) + 1)
    edges = np.concatenate([[-1], ends[ends < end], [] if end == 0 or data[end - 1] == 10 else [end]])
    lengths = np.diff(edges)
    if end == 0 or (len(lengths) and lengths.max() > MAX_LINE):
        first = 0 if end == 0 else int(np.argmax(lengths > MAX_LINE))
        raise InputError(
            f"{path}: line {lineno + first + 1} is longer than {MAX_LINE:,} characters (not a point file?)"
        )
    fh.seek(start + end)
    try:
        text = data[:end].decode("utf-8")
    except UnicodeDecodeError as exc:
        line = lineno + 1 + int(np.count_nonzero(ends < exc.start))
        raise InputError(f"{path}: line {line} is not UTF-8 text ({exc.reason})") from exc
    lines = text.split("\n")
    return lines[:-1] if text.endswith("\n") else lines


def _rows(lines: Sequence[str], first: int, delimiter: str | None) -> list[tuple[int, list[str]]]:
    """``(line number, values)`` of the lines that hold values (comments after ``#`` and
    blank lines skipped, as numpy's parser does)."""
    out = []
    for i, line in enumerate(lines):
        text = line.split("#", 1)[0]
        if text.strip():
            out.append((first + i, [w.strip() for w in text.split(delimiter)]))
    return out


def _problem(word: str, dtype: np.dtype) -> str | None:
    if dtype.kind in "iu":
        if not _INTEGER.fullmatch(word):
            return f"{_clip(word)} is not an integer (the column is {dtype})"
        info = np.iinfo(dtype)
        if not info.min <= int(word) <= info.max:
            return f"{_clip(word)} does not fit {dtype} ({info.min} to {info.max})"
        return None
    try:
        float(word)
    except ValueError:
        return f"{_clip(word)} is not a number"
    return None


def diagnose(
    path: Path,
    lines: Sequence[str],
    first: int,
    names: Sequence[str],
    dtypes: Sequence[np.dtype],
    delimiter: str | None,
    hints: dict[str, str] | None = None,
) -> InputError:
    """The error of the first line of ``lines`` (line ``first`` on) that does not parse:
    the file, line, column and value; ``hints`` add advice per column name."""
    for lineno, words in _rows(lines, first, delimiter):
        if len(words) != len(names):
            shown = ", ".join(names[:6]) + (", ..." if len(names) > 6 else "")
            return InputError(
                f"{path}: line {lineno} has {len(words)} values, expected {len(names)} ({shown})"
            )
        for word, name, dtype in zip(words, names, dtypes):
            problem = _problem(word, dtype)
            if problem is not None:
                hint = (hints or {}).get(name, "")
                return InputError(f"{path}: line {lineno}, column {name!r}: {problem}{hint}")
    return InputError(
        f"{path}: lines {first} to {first + len(lines) - 1} do not parse as {len(names)} numbers"
    )


def parse(
    path: Path,
    lines: Sequence[str],
    first: int,
    dtype: np.dtype,
    delimiter: str | None,
    hints: dict[str, str] | None = None,
) -> np.ndarray:
    """The rows of ``lines`` (line ``first`` on) as a table of the structured ``dtype``."""
    try:
        with warnings.catch_warnings():  # no rows (only comments): "input contained no data"
            warnings.simplefilter("ignore", UserWarning)
            return np.loadtxt(lines, delimiter=delimiter, dtype=dtype, ndmin=1)
    except ValueError as exc:
        names = list(dtype.names or ())
        kinds = [dtype.fields[n][0] for n in names] if dtype.fields else []
        raise diagnose(path, lines, first, names, kinds, delimiter, hints) from exc


def integer_type(
    path: Path, lines: Sequence[str], first: int, column: int, name: str, delimiter: str | None
) -> np.dtype | None:
    """int64, or uint64 when a value passes int64's top and none is negative, for a column
    whose every value in ``lines`` is written as an integer; None when one is not. A value
    that fits neither is an :class:`InputError` naming its line."""
    rows = _rows(lines, first, delimiter)
    words = [(n, w[column]) for n, w in rows if column < len(w)]
    if not all(_INTEGER.fullmatch(w) for _, w in words):
        return None
    values = [int(w) for _, w in words]
    if not values or (min(values) >= _I64.min and max(values) <= _I64.max):
        return np.dtype(np.int64)
    if min(values) >= 0 and max(values) <= _U64.max:
        return np.dtype(np.uint64)
    top = max(values) > _U64.max
    lineno, word = next(
        (n, w) for (n, w), v in zip(words, values) if (v > _U64.max if top else v < _I64.min or v > _I64.max)
    )
    why = "does not fit uint64" if top else "does not fit int64, and the column has negative values"
    raise InputError(
        f"{path}: line {lineno}, column {name!r}: the integer {_clip(word)} {why}; ids are 64-bit "
        f"(give dtypes={{{name!r}: 'float64'}} to read the column as floats)"
    )
