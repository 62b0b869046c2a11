"""Reading sharded arrays through any backend: cell keys in, inner chunks out.

:class:`ShardReader` wraps a backend so that the readers above it never see shards. It
learns which arrays are sharded from the ``zarr.json`` documents read through it (every
reader reads an array's document before its cells) and answers a batch of cell keys of such
an array (``0/vertices/c/1/2/3``, inner chunk coordinates) with the encoded inner chunks,
exactly the bytes an unsharded array would hold at those keys. One batch costs at most two
waves of concurrent requests:

1. every shard index not yet known, one request per shard (a suffix range for
   ``index_location: "end"``, a prefix range for ``"start"``), together with the keys of
   unsharded arrays in the batch; indexes are cached per open store (a bounded dict), so a
   shard's index is fetched at most once while it stays cached (``MAX_INDEX_BYTES``);
2. the byte ranges of the wanted inner chunks, ranges of one shard that lie at most
   ``gap`` bytes apart coalesced into one request (:func:`~zarr_vectors.format.shards.coalesce`).

Absent shards and empty index entries read as absent cells (None), as absent keys do.
Backends without ranged reads are served by whole-object reads. Writes and deletes pass
through and forget the indexes (and shard layouts) of the keys they touch.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from contextlib import suppress
from typing import Any, NoReturn

import numpy as np

from zarr_vectors.errors import CorruptShardError, FormatError
from zarr_vectors.format.shards import EMPTY, ShardLayout, decode_index, parse_sharding
from zarr_vectors.format.zarr_json import load_json
from zarr_vectors.storage.protocol import Backend, ByteRange, cut_range
from zarr_vectors.storage.scratch import Arena
from zarr_vectors.storage.wrappers import Wrapping

__all__ = ["ShardReader", "GAP_LOCAL", "GAP_REMOTE", "MAX_INDEX_BYTES"]

#: Bytes between two wanted ranges of one shard below which they are read as one request.
GAP_REMOTE = 1 << 20
#: The same on local disk, where a request costs little more than its bytes.
GAP_LOCAL = 64 << 10
#: Bytes of shard indexes kept per open store (least recently used dropped first).
MAX_INDEX_BYTES = 64 << 20

Index = tuple[np.ndarray, np.ndarray]


class ShardReader(Wrapping):
    """A backend that reads the cells of sharded arrays out of their shards (see the module
    docstring); every other call goes to ``inner`` unchanged. Implements the Backend protocol."""

    def __init__(self, inner: Backend, gap: int | None = None, *, lenient: bool = False) -> None:
        self.inner = inner
        #: Whether a damaged shard index reads as an absent shard instead of raising
        #: CorruptShardError (the validator, which reports the damage once, by itself).
        self.lenient = lenient
        self.description = inner.description
        self.gap = (GAP_LOCAL if inner.local_dir is not None else GAP_REMOTE) if gap is None else gap
        self.layouts: dict[str, ShardLayout] = {}
        self._indexes: OrderedDict[str, Index | None] = OrderedDict()
        self._index_bytes = 0
        #: Where each cell read before lies: cell key -> (shard key, offset, size), offset -1
        #: for an absent cell; only for shards whose index is cached (dropped with it).
        self._cells: dict[str, tuple[str, int, int]] = {}
        self._cells_of: dict[str, list[str]] = {}  # shard key -> its cell keys in ``_cells``
        #: Requests of each kind made so far (index fetches, coalesced range reads).
        self.index_requests = 0
        self.range_requests = 0

    # -- what is sharded ---------------------------------------------------------------
    def learn(self, key: str, raw: bytes | None) -> None:
        """Note the shard layout of the array whose ``zarr.json`` is ``key`` (or that it has none).
        A document that cannot be parsed is left to the reader, which reports it."""
        if not (key == "zarr.json" or key.endswith("/zarr.json")):
            return
        path = key[: -len("zarr.json")].rstrip("/")
        if raw is None or b"sharding_indexed" not in raw:
            if self.layouts.pop(path, None) is not None:
                self._forget(f"{path}/c/")
            return
        try:
            doc = load_json(raw, path)
            layout = parse_sharding(path, doc) if isinstance(doc, dict) else None
        except FormatError:
            layout = None
        if layout is None:
            self.layouts.pop(path, None)
        elif self.layouts.get(path) != layout:
            self.layouts[path] = layout
            self._forget(f"{path}/c/")

    def sharded(self, key: str) -> tuple[str, ShardLayout, tuple[int, ...]] | None:
        """``(array path, layout, inner chunk coordinates)`` of a chunk key of a sharded array."""
        at = key.find("/c/")
        while at >= 0:
            layout = self.layouts.get(key[:at])
            if layout is not None:
                parts = key[at + 3 :].split("/")
                if len(parts) == len(layout.shard_shape) and all(p.isdigit() for p in parts):
                    return key[:at], layout, tuple(int(p) for p in parts)
                return None
            at = key.find("/c/", at + 1)
        return None

    # -- reading -----------------------------------------------------------------------
    def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        if not self.layouts or all(k.endswith("zarr.json") for k in keys):  # no cell asked
            out = self.inner.get_many(keys)
            for key, raw in zip(keys, out):
                self.learn(key, raw)
            return out
        return self.get_ranges([(k, 0, None) for k in keys])

    def get_many_into(self, keys: Sequence[str], scratch: Arena) -> list[bytes | memoryview | None]:
        """:meth:`get_many`; into ``scratch`` when no array is sharded (whole files), else the
        cells of shards as views of the runs read (no copy per cell)."""
        if self.layouts:
            return self._get_ranges([(k, 0, None) for k in keys], copy=False)
        out = self.inner.get_many_into(keys, scratch)
        for key, raw in zip(keys, out):
            if key == "zarr.json" or key.endswith("/zarr.json"):
                self.learn(key, None if raw is None else bytes(raw))
        return out

    def get_ranges(self, ranges: Sequence[ByteRange]) -> list[bytes | None]:
        return self._get_ranges(ranges, copy=True)

    def _get_ranges(self, ranges: Sequence[ByteRange], copy: bool) -> list[Any]:
        """:meth:`get_ranges`; ``copy=False`` leaves each cell of a shard a view of its run.

        A batch of whole cells each read before (while its shard's index stays cached) is
        served from their remembered locations (:meth:`_get_known`). Otherwise the cells are
        planned together, vectorised: keys split per array, shards located and grouped,
        indexes gathered from the cache (missing ones fetched in the same wave as the
        unsharded keys), then one coalesced request per run of wanted cells."""
        known = self._cells
        located = [known.get(key) if start == 0 and length is None else None for key, start, length in ranges]
        if ranges and None not in located:
            return self._get_known(located, copy)  # type: ignore[arg-type]  # no None in it
        out: list[Any] = [None] * len(ranges)
        plain, arrays = self._split_batch(ranges)
        shard_keys: list[str] = []  # every shard of the batch, numbered in this order
        owner: list[tuple[str, ShardLayout]] = []
        # per array: output slots, shard number and inner position of each cell; first shard number, shards
        planned: list[tuple[np.ndarray, np.ndarray, np.ndarray, int, int]] = []
        for path, (layout, slots, coords) in arrays.items():
            shard, inner = layout.locate(coords)
            span = shard.max(axis=0) + 1
            lin = np.ravel_multi_index(tuple(shard.T), tuple(span.tolist()))
            ulin, first, inv = np.unique(lin, return_index=True, return_inverse=True)
            planned.append(
                (
                    np.asarray(slots, np.int64),
                    inv.reshape(-1) + len(shard_keys),
                    inner,
                    len(shard_keys),
                    len(ulin),
                )
            )
            for row in shard[first].tolist():
                shard_keys.append(f"{path}/c/" + "/".join(map(str, row)))
                owner.append((path, layout))
        # This batch's indexes are held here: the cache may drop some before the ranges are read.
        indexes: list[Index | None] = [None] * len(shard_keys)
        missing: list[int] = []
        cache = self._indexes
        for g, skey in enumerate(shard_keys):
            if skey in cache:
                indexes[g] = cache[skey]
                cache.move_to_end(skey)
            else:
                missing.append(g)
        asks = [ranges[i] for i in plain] + [self._index_range(owner[g][1], shard_keys[g]) for g in missing]
        got = self._fetch(asks)
        for i, raw in zip(plain, got):
            out[i] = raw
            self.learn(ranges[i][0], raw)
        self.index_requests += len(missing)
        for g, raw in zip(missing, got[len(plain) :]):
            path, layout = owner[g]
            indexes[g] = None if raw is None else self._parse_index(raw, layout, path, shard_keys[g])
            self._remember(shard_keys[g], indexes[g])
        if planned:
            self._read_cells(planned, shard_keys, owner, indexes, out, copy, ranges)
        return out

    def _get_known(self, located: list[tuple[str, int, int]], copy: bool) -> list[Any]:
        """Cells at remembered ``(shard key, offset, size)`` locations (offset -1: absent), one
        request per run of cells of one shard at most ``gap`` bytes apart, as
        :meth:`_read_cells` reads them."""
        out: list[Any] = [None] * len(located)
        order = sorted((loc for loc in enumerate(located) if loc[1][1] >= 0), key=lambda x: x[1][:2])
        if not order:
            return out
        runs: list[tuple[str, int, int]] = []
        members: list[list[tuple[int, int, int]]] = []  # per run: (slot, offset in run, size)
        run_key, run_lo, run_hi = "", 0, -1
        for slot, (skey, start, size) in order:
            if skey != run_key or start > run_hi + self.gap:
                if members:
                    runs.append((run_key, run_lo, run_hi - run_lo))
                run_key, run_lo, run_hi = skey, start, start + size
                members.append([])
            run_hi = max(run_hi, start + size)
            members[-1].append((slot, start - run_lo, size))
        runs.append((run_key, run_lo, run_hi - run_lo))
        cache = self._indexes
        for skey in {run[0] for run in runs}:
            with suppress(KeyError):  # another thread may have dropped it (and its cells) meanwhile
                cache.move_to_end(skey)
        self.range_requests += len(runs)
        raws = self._fetch(list(runs))
        for (skey, _, n), raw, cells in zip(runs, raws, members):
            if raw is None or len(raw) != n:
                self._short_shard(skey, raw, n)
            view = memoryview(raw)
            for slot, a, size in cells:
                out[slot] = raw if size == n else bytes(view[a : a + size]) if copy else view[a : a + size]
        return out

    def _short_shard(self, skey: str, raw: bytes | None, n: int) -> NoReturn:
        """Raise CorruptShardError for a run of shard ``skey`` that read ``raw``, short of ``n``
        bytes (its index, now doubtful, is dropped)."""
        path = skey[: skey.rfind("/c/")]
        self._drop(skey)
        raise CorruptShardError(
            path,
            skey[len(path) + 1 :],
            f"the shard is shorter than its index says (or was removed while being read): "
            f"{0 if raw is None else len(raw)} of {n} bytes at one range",
        )

    def _split_batch(
        self, ranges: Sequence[ByteRange]
    ) -> tuple[list[int], dict[str, tuple[ShardLayout, list[int], np.ndarray]]]:
        """The positions of ``ranges`` read as they are, and per sharded array the positions and
        inner chunk coordinates (K, R) of the whole cells asked of it. A cell key is
        ``<array>/c/<i>/<j>/...``: its array is what precedes the last ``/c/`` (coordinates
        are digits), so one split per key finds it; the coordinates of an array are parsed
        together."""
        plain: list[int] = []
        found: dict[str, tuple[ShardLayout, list[int], list[str]]] = {}
        layouts = self.layouts
        for i, (key, start, length) in enumerate(ranges):
            if start == 0 and length is None:
                head, sep, tail = key.rpartition("/c/")
                layout = layouts.get(head) if sep else None
                if layout is not None:
                    entry = found.get(head)
                    if entry is None:
                        entry = found[head] = (layout, [], [])
                    entry[1].append(i)
                    entry[2].append(tail)
                    continue
            plain.append(i)
        arrays: dict[str, tuple[ShardLayout, list[int], np.ndarray]] = {}
        for path, (layout, slots, tails) in found.items():
            rank = len(layout.shard_shape)
            joined = "/".join(tails)
            parts = joined.split("/")
            if len(parts) != rank * len(tails) or not joined.replace("/", "").isdigit() or "" in parts:
                # Some key is not a cell of this array's grid: those are read as they are.
                good = [
                    t.count("/") == rank - 1 and t.replace("/", "").isdigit() and "" not in t.split("/")
                    for t in tails
                ]
                plain.extend(slot for slot, ok in zip(slots, good) if not ok)
                slots = [slot for slot, ok in zip(slots, good) if ok]
                parts = "/".join(t for t, ok in zip(tails, good) if ok).split("/") if slots else []
            if slots:
                coords = np.array(list(map(int, parts)), dtype=np.int64).reshape(-1, rank)
                arrays[path] = (layout, slots, coords)
        plain.sort()
        return plain, arrays

    def _index_range(self, layout: ShardLayout, skey: str) -> ByteRange:
        n = layout.index_nbytes
        return (skey, 0, n) if layout.index_location == "start" else (skey, -n, None)

    def _parse_index(self, raw: bytes, layout: ShardLayout, path: str, skey: str) -> Index | None:
        try:
            return decode_index(raw, layout, array=path, shard=skey[len(path) + 1 :])
        except CorruptShardError:
            if self.lenient:
                return None
            raise

    def _remember(self, skey: str, index: Index | None) -> None:
        self._drop(skey)
        self._indexes[skey] = index
        self._index_bytes += _size(index)
        while self._index_bytes > MAX_INDEX_BYTES and len(self._indexes) > 1:
            self._drop(next(iter(self._indexes)))

    def _drop(self, skey: str) -> None:
        if skey in self._indexes:
            self._index_bytes -= _size(self._indexes.pop(skey))
        for key in self._cells_of.pop(skey, ()):
            self._cells.pop(key, None)

    def _remember_cells(
        self,
        ranges: Sequence[ByteRange],
        slots: np.ndarray,
        shard: np.ndarray,
        off: np.ndarray,
        size: np.ndarray,
        used: np.ndarray,
        shard_keys: list[str],
    ) -> None:
        """Remember where the cells ``ranges[slots]`` lie (in shards ``shard_keys[shard]``, at
        ``off``/``size`` where ``used``, else absent), for the shards whose index is cached."""
        cells, cells_of, cached = self._cells, self._cells_of, self._indexes
        rows = zip(slots.tolist(), shard.tolist(), off.tolist(), size.tolist(), used.tolist())
        for slot, g, a, n, is_used in rows:
            skey = shard_keys[g]
            if skey not in cached:
                continue  # the cache dropped it during this batch: nothing would forget the cell
            key = ranges[slot][0]
            if key not in cells:
                cells_of.setdefault(skey, []).append(key)
            cells[key] = (skey, a, n) if is_used else (skey, -1, 0)

    def _read_cells(
        self,
        planned: list[tuple[np.ndarray, np.ndarray, np.ndarray, int, int]],
        shard_keys: list[str],
        owner: list[tuple[str, ShardLayout]],
        indexes: list[Index | None],
        out: list[Any],
        copy: bool = True,
        ranges: Sequence[ByteRange] = (),
    ) -> None:
        """Fill ``out`` with the inner chunks planned (per array: output slots, shard numbers,
        inner positions), one request per run of cells of one shard at most ``gap`` bytes apart;
        each cell copied out of its run, or with ``copy=False`` a view of it. Absent shards and
        empty entries stay None. With the batch's ``ranges``, the location of each cell of a
        cached shard index is remembered for :meth:`_get_known`."""
        slot_parts, starts_parts, sizes_parts, shard_parts = [], [], [], []
        for slots, shard, inner, base, count in planned:
            # The shards of one array are numbered base .. base + count - 1: gather their
            # (cached) indexes into one table, an absent shard as an all-empty row.
            layout = owner[base][1]
            blank = (np.full(layout.n_inner, EMPTY, np.uint64),) * 2
            tables = [indexes[g] or blank for g in range(base, base + count)]
            at = (shard - base) * layout.n_inner + inner  # into the tables laid end to end
            off = np.concatenate([t[0] for t in tables])[at]
            size = np.concatenate([t[1] for t in tables])[at]
            used = off != np.uint64(EMPTY)
            if ranges:
                self._remember_cells(ranges, slots, shard, np.where(used, off, 0), size, used, shard_keys)
            slot_parts.append(slots[used])
            starts_parts.append(off[used].astype(np.int64))
            sizes_parts.append(size[used].astype(np.int64))
            shard_parts.append(shard[used])
        slots, starts = np.concatenate(slot_parts), np.concatenate(starts_parts)
        sizes, shard = np.concatenate(sizes_parts), np.concatenate(shard_parts)
        if not len(slots):
            return
        # Within one shard, distinct cells never share bytes (checked when the index was
        # decoded), so sorted by start their ends increase too: a run ends where the next cell
        # of the same shard starts more than ``gap`` bytes after the cell before it ends.
        order = np.lexsort((starts, shard))
        slots, starts, sizes, shard = slots[order], starts[order], sizes[order], shard[order]
        ends = starts + sizes
        new = np.empty(len(slots), bool)
        new[0] = True
        new[1:] = (shard[1:] != shard[:-1]) | (starts[1:] > ends[:-1] + self.gap)
        heads = np.flatnonzero(new)
        lo = starts[heads]
        hi = np.maximum.reduceat(ends, heads)
        run = np.cumsum(new) - 1
        run_shards = shard[heads].tolist()
        want = (hi - lo).tolist()
        asks: list[ByteRange] = [(shard_keys[g], a, n) for g, a, n in zip(run_shards, lo.tolist(), want)]
        self.range_requests += len(asks)
        raws = self._fetch(asks)
        for g, raw, n in zip(run_shards, raws, want):
            if raw is None or len(raw) != n:
                self._short_shard(shard_keys[g], raw, n)
        rel = starts - lo[run]
        views = [memoryview(raw) for raw in raws]  # type: ignore[arg-type]
        whole = (sizes == np.asarray(want, np.int64)[run]).tolist()
        for slot, r, a, n, all_of in zip(slots.tolist(), run.tolist(), rel.tolist(), sizes.tolist(), whole):
            if all_of:
                out[slot] = raws[r]
            else:
                out[slot] = bytes(views[r][a : a + n]) if copy else views[r][a : a + n]

    def _fetch(self, ranges: Sequence[ByteRange]) -> list[bytes | None]:
        if not ranges:
            return []
        get_ranges = getattr(self.inner, "get_ranges", None)
        if get_ranges is not None:
            return get_ranges(ranges)
        whole = self.inner.get_many([k for k, _, _ in ranges])
        return [cut_range(raw, s, n) for raw, (_, s, n) in zip(whole, ranges)]

    def shard_cells(self, path: str, shard_keys: Sequence[str]) -> dict[str, list[str]]:
        """For shard keys of sharded array ``path`` (``"c/0/1"``, relative), the cell keys
        (relative, ``"c/1/3"``) of the inner chunks each holds; raises CorruptShardError."""
        layout = self.layouts[path]
        full = [f"{path}/{k}" for k in shard_keys]
        indexes = {s: self._indexes[s] for s in full if s in self._indexes}
        missing = [s for s in full if s not in indexes]
        self.index_requests += len(missing)
        for skey, raw in zip(missing, self._fetch([self._index_range(layout, s) for s in missing])):
            indexes[skey] = (
                None if raw is None else decode_index(raw, layout, array=path, shard=skey[len(path) + 1 :])
            )
            self._remember(skey, indexes[skey])
        cps = np.asarray(layout.chunks_per_shard, np.int64)
        out: dict[str, list[str]] = {}
        for rel, skey in zip(shard_keys, full):
            index = indexes[skey]
            if index is None:
                out[rel] = []
                continue
            shard = np.array([int(p) for p in rel.split("/")[1:]], np.int64)
            used = np.flatnonzero(index[0] != np.uint64(EMPTY))
            chunks = shard * cps + np.stack(np.unravel_index(used, tuple(cps.tolist())), axis=1)
            out[rel] = ["c/" + "/".join(map(str, c)) for c in chunks.tolist()]
        return out

    # -- everything else passes through ------------------------------------------------
    def _forget(self, prefix: str) -> None:
        for skey in [k for k in self._indexes if k.startswith(prefix)]:
            self._drop(skey)

    def set_many(self, items: Sequence[tuple[str, bytes]]) -> None:
        self.inner.set_many(items)
        for key, data in items:
            self._drop(key)
            self.learn(key, data)

    def delete_many(self, keys: Sequence[str]) -> None:
        self.inner.delete_many(keys)
        for key in keys:
            self._drop(key)
            self.learn(key, None)

    def delete_prefix(self, prefix: str) -> None:
        self.inner.delete_prefix(prefix)
        self.refresh_cache()

    def refresh_cache(self) -> None:
        """Forget every shard index (not the layouts)."""
        self._indexes.clear()
        self._index_bytes = 0
        self._cells.clear()
        self._cells_of.clear()

    def refresh(self) -> None:
        self.inner.refresh()
        self.refresh_cache()
        self.layouts.clear()

    def __getattr__(self, name: str) -> Any:
        # ``check``/``rebase``/``expected`` of a ConsistentBackend below, ``root`` of a local one.
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)


def _size(index: Index | None) -> int:
    return 0 if index is None else int(index[0].nbytes + index[1].nbytes) + 64
