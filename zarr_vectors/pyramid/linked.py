"""Coarsening lines, skeletons and graphs: Douglas-Peucker on every unbranched chain.

The source level is read in batches of whole objects (a chain needs all its vertices) of
about :data:`BATCH_VERTICES` vertices, objects near each other in space together (lines and
polygons; graphs in id order), so a batch reads few chunks; each batch is simplified
(:func:`~zarr_vectors.pyramid.simplify.simplify_graph`) and only the kept vertices and the
fine-to-coarse parents, as runs (:class:`~zarr_vectors.pyramid.parents.ParentRuns`), are
held: memory is one batch plus the coarse level, whatever the source level's size (graphs
keep id order because their coarse edge order follows the batches). Line ends, tree roots,
leaves and branch points are always kept, so topology and object ids are unchanged; kept
vertices carry their attributes unchanged; graph edge attributes are reduced over the fine
edges each new edge replaces.
The coarse level (much smaller than the source) is then written by the same writers as
level 0, on the coarse grid.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from zarr_vectors.engine import (
    Level,
    LevelArrays,
    NamedArray,
    StoreBuilder,
    Tables,
    all_faces,
    attribute_names,
    box_edges,
    build_manifests,
    fetch_linked_objects,
    fragment_payloads,
    is_lines,
    partition,
    partition_owners,
    table_values,
    write_level_arrays,
)
from zarr_vectors.errors import InputError
from zarr_vectors.format.manifests import encode_manifests_batch
from zarr_vectors.kinds.graphs import vertex_locals, write_edges
from zarr_vectors.kinds.lines import line_payloads, partition_lines, write_line_links
from zarr_vectors.kinds.skeletons import skeleton_manifests, skeleton_partition, write_parent_links
from zarr_vectors.pyramid.batches import ObjectBatch, Written, written
from zarr_vectors.pyramid.parents import ParentRuns
from zarr_vectors.pyramid.plan import LevelPlan
from zarr_vectors.pyramid.points import CoarseLevel
from zarr_vectors.pyramid.reduce import Groups, reduce_rows, reduction_for
from zarr_vectors.pyramid.shapes import path_offsets, simplify_paths
from zarr_vectors.pyramid.simplify import Simplified, simplify_graph
from zarr_vectors.pyramid.sparsity import Sparsity, attribute_scores, select_objects
from zarr_vectors.pyramid.xlevel import CrossLevelWriter

__all__ = ["CoarseObjects", "coarsen_linked", "object_batches", "read_objects_batch"]

#: Source vertices read per batch of objects (estimated from the level's mean object size).
BATCH_VERTICES = 1_000_000


def read_objects_batch(level: Level, ids: np.ndarray, names: list[str], faces: bool = False) -> ObjectBatch:
    """Objects ``ids`` of ``level`` with their edges (or mesh ``faces``) and stored places."""
    with_links = faces or not is_lines(level)
    got = fetch_linked_objects(level, ids, names, with_links)
    cells, rows, owners = got.cells, got.rows, got.owners
    cell = np.searchsorted(cells.offsets, rows, side="right") - 1
    remap = np.full(len(cells.positions), -1, np.int64)
    remap[rows] = np.arange(len(rows))
    eattrs: dict[str, np.ndarray] = {}
    tri = None
    if faces:
        tris = all_faces(level, cells, got.plan, got.raws)
        ok = np.all(remap[tris] >= 0, axis=1) if len(tris) else np.zeros(0, bool)
        tri = remap[tris[ok]].reshape(-1, 3)
        edges = np.zeros((0, 2), np.int64)
    elif is_lines(level):
        follows = np.flatnonzero(owners[1:] == owners[:-1])
        edges = np.stack([follows, follows + 1], axis=1)
    else:
        all_edges, all_attrs = box_edges(level, cells, got.plan, got.raws)
        ok = (remap[all_edges[:, 0]] >= 0) & (remap[all_edges[:, 1]] >= 0)
        edges = remap[all_edges[ok]].reshape(-1, 2)
        eattrs = {k: v[ok] for k, v in all_attrs.items()}
    return ObjectBatch(
        positions=cells.positions[rows],
        attributes={n: cells.attributes[n][rows] for n in names},
        owners=owners,
        chunks=cells.chunks[cell],
        local=rows - cells.offsets[cell],
        edges=edges,
        edge_attributes=eattrs,
        faces=tri,
    )


def object_batches(level: Level, spatial: bool = False) -> list[np.ndarray]:
    """Present object ids of ``level`` (every manifest read once), in batches of about
    :data:`BATCH_VERTICES` vertices, each batch sorted.

    In id order, or with ``spatial`` in the order of each object's first chunk (its smallest
    linear cell index), so that a batch's objects share chunks and reading them reads about
    a batch's worth of cells, not the whole level. Every present object is in one batch."""
    if level.manifests is None:
        raise InputError(f"level {level.index} has no object index; linked geometry and meshes need one")
    owners = level.fragment_owners  # sorted by cell: an object's first row has its first cell
    present, first = np.unique(owners.object_id, return_index=True)
    if not len(present):
        return []
    per_object = max(level.meta.vertex_count / len(present), 1.0)
    size = max(1, int(BATCH_VERTICES / per_object))
    order = np.lexsort((present, owners.cell[first])) if spatial else np.arange(len(present))
    return [np.sort(present[order[i : i + size]]) for i in range(0, len(present), size)]


