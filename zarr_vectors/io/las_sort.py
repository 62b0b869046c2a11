"""Uncompressed LAS files sorted by chunk record by record, in place of the streaming spill.

The streaming writer decodes each block, spills its columns sorted by cell (chunk) and reads
them back cell range by cell range. Uncompressed LAS records of one layout can be read in
place, so :func:`sort_las` sorts the records themselves instead, with a counting sort in two
passes over the files:

1. every block's positions give each point's cell; the number of points of each cell in
   each block fixes where that block's points of the cell go in one file sorted by cell
   (after the points of the cell in earlier blocks);
2. every block's records are put in cell order and written to those places.

So a cell's points keep file order, exactly as the streaming writer keeps arrival order, and
the store written is the same byte for byte. :class:`SortedRecords` then serves the writer's
cell ranges from the sorted file, one read per range, decoded in the writer's threads.
Blocks are handled ``workers`` at a time; memory holds a few blocks and, when they fit a
quarter of ``memory_limit``, the points' cells between the passes.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from zarr_vectors.engine import cell_groups, cell_indices, check_inside, extent, stable_order
from zarr_vectors.errors import InputError
from zarr_vectors.io.las import LasSource, las_columns, las_positions, laspy_module

__all__ = ["SortedRecords", "sort_las", "sortable"]

#: Sorting gives way to the streaming spill when a block's points of a cell average fewer
#: than this many (one write each would cost more than the spill).
MIN_RUN = 16

Decode = Callable[[np.ndarray], tuple[np.ndarray, dict[str, np.ndarray]]]


def sortable(sources: Sequence[LasSource]) -> bool:
    """Whether :func:`sort_las` takes these files: uncompressed, with points, and one record
    layout (point format, record size, extra bytes, scale and offset) for all."""
    if not sources:
        return False
    first = sources[0]
    return all(
        not s.compressed
        and s.count > 0
        and s.record_size > 0
        and s.point_format == first.point_format
        and s.record_size == first.record_size
        and s.extra == first.extra
        and np.array_equal(s.scale, first.scale)
        and np.array_equal(s.offset, first.offset)
        for s in sources
    )


@dataclass(frozen=True)
class _Block:
    source: int
    start: int  # first point
    rows: int


def _blocks(sources: Sequence[LasSource], rows: int) -> list[_Block]:
    return [
        _Block(i, start, min(rows, s.count - start))
        for i, s in enumerate(sources)
        for start in range(0, s.count, rows)
    ]


class SortedRecords:
    """Point records sorted by cell in one file: what :class:`~zarr_vectors.engine.write.
    stream.PointStream` reads cell range by cell range (the face of its spill).

    Invariant: the rows of occupied cell ``cells[i]`` are records ``starts[i]:starts[i + 1]``
    of the file, in file order of the sources."""

    def __init__(
        self,
        path: Path,
        dtype: np.dtype,
        decode: Decode,
        names: list[str],
        cells: np.ndarray,
        counts: np.ndarray,
    ) -> None:
        self.path, self.dtype, self._decode, self.names = path, dtype, decode, names
        self._cells, self._counts = cells, counts
        self.starts = np.zeros(len(cells) + 1, np.int64)
        np.cumsum(counts, out=self.starts[1:])
        self.rows = int(self.starts[-1])
        self._fd: int | None = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))

    def sample(self) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """The first record, decoded (it fixes the attributes' names and dtypes)."""
        return self._decode(self._records(0, 1))

    def _records(self, a: int, b: int) -> np.ndarray:
        if self._fd is None:
            raise InputError(f"the sorted records at {self.path} were removed (the writer was closed)")
        size = self.dtype.itemsize
        buf, got = _pread(self._fd, (b - a) * size, a * size)
        if got < len(buf):
            raise OSError(f"{self.path} ends after {got} of {len(buf)} bytes (was it cut short?)")
        return buf.view(self.dtype)

    def finish(self) -> None:
        """Nothing left to sort (the face of the spill)."""

    def cells(self) -> tuple[np.ndarray, np.ndarray]:
        """Occupied cells (ascending) and their row counts."""
        return self._cells, self._counts

    def groups(self, max_rows: int) -> Iterator[tuple[int, int]]:
        return cell_groups(self._cells, self._counts, max_rows)

    def read(self, lo: int, hi: int) -> dict[str, np.ndarray]:
        """The rows of cells ``lo <= cell < hi``: ``positions`` and ``a0``, ``a1``, ... in
        the order of :attr:`names`."""
        i, j = np.searchsorted(self._cells, [lo, hi])
        pos, attrs = self._decode(self._records(int(self.starts[i]), int(self.starts[j])))
        return {"positions": pos} | {f"a{k}": attrs[name] for k, name in enumerate(self.names)}

    def close(self) -> None:
        """Close and remove the sorted file."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self.path.unlink(missing_ok=True)


def _pread(fd: int, size: int, offset: int) -> tuple[np.ndarray, int]:
    """Up to ``size`` bytes of ``fd`` from ``offset``, and how many there were."""
    buf = np.empty(size, np.uint8)
    got = 0
    while got < size:
        n = os.preadv(fd, [buf.data[got:]], offset + got)
        if n == 0:
            break
        got += n
    return buf, got


def _pwrite(fd: int, data: np.ndarray, offset: int) -> None:
    view = data.data.cast("B")
    done = 0
    while done < len(view):
        done += os.pwrite(fd, view[done:], offset + done)


def _cell_dtype(n_cells: int) -> np.dtype:
    return np.dtype(np.uint16 if n_cells <= 1 << 16 else np.uint32 if n_cells <= 1 << 32 else np.int64)


#: A block's occupied cells (ascending), its points in each, and (when kept) each point's cell.
_Tally = tuple[np.ndarray, np.ndarray, "np.ndarray | None"]


class _Sorter:
    """The two passes over the blocks of the sources' records."""

    def __init__(self, sources: Sequence[LasSource], dtype: np.dtype, grid: Any, bounds: np.ndarray) -> None:
        self.sources, self.dtype, self.grid, self.bounds = sources, dtype, grid, bounds
        self.n_cells = int(np.prod(grid.shape))
        self.cell_dtype = _cell_dtype(self.n_cells)
        self.fds = [os.open(s.path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)) for s in sources]

    def close(self) -> None:
        for fd in self.fds:
            os.close(fd)

    def read(self, block: _Block) -> np.ndarray:
        """The block's records, read in place."""
        source, size = self.sources[block.source], self.dtype.itemsize
        buf, got = _pread(self.fds[block.source], block.rows * size, source.data_offset + block.start * size)
        if got < len(buf):
            raise InputError(
                f"{source.path}: the file ends inside its point records (the header says "
                f"{source.count:,} points of {size} bytes from byte {source.data_offset})"
            )
        return buf.view(self.dtype)

    def cells(self, block: _Block, raw: np.ndarray) -> np.ndarray:
        """Each record's linear cell, as the streaming writer computes it."""
        source = self.sources[block.source]
        positions = las_positions(raw, source)
        try:
            check_inside(positions, self.bounds, "positions", extent(positions))
        except InputError as exc:
            raise InputError(f"{source.path}: {exc}") from exc
        return cell_indices(positions, self.grid).astype(self.cell_dtype)

    def tally(self, block: _Block, keep: bool) -> _Tally:
        """Pass 1 of a block."""
        cell = self.cells(block, self.read(block))
        if self.n_cells <= 1 << 22:
            counts = np.bincount(cell, minlength=self.n_cells)
            present = np.flatnonzero(counts)
            found = (present, counts[present])
        else:
            found = np.unique(cell, return_counts=True)
        return found[0].astype(np.int64), found[1].astype(np.int64), cell if keep else None

    def place(self, block: _Block, tally: _Tally, first: np.ndarray, out: int) -> int:
        """Pass 2 of a block: its records in cell order (file order within a cell), each
        cell's run written to ``out`` from record ``first[i]`` on."""
        raw = self.read(block)
        cell = self.cells(block, raw) if tally[2] is None else tally[2]
        rows = np.take(raw.view(np.uint8).reshape(len(raw), -1), stable_order(cell), axis=0)
        a, size = 0, self.dtype.itemsize
        for b, dest in zip(np.cumsum(tally[1]).tolist(), first.tolist()):
            _pwrite(out, rows[a:b], dest * size)
            a = b
        return block.rows


