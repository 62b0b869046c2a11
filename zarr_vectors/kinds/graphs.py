"""Graphs with explicit edges: the layout, as the writer (:mod:`zarr_vectors.kinds.graph_stream`),
the meshes and the pyramid build it.

Vertices are stored as for points (one range fragment per object and chunk).
An edge whose two vertices share a chunk is a flat row of ``links/0/0.0.0`` in
that chunk's cell, and ``link_fragments`` groups those rows by the vertex fragment
of their first endpoint. An edge across chunks is a record of ``links/0/<offsets>``
placed by the family policy: undirected graphs use ``canonical`` with a ``perm_idx``
column that restores the input endpoint order; directed graphs keep input order.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from zarr_vectors.engine import (
    Partition,
    StoreBuilder,
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

__all__ = ["edge_array", "intra_payloads", "write_edges", "vertex_locals"]


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
