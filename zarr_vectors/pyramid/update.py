"""Bringing a pyramid's coarse levels up to date after an edit of level 0, region by region.

An edit of level 0 (:func:`~zarr_vectors.engine.append_points`,
:func:`~zarr_vectors.engine.write.point_edit.replace_points`, ``delete_points``, each given a
``footprint`` list) rewrites some level-0 cells and reports them as a :class:`Footprint`.
A coarse cell of level k depends only on the level-(k-1) cells whose cross-level anchor it
is (its *footprint* below), so only the coarse cells above a rewritten cell can change.
:func:`update_levels` recomputes exactly those, level by level (the cells recomputed at
level k are the changed cells of level k+1's step), with the builder's own coarsening code
and the settings the levels recorded when they were built (``zarr_vectors_level.pyramid_build``).
Every other cell file is kept as it is; each level's ``nonempty_chunks``, object index,
copied object tables, cross-level link families and metadata are written again, and the
stale marks are cleared. Everything is one commit (:func:`~zarr_vectors.storage.rebuild_session`);
``Dataset.append/replace/delete`` run the edit and this update inside
:func:`~zarr_vectors.pyramid.together.one_commit`, so the two are one commit.

Invariant: afterwards every level is, file for file, what ``build_pyramid(...,
overwrite=True)`` with the same settings writes (but for the root's write generation).

Sharded levels are updated through :class:`~zarr_vectors.pyramid.update_shards.ShardWriteBack`:
only the shards holding a recomputed cell (or a rewritten ``+1``/``-1`` link cell) are
written again, each with its other cells kept, in the layout the level has (a rebuild sizes
``"auto"`` shards on the first cells it writes, so after an edit that changes those a rebuild
may pick another layout: the levels then answer every query alike but differ in shard files).

Lines, skeletons, graphs and raw meshes are updated region by region by their edit itself
(:mod:`zarr_vectors.pyramid.linked_update`: the same object edit at every level).

Region-wise recomputation is exact for point clouds (metavertex and subsample: a coarse cell's
rows depend on its own source rows only). With object sparsity the objects kept are chosen
again over the whole level (as a build does), and the cells of every object whose keeping
changed are recomputed as well. Where region-wise recomputation cannot be exact, the levels
are rebuilt whole with the stored settings instead (:func:`full_rebuild_reason` says why):
another geometry, renumbered object ids (every owner table names them), level-0 links dropped by an
edit made without a footprint, or a cross-level link dtype that the edit changes (it is
sized on the fullest cell).
"""

from __future__ import annotations

import json
import logging
import warnings
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from zarr_vectors.engine import (
    STALE_KEY,
    Footprint,
    Level,
    StoreBuilder,
    VectorStore,
    manifests_of,
    write_object_tables,
)
from zarr_vectors.errors import InputError, StaleLevelWarning
from zarr_vectors.format.grid import cell_key, chunk_key
from zarr_vectors.format.kinds import EDITED_LINKED_FAMILIES, POINT_CLOUD, family_of
from zarr_vectors.format.links import cross_level_anchor
from zarr_vectors.format.shards import parse_sharding
from zarr_vectors.pyramid._store import checksums_of, compression_of, copy_tables, read_doc, rows_per_chunk
from zarr_vectors.pyramid.build import build_pyramid, keep_points, object_sizes, stored_settings
from zarr_vectors.pyramid.linked_update import linked_rebuild_reason
from zarr_vectors.pyramid.plan import LevelPlan
from zarr_vectors.pyramid.points import coarsen_points, level_ratio
from zarr_vectors.pyramid.sparsity import Sparsity
from zarr_vectors.pyramid.update_shards import ShardWriteBack
from zarr_vectors.pyramid.xlevel import CrossLevelWriter, link_dtype
from zarr_vectors.storage import GENERATION_KEY, Backend, placeholder_root, rebuild_session, writing

__all__ = ["Footprint", "combine_footprints", "full_rebuild_reason", "update_levels"]

log = logging.getLogger(__name__)

#: Level families copied whole from the level below (object ids are kept).
_TABLES = ("object_attributes", "groups", "group_attributes")


class _NotRegional(Exception):
    """A condition found while updating that a region-wise update cannot reproduce."""


def combine_footprints(footprints: Sequence[Footprint]) -> Footprint:
    """One footprint standing for several edits made one after another (the union of their
    cells and objects; renumbered when any of them renumbered)."""
    if not footprints:
        raise InputError("combine_footprints needs at least one footprint")
    cells = np.concatenate([np.asarray(f.cells, np.int64) for f in footprints])
    return Footprint(
        np.unique(cells, axis=0) if len(cells) else cells,
        np.unique(np.concatenate([f.objects for f in footprints])),
        np.unique(np.concatenate([f.dropped for f in footprints])),
        any(f.renumbered for f in footprints),
    )


