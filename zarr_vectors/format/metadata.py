"""Root metadata: the ``zarr_vectors`` block and the NGFF ``multiscales`` list of the root group.

:class:`RootMeta` holds the block, with ``to_attributes`` and ``from_attributes``.
:func:`parse_root` checks types and values and returns the block with every
:class:`~zarr_vectors.format.findings.Finding` (the validator reports them);
``from_attributes`` raises one :class:`~zarr_vectors.errors.FormatError` for those that block
reading. Unknown keys are kept in ``extra`` and written back unchanged. The level block
(``zarr_vectors_level``) lives in :mod:`zarr_vectors.format.metadata_level`; its names are
importable from here too.
"""

from __future__ import annotations

import math
import re
import warnings
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from zarr_vectors.errors import FormatError, UnknownCapabilityWarning, choice_message
from zarr_vectors.format.findings import NONCONFORMING, WARNING, Finding, Findings, raise_for, short
from zarr_vectors.format.kinds import CANONICAL_KINDS, POINT_CLOUD, kind
from zarr_vectors.format.metadata_level import (
    COARSENING_METHODS,
    DECLARED_FAMILIES,
    FORBIDDEN_LEVEL_KEYS,
    LEVEL_ARRAYS,
    LEVEL_GROUPS,
    LEVEL_KEYS,
    LIBRARY_LEVEL_KEYS,
    LevelMeta,
    check_arrays_present,
    parse_level,
)
from zarr_vectors.format.metadata_values import is_int, numbers_problem
from zarr_vectors.geo import check_geozarr, crs_block, geozarr_attributes

__all__ = [
    "ZV_VERSION",
    "GEOMETRY_TYPES",
    "LIBRARY_LEVEL_KEYS",
    "KNOWN_CAPABILITIES",
    "LEVEL_ARRAYS",
    "LEVEL_GROUPS",
    "Axis",
    "RootMeta",
    "LevelMeta",
    "parse_version",
    "parse_root",
    "parse_level",
    "check_arrays_present",
    # The other level names, re-exported from metadata_level like LevelMeta and parse_level.
    "COARSENING_METHODS",
    "DECLARED_FAMILIES",
    "FORBIDDEN_LEVEL_KEYS",
    "LEVEL_KEYS",
]

ZV_VERSION = "0.9.0"
#: The format's own geometry types (others are custom values; see :mod:`zarr_vectors.format.kinds`).
GEOMETRY_TYPES = CANONICAL_KINDS
KNOWN_CAPABILITIES = ("fragment_index", "shared_fragments", "preserved_object_ids", "multiscale_links")
RETIRED_CAPABILITIES = ("partitioned_cross_chunk_links",)
LINKS_CONVENTIONS = ("explicit", "implicit_sequential", "implicit_sequential_with_branches")
OBJECT_INDEX_CONVENTIONS = ("standard", "identity")
CROSS_CHUNK_STRATEGIES = ("boundary_deduplication", "explicit_links", "both")
CROSS_LEVEL_STORAGE = ("none", "implicit", "explicit")
AXIS_TYPES = ("space", "time", "channel")

_VERSION_RE = re.compile(r"^(\d+)\.(\d+)\.(\d+)")


def parse_version(text: Any) -> tuple[int, int, int]:
    m = _VERSION_RE.match(str(text))
    if not m:
        raise FormatError(f"zv_version {text!r} is not of the form X.Y.Z")
    return int(m.group(1)), int(m.group(2)), int(m.group(3))


@dataclass(frozen=True)
class Axis:
    name: str
    type: str = "space"
    unit: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "type": self.type}
        if self.unit:
            out["unit"] = self.unit
        return out


