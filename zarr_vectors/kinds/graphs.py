"""Graphs with explicit edges: ``write_graph``.

Vertices are stored as for points (one range fragment per object and chunk).
An edge whose two vertices share a chunk is a flat row of ``links/0/0.0.0`` in
that chunk's cell, and ``link_fragments`` groups those rows by the vertex fragment
of their first endpoint. An edge across chunks is a record of ``links/0/<offsets>``
placed by the family policy: undirected graphs use ``canonical`` with a ``perm_idx``
column that restores the input endpoint order; directed graphs keep input order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from zarr_vectors.engine import (
    LevelArrays,
    Partition,
    StoreBuilder,
    StoreOptions,
    build_manifests,
    dense_ids,
    fragment_payloads,
    make_layout,
    object_tables,
    partition,
    partition_owners,
    write_level0,
)
from zarr_vectors.engine import inputs as _inputs
from zarr_vectors.errors import InputError
from zarr_vectors.format.fragments import FragmentIndex, encode_fragments
from zarr_vectors.format.grid import Grid
from zarr_vectors.format.links import (
    encode_flat_rows,
    encode_ragged,
    parse_offsets,
    place_links,
    smallest_index_dtype,
)

__all__ = ["write_graph", "write_edges", "vertex_locals"]


def edge_array(edges: Any, n: int) -> np.ndarray:
    """(E, 2) int64 vertex indices, each in ``[0, n)``."""
    arr = np.asarray(edges)
    if arr.size == 0:
        return np.zeros((0, 2), np.int64)
    if arr.ndim != 2 or arr.shape[1] != 2 or arr.dtype.kind not in "iu":
        raise InputError(
            f"edges must be an (E, 2) integer array of vertex indices, got shape {arr.shape} {arr.dtype}"
        )
    arr = arr.astype(np.int64)
    bad = np.flatnonzero(np.any((arr < 0) | (arr >= n), axis=1))
    if len(bad):
        raise InputError(
            f"edge {int(bad[0])} {arr[bad[0]].tolist()} names a vertex outside [0, {n}) (the positions given)"
        )
    return arr


def vertex_locals(part: Partition) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For every input vertex: its position in ``part.cells``, its row in that cell, its fragment.

    Relies on the partition's fragments tiling each cell's rows in order.
    """
    n = len(part.order)
    cell_of_row = np.repeat(np.arange(len(part.cells)), np.diff(part.row_offsets))
    cell = np.empty(n, np.int64)
    cell[part.order] = cell_of_row
    local = np.empty(n, np.int64)
    local[part.order] = np.arange(n) - part.row_offsets[cell_of_row]
    frag = np.empty(n, np.int64)
    frag[part.order] = np.repeat(part.frag_local, part.frag_count)
    return cell, local, frag


def intra_payloads(
    part: Partition, cell: np.ndarray, local: np.ndarray, frag: np.ndarray, edges: np.ndarray, dtype: np.dtype
) -> tuple[list[int], list[bytes], list[bytes], list[np.ndarray]]:
    """Flat ``0.0.0`` cells, their ``link_fragments`` cells, and which of ``edges`` each cell's
    rows are (in row order), for the chunks that have intra edges."""
    a_cell = cell[edges[:, 0]]
    order = np.lexsort((frag[edges[:, 0]], a_cell))  # by cell, then the first endpoint's fragment
    e, c = edges[order], a_cell[order]
    bounds = np.flatnonzero(np.r_[True, c[1:] != c[:-1], True])
    cells, rows_out, frag_out, records = [], [], [], []
    for s, t in zip(bounds[:-1], bounds[1:]):
        k = int(c[s])
        rows = local[e[s:t]]
        f_of = frag[e[s:t, 0]]
        n_frag = int(part.cell_frag_offsets[k + 1] - part.cell_frag_offsets[k])
        counts = np.bincount(f_of, minlength=n_frag)
        cells.append(k)
        rows_out.append(encode_flat_rows(rows, dtype))
        frag_out.append(encode_fragments(FragmentIndex.from_ranges(np.cumsum(counts) - counts, counts)))
        records.append(order[s:t])
    return cells, rows_out, frag_out, records


