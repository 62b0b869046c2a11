"""Level 2, root and level blocks: ``zarr_vectors``, NGFF ``multiscales`` and each
level's ``zarr_vectors_level``, checked field by field so every problem is reported."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from zarr_vectors.errors import FormatError, choice_message
from zarr_vectors.format.metadata import (
    COARSENING_METHODS,
    CROSS_CHUNK_STRATEGIES,
    CROSS_LEVEL_STORAGE,
    GEOMETRY_TYPES,
    KNOWN_CAPABILITIES,
    LINKS_CONVENTIONS,
    OBJECT_INDEX_CONVENTIONS,
    RETIRED_CAPABILITIES,
    parse_version,
)
from zarr_vectors.geo import check_geozarr
from zarr_vectors.validate._report import Collector
from zarr_vectors.validate._store import StoreView
from zarr_vectors.validate.structure import LEVEL_ARRAYS, LEVEL_GROUPS

__all__ = ["RootInfo", "check_root", "check_level_block"]

ROOT_KEYS = {
    "zv_version",
    "chunk_shape",
    "bounds",
    "geometry_types",
    "crs",
    "links_convention",
    "object_index_convention",
    "cross_chunk_strategy",
    "reduction_factor",
    "base_bin_shape",
    "cross_level_depth",
    "cross_level_storage",
    "format_capabilities",
    "attribute_specs",  # written by the reference 0.9.2 when a schema declares attributes
}
LEVEL_KEYS = {
    "level",
    "vertex_count",
    "arrays_present",
    "fragments_tile",
    "chunk_shape",
    "object_sparsity",
    "coarsening_method",
    "parent_level",
    "chunk_dims",
    "chunk_attribute_name",
    "chunk_attribute_values",
    "preserves_object_ids",
    "inherited_num_objects",
    "shared_fragments",
}
FORBIDDEN_LEVEL_KEYS = ("bin_shape", "bin_ratio", "bin_size", "bounds")
ZV = "zarr.json"


@dataclass
class RootInfo:
    """What later levels need from the root: the space, the grid and the declared conventions."""

    sid_ndim: int
    chunk_shape: np.ndarray
    bounds: np.ndarray | None
    base_bin: np.ndarray
    level_bins: dict[int, np.ndarray] = field(default_factory=dict)
    geometry_types: tuple[str, ...] = ()
    links_convention: str = "implicit_sequential"
    capabilities: tuple[str, ...] = ()
    cross_level_storage: str = "explicit"
    cross_level_depth: int = 1
    levels: dict[int, dict[str, Any]] = field(default_factory=dict)


def _numbers(value: Any, n: int | None) -> np.ndarray | None:
    if not isinstance(value, (list, tuple)) or not value:
        return None
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in value):
        return None
    if n is not None and len(value) != n:
        return None
    return np.asarray(value, dtype=np.float64)


def _version(block: dict[str, Any], out: Collector) -> None:
    version = block.get("zv_version")
    if version is None:
        hint = " (format_version is the pre-0.5 name)" if "format_version" in block else ""
        out.error("metadata.version", ZV, f"zarr_vectors.zv_version is missing{hint}")
        return
    try:
        major, minor, _ = parse_version(version)
    except FormatError:
        out.error("metadata.version", ZV, f"zarr_vectors.zv_version {version!r} is not of the form X.Y.Z")
        return
    if (major, minor) != (0, 9):
        out.error(
            "metadata.version",
            ZV,
            f"zarr_vectors.zv_version is {version}; this validator checks 0.9.x stores "
            "(every version bump is a break: rewrite the store from source)",
        )


def _enums(block: dict[str, Any], out: Collector) -> None:
    for key, allowed in (
        ("links_convention", LINKS_CONVENTIONS),
        ("object_index_convention", OBJECT_INDEX_CONVENTIONS),
        ("cross_chunk_strategy", CROSS_CHUNK_STRATEGIES),
        ("cross_level_storage", CROSS_LEVEL_STORAGE),
    ):
        if key in block and block[key] not in allowed:
            out.error(
                "metadata.enum",
                ZV,
                choice_message(f"zarr_vectors.{key}", block[key], allowed),
            )


def _tokens(block: dict[str, Any], out: Collector) -> tuple[str, ...]:
    caps = block.get("format_capabilities", [])
    if not isinstance(caps, list) or not all(isinstance(c, str) for c in caps):
        out.error("metadata.capabilities", ZV, f"format_capabilities must be a list of strings, got {caps!r}")
        return ()
    for token in caps:
        if token in RETIRED_CAPABILITIES:
            out.error(
                "metadata.capabilities",
                ZV,
                f"capability {token!r} was retired in 0.9 and marks a pre-0.9 store; rewrite it from source",
            )
        elif token not in KNOWN_CAPABILITIES:
            out.warn(
                "metadata.capabilities",
                ZV,
                f"unknown capability token {token!r}; readers treat the feature as absent",
            )
    if "fragment_index" not in caps:
        out.warn(
            "metadata.capabilities",
            ZV,
            "format_capabilities lacks 'fragment_index', which 0.9 calls mandatory "
            "(the reference 0.9.2 omits it too)",
        )
    return tuple(caps)


def _geometry(block: dict[str, Any], out: Collector) -> tuple[str, ...]:
    gtypes = block.get("geometry_types", ["point_cloud"])
    if not isinstance(gtypes, list) or not gtypes or not all(isinstance(g, str) for g in gtypes):
        out.error(
            "metadata.geometry-types", ZV, f"geometry_types must be a non-empty list of names, got {gtypes!r}"
        )
        return ()
    for g in gtypes:
        if g not in GEOMETRY_TYPES:
            out.warn(
                "metadata.geometry-types",
                ZV,
                f"geometry type {g!r} is custom: geometry rules are not checked for it",
            )
    return tuple(gtypes)


def _grid_fields(block: dict[str, Any], nd: int, out: Collector) -> tuple[np.ndarray | None, np.ndarray]:
    bounds = block.get("bounds")
    lo = hi = None
    if isinstance(bounds, (list, tuple)) and len(bounds) == 2:
        lo, hi = _numbers(bounds[0], nd), _numbers(bounds[1], nd)
    box = None
    if lo is None or hi is None:
        out.error(
            "metadata.root",
            ZV,
            f"zarr_vectors.bounds must be [min_corner, max_corner] of {nd} numbers each, got {bounds!r}",
        )
    elif np.any(lo > hi):
        out.error("metadata.root", ZV, f"zarr_vectors.bounds has min {lo.tolist()} above max {hi.tolist()}")
    else:
        box = np.stack([lo, hi])
    cs = np.asarray(block["chunk_shape"], np.float64)
    base = block.get("base_bin_shape")
    if base is None:
        return box, cs
    bb = _numbers(base, nd)
    if bb is None or np.any(bb <= 0):
        out.error(
            "metadata.root", ZV, f"zarr_vectors.base_bin_shape must be {nd} positive numbers, got {base!r}"
        )
        return box, cs
    ratio = cs / bb
    if np.any(np.abs(ratio - np.rint(ratio)) > 1e-9 * np.maximum(ratio, 1)):
        out.error(
            "metadata.root",
            ZV,
            f"chunk_shape {cs.tolist()} is not a whole multiple of base_bin_shape {bb.tolist()}",
        )
        return box, cs
    return box, bb


def _ints(block: dict[str, Any], out: Collector) -> None:
    rf = block.get("reduction_factor", 8)
    if not isinstance(rf, int) or isinstance(rf, bool) or rf < 2:
        out.error("metadata.root", ZV, f"zarr_vectors.reduction_factor must be an integer >= 2, got {rf!r}")
    depth = block.get("cross_level_depth", 1)
    if not isinstance(depth, int) or isinstance(depth, bool) or depth < -1:
        out.error(
            "metadata.root", ZV, f"zarr_vectors.cross_level_depth must be an integer >= -1, got {depth!r}"
        )


def check_root(view: StoreView, levels: list[int], out: Collector) -> RootInfo | None:
    """Check the root blocks; None when the chunk shape is unusable (nothing more can be checked)."""
    block = view.attrs("")["zarr_vectors"]
    _version(block, out)
    cs = block.get("chunk_shape")
    csa = _numbers(cs, None)
    if csa is None or np.any(csa <= 0):
        out.error(
            "metadata.root", ZV, f"zarr_vectors.chunk_shape must be a list of positive numbers, got {cs!r}"
        )
        return None
    nd = len(csa)
    bounds, base = _grid_fields(block, nd, out)
    _enums(block, out)
    _ints(block, out)
    for key in sorted(set(block) - ROOT_KEYS):
        out.warn("metadata.unknown-key", ZV, f"unknown key zarr_vectors.{key} (kept, but not part of 0.9)")
    info = RootInfo(
        sid_ndim=nd,
        chunk_shape=csa,
        bounds=bounds,
        base_bin=base,
        geometry_types=_geometry(block, out),
        capabilities=_tokens(block, out),
        links_convention=str(block.get("links_convention", "implicit_sequential")),
        cross_level_storage=str(block.get("cross_level_storage", "explicit")),
        cross_level_depth=block.get("cross_level_depth", 1)
        if isinstance(block.get("cross_level_depth", 1), int)
        else 1,
    )
    _multiscales(view.attrs("").get("multiscales"), info, levels, out)
    _geozarr(view.attrs(""), out)
    return info


def _geozarr(attributes: dict[str, Any], out: Collector) -> None:
    """GeoZarr ``proj:`` / ``spatial:`` root attributes against ``crs``, ``bounds`` and the axes.

    A store whose ``crs`` holds ``proj:`` keys mirrors them on the root group (DECISIONS 7);
    every disagreement is one problem. A store with neither is not georeferenced: nothing to check.
    """
    for problem in check_geozarr(attributes):
        out.error(
            "metadata.geozarr",
            ZV,
            f"{problem}; GeoZarr readers take the CRS and extent from these "
            "root attributes, so rewrite them from zarr_vectors.crs, bounds and the axes",
        )


def _multiscales(ms: Any, info: RootInfo, levels: list[int], out: Collector) -> None:
    rule = "metadata.multiscales"
    if not isinstance(ms, list) or not ms or not isinstance(ms[0], dict):
        out.error(
            rule, ZV, "the root has no NGFF 'multiscales' list; it names the axes and each level's bin shape"
        )
        return
    entry = ms[0]
    if (entry.get("metadata") or {}).get("format") != "zarr_vectors":
        out.error(rule, ZV, "multiscales[0].metadata.format must be 'zarr_vectors'")
    axes = entry.get("axes")
    if not isinstance(axes, list) or not all(
        isinstance(a, dict) and isinstance(a.get("name"), str) for a in axes
    ):
        out.error(rule, ZV, f"multiscales[0].axes must be a list of {{name, type}} objects, got {axes!r}")
    else:
        space = [a for a in axes if a.get("type", "space") == "space"]
        if len(space) != info.sid_ndim:
            out.error(
                rule,
                ZV,
                f"multiscales axes declare {len(space)} space axes but chunk_shape has {info.sid_ndim}",
            )
    datasets = entry.get("datasets")
    if not isinstance(datasets, list):
        out.error(
            rule, ZV, "multiscales[0].datasets must list one {path, coordinateTransformations} per level"
        )
        return
    paths = [d.get("path") if isinstance(d, dict) else None for d in datasets]
    if paths != [str(lv) for lv in levels]:
        out.error(
            rule,
            ZV,
            f"multiscales datasets name levels {paths} but the store has level groups "
            f"{[str(lv) for lv in levels]}",
        )
    for k, ds in enumerate(datasets):
        if not isinstance(ds, dict):
            continue
        scale = translation = None
        broken = False
        for t in ds.get("coordinateTransformations") or []:
            if isinstance(t, dict) and t.get("type") == "scale":
                scale = _numbers(t.get("scale"), None)
            elif isinstance(t, dict) and t.get("type") == "translation":
                translation = _numbers(t.get("translation"), None)
                if translation is None:
                    out.error(
                        rule,
                        ZV,
                        f"multiscales datasets[{k}]: translation {t.get('translation')!r} must be "
                        "a list of finite numbers (half the bin shape)",
                    )
                    broken = True
        if broken:
            continue
        where = f"multiscales datasets[{k}]"
        if scale is None:
            out.error(rule, ZV, f"{where} has no numeric scale transform")
        if translation is not None:
            if len(translation) < info.sid_ndim or np.any(translation[-info.sid_ndim :] <= 0):
                out.error(
                    rule,
                    ZV,
                    f"{where}: translation {translation.tolist()} must end with {info.sid_ndim} "
                    "positive numbers (half the bin shape)",
                )
                continue
            info.level_bins[k] = 2.0 * translation[-info.sid_ndim :]
        elif k == 0:
            info.level_bins[k] = info.base_bin
        if scale is not None and len(scale) >= info.sid_ndim and k in info.level_bins:
            want = info.level_bins[k] / info.base_bin
            if not np.allclose(scale[-info.sid_ndim :], want, rtol=1e-6):
                out.error(
                    "pyramid.bin-shape",
                    ZV,
                    f"{where}: scale {scale.tolist()} should be bin_shape / base_bin_shape = {want.tolist()}",
                )


def check_level_block(view: StoreView, lv: int, info: RootInfo, out: Collector) -> dict[str, Any] | None:
    """Check ``<lv>/zarr.json``'s ``zarr_vectors_level``; return the block when usable."""
    key = f"{lv}/zarr.json"
    block = view.attrs(str(lv)).get("zarr_vectors_level")
    rule = "metadata.level"
    if not isinstance(block, dict):
        out.error(rule, key, f"level {lv} has no 'zarr_vectors_level' attribute block")
        return None
    if block.get("level") != lv:
        out.error(
            rule, key, f"zarr_vectors_level.level is {block.get('level')!r} but the group is level {lv}"
        )
    vc = block.get("vertex_count")
    if not isinstance(vc, int) or isinstance(vc, bool) or vc < 0:
        out.error(rule, key, f"vertex_count must be an integer >= 0, got {vc!r}")
    sparsity = block.get("object_sparsity", 1.0)
    if not isinstance(sparsity, (int, float)) or not 0 < sparsity <= 1:
        out.error(rule, key, f"object_sparsity must be in (0, 1], got {sparsity!r}")
    method = block.get("coarsening_method", "none")
    if method not in COARSENING_METHODS:
        out.warn(rule, key, choice_message("coarsening_method", method, COARSENING_METHODS))
    for flag in ("fragments_tile", "preserves_object_ids", "shared_fragments"):
        if flag in block and not isinstance(block[flag], bool):
            out.error(rule, key, f"{flag} must be true or false, got {block[flag]!r}")
    for bad in FORBIDDEN_LEVEL_KEYS:
        if bad in block:
            out.error(
                rule,
                key,
                f"level metadata must not hold {bad!r} (bin shapes live in the root multiscales "
                "transforms, bounds in the root block)",
            )
    cs = block.get("chunk_shape")
    if cs is not None and (_numbers(cs, info.sid_ndim) is None or np.any(np.asarray(cs) <= 0)):
        out.error(rule, key, f"chunk_shape override must be {info.sid_ndim} positive numbers, got {cs!r}")
        block = {k: v for k, v in block.items() if k != "chunk_shape"}
    present = block.get("arrays_present", [])
    if not isinstance(present, list):
        out.error(
            "metadata.arrays-present", key, f"arrays_present must be a list of family names, got {present!r}"
        )
    else:
        for name in present:
            if name not in LEVEL_ARRAYS + LEVEL_GROUPS:
                out.error(
                    "metadata.arrays-present",
                    key,
                    f"arrays_present lists {name!r}, which is not a family name",
                )
            elif name not in view.children(str(lv)):
                out.warn(
                    "metadata.arrays-present",
                    key,
                    f"arrays_present lists {name!r} but level {lv} has no such "
                    "node (readers look nodes up, so this misleads only)",
                )
    for k in sorted(set(block) - LEVEL_KEYS - set(FORBIDDEN_LEVEL_KEYS)):
        out.warn(
            "metadata.unknown-key", key, f"unknown key zarr_vectors_level.{k} (kept, but not part of 0.9)"
        )
    return block