@dataclass(frozen=True)
class RootMeta:
    """The root ``zarr_vectors`` block plus the NGFF axes and per-level bin shapes.

    ``level_bin_shapes[k]`` is level k's bin shape, stored only in the NGFF
    ``multiscales`` transforms (``translation = bin_shape / 2``).
    """

    chunk_shape: tuple[float, ...]
    bounds: tuple[tuple[float, ...], tuple[float, ...]]
    axes: tuple[Axis, ...]
    geometry_types: tuple[str, ...] = (POINT_CLOUD,)
    base_bin_shape: tuple[float, ...] | None = None
    level_bin_shapes: tuple[tuple[float, ...], ...] = ()
    crs: Any = None
    links_convention: str = "implicit_sequential"
    object_index_convention: str = "standard"
    cross_chunk_strategy: str = "explicit_links"
    cross_level_storage: str = "none"
    cross_level_depth: int = 0
    reduction_factor: int = 8
    format_capabilities: tuple[str, ...] = ("fragment_index",)
    zv_version: str = ZV_VERSION
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # A writer's crs= (EPSG code, WKT2, PROJJSON, pyproj.CRS) becomes the stored dict of
        # GeoZarr proj: keys; unknown CRS strings are refused here, before anything is written.
        object.__setattr__(self, "crs", crs_block(self.crs))

    @property
    def sid_ndim(self) -> int:
        return len(self.chunk_shape)

    @property
    def effective_bin_shape(self) -> tuple[float, ...]:
        return self.base_bin_shape if self.base_bin_shape is not None else self.chunk_shape

    def to_attributes(self) -> dict[str, Any]:
        """The root group's ``attributes``: ``multiscales`` and ``zarr_vectors``."""
        base = np.asarray(self.effective_bin_shape, np.float64)
        datasets = []
        for level, bin_shape in enumerate(self.level_bin_shapes or (self.effective_bin_shape,)):
            bs = np.asarray(bin_shape, np.float64)
            datasets.append(
                {
                    "path": str(level),
                    "coordinateTransformations": [
                        {"type": "scale", "scale": (bs / base).tolist()},
                        {"type": "translation", "translation": (bs / 2).tolist()},
                    ],
                }
            )
        block: dict[str, Any] = dict(self.extra)
        block.update(
            {
                "zv_version": self.zv_version,
                "chunk_shape": list(self.chunk_shape),
                "bounds": [list(self.bounds[0]), list(self.bounds[1])],
                "geometry_types": list(self.geometry_types),
                "crs": self.crs,
                "links_convention": self.links_convention,
                "object_index_convention": self.object_index_convention,
                "cross_chunk_strategy": self.cross_chunk_strategy,
                "cross_level_storage": self.cross_level_storage,
                "cross_level_depth": self.cross_level_depth,
                "reduction_factor": self.reduction_factor,
                "base_bin_shape": None if self.base_bin_shape is None else list(self.base_bin_shape),
                "format_capabilities": list(self.format_capabilities),
            }
        )
        multiscales = [
            {
                "version": "0.4",
                "name": "default",
                "axes": [a.to_json() for a in self.axes],
                "datasets": datasets,
                "metadata": {"format": "zarr_vectors"},
            }
        ]
        out = {"multiscales": multiscales, "zarr_vectors": block}
        space = [a.name for a in self.axes if a.type == "space"]
        out.update(geozarr_attributes(self.crs, self.bounds, space))  # GeoZarr proj:/spatial: (DECISIONS 7)
        return out

    @classmethod
    def from_attributes(cls, attrs: dict[str, Any]) -> RootMeta:
        """Parse a root group's attributes; raise FormatError on anything unusable (see
        :func:`parse_root`) and warn about unknown capability tokens."""
        meta, findings = parse_root(attrs)
        raise_for(findings)
        assert meta is not None  # a root that parses to nothing has a blocking finding
        unknown = [c for c in meta.format_capabilities if c not in KNOWN_CAPABILITIES]
        if unknown:
            warnings.warn(
                f"unknown Zarr Vectors capability tokens ignored: {unknown}",
                UnknownCapabilityWarning,
                stacklevel=3,
            )
        return meta


