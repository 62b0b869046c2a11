"""GeoJSON (and, with the ``geo`` extra, any OGR vector file) in and out.

Reading: feature ``i`` becomes object ``i`` of :func:`~zarr_vectors.write_geometries`;
numeric, boolean, text and date-time properties become object attributes (a missing value
is stored as absent; date-times as datetime64, from OGR files and GeoDataFrames: GeoJSON
carries them as text); other properties (lists, objects, mixed types) are left out with a
:class:`PropertiesSkippedWarning` naming them. A property name that is not a
valid attribute name is renamed, with the same warning. The CRS is the file's legacy
``crs`` member when it has one, else ``EPSG:4326`` (RFC 7946: longitude, latitude).

Writing: :func:`export_geojson` writes a query or object read as a FeatureCollection,
one feature per object (``id`` and the ``object_id`` property are the object id, object
attributes are properties), or one Point feature per vertex when the result has no
object ids. Coordinates are written with enough digits to read back bit for bit.
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from zarr_vectors._extras import needs
from zarr_vectors.api import write_geometries
from zarr_vectors.engine import OBJECT_ID_ATTRIBUTE, positive_numbers, valid_name
from zarr_vectors.errors import InputError, PropertiesSkippedWarning
from zarr_vectors.kinds.shapes import TYPE_ATTRIBUTE
from zarr_vectors.result import Result

if TYPE_CHECKING:
    from zarr_vectors.dataset import Dataset

__all__ = [
    "GeoTable",
    "PropertiesSkippedWarning",
    "read_geojson",
    "read_vector_file",
    "from_geodataframe",
    "ingest_vector",
    "to_feature_collection",
    "export_geojson",
    "export_geojsonl",
    "crs_member",
    "feature_text",
]

GEOJSON_SUFFIXES = (".geojson", ".json")
_LON_LAT = ("EPSG:4326", "OGC:CRS84")


@dataclass(frozen=True, eq=False)
class GeoTable:
    """Features read from a file: geometries (object array), numeric property columns, CRS."""

    geometries: np.ndarray
    properties: dict[str, np.ndarray] = field(default_factory=dict)
    crs: Any = None
    skipped: tuple[str, ...] = ()


def _column(values: Sequence[Any]) -> np.ndarray | None:
    """A numeric or string column from property values (None/missing -> absent), or None
    for other values (lists, objects, mixed types)."""
    present = [v for v in values if v is not None]
    if not present:
        return None
    if all(isinstance(v, str) for v in present):  # absent is ""
        return np.array(["" if v is None else v for v in values], dtype=str)
    if all(isinstance(v, bool) for v in present):
        return np.ma.masked_array(
            [bool(v) if v is not None else 0 for v in values], [v is None for v in values], dtype=np.uint8
        )
    if any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in present):
        return None
    if all(isinstance(v, int) for v in present) and (
        all(-(1 << 63) < v < (1 << 63) for v in present) or all(0 <= v < (1 << 64) for v in present)
    ):  # int64, or uint64 (segment ids) when a value needs it
        dtype = np.int64 if all(v < (1 << 63) for v in present) else np.uint64
        return np.ma.masked_array(
            [v if v is not None else 0 for v in values], [v is None for v in values], dtype=dtype
        )
    return np.array([np.nan if v is None else float(v) for v in values], dtype=np.float64)


def _clean_properties(columns: Mapping[str, Any], n: int) -> tuple[dict[str, np.ndarray], list[str]]:
    """Numeric columns under valid attribute names; the rest named in the returned notes."""
    out: dict[str, np.ndarray] = {}
    notes = []
    for name, col in columns.items():
        arr = col if isinstance(col, np.ndarray) and col.dtype.kind in "fiubM" else _column(list(col))
        if arr is None or len(arr) != n:
            notes.append(f"{name!r} (neither numbers nor strings)")
            continue
        if arr.dtype.kind == "b":
            arr = arr.astype(np.uint8)
        key = valid_name(str(name), "object attribute", [*out, TYPE_ATTRIBUTE])
        if key != name:
            notes.append(f"{name!r} stored as {key!r}")
        out[key] = arr
    return out, notes


def _legacy_crs(doc: Mapping[str, Any]) -> str | None:
    """The CRS named by a GeoJSON 2008 ``crs`` member; OGC CRS84 reads as EPSG:4326."""
    crs = doc.get("crs")
    if not isinstance(crs, Mapping):
        return None
    name = (crs.get("properties") or {}).get("name")
    if not isinstance(name, str):
        return None
    return "EPSG:4326" if name.upper().endswith("CRS84") else name


def _check_coordinates(geoms: np.ndarray, where: str) -> None:
    """Refuse NaN or infinite coordinates, naming the first feature that has them."""
    import shapely

    coords, index = shapely.get_coordinates(geoms, include_z=True, return_index=True)
    bad = ~np.isfinite(coords[:, :2]).all(axis=1) | np.isinf(coords[:, 2])  # z is NaN for 2-D geometries
    if bad.any():
        features = np.unique(index[bad])
        raise InputError(
            f"{where}feature {int(features[0])} has NaN or infinite coordinates "
            f"({len(features)} such features); fix or drop them"
        )


def read_geojson(source: str | Path | Mapping[str, Any]) -> GeoTable:
    """Features of a GeoJSON FeatureCollection, Feature or bare geometry (a path or a parsed dict).

    Raises :class:`~zarr_vectors.errors.InputError` for a feature without a geometry or a
    document that is not GeoJSON.
    """
    import shapely.geometry

    where = "" if isinstance(source, Mapping) else f"{source}: "
    if isinstance(source, Mapping):
        doc: Any = source
    else:
        try:
            doc = json.loads(Path(source).read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise InputError(f"{source} is not valid JSON ({exc})") from exc
    kind = doc.get("type") if isinstance(doc, Mapping) else None
    if kind == "FeatureCollection":
        features = list(doc.get("features") or [])
    elif kind == "Feature":
        features = [doc]
    elif isinstance(kind, str) and kind in _GEOMETRY_TYPES:
        features = [{"type": "Feature", "geometry": doc, "properties": {}}]
    else:
        raise InputError(
            f"{where}not a GeoJSON document (type {kind!r}); expected a FeatureCollection, Feature or geometry"
        )
    geoms = np.empty(len(features), dtype=object)
    for i, feat in enumerate(features):
        g = feat.get("geometry") if isinstance(feat, Mapping) else None
        if g is None:
            raise InputError(f"{where}feature {i} has no geometry; drop it or give it one")
        try:
            geoms[i] = shapely.geometry.shape(g)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise InputError(f"{where}feature {i} has an unreadable geometry ({exc})") from exc
    _check_coordinates(geoms, where)
    names: dict[str, None] = {}
    for feat in features:
        names.update(dict.fromkeys(feat.get("properties") or {}))
    columns = {k: [(f.get("properties") or {}).get(k) for f in features] for k in names}
    props, notes = _clean_properties(columns, len(features))
    return GeoTable(geoms, props, _legacy_crs(doc) if isinstance(doc, Mapping) else None, tuple(notes))


_GEOMETRY_TYPES = (
    "Point",
    "MultiPoint",
    "LineString",
    "MultiLineString",
    "Polygon",
    "MultiPolygon",
    "GeometryCollection",
)


def read_vector_file(path: str | Path, *, layer: str | int | None = None) -> GeoTable:
    """Features of any file GDAL/OGR reads (GeoPackage, Shapefile, FlatGeobuf, GeoJSON, ...)
    through pyogrio (extra ``geo``); GeoJSON files are read without it."""
    import importlib.util

    path = Path(path)
    if path.suffix.lower() in GEOJSON_SUFFIXES and layer is None:
        return read_geojson(path)
    if importlib.util.find_spec("pyogrio") is None:
        raise InputError(needs(f"reading {path.suffix or path.name} files", "pyogrio", "geo"))
    import pyogrio.errors
    import pyogrio.raw
    import shapely

    try:
        meta, _, wkb, fields = pyogrio.raw.read(str(path), layer=layer)
    except (pyogrio.errors.DataSourceError, pyogrio.errors.DataLayerError) as exc:
        raise InputError(f"cannot read {path}: {exc}") from exc
    geoms = shapely.from_wkb(wkb)
    missing = np.flatnonzero(shapely.is_missing(geoms))
    if len(missing):
        raise InputError(f"{path}: feature {int(missing[0])} has no geometry; drop it or give it one")
    _check_coordinates(geoms, f"{path}: ")
    props, notes = _clean_properties(dict(zip(meta["fields"], fields)), len(geoms))
    crs = meta.get("crs")
    if crs is not None and importlib.util.find_spec("pyproj") is not None:
        import pyproj  # OGR may describe the CRS as WKT1, which pyproj turns into a code or PROJJSON

        crs = pyproj.CRS.from_user_input(crs)
    return GeoTable(geoms, props, crs, tuple(notes))


def from_geodataframe(frame: Any) -> GeoTable:
    """Features of a ``geopandas.GeoDataFrame``: its active geometry, numeric columns and CRS."""
    geoms = np.asarray(frame.geometry.values, dtype=object)
    columns = {str(c): frame[c].to_numpy() for c in frame.columns if c != frame.geometry.name}
    props, notes = _clean_properties(columns, len(geoms))
    return GeoTable(geoms, props, frame.crs, tuple(notes))


def ingest_vector(
    target: Any,
    source: Any,
    *,
    chunk_shape: Any,
    crs: Any = None,
    layer: str | int | None = None,
    repair: bool = False,
    overwrite: bool = False,
    storage_options: dict[str, Any] | None = None,
    **kwargs: Any,
) -> Dataset:
    """Write the features of a GeoJSON file, any OGR file (extra ``geo``) or a GeoDataFrame.

    ``crs`` overrides the file's CRS. A property ``object_id`` holding one distinct integer per
    feature (as :func:`export_geojson` writes it) gives the object ids; otherwise it is stored
    as ``object_id_``. Other keywords go to :func:`~zarr_vectors.write_geometries`.
    Errors about the features name the file.
    """
    positive_numbers(chunk_shape, "chunk_shape")  # options first, then the file
    if crs is not None:
        from zarr_vectors.geo import parse_crs

        crs = parse_crs(crs)
    from_frame = hasattr(source, "geometry") and hasattr(source, "columns")
    table = from_geodataframe(source) if from_frame else read_vector_file(source, layer=layer)
    properties, skipped = dict(table.properties), list(table.skipped)
    if OBJECT_ID_ATTRIBUTE in properties and "object_ids" not in kwargs:
        ids = _text_ids(properties.pop(OBJECT_ID_ATTRIBUTE))
        if ids.dtype.kind in "iu" and not np.ma.is_masked(ids) and len(np.unique(ids)) == len(ids):
            kwargs["object_ids"] = ids  # the features' ids, as export_geojson writes them
        else:
            key = OBJECT_ID_ATTRIBUTE + "_"
            while key in properties:
                key += "_"
            properties[key] = ids
            skipped.append(
                f"{OBJECT_ID_ATTRIBUTE!r} stored as {key!r} (not one distinct integer per feature)"
            )
    if skipped:
        warnings.warn(
            f"feature properties not stored as given: {', '.join(skipped)}",
            PropertiesSkippedWarning,
            stacklevel=2,
        )
    try:
        return write_geometries(
            target,
            table.geometries,
            chunk_shape=chunk_shape,
            crs=crs if crs is not None else table.crs or "EPSG:4326",
            object_attributes=properties,
            repair=repair,
            overwrite=overwrite,
            storage_options=storage_options,
            **kwargs,
        )
    except InputError as exc:
        if from_frame:
            raise
        raise InputError(f"{source}: {exc}") from exc


def _text_ids(ids: np.ndarray) -> np.ndarray:
    """Ids written as decimal text (uint64 ids above 2**63 - 1, which OGR formats cannot
    hold as integers) as uint64; any other column unchanged."""
    if ids.dtype.kind != "U" or not len(ids) or not all(v.isdigit() and len(v) <= 20 for v in ids.tolist()):
        return ids
    values = [int(v) for v in ids.tolist()]
    return np.array(values, np.uint64) if max(values) < 1 << 64 else ids


def _json_value(v: Any) -> Any:
    """A property value for JSON: NaN and absent sentinels become null, arrays lists."""
    if isinstance(v, np.ndarray):
        return [_json_value(x) for x in v.tolist()]
    if isinstance(v, (np.floating, float)):
        return None if math.isnan(float(v)) else float(v)
    if isinstance(v, np.integer):
        return int(v)
    return v


def _absent_to_none(values: np.ndarray) -> list[Any]:
    from zarr_vectors.format.zarr_json import absent_fill

    if values.dtype.kind == "U":
        return [None if x == "" else str(x) for x in values.tolist()]
    if values.dtype.kind == "M":  # ISO 8601, as GeoJSON carries dates
        return [None if np.isnat(x) else str(x) for x in values]
    if values.dtype.kind in "iu":
        sentinel = absent_fill(values.dtype)
        return [None if (np.ndim(x) == 0 and x == sentinel) else _json_value(x) for x in values]
    return [_json_value(x) for x in values]


def crs_member(result: Result) -> dict[str, Any] | None:
    """A GeoJSON 2008 ``crs`` member naming the store's CRS when it is not lon/lat WGS 84."""
    if result.origin is None:
        return None
    code = getattr(result.origin.dataset.crs, "code", None)
    if code is None or code in _LON_LAT:
        return None
    auth, num = code.split(":")
    return {"type": "name", "properties": {"name": f"urn:ogc:def:crs:{auth}::{num}"}}


