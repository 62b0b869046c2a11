"""The ``zarr.json`` of every array of a level, parsed: per-chunk cell arrays (:func:`parse_cell_array`,
:func:`parse_nonempty`) and non-spatial tables (:func:`parse_table`).

Each parser takes a document (the parsed JSON dict) and returns a frozen description
plus every :class:`~zarr_vectors.format.findings.Finding`; None instead of the
description when the document cannot be used at all. What an array is (``vertices``,
a vertex attribute, a links array, ...) follows from its path in the store
(:func:`array_kind`). The group documents of a level (links families, object index)
are parsed by :mod:`zarr_vectors.format.groups`.
"""

from __future__ import annotations

import functools
import math
import re
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from zarr_vectors.format.codecs import DRACO, geometry_codec
from zarr_vectors.format.findings import NONCONFORMING, Finding, Findings, short
from zarr_vectors.format.shards import inner_codecs

__all__ = [
    "CellArrayDoc",
    "TableDoc",
    "array_kind",
    "parse_cell_array",
    "parse_nonempty",
    "parse_table",
    "ZV_ARRAY",
    "VLEN_TYPES",
    "MAX_CELLS",
    "MAX_ROW_WIDTH",
]

#: Chunk coordinates, cell counts and linear cell indices must stay below this (int64-safe).
MAX_CELLS = 1 << 62
#: Largest element count of one row (``row_shape`` product) an attribute may declare.
MAX_ROW_WIDTH = 1 << 20
#: ``data_type`` values of a variable-length bytes array.
VLEN_TYPES = ("variable_length_bytes", "bytes")
#: The ``zv_array`` discriminator each kind of array carries (the other kinds carry none).
ZV_ARRAY = {
    "vertices": "vertices",
    "vertex_fragments": "vertex_fragments",
    "link_fragments": "link_fragments",
    "vertex_attribute": "attribute",
    "fragment_attribute": "fragment_attribute",
    "links": "links",
    "link_attribute": "link_attribute",
    "object_attribute": "object_attribute",
    "group_attribute": "groupings_attribute",
    "groups": "groups",
}
#: Kinds of per-chunk arrays and of tables.
CELL_KINDS = (
    "vertices",
    "vertex_fragments",
    "link_fragments",
    "vertex_attribute",
    "fragment_attribute",
    "links",
    "link_attribute",
)
TABLE_KINDS = ("manifests", "object_ids", "groups", "object_attribute", "group_attribute")
_DTYPE_KINDS = {"vertices": "iuf", "links": "iu", "vertex_attribute": "biuf", "fragment_attribute": "biuf"}
_ATTRIBUTE_KINDS = ("vertex_attribute", "fragment_attribute", "link_attribute")
_KEY = re.compile(r"^-?\d+(\.-?\d+)*$")
#: Entries of ``nonempty_chunks`` described one by one before the rest are summed up.
MAX_LISTED_FINDINGS = 20

_SINGLE = {
    "vertices": "vertices",
    "vertex_fragments": "vertex_fragments",
    "link_fragments": "link_fragments",
    "groups": "groups",
}
_NAMED = {
    "vertex_attributes": "vertex_attribute",
    "fragment_attributes": "fragment_attribute",
    "object_attributes": "object_attribute",
    "group_attributes": "group_attribute",
}


def array_kind(path: str) -> str | None:
    """What the array at ``path`` is by the format's layout (``"0/vertices"`` -> ``"vertices"``,
    ``"0/links/0/0.0.1"`` -> ``"links"``, ...); None for a path the layout does not name."""
    parts = path.split("/")
    n = len(parts)
    if n == 2:
        return _SINGLE.get(parts[1])
    if n == 3:
        if parts[1] == "object_index":
            return {"manifests": "manifests", "object_ids": "object_ids"}.get(parts[2])
        return _NAMED.get(parts[1])
    if n == 4 and parts[1] == "links":
        return "links"
    if n == 5 and parts[1] == "link_attributes":
        return "link_attribute"
    return None


def _is_int(value: Any) -> bool:
    return type(value) is int  # JSON integers; a bool is no integer here