#: Most bins one chunk may hold when read (writers allow far fewer); past it the bin
#: shape is corrupt, not a choice.
MAX_READ_BINS = 1 << 20


# ------------------------------------------------------------------ parsing
#
# Each parser returns its best reading of the block plus every finding. A field that is
# unusable gets its default (bounds: NaN, an unknown box) so that the validator can go on;
# readers never see those values, as every such field is a finding that blocks reading.

ROOT = "zarr.json"
#: Keys of the root ``zarr_vectors`` block: the fields of :class:`RootMeta` stored there, plus
#: ``format_version`` (the pre-0.5 name of ``zv_version``) and ``attribute_specs`` (written by
#: the reference 0.9.2 when a schema declares attributes; kept in ``extra``).
ROOT_KEYS = frozenset(f.name for f in fields(RootMeta)) - {"axes", "level_bin_shapes", "extra"} | {
    "format_version",
    "attribute_specs",
}


def _version(block: dict[str, Any], out: Findings) -> str:
    """The declared version (``format_version`` is read when ``zv_version`` is missing)."""
    version = block.get("zv_version")
    if version is None:
        version = block.get("format_version")
        if version is None:
            out.add(ROOT, "metadata.version", "zarr_vectors.zv_version is missing")
            return ZV_VERSION
        out.add(
            ROOT,
            "metadata.version",
            "zarr_vectors.zv_version is missing (format_version is the pre-0.5 name)",
            NONCONFORMING,
        )
    m = _VERSION_RE.match(str(version))
    if not m:
        out.add(
            ROOT, "metadata.version", f"zarr_vectors.zv_version {short(version)} is not of the form X.Y.Z"
        )
    elif (int(m.group(1)), int(m.group(2))) != (0, 9):
        old = (int(m.group(1)), int(m.group(2))) < (0, 9)
        out.add(
            ROOT,
            "metadata.version",
            f"zarr_vectors.zv_version is {version}; this library reads 0.9.x only"
            + (" (pre-0.9 stores must be rewritten from source)" if old else ""),
        )
    return str(version)


def _grid_fields(
    block: dict[str, Any], out: Findings
) -> tuple[list[float] | None, tuple[tuple[float, ...], tuple[float, ...]], tuple[float, ...] | None]:
    """``chunk_shape`` (None when unusable), ``bounds`` (NaN when unusable) and ``base_bin_shape``."""
    code = "metadata.root"
    cs = block.get("chunk_shape")
    if (why := numbers_problem(cs, "zarr_vectors.chunk_shape", positive=True)) is not None:
        out.add(ROOT, code, why)
        return None, ((), ()), None
    if not cs:
        out.add(ROOT, code, "zarr_vectors.chunk_shape must have one entry per space axis, got []")
        return None, ((), ()), None
    chunk_shape = [float(v) for v in cs]
    nd = len(chunk_shape)
    unknown = (float("nan"),) * nd
    bounds: tuple[tuple[float, ...], tuple[float, ...]] = (unknown, unknown)
    box = block.get("bounds")
    if not isinstance(box, (list, tuple)) or len(box) != 2:
        out.add(ROOT, code, f"zarr_vectors.bounds must be [min_corner, max_corner], got {short(box)}")
    else:
        why = numbers_problem(box[0], "zarr_vectors.bounds[0]", nd)
        why = why or numbers_problem(box[1], "zarr_vectors.bounds[1]", nd)
        if why is not None:
            out.add(ROOT, code, why)
        elif any(a > b for a, b in zip(box[0], box[1])):
            lo, hi = [float(v) for v in box[0]], [float(v) for v in box[1]]
            out.add(ROOT, code, f"zarr_vectors.bounds: min corner {lo} exceeds max corner {hi}")
        else:
            bounds = (tuple(float(v) for v in box[0]), tuple(float(v) for v in box[1]))
    base = block.get("base_bin_shape")
    if base is None:
        return chunk_shape, bounds, None
    if (why := numbers_problem(base, "zarr_vectors.base_bin_shape", nd, positive=True)) is not None:
        out.add(ROOT, code, why)
        return chunk_shape, bounds, None
    bins = tuple(float(v) for v in base)
    ratio = [c / b for c, b in zip(chunk_shape, bins)]
    whole = all(abs(r - round(r)) <= 1e-6 * max(1.0, r) and round(r) >= 1 for r in ratio)
    if not whole or math.prod(round(r) for r in ratio) > MAX_READ_BINS:
        out.add(
            ROOT,
            code,
            f"zarr_vectors.base_bin_shape {list(bins)} must divide chunk_shape {chunk_shape} "
            f"into whole bins (at most {MAX_READ_BINS} per chunk)",
        )
        return chunk_shape, bounds, None
    return chunk_shape, bounds, bins