def to_feature_collection(
    result: Result, *, clip: bool = False, object_attributes: bool = True
) -> dict[str, Any]:
    """A GeoJSON FeatureCollection dict of a result (see the module docstring)."""
    import shapely
    import shapely.geometry

    features: list[dict[str, Any]] = []
    if result.object_ids is None:
        attrs = {k: v for k, v in result.attributes.items()}
        for i, p in enumerate(result.positions.tolist()):
            props = {k: _json_value(v[i]) for k, v in attrs.items()}
            features.append(
                {"type": "Feature", "geometry": {"type": "Point", "coordinates": p}, "properties": props}
            )
    else:
        want = object_attributes and result.origin is not None
        out = result.to_shapely(clip=clip, object_attributes=True if want else None)
        ids, geoms = out[0], out[1]
        columns = {k: _absent_to_none(np.asarray(v)) for k, v in (out[2] if want else {}).items()}
        for j, (oid, g) in enumerate(zip(ids.tolist(), geoms)):
            props = {"object_id": oid, **{k: v[j] for k, v in columns.items()}}
            geometry = None if shapely.is_empty(g) else shapely.geometry.mapping(g)
            features.append({"type": "Feature", "id": oid, "geometry": geometry, "properties": props})
    doc: dict[str, Any] = {"type": "FeatureCollection", "features": features}
    member = crs_member(result)
    if member is not None:
        doc["crs"] = member
    return doc


