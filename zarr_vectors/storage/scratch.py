"""Reusable read buffers: cells read and decompressed into memory that stays mapped.

A box query reads its cells, decodes them and copies the rows it keeps into the result.
Reading each cell into a fresh ``bytes`` costs a page fault per 4 KiB whenever the C
allocator has returned that memory to the system since the last query (glibc does so
when a large block is freed), and on a virtual machine a fault costs microseconds: for a
box of a few MB that is more than reading the files. An :class:`Arena` hands out slices
of buffers kept from one query to the next, so after the first query the same pages are
written again instead of faulted in.

Invariants: slices handed out by an arena are valid until the arena is released; nothing
may keep a view of one afterwards (the readers copy every kept row into the result).
:func:`arena` lends arenas from a small pool; the idle arenas of the pool hold at most
:data:`MAX_RETAINED` bytes together (an arena that would pass it is dropped on release).
The default is a thirty-second of the machine's memory, between 64 MiB and 1 GiB; the
environment variable ``ZV_SCRATCH_RETAIN_MB`` sets it (0 keeps nothing).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

import numpy as np

from zarr_vectors.errors import InputError

__all__ = ["MAX_RETAINED", "Arena", "arena", "retained_limit"]

#: Environment variable: megabytes (MiB) idle arenas may keep between queries.
RETAIN_ENV = "ZV_SCRATCH_RETAIN_MB"


def retained_limit(environ: Mapping[str, str] = os.environ) -> int:
    """Bytes the idle arenas may keep: ``ZV_SCRATCH_RETAIN_MB`` MiB when set, else a
    thirty-second of physical memory clamped to [64 MiB, 1 GiB] (64 MiB where the
    memory size is unknown). A query whose cells need more than this (a 1 % box of a
    100 M-point cloud reads about 170 MB) faults its buffers in afresh each time, which
    on a virtual machine costs as much as decompressing them."""
    text = environ.get(RETAIN_ENV)
    if text is not None and text.strip():
        try:
            mb = int(text)
        except ValueError:
            mb = -1
        if mb < 0:
            raise InputError(f"{RETAIN_ENV} must be a whole number of MiB, 0 or more; got {text!r}")
        return mb << 20
    try:
        memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, OSError, ValueError):  # no sysconf (Windows) or no such name
        memory = 0
    return min(max(64 << 20, memory // 32), 1 << 30)


#: Bytes the idle arenas of the pool may keep together for the next queries.
MAX_RETAINED = retained_limit()
#: Idle arenas kept (one per query running at the same time is enough).
POOL_SIZE = 2
#: Smallest block an arena allocates.
MIN_BLOCK = 1 << 20

_pool: list[Arena] = []
_pool_lock = threading.Lock()


class Arena:
    """A bump allocator over blocks of bytes; :meth:`take` is thread-safe.

    Blocks are never moved or resized while in use, so every slice stays valid until
    :meth:`reset`. After a use that needed several blocks, :meth:`reset` replaces them by
    one block of their total size, so a repeated query fits in one block next time.
    """

    def __init__(self) -> None:
        self._blocks: list[np.ndarray] = []
        self._block = 0  # index of the block being filled
        self._used = 0  # bytes taken from that block
        self._lock = threading.Lock()

    @property
    def capacity(self) -> int:
        return sum(len(b) for b in self._blocks)

    def take(self, n: int) -> memoryview:
        """``n`` writable bytes (8-byte aligned), valid until :meth:`reset`."""
        size = (n + 7) & ~7
        with self._lock:
            while self._block < len(self._blocks):
                block = self._blocks[self._block]
                if self._used + size <= len(block):
                    start = self._used
                    self._used += size
                    return block.data[start : start + n]
                self._block += 1
                self._used = 0
            block = np.empty(max(size, MIN_BLOCK, self.capacity), np.uint8)
            self._blocks.append(block)
            self._used = size
            return block.data[:n]

    def reset(self) -> None:
        """Make every byte available again (slices handed out before must no longer be used)."""
        if len(self._blocks) > 1:
            total = self.capacity
            self._blocks = [] if total > MAX_RETAINED else [np.empty(total, np.uint8)]
        self._block = 0
        self._used = 0


@contextmanager
def arena() -> Iterator[Arena]:
    """An arena from the pool for the duration of the block, returned reset afterwards. After
    an exception it is dropped instead: a thread of the failed read may still be writing into
    it (its slices keep the memory alive until they are gone)."""
    with _pool_lock:
        lent = _pool.pop() if _pool else Arena()
    yield lent
    lent.reset()
    with _pool_lock:
        if len(_pool) < POOL_SIZE and lent.capacity + sum(a.capacity for a in _pool) <= MAX_RETAINED:
            _pool.append(lent)
