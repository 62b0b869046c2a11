"""Coarsening a point level, streamed chunk by chunk.

A coarse bin lies inside one coarse chunk, and a coarse chunk covers whole source chunks
(nested grids), so a coarse chunk is computed from its source chunks alone: the build
reads a batch of source chunks, reduces each (object, coarse bin) group of rows to one
metavertex (each coarse bin's rows to one representative when the level has no objects),
writes the coarse cells and forgets the batch. Memory holds one batch of cells plus one
entry per coarse fragment (for the manifests).

Metavertices are laid out exactly like level 0 (:func:`zarr_vectors.engine.write.partition.partition`):
rows by bin, one range fragment per bin, or per (bin, object) with objects. A metavertex
is the mean of its group clipped to the group's bounding box, so it lies in the group's
own chunk and bin and a box query at the coarse level is exact.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import numpy as np

from zarr_vectors.engine import (
    OBJECT_ID_META,
    Level,
    StoreBuilder,
    build_manifests,
    fetch_cells,
    fragment_owner_payloads,
    fragment_payloads,
    partition,
    row_owners,
    row_payloads,
    sort_keys,
    write_object_tables,
)
from zarr_vectors.errors import ZarrVectorsError
from zarr_vectors.format.links import cross_level_anchor
from zarr_vectors.pyramid.plan import LevelPlan
from zarr_vectors.pyramid.reduce import Groups, centroids, reduce_rows, reduction_for
from zarr_vectors.pyramid.xlevel import CrossLevelWriter

__all__ = [
    "CoarseLevel",
    "chunk_batches",
    "coarsen_points",
    "coordinate_hash",
    "level_ratio",
    "subsample_groups",
]

#: Source cells fetched per batch (and rows, when their counts are known).
BATCH_CELLS = 512
BATCH_ROWS = 2_000_000


@dataclass
class CoarseLevel:
    """What a coarsening step wrote: counts for the level metadata and the next step."""

    vertex_count: int
    chunks: np.ndarray  # (K, D) absolute chunk coordinates of the occupied coarse chunks
    rows: np.ndarray  # (K,) vertex rows of each
    arrays_present: list[str]
    extra: dict[str, Any] = field(default_factory=dict)
    #: With objects and ``manifests=False``: every coarse fragment's ``(object, absolute chunk
    #: (F, D), fragment number in its cell)``, for the caller to build the object index.
    fragments: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None


def level_ratio(level: Level) -> np.ndarray:
    """A level's chunk scale against the root chunk shape (integers)."""
    ratio = level.grid.chunk_shape / np.asarray(level.root.chunk_shape, np.float64)
    return np.maximum(np.rint(ratio), 1).astype(np.int64)


def chunk_batches(dst_lin: np.ndarray, rows: np.ndarray | None) -> Iterator[np.ndarray]:
    """Indices of source chunks in batches that never split a coarse chunk ``dst_lin``."""
    order = np.argsort(dst_lin, kind="stable")
    lin = dst_lin[order]
    starts = np.flatnonzero(np.r_[True, lin[1:] != lin[:-1]]) if len(lin) else np.zeros(0, np.int64)
    ends = np.append(starts[1:], len(lin))
    counts = rows[order] if rows is not None else np.zeros(len(order), np.int64)
    cum = np.concatenate([[0], np.cumsum(counts)])
    first = 0
    for g in range(len(starts)):
        n_cells = ends[g] - starts[first]
        n_rows = cum[ends[g]] - cum[starts[first]]
        if n_cells >= BATCH_CELLS or n_rows >= BATCH_ROWS or g == len(starts) - 1:
            yield order[starts[first] : ends[g]]
            first = g + 1


def _attribute_meta(src: Level, name: str, values: np.ndarray) -> dict[str, Any]:
    meta = {
        k: v
        for k, v in src.vertex_attributes[name].attrs.items()
        if k not in ("nonempty_chunks", "chunk_grid_origin")
    }
    meta["dtype"] = values.dtype.name
    return meta


