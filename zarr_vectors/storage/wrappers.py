"""Backends over another backend: ``Wrapping`` passes on what it does not change;
``ConsistentBackend`` checks every read against the root the store was opened on."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from types import EllipsisType
from typing import Any

from zarr_vectors.errors import (
    CorruptShardError,
    StoreChangedError,
)
from zarr_vectors.storage.protocol import Backend, ByteRange, under
from zarr_vectors.storage.scratch import Arena

__all__ = ["ConsistentBackend", "Wrapping"]


class Wrapping:
    """A backend over ``inner`` that passes on what it does not change: the capability
    properties, listings and ``is_empty``. Subclasses add the reads and writes they alter."""

    inner: Backend

    @property
    def read_only(self) -> bool:
        return self.inner.read_only

    @property
    def supports_deletes(self) -> bool:
        return self.inner.supports_deletes

    @property
    def transactional(self) -> bool:
        return self.inner.transactional

    @property
    def local_dir(self) -> Path | None:
        return self.inner.local_dir

    @property
    def in_memory(self) -> bool:
        return self.inner.in_memory

    def list_dir(self, prefix: str) -> list[str]:
        return self.inner.list_dir(prefix)

    def list_keys(self, prefix: str = "") -> list[str]:
        return self.inner.list_keys(prefix)

    def key_sizes(self, prefix: str = "") -> dict[str, int]:
        return self.inner.key_sizes(prefix)

    def is_empty(self) -> bool:
        return self.inner.is_empty()

    def close(self) -> None:
        """Close what the backend below keeps open (a local store's open shard files)."""
        self.inner.close()

    def stored_root(self) -> bytes | None:
        return self.inner.stored_root()

    def opened_root(self) -> bytes | None | EllipsisType:
        return self.inner.opened_root()


class ConsistentBackend(Wrapping):
    """A dataset's view of its store that never mixes two versions of it.

    ``root`` is the root ``zarr.json`` as read when the dataset was opened. After every
    batch of reads the root is read again; when it differs (every write and every
    pyramid build writes a new ``zarr_vectors_generation``, and an in-place replacement
    first writes a placeholder root), the batch may hold keys of another version, and
    :class:`StoreChangedError` is raised. Writers change the root first and never
    return to an earlier one, so an unchanged root means every key read came from the
    version opened. Writes through this view (``mode="r+"``) update the expected root.
    """

    def __init__(self, inner: Backend, root: bytes | None) -> None:
        self.inner = inner
        self.expected = root
        self.description = inner.description

    def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        return self._checked(lambda: self.inner.get_many(keys), bool(keys))

    def get_ranges(self, ranges: Sequence[ByteRange]) -> list[bytes | None]:
        return self._checked(lambda: self.inner.get_ranges(ranges), bool(ranges))

    def get_many_into(self, keys: Sequence[str], scratch: Arena) -> list[bytes | memoryview | None]:
        return self._checked(lambda: self.inner.get_many_into(keys, scratch), bool(keys))

    def _checked(self, read: Callable[[], list[Any]], asked: bool) -> list[Any]:
        """``read()``, then the root check. A shard that reads short of what a cached index says
        is checked too: a store replaced under the read raises StoreChangedError instead."""
        try:
            out = read()
        except CorruptShardError:
            self.check()
            raise
        if asked:
            self.check()
        return out

    def opened_root(self) -> bytes | None | EllipsisType:
        return self.expected

    def check(self) -> None:
        """Raise :class:`StoreChangedError` when the root is no longer the one expected."""
        if self.inner.get_many(["zarr.json"])[0] != self.expected:
            raise StoreChangedError(self.description)

    def rebase(self) -> None:
        """Accept the store's current root (after this process replaced the store)."""
        self.expected = self.inner.get_many(["zarr.json"])[0]

    def set_many(self, items: Sequence[tuple[str, bytes]]) -> None:
        self.inner.set_many(items)
        for key, data in items:
            if key == "zarr.json":
                self.expected = bytes(data)

    def delete_many(self, keys: Sequence[str]) -> None:
        self.inner.delete_many(keys)
        if "zarr.json" in keys:
            self.expected = None

    def delete_prefix(self, prefix: str) -> None:
        self.inner.delete_prefix(prefix)
        if not under(prefix):
            self.expected = None

    def refresh(self) -> None:
        self.inner.refresh()
        self.rebase()