def sort_las(
    sources: Sequence[LasSource],
    grid: Any,
    bounds: np.ndarray,
    folder: str | os.PathLike[str],
    *,
    workers: int = 1,
    block_rows: int = 1 << 19,
    memory_limit: int = 256 << 20,
    progress: bool = False,
) -> SortedRecords | None:
    """The records of ``sources`` (:func:`sortable`) sorted by ``grid`` cell into a file in
    ``folder``; None when the points of a cell come in too many small runs (fewer than
    :data:`MIN_RUN` points per block and cell on average), which the streaming spill
    handles better. Points outside ``bounds`` raise :class:`InputError`."""
    from tqdm.auto import tqdm

    with laspy_module().open(sources[0].path) as head:
        point_format = head.header.point_format
    dtype = point_format.dtype()
    if dtype.itemsize != sources[0].record_size:
        return None  # records with bytes laspy does not describe: let laspy read them
    blocks = _blocks(sources, block_rows)
    total = sum(b.rows for b in blocks)
    sorter = _Sorter(sources, dtype, grid, bounds)
    keep = total * sorter.cell_dtype.itemsize <= memory_limit // 4
    bar = {"unit": "pt", "unit_scale": True, "total": total, "disable": not progress}
    path = Path(folder) / "las-sorted.bin"
    sorted_ok = False
    try:
        with ThreadPoolExecutor(max(workers, 1), thread_name_prefix="zv-las") as pool:
            tallies: list[_Tally] = []
            with tqdm(desc="LAS: cells", **bar) as shown:
                for found in pool.map(lambda b: sorter.tally(b, keep), blocks):
                    tallies.append(found)
                    shown.update(int(found[1].sum()))
            if total < MIN_RUN * sum(len(t[0]) for t in tallies):
                return None
            cells, counts, firsts = _places([t[0] for t in tallies], [t[1] for t in tallies])
            out = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), 0o600)
            try:
                jobs = zip(blocks, tallies, firsts)
                with tqdm(desc="LAS: sorting", **bar) as shown:
                    for n in pool.map(lambda job: sorter.place(job[0], job[1], job[2], out), jobs):
                        shown.update(n)
            finally:
                os.close(out)
        sorted_ok = True
    finally:
        sorter.close()
        if not sorted_ok:  # a failed sort leaves no file behind
            path.unlink(missing_ok=True)
    point_source = sources[0]

    def decode(raw: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        return las_columns(raw, point_format, point_source)

    return SortedRecords(path, dtype, decode, list(point_source.dimensions), cells, counts)


def _places(
    cells: list[np.ndarray], counts: list[np.ndarray]
) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """The occupied cells over all blocks, their row counts, and for each block the first
    row (in the sorted file) of each of its cells: after the cell's rows of earlier blocks."""
    lengths = [len(c) for c in cells]
    cell = np.concatenate(cells) if cells else np.zeros(0, np.int64)
    count = np.concatenate(counts) if counts else np.zeros(0, np.int64)
    block = np.repeat(np.arange(len(cells)), lengths)
    order = np.lexsort((block, cell))  # by cell, then block
    sorted_counts = count[order]
    first = np.empty(len(cell), np.int64)
    first[order] = np.cumsum(sorted_counts) - sorted_counts
    occupied, inverse = np.unique(cell, return_inverse=True)
    totals = np.bincount(inverse.reshape(-1), weights=count, minlength=len(occupied)).astype(np.int64)
    return occupied, totals, np.split(first, np.cumsum(lengths)[:-1])
