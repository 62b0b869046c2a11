"""Writing a whole store, or rebuilding its coarse levels, without exposing half of one.

Every write is first built completely in a local staging folder (every input check
and every encoding happens there), then committed to the target:

* **local directory**: the staging folder ``.NAME.zv-tmp-*`` sits beside the target
  and is exchanged with it in one ``renameat2(RENAME_EXCHANGE)`` (two renames where
  the system lacks it); the old store is then removed. A reader or a crash sees the
  old store or the new one, never a mix.
* **zip file**: the staging folder is zipped to a temporary file beside the target,
  which is renamed over it.
* **other stores** (memory, S3 and other fsspec URLs, zarr ``Store`` objects): keys
  are committed one by one. First the root ``zarr.json`` is replaced by a placeholder
  (``zarr_vectors_incomplete``), then keys of the old store that the new one lacks are
  deleted, the new keys are written, and the new root last. An interruption leaves
  the old store (before the placeholder) or a store that readers refuse with
  :class:`~zarr_vectors.errors.IncompleteStoreError`, which a new write replaces.

``overwrite=True`` replaces a target only when it is absent, empty or a Zarr store
(a ``zarr.json``, or Zarr v2 ``.zgroup``/``.zarray``, at its root); the current, home
and root directories, and folders holding them, are never replaced. A staging folder
is locked (``flock``) while its writer lives; the next write to the same target
removes those left by killed writers.

Every write to a local target holds the target's writer lock (``.NAME.zv-lock`` beside it)
from its checks to its commit, and every write, on any store, commits only if the target's
root is still the one it started from, else raises
:class:`~zarr_vectors.errors.StoreConflictError` with nothing applied (see
:mod:`zarr_vectors.storage.writelock`).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import shutil
import tempfile
import uuid
import warnings
import zipfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import EllipsisType
from typing import Any

from zarr_vectors.errors import (
    ReadOnlyError,
    StoreChangedError,
    StoreError,
    StoreExistsError,
    ZarrVectorsError,
)
from zarr_vectors.format import zarr_json
from zarr_vectors.storage.local import LocalBackend, exchange, os_reason, remove_tree
from zarr_vectors.storage.protocol import (
    GENERATION_KEY,
    INCOMPLETE_KEY,
    Backend,
    ByteRange,
    StorageOptions,
    cut_range,
    dump_json,
    new_generation,
    under,
)
from zarr_vectors.storage.resolve import local_path, remote_backend
from zarr_vectors.storage.scratch import Arena
from zarr_vectors.storage.writelock import check_root, conflict, writer_lock

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: staging folders are not locked
    fcntl = None  # type: ignore[assignment]  # no module on Windows; users check for None

__all__ = [
    "check_in_place_target",
    "check_target",
    "find_leftovers",
    "placeholder_root",
    "protected_reason",
    "rebuild_session",
    "write_session",
    "staging",
    "scratch_folder",
]

#: Bytes of staged keys sent to an in-place target per batch.
UPLOAD_BYTES = 32 << 20
#: Names of the Zarr root documents that make a target a Zarr store (v3, v2).
ROOT_DOCS = ("zarr.json", ".zgroup", ".zarray")
_LOCK_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
_LOCK_FLAGS |= getattr(os, "O_CLOEXEC", 0)


# -- staging folders and their leftovers -----------------------------------------------
def _lock(path: str) -> int | None:
    """An fd holding an exclusive ``flock`` on ``path``, or None when another process holds it."""
    fd = os.open(path, _LOCK_FLAGS)
    if fcntl is None:
        return fd
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


@contextlib.contextmanager
def staging(parent: Path, prefix: str) -> Iterator[Path]:
    """A new locked folder ``parent/<prefix><hex>``; removed (whatever it then holds) on exit."""
    stage = parent / f"{prefix}{uuid.uuid4().hex[:12]}"
    try:
        stage.mkdir()  # unlike tempfile.mkdtemp, honours the umask: the store gets normal permissions
    except OSError as exc:
        raise StoreError(
            str(parent), stage.name, f"cannot create the staging folder: {os_reason(exc)}"
        ) from exc
    fd = _lock(str(stage))
    try:
        yield stage
    finally:
        if fd is not None:
            os.close(fd)  # a second flock of our own would conflict with this one
        try:
            _remove_unlocked(str(stage))  # after a swap this is the old store
        except OSError as exc:
            warnings.warn(
                f"could not remove the staging folder {stage}: {exc}; remove it by hand",
                RuntimeWarning,
                stacklevel=3,
            )


def scratch_folder(
    prefix: str, parent: str | os.PathLike[str] | None = None
) -> contextlib.AbstractContextManager[Path]:
    """A locked folder ``<prefix><hex>`` in ``parent`` (default: the system's temporary folder)
    for a writer's own temporary files; folders of that prefix left by killed writers there
    are removed first (a live writer's stays: it holds the lock)."""
    where = Path(tempfile.gettempdir() if parent is None else parent)
    where.mkdir(parents=True, exist_ok=True)
    remove_leftovers(where, lambda name: name.startswith(prefix))
    return staging(where, prefix)


def _remove_unlocked(path: str) -> bool:
    """Remove ``path`` unless a live writer holds its lock; True when removed (or gone)."""
    try:
        fd = _lock(path)
    except FileNotFoundError:
        return True
    if fd is None:
        return False
    try:
        remove_tree(path)
    finally:
        os.close(fd)
    return True


def _leftover_pattern(name: str) -> re.Pattern[str]:
    return re.compile(rf"\.{re.escape(name)}\.zv-(tmp|old)-[0-9a-f]{{8,12}}")


def _temp_prefix(description: str) -> str:
    return f"zv-stage-{hashlib.sha1(description.encode()).hexdigest()[:12]}-"


def _candidates(parent: Path, match: Callable[[str], object]) -> list[Path]:
    """Files and folders (not links) in ``parent``, sorted, whose name ``match`` answers
    truthy for (a predicate or a ``re.Pattern.fullmatch``); none without file locks."""
    if fcntl is None:  # without locks a live writer's folder cannot be told from a dead one's
        return []
    try:
        entries = list(os.scandir(parent))
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted(
        Path(e.path)
        for e in entries
        if match(e.name) and (e.is_dir(follow_symlinks=False) or e.is_file(follow_symlinks=False))
    )


def _is_dead(path: Path) -> bool:
    try:
        fd = _lock(str(path))
    except FileNotFoundError:
        return False
    if fd is None:
        return False
    os.close(fd)
    return True


def find_leftovers(store: str | os.PathLike[str]) -> list[Path]:
    """Staging folders and temporary files of killed writes of the local store ``store``
    (``.NAME.zv-tmp-*`` and ``.NAME.zv-old-*`` beside it, not locked by a live writer)."""
    path = Path(os.path.realpath(store))
    pattern = _leftover_pattern(path.name)
    return [p for p in _candidates(path.parent, pattern.fullmatch) if _is_dead(p)]


def remove_leftovers(parent: Path, match: Callable[[str], object]) -> None:
    for path in _candidates(parent, match):
        _remove_unlocked(str(path))


# -- what may be replaced --------------------------------------------------------------
def protected_reason(path: str | os.PathLike[str]) -> str | None:
    """Why ``path`` must never be replaced (root, home or current directory, or a folder
    holding one of them), or None."""
    real = os.path.realpath(path)
    if os.path.dirname(real) == real:
        return "a filesystem root"
    places = [("the home directory", os.path.expanduser("~"))]
    with contextlib.suppress(FileNotFoundError):
        places.insert(0, ("the current directory", os.getcwd()))
    for name, place in places:
        place = os.path.realpath(place)
        if real == place:
            return name
        if place.startswith(real.rstrip(os.sep) + os.sep):
            return f"a folder holding {name}"
    return None


def _is_local_zarr(path: Path) -> bool:
    if path.is_dir():
        return any(os.path.lexists(path / name) for name in ROOT_DOCS)
    if path.is_file() and zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as zf:
            names = set(zf.namelist())
        return any(name in names for name in ROOT_DOCS)
    return False


def check_local_target(path: Path, shown: str, overwrite: bool) -> None:
    """Refuse a local target that must not be written (see the module docstring)."""
    reason = protected_reason(path)
    if reason is not None:
        raise StoreExistsError(
            f"refusing to write a store at {shown!r}: it is {reason}, which is never replaced; "
            "nothing was changed. Give the path of a new folder (e.g. out.zarr) instead"
        )
    if not os.path.lexists(path):
        return
    if path.is_dir() and not path.is_symlink():
        with os.scandir(path) as entries:
            if not any(entries):
                return
    if path.is_file() and not path.is_symlink() and path.stat().st_size == 0:
        return
    if not overwrite:
        raise StoreExistsError(f"{shown!r} already exists; pass overwrite=True to replace it")
    if not _is_local_zarr(path):
        raise StoreExistsError(
            f"refusing to overwrite {shown!r}: it is not a Zarr store (no zarr.json at its root), so "
            "replacing it would delete other files; nothing was deleted. Choose another path, or remove it "
            "yourself first"
        )


def check_in_place_target(backend: Backend, overwrite: bool) -> None:
    if backend.is_empty():
        return
    if not overwrite:
        raise StoreExistsError(f"{backend.description} is not empty; pass overwrite=True to replace it")
    if not backend.supports_deletes:
        raise StoreExistsError(
            f"{backend.description} is not empty and cannot delete keys, so it cannot be overwritten "
            "in place; write to a new store (for zip files, pass the .zip path instead of a ZipStore)"
        )
    if all(raw is None for raw in backend.get_many(list(ROOT_DOCS))):
        raise StoreExistsError(
            f"refusing to overwrite {backend.description}: it is not empty and not a Zarr store "
            "(no zarr.json at its root); nothing was deleted. Choose another location, or empty it "
            "yourself first"
        )


# -- whole-store writes ----------------------------------------------------------------
def write_session(
    target: Any,
    *,
    overwrite: bool,
    storage_options: dict[str, Any] | None = None,
    expect: bytes | None | EllipsisType = ...,
) -> contextlib.AbstractContextManager[Backend]:
    """Yield a backend (a local staging folder) for writing a whole new store at ``target``;
    commit it on a clean exit. The caller writes the root ``zarr.json`` last.

    A local target's writer lock is held throughout (``zv_wait`` of ``storage_options``:
    seconds to wait for it). The commit happens only if the target's root is still
    ``expect`` (default: the root found when the session started; None: no store), else
    :class:`~zarr_vectors.errors.StoreConflictError`."""
    options = StorageOptions.parse(storage_options)
    path = local_path(target)
    if path is None:
        return _in_place_session(remote_backend(target, options, False), overwrite, expect)
    return _local_session(path, os.fspath(target), overwrite, options.wait, expect)


def check_target(target: Any, *, overwrite: bool, storage_options: dict[str, Any] | None = None) -> None:
    """The checks :func:`write_session` makes of ``target`` (exists without ``overwrite``, a
    protected folder, not a store), made up front by writers that finish much later."""
    path = local_path(target)
    if path is None:
        check_in_place_target(remote_backend(target, StorageOptions.parse(storage_options), False), overwrite)
        return
    if path.is_symlink():
        path = Path(os.path.realpath(path))
    check_local_target(path.absolute(), os.fspath(target), overwrite)


def local_root(path: Path) -> bytes | None:
    """The root ``zarr.json`` of the local store at ``path`` (a folder or a zip file), or None."""
    try:
        if path.is_dir():
            return (path / "zarr.json").read_bytes()
        if path.is_file() and zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as zf:
                return zf.read("zarr.json") if "zarr.json" in zf.namelist() else None
    except (FileNotFoundError, NotADirectoryError):
        return None
    return None


def _root_of(backend: Backend) -> bytes | None:
    """The store's root as stored now (past a dataset's consistency check)."""
    return backend.stored_root()


@contextlib.contextmanager
def _local_session(
    path: Path, shown: str, overwrite: bool, wait: float, expect: bytes | None | EllipsisType
) -> Iterator[Backend]:
    if path.is_symlink():  # write where the link points; the link stays
        path = Path(os.path.realpath(path))
    path = path.absolute()
    check_local_target(path, shown, overwrite)  # refuse before anything is created
    path.parent.mkdir(parents=True, exist_ok=True)
    with writer_lock(path, wait):
        check_local_target(path, shown, overwrite)  # again: another writer may have finished
        opened = local_root(path) if expect is ... else expect
        check_root(shown, opened, local_root(path))
        remove_leftovers(path.parent, _leftover_pattern(path.name).fullmatch)
        with staging(path.parent, f".{path.name}.zv-tmp-") as stage:
            yield _stage_backend(stage, shown)
            check_root(shown, opened, local_root(path))
            with _committing(shown):
                if path.suffix.lower() == ".zip":
                    _zip_into(stage, path)
                else:
                    swap_in(stage, path)


def _stage_backend(stage: Path, target: str) -> LocalBackend:
    """The staging folder ``stage`` of a write to ``target``, named after both in errors."""
    backend = LocalBackend(stage)
    backend.description = f"{target} (staged in {stage})"
    return backend


@contextlib.contextmanager
def _committing(target: str) -> Iterator[None]:
    """An OS error of the block (a full disk, a failed rename) as a :class:`StoreError` of ``target``."""
    try:
        yield
    except OSError as exc:
        if isinstance(exc, ZarrVectorsError):
            raise
        raise StoreError(
            target, "", f"the write could not be committed ({os_reason(exc)}); the old store is kept"
        ) from exc


@contextlib.contextmanager
def _in_place_session(
    backend: Backend, overwrite: bool, expect: bytes | None | EllipsisType
) -> Iterator[Backend]:
    check_in_place_target(backend, overwrite)
    opened = _root_of(backend) if expect is ... else expect
    with in_place_stage(backend) as stage:
        yield stage
        commit_in_place(backend, stage, first_root=placeholder_root(), expect=opened)


class MemoryStage:
    """A staging area in memory, for targets that are in memory themselves."""

    description = "staging area (memory)"
    read_only = False
    supports_deletes = True
    transactional = False
    local_dir = None
    in_memory = True

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}

    def stored_root(self) -> bytes | None:
        return self.get_many(["zarr.json"])[0]

    def opened_root(self) -> bytes | None | EllipsisType:
        return ...

    def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        return [self.data.get(k) for k in keys]

    def get_ranges(self, ranges: Sequence[ByteRange]) -> list[bytes | None]:
        return [cut_range(self.data.get(k), start, n) for k, start, n in ranges]

    def get_many_into(self, keys: Sequence[str], scratch: Arena) -> list[bytes | memoryview | None]:
        return list(self.get_many(keys))  # already in memory

    def set_many(self, items: Sequence[tuple[str, bytes]]) -> None:
        self.data.update((k, bytes(v)) for k, v in items)

    def list_dir(self, prefix: str) -> list[str]:
        head = under(prefix)
        return sorted({k[len(head) :].split("/", 1)[0] for k in self.data if k.startswith(head)})

    def list_keys(self, prefix: str = "") -> list[str]:
        head = under(prefix)
        return [k for k in self.data if k.startswith(head)]

    def key_sizes(self, prefix: str = "") -> dict[str, int]:
        head = under(prefix)
        return {k: len(v) for k, v in self.data.items() if k.startswith(head)}

    def delete_many(self, keys: Sequence[str]) -> None:
        for key in keys:
            self.data.pop(key, None)

    def delete_prefix(self, prefix: str) -> None:
        self.delete_many(self.list_keys(prefix))

    def is_empty(self) -> bool:
        return not self.data

    def refresh(self) -> None:
        return None

    def close(self) -> None:
        return None


@contextlib.contextmanager
def in_place_stage(backend: Backend) -> Iterator[Backend]:
    """Where a store for ``backend`` is built: memory for a memory target, else a locked
    folder in the temporary directory (leftovers of killed writes to it are removed)."""
    if backend.in_memory:
        yield MemoryStage()
        return
    temp = Path(tempfile.gettempdir())
    prefix = _temp_prefix(backend.description)
    remove_leftovers(temp, lambda name: name.startswith(prefix))
    with staging(temp, prefix) as stage:
        yield _stage_backend(stage, backend.description)


def placeholder_root() -> bytes:
    """The root written while a store is being replaced in place."""
    note = "a write is replacing this store; if this stays, the write was interrupted"
    return dump_json(zarr_json.group_doc({INCOMPLETE_KEY: note, GENERATION_KEY: new_generation()}))


def swap_in(stage: Path, path: Path) -> None:
    """Put the complete store ``stage`` at ``path``; what was at ``path`` ends up at ``stage``."""
    if not os.path.lexists(path):
        os.rename(stage, path)
        return
    if exchange(stage, path):
        return
    old = path.with_name(f".{path.name}.zv-old-{uuid.uuid4().hex[:12]}")
    os.replace(path, old)  # no atomic exchange here: a crash between the renames leaves it in .zv-old-
    try:
        os.replace(stage, path)
    except OSError:
        os.replace(old, path)
        raise
    os.replace(old, stage)


def _zip_into(stage: Path, path: Path) -> None:
    tmp = path.with_name(f".{path.name}.zv-tmp-{uuid.uuid4().hex[:12]}")
    fd = None
    try:
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_STORED) as zf:
            fd = _lock(str(tmp))
            for file in sorted(stage.rglob("*")):
                if file.is_file():
                    zf.write(file, file.relative_to(stage).as_posix())
        os.replace(tmp, path)
    finally:
        if fd is not None:
            os.close(fd)
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def commit_in_place(
    backend: Backend,
    stage: Backend,
    *,
    first_root: bytes,
    keep: Callable[[str], bool] = lambda key: False,
    expect: bytes | None | EllipsisType = ...,
) -> None:
    """Make the store hold the staged keys (plus the old keys ``keep`` accepts).

    Order: ``first_root`` as the root (where the store can delete), stale keys deleted,
    staged keys written, the staged root last. In an Icechunk session (``backend.transactional``)
    readers see nothing before the commit, so metadata goes first there. Unless ``expect`` is
    ``...``, the store's root must still be ``expect`` before anything is written, else
    :class:`~zarr_vectors.errors.StoreConflictError`.
    """
    if expect is not ...:
        check_root(backend.description, expect, _root_of(backend))
    staged = stage.key_sizes()
    root = stage.get_many(["zarr.json"])[0]
    assert root is not None, "a staged store has a root zarr.json"
    if backend.transactional:
        # Nothing is visible before the session's commit, and Icechunk takes a chunk only
        # once its array's zarr.json is there: stale keys out, then metadata, parents first.
        if backend.supports_deletes:
            stale = [k for k in backend.list_keys() if k not in staged and not keep(k)]
            for keys in deletion_batches(stale):
                backend.delete_many(keys)
        docs = [k for k in staged if k.endswith("zarr.json")]
        for depth in sorted({k.count("/") for k in docs}):
            _upload(backend, stage, [k for k in docs if k.count("/") == depth])
        staged = {k: n for k, n in staged.items() if not k.endswith("zarr.json")}
    elif backend.supports_deletes:
        stale = [k for k in backend.list_keys() if k not in staged and k != "zarr.json" and not keep(k)]
        backend.set_many([("zarr.json", first_root)])
        backend.delete_many(stale)
    batch: list[str] = []
    size = 0
    for key, n in staged.items():
        if key == "zarr.json":
            continue
        batch.append(key)
        size += n
        if size >= UPLOAD_BYTES or len(batch) >= 2048:
            _upload(backend, stage, batch)
            batch, size = [], 0
    _upload(backend, stage, batch)
    backend.set_many([("zarr.json", root)])


