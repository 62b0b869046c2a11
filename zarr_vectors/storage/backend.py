"""Where a store's bytes live: resolve a path, URL or zarr Store to a backend.

A backend moves whole keys (``"0/vertices/c/1/2/3"``, ``"zarr.json"``) in batches:
``get_many`` and ``set_many`` take every key one step needs at once. Every backend
offers the whole :class:`Backend` protocol (listing, sizes, deletes, its capabilities),
so no caller needs to know which class it holds. ``get_ranges`` reads byte ranges of keys
(:data:`ByteRange`: a prefix, a suffix, a span or the whole object), which the shard layer
(:mod:`zarr_vectors.storage.shards`) uses to read sharded arrays; on zarr Stores its requests
are in flight together, at most zarr's ``async.concurrency`` at once.

* :class:`LocalBackend` reads and writes files of a local directory directly.
  On local disk this is about ten times faster than going through zarr-python's
  ``LocalStore`` one key at a time (each key there costs a thread hop), and the
  files are the same. It refuses files that are not regular files inside the store
  (see :mod:`zarr_vectors.storage.local`).
* :class:`ZarrStoreBackend` serves any zarr v3 ``Store`` (memory, zip, fsspec
  S3/GCS, obstore): a batch becomes one ``asyncio.gather`` on zarr's event loop
  (:func:`run_sync` is the one bridge from synchronous code to it), so object-storage
  requests are in flight together. Every request has a time limit
  (:data:`DEFAULT_TIMEOUT`, or the ``zv_timeout`` storage option) and a failed one
  raises :class:`~zarr_vectors.errors.StoreError` naming the store and the key.
* :class:`ConsistentBackend` wraps the backend of an opened dataset: after every
  batch it reads the root ``zarr.json`` again and raises
  :class:`~zarr_vectors.errors.StoreChangedError` when a writer replaced the store.

Writes go through :func:`write_session` (:mod:`zarr_vectors.storage.commit`): the store is
built in a local staging folder, then swapped in (local directories, zip files) or
committed key by key behind a root marking it incomplete (other stores).

Storage options read by this library (removed before the rest go to fsspec):
``zv_timeout`` (seconds per request, ``None`` for no limit; default 30),
``zv_follow_symlinks`` (local stores: read symbolic links that lead out of the store) and
``zv_max_object_bytes`` (HTTP stores: the longest answer read; default 1 GiB).
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import uuid
import zipfile
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

import zarr
from zarr.abc.store import ByteRequest, OffsetByteRequest, RangeByteRequest, Store, SuffixByteRequest
from zarr.core.buffer import cpu, default_buffer_prototype
from zarr.core.sync import sync

from zarr_vectors.errors import (
    CorruptShardError,
    IncompleteStoreError,
    InputError,
    ReadOnlyError,
    StoreChangedError,
    StoreError,
    StoreNotFoundError,
    ZarrV2StoreError,
    ZarrVectorsError,
)
from zarr_vectors.storage.http import DEFAULT_MAX_OBJECT_BYTES, MAX_PAGE_BYTES, bounded_get, page_links
from zarr_vectors.storage.local import LocalBackend
from zarr_vectors.storage.scratch import Arena

__all__ = [
    "Wrapping",
    "ByteRange",
    "concurrency",
    "cut_range",
    "GENERATION_KEY",
    "INCOMPLETE_KEY",
    "check_complete",
    "check_not_v2",
    "dump_json",
    "local_path",
    "new_generation",
    "remote_backend",
    "under",
    "Backend",
    "ConsistentBackend",
    "DEFAULT_TIMEOUT",
    "HTTP_PROTOCOLS",
    "HttpStoreBackend",
    "LocalBackend",
    "StorageOptions",
    "ZarrStoreBackend",
    "ZarrV2StoreError",
    "open_backend",
    "run_sync",
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

T = TypeVar("T")


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
        return cls(None if timeout is None else float(timeout), follow, rest, most)


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


@functools.cache
def _remote_errors() -> tuple[type[BaseException], ...]:
    """Exceptions a store's request can end with (OSError covers TimeoutError and
    fsspec's translations; botocore and aiohttp ones arrive untranslated)."""
    errors: list[type[BaseException]] = [OSError]
    try:
        from botocore.exceptions import BotoCoreError, ClientError

        errors += [BotoCoreError, ClientError]
    except ImportError:
        pass
    try:
        from aiohttp import ClientError as HttpClientError

        errors.append(HttpClientError)
    except ImportError:
        pass
    return tuple(errors)


