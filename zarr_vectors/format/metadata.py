"""Root and level metadata: the ``zarr_vectors``, ``multiscales`` and ``zarr_vectors_level`` blocks.

Each block is a frozen dataclass with ``to_json`` and ``from_json``. :func:`parse_root` and
:func:`parse_level` check types and values and return the block with every
:class:`~zarr_vectors.format.findings.Finding` (the validator reports them); ``from_attributes``
and ``from_json`` raise one :class:`~zarr_vectors.errors.FormatError` for those that block
reading. Unknown keys are kept in ``extra`` and written back unchanged.
"""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Collection
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from zarr_vectors.errors import FormatError, choice_message
from zarr_vectors.format.findings import NONCONFORMING, WARNING, Finding, Findings, raise_for, short
from zarr_vectors.format.kinds import CANONICAL_KINDS, kind
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
COARSENING_METHODS = ("per_object", "manual", "none")
AXIS_TYPES = ("space", "time", "channel")

_VERSION_RE = re.compile(r"^(\d+)\.(\d+)\.(\d+)")


class UnknownCapabilityWarning(UserWarning):
    """A store declares a capability token this library does not know."""


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
    geometry_types: tuple[str, ...] = ("point_cloud",)
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


@dataclass(frozen=True)
class LevelMeta:
    """The ``zarr_vectors_level`` block of a level group."""

    level: int
    vertex_count: int
    arrays_present: tuple[str, ...]
    chunk_shape: tuple[float, ...] | None = None
    fragments_tile: bool = False
    object_sparsity: float = 1.0
    coarsening_method: str = "none"
    parent_level: int | None = None
    preserves_object_ids: bool = False
    inherited_num_objects: int | None = None
    shared_fragments: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = dict(self.extra)
        out.update(
            {
                "level": self.level,
                "vertex_count": self.vertex_count,
                "arrays_present": list(self.arrays_present),
                "fragments_tile": self.fragments_tile,
                "object_sparsity": self.object_sparsity,
                "coarsening_method": self.coarsening_method,
                "parent_level": self.parent_level,
                "preserves_object_ids": self.preserves_object_ids,
                "shared_fragments": self.shared_fragments,
            }
        )
        if self.chunk_shape is not None:
            out["chunk_shape"] = list(self.chunk_shape)
        if self.inherited_num_objects is not None:
            out["inherited_num_objects"] = self.inherited_num_objects
        return out

    @classmethod
    def from_json(cls, block: Any, where: str) -> LevelMeta:
        """Parse a ``zarr_vectors_level`` block (``where`` names the level in messages, e.g.
        ``"level 0"``); raise FormatError on anything unusable (see :func:`parse_level`)."""
        meta, findings = _parse_level(block, where, "zarr.json", None, None)
        raise_for(findings)
        assert meta is not None
        return meta


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
#: Keys that are fields of :class:`LevelMeta` (the others are kept in ``extra``).
_LEVEL_FIELDS = frozenset(f.name for f in fields(LevelMeta)) - {"extra"}
#: Keys of a level's ``zarr_vectors_level`` block (the ``chunk_*`` ones: a reference 0.9.2 writer's).
LEVEL_KEYS = _LEVEL_FIELDS | {"chunk_dims", "chunk_attribute_name", "chunk_attribute_values"}
#: Keys this library adds to the level blocks of pyramid levels, recording how they were
#: built (kept in ``extra``; the format leaves room for such keys).
LIBRARY_LEVEL_KEYS = frozenset(
    {
        "coarsening_algorithm",
        "simplify_tolerance",
        "face_fraction",
        "attribute_reductions",
        "object_sparsity_strategy",
        "object_sparsity_seed",
        "object_sparsity_attribute",
        "object_sparsity_largest",
        "stale",  # set on coarser levels once level 0 changed under them (an append)
    }
)
#: Keys a level block must not hold: bin shapes live in the root multiscales, bounds in the root.
FORBIDDEN_LEVEL_KEYS = ("bin_shape", "bin_ratio", "bin_size", "bounds")
#: The array and group families a level may hold (what ``arrays_present`` names).
LEVEL_ARRAYS = ("vertices", "vertex_fragments", "link_fragments", "groups")
LEVEL_GROUPS = (
    "links",
    "vertex_attributes",
    "fragment_attributes",
    "link_attributes",
    "object_index",
    "object_attributes",
    "group_attributes",
)


