"""Zarr v3 ``zarr.json`` documents for the nodes of a Zarr Vectors store.

Pure builders and parsers: dicts in, dicts out. The documents match what
zarr-python 3.1+ writes for the same arrays, so zarr-python opens every node.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np

from zarr_vectors.errors import FormatError, InputError

__all__ = [
    "group_doc",
    "vlen_array_doc",
    "dense_array_doc",
    "fill_value_json",
    "check_zarr_v3",
    "load_json",
    "absent_fill",
    "MAX_JSON_DEPTH",
]

#: Deepest nesting of arrays and objects a ``zarr.json`` may have (real ones nest about 8 deep).
MAX_JSON_DEPTH = 64

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
    shape: tuple[int, ...],
    chunks: tuple[int, ...],
    compressors: list[dict[str, Any]],
    attributes: dict[str, Any],
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
    raise InputError(
        f"no absent sentinel for dtype {dtype}: object and group attributes are numbers, bools or strings"
    )


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


def _depth(raw: bytes) -> int:
    """Deepest bracket nesting of a JSON text (brackets inside strings do not count), in a
    few vectorised passes (no recursion, no per-byte Python loop)."""
    if raw.count(b"[") + raw.count(b"{") <= MAX_JSON_DEPTH:
        return 0  # too few brackets to nest deeper than the limit
    text = np.frombuffer(raw, np.uint8)
    quotes = np.flatnonzero(text == ord('"'))
    slashes = np.flatnonzero(text == ord("\\"))
    if len(slashes) and len(quotes):
        # A quote is escaped when an odd run of backslashes ends right before it.
        run_start = slashes[np.r_[True, np.diff(slashes) != 1]]
        before = quotes - 1
        at = np.searchsorted(slashes, before)
        hit = (at < len(slashes)) & (slashes[np.minimum(at, len(slashes) - 1)] == before)
        first = run_start[np.searchsorted(run_start, before, side="right") - 1]
        quotes = quotes[~hit | ((before - first + 1) % 2 == 0)]
    opening = np.flatnonzero((text == ord("[")) | (text == ord("{")))
    closing = np.flatnonzero((text == ord("]")) | (text == ord("}")))
    opening = opening[np.searchsorted(quotes, opening) % 2 == 0]
    closing = closing[np.searchsorted(quotes, closing) % 2 == 0]
    order = np.argsort(np.concatenate([opening, closing]), kind="stable")
    steps = np.concatenate([np.ones(len(opening), np.int64), -np.ones(len(closing), np.int64)])[order]
    return int(np.cumsum(steps).max()) if len(steps) else 0


def load_json(raw: bytes, where: str) -> Any:
    """Parse the bytes of a ``zarr.json``; every way they can be unreadable (not UTF-8, not
    JSON, nested deeper than :data:`MAX_JSON_DEPTH`, an integer too long to convert) is a
    FormatError naming ``where``."""
    if _depth(bytes(raw)) > MAX_JSON_DEPTH:
        raise FormatError(f"{where}: zarr.json nests deeper than {MAX_JSON_DEPTH} levels")
    try:
        return json.loads(raw)
    except UnicodeDecodeError as exc:
        raise FormatError(f"{where}: zarr.json is not UTF-8 text (byte {exc.start}: {exc.reason})") from exc
    except json.JSONDecodeError as exc:
        raise FormatError(f"{where}: zarr.json is not valid JSON ({exc})") from exc
    except (ValueError, RecursionError) as exc:
        raise FormatError(f"{where}: zarr.json cannot be read ({exc})") from exc


def check_zarr_v3(doc: Any, where: str) -> dict[str, Any]:
    """Return a parsed ``zarr.json`` document after checking it is Zarr v3."""
    if not isinstance(doc, dict):
        raise FormatError(f"{where}: zarr.json is not a JSON object")
    if not isinstance(doc.get("attributes", {}), (dict, type(None))):
        raise FormatError(f"{where}: zarr.json attributes must be a JSON object")
    if doc.get("zarr_format") != 3:
        raise FormatError(f"{where}: zarr.json has zarr_format={doc.get('zarr_format')!r}, expected 3")
    if doc.get("node_type") not in ("group", "array"):
        raise FormatError(f"{where}: zarr.json has node_type={doc.get('node_type')!r}")
    return doc
