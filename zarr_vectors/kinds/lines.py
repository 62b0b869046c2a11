"""Polylines and streamlines: the layout, as the writer (:mod:`zarr_vectors.kinds.line_stream`)
and the pyramid build it.

Each line is one object. Inside a chunk, a line's consecutive vertices form one
*segment*, stored as a range fragment whose rows keep the line's order
(``implicit_sequential``: row r joins row r + 1 inside a fragment). Where a line
leaves a chunk, a directed ``link_width = 2`` record in ``links/0/<offsets>`` at
the chunk it leaves joins the segment's last vertex to the next segment's first.
An object's manifest lists its segments in line order, one block per segment.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from zarr_vectors.engine import (
    DenseIds,
    StoreBuilder,
    as_id_array,
    dense_ids,
    sort_keys,
)
from zarr_vectors.engine import inputs as _inputs
from zarr_vectors.errors import InputError
from zarr_vectors.format.fragments import FragmentIndex, encode_fragments
from zarr_vectors.format.grid import Grid
from zarr_vectors.format.kinds import FAMILY, KINDS
from zarr_vectors.format.links import encode_ragged, parse_offsets, place_links, smallest_index_dtype
from zarr_vectors.format.manifests import encode_manifests_batch

__all__ = [
    "LINE_KINDS",
    "as_line_arrays",
    "flat_attributes",
    "item_ids",
    "line_payloads",
    "partition_lines",
    "segment_manifests",
    "write_line_links",
]

#: The kinds ``write_lines`` writes (the kind table's ``lines`` family).
LINE_KINDS = tuple(name for name, k in KINDS.items() if FAMILY[k.family].line_like)


@dataclass(frozen=True, eq=False)
class LinePartition:
    """Stored layout of the vertices of many lines.

    ``order``/``row_offsets``/``cells`` as in :class:`zarr_vectors.engine.write.partition.Partition`.
    Segment ``s`` (in input order: by line, then along it) lies in cell ``seg_cell[s]``
    as fragment ``seg_local[s]``, rows ``seg_start[s]:seg_start[s] + seg_count[s]``;
    ``local[v]`` is input vertex v's row inside its cell.
    """

    order: np.ndarray
    row_offsets: np.ndarray
    cells: np.ndarray
    seg_line: np.ndarray
    seg_cell: np.ndarray
    seg_local: np.ndarray
    seg_start: np.ndarray
    seg_count: np.ndarray
    seg_first_vertex: np.ndarray
    local: np.ndarray
    cell_seg_offsets: np.ndarray


def partition_lines(positions: np.ndarray, line_offsets: np.ndarray, grid: Grid) -> LinePartition:
    """Split lines into per-chunk segments; rows of a cell keep line order (stable sort)."""
    n = len(positions)
    cell_of = sort_keys(positions, grid) // grid.n_bins
    line_of = np.repeat(np.arange(len(line_offsets) - 1), np.diff(line_offsets))
    new_seg = np.ones(n, bool)
    new_seg[1:] = (cell_of[1:] != cell_of[:-1]) | (line_of[1:] != line_of[:-1])
    seg_first = np.flatnonzero(new_seg)
    seg_count = np.diff(np.append(seg_first, n))
    order = np.argsort(cell_of, kind="stable")
    scell = cell_of[order]
    new_cell = np.ones(n, bool)
    new_cell[1:] = scell[1:] != scell[:-1]
    cell_first = np.flatnonzero(new_cell)
    row_offsets = np.append(cell_first, n).astype(np.int64)
    cell_lin = scell[cell_first]
    cell_idx = np.stack(np.unravel_index(cell_lin, tuple(int(s) for s in grid.shape)), axis=1).astype(
        np.int64
    )
    cell_idx = cell_idx.reshape(-1, grid.ndim)
    cell_rank = np.searchsorted(cell_lin, cell_of)
    local = np.empty(n, np.int64)
    local[order] = np.arange(n) - row_offsets[np.cumsum(new_cell) - 1]
    seg_cell = cell_rank[seg_first]
    # Fragments of a cell are its segments in stored (= input) order.
    seg_order = np.argsort(seg_cell, kind="stable")
    cell_seg_offsets = np.searchsorted(seg_cell[seg_order], np.arange(len(cell_lin) + 1))
    seg_local = np.empty(len(seg_first), np.int64)
    seg_local[seg_order] = np.arange(len(seg_first)) - cell_seg_offsets[seg_cell[seg_order]]
    return LinePartition(
        order=order,
        row_offsets=row_offsets,
        cells=cell_idx,
        seg_line=line_of[seg_first],
        seg_cell=seg_cell,
        seg_local=seg_local,
        seg_start=local[seg_first],
        seg_count=seg_count,
        seg_first_vertex=seg_first,
        local=local,
        cell_seg_offsets=cell_seg_offsets,
    )


def line_payloads(part: LinePartition) -> list[bytes]:
    by_cell = np.argsort(part.seg_cell, kind="stable")
    out = []
    for k in range(len(part.cells)):
        segs = by_cell[part.cell_seg_offsets[k] : part.cell_seg_offsets[k + 1]]
        out.append(encode_fragments(FragmentIndex.from_ranges(part.seg_start[segs], part.seg_count[segs])))
    return out


def _continuations(part: LinePartition, grid: Grid) -> tuple[np.ndarray, np.ndarray]:
    """(M, 2, D) chunks and (M, 2) local rows of the records joining consecutive segments."""
    nxt = np.flatnonzero(part.seg_line[1:] == part.seg_line[:-1]) + 1  # segments that continue a line
    last_of_prev = part.seg_first_vertex[nxt] - 1
    first_of_next = part.seg_first_vertex[nxt]
    chunks = (
        np.stack([part.cells[part.seg_cell[nxt - 1]], part.cells[part.seg_cell[nxt]]], axis=1) + grid.origin
    )
    vertices = np.stack([part.local[last_of_prev], part.local[first_of_next]], axis=1)
    return chunks.reshape(-1, 2, grid.ndim), vertices.reshape(-1, 2)


def write_line_links(builder: StoreBuilder, grid: Grid, part: LinePartition) -> int:
    """Write ``links/0`` (continuations as an undirected canonical family, one ragged group per
    cell); return the record count.

    Canonical placement stores each record at the smaller of its two chunks, so only the
    13 lexicographically positive neighbour segments exist (half the cells of a directed
    family) and ``perm_idx`` keeps the walking direction. This is the reference's form.
    """
    chunks, vertices = _continuations(part, grid)
    if len(chunks) == 0:
        return 0
    d = grid.ndim
    dtype = smallest_index_dtype(int(np.diff(part.row_offsets).max()) if len(part.cells) else 0)
    by_segment: dict[str, tuple[list[np.ndarray], list[bytes], bool]] = {}
    for cell in place_links(chunks, vertices, directed=False, store="canonical").cells():
        cells, payloads, _ = by_segment.setdefault(cell.segment, ([], [], cell.has_perm))
        cells.append(np.asarray(cell.chunk) - grid.origin)
        payloads.append(encode_ragged([cell.rows], dtype))
    builder.group("0/links")
    for segment, (cells, payloads, has_perm) in by_segment.items():
        meta = {
            "zv_array": "links",
            "dtype": dtype.name,
            "offsets": parse_offsets(segment, 2, d).tolist(),
            "has_perm": has_perm,
            "link_width": 2,
            "level_delta": 0,
        }
        builder.cell_array(
            f"0/links/0/{segment}", grid, np.asarray(cells).reshape(-1, d), payloads, meta, kind="links"
        )
    m = len(chunks)
    builder.group(
        "0/links/0",
        {
            "zv_array": "links_family",
            "level_delta": 0,
            "link_width": 2,
            "sid_ndim": d,
            "directed": False,
            "store": "canonical",
            "num_links": m,
            "num_physical_records": m,
        },
    )
    return m


def segment_manifests(
    num_objects: int, seg_object: np.ndarray, chunks: np.ndarray, seg_local: np.ndarray
) -> list[bytes]:
    """Manifests of objects made of line segments: one block per segment, each object's
    segments in input order (``seg_object`` need not be sorted)."""
    order = np.argsort(seg_object, kind="stable")
    return encode_manifests_batch(
        num_objects, seg_object[order], chunks[order], np.arange(len(order) + 1), seg_local[order]
    )


def item_ids(object_ids: Any, n: int, what: str) -> DenseIds:
    """One distinct int64 / uint64 id per item (line, geometry), numbered densely; default ``i``."""
    if object_ids is None:
        return DenseIds.identity(n)
    ids = as_id_array(object_ids, "object_ids")
    if ids.shape != (n,):
        raise InputError(f"object_ids must have one id per {what} ({n}), got shape {ids.shape}")
    dense = dense_ids(ids)
    if dense.distinct != n:
        dup = np.flatnonzero(np.bincount(dense.dense) > 1)[0]
        raise InputError(
            f"object_ids name object {int(dense.id_map().ids()[dup])} for several {what}s; "
            f"give each {what} its own id"
        )
    return dense


def as_line_arrays(
    lines: Any, kind: str = "polyline", ndim: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Flat (V, D) positions and (L + 1,) offsets from a list of (n_i, D) arrays, a
    (positions, offsets) pair, or for ``kind="line"`` an (M, 2, D) array of segments.
    ``ndim``: the number of axes the call implies, to tell transposed input."""
    if kind == "line":
        seg = np.asarray(lines)
        if seg.ndim != 3 or seg.shape[1] != 2 or len(seg) == 0:
            raise InputError(
                f"kind='line' takes an (M, 2, D) array of segments with M >= 1, got shape {seg.shape}"
            )
        return _inputs.positions_array(seg.reshape(-1, seg.shape[2])), np.arange(
            len(seg) + 1, dtype=np.int64
        ) * 2
    if isinstance(lines, tuple) and len(lines) == 2 and np.ndim(lines[1]) == 1:
        positions = _inputs.positions_array(lines[0], ndim)
        offsets = np.asarray(lines[1], dtype=np.int64)
        if (
            len(offsets) < 1
            or offsets[0] != 0
            or offsets[-1] != len(positions)
            or np.any(np.diff(offsets) < 0)
        ):
            raise InputError(
                "line offsets must start at 0, never decrease and end at the number of positions"
            )
    else:
        arrays = [np.asarray(x) for x in lines]
        if not arrays:
            raise InputError("no lines given")
        dims = {a.shape[1] if a.ndim == 2 else -1 for a in arrays}
        rows = {a.shape[0] if a.ndim == 2 else -1 for a in arrays}
        # Transposed: every line has the axis count of rows (as the call says, or 1 to 4 rows
        # with more than 4 columns that differ between lines), or the first reads as (D, n).
        r = next(iter(rows))
        if len(rows) != 1:
            flipped = False
        elif ndim is not None:
            flipped = r == ndim and dims != {ndim}
        else:
            differ = len(dims) > 1 and min(dims) > 4
            flipped = 1 <= r <= 4 and (differ or _inputs.looks_transposed(arrays[0].shape, None))
        if flipped:
            raise InputError(
                f"the lines look transposed: line 0 has shape {arrays[0].shape}, one row per axis; "
                "every line must be an (n_i, D) array: pass [line.T for line in lines]"
            )
        if len(dims) != 1 or -1 in dims:
            raise InputError("every line must be an (n_i, D) array with the same D")
        positions = _inputs.positions_array(np.concatenate(arrays), ndim)
        offsets = np.zeros(len(arrays) + 1, np.int64)
        np.cumsum([len(a) for a in arrays], out=offsets[1:])
    empty = np.flatnonzero(np.diff(offsets) == 0)
    if len(empty):
        raise InputError(f"line {int(empty[0])} has no vertices; remove empty lines before writing")
    return positions, offsets


def flat_attributes(attributes: Mapping[str, Any] | None, line_offsets: np.ndarray) -> dict[str, Any] | None:
    """Per-vertex attributes given per line (a list of arrays) become flat arrays; lengths must match.

    A list with one entry per vertex (e.g. ``[[r, g, b], ...]`` rows) is taken as rows when
    its length is the vertex count and not the line count.
    """
    if not attributes:
        return None
    out: dict[str, Any] = {}
    counts = np.diff(line_offsets)
    for name, values in attributes.items():
        rows = isinstance(values, (list, tuple)) and len(values) == line_offsets[-1] != len(counts)
        if isinstance(values, (list, tuple)) and len(values) and not np.isscalar(values[0]) and not rows:
            if len(values) != len(counts):
                raise InputError(
                    f"attribute {name!r} has {len(values)} per-line arrays for {len(counts)} lines"
                )
            lengths = np.array([len(v) for v in values])
            bad = np.flatnonzero(lengths != counts)
            if len(bad):
                i = int(bad[0])
                raise InputError(
                    f"attribute {name!r}: line {i} has {counts[i]} vertices but {lengths[i]} values"
                )
            values = np.concatenate([np.asarray(v) for v in values])
        out[name] = values
    return out
