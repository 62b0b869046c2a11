"""The streaming writer of linked kinds (skeletons, graphs, ...): batches in, bounded memory.

Each batch is checked by its kind, which turns it into vertex rows (positions, attributes,
user object id, vertex number and the kind's own columns) keyed by linear cell, and into
cross-chunk link records (:class:`~zarr_vectors.engine.write.linkjoin.LinkJoin`). Rows wait
in a :class:`~zarr_vectors.engine.write.spill.CellSpill`. ``close`` then sweeps the cells in
ascending order a group of whole cells at a time: the kind encodes each group's cells (its
vertices, fragments, attributes and links inside one chunk), the endpoints of cross-chunk
links in the group are resolved to rows, and every array's cells go out through a
:class:`~zarr_vectors.engine.write.builder.CellStream` (a shard leaves once the sweep is past
it). A second sweep over the home cells of cross-chunk links writes those. Last come the
object tables, the level and the root. Nothing reaches the target before ``close``.

Both sweeps make their groups in ``workers`` forked processes (threads where the platform
does not fork): the kind's encoding and every cell's codec pipeline, at most ``workers + 1``
groups at once (see :mod:`~zarr_vectors.engine.write.cellpool`); the calling thread takes
them in cell order, so the store's bytes do not depend on ``workers``.

When the chunk grid is not known before the first batch (no ``bounds``, or
``chunk_shape="auto"``), batches wait whole on disk and are keyed at ``close``, once their
extent (and, for ``"auto"``, a sample of their vertices) has fixed the grid as the one-shot
writers fix it.

Invariant: a vertex's *number* is its position in the concatenation of the batches, as the
one-shot writer would see them, and every order the kinds derive follows those numbers.
"""

from __future__ import annotations

import contextlib
import copyreg
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar, Self

import numpy as np

from zarr_vectors.engine.chunks.pipeline import compressor_json
from zarr_vectors.engine.ids import DenseIds, as_id_array, dense_ids, table_rows
from zarr_vectors.engine.write import inputs as _inputs
from zarr_vectors.engine.write.autochunk import SAMPLE_ROWS, auto_chunk_shape, is_auto
from zarr_vectors.engine.write.builder import FLUSH_BYTES, MANIFEST_BUCKET, StoreBuilder
from zarr_vectors.engine.write.cellpool import (
    EncodedCellStream,
    OverlappedBuilder,
    cell_pipelines,
    encode_payloads,
    map_groups,
    stream_of,
)
from zarr_vectors.engine.write.cells import AttributeSpec
from zarr_vectors.engine.write.level0 import (
    Layout,
    Tables,
    make_layout,
    object_tables,
    root_meta,
    write_tables,
)
from zarr_vectors.engine.write.linkjoin import LinkJoin
from zarr_vectors.engine.write.options import StoreOptions, check_shards
from zarr_vectors.engine.write.partition import cell_indices
from zarr_vectors.engine.write.spill import CellSpill, DiskColumn, cell_groups
from zarr_vectors.engine.write.stream import check_inside
from zarr_vectors.engine.write.tables import write_object_index
from zarr_vectors.errors import InputError, ZarrVectorsError
from zarr_vectors.format.grid import Grid
from zarr_vectors.format.links import smallest_index_dtype
from zarr_vectors.format.manifests import encode_manifests_batch
from zarr_vectors.format.metadata import LevelMeta
from zarr_vectors.storage import (
    check_target,
    check_workers,
    local_path,
    scratch_folder,
    staging,
    write_session,
)

__all__ = ["GroupCells", "LinkedStream", "SweepContext", "cells_of", "grid_of", "manifests_from"]


def _column_by_path(column: DiskColumn) -> tuple[type[DiskColumn], tuple[Any, ...]]:
    """A spilled column crosses processes by its path (an open descriptor means nothing there)."""
    return DiskColumn, (column.path, column.dtype, column.row_shape)


copyreg.pickle(DiskColumn, _column_by_path)