def _capabilities(block: dict[str, Any], out: Findings) -> tuple[str, ...]:
    code = "metadata.capabilities"
    caps = block.get("format_capabilities", [])
    if caps is None:
        caps = []
    if not isinstance(caps, list) or not all(isinstance(c, str) for c in caps):
        out.add(ROOT, code, f"zarr_vectors.format_capabilities must be a list of strings, got {short(caps)}")
        return ()
    for token in caps:
        if token in RETIRED_CAPABILITIES:
            out.add(
                ROOT,
                code,
                f"store declares the pre-0.9 capability {token!r} (retired in 0.9); rewrite it from source",
            )
        elif token not in KNOWN_CAPABILITIES:
            out.add(
                ROOT,
                code,
                f"unknown capability token {token!r}; readers treat the feature as absent",
                WARNING,
            )
    if "fragment_index" not in caps:
        out.add(
            ROOT,
            code,
            "format_capabilities lacks 'fragment_index', which 0.9 calls mandatory "
            "(the reference 0.9.2 omits it too)",
            WARNING,
        )
    return tuple(caps)


def _geometry_types(block: dict[str, Any], out: Findings) -> tuple[str, ...]:
    code = "metadata.geometry-types"
    gtypes = block.get("geometry_types", [POINT_CLOUD])
    if not isinstance(gtypes, list) or not gtypes or not all(isinstance(g, str) for g in gtypes):
        out.add(
            ROOT,
            code,
            f"zarr_vectors.geometry_types must be a list of strings (at least one), got {short(gtypes)}",
        )
        return ()
    for g in gtypes:
        if kind(g) is None:
            out.add(
                ROOT,
                code,
                f"geometry type {g!r} is custom and unknown to this library: geometry rules are not checked for it",
                WARNING,
            )
    return tuple(gtypes)


def _choice(block: dict[str, Any], key: str, allowed: tuple[str, ...], default: str, out: Findings) -> str:
    value = block.get(key, default)
    if isinstance(value, str) and value in allowed:
        return value
    out.add(ROOT, "metadata.enum", choice_message(f"zarr_vectors.{key}", value, allowed))
    return value if isinstance(value, str) else default


def _counts(block: dict[str, Any], out: Findings) -> tuple[int, int]:
    """``reduction_factor`` (an integer >= 2) and ``cross_level_depth`` (>= -1; -1: every pair)."""
    rf = block.get("reduction_factor", 8)
    message = f"zarr_vectors.reduction_factor must be an integer >= 2, got {short(rf)}"
    if not is_int(rf) or rf < 0:
        out.add(ROOT, "metadata.root", message)
        rf = 8
    elif rf < 2:  # meaningless for a pyramid, harmless for reading
        out.add(ROOT, "metadata.root", message, NONCONFORMING)
    depth = block.get("cross_level_depth", 1)
    if not is_int(depth) or depth < -1:
        out.add(
            ROOT,
            "metadata.root",
            f"zarr_vectors.cross_level_depth must be an integer >= -1, got {short(depth)}",
        )
        depth = 1
    return rf, depth