def _requested(data: bytes, start: int, length: int | None) -> bytes:
    """The bytes a ranged read asked for, also from a server that ignored the range and sent
    the whole object (some emulators and static servers do): a longer answer is cut."""
    if start < 0:
        return data[start:] if len(data) > -start else data
    if length is not None and len(data) > length:
        return data[start : start + length]
    return data


class ZarrStoreBackend:
    """Any zarr v3 Store, driven through its async API on zarr's event loop.

    Each request is limited to ``timeout`` seconds (None: no limit); a failed or timed
    out request raises :class:`StoreError` with the store's description and the key.
    """

    def __init__(
        self, store: Store, description: str | None = None, timeout: float | None = DEFAULT_TIMEOUT
    ) -> None:
        if not getattr(store, "_is_open", True):
            # Some stores (ZipStore) fail on first use unless opened; zarr-python opens
            # stores it is handed in the same way before use.
            run_sync(store._ensure_open())
        self.store = store
        self.description = description or repr(store)
        self.timeout = timeout

    async def _call(self, what: str, key: str, request: Awaitable[T]) -> T:
        try:
            return await asyncio.wait_for(request, self.timeout)
        except TimeoutError as exc:
            raise StoreError(
                self.description,
                key,
                f"{what} got no answer within {self.timeout:g} s; check the connection, or change the limit "
                "with storage_options={'zv_timeout': seconds}",
            ) from exc
        except _remote_errors() as exc:
            detail = " ".join(str(exc).split()) or "no detail"  # remote errors can span lines
            raise StoreError(
                self.description,
                key,
                f"{what} failed: {type(exc).__name__}: {detail} (check the path or URL, the network and the "
                "credentials in storage_options, then try again)",
            ) from exc

    async def _each(self, keys: Iterable[Any], one: Any, limit: int = CONCURRENCY) -> list[Any]:
        """``one(key)`` for every key, at most ``limit`` at once; the first failure cancels the rest."""
        sem = asyncio.Semaphore(limit)

        async def limited(key: str) -> Any:
            async with sem:
                return await one(key)

        tasks = [asyncio.ensure_future(limited(k)) for k in keys]
        try:
            return list(await asyncio.gather(*tasks))
        finally:  # after a failure or a cancellation, no request is left running
            for task in tasks:
                if not task.done():
                    task.cancel()

    async def _get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        proto = default_buffer_prototype()

        async def one(key: str) -> bytes | None:
            buf = await self._call("reading", key, self.store.get(key, prototype=proto))
            return None if buf is None else buf.to_bytes()

        return await self._each(keys, one)

    async def _get_ranges(self, ranges: Sequence[ByteRange]) -> list[bytes | None]:
        proto = default_buffer_prototype()

        async def one(i: int) -> bytes | None:
            key, start, length = ranges[i]
            request: ByteRequest | None
            if start < 0:
                request = SuffixByteRequest(-start)
            elif length is not None:
                request = RangeByteRequest(start, start + length)
            else:
                request = OffsetByteRequest(start) if start else None
            got = self.store.get(key, prototype=proto, byte_range=request)
            buf = await self._call("reading", key, got)
            return None if buf is None else _requested(buf.to_bytes(), start, length)

        return await self._each(range(len(ranges)), one, concurrency())

    async def _set_many(self, items: Sequence[tuple[str, bytes]]) -> None:
        data = dict(items)

        async def one(key: str) -> None:
            await self._call("writing", key, self.store.set(key, cpu.Buffer.from_bytes(data[key])))

        await self._each([k for k, _ in items], one)

    async def _delete_many(self, keys: Sequence[str]) -> None:
        async def one(key: str) -> None:
            await self._call("deleting", key, self.store.delete(key))

        await self._each(keys, one)

    async def _collect(self, listing: AsyncIterator[str], prefix: str) -> list[str]:
        out = []
        it = listing.__aiter__()
        while True:
            try:
                out.append(await self._call("listing", prefix, it.__anext__()))
            except StopAsyncIteration:
                return out

    async def _sizes(self, keys: Sequence[str]) -> list[int]:
        async def one(key: str) -> int:
            return await self._call("sizing", key, self.store.getsize(key))

        return await self._each(keys, one)

    # -- the Backend protocol, each call one batch on zarr's event loop ----------------
    @property
    def read_only(self) -> bool:
        return bool(self.store.read_only)

    @property
    def supports_deletes(self) -> bool:
        return bool(self.store.supports_deletes)

    @property
    def transactional(self) -> bool:
        return type(self.store).__module__.split(".")[0] == "icechunk"

    @property
    def local_dir(self) -> Path | None:
        return None

    @property
    def in_memory(self) -> bool:
        from zarr.storage import FsspecStore, MemoryStore

        store = self.store
        if isinstance(store, MemoryStore):
            return True
        return isinstance(store, FsspecStore) and "memory" in (getattr(store.fs, "protocol", ()) or ())

    def _writable(self, what: str, deleting: bool = False) -> None:
        if self.read_only:
            raise ReadOnlyError(f"cannot {what}: {self.description} is opened read-only")
        if deleting and not self.supports_deletes:
            raise StoreError(self.description, "", f"cannot {what}: this store cannot delete keys")

    def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        return run_sync(self._get_many(keys)) if keys else []

    def get_ranges(self, ranges: Sequence[ByteRange]) -> list[bytes | None]:
        return run_sync(self._get_ranges(ranges)) if ranges else []

    def get_many_into(self, keys: Sequence[str], scratch: Arena) -> list[bytes | memoryview | None]:
        return list(self.get_many(keys))  # the store's buffers are its own

    def set_many(self, items: Sequence[tuple[str, bytes]]) -> None:
        if items:
            self._writable("write keys")
            run_sync(self._set_many(items))

    def list_dir(self, prefix: str) -> list[str]:
        return sorted(run_sync(self._collect(self.store.list_dir(prefix), prefix)))

    def list_keys(self, prefix: str = "") -> list[str]:
        head = under(prefix)
        listing = self.store.list_prefix(head) if head else self.store.list()
        return [k for k in run_sync(self._collect(listing, prefix)) if k.startswith(head)]

    def key_sizes(self, prefix: str = "") -> dict[str, int]:
        keys = self.list_keys(prefix)
        return dict(zip(keys, run_sync(self._sizes(keys)))) if keys else {}

    def delete_many(self, keys: Sequence[str]) -> None:
        if keys:
            self._writable("delete keys", deleting=True)
            run_sync(self._delete_many(keys))

    def delete_prefix(self, prefix: str) -> None:
        self._writable(f"delete {prefix or 'every key'!r}", deleting=True)
        self.delete_many(self.list_keys(prefix))

    def is_empty(self) -> bool:
        return run_sync(self._call("listing", "", self.store.is_empty("")))

    def refresh(self) -> None:
        return None

    def close(self) -> None:
        return None