def cells_of(linear: np.ndarray, grid: Grid) -> np.ndarray:
    """(K, D) cell indices of linear cells."""
    shape = tuple(int(s) for s in grid.shape)
    return np.stack(np.unravel_index(np.asarray(linear, np.int64), shape), axis=1).reshape(-1, grid.ndim)


def manifests_from(
    oid: np.ndarray, key: np.ndarray, cell: np.ndarray, local: np.ndarray, grid: Grid, num_objects: int
) -> list[bytes]:
    """Manifests from every fragment's object, order key, linear cell and local index: an
    object's fragments ordered by key, then cell, then local index, one block per run of
    fragments in the same chunk."""
    order = np.lexsort((local, cell, key, oid))
    obj, c = oid[order], cell[order]
    new_block = np.ones(len(order), bool)
    new_block[1:] = (obj[1:] != obj[:-1]) | (c[1:] != c[:-1])
    first = np.flatnonzero(new_block)
    return encode_manifests_batch(
        num_objects,
        obj[first],
        cells_of(c[first], grid) + grid.origin,
        np.append(first, len(order)),
        local[order],
    )


@dataclass(eq=False)
class GroupCells:
    """What a kind made of one group of whole cells.

    ``arrays``: level-relative path -> (cell indices (K, D) ascending, raw payloads);
    ``fragments``: (object id, order key, linear cell, local index) of every fragment;
    ``vertex`` (ascending), ``cell``, ``local``: every row's number, linear cell and chunk row;
    ``intra``: the records (edges, faces) inside one chunk written with these cells.
    """

    arrays: dict[str, tuple[np.ndarray, list[bytes]]]
    fragments: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
    vertex: np.ndarray
    cell: np.ndarray
    local: np.ndarray
    intra: int = 0


@dataclass(eq=False)
class _Encoded:
    """A group made in a worker: its cells' chunk bytes per array (path -> (cells, bytes)),
    the :class:`GroupCells` without payloads, and its resolved link endpoints."""

    span: tuple[int, int]
    arrays: dict[str, tuple[np.ndarray, list[bytes]]]
    group: GroupCells
    resolved: tuple[np.ndarray, dict[str, np.ndarray]] | None


@dataclass(eq=False)
class SweepContext:
    """What a kind's encoder knows at ``close``: the grid, the OID of every distinct user id
    (``ids`` ascending, ``oid_of`` row for row), the number of objects, the link index dtype."""

    grid: Grid
    ids: np.ndarray
    oid_of: np.ndarray
    num_objects: int
    index_dtype: np.dtype
    specs: list[AttributeSpec]
    position_dtype: np.dtype
    totals: dict[str, int] = field(default_factory=dict)

    def oids(self, user: np.ndarray) -> np.ndarray:
        """The OID of each user id (every one must be among ``ids``)."""
        return self.oid_of[np.searchsorted(self.ids, user)]


def grid_of(positions: np.ndarray, options: StoreOptions) -> StoreOptions:
    """``options`` with the grid a one-shot writer fixes from all of ``positions`` (bounds
    from their extent when not given, ``chunk_shape="auto"`` sized from them) made explicit,
    so that a stream given every vertex at once keys them as they come."""
    layout = make_layout(positions, options)
    shape = tuple(float(c) for c in layout.grid.chunk_shape)
    return replace(options, chunk_shape=shape, bounds=layout.bounds)


class _DiskRows:
    """The positions of batches set aside on disk, for :func:`auto_chunk_shape`'s sample."""

    def __init__(self, files: list[np.ndarray]) -> None:
        self.files = files
        self.starts = np.cumsum([0] + [len(f) for f in files])
        self.shape = (int(self.starts[-1]), files[0].shape[1])

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, rows: np.ndarray) -> np.ndarray:
        rows = np.asarray(rows, np.int64)
        which = np.searchsorted(self.starts, rows, side="right") - 1
        out = np.empty((len(rows), self.shape[1]), np.float64)
        for b in np.unique(which).tolist():
            sel = which == b
            out[sel] = self.files[b][rows[sel] - self.starts[b]]
        return out

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        whole = np.concatenate([np.asarray(f) for f in self.files])
        return whole if dtype is None else whole.astype(dtype)