def export_geojson(
    result: Result, path: str | Path, *, clip: bool = False, object_attributes: bool = True
) -> int:
    """Write ``result`` to ``path`` as a GeoJSON FeatureCollection; returns the feature count."""
    doc = to_feature_collection(result, clip=clip, object_attributes=object_attributes)
    with Path(path).open("w", encoding="utf-8") as fh:
        json.dump(doc, fh, allow_nan=False)
    return len(doc["features"])


def feature_text(features: list[dict[str, Any]], sep: str) -> str:
    """The features as JSON text, each as :func:`json.dump` writes it inside a document,
    joined by ``sep`` (``", "`` in a FeatureCollection, a newline in GeoJSON text sequences)."""
    return sep.join(json.dumps(f, allow_nan=False) for f in features)


def export_geojsonl(
    result: Result, path: str | Path, *, clip: bool = False, object_attributes: bool = True
) -> int:
    """Write ``result`` as newline-delimited GeoJSON (``.geojsonl``, GDAL's GeoJSONSeq): one
    feature per line, as :func:`export_geojson` makes them, without a CRS member (the
    format has none: readers assume longitude, latitude). Returns the feature count."""
    features = to_feature_collection(result, clip=clip, object_attributes=object_attributes)["features"]
    with Path(path).open("w", encoding="utf-8") as fh:
        fh.write(feature_text(features, "\n") + ("\n" if features else ""))
    return len(features)
