"""The streaming point writer: batches in, bounded memory, one store out.

Each batch is checked, its rows are keyed by cell and queued in a :class:`CellSpill`
(in memory up to a quarter of ``memory_limit``, then sorted runs on disk). ``close``
reads the rows back a group of whole cells at a time, encodes the groups in a pool of
threads (numpy sorting and the compressors release the GIL) and writes them in cell
order; then the object tables, the level and, last, the root. Nothing reaches the
target before ``close``: the store is staged and committed like every other write.
"""

from __future__ import annotations

import contextlib
import mmap
import os
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from zarr_vectors.engine.chunks.pipeline import Pipeline, compressor_json
from zarr_vectors.engine.ids import DenseIds, as_id_array, dense_ids
from zarr_vectors.engine.write import inputs as _inputs
from zarr_vectors.engine.write.builder import StoreBuilder
from zarr_vectors.engine.write.cells import AttributeSpec, EncodedCells, PointCells
from zarr_vectors.engine.write.level0 import (
    Layout,
    Tables,
    make_layout,
    object_tables,
    root_meta,
    write_tables,
)
from zarr_vectors.engine.write.options import StoreOptions, check_shards
from zarr_vectors.engine.write.partition import cell_indices
from zarr_vectors.engine.write.spill import CellSpill
from zarr_vectors.engine.write.tables import manifests_of
from zarr_vectors.errors import InputError, ZarrVectorsError
from zarr_vectors.format.kinds import POINT_CLOUD
from zarr_vectors.format.metadata import LevelMeta
from zarr_vectors.storage import (
    check_target,
    check_workers,
    local_path,
    scratch_folder,
    staging,
    write_session,
)

__all__ = [
    "DEFAULT_MEMORY_LIMIT",
    "BATCH_ROWS",
    "PointStream",
    "check_inside",
    "encode_groups",
    "finish_level",
    "write_cells",
    "written",
]

#: Default ``memory_limit``: suits a laptop.
DEFAULT_MEMORY_LIMIT = 1 << 30
#: Rows taken from an input array at a time (a memory-mapped input is read in such slices).
BATCH_ROWS = 1 << 21