@dataclass(eq=False)
class _Coarse:
    """Kept vertices of all batches, in batch order (each object's vertices together), and
    the fine-to-coarse parent runs (parents numbered in this batch order)."""

    runs: ParentRuns
    positions: list[np.ndarray] = field(default_factory=list)
    attributes: dict[str, list[np.ndarray]] = field(default_factory=dict)
    owners: list[np.ndarray] = field(default_factory=list)
    edges: list[np.ndarray] = field(default_factory=list)
    edge_attributes: dict[str, list[np.ndarray]] = field(default_factory=dict)
    size: dict[int, float] = field(default_factory=dict)
    count: int = 0

    def cat(self, parts: list[np.ndarray], empty: np.ndarray) -> np.ndarray:
        return np.concatenate(parts) if parts else empty


def _edge_lengths(batch: ObjectBatch) -> np.ndarray:
    if not len(batch.edges):
        return np.zeros(0)
    diff = batch.positions[batch.edges[:, 1]].astype(np.float64) - batch.positions[batch.edges[:, 0]]
    return np.sqrt(np.einsum("ij,ij->i", diff, diff))


def _simplify_batch(
    acc: _Coarse, batch: ObjectBatch, s: Simplified, spec: Sparsity | None, edge_how: dict[str, str]
) -> None:
    index = np.full(len(batch.positions), -1, np.int64)
    index[s.kept] = np.arange(len(s.kept)) + acc.count
    acc.positions.append(batch.positions[s.kept])
    for name, values in batch.attributes.items():
        acc.attributes.setdefault(name, []).append(values[s.kept])
    acc.owners.append(batch.owners[s.kept])
    acc.edges.append(index[s.edges].reshape(-1, 2))
    if batch.edge_attributes and len(s.edges):
        groups = Groups.of(s.edge_of, len(s.edges))
        for name, values in batch.edge_attributes.items():
            acc.edge_attributes.setdefault(name, []).append(reduce_rows(values, groups, edge_how[name]))
    acc.runs.add(batch.chunks, batch.local, index[s.parent])
    acc.count += len(s.kept)
    if spec is not None and spec.by in ("size", "length"):
        weights = _edge_lengths(batch) if spec.by == "length" else np.ones(len(batch.owners))
        owner = batch.owners[batch.edges[:, 0]] if spec.by == "length" else batch.owners
        ids, inv = np.unique(owner, return_inverse=True)
        sums = np.bincount(inv, weights=weights, minlength=len(ids))
        for oid, v in zip(ids.tolist(), sums.tolist()):
            acc.size[oid] = acc.size.get(oid, 0.0) + v


def _one_batch(
    acc: _Coarse,
    src: Level,
    ids: np.ndarray,
    names: list[str],
    kind: str,
    tol: float,
    types: np.ndarray | None,
    spec: Sparsity | None,
    edge_how: dict[str, str],
) -> None:
    """Read objects ``ids`` of ``src``, simplify them and add the result to ``acc``."""
    batch = read_objects_batch(src, ids, names)
    if kind == "shapes":
        s = simplify_paths(batch, tol, types)
    else:
        s = simplify_graph(batch.positions, batch.edges, tol, edge_of=bool(batch.edge_attributes))
    _simplify_batch(acc, batch, s, spec, edge_how)


def _shape_types(src: Level) -> np.ndarray | None:
    """Shapely type id of every object of a ``write_geometries`` store (None without them)."""
    from zarr_vectors.kinds.shapes import TYPE_ATTRIBUTE

    if TYPE_ATTRIBUTE not in src.object_attributes:
        return None
    return np.asarray(table_values(src, src.object_attributes[TYPE_ATTRIBUTE])).reshape(-1).astype(np.int64)


def _named(src: Level, name: str, values: np.ndarray, table: dict[str, Any]) -> NamedArray:
    names = table[name].attrs.get("channel_names") if name in table else None
    return NamedArray(name, np.ascontiguousarray(values), tuple(names) if names else None)


