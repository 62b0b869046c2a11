"""Rows grouped by cell, held in memory up to a limit and spilled to disk beyond it.

A :class:`CellSpill` takes batches of rows (several named columns sharing the row count)
with the linear cell index of each row. Rows wait in memory; when they pass the byte
limit they are sorted by cell (stably) and written as a *run*: one raw file per
column plus the run's cells and offsets. :meth:`CellSpill.read` gathers the rows of a
range of cells from every run, in arrival order, so a cell's rows come back exactly as
they were appended. Runs are sorted and written in a thread while the next buffer fills.
Memory holds the unsorted buffer and the one being written (within the limit together), or
one group of cells being read.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["CellSpill", "DiskColumn", "Run"]

_O_BINARY = getattr(os, "O_BINARY", 0)


def _pread_into(fd: int, view: memoryview, offset: int) -> int:
    """Bytes of ``fd`` from ``offset`` into ``view`` (no copy where ``os.preadv`` exists)."""
    if hasattr(os, "preadv"):
        return os.preadv(fd, [view], offset)
    data = os.pread(fd, view.nbytes, offset)
    view[: len(data)] = data
    return len(data)


@dataclass(frozen=True, eq=False)
class DiskColumn:
    """A column of a run on disk: raw little-endian rows, read a slice at a time with plain
    reads through a descriptor kept open (a memory map would keep every page it touched
    resident in this process)."""

    path: Path
    dtype: np.dtype
    row_shape: tuple[int, ...]
    fd: int = -1

    @classmethod
    def save(cls, path: Path, values: np.ndarray) -> DiskColumn:
        with path.open("wb") as f:
            np.ascontiguousarray(values).tofile(f)
        return cls(path, values.dtype, tuple(values.shape[1:]), os.open(path, os.O_RDONLY | _O_BINARY))

    def read_into(self, a: int, out: np.ndarray) -> None:
        """Rows ``a : a + len(out)`` into ``out`` (C-contiguous, of this dtype and row shape)."""
        view = out.data.cast("B")
        offset = a * (view.nbytes // max(len(out), 1))
        while view.nbytes:  # short reads happen on some filesystems
            got = _pread_into(self.fd, view, offset)
            if not got:
                raise OSError(f"spill file {self.path} is shorter than written (was it removed?)")
            view, offset = view[got:], offset + got

    def __getitem__(self, rows: slice) -> np.ndarray:
        a, b = rows.start or 0, rows.stop
        out = np.empty((b - a, *self.row_shape), self.dtype)
        self.read_into(a, out)
        return out

    def close(self) -> None:
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.fd)


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
        """Sorted rows ``a : a + len(out)`` of one column into ``out``."""
        values = self.columns[name]
        b = a + len(out)
        if isinstance(values, DiskColumn):
            values.read_into(a, out)
        elif self.order is None:
            out[...] = values[a:b]
        else:
            np.take(values, self.order[a:b], axis=0, out=out)

    def rows_of(self, lo: int, hi: int) -> tuple[int, int]:
        """Row range of the cells ``lo <= cell < hi``."""
        a, b = np.searchsorted(self.cells, [lo, hi])
        return int(self.offsets[a]), int(self.offsets[b])


def _stable_order(cell: np.ndarray) -> np.ndarray:
    """Stable argsort of non-negative cell indices (radix sort when they fit 16 bits)."""
    if len(cell) and int(cell.max()) < 1 << 16:
        return np.argsort(cell.astype(np.uint16), kind="stable")
    return np.argsort(cell, kind="stable")


def _sorted_run(cell: np.ndarray, columns: dict[str, np.ndarray]) -> Run:
    order = _stable_order(cell)
    scell = cell[order]
    first = (
        np.flatnonzero(np.concatenate([[True], scell[1:] != scell[:-1]]))
        if len(scell)
        else np.zeros(0, np.int64)
    )
    cells = scell[first]
    offsets = np.append(first, len(scell)).astype(np.int64)
    return Run(cells.astype(np.int64), offsets, columns, order)


def _sorted_runs(cells: list[np.ndarray], batches: list[dict[str, np.ndarray]], workers: int) -> list[Run]:
    """Batches of rows as sorted runs: one, or (large buffers, several workers) one per worker
    over consecutive rows, sorted in threads. Runs are read back in order, so splitting keeps
    every cell's rows in arrival order."""
    if not cells:
        return []
    one = len(cells) == 1  # a single batch is sorted straight from the caller's arrays
    cell = cells[0] if one else np.concatenate(cells)
    names = list(batches[0])
    columns = {}
    for k in names:  # a column at a time, its batches let go once joined: memory grows by one column
        columns[k] = batches[0][k] if one else np.concatenate([b.pop(k) for b in batches])
    parts = workers if len(cell) >= 1 << 20 else 1
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


