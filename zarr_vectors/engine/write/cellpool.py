"""Cells encoded in worker threads, written in cell order by the calling thread.

A streaming writer's sweep makes each group of whole cells in a worker (the kind's encoding,
then every cell through its array's codec pipeline: numpy, the compressors and Draco work
without the interpreter lock) and hands the finished chunk bytes to
:class:`EncodedCellStream` in the calling thread, group after group in ascending cell order.
Each chunk's bytes depend only on its cell, so a store does not depend on the number of
workers (nor on how the cells were grouped). :class:`OverlappedBuilder` writes its batches of
finished chunks in a thread of its own, so that the files of one batch are written while the
next is encoded.

Most of a linked kind's cell building is Python and numpy work on small arrays that holds the
interpreter lock (measured: 6 to 13 % of a write's CPU time is in calls that release it), so
threads barely overlap it. :func:`map_groups` therefore runs the groups in forked worker
processes where the platform forks: each child inherits the writer as it is when the sweep
starts (its spills are finished and only read from then on) and sends each group's finished
chunk bytes back. Elsewhere (no ``fork``, or inside a daemonic process) it uses threads.
"""

from __future__ import annotations

import multiprocessing
import struct
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor, wait
from typing import Any, TypeVar

import google_crc32c
import numpy as np

from zarr_vectors.engine.chunks.pipeline import Pipeline
from zarr_vectors.engine.write.builder import CellStream, StoreBuilder
from zarr_vectors.errors import InputError
from zarr_vectors.format.grid import cell_key, chunk_key
from zarr_vectors.format.shards import EMPTY, ShardLayout
from zarr_vectors.storage import map_ordered

T = TypeVar("T")

__all__ = [
    "EncodedCellStream",
    "KINDS",
    "OverlappedBuilder",
    "cell_pipelines",
    "map_groups",
    "encode_payloads",
    "stream_of",
]

#: The array kinds of :meth:`StoreBuilder.compressors`.
KINDS = ("data", "links", "fragments")


def cell_pipelines(builder: StoreBuilder) -> dict[str, Pipeline]:
    """The pipeline of a per-chunk vlen array of each kind (vlen-bytes, then the builder's
    compressors), as :class:`CellStream` builds it; shared by threads (encoding keeps no state)."""
    return {k: Pipeline.from_codecs([{"name": "vlen-bytes"}, *builder.compressors(k)]) for k in KINDS}


def encode_payloads(pipe: Pipeline, payloads: Iterable[bytes]) -> list[bytes]:
    """Every payload's chunk bytes."""
    return [pipe.encode(p) for p in payloads]


class EncodedCellStream(CellStream):
    """A :class:`CellStream` that also takes cells already through its pipeline
    (:meth:`add_encoded`), so that the encoding can happen in other threads."""

    def add(self, cells: np.ndarray, payloads: Iterable[bytes]) -> None:
        self.add_encoded(cells, encode_payloads(self._pipe, payloads))

    def add_encoded(self, cells: np.ndarray, data: Sequence[bytes | None]) -> None:
        """Queue the chunk bytes ``data`` of cells ``cells`` (K, D) (cell indices); as
        :meth:`CellStream.add` without the encoding. A None stands for a cell already stored
        by someone else (a Dask task): listed as nonempty, not written; sharded, its whole
        shard was stored with it."""
        cells = np.asarray(cells, np.int64).reshape(-1, self.grid.ndim)
        self.nonempty.extend(chunk_key(c) for c in (cells + self.grid.origin).tolist())
        if self.builder.shards is None:
            for cell, raw in zip(cells, data):
                if raw is not None:
                    self.builder._chunk(f"{self.path}/{cell_key(cell)}", raw)
            return
        if self._layout is None:  # "auto" shards sized on the first cells
            sizes = [len(d) for d in data if d is not None]
            self.builder.size_shards(self.grid, sum(sizes) / max(len(sizes), 1))
            self._layout = self.builder._layout(self.grid, self.compressors)
            assert self._layout is not None
            self._full = self._layout.n_inner
        shard, inner = self._layout.locate(cells)
        for s, p, raw in zip(map(tuple, shard.tolist()), inner.tolist(), data):
            if raw is None:
                continue
            members = self._pending.setdefault(s, {})
            members[p] = raw
            if len(members) == self._full:
                self._emit(s)

    def _emit(self, shard: tuple[int, ...]) -> None:
        assert self._layout is not None
        blob = shard_blob(self._layout, self._pending.pop(shard))
        self.builder.put_object(f"{self.path}/{cell_key(shard)}", blob)


