"""Write and read point clouds on a Dask cluster (the ``dask`` extra).

:func:`write_points` writes a Dask DataFrame or array of any size: the client computes
the bounds, the distinct object ids and the grid; every row is keyed by its cell and
Dask's shuffle brings the rows of each cell into one partition; one task per output
partition encodes its whole cells and writes them straight to the target; the client
then writes the level's tables and metadata, the root ``zarr.json`` last. No two tasks
write the same key, and the client never holds the rows.

:func:`to_dask` reads a level (or the part inside a box) as a Dask DataFrame with one
partition per occupied chunk, each read lazily by its own task.

Lines, skeletons, graphs and meshes (:func:`write_lines`, :func:`write_skeletons`,
:func:`write_graphs`, :func:`write_meshes`, from :mod:`zarr_vectors.dask_linked`) take a bag
or delayed objects; their cells are built by Dask tasks, a group of whole chunks each.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from zarr_vectors._extras import needs

try:
    import dask
    import dask.dataframe as dd
    import pandas as pd
except ImportError as exc:  # pragma: no cover - the extra is installed in the tests
    raise ImportError(needs("zarr_vectors.dask", "dask[dataframe]", "dask")) from exc
from zarr.abc.store import Store

from zarr_vectors import api
from zarr_vectors.dask_linked import write_graphs, write_lines, write_meshes, write_skeletons
from zarr_vectors.dataset import Dataset
from zarr_vectors.engine import (
    AttributeSpec,
    EncodedCells,
    Pipeline,
    PointCells,
    StoreBuilder,
    StoreOptions,
    as_id_array,
    check_inside,
    check_shards,
    compressor_json,
    dense_ids,
    fetch_cells,
    finish_level,
    make_layout,
    object_tables,
    parse_box,
    plan_box,
    row_owners,
    shard_items,
    sort_keys,
)
from zarr_vectors.engine import inputs as _inputs
from zarr_vectors.errors import InputError
from zarr_vectors.format.grid import Grid
from zarr_vectors.storage import (
    Backend,
    LocalBackend,
    StorageOptions,
    check_in_place_target,
    local_path,
    placeholder_root,
    remote_backend,
    write_session,
)

__all__ = ["to_dask", "write_graphs", "write_lines", "write_meshes", "write_points", "write_skeletons"]

#: The column holding each row's linear cell index (sharded: its shard's) while the rows are shuffled.
CELL_COLUMN = "__zv_cell__"
#: Bytes of encoded chunks a task sends to the storage per request.
WRITE_BATCH_BYTES = 32 << 20


# -- writing points --------------------------------------------------------------------
@dataclass(frozen=True)
class _Columns:
    """Which columns of the frame are positions, attributes and object ids."""

    positions: list[str]
    attributes: list[str]
    object_id: str | None
    dtype: np.dtype


@dataclass(frozen=True, eq=False)
class _Job:
    """What every task needs to encode and write its cells (shipped once to the workers).

    ``dest`` is ``("local", folder)``, ``("remote", url, storage_options)`` or None (the
    task returns its chunks for the client to write). ``ids`` are the distinct user ids,
    ascending, and ``oids`` their OIDs. ``shards``: chunks per shard (None: one object per
    cell); the rows were shuffled by shard, so a task holds every cell of its shards and
    writes them whole.
    """

    grid: Grid
    columns: _Columns
    specs: list[AttributeSpec]
    codecs: dict[str, list[dict[str, Any]]]
    objects: bool
    owners: bool
    ids: np.ndarray | None
    oids: np.ndarray | None
    dest: tuple[Any, ...] | None
    shards: tuple[int, ...] | None = None

    def cells(self) -> PointCells:
        pipes = {k: Pipeline.from_codecs([{"name": "vlen-bytes"}, *c]) for k, c in self.codecs.items()}
        return PointCells(self.grid, pipes, self.specs, objects=self.objects, owners=self.owners)


def _frame(
    data: Any, columns: Sequence[str] | None, axes: Sequence[Any] | None
) -> tuple[Any, list[str], Sequence[Any] | None]:
    """``data`` as a Dask DataFrame, the names of its position columns and the store's axes
    (default: those names; for an array without ``columns``, the writers' default axes)."""
    import dask.array as da

    if isinstance(data, da.Array):
        if data.ndim != 2 or np.isnan(data.shape[1]):
            raise InputError(
                f"a Dask array of positions must have shape (N, D) with D known, got {data.shape}"
            )
        d = int(data.shape[1])
        names = [str(c) for c in columns] if columns is not None else [f"dim{i}" for i in range(d)]
        if len(names) != d:
            raise InputError(f"columns names {len(names)} position columns but the array has {d}")
        default = None if columns is None else names
        return dd.from_dask_array(data, columns=names), names, axes if axes is not None else default
    if not isinstance(data, dd.DataFrame):
        raise InputError(
            f"data must be a Dask DataFrame or a Dask array, got {type(data).__name__}; "
            "for in-memory data use zarr_vectors.write_points"
        )
    present = [str(c) for c in data.columns]
    if columns is not None:
        names = [str(c) for c in columns]
    elif axes is not None:
        names = [str(a["name"]) if isinstance(a, Mapping) else str(getattr(a, "name", a)) for a in axes]
    else:
        names = ["x", "y", "z"] if "z" in present else ["x", "y"]
    missing = [c for c in names if c not in present]
    if missing:
        raise InputError(
            f"data has no position column {missing[0]!r} (its columns: {present}); name the position "
            "columns with columns=[...]"
        )
    return data, names, axes if axes is not None else names


def _columns(frame: Any, names: list[str], object_id: str | None) -> _Columns:
    """Classify the columns by their dtypes; non-numeric attribute columns are refused."""
    dtypes = frame.dtypes
    for name in names:
        dt = dtypes[name]
        if not isinstance(dt, np.dtype) or dt.kind not in "iuf":
            raise InputError(f"position column {name!r} has dtype {dt}; use a float or integer dtype")
    dtype = np.result_type(*[dtypes[n] for n in names])
    id_col = object_id if object_id is not None and object_id in dtypes.index else None
    if id_col is not None and (not isinstance(dtypes[id_col], np.dtype) or dtypes[id_col].kind not in "iu"):
        raise InputError(
            f"object id column {id_col!r} has dtype {dtypes[id_col]}; object ids must be int64 or uint64"
        )
    attrs = [str(c) for c in frame.columns if c not in names and c != id_col]
    bad = [c for c in attrs if not isinstance(dtypes[c], np.dtype) or dtypes[c].kind not in "iufb"]
    if bad:
        raise InputError(
            f"column {bad[0]!r} has dtype {dtypes[bad[0]]}: every column other than the positions and "
            f"{object_id!r} is stored as a numeric vertex attribute; drop or convert it first"
        )
    return _Columns(names, attrs, id_col, np.dtype(dtype))


def _extent(
    part: pd.DataFrame, cols: _Columns, bounds: np.ndarray | None
) -> tuple[int, np.ndarray, np.ndarray | None]:
    """Rows of a partition, their extent ``(2, D)`` and distinct object ids (None without);
    bad positions are refused here, before anything is written."""
    pos = _inputs.positions_array(part[cols.positions].to_numpy(dtype=cols.dtype), len(cols.positions))
    if bounds is not None:
        check_inside(pos, bounds, "positions")
    ids = None
    if cols.object_id is not None:
        ids = np.unique(as_id_array(part[cols.object_id].to_numpy(), "object ids"))
    if not len(pos):
        return 0, np.zeros((2, pos.shape[1]), pos.dtype), ids
    return len(pos), np.stack([pos.min(axis=0), pos.max(axis=0)]), ids


def _keyed(
    part: pd.DataFrame, grid: Grid, bounds: np.ndarray, cols: _Columns, shards: tuple[int, ...] | None
) -> pd.DataFrame:
    """The partition with its rows' linear cell indices added (with ``shards``: the linear
    indices of their shards, so that the shuffle keeps each shard in one partition); bad
    positions are refused."""
    pos = _inputs.positions_array(part[cols.positions].to_numpy(dtype=cols.dtype), grid.ndim)
    check_inside(pos, bounds, "positions")
    cell = sort_keys(pos, grid) // grid.n_bins
    if shards is not None:
        shape = tuple(int(s) for s in grid.shape)
        per = np.asarray(shards, np.int64)
        coords = np.stack(np.unravel_index(cell, shape), axis=1) // per
        cell = np.ravel_multi_index(tuple(coords.T), tuple((-(-np.asarray(shape) // per)).tolist()))
    return part.assign(**{CELL_COLUMN: cell})


def _write_items(dest: tuple[Any, ...], items: list[tuple[str, bytes]]) -> None:
    backend: Backend
    if dest[0] == "local":
        backend = LocalBackend(dest[1])
    else:
        backend = remote_backend(dest[1], StorageOptions.parse(dest[2]), False)
    batch: list[tuple[str, bytes]] = []
    size = 0
    for key, data in items:
        batch.append((f"0/{key}", data))
        size += len(data)
        if size >= WRITE_BATCH_BYTES:
            backend.set_many(batch)
            batch, size = [], 0
    if batch:
        backend.set_many(batch)


def _encode_part(part: pd.DataFrame, job: _Job) -> EncodedCells:
    """Encode the whole cells of one shuffled partition and write them (unless gathered)."""
    cols, n = job.columns, len(part)
    cells = job.cells()
    pos = part[cols.positions].to_numpy(dtype=cols.dtype)
    attrs = [s.conform(part[c].to_numpy(), n) for s, c in zip(job.specs, cols.attributes)]
    oids = None
    if cols.object_id is not None and job.ids is not None and job.oids is not None:
        ids = as_id_array(part[cols.object_id].to_numpy(), "object ids")
        oids = job.oids[np.searchsorted(job.ids, ids)]
    encoded = cells.encode(pos, attrs, oids)
    if job.dest is None:
        return encoded  # the client shards them (StoreBuilder.expect_cells)
    _write_items(job.dest, encoded.items if job.shards is None else shard_items(encoded.items, job.shards))
    return EncodedCells([], encoded.cells, encoded.rows, encoded.fragments)


@contextlib.contextmanager
def _session(
    target: Any, overwrite: bool, storage_options: dict[str, Any] | None
) -> Iterator[tuple[Backend, tuple[Any, ...] | None]]:
    """The backend the client finishes the store in, and where tasks write their chunks.

    Local targets are staged beside the target (tasks write into the staging folder) and
    swapped in on a clean exit. Remote URLs are written in place: a placeholder root first
    (readers refuse the store until the real root is written last), old keys deleted, then
    the tasks write. Memory URLs and zarr ``Store`` objects are not reachable from other
    processes: tasks return their chunks and the client writes them.
    """
    path = local_path(target)
    if path is None and not isinstance(target, Store):  # a URL
        backend: Backend = remote_backend(target, StorageOptions.parse(storage_options), False)
        if not backend.in_memory:
            check_in_place_target(backend, overwrite)
            backend.set_many([("zarr.json", placeholder_root())])
            stale = [k for k in backend.list_keys() if k != "zarr.json"]
            if stale:
                backend.delete_many(stale)
            yield backend, ("remote", os.fspath(target), storage_options)
            return
    with write_session(target, overwrite=overwrite, storage_options=storage_options) as staged:
        folder = staged.local_dir if path is not None else None
        yield staged, None if folder is None else ("local", str(folder))


def write_points(
    target: Any,
    data: Any,
    *,
    chunk_shape: Any,
    bounds: Any = None,
    bin_shape: Any = None,
    columns: Sequence[str] | None = None,
    object_id: str | None = "object_id",
    compression: str | None = "none",
    checksums: bool = False,
    shards: Any = "default",
    overwrite: bool = False,
    storage_options: dict[str, Any] | None = None,
    crs: Any = None,
    axes: Sequence[Any] | None = None,
    npartitions: int | None = None,
) -> Dataset:
    """Write a point cloud held in a Dask DataFrame or array, on the current Dask scheduler.

    The store answers every query as :func:`zarr_vectors.write_points` on the same rows
    would; within a cell the rows are in no defined order.

    Parameters
    ----------
    target
        A directory or ``.zip`` path (the workers must see the same file system) or a
        URL (``s3://`` ...; the workers write to it directly). ``memory://`` URLs and zarr
        ``Store`` objects work too, with every encoded chunk sent back to the client.
    data
        A Dask DataFrame: position columns (named by ``columns``, else by ``axes``, else
        ``x``, ``y`` and ``z`` when there is a ``z`` column), an optional ``object_id``
        column (integer object ids), and numeric columns, each stored as a vertex
        attribute. Or a Dask array (N, D) of positions (no attributes).
    chunk_shape, bounds, bin_shape, compression, checksums, shards, overwrite, storage_options, crs, axes
        As for :func:`zarr_vectors.write_points`. Default bounds: the data's extent,
        computed in one pass over the data. Sharded by default: the rows are shuffled by
        shard and each task writes whole shards (``"auto"`` sizes them from the rows' bytes
        per occupied cell, estimated before the shuffle); ``shards=None``: one object per cell.
    columns
        The position columns, one per axis (default axis names: the columns' names).
    object_id
        The column of object ids; ignored when the frame has none.
    npartitions
        Partitions after the shuffle by cell (default: as many as ``data`` has); each is
        one task that encodes and writes its cells.

    Returns
    -------
    Dataset
        The new store, opened for reading.

    Raises
    ------
    InputError
        Missing or non-numeric columns, positions outside ``bounds`` or not finite, an
        unknown compression.
    StoreExistsError
        ``target`` holds data and ``overwrite`` is false.
    """
    compressor_json(compression)  # an unknown name fails before any work
    frame, names, store_axes = _frame(data, columns, axes)
    cols = _columns(frame, names, object_id)
    options = StoreOptions(
        chunk_shape,
        bounds=bounds,
        bin_shape=bin_shape,
        axes=store_axes,
        crs=crs,
        compression=compression,
        checksums=checksums,
        overwrite=overwrite,
        storage_options=storage_options,
    )
    layout = None if bounds is None else make_layout(np.zeros((0, len(names)), cols.dtype), options)
    checked = None if layout is None else layout.bounds
    read = names if cols.object_id is None else [*names, cols.object_id]
    found = dask.compute(*[dask.delayed(_extent)(p, cols, checked) for p in frame[read].to_delayed()])
    rows = sum(n for n, _, _ in found)
    if layout is None:
        ext = [e for n, e, _ in found if n]
        extent = np.stack([np.min([e[0] for e in ext], 0), np.max([e[1] for e in ext], 0)]) if ext else None
        layout = make_layout(np.zeros((0, len(names)), cols.dtype) if extent is None else extent, options)
    specs = [
        AttributeSpec.of(a)
        for a in _inputs.vertex_attributes({c: np.zeros(0, frame.dtypes[c]) for c in cols.attributes}, 0)
    ]
    ids = oids = None
    if cols.object_id is not None:
        parts = [i for _, _, i in found if i is not None]
        ids = np.unique(np.concatenate(parts)) if parts else np.zeros(0, np.int64)
        tables = object_tables(dense_ids(ids), None, None, None)
        oids = tables.oids
    else:
        tables = object_tables(0, None, None, None)
    grid = layout.grid
    wanted = check_shards(shards, grid.ndim, target)
    row_bytes = cols.dtype.itemsize * grid.ndim + sum(
        np.dtype(frame.dtypes[c]).itemsize for c in cols.attributes
    )
    cell_bytes = row_bytes * rows / max(min(rows, int(np.prod(grid.shape))), 1)
    with _session(target, overwrite, storage_options) as (backend, dest):
        builder = StoreBuilder(backend, compression, checksums=checksums, shards=wanted)
        builder.size_shards(grid, cell_bytes)
        per_shard = builder.chunks_per_shard(grid)
        keyed = frame.map_partitions(_keyed, grid, layout.bounds, cols, per_shard)
        shuffled = keyed.shuffle(on=CELL_COLUMN, npartitions=npartitions or frame.npartitions)
        job = _Job(
            layout.grid,
            cols,
            specs,
            {k: builder.compressors(k) for k in ("data", "fragments")},
            objects=ids is not None,
            owners=tables.num_objects > 1,
            ids=ids,
            oids=oids,
            dest=dest,
            shards=per_shard,
        )
        job_key = dask.delayed(job, pure=True, traverse=False)
        tasks = [dask.delayed(_encode_part)(part, job_key) for part in shuffled.to_delayed()]
        encoded: list[EncodedCells] = list(dask.compute(*tasks))
        occupied = [group.cells for group in encoded]
        fragments = [group.fragments for group in encoded if group.fragments is not None]
        all_cells = np.concatenate(occupied) if occupied else np.zeros((0, len(names)), np.int64)
        order = np.argsort(np.ravel_multi_index(all_cells.T, tuple(int(s) for s in grid.shape)))
        builder.expect_cells(grid, all_cells[order])  # sharded: the docs, and shards of gathered cells
        for group in encoded:
            for key, value in group.items:
                builder.put(f"0/{key}", value)
        summary = ([all_cells[order]], fragments)
        finish_level(builder, layout, options, job.cells(), summary, tables, rows, cols.dtype)
    return api.open(target, storage_options=storage_options)


# -- reading ----------------------------------------------------------------------------
def _empty_frame(ds: Dataset, level: int) -> pd.DataFrame:
    """The columns (and dtypes) of :func:`to_dask`'s partitions."""
    lv = ds.level(level)
    out: dict[str, np.ndarray] = {a: np.zeros(0, lv.vertices.dtype) for a in ds.axes}
    for name, arr in lv.vertex_attributes.items():
        shape = arr.attrs.get("row_shape") or []
        if shape:
            out.update({f"{name}_{i}": np.zeros(0, arr.dtype) for i in range(int(np.prod(shape)))})
        else:
            out[name] = np.zeros(0, arr.dtype)
    if lv.manifests is not None:
        out["object_id"] = np.zeros(0, lv.object_id_map.dtype)
    return pd.DataFrame(out)


def _read_chunk(chunk: tuple[int, ...], ds: Dataset, level: int, lo: np.ndarray, hi: np.ndarray) -> Any:
    """The rows stored in one chunk of ``level`` with ``lo <= p <= hi``, as a DataFrame."""
    lv = ds.level(level)
    with_ids = lv.manifests is not None
    frag_idx = np.arange(1) if with_ids and lv.fragments is not None else np.zeros(0, np.int64)
    names = list(lv.vertex_attributes)
    cells, _ = fetch_cells(lv, np.asarray([chunk], np.int64), names, frag_idx, owners=with_ids)
    keep = np.all((cells.positions >= lo) & (cells.positions <= hi), axis=1)
    out: dict[str, np.ndarray] = {a: cells.positions[keep, i] for i, a in enumerate(ds.axes)}
    for name, values in cells.attributes.items():
        values = values[keep]
        if values.ndim == 1:
            out[name] = values
        else:
            flat = values.reshape(len(values), -1)
            out.update({f"{name}_{i}": flat[:, i] for i in range(flat.shape[1])})
    if with_ids:
        out["object_id"] = lv.object_id_map.to_user(row_owners(lv, cells)[keep])
    return pd.DataFrame(out)


def to_dask(
    dataset: Any,
    bbox: Any = None,
    *,
    level: int = 0,
    storage_options: dict[str, Any] | None = None,
) -> Any:
    """The vertices of ``level`` (those with ``lo <= p <= hi`` given ``bbox=(lo, hi)``) as a
    Dask DataFrame with one partition per occupied chunk the box meets, in chunk order.

    Columns: the axis names, one per vertex attribute (``name_0``, ``name_1``, ... for each
    channel of a multi-channel one) and ``object_id`` (the user's ids) when the level has
    objects. Each partition is read by a task that reads only its chunk's cells, so every
    stored row appears once; within a chunk rows keep their stored order.

    Parameters
    ----------
    dataset
        A :class:`~zarr_vectors.Dataset`, or a path or URL to open (with ``storage_options``).
        Workers must reach the store (a shared file system, or object storage).
    bbox
        ``(lo, hi)`` inclusive corners; None reads the whole level.
    level
        The level to read.
    """
    ds = dataset if isinstance(dataset, Dataset) else api.open(dataset, storage_options=storage_options)
    lv = ds.level(level)
    if bbox is None:
        lo, hi = np.full(ds.ndim, -np.inf), np.full(ds.ndim, np.inf)
    else:
        lo, hi = parse_box(bbox, ds.ndim, ds.axes)
    plan = plan_box(lv, lo, hi)
    chunks = np.concatenate([plan.full, plan.partial])
    shape = tuple(int(s) for s in lv.grid.shape)
    chunks = chunks[np.argsort(np.ravel_multi_index((chunks - lv.grid.origin).T, shape))]
    meta = _empty_frame(ds, level)
    if not len(chunks):
        return dd.from_pandas(meta, npartitions=1)
    parts = [tuple(int(v) for v in c) for c in chunks]
    return dd.from_map(
        _read_chunk, parts, ds=ds, level=level, lo=lo, hi=hi, meta=meta, enforce_metadata=False
    )