@writing
def update_levels(store: VectorStore, footprint: Footprint | Sequence[Footprint]) -> None:
    """Bring every coarse level of ``store`` (opened ``mode="r+"``) up to date after the level-0
    edit ``footprint`` describes (or the edits, when several footprints are given: every edit
    since the levels were last brought up to date must be among them), recomputing only the
    coarse cells above the cells touched (or, when :func:`full_rebuild_reason` names a reason,
    rebuilding the levels whole with their recorded settings). Afterwards each level is what
    a full rebuild writes.

    Raises InputError when the levels do not record their settings (built before they were
    recorded): rebuild them once with ``build_pyramid(..., overwrite=True)``.
    """
    store.require_writable()
    if not isinstance(footprint, Footprint):
        footprint = combine_footprints(list(footprint))
    if len(store.levels) < 2:
        return
    settings = stored_settings(store)
    reason = full_rebuild_reason(store, footprint, settings)
    if reason is None and family_of(tuple(store.root.geometry_types)) in EDITED_LINKED_FAMILIES:
        reason = "the levels of linked kinds are updated region by region inside their edit, which holds the new objects"
    if reason is None:
        try:
            _update_regions(store, footprint, settings)
            return
        except _NotRegional as exc:
            reason = str(exc)
    log.info("levels of %s rebuilt whole: %s", store.description, reason)
    factors = settings.pop("factors")
    build_pyramid(store, factors, overwrite=True, **settings)


def full_rebuild_reason(
    store: VectorStore, footprint: Footprint | None = None, settings: dict[str, Any] | None = None
) -> str | None:
    """Why the levels of ``store`` cannot be updated region by region after ``footprint`` (None:
    they can, unless the edit changes a cross-level link dtype, found while updating).

    Lines, skeletons, graphs and raw meshes are updated region by region inside their edit
    (``Dataset.append/replace/delete``, which hold the new objects); for them this names why
    that update cannot be exact (:func:`~zarr_vectors.pyramid.linked_update.linked_rebuild_reason`:
    Draco, object sparsity, sharded or stale levels, level 0 without its cross-level links),
    and :func:`update_levels`, given no new objects, rebuilds them."""
    settings = stored_settings(store) if settings is None else settings
    level0 = store.level(0)
    kinds = tuple(store.root.geometry_types)
    if family_of(kinds) in EDITED_LINKED_FAMILIES:
        return linked_rebuild_reason(store, settings)
    if kinds != (POINT_CLOUD,):
        return f"region-wise updates are for point clouds and linked kinds; this store holds {list(kinds)}"
    if footprint is not None and footprint.renumbered:
        return "the edit renumbered object ids, which every coarse owner table names"
    if settings["cross_level"] != "none" and "links" not in level0.meta.arrays_present:
        return "an edit made without a footprint dropped level 0's cross-level links"
    return None


def _update_regions(store: VectorStore, footprint: Footprint, settings: dict[str, Any]) -> None:
    level0 = store.level(0)
    root = store.root
    doc = read_doc(store.backend, "zarr.json")
    assert doc is not None
    attrs = {k: v for k, v in (doc.get("attributes") or {}).items() if k != GENERATION_KEY}
    changed = _lin(
        np.asarray(footprint.cells, np.int64).reshape(-1, level0.grid.ndim) - level0.grid.origin, level0
    )
    codecs = compression_of(level0), checksums_of(level0)
    sharded = parse_sharding(level0.vertices.path, level0.vertices.doc) is not None
    try:
        first = {"zarr.json": placeholder_root()}
        with rebuild_session(store.backend, hidden=lambda key: False, first=first, wait=store.wait) as raw:
            overlay: Backend = ShardWriteBack(raw) if sharded else raw
            with store.staged(overlay, root), warnings.catch_warnings():
                warnings.simplefilter("ignore", StaleLevelWarning)
                for k in store.levels[1:]:
                    changed = _update_level(store, overlay, k, changed, settings, codecs, attrs)
    finally:
        store.replace_root(store.root)


def _lin(cells: np.ndarray, level: Level | Any) -> np.ndarray:
    """Linear indices of relative cell indices (K, D) in a level's (or grid's) grid."""
    grid = level.grid if isinstance(level, Level) else level
    if not len(cells):
        return np.zeros(0, np.int64)
    return np.ravel_multi_index(tuple(np.asarray(cells, np.int64).T), tuple(int(s) for s in grid.shape))