_INT = {int}


def _ints(value: Any, what: str, minimum: int, path: str, code: str, out: Findings) -> tuple[int, ...] | None:
    """``value`` as a tuple of ints in ``[minimum, 2**62)`` (JSON booleans and floats refused)."""
    if type(value) is not list or not set(map(type, value)) <= _INT:
        out.add(path, code, f"{what} must be a list of integers, got {short(value)}")
        return None
    if value and (min(value) < minimum or max(value) >= MAX_CELLS):
        out.add(path, code, f"{what} must hold integers in [{minimum}, 2**62), got {short(value)}")
        return None
    return tuple(value)


@dataclass(frozen=True, eq=False)
class CellArrayDoc:
    """A per-chunk array: one ``variable_length_bytes`` element per chunk of the level's grid.

    ``shape`` is the grid in cells and ``origin`` its first absolute chunk; ``dtype`` and
    ``row_width`` (values per row) describe the rows of a cell where the kind has rows
    (None: the ``dtype`` attribute is absent or unusable). ``draco``: the codec list starts
    with the draco codec. ``parallel``: for a link attribute, the links array it mirrors.
    """

    path: str
    kind: str | None
    shape: tuple[int, ...]
    origin: tuple[int, ...]
    codecs: tuple[dict[str, Any], ...]
    attributes: dict[str, Any] = field(repr=False)
    dtype: np.dtype | None = None
    row_width: int = 1
    encoding: str | None = None
    draco: bool = False
    parallel: str = ""


def parse_cell_array(
    path: str, doc: Any, ndim: int | None = None
) -> tuple[CellArrayDoc | None, list[Finding]]:
    """Parse the ``zarr.json`` of the per-chunk array at ``path`` (``ndim``: the store's space
    axes, when known). ``nonempty_chunks`` is parsed apart, by :func:`parse_nonempty`."""
    out = Findings()
    attrs = _array_attributes(path, doc, out)
    if attrs is None:
        return None, out
    kind = array_kind(path)
    _discriminator(path, attrs, kind, out)
    shape = _grid_shape(path, doc, ndim, out)
    codecs = _codecs(path, doc, out)
    draco = geometry_codec(_cell_codecs(doc, codecs)) == DRACO
    if shape is not None:
        _cell_chunking(path, doc, len(shape), codecs, out)
    origin = None if shape is None else _origin(path, attrs, shape, out)
    dtype = _cell_dtype(path, attrs, kind, out)
    width = _row_width(path, attrs, out)
    encoding = _encoding(path, attrs, kind, draco, out)
    if kind in ("vertex_attribute", "fragment_attribute"):
        name = path.rsplit("/", 1)[1]
        if attrs.get("name", name) != name:
            out.add(
                path,
                "metadata.attribute",
                f"{path}: name is {short(attrs.get('name'))} but the array is {name!r}",
                NONCONFORMING,
            )
    if shape is None or origin is None:
        return None, out
    parts = path.split("/")
    parallel = f"{parts[0]}/links/{parts[3]}/{parts[4]}" if kind == "link_attribute" else ""
    parsed = CellArrayDoc(
        path, kind, shape, origin, codecs, attrs, dtype, width or 1, encoding, draco, parallel
    )
    return parsed, out


def _array_attributes(path: str, doc: Any, out: Findings) -> dict[str, Any] | None:
    """The attributes of an array document (None when it is not an array)."""
    node = doc.get("node_type") if isinstance(doc, dict) else None
    if node != "array":
        out.add(
            path, "structure.node-type", f"{path!r} should be an array but its zarr.json says {short(node)}"
        )
        return None
    attrs = doc.get("attributes")
    if attrs is None:
        return {}
    if not isinstance(attrs, dict):
        out.add(path, "metadata.array", f"array {path!r}: attributes must be an object")
        return {}
    return attrs


def _discriminator(path: str, attrs: dict[str, Any], kind: str | None, out: Findings) -> None:
    want = ZV_ARRAY.get(kind or "")
    if want is not None and attrs.get("zv_array") != want:
        out.add(
            path,
            "metadata.zv-array",
            f"{path}: zv_array is {short(attrs.get('zv_array'))}, expected {want!r}",
            NONCONFORMING,
        )


