"""The one-shot writers as they were before they became wrappers of the streaming writers:
every vertex partitioned at once from the library's layout functions, then
``write_level0``. The streaming writers' tests compare stores against these, byte for byte."""

from __future__ import annotations

from typing import Any

import numpy as np

from zarr_vectors.engine import (
    LevelArrays,
    StoreOptions,
    build_manifests,
    dense_ids,
    draco_codec,
    fragment_payloads,
    make_layout,
    object_tables,
    partition,
    partition_owners,
    table_rows,
    write_level0,
)
from zarr_vectors.engine import inputs as _inputs
from zarr_vectors.kinds.graphs import edge_array, vertex_locals, write_edges
from zarr_vectors.kinds.lines import (
    as_line_arrays,
    flat_attributes,
    item_ids,
    line_payloads,
    partition_lines,
    segment_manifests,
    write_line_links,
)
from zarr_vectors.kinds.meshes import draco_cells, face_array, mesh_ids_of, mesh_pairs, mesh_vertices
from zarr_vectors.kinds.skeletons import (
    check_parents,
    skeleton_manifests,
    skeleton_partition,
    tree_roots,
    write_parent_links,
)

_STORE = ("chunk_shape", "bounds", "axes", "units", "crs", "compression", "checksums", "shards", "overwrite")
_TABLES = ("object_attributes", "groups", "group_attributes", "group_names")


def write_skeleton_at_once(
    target: Any,
    positions: Any,
    parents: Any,
    *,
    object_ids: Any = None,
    attributes: Any = None,
    channel_names: Any = None,
    **kw: Any,
) -> None:
    """Trees written all at once (``write_skeleton``'s keywords)."""
    options = StoreOptions(**{"chunk_shape": "auto", **{k: v for k, v in kw.items() if k in _STORE}})
    pos = _inputs.positions_array(
        positions, _inputs.call_ndim(options.chunk_shape, options.bounds, options.axes)
    )
    par = check_parents(parents, len(pos))
    user_ids = _inputs.object_id_array(object_ids, len(pos))
    if user_ids is None:
        user_ids = np.searchsorted(np.flatnonzero(par < 0), tree_roots(par))
    layout = make_layout(pos, options)
    tables = object_tables(dense_ids(user_ids), *(kw.get(k) for k in _TABLES))
    part = skeleton_partition(pos, par, tables.oids, layout.grid)
    arrays = LevelArrays(
        positions=pos,
        part=part,
        fragments=fragment_payloads(part),
        vertex_attributes=_inputs.vertex_attributes(attributes, len(pos), channel_names),
        tables=tables,
        fragment_objects=partition_owners(part),
        manifests=skeleton_manifests(part, layout.grid, tables.num_objects),
        links=lambda builder: write_parent_links(builder, layout.grid, part, par),
    )
    write_level0(target, options, layout, "skeleton", "implicit_sequential_with_branches", arrays)


def write_graph_at_once(
    target: Any,
    positions: Any,
    edges: Any,
    *,
    directed: bool = False,
    object_ids: Any = None,
    attributes: Any = None,
    channel_names: Any = None,
    edge_attributes: Any = None,
    **kw: Any,
) -> None:
    """A graph written all at once (``write_graph``'s keywords)."""
    options = StoreOptions(**{"chunk_shape": "auto", **{k: v for k, v in kw.items() if k in _STORE}})
    pos = _inputs.positions_array(
        positions, _inputs.call_ndim(options.chunk_shape, options.bounds, options.axes)
    )
    e = edge_array(edges, len(pos))
    layout = make_layout(pos, options)
    eattrs = _inputs.vertex_attributes(edge_attributes, len(e), what="edge attribute")
    user_ids = _inputs.object_id_array(object_ids, len(pos))
    ids = dense_ids(np.zeros(len(pos), np.int64) if user_ids is None else user_ids)
    tables = object_tables(ids, *(kw.get(k) for k in _TABLES))
    part = partition(pos, layout.grid, tables.oids)

    def links(builder: Any) -> list[str]:
        if not write_edges(builder, layout.grid, part, e, directed, eattrs):
            return []
        return ["links", "link_fragments"] + (["link_attributes"] if eattrs else [])

    arrays = LevelArrays(
        positions=pos,
        part=part,
        fragments=fragment_payloads(part),
        vertex_attributes=_inputs.vertex_attributes(attributes, len(pos), channel_names),
        tables=tables,
        fragment_objects=partition_owners(part),
        manifests=build_manifests(part, layout.grid, tables.num_objects),
        links=links,
    )
    write_level0(target, options, layout, "graph", "explicit", arrays)