#: URL schemes served by plain web servers: read-only, listed only through directory pages.
HTTP_PROTOCOLS = ("http", "https")
#: Folder depth :meth:`HttpStoreBackend.list_keys` descends at most (a store is 6 deep at most).
MAX_HTTP_DEPTH = 16
#: Directory pages one :meth:`HttpStoreBackend.list_keys` walk reads, and names it lists, at most
#: (more means a server inventing folders: a store of 10**6 cells has some 10**4 folders).
MAX_HTTP_PAGES = 100_000
MAX_HTTP_LISTED = 10_000_000


class HttpStoreBackend(ZarrStoreBackend):
    """A store served by a static web server (``http://``, ``https://``), read-only.

    Keys are read with one GET each (ranges where zarr asks for them). HTTP has no listing:
    a listing is taken from the server's directory pages (nginx ``autoindex``, Apache
    ``Indexes``, ``python -m http.server``) when the store's root folder has one naming
    ``zarr.json``; otherwise every listing raises :class:`StoreError` saying so. Reads of
    known keys never list; opening a level lists only the attribute and links folders it
    has (a point cloud without attributes or ids needs no listing at all).
    """

    def __init__(
        self,
        store: Store,
        url: str,
        timeout: float | None = DEFAULT_TIMEOUT,
        max_bytes: int = DEFAULT_MAX_OBJECT_BYTES,
    ) -> None:
        super().__init__(store, url, timeout)
        self.url = url.rstrip("/")
        self.max_bytes = max_bytes
        self._has_index: bool | None = None
        self._pages: dict[str, list[tuple[str, bool]]] = {}  # directory pages read, by folder URL

    async def _fetch(self, key: str, start: int, length: int | None) -> bytes | None:
        """One bounded GET of ``key`` (see :func:`~zarr_vectors.storage.http.bounded_get`)."""
        fs = self.store.fs  # type: ignore[attr-defined]
        session = await fs.set_session()
        url = fs.encode_url(f"{self.url}/{key}")
        where = (self.description, key)
        return await bounded_get(session, url, start, length, self.max_bytes, fs.kwargs, where)

    async def _get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        async def one(key: str) -> bytes | None:
            return await self._call("reading", key, self._fetch(key, 0, None))

        return await self._each(keys, one)

    async def _get_ranges(self, ranges: Sequence[ByteRange]) -> list[bytes | None]:
        async def one(i: int) -> bytes | None:
            key, start, length = ranges[i]
            return await self._call("reading", key, self._fetch(key, start, length))

        return await self._each(range(len(ranges)), one, concurrency())

    async def _links(self, prefix: str) -> list[tuple[str, bool]]:
        """``(name, is_folder)`` of the links in the directory page of ``prefix`` ([] when absent)."""
        folder = f"{self.url}/{prefix.strip('/')}".rstrip("/") + "/"
        if folder in self._pages:
            return self._pages[folder]
        fs = self.store.fs  # type: ignore[attr-defined]
        session = await fs.set_session()
        where = (self.description, prefix)
        get = bounded_get(session, fs.encode_url(folder), 0, None, MAX_PAGE_BYTES, fs.kwargs, where)
        page = await self._call("listing", prefix, get)
        self._pages[folder] = links = [] if page is None else page_links(page, folder)
        return links

    def _check_index(self, prefix: str) -> None:
        if self._has_index is None:
            self._has_index = "zarr.json" in {n for n, _ in run_sync(self._links(""))}
        if not self._has_index:
            raise StoreError(
                self.description,
                prefix,
                "cannot list this folder: the web server gives no directory page for the store's root, and "
                "plain HTTP has no other way to list keys. Listing is needed to open a level that has "
                "attribute arrays, object ids or links (lines, graphs, meshes), and by validate, inventory "
                "and pyramid builds; serve the store with "
                "directory listings on (nginx autoindex, Apache Indexes, python -m http.server), or copy it "
                "to local disk or object storage (s3://, gs://)",
            )

    def list_dir(self, prefix: str) -> list[str]:
        self._check_index(prefix)
        return sorted(name for name, _ in run_sync(self._links(prefix)))

    def list_keys(self, prefix: str = "") -> list[str]:
        """Folder by folder, the pages of one depth fetched together; a walk deeper than
        :data:`MAX_HTTP_DEPTH`, or past :data:`MAX_HTTP_PAGES` pages or :data:`MAX_HTTP_LISTED`
        names, raises StoreError."""
        self._check_index(prefix)
        keys: list[str] = []
        folders = [prefix.strip("/")]
        pages = names = 0  # read and listed in this walk
        for _ in range(MAX_HTTP_DEPTH):
            found: list[str] = []
            pages += len(folders)
            if pages > MAX_HTTP_PAGES:
                raise StoreError(
                    self.description, prefix, f"the store has more than {MAX_HTTP_PAGES} folders"
                )
            for folder, page in zip(folders, run_sync(self._each(folders, self._links))):
                names += len(page)
                if names > MAX_HTTP_LISTED:
                    raise StoreError(
                        self.description,
                        prefix,
                        f"the directory pages list more than {MAX_HTTP_LISTED} names",
                    )
                for name, is_folder in page:
                    (found if is_folder else keys).append(f"{under(folder)}{name}")
            if not found:
                return keys
            folders = found
        raise StoreError(self.description, prefix, f"folders nest deeper than {MAX_HTTP_DEPTH} levels")

    def refresh(self) -> None:
        self._pages.clear()
        self._has_index = None

    def is_empty(self) -> bool:
        return self.get_many(["zarr.json"])[0] is None and not self.list_keys()


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


