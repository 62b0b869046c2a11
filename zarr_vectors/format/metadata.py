"""Root and level metadata: the ``zarr_vectors``, ``multiscales`` and ``zarr_vectors_level`` blocks.

Each block is a frozen dataclass with ``to_json`` and ``from_json``. Parsing checks
types and values and raises :class:`~zarr_vectors.errors.FormatError` naming the
field; unknown keys are kept in ``extra`` and written back unchanged.
"""

from __future__ import annotations

import math
import re
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from zarr_vectors.errors import FormatError, check_choice
from zarr_vectors.geo import crs_block, geozarr_attributes

__all__ = [
    "ZV_VERSION",
    "GEOMETRY_TYPES",
    "KNOWN_CAPABILITIES",
    "Axis",
    "RootMeta",
    "LevelMeta",
    "parse_version",
]

ZV_VERSION = "0.9.0"
GEOMETRY_TYPES = ("point_cloud", "line", "polyline", "streamline", "skeleton", "graph", "mesh")
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


def _float_list(value: Any, name: str, n: int | None = None, *, positive: bool = False) -> list[float]:
    """A list of finite numbers (``positive``: each > 0), of length ``n`` when given."""
    if not isinstance(value, (list, tuple)) or not all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in value
    ):
        raise FormatError(f"{name} must be a list of numbers, got {value!r}")
    if n is not None and len(value) != n:
        raise FormatError(f"{name} must have {n} entries (one per space axis), got {len(value)}")
    out = [float(v) for v in value]
    if not all(np.isfinite(out)):
        raise FormatError(f"{name} must hold finite numbers, got {value!r}")
    if positive and not all(v > 0 for v in out):
        raise FormatError(f"{name} must be positive numbers, got {value!r}")
    return out


def _int_field(block: dict[str, Any], key: str, default: Any, where: str, *, minimum: int = 0) -> Any:
    """``block[key]`` as an int >= ``minimum`` (``default`` when absent or null)."""
    value = block.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise FormatError(f"{where}.{key} must be an integer >= {minimum}, got {value!r}")
    return value


