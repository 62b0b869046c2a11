"""A bounded cache of open read descriptors, one per key, for ranged reads of local files.

A sharded store on local disk is read as byte ranges of a few large files (a shard's index,
then its runs of wanted cells): keeping those files open turns every range into one ``pread``
with no path lookup. Invariants:

* at most ``limit`` descriptors stay open while unused (least recently used closed first);
  those in use by a read are never closed under it (a count of users per entry);
* a key written, deleted or refreshed through the backend is *retired*: its descriptor is
  closed as soon as no read uses it and is never handed out again, so a cached descriptor
  never serves the bytes of a file this backend replaced. Replacements by other processes
  are caught a level up: the dataset's consistency check reads the root through its path
  after every batch (``storage.wrappers.ConsistentBackend``), and a store that changed raises
  ``StoreChangedError`` until it is refreshed, which closes every descriptor here;
* :meth:`OpenFiles.close` (the backend's ``close``, or the garbage collection of the cache
  with its backend) closes them all; a pickled copy starts with none open.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence

__all__ = ["MAX_OPEN_FILES", "OpenFiles", "open_file_limit"]

#: Open descriptors kept per store, at most (fewer when the process may open few files).
MAX_OPEN_FILES = 1024


def open_file_limit() -> int:
    """Descriptors one store keeps: :data:`MAX_OPEN_FILES`, or a sixteenth of the process's
    soft ``RLIMIT_NOFILE`` when that is smaller (at least 4)."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, OSError, ValueError):
        return MAX_OPEN_FILES
    if soft == getattr(resource, "RLIM_INFINITY", -1) or soft <= 0:
        return MAX_OPEN_FILES
    return max(4, min(MAX_OPEN_FILES, soft // 16))


class _Entry:
    __slots__ = ("fd", "users", "retired")

    def __init__(self, fd: int) -> None:
        self.fd, self.users, self.retired = fd, 0, False


class OpenFiles:
    """Open descriptors by key (see the module docstring). Thread-safe."""

    def __init__(self, limit: int | None = None) -> None:
        self.limit = open_file_limit() if limit is None else max(1, int(limit))
        self._lock = threading.Lock()
        self._open: OrderedDict[str, _Entry] = OrderedDict()
        #: Descriptors opened so far (a measure of the reuse, for tests and benchmarks).
        self.opened = 0

    def __len__(self) -> int:
        return len(self._open)

    def __getstate__(self) -> dict[str, int]:
        """A copy (a pickled dataset sent to a worker) starts with no file open."""
        return {"limit": self.limit}

    def __setstate__(self, state: dict[str, int]) -> None:
        self.__init__(state["limit"])  # type: ignore[misc]

    def __del__(self) -> None:
        if getattr(self, "_open", None):  # collected with its backend: close what is left
            self.close()

    def acquire(self, key: str, opener: Callable[[str], int | None]) -> tuple[int, object] | None:
        """``(fd, token)`` for ``key`` (opened with ``opener`` unless cached), None when the
        opener finds no file; hand the token back to :meth:`release` once read."""
        with self._lock:
            entry = self._open.get(key)
            if entry is not None:
                entry.users += 1
                self._open.move_to_end(key)
                return entry.fd, entry
        fd = opener(key)  # outside the lock: opens of different keys proceed together
        if fd is None:
            return None
        with self._lock:
            self.opened += 1
            entry = self._open.get(key)
            if entry is None:
                entry = self._open[key] = _Entry(fd)
            else:  # another thread opened it meanwhile: keep theirs
                os.close(fd)
            entry.users += 1
            self._open.move_to_end(key)
            self._trim()
            return entry.fd, entry

    def acquire_many(
        self, keys: Sequence[str], opener: Callable[[str], int | None]
    ) -> list[tuple[int, object] | None]:
        """:meth:`acquire` for each of ``keys`` (distinct), the cached ones under one lock."""
        out: list[tuple[int, object] | None] = [None] * len(keys)
        missing = []
        with self._lock:
            for i, key in enumerate(keys):
                entry = self._open.get(key)
                if entry is None:
                    missing.append(i)
                else:
                    entry.users += 1
                    self._open.move_to_end(key)
                    out[i] = entry.fd, entry
        for i in missing:
            out[i] = self.acquire(keys[i], opener)
        return out

    def release_many(self, tokens: Iterable[object]) -> None:
        """:meth:`release` of each token, under one lock."""
        with self._lock:
            for token in tokens:
                assert isinstance(token, _Entry)
                token.users -= 1
                if token.retired and token.users == 0:
                    os.close(token.fd)
            self._trim()

    def release(self, token: object) -> None:
        """End one read of the descriptor ``token`` came with."""
        assert isinstance(token, _Entry)
        with self._lock:
            token.users -= 1
            if token.retired and token.users == 0:
                os.close(token.fd)
            else:
                self._trim()

    def retire(self, keys: Iterable[str]) -> None:
        """Never hand out the descriptors of ``keys`` again (their files were replaced or removed)."""
        with self._lock:
            if self._open:
                for key in keys:
                    entry = self._open.pop(key, None)
                    if entry is not None:
                        self._retire(entry)

    def close(self) -> None:
        """Retire every descriptor (closed now, or when the reads using them end)."""
        with self._lock:
            while self._open:
                self._retire(self._open.popitem(last=False)[1])

    def _retire(self, entry: _Entry) -> None:
        entry.retired = True
        if entry.users == 0:
            os.close(entry.fd)

    def _trim(self) -> None:
        """Close unused descriptors, least recently used first, down to ``limit`` (lock held).
        Walks from the least recently used end only as far as it must (not the whole cache)."""
        excess = len(self._open) - self.limit
        if excess <= 0:
            return
        victims = []
        for key, entry in self._open.items():
            if entry.users == 0:
                victims.append(key)
                if len(victims) == excess:
                    break
        for key in victims:
            os.close(self._open.pop(key).fd)
