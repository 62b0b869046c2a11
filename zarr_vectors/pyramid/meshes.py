"""Coarsening meshes: quadric edge-collapse decimation of each object's mesh.

Each object's mesh is decimated on its own with ``fast-simplification`` (the Fast
Quadric Mesh Simplification algorithm, the one trimesh uses), keeping a fraction of its
faces; a closed surface stays closed. Vertices at the same position are merged first, so
a triangle soup (every STL file trimesh loads with ``process=False``) decimates as the
surface it describes. Every fine vertex collapses into one coarse vertex (its *parent*,
from the collapse history; coincident fine vertices share it; vertices left without a
face stay as loose vertices): that gives the cross-level links and the coarse vertex
attributes (reduced over the fine vertices it absorbed, like point metavertices). Coarse
vertices are clipped into the store's bounds (an optimal collapse point can lie a hair
outside the input's extent). Meshes too small to decimate (fewer than 4 faces to keep)
are copied unchanged. A Draco level stays Draco, with the same codec settings.

Meshes are read in batches of whole objects near each other in space; only the decimated
meshes and each fine vertex's parent (4 bytes, in :class:`~zarr_vectors.pyramid.parents.ParentRuns`)
are kept between batches, and the coarse level is put back in object id order before it is
written, so the store does not depend on the batch size.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from zarr_vectors._extras import needs
from zarr_vectors.engine import (
    Level,
    LevelArrays,
    NamedArray,
    StoreBuilder,
    Tables,
    attribute_names,
    build_manifests,
    draco_codec,
    fragment_payloads,
    partition,
    partition_owners,
    write_level_arrays,
)
from zarr_vectors.errors import InputError
from zarr_vectors.format.shards import inner_codecs
from zarr_vectors.kinds.graphs import vertex_locals, write_edges
from zarr_vectors.pyramid.batches import ObjectBatch, Written, written
from zarr_vectors.pyramid.linked import (
    CoarseObjects,
    compose,
    object_batches,
    object_order,
    read_objects_batch,
    sparsify,
)
from zarr_vectors.pyramid.parents import ParentRuns
from zarr_vectors.pyramid.plan import LevelPlan
from zarr_vectors.pyramid.points import CoarseLevel
from zarr_vectors.pyramid.reduce import Groups, reduce_rows, reduction_for
from zarr_vectors.pyramid.sparsity import Sparsity
from zarr_vectors.pyramid.xlevel import CrossLevelWriter

__all__ = ["MIN_FACES", "coarsen_meshes", "decimate"]

#: Meshes whose decimation would keep fewer faces than this are copied unchanged.
MIN_FACES = 4


def _simplifier() -> Any:
    try:
        import fast_simplification
    except ImportError as exc:
        raise InputError(needs("a mesh pyramid", "the fast-simplification package", "pyramid")) from exc
    return fast_simplification


def _nondegenerate(faces: np.ndarray) -> np.ndarray:
    return (faces[:, 0] != faces[:, 1]) & (faces[:, 1] != faces[:, 2]) & (faces[:, 0] != faces[:, 2])


def _merge_coincident(points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(first, slot)``: the first row of each distinct position, in order of first use (so
    rows without duplicates keep their order), and each row's index into ``first``."""
    order = np.lexsort(points.T[::-1])
    ordered = points[order]
    starts = np.ones(len(points), bool)
    starts[1:] = np.any(ordered[1:] != ordered[:-1], axis=1)
    group = np.cumsum(starts) - 1
    first = np.minimum.reduceat(order, np.flatnonzero(starts)) if len(points) else np.zeros(0, np.int64)
    by_use = np.argsort(first)
    rank = np.empty(len(first), np.int64)
    rank[by_use] = np.arange(len(first))
    slot = np.empty(len(points), np.int64)
    slot[order] = rank[group]
    return first[by_use], slot


def _representatives(m: int, collapses: np.ndarray) -> np.ndarray:
    """The vertex each of ``m`` vertices ends in after ``collapses`` (rows ``[kept, removed]``)."""
    rep = np.arange(m)
    if len(collapses):
        rep[collapses[:, 1]] = collapses[:, 0]
        for _ in range(int(np.ceil(np.log2(max(m, 2)))) + 1):
            nxt = rep[rep]
            if np.array_equal(nxt, rep):
                break
            rep = nxt
    return rep


