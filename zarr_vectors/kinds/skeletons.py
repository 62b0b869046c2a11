"""Skeletons (trees given by parent indices): the layout, as the writer
(:mod:`zarr_vectors.kinds.skeleton_stream`) and the pyramid build it.

Layout (``links_convention = "implicit_sequential_with_branches"``): inside a chunk,
rows follow each object's input order, and a *fragment* is a run of rows that are
consecutive in that order with every row's parent the row before it, so the implicit
rule "parent of row r is row r - 1" holds inside every fragment and nowhere else; an
object's manifest lists its fragments in input order, so whole-object reads give the
vertices back in the order they were written. Every other parent edge (at a
branch, or across chunks) is an explicit ``(child, parent)`` record: in
``links/0/0.0.0`` when both lie in one chunk (grouped per fragment by
``link_fragments``), else in ``links/0/<offsets>``, stored canonically with a
``perm_idx`` that restores the ``(child, parent)`` order — the form the reference
implementation 0.9.2 writes and reads.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from zarr_vectors.engine import (
    Partition,
    StoreBuilder,
    sort_keys,
)
from zarr_vectors.errors import InputError
from zarr_vectors.format.grid import Grid
from zarr_vectors.format.links import encode_ragged, parse_offsets, place_links, smallest_index_dtype
from zarr_vectors.format.manifests import encode_manifests_batch
from zarr_vectors.kinds.graphs import intra_payloads, vertex_locals

__all__ = [
    "skeleton_manifests",
    "skeleton_partition",
    "write_parent_links",
    "tree_roots",
    "depth_first_order",
    "check_parents",
    "continues",
    "runs_partition",
]


def tree_roots(parents: np.ndarray) -> np.ndarray:
    """Root of every vertex's tree; raises InputError on a cycle. Pointer jumping, O(N log N)."""
    n = len(parents)
    anc = np.where(parents < 0, np.arange(n), parents)
    for _ in range(max(1, int(np.ceil(np.log2(max(n, 2))))) + 1):
        nxt = anc[anc]
        if np.array_equal(nxt, anc):
            break
        anc = nxt
    bad = np.flatnonzero(parents[anc] >= 0)
    if len(bad):
        raise InputError(f"parents form a cycle through vertex {int(bad[0])}: every tree needs a root (-1)")
    return anc


def depth_first_order(parents: np.ndarray, roots: np.ndarray) -> np.ndarray:
    """Vertices in depth-first preorder, tree after tree (children in index order)."""
    n = len(parents)
    has_parent = parents >= 0
    child_order = np.argsort(np.where(has_parent, parents, n), kind="stable")[: int(has_parent.sum())]
    starts = np.searchsorted(parents[child_order], np.arange(n + 1))
    order = np.empty(n, np.int64)
    pos = 0
    stack: list[int] = []
    for root in np.flatnonzero(~has_parent).tolist():
        stack.append(root)
        while stack:
            v = stack.pop()
            order[pos] = v
            pos += 1
            kids = child_order[starts[v] : starts[v + 1]]
            stack.extend(kids[::-1].tolist())
    return order


def check_parents(parents: Any, n: int) -> np.ndarray:
    arr = np.asarray(parents)
    if arr.shape != (n,) or arr.dtype.kind not in "iu":
        raise InputError(f"parents must be ({n},) integers (-1 for a root), got {arr.shape} {arr.dtype}")
    arr = arr.astype(np.int64)
    bad = np.flatnonzero((arr < -1) | (arr >= n))
    if len(bad):
        raise InputError(f"vertex {int(bad[0])} has parent {int(arr[bad[0]])}, outside [-1, {n})")
    own = np.flatnonzero(arr == np.arange(n))
    if len(own):
        raise InputError(f"vertex {int(own[0])} is its own parent; use -1 for a root")
    return arr


def skeleton_partition(positions: np.ndarray, parents: np.ndarray, oids: np.ndarray, grid: Grid) -> Partition:
    """Rows by (cell, object, input index); a fragment is a run of one object's vertices in
    one chunk that are consecutive in that object's input order, each the parent of the next.

    So the implicit rule (the parent of row r is row r - 1) holds inside every fragment, and
    an object's fragments, taken by their first vertex's input index, concatenate to its
    vertices in input order (see :func:`skeleton_manifests`).
    """
    cell = sort_keys(positions, grid) // grid.n_bins
    return runs_partition(cell, oids, np.arange(len(positions)), continues(parents, oids, cell), grid)


def continues(parents: np.ndarray, ids: np.ndarray, cell: np.ndarray) -> np.ndarray:
    """Whether each vertex continues its fragment: its parent is the vertex of the same object
    just before it in input order, in the same (linear) cell. ``parents`` index the same rows."""
    n = len(parents)
    by_object = np.lexsort((np.arange(n), ids))
    prev = np.full(n, -1, np.int64)
    same = ids[by_object[1:]] == ids[by_object[:-1]]
    prev[by_object[1:][same]] = by_object[:-1][same]
    has = parents >= 0
    return has & (parents == prev) & (cell[np.maximum(parents, 0)] == cell)