def _int_field(
    block: dict[str, Any], key: str, default: Any, where: str, path: str, out: Findings, *, minimum: int = 0
) -> Any:
    """``block[key]`` as an int >= ``minimum`` (``default`` when absent, null or unusable)."""
    value = block.get(key)
    if value is None:
        return default
    if not is_int(value) or value < minimum:
        out.add(path, _LEVEL_CODE, f"{where}.{key} must be an integer >= {minimum}, got {short(value)}")
        return default
    return value


_LEVEL_CODE = "metadata.level"


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
    gtypes = block.get("geometry_types", ["point_cloud"])
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


def parse_level(block: Any, index: int, nd: int | None = None) -> tuple[LevelMeta | None, list[Finding]]:
    """Parse the ``zarr_vectors_level`` block of level ``index`` (``nd``: the store's space axes,
    to check a ``chunk_shape`` override). Returns the block (None when there is none) and every
    finding."""
    return _parse_level(block, f"level {index}", f"{index}/zarr.json", index, nd)


def _flag(block: dict[str, Any], key: str, where: str, path: str, out: Findings) -> bool:
    value = block.get(key, False)
    if not isinstance(value, bool):
        out.add(path, _LEVEL_CODE, f"{where}.{key} must be true or false, got {short(value)}")
        return False
    return value


def _arrays_present(block: dict[str, Any], where: str, path: str, out: Findings) -> tuple[str, ...]:
    present = block.get("arrays_present", [])
    if not isinstance(present, (list, tuple)) or not all(isinstance(a, str) for a in present):
        out.add(
            path,
            "metadata.arrays-present",
            f"{where}.arrays_present must be a list of array family names, got {short(present)}",
        )
        return ()
    for name in present:
        if name not in LEVEL_ARRAYS + LEVEL_GROUPS:
            out.add(
                path,
                "metadata.arrays-present",
                f"{where}: arrays_present lists {name!r}, which is not a family name",
                NONCONFORMING,
            )
    return tuple(present)


def _level_numbers(
    block: dict[str, Any], where: str, path: str, nd: int | None, out: Findings
) -> tuple[tuple[float, ...] | None, float]:
    """The ``chunk_shape`` override (None: the root's) and ``object_sparsity``."""
    cs = block.get("chunk_shape")
    chunk_shape = None
    if cs is not None:
        if (why := numbers_problem(cs, f"{where}.chunk_shape", positive=True)) is not None:
            out.add(path, _LEVEL_CODE, why)
        elif nd is not None and len(cs) != nd:
            out.add(
                path,
                _LEVEL_CODE,
                f"{where}: chunk_shape {[float(v) for v in cs]} has {len(cs)} entries for {nd} space axes",
            )
        else:
            chunk_shape = tuple(float(v) for v in cs)
    sparsity = block.get("object_sparsity", 1.0)
    if (why := numbers_problem([sparsity], f"{where}.object_sparsity")) is not None:
        out.add(path, _LEVEL_CODE, why)
        sparsity = 1.0
    elif not 0 < sparsity <= 1:
        out.add(
            path, _LEVEL_CODE, f"{where}.object_sparsity must be in (0, 1], got {sparsity!r}", NONCONFORMING
        )
    return chunk_shape, float(sparsity)


