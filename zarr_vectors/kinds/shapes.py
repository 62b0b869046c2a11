"""Shapely geometries in: ``write_geometries``.

Geometry ``i`` is object ``i``. Every geometry is taken apart into *paths*, each a run
of vertices in input order:

* a Point is one single-vertex path; a MultiPoint one single-vertex path per point;
* a LineString is one path; a MultiLineString one path per line;
* a Polygon is one closed ring per path (exterior first, then the holes, each with its
  closing vertex repeated as shapely gives it); a MultiPolygon the rings of each part.

Two per-vertex attributes say where a vertex belongs: ``geom_part`` (the part of a
multi-geometry, 0 otherwise) and ``geom_ring`` (0 for an exterior ring, a line or a
point; k for the k-th hole). The object attribute ``geom_type`` holds the shapely type
id of each geometry (0 Point, 1 LineString, 3 Polygon, 4 MultiPoint, 5 MultiLineString,
6 MultiPolygon). Stores holding only points are written as point clouds (one object per
geometry); any other store as lines, each path a line of its own (so a ring never joins
the next ring), declared ``geometry_types ["polygon"]`` when it holds a polygon,
``["multi_polyline"]`` when an object has several parts, else ``["polyline"]``.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from zarr_vectors.engine import (
    DenseIds,
    LevelArrays,
    StoreOptions,
    make_layout,
    object_tables,
    table_rows,
    write_level0,
)
from zarr_vectors.engine import inputs as _inputs
from zarr_vectors.errors import GeometryRepairedWarning, InputError
from zarr_vectors.format.kinds import PART_ATTRIBUTE, RING_ATTRIBUTE, TYPE_ATTRIBUTE
from zarr_vectors.kinds.lines import (
    item_ids,
    line_payloads,
    partition_lines,
    segment_manifests,
    write_line_links,
)
from zarr_vectors.kinds.points import write_points

__all__ = [
    "write_geometries",
    "decompose",
    "prepare_geometries",
    "GeometryRepairedWarning",
    "PART_ATTRIBUTE",
    "RING_ATTRIBUTE",
    "TYPE_ATTRIBUTE",
    "SHAPELY_TYPES",
]

#: Shapely type id -> name, for the types a store can hold.
SHAPELY_TYPES = {
    0: "Point",
    1: "LineString",
    3: "Polygon",
    4: "MultiPoint",
    5: "MultiLineString",
    6: "MultiPolygon",
}
_POLYGONAL = (3, 6)
_POINTS = (0, 4)


@dataclass(frozen=True, eq=False)
class Paths:
    """Geometries taken apart: path ``p`` is ``positions[offsets[p]:offsets[p + 1]]``, part
    ``part[p]`` and ring ``ring[p]`` of geometry ``geometry[p]`` (non-decreasing)."""

    positions: np.ndarray
    offsets: np.ndarray
    geometry: np.ndarray
    part: np.ndarray
    ring: np.ndarray
    type_ids: np.ndarray  # (G,) shapely type id of each geometry

    def per_vertex(self, values: np.ndarray) -> np.ndarray:
        return np.repeat(values, np.diff(self.offsets))


def _as_geometry_array(geometries: Any) -> np.ndarray:
    import shapely

    if isinstance(geometries, shapely.Geometry):
        raise InputError("write_geometries takes a sequence of geometries; wrap a single one in a list")
    arr = np.asarray(getattr(geometries, "values", geometries), dtype=object)
    if arr.ndim != 1:
        arr = arr.reshape(-1)
    if len(arr) == 0:
        raise InputError("no geometries given")
    bad = np.flatnonzero(~shapely.is_geometry(arr))
    if len(bad):
        i = int(bad[0])
        raise InputError(
            f"geometry {i} is {type(arr[i]).__name__}, not a shapely geometry ({len(bad)} such entries)"
        )
    return arr


def _check_types(geoms: np.ndarray) -> np.ndarray:
    import shapely

    types = shapely.get_type_id(geoms)
    bad = np.flatnonzero(~np.isin(types, list(SHAPELY_TYPES)))
    if len(bad):
        i = int(bad[0])
        raise InputError(
            f"geometry {i} is a {geoms[i].geom_type}; write_geometries takes Point, LineString, Polygon and "
            "their Multi forms (split collections into their parts, turn a LinearRing into a LineString "
            "or Polygon)"
        )
    empty = np.flatnonzero(shapely.is_empty(geoms))
    if len(empty):
        raise InputError(
            f"{len(empty)} geometries are empty (first: geometry {int(empty[0])}, a "
            f"{geoms[empty[0]].geom_type}); an empty geometry has no vertices to store: drop it before "
            "writing"
        )
    return types


def _check_dimensions(geoms: np.ndarray) -> int:
    import shapely

    has_m = shapely.has_m(geoms)
    if has_m.any():
        i = int(np.flatnonzero(has_m)[0])
        raise InputError(f"geometry {i} has M values; only 2-D and 3-D (Z) coordinates can be stored")
    has_z = shapely.has_z(geoms)
    if has_z.any() and not has_z.all():
        minority = np.flatnonzero(has_z if has_z.sum() < len(has_z) / 2 else ~has_z)
        i = int(minority[0])
        raise InputError(
            f"mixed dimensions: {int(has_z.sum())} geometries are 3-D and {int((~has_z).sum())} are 2-D "
            f"(e.g. geometry {i} is {'3' if has_z[i] else '2'}-D); write them to separate stores or "
            "give every geometry the same dimension (shapely.force_2d / shapely.force_3d)"
        )
    return 3 if has_z[0] else 2


def _repair(geoms: np.ndarray, types: np.ndarray, repair: bool) -> tuple[np.ndarray, np.ndarray]:
    """Polygonal geometries must be valid: raise, or with ``repair`` use ``shapely.make_valid``
    (``method="structure"``, collapsed parts dropped) and warn which ones changed."""
    import shapely

    poly = np.isin(types, _POLYGONAL)
    invalid = np.flatnonzero(poly & ~shapely.is_valid(geoms))
    if len(invalid) == 0:
        return geoms, types
    i = int(invalid[0])
    if not repair:
        raise InputError(
            f"{len(invalid)} polygons are invalid (first: geometry {i}: "
            f"{shapely.is_valid_reason(geoms[i])}); fix them, or pass repair=True to replace them by "
            "shapely.make_valid output"
        )
    geoms = geoms.copy()
    fixed = shapely.make_valid(geoms[invalid], method="structure", keep_collapsed=False)
    collapsed = np.flatnonzero(shapely.is_empty(fixed))
    if len(collapsed):
        j = int(invalid[collapsed[0]])
        raise InputError(
            f"geometry {j} has no area left once repaired ({shapely.is_valid_reason(geoms[j])}); drop it"
        )
    geoms[invalid] = fixed
    shown = ", ".join(map(str, invalid[:10].tolist())) + (" ..." if len(invalid) > 10 else "")
    warnings.warn(
        f"repaired {len(invalid)} invalid polygons with shapely.make_valid (geometries {shown}); "
        "their stored shapes differ from the input",
        GeometryRepairedWarning,
        stacklevel=3,
    )
    return geoms, shapely.get_type_id(geoms)


def prepare_geometries(geometries: Any, repair: bool = False) -> tuple[np.ndarray, np.ndarray, int]:
    """Check geometries for writing: ``(geometries, shapely type ids, dimension)``.

    Refuses non-geometries, unsupported types, empty geometries, M values, mixed 2-D/3-D
    input and invalid polygons (unless ``repair``).
    """
    geoms = _as_geometry_array(geometries)
    types = _check_types(geoms)
    ndim = _check_dimensions(geoms)
    geoms, types = _repair(geoms, types, repair)
    return geoms, types, ndim


def decompose(geoms: np.ndarray, types: np.ndarray, ndim: int) -> Paths:
    """Take geometries apart into paths (vectorised over all of them)."""
    import shapely

    parts, part_geom = shapely.get_parts(geoms, return_index=True)
    part_no = np.arange(len(parts)) - np.searchsorted(part_geom, part_geom)
    is_poly = shapely.get_type_id(parts) == 3
    poly_idx = np.flatnonzero(is_poly)
    rings, ring_of = shapely.get_rings(parts[poly_idx], return_index=True)
    ring_no = np.arange(len(rings)) - np.searchsorted(ring_of, ring_of)
    flat_idx = np.flatnonzero(~is_poly)
    path_geoms = np.concatenate([parts[flat_idx], rings])
    path_partidx = np.concatenate([flat_idx, poly_idx[ring_of]])
    path_ring = np.concatenate([np.zeros(len(flat_idx), np.int64), ring_no])
    order = np.lexsort((path_ring, path_partidx))
    path_geoms, path_partidx, path_ring = path_geoms[order], path_partidx[order], path_ring[order]
    coords, coord_path = shapely.get_coordinates(path_geoms, include_z=ndim == 3, return_index=True)
    counts = np.bincount(coord_path, minlength=len(path_geoms))
    if np.any(counts == 0):
        p = int(np.flatnonzero(counts == 0)[0])
        g = int(part_geom[path_partidx[p]])
        raise InputError(f"geometry {g} has an empty part (part {int(part_no[path_partidx[p]])}); remove it")
    offsets = np.zeros(len(path_geoms) + 1, np.int64)
    np.cumsum(counts, out=offsets[1:])
    is_ring = is_poly[path_partidx]
    open_ring = is_ring & np.any(coords[offsets[:-1]] != coords[offsets[1:] - 1], axis=1)
    if open_ring.any():  # closed in (x, y) for GEOS but not in z: a read would close it and add a vertex
        p = int(np.flatnonzero(open_ring)[0])
        raise InputError(
            f"geometry {int(part_geom[path_partidx[p]])} has a ring whose last vertex differs from "
            "its first in z; close every ring exactly"
        )
    return Paths(
        coords,
        offsets,
        part_geom[path_partidx].astype(np.int64),
        part_no[path_partidx].astype(np.int64),
        path_ring,
        types.astype(np.uint8),
    )


def _index_dtype(values: np.ndarray) -> np.dtype:
    top = int(values.max()) if len(values) else 0
    return np.dtype(np.uint8 if top < 1 << 8 else np.uint16 if top < 1 << 16 else np.uint32)


def _object_attributes(user: Mapping[str, Any] | None, types: np.ndarray) -> dict[str, Any]:
    given = dict(user or {})
    if TYPE_ATTRIBUTE in given:
        raise InputError(
            f"object attribute name {TYPE_ATTRIBUTE!r} is reserved for the geometry type; rename it"
        )
    for name, values in given.items():
        if isinstance(values, Mapping):
            continue
        n = len(np.asarray(values))
        if n != len(types):
            raise InputError(f"object attribute {name!r} has {n} rows but there are {len(types)} geometries")
    given[TYPE_ATTRIBUTE] = types
    return given


def write_geometries(
    target: Any,
    geometries: Any,
    *,
    chunk_shape: Any = "auto",
    crs: Any = None,
    object_ids: Any = None,
    object_attributes: Mapping[str, Any] | None = None,
    groups: Any = None,
    group_attributes: Mapping[str, Any] | None = None,
    group_names: Sequence[str] | None = None,
    bounds: Any = None,
    bin_shape: Any = None,
    axes: Sequence[Any] | None = None,
    units: str | None = None,
    repair: bool = False,
    compression: str | None = "none",
    checksums: bool = False,
    shards: Any = "default",
    overwrite: bool = False,
    storage_options: dict[str, Any] | None = None,
) -> None:
    """Write shapely geometries to a new store; geometry ``i`` is object ``object_ids[i]``.

    Parameters
    ----------
    target
        Where to write, as in :func:`zarr_vectors.write_points`.
    geometries
        A sequence or array of Point, MultiPoint, LineString, MultiLineString, Polygon (with
        holes) and MultiPolygon geometries, all 2-D or all 3-D (a GeoSeries works too).
        Coordinates are stored as float64, exactly.
    chunk_shape
        Edge length of a spatial chunk: one number or one per axis, or ``"auto"`` (the
        default): cubes sized from the data so that each non-empty chunk holds about 16,384
        vertices on average (see ``docs/writing.md``).
    crs
        An EPSG code (``"EPSG:4326"``), WKT2, PROJJSON or ``pyproj.CRS``; the root then
        declares the GeoZarr ``proj:`` and ``spatial:`` conventions (see docs/geospatial.md).
    object_ids
        One distinct int64 or uint64 id per geometry (feature ids, of any value); default ``i``.
    object_attributes
        name -> one numeric value (or row) per geometry in the order given, or a mapping
        ``{id: value}``. ``geom_type`` and ``object_id`` are reserved.
    groups
        Groups of geometry ids: a list of lists, or a mapping group id -> ids.
    group_attributes
        Per-group values: one per group in ascending group id, or a mapping ``{group id: value}``.
    group_names
        Optional names of the groups, one per group (read back by :meth:`Dataset.group_names`).
    bounds
        Inclusive ``(lo, hi)`` corners; every vertex must lie inside. Default: the data's extent.
    bin_shape
        As in :func:`zarr_vectors.write_points`; only for input made of points.
    axes
        Axis names, or ``{"name", "unit"}`` dicts.
    units
        A default unit for the axes.
    repair
        Replace invalid polygons by ``shapely.make_valid`` output (with a
        :class:`GeometryRepairedWarning`) instead of refusing them.
    compression
        ``"none"`` (the format's default), ``"zstd"``, ``"gzip"``, ``"blosc"``, ``"lz4"``, ``"zlib"``,
        ``"bz2"``, ``"lzma"`` or ``"numcodecs.<id>"`` (see ``docs/writing.md``).
    checksums
        Append Zarr's ``crc32c`` codec to every array, so a changed byte in any cell is a
        :class:`~zarr_vectors.errors.CorruptCellError` on read (and a problem in ``validate``).
    shards
        Group the cells of every per-chunk array into ``sharding_indexed`` shards, one stored
        object each: ``"auto"`` (the default, on every backend: sized from the grid so that a
        1 % local append rewrites about 5 % of the store), chunks per shard (one integer, or
        one per axis), or None / ``"none"`` (one object per cell); see ``docs/writing.md``.
    overwrite
        Replace an existing store. Local and zip targets are swapped in only once complete.
    storage_options
        Options for fsspec and the storage layer, as for :func:`zarr_vectors.open`.

    Returns
    -------
    Dataset
        The new store, opened for reading.

    Raises
    ------
    InputError
        Empty geometries, unsupported types, mixed 2-D/3-D input, invalid polygons
        without ``repair``, an unknown CRS.
    StoreExistsError
        ``target`` holds data and ``overwrite`` is false.

    Examples
    --------
    >>> import shapely, zarr_vectors as zv
    >>> square = shapely.Polygon([(0, 0), (4, 0), (4, 4), (0, 4)], [[(1, 1), (2, 1), (2, 2), (1, 1)]])
    >>> ds = zv.write_geometries("memory://doc-shapes", [square, shapely.Point(6, 6)], chunk_shape=2)
    >>> ids, geoms = ds.objects([0, 1]).to_shapely()
    >>> bool(geoms[0].equals_exact(square, 0))
    True
    """
    geoms, types, ndim = prepare_geometries(geometries, repair)
    paths = decompose(geoms, types, ndim)
    ids = item_ids(object_ids, len(types), "geometry")
    oattrs = _object_attributes(object_attributes, paths.type_ids)
    if object_ids is not None:  # rows per geometry -> rows per id, ascending
        oattrs = {k: table_rows(v, ids, k, "object attribute", True) for k, v in oattrs.items()}
    common: dict[str, Any] = {
        "crs": crs,
        "bounds": bounds,
        "axes": axes,
        "units": units,
        "compression": compression,
        "checksums": checksums,
        "shards": shards,
        "overwrite": overwrite,
        "storage_options": storage_options,
        "groups": groups,
        "group_attributes": group_attributes,
        "group_names": group_names,
    }
    part = paths.per_vertex(paths.part)
    if np.isin(types, _POINTS).all():
        write_points(
            target,
            paths.positions,
            chunk_shape=chunk_shape,
            bin_shape=bin_shape,
            object_ids=paths.per_vertex(
                paths.geometry if object_ids is None else ids.id_map().ids()[ids.dense][paths.geometry]
            ),
            object_attributes=oattrs,
            attributes={PART_ATTRIBUTE: part.astype(_index_dtype(part))},
            **common,
        )
        return
    if bin_shape is not None:
        raise InputError("bin_shape applies to point-only input; lines and polygons use one bin per chunk")
    ring = paths.per_vertex(paths.ring)
    attributes = {
        PART_ATTRIBUTE: part.astype(_index_dtype(part)),
        RING_ATTRIBUTE: ring.astype(_index_dtype(ring)),
    }
    _write_paths(target, paths, ids, chunk_shape, attributes, oattrs, _declared_type(paths), **common)


def _declared_type(paths: Paths) -> str:
    """``polygon`` with any polygon; ``multi_polyline`` when some object has several paths
    (parts); else ``polyline``: every object one line, readable as plain polylines."""
    if np.isin(paths.type_ids, _POLYGONAL).any():
        return "polygon"
    return "multi_polyline" if np.any(np.diff(paths.geometry) == 0) else "polyline"


def _write_paths(
    target: Any,
    paths: Paths,
    ids: DenseIds,
    chunk_shape: Any,
    attributes: dict[str, np.ndarray],
    oattrs: dict[str, Any],
    geometry_type: str,
    *,
    crs: Any,
    bounds: Any,
    axes: Sequence[Any] | None,
    units: str | None,
    compression: str | None,
    checksums: bool,
    shards: Any,
    overwrite: bool,
    storage_options: dict[str, Any] | None,
    groups: Any,
    group_attributes: Mapping[str, Any] | None,
    group_names: Sequence[str] | None,
) -> None:
    """Write paths as lines (one line per path) whose objects are their geometries."""
    pos = _inputs.positions_array(paths.positions)
    options = StoreOptions(
        chunk_shape,
        bounds=bounds,
        axes=axes,
        units=units,
        crs=crs,
        compression=compression,
        checksums=checksums,
        shards=shards,
        overwrite=overwrite,
        storage_options=storage_options,
    )
    layout = make_layout(pos, options)
    grid = layout.grid
    vattrs = _inputs.vertex_attributes(attributes, len(pos))
    tables = object_tables(ids, oattrs, groups, group_attributes, group_names)
    part = partition_lines(pos, paths.offsets, grid)
    seg_object = ids.dense[paths.geometry[part.seg_line]]
    chunks = part.cells[part.seg_cell] + grid.origin
    manifests = segment_manifests(tables.num_objects, seg_object, chunks, part.seg_local)
    write_level0(
        target,
        options,
        layout,
        geometry_type,
        "implicit_sequential",
        LevelArrays(
            positions=pos,
            part=part,
            fragments=line_payloads(part),
            vertex_attributes=vattrs,
            tables=tables,
            manifests=manifests,
            fragment_objects=(part.seg_cell, part.seg_local, seg_object),
            links=lambda builder: ["links"] if write_line_links(builder, grid, part) else [],
        ),
    )
