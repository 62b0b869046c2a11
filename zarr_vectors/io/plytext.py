"""Point files without a library: PLY point clouds (ASCII or binary) and delimited text
(CSV, XYZ, TXT), each read a block of rows at a time.

Every source has the same face (:class:`PointSource`): ``count`` (None until known),
``bounds()`` (from the file, reading it once when it has no header to say), ``chunks(rows)``
yielding ``(positions, attributes)`` in file order, and ``crs``/``record`` (None here).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from zarr_vectors.errors import InputError

__all__ = ["PointSource", "PlySource", "TextSource", "TEXT_SUFFIXES"]

TEXT_SUFFIXES = (".csv", ".xyz", ".txt")

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
}


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


def _extent(parts: Iterator[np.ndarray], d: int) -> tuple[np.ndarray, np.ndarray]:
    lo, hi = np.full(d, np.inf), np.full(d, -np.inf)
    for p in parts:
        if len(p):
            lo, hi = np.minimum(lo, p.min(axis=0)), np.maximum(hi, p.max(axis=0))
    if not np.all(lo <= hi):
        raise InputError("no points found: the file holds no rows")
    return lo, hi


@dataclass
class PlySource:
    """The ``vertex`` element of a PLY file; ``x``, ``y`` (and ``z``) are the positions, every
    other scalar property an attribute of its PLY type. Other elements (faces) are ignored."""

    path: Path
    crs: Any = None
    _dtype: np.dtype = field(init=False)
    _count: int = field(init=False)
    _start: int = field(init=False)
    _ascii: bool = field(init=False)
    _pos: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        self.path = Path(self.path)
        with open(self.path, "rb") as fh:
            if fh.readline().strip() != b"ply":
                raise InputError(f"{self.path}: not a PLY file (no 'ply' magic line)")
            lines = []
            while (line := fh.readline()) and line.strip() != b"end_header":
                lines.append(line.decode("ascii", "replace").split())
            if not line:
                raise InputError(f"{self.path}: the PLY header has no end_header line")
            self._start = fh.tell()
        self._parse(lines)

    def _parse(self, lines: list[list[str]]) -> None:
        fmt, element, props, count, before = None, None, [], 0, False
        for words in lines:
            if not words:
                continue
            if words[0] == "format":
                fmt = words[1]
            elif words[0] == "element":
                if element == "vertex":
                    break
                element, count = words[1], int(words[2])
                before = before or (element != "vertex" and count > 0)
            elif words[0] == "property" and element == "vertex":
                if words[1] == "list":
                    raise InputError(f"{self.path}: vertex property {words[-1]} is a list; not a point cloud")
                if words[1] not in _PLY_DTYPES:
                    raise InputError(f"{self.path}: unknown PLY property type {words[1]!r}")
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

    @property
    def count(self) -> int:
        return self._count

    def _tables(self, rows: int) -> Iterator[np.ndarray]:
        if self._ascii:
            with open(self.path, "rb") as fh:
                fh.seek(self._start)
                left = self._count
                while left > 0:
                    try:
                        table = np.loadtxt(fh, dtype=self._dtype, max_rows=min(rows, left), ndmin=1)
                    except ValueError as exc:
                        raise InputError(
                            f"{self.path}: a vertex row is not {self._dtype.names} ({exc})"
                        ) from exc
                    if len(table) == 0:
                        raise InputError(f"{self.path}: {left} vertex rows missing (truncated file)")
                    left -= len(table)
                    yield table
            return
        if self.path.stat().st_size < self._start + self._count * self._dtype.itemsize:
            raise InputError(f"{self.path}: the file is shorter than its {self._count} vertices (truncated)")
        data = np.memmap(self.path, self._dtype, "r", offset=self._start, shape=(self._count,))
        for start in range(0, self._count, rows):
            yield np.array(data[start : start + rows]).astype(self._dtype.newbyteorder("="))

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        return _extent((_split(t, (), self._pos)[0] for t in self._tables(1 << 21)), len(self._pos))

    def chunks(self, rows: int) -> Iterator[tuple[np.ndarray, dict[str, np.ndarray]]]:
        names = list(self._dtype.names or ())
        for table in self._tables(rows):
            yield _split(table, names, self._pos)


@dataclass
class TextSource:
    """Delimited text, one point per row. Column names come from a header line (a first line
    with a non-number), else from ``columns``, else ``x, y, z, c3, c4 ...``. Positions are the
    ``positions`` columns (default: x, y and z, any case, else the first three). Columns whose
    first block holds only whole numbers are int64, the rest float64 (``dtypes`` overrides)."""

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
        with open(self.path, encoding="utf-8") as fh:
            first = fh.readline()
        words = [w.strip() for w in (first.split(self.delimiter) if first.strip() else [])]
        if not words:
            raise InputError(f"{self.path}: the file is empty")
        self._header = not all(_is_number(w) for w in words)
        if self.columns is not None:
            if len(self.columns) != len(words):
                raise InputError(f"{self.path}: {len(words)} columns, but columns= names {len(self.columns)}")
            self._names = list(self.columns)
        elif self._header:
            self._names = words
        else:
            self._names = [("x", "y", "z")[i] if i < 3 else f"c{i}" for i in range(len(words))]
        self.positions = self._position_names()

    def _position_names(self) -> list[str]:
        if self.positions is not None:
            missing = [p for p in self.positions if p not in self._names]
            if missing:
                raise InputError(f"{self.path}: position columns {missing} not among {self._names}")
            return list(self.positions)
        lower = {n.lower(): n for n in self._names}
        named = [lower[a] for a in ("x", "y", "z") if a in lower]
        if len(named) >= 2 and named[:2] == [lower["x"], lower["y"]]:
            return named
        return self._names[:3]

    @property
    def count(self) -> int | None:
        return self._count

    def _blocks(self, rows: int) -> Iterator[np.ndarray]:
        with open(self.path, encoding="utf-8") as fh:
            if self._header:
                fh.readline()
            seen = 0
            while True:
                try:
                    with warnings.catch_warnings():  # the end of the file: "input contained no data"
                        warnings.simplefilter("ignore", UserWarning)
                        block = np.loadtxt(
                            fh, delimiter=self.delimiter, max_rows=rows, ndmin=2, dtype=np.float64
                        )
                except ValueError as exc:
                    raise InputError(
                        f"{self.path}: a row after row {seen} is not {len(self._names)} numbers ({exc})"
                    ) from exc
                if block.size == 0:
                    break
                if block.shape[1] != len(self._names):
                    raise InputError(
                        f"{self.path}: rows have {block.shape[1]} values, expected {len(self._names)}"
                    )
                seen += len(block)
                yield block
                if len(block) < rows:
                    break
        self._count = seen

    def _typed(self, block: np.ndarray) -> np.ndarray:
        """The block as a table of the columns' types (fixed by the first block)."""
        if self._types is None:
            given = self.dtypes or {}
            whole = np.all(block == np.round(block), axis=0) & np.all(np.abs(block) < 2**53, axis=0)
            self._types = {
                n: np.dtype(given.get(n, "int64" if whole[i] and n not in self.positions else "float64"))  # type: ignore[operator]
                for i, n in enumerate(self._names)
            }
        table = np.empty(len(block), [(n, t) for n, t in self._types.items()])
        for i, (n, t) in enumerate(self._types.items()):
            col = block[:, i]
            if t.kind in "iu" and not np.array_equal(col, np.round(col)):
                raise InputError(
                    f"{self.path}: column {n!r} held whole numbers in the first rows but later has "
                    f"fractions; give dtypes={{{n!r}: 'float64'}} (CLI: --dtype {n}=float64)"
                )
            table[n] = col
        return table

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        idx = [self._names.index(p) for p in self.positions or ()]
        return _extent((b[:, idx] for b in self._blocks(1 << 20)), len(idx))

    def chunks(self, rows: int) -> Iterator[tuple[np.ndarray, dict[str, np.ndarray]]]:
        for block in self._blocks(rows):
            yield _split(self._typed(block), self._names, list(self.positions or ()))


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
