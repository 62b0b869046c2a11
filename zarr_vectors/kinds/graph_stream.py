"""Graphs written batch by batch in bounded memory: :class:`GraphStream`, and
:func:`write_graph`, the same writer given the whole graph at once.

The store is the one :func:`~zarr_vectors.kinds.graphs.write_graph` writes from the
concatenated batches (each batch's edge indices shifted to that numbering). An edge whose
two vertices share a chunk waits keyed by that chunk and is written with it; an edge across
chunks goes through the shared :class:`~zarr_vectors.engine.write.linkjoin.LinkJoin`, its
edge attributes waiting at its home chunk. Vertices may belong to objects that span
batches (the default is one object, 0, for every vertex).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from zarr_vectors.engine import (
    DEFAULT_MEMORY_LIMIT,
    OBJECT_ID_META,
    AttributeSpec,
    GroupCells,
    LinkedStream,
    StoreBuilder,
    StoreOptions,
    SweepContext,
    cells_of,
    fragment_owner_payloads,
    fragment_payloads,
    grid_of,
    partition,
    row_payloads,
)
from zarr_vectors.engine import inputs as _inputs
from zarr_vectors.errors import InputError
from zarr_vectors.format.links import encode_ragged, parse_offsets, place_links
from zarr_vectors.kinds.graphs import edge_array, intra_payloads, vertex_locals

__all__ = ["GraphStream", "write_graph"]


class GraphStream(LinkedStream):
    """A graph given in batches: ``append(positions, edges, attributes=, object_ids=,
    edge_attributes=)`` as for :func:`zarr_vectors.write_graph`, each batch's edges indexing
    its own rows. ``directed`` is given once, to :func:`zarr_vectors.create`."""

    geometry_type: ClassVar[str] = "graph"
    links_convention: ClassVar[str] = "explicit"
    kind_name: ClassVar[str] = "graphs"
    create_keywords: ClassVar[tuple[str, ...]] = ("directed",)

    def __init__(self, *args: Any, directed: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.directed = bool(directed)
        self._intra = self._spill(16)  # edges inside one chunk, by that chunk
        self._cross_values = self._spill(16)  # edge attributes of cross-chunk edges, by home chunk
        self._edge_specs: list[AttributeSpec] | None = None
        self._edges = 0  # edges appended
        self._keyed_edges = 0  # edges keyed by cell
        self._intra_count = 0  # edges inside one chunk, written

    def append(
        self,
        positions: Any,
        edges: Any,
        *,
        attributes: Mapping[str, Any] | None = None,
        object_ids: Any = None,
        edge_attributes: Mapping[str, Any] | None = None,
        **unknown: Any,
    ) -> None:
        """Add vertices and the edges between them (``edges`` index this batch's rows)."""
        self._per_batch(unknown, ("attributes", "object_ids", "edge_attributes"))
        self._require_open()
        self._add(self._positions(positions), edges, attributes, object_ids, edge_attributes)

    def _add(
        self,
        pos: np.ndarray,
        records: Any,
        attributes: Mapping[str, Any] | None,
        object_ids: Any,
        edge_attributes: Mapping[str, Any] | None,
    ) -> None:
        """Check and queue a batch of vertices and records (edges, faces) indexing them."""
        n = len(pos)
        e = self._records(records, n)
        values = self._edge_values(edge_attributes, len(e))
        given = self._given_ids(object_ids, n)
        columns = self._attributes(attributes, n)
        ids = np.zeros(n, np.int64) if given is None else given
        self._check_objects(e, ids)
        self._queue({"positions": pos, "ids": ids, "edges": e, **columns, **values})
        self._edges += len(e)

    def _records(self, records: Any, n: int) -> np.ndarray:
        """A batch's records checked: (E, 2) edges of vertices in ``[0, n)``."""
        return edge_array(records, n)

    def _check_objects(self, records: np.ndarray, ids: np.ndarray) -> None:
        """Refuse records joining objects (an edge may join two objects: nothing to refuse)."""

    def _edge_values(self, given: Mapping[str, Any] | None, count: int) -> dict[str, np.ndarray]:
        """A batch's edge attributes as columns ``e0, e1, ...``; the first batch fixes them."""
        if self._edge_specs is None:
            named = _inputs.vertex_attributes(given, count, what="edge attribute")
            self._edge_specs = [AttributeSpec.of(a) for a in named]
            return {f"e{i}": a.values for i, a in enumerate(named)}
        names = [s.name for s in self._edge_specs]
        if sorted(given or {}) != sorted(names):
            raise InputError(
                f"this batch has edge attributes {sorted(given or {})} but the first batch had "
                f"{sorted(names)}; every batch must give the same edge attributes"
            )
        return {f"e{i}": s.conform(dict(given or {})[s.name], count) for i, s in enumerate(self._edge_specs)}

    def _columns(
        self, batch: dict[str, np.ndarray], cell: np.ndarray, vertex: np.ndarray
    ) -> tuple[dict[str, np.ndarray], tuple[np.ndarray, ...] | None]:
        e = batch["edges"]
        record = self._keyed_edges + np.arange(len(e), dtype=np.int64)
        self._keyed_edges += len(e)
        values = {k: v for k, v in batch.items() if k[0] == "e" and k[1:].isdigit()}
        ends = cell[e]
        same = np.all(ends == ends[:, :1], axis=1)
        self._intra.add(
            ends[same, 0],
            {"record": record[same], "ends": vertex[e[same]]} | {k: v[same] for k, v in values.items()},
        )
        cross = ~same
        home = ends[cross, 0] if self.directed else ends[cross].min(axis=1)
        if values:
            self._cross_values.add(home, {"record": record[cross]} | {k: v[cross] for k, v in values.items()})
        return {}, (record[cross], vertex[e[cross]], ends[cross], home)

    def _metas(self, ctx: SweepContext) -> dict[str, tuple[Any, ...]]:
        d = ctx.grid.ndim
        intra = self._intra_segment(d)
        out: dict[str, tuple[Any, ...]] = {
            "vertices": (
                {"zv_array": "vertices", "dtype": ctx.position_dtype.name, "encoding": "raw"},
                "data",
            ),
            "vertex_fragments": (
                {"zv_array": "vertex_fragments", "encoding": "fragment_index_v1"},
                "fragments",
            ),
            f"links/0/{intra}": (self._links_meta(ctx, intra, False), "links"),
            "link_fragments": ({"zv_array": "link_fragments", "encoding": "fragment_index_v1"}, "fragments"),
            "fragment_attributes/object_id": (dict(OBJECT_ID_META), "data"),
        }
        for spec in ctx.specs:
            out[f"vertex_attributes/{spec.name}"] = (spec.meta(), "data")
        for spec in self._edge_specs or []:
            out[f"link_attributes/{spec.name}/0/{intra}"] = (self._value_meta(spec, intra, d), "data")
        return out

    def _intra_segment(self, d: int) -> str:
        """The name of the flat array of records inside one chunk (``0.0.0``, ``0.0.0_0.0.0``)."""
        return "_".join([".".join(["0"] * d)] * (self.width - 1))

    def _links_meta(self, ctx: SweepContext, segment: str, has_perm: bool) -> dict[str, Any]:
        d = ctx.grid.ndim
        return {
            "zv_array": "links",
            "dtype": ctx.index_dtype.name,
            "link_width": self.width,
            "level_delta": 0,
            "offsets": parse_offsets(segment, self.width, d).tolist(),
            "has_perm": has_perm,
        }

    def _value_meta(self, spec: AttributeSpec, segment: str, d: int) -> dict[str, Any]:
        return {
            "zv_array": "link_attribute",
            "name": spec.name,
            "dtype": spec.dtype.name,
            "row_shape": list(spec.row_shape),
            "offsets": parse_offsets(segment, self.width, d).tolist(),
            "level_delta": 0,
        }

    def _encode(self, rows: dict[str, np.ndarray], ctx: SweepContext, lo: int, hi: int) -> GroupCells:
        grid = ctx.grid
        by_vertex = np.argsort(rows["vertex"], kind="stable")  # the one-shot writer's input order
        vertex, pos = rows["vertex"][by_vertex], rows["positions"][by_vertex]
        part = partition(pos, grid, ctx.oids(rows["ids"][by_vertex]))
        cells = part.cells
        arrays: dict[str, tuple[np.ndarray, list[bytes]]] = {
            "vertices": (cells, list(row_payloads(pos, part))),
            "vertex_fragments": (cells, fragment_payloads(part)),
        }
        for i, spec in enumerate(ctx.specs):
            values = rows[f"a{i}"][by_vertex]
            arrays[f"vertex_attributes/{spec.name}"] = (cells, list(row_payloads(values, part)))
        assert part.frag_object is not None
        if ctx.num_objects > 1:
            owners = fragment_owner_payloads(part.frag_cell, part.frag_local, part.frag_object, len(cells))
            arrays["fragment_attributes/object_id"] = (cells, owners)
        cell, local, frag = vertex_locals(part)
        linear = np.ravel_multi_index(tuple(cells.T), tuple(int(s) for s in grid.shape)).astype(np.int64)
        intra = self._intra_cells(arrays, part, (cell, local, frag), vertex, ctx, lo, hi)
        zero = np.zeros(len(part.frag_cell), np.int64)
        fragments = (part.frag_object, zero, linear[part.frag_cell], part.frag_local)
        return GroupCells(arrays, fragments, vertex, linear[cell], local, intra)

    def _took(self, group: GroupCells) -> None:
        self._intra_count += group.intra

    def _intra_cells(
        self,
        arrays: dict[str, tuple[np.ndarray, list[bytes]]],
        part: Any,
        where: tuple[np.ndarray, np.ndarray, np.ndarray],
        vertex: np.ndarray,
        ctx: SweepContext,
        lo: int,
        hi: int,
    ) -> int:
        """The flat link cells (and their edge attributes) of the edges inside cells ``lo..hi``;
        returns how many edges those are."""
        edges = self._intra.read(lo, hi)
        if not edges or not len(edges["record"]):
            return 0
        order = np.argsort(edges["record"], kind="stable")
        ends = np.searchsorted(vertex, edges["ends"][order])
        at, link_rows, link_frags, records = intra_payloads(part, *where, ends, ctx.index_dtype)
        intra = self._intra_segment(ctx.grid.ndim)
        arrays[f"links/0/{intra}"] = (part.cells[at], link_rows)
        arrays["link_fragments"] = (part.cells[at], link_frags)
        for i, spec in enumerate(self._edge_specs or []):
            values = edges[f"e{i}"][order]
            arrays[f"link_attributes/{spec.name}/0/{intra}"] = (
                part.cells[at],
                [values[r].tobytes() for r in records],
            )
        return len(ends)

    def _cross(
        self, record: np.ndarray, cell: np.ndarray, local: np.ndarray, ctx: SweepContext, lo: int, hi: int
    ) -> dict[str, tuple[dict[str, Any], str, np.ndarray, list[bytes]]]:
        grid = ctx.grid
        d = grid.ndim
        chunks = cells_of(cell.reshape(-1), grid).reshape(-1, self.width, d) + grid.origin
        placed = place_links(chunks, local, directed=self.directed, store="canonical")
        values: dict[str, np.ndarray] = {}
        if self._edge_specs:
            waiting = self._cross_values.read(lo, hi)
            order = np.argsort(waiting["record"], kind="stable")
            values = {k: v[order] for k, v in waiting.items() if k != "record"}
        out: dict[str, tuple[dict[str, Any], str, list[np.ndarray], list[bytes]]] = {}
        for lc in placed.cells():
            chunk = np.asarray(lc.chunk) - grid.origin
            meta = self._links_meta(ctx, lc.segment, lc.has_perm)
            _, _, cells, payloads = out.setdefault(f"links/0/{lc.segment}", (meta, "links", [], []))
            cells.append(chunk)
            payloads.append(encode_ragged([lc.rows], ctx.index_dtype))
            for i, spec in enumerate(self._edge_specs or []):
                path = f"link_attributes/{spec.name}/0/{lc.segment}"
                vmeta = self._value_meta(spec, lc.segment, d)
                _, _, vcells, vpayloads = out.setdefault(path, (vmeta, "data", [], []))
                vcells.append(chunk)
                vpayloads.append(values[f"e{i}"][lc.records].tobytes())
        return {k: (m, kind, np.asarray(c).reshape(-1, d), p) for k, (m, kind, c, p) in out.items()}

    def _link_groups(self, builder: StoreBuilder, ctx: SweepContext) -> list[str]:
        builder.group("0/links")
        builder.group(
            "0/links/0",
            {
                "zv_array": "links_family",
                "level_delta": 0,
                "link_width": self.width,
                "sid_ndim": ctx.grid.ndim,
                "directed": self.directed,
                "store": "canonical",
                "num_links": self._stored(),
                "num_physical_records": self._stored(),
            },
        )
        specs = self._edge_specs or []
        if specs:
            builder.group("0/link_attributes")
        for spec in specs:
            base = f"0/link_attributes/{spec.name}"
            builder.group(base)
            builder.group(
                f"{base}/0", {"zv_array": "link_attribute_family", "name": spec.name, "level_delta": 0}
            )
        return self._present(bool(specs))

    def _stored(self) -> int:
        """The records the links family holds."""
        return self._edges

    def _present(self, values: bool) -> list[str]:
        """The link families of ``arrays_present``, as the one-shot writer lists them."""
        if not self._edges:
            return []
        return ["links", "link_fragments"] + (["link_attributes"] if values else [])


def write_graph(
    target: Any,
    positions: Any,
    edges: Any,
    *,
    chunk_shape: Any = "auto",
    directed: bool = False,
    bounds: Any = None,
    attributes: Mapping[str, Any] | None = None,
    channel_names: Mapping[str, Sequence[str]] | None = None,
    edge_attributes: Mapping[str, Any] | None = None,
    object_ids: Any = None,
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
    """Write a graph: vertices ``positions`` (N, D) and ``edges`` (E, 2) of vertex indices.

    Queries return the edges whose two vertices are both in the result, as rows of
    ``Result.edges``, with their ``edge_attributes``.

    Parameters
    ----------
    target
        Where to write, as in :func:`zarr_vectors.write_points`.
    positions
        (N, D) finite vertex coordinates.
    edges
        (E, 2) integer vertex indices, each in ``[0, N)``.
    chunk_shape
        Edge length of a spatial chunk: one number or one per axis, or ``"auto"`` (the
        default): cubes sized from the data so that each non-empty chunk holds about 16,384
        vertices on average (see ``docs/writing.md``).
    directed
        Keep each edge's direction as given. Undirected edges come back in the order
        given too (through ``perm_idx``).
    bounds
        Inclusive ``(lo, hi)`` corners; every vertex must lie inside. Default: the data's extent.
    attributes
        Per-vertex values, name -> (N,) or (N, C) array.
    channel_names
        Optional channel names per attribute: name -> one name per channel.
    edge_attributes
        name -> one value (or row) per edge, stored in ``link_attributes``.
    object_ids
        One object per vertex, int64 or uint64 ids of any value; default every vertex in
        object 0.
    object_attributes
        name -> one row per distinct object id in ascending order, or a mapping ``{id: value}``, as
        in :func:`zarr_vectors.write_points`.
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
        Malformed input: edges that are not (E, 2) or name a vertex out of range, edge
        attributes without one row per edge, and the input errors of
        :func:`zarr_vectors.write_points`.
    StoreExistsError
        ``target`` holds data and ``overwrite`` is false.

    Examples
    --------
    >>> import zarr_vectors as zv
    >>> positions = [[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [5.0, 5.0]]
    >>> edges = [[0, 1], [1, 2], [2, 3]]
    >>> ds = zv.write_graph(
    ...     "memory://doc-graph", positions, edges, chunk_shape=2,
    ...     edge_attributes={"weight": [0.5, 1.5, 2.5]},
    ... )
    >>> res = ds.query(bbox=([0, 0], [1, 1]))
    >>> res.positions.tolist(), res.edges.tolist(), res.edge_attributes["weight"].tolist()
    ([[0.0, 0.0], [1.0, 0.0], [1.0, 1.0]], [[0, 1], [1, 2]], [0.5, 1.5])
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
    with GraphStream(
        target,
        grid_of(pos, options),
        directed=directed,
        channel_names=channel_names,
        object_attributes=object_attributes,
        groups=groups,
        group_attributes=group_attributes,
        group_names=group_names,
        memory_limit=DEFAULT_MEMORY_LIMIT,
        workers=workers,
    ) as stream:
        stream.append(
            pos, edges, attributes=attributes, object_ids=object_ids, edge_attributes=edge_attributes
        )