def decimate(
    vertices: np.ndarray, faces: np.ndarray, fraction: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Decimate one mesh to about ``fraction`` of its faces.

    Returns ``(coarse vertices float64, coarse faces, parent)`` where ``parent[i]`` is the
    coarse vertex fine vertex ``i`` collapsed into. Vertices at the same position are merged
    first (a triangle soup, as STL files load, becomes a connected surface), so coincident
    fine vertices share a parent. Vertices whose faces all collapse away stay as loose coarse
    vertices, one per group collapsed together, at its centroid; vertices used by no face
    stay as they are.
    """
    n = len(vertices)
    vertices = np.asarray(vertices, np.float64)
    used = np.zeros(n, bool)
    used[faces.ravel()] = True
    first, merged_of = _merge_coincident(vertices[used])
    merged = vertices[used][first]
    slot = np.full(n, -1, np.int64)
    slot[used] = merged_of
    tri_in = slot[faces]
    tri_in = tri_in[_nondegenerate(tri_in)]
    target = int(round(len(tri_in) * fraction))
    if len(tri_in) == 0 or target < MIN_FACES or target >= len(tri_in):
        return vertices, np.asarray(faces, np.int64), np.arange(n)
    fs = _simplifier()
    pts, tri, collapses = fs.simplify(
        merged, tri_in.astype(np.int32), target_count=target, return_collapses=True
    )
    # Replay the history: a face survives when its vertices still differ, and the simplifier
    # keeps exactly the vertices surviving faces use, in index order.
    rep = _representatives(len(merged), np.asarray(collapses, np.int64).reshape(-1, 2))
    ends = rep[tri_in]
    ends = ends[_nondegenerate(ends)]
    kept = np.unique(ends)
    if len(kept) != len(pts) or not np.array_equal(
        np.searchsorted(kept, ends), np.asarray(tri).reshape(-1, 3)
    ):
        raise InputError(
            f"cannot decimate a mesh of {n} vertices and {len(faces)} faces: the simplifier's output "
            f"({len(pts)} vertices, {len(tri)} faces) does not follow its collapse history, so its vertices "
            "cannot be linked to the fine ones. Repair the mesh (e.g. trimesh's merge_vertices, "
            "remove_duplicate_faces, fix_normals), or keep every face with face_fraction=1 (--face-fraction 1)"
        )
    # Merged vertices left without a face: one loose vertex per group collapsed together.
    gone = ~np.isin(rep, kept)
    pieces, piece_of = np.unique(rep[gone], return_inverse=True)
    loose = np.zeros((len(pieces), merged.shape[1]))
    np.add.at(loose, piece_of.ravel(), merged[gone])
    loose /= np.bincount(piece_of.ravel(), minlength=len(pieces))[:, None]
    coarse_of = np.empty(len(merged), np.int64)
    coarse_of[~gone] = np.searchsorted(kept, rep[~gone])
    coarse_of[gone] = len(pts) + piece_of.ravel()
    # Unused vertices are appended after the decimated ones, unchanged.
    extra = np.flatnonzero(~used)
    parent = np.empty(n, np.int64)
    parent[used] = coarse_of[slot[used]]
    parent[extra] = len(pts) + len(pieces) + np.arange(len(extra))
    out = np.concatenate([np.asarray(pts, np.float64), loose, vertices[extra]])
    return out, np.asarray(tri, np.int64).reshape(-1, 3), parent


@dataclass(eq=False)
class _Decimated:
    """Decimated meshes of the batches read so far, in batch order (each object's vertices
    and faces together), and every fine vertex's parent as compact runs (numbered in this
    order)."""

    lo: np.ndarray
    hi: np.ndarray
    fraction: float
    how: dict[str, str]
    runs: ParentRuns
    parts: dict[str, list[np.ndarray]] = field(default_factory=dict)
    sizes: dict[int, float] = field(default_factory=dict)
    count: int = 0

    def add(self, key: str, value: np.ndarray) -> None:
        self.parts.setdefault(key, []).append(value)

    def cat(self, key: str, empty: np.ndarray) -> np.ndarray:
        return np.concatenate(self.parts[key]) if self.parts.get(key) else empty

    def batch(self, batch: ObjectBatch) -> None:
        """Decimate every object of ``batch`` (vertices grouped by object) on its own."""
        assert batch.faces is not None
        owners = batch.owners
        bounds = (
            np.flatnonzero(np.r_[True, owners[1:] != owners[:-1], True]) if len(owners) else np.zeros(1, int)
        )
        face_obj = owners[batch.faces[:, 0]] if len(batch.faces) else np.zeros(0, np.int64)
        by_obj = np.argsort(face_obj, kind="stable")
        face_bounds = (
            np.searchsorted(face_obj[by_obj], owners[bounds[:-1]]),
            np.searchsorted(face_obj[by_obj], owners[bounds[:-1]], "right"),
        )
        parents = np.empty(len(owners), np.int64)
        for i, (a, b) in enumerate(zip(bounds[:-1].tolist(), bounds[1:].tolist())):
            faces = batch.faces[by_obj[face_bounds[0][i] : face_bounds[1][i]]] - a
            try:
                pts, tri, parent = decimate(batch.positions[a:b], faces, self.fraction)
            except InputError as exc:
                raise InputError(f"object {int(owners[a])}: {exc}") from exc
            groups = Groups.of(parent, len(pts))
            self.add("pos", np.clip(pts, self.lo, self.hi))
            self.add("faces", tri + self.count)
            self.add("owner", np.full(len(pts), owners[a], np.int64))
            parents[a:b] = parent + self.count
            for n, how in self.how.items():
                self.add(f"attr/{n}", reduce_rows(batch.attributes[n][a:b], groups, how))
            self.sizes[int(owners[a])] = float(b - a)
            self.count += len(pts)
        self.runs.add(batch.chunks, batch.local, parents)


def coarsen_meshes(
    src: Level,
    plan: LevelPlan,
    builder: StoreBuilder,
    *,
    spec: Sparsity | None,
    make_xlinks: Callable[[int], CrossLevelWriter | None],
    src_rows: np.ndarray | None,
    face_fraction: float | None,
    progress: bool,
) -> tuple[CoarseLevel, CrossLevelWriter | None]:
    """Write coarse level ``plan.index`` of a mesh store, object by object."""
    from tqdm.auto import tqdm

    fraction = 1.0 / float(np.mean(plan.factor)) ** 2 if face_fraction is None else float(face_fraction)
    if not 0 < fraction <= 1:
        raise InputError(f"face_fraction must be in (0, 1], got {face_fraction!r}")
    if spec is not None and spec.by == "length":
        raise InputError(
            "object sparsity by 'length' applies to lines, skeletons and graphs; use 'size' for meshes"
        )
    _simplifier()
    names = attribute_names(src, None)
    lo, hi = (np.asarray(b, np.float64) for b in src.root.bounds)
    how = {n: reduction_for(n, src.vertex_attributes[n].dtype, None) for n in names}
    acc = _Decimated(lo, hi, fraction, how, ParentRuns(src.grid, per_vertex=True))
    batches = object_batches(src, spatial=True)
    total = sum(len(b) for b in batches)
    with tqdm(total=total, desc=f"level {plan.index}", unit="mesh", disable=not progress) as bar:
        for ids in batches:
            acc.batch(read_objects_batch(src, ids, names, faces=True))
            bar.update(len(ids))
    d = plan.grid.ndim
    dtype = src.vertices.dtype if src.vertices.dtype.kind == "f" else np.dtype(np.float32)
    coarse, order = object_order(
        CoarseObjects(
            positions=acc.cat("pos", np.zeros((0, d))).astype(dtype),
            owners=acc.cat("owner", np.zeros(0, np.int64)),
            attributes={n: acc.cat(f"attr/{n}", np.zeros(0)) for n in names},
            links=acc.cat("faces", np.zeros((0, 3), np.int64)),
            link_attributes={},
        )
    )
    coarse, extra, kept = sparsify(src, spec, coarse, acc.sizes)
    extra.update({"coarsening_algorithm": "quadric_edge_collapse", "face_fraction": fraction})
    vattrs = [NamedArray(n, np.ascontiguousarray(v), _channels(src, n)) for n, v in coarse.attributes.items()]
    out = _write(builder, src, plan, coarse.positions, coarse.links, coarse.owners, vattrs)
    xl = make_xlinks(
        max(int(src_rows.max(initial=1)) if src_rows is not None else 1, int(out.rows.max(initial=1)))
    )
    if xl is not None and len(coarse.positions):
        acc.runs.emit(xl, out, compose(order, kept))
    return CoarseLevel(len(coarse.positions), out.chunks, out.rows, out.present, extra), xl


def _channels(src: Level, name: str) -> tuple[str, ...] | None:
    names = src.vertex_attributes[name].attrs.get("channel_names")
    return tuple(names) if names else None


def _write(
    builder: StoreBuilder,
    src: Level,
    plan: LevelPlan,
    pos: np.ndarray,
    faces: np.ndarray,
    owners: np.ndarray,
    vattrs: list[NamedArray],
) -> Written:
    """Write the coarse mesh level like :func:`zarr_vectors.write_mesh` does (raw or Draco)."""
    from zarr_vectors.kinds.meshes import draco_cells

    grid = plan.grid
    lb = builder.at_level(plan.index)
    part = partition(pos, grid, owners)
    manifests = build_manifests(part, grid, src.num_objects)
    owner_table = partition_owners(part)
    cell, _, _ = vertex_locals(part)
    intra = np.all(cell[faces] == cell[faces[:, :1]], axis=1) if len(faces) else np.zeros(0, bool)
    draco = src.vertices.draco
    if draco:
        conf = (inner_codecs(src.vertices.doc) or [{}])[0].get("configuration") or {}
        bits, level = int(conf.get("quantization_bits", 11)), int(conf.get("compression_level", 7))
        blobs, part, frags = draco_cells(pos, faces, part, intra, bits, level)
        stored, payloads = faces[~intra], blobs
        codecs = [draco_codec(bits, level)]
    else:
        stored, payloads, frags, codecs = faces, None, fragment_payloads(part), []

    def links(b: Any) -> list[str]:
        if not write_edges(b, grid, part, stored, False, []):  # canonical with perm_idx, as level 0
            return []
        return ["links"] + (["link_fragments"] if not draco and bool(intra.any()) else [])

    present = write_level_arrays(
        lb,
        grid,
        LevelArrays(
            positions=pos,
            part=part,
            fragments=frags,
            vertex_attributes=vattrs,
            tables=Tables(src.num_objects, [], [], []),
            manifests=manifests,
            fragment_objects=owner_table,
            links=links,
            vertex_payloads=payloads,
            vertex_codecs=codecs,
            vertex_encoding="draco" if draco else "raw",
        ),
    )
    cell, local, _ = vertex_locals(part)
    return written(plan, part.cells, cell, local, present)
