"""Level 5, multi-resolution rules: parent levels, nested chunk shapes, growing bin shapes,
shrinking vertex counts, preserved object ids and the cross-level link families."""

from __future__ import annotations

import numpy as np

from zarr_vectors.validation._report import Collector
from zarr_vectors.validation.arrays import LevelModel
from zarr_vectors.validation.metadata import RootInfo

__all__ = ["check_pyramid"]


def _whole(ratio: np.ndarray) -> bool:
    return bool(
        np.all(ratio >= 1 - 1e-9) and np.allclose(ratio, np.rint(ratio), rtol=0, atol=1e-9 * ratio.max())
    )


def _level(root: RootInfo, model: LevelModel, prev: LevelModel | None, out: Collector) -> None:
    k, meta, key = model.index, model.meta, f"{model.index}/zarr.json"
    parent, method = (None, "none") if meta is None else (meta.parent_level, meta.coarsening_method)
    if k == 0 and (parent is not None or method != "none"):
        out.error(
            "pyramid.levels",
            key,
            f"level 0 has parent_level {parent!r} and coarsening_method {method!r}; expected null and 'none'",
        )
    if k > 0 and (not isinstance(parent, int) or not 0 <= parent < k):
        out.error(
            "pyramid.levels",
            key,
            f"parent_level is {parent!r}; a coarser level names a finer one (0..{k - 1})",
        )
    if k > 0 and method == "none":
        out.error(
            "pyramid.levels", key, "coarsening_method is 'none' on a coarser level; say how it was made"
        )
    if not _whole(model.chunk_shape / root.chunk_shape):
        out.error(
            "pyramid.chunk-shape",
            key,
            f"chunk_shape {model.chunk_shape.tolist()} is not a whole multiple of the "
            f"root chunk_shape {root.chunk_shape.tolist()}",
        )
    elif prev is not None and not _whole(model.chunk_shape / prev.chunk_shape):
        out.error(
            "pyramid.chunk-shape",
            key,
            f"chunk_shape {model.chunk_shape.tolist()} does not nest over level "
            f"{prev.index}'s {prev.chunk_shape.tolist()}",
        )
    bins = root.level_bins.get(k)
    if bins is not None:
        if not _whole(model.chunk_shape / bins):
            out.error(
                "pyramid.bin-shape",
                key,
                f"bin shape {bins.tolist()} (from multiscales) does not tile "
                f"chunk_shape {model.chunk_shape.tolist()}",
            )
        prev_bins = None if prev is None else root.level_bins.get(prev.index)
        if prev is not None and prev_bins is not None and np.any(bins < prev_bins * (1 - 1e-9)):
            out.error(
                "pyramid.bin-shape",
                key,
                f"bin shape {bins.tolist()} is finer than level {prev.index}'s {prev_bins.tolist()}",
            )
    if meta is None:
        return
    if prev is not None and prev.meta is not None:
        vc, pvc = meta.vertex_count, prev.meta.vertex_count  # -1: unusable, a finding already
        if vc >= 0 and pvc >= 0 and vc > pvc:
            out.error("pyramid.vertex-count", key, f"vertex_count {vc} exceeds level {prev.index}'s {pvc}")
    if meta.preserves_object_ids:
        inherited = meta.inherited_num_objects
        if inherited is None:
            out.error(
                "pyramid.object-ids",
                key,
                "preserves_object_ids is true but inherited_num_objects is not given",
            )
        elif "preserved_object_ids" not in root.capabilities:
            out.error(
                "pyramid.object-ids",
                "zarr.json",
                f"level {k} preserves object ids but format_capabilities lacks 'preserved_object_ids'",
            )


def _cross_level(root: RootInfo, models: dict[int, LevelModel], out: Collector) -> None:
    deltas = [(lv, d) for lv, m in sorted(models.items()) for d in m.families if d != 0]
    if deltas and "multiscale_links" not in root.capabilities:
        out.error(
            "pyramid.cross-level",
            "zarr.json",
            "the store has cross-level link families but format_capabilities lacks 'multiscale_links'",
        )
    depth = root.cross_level_depth
    for lv, d in deltas:
        path = f"{lv}/links/{d:+d}"
        if root.cross_level_storage == "none":
            out.error(
                "pyramid.cross-level",
                path,
                "cross_level_storage is 'none' but this cross-level family exists",
            )
        elif root.cross_level_storage == "implicit" and d < 0:
            out.error(
                "pyramid.cross-level",
                path,
                "cross_level_storage is 'implicit', which stores only +N families",
            )
        if depth >= 0 and abs(d) > depth:
            out.error("pyramid.cross-level", path, f"delta {d:+d} is deeper than cross_level_depth {depth}")
        if lv + d not in models:
            out.error(
                "pyramid.cross-level", path, f"delta {d:+d} points at level {lv + d}, which does not exist"
            )


def check_pyramid(root: RootInfo, models: dict[int, LevelModel], out: Collector) -> None:
    prev = None
    for _, model in sorted(models.items()):
        _level(root, model, prev, out)
        prev = model
    _cross_level(root, models, out)