def _chunks(keys: list[str], ndim: int) -> np.ndarray:
    """Absolute chunk coordinates (K, D) of ``nonempty_chunks`` keys."""
    return np.array([[int(v) for v in k.split(".")] for k in keys], np.int64).reshape(len(keys), ndim)


def _update_level(
    store: VectorStore,
    overlay: Backend,
    k: int,
    changed: np.ndarray,
    settings: dict[str, Any],
    codecs: tuple[tuple[str, int | None], bool],
    root_attrs: dict[str, Any],
) -> np.ndarray:
    """Recompute the cells of level ``k`` above the ``changed`` cells of level k-1 (linear);
    return the recomputed cells of level k (linear), the changed cells for level k+1."""
    src, old = store.level(k - 1), store.level(k)
    grid = old.grid
    plan = LevelPlan(k, k - 1, np.ones(grid.ndim), grid.bin_shape, level_ratio(old), grid)
    src_chunks = src.vertices.nonempty
    anchor = _lin(cross_level_anchor(src_chunks, level_ratio(src), plan.chunk_scale) - grid.origin, grid)
    keep, records, ratio, flipped = _sparsity(store, src, old, settings["object_sparsity"][k - 1])
    if len(flipped):  # the cells of objects kept now and not before, or the other way round
        changed = np.union1d(
            changed, src.fragment_owners.cell[np.isin(src.fragment_owners.object_id, flipped)]
        )
    shape = tuple(int(s) for s in src.grid.shape)
    hit = np.stack(np.unravel_index(changed, shape), axis=1).reshape(-1, grid.ndim) + src.grid.origin
    region = np.unique(_lin(cross_level_anchor(hit, level_ratio(src), plan.chunk_scale) - grid.origin, grid))
    if len(flipped):
        owners = old.fragment_owners
        region = np.union1d(region, owners.cell[np.isin(owners.object_id, flipped)])
    only = np.flatnonzero(np.isin(anchor, region))
    _, rows = rows_per_chunk(src, chunks=src_chunks[only])
    (name, clevel), checksums = codecs
    builder = StoreBuilder(overlay, name, clevel, checksums=checksums, shards=None)
    xl = _links_writer(builder, overlay, settings["cross_level"], src, plan, anchor, only, rows)
    # What the untouched cells contribute, read before the region's old cells are deleted.
    old_cells = old.vertices.nonempty
    inside = np.isin(_lin(old_cells - grid.origin, grid), region)
    _, old_rows = rows_per_chunk(old, chunks=old_cells[inside])
    objects = src.manifests is not None
    kept = _kept_fragments(old, region) if objects else None
    old_docs = _delete_region(overlay, old, src, region, plan)
    coarse = coarsen_points(
        src,
        plan,
        builder,
        reductions=settings["reductions"],
        keep=keep,
        xlinks=xl,
        src_rows=rows,
        strategy=settings["point_strategy"],
        only=only,
        manifests=False,
    )
    if xl is not None:
        xl.close()
    _merge_listings(overlay, builder, old_docs, region, src, plan)
    _link_counts(overlay, builder, k, records)
    if objects:
        assert coarse.fragments is not None and kept is not None
        obj, chunks, local = (np.concatenate([a, b]) for a, b in zip(kept, coarse.fragments))
        write_object_tables(
            builder.at_level(k),  # type: ignore[arg-type]  # a LevelBuilder writes level k's paths
            "0",
            sid_ndim=grid.ndim,
            num_objects=src.num_objects,
            manifests=manifests_of(obj, chunks, local, src.num_objects),
            object_attributes=[],
            groups=[],
            group_attributes=[],
        )
    count = old.meta.vertex_count - int(old_rows.sum()) + coarse.vertex_count
    _level_doc(overlay, builder, src, old, count, ratio)
    builder.commit(root_attrs)
    if isinstance(overlay, ShardWriteBack):
        overlay.flush()
    store.replace_root(store.root, k - 1, k)
    return region


def _level_doc(
    overlay: Backend, builder: StoreBuilder, src: Level, old: Level, count: int, ratio: float
) -> None:
    """Level k's group: its object tables copied again from level k-1, and its metadata with
    the new counts (``count`` vertices, sparsity ``ratio``), no longer stale."""
    present = [p for p in old.meta.arrays_present if p not in _TABLES and p != "links"]
    present += copy_tables(overlay, src, old.index)
    if "links" in old.meta.arrays_present:
        present.append("links")
    objects = src.manifests is not None
    meta = replace(
        old.meta,
        vertex_count=count,
        object_sparsity=ratio,
        arrays_present=tuple(present),
        inherited_num_objects=src.num_objects if objects else None,
        extra={key: v for key, v in old.meta.extra.items() if key != STALE_KEY},
    )
    doc = read_doc(overlay, f"{old.index}/zarr.json")
    assert doc is not None
    doc.setdefault("attributes", {})["zarr_vectors_level"] = meta.to_json()
    builder.groups[str(old.index)] = doc


