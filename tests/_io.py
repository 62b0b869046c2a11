"""The one I/O-counting backend of the tests: what a read fetches, lists and writes.

:class:`CountingBackend` wraps any backend (``zarr_vectors.storage``) and records every call;
:func:`count_io` routes an open dataset's further I/O through one. The tests that check a
query's I/O plan (which cells, how many batches, metadata only) all use these two.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import zarr_vectors as zv


class CountingBackend:
    """Forwards every call to ``inner`` and records it, in call order.

    ``gets``: the keys of each ``get_many`` call (one list per call, so ``len(gets)`` is the
    number of batches); ``sets`` and ``deletes``: the keys of each ``set_many`` /
    ``delete_many`` call; ``lists``: the prefixes passed to ``list_dir`` and ``list_keys``;
    ``ranges``: the ``(key, start, length)`` byte ranges of each ``get_ranges`` call (one list
    per call: a wave of concurrent requests).
    Any other attribute (``description``, ``root``, ``check``, ...) is the inner backend's.
    """

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.gets: list[list[str]] = []
        self.sets: list[list[str]] = []
        self.deletes: list[list[str]] = []
        self.lists: list[str] = []
        self.ranges: list[list[tuple[str, int, int | None]]] = []

    def get_ranges(self, ranges: Sequence[tuple[str, int, int | None]]) -> list[bytes | None]:
        ranges = list(ranges)
        self.ranges.append(ranges)
        return self.inner.get_ranges(ranges)

    def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        keys = list(keys)
        self.gets.append(keys)
        return self.inner.get_many(keys)

    def get_many_into(self, keys: Sequence[str], scratch: Any) -> list[bytes | memoryview | None]:
        keys = list(keys)
        self.gets.append(keys)
        return self.inner.get_many_into(keys, scratch)

    def set_many(self, items: Sequence[tuple[str, bytes]]) -> None:
        items = list(items)
        self.sets.append([k for k, _ in items])
        self.inner.set_many(items)

    def delete_many(self, keys: Sequence[str]) -> None:
        keys = list(keys)
        self.deletes.append(keys)
        self.inner.delete_many(keys)

    def list_dir(self, prefix: str) -> list[str]:
        self.lists.append(prefix)
        return self.inner.list_dir(prefix)

    def list_keys(self, prefix: str = "") -> list[str]:
        self.lists.append(prefix)
        return self.inner.list_keys(prefix)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def keys_read(self) -> list[str]:
        """Every key read, in order, over all batches (repeats kept)."""
        return [k for batch in self.gets for k in batch]

    def cells_read(self) -> list[str]:
        """The chunk keys read (``<array>/c/<cell>``), in order: no ``zarr.json`` or other metadata."""
        return [k for k in self.keys_read() if "/c/" in k]

    def clear(self) -> None:
        """Forget everything recorded so far (the wrapped backend is untouched)."""
        for log in (self.gets, self.sets, self.deletes, self.lists, self.ranges):
            log.clear()


def count_io(ds: zv.Dataset, levels: Sequence[int] = (0,)) -> CountingBackend:
    """Route all further I/O of ``ds`` through a new :class:`CountingBackend` and return it.

    ``levels`` are loaded first, so their metadata reads are not recorded; levels loaded later
    read through the counter too.
    """
    for k in levels:
        ds.level(k)
    store = ds._store
    counter = CountingBackend(store.backend)
    store.backend = counter
    for level in store._levels.values():
        level.backend = counter
    return counter


def count_requests(ds: zv.Dataset, levels: Sequence[int] = (0,)) -> CountingBackend:
    """Count the requests ``ds`` makes of its store from here on, below the shard layer: each
    ``get_ranges`` call of the counter is one wave of concurrent requests (shard indexes, byte
    ranges, whole keys), each ``get_many`` call one more (the root checks)."""
    for k in levels:
        ds.level(k)
    reader = ds._store.backend.inner  # ConsistentBackend(ShardReader(backend))
    counter = CountingBackend(reader.inner)
    reader.inner = counter
    return counter


def open_counting(path: Path | str, levels: Sequence[int] = (0,)) -> tuple[zv.Dataset, CountingBackend]:
    """``zv.open(path)`` with its I/O counted from here on (see :func:`count_io`)."""
    ds = zv.open(path)
    return ds, count_io(ds, levels)