def deletion_batches(keys: Sequence[str]) -> list[list[str]]:
    """``keys`` in batches Icechunk can delete one after the other (each batch's keys may be
    deleted concurrently): the chunk keys, then the ``zarr.json`` documents one depth at a time,
    deepest first. Icechunk drops a whole node with its document and then refuses a delete of
    anything under it."""
    docs: dict[int, list[str]] = {}
    chunks = []
    for key in keys:
        if key.rsplit("/", 1)[-1] == "zarr.json":
            docs.setdefault(key.count("/"), []).append(key)
        else:
            chunks.append(key)
    return [b for b in [chunks, *(docs[d] for d in sorted(docs, reverse=True))] if b]


def _upload(backend: Backend, stage: Backend, keys: Sequence[str]) -> None:
    values = stage.get_many(keys)
    backend.set_many([(k, v) for k, v in zip(keys, values) if v is not None])


# -- rebuilding part of a store (pyramid levels) ---------------------------------------
class Overlay:
    """Reads and writes of a rebuild: keys written so far (``top``, a staging area)
    shadow the store's (``base``); the base keys ``hidden`` accepts, and those deleted
    through the overlay, read as absent (:meth:`hides`). Nothing reaches ``base``
    until the rebuild commits. ``hidden`` names a hidden folder as well as its keys
    (``list_dir`` asks it of folder names, so that listing stays one level deep)."""

    def __init__(self, base: Backend, top: Backend, hidden: Callable[[str], bool]) -> None:
        self.base, self.top, self.hidden = base, top, hidden
        self.description = base.description
        self.deleted: set[str] = set()
        self.deleted_prefixes: list[str] = []

    read_only = False
    supports_deletes = True
    local_dir = None

    @property
    def transactional(self) -> bool:
        return self.base.transactional

    def stored_root(self) -> bytes | None:
        return self.base.stored_root()

    def opened_root(self) -> bytes | None | EllipsisType:
        return self.base.opened_root()

    @property
    def in_memory(self) -> bool:
        return self.top.in_memory

    def hides(self, key: str) -> bool:
        """Whether the base's ``key`` is gone from the rebuilt store."""
        return self.hidden(key) or key in self.deleted or f"{key}/".startswith(tuple(self.deleted_prefixes))

    def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        out = self.top.get_many(keys)
        ask = [i for i, (k, v) in enumerate(zip(keys, out)) if v is None and not self.hides(k)]
        if ask:
            for i, value in zip(ask, self.base.get_many([keys[i] for i in ask])):
                out[i] = value
        return out

    def get_ranges(self, ranges: Sequence[ByteRange]) -> list[bytes | None]:
        out = self.top.get_ranges(ranges)
        ask = [i for i, (r, v) in enumerate(zip(ranges, out)) if v is None and not self.hides(r[0])]
        if ask:
            for i, value in zip(ask, self.base.get_ranges([ranges[i] for i in ask])):
                out[i] = value
        return out

    def get_many_into(self, keys: Sequence[str], scratch: Arena) -> list[bytes | memoryview | None]:
        return list(self.get_many(keys))

    def set_many(self, items: Sequence[tuple[str, bytes]]) -> None:
        self.top.set_many(items)

    def list_dir(self, prefix: str) -> list[str]:
        head = under(prefix)
        base = [n for n in self.base.list_dir(prefix) if not self.hides(head + n)]
        return sorted(set(self.top.list_dir(prefix)) | set(base))

    def list_keys(self, prefix: str = "") -> list[str]:
        return list(self.key_sizes(prefix))

    def key_sizes(self, prefix: str = "") -> dict[str, int]:
        base = {k: n for k, n in self.base.key_sizes(prefix).items() if not self.hides(k)}
        return base | self.top.key_sizes(prefix)

    def delete_many(self, keys: Sequence[str]) -> None:
        self.top.delete_many(keys)
        self.deleted.update(keys)

    def delete_prefix(self, prefix: str) -> None:
        self.top.delete_prefix(prefix)
        self.deleted_prefixes.append(under(prefix))

    def is_empty(self) -> bool:
        return not self.list_keys()

    def refresh(self) -> None:
        return None

    def close(self) -> None:
        return None