def _sparsity(
    store: VectorStore, src: Level, old: Level, spec: Sparsity | None
) -> tuple[np.ndarray | None, int, float, np.ndarray]:
    """The objects level k keeps now (None: all), its link records per direction (the rows of
    those objects at level k-1), its ``object_sparsity`` and the objects whose keeping changed
    (kept now and not before, or before and not now: their cells are recomputed too)."""
    if spec is None:
        return None, src.meta.vertex_count, old.meta.object_sparsity, np.zeros(0, np.int64)
    keep, n_present, n_kept = keep_points(store, src, spec)
    assert keep is not None
    flipped = np.setxor1d(keep, np.unique(old.fragment_owners.object_id))
    records = int(object_sizes(src, keep).sum())
    return keep, records, (n_kept / n_present) if n_present else 1.0, flipped


def _links_writer(
    builder: StoreBuilder,
    overlay: Backend,
    cross_level: str,
    src: Level,
    plan: LevelPlan,
    anchor: np.ndarray,
    only: np.ndarray,
    rows: np.ndarray,
) -> CrossLevelWriter | None:
    """The cross-level writer a full build uses for this level pair; _NotRegional when the
    edit changes the links' dtype.

    A build sizes the dtype on every source cell's rows and every coarse cell's sum of them
    (:func:`_link_bound`). The region's sums (``rows`` of the source cells ``only``) settle it
    without reading the other cells when they need the stored dtype (the others' sums are at
    most the old bound, which it holds) or a wider one; when they fit a narrower one, every
    source cell's rows are read to find out whether the level still needs the stored dtype."""
    if cross_level == "none":
        return None
    family = f"{src.index}/links/+{plan.index - src.index}"
    stored: set[np.dtype] = set()
    for seg in overlay.list_dir(family):
        doc = read_doc(overlay, f"{family}/{seg}/zarr.json")
        name = None if doc is None else (doc.get("attributes") or {}).get("dtype")
        if name is not None:
            stored.add(np.dtype(name))
    dtype = link_dtype(_link_bound(anchor[only], rows))
    if len(stored) != 1 or dtype.itemsize < next(iter(stored)).itemsize:
        dtype = link_dtype(_link_bound(anchor, rows_per_chunk(src)[1]))
    if stored and stored != {dtype}:
        raise _NotRegional(
            f"the edit changes the cross-level link dtype of level {src.index} "
            f"({', '.join(sorted(map(str, stored)))} -> {dtype})"
        )
    return CrossLevelWriter(
        builder,
        fine=src.index,
        coarse=plan.index,
        fine_grid=src.grid,
        coarse_grid=plan.grid,
        fine_ratio=level_ratio(src),
        coarse_ratio=plan.chunk_scale,
        dtype=dtype,
        explicit=cross_level == "explicit",
    )


def _link_bound(anchor: np.ndarray, rows: np.ndarray) -> int:
    """The rows a build sizes a level pair's link dtype on: the most rows of one source cell or
    of one coarse cell's source cells together (``anchor``: each source cell's coarse cell)."""
    bound = int(np.bincount(anchor, weights=rows).max()) if len(rows) else 1
    return max(int(rows.max(initial=1)), bound)