class LinkedStream:
    """Base of the streaming writers of kinds with links; see the module docstring.

    A kind defines ``append`` (checks a batch, then :meth:`_queue`), :meth:`_columns` (vertex
    rows and link records of a keyed batch), :meth:`_encode` (a group of whole cells),
    :meth:`_metas` (array metadata), :meth:`_cross` (the cross-chunk links of some home cells)
    and :meth:`_link_groups` (the link groups' metadata; returns the families present).
    """

    geometry_type: ClassVar[str]
    links_convention: ClassVar[str]
    width: ClassVar[int] = 2
    kind_name: ClassVar[str]
    #: Keywords of the kind's own that ``create()`` hands on (``directed`` for graphs).
    create_keywords: ClassVar[tuple[str, ...]] = ()

    def __init__(
        self,
        target: Any,
        options: StoreOptions,
        *,
        channel_names: Mapping[str, Sequence[str]] | None = None,
        object_attributes: Mapping[str, Any] | None = None,
        groups: Any = None,
        group_attributes: Mapping[str, Any] | None = None,
        group_names: Sequence[str] | None = None,
        memory_limit: int | None = None,
        workers: int | None = None,
        spill_dir: str | os.PathLike[str] | None = None,
        progress: bool | None = None,
    ) -> None:
        if memory_limit is not None and (
            not isinstance(memory_limit, (int, np.integer)) or memory_limit < 1 << 20
        ):
            raise InputError(f"memory_limit must be at least 1 MiB (in bytes), got {memory_limit!r}")
        self.target, self.options = target, options
        self.ndim = _inputs.call_ndim(options.chunk_shape, options.bounds, options.axes)
        self.shards = check_shards(options.shards, self.ndim or 1, target) if self.ndim else None
        compressor_json(options.compression)  # an unknown compression: InputError before any batch
        check_target(target, overwrite=options.overwrite, storage_options=options.storage_options)
        self.memory_limit = memory_limit
        self.workers = check_workers(workers)
        self.progress = progress
        self._channel_names = dict(channel_names or {})
        self._tables_in = (object_attributes, groups, group_attributes, group_names)
        self._folders = contextlib.ExitStack()
        self._folder = self._spill_folder(target, spill_dir)
        limit = None if memory_limit is None else memory_limit
        self._vertices = CellSpill(None if limit is None else limit // 4, self._folder, self.workers)
        self._fragments = CellSpill(None if limit is None else limit // 16, self._folder, self.workers)
        self._links = LinkJoin(self.width, None if limit is None else limit // 16, self._folder, self.workers)
        self.layout: Layout | None = None
        #: The kind's own spills (closed with the writer).
        self._spills: list[CellSpill] = []
        if options.bounds is not None and not is_auto(options.chunk_shape):
            self.layout = make_layout(np.zeros((0, self.ndim or 1)), options)
        self._waiting: list[dict[str, Path]] = []  # batches set aside until the grid is known
        self._extent: np.ndarray | None = None
        self.rows = 0  # vertices appended
        self._batches = 0  # batches appended (an empty one too)
        self._keyed = 0  # vertices keyed by cell
        self._ids: np.ndarray | None = None
        #: Kinds whose objects are items (lines, meshes): each batch's item ids, in order.
        self._items: list[np.ndarray] = []
        self._objects: bool | None = None
        self._specs: list[AttributeSpec] | None = None
        self._dtype: np.dtype | None = None
        self._closed = False

    # -- batches -------------------------------------------------------------------
    def _per_batch(self, unknown: Mapping[str, Any], allowed: Sequence[str]) -> None:
        """Refuse keywords an ``append`` does not take (store-wide ones belong to ``create()``)."""
        if unknown:
            raise InputError(
                f"{sorted(unknown)} cannot change per batch of {self.kind_name}; per batch: {list(allowed)} "
                "(give store-wide and per-object keywords to create())"
            )

    def _require_open(self) -> None:
        if self._closed:
            raise ZarrVectorsError("this writer is closed; create a new one")

    def _spill(self, share: int) -> CellSpill:
        """A spill of the kind's own, with ``1 / share`` of the memory limit."""
        spill = CellSpill(
            None if self.memory_limit is None else self.memory_limit // share, self._folder, self.workers
        )
        self._spills.append(spill)
        return spill

    def _spill_folder(self, target: Any, spill_dir: str | os.PathLike[str] | None) -> Path:
        """A locked folder for waiting rows and batches, removed when the writer ends (beside a
        local target unless ``spill_dir`` is given, else in the temporary folder)."""
        path = local_path(target)
        if spill_dir is None and path is not None:
            path = Path(os.path.realpath(path))
            path.parent.mkdir(parents=True, exist_ok=True)
            return self._folders.enter_context(staging(path.parent, f".{path.name}.zv-tmp-"))
        return self._folders.enter_context(scratch_folder("zv-batches-", spill_dir))

    def _positions(self, positions: Any) -> np.ndarray:
        """A batch's positions, checked against the store's axes and first dtype."""
        pos = _inputs.positions_array(positions, self.ndim)
        if self.ndim is None:
            self.ndim = pos.shape[1]
            self.shards = check_shards(self.options.shards, self.ndim, self.target)
        if pos.shape[1] != self.ndim:
            raise InputError(f"positions have {pos.shape[1]} columns but the store has {self.ndim} axes")
        if self._dtype is None:
            self._dtype = pos.dtype
        elif pos.dtype != self._dtype:
            pos = AttributeSpec("positions", self._dtype, (self.ndim,)).conform(pos, len(pos))
        return pos

    def _attributes(self, attributes: Mapping[str, Any] | None, n: int) -> dict[str, np.ndarray]:
        """A batch's vertex attributes as columns ``a0, a1, ...``; the first batch fixes them."""
        if self._specs is None:
            named = _inputs.vertex_attributes(attributes, n, self._channel_names)
            self._specs = [AttributeSpec.of(a) for a in named]
            return {f"a{i}": a.values for i, a in enumerate(named)}
        given = dict(attributes or {})
        names = [s.name for s in self._specs]
        if sorted(given) != sorted(names):
            raise InputError(
                f"this batch has attributes {sorted(given)} but the first batch had {sorted(names)}; "
                "every batch must give the same attributes"
            )
        return {f"a{i}": s.conform(given[s.name], n) for i, s in enumerate(self._specs)}

    def _given_ids(self, object_ids: Any, n: int) -> np.ndarray | None:
        """A batch's user object ids (None when not given); every batch gives them, or none."""
        ids = _inputs.object_id_array(object_ids, n)
        if self._objects is None:
            self._objects = ids is not None
        elif self._objects != (ids is not None):
            raise InputError(
                "every batch must give object_ids, or none: "
                + ("this batch has none" if ids is None else "the first batch had none")
            )
        return ids

    def _same_id_dtype(self, ids: np.ndarray) -> np.ndarray:
        """A batch's ids in the first batch's id dtype (int64 or uint64), when every one fits."""
        if self._ids is None or ids.dtype == self._ids.dtype or not len(ids):
            return ids
        fits = int(ids.max()) < 2**63 if self._ids.dtype.kind == "i" else int(ids.min()) >= 0
        if not fits:
            raise InputError(
                f"this batch's object_ids ({ids.dtype}) do not fit the first batch's {self._ids.dtype}; "
                "give every batch's ids in one dtype"
            )
        return ids.astype(self._ids.dtype)

    def _note_ids(self, ids: np.ndarray) -> None:
        seen = np.unique(ids)
        if self._ids is None:
            self._ids = seen
            return
        if self._ids.dtype != seen.dtype:
            both = as_id_array(np.concatenate([self._ids.astype(object), seen.astype(object)]), "object_ids")
            self._ids, seen = both[: len(self._ids)], both[len(self._ids) :]
        self._ids = np.union1d(self._ids, seen)

    def _queue(self, batch: dict[str, np.ndarray]) -> None:
        """Take a checked batch: ``positions``, ``ids`` (user object id per vertex), attributes
        ``a0...`` and the kind's own arrays; keyed now, or set aside until the grid is known."""
        pos = batch["positions"]
        if self.layout is not None:
            check_inside(pos, self.layout.bounds, "positions")
        elif self.options.bounds is not None:
            check_inside(pos, _inputs.resolve_bounds(self.options.bounds, pos[:0]), "positions")
        batch["ids"] = self._same_id_dtype(batch["ids"])
        self._note_ids(batch["ids"])
        if len(pos):
            lo_hi = _inputs.extent(pos)
            self._extent = (
                lo_hi
                if self._extent is None
                else np.stack([np.minimum(self._extent[0], lo_hi[0]), np.maximum(self._extent[1], lo_hi[1])])
            )
        self.rows += len(pos)
        self._batches += 1
        if self.layout is not None:
            self._key(batch)
            return
        stem = self._folder / f"batch{len(self._waiting):06d}"
        files = {}
        for name, values in batch.items():
            files[name] = stem.with_name(f"{stem.name}.{name}.npy")
            np.save(files[name], values, allow_pickle=False)
        self._waiting.append(files)

    def _key(self, batch: dict[str, np.ndarray]) -> None:
        assert self.layout is not None
        pos = batch["positions"]
        grid = self.layout.grid
        cell = cell_indices(pos, grid)
        vertex = self._keyed + np.arange(len(pos), dtype=np.int64)
        columns, links = self._columns(batch, cell, vertex)
        attrs = {k: v for k, v in batch.items() if k[0] == "a" and k[1:].isdigit()}
        self._vertices.add(
            cell, {"positions": pos, "vertex": vertex, "ids": batch["ids"], **attrs, **columns}
        )
        if links is not None:
            self._links.add(*links)
        self._keyed += len(pos)

    def _fix_grid(self) -> None:
        """The grid of batches set aside, as the one-shot writer fixes it; then key them."""
        options = self.options
        loaded = [np.load(f["positions"], mmap_mode="r") for f in self._waiting]
        extent = self._extent if self._extent is not None else np.zeros((0, self.ndim or 1))
        bounds = _inputs.resolve_bounds(options.bounds, extent)
        if is_auto(options.chunk_shape):
            rows = _DiskRows(loaded)
            sample: Any = np.asarray(rows) if len(rows) <= SAMPLE_ROWS else rows
            bins = None
            if options.bin_shape is not None:
                bins = _inputs.shape_vector(options.bin_shape, bounds.shape[1], "bin_shape")
            shape = auto_chunk_shape(sample, bounds, bins)
            options = replace(options, chunk_shape=shape)
        self.layout = make_layout(extent, replace(options, bounds=bounds))
        del loaded
        for files in self._waiting:
            self._key({name: np.load(path) for name, path in files.items()})
            for path in files.values():
                path.unlink()
        self._waiting = []

    # -- kind hooks ----------------------------------------------------------------
    def _columns(
        self, batch: dict[str, np.ndarray], cell: np.ndarray, vertex: np.ndarray
    ) -> tuple[dict[str, np.ndarray], tuple[np.ndarray, ...] | None]:
        raise NotImplementedError

    def _encode(self, rows: dict[str, np.ndarray], ctx: SweepContext, lo: int, hi: int) -> GroupCells:
        """Encode the rows of the whole cells ``lo <= cell < hi`` (in arrival order per cell)."""
        raise NotImplementedError

    def _metas(self, ctx: SweepContext) -> dict[str, tuple[Any, ...]]:
        """path -> (array attributes, pipeline kind[, codecs named before vlen-bytes])."""
        raise NotImplementedError

    def _cross(
        self, record: np.ndarray, cell: np.ndarray, local: np.ndarray, ctx: SweepContext, lo: int, hi: int
    ) -> dict[str, tuple[dict[str, Any], str, np.ndarray, list[bytes]]]:
        """The cross-chunk link cells of home cells ``lo <= cell < hi``: path -> (metadata, kind,
        cells, payloads), each path's cells ascending."""
        raise NotImplementedError

    def _link_groups(self, builder: StoreBuilder, ctx: SweepContext) -> list[str]:
        raise NotImplementedError

    # -- finishing -----------------------------------------------------------------
    def close(self) -> None:
        """Write the store (root ``zarr.json`` last) and free the spill folder."""
        self._require_open()
        self._closed = True
        try:
            self._finish()
        finally:
            self._release()

    def abort(self) -> None:
        """Drop every batch; nothing is written."""
        self._closed = True
        self._release()

    def _release(self) -> None:
        for spill in self._spills:
            spill.close()
        self._vertices.close()
        self._links.close()
        self._fragments.close()
        self._folders.close()

    def extend(self, batches: Any) -> None:
        """:meth:`append` each batch: a tuple of the data arguments, or a mapping of keywords."""
        for batch in batches:
            if isinstance(batch, Mapping):
                self.append(**batch)
            elif isinstance(batch, tuple):
                self.append(*batch)
            else:
                self.append(batch)

    def append(self, *data: Any, **keywords: Any) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> None:
        if self._closed:
            return
        if kind is None:
            self.close()
        else:
            self.abort()

    def _tables(self) -> tuple[Tables, np.ndarray, np.ndarray]:
        """The object tables, the distinct user ids and the OID of each."""
        _, groups, gattrs, gnames = self._tables_in
        oattrs = self._object_attributes()
        ids = self._ids if self._ids is not None else np.zeros(0, np.int64)
        dense: DenseIds = dense_ids(ids)
        tables = object_tables(dense, oattrs, groups, gattrs, gnames)
        return tables, ids, tables.oids

    def _object_attributes(self) -> Mapping[str, Any] | None:
        """The object attributes as :func:`object_tables` takes them: for kinds whose objects
        are items (lines, meshes) with ids given, rows come one per item in the order
        appended, as the one-shot writers take them, and are put in ascending id order."""
        given = self._tables_in[0]
        if not given or not self._objects or not self._items:
            return given
        item_ids = dense_ids(np.concatenate(self._items))
        return {k: table_rows(v, item_ids, k, "object attribute", True) for k, v in given.items()}

    def _new_items(self, ids: np.ndarray, one: str, many: str) -> None:
        """Refuse item ids (one object each) that an earlier batch already gave."""
        if self._ids is None:
            return
        both = as_id_array(np.concatenate([self._ids.astype(object), ids.astype(object)]), "object_ids")
        seen = np.isin(both[len(self._ids) :], both[: len(self._ids)])
        if seen.any():
            raise InputError(
                f"object_ids name object {ids[np.flatnonzero(seen)[0]]} for several {many} (an earlier "
                f"batch gave it); give each {one} its own id"
            )

    def _row_bytes(self) -> int:
        dtype = self._dtype or np.dtype(np.float64)
        attrs = sum(s.dtype.itemsize * int(np.prod(s.row_shape)) for s in self._specs or [])
        return dtype.itemsize * (self.ndim or 1) + attrs

    def _finish(self) -> None:
        if not self._batches:
            raise InputError(f"no {self.kind_name} were appended; append at least one batch before close()")
        if self.layout is None:
            self._fix_grid()
        assert self.layout is not None
        spill, grid = self._vertices, self.layout.grid
        spill.finish()
        for own in self._spills:
            own.finish()
        linear, counts = spill.cells()
        tables, ids, oid_of = self._tables()
        ctx = SweepContext(
            grid,
            ids,
            oid_of,
            tables.num_objects,
            smallest_index_dtype(max(int(counts.max()) if len(counts) else 0, 1)),
            list(self._specs or []),
            self._dtype or np.dtype(np.float64),
        )
        options = self.options
        with write_session(
            self.target, overwrite=options.overwrite, storage_options=options.storage_options
        ) as backend:
            builder = OverlappedBuilder(
                backend,
                options.compression,
                checksums=options.checksums,
                shards=self.shards,
                flush_bytes=min(FLUSH_BYTES, (self.memory_limit or FLUSH_BYTES) // 16),
            )
            try:
                if builder.shards is not None:
                    cell_bytes = self._row_bytes() * self.rows / max(len(linear), 1)
                    builder.size_shards(grid, cell_bytes, contiguous=True)
                present = self._sweep(builder, ctx, linear, counts, tables)
                root = root_meta(self.layout, options, self.geometry_type, self.links_convention)
                level = LevelMeta(
                    level=0, vertex_count=self.rows, arrays_present=tuple(present), fragments_tile=True
                )
                builder.group("0", {"zarr_vectors_level": level.to_json()})
                builder.commit(root.to_attributes())
            finally:
                builder.close()

    def _group_rows(self, total: int) -> int:
        """Rows (or records) per group: ``workers + 1`` groups within half the memory limit, at
        least four groups per worker when there are that many rows (to balance the threads)."""
        budget = (self.memory_limit or (1 << 30)) // (2 * (self.workers + 1))
        row = 4 * (self._row_bytes() + 64) + 64
        return max(1 << 12, min(budget // row, max(1 << 12, -(-total // (4 * self.workers)))))

    def _took(self, group: GroupCells) -> None:
        """Note a group the sweep has written (in the calling thread, in cell order)."""

    def _make_group(
        self, ctx: SweepContext, pipes: dict[str, Any], kinds: dict[str, str], lo: int, hi: int
    ) -> _Encoded:
        """Encode the whole cells ``lo <= cell < hi`` (any thread): the kind's cells through their
        pipelines, and the link endpoints they resolve."""
        group = self._encode(self._vertices.read(lo, hi), ctx, lo, hi)
        arrays = {
            path: (cells, encode_payloads(pipes[kinds[path]], payloads))
            for path, (cells, payloads) in group.arrays.items()
        }
        group.arrays = {}
        resolved = self._links.resolved_rows(lo, hi, group.vertex, group.cell, group.local)
        return _Encoded((lo, hi), arrays, group, resolved)

    def _make_cross(
        self, ctx: SweepContext, pipes: dict[str, Any], lo: int, hi: int
    ) -> tuple[int, dict[str, tuple[dict[str, Any], str, np.ndarray, list[bytes]]]]:
        """``hi`` and the cross-chunk link cells of home cells ``lo <= cell < hi``, encoded (any thread)."""
        record, cell, local = self._links.records(lo, hi)
        out = self._cross(record, cell, local, ctx, lo, hi)
        return hi, {p: (m, k, c, encode_payloads(pipes[k], data)) for p, (m, k, c, data) in out.items()}

    def task_spills(self) -> list[CellSpill]:
        """The spills a group's encoding reads (rows, link requests and resolved endpoints, the
        kind's own), for writers that run the groups in other processes."""
        return [self._vertices, self._links.requests, self._links.resolved, *self._spills]

    def close_files(self) -> None:
        """Close the descriptors of :meth:`task_spills`' files (nothing is removed): a copy of
        the writer in another process calls it once done reading."""
        for spill in self.task_spills():
            for run in spill.runs:
                for column in run.columns.values():
                    if isinstance(column, DiskColumn):
                        column.close()

    def _map_spans(
        self, method: str, args: tuple[Any, ...], spans: Iterable[tuple[int, int]]
    ) -> Iterator[Any]:
        """``getattr(self, method)(*args, lo, hi)`` of each span, in span order, in ``workers``
        processes (:func:`map_groups`). The seam where :mod:`zarr_vectors.dask` runs the groups
        as Dask tasks: the method only reads the writer's finished spills and returns picklable
        values."""
        fn = getattr(self, method)
        return map_groups(lambda g: fn(*args, *g), spans, self.workers)

    def _sweep(
        self, builder: StoreBuilder, ctx: SweepContext, linear: np.ndarray, counts: np.ndarray, tables: Tables
    ) -> list[str]:
        """Both sweeps; returns the level's ``arrays_present``."""
        grid = ctx.grid
        metas = self._metas(ctx)
        pipes = cell_pipelines(builder)
        kinds = {path: meta[1] for path, meta in metas.items()}
        streams: dict[str, EncodedCellStream] = {}

        def stream(path: str, meta: dict[str, Any], kind: str, codecs: Any = None) -> EncodedCellStream:
            if path not in streams:
                streams[path] = stream_of(builder, f"0/{path}", grid, meta, kind, codecs)
            return streams[path]

        for path in ("vertices", "vertex_fragments"):
            stream(path, *metas[path])
        max_rows = self._group_rows(self.rows)
        self._links.finish_requests()
        groups = self._vertices.groups(max_rows)
        for done in self._map_spans("_make_group", (ctx, pipes, kinds), groups):
            for path, (cells, data) in done.arrays.items():
                stream(path, *metas[path]).add_encoded(cells, data)
            group, hi = done.group, done.span[1]
            self._took(group)
            oid, key, cell, local = group.fragments
            self._fragments.add(oid, {"oid": oid, "key": key, "cell": cell, "local": local})
            self._links.take(done.resolved)
            for s in streams.values():
                s.release(hi)
        self._vertices.close()
        spans = self._links.groups(self._group_rows(self._links.count))  # by records, split too
        for hi, cross in self._map_spans("_make_cross", (ctx, pipes), spans):
            for path, (meta, kind, cells, data) in cross.items():
                stream(path, meta, kind).add_encoded(cells, data)
            for s in streams.values():
                s.release(hi)
        for path in ("vertex_attributes", "fragment_attributes", "links", "link_attributes"):
            if any(p.startswith(f"{path}/") for p in streams):
                builder.group(f"0/{path}")
        for s in streams.values():
            s.close()
        present = ["vertices", "vertex_fragments"]
        present += [
            p for p in ("vertex_attributes", "fragment_attributes") if any(s.startswith(p) for s in streams)
        ]
        present += self._link_groups(builder, ctx)
        write_object_index(builder, "0", grid.ndim, ctx.num_objects, self._manifests(ctx, max_rows))
        return present + ["object_index"] + write_tables(builder, grid.ndim, tables, None)

    def _manifests(self, ctx: SweepContext, max_rows: int) -> Iterator[tuple[int, list[bytes]]]:
        """The manifests of every bucket of objects, in order, from the fragments waiting by
        object id (read a group of whole objects at a time; objects without any are empty)."""
        spill, n, size = self._fragments, ctx.num_objects, MANIFEST_BUCKET
        spill.finish()
        used, counts = spill.cells()
        pending: list[bytes] = []
        bucket, done = 0, 0  # the next bucket to yield; objects whose manifests are made

        def upto(stop: int, rows: dict[str, np.ndarray] | None) -> None:
            nonlocal done
            if rows is None:
                none = np.zeros(0, np.int64)
                pending.extend(manifests_from(none, none, none, none, ctx.grid, stop - done))
            else:
                key, cell, local = rows["key"], rows["cell"], rows["local"]
                pending.extend(manifests_from(rows["oid"] - done, key, cell, local, ctx.grid, stop - done))
            done = stop

        for lo, hi in cell_groups(used, counts, max_rows):
            rows = spill.read(lo, hi)
            order = np.argsort(rows["oid"], kind="stable")
            ends = np.arange((lo // size + 1) * size, hi, size).tolist() + [hi]
            cuts = np.searchsorted(rows["oid"][order], [lo, *ends])
            upto(lo, None)
            for stop, a, b in zip(ends, cuts[:-1], cuts[1:]):  # a bucket at a time: a group's
                upto(stop, {k: v[order[a:b]] for k, v in rows.items()})  # manifests are not counted
                while len(pending) >= size:
                    yield bucket, pending[:size]
                    del pending[:size]
                    bucket += 1
        upto(n, None)
        while pending:
            yield bucket, pending[:size]
            del pending[:size]
            bucket += 1