class _PointStreams:
    """The per-chunk arrays of one coarse point level, filled batch by batch."""

    def __init__(self, builder: StoreBuilder, src: Level, plan: LevelPlan, objects: bool) -> None:
        lb = builder.at_level(plan.index)
        grid = plan.grid
        self.builder, self.src, self.grid = lb, src, grid
        self.vertices = lb.cell_stream(
            "0/vertices", grid, {"zv_array": "vertices", "dtype": src.vertices.dtype.name, "encoding": "raw"}
        )
        self.fragments = lb.cell_stream(
            "0/vertex_fragments",
            grid,
            {"zv_array": "vertex_fragments", "encoding": "fragment_index_v1"},
            kind="fragments",
        )
        self.owners = (
            lb.cell_stream("0/fragment_attributes/object_id", grid, OBJECT_ID_META) if objects else None
        )
        self.attributes: dict[str, Any] = {}

    def write(self, pos: np.ndarray, attrs: dict[str, np.ndarray], part: Any) -> None:
        """Cells of one batch: ``pos`` and ``attrs`` in group order, ``part`` their partition."""
        self.vertices.add(part.cells, row_payloads(pos, part))
        self.fragments.add(part.cells, fragment_payloads(part))
        for name, values in attrs.items():
            if values.dtype.kind == "M":  # date-times: stored as int64 counts, time_unit kept in meta
                values = values.view(np.int64)
            stream = self.attributes.get(name)
            if stream is None:
                meta = _attribute_meta(self.src, name, values)
                stream = self.attributes[name] = self.builder.cell_stream(
                    f"0/vertex_attributes/{name}", self.grid, meta
                )
            stream.add(part.cells, row_payloads(values, part))
        if self.owners is not None:
            self.owners.add(
                part.cells,
                fragment_owner_payloads(part.frag_cell, part.frag_local, part.frag_object, len(part.cells)),
            )

    def close(self) -> list[str]:
        self.vertices.close()
        self.fragments.close()
        present = ["vertices", "vertex_fragments"]
        if self.attributes:
            self.builder.group("0/vertex_attributes")
            present.append("vertex_attributes")
        for name in sorted(self.attributes):
            self.attributes[name].close()
        if self.owners is not None:
            self.owners.close()
            self.builder.group("0/fragment_attributes")
            present.append("fragment_attributes")
        return present


def _groups(pos: np.ndarray, owners: np.ndarray | None, grid: Any) -> tuple[np.ndarray, Groups, np.ndarray]:
    """Rows sorted into groups, one per (coarse bin, object): ``(order, groups over the
    sorted rows, each group's sort key)``."""
    key = sort_keys(pos, grid)
    order = np.lexsort((owners, key)) if owners is not None else np.argsort(key, kind="stable")
    sk = key[order]
    new = np.r_[True, sk[1:] != sk[:-1]] if len(sk) else np.zeros(0, bool)
    if owners is not None and len(sk):
        so = owners[order]
        new[1:] |= so[1:] != so[:-1]
    starts = np.append(np.flatnonzero(new), len(sk)).astype(np.int64)
    return order, Groups(None, starts), sk[new]