def _kept_fragments(old: Level, region: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(object, absolute chunk, fragment)`` of the old level's fragments outside ``region``."""
    owners = old.fragment_owners
    keep = ~np.isin(owners.cell, region)
    shape = tuple(int(s) for s in old.grid.shape)
    chunks = np.stack(np.unravel_index(owners.cell[keep], shape), axis=1).reshape(-1, old.grid.ndim)
    return owners.object_id[keep], chunks + old.grid.origin, owners.fragment[keep]


def _families(overlay: Backend, src: Level, plan: LevelPlan) -> list[str]:
    """The cross-level link families of the pair: ``k-1/links/+d`` and ``k/links/-d``."""
    d = plan.index - src.index
    out = [f"{src.index}/links/+{d}", f"{plan.index}/links/-{d}"]
    return [f for f in out if read_doc(overlay, f"{f}/zarr.json") is not None]


def _region_of(path: str, chunks: np.ndarray, src: Level, plan: LevelPlan) -> np.ndarray:
    """The coarse cell (linear) each chunk of array ``path`` belongs to: a fine chunk of the
    ``+1`` links, its anchor; any other (level k) chunk, itself."""
    grid = plan.grid
    if path.startswith(f"{src.index}/"):
        chunks = cross_level_anchor(chunks, level_ratio(src), plan.chunk_scale)
    return _lin(chunks - grid.origin, grid)


def _delete_region(
    overlay: Backend, old: Level, src: Level, region: np.ndarray, plan: LevelPlan
) -> dict[str, dict[str, Any]]:
    """Delete (through the overlay) the old cells of ``region``: level k's cell arrays, the
    ``-1`` links of those cells and the ``+1`` links of the fine cells below them; and level
    k's object tables. Returns the old documents of those cell arrays, by path."""
    paths = [a.path for a in (old.vertices, old.fragments, old.fragment_object_ids) if a is not None]
    paths += [a.path for a in old.vertex_attributes.values()]
    for family in _families(overlay, src, plan):
        paths += [f"{family}/{seg}" for seg in overlay.list_dir(family) if seg != "zarr.json"]
    docs: dict[str, dict[str, Any]] = {}
    keys: list[str] = []
    for path in paths:
        doc = read_doc(overlay, f"{path}/zarr.json")
        if doc is None:
            continue
        docs[path] = doc
        attrs = doc.get("attributes") or {}
        chunks = _chunks(list(attrs.get("nonempty_chunks") or []), plan.grid.ndim)
        origin = np.asarray(attrs.get("chunk_grid_origin") or [0] * plan.grid.ndim, np.int64)
        mine = np.isin(_region_of(path, chunks, src, plan), region)
        keys += [f"{path}/{cell_key(c)}" for c in chunks[mine] - origin]
    overlay.delete_many(keys)
    for family in ("object_index", *_TABLES):
        overlay.delete_prefix(f"{plan.index}/{family}")
    return docs


def _merge_listings(
    overlay: Backend,
    builder: StoreBuilder,
    old_docs: dict[str, dict[str, Any]],
    region: np.ndarray,
    src: Level,
    plan: LevelPlan,
) -> None:
    """Every cell array's document: the old one (or the new, for an array the level did not
    have) listing the old cells outside ``region`` and the cells written now, in the order a
    full build lists them (a level's cells by linear index; ``+1`` link cells by their anchor,
    then by linear index). A link array left without a cell is removed."""
    ndim = plan.grid.ndim
    for path in sorted(set(old_docs) | {p for p in builder.arrays if _cell_array(builder.arrays[p])}):
        new = builder.arrays.get(path)
        base = old_docs.get(path, new)
        assert base is not None
        if path not in old_docs and isinstance(overlay, ShardWriteBack):
            raise _NotRegional(f"the edit gives level {plan.index} a new sharded cell array {path}")
        attrs = base.get("attributes") or {}
        old_chunks = _chunks(list(attrs.get("nonempty_chunks") or []), ndim)
        old_chunks = old_chunks[~np.isin(_region_of(path, old_chunks, src, plan), region)]
        new_chunks = _chunks(list(((new or {}).get("attributes") or {}).get("nonempty_chunks") or []), ndim)
        every = np.concatenate([old_chunks, new_chunks])
        fine = path.startswith(f"{src.index}/")
        own = _lin(every - (src.grid.origin if fine else plan.grid.origin), src if fine else plan.grid)
        order = np.lexsort((own, _region_of(path, every, src, plan))) if fine else np.argsort(own)
        if not len(every) and "/links/" in path:
            builder.arrays.pop(path, None)
            overlay.delete_prefix(path)
            continue
        doc = json.loads(json.dumps(base))
        doc["attributes"]["nonempty_chunks"] = [chunk_key(c) for c in every[order]]
        builder.arrays[path] = doc


def _cell_array(doc: dict[str, Any]) -> bool:
    return "nonempty_chunks" in (doc.get("attributes") or {})


def _link_counts(overlay: Backend, builder: StoreBuilder, k: int, records: int) -> None:
    """The link family groups of the pair (k-1, k) with their record counts: one record per
    vertex of level k-1 in each direction (no object sparsity)."""
    for path in (f"{k - 1}/links/+1", f"{k}/links/-1"):
        doc = builder.groups.get(path) or read_doc(overlay, f"{path}/zarr.json")
        if doc is None:
            continue
        doc = json.loads(json.dumps(doc))
        doc["attributes"]["num_links"] = records
        doc["attributes"]["num_physical_records"] = records
        builder.groups[path] = doc