def write_edges(
    builder: StoreBuilder,
    grid: Grid,
    part: Partition,
    edges: np.ndarray,
    directed: bool,
    edge_attributes: list[_inputs.NamedArray],
) -> int:
    """Write ``links/0`` (and ``link_attributes/<name>/0``, row for row with it); return the record count.

    ``edges`` (E, W) are vertex indices: W = 2 for graph edges, 3 for triangles. Records whose
    vertices share a chunk go to the flat intra array (grouped by the first vertex's fragment
    in ``link_fragments``); the rest are placed by the family policy.
    """
    cell, local, frag = vertex_locals(part)
    width = edges.shape[1]
    same = np.all(cell[edges] == cell[edges[:, :1]], axis=1)
    d = grid.ndim
    max_rows = int(np.diff(part.row_offsets).max()) if len(part.cells) else 0
    dtype = smallest_index_dtype(max(max_rows, 1))
    meta = {"zv_array": "links", "dtype": dtype.name, "link_width": width, "level_delta": 0}
    # segment -> (cell indices, link payloads, has_perm, edge index of every row per cell)
    arrays: dict[str, tuple[np.ndarray, list[bytes], bool, list[np.ndarray]]] = {}
    intra_idx = np.flatnonzero(same)
    if len(intra_idx):
        cells, rows, frags, records = intra_payloads(part, cell, local, frag, edges[intra_idx], dtype)
        arrays["_".join([".".join(["0"] * d)] * (width - 1))] = (
            part.cells[cells],
            rows,
            False,
            [intra_idx[r] for r in records],
        )
        builder.cell_array(
            "0/link_fragments",
            grid,
            part.cells[cells],
            frags,
            {"zv_array": "link_fragments", "encoding": "fragment_index_v1"},
            kind="fragments",
        )
    cross_idx = np.flatnonzero(~same)
    cross = edges[cross_idx]
    chunks = part.cells[cell[cross]] + grid.origin
    grouped: dict[str, tuple[list[np.ndarray], list[bytes], bool, list[np.ndarray]]] = {}
    placed = place_links(
        chunks.reshape(-1, width, d), local[cross].reshape(-1, width), directed=directed, store="canonical"
    )
    for lc in placed.cells():
        cells_l, payloads, _, recs = grouped.setdefault(lc.segment, ([], [], lc.has_perm, []))
        cells_l.append(np.asarray(lc.chunk) - grid.origin)
        payloads.append(encode_ragged([lc.rows], dtype))
        recs.append(cross_idx[lc.records])
    for segment, (cells_l, payloads, has_perm, recs) in grouped.items():
        arrays[segment] = (np.asarray(cells_l).reshape(-1, d), payloads, has_perm, recs)
    builder.group("0/links")
    for segment, (cells_a, payloads, has_perm, _) in arrays.items():
        offsets = parse_offsets(segment, width, d).tolist()
        builder.cell_array(
            f"0/links/0/{segment}",
            grid,
            cells_a,
            payloads,
            {**meta, "offsets": offsets, "has_perm": has_perm},
            kind="links",
        )
    total = len(edges)
    builder.group(
        "0/links/0",
        {
            "zv_array": "links_family",
            "level_delta": 0,
            "link_width": width,
            "sid_ndim": d,
            "directed": directed,
            "store": "canonical",
            "num_links": total,
            "num_physical_records": total,
        },
    )
    if edge_attributes:
        builder.group("0/link_attributes")
    for attr in edge_attributes:
        base = f"0/link_attributes/{attr.name}"
        builder.group(base)
        builder.group(f"{base}/0", {"zv_array": "link_attribute_family", "name": attr.name, "level_delta": 0})
        for segment, (cells_a, _, _, recs) in arrays.items():
            amet = {
                "zv_array": "link_attribute",
                "name": attr.name,
                "dtype": attr.values.dtype.name,
                "row_shape": attr.row_shape,
                "offsets": parse_offsets(segment, width, d).tolist(),
                "level_delta": 0,
            }
            builder.cell_array(
                f"{base}/0/{segment}", grid, cells_a, [attr.values[r].tobytes() for r in recs], amet
            )
    return len(edges)


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
    n = len(pos)
    e = edge_array(edges, n)
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
    layout = make_layout(pos, options)
    vattrs = _inputs.vertex_attributes(attributes, n, channel_names)
    eattrs = _inputs.vertex_attributes(edge_attributes, len(e), what="edge attribute")
    user_ids = _inputs.object_id_array(object_ids, n)
    ids = dense_ids(np.zeros(n, np.int64) if user_ids is None else user_ids)
    tables = object_tables(ids, object_attributes, groups, group_attributes, group_names)
    part = partition(pos, layout.grid, tables.oids)

    def links(builder: StoreBuilder) -> list[str]:
        if not write_edges(builder, layout.grid, part, e, directed, eattrs):
            return []
        return ["links", "link_fragments"] + (["link_attributes"] if eattrs else [])

    write_level0(
        target,
        options,
        layout,
        "graph",
        "explicit",
        LevelArrays(
            positions=pos,
            part=part,
            fragments=fragment_payloads(part),
            vertex_attributes=vattrs,
            tables=tables,
            fragment_objects=partition_owners(part),
            manifests=build_manifests(part, layout.grid, tables.num_objects),
            links=links,
        ),
    )