def write_mesh_at_once(
    target: Any,
    vertices: Any,
    faces: Any,
    *,
    encoding: str = "raw",
    quantization_bits: int = 11,
    compression_level: int = 7,
    object_ids: Any = None,
    attributes: Any = None,
    channel_names: Any = None,
    **kw: Any,
) -> None:
    """A mesh written all at once (``write_mesh``'s keywords)."""
    options = StoreOptions(**{"chunk_shape": "auto", **{k: v for k, v in kw.items() if k in _STORE}})
    pos = mesh_vertices(vertices)
    f = face_array(faces, len(pos))
    layout = make_layout(pos, options)
    grid = layout.grid
    user_ids = _inputs.object_id_array(object_ids, len(pos))
    ids = dense_ids(np.zeros(len(pos), np.int64) if user_ids is None else user_ids)
    tables = object_tables(ids, *(kw.get(k) for k in _TABLES))
    part = partition(pos, grid, tables.oids)
    manifests = build_manifests(part, grid, tables.num_objects)
    owners = partition_owners(part)
    cell, _, _ = vertex_locals(part)
    intra = np.all(cell[f] == cell[f[:, :1]], axis=1)
    stored, payloads, codecs = f, None, []
    frags = fragment_payloads(part)
    if encoding == "draco":
        payloads, part, frags = draco_cells(pos, f, part, intra, quantization_bits, compression_level)
        stored, codecs = f[~intra], [draco_codec(quantization_bits, compression_level)]

    def links(builder: Any) -> list[str]:
        if not write_edges(builder, grid, part, stored, False, []):
            return []
        return ["links"] + (["link_fragments"] if encoding == "raw" and bool(intra.any()) else [])

    arrays = LevelArrays(
        positions=pos,
        part=part,
        fragments=frags,
        vertex_attributes=_inputs.vertex_attributes(attributes, len(pos), channel_names),
        tables=tables,
        manifests=manifests,
        fragment_objects=owners,
        links=links,
        vertex_payloads=payloads,
        vertex_codecs=codecs,
        vertex_encoding=encoding,
    )
    write_level0(target, options, layout, "mesh", "explicit", arrays)


def write_meshes_at_once(target: Any, meshes: Any, *, object_ids: Any = None, **kw: Any) -> None:
    """Meshes written all at once (``write_meshes``'s keywords)."""
    vertices, faces, counts = mesh_pairs(meshes)
    per_mesh = np.arange(len(counts)) if object_ids is None else mesh_ids_of(object_ids, len(counts))
    if object_ids is not None:
        given = kw.pop("object_attributes", None) or {}
        rows = dense_ids(per_mesh)
        kw["object_attributes"] = {
            k: table_rows(v, rows, k, "object attribute", True) for k, v in given.items()
        }
    write_mesh_at_once(target, vertices, faces, object_ids=np.repeat(per_mesh, counts), **kw)


def write_lines_at_once(
    target: Any,
    lines: Any,
    *,
    kind: str = "polyline",
    object_ids: Any = None,
    attributes: Any = None,
    channel_names: Any = None,
    **kw: Any,
) -> None:
    """Lines written all at once (``write_lines``' keywords)."""
    options = StoreOptions(**{"chunk_shape": "auto", **{k: v for k, v in kw.items() if k in _STORE}})
    ndim = _inputs.call_ndim(options.chunk_shape, options.bounds, options.axes)
    pos, offsets = as_line_arrays(lines, kind, ndim)
    layout = make_layout(pos, options)
    grid = layout.grid
    ids = item_ids(object_ids, len(offsets) - 1, "line")
    tables = object_tables(ids, *(kw.get(k) for k in _TABLES), item_order=object_ids is not None)
    part = partition_lines(pos, offsets, grid)
    seg_object = ids.dense[part.seg_line]
    arrays = LevelArrays(
        positions=pos,
        part=part,
        fragments=line_payloads(part),
        vertex_attributes=_inputs.vertex_attributes(
            flat_attributes(attributes, offsets), len(pos), channel_names
        ),
        tables=tables,
        manifests=segment_manifests(
            ids.count, seg_object, part.cells[part.seg_cell] + grid.origin, part.seg_local
        ),
        fragment_objects=(part.seg_cell, part.seg_local, seg_object),
        links=lambda builder: ["links"] if write_line_links(builder, grid, part) else [],
    )
    write_level0(target, options, layout, kind, "implicit_sequential", arrays)