def _level_keys(block: dict[str, Any], where: str, path: str, out: Findings) -> None:
    """Keys a level block must not hold, and keys 0.9 does not know."""
    for bad in FORBIDDEN_LEVEL_KEYS:
        if bad in block:
            out.add(
                path,
                _LEVEL_CODE,
                f"{where}: level metadata must not hold {bad!r} (bin shapes live in the root multiscales "
                "transforms, bounds in the root block)",
                NONCONFORMING,
            )
    for key in sorted(set(block) - LEVEL_KEYS - LIBRARY_LEVEL_KEYS - set(FORBIDDEN_LEVEL_KEYS), key=str):
        out.add(
            path,
            "metadata.unknown-key",
            f"unknown key zarr_vectors_level.{key} (kept, but not part of 0.9)",
            WARNING,
        )


def _parse_level(
    block: Any, where: str, path: str, index: int | None, nd: int | None
) -> tuple[LevelMeta | None, list[Finding]]:
    out = Findings()
    if not isinstance(block, dict):
        out.add(path, _LEVEL_CODE, f"{where}: the level group has no 'zarr_vectors_level' attribute block")
        return None, out
    raw_level = block.get("level")
    level = _int_field(block, "level", -1, where, path, out, minimum=-1)
    if index is not None and level != index and (raw_level is None or raw_level == level):
        out.add(
            path,
            _LEVEL_CODE,
            f"{where}: zarr_vectors_level.level is {short(raw_level)} but the group is level {index}",
            NONCONFORMING,
        )
    if block.get("vertex_count") is None:
        out.add(path, _LEVEL_CODE, f"{where}.vertex_count is missing; it must be an integer >= 0")
    count = _int_field(block, "vertex_count", -1, where, path, out)
    present = _arrays_present(block, where, path, out)
    inherited = _int_field(block, "inherited_num_objects", None, where, path, out)
    parent = _int_field(block, "parent_level", None, where, path, out)
    chunk_shape, sparsity = _level_numbers(block, where, path, nd, out)
    method = block.get("coarsening_method", "none")
    if method not in COARSENING_METHODS:
        out.add(
            path,
            _LEVEL_CODE,
            choice_message(f"{where}.coarsening_method", method, COARSENING_METHODS),
            WARNING,
        )
    flags = {
        k: _flag(block, k, where, path, out)
        for k in ("fragments_tile", "preserves_object_ids", "shared_fragments")
    }
    _level_keys(block, where, path, out)
    meta = LevelMeta(
        level=level,
        vertex_count=count,
        arrays_present=present,
        chunk_shape=chunk_shape,
        object_sparsity=sparsity,
        coarsening_method=str(method),
        parent_level=parent,
        inherited_num_objects=inherited,
        extra={k: v for k, v in block.items() if k not in _LEVEL_FIELDS},
        **flags,
    )
    return meta, out


#: ``arrays_present`` families whose loss would silently change what a read returns
#: (attributes, edges and faces, objects): one declared whose ``zarr.json`` is missing blocks
#: reading. The others (``link_fragments``, ``fragment_attributes``, ...) are not needed to
#: answer correctly: their absence is a warning.
DECLARED_FAMILIES = (
    "vertex_fragments",
    "vertex_attributes",
    "links",
    "object_index",
    "object_attributes",
    "groups",
    "group_attributes",
)


def check_arrays_present(meta: LevelMeta, index: int, present: Collection[str]) -> list[Finding]:
    """Level ``index``'s ``arrays_present`` against the families it holds (``present``: the
    names of its child nodes that have a ``zarr.json``)."""
    out = Findings()
    p = str(index)
    for name in meta.arrays_present:
        if name in present or name not in LEVEL_ARRAYS + LEVEL_GROUPS:
            continue
        if name in DECLARED_FAMILIES:
            out.add(
                f"{p}/zarr.json",
                "metadata.arrays-present",
                f"level {p} declares {name!r} in arrays_present but {p}/{name}/zarr.json is missing "
                "(deleted or never written); the level cannot be read completely",
            )
        else:
            out.add(
                f"{p}/zarr.json",
                "metadata.arrays-present",
                f"arrays_present lists {name!r} but level {p} has no such node "
                "(readers look nodes up, so this misleads only)",
                WARNING,
            )
    return out
