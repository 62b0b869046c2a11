"""Skeletons written batch by batch in bounded memory: :class:`SkeletonStream`, and
:func:`write_skeleton`, the same writer given every tree at once.

The store is the one :func:`~zarr_vectors.kinds.skeletons.write_skeleton` writes from the
concatenated batches (each batch's parent indices shifted to that numbering). Whether a
vertex continues its fragment, and whether its parent edge is explicit, inside one chunk
or across chunks, is decided from its own batch (a parent lies in its child's batch), so
each batch is keyed as it comes; fragments, rows and links are built at ``close`` a group
of whole cells at a time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from zarr_vectors.engine import (
    DEFAULT_MEMORY_LIMIT,
    OBJECT_ID_META,
    GroupCells,
    LinkedStream,
    Partition,
    StoreBuilder,
    StoreOptions,
    SweepContext,
    cell_indices,
    cells_of,
    fragment_owner_payloads,
    fragment_payloads,
    grid_of,
    row_payloads,
)
from zarr_vectors.engine import inputs as _inputs
from zarr_vectors.errors import InputError
from zarr_vectors.format.grid import Grid
from zarr_vectors.format.links import encode_ragged, parse_offsets, place_links
from zarr_vectors.kinds.graphs import intra_payloads, vertex_locals
from zarr_vectors.kinds.skeletons import check_parents, continues, runs_partition, tree_roots

__all__ = ["SkeletonStream", "write_skeleton"]

_CONT, _INTRA = np.uint8(1), np.uint8(2)  # flags: continues its fragment; explicit parent in its chunk


def _links_meta(ctx: SweepContext) -> dict[str, Any]:
    return {"zv_array": "links", "dtype": ctx.index_dtype.name, "link_width": 2, "level_delta": 0}


class SkeletonStream(LinkedStream):
    """Trees given in batches: ``append(positions, parents, attributes=, object_ids=)`` as for
    :func:`zarr_vectors.write_skeleton`, with each batch's parents indexing its own rows.

    Without ``object_ids`` each tree is an object, numbered in root order across batches.
    """

    geometry_type: ClassVar[str] = "skeleton"
    links_convention: ClassVar[str] = "implicit_sequential_with_branches"
    kind_name: ClassVar[str] = "skeletons"
    #: Endpoint order of a cross-chunk record: (child, parent), or (parent, child) for lines.
    child_first: ClassVar[bool] = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._roots = 0
        self._intra = 0

    def append(
        self,
        positions: Any,
        parents: Any,
        *,
        attributes: Mapping[str, Any] | None = None,
        object_ids: Any = None,
        **unknown: Any,
    ) -> None:
        """Add whole trees: ``parents[i]`` is vertex i's parent row in this batch, -1 for a root."""
        self._per_batch(unknown, ("attributes", "object_ids"))
        self._require_open()
        pos = self._positions(positions)
        n = len(pos)
        par = check_parents(parents, n)
        roots = tree_roots(par)
        ids = self._given_ids(object_ids, n)
        if ids is None:
            ids = self._roots + np.searchsorted(np.flatnonzero(par < 0), roots).astype(np.int64)
        mixed = np.flatnonzero((par >= 0) & (ids[np.maximum(par, 0)] != ids))
        if len(mixed):
            v = int(mixed[0])
            raise InputError(
                f"vertex {v} (object {int(ids[v])}) of this batch has parent {int(par[v])} "
                f"in object {int(ids[par[v]])}"
            )
        columns = self._attributes(attributes, n)
        self._queue({"positions": pos, "ids": ids, "parents": par, **columns})
        self._roots += int(np.count_nonzero(par < 0))

    def _columns(
        self, batch: dict[str, np.ndarray], cell: np.ndarray, vertex: np.ndarray
    ) -> tuple[dict[str, np.ndarray], tuple[np.ndarray, ...] | None]:
        par = batch["parents"]
        has = par >= 0
        pcell = cell[np.maximum(par, 0)]
        cont = continues(par, batch["ids"], cell)
        explicit = has & ~cont
        flags = np.where(cont, _CONT, 0).astype(np.uint8) | np.where(
            explicit & (pcell == cell), _INTRA, 0
        ).astype(np.uint8)
        cross = np.flatnonzero(explicit & (pcell != cell))
        parent = np.where(has, vertex[np.maximum(par, 0)], -1)
        ends = [cross, par[cross]] if self.child_first else [par[cross], cross]
        child_parent = np.stack(ends, axis=1)
        links = (
            vertex[cross],
            vertex[child_parent],
            cell[child_parent],
            np.minimum(cell[cross], pcell[cross]),
        )
        return {"parent": parent, "flags": flags}, links

    def _metas(self, ctx: SweepContext) -> dict[str, tuple[Any, ...]]:
        d = ctx.grid.ndim
        out: dict[str, tuple[Any, ...]] = {
            "vertices": (
                {"zv_array": "vertices", "dtype": ctx.position_dtype.name, "encoding": "raw"},
                "data",
            ),
            "vertex_fragments": (
                {"zv_array": "vertex_fragments", "encoding": "fragment_index_v1"},
                "fragments",
            ),
            f"links/0/{'.'.join(['0'] * d)}": (
                {**_links_meta(ctx), "offsets": [[0] * d], "has_perm": False},
                "links",
            ),
            "link_fragments": ({"zv_array": "link_fragments", "encoding": "fragment_index_v1"}, "fragments"),
            "fragment_attributes/object_id": (dict(OBJECT_ID_META), "data"),
        }
        for spec in ctx.specs:
            out[f"vertex_attributes/{spec.name}"] = (spec.meta(), "data")
        return out

    def _runs(
        self, lin: np.ndarray, oids: np.ndarray, vertex: np.ndarray, cont: np.ndarray, grid: Grid
    ) -> Partition:
        """A group's rows by (cell, object, vertex number), in fragments (:func:`runs_partition`)."""
        return runs_partition(lin, oids, vertex, cont, grid)

    def _segment_meta(self, ctx: SweepContext, segment: str, has_perm: bool) -> dict[str, Any]:
        """The metadata of ``links/0/<segment>``."""
        return {
            **_links_meta(ctx),
            "offsets": parse_offsets(segment, 2, ctx.grid.ndim).tolist(),
            "has_perm": has_perm,
        }

    def _encode(self, rows: dict[str, np.ndarray], ctx: SweepContext, lo: int, hi: int) -> GroupCells:
        grid = ctx.grid
        pos, vertex = rows["positions"], rows["vertex"]
        oids = ctx.oids(rows["ids"])
        lin = cell_indices(pos, grid)
        part = self._runs(lin, oids, vertex, (rows["flags"] & _CONT).astype(bool), grid)
        cells = part.cells
        arrays: dict[str, tuple[np.ndarray, list[bytes]]] = {
            "vertices": (cells, list(row_payloads(pos, part))),
            "vertex_fragments": (cells, fragment_payloads(part)),
        }
        for i, spec in enumerate(ctx.specs):
            arrays[f"vertex_attributes/{spec.name}"] = (cells, list(row_payloads(rows[f"a{i}"], part)))
        assert part.frag_object is not None
        if ctx.num_objects > 1:
            owners = fragment_owner_payloads(part.frag_cell, part.frag_local, part.frag_object, len(cells))
            arrays["fragment_attributes/object_id"] = (cells, owners)
        cell, local, frag = vertex_locals(part)
        by_vertex = np.argsort(vertex, kind="stable")
        child = np.flatnonzero(rows["flags"] & _INTRA)
        if len(child):
            child = child[np.argsort(vertex[child], kind="stable")]
            parent = by_vertex[np.searchsorted(vertex[by_vertex], rows["parent"][child])]
            at, link_rows, link_frags, _ = intra_payloads(
                part, cell, local, frag, np.stack([child, parent], axis=1), ctx.index_dtype
            )
            arrays[f"links/0/{'.'.join(['0'] * grid.ndim)}"] = (cells[at], link_rows)
            arrays["link_fragments"] = (cells[at], link_frags)
        first = part.order[part.row_offsets[part.frag_cell] + part.frag_start]
        linear = lin[part.order[part.row_offsets[:-1]]]
        fragments = (part.frag_object, vertex[first], linear[part.frag_cell], part.frag_local)
        return GroupCells(arrays, fragments, vertex[by_vertex], lin[by_vertex], local[by_vertex], len(child))

    def _took(self, group: GroupCells) -> None:
        self._intra += group.intra

    def _cross(
        self, record: np.ndarray, cell: np.ndarray, local: np.ndarray, ctx: SweepContext, lo: int, hi: int
    ) -> dict[str, tuple[dict[str, Any], str, np.ndarray, list[bytes]]]:
        grid = ctx.grid
        d = grid.ndim
        chunks = cells_of(cell.reshape(-1), grid).reshape(-1, 2, d) + grid.origin
        placed = place_links(chunks, local, directed=False, store="canonical")
        out: dict[str, tuple[dict[str, Any], str, list[np.ndarray], list[bytes]]] = {}
        for lc in placed.cells():
            meta = self._segment_meta(ctx, lc.segment, lc.has_perm)
            _, _, cells, payloads = out.setdefault(f"links/0/{lc.segment}", (meta, "links", [], []))
            cells.append(np.asarray(lc.chunk) - grid.origin)
            payloads.append(encode_ragged([lc.rows], ctx.index_dtype))
        return {k: (m, kind, np.asarray(c).reshape(-1, d), p) for k, (m, kind, c, p) in out.items()}

    def _link_groups(self, builder: StoreBuilder, ctx: SweepContext) -> list[str]:
        total = self._intra + self._links.count
        if not total:
            return []
        builder.group("0/links")
        builder.group(
            "0/links/0",
            {
                "zv_array": "links_family",
                "level_delta": 0,
                "link_width": 2,
                "sid_ndim": ctx.grid.ndim,
                "directed": False,
                "store": "canonical",
                "num_links": total,
                "num_physical_records": total,
            },
        )
        return ["links", "link_fragments"] if self._intra else ["links"]


