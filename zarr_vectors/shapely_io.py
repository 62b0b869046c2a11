"""Results out as shapely geometries: :func:`result_to_shapely` (``Result.to_shapely``).

Stores written by :func:`~zarr_vectors.write_geometries` carry per-vertex ``geom_part`` /
``geom_ring`` and the object attribute ``geom_type``; their objects come back exactly as
written. Rows are put in (object, part, ring) order with a stable sort, which keeps each
path's own vertex order (the manifest order of an object read), and geometries are built
per type with ``shapely.from_ragged_array``: no per-vertex Python work.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np
import shapely

from zarr_vectors._extras import needs
from zarr_vectors.errors import InputError
from zarr_vectors.format.fragments import ranges_to_rows
from zarr_vectors.format.groups import OBJECT_ID_ATTRIBUTE, owned
from zarr_vectors.format.kinds import PART_ATTRIBUTE, RING_ATTRIBUTE, TYPE_ATTRIBUTE
from zarr_vectors.result import Region, Result
from zarr_vectors.tables import attribute_columns

__all__ = ["result_to_shapely", "geometries_from_paths", "clip_geometries", "region_shape"]


def _starts(*keys: np.ndarray) -> np.ndarray:
    """Rows where any key changes from the previous row (row 0 included)."""
    n = len(keys[0])
    new = np.zeros(n, bool)
    if n:
        new[0] = True
        for k in keys:
            new[1:] |= k[1:] != k[:-1]
    return np.flatnonzero(new)


def _offsets(starts: np.ndarray, n: int) -> np.ndarray:
    return np.append(starts, n).astype(np.int64)


def geometries_from_paths(
    positions: np.ndarray, obj: np.ndarray, part: np.ndarray, ring: np.ndarray, types: np.ndarray
) -> np.ndarray:
    """One geometry per object ``0 .. len(types) - 1`` from rows sorted by (obj, part, ring).

    ``obj`` is each row's object position, ``types`` each object's shapely type id. Every
    object must have rows.
    """
    import shapely
    from shapely import GeometryType

    out = np.empty(len(types), dtype=object)
    row_type = types[obj]
    for t in np.unique(types):
        rows = np.flatnonzero(row_type == t)
        coords = positions[rows]
        o, p, r = obj[rows], part[rows], ring[rows]
        path = _starts(o, p, r)
        objs = o[_starts(o)]
        n = len(rows)
        if t == 0:
            geoms = shapely.points(coords[_starts(o)])
        elif t == 4:
            geoms = shapely.from_ragged_array(GeometryType.MULTIPOINT, coords, (_offsets(_starts(o), n),))
        elif t == 1:
            geoms = shapely.from_ragged_array(GeometryType.LINESTRING, coords, (_offsets(path, n),))
        else:
            by_obj = np.searchsorted(path, _starts(o))
            if t == 5:
                offsets: tuple[np.ndarray, ...] = (_offsets(path, n), _offsets(by_obj, len(path)))
                geoms = shapely.from_ragged_array(GeometryType.MULTILINESTRING, coords, offsets)
            elif t == 3:
                offsets = (_offsets(path, n), _offsets(by_obj, len(path)))
                geoms = shapely.from_ragged_array(GeometryType.POLYGON, coords, offsets)
            else:
                poly = _starts(o, p)
                offsets = (
                    _offsets(path, n),
                    _offsets(np.searchsorted(path, poly), len(path)),
                    _offsets(np.searchsorted(poly, _starts(o)), len(poly)),
                )
                geoms = shapely.from_ragged_array(GeometryType.MULTIPOLYGON, coords, offsets)
        out[objs] = geoms
    return out


def _group_rows(object_ids: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows owned by ``ids`` (stable, grouped by id order) and each one's position in ``ids``."""
    pos = np.searchsorted(ids, object_ids)
    pos = np.minimum(pos, max(len(ids) - 1, 0))
    owned = np.flatnonzero(ids[pos] == object_ids) if len(ids) else np.zeros(0, np.int64)
    order = owned[np.argsort(pos[owned], kind="stable")]
    return order, pos[order]


