"""Rows grouped by cell, held in memory up to a limit and spilled to disk beyond it.

A :class:`CellSpill` takes batches of rows (several named columns sharing the row count)
with the linear cell index of each row. Rows wait in memory; when they pass the byte
limit they are sorted by cell (stably) and written as a *run*: one raw file per
column plus the run's cells and offsets. :meth:`CellSpill.read` gathers the rows of a
range of cells from every run, in arrival order, so a cell's rows come back exactly as
they were appended. Memory holds the unsorted buffer, or one group of cells being read.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["CellSpill", "DiskColumn", "Run", "cell_groups", "stable_order"]


@dataclass(frozen=True, eq=False)
class DiskColumn:
    """A column of a run on disk: raw little-endian rows, read a slice at a time with plain
    reads (a memory map would keep every page it touched resident in this process), through
    one descriptor kept open until :meth:`close`."""

    path: Path
    dtype: np.dtype
    row_shape: tuple[int, ...]
    _fd: list[int] = field(default_factory=list, repr=False)

    @classmethod
    def save(cls, path: Path, values: np.ndarray) -> DiskColumn:
        with path.open("wb") as f:
            np.ascontiguousarray(values).tofile(f)
        return cls(path, values.dtype, tuple(values.shape[1:]))

    def read_into(self, a: int, out: np.ndarray) -> None:
        """Rows ``a:a + len(out)`` into the C-contiguous ``out``."""
        if not self._fd:
            self._fd.append(os.open(self.path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)))
        view = out.reshape(-1).view(np.uint8)
        offset = a * (out.nbytes // max(len(out), 1))
        got = 0
        while got < len(view):
            n = os.preadv(self._fd[0], [view[got:].data], offset + got)
            if n == 0:
                raise OSError(f"spill file {self.path} is shorter than written (was it removed?)")
            got += n

    def __getitem__(self, rows: slice) -> np.ndarray:
        a, b = rows.start or 0, rows.stop
        out = np.empty((b - a, *self.row_shape), self.dtype)
        self.read_into(a, out)
        return out

    def close(self) -> None:
        while self._fd:
            os.close(self._fd.pop())


@dataclass(frozen=True, eq=False)
class Run:
    """Rows sorted by cell: cell ``cells[i]`` holds rows ``offsets[i]:offsets[i + 1]``."""

    cells: np.ndarray  # (R,) int64, ascending
    offsets: np.ndarray  # (R + 1,) int64
    columns: dict[str, Any]  # numpy arrays in memory, or DiskColumn in the spill folder
    #: When set, ``columns`` are in arrival order and sorted row ``i`` is ``order[i]``
    #: (an in-memory run gathers rows a group at a time instead of copying them all).
    order: np.ndarray | None = None

    def column(self, name: str, a: int, b: int) -> np.ndarray:
        """Sorted rows ``a:b`` of one column."""
        values = self.columns[name]
        return values[a:b] if self.order is None else np.take(values, self.order[a:b], axis=0)

    def column_into(self, name: str, a: int, out: np.ndarray) -> None:
        """Sorted rows ``a:a + len(out)`` of one column into ``out``."""
        values = self.columns[name]
        if isinstance(values, DiskColumn):
            values.read_into(a, out)
        elif self.order is None:
            out[...] = values[a : a + len(out)]
        else:
            np.take(values, self.order[a : a + len(out)], axis=0, out=out)

    def rows_of(self, lo: int, hi: int) -> tuple[int, int]:
        """Row range of the cells ``lo <= cell < hi``."""
        a, b = np.searchsorted(self.cells, [lo, hi])
        return int(self.offsets[a]), int(self.offsets[b])


def stable_order(cell: np.ndarray, top: int | None = None) -> np.ndarray:
    """Stable argsort of non-negative cell indices (radix sort when they fit 16 bits);
    ``top`` is ``cell.max()`` when the caller knows it."""
    if not len(cell):
        return np.zeros(0, np.intp)
    if (int(cell.max()) if top is None else top) < 1 << 16:
        return np.argsort(cell.astype(np.uint16), kind="stable")
    return np.argsort(cell, kind="stable")


def _sorted_run(cell: np.ndarray, columns: dict[str, np.ndarray]) -> Run:
    top = int(cell.max()) if len(cell) else 0
    order = stable_order(cell, top)
    if len(cell) and top < 4 * len(cell) + (1 << 20):
        # Cells few against rows: count them (no gather of the cells in sorted order).
        counts = np.bincount(cell)
        cells = np.flatnonzero(counts)
        offsets = np.zeros(len(cells) + 1, np.int64)
        np.cumsum(counts[cells], out=offsets[1:])
        return Run(cells.astype(np.int64), offsets, columns, order)
    scell = cell[order]
    first = (
        np.flatnonzero(np.concatenate([[True], scell[1:] != scell[:-1]]))
        if len(scell)
        else np.zeros(0, np.int64)
    )
    cells = scell[first]
    offsets = np.append(first, len(scell)).astype(np.int64)
    return Run(cells.astype(np.int64), offsets, columns, order)


def cell_groups(cells: np.ndarray, counts: np.ndarray, max_rows: int) -> Iterator[tuple[int, int]]:
    """Half-open ranges ``[lo, hi)`` of the ascending occupied ``cells`` (holding ``counts``
    rows) of about ``max_rows`` rows each (a cell is never split, so one larger cell makes a
    larger group)."""
    start, acc = 0, 0
    for i, n in enumerate(counts.tolist()):
        if acc and acc + n > max_rows:
            yield int(cells[start]), int(cells[i])
            start, acc = i, 0
        acc += n
    if len(cells):
        yield int(cells[start]), int(cells[-1]) + 1


class CellSpill:
    """Rows by cell under ``limit`` bytes of memory; runs beyond it go to ``folder``."""

    def __init__(
        self, limit: int | None, folder: str | os.PathLike[str] | None = None, workers: int = 1
    ) -> None:
        self.limit = limit
        self.workers = workers
        self._parent = folder
        self._folder: Path | None = None
        self._cells: list[np.ndarray] = []
        self._columns: list[dict[str, np.ndarray]] = []
        self._bytes = 0
        self.runs: list[Run] = []
        self.rows = 0

    @property
    def buffered_bytes(self) -> int:
        return self._bytes

    @property
    def folder(self) -> Path | None:
        """The spill folder, once a run has been written."""
        return self._folder

    def add(self, cell: np.ndarray, columns: dict[str, np.ndarray]) -> None:
        """Queue rows: ``cell`` (N,) their linear cell index, ``columns`` each with N rows."""
        if not len(cell):
            return
        self._cells.append(np.asarray(cell, np.int64))
        self._columns.append(columns)
        self._bytes += cell.nbytes + sum(v.nbytes for v in columns.values())
        self.rows += len(cell)
        if self.limit is not None and self._bytes >= self.limit:
            self.spill()

    def _merged(self) -> list[Run]:
        """The buffered rows as sorted runs: one, or (large buffers, several workers) one per
        worker over consecutive rows, sorted in threads. Runs are read back in order, so
        splitting keeps every cell's rows in arrival order."""
        if not self._cells:
            return []
        one = len(self._cells) == 1  # a single batch is sorted straight from the caller's arrays
        cell = self._cells[0] if one else np.concatenate(self._cells)
        names = list(self._columns[0])
        batches, self._cells, self._columns, self._bytes = self._columns, [], [], 0
        columns = {}
        for k in names:  # a column at a time, its batches let go once joined: memory grows by one column
            columns[k] = batches[0][k] if one else np.concatenate([b.pop(k) for b in batches])
        parts = self.workers if len(cell) >= 1 << 20 else 1
        if parts <= 1:
            return [_sorted_run(cell, columns)]
        edges = np.linspace(0, len(cell), parts + 1).astype(np.int64).tolist()
        pieces = list(zip(edges[:-1], edges[1:]))
        with ThreadPoolExecutor(parts, thread_name_prefix="zv-sort") as pool:
            return list(
                pool.map(
                    lambda ab: _sorted_run(
                        cell[ab[0] : ab[1]], {k: v[ab[0] : ab[1]] for k, v in columns.items()}
                    ),
                    pieces,
                )
            )

    def spill(self) -> None:
        """Write the buffered rows to disk as sorted runs."""
        runs = self._merged()
        if runs and self._folder is None:
            self._folder = Path(tempfile.mkdtemp(prefix="zv-spill-", dir=self._parent))
        for run in runs:
            assert self._folder is not None
            stem = self._folder / f"run{len(self.runs):05d}"
            on_disk = {}
            for name in run.columns:
                path = stem.with_name(f"{stem.name}.{name}.bin")
                on_disk[name] = DiskColumn.save(path, run.column(name, 0, int(run.offsets[-1])))
            self.runs.append(Run(run.cells, run.offsets, on_disk))

    def finish(self) -> None:
        """Make the buffered rows runs (in memory when nothing was spilled, else on disk)."""
        if self.runs and self._folder is not None:
            self.spill()
            return
        self.runs.extend(self._merged())

    def cells(self) -> tuple[np.ndarray, np.ndarray]:
        """Occupied cells (ascending) and their row counts, over all runs (call :meth:`finish` first)."""
        if not self.runs:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        cells = np.concatenate([r.cells for r in self.runs])
        counts = np.concatenate([np.diff(r.offsets) for r in self.runs])
        unique, inverse = np.unique(cells, return_inverse=True)
        return unique, np.bincount(inverse.reshape(-1), weights=counts, minlength=len(unique)).astype(
            np.int64
        )

    def groups(self, max_rows: int) -> Iterator[tuple[int, int]]:
        """:func:`cell_groups` of the occupied cells."""
        return cell_groups(*self.cells(), max_rows)

    def read(self, lo: int, hi: int) -> dict[str, np.ndarray]:
        """Every row of cells ``lo <= cell < hi``: runs in order, a run's rows in arrival
        order; each column read straight into its result."""
        if not self.runs:
            return {}
        spans = [(run, *run.rows_of(lo, hi)) for run in self.runs]
        total = sum(b - a for _, a, b in spans)
        out = {}
        for name, first in self.runs[0].columns.items():
            shape = first.row_shape if isinstance(first, DiskColumn) else first.shape[1:]
            column = np.empty((total, *shape), first.dtype)
            at = 0
            for run, a, b in spans:
                if b > a:
                    run.column_into(name, a, column[at : at + b - a])
                    at += b - a
            out[name] = column
        return out

    def close(self) -> None:
        """Forget every row and remove the spill folder."""
        for run in self.runs:
            for column in run.columns.values():
                if isinstance(column, DiskColumn):
                    column.close()
        self.runs, self._cells, self._columns, self._bytes = [], [], [], 0
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None
