"""``ZarrStoreBackend``: any zarr-python ``Store`` (memory, zip, fsspec URLs such as ``s3://`` and
``gs://``) as a backend: batched concurrent reads under a time limit, byte ranges, listings."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Awaitable, Iterable, Sequence
from pathlib import Path
from types import EllipsisType
from typing import Any, TypeVar

from zarr.abc.store import ByteRequest, OffsetByteRequest, RangeByteRequest, Store, SuffixByteRequest
from zarr.core.buffer import cpu, default_buffer_prototype

from zarr_vectors.errors import (
    ReadOnlyError,
    StoreError,
)
from zarr_vectors.storage.protocol import (
    CONCURRENCY,
    DEFAULT_TIMEOUT,
    ByteRange,
    concurrency,
    run_sync,
    under,
)
from zarr_vectors.storage.scratch import Arena

T = TypeVar("T")

__all__ = ["ZarrStoreBackend", "remote_errors", "requested_bytes"]


@functools.cache
def remote_errors() -> tuple[type[BaseException], ...]:
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


def requested_bytes(data: bytes, start: int, length: int | None) -> bytes:
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
        except remote_errors() as exc:
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
            return None if buf is None else requested_bytes(buf.to_bytes(), start, length)

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

    def _forget_listings(self) -> None:
        """Drop the filesystem's cached listings of this store: fsspec filesystems (s3fs, gcsfs)
        cache them per process, so a store rewritten by another process since would be listed as
        it was. Every listing of a store is therefore asked of the server."""
        from zarr.storage import FsspecStore

        store = self.store
        if not isinstance(store, FsspecStore):
            return
        fs = store.fs
        root = fs._strip_protocol(store.path).rstrip("/")
        cache = getattr(fs, "dircache", None)
        if cache is not None:
            for key in [k for k in list(cache) if k == root or k.startswith(root + "/")]:
                cache.pop(key, None)
        fs.invalidate_cache(root)  # and the parents' listings

    def list_dir(self, prefix: str) -> list[str]:
        self._forget_listings()
        return sorted(run_sync(self._collect(self.store.list_dir(prefix), prefix)))

    def list_keys(self, prefix: str = "") -> list[str]:
        self._forget_listings()
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
        self._forget_listings()
        return run_sync(self._call("listing", "", self.store.is_empty("")))

    def refresh(self) -> None:
        return None

    def close(self) -> None:
        return None

    def stored_root(self) -> bytes | None:
        return self.get_many(["zarr.json"])[0]

    def opened_root(self) -> bytes | None | EllipsisType:
        return ...
