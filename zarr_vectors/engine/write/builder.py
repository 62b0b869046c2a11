"""Write a store's keys in a safe order, streaming the chunk data.

:class:`StoreBuilder` writes encoded chunks to the backend in batches as they are
produced (memory stays bounded by one batch), keeps the ``zarr.json`` documents,
and on :meth:`StoreBuilder.commit` writes array metadata, then group metadata
deepest first, the root ``zarr.json`` last. A reader therefore never sees a root
that promises data which is not there yet. The root gets a new write generation
(``zarr_vectors_generation``), by which an open dataset notices that the store changed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from zarr_vectors.engine.chunks.pipeline import CHECKSUM_CODEC, Pipeline, compressor_json
from zarr_vectors.errors import InputError
from zarr_vectors.format import zarr_json
from zarr_vectors.format.grid import Grid, cell_key, chunk_key
from zarr_vectors.format.shards import ShardLayout, auto_chunks_per_shard, encode_shard, sharded_doc
from zarr_vectors.storage import GENERATION_KEY, Backend, dump_json, new_generation

__all__ = [
    "StoreBuilder",
    "CellStream",
    "LevelBuilder",
    "FLUSH_BYTES",
    "MANIFEST_BUCKET",
    "OBJECT_ATTRIBUTE_CHUNK",
    "shard_items",
]

#: Objects per chunk of ``object_index/manifests`` (fixed, never derived from the data).
#: Reading one object decodes its whole bucket, and a line's manifest lists every chunk
#: visit (hundreds of bytes), so buckets are kept small: 1,024 objects.
MANIFEST_BUCKET = 1024
#: Rows per chunk of ``object_attributes/<name>`` and ``group_attributes/<name>``.
OBJECT_ATTRIBUTE_CHUNK = 65536
#: Pending chunk bytes (or keys) that trigger a write to the backend.
FLUSH_BYTES = 32 << 20
FLUSH_KEYS = 2048


class StoreBuilder:
    """Collects one store's keys; :meth:`commit` writes them data first, root last.

    ``shards`` (None, ``"auto"`` or chunks per shard along each axis, see
    :func:`~zarr_vectors.engine.write.options.check_shards`) groups the cells of every per-chunk
    array into ``sharding_indexed`` shards, one object each; ``"auto"`` is sized on the first
    per-chunk array written (the vertices) unless :meth:`size_shards` fixed it before.
    """

    def __init__(
        self,
        backend: Backend,
        compression: str | None = "none",
        level: int | None = None,
        *,
        checksums: bool = False,
        shards: str | tuple[int, ...] | None = None,
        flush_bytes: int = FLUSH_BYTES,
    ) -> None:
        self.backend = backend
        #: Pending chunk bytes that trigger a write to the backend.
        self.flush_bytes = flush_bytes
        self.compression = compression
        self.compression_level = level
        self.checksums = checksums
        self.shards = shards
        compressor_json(compression, level=level)  # an unknown name or level: InputError before any write
        self._pending: list[tuple[str, bytes]] = []
        self._pending_bytes = 0
        self.arrays: dict[str, dict[str, Any]] = {}
        self.groups: dict[str, dict[str, Any]] = {}
        self._assembler: ShardAssembler | None = None

    # -- shards --------------------------------------------------------------------------
    def size_shards(self, grid: Grid, cell_bytes: float, contiguous: bool = False) -> None:
        """Fix ``"auto"`` shards for ``grid`` from the bytes an occupied cell takes on average."""
        if self.shards == "auto":
            self.shards = auto_chunks_per_shard(grid.shape.tolist(), cell_bytes, contiguous=contiguous)

    def chunks_per_shard(self, grid: Grid) -> tuple[int, ...] | None:
        """Chunks per shard of a per-chunk array over ``grid`` (None: unsharded), capped by the grid."""
        if self.shards is None:
            return None
        if self.shards == "auto":  # nothing sized it: guess 64 KiB per cell
            self.size_shards(grid, 64 << 10)
        assert isinstance(self.shards, tuple)
        if len(self.shards) != grid.ndim:
            raise InputError(
                f"shards {list(self.shards)} has {len(self.shards)} entries, the grid {grid.ndim} axes"
            )
        return tuple(min(int(k), int(n)) for k, n in zip(self.shards, grid.shape))

    def _layout(self, grid: Grid, codecs: list[dict[str, Any]]) -> ShardLayout | None:
        cps = self.chunks_per_shard(grid)
        return None if cps is None else ShardLayout(cps, (1,) * grid.ndim, tuple(codecs))

    def _shard_objects(self, path: str, layout: ShardLayout, cells: np.ndarray, data: list[bytes]) -> None:
        """Queue the shards holding the encoded cells ``data`` of ``cells`` (K, D)."""
        shard, inner = layout.locate(np.asarray(cells, np.int64).reshape(-1, len(layout.shard_shape)))
        groups: dict[tuple[int, ...], dict[int, bytes]] = {}
        for s, p, d in zip(map(tuple, shard.tolist()), inner.tolist(), data):
            groups.setdefault(s, {})[p] = d
        for s, members in groups.items():
            self._chunk(f"{path}/{cell_key(s)}", encode_shard(layout, members))

    def expect_cells(self, grid: Grid, cells: np.ndarray) -> None:
        """Announce the occupied cells (K, D) of the per-chunk arrays :meth:`put` will receive,
        so that each shard is written as soon as its last cell arrives."""
        cps = self.chunks_per_shard(grid)
        if cps is not None:
            self._assembler = ShardAssembler(self, ShardLayout(cps, (1,) * grid.ndim, ()), cells)

    def _chunk(self, key: str, data: bytes) -> None:
        self._pending.append((key, data))
        self._pending_bytes += len(data)
        if self._pending_bytes >= self.flush_bytes or len(self._pending) >= FLUSH_KEYS:
            self.flush()

    def merge_shards(
        self, grid: Grid, old: Callable[[list[str]], list[bytes | None]], old_cells: dict[str, np.ndarray]
    ) -> None:
        """Rewrite whole the shards that the cells :meth:`put` here fall in, keeping their other
        cells from the existing store (``old`` reads cell keys; ``old_cells``: the cells each
        array lists there); for appends to a sharded store. The shards are written at commit."""
        cps = self.chunks_per_shard(grid)
        if cps is not None:
            layout = ShardLayout(cps, (1,) * grid.ndim, ())
            self._assembler = ShardAssembler(self, layout, None, old, old_cells)

    def put_object(self, key: str, data: bytes) -> None:
        """Queue one stored object as it is (a shard, a table chunk)."""
        self._chunk(key, data)

    def put(self, key: str, data: bytes) -> None:
        """Queue one already-encoded chunk (a cell of a per-chunk array, ``<array>/c/i/j/k``:
        into its shard when sharded, see :meth:`expect_cells`)."""
        if self._assembler is not None and "/c/" in key:
            self._assembler.add(key, data)
        else:
            self._chunk(key, data)

    def register_cells(
        self, path: str, grid: Grid, cells: np.ndarray, attributes: dict[str, Any], kind: str = "data"
    ) -> None:
        """The ``zarr.json`` of a per-chunk vlen array whose chunks were queued with :meth:`put`;
        ``cells`` (K, D) are its occupied cell indices, listed in that order."""
        attrs = dict(attributes)
        if np.any(grid.origin != 0):
            attrs["chunk_grid_origin"] = [int(o) for o in grid.origin]
        attrs["nonempty_chunks"] = [chunk_key(c) for c in np.asarray(cells, np.int64) + grid.origin]
        shape = tuple(int(s) for s in grid.shape)
        doc = zarr_json.vlen_array_doc(shape, (1,) * len(shape), self.compressors(kind), attrs)
        if self._assembler is not None:
            self._assembler.close(path)
            doc = sharded_doc(doc, self._assembler.layout.chunks_per_shard)
        self.arrays[path] = doc

    def flush(self) -> None:
        """Write the pending chunks."""
        if self._pending:
            self.backend.set_many(self._pending)
        self._pending, self._pending_bytes = [], 0

    def compressors(self, kind: str) -> list[dict[str, Any]]:
        """Codec list for an array kind (``"data"``, ``"links"`` or ``"fragments"``).

        Fragment indices are compressed like the data when compression is asked for:
        the spec suggests leaving them raw, but an all-range index is 16 bytes per bin
        and compresses about tenfold, which is most of a small store's size. ``"blosc"``
        links use bit shuffle (their high bits are zero). With ``checksums`` Zarr's ``crc32c``
        codec comes last, as zarr-python writes it.
        """
        name = self.compression
        if kind == "links" and name == "blosc":
            name = "blosc-bitshuffle"
        codecs = compressor_json(name, level=self.compression_level)
        return [*codecs, dict(CHECKSUM_CODEC)] if self.checksums else codecs

    def group(self, path: str, attributes: dict[str, Any] | None = None) -> None:
        self.groups[path] = zarr_json.group_doc(attributes or {})

    def cell_array(
        self,
        path: str,
        grid: Grid,
        cells: np.ndarray,
        payloads: Iterable[bytes],
        attributes: dict[str, Any],
        kind: str = "data",
        array_codecs: list[dict[str, Any]] | None = None,
    ) -> None:
        """A per-chunk vlen array over ``grid``; ``cells`` (K, D) are cell indices of the payloads.

        Adds ``nonempty_chunks`` (absolute keys) and ``chunk_grid_origin`` (when non-zero).
        ``array_codecs`` are named in the codec list before vlen-bytes; the payloads are
        already their output (a Draco blob per cell).
        """
        compressors = self.compressors(kind)
        pipe = Pipeline.from_codecs([{"name": "vlen-bytes"}, *compressors])
        cells = np.asarray(cells, np.int64).reshape(-1, grid.ndim)
        nonempty = [chunk_key(c) for c in cells + grid.origin]
        shape = tuple(int(s) for s in grid.shape)
        attrs = dict(attributes)
        if np.any(grid.origin != 0):
            attrs["chunk_grid_origin"] = [int(o) for o in grid.origin]
        attrs["nonempty_chunks"] = nonempty
        doc = zarr_json.vlen_array_doc(shape, (1,) * len(shape), compressors, attrs, array_codecs)
        if self.shards is None:
            for cell, payload in zip(cells, payloads):
                self._chunk(f"{path}/{cell_key(cell)}", pipe.encode(payload))
        else:
            data = [pipe.encode(p) for p in payloads]
            self.size_shards(grid, sum(map(len, data)) / max(len(data), 1))
            layout = self._layout(grid, doc["codecs"])
            assert layout is not None
            self._shard_objects(path, layout, cells, data)
            doc = sharded_doc(doc, layout.chunks_per_shard)
        self.arrays[path] = doc

    def cell_stream(
        self,
        path: str,
        grid: Grid,
        attributes: dict[str, Any],
        kind: str = "data",
        array_codecs: list[dict[str, Any]] | None = None,
    ) -> CellStream:
        """A per-chunk vlen array filled cell by cell (:meth:`CellStream.add`), for writers
        that produce cells in batches; :meth:`CellStream.close` registers its metadata."""
        return CellStream(self, path, grid, attributes, kind, array_codecs)

    def at_level(self, index: int) -> LevelBuilder:
        """A view writing the paths a level-0 writer uses (``"0"``, ``"0/..."``) under level ``index``."""
        return LevelBuilder(self, index)

    def vlen_list_array(
        self, path: str, items: Sequence[bytes], chunk: int, attributes: dict[str, Any]
    ) -> None:
        """A 1-D vlen array of ``len(items)`` elements in chunks of ``chunk``; empty chunks are skipped."""
        n = len(items)
        parts = ((c, items[start : start + chunk]) for c, start in enumerate(range(0, n, chunk)))
        self.vlen_list_chunks(path, n, chunk, parts, attributes)

    def vlen_list_chunks(
        self,
        path: str,
        n: int,
        chunk: int,
        parts: Iterable[tuple[int, Sequence[bytes]]],
        attributes: dict[str, Any],
    ) -> None:
        """:meth:`vlen_list_array` given chunk by chunk: ``(c, items of chunk c)`` for any chunks
        (a chunk not given, or of empty items only, is not written)."""
        compressors = self.compressors("data")
        pipe = Pipeline.from_codecs([{"name": "vlen-bytes"}, *compressors])
        for c, items in parts:
            part = list(items)
            if not any(part):
                continue
            part += [b""] * (chunk - len(part))
            self._chunk(f"{path}/c/{c}", pipe.encode_items(part))
        self.arrays[path] = zarr_json.vlen_array_doc((n,), (chunk,), compressors, attributes)

    def dense_array(
        self, path: str, values: np.ndarray, chunk: int, fill_value: Any, attributes: dict[str, Any]
    ) -> None:
        """A numeric (B,) or (B, C) array chunked by ``chunk`` rows; edge chunks padded with the fill.
        A (B,) array of strings is a ``string`` array (vlen-utf8), padded with ``""``."""
        compressors = self.compressors("data")
        if np.asarray(values).dtype.kind == "U":
            pipe = Pipeline.from_codecs([{"name": "vlen-bytes"}, *compressors])  # same framing as vlen-utf8
            items = [v.encode("utf-8") for v in np.asarray(values).tolist()]
            for c, start in enumerate(range(0, len(items), chunk)):
                part = items[start : start + chunk]
                self._chunk(f"{path}/c/{c}", pipe.encode_items(part + [b""] * (chunk - len(part))))
            self.arrays[path] = zarr_json.string_array_doc((len(items),), (chunk,), compressors, attributes)
            return
        values = np.asarray(values)
        dtype = values.dtype.newbyteorder("<")
        pipe = Pipeline.from_codecs([{"name": "bytes"}, *compressors])
        chunk_shape = (chunk, *values.shape[1:])
        suffix = "/0" * (values.ndim - 1)
        for c, start in enumerate(range(0, len(values), chunk)):
            block = np.full(chunk_shape, fill_value, dtype=dtype)
            rows = values[start : start + chunk]
            block[: len(rows)] = rows
            self._chunk(f"{path}/c/{c}{suffix}", pipe.encode(block.tobytes()))
        doc = zarr_json.dense_array_doc(values.shape, chunk_shape, dtype, fill_value, compressors, attributes)
        self.arrays[path] = doc

    def commit(self, root_attributes: dict[str, Any]) -> None:
        """Write the last chunks (and shards), then array metadata, then groups deepest first,
        then the root (with a new write generation)."""
        backend = self.backend
        root_attributes = {**root_attributes, GENERATION_KEY: new_generation()}
        if self._assembler is not None:
            self._assembler.finish()
        self.flush()
        backend.set_many([(f"{p}/zarr.json", dump_json(d)) for p, d in self.arrays.items()])
        inner = sorted(self.groups.items(), key=lambda kv: -kv[0].count("/"))
        backend.set_many([(f"{p}/zarr.json", dump_json(d)) for p, d in inner])
        backend.set_many([("zarr.json", dump_json(zarr_json.group_doc(root_attributes)))])


def shard_items(
    items: Iterable[tuple[str, bytes]], chunks_per_shard: Sequence[int]
) -> list[tuple[str, bytes]]:
    """Encoded cells ``(<array>/c/i/j/k, bytes)`` of any per-chunk arrays gathered into the
    shard objects holding them (``<array>/c/<shard>``, ``chunks_per_shard`` cells per shard).

    Invariant: every cell of each shard is among ``items`` (a shard is written whole, with
    only these cells), as when the writer partitioned its rows by shard."""
    layout = ShardLayout(tuple(int(k) for k in chunks_per_shard), (1,) * len(chunks_per_shard), ())
    by_array: dict[str, tuple[list[str], list[bytes]]] = {}
    for key, data in items:
        path, _, rest = key.rpartition("/c/")
        tails, blobs = by_array.setdefault(path, ([], []))
        tails.append(rest)
        blobs.append(data)
    out: list[tuple[str, bytes]] = []
    for path, (tails, blobs) in by_array.items():
        cells = np.array([t.split("/") for t in tails], np.int64).reshape(len(tails), -1)
        shard, inner = layout.locate(cells)
        groups: dict[tuple[int, ...], dict[int, bytes]] = {}
        for s, p, d in zip(map(tuple, shard.tolist()), inner.tolist(), blobs):
            groups.setdefault(s, {})[p] = d
        out += [(f"{path}/{cell_key(s)}", encode_shard(layout, members)) for s, members in groups.items()]
    return out


class ShardAssembler:
    """Cells of the per-chunk arrays of one level arriving in pieces (:meth:`StoreBuilder.put`),
    gathered into shards. With the occupied ``cells`` given up front, a shard is queued once all
    of them are in, the rest when its array is registered (memory: the shards not yet complete).

    Merging into an existing store (``old`` reads its cells, ``old_cells`` lists each array's
    cell indices), every shard waits for :meth:`finish` (at commit), where the old cells of the
    shard that did not arrive are read (one batch) and kept: a shard is rewritten whole.
    """

    def __init__(
        self,
        builder: StoreBuilder,
        layout: ShardLayout,
        cells: np.ndarray | None,
        old: Callable[[list[str]], list[bytes | None]] | None = None,
        old_cells: dict[str, np.ndarray] | None = None,
    ) -> None:
        self.builder, self.layout = builder, layout
        self._per = layout.chunks_per_shard
        self.expected: dict[str, int] = {}
        if cells is not None:
            shard, _ = layout.locate(np.asarray(cells, np.int64))
            keys, counts = np.unique(shard, axis=0, return_counts=True)
            self.expected = {cell_key(k): int(n) for k, n in zip(keys.tolist(), counts.tolist())}
        self.old, self.old_cells = old, old_cells or {}
        self.pending: dict[str, dict[int, bytes]] = {}

    def add(self, key: str, data: bytes) -> None:
        path, _, rest = key.rpartition("/c/")
        # ShardLayout.locate of one cell, in plain integers (called once per cell written)
        inner = 0
        shard = []
        for c, per in zip(map(int, rest.split("/")), self._per):
            shard.append(c // per)
            inner = inner * per + c % per
        skey = cell_key(tuple(shard))
        members = self.pending.setdefault(f"{path}/{skey}", {})
        members[inner] = data
        if len(members) == self.expected.get(skey, -1):
            self._emit(f"{path}/{skey}")

    def _emit(self, key: str) -> None:
        members = self.pending.pop(key)
        self.builder.put_object(key, encode_shard(self.layout, members))

    def close(self, path: str) -> None:
        """Queue every shard of ``path`` still pending (its array holds fewer cells than expected);
        when merging, nothing: later cells may still come."""
        if self.old is None:
            for key in [k for k in self.pending if k.rpartition("/c/")[0] == path]:
                self._emit(key)

    def finish(self) -> None:
        """Queue every pending shard, completed with the old cells it did not receive."""
        if self.old is not None:
            asks: list[tuple[str, int]] = []
            for key, members in self.pending.items():
                path, _, rest = key.rpartition("/c/")
                cells = self.old_cells.get(path)
                if cells is None or not len(cells):
                    continue
                shard, inner = self.layout.locate(cells)
                mine = np.all(shard == np.array([int(p) for p in rest.split("/")]), axis=1)
                for pos in inner[mine].tolist():
                    if pos not in members:
                        asks.append((key, pos))
                        members[pos] = b""  # placeholder, filled below
            keys = [f"{k.rpartition('/c/')[0]}/{self._cell_key(k, p)}" for k, p in asks]
            for (key, pos), raw in zip(asks, self.old(keys) if keys else []):
                if raw is None:
                    del self.pending[key][pos]
                else:
                    self.pending[key][pos] = raw
        for key in list(self.pending):
            self._emit(key)

    def _cell_key(self, skey: str, pos: int) -> str:
        """The cell key (``c/i/j/k``) of inner position ``pos`` of shard ``skey``."""
        shard = np.array([int(p) for p in skey.rpartition("/c/")[2].split("/")], np.int64)
        cps = self.layout.chunks_per_shard
        return cell_key(shard * np.asarray(cps) + np.asarray(np.unravel_index(pos, cps)))


class CellStream:
    """One per-chunk vlen array written in pieces: cells are encoded and queued as they are
    added (each cell at most once); ``close`` adds ``nonempty_chunks`` (in the order added)
    and ``chunk_grid_origin`` like :meth:`StoreBuilder.cell_array`. When the builder shards,
    the cells of a shard are held until the shard is complete (or the stream closed)."""

    def __init__(
        self,
        builder: StoreBuilder,
        path: str,
        grid: Grid,
        attributes: dict[str, Any],
        kind: str,
        array_codecs: list[dict[str, Any]] | None,
    ) -> None:
        self.builder, self.path, self.grid = builder, path, grid
        self.attributes, self.array_codecs = dict(attributes), array_codecs
        self.compressors = builder.compressors(kind)
        self._pipe = Pipeline.from_codecs([{"name": "vlen-bytes"}, *self.compressors])
        self.nonempty: list[str] = []
        self._layout: ShardLayout | None = None
        self._full = 0  # cells of a shard that lies whole inside the grid
        self._pending: dict[tuple[int, ...], dict[int, bytes]] = {}  # shard -> {inner position: cell}

    def add(self, cells: np.ndarray, payloads: Iterable[bytes]) -> None:
        """Queue the payloads of cells ``cells`` (K, D) (cell indices, not chunk coordinates).
        Sharded: a shard is queued once every cell of it has come, the others at :meth:`close`."""
        cells = np.asarray(cells, np.int64).reshape(-1, self.grid.ndim)
        data = [self._pipe.encode(p) for p in payloads]
        self.nonempty.extend(chunk_key(c) for c in (cells + self.grid.origin).tolist())
        if self.builder.shards is None:
            for cell, raw in zip(cells, data):
                self.builder._chunk(f"{self.path}/{cell_key(cell)}", raw)
            return
        if self._layout is None:  # "auto" shards sized on the first cells
            self.builder.size_shards(self.grid, sum(map(len, data)) / max(len(data), 1))
            self._layout = self.builder._layout(self.grid, self.compressors)
            assert self._layout is not None
            self._full = self._layout.n_inner
        shard, inner = self._layout.locate(cells)
        for s, p, raw in zip(map(tuple, shard.tolist()), inner.tolist(), data):
            members = self._pending.setdefault(s, {})
            members[p] = raw
            if len(members) == self._full:
                self._emit(s)

    def release(self, before: int) -> None:
        """Queue every pending shard whose cells all lie below linear cell ``before``: a writer
        adding cells in ascending linear order will add none of them again."""
        if self._layout is None or not self._pending:
            return
        cps = np.asarray(self._layout.chunks_per_shard, np.int64)
        shape = tuple(int(s) for s in self.grid.shape)
        shards = np.array(list(self._pending), np.int64).reshape(-1, len(shape))
        last = np.minimum((shards + 1) * cps, np.asarray(shape, np.int64)) - 1
        done = np.ravel_multi_index(tuple(last.T), shape) < before
        for shard in map(tuple, shards[done].tolist()):
            self._emit(shard)

    def _emit(self, shard: tuple[int, ...]) -> None:
        assert self._layout is not None
        self.builder.put_object(
            f"{self.path}/{cell_key(shard)}", encode_shard(self._layout, self._pending.pop(shard))
        )

    def close(self) -> None:
        attrs = dict(self.attributes)
        if np.any(self.grid.origin != 0):
            attrs["chunk_grid_origin"] = [int(o) for o in self.grid.origin]
        attrs["nonempty_chunks"] = self.nonempty
        shape = tuple(int(s) for s in self.grid.shape)
        doc = zarr_json.vlen_array_doc(shape, (1,) * len(shape), self.compressors, attrs, self.array_codecs)
        if self.builder.shards is not None:
            if self._layout is None:  # no cell came: the array is still sharded, like its siblings
                self._layout = self.builder._layout(self.grid, self.compressors)
            assert self._layout is not None
            for shard in list(self._pending):
                self._emit(shard)
            doc = sharded_doc(doc, self._layout.chunks_per_shard)
        self.builder.arrays[self.path] = doc


class LevelBuilder:
    """A :class:`StoreBuilder` seen through a path rewrite: ``"0"`` and ``"0/..."`` become
    ``"<index>"`` and ``"<index>/..."``. Lets the level-0 writers of every geometry write a
    coarser level of a pyramid unchanged."""

    def __init__(self, builder: StoreBuilder, index: int) -> None:
        self.base = builder
        self.index = int(index)
        self.backend = builder.backend

    def path(self, path: str) -> str:
        head, sep, rest = path.partition("/")
        if head != "0":
            raise InputError(f"a level writer path must start with '0/', got {path!r}")
        return f"{self.index}{sep}{rest}"

    def compressors(self, kind: str) -> list[dict[str, Any]]:
        return self.base.compressors(kind)

    def group(self, path: str, attributes: dict[str, Any] | None = None) -> None:
        self.base.group(self.path(path), attributes)

    def cell_array(self, path: str, *args: Any, **kwargs: Any) -> None:
        self.base.cell_array(self.path(path), *args, **kwargs)

    def cell_stream(self, path: str, *args: Any, **kwargs: Any) -> CellStream:
        return self.base.cell_stream(self.path(path), *args, **kwargs)

    def vlen_list_array(self, path: str, *args: Any, **kwargs: Any) -> None:
        self.base.vlen_list_array(self.path(path), *args, **kwargs)

    def dense_array(self, path: str, *args: Any, **kwargs: Any) -> None:
        self.base.dense_array(self.path(path), *args, **kwargs)