@contextlib.contextmanager
def rebuild_session(
    backend: Backend, *, hidden: Callable[[str], bool], first: dict[str, bytes], wait: float = 0.0
) -> Iterator[Overlay]:
    """Stage a rebuild of part of an existing store; commit it on a clean exit.

    ``first`` are documents that replace the store's at once (the root without the
    levels being rebuilt, with a new generation); ``hidden`` names the keys being
    replaced. A local store is rebuilt into a sibling folder (the kept files hard-linked,
    copied where links are impossible) and exchanged with it, under its writer lock
    (``wait``: seconds to wait for it); another store gets the root of ``first``, loses
    the hidden keys, gains the staged ones, then the new root. Afterwards ``backend`` is
    refreshed: it reads on from the new store.

    The store the rebuild starts from is the root a dataset's ``backend`` opened (a
    :class:`~zarr_vectors.storage.wrappers.ConsistentBackend`), else the root found at the
    start; when the store's root is another one at the start or at the commit,
    :class:`~zarr_vectors.errors.StoreConflictError` is raised with nothing applied.
    """
    if backend.read_only:
        raise ReadOnlyError(f"{backend.description} is opened read-only")
    recorded = backend.opened_root()
    opened = _root_of(backend) if recorded is ... else recorded
    try:
        local = backend.local_dir
        if local is not None:
            path = Path(os.path.realpath(local))
            with writer_lock(path, wait):
                check_root(backend.description, opened, local_root(path))
                remove_leftovers(path.parent, _leftover_pattern(path.name).fullmatch)
                with staging(path.parent, f".{path.name}.zv-tmp-") as stage:
                    top = _stage_backend(stage, backend.description)
                    top.set_many(list(first.items()))
                    overlay = Overlay(backend, top, hidden)
                    yield overlay
                    with _committing(backend.description):
                        _link_kept(path, stage, overlay.hides)
                    check_root(backend.description, opened, local_root(path))
                    with _committing(backend.description):
                        swap_in(stage, path)
                backend.refresh()  # under the lock: the root adopted is this write's
            return
        if not backend.supports_deletes:
            raise ReadOnlyError(
                f"{backend.description} cannot delete keys, so its coarse levels cannot be rebuilt in place; "
                "write the store again (or copy level 0 to a new store) and build the pyramid there"
            )
        check_root(backend.description, opened, _root_of(backend))
        with in_place_stage(backend) as stage:
            stage.set_many(list(first.items()))
            overlay = Overlay(backend, stage, hidden)
            yield overlay
            commit_in_place(
                backend,
                stage,
                first_root=first["zarr.json"],
                keep=lambda key: not overlay.hides(key),
                expect=opened,
            )
        backend.refresh()
    except StoreChangedError as exc:  # a read of the base found another writer's root
        raise conflict(backend.description) from exc