def coarsen_points(
    src: Level,
    plan: LevelPlan,
    builder: StoreBuilder,
    *,
    reductions: Mapping[str, str] | None,
    keep: np.ndarray | None,
    xlinks: CrossLevelWriter | None,
    src_rows: np.ndarray | None,
    progress: Any = None,
    strategy: str = "metavertex",
    only: np.ndarray | None = None,
    manifests: bool = True,
) -> CoarseLevel:
    """Write coarse level ``plan.index`` of a point cloud from level ``src``.

    ``only`` (indices into ``src.vertices.nonempty``, every source cell of each coarse cell
    it reaches) limits the build to those source cells, for an update; each coarse cell is
    written exactly as a whole build writes it, since a coarse cell depends on its own
    source cells only. ``manifests=False`` leaves the object index to the caller
    (:attr:`CoarseLevel.fragments`).

    ``keep`` (sorted object ids) limits the objects carried over; ``src_rows`` are the
    source chunks' row counts (in ``nonempty_chunks`` order) when known, for batching.
    ``strategy``: ``metavertex`` (one reduced row per coarse bin and object) or ``subsample``
    (real rows of ``src``, see :func:`subsample_groups`; levels without objects only).
    """
    names = list(src.vertex_attributes)
    subsample = strategy == "subsample"
    how = (
        {} if subsample else {n: reduction_for(n, src.vertex_attributes[n].dtype, reductions) for n in names}
    )
    objects = src.manifests is not None
    if subsample and objects:
        raise ZarrVectorsError("the subsample strategy is for point clouds without objects; use metavertex")
    fraction = 1.0 / float(np.prod(plan.grid.bin_shape / src.grid.bin_shape))
    grid = plan.grid
    src_chunks = src.vertices.nonempty if only is None else src.vertices.nonempty[only]
    dst_of = cross_level_anchor(src_chunks, level_ratio(src), plan.chunk_scale)
    shape = tuple(int(s) for s in grid.shape)
    dst_lin = (
        np.ravel_multi_index(tuple((dst_of - grid.origin).T), shape) if len(dst_of) else np.zeros(0, np.int64)
    )
    streams = _PointStreams(builder, src, plan, objects)
    frag_tables: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    out_chunks: list[np.ndarray] = []
    out_rows: list[np.ndarray] = []
    total = 0
    for idx in chunk_batches(dst_lin, src_rows):
        chunks = src_chunks[idx]
        cells, _ = fetch_cells(
            src, chunks, names, np.arange(len(chunks)) if objects else np.zeros(0, np.int64), owners=objects
        )
        owners = row_owners(src, cells) if objects else None
        row_cell = np.repeat(np.arange(len(chunks)), np.diff(cells.offsets))
        rows = np.arange(len(cells.positions))
        if keep is not None and owners is not None:
            rows = rows[np.isin(owners, keep)]
        order, groups, gkey = _groups(cells.positions[rows], None if owners is None else owners[rows], grid)
        fine_rows = rows
        rows = rows[order]  # fine rows, sorted by group
        if subsample:
            rows, groups, target = subsample_groups(cells.positions, rows, groups, fraction)
            meta_pos = cells.positions[rows[target.kept]]
            meta_oid = None
            part = partition(meta_pos, grid, None)
            streams.write(meta_pos, {n: cells.attributes[n][rows[target.kept]] for n in names}, part)
            m = len(meta_pos)
        else:
            m = groups.size
            meta_pos = centroids(cells.positions[rows], groups)
            if m and not np.array_equal(sort_keys(meta_pos, grid), gkey):
                raise ZarrVectorsError("internal error: a metavertex left its bin; please report this store")
            meta_oid = None if owners is None else groups.first(owners[rows])
            part = partition(meta_pos, grid, meta_oid)
            streams.write(
                meta_pos, {n: reduce_rows(cells.attributes[n][rows], groups, how[n]) for n in names}, part
            )
        if objects:
            assert part.frag_object is not None  # partition() was given meta_oid
            base = sum(len(c) for c in out_chunks)
            frag_tables.append((part.frag_cell + base, part.frag_local, part.frag_object))
        out_chunks.append(part.cells + grid.origin)
        out_rows.append(np.diff(part.row_offsets))
        total += m
        if xlinks is not None and m:
            stored = np.empty(m, np.int64)
            stored[part.order] = np.arange(m)
            s = np.empty(len(order), np.int64)  # coarse row of each fine row, in fine row order
            if subsample:  # a kept row is its own parent; any other row, its group's first kept row
                s[np.searchsorted(fine_rows, rows)] = stored[target.parent]
            else:
                s[order] = stored[np.repeat(np.arange(m), groups.counts)]
            c = np.searchsorted(part.row_offsets, s, side="right") - 1
            cell = row_cell[fine_rows]
            xlinks.add(
                chunks,
                cell,
                fine_rows - cells.offsets[cell],
                part.cells + grid.origin,
                c,
                s - part.row_offsets[c],
            )
        if progress is not None:
            progress.update(len(idx))
    present = streams.close()
    all_chunks = np.concatenate(out_chunks) if out_chunks else np.zeros((0, grid.ndim), np.int64)
    fragments = None
    if objects and manifests:
        present += _write_manifests(
            streams.builder, grid, src.num_objects, all_chunks - grid.origin, frag_tables
        )
    elif objects:
        z = np.zeros(0, np.int64)
        cell = np.concatenate([t[0] for t in frag_tables]) if frag_tables else z
        fragments = (
            np.concatenate([t[2] for t in frag_tables]) if frag_tables else z,
            all_chunks[cell].reshape(-1, grid.ndim),
            np.concatenate([t[1] for t in frag_tables]) if frag_tables else z,
        )
    extra: dict[str, Any] = {"attribute_reductions": how} if how else {}
    if subsample:
        extra["coarsening_algorithm"] = "subsample"
    return CoarseLevel(
        total,
        all_chunks,
        np.concatenate(out_rows) if out_rows else np.zeros(0, np.int64),
        present,
        extra,
        fragments,
    )