def _choice(block: dict[str, Any], key: str, allowed: tuple[str, ...], default: str, where: str) -> str:
    return check_choice(f"{where}.{key}", block.get(key, default), allowed, error=FormatError)


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
        """Parse a root group's attributes; raise FormatError on anything unusable."""
        block = attrs.get("zarr_vectors")
        if not isinstance(block, dict):
            raise FormatError(
                "the root group has no 'zarr_vectors' attribute block: it is not a Zarr Vectors store"
            )
        version = block.get("zv_version", block.get("format_version"))
        if version is None:
            raise FormatError("zarr_vectors.zv_version is missing")
        major, minor, _ = parse_version(version)
        if (major, minor) != (0, 9):
            raise FormatError(
                f"store has Zarr Vectors version {version}; this library reads 0.9.x only"
                + (" (pre-0.9 stores must be rewritten from source)" if (major, minor) < (0, 9) else "")
            )
        chunk_shape = _float_list(block.get("chunk_shape"), "zarr_vectors.chunk_shape", positive=True)
        nd = len(chunk_shape)
        if nd == 0:
            raise FormatError("zarr_vectors.chunk_shape must have one entry per space axis, got []")
        bounds = block.get("bounds")
        if not isinstance(bounds, (list, tuple)) or len(bounds) != 2:
            raise FormatError(f"zarr_vectors.bounds must be [min_corner, max_corner], got {bounds!r}")
        lo = _float_list(bounds[0], "zarr_vectors.bounds[0]", nd)
        hi = _float_list(bounds[1], "zarr_vectors.bounds[1]", nd)
        if any(a > b for a, b in zip(lo, hi)):
            raise FormatError(f"zarr_vectors.bounds: min corner {lo} exceeds max corner {hi}")
        base = block.get("base_bin_shape")
        base_t = (
            None
            if base is None
            else tuple(_float_list(base, "zarr_vectors.base_bin_shape", nd, positive=True))
        )
        if base_t is not None:
            _check_tiles(chunk_shape, base_t)
        caps = tuple(block.get("format_capabilities") or ())
        retired = [c for c in caps if c in RETIRED_CAPABILITIES]
        if retired:
            raise FormatError(f"store declares the pre-0.9 capability {retired[0]!r}; rewrite it from source")
        unknown = [c for c in caps if c not in KNOWN_CAPABILITIES]
        if unknown:
            warnings.warn(
                f"unknown Zarr Vectors capability tokens ignored: {unknown}",
                UnknownCapabilityWarning,
                stacklevel=3,
            )
        where = "zarr_vectors"
        known = {
            "zv_version",
            "format_version",
            "chunk_shape",
            "bounds",
            "geometry_types",
            "crs",
            "links_convention",
            "object_index_convention",
            "cross_chunk_strategy",
            "cross_level_storage",
            "cross_level_depth",
            "reduction_factor",
            "base_bin_shape",
            "format_capabilities",
        }
        axes, level_bins = _parse_multiscales(attrs.get("multiscales"), nd, base_t or tuple(chunk_shape))
        gtypes = block.get("geometry_types", ["point_cloud"])
        if not isinstance(gtypes, list) or not gtypes or not all(isinstance(g, str) for g in gtypes):
            raise FormatError(f"zarr_vectors.geometry_types must be a list of strings, got {gtypes!r}")
        meta = cls(
            chunk_shape=tuple(chunk_shape),
            bounds=(tuple(lo), tuple(hi)),
            axes=axes,
            geometry_types=tuple(gtypes),
            base_bin_shape=base_t,
            level_bin_shapes=level_bins,
            crs=None,
            links_convention=_choice(
                block, "links_convention", LINKS_CONVENTIONS, "implicit_sequential", where
            ),
            object_index_convention=_choice(
                block, "object_index_convention", OBJECT_INDEX_CONVENTIONS, "standard", where
            ),
            cross_chunk_strategy=_choice(
                block, "cross_chunk_strategy", CROSS_CHUNK_STRATEGIES, "explicit_links", where
            ),
            cross_level_storage=_choice(block, "cross_level_storage", CROSS_LEVEL_STORAGE, "explicit", where),
            cross_level_depth=_int_field(block, "cross_level_depth", 1, where),
            reduction_factor=_int_field(block, "reduction_factor", 8, where),
            format_capabilities=caps,
            zv_version=str(version),
            extra={k: v for k, v in block.items() if k not in known},
        )
        # The stored crs is kept as written (the format leaves it opaque): no parsing on read.
        object.__setattr__(meta, "crs", block.get("crs"))
        return meta


#: Most bins one chunk may hold when read (writers allow far fewer); past it the bin
#: shape is corrupt, not a choice.
MAX_READ_BINS = 1 << 20


def _check_tiles(chunk_shape: list[float], bin_shape: tuple[float, ...]) -> None:
    """The base bin shape divides the chunk shape into at most ``MAX_READ_BINS`` bins."""
    ratio = [c / b for c, b in zip(chunk_shape, bin_shape)]
    whole = all(abs(r - round(r)) <= 1e-6 * max(1.0, r) and round(r) >= 1 for r in ratio)
    if not whole or math.prod(round(r) for r in ratio) > MAX_READ_BINS:
        raise FormatError(
            f"zarr_vectors.base_bin_shape {list(bin_shape)} must divide chunk_shape {chunk_shape} "
            f"into whole bins (at most {MAX_READ_BINS} per chunk)"
        )


