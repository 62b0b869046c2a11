"""Skeletons (trees given by parent indices): ``write_skeleton``.

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

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from zarr_vectors.engine import (
    LevelArrays,
    Partition,
    StoreBuilder,
    StoreOptions,
    dense_ids,
    fragment_payloads,
    make_layout,
    object_tables,
    partition_owners,
    sort_keys,
    write_level0,
)
from zarr_vectors.engine import inputs as _inputs
from zarr_vectors.errors import InputError
from zarr_vectors.format.grid import Grid
from zarr_vectors.format.links import encode_ragged, parse_offsets, place_links, smallest_index_dtype
from zarr_vectors.format.manifests import encode_manifests_batch
from zarr_vectors.kinds.graphs import intra_payloads, vertex_locals

__all__ = [
    "write_skeleton",
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
    n, d = pos.shape
    par = check_parents(parents, n)
    roots = tree_roots(par)
    user_ids = _inputs.object_id_array(object_ids, n)
    if user_ids is None:
        user_ids = np.searchsorted(np.flatnonzero(par < 0), roots)
    ids = dense_ids(user_ids)
    oids = ids.dense
    mixed = np.flatnonzero((par >= 0) & (oids[np.maximum(par, 0)] != oids))
    if len(mixed):
        v = int(mixed[0])
        raise InputError(
            f"vertex {v} (object {int(user_ids[v])}) has parent {int(par[v])} in object {int(user_ids[par[v]])}"
        )
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
    tables = object_tables(ids, object_attributes, groups, group_attributes, group_names)
    part = skeleton_partition(pos, par, tables.oids, layout.grid)
    write_level0(
        target,
        options,
        layout,
        "skeleton",
        "implicit_sequential_with_branches",
        LevelArrays(
            positions=pos,
            part=part,
            fragments=fragment_payloads(part),
            vertex_attributes=vattrs,
            tables=tables,
            fragment_objects=partition_owners(part),
            manifests=skeleton_manifests(part, layout.grid, tables.num_objects),
            links=lambda builder: write_parent_links(builder, layout.grid, part, par),
        ),
    )