def _structural(res: Result, ids: np.ndarray) -> np.ndarray:
    """Geometries of results not written by write_geometries: points, line pieces or edges."""
    import shapely
    from shapely import GeometryType

    assert res.object_ids is not None
    if res.faces is not None:
        raise InputError("to_shapely does not build meshes; use to_trimesh() for a mesh result")
    out = np.empty(len(ids), dtype=object)
    if res.line_offsets is not None:
        lo = res.line_offsets
        first = lo[:-1]
        owner = res.object_ids[first]
        pieces, pos = _group_rows(owner, ids)
        lengths = np.diff(lo)[pieces]
        rows = ranges_to_rows(lo[pieces], lengths)
        coords = res.positions[rows]
        single = lengths == 1
        if single.any():  # a one-vertex piece cannot be a LineString: repeat it (a zero-length line)
            coords = np.repeat(coords, np.where(np.repeat(single, lengths), 2, 1), axis=0)
            lengths = np.where(single, 2, lengths)
        line_off = np.zeros(len(lengths) + 1, np.int64)
        np.cumsum(lengths, out=line_off[1:])
        obj_off = _offsets(_starts(pos), len(pos))
        multi = shapely.from_ragged_array(GeometryType.MULTILINESTRING, coords, (line_off, obj_off))
        count = np.diff(obj_off)
        present = pos[_starts(pos)]
        out[present] = np.where(count == 1, shapely.get_geometry(multi, 0), multi)
        return out
    if res.edges is not None and len(res.edges):
        owner = res.object_ids[res.edges[:, 0]]
        edges, pos = _group_rows(owner, ids)
        coords = res.positions[res.edges[edges].reshape(-1)]
        line_off = np.arange(len(edges) + 1, dtype=np.int64) * 2
        obj_off = _offsets(_starts(pos), len(pos))
        out[pos[_starts(pos)]] = shapely.from_ragged_array(
            GeometryType.MULTILINESTRING, coords, (line_off, obj_off)
        )
    missing = np.flatnonzero(shapely.is_missing(out))  # objects without edges: their vertices
    if len(missing):
        rows, pos = _group_rows(res.object_ids, ids[missing])
        points = shapely.from_ragged_array(
            GeometryType.MULTIPOINT, res.positions[rows], (_offsets(_starts(pos), len(pos)),)
        )
        out[missing[pos[_starts(pos)]]] = points
    return out


def _shape_types(res: Result, ids: np.ndarray) -> np.ndarray | None:
    """``geom_type`` of each object when the result's store was written by write_geometries."""
    if res.origin is None or PART_ATTRIBUTE not in res.attributes:
        return None
    ds = res.origin.dataset
    if TYPE_ATTRIBUTE not in ds.object_attribute_names(res.origin.level):
        return None
    return np.asarray(ds.object_attributes(TYPE_ATTRIBUTE, ids, level=res.origin.level)).astype(np.int64)


def _whole(res: Result, ids: np.ndarray, clip: bool) -> Result:
    """The result itself when its objects are complete (with the ``geom_*`` attributes its
    store has), else the whole objects re-read."""
    if res.origin is None:
        return res
    ds, level = res.origin.dataset, res.origin.level
    names = [n for n in (PART_ATTRIBUTE, RING_ATTRIBUTE) if n in ds.attribute_names(level)]
    if res.origin.complete and all(n in res.attributes for n in names):
        return res
    if clip and not names and res.line_offsets is None and res.edges is None and res.faces is None:
        return res  # plain point clouds: the rows in the region are the clipped objects already
    whole = ds.objects(ids, level=level, attributes=names or False)
    return dataclasses.replace(whole, region=res.region)


def result_to_shapely(result: Result, clip: bool = False, object_attributes: Any = None) -> Any:
    """``(ids, geometries)``, or ``(ids, geometries, attributes)`` when ``object_attributes``
    is True or a list of names. See :meth:`zarr_vectors.Result.to_shapely`."""
    if result.object_ids is None:
        raise InputError(
            "to_shapely needs object ids: read a store with an object index, and do not pass object_ids=False"
        )
    origin = result.origin
    ids = owned(
        result.object_ids, None if origin is None else origin.dataset.level(origin.level).object_id_map
    )
    res = _whole(result, ids, clip)
    types = _shape_types(res, ids)
    if types is not None:
        assert res.object_ids is not None  # result had ids (checked above); object reads always do
        rows, pos = _group_rows(res.object_ids, ids)
        part = res.attributes[PART_ATTRIBUTE][rows].astype(np.int64)
        ring = res.attributes.get(RING_ATTRIBUTE, np.zeros(len(res), np.int64))[rows].astype(np.int64)
        order = np.lexsort((ring, part, pos))
        rows, pos, part, ring = rows[order], pos[order], part[order], ring[order]
        geoms = geometries_from_paths(res.positions[rows], pos, part, ring, types)
    else:
        geoms = _structural(res, ids)
    if clip:
        geoms = clip_geometries(geoms, result.region, result.positions.shape[1])
    if object_attributes is None or object_attributes is False:
        return ids, geoms
    return ids, geoms, _object_attribute_values(result, ids, object_attributes)