def write_skeleton(
    target: Any,
    positions: Any,
    parents: Any,
    *,
    chunk_shape: Any = "auto",
    object_ids: Any = None,
    bounds: Any = None,
    attributes: Mapping[str, Any] | None = None,
    channel_names: Mapping[str, Sequence[str]] | None = None,
    object_attributes: Mapping[str, Any] | None = None,
    groups: Any = None,
    group_attributes: Mapping[str, Any] | None = None,
    group_names: Sequence[str] | None = None,
    axes: Sequence[Any] | None = None,
    units: str | None = None,
    crs: Any = None,
    compression: str | None = "none",
    checksums: bool = False,
    shards: Any = "default",
    overwrite: bool = False,
    storage_options: dict[str, Any] | None = None,
    workers: int | None = None,
) -> None:
    """Write one or many trees: ``parents[i]`` is vertex i's parent index, -1 for a root.

    Reads return ``Result.parents`` (row of each row's parent, -1 for a root or a parent
    outside the result) and ``Result.edges`` as ``(parent, child)`` rows.

    Parameters
    ----------
    target
        Where to write, as in :func:`zarr_vectors.write_points`.
    positions
        (N, D) finite vertex coordinates.
    parents
        (N,) parent index of every vertex, -1 for a root; no cycles.
    chunk_shape
        Edge length of a spatial chunk: one number or one per axis, or ``"auto"`` (the
        default): cubes sized from the data so that each non-empty chunk holds about 16,384
        vertices on average (see ``docs/writing.md``).
    object_ids
        One object per vertex, int64 or uint64 ids of any value such as segment ids
        (default: one object per tree, numbered by root order). An object may hold several
        trees, but a parent must belong to its child's object.
    bounds
        Inclusive ``(lo, hi)`` corners; every vertex must lie inside. Default: the data's extent.
    attributes
        name -> per-vertex values; typical are ``radius`` and ``type``.
    channel_names
        Optional channel names per attribute: name -> one name per channel.
    object_attributes
        name -> values that follow the distinct ids in ascending order, or a mapping
        ``{id: value}``.
    groups
        Groups of object ids: a list of lists, or a mapping group id -> ids (group ids of any
        integer value).
    group_attributes
        Per-group values: one per group in ascending group id, or a mapping ``{group id: value}``.
    group_names
        Optional names of the groups, one per group (read back by :meth:`Dataset.group_names`).
    axes
        Axis names, or ``{"name", "unit"}`` dicts.
    units
        A default unit for the axes.
    crs
        A coordinate reference system: an EPSG code, WKT2, PROJJSON or ``pyproj.CRS`` (see
        :func:`zarr_vectors.geo.parse_crs`); a dict of other keys is stored as an opaque record.
    compression
        ``"none"`` (the format's default), ``"zstd"``, ``"gzip"``, ``"blosc"``, ``"lz4"``, ``"zlib"``,
        ``"bz2"``, ``"lzma"`` or ``"numcodecs.<id>"`` (see ``docs/writing.md``).
    checksums
        Append Zarr's ``crc32c`` codec to every array, so a changed byte in any cell is a
        :class:`~zarr_vectors.errors.CorruptCellError` on read (and a problem in ``validate``).
    shards
        Group the cells of every per-chunk array into ``sharding_indexed`` shards, one stored
        object each: ``"auto"`` (the default, on every backend: sized from the grid so that a
        1 % local append rewrites about 5 % of the store), chunks per shard (one integer, or
        one per axis), or None / ``"none"`` (one object per cell); see ``docs/writing.md``.
    overwrite
        Replace an existing store. Local and zip targets are swapped in only once complete.
    storage_options
        Options for fsspec and the storage layer, as for :func:`zarr_vectors.open`.
    workers
        Worker processes (threads where ``fork`` is unavailable) that build and compress
        groups of whole cells (default: every core); the store does not depend on it.

    Returns
    -------
    Dataset
        The new store, opened for reading.

    Raises
    ------
    InputError
        Malformed input: parents out of range or forming a cycle, a parent in another
        object than its child, and the input errors of :func:`zarr_vectors.write_points`.
    StoreExistsError
        ``target`` holds data and ``overwrite`` is false.

    Examples
    --------
    >>> import zarr_vectors as zv
    >>> positions = [[0, 0, 0], [1, 0, 0], [2, 0, 0], [1, 1, 0], [5, 5, 5], [6, 5, 5]]
    >>> parents = [-1, 0, 1, 1, -1, 4]
    >>> ds = zv.write_skeleton(
    ...     "memory://doc-skeleton", positions, parents, chunk_shape=2,
    ...     attributes={"radius": [1.0, 0.5, 0.5, 0.25, 1.0, 1.0]},
    ... )
    >>> ds.object_ids().tolist()
    [0, 1]
    >>> tree = ds.objects([0])
    >>> tree.parents.tolist(), tree.edges.tolist()
    ([-1, 0, 1, 1], [[0, 1], [1, 2], [1, 3]])
    """
    pos = _inputs.positions_array(positions, _inputs.call_ndim(chunk_shape, bounds, axes))
    options = StoreOptions(
        chunk_shape,
        bounds=bounds,
        axes=axes,
        units=units,
        crs=crs,
        compression=compression,
        checksums=checksums,
        shards=shards,
        overwrite=overwrite,
        storage_options=storage_options,
    )
    with SkeletonStream(
        target,
        grid_of(pos, options),
        channel_names=channel_names,
        object_attributes=object_attributes,
        groups=groups,
        group_attributes=group_attributes,
        group_names=group_names,
        memory_limit=DEFAULT_MEMORY_LIMIT,
        workers=workers,
    ) as stream:
        stream.append(pos, parents, attributes=attributes, object_ids=object_ids)
