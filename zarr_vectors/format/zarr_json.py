"""Zarr v3 ``zarr.json`` documents for the nodes of a Zarr Vectors store.

Pure builders and parsers: dicts in, dicts out. The documents match what
zarr-python 3.1+ writes for the same arrays, so zarr-python opens every node.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..errors import FormatError

__all__ = [
    "group_doc",
    "vlen_array_doc",
    "dense_array_doc",
    "fill_value_json",
    "check_zarr_v3",
    "absent_fill",
]

VLEN_BYTES = "variable_length_bytes"


def group_doc(attributes: dict[str, Any]) -> dict[str, Any]:
    return {"zarr_format": 3, "node_type": "group", "attributes": attributes}


def _array_doc(
    shape: tuple[int, ...],
    chunks: tuple[int, ...],
    data_type: str,
    fill_value: Any,
    codecs: list[dict[str, Any]],
    attributes: dict[str, Any],
) -> dict[str, Any]:
    return {
        "shape": [int(s) for s in shape],
        "data_type": data_type,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [int(c) for c in chunks]}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": fill_value,
        "codecs": codecs,
        "attributes": attributes,
        "zarr_format": 3,
        "node_type": "array",
        "storage_transformers": [],
    }


def vlen_array_doc(
    shape: tuple[int, ...],
    chunks: tuple[int, ...],
    compressors: list[dict[str, Any]],
    attributes: dict[str, Any],
    array_codecs: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A ``variable_length_bytes`` array: one vlen-bytes element per chunk here.

    ``array_codecs`` (e.g. ``draco``) come before the vlen-bytes serialiser.
    """
    codecs = [*(array_codecs or []), {"name": "vlen-bytes", "configuration": {}}, *compressors]
    return _array_doc(shape, chunks, VLEN_BYTES, "", codecs, attributes)


def string_array_doc(
    shape: tuple[int, ...], chunks: tuple[int, ...], compressors: list[dict[str, Any]], attributes: dict[str, Any]
) -> dict[str, Any]:
    """A 1-D ``string`` array (UTF-8 through the ``vlen-utf8`` serialiser), fill ``""``."""
    codecs = [{"name": "vlen-utf8", "configuration": {}}, *compressors]
    return _array_doc(shape, chunks, "string", "", codecs, attributes)


def fill_value_json(dtype: np.dtype, value: Any) -> Any:
    """JSON form of a numeric fill value as Zarr v3 writes it (``"NaN"`` for NaN)."""
    if dtype.kind == "f":
        v = float(value)
        if math.isnan(v):
            return "NaN"
        if math.isinf(v):
            return "Infinity" if v > 0 else "-Infinity"
        return v
    if dtype.kind == "b":
        return bool(value)
    return int(value)


def absent_fill(dtype: np.dtype) -> Any:
    """The in-band 'absent' sentinel of an object or group attribute of this dtype."""
    if dtype.kind == "f":
        return np.nan
    if dtype.kind == "i":
        return np.iinfo(dtype).min
    if dtype.kind == "u":
        return np.iinfo(dtype).max
    if dtype.kind == "b":
        return False
    if dtype.kind == "U":
        return ""
    raise ValueError(f"no absent sentinel for dtype {dtype}")


def dense_array_doc(
    shape: tuple[int, ...],
    chunks: tuple[int, ...],
    dtype: np.dtype,
    fill_value: Any,
    compressors: list[dict[str, Any]],
    attributes: dict[str, Any],
) -> dict[str, Any]:
    """A numeric array stored with the little-endian ``bytes`` codec."""
    dtype = np.dtype(dtype)
    codecs = [{"name": "bytes", "configuration": {"endian": "little"}}, *compressors]
    if dtype.itemsize == 1:
        codecs[0] = {"name": "bytes", "configuration": {}}
    return _array_doc(shape, chunks, dtype.name, fill_value_json(dtype, fill_value), codecs, attributes)


def check_zarr_v3(doc: Any, where: str) -> dict[str, Any]:
    """Return a parsed ``zarr.json`` document after checking it is Zarr v3."""
    if not isinstance(doc, dict):
        raise FormatError(f"{where}: zarr.json is not a JSON object")
    if doc.get("zarr_format") != 3:
        raise FormatError(f"{where}: zarr.json has zarr_format={doc.get('zarr_format')!r}, expected 3")
    if doc.get("node_type") not in ("group", "array"):
        raise FormatError(f"{where}: zarr.json has node_type={doc.get('node_type')!r}")
    return doc
