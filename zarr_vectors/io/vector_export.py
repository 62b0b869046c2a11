"""GIS vector files out: GeoPackage, Shapefile, FlatGeobuf and GeoParquet (the ``geo`` extra).

A result is written as :meth:`~zarr_vectors.Result.to_geodataframe` makes it: one feature
per object (``object_id``, the object attributes, the geometry) or one Point per vertex, in
the store's CRS. Formats without unsigned 64-bit integers (every OGR format) get uint64
columns as int64 when every value fits, else as decimal text, with a warning: a segment id
is never rounded. :func:`zarr_vectors.io.geojson.ingest_vector` reads the files back,
``object_id`` included.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np

from zarr_vectors.errors import InputError
from zarr_vectors.result import Result

__all__ = ["VECTOR_FORMATS", "TextIdsWarning", "export_vector"]

#: Extension -> OGR driver (None: GeoParquet, written by geopandas through pyarrow).
VECTOR_FORMATS: dict[str, str | None] = {
    ".gpkg": "GPKG",
    ".shp": "ESRI Shapefile",
    ".fgb": "FlatGeobuf",
    ".parquet": None,
    ".geoparquet": None,
}


class TextIdsWarning(UserWarning):
    """A uint64 column held values above 2**63 - 1 and was written as decimal text."""


def _signed_columns(frame: Any, suffix: str) -> Any:
    for name in frame.columns:
        col = frame[name]
        if getattr(col, "dtype", None) != np.uint64:
            continue
        values = col.to_numpy()
        if not len(values) or int(values.max()) <= np.iinfo(np.int64).max:
            frame[name] = values.astype(np.int64)
        else:
            frame[name] = [str(v) for v in values.tolist()]
            warnings.warn(
                f"column {name!r} holds ids above 2**63 - 1, which {suffix} files cannot store as integers; "
                "written as decimal text",
                TextIdsWarning,
                stacklevel=3,
            )
    return frame


def export_vector(result: Result, path: str | Path, *, clip: bool = False, layer: str | None = None) -> str:
    """Write ``result`` to a GIS vector file chosen by ``path``'s extension (see
    :data:`VECTOR_FORMATS`); ``clip`` cuts objects to the query's region, ``layer`` names the
    layer (GeoPackage). Returns the extension."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in VECTOR_FORMATS:
        raise InputError(
            f"cannot write {str(path)!r} as a vector file; use one of {', '.join(VECTOR_FORMATS)}"
        )
    frame = result.to_geodataframe(clip=clip)
    driver = VECTOR_FORMATS[suffix]
    if driver is None:
        frame.to_parquet(path)
        return suffix
    frame = _signed_columns(frame, suffix)
    if driver == "ESRI Shapefile":
        kinds = sorted({t.replace("Multi", "") for t in frame.geom_type.dropna().unique()})
        if len(kinds) > 1:
            raise InputError(
                f"a Shapefile holds one kind of geometry; this result has {', '.join(kinds)}: write .gpkg or "
                ".fgb instead, or select one kind first"
            )
    options: dict[str, Any] = {"driver": driver, "engine": "pyogrio"}
    if layer is not None:
        options["layer"] = layer
    frame.to_file(path, **options)
    return suffix