def coarsen_linked(
    kind: str,
    src: Level,
    plan: LevelPlan,
    builder: StoreBuilder,
    *,
    spec: Sparsity | None,
    make_xlinks: Callable[[int], CrossLevelWriter | None],
    src_rows: np.ndarray | None,
    tolerance: float | None,
    progress: bool,
) -> tuple[CoarseLevel, CrossLevelWriter | None]:
    """Write coarse level ``plan.index`` of lines (``kind="lines"``), skeletons / graphs
    (``"graph"``) or polygons and multi-part lines of ``write_geometries`` (``"shapes"``)."""
    from tqdm.auto import tqdm

    tol = float(np.min(plan.bin_shape)) / 2 if tolerance is None else float(tolerance)
    if not tol >= 0:
        raise InputError(f"tolerance must be a non-negative length, got {tolerance!r}")
    names = attribute_names(src, None)
    edge_how = {
        n: reduction_for(n, next(iter(a.values())).dtype, None) for n, a in src.link_attributes.items()
    }
    acc = _Coarse(ParentRuns(src.grid, per_vertex=False))
    batches = object_batches(src, spatial=kind != "graph")  # graph edges keep their batch order
    with tqdm(
        total=sum(len(b) for b in batches), desc=f"level {plan.index}", unit="object", disable=not progress
    ) as bar:
        types = _shape_types(src) if kind == "shapes" else None
        for ids in batches:  # a batch lives only inside _one_batch: one batch in memory at a time
            _one_batch(acc, src, ids, names, kind, tol, types, spec, edge_how)
            bar.update(len(ids))
    d = plan.grid.ndim
    coarse, final = object_order(
        CoarseObjects(
            positions=acc.cat(acc.positions, np.zeros((0, d), src.vertices.dtype)),
            owners=acc.cat(acc.owners, np.zeros(0, np.int64)),
            attributes={n: np.concatenate(v) for n, v in acc.attributes.items()},
            links=acc.cat(acc.edges, np.zeros((0, 2), np.int64)),
            link_attributes={n: np.concatenate(v) for n, v in acc.edge_attributes.items()},
        )
    )
    extra: dict[str, Any] = {"coarsening_algorithm": "douglas_peucker", "simplify_tolerance": tol}
    coarse, more, kept = sparsify(src, spec, coarse, acc.size)
    extra.update(more)
    vattrs = [_named(src, n, v, src.vertex_attributes) for n, v in coarse.attributes.items()]
    ea = [_named(src, n, v, {}) for n, v in coarse.link_attributes.items()]
    out = _write(
        builder.at_level(plan.index),
        kind,
        src,
        plan,
        coarse.positions,
        coarse.owners,
        coarse.links,
        vattrs,
        ea,
    )
    xl = make_xlinks(
        max(int(src_rows.max(initial=1)) if src_rows is not None else 1, int(out.rows.max(initial=1)))
    )
    if xl is not None and len(coarse.positions):
        acc.runs.emit(xl, out, compose(final, kept))
    return CoarseLevel(len(coarse.positions), out.chunks, out.rows, out.present, extra), xl


@dataclass(frozen=True, eq=False)
class CoarseObjects:
    """A coarse level held in memory: vertices (each object's together), and ``links``
    (edges or faces) as rows of vertex indices with their attributes."""

    positions: np.ndarray
    owners: np.ndarray
    attributes: dict[str, np.ndarray]
    links: np.ndarray
    link_attributes: dict[str, np.ndarray]

    def keep(self, mask: np.ndarray) -> CoarseObjects:
        """Only the vertices ``mask`` and the links among them, renumbered (order kept)."""
        index = np.cumsum(mask) - 1
        keep_l = mask[self.links[:, 0]] if len(self.links) else np.zeros(0, bool)
        width = self.links.shape[1]
        return CoarseObjects(
            self.positions[mask],
            self.owners[mask],
            {n: v[mask] for n, v in self.attributes.items()},
            index[self.links[keep_l]].reshape(-1, width),
            {n: v[keep_l] for n, v in self.link_attributes.items()},
        )


def object_order(coarse: CoarseObjects) -> tuple[CoarseObjects, np.ndarray | None]:
    """``coarse`` with its objects in id order (a stable sort: each object's vertices and
    links keep their order, exactly as batches read in id order make them), and the new
    number of every vertex (None when the order was already right)."""
    own = coarse.owners
    if not len(own) or bool(np.all(own[1:] >= own[:-1])):
        return coarse, None
    perm = np.argsort(own, kind="stable")
    new = np.empty(len(perm), np.int64)
    new[perm] = np.arange(len(perm))
    links = coarse.links
    lorder = np.argsort(own[links[:, 0]], kind="stable") if len(links) else np.zeros(0, np.int64)
    return CoarseObjects(
        coarse.positions[perm],
        own[perm],
        {n: v[perm] for n, v in coarse.attributes.items()},
        new[links[lorder]].reshape(links.shape),
        {n: v[lorder] for n, v in coarse.link_attributes.items()},
    ), new