def _is_url(text: str) -> bool:
    return "://" in text


def fsspec_options(url: str, options: StorageOptions) -> dict[str, Any]:
    """The fsspec options for ``url``: the caller's, over this library's defaults for S3.

    s3fs reads a whole key with a HEAD first (to split large ones) unless
    ``max_concurrency`` is 1, and botocore keeps 10 connections unless told otherwise:
    for keys of a few MB at most, that doubles the round trips of every read and queues a
    batch of CONCURRENCY requests behind 10 connections. The caller's values win.
    """
    given = dict(options.fsspec or {})
    if url.split("://", 1)[0].lower() not in ("s3", "s3a"):
        return given
    config = {"max_pool_connections": CONCURRENCY, **(given.get("config_kwargs") or {})}
    return {"max_concurrency": 1, **given, "config_kwargs": config}


def store_from_url(url: str, options: StorageOptions, read_only: bool) -> Store:
    from zarr.storage import FsspecStore

    if url.split("://", 1)[0].lower() in HTTP_PROTOCOLS and not read_only:
        raise ReadOnlyError(
            f"cannot write to {url}: stores served over HTTP(S) are read-only. Write the store to local "
            "disk or object storage (s3://, gs://) and serve that folder or bucket"
        )
    try:
        return FsspecStore.from_url(url, storage_options=fsspec_options(url, options), read_only=read_only)
    except ImportError as exc:  # fsspec or the protocol's package (s3fs, gcsfs) is missing
        protocol = url.split("://", 1)[0]
        if protocol in ("s3", "s3a"):
            hint = (
                "install the s3 extra of zarrvec: pip install 'zarrvec[s3]' "
                '(or, in a checkout of the source, pip install -e ".[s3]")'
            )
        elif protocol in ("gs", "gcs"):
            hint = (
                "install the gcs extra of zarrvec: pip install 'zarrvec[gcs]' "
                '(or, in a checkout of the source, pip install -e ".[gcs]")'
            )
        elif protocol in HTTP_PROTOCOLS:
            hint = "install aiohttp (pip install aiohttp), which fsspec reads http(s):// URLs with"
        else:
            hint = f"install the fsspec package for {protocol}:// URLs (e.g. adlfs for az://)"
        raise ZarrVectorsError(f"cannot open {url!r}: {exc}; {hint}") from exc