_ENTRY = struct.Struct("<QQ")


def shard_blob(layout: ShardLayout, chunks: dict[int, bytes]) -> bytes:
    """:func:`~zarr_vectors.format.shards.encode_shard`'s bytes, built with one index
    template and a write per present chunk (no small numpy arrays: a writer emits thousands
    of shards in its calling thread)."""
    n = layout.n_inner
    order = sorted(chunks)
    if order and not (0 <= order[0] and order[-1] < n):
        raise InputError(f"inner chunk positions must lie in 0..{n - 1}, got {order[0]}..{order[-1]}")
    table = bytearray(_ENTRY.pack(EMPTY, EMPTY) * n)
    at = layout.index_nbytes if layout.index_location == "start" else 0
    for p in order:
        size = len(chunks[p])
        _ENTRY.pack_into(table, 16 * p, at, size)
        at += size
    index = bytes(table) + (struct.pack("<I", google_crc32c.value(bytes(table))) if layout.checksum else b"")
    body = b"".join(bytes(chunks[p]) for p in order)
    return index + body if layout.index_location == "start" else body + index


def stream_of(
    builder: StoreBuilder,
    path: str,
    grid: Any,
    attributes: dict[str, Any],
    kind: str,
    codecs: list[dict[str, Any]] | None = None,
) -> EncodedCellStream:
    """An :class:`EncodedCellStream` of ``builder`` at ``path`` (as ``builder.cell_stream``)."""
    return EncodedCellStream(builder, path, grid, attributes, kind, codecs)


class OverlappedBuilder(StoreBuilder):
    """A :class:`StoreBuilder` whose :meth:`flush` hands its batch to a writer thread and
    returns: at most one batch is being written while the next fills (memory: two batches).
    A write's error is raised by the next :meth:`flush` or by :meth:`commit`, which writes
    the last batch and the metadata in the calling thread once every batch is written.
    :meth:`close` (always, once done) waits for a batch still being written."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._writer: ThreadPoolExecutor | None = None
        self._writing: Future[None] | None = None
        self._overlap = True  # False once committing: every write in the calling thread

    def _written(self) -> None:
        """Wait for the batch being written; raise its error."""
        if self._writing is not None:
            writing, self._writing = self._writing, None
            writing.result()

    def flush(self) -> None:
        self._written()
        if not self._overlap:
            super().flush()
            return
        if not self._pending:
            return
        if self._writer is None:
            self._writer = ThreadPoolExecutor(1, thread_name_prefix="zv-flush")
        batch, self._pending, self._pending_bytes = self._pending, [], 0
        self._writing = self._writer.submit(self.backend.set_many, batch)

    def commit(self, root_attributes: dict[str, Any]) -> None:
        self._written()
        self.close()
        self._overlap = False
        super().commit(root_attributes)

    def close(self) -> None:
        """Wait for a batch still being written (its error is not raised) and end the thread."""
        if self._writing is not None:
            wait([self._writing])
        if self._writer is not None:
            self._writer.shutdown(wait=True)
            self._writer = None


#: The work of the forked children of :func:`map_groups`: set before the pool forks, so that
#: every child inherits it; only the ``(lo, hi)`` of each group crosses the process boundary.
_FORKED: list[Callable[[tuple[int, int]], Any]] = []


def _run_forked(span: tuple[int, int]) -> Any:
    return _FORKED[-1](span)


def can_fork() -> bool:
    """Whether :func:`map_groups` can use worker processes here (``fork`` exists and this
    process may have children)."""
    proc = multiprocessing.current_process()
    return "fork" in multiprocessing.get_all_start_methods() and not proc.daemon


def map_groups(
    fn: Callable[[tuple[int, int]], T], spans: Iterable[tuple[int, int]], workers: int
) -> Iterator[T]:
    """``fn(span)`` of each group, in order, at most ``workers + 1`` groups in flight: in
    ``workers`` forked processes when :func:`can_fork` (``fn``'s results must pickle; ``fn``
    must not change the state it reads, as the children work on copies), else in threads
    (:func:`~zarr_vectors.storage.threads.map_ordered`). A child's error is raised here, in
    order; whenever the generator ends, the pool is shut down."""
    if workers <= 1 or not can_fork():
        yield from map_ordered(fn, spans, workers)
        return
    _FORKED.append(fn)
    pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"))
    pending: deque[Future[T]] = deque()
    try:
        for span in spans:
            pending.append(pool.submit(_run_forked, span))
            if len(pending) > workers:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        for future in pending:
            future.cancel()
        pool.shutdown(wait=True, cancel_futures=True)
        _FORKED.remove(fn)