def compose(first: np.ndarray | None, then: np.ndarray | None) -> np.ndarray | None:
    """Vertex renumbering ``then`` after ``first`` (-1: dropped; None: the identity)."""
    if first is None or then is None:
        return then if first is None else first
    return then[first]


def sparsify(
    src: Level, spec: Sparsity | None, coarse: CoarseObjects, sizes: dict[int, float]
) -> tuple[CoarseObjects, dict[str, Any], np.ndarray | None]:
    """Drop the objects ``spec`` does not keep (``sizes``: object id -> size or length score);
    returns the kept level, the metadata recording the choice and each vertex's new number
    (-1: dropped; None: all kept)."""
    if spec is None:
        return coarse, {}, None
    present = np.unique(coarse.owners)
    scores = None
    if spec.by in ("size", "length"):
        scores = np.array([sizes.get(int(i), 0.0) for i in present])
    elif spec.by == "attribute":
        scores = attribute_scores(src, spec, present)
    kept = select_objects(present, spec, scores)
    extra = spec.metadata()
    extra["object_sparsity"] = len(kept) / len(present) if len(present) else 1.0
    mask = np.isin(coarse.owners, kept)
    return coarse.keep(mask), extra, np.where(mask, np.cumsum(mask) - 1, -1)


def _row_places(order: np.ndarray, row_offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(cell, local row) of every input vertex from a partition's stored order."""
    n = len(order)
    cell_of_row = np.repeat(np.arange(len(row_offsets) - 1), np.diff(row_offsets))
    cell = np.empty(n, np.int64)
    cell[order] = cell_of_row
    local = np.empty(n, np.int64)
    local[order] = np.arange(n) - row_offsets[cell_of_row]
    return cell, local


def _write(
    lb: Any,
    kind: str,
    src: Level,
    plan: LevelPlan,
    pos: np.ndarray,
    owners: np.ndarray,
    edges: np.ndarray,
    vattrs: list[NamedArray],
    eattrs: list[NamedArray],
) -> Written:
    """Write the coarse level's arrays with the level-0 writer of its geometry."""
    grid = plan.grid
    num_objects = src.num_objects
    tables = Tables(num_objects, [], [], [])
    if kind != "graph":  # lines and shapes: chains of vertices
        if kind == "lines":  # one line per object
            counts = np.bincount(owners, minlength=num_objects)
            offsets = np.zeros(num_objects + 1, np.int64)
            np.cumsum(counts, out=offsets[1:])
            line_object = np.arange(num_objects)
        else:  # one line per path (line, part or ring), owned by its geometry
            offsets = path_offsets(len(pos), edges)
            line_object = owners[offsets[:-1]]
        lpart = partition_lines(pos, offsets, grid)
        seg_object = line_object[lpart.seg_line]
        chunks = lpart.cells[lpart.seg_cell] + grid.origin
        manifests = encode_manifests_batch(
            num_objects, seg_object, chunks, np.arange(len(chunks) + 1), lpart.seg_local
        )
        present = write_level_arrays(
            lb,
            grid,
            LevelArrays(
                part=lpart,
                fragments=line_payloads(lpart),
                manifests=manifests,
                fragment_objects=(lpart.seg_cell, lpart.seg_local, seg_object),
                links=lambda b: ["links"] if write_line_links(b, grid, lpart) else [],
                positions=pos,
                vertex_attributes=vattrs,
                tables=tables,
            ),
        )
        return written(plan, lpart.cells, *_row_places(lpart.order, lpart.row_offsets), present)
    if src.root.links_convention == "implicit_sequential_with_branches":
        parents = np.full(len(pos), -1, np.int64)
        parents[edges[:, 1]] = edges[:, 0]
        part = skeleton_partition(pos, parents, owners, grid)

        def links(b: Any) -> list[str]:
            return ["links", "link_fragments"] if write_parent_links(b, grid, part, parents) else []
    else:
        part = partition(pos, grid, owners)
        directed = bool(src.links_family.get("directed", False))

        def links(b: Any) -> list[str]:
            if not write_edges(b, grid, part, edges, directed, eattrs):
                return []
            return ["links", "link_fragments"] + (["link_attributes"] if eattrs else [])

    skeleton = src.root.links_convention == "implicit_sequential_with_branches"
    manifests = (skeleton_manifests if skeleton else build_manifests)(part, grid, num_objects)
    present = write_level_arrays(
        lb,
        grid,
        LevelArrays(
            part=part,
            fragments=fragment_payloads(part),
            manifests=manifests,
            fragment_objects=partition_owners(part),
            links=links,
            positions=pos,
            vertex_attributes=vattrs,
            tables=tables,
        ),
    )
    cell, local, _ = vertex_locals(part)
    return written(plan, part.cells, cell, local, present)
