"""The ``Backend`` protocol every store is read and written through, the storage options, and the
small helpers all backends share (byte ranges, JSON documents, the root's generation key, the
one bridge to zarr's async stores)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import EllipsisType
from typing import Any, Protocol, TypeVar

import zarr
from zarr.core.sync import sync

from zarr_vectors.errors import (
    IncompleteStoreError,
    InputError,
)
from zarr_vectors.storage.http import DEFAULT_MAX_OBJECT_BYTES
from zarr_vectors.storage.scratch import Arena

T = TypeVar("T")

__all__ = [
    "Backend",
    "ByteRange",
    "CONCURRENCY",
    "DEFAULT_TIMEOUT",
    "GENERATION_KEY",
    "INCOMPLETE_KEY",
    "StorageOptions",
    "check_complete",
    "concurrency",
    "cut_range",
    "dump_json",
    "get_json",
    "new_generation",
    "run_sync",
    "under",
]


#: Requests in flight at once against a remote store when zarr's ``async.concurrency`` is unset.
CONCURRENCY = 64


#: A byte range of one key: ``(key, start, length)``. ``start >= 0``: from that byte, ``length``
#: bytes (None: to the end; ``(key, 0, None)`` is the whole object); ``start < 0`` (length None):
#: the last ``-start`` bytes. A range past the end of the object is cut short; an absent key is None.
ByteRange = tuple[str, int, "int | None"]


#: Seconds one request to a zarr Store (object storage) may take before it fails.
DEFAULT_TIMEOUT = 30.0


#: Root attribute naming the write that produced the store (a new value per write and per
#: pyramid build); kept outside the ``zarr_vectors`` block, so other readers ignore it.
GENERATION_KEY = "zarr_vectors_generation"


#: Root attribute of the placeholder root written while a store is replaced in place.
INCOMPLETE_KEY = "zarr_vectors_incomplete"


class Backend(Protocol):
    """Batch key-value access to one store: what every backend offers.

    Keys are ``/``-separated (``"0/vertices/c/1/2/3"``); a *prefix* names a folder of
    keys (``"0/vertices"``; ``""`` is the whole store) and covers every key below it.
    Absent keys read as None. Writes and deletes on a backend opened read-only raise
    :class:`~zarr_vectors.errors.ReadOnlyError`; deletes on one that cannot delete
    (``supports_deletes`` false, e.g. a zip file) raise
    :class:`~zarr_vectors.errors.StoreError`.
    """

    description: str

    @property
    def read_only(self) -> bool: ...

    @property
    def supports_deletes(self) -> bool: ...

    @property
    def transactional(self) -> bool:
        """Whether writes stay invisible to readers until a commit of their own (an Icechunk
        session's store): the order of writes then does not matter for safety."""
        ...

    @property
    def local_dir(self) -> Path | None:
        """The folder holding the store's files when it is a local directory (a write
        there is built beside it and swapped in whole), else None."""
        ...

    @property
    def in_memory(self) -> bool:
        """Whether the keys live in this process's memory (a write stages them there too)."""
        ...

    def get_many(self, keys: Sequence[str]) -> list[bytes | None]: ...

    def get_ranges(self, ranges: Sequence[ByteRange]) -> list[bytes | None]:
        """The bytes of each :data:`ByteRange`, all requests of the batch in flight together."""
        ...

    def get_many_into(self, keys: Sequence[str], scratch: Arena) -> list[bytes | memoryview | None]:
        """:meth:`get_many`, where the backend can (local files) read into slices of
        ``scratch``: those values are valid only until ``scratch`` is reset."""
        ...

    def set_many(self, items: Sequence[tuple[str, bytes]]) -> None: ...

    def list_dir(self, prefix: str) -> list[str]:
        """Names of the keys and folders directly below ``prefix``, sorted."""
        ...

    def list_keys(self, prefix: str = "") -> list[str]:
        """Every key below ``prefix`` (recursively), full keys, in no particular order."""
        ...

    def key_sizes(self, prefix: str = "") -> dict[str, int]:
        """Every key below ``prefix`` and its size in bytes."""
        ...

    def delete_many(self, keys: Sequence[str]) -> None:
        """Delete these keys (absent ones are ignored)."""
        ...

    def delete_prefix(self, prefix: str) -> None:
        """Delete every key below ``prefix`` (``""``: every key of the store)."""
        ...

    def is_empty(self) -> bool: ...

    def refresh(self) -> None:
        """Forget what was learnt of the store (checked folders, the root read on open):
        this process has just replaced it."""
        ...

    def close(self) -> None:
        """Close what the backend keeps open (a local store's shard files); it stays usable."""
        ...

    def stored_root(self) -> bytes | None:
        """The root ``zarr.json`` as stored now, read past any check against the opened one."""
        ...

    def opened_root(self) -> bytes | None | EllipsisType:
        """The root this view was opened on, which a write must still find before it commits
        (``...``: the view recorded none; the root found when the write starts counts)."""
        ...


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` (calls of a zarr Store) on zarr's event loop and wait for its result:
    the one bridge from this library's synchronous code to async stores."""
    return sync(coro)


def under(prefix: str) -> str:
    """The string every key below the folder ``prefix`` starts with (``""`` for the root)."""
    return f"{prefix.strip('/')}/" if prefix.strip("/") else ""


@dataclass(frozen=True)
class StorageOptions:
    """The ``zv_*`` storage options (this library's), and the rest for fsspec."""

    timeout: float | None = DEFAULT_TIMEOUT
    follow_symlinks: bool = False
    fsspec: dict[str, Any] | None = None
    max_object_bytes: int = DEFAULT_MAX_OBJECT_BYTES
    #: Seconds a write to a local store waits for another writer's lock (``zv_wait``).
    wait: float = 0.0

    @classmethod
    def parse(cls, options: dict[str, Any] | None) -> StorageOptions:
        rest = dict(options or {})
        timeout = rest.pop("zv_timeout", DEFAULT_TIMEOUT)
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0
        ):
            raise InputError(
                f"storage option zv_timeout must be a positive number of seconds or None, got {timeout!r}"
            )
        follow = rest.pop("zv_follow_symlinks", False)
        if not isinstance(follow, bool):
            raise InputError(f"storage option zv_follow_symlinks must be True or False, got {follow!r}")
        most = rest.pop("zv_max_object_bytes", DEFAULT_MAX_OBJECT_BYTES)
        if isinstance(most, bool) or not isinstance(most, int) or most < 1:
            raise InputError(f"storage option zv_max_object_bytes must be a positive integer, got {most!r}")
        wait = rest.pop("zv_wait", 0.0)
        if isinstance(wait, bool) or not isinstance(wait, (int, float)) or not wait >= 0:
            raise InputError(f"storage option zv_wait must be a number of seconds >= 0, got {wait!r}")
        return cls(None if timeout is None else float(timeout), follow, rest, most, float(wait))


def cut_range(data: bytes | None, start: int, length: int | None) -> bytes | None:
    """The part of a whole object that a :data:`ByteRange` names (for backends holding whole values)."""
    if data is None:
        return None
    if start < 0:
        return data[max(len(data) + start, 0) :]
    return data[start:] if length is None else data[start : start + length]


def concurrency() -> int:
    """Requests in flight at once: zarr's ``async.concurrency`` setting (CONCURRENCY when unset)."""
    value = zarr.config.get("async.concurrency", CONCURRENCY)
    return int(value) if isinstance(value, int) and value > 0 else CONCURRENCY


def get_json(backend: Backend, key: str) -> Any | None:
    """Parse one JSON document, or None when the key is absent."""
    raw = backend.get_many([key])[0]
    return None if raw is None else json.loads(raw)


def dump_json(doc: Any) -> bytes:
    return json.dumps(doc, indent=2, allow_nan=False).encode()


def new_generation() -> str:
    return uuid.uuid4().hex


def check_complete(attributes: dict[str, Any], description: str) -> None:
    """Raise :class:`IncompleteStoreError` when the root is the placeholder of a write."""
    if INCOMPLETE_KEY in attributes:
        raise IncompleteStoreError(description)
