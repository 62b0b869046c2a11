"""Local directories as stores: safe batch reads and writes, tree removal, atomic exchange.

A local store is whatever files sit under its root, and a store found on disk may
hold anything. :class:`LocalBackend` therefore reads a key only when it is a regular
file inside the store: a symbolic link that resolves outside the root (for the key's
file or any of its directories) is refused unless the backend was made with
``follow_symlinks=True``, and FIFOs, devices and sockets are always refused (opening
never blocks: ``O_NONBLOCK``). At most ``st_size`` bytes are read from a file, as
``fstat`` reports it when opened.

Writes never follow a link out of the store: a directory on a key's path must be a
real directory or a link resolving inside the root, and a key's own file is created
with ``O_NOFOLLOW | O_EXCL``; an existing file (or link) at a key is replaced by
rename, never written through, so a hard-linked file shared with another store is
never changed.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import shutil
import stat
import sys
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import EllipsisType
from typing import Literal, overload

import numpy as np

from zarr_vectors.errors import ReadOnlyError, StoreError, ZarrVectorsError
from zarr_vectors.storage.openfiles import OpenFiles
from zarr_vectors.storage.scratch import Arena
from zarr_vectors.storage.threads import default_workers, map_cells, map_io

#: Keys per batch from which reads are spread over threads.
PARALLEL_READS = 64
#: Files per batch from which writes are spread over the I/O threads.
PARALLEL_WRITES = 4
#: Bytes of a batch's first file from which :meth:`LocalBackend.get_many_into` spreads even a
#: few keys over threads (copying large files out of the page cache is worth two cores).
LARGE_FILE = 256 << 10
#: Bytes of a batch's first file below which :meth:`LocalBackend.get_many_into` reads on one
#: thread however many keys: per file, the Python work then outweighs the copy, and two threads
#: contending for the interpreter were measured slower (1 M points, 12 KB cells, 10 % box:
#: 7.5 to 9.1 ms on threads against 7.1 to 7.4 ms on one).
SMALL_FILE = 32 << 10

__all__ = ["os_reason", "LocalBackend", "exchange", "remove_tree"]

_O_BINARY = getattr(os, "O_BINARY", 0)
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_READ = os.O_RDONLY | _O_NOFOLLOW | _O_NONBLOCK | _O_BINARY | _O_CLOEXEC
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | _O_BINARY | _O_CLOEXEC
#: errno of ``open(O_NOFOLLOW)`` on a symbolic link (Linux ELOOP; FreeBSD EMLINK).
_LINK_ERRNOS = (errno.ELOOP, errno.EMLINK)
_KINDS = {
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
}


_PREADV = getattr(os, "preadv", None)


def _read_into(fd: int, buf: memoryview, offset: int) -> memoryview:
    """Fill ``buf`` from the file at ``offset``; the part read when the file ends first."""
    got = 0
    while got < len(buf):  # short reads happen on some filesystems
        if _PREADV is None:  # a platform without preadv: read, then copy
            more = os.pread(fd, len(buf) - got, offset + got)
            buf[got : got + len(more)] = more
            n = len(more)
        else:
            n = _PREADV(fd, [buf[got:]], offset + got)
        if n == 0:
            break
        got += n
    return buf[:got]


def _inside(real: str, root: str) -> bool:
    return real == root or real.startswith(root.rstrip(os.sep) + os.sep)


class LocalBackend:
    """Files under a directory; missing files read as None (see the module docstring for
    what is refused). ``follow_symlinks=True`` reads links that lead out of the store;
    deletes never reach through a link out of it. Listing does not descend into linked
    folders. Implements :class:`zarr_vectors.storage.protocol.Backend`."""

    supports_deletes = True
    transactional = False
    in_memory = False

    def __init__(
        self, root: str | os.PathLike[str], *, read_only: bool = False, follow_symlinks: bool = False
    ) -> None:
        self.root = Path(root)
        self.read_only = read_only
        self.follow_symlinks = follow_symlinks
        self.description = str(self.root)
        self._made: set[str] = set()  # key directories checked (and created) for writing
        self._dirs_ok: set[str] = {""}  # key directories checked for reading
        self._real: str | None = None
        #: Files kept open for ranged reads (shards): each range is one ``pread``.
        self.open_files = OpenFiles()

    def close(self) -> None:
        """Close the files kept open for reading; the backend stays usable (it reopens them)."""
        self.open_files.close()

    @property
    def local_dir(self) -> Path:
        return self.root

    def refresh(self) -> None:
        self.open_files.close()
        self._made.clear()
        self._dirs_ok = {""}
        self._real = None

    def stored_root(self) -> bytes | None:
        return self.get_many(["zarr.json"])[0]

    def opened_root(self) -> bytes | None | EllipsisType:
        return ...

    # -- reading -----------------------------------------------------------------------
    @property
    def real_root(self) -> str:
        if self._real is None:
            self._real = os.path.realpath(self.root)
        return self._real

    def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        """The files of ``keys`` (None where absent); a large batch is read by the shared
        threads, a contiguous block of keys each (reads release the GIL)."""
        if len(keys) < PARALLEL_READS:
            return [self._get_one(key) for key in keys]
        blocks = np.array_split(np.arange(len(keys)), default_workers())
        parts = map_cells(lambda j: [self._get_one(keys[i]) for i in blocks[j].tolist()], len(blocks))
        return [value for part in parts for value in part]

    def get_ranges(self, ranges: Sequence[tuple[str, int, int | None]]) -> list[bytes | None]:
        """Byte ranges of files (see ``storage.ByteRange``), each one ``pread``; the files of
        partial ranges (shard indexes and runs of cells) are kept open (:attr:`open_files`),
        and consecutive ranges of one file share one descriptor and one ``fstat``. A batch of
        :data:`PARALLEL_READS` ranges or more averaging :data:`SMALL_FILE` bytes or more is
        spread over the shared threads like :meth:`get_many`."""
        known = [n for _, _, n in ranges if n is not None]
        small = len(known) == len(ranges) and sum(known) < SMALL_FILE * len(ranges)
        if len(ranges) < PARALLEL_READS or small:
            return self._get_run_of_ranges(ranges)
        blocks = np.array_split(np.arange(len(ranges)), default_workers())
        parts = map_cells(
            lambda j: self._get_run_of_ranges([ranges[i] for i in blocks[j].tolist()]), len(blocks)
        )
        return [value for part in parts for value in part]

    def _get_run_of_ranges(self, ranges: Sequence[tuple[str, int, int | None]]) -> list[bytes | None]:
        """:meth:`get_ranges` in this thread: the files of partial ranges taken from the open-file
        cache together (one descriptor each), then one ``pread`` per range."""
        partial = sorted({key for key, start, length in ranges if not (start == 0 and length is None)})
        held = dict(zip(partial, self.open_files.acquire_many(partial, self._open_regular)))
        pread = os.pread
        try:
            out: list[bytes | None] = []
            for key, start, length in ranges:
                if start == 0 and length is None:
                    # A whole file (a document such as the root, whose replacement must be seen
                    # at once) is opened afresh, never kept open.
                    out.append(self._get_one(key))
                    continue
                got = held[key]
                if got is None:
                    out.append(None)
                elif start >= 0 and length is not None and length > 0:  # the common case, inline
                    data = pread(got[0], length, start)
                    out.append(data if len(data) == length else self._pread_open(got[0], start, length))
                else:
                    out.append(self._pread_open(got[0], start, length))
            return out
        finally:
            self.open_files.release_many(got[1] for got in held.values() if got is not None)

    def get_many_into(self, keys: Sequence[str], scratch: Arena) -> list[bytes | memoryview | None]:
        """:meth:`get_many`, each file read into a slice of ``scratch`` (valid until it is reset).
        Threads read a batch of :data:`PARALLEL_READS` keys or more unless its first file has
        fewer than :data:`SMALL_FILE` bytes, or of a few keys when it has :data:`LARGE_FILE`."""
        if not keys:
            return []
        first: bytes | memoryview | None = self._get_one(keys[0], scratch=scratch)
        rest = keys[1:]
        size = -1 if first is None else len(first)  # -1: the first key is absent, size unknown
        enough = 4 if size >= LARGE_FILE else PARALLEL_READS
        if len(keys) < enough or 0 <= size < SMALL_FILE:
            return [first] + [self._get_one(key, scratch=scratch) for key in rest]
        # Thread j reads keys j, j + w, ...: a batch lists its large cells (vertices) first and
        # small ones (attributes) after, so strides balance the threads where halves would not.
        w = default_workers()
        parts = map_cells(lambda j: [self._get_one(key, scratch=scratch) for key in rest[j::w]], w)
        out: list[bytes | memoryview | None] = [first, *([None] * len(rest))]
        for j, part in enumerate(parts):
            out[1 + j :: w] = part
        return out

    def _open_regular(self, key: str) -> int | None:
        """:meth:`_open_key` for the open-file cache: a descriptor of a regular file (None
        when absent or a directory; a StoreError for other kinds), checked once here so that
        ranged reads through it need no ``fstat``."""
        fd = self._open_key(key)
        if fd is None:
            return None
        regular = False
        try:
            regular = self._regular_size(fd, key) is not None
        finally:
            if not regular:  # a directory, or refused: not kept
                os.close(fd)
        return fd if regular else None

    @classmethod
    def _pread_open(cls, fd: int, start: int, length: int | None) -> bytes | None:
        """A range of a regular file open at ``fd``: a bounded range is one ``pread`` (short at
        the end of the file, as a clamped range would be); a suffix or open range asks the
        file's size first."""
        if start >= 0 and length is not None:
            if length <= 0:
                return b""
            data = os.pread(fd, length, start)
            if 0 < len(data) < length:  # short reads happen on some filesystems
                return cls._pread(fd, os.fstat(fd).st_size, start, length)
            return data
        return cls._pread(fd, os.fstat(fd).st_size, start, length)

    def _open_key(self, key: str) -> int | None:
        """A read descriptor of the key's file (None when absent); refusals as documented."""
        parent = key.rpartition("/")[0]
        if parent not in self._dirs_ok and not self._check_dir(parent, key):
            return None
        path = f"{self.root}/{key}"
        try:
            return os.open(path, _READ)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as exc:
            if exc.errno not in _LINK_ERRNOS:
                if exc.errno == errno.ENXIO:
                    raise StoreError(self.description, key, "is a socket, not a regular file") from exc
                raise
            return self._open_link(path, key)

    @overload
    def _get_one(self, key: str, start: int = 0, length: int | None = None) -> bytes | None: ...
    @overload
    def _get_one(self, key: str, *, scratch: Arena) -> memoryview | None: ...
    def _get_one(
        self, key: str, start: int = 0, length: int | None = None, scratch: Arena | None = None
    ) -> bytes | memoryview | None:
        fd = self._open_key(key)
        if fd is None:
            return None
        try:
            return self._read_fd(fd, key, start, length, scratch)
        finally:
            os.close(fd)

    def _read_fd(
        self, fd: int, key: str, start: int = 0, length: int | None = None, scratch: Arena | None = None
    ) -> bytes | memoryview | None:
        """Bytes ``start .. start + length`` of the open file (a negative ``start``: the last
        ``-start`` bytes), never past ``st_size`` as ``fstat`` reports it; read into a slice of
        ``scratch`` when given. None for a directory."""
        size = self._regular_size(fd, key)
        if size is None:
            return None
        if scratch is not None:
            begin, end = _clamp(size, start, length)
            return _read_into(fd, scratch.take(end - begin), begin)
        return self._pread(fd, size, start, length)

    def _regular_size(self, fd: int, key: str) -> int | None:
        """The size of the open file (None for a directory); a StoreError for anything else
        that is not a regular file."""
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            if stat.S_ISDIR(st.st_mode):
                return None
            kind = _KINDS.get(stat.S_IFMT(st.st_mode), "not a regular file")
            raise StoreError(self.description, key, f"is {kind}, not a regular file; refusing to read it")
        return st.st_size

    @staticmethod
    def _pread(fd: int, size: int | None, start: int, length: int | None) -> bytes | None:
        """Bytes ``start .. start + length`` of a file of ``size`` bytes (None: a directory)."""
        if size is None:
            return None
        begin, end = _clamp(size, start, length)
        parts: list[bytes] = []
        got = begin
        while got < end:  # short reads happen on some filesystems
            more = os.pread(fd, end - got, got)
            if not more:
                break
            parts.append(more)
            got += len(more)
        if len(parts) == 1:
            return parts[0]
        return b"".join(parts)

    def _open_link(self, path: str, key: str) -> int | None:
        """Open the target of the link at ``path``: only inside the store unless following."""
        real = os.path.realpath(path)
        if not self.follow_symlinks and not _inside(real, self.real_root):
            raise StoreError(
                self.description,
                key,
                f"is a symbolic link to {real}, outside the store; refusing to read it "
                "(pass storage_options={'zv_follow_symlinks': True} to read links out of the store)",
            )
        try:
            return os.open(real, _READ)
        except (FileNotFoundError, NotADirectoryError):
            return None  # a dangling link reads as an absent key

    def _check_dir(self, rel: str, key: str) -> bool:
        """Whether directory ``rel`` of the store exists; raise when it is reached through a
        link leading out of the store. Only existing directories are remembered."""
        head = rel.rpartition("/")[0]
        if head not in self._dirs_ok and not self._check_dir(head, key):
            return False
        try:
            st = os.lstat(f"{self.root}/{rel}")
        except (FileNotFoundError, NotADirectoryError):
            return False
        if stat.S_ISLNK(st.st_mode) and not self.follow_symlinks:
            real = os.path.realpath(f"{self.root}/{rel}")
            if not _inside(real, self.real_root):
                raise StoreError(
                    self.description,
                    key,
                    f"directory {rel!r} is a symbolic link to {real}, outside the store; refusing to read "
                    "through it (pass storage_options={'zv_follow_symlinks': True} to allow it)",
                )
        self._dirs_ok.add(rel)
        return True

    # -- writing -----------------------------------------------------------------------
    def set_many(self, items: Sequence[tuple[str, bytes]]) -> None:
        if self.read_only:
            raise ReadOnlyError(f"cannot write keys: {self.description} is opened read-only")
        root = str(self.root)
        self.open_files.retire(key for key, _ in items)
        # Data first, on the I/O threads when there are several files (creating a file waits on
        # the filesystem); then the zarr.json documents, in the order given.
        latest = dict(items)  # a key given twice: its last value, as one file after another would leave
        docs = [item for item in latest.items() if item[0].rpartition("/")[2] == "zarr.json"]
        data = [item for item in latest.items() if item[0].rpartition("/")[2] != "zarr.json"]
        if len(data) >= PARALLEL_WRITES:
            map_io(lambda i: self._set_one(root, *data[i]), len(data))
        else:
            for key, value in data:
                self._set_one(root, key, value)
        for key, value in docs:
            self._set_one(root, key, value)

    def _set_one(self, root: str, key: str, data: bytes) -> None:
        try:
            self._set(root, key, data)
        except OSError as exc:
            if isinstance(exc, ZarrVectorsError):
                raise
            raise StoreError(self.description, key, f"cannot be written: {os_reason(exc)}") from exc

    def _set(self, root: str, key: str, data: bytes) -> None:
        parent = key.rpartition("/")[0]
        if parent not in self._made:
            self._make_dir(parent, key)
        path = f"{root}/{key}"
        try:
            fd = os.open(path, _CREATE, 0o666)
        except FileExistsError:
            self._replace(path, data)
            return
        try:
            _write_all(fd, data)
        finally:
            os.close(fd)

    def _replace(self, path: str, data: bytes) -> None:
        """Replace an existing file or link by rename: never writes through it."""
        head, _, name = path.rpartition("/")
        tmp = f"{head}/.{name}.zv-part-{uuid.uuid4().hex[:12]}"
        fd = os.open(tmp, _CREATE, 0o666)
        replaced = False
        try:
            try:
                _write_all(fd, data)
            finally:
                os.close(fd)
            os.replace(tmp, path)
            replaced = True
        finally:
            if not replaced:  # whatever stopped it (an error, an interrupt): no part file stays
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)

    def _make_dir(self, rel: str, key: str) -> None:
        """Create directory ``rel`` (and its parents) inside the store; refuse links leading out."""
        if not rel:
            if not self._made:
                os.makedirs(self.root, exist_ok=True)
            self._made.add("")
            return
        head = rel.rpartition("/")[0]
        if head not in self._made:
            self._make_dir(head, key)
        path = f"{self.root}/{rel}"
        try:
            os.mkdir(path)
        except FileExistsError:
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                real = os.path.realpath(path)
                if not _inside(real, self.real_root) or not os.path.isdir(real):
                    raise StoreError(
                        self.description,
                        key,
                        f"directory {rel!r} is a symbolic link to {real}, outside the store; "
                        "refusing to write through it",
                    ) from None
            elif not stat.S_ISDIR(st.st_mode):
                raise StoreError(self.description, key, f"{rel!r} exists and is not a directory") from None
        self._made.add(rel)

    # -- deleting ----------------------------------------------------------------------
    def _deletable(self, rel: str, key: str) -> str:
        """The path of folder ``rel`` of the store, refused when it resolves outside it."""
        if self.read_only:
            raise ReadOnlyError(f"cannot delete {key!r}: {self.description} is opened read-only")
        path = f"{self.root}/{rel}" if rel else str(self.root)
        real = os.path.realpath(path)
        if not _inside(real, self.real_root):
            raise StoreError(
                self.description,
                key,
                f"folder {rel!r} leads to {real}, outside the store; refusing to delete",
            )
        return path

    def delete_many(self, keys: Sequence[str]) -> None:
        self.open_files.retire(keys)
        for key in keys:
            parent, _, name = key.rpartition("/")
            try:
                os.unlink(f"{self._deletable(parent, key)}/{name}")
            except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
                pass  # absent, or a folder: not a key

    def delete_prefix(self, prefix: str) -> None:
        self.open_files.close()
        head = prefix.strip("/")
        if not head:
            root = self._deletable("", "")
            for entry in self._scan(root):
                remove_tree(entry.path)
            self.refresh()
            return
        parent, _, name = head.rpartition("/")
        path = f"{self._deletable(parent, head)}/{name}"
        try:
            st = os.lstat(path)
        except (FileNotFoundError, NotADirectoryError):
            return
        if stat.S_ISDIR(st.st_mode) or stat.S_ISLNK(st.st_mode):  # a link goes, never its target
            remove_tree(path)
            self.refresh()  # folders checked before may be gone

    # -- listing -----------------------------------------------------------------------
    def list_dir(self, prefix: str) -> list[str]:
        try:
            return sorted(os.listdir(self.root / prefix))
        except (FileNotFoundError, NotADirectoryError):
            return []

    @staticmethod
    def _scan(path: str) -> list[os.DirEntry[str]]:
        try:
            with os.scandir(path) as it:
                return list(it)
        except (FileNotFoundError, NotADirectoryError):
            return []

    def _entries(self, prefix: str) -> Iterator[tuple[str, os.DirEntry[str]]]:
        """``(key, entry)`` of every file below ``prefix``; linked folders are not entered."""
        head = prefix.strip("/")
        stack = [(f"{self.root}/{head}" if head else str(self.root), f"{head}/" if head else "")]
        while stack:
            path, base = stack.pop()
            for entry in self._scan(path):
                if entry.is_dir():
                    if not entry.is_symlink():
                        stack.append((entry.path, f"{base}{entry.name}/"))
                else:
                    yield base + entry.name, entry

    def list_keys(self, prefix: str = "") -> list[str]:
        return [key for key, _ in self._entries(prefix)]

    def key_sizes(self, prefix: str = "") -> dict[str, int]:
        out = {}
        for key, entry in self._entries(prefix):
            try:
                out[key] = entry.stat().st_size
            except FileNotFoundError:  # a dangling link reads as absent
                continue
        return out

    def is_empty(self) -> bool:
        return not self.root.exists() or (self.root.is_dir() and not any(self.root.iterdir()))


