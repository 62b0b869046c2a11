"""Cells encoded in worker threads, written in cell order by the calling thread.

A streaming writer's sweep makes each group of whole cells in a worker (the kind's encoding,
then every cell through its array's codec pipeline: numpy, the compressors and Draco work
without the interpreter lock) and hands the finished chunk bytes to
:class:`EncodedCellStream` in the calling thread, group after group in ascending cell order.
Each chunk's bytes depend only on its cell, so a store does not depend on the number of
workers (nor on how the cells were grouped). :class:`OverlappedBuilder` writes its batches of
finished chunks in a thread of its own, so that the files of one batch are written while the
next is encoded.
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any

import numpy as np

from zarr_vectors.engine.chunks.pipeline import Pipeline
from zarr_vectors.engine.write.builder import CellStream, StoreBuilder
from zarr_vectors.format.grid import cell_key, chunk_key

__all__ = [
    "EncodedCellStream",
    "KINDS",
    "OverlappedBuilder",
    "cell_pipelines",
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

    def add_encoded(self, cells: np.ndarray, data: list[bytes]) -> None:
        """Queue the chunk bytes ``data`` of cells ``cells`` (K, D) (cell indices); as
        :meth:`CellStream.add` without the encoding."""
        cells = np.asarray(cells, np.int64).reshape(-1, self.grid.ndim)
        self.nonempty.extend(chunk_key(c) for c in (cells + self.grid.origin).tolist())
        if self.builder.shards is None:
            for cell, raw in zip(cells, data):
                self.builder._chunk(f"{self.path}/{cell_key(cell)}", raw)
            return
        if self._layout is None:  # "auto" shards sized on the first cells
            self.builder.size_shards(self.grid, sum(map(len, data)) / max(len(data), 1))
            self._layout = self.builder._layout(self.grid, self.compressors)
            assert self._layout is not None
            self._full = self._layout.n_inner
        shard, inner = self._layout.locate(cells)
        for s, p, raw in zip(map(tuple, shard.tolist()), inner.tolist(), data):
            members = self._pending.setdefault(s, {})
            members[p] = raw
            if len(members) == self._full:
                self._emit(s)


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