def _grid_shape(path: str, doc: dict[str, Any], ndim: int | None, out: Findings) -> tuple[int, ...] | None:
    shape = _ints(doc.get("shape"), f"array {path!r}: shape", 0, path, "metadata.array", out)
    if shape is None:
        return None
    if ndim is not None and len(shape) != ndim:
        out.add(
            path, "metadata.array", f"{path} has {len(shape)} dimensions but the store has {ndim} space axes"
        )
        return None
    if math.prod(shape) >= MAX_CELLS:
        out.add(
            path,
            "metadata.grid",
            f"array {path!r}: a grid of {list(shape)} cells is too large to index "
            "(more cells than int64 indexes can number)",
        )
        return None
    return shape


def _codecs(
    path: str, doc: dict[str, Any], out: Findings, code: str = "metadata.array"
) -> tuple[dict[str, Any], ...]:
    codecs = doc.get("codecs")
    if not isinstance(codecs, list) or not all(isinstance(c, dict) for c in codecs) or not codecs:
        out.add(path, code, f"array {path!r}: codecs must be a list of codec objects, got {short(codecs)}")
        return ()
    return tuple(codecs)


def _chunk_grid(
    path: str, doc: dict[str, Any], rank: int, out: Findings, code: str = "metadata.array"
) -> tuple[int, ...] | None:
    """The chunk shape of a regular chunk grid with ``rank`` dimensions."""
    grid = doc.get("chunk_grid")
    conf = grid.get("configuration") if isinstance(grid, dict) else None
    if not isinstance(conf, dict) or grid.get("name") != "regular":  # type: ignore[union-attr]
        out.add(
            path,
            code,
            f"array {path!r}: chunk_grid must be a regular grid with a configuration, got {short(grid)}",
        )
        return None
    chunks = _ints(conf.get("chunk_shape"), f"array {path!r}: chunk_shape", 1, path, code, out)
    if chunks is not None and len(chunks) != rank:
        out.add(
            path,
            code,
            f"array {path!r}: chunk_shape {list(chunks)} has {len(chunks)} dimensions, shape has {rank}",
        )
        return None
    return chunks


def _key_encoding(path: str, doc: dict[str, Any], out: Findings, code: str = "metadata.array") -> None:
    enc = doc.get("chunk_key_encoding")
    conf = (enc.get("configuration") or {}) if isinstance(enc, dict) else {}
    if not isinstance(enc, dict) or enc.get("name") != "default" or conf.get("separator", "/") != "/":
        out.add(
            path,
            code,
            f"array {path!r}: chunk_key_encoding is {short(enc)}; chunks live at c/i/j/k (default, '/')",
        )


def _cell_codecs(doc: dict[str, Any], codecs: tuple[dict[str, Any], ...]) -> tuple[dict[str, Any], ...]:
    """The codecs of one cell: those inside ``sharding_indexed`` when the array is sharded."""
    inner = inner_codecs(doc)
    if inner is doc.get("codecs") or not isinstance(inner, list):
        return codecs
    return tuple(c for c in inner if isinstance(c, dict))


def _cell_chunking(
    path: str, doc: dict[str, Any], rank: int, codecs: tuple[dict[str, Any], ...], out: Findings
) -> None:
    """One Zarr chunk (or, sharded, one inner chunk) per spatial chunk, cells at ``c/i/j/k``, vlen bytes."""
    if doc.get("data_type") not in VLEN_TYPES:
        out.add(
            path,
            "metadata.array",
            f"array {path!r}: data_type is {short(doc.get('data_type'))}; per-chunk arrays are "
            "variable_length_bytes",
            NONCONFORMING,
        )
    chunks: Any = _chunk_grid(path, doc, rank, out)
    sharded = bool(codecs) and codecs[0].get("name") == "sharding_indexed"
    if sharded:  # the outer chunks are shards; the inner chunks are the cells
        chunks = (codecs[0].get("configuration") or {}).get("chunk_shape")
    if (sharded or chunks is not None) and (
        not isinstance(chunks, (list, tuple)) or list(chunks) != [1] * rank
    ):
        out.add(
            path,
            "metadata.array",
            f"array {path!r}: chunks are {short(chunks)}; a per-chunk array has chunk_shape "
            f"{[1] * rank} (one Zarr chunk per spatial chunk)",
        )
    _key_encoding(path, doc, out)
    codecs = _cell_codecs(doc, codecs)
    body = codecs[1:] if geometry_codec(codecs) is not None else codecs
    if body and body[0].get("name") == "bytes":
        names = [c.get("name") for c in codecs]
        out.add(
            path, "metadata.array", f"array {path!r}: codec list {names} does not serialise with vlen-bytes"
        )