@dataclass(frozen=True, eq=False)
class Subsample:
    """Which rows of a subsampled batch stay: ``kept`` (a mask over the rows in group
    order) and, for every row, ``parent``: the position among the kept rows of itself
    (when kept) or of the first kept row of its group."""

    kept: np.ndarray
    parent: np.ndarray


def subsample_groups(
    positions: np.ndarray, rows: np.ndarray, groups: Groups, fraction: float
) -> tuple[np.ndarray, Groups, Subsample]:
    """Keep ``ceil(fraction * n)`` rows of each group of ``n`` (so at least one: no group,
    hence no coarse bin with data, is left empty), chosen by a hash of their coordinates.

    The choice depends only on the coordinates, so it is the same whatever the batching,
    and a coarser level built from this one keeps a subset of it. Returns the rows
    reordered by (group, priority), the same groups, and what stays.
    """
    counts = groups.counts
    gid = np.repeat(np.arange(groups.size), counts)
    order = np.lexsort((coordinate_hash(positions[rows]), gid))
    rows = rows[order]
    rank = np.arange(len(rows)) - groups.starts[gid]
    quota = np.ceil(counts * fraction - 1e-9).astype(np.int64)
    kept = rank < np.maximum(quota, 1)[gid]
    ordinal = np.cumsum(kept) - 1
    first = ordinal[groups.starts[:-1]] if len(rows) else np.zeros(0, np.int64)
    parent = np.where(kept, ordinal, first[gid])
    return rows, groups, Subsample(kept, parent)


def coordinate_hash(positions: np.ndarray) -> np.ndarray:
    """A well-mixed uint64 per row from the bits of its coordinates (splitmix64 steps), the
    same for the same coordinates in any batch or order."""
    bits = np.ascontiguousarray(positions).view(np.uint8).reshape(len(positions), -1)
    width = next(w for w in (8, 4, 2, 1) if bits.shape[1] % w == 0)
    words = bits.view(f"<u{width}")
    h = np.zeros(len(positions), np.uint64)
    with np.errstate(over="ignore"):
        for col in words.T:
            h = _mix(h ^ col.astype(np.uint64))
    return h


def _mix(x: np.ndarray) -> np.ndarray:
    x = x + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def _write_manifests(
    builder: Any,
    grid: Any,
    num_objects: int,
    cells: np.ndarray,
    tables: list[tuple[np.ndarray, np.ndarray, np.ndarray]],
) -> list[str]:
    """The object index of the coarse level: one manifest per object id of the source."""
    cat = (lambda i: np.concatenate([t[i] for t in tables])) if tables else (lambda i: np.zeros(0, np.int64))
    frags = SimpleNamespace(
        frag_cell=cat(0), frag_local=cat(1), frag_object=cat(2), cells=cells.reshape(-1, grid.ndim)
    )
    manifests = build_manifests(frags, grid, num_objects)  # type: ignore[arg-type]  # reads only frags' fields
    return write_object_tables(
        builder,
        "0",
        sid_ndim=grid.ndim,
        num_objects=num_objects,
        manifests=manifests,
        object_attributes=[],
        groups=[],
        group_attributes=[],
    )
