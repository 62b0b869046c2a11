"""Building a pyramid on an opened store: plan, coarsen level by level, finalise metadata last.

For each new level ``k`` (from level ``k - 1``): the geometry's coarsener writes the
level's arrays and, unless ``cross_level="none"``, the ``k-1/links/+1`` family (and
``k/links/-1`` with ``"explicit"``); then the level group, the patched source level group
and finally the root ``zarr.json`` (which lists level k) are written.

The build writes into a staging folder (:func:`zarr_vectors.storage.commit.rebuild_session`):
old coarse levels and cross-level links read as absent there, level 0 is read from the
store. Only a complete build is committed: a local store is exchanged in one rename
for a sibling holding level 0 (hard links) and the new levels; another store first
gets a root listing level 0 only, then loses the old levels, gains the new ones and
finally the new root. A build that fails or is killed leaves the old levels (or, on
object stores, level 0 alone), never a level the root lists but does not hold.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from zarr_vectors.engine import Level, StoreBuilder, VectorStore
from zarr_vectors.errors import InputError, ReadOnlyError, choice_message
from zarr_vectors.format.fragments import decode_fragments
from zarr_vectors.format.kinds import LINKED_FAMILIES, family_of, kind
from zarr_vectors.format.metadata import LevelMeta, RootMeta
from zarr_vectors.pyramid import meta as pmeta
from zarr_vectors.pyramid._store import (
    checksums_of,
    compression_of,
    copy_tables,
    read_doc,
    rows_per_chunk,
    shards_of,
)
from zarr_vectors.pyramid.plan import LevelPlan, plan_levels
from zarr_vectors.pyramid.points import CoarseLevel, coarsen_points, level_ratio
from zarr_vectors.pyramid.reduce import REDUCTIONS
from zarr_vectors.pyramid.sparsity import Sparsity, attribute_scores, select_objects, sparsity_per_level
from zarr_vectors.pyramid.xlevel import CrossLevelWriter, link_dtype
from zarr_vectors.storage import (
    GENERATION_KEY,
    ShardReader,
    dump_json,
    new_generation,
    rebuild_session,
    writing,
)

__all__ = [
    "BUILD_KEY",
    "CROSS_LEVEL",
    "build_pyramid",
    "keep_points",
    "object_sizes",
    "settings_records",
    "stored_settings",
]

CROSS_LEVEL = ("none", "implicit", "explicit")
#: ``zarr_vectors_level`` key of a coarse level recording the settings it was built with, so
#: that an update (or a rebuild) after an edit reproduces the same level.
BUILD_KEY = "pyramid_build"


def settings_records(
    plans: Sequence[LevelPlan],
    sparsity: Sequence[Sparsity | None],
    first_scale: np.ndarray,
    strategy: str,
    reductions: Mapping[str, str] | None,
    cross_level: str,
    tolerance: float | None,
    face_fraction: float | None,
) -> list[dict[str, Any]]:
    """One JSON record per planned level: its factor and chunk-scale step, and the pyramid's
    settings (the resolved point strategy, the reductions as given, cross-level links,
    the level's object sparsity, tolerance and face fraction). Floats round-trip exactly."""
    out = []
    previous = np.asarray(first_scale, np.int64)
    for plan, spec in zip(plans, sparsity):
        out.append(
            {
                "factor": [float(f) for f in plan.factor],
                "chunk_step": [int(s) for s in plan.chunk_scale // previous],
                "point_strategy": strategy,
                "reductions": dict(reductions) if reductions else None,
                "cross_level": cross_level,
                "object_sparsity": None
                if spec is None
                else {
                    "keep": float(spec.keep),
                    "by": spec.by,
                    "attribute": spec.attribute,
                    "seed": int(spec.seed),
                    "largest": bool(spec.largest),
                },
                "tolerance": None if tolerance is None else float(tolerance),
                "face_fraction": None if face_fraction is None else float(face_fraction),
            }
        )
        previous = plan.chunk_scale
    return out


def stored_settings(ds: VectorStore) -> dict[str, Any]:
    """The :func:`build_pyramid` keyword arguments that rebuild ``ds``'s coarse levels exactly
    as they were built (``factors`` included), from the records the levels hold.

    Raises InputError when the store has no coarse level or a level lacks its record (a
    pyramid built before the settings were recorded, or by another writer)."""
    levels = [k for k in ds.levels if k != 0]
    if not levels:
        raise InputError(f"{ds.description} has no coarse levels: there is no pyramid to update")
    records = []
    for k in levels:
        raw = ds.backend.get_many([f"{k}/zarr.json"])[0]
        block = (json.loads(raw).get("attributes") or {}).get("zarr_vectors_level") if raw else None
        record = block.get(BUILD_KEY) if isinstance(block, dict) else None
        if not isinstance(record, dict):
            raise InputError(
                f"level {k} of {ds.description} does not record the settings it was built with; "
                "rebuild the pyramid once with build_pyramid(..., overwrite=True)"
            )
        records.append(record)
    first = records[0]
    spars = [r.get("object_sparsity") for r in records]
    return {
        "factors": [r["factor"] for r in records],
        "chunk_scale": [r["chunk_step"] for r in records],
        "reductions": first.get("reductions"),
        "cross_level": first["cross_level"],
        "object_sparsity": [None if s is None else Sparsity(**s) for s in spars],
        "tolerance": first.get("tolerance"),
        "face_fraction": first.get("face_fraction"),
        "point_strategy": first["point_strategy"],
    }


def _kind(ds: VectorStore) -> str:
    """The coarsening family of the store: the kind table's family of its geometry types."""
    types = ds.geometry_types
    family = family_of(types)
    if family is None or any(kind(t) is None for t in types):
        raise InputError(
            f"cannot build a pyramid for geometry {sorted(types)}: no coarsening is defined for it"
        )
    return family


def object_sizes(level: Level, ids: np.ndarray) -> np.ndarray:
    """Vertex count of each object ``ids`` (sorted), from fragment indices and owners only."""
    counts = np.zeros(level.num_objects, np.int64)
    chunks = level.vertices.nonempty
    assert level.fragments is not None
    owners_table = level.fragment_object_ids
    for start in range(0, len(chunks), 2048):
        part = chunks[start : start + 2048]
        keys = level.fragments.keys(part) + (owners_table.keys(part) if owners_table is not None else [])
        raws = level.backend.get_many(keys)
        for i, chunk in enumerate(part):
            index = decode_fragments(level.fragments.payload(raws[i], chunk))
            sizes = np.zeros(index.num_fragments, np.int64)
            sizes[index.is_range] = index.ranges[:, 1]
            sizes[~index.is_range] = np.diff(index.explicit_offsets)
            if owners_table is not None:
                own = owners_table.rows(raws[len(part) + i], chunk).reshape(-1).astype(np.int64)
            else:
                lin = int(
                    np.ravel_multi_index(
                        tuple(chunk - level.grid.origin), tuple(int(s) for s in level.grid.shape)
                    )
                )
                own = level.fragment_owners.of_cell(lin, index.num_fragments)
            ok = (own >= 0) & (own < len(counts))
            counts += np.bincount(own[ok], weights=sizes[ok], minlength=len(counts)).astype(np.int64)
    return counts[ids]


def keep_points(ds: VectorStore, src: Level, spec: Sparsity | None) -> tuple[np.ndarray | None, int, int]:
    """Kept object ids (None: all), and how many objects were present / kept."""
    if spec is None:
        return None, 0, 0
    if src.manifests is None:
        raise InputError("object_sparsity needs objects, but this level has no object index")
    present = np.unique(src.fragment_owners.object_id)
    scores = None
    if spec.by == "size":
        scores = object_sizes(src, present)
    elif spec.by == "attribute":
        scores = attribute_scores(src, spec, present)
    elif spec.by == "length":
        raise InputError(
            "object sparsity by 'length' applies to lines, skeletons and graphs; use 'size' for points"
        )
    kept = select_objects(present, spec, scores)
    return kept, len(present), len(kept)


def _replaced(ds: VectorStore) -> tuple[Callable[[str], bool], dict[str, bytes]]:
    """What a build replaces: a test for the keys it hides (coarse levels, also ones the
    root does not list, and level 0's cross-level link families), and the documents that
    stand for the store meanwhile (the root listing level 0 only, with a new generation,
    and level 0's group without ``links`` when only cross-level families were there)."""
    backend = ds.backend
    doc = read_doc(backend, "zarr.json")
    assert doc is not None
    coarse = {n for n in backend.list_dir("") if n.isdigit() and n != "0"} | {str(i) for i in ds.levels[1:]}
    links = [n for n in backend.list_dir("0/links") if n != "zarr.json"]
    cross = {f"0/links/{n}" for n in links if n != "0"}
    attrs = doc.get("attributes") or {}
    if len(ds.levels) > 1:
        attrs = pmeta.drop_coarse_levels(attrs)
    first = {"zarr.json": _dump({**doc, "attributes": {**attrs, GENERATION_KEY: new_generation()}})}
    if cross and len(cross) == len(links):
        cross.add("0/links")
        level0 = read_doc(backend, "0/zarr.json")
        assert level0 is not None
        first["0/zarr.json"] = _dump(pmeta.add_arrays_present(level0, [], remove=["links"]))

    def hidden(key: str) -> bool:
        head = key.partition("/")[0]
        if head in coarse:
            return True
        return head == "0" and any(key == c or key.startswith(c + "/") for c in cross)

    return hidden, first


def _dump(doc: dict[str, Any]) -> bytes:
    return dump_json(doc)


@writing
def build_pyramid(
    ds: VectorStore,
    factors: Sequence[Any],
    *,
    chunk_scale: Any = "auto",
    reductions: Mapping[str, str] | None = None,
    cross_level: str = "implicit",
    object_sparsity: Any = None,
    tolerance: float | None = None,
    face_fraction: float | None = None,
    overwrite: bool = False,
    progress: bool = False,
    point_strategy: str = "auto",
) -> list[int]:
    """Add levels ``1 .. len(factors)`` to ``ds`` (opened ``mode="r+"``); see
    :meth:`zarr_vectors.Dataset.build_pyramid` for the parameters. Returns the new levels."""
    ds.require_writable()
    if point_strategy not in POINT_STRATEGIES:
        raise InputError(choice_message("point_strategy", point_strategy, POINT_STRATEGIES))
    if ds.backend.read_only:
        raise ReadOnlyError(
            f"{ds.backend.description} cannot be written in place (a .zip file opens read-only); "
            "build the pyramid on a directory copy of the store, then zip that"
        )
    if cross_level not in CROSS_LEVEL:
        raise InputError(choice_message("cross_level", cross_level, CROSS_LEVEL))
    kind = _kind(ds)
    _check_reductions(ds.level(0), reductions)
    strategy = _point_strategy(ds, kind, point_strategy, reductions)
    if len(ds.levels) > 1 and not overwrite:
        raise InputError(
            f"the store already has levels {ds.levels}; pass overwrite=True (--overwrite) to rebuild levels 1.."
        )
    level0 = ds.level(0)
    root = ds.root
    plans = plan_levels(
        root_chunk_shape=np.asarray(root.chunk_shape),
        bounds=np.asarray(root.bounds),
        first_bin=np.asarray(level0.grid.bin_shape),
        first_scale=level_ratio(level0),
        first_index=0,
        factors=factors,
        chunk_scale=chunk_scale,
    )
    sparsity = sparsity_per_level(object_sparsity, len(plans))
    records = settings_records(
        plans, sparsity, level_ratio(level0), strategy, reductions, cross_level, tolerance, face_fraction
    )
    hidden, first = _replaced(ds)  # only once the new plan is known to be valid
    try:
        with rebuild_session(ds.backend, hidden=hidden, first=first, wait=ds.wait) as overlay:
            # The levels built are read back (each from the one before) through the overlay, whose
            # staged keys are whole shards: a ShardReader above it reads their cells.
            staged_root = RootMeta.from_attributes(json.loads(first["zarr.json"])["attributes"])
            with ds.staged(ShardReader(overlay), staged_root):
                _build_levels(
                    ds,
                    kind,
                    plans,
                    sparsity,
                    cross_level,
                    reductions,
                    tolerance,
                    face_fraction,
                    progress,
                    strategy,
                    records,
                )
    finally:
        ds.replace_root(ds.root)
    return [p.index for p in plans]


def _build_levels(
    ds: VectorStore,
    kind: str,
    plans: list[LevelPlan],
    sparsity: list[Sparsity | None],
    cross_level: str,
    reductions: Mapping[str, str] | None,
    tolerance: float | None,
    face_fraction: float | None,
    progress: bool,
    strategy: str = "metavertex",
    records: list[dict[str, Any]] | None = None,
) -> None:
    """Coarsen level by level into ``ds``'s (staging) backend; ``records`` (one per plan) are
    the settings each level records (:func:`settings_records`)."""
    compression, clevel = compression_of(ds.level(0))
    src_rows: np.ndarray | None = None
    for i, (plan, spec) in enumerate(zip(plans, sparsity)):
        src = ds.level(plan.parent)
        if src_rows is None:  # bounds the rows of every streamed batch, links or not
            src_rows = rows_per_chunk(src)[1]
        builder = StoreBuilder(
            ds.backend,
            compression,
            clevel,
            checksums=checksums_of(ds.level(0)),
            shards=shards_of(ds.level(0)),
        )
        coarse, xl = _coarsen(
            ds,
            kind,
            src,
            plan,
            builder,
            spec,
            src_rows,
            cross_level,
            reductions,
            tolerance,
            face_fraction,
            progress,
            strategy,
        )
        if records is not None:
            coarse.extra[BUILD_KEY] = records[i]
        _finalise(ds, builder, src, plan, coarse, xl, kind, cross_level)
        src_rows = coarse.rows


#: How point levels are coarsened: ``subsample`` keeps real points (about 1 / prod(factor) of
#: the level below in each coarse bin, at least one), ``metavertex`` one reduced point per
#: coarse bin and object; ``auto`` is subsample for point clouds without objects.
POINT_STRATEGIES = ("auto", "subsample", "metavertex")


def _point_strategy(ds: VectorStore, kind: str, chosen: str, reductions: Mapping[str, str] | None) -> str:
    """The strategy ``chosen`` resolves to for this store (checked before anything is dropped)."""
    objects = ds.level(0).manifests is not None
    if chosen == "auto":
        return "subsample" if kind == "points" and not objects and not reductions else "metavertex"
    if chosen == "subsample" and (kind != "points" or objects):
        raise InputError(
            "point_strategy='subsample' is for point clouds without objects; this store "
            f"{'has objects' if objects else f'holds {kind}'}: use 'metavertex' or 'auto'"
        )
    if chosen == "subsample" and reductions:
        raise InputError("reductions apply to metavertices; subsampled levels keep their points' attributes")
    return chosen


def _check_reductions(level0: Level, reductions: Mapping[str, str] | None) -> None:
    """Refuse, before anything is dropped, a reduction that is not one of ``REDUCTIONS`` or
    names an attribute the store does not have (a typo, not a no-op)."""
    for name, how in (reductions or {}).items():
        if how not in REDUCTIONS:
            raise InputError(choice_message(f"the reduction of attribute {name!r}", how, REDUCTIONS))
    known = set(level0.vertex_attributes) | set(level0.link_attributes)
    unknown = sorted(set(reductions or {}) - known)
    if unknown:
        raise InputError(
            f"reductions name {', '.join(map(repr, unknown))}, which level 0 does not have; "
            f"its attributes are {sorted(known) or 'none'}"
        )


def _xlinks_factory(builder: StoreBuilder, src: Level, plan: LevelPlan, cross_level: str):
    def make(max_rows: int) -> CrossLevelWriter | None:
        if cross_level == "none":
            return None
        return CrossLevelWriter(
            builder,
            fine=src.index,
            coarse=plan.index,
            fine_grid=src.grid,
            coarse_grid=plan.grid,
            fine_ratio=level_ratio(src),
            coarse_ratio=plan.chunk_scale,
            dtype=link_dtype(max_rows),
            explicit=cross_level == "explicit",
        )

    return make


def _coarsen(
    ds: VectorStore,
    kind: str,
    src: Level,
    plan: LevelPlan,
    builder: StoreBuilder,
    spec: Sparsity | None,
    src_rows: np.ndarray | None,
    cross_level: str,
    reductions: Mapping[str, str] | None,
    tolerance: float | None,
    face_fraction: float | None,
    progress: bool,
    strategy: str = "metavertex",
) -> tuple[CoarseLevel, CrossLevelWriter | None]:
    make = _xlinks_factory(builder, src, plan, cross_level)
    if kind == "points":
        keep, n_present, n_kept = keep_points(ds, src, spec)
        xl = None
        if src_rows is not None:
            anchors = (
                np.ravel_multi_index(
                    tuple(
                        (src.vertices.nonempty * level_ratio(src) // plan.chunk_scale - plan.grid.origin).T
                    ),
                    tuple(int(s) for s in plan.grid.shape),
                )
                if len(src_rows)
                else np.zeros(0, np.int64)
            )
            bound = int(np.bincount(anchors, weights=src_rows).max()) if len(src_rows) else 1
            xl = make(max(int(src_rows.max(initial=1)), bound))
        from tqdm.auto import tqdm

        bar = tqdm(
            total=len(src.vertices.nonempty), desc=f"level {plan.index}", unit="chunk", disable=not progress
        )
        with bar:
            coarse = coarsen_points(
                src,
                plan,
                builder,
                reductions=reductions,
                keep=keep,
                xlinks=xl,
                src_rows=src_rows,
                progress=bar,
                strategy=strategy,
            )
        coarse.extra.update(_sparsity_extra(spec, n_present, n_kept))
        return coarse, xl
    if kind in LINKED_FAMILIES:
        from zarr_vectors.pyramid.linked import coarsen_linked

        return coarsen_linked(
            kind,
            src,
            plan,
            builder,
            spec=spec,
            make_xlinks=make,
            src_rows=src_rows,
            tolerance=tolerance,
            progress=progress,
        )
    from zarr_vectors.pyramid.meshes import coarsen_meshes

    return coarsen_meshes(
        src,
        plan,
        builder,
        spec=spec,
        make_xlinks=make,
        src_rows=src_rows,
        face_fraction=face_fraction,
        progress=progress,
    )


def _sparsity_extra(spec: Sparsity | None, n_present: int, n_kept: int) -> dict[str, Any]:
    if spec is None:
        return {}
    out = spec.metadata()
    out["object_sparsity"] = (n_kept / n_present) if n_present else 1.0
    return out


def _finalise(
    ds: VectorStore,
    builder: StoreBuilder,
    src: Level,
    plan: LevelPlan,
    coarse: CoarseLevel,
    xl: CrossLevelWriter | None,
    kind: str,
    cross_level: str,
) -> None:
    """Level group, source level group, then the root (last)."""
    backend = ds.backend
    up, down = xl.close() if xl is not None else (False, False)
    present = list(coarse.arrays_present)
    present += [p for p in copy_tables(backend, src, plan.index) if p not in present]
    if down:
        builder.group(f"{plan.index}/links")
        if "links" not in present:
            present.append("links")
    extra = dict(coarse.extra)
    sparsity = float(extra.pop("object_sparsity", 1.0))
    objects = src.manifests is not None
    scale = plan.chunk_scale
    meta = LevelMeta(
        level=plan.index,
        vertex_count=int(coarse.vertex_count),
        arrays_present=tuple(present),
        chunk_shape=None if np.all(scale == 1) else tuple(float(c) for c in plan.chunk_shape),
        fragments_tile=True,
        object_sparsity=sparsity,
        coarsening_method="per_object" if kind == "points" else "manual",
        parent_level=src.index,
        preserves_object_ids=objects,
        inherited_num_objects=src.num_objects if objects else None,
        shared_fragments=False,
        extra=extra,
    )
    builder.group(str(plan.index), {"zarr_vectors_level": meta.to_json()})
    if up:
        if read_doc(backend, f"{src.index}/links/zarr.json") is None:
            builder.group(f"{src.index}/links")
        src_doc = read_doc(backend, f"{src.index}/zarr.json")
        assert src_doc is not None
        builder.groups[str(src.index)] = pmeta.add_arrays_present(src_doc, ["links"])
    root_doc = read_doc(backend, "zarr.json")
    assert root_doc is not None
    caps = (["preserved_object_ids"] if objects else []) + (["multiscale_links"] if up else [])
    attrs = pmeta.add_level(
        root_doc.get("attributes") or {},
        index=plan.index,
        bin_shape=plan.bin_shape.tolist(),
        capabilities=caps,
        cross_level_storage=cross_level,
        cross_level_depth=0 if cross_level == "none" else 1,
    )
    builder.commit(attrs)
    ds.replace_root(RootMeta.from_attributes(attrs), plan.index, src.index)