def runs_partition(
    cell: np.ndarray, oids: np.ndarray, vertex: np.ndarray, cont: np.ndarray, grid: Grid
) -> Partition:
    """Rows by (linear cell, object, vertex number); a new fragment starts at each new cell
    or object and at every row that does not continue the one before (``cont`` false)."""
    n = len(cell)
    order = np.lexsort((vertex, oids, cell))
    scell, sobj = cell[order], oids[order]
    new_cell = np.r_[True, scell[1:] != scell[:-1]] if n else np.zeros(0, bool)
    new_frag = new_cell | np.r_[True, sobj[1:] != sobj[:-1]] | ~cont[order] if n else new_cell
    cell_first = np.flatnonzero(new_cell)
    row_offsets = np.append(cell_first, n).astype(np.int64)
    cells = np.stack(np.unravel_index(scell[cell_first], tuple(int(s) for s in grid.shape)), axis=1)
    frag_first = np.flatnonzero(new_frag)
    frag_cell = np.cumsum(new_cell)[frag_first] - 1
    cell_frag_offsets = np.searchsorted(frag_cell, np.arange(len(cell_first) + 1)).astype(np.int64)
    return Partition(
        order=order,
        cells=cells.astype(np.int64).reshape(-1, grid.ndim),
        row_offsets=row_offsets,
        frag_cell=frag_cell,
        frag_local=np.arange(len(frag_first)) - cell_frag_offsets[frag_cell],
        frag_start=frag_first - row_offsets[frag_cell],
        frag_count=np.diff(np.append(frag_first, n)),
        cell_frag_offsets=cell_frag_offsets,
        frag_object=sobj[frag_first],
        per_bin=False,
    )


def skeleton_manifests(part: Partition, grid: Grid, num_objects: int) -> list[bytes]:
    """Manifests listing each object's fragments in input order, one block per run of
    fragments in the same chunk; reading them in order gives the object's input order."""
    assert part.frag_object is not None
    first = part.order[part.row_offsets[part.frag_cell] + part.frag_start]
    frags = np.lexsort((first, part.frag_object))
    obj, cell = part.frag_object[frags], part.frag_cell[frags]
    new_block = (
        np.r_[True, (obj[1:] != obj[:-1]) | (cell[1:] != cell[:-1])] if len(frags) else np.zeros(0, bool)
    )
    block_first = np.flatnonzero(new_block)
    return encode_manifests_batch(
        num_objects,
        obj[block_first],
        part.cells[cell[block_first]] + grid.origin,
        np.append(block_first, len(frags)),
        part.frag_local[frags],
    )


def write_parent_links(builder: StoreBuilder, grid: Grid, part: Partition, parents: np.ndarray) -> list[str]:
    """Explicit (child, parent) records for every parent edge the implicit rule does not give;
    returns the families written (for ``arrays_present``)."""
    cell, local, frag = vertex_locals(part)
    first_row = np.zeros(len(parents), bool)
    first_row[part.order[part.frag_start + part.row_offsets[part.frag_cell]]] = True
    child = np.flatnonzero(first_row & (parents >= 0))
    edges = np.stack([child, parents[child]], axis=1)
    if len(edges) == 0:
        return []
    d = grid.ndim
    dtype = smallest_index_dtype(max(int(np.diff(part.row_offsets).max()) if len(part.cells) else 0, 1))
    meta = {"zv_array": "links", "dtype": dtype.name, "link_width": 2, "level_delta": 0}
    builder.group("0/links")
    same = cell[edges[:, 0]] == cell[edges[:, 1]]
    if same.any():
        cells, rows, frags, _ = intra_payloads(part, cell, local, frag, edges[same], dtype)
        builder.cell_array(
            f"0/links/0/{'.'.join(['0'] * d)}",
            grid,
            part.cells[cells],
            rows,
            {**meta, "offsets": [[0] * d], "has_perm": False},
            kind="links",
        )
        builder.cell_array(
            "0/link_fragments",
            grid,
            part.cells[cells],
            frags,
            {"zv_array": "link_fragments", "encoding": "fragment_index_v1"},
            kind="fragments",
        )
    cross = edges[~same]
    chunks = np.stack([part.cells[cell[cross[:, 0]]], part.cells[cell[cross[:, 1]]]], axis=1) + grid.origin
    by_segment: dict[str, tuple[list[np.ndarray], list[bytes], bool]] = {}
    placed = place_links(
        chunks.reshape(-1, 2, d), local[cross].reshape(-1, 2), directed=False, store="canonical"
    )
    for lc in placed.cells():
        cells_l, payloads, _ = by_segment.setdefault(lc.segment, ([], [], lc.has_perm))
        cells_l.append(np.asarray(lc.chunk) - grid.origin)
        payloads.append(encode_ragged([lc.rows], dtype))
    for segment, (cells_l, payloads, has_perm) in by_segment.items():
        builder.cell_array(
            f"0/links/0/{segment}",
            grid,
            np.asarray(cells_l).reshape(-1, d),
            payloads,
            {**meta, "offsets": parse_offsets(segment, 2, d).tolist(), "has_perm": has_perm},
            kind="links",
        )
    builder.group(
        "0/links/0",
        {
            "zv_array": "links_family",
            "level_delta": 0,
            "link_width": 2,
            "sid_ndim": d,
            "directed": False,
            "store": "canonical",
            "num_links": len(edges),
            "num_physical_records": len(edges),
        },
    )
    return ["links", "link_fragments"] if same.any() else ["links"]