def parse_root(attrs: Any) -> tuple[RootMeta | None, list[Finding]]:
    """Parse a root group's attributes: the ``zarr_vectors`` block, NGFF ``multiscales`` and the
    GeoZarr keys. Returns the block (None when its chunk shape is unusable) and every finding."""
    out = Findings()
    block = attrs.get("zarr_vectors") if isinstance(attrs, dict) else None
    if not isinstance(block, dict):
        out.add(
            ROOT,
            "structure.zv-block",
            "the root group has no 'zarr_vectors' attribute block: it is not a Zarr Vectors store",
        )
        return None, out
    version = _version(block, out)
    chunk_shape, bounds, base = _grid_fields(block, out)
    caps = _capabilities(block, out)
    scales = base is not None or block.get("base_bin_shape") is None  # else the ratio is unknown
    axes, level_bins = (
        ((), ())
        if chunk_shape is None
        else _parse_multiscales(
            attrs.get("multiscales"), len(chunk_shape), base or tuple(chunk_shape), scales, out
        )
    )
    gtypes = _geometry_types(block, out)
    enums = {
        "links_convention": _choice(block, "links_convention", LINKS_CONVENTIONS, "implicit_sequential", out),
        "object_index_convention": _choice(
            block, "object_index_convention", OBJECT_INDEX_CONVENTIONS, "standard", out
        ),
        "cross_chunk_strategy": _choice(
            block, "cross_chunk_strategy", CROSS_CHUNK_STRATEGIES, "explicit_links", out
        ),
        "cross_level_storage": _choice(block, "cross_level_storage", CROSS_LEVEL_STORAGE, "explicit", out),
    }
    rf, depth = _counts(block, out)
    for key in sorted(set(block) - ROOT_KEYS, key=str):
        out.add(
            ROOT,
            "metadata.unknown-key",
            f"unknown key zarr_vectors.{key} (kept, but not part of 0.9)",
            WARNING,
        )
    for problem in check_geozarr(attrs):
        out.add(
            ROOT,
            "metadata.geozarr",
            f"{problem}; GeoZarr readers take the CRS and extent from these root attributes, "
            "so rewrite them from zarr_vectors.crs, bounds and the axes",
            NONCONFORMING,
        )
    if chunk_shape is None:
        return None, out
    meta = RootMeta(
        chunk_shape=tuple(chunk_shape),
        bounds=bounds,
        axes=axes,
        geometry_types=gtypes,
        base_bin_shape=base,
        level_bin_shapes=level_bins,
        crs=None,
        cross_level_depth=depth,
        reduction_factor=rf,
        format_capabilities=caps,
        zv_version=version,
        extra={k: v for k, v in block.items() if k not in ROOT_KEYS - {"attribute_specs"}},
        **enums,
    )
    # The stored crs is kept as written (the format leaves it opaque): no parsing on read.
    object.__setattr__(meta, "crs", block.get("crs"))
    return meta, out


def _axes(entry: dict[str, Any], nd: int, out: Findings) -> tuple[Axis, ...]:
    """The axes of a multiscales entry (defaults when it lists none)."""
    code = "metadata.multiscales"
    axes_json = entry.get("axes") or []
    if not isinstance(axes_json, list):
        out.add(ROOT, code, f"multiscales axes must be a list, got {short(axes_json)}")
        axes_json = []
    elif not all(isinstance(a, dict) and isinstance(a.get("name"), str) for a in axes_json):
        out.add(
            ROOT,
            code,
            f"multiscales[0].axes must be a list of {{name, type}} objects, got {short(axes_json)}",
            NONCONFORMING,
        )
    axes = tuple(
        Axis(str(a.get("name", f"dim{i}")), str(a.get("type", "space")), a.get("unit"))
        for i, a in enumerate(axes_json)
        if isinstance(a, dict)
    )
    space = [a for a in axes if a.type == "space"]
    if axes and len(space) != nd:
        out.add(ROOT, code, f"multiscales axes declare {len(space)} space axes but chunk_shape has {nd}")
    if axes:
        return axes
    return (
        tuple(Axis(n) for n in ("x", "y", "z", "w")[:nd])
        if nd <= 4
        else tuple(Axis(f"dim{i}") for i in range(nd))
    )