def _origin(
    path: str, attrs: dict[str, Any], shape: tuple[int, ...], out: Findings
) -> tuple[int, ...] | None:
    value = attrs.get("chunk_grid_origin")
    if value is None:
        return (0,) * len(shape)
    if not isinstance(value, list) or not all(_is_int(v) for v in value):
        out.add(
            path,
            "metadata.grid",
            f"array {path!r}: chunk_grid_origin must be a list of integers, got {short(value)}",
        )
        return None
    if len(value) != len(shape) or any(
        abs(v) >= MAX_CELLS or v + s > MAX_CELLS for v, s in zip(value, shape)
    ):
        out.add(
            path,
            "metadata.grid",
            f"array {path!r}: chunk_grid_origin must be {len(shape)} integers whose grid stays within "
            f"+-2**62, got {short(value)}",
        )
        return None
    return tuple(value)


def numeric_dtype(name: Any, kinds: str = "biuf") -> np.dtype | None:
    """``name`` as a little-endian numpy dtype of one of ``kinds``, or None."""
    if not isinstance(name, str):
        return None
    dtype = _dtype(name)
    if dtype is None or dtype.kind not in kinds or dtype.itemsize == 0:
        return None
    return dtype


@functools.lru_cache(maxsize=256)
def _dtype(name: str) -> np.dtype | None:
    """The little-endian dtype numpy names ``name`` (None when it names none)."""
    try:
        return np.dtype(name).newbyteorder("<")
    except (TypeError, ValueError):
        return None


def _cell_dtype(path: str, attrs: dict[str, Any], kind: str | None, out: Findings) -> np.dtype | None:
    """The ``dtype`` attribute: needed by vertices, links and attributes, parsed when present on others."""
    name = attrs.get("dtype")
    kinds = _DTYPE_KINDS.get(kind or "", "biuf")
    if name is None:
        if kind in _DTYPE_KINDS or kind == "link_attribute":
            what = "links array" if kind == "links" else "array"
            out.add(path, "metadata.dtype", f"{what} {path!r} has no dtype attribute")
        return None
    dtype = numeric_dtype(name, kinds)
    if dtype is not None:
        return dtype
    if not isinstance(name, str) or not _known_dtype(name):
        out.add(path, "metadata.dtype", f"array {path!r} has an unknown dtype {short(name)}")
    elif kind == "links":
        out.add(
            path, "metadata.dtype", f"links array {path!r} has dtype {short(name)}; link rows are integers"
        )
    else:
        out.add(
            path,
            "metadata.dtype",
            f"array {path!r} has dtype {short(name)}; cell data must be a numeric type",
        )
    return None


def _known_dtype(name: str) -> bool:
    return _dtype(name) is not None


def _row_width(path: str, attrs: dict[str, Any], out: Findings) -> int | None:
    """Values per row: the product of ``row_shape`` (1 when absent)."""
    shape = attrs.get("row_shape")
    if shape is None:
        return 1
    dims = _ints(shape, f"array {path!r}: row_shape", 1, path, "metadata.attribute", out)
    if dims is None:
        return None
    width = math.prod(dims)
    if width > MAX_ROW_WIDTH:
        out.add(
            path,
            "metadata.attribute",
            f"array {path!r}: row_shape {list(dims)} has {width} values per row (at most {MAX_ROW_WIDTH})",
        )
        return None
    return width