def release_pages(arr: Any, start: int, stop: int) -> None:
    """Let the kernel drop the pages of rows ``start:stop`` of a read-only memory-mapped
    input once they were copied (they would otherwise stay resident in this process)."""
    mapping = getattr(arr, "_mmap", None)  # set by np.memmap / np.load(mmap_mode="r")
    if mapping is None or not hasattr(mapping, "madvise") or not arr.flags.c_contiguous or arr.ndim < 1:
        return
    if getattr(arr, "mode", "r") not in ("r", "c"):
        return
    base = np.frombuffer(mapping, np.uint8).ctypes.data
    row = arr.strides[0]
    first = arr.ctypes.data - base + start * row
    page = mmap.PAGESIZE
    lo = -(-first // page) * page  # whole pages inside the rows only
    hi = ((first + (stop - start) * row) // page) * page
    if hi > lo:
        mapping.madvise(mmap.MADV_DONTNEED, lo, hi - lo)


def _cells_and_extent(positions: np.ndarray, grid: Any) -> tuple[np.ndarray, np.ndarray]:
    return cell_indices(positions, grid), _inputs.extent(positions)


def parallel_cells(positions: np.ndarray, grid: Any, workers: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`cell_indices` (each row's linear chunk) and the per-axis extent of a batch, over
    ``workers`` threads for large batches (numpy releases the GIL)."""
    n = len(positions)
    if n == 0:
        return np.zeros(0, np.int64), np.zeros((2, positions.shape[1]))
    if workers <= 1 or n < 1 << 20:
        return _cells_and_extent(positions, grid)
    edges = np.linspace(0, n, workers + 1).astype(np.int64).tolist()
    with ThreadPoolExecutor(workers, thread_name_prefix="zv-keys") as pool:
        parts = list(
            pool.map(lambda ab: _cells_and_extent(positions[ab[0] : ab[1]], grid), zip(edges[:-1], edges[1:]))
        )
    extent = np.stack([np.min([p[1][0] for p in parts], axis=0), np.max([p[1][1] for p in parts], axis=0)])
    return np.concatenate([p[0] for p in parts]), extent


def distinct(ids: np.ndarray, workers: int) -> np.ndarray:
    """``np.unique(ids)``, the sorting of a large batch split over ``workers`` threads."""
    if workers <= 1 or len(ids) < 1 << 20:
        return np.unique(ids)
    edges = np.linspace(0, len(ids), workers + 1).astype(np.int64).tolist()
    with ThreadPoolExecutor(workers, thread_name_prefix="zv-ids") as pool:
        parts = list(pool.map(lambda ab: np.unique(ids[ab[0] : ab[1]]), zip(edges[:-1], edges[1:])))
    return np.unique(np.concatenate(parts))


def check_inside(
    positions: np.ndarray, bounds: np.ndarray, what: str, extent: np.ndarray | None = None
) -> None:
    """Refuse rows outside the store's inclusive bounds, saying how to get them in
    (``extent``: the positions' per-axis minimum and maximum, when already known)."""
    if not len(positions):
        return
    lo, hi = _inputs.extent(positions) if extent is None else extent
    if np.all(lo >= bounds[0]) and np.all(hi <= bounds[1]):
        return
    outside = np.any((positions < bounds[0]) | (positions > bounds[1]), axis=1)
    i = int(np.flatnonzero(outside)[0])
    raise InputError(
        f"{int(outside.sum())} {what} lie outside the store's bounds {bounds.tolist()} (first: row {i} "
        f"at {positions[i].tolist()}); the chunk grid is fixed by the bounds, so a store cannot grow: "
        "write a new store whose bounds= contain every batch"
    )


def encode_groups(
    encode: Callable[[int, int], EncodedCells],
    groups: Iterable[tuple[int, int]],
    workers: int,
) -> Iterable[EncodedCells]:
    """``encode(lo, hi)`` of each group, in group order, ``workers`` at a time (at most
    ``workers + 1`` groups are held at once)."""
    if workers <= 1:
        yield from (encode(lo, hi) for lo, hi in groups)
        return
    with ThreadPoolExecutor(workers, thread_name_prefix="zv-encode") as pool:
        pending: deque[Future[EncodedCells]] = deque()
        for lo, hi in groups:
            pending.append(pool.submit(encode, lo, hi))
            if len(pending) > workers:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


class PointStream:
    """A point cloud written batch by batch: :meth:`append` any number of times, then :meth:`close`.

    Use :func:`zarr_vectors.create` to make one. Memory stays near ``memory_limit`` whatever
    the total size; rows beyond it wait in a spill folder (``spill_dir``, by default beside
    a local target, else the system's temporary folder), removed at the end.
    """

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
        memory_limit: int | None = DEFAULT_MEMORY_LIMIT,
        workers: int | None = None,
        spill_dir: str | os.PathLike[str] | None = None,
        progress: bool | None = None,
    ) -> None:
        if options.bounds is None:
            raise InputError(
                "a streaming writer needs bounds=(lo, hi) up front: the chunk grid is fixed before "
                "the first batch arrives (give the extent every batch will lie in)"
            )
        if memory_limit is not None and (
            not isinstance(memory_limit, (int, np.integer)) or memory_limit < 1 << 20
        ):
            raise InputError(f"memory_limit must be at least 1 MiB (in bytes), got {memory_limit!r}")
        ndim = _inputs.call_ndim(options.chunk_shape, options.bounds, options.axes)
        if ndim is None:
            ndim = np.asarray(options.bounds, dtype=np.float64).reshape(2, -1).shape[1]
        self.target = target
        self.options = options
        self.layout: Layout = make_layout(np.zeros((0, ndim)), options)
        self.shards = check_shards(options.shards, ndim, target)
        compressor_json(options.compression)  # an unknown compression: InputError before any batch
        self.memory_limit = memory_limit
        self.workers = check_workers(workers)
        self.progress = progress
        self._channel_names = dict(channel_names or {})
        self._tables_in = (object_attributes, groups, group_attributes, group_names)
        check_target(target, overwrite=options.overwrite, storage_options=options.storage_options)
        self._folders = contextlib.ExitStack()
        if memory_limit is not None:
            spill_dir = self._spill_folder(target, spill_dir)
        #: The folder spilled rows go to (None without ``memory_limit``: rows stay in memory).
        self.spill_dir = spill_dir if memory_limit is not None else None
        self._spill: Any = CellSpill(
            None if memory_limit is None else memory_limit // 4, spill_dir, self.workers
        )
        self._dtype: np.dtype | None = None
        self._specs: list[AttributeSpec] | None = None
        self._objects: bool | None = None
        self._ids: np.ndarray | None = None
        self._closed = False

    # -- batches -------------------------------------------------------------------
    @property
    def rows(self) -> int:
        """Points appended so far."""
        return self._spill.rows

    def append(
        self, positions: Any, *, attributes: Mapping[str, Any] | None = None, object_ids: Any = None
    ) -> None:
        """Add points: (N, D) positions, per-point ``attributes`` and ``object_ids`` as for
        :func:`zarr_vectors.write_points`. Arrays (memory-mapped ones too) are taken
        :data:`BATCH_ROWS` rows at a time. The first batch fixes the position dtype and the
        attributes' names, dtypes and shapes; later batches must match (safe casts are made)."""
        self._require_open()
        n = int(np.shape(positions)[0]) if np.ndim(positions) == 2 else None
        if n is None or n <= BATCH_ROWS or self.memory_limit is None:
            self._add(positions, attributes, object_ids)
            return
        inputs = [positions, *(attributes or {}).values(), object_ids]
        for start in range(0, n, BATCH_ROWS):
            stop = min(start + BATCH_ROWS, n)
            self._add(
                np.array(positions[start:stop]),
                {k: np.array(v[start:stop]) for k, v in (attributes or {}).items()},
                None if object_ids is None else np.array(object_ids[start:stop]),
            )
            for arr in inputs:
                release_pages(arr, start, stop)

    def extend(self, batches: Iterable[Any]) -> None:
        """:meth:`append` each batch: an (N, D) array, or a mapping with ``positions`` and
        optionally ``attributes`` and ``object_ids``."""
        for batch in batches:
            if isinstance(batch, Mapping):
                unknown = set(batch) - {"positions", "attributes", "object_ids"}
                if unknown or "positions" not in batch:
                    raise InputError(
                        "a batch mapping holds 'positions' and optionally 'attributes' and 'object_ids'; "
                        f"got keys {sorted(batch)}"
                    )
                self.append(
                    batch["positions"], attributes=batch.get("attributes"), object_ids=batch.get("object_ids")
                )
            else:
                self.append(batch)

    def adopt(self, records: Any) -> None:
        """Write ``records`` at :meth:`close` in place of appended batches: rows already
        sorted by cell with the face of the spill (``rows``, ``sample()``, ``cells()``,
        ``groups()``, ``read()``, ``finish()``, ``close()``; see
        :class:`zarr_vectors.io.las_sort.SortedRecords`). The writer closes them."""
        self._require_open()
        if self.rows:
            records.close()
            raise ZarrVectorsError("adopt() takes the place of append(): this writer already has rows")
        pos, attrs = records.sample()
        positions = _inputs.positions_array(pos, self.layout.grid.ndim)
        named = _inputs.vertex_attributes(attrs, len(positions), self._channel_names)
        if [a.name for a in named] != list(records.names):
            records.close()
            raise ZarrVectorsError(
                f"records name attributes {list(records.names)}, decoded {[a.name for a in named]}"
            )
        self._dtype, self._specs, self._objects = positions.dtype, [AttributeSpec.of(a) for a in named], False
        self._spill.close()
        self._spill = records

    def _require_open(self) -> None:
        if self._closed:
            raise ZarrVectorsError(
                "this writer is closed; create a new one (or open the store with mode='r+' to append)"
            )

    def _add(self, positions: Any, attributes: Mapping[str, Any] | None, object_ids: Any) -> None:
        d = self.layout.grid.ndim
        pos = _inputs.positions_array(positions, d)
        if pos.shape[1] != d:
            raise InputError(f"positions have {pos.shape[1]} columns but the store has {d} axes")
        n = len(pos)
        if self._dtype is None:
            self._dtype = pos.dtype
        elif pos.dtype != self._dtype:
            pos = AttributeSpec("positions", self._dtype, (d,)).conform(pos, n)
        grid = self.layout.grid
        cells, extent = parallel_cells(pos, grid, self.workers)
        check_inside(pos, self.layout.bounds, "positions", extent)
        columns = {"positions": pos}
        if self._specs is None:
            named = _inputs.vertex_attributes(attributes, n, self._channel_names)
            self._specs = [AttributeSpec.of(a) for a in named]
            values = [a.values for a in named]
        else:
            given = dict(attributes or {})
            names = [s.name for s in self._specs]
            if sorted(given) != sorted(names):
                raise InputError(
                    f"this batch has attributes {sorted(given)} but the first batch had {sorted(names)}; "
                    "every batch must give the same attributes"
                )
            values = [s.conform(given[s.name], n) for s in self._specs]
        columns.update({f"a{i}": v for i, v in enumerate(values)})
        ids = _inputs.object_id_array(object_ids, n)
        if self._objects is None:
            self._objects = ids is not None
        elif self._objects != (ids is not None):
            raise InputError(
                "every batch must give object_ids, or none: "
                + ("this batch has none" if ids is None else "the first batch had none")
            )
        if ids is not None:
            seen = distinct(ids, self.workers)
            if self._ids is None:
                self._ids = seen
            else:
                if self._ids.dtype != seen.dtype:
                    both = as_id_array(
                        np.concatenate([self._ids.astype(object), seen.astype(object)]), "object_ids"
                    )
                    self._ids, seen = both[: len(self._ids)], both[len(self._ids) :]
                self._ids = np.union1d(self._ids, seen)
            columns["ids"] = ids
        self._spill.add(cells, columns)

    # -- finishing -----------------------------------------------------------------
    def _tables(self) -> tuple[Tables, np.ndarray | None]:
        """The object tables, and the OID of each distinct user id (None without objects)."""
        oattrs, groups, gattrs, gnames = self._tables_in
        if not self._objects:
            if oattrs or groups is not None:
                raise InputError("object_attributes and groups need object_ids (one object id per point)")
            return object_tables(DenseIds.identity(0), None, None, None, None), None
        assert self._ids is not None
        dense = dense_ids(self._ids)
        tables = object_tables(dense, oattrs, groups, gattrs, gnames)
        return tables, tables.oids

    def close(self) -> None:
        """Write the store (root ``zarr.json`` last) and free the spill folder."""
        self._require_open()
        self._closed = True
        try:
            self._finish()
        finally:
            self._spill.close()
            self._folders.close()

    def abort(self) -> None:
        """Drop every batch; nothing is written."""
        self._closed = True
        self._spill.close()
        self._folders.close()

    def _spill_folder(self, target: Any, spill_dir: str | os.PathLike[str] | None) -> str:
        """A locked folder for spilled rows, removed when the writer ends; one a killed writer
        left is removed by the next write. For a local target without ``spill_dir`` it is
        ``.NAME.zv-tmp-*`` beside the target (on its disk, like a staging folder)."""
        path = local_path(target)
        if spill_dir is None and path is not None:
            path = Path(os.path.realpath(path))
            path.parent.mkdir(parents=True, exist_ok=True)
            return str(self._folders.enter_context(staging(path.parent, f".{path.name}.zv-tmp-")))
        return str(self._folders.enter_context(scratch_folder("zv-spill-", spill_dir)))

    def __enter__(self) -> PointStream:
        return self

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> None:
        if self._closed:
            return
        if kind is None:
            self.close()
        else:
            self.abort()

    def _finish(self) -> None:
        spill, layout = self._spill, self.layout
        spill.finish()
        tables, oid_of = self._tables()
        dtype = self._dtype or np.dtype(np.float64)
        specs = self._specs or []
        options = self.options
        with write_session(
            self.target, overwrite=options.overwrite, storage_options=options.storage_options
        ) as backend:
            builder = StoreBuilder(
                backend, options.compression, checksums=options.checksums, shards=self.shards
            )
            pipes = {
                k: Pipeline.from_codecs([{"name": "vlen-bytes"}, *builder.compressors(k)])
                for k in ("data", "fragments")
            }
            cells = PointCells(
                layout.grid, pipes, specs, objects=bool(self._objects), owners=tables.num_objects > 1
            )
            ids = self._ids

            def encode(lo: int, hi: int) -> EncodedCells:
                rows = spill.read(lo, hi)
                oids = None
                if ids is not None and oid_of is not None:
                    oids = oid_of[np.searchsorted(ids, rows["ids"])]
                done = cells.encode(rows["positions"], [rows[f"a{i}"] for i in range(len(specs))], oids)
                if builder.shards is not None:
                    return done  # the builder gathers the cells into shards
                return written(backend, done)  # each worker writes its own whole cells

            row_bytes = (
                dtype.itemsize * layout.grid.ndim
                + sum(s.dtype.itemsize * int(np.prod(s.row_shape)) for s in specs)
                + (8 if self._objects else 0)
            )
            if builder.shards is not None:
                expect_shards(builder, layout.grid, spill, row_bytes)
            budget = (self.memory_limit or DEFAULT_MEMORY_LIMIT) // 2
            max_rows = max(1 << 14, budget // ((4 * row_bytes + 48) * (self.workers + 1)))
            # At least four groups per worker (when that many rows exist) to balance the pool.
            max_rows = min(max_rows, max(1 << 14, -(-spill.rows // (4 * self.workers))))
            groups = list(spill.groups(max_rows))
            summaries = write_cells(
                builder, cells, encode_groups(encode, groups, self.workers), dtype, len(groups), self.progress
            )
            finish_level(builder, layout, options, cells, summaries, tables, spill.rows, dtype)


def expect_shards(builder: StoreBuilder, grid: Any, spill: CellSpill, row_bytes: int) -> None:
    """Size ``"auto"`` shards from the rows per occupied cell (shards of whole trailing rows of
    cells, which the groups, in cell order, complete one after another) and announce the cells."""
    linear, _ = spill.cells()
    builder.size_shards(grid, row_bytes * spill.rows / max(len(linear), 1), contiguous=True)
    occupied = np.stack(np.unravel_index(linear, tuple(int(n) for n in grid.shape)), axis=1)
    builder.expect_cells(grid, occupied.reshape(-1, grid.ndim))


def written(backend: Any, encoded: EncodedCells, prefix: str = "0") -> EncodedCells:
    """Write ``encoded``'s chunks under ``prefix`` and return its summary without them."""
    backend.set_many([(f"{prefix}/{k}", v) for k, v in encoded.items])
    return replace(encoded, items=[])


def write_cells(
    builder: StoreBuilder,
    cells: PointCells,
    encoded: Iterable[EncodedCells],
    dtype: np.dtype,
    total: int,
    progress: bool | None,
) -> tuple[list[np.ndarray], list[tuple[np.ndarray, np.ndarray, np.ndarray]]]:
    """Queue every encoded chunk at ``0/...``; return the occupied cells and fragments of each group."""
    occupied: list[np.ndarray] = []
    fragments: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    bar = tqdm(
        total=total, desc="writing cells", unit="group", disable=None if progress is None else not progress
    )
    with bar:
        for group in encoded:
            for key, data in group.items:
                builder.put(f"0/{key}", data)
            occupied.append(group.cells)
            if group.fragments is not None:
                fragments.append(group.fragments)
            bar.update(1)
    return occupied, fragments


def finish_level(
    builder: StoreBuilder,
    layout: Layout,
    options: StoreOptions,
    cells: PointCells,
    summaries: tuple[list[np.ndarray], list[tuple[np.ndarray, np.ndarray, np.ndarray]]],
    tables: Tables,
    vertex_count: int,
    dtype: np.dtype | None = None,
) -> None:
    """Register the cell arrays, write the object tables, the level and the root (last)."""
    grid = layout.grid
    occupied, fragments = summaries
    all_cells = np.concatenate(occupied) if occupied else np.zeros((0, grid.ndim), np.int64)
    metas = cells.metas(dtype or np.dtype(np.float64))
    for path, (meta, kind) in metas.items():
        if path.startswith("vertex_attributes/") and "0/vertex_attributes" not in builder.groups:
            builder.group("0/vertex_attributes")
        if path.startswith("fragment_attributes/"):
            builder.group("0/fragment_attributes")
        builder.register_cells(f"0/{path}", grid, all_cells, meta, kind)
    present = ["vertices", "vertex_fragments"]
    if cells.attributes:
        present.append("vertex_attributes")
    if cells.owners:
        present.append("fragment_attributes")
    manifests = None
    if cells.objects:
        d = grid.ndim
        obj = np.concatenate([f[0] for f in fragments]) if fragments else np.zeros(0, np.int64)
        chunks = np.concatenate([f[1] for f in fragments]) if fragments else np.zeros((0, d), np.int64)
        local = np.concatenate([f[2] for f in fragments]) if fragments else np.zeros(0, np.int64)
        manifests = manifests_of(obj, chunks, local, tables.num_objects)
    present += write_tables(builder, grid.ndim, tables, manifests)
    root = root_meta(layout, options, POINT_CLOUD, "implicit_sequential")
    level = LevelMeta(level=0, vertex_count=vertex_count, arrays_present=tuple(present), fragments_tile=True)
    builder.group("0", {"zarr_vectors_level": level.to_json()})
    builder.commit(root.to_attributes())
