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

from zarr_vectors.errors import InputError, TextIdsWarning
from zarr_vectors.result import Result

__all__ = [
    "VECTOR_FORMATS",
    "APPEND_FORMATS",
    "TextIdsWarning",
    "VectorAppender",
    "export_vector",
    "text_columns",
]

#: Extension -> OGR driver (None: GeoParquet, written by geopandas through pyarrow).
VECTOR_FORMATS: dict[str, str | None] = {
    ".gpkg": "GPKG",
    ".shp": "ESRI Shapefile",
    ".fgb": "FlatGeobuf",
    ".parquet": None,
    ".geoparquet": None,
}


def _signed_columns(frame: Any, suffix: str, text: set[str] | None = None) -> Any:
    """uint64 columns as int64, or as decimal text when a value needs it (``text``: the
    columns to write as text, decided beforehand, so that every batch agrees)."""
    for name in frame.columns:
        col = frame[name]
        if getattr(col, "dtype", None) != np.uint64:
            continue
        values = col.to_numpy()
        big = bool(len(values)) and int(values.max()) > np.iinfo(np.int64).max
        if (name not in text) if text is not None else not big:
            frame[name] = values.astype(np.int64)
            continue
        frame[name] = [str(v) for v in values.tolist()]
        if text is None:
            _warn_text(name, suffix, 4)
    return frame


def _warn_text(name: str, suffix: str, stacklevel: int) -> None:
    warnings.warn(
        f"column {name!r} holds ids above 2**63 - 1, which {suffix} files cannot store as integers; "
        "written as decimal text",
        TextIdsWarning,
        stacklevel=stacklevel,
    )


#: Extensions :class:`VectorAppender` writes a batch at a time (OGR's append).
APPEND_FORMATS = (".gpkg", ".fgb")


class VectorAppender:
    """A GeoPackage or FlatGeobuf layer written batch by batch (pyogrio's append mode).

    The layer's geometry type is declared generic (``Unknown``: any geometry), since the
    first batch cannot tell what the later ones hold; ``text`` names the uint64 columns to
    write as decimal text (see :func:`text_columns`), so every batch writes them alike.
    """

    def __init__(self, path: Path, suffix: str, layer: str, text: set[str]) -> None:
        if suffix not in APPEND_FORMATS:
            raise InputError(f"{suffix} files are written whole; batches go to {', '.join(APPEND_FORMATS)}")
        self.path, self.suffix, self.layer, self.text = path, suffix, layer, text
        self.started = False
        for name in sorted(text):
            _warn_text(name, suffix, 3)

    def write(self, result: Result) -> None:
        frame = result.to_geodataframe()
        if self.started and not len(frame):
            return
        frame = _signed_columns(frame, self.suffix, self.text)
        frame.to_file(
            self.path,
            driver=VECTOR_FORMATS[self.suffix],
            engine="pyogrio",
            layer=self.layer,
            mode="a" if self.started else "w",
            geometry_type="Unknown",
        )
        self.started = True

    def close(self, empty: Result) -> None:
        if not self.started:
            self.write(empty)


def text_columns(ds: Any, ids: np.ndarray, level: int = 0) -> set[str]:
    """The columns of ``ds.objects(ids).to_geodataframe()`` that hold uint64 values above
    2**63 - 1 (``object_id`` and uint64 object attributes, one value per object): those an
    OGR file gets as decimal text."""
    top = np.iinfo(np.int64).max
    out = set()
    if ids.dtype == np.uint64 and len(ids) and int(ids.max()) > top:
        out.add("object_id")
    for name in ds.object_attribute_names(level):
        values = np.asarray(ds.object_attributes(name, ids, level=level))
        if values.dtype == np.uint64 and values.size and int(values.max()) > top:
            width = int(np.prod(values.shape[1:]))
            out |= {name} if values.ndim == 1 else {f"{name}_{c}" for c in range(width)}
    return out


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