def _encoding(path: str, attrs: dict[str, Any], kind: str | None, draco: bool, out: Findings) -> str | None:
    """The ``encoding`` of vertices (raw or draco, matching the codec list) and fragment indices."""
    code = "metadata.encoding"
    enc = attrs.get("encoding")
    if kind == "vertices":
        enc = "raw" if enc is None else enc
        if enc not in ("raw", "draco"):
            out.add(
                path, code, f"{path} has encoding {short(enc)}, which this library cannot read (raw or draco)"
            )
        elif enc == "draco" and not draco:
            out.add(
                path,
                code,
                f"{path} has encoding 'draco' but its codec list does not start with the draco codec "
                "(a Draco blob stored as plain vlen bytes); this library reads Draco cells through the codec",
            )
        elif draco and enc != "draco":
            out.add(
                path,
                code,
                f"{path}: the codec list starts with the draco codec but encoding is not 'draco'",
                NONCONFORMING,
            )
    elif kind in ("vertex_fragments", "link_fragments") and enc != "fragment_index_v1":
        out.add(path, code, f"{path}: encoding is {short(enc)}; fragment indices are 'fragment_index_v1'")
    return enc if isinstance(enc, str) else None


# ------------------------------------------------------------------ nonempty_chunks


def parse_nonempty(
    path: str, value: Any, shape: tuple[int, ...], origin: tuple[int, ...]
) -> tuple[np.ndarray | None, list[Finding]]:
    """The absolute chunks (M, D) that ``nonempty_chunks`` lists, each inside the grid of
    ``shape`` cells from ``origin`` and listed once. Entries that are not are findings and are
    left out; None when the attribute is missing or not a list."""
    out = Findings()
    nd = len(shape)
    code = "metadata.grid"
    if value is None:
        out.add(
            path, code, f"array {path!r} has no nonempty_chunks attribute; it must list the occupied chunks"
        )
        return None, out
    if not isinstance(value, list):
        out.add(path, code, f"array {path!r}: nonempty_chunks must be a list of strings like '1.0.2'")
        return None, out
    if not value:
        return np.zeros((0, nd), np.int64), out
    chunks = _fast_keys(value, nd)
    keys = value
    if chunks is None:
        chunks, keys = _slow_keys(path, value, nd, out)
    cell = chunks - np.asarray(origin, np.int64)
    dims = np.asarray(shape, np.int64)
    inside = len(cell) == 0 or (cell.min() >= 0 and bool(np.all(cell.max(axis=0) < dims)))
    if not inside:
        outside = np.any((cell < 0) | (cell >= dims), axis=1)
        for i in np.flatnonzero(outside)[:MAX_LISTED_FINDINGS].tolist():
            out.add(
                path,
                code,
                f"array {path!r}: nonempty_chunks entry {short(keys[i])} lies outside its grid of "
                f"{list(shape)} cells from origin {list(origin)}",
            )
        _summary(path, int(outside.sum()), "entries outside the grid", out)
        chunks, cell = chunks[~outside], cell[~outside]
    lin = np.sort(_linear(cell, shape))
    if len(lin) > 1 and np.any(lin[1:] == lin[:-1]):
        chunks = _once(path, chunks, _linear(cell, shape), out)
    return chunks, out


def _once(path: str, chunks: np.ndarray, lin: np.ndarray, out: Findings) -> np.ndarray:
    """``chunks`` without repeats, each repeat a finding."""
    order = np.argsort(lin, kind="stable")
    twice = np.zeros(len(lin), bool)
    twice[order[1:]] = lin[order[1:]] == lin[order[:-1]]
    for i in np.flatnonzero(twice)[:MAX_LISTED_FINDINGS].tolist():
        key = ".".join(map(str, chunks[i].tolist()))
        out.add(
            path,
            "metadata.grid",
            f"array {path!r}: nonempty_chunks lists chunk {key} twice; each chunk may be listed once",
        )
    _summary(path, int(twice.sum()), "repeated entries", out)
    return chunks[~twice]


