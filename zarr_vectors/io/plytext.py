"""Point files without a library: PLY point clouds (ASCII or binary) and delimited text
(CSV, XYZ, TXT), each read a block of rows at a time.

Every source has the same face (:class:`PointSource`): ``count`` (None until known),
``bounds()`` (from the file, reading it once when it has no header to say), ``chunks(rows)``
yielding ``(positions, attributes)`` in file order, and ``crs``/``record`` (None here).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Protocol

import numpy as np

from zarr_vectors.errors import InputError
from zarr_vectors.io.textrows import MAX_COLUMNS, integer_type, parse, read_line, read_lines

__all__ = ["PointSource", "PlySource", "TextSource", "TEXT_SUFFIXES"]

TEXT_SUFFIXES = (".csv", ".xyz", ".txt")
#: Text files: the rows that fix each column's type.
TYPE_ROWS = 1 << 16

_PLY_DTYPES = {
    "char": "i1",
    "int8": "i1",
    "uchar": "u1",
    "uint8": "u1",
    "short": "i2",
    "int16": "i2",
    "ushort": "u2",
    "uint16": "u2",
    "int": "i4",
    "int32": "i4",
    "uint": "u4",
    "uint32": "u4",
    "float": "f4",
    "float32": "f4",
    "double": "f8",
    "float64": "f8",
    # not in the PLY standard, written by some tools for 64-bit ids
    "int64": "i8",
    "uint64": "u8",
}
#: Longest PLY header read (bytes).
_HEADER_BYTES = 1 << 20


class PointSource(Protocol):
    path: Path

    @property
    def count(self) -> int | None: ...

    @property
    def crs(self) -> Any: ...

    def bounds(self) -> tuple[np.ndarray, np.ndarray]: ...

    def chunks(self, rows: int) -> Iterator[tuple[np.ndarray, dict[str, np.ndarray]]]: ...


def _split(table: np.ndarray, names: Sequence[str], pos: Sequence[str]) -> tuple[np.ndarray, dict]:
    """Positions (N, D) of the ``pos`` columns and the other columns as attributes."""
    positions = np.column_stack([table[p] for p in pos]) if len(table) else np.zeros((0, len(pos)))
    return positions, {n: np.ascontiguousarray(table[n]) for n in names if n not in pos}


def _extent(path: Path, parts: Iterator[np.ndarray], d: int) -> tuple[np.ndarray, np.ndarray]:
    """The box of the positions of ``parts``; no rows, or a NaN or infinite position, is an
    :class:`InputError` naming ``path``."""
    lo, hi = np.full(d, np.inf), np.full(d, -np.inf)
    for p in parts:
        if len(p):
            if not np.all(np.isfinite(p)):
                row = int(np.flatnonzero(~np.all(np.isfinite(p), axis=1))[0])
                raise InputError(
                    f"{path}: a position is not finite ({p[row].tolist()}); positions must be numbers"
                )
            lo, hi = np.minimum(lo, p.min(axis=0)), np.maximum(hi, p.max(axis=0))
    if not np.all(lo <= hi):
        raise InputError(f"{path}: no points found: the file holds no rows")
    return lo, hi


@dataclass
class PlySource:
    """The ``vertex`` element of a PLY file; ``x``, ``y`` (and ``z``) are the positions, every
    other scalar property an attribute of its PLY type (integers parsed as integers, so ids
    are exact; ``int64``/``uint64`` are accepted beyond the standard types). Other elements
    (faces) are ignored. The header's vertex count is checked against the file's size when
    it is opened, before anything is read."""

    path: Path
    crs: Any = None
    _dtype: np.dtype = field(init=False)
    _count: int = field(init=False)
    _start: int = field(init=False)
    _ascii: bool = field(init=False)
    _pos: tuple[str, ...] = field(init=False)
    _header_lines: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        self.path = Path(self.path)
        with open(self.path, "rb") as fh:
            if fh.readline(16).strip() != b"ply":
                raise InputError(f"{self.path}: not a PLY file (no 'ply' magic line)")
            lines: list[list[str]] = []
            while (line := fh.readline(_HEADER_BYTES)) and line.strip() != b"end_header":
                lines.append(line.decode("ascii", "replace").split())
                if fh.tell() > _HEADER_BYTES:
                    raise InputError(f"{self.path}: the PLY header is longer than {_HEADER_BYTES:,} bytes")
            if not line:
                raise InputError(f"{self.path}: the PLY header has no end_header line")
            self._start = fh.tell()
            self._header_lines = len(lines) + 2
        self._parse(lines)
        self._check_size()

    def _words(self, words: list[str], n: int) -> list[str]:
        if len(words) < n:
            raise InputError(f"{self.path}: PLY header line {' '.join(words)[:80]!r} has too few words")
        return words

    def _parse(self, lines: list[list[str]]) -> None:
        fmt, element, count, before = None, None, 0, False
        props: list[tuple[str, str]] = []
        for words in lines:
            if not words:
                continue
            if words[0] == "format":
                fmt = self._words(words, 2)[1]
            elif words[0] == "element":
                if element == "vertex":
                    break
                element, text = self._words(words, 3)[1:3]
                if not (text.isascii() and text.isdigit()):
                    raise InputError(
                        f"{self.path}: PLY element {element!r} count {text[:40]!r} is not a count"
                    )
                count = int(text)
                before = before or (element != "vertex" and count > 0)
            elif words[0] == "property" and element == "vertex":
                if self._words(words, 3)[1] == "list":
                    raise InputError(f"{self.path}: vertex property {words[-1]} is a list; not a point cloud")
                if words[1] not in _PLY_DTYPES:
                    raise InputError(f"{self.path}: unknown PLY property type {words[1][:40]!r}")
                if any(words[2] == n for n, _ in props):
                    raise InputError(f"{self.path}: vertex property {words[2][:80]!r} appears twice")
                props.append((words[2], _PLY_DTYPES[words[1]]))
        if element != "vertex" and not props:
            raise InputError(f"{self.path}: the PLY file has no vertex element")
        if before:
            raise InputError(f"{self.path}: elements before 'vertex' are not supported; put vertex first")
        if fmt not in ("ascii", "binary_little_endian", "binary_big_endian"):
            raise InputError(f"{self.path}: unknown PLY format {fmt!r}")
        order = ">" if fmt == "binary_big_endian" else "<"
        self._ascii = fmt == "ascii"
        self._dtype = np.dtype([(n, order + t) for n, t in props])
        self._count = count
        names = [n for n, _ in props]
        self._pos = tuple(a for a in ("x", "y", "z") if a in names)
        if self._pos[:2] != ("x", "y"):
            raise InputError(f"{self.path}: the vertex element needs x and y properties, has {names}")

    def _check_size(self) -> None:
        """The header's vertex count against the bytes after the header: binary rows take
        their record size, text rows at least two characters per value."""
        left = self.path.stat().st_size - self._start
        size = 2 * len(self._dtype.names or ()) if self._ascii else self._dtype.itemsize
        if self._count * size > left:
            raise InputError(
                f"{self.path}: the file is shorter than its {self._count:,} vertices (the header says "
                f"{self._count:,} of at least {size} bytes, {left:,} bytes follow it: truncated, or a wrong count)"
            )

    @property
    def count(self) -> int:
        return self._count

    def _tables(self, rows: int) -> Iterator[np.ndarray]:
        if self._ascii:
            yield from self._text_tables(rows)
            return
        data = np.memmap(self.path, self._dtype, "r", offset=self._start, shape=(self._count,))
        for start in range(0, self._count, rows):
            yield np.array(data[start : start + rows]).astype(self._dtype.newbyteorder("="))

    def _text_tables(self, rows: int) -> Iterator[np.ndarray]:
        with open(self.path, "rb") as fh:
            fh.seek(self._start)
            lineno = self._header_lines
            left = self._count
            while left > 0:
                lines = read_lines(fh, self.path, min(rows, left), lineno)
                if not lines:
                    raise InputError(f"{self.path}: {left:,} vertex rows missing (truncated file)")
                table = parse(self.path, lines, lineno + 1, self._dtype, None)
                lineno += len(lines)
                left -= len(table)
                yield table

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        return _extent(
            self.path, (_split(t, (), self._pos)[0] for t in self._tables(1 << 21)), len(self._pos)
        )

    def chunks(self, rows: int) -> Iterator[tuple[np.ndarray, dict[str, np.ndarray]]]:
        names = list(self._dtype.names or ())
        for table in self._tables(rows):
            yield _split(table, names, self._pos)


@dataclass
class TextSource:
    """Delimited text, one point per row. Column names come from a header line (a first line
    with a non-number), else from ``columns``, else ``x, y, z, c3, c4 ...``. Positions are the
    ``positions`` columns (default: x, y and z, any case, else the first three), float64.

    A column other than a position whose values in the first :data:`TYPE_ROWS` rows are all written as
    integers (digits and a sign, no point or exponent) is an integer column: int64, or uint64
    when a value is above int64's top and none is negative. Integer columns (object and group
    ids among them) are parsed as integers, never through float64, so 64-bit ids are exact;
    an integer that fits neither type is an :class:`InputError` naming the line and column,
    as is a later value that does not fit its column's type. The rest are float64;
    ``dtypes`` sets any column's type. Rows hold at most :data:`~zarr_vectors.io.textrows.MAX_COLUMNS`
    values and lines at most :data:`~zarr_vectors.io.textrows.MAX_LINE` characters."""

    path: Path
    columns: Sequence[str] | None = None
    positions: Sequence[str] | None = None
    delimiter: str | None = None
    dtypes: dict[str, str] | None = None
    crs: Any = None
    _names: list[str] = field(init=False)
    _header: bool = field(init=False)
    _count: int | None = field(init=False, default=None)
    _types: dict[str, np.dtype] | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.path = Path(self.path)
        if self.delimiter is None:
            self.delimiter = "," if self.path.suffix.lower() == ".csv" else None
        with open(self.path, "rb") as fh:
            first = read_line(fh, self.path, 1, "utf-8-sig")
        words = [w.strip() for w in (first.split(self.delimiter) if first.strip() else [])]
        if not words:
            raise InputError(f"{self.path}: the file is empty")
        if len(words) > MAX_COLUMNS:
            raise InputError(
                f"{self.path}: line 1 has {len(words):,} columns; at most {MAX_COLUMNS:,} are read"
            )
        self._header = not all(_is_number(w) for w in words)
        if self.columns is not None:
            if len(self.columns) != len(words):
                raise InputError(f"{self.path}: {len(words)} columns, but columns= names {len(self.columns)}")
            self._names = list(self.columns)
        elif self._header:
            self._names = words
        else:
            self._names = [("x", "y", "z")[i] if i < 3 else f"c{i}" for i in range(len(words))]
        bad = sorted({n for n in self._names if not n or self._names.count(n) > 1})
        if bad:
            raise InputError(f"{self.path}: column names must be distinct and not empty; {bad} are not")
        self.positions = self._position_names()

    def _position_names(self) -> list[str]:
        if self.positions is not None:
            missing = [p for p in self.positions if p not in self._names]
            if missing:
                raise InputError(f"{self.path}: position columns {missing} not among {self._names}")
            return list(self.positions)
        lower = {n.lower(): n for n in self._names}
        named = [lower[a] for a in ("x", "y", "z") if a in lower]
        if "x" in lower and "y" in lower and named[:2] == [lower["x"], lower["y"]]:
            return named
        return self._names[:3]

    @property
    def count(self) -> int | None:
        return self._count

    def _blocks(self, rows: int) -> Iterator[np.ndarray]:
        """Tables of up to ``rows`` rows (fewer when a block reaches the text bound)."""
        with open(self.path, "rb") as fh:
            lineno = 0
            if self._header:
                read_line(fh, self.path, 1, "utf-8-sig")
                lineno = 1
            seen = 0
            if self._types is None:
                self._types = self._infer(fh, lineno)
                fh.seek(0)
                for _ in range(lineno):
                    fh.readline()
            while lines := read_lines(fh, self.path, rows, lineno):
                table = parse(
                    self.path,
                    lines,
                    lineno + 1,
                    np.dtype(list(self._types.items())),
                    self.delimiter,
                    self._hints(),
                )
                lineno += len(lines)
                seen += len(table)
                if len(table):
                    yield table
        self._count = seen

    def _hints(self) -> dict[str, str]:
        given = self.dtypes or {}
        return {
            n: f"; the first rows held integers: give dtypes={{{n!r}: 'float64'}} (CLI: --dtype {n}=float64)"
            for n, t in (self._types or {}).items()
            if t.kind in "iu" and n not in given
        }

    def _infer(self, fh: BinaryIO, lineno: int) -> dict[str, np.dtype]:
        """Each column's type from the :data:`TYPE_ROWS` lines after line ``lineno`` (see the class)."""
        lines, first = read_lines(fh, self.path, TYPE_ROWS, lineno), lineno + 1
        try:
            given = {n: np.dtype(t) for n, t in (self.dtypes or {}).items()}
        except TypeError as exc:
            raise InputError(f"dtypes={self.dtypes!r}: not numpy dtypes ({exc})") from exc
        floats = [np.dtype(np.float64)] * len(self._names)
        table = parse(self.path, lines, first, np.dtype(list(zip(self._names, floats))), self.delimiter)
        types = {}
        for n in self._names:
            col = table[n]
            whole = n not in (self.positions or ()) and bool(
                np.all(np.isfinite(col) & (col == np.round(col)))
            )
            types[n] = given.get(n, np.dtype(np.int64) if whole else floats[0])
        try:
            parse(self.path, lines, first, np.dtype(list(types.items())), self.delimiter)
        except InputError:  # a candidate is written as a float, or is past int64: settle each
            for i, n in enumerate(self._names):
                if n not in given and types[n].kind == "i":
                    found = integer_type(self.path, lines, first, i, n, self.delimiter)
                    types[n] = floats[0] if found is None else found
        return types

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        pos = list(self.positions or ())
        return _extent(self.path, (_split(t, (), pos)[0] for t in self._blocks(1 << 20)), len(pos))

    def chunks(self, rows: int) -> Iterator[tuple[np.ndarray, dict[str, np.ndarray]]]:
        for table in self._blocks(rows):
            yield _split(table, self._names, list(self.positions or ()))


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