def _object_attribute_values(result: Result, ids: np.ndarray, which: Any) -> dict[str, np.ndarray]:
    if result.origin is None:
        raise InputError(
            "object attributes need a result read from a store (Dataset.query or Dataset.objects)"
        )
    ds, level = result.origin.dataset, result.origin.level
    names: Sequence[str] = (
        ds.object_attribute_names(level) if which is True else [which] if isinstance(which, str) else which
    )
    return {
        n: ds.object_attributes(n, ids, level=level)
        for n in names
        if n != TYPE_ATTRIBUTE or which is not True
    }


def region_shape(region: Region, ndim: int) -> Any:
    """The region as a shapely polygon in the (x, y) plane, for clipping.

    Only regions that cut nothing but the first two axes can be expressed: a polygon over
    other axes, or a 3-D box bounded on a third axis, raise InputError (``clip`` is planar).
    """
    import shapely

    lo, hi = np.asarray(region.lo, float), np.asarray(region.hi, float)
    if region.polygon is not None and tuple(region.polygon_axes) != (0, 1):
        raise InputError(
            f"clip=True needs a polygon over the first two axes, got axes {tuple(region.polygon_axes)}"
        )
    if ndim > 2 and (np.isfinite(lo[2:]).any() or np.isfinite(hi[2:]).any()):
        raise InputError(
            "clip=True cuts in the (x, y) plane only; this query also bounds axes beyond the "
            "first two: clip with shapely yourself, or query without bounds on them"
        )
    big = 1e300
    rect = shapely.box(*np.clip([lo[0], lo[1], hi[0], hi[1]], -big, big))
    return rect if region.polygon is None else shapely.intersection(shapely.force_2d(region.polygon), rect)


def clip_geometries(geoms: np.ndarray, region: Region | None, ndim: int) -> np.ndarray:
    """Each geometry intersected with the region (vectorised); unchanged without a region."""
    import shapely

    if region is None:
        return geoms
    shape = region_shape(region, ndim)
    shapely.prepare(shape)
    out = geoms.copy()
    cut = np.flatnonzero(~shapely.covered_by(geoms, shape))  # geometries inside stay exactly as read
    out[cut] = shapely.intersection(geoms[cut], shape)
    return out


def result_to_geodataframe(result: Result, clip: bool = False, object_attributes: Any = True) -> Any:
    """A ``geopandas.GeoDataFrame``: one feature per object (``object_id``, its object
    attributes, its geometry; see :func:`result_to_shapely`), or, for a result without
    object ids, one Point per vertex with the vertex attributes. The CRS is the store's."""
    try:
        import geopandas as gpd
    except ImportError as exc:
        raise InputError(needs("Result.to_geodataframe", "geopandas", "geo")) from exc
    origin = result.origin
    crs = None if origin is None or origin.dataset.crs is None else origin.dataset.crs.to_pyproj()
    if result.object_ids is None:
        cols = attribute_columns(result.attributes, len(result))
        xyz = result.positions[:, :3] if result.positions.shape[1] >= 2 else None
        if xyz is None:
            raise InputError("a GeoDataFrame needs at least two axes; this result has one")
        geoms = shapely.points(xyz)
        return gpd.GeoDataFrame(cols, geometry=geoms, crs=crs)
    if object_attributes is None or object_attributes is False or origin is None:
        ids, geoms = result_to_shapely(result, clip)
        attrs: dict[str, np.ndarray] = {}
    else:
        ids, geoms, attrs = result_to_shapely(result, clip, object_attributes)
    if OBJECT_ID_ATTRIBUTE in attrs:
        raise InputError(f"an object attribute is named {OBJECT_ID_ATTRIBUTE!r}, the column of the ids")
    table = {OBJECT_ID_ATTRIBUTE: ids, **{n: v for n, v in attrs.items() if np.ndim(v) == 1}}
    for name, values in attrs.items():
        if np.ndim(values) == 2:
            table.update({f"{name}_{j}": values[:, j] for j in range(values.shape[1])})
    return gpd.GeoDataFrame(table, geometry=list(geoms), crs=crs)
