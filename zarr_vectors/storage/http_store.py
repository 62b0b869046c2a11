"""``HttpStoreBackend``: a store served by a plain web server, read-only, listed through its
directory pages within bounds (depth, pages, names)."""

from __future__ import annotations

from collections.abc import Sequence

from zarr.abc.store import Store

from zarr_vectors.errors import (
    StoreError,
)
from zarr_vectors.storage.http import DEFAULT_MAX_OBJECT_BYTES, MAX_PAGE_BYTES, bounded_get, page_links
from zarr_vectors.storage.protocol import DEFAULT_TIMEOUT, ByteRange, concurrency, run_sync, under
from zarr_vectors.storage.zarr_store import ZarrStoreBackend

__all__ = ["HTTP_PROTOCOLS", "HttpStoreBackend", "MAX_HTTP_DEPTH", "MAX_HTTP_LISTED", "MAX_HTTP_PAGES"]


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
