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

import json
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np

from zarr_vectors.errors import CorruptShardError, FormatError
from zarr_vectors.format.shards import EMPTY, ShardLayout, coalesce, decode_index, parse_sharding
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
            doc = json.loads(raw)
            layout = parse_sharding(path, doc) if isinstance(doc, dict) else None
        except (ValueError, FormatError):
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
        if not self.layouts:
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
        """:meth:`get_ranges`; ``copy=False`` leaves each cell of a shard a view of its run."""
        out: list[Any] = [None] * len(ranges)
        plain: list[int] = []
        wanted: dict[str, tuple[ShardLayout, list[int], list[tuple[int, ...]]]] = {}
        for i, (key, start, length) in enumerate(ranges):
            found = self.sharded(key) if start == 0 and length is None else None
            if found is None:
                plain.append(i)
                continue
            path, layout, chunk = found
            entry = wanted.setdefault(path, (layout, [], []))
            entry[1].append(i)
            entry[2].append(chunk)
        cells: dict[str, list[tuple[int, int]]] = {}  # shard key -> (slot, inner position)
        shard_layout: dict[str, tuple[str, ShardLayout]] = {}
        for path, (layout, slots, chunks) in wanted.items():  # one vectorised locate per array
            shard, inner = layout.locate(np.asarray(chunks, np.int64))
            for slot, s_, p in zip(slots, shard.tolist(), inner.tolist()):
                skey = f"{path}/c/" + "/".join(map(str, s_))
                cells.setdefault(skey, []).append((slot, p))
                shard_layout[skey] = (path, layout)
        # This batch's indexes are held here: the cache may drop some before the ranges are read.
        indexes = {s: self._indexes[s] for s in cells if s in self._indexes}
        for skey in indexes:
            self._indexes.move_to_end(skey)
        missing = [s for s in cells if s not in indexes]
        asks = [ranges[i] for i in plain] + [self._index_range(shard_layout[s][1], s) for s in missing]
        got = self._fetch(asks)
        for i, raw in zip(plain, got):
            out[i] = raw
            self.learn(ranges[i][0], raw)
        self.index_requests += len(missing)
        for skey, raw in zip(missing, got[len(plain) :]):
            path, layout = shard_layout[skey]
            indexes[skey] = None if raw is None else self._parse_index(raw, layout, path, skey)
            self._remember(skey, indexes[skey])
        self._read_cells(cells, indexes, shard_layout, out, copy)
        return out

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

    def _read_cells(
        self,
        cells: dict[str, list[tuple[int, int]]],
        indexes: dict[str, Index | None],
        shard_layout: dict[str, tuple[str, ShardLayout]],
        out: list[Any],
        copy: bool = True,
    ) -> None:
        """Fill ``out`` with the inner chunks of ``cells``, one coalesced request per run (each
        cell copied out of its run, or with ``copy=False`` a view of it)."""
        asks: list[ByteRange] = []
        plan: list[tuple[str, int, list[tuple[int, int, int]]]] = []  # shard, request start, members
        for skey, members in cells.items():
            index = indexes[skey]
            if index is None:
                continue  # an absent shard: its cells are absent
            offsets, nbytes = index
            pos = np.array([p for _, p in members], np.int64)
            used = offsets[pos] != np.uint64(EMPTY)
            slots = np.array([s for s, _ in members], np.int64)[used]
            starts = offsets[pos[used]].astype(np.int64)
            ends = starts + nbytes[pos[used]].astype(np.int64)
            lo, hi, group = coalesce(starts, ends, self.gap)
            for g in range(len(lo)):
                take = np.flatnonzero(group == g)
                parts = [(int(slots[t]), int(starts[t] - lo[g]), int(ends[t] - starts[t])) for t in take]
                plan.append((skey, int(lo[g]), parts))
                asks.append((skey, int(lo[g]), int(hi[g] - lo[g])))
        self.range_requests += len(asks)
        for (skey, _, parts), raw, (_, _, want) in zip(plan, self._fetch(asks), asks):
            if raw is None or len(raw) != want:
                path = shard_layout[skey][0]
                self._drop(skey)
                raise CorruptShardError(
                    path,
                    skey[len(path) + 1 :],
                    f"the shard is shorter than its index says (or was removed while being read): "
                    f"{0 if raw is None else len(raw)} of {want} bytes at one range",
                )
            view = memoryview(raw)
            for slot, at, n in parts:
                if n == len(raw):
                    out[slot] = raw
                else:
                    out[slot] = bytes(view[at : at + n]) if copy else view[at : at + n]

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
