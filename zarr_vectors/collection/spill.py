"""Index rows spilled to disk by hash partition, so that an index is built in bounded memory.

:class:`Partitions` routes each batch of rows to ``2**P`` partitions by the top ``P`` bits of
the mixed value (the bits that also choose the bucket), appending each column to a raw file
per partition; ``P`` is chosen from an estimate of the row count so that a partition holds
about half of ``memory_limit``. :meth:`Partitions.groups` then loads the partitions one at a
time (or, when there are fewer buckets than partitions, the partitions of one bucket
together): every group holds whole buckets, so buckets are written group by group. Memory
holds one batch, or one group, never the whole member; a single id with more rows than the
limit is still held whole (a bucket is the unit).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from zarr_vectors.collection.buckets import Column, Rows, mix
from zarr_vectors.errors import InputError

__all__ = ["MAX_PARTITION_BITS", "Partitions"]

#: At most 2**this partition files per column.
MAX_PARTITION_BITS = 12


class Partitions:
    """Rows of one index on disk in ``folder``, by hash partition (see the module docstring)."""

    def __init__(
        self, folder: str | os.PathLike[str], columns: Sequence[Column], estimate: int, memory_limit: int
    ):
        if memory_limit < 1:
            raise InputError(f"memory_limit must be a positive number of bytes, got {memory_limit}")
        self.folder = Path(folder)
        self.columns = list(columns)
        row_bytes = sum(np.dtype(c.dtype).itemsize * math.prod(c.row_shape) for c in self.columns)
        need = estimate * row_bytes / max(memory_limit // 2, 1)
        self.bits = 0 if need <= 1 else min(MAX_PARTITION_BITS, math.ceil(math.log2(need)))
        self.counts = np.zeros(1 << self.bits, np.int64)

    @property
    def total(self) -> int:
        return int(self.counts.sum())

    def _file(self, part: int, column: int) -> str:
        # a plain string: pathlib interns every new part, and the interpreter's interned
        # table then grows by a resize proportional to all the strings it holds
        return os.path.join(self.folder, f"{part}.{column}")

    def add(self, rows: Rows) -> None:
        """Append ``rows`` to their partitions' files."""
        if len(rows) == 0:
            return
        if self.bits:
            part = (mix(rows.columns["values"]) >> np.uint64(64 - self.bits)).astype(np.int64)
        else:
            part = np.zeros(len(rows), np.int64)
        order = np.argsort(part, kind="stable")
        part = part[order]
        present, firsts = np.unique(part, return_index=True)
        ends = np.r_[firsts[1:], len(part)]
        for p, a, b in zip(present.tolist(), firsts.tolist(), ends.tolist(), strict=True):
            mine = order[a:b]
            for i, c in enumerate(self.columns):
                with open(self._file(p, i), "ab") as f:
                    np.ascontiguousarray(rows.columns[c.name][mine]).tofile(f)
            self.counts[p] += b - a

    def _load(self, part: int) -> Rows:
        cols = {}
        for i, c in enumerate(self.columns):
            path = self._file(part, i)
            cols[c.name] = np.fromfile(path, c.dtype).reshape(-1, *c.row_shape)
            os.unlink(path)
        return Rows(cols)

    def groups(self, bucket_bits: int) -> Iterator[Rows]:
        """The rows again, a group of whole buckets at a time, in bucket order; files are
        removed as they are read."""
        per_group = 1 << max(0, self.bits - bucket_bits)
        for first in range(0, len(self.counts), per_group):
            parts = [p for p in range(first, first + per_group) if self.counts[p]]
            if parts:
                yield Rows.concat([self._load(p) for p in parts], self.columns)