def _dataset_bins(
    i: int, ds: dict[str, Any], nd: int, base_bin: tuple[float, ...], scales: bool, out: Findings
) -> tuple[float, ...]:
    """Bin shape of dataset ``i`` (twice its translation; ``base_bin`` without one), with its
    ``scale`` checked to be bin_shape / base_bin_shape."""
    code, where = "metadata.multiscales", f"multiscales datasets[{i}]"
    transforms = ds.get("coordinateTransformations") or []
    if not isinstance(transforms, list) or not all(isinstance(t, dict) for t in transforms):
        out.add(ROOT, code, f"{where}.coordinateTransformations must be a list of objects")
        return base_bin
    scale = translation = None
    for t in transforms:
        if t.get("type") == "translation":
            translation = t.get("translation")
        elif t.get("type") == "scale":
            scale = t.get("scale")
    if scale is None or numbers_problem(scale, "") is not None:
        out.add(ROOT, code, f"{where} has no numeric scale transform", NONCONFORMING)
        scale = None
    if translation is None:
        return base_bin
    if (why := numbers_problem(translation, f"{where} translation", positive=True)) is not None:
        out.add(ROOT, code, f"{why} (half the bin shape)")
        return base_bin
    if len(translation) < nd:
        out.add(ROOT, code, f"{where} translation has {len(translation)} entries for {nd} space axes")
        return base_bin
    bins = tuple(2.0 * float(v) for v in translation[-nd:])
    if scales and scale is not None and len(scale) >= nd:
        want = [b / c for b, c in zip(bins, base_bin)]
        if not all(math.isclose(a, w, rel_tol=1e-6, abs_tol=1e-8) for a, w in zip(scale[-nd:], want)):
            out.add(
                ROOT,
                "pyramid.bin-shape",
                f"{where}: scale {list(scale)} should be bin_shape / base_bin_shape = {want}",
                NONCONFORMING,
            )
    return bins


def _parse_multiscales(
    ms: Any, nd: int, base_bin: tuple[float, ...], scales: bool, out: Findings
) -> tuple[tuple[Axis, ...], tuple[tuple[float, ...], ...]]:
    """Axes and per-level bin shapes from the NGFF ``multiscales`` list (``scales``: check each
    scale against the bin shape ratio)."""
    code = "metadata.multiscales"
    if ms is None:
        out.add(
            ROOT, code, "the root group has no multiscales list; Zarr Vectors stores list their levels there"
        )
        return _axes({}, nd, Findings()), ()
    if not isinstance(ms, list) or not ms or not isinstance(ms[0], dict):
        out.add(ROOT, code, f"multiscales must be a list holding one object, got {short(ms)}")
        return _axes({}, nd, Findings()), ()
    entry = ms[0]
    if (entry.get("metadata") or {}).get("format") != "zarr_vectors":
        out.add(ROOT, code, "multiscales[0].metadata.format must be 'zarr_vectors'", NONCONFORMING)
    axes = _axes(entry, nd, out)
    datasets = entry.get("datasets")
    if datasets is None:
        out.add(
            ROOT,
            code,
            "multiscales[0].datasets must list one {path, coordinateTransformations} per level",
            NONCONFORMING,
        )
        return axes, ()
    if not isinstance(datasets, list) or not all(isinstance(ds, dict) for ds in datasets):
        out.add(ROOT, code, f"multiscales datasets must be a list of objects, got {short(datasets)}")
        return axes, ()
    if not datasets:
        out.add(ROOT, code, "multiscales datasets is empty; it must list level 0 (path '0') at least")
    return axes, tuple(_dataset_bins(i, ds, nd, base_bin, scales, out) for i, ds in enumerate(datasets))