def _summary(path: str, n: int, what: str, out: Findings) -> None:
    if n > MAX_LISTED_FINDINGS:
        out.add(
            path,
            "metadata.grid",
            f"array {path!r}: nonempty_chunks has {n - MAX_LISTED_FINDINGS} more {what}",
        )


def _linear(cell: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Row-major linear index of each cell (K, D) of a grid of ``shape`` cells."""
    strides = [math.prod(shape[i + 1 :]) for i in range(len(shape))]
    return cell @ np.asarray(strides, np.int64)


#: Bytes a key list joined by '|' may hold: digits, '-', '.' and '|'.
_KEY_BYTES = np.zeros(256, bool)
_KEY_BYTES[[*b"0123456789-.|"]] = True


def _fast_keys(keys: list[Any], nd: int) -> np.ndarray | None:
    """Every key parsed in one vectorised pass; None when any is not ``nd`` integers joined by '.'.

    The text may hold only digits, '-' and separators, its separators must run ``nd - 1`` dots
    then a '|' (so each key has ``nd`` parts), and it must parse to ``nd`` integers per key (so
    no part is empty)."""
    try:
        text = "|".join(keys)
    except TypeError:
        return None
    raw = np.frombuffer(text.encode(), np.uint8)
    if not len(raw) or not _KEY_BYTES[raw].all() or text.count("|") != len(keys) - 1:
        return None
    seps = raw[(raw == ord(".")) | (raw == ord("|"))]
    if len(seps) != nd * len(keys) - 1 or not np.all(seps[nd - 1 :: nd] == ord("|")):
        return None  # the K - 1 pipes are not every nd-th separator
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # numpy warns when text stops parsing early
        try:
            flat = np.fromstring(text.replace(".", " ").replace("|", " "), dtype=np.int64, sep=" ")
        except ValueError:  # numpy >= 2.? raises where older ones warned
            return None
    if len(flat) != nd * len(keys) or np.any(np.abs(flat) >= MAX_CELLS):
        return None
    return flat.reshape(-1, nd)


def _slow_keys(path: str, keys: list[Any], nd: int, out: Findings) -> tuple[np.ndarray, list[Any]]:
    """Keys parsed one by one, each bad one a finding; the good ones and their keys."""
    good: list[tuple[int, ...]] = []
    kept: list[Any] = []
    bad = 0
    for k in keys:
        c = tuple(int(p) for p in k.split(".")) if isinstance(k, str) and _KEY.match(k) else ()
        if len(c) != nd or any(abs(v) >= MAX_CELLS for v in c):
            bad += 1
            if bad <= MAX_LISTED_FINDINGS:
                out.add(
                    path,
                    "metadata.grid",
                    f"array {path!r}: nonempty_chunks entry {short(k)} is not {nd} integers joined by '.', "
                    f"like {'.'.join(['0'] * nd)!r}",
                )
            continue
        good.append(c)
        kept.append(k)
    _summary(path, bad, "malformed entries", out)
    return np.asarray(good, np.int64).reshape(-1, nd), kept


# ------------------------------------------------------------------ tables


@dataclass(frozen=True, eq=False)
class TableDoc:
    """A non-spatial array indexed by object or group: vlen (``manifests``, ``groups``), dense
    numeric (``(B,)`` or ``(B, C)``: object ids, object and group attributes) or ``string``.

    ``dtype`` is the numeric element type of a dense table (None otherwise); ``group_ranges``
    the ``groups`` table's ``group_ranges`` (empty when absent or malformed).
    """

    path: str
    kind: str | None
    shape: tuple[int, ...]
    chunk_shape: tuple[int, ...]
    data_type: str
    codecs: tuple[dict[str, Any], ...]
    attributes: dict[str, Any] = field(repr=False)
    fill_value: Any = None
    dtype: np.dtype | None = None
    group_ranges: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def vlen(self) -> bool:
        return self.data_type in VLEN_TYPES


def parse_table(path: str, doc: Any) -> tuple[TableDoc | None, list[Finding]]:
    """Parse the ``zarr.json`` of the table at ``path`` (its kind follows from the path)."""
    out = Findings()
    attrs = _array_attributes(path, doc, out)
    if attrs is None:
        return None, out
    kind = array_kind(path)
    code = "metadata.object-index" if kind in ("manifests", "object_ids") else "metadata.tables"
    _discriminator(path, attrs, kind, out)
    data_type = doc.get("data_type")
    vlen = data_type in VLEN_TYPES
    if kind in ("manifests", "groups") and not vlen:
        out.add(path, code, f"table {path!r}: data_type {short(data_type)} is not variable-length bytes")
    dtype = None
    if not vlen and data_type != "string":
        dtype = numeric_dtype(data_type, "iu" if kind == "object_ids" else "biuf")
        if dtype is None:
            need = "an integer type" if kind == "object_ids" else "a numeric type (or 'string')"
            out.add(path, code, f"table {path!r}: data_type {short(data_type)} is not {need}")
    elif vlen and kind in ("object_ids", "object_attribute", "group_attribute"):
        out.add(
            path, code, f"table {path!r}: data_type {short(data_type)} is variable-length bytes, not values"
        )
    shape = _ints(doc.get("shape"), f"array {path!r}: shape", 0, path, code, out)
    ranks = (1,) if vlen or data_type == "string" or kind == "object_ids" else (1, 2)
    if shape is not None and len(shape) not in ranks:
        out.add(
            path,
            code,
            f"table {path!r} must be {' or '.join(f'{r}-D' for r in ranks)}, got shape {list(shape)}",
        )
        shape = None
    chunks = None if shape is None else _chunk_grid(path, doc, len(shape), out, code)
    if shape is not None and chunks is not None and len(shape) == 2 and chunks[1] != shape[1]:
        out.add(path, code, f"table {path!r}: chunk_shape {list(chunks)} must span the {shape[1]} columns")
        chunks = None
    codecs = _codecs(path, doc, out, code)
    _key_encoding(path, doc, out, code)
    _table_attributes(path, attrs, kind, data_type, shape, out)
    ranges = _group_ranges(path, attrs, out) if kind == "groups" else {}
    if shape is None or chunks is None or not isinstance(data_type, str):
        return None, out
    parsed = TableDoc(
        path, kind, shape, chunks, data_type, codecs, attrs, doc.get("fill_value"), dtype, ranges
    )
    return parsed, out


def _table_attributes(
    path: str,
    attrs: dict[str, Any],
    kind: str | None,
    data_type: Any,
    shape: tuple[int, ...] | None,
    out: Findings,
) -> None:
    """Names and ``dtype`` of attribute tables; ``num_groups`` of the groups table."""
    if kind in ("object_attribute", "group_attribute"):
        name = path.rsplit("/", 1)[1]
        if attrs.get("name", name) != name:
            out.add(
                path,
                "metadata.tables",
                f"{path}: name is {short(attrs.get('name'))} but the array is {name!r}",
                NONCONFORMING,
            )
        if "dtype" in attrs and attrs["dtype"] != data_type:
            out.add(
                path,
                "metadata.tables",
                f"{path}: dtype attribute {short(attrs['dtype'])} differs from data_type {short(data_type)}",
                NONCONFORMING,
            )
    if kind == "groups":
        n = attrs.get("num_groups")
        if n is not None and (not _is_int(n) or not 0 <= n < MAX_CELLS):
            out.add(
                path, "metadata.tables", f"{path}: num_groups must be a non-negative integer, got {short(n)}"
            )
        elif n is not None and shape is not None and n != shape[0]:
            out.add(path, "metadata.tables", f"{path} has {shape[0]} rows but num_groups is {n}")


def _group_ranges(path: str, attrs: dict[str, Any], out: Findings) -> dict[str, Any]:
    ranges = attrs.get("group_ranges", {})
    ok = isinstance(ranges, dict) and all(
        isinstance(v, list) and len(v) == 2 and all(_is_int(x) for x in v) and 0 <= v[0] <= v[1]
        for v in ranges.values()
    )
    if not ok:
        out.add(
            path,
            "metadata.tables",
            f"{path}: group_ranges must map group ids to [start, stop], got {short(ranges)}",
            NONCONFORMING,
        )
        return {}
    return ranges