def local_path(target: Any) -> Path | None:
    """The local path a target names (a path or ``file://`` URL), else None."""
    if isinstance(target, Store) or not isinstance(target, (str, os.PathLike)):
        return None
    text = os.fspath(target)
    if text.startswith("file://"):
        return Path(text[len("file://") :])
    return None if _is_url(text) else Path(text)


def remote_backend(target: Any, options: StorageOptions, read_only: bool) -> ZarrStoreBackend:
    """The backend of a zarr Store or a URL other than ``file://``."""
    if isinstance(target, Store):
        return ZarrStoreBackend(target, timeout=options.timeout)
    text = os.fspath(target)
    store = store_from_url(text, options, read_only)
    if text.split("://", 1)[0].lower() in HTTP_PROTOCOLS:
        return HttpStoreBackend(store, text, options.timeout, options.max_object_bytes)
    return ZarrStoreBackend(store, text, options.timeout)


def open_backend(target: Any, *, read_only: bool, storage_options: dict[str, Any] | None = None) -> Backend:
    """A backend for reading (or updating in place) an existing store."""
    options = StorageOptions.parse(storage_options)
    if not isinstance(target, (Store, str, os.PathLike)):
        raise InputError(f"cannot open a store from {type(target).__name__}; give a path, URL or zarr Store")
    path = local_path(target)
    if path is None:
        return remote_backend(target, options, read_only)
    if path.is_file() and zipfile.is_zipfile(path):
        from zarr.storage import ZipStore

        return ZarrStoreBackend(run_sync(ZipStore.open(path, mode="r")), str(path), options.timeout)
    if not path.exists():
        assert not isinstance(target, Store)  # local_path gives None for a Store
        raise StoreNotFoundError(os.fspath(target))
    return LocalBackend(path, read_only=read_only, follow_symlinks=options.follow_symlinks)


def check_not_v2(backend: Backend) -> None:
    """Raise :class:`ZarrV2StoreError` when the root holds Zarr v2 metadata and no zarr.json."""
    root, zgroup, zarray = backend.get_many(["zarr.json", ".zgroup", ".zarray"])
    if root is None and (zgroup is not None or zarray is not None):
        raise ZarrV2StoreError(
            f"{backend.description} is a Zarr v2 store; Zarr Vectors needs Zarr v3. "
            "Rewrite the data with zarr_vectors.write_* (zarr-python 3 can read the v2 arrays)."
        )