def _parse_multiscales(
    ms: Any, nd: int, base_bin: tuple[float, ...]
) -> tuple[tuple[Axis, ...], tuple[tuple[float, ...], ...]]:
    """Axes and per-level bin shapes from the NGFF ``multiscales`` list (defaults when absent)."""
    default_axes = (
        tuple(Axis(n) for n in ("x", "y", "z", "w")[:nd])
        if nd <= 4
        else tuple(Axis(f"dim{i}") for i in range(nd))
    )
    if ms is None:
        raise FormatError(
            "the root group has no multiscales list; Zarr Vectors stores list their levels there"
        )
    if not isinstance(ms, list) or not ms or not isinstance(ms[0], dict):
        raise FormatError(f"multiscales must be a list holding one object, got {ms!r}")
    entry = ms[0]
    axes_json = entry.get("axes") or []
    if not isinstance(axes_json, list):
        raise FormatError(f"multiscales axes must be a list, got {axes_json!r}")
    axes = tuple(
        Axis(str(a.get("name", f"dim{i}")), str(a.get("type", "space")), a.get("unit"))
        for i, a in enumerate(axes_json)
        if isinstance(a, dict)
    )
    space = [a for a in axes if a.type == "space"]
    if axes and len(space) != nd:
        raise FormatError(f"multiscales axes declare {len(space)} space axes but chunk_shape has {nd}")
    bins: list[tuple[float, ...]] = []
    datasets = entry.get("datasets") or []
    if not isinstance(datasets, list) or not all(isinstance(ds, dict) for ds in datasets):
        raise FormatError(f"multiscales datasets must be a list of objects, got {datasets!r}")
    if "datasets" in entry and not datasets:
        raise FormatError("multiscales datasets is empty; it must list level 0 (path '0') at least")
    for i, ds in enumerate(datasets):
        translation = None
        transforms = ds.get("coordinateTransformations") or []
        if not isinstance(transforms, list) or not all(isinstance(t, dict) for t in transforms):
            raise FormatError(
                f"multiscales datasets[{i}].coordinateTransformations must be a list of objects"
            )
        for t in transforms:
            if t.get("type") == "translation":
                translation = t.get("translation")
        if translation is None:
            bins.append(base_bin)
        else:
            half = _float_list(translation, f"multiscales datasets[{i}] translation", positive=True)
            if len(half) < nd:
                raise FormatError(
                    f"multiscales datasets[{i}] translation has {len(half)} entries for {nd} space axes"
                )
            bins.append(tuple(2.0 * v for v in half[-nd:]))
    return axes or default_axes, tuple(bins)


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
        if not isinstance(block, dict):
            raise FormatError(f"{where}: the level group has no 'zarr_vectors_level' attribute block")
        level = _int_field(block, "level", -1, where, minimum=-1)
        count = _int_field(block, "vertex_count", 0, where)
        present = block.get("arrays_present") or ()
        if not isinstance(present, (list, tuple)) or not all(isinstance(a, str) for a in present):
            raise FormatError(f"{where}.arrays_present must be a list of array family names, got {present!r}")
        inherited = _int_field(block, "inherited_num_objects", None, where)
        parent = _int_field(block, "parent_level", None, where)
        cs = block.get("chunk_shape")
        known = {
            "level",
            "vertex_count",
            "arrays_present",
            "chunk_shape",
            "fragments_tile",
            "object_sparsity",
            "coarsening_method",
            "parent_level",
            "preserves_object_ids",
            "inherited_num_objects",
            "shared_fragments",
        }
        return cls(
            level=level,
            vertex_count=count,
            arrays_present=tuple(present),
            chunk_shape=None if cs is None else tuple(_float_list(cs, f"{where}.chunk_shape", positive=True)),
            fragments_tile=bool(block.get("fragments_tile", False)),
            object_sparsity=_float_list([block.get("object_sparsity", 1.0)], f"{where}.object_sparsity")[0],
            coarsening_method=str(block.get("coarsening_method", "none")),
            parent_level=parent,
            preserves_object_ids=bool(block.get("preserves_object_ids", False)),
            inherited_num_objects=inherited,
            shared_fragments=bool(block.get("shared_fragments", False)),
            extra={k: v for k, v in block.items() if k not in known},
        )
