"""One writer at a time per local store, and a generation check before every commit.

**The writer lock.** Every write to a local store (a whole new store, an overwrite, an
append, a pyramid build, a reshard) holds an exclusive ``flock`` on the lock file
``.NAME.zv-lock`` *beside* the store (next to its ``.NAME.zv-tmp-*`` staging folders),
from before it checks the target until its commit is done. The file is beside the store,
not in it, because a commit exchanges the whole store directory with its staging folder:
a lock file inside would move to the old directory with the exchange, and a writer
waiting on it would then hold a lock nobody else asks for. The holder removes the file
before it lets go; a writer that acquires a lock file another one has just removed (its
inode no longer the one at the path) opens the path again, so two writers never hold two
different files. A file left by a killed writer is not locked and is taken over.

A writer that finds the lock held polls for up to ``wait`` seconds (default 0: fail at
once) and then raises :class:`~zarr_vectors.errors.StoreConflictError` naming the store.
Without ``fcntl`` (Windows) there is no lock, and the generation check below is all.

**The generation check.** Every write notes the root ``zarr.json`` of the store it
started from (a dataset: the root it opened, or last committed itself); right before the
store's root is replaced (the exchange, the placeholder root of an in-place commit) the
root is read again and, if it differs, :class:`StoreConflictError` is raised with nothing
applied. Every write gives the root a new ``zarr_vectors_generation``, so a differing root
means another writer committed. On local disk the lock makes check and commit one step; on
object stores (no lock) a write committed between the check and the placeholder root can
still interleave.
"""

from __future__ import annotations

import contextlib
import functools
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import ParamSpec, TypeVar

from zarr_vectors.errors import InputError, StoreChangedError, StoreConflictError, StoreError

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no writer lock, the generation check only
    fcntl = None  # type: ignore[assignment]  # no module on Windows; checked for None

__all__ = ["LOCK_SUFFIX", "check_root", "check_wait", "conflict", "lock_path", "writer_lock", "writing"]

P = ParamSpec("P")
R = TypeVar("R")

#: Suffix of the lock file beside a store: ``.NAME.zv-lock``.
LOCK_SUFFIX = ".zv-lock"
#: Seconds between two tries of a held lock.
POLL = 0.02
_FLAGS = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def lock_path(store: Path) -> Path:
    """The lock file of the local store ``store`` (its real path): ``.NAME.zv-lock`` beside it."""
    return store.with_name(f".{store.name}{LOCK_SUFFIX}")


def check_wait(wait: float) -> float:
    """``wait`` as seconds (a number >= 0), else :class:`~zarr_vectors.errors.InputError`."""
    if isinstance(wait, bool) or not isinstance(wait, (int, float)) or not wait >= 0:
        raise InputError(f"wait must be a number of seconds >= 0, got {wait!r}")
    return float(wait)


def _held_elsewhere(store: Path, wait: float) -> StoreConflictError:
    return StoreConflictError(
        f"another writer is writing to {store} (it holds {lock_path(store).name} beside the store), "
        f"and it did not finish within wait={wait:g} s; nothing was applied. Run this write again "
        "once that one is done, or pass a longer wait"
    )


def _open_locked(lock: Path, store: Path, deadline: float, wait: float) -> int:
    """An fd of ``lock`` holding its exclusive ``flock`` (the file at the path, not a removed one)."""
    while True:
        try:
            fd = os.open(lock, _FLAGS, 0o644)
        except OSError as exc:
            raise StoreError(str(store), lock.name, f"cannot open the writer lock file ({exc})") from exc
        locked = False
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise _held_elsewhere(store, wait) from None
                    time.sleep(POLL)
            try:
                same = os.path.samestat(os.fstat(fd), os.stat(lock, follow_symlinks=False))
            except FileNotFoundError:
                same = False
            locked = True
        finally:
            if not locked:  # failed or interrupted: the descriptor is not handed out
                os.close(fd)
        if same:
            return fd
        os.close(fd)  # the holder removed this file as it let go: take the one at the path now


@contextlib.contextmanager
def writer_lock(store: Path, wait: float = 0.0) -> Iterator[None]:
    """Hold the writer lock of the local store at ``store`` (a real path) for the block.

    Raises :class:`StoreConflictError` when another writer holds it for more than ``wait``
    seconds. The lock file is removed while still locked, then released.
    """
    if fcntl is None:  # pragma: no cover - Windows
        yield
        return
    lock = lock_path(store)
    fd = _open_locked(lock, store, time.monotonic() + wait, wait)
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(lock)
        os.close(fd)


def conflict(store: str) -> StoreConflictError:
    """The error of a write whose store another writer changed since it started from it."""
    return StoreConflictError(
        f"{store} was changed by another writer since this write started from it (its root "
        "zarr.json, and so its zarr_vectors_generation, differ); nothing was applied. Open the "
        "store again and repeat the write"
    )


def check_root(store: str, opened: bytes | None, now: bytes | None) -> None:
    """Raise :class:`StoreConflictError` unless the root ``now`` is the root ``opened``."""
    if now != opened:
        raise conflict(store)


def writing(function: Callable[P, R]) -> Callable[P, R]:
    """``function`` (a write to an opened store) with a
    :class:`~zarr_vectors.errors.StoreChangedError` of its reads (another writer replaced the
    store it started from) raised as :class:`StoreConflictError`: nothing was applied."""

    @functools.wraps(function)
    def write(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return function(*args, **kwargs)
        except StoreChangedError as exc:
            raise conflict(exc.store) from exc

    return write