#: errno of ``os.link`` where the filesystem has no hard links (the file is copied instead).
_NO_LINKS = (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK, errno.ENOSYS)


def _link(src: str, dst: str) -> None:
    try:
        os.link(src, dst, follow_symlinks=False)
    except OSError as exc:
        if exc.errno not in _NO_LINKS:
            raise
        if os.path.islink(src):
            os.symlink(os.readlink(src), dst)
        else:
            shutil.copy2(src, dst, follow_symlinks=False)


def _link_kept(path: Path, stage: Path, hidden: Callable[[str], bool]) -> None:
    """Give ``stage`` every entry of the store at ``path`` that is neither hidden nor staged
    (hard links; symbolic links are linked as links, never followed).

    One ``scandir`` per folder and one ``mkdir`` or ``link`` per entry: an entry already
    staged is found by the ``EEXIST`` of that call, not by a separate look-up."""
    pending = [(os.fspath(path), os.fspath(stage), "")]
    while pending:
        src_dir, dst_dir, head = pending.pop()
        with os.scandir(src_dir) as entries:
            for entry in entries:
                key = head + entry.name
                if ".zv-part-" in entry.name or hidden(key):
                    continue
                dst = f"{dst_dir}/{entry.name}"
                if entry.is_dir(follow_symlinks=False):
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(dst)
                    pending.append((entry.path, dst, key + "/"))
                else:
                    with contextlib.suppress(FileExistsError):
                        _link(entry.path, dst)