def os_reason(exc: OSError) -> str:
    """An OS error as a reason: its text and errno name (``No space left on device (ENOSPC)``)."""
    name = errno.errorcode.get(exc.errno or 0)
    text = exc.strerror or str(exc)
    return f"{text} ({name})" if name else text


def _clamp(size: int, start: int, length: int | None) -> tuple[int, int]:
    """``[begin, end)`` of a range of a file of ``size`` bytes (a negative ``start``: the last
    ``-start`` bytes; no ``length``: to the end), clamped to the file."""
    begin = max(size + start, 0) if start < 0 else min(start, size)
    end = size if length is None or start < 0 else min(size, begin + length)
    return begin, end


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def remove_tree(path: str | os.PathLike[str]) -> None:
    """Remove a file, a link (never its target) or a directory tree (links inside are
    unlinked, not followed). Errors are raised, except for entries already gone."""
    path = os.fspath(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(st.st_mode):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        return

    def on_error(func: object, name: str, info: tuple[type, BaseException, object]) -> None:
        if not isinstance(info[1], FileNotFoundError):
            raise info[1]

    if sys.version_info >= (3, 12):
        shutil.rmtree(path, onexc=lambda func, name, exc: on_error(func, name, (type(exc), exc, None)))
    else:
        shutil.rmtree(path, onerror=on_error)


_RENAME_EXCHANGE = 2
#: renameat2 from libc once looked up; False when the system has none.
_renameat2: Callable[..., int] | Literal[False] | None = None


def exchange(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    """Swap two existing paths atomically (Linux ``renameat2(RENAME_EXCHANGE)``).

    Returns False when the system or filesystem cannot (the caller then falls back to
    two renames); raises OSError for other failures.
    """
    global _renameat2
    if _renameat2 is None:
        try:
            func = ctypes.CDLL(None, use_errno=True).renameat2
        except (AttributeError, OSError):
            _renameat2 = False
            return False
        func.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
        func.restype = ctypes.c_int
        _renameat2 = func
    if _renameat2 is False:
        return False
    at_fdcwd = -100
    if _renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), os.fspath(a), None, os.fspath(b))