def _write_runs(
    stem: Path, cells: list[np.ndarray], batches: list[dict[str, np.ndarray]], workers: int
) -> list[Run]:
    """Batches of rows sorted into runs and written as ``STEM.PART.COLUMN.bin`` files (the
    runs of a large buffer gathered and written in threads)."""

    def save(part: int, run: Run) -> Run:
        on_disk = {}
        for name in run.columns:
            path = stem.with_name(f"{stem.name}.{part}.{name}.bin")
            on_disk[name] = DiskColumn.save(path, run.column(name, 0, int(run.offsets[-1])))
        return Run(run.cells, run.offsets, on_disk)

    runs = _sorted_runs(cells, batches, workers)
    if len(runs) <= 1:
        return [save(part, run) for part, run in enumerate(runs)]
    with ThreadPoolExecutor(len(runs), thread_name_prefix="zv-spill-part") as pool:
        return list(pool.map(save, range(len(runs)), runs))


class CellSpill:
    """Rows by cell under ``limit`` bytes of memory; runs beyond it go to ``folder``.

    The limit is shared by the buffer filling and the one being written (half each)."""

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
        self._writer: ThreadPoolExecutor | None = None
        self._pending: Future[list[Run]] | None = None
        self._written = 0  # buffers sent to disk

    @property
    def buffered_bytes(self) -> int:
        return self._bytes

    @property
    def folder(self) -> Path | None:
        """The spill folder, once rows went to disk."""
        return self._folder

    def add(self, cell: np.ndarray, columns: dict[str, np.ndarray]) -> None:
        """Queue rows: ``cell`` (N,) their linear cell index, ``columns`` each with N rows."""
        if not len(cell):
            return
        self._cells.append(np.asarray(cell, np.int64))
        self._columns.append(columns)
        self._bytes += cell.nbytes + sum(v.nbytes for v in columns.values())
        self.rows += len(cell)
        if self.limit is not None and 2 * self._bytes >= self.limit:  # half filling, half being written
            self._spill_later()

    def _merged(self) -> list[Run]:
        """The buffered rows as sorted runs (see :func:`_sorted_runs`); the buffer is emptied."""
        cells, batches, self._cells, self._columns, self._bytes = self._cells, self._columns, [], [], 0
        return _sorted_runs(cells, batches, self.workers)

    def spill(self) -> None:
        """Write the buffered rows to disk as sorted runs (and wait until they are written)."""
        self._spill_later()
        self._collect()

    def _spill_later(self) -> None:
        """Sort and write the buffered rows in a thread while more rows arrive: one buffer is
        being written at a time (this waits for the previous one), so the two stay under the limit."""
        self._collect()
        if not self._cells:
            return
        if self._folder is None:
            self._folder = Path(tempfile.mkdtemp(prefix="zv-spill-", dir=self._parent))
        if self._writer is None:
            self._writer = ThreadPoolExecutor(1, thread_name_prefix="zv-spill")
        cells, batches, self._cells, self._columns, self._bytes = self._cells, self._columns, [], [], 0
        stem = self._folder / f"run{self._written:05d}"
        self._written += 1
        self._pending = self._writer.submit(_write_runs, stem, cells, batches, self.workers)

    def _collect(self) -> None:
        """Wait for the runs being written and add them (an error writing them is raised here)."""
        if self._pending is not None:
            pending, self._pending = self._pending, None
            self.runs.extend(pending.result())

    def finish(self) -> None:
        """Make the buffered rows runs (in memory when nothing was spilled, else on disk)."""
        if self._folder is not None:
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
        """Half-open ranges of cells ``[lo, hi)`` holding about ``max_rows`` rows each (a cell
        is never split, so one larger cell makes a larger group)."""
        cells, counts = self.cells()
        start, acc = 0, 0
        for i, n in enumerate(counts.tolist()):
            if acc and acc + n > max_rows:
                yield int(cells[start]), int(cells[i])
                start, acc = i, 0
            acc += n
        if len(cells):
            yield int(cells[start]), int(cells[-1]) + 1

    def read(self, lo: int, hi: int) -> dict[str, np.ndarray]:
        """Every row of cells ``lo <= cell < hi``: runs in order, a run's rows in arrival order
        (each column read straight into one new array)."""
        if not self.runs:
            return {}
        spans = [(run, *run.rows_of(lo, hi)) for run in self.runs]
        spans = [(run, a, b) for run, a, b in spans if b > a] or spans[:1]
        total = sum(b - a for _, a, b in spans)
        out: dict[str, np.ndarray] = {}
        for name, first in self.runs[0].columns.items():
            dtype, row_shape = (
                first.dtype,
                tuple(first.shape[1:]) if isinstance(first, np.ndarray) else first.row_shape,
            )
            column = np.empty((total, *row_shape), dtype)
            at = 0
            for run, a, b in spans:
                run.column_into(name, a, column[at : at + b - a])
                at += b - a
            out[name] = column
        return out

    def close(self) -> None:
        """Forget every row and remove the spill folder."""
        if self._pending is not None:
            with contextlib.suppress(Exception):  # closing after a failure: drop what was written
                self._collect()
            self._pending = None
        if self._writer is not None:
            self._writer.shutdown()
            self._writer = None
        for run in self.runs:
            for column in run.columns.values():
                if isinstance(column, DiskColumn):
                    column.close()
        self.runs, self._cells, self._columns, self._bytes = [], [], [], 0
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None
