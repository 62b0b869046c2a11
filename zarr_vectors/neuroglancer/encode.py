"""Neuroglancer precomputed encodings: bytes and JSON dicts from numpy arrays, no I/O.

Written from the precomputed format's specification (annotations, skeletons, legacy meshes,
segment properties). Every binary value is little-endian. Invariants:

* an annotation list is ``uint64 count``, then each annotation's geometry (float32) and
  properties (32-bit, then 16-bit, then 8-bit values, padded to 4 bytes), then the
  ``count`` uint64 ids;
* a single annotation (``by_id``) is the same record followed, per relationship, by a
  uint32 count and that many uint64 ids;
* a skeleton is ``uint32 nv, uint32 ne``, float32 (nv, 3) positions, uint32 (ne, 2) edges,
  then each vertex attribute's (nv, components) values;
* a legacy mesh fragment is ``uint32 nv``, float32 (nv, 3) positions, uint32 (nf, 3) faces.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from zarr_vectors.errors import InputError

__all__ = [
    "AnnotationLayout",
    "Property",
    "annotation_info",
    "encode_annotations",
    "encode_one_annotation",
    "encode_skeleton",
    "encode_mesh_fragment",
    "ng_dtype",
    "property_id",
    "segment_properties_info",
    "shuffle_order",
    "pack_ids",
    "unpack_ids",
]

#: Annotation property and skeleton attribute types, with their numpy dtypes.
NG_TYPES = {
    "float32": "<f4",
    "uint32": "<u4",
    "int32": "<i4",
    "uint16": "<u2",
    "int16": "<i2",
    "uint8": "u1",
    "int8": "i1",
}
_SIZE_ORDER = {4: 0, 2: 1, 1: 2}  # the order groups appear in a record

# Annotation ids: 8 bits of store level, 32 bits of the cell's linear index, 24 bits of row.
LEVEL_BITS, CELL_BITS, ROW_BITS = 8, 32, 24


def ng_dtype(dtype: np.dtype) -> str:
    """The Neuroglancer numeric type that holds ``dtype``: itself when it is one, else float32
    (float64, int64 and uint64 become float32: exact to 2**24)."""
    name = np.dtype(dtype).name
    return name if name in NG_TYPES else "float32"


def property_id(name: str, taken: set[str]) -> str:
    """An annotation property id matching ``^[a-z][a-zA-Z0-9_]*$`` made from ``name``, unique in ``taken``."""
    text = re.sub(r"[^a-zA-Z0-9_]", "_", name)
    text = text[:1].lower() + text[1:]
    if not text or not text[0].islower():
        text = "a_" + text
    out, k = text, 1
    while out in taken:
        out, k = f"{text}_{k}", k + 1
    taken.add(out)
    return out


@dataclass(frozen=True)
class Property:
    """One annotation property: its id, Neuroglancer type and the store attribute it shows."""

    id: str
    type: str
    source: str


@dataclass(frozen=True)
class AnnotationLayout:
    """What an annotation record holds: ``rank`` coordinates per point, ``points`` points per
    annotation (1 for POINT, 2 for LINE), the properties in record order, and relationships."""

    rank: int
    points: int
    properties: tuple[Property, ...]
    relationships: tuple[str, ...]

    @property
    def record_dtype(self) -> np.dtype:
        """The structured dtype of one record (geometry, properties in record order, padding)."""
        fields: list[tuple[str, Any, Any]] = [("geometry", "<f4", (self.points * self.rank,))]
        size = 4 * self.points * self.rank
        for p in self.ordered:
            fields.append((p.id, NG_TYPES[p.type], ()))
            size += np.dtype(NG_TYPES[p.type]).itemsize
        if size % 4:
            fields.append(("_pad", "u1", (4 - size % 4,)))
        return np.dtype([(n, t, s) for n, t, s in fields])

    @property
    def ordered(self) -> tuple[Property, ...]:
        """Properties in record order: 4-byte types, then 2-byte, then 1-byte (stable)."""
        return tuple(sorted(self.properties, key=lambda p: _SIZE_ORDER[np.dtype(NG_TYPES[p.type]).itemsize]))


def _records(layout: AnnotationLayout, geometry: np.ndarray, props: dict[str, np.ndarray]) -> np.ndarray:
    """The records as one array whose bytes are the encoding (4-byte fields: a word array)."""
    n = len(geometry)
    w = layout.points * layout.rank
    if all(np.dtype(NG_TYPES[p.type]).itemsize == 4 for p in layout.properties):
        words = np.empty((n, w + len(layout.properties)), "<u4")
        words[:, :w] = np.ascontiguousarray(np.asarray(geometry, "<f4").reshape(n, w)).view("<u4")
        for j, p in enumerate(layout.ordered, start=w):
            column = np.ascontiguousarray(np.asarray(props[p.id]).reshape(n).astype(NG_TYPES[p.type]))
            words[:, j] = column.view("<u4")
        return words
    rec = np.zeros(n, layout.record_dtype)
    rec["geometry"] = np.asarray(geometry, np.float64).reshape(n, layout.points * layout.rank)
    for p in layout.properties:
        rec[p.id] = np.asarray(props[p.id]).reshape(n)
    return rec


def encode_annotations(
    layout: AnnotationLayout, geometry: np.ndarray, props: dict[str, np.ndarray], ids: np.ndarray
) -> bytes:
    """The multiple-annotation encoding (spatial-index cells and related-id lists)."""
    n = len(ids)
    if len(geometry) != n:
        raise InputError(f"{len(geometry)} geometries for {n} annotation ids")
    head = np.array([n], "<u8").tobytes()
    return head + _records(layout, geometry, props).tobytes() + np.asarray(ids).astype("<u8").tobytes()


def encode_one_annotation(
    layout: AnnotationLayout,
    geometry: np.ndarray,
    props: dict[str, np.ndarray],
    related: list[np.ndarray],
) -> bytes:
    """The single-annotation encoding (``by_id``): one record, then each relationship's ids."""
    out = [_records(layout, np.asarray(geometry)[None], {k: np.asarray(v)[None] for k, v in props.items()})]
    parts = [out[0].tobytes()]
    for ids in related:
        ids = np.asarray(ids).reshape(-1)
        parts.append(np.array([len(ids)], "<u4").tobytes() + ids.astype("<u8").tobytes())
    return b"".join(parts)


def encode_single_annotations(
    layout: AnnotationLayout,
    geometry: np.ndarray,
    props: dict[str, np.ndarray],
    related: np.ndarray | None,
) -> list[bytes]:
    """The single-annotation encoding of every row at once (the ``by_id`` bodies of many
    annotations): each row's record, then, when ``related`` is given (one relationship, one
    id per row), a count of 1 and that id. Equal to :func:`encode_one_annotation` per row."""
    n = len(geometry)
    if not n:
        return []
    rows = np.frombuffer(_records(layout, geometry, props).tobytes(), np.uint8).reshape(n, -1)
    if related is not None:
        tail = np.empty((n, 12), np.uint8)
        tail[:, :4] = np.frombuffer(np.array([1], "<u4").tobytes(), np.uint8)
        tail[:, 4:] = np.frombuffer(np.asarray(related).astype("<u8").tobytes(), np.uint8).reshape(n, 8)
        rows = np.concatenate([rows, tail], axis=1)
    buf = rows.tobytes()
    size = rows.shape[1]
    return [buf[i : i + size] for i in range(0, n * size, size)]


def annotation_info(
    layout: AnnotationLayout,
    dimensions: dict[str, list[Any]],
    lower: np.ndarray,
    upper: np.ndarray,
    levels: list[dict[str, Any]],
) -> dict[str, Any]:
    """The annotation source's ``info``: ``levels`` are the spatial entries, coarsest first."""
    return {
        "@type": "neuroglancer_annotations_v1",
        "dimensions": dimensions,
        "lower_bound": [float(v) for v in lower],
        "upper_bound": [float(v) for v in upper],
        "annotation_type": "POINT" if layout.points == 1 else "LINE",
        "properties": [{"id": p.id, "type": p.type, "description": p.source} for p in layout.properties],
        "relationships": [{"id": r, "key": f"rel_{r}"} for r in layout.relationships],
        "by_id": {"key": "by_id"},
        "spatial": levels,
    }


def shuffle_order(n: int, salt: int = 0) -> np.ndarray:
    """A fixed permutation of ``range(n)`` that spreads any prefix over the whole range: a
    golden-ratio stride (coprime to ``n``) from an offset taken from ``salt``. Rows are stored
    in spatial order, so a prefix of a cell, which Neuroglancer draws when zoomed out, is
    spread over the cell."""
    if n < 3:
        return np.arange(n)
    stride = max(1, int(n * 0.6180339887))
    while math.gcd(stride, n) != 1:
        stride += 1
    return (np.arange(n, dtype=np.int64) * stride + salt * 7919) % n


def pack_ids(level: int, cells: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Annotation ids (uint64) of ``rows`` of the linear cells ``cells`` of store level ``level``."""
    cells = np.asarray(cells, np.uint64)
    rows = np.asarray(rows, np.uint64)
    if level >= 1 << LEVEL_BITS or (len(cells) and int(cells.max()) >= 1 << CELL_BITS):
        raise InputError(
            f"level {level} or a grid of over {1 << CELL_BITS} cells is too large for annotation ids; "
            "use a larger chunk_shape"
        )
    if len(rows) and int(rows.max()) >= 1 << ROW_BITS:
        raise InputError(f"a cell holds over {1 << ROW_BITS} annotations; use a smaller chunk_shape")
    base = np.uint64(level << (CELL_BITS + ROW_BITS))
    return base | (cells << np.uint64(ROW_BITS)) | rows


def unpack_ids(annotation_id: int) -> tuple[int, int, int]:
    """``(level, cell, row)`` of an annotation id made by :func:`pack_ids`."""
    row = annotation_id & ((1 << ROW_BITS) - 1)
    cell = (annotation_id >> ROW_BITS) & ((1 << CELL_BITS) - 1)
    return annotation_id >> (CELL_BITS + ROW_BITS), cell, row


def encode_skeleton(
    positions: np.ndarray, edges: np.ndarray, attributes: list[tuple[np.ndarray, str]]
) -> bytes:
    """One skeleton: ``attributes`` are ``(values (N,) or (N, C), Neuroglancer type)`` in info order."""
    pos = np.asarray(positions, "<f4").reshape(-1, 3)
    e = np.asarray(edges, np.int64).reshape(-1, 2)
    if len(e) and (e.min() < 0 or e.max() >= len(pos)):
        raise InputError("skeleton edges must index its vertices")
    parts = [np.array([len(pos), len(e)], "<u4").tobytes(), pos.tobytes(), e.astype("<u4").tobytes()]
    for values, kind in attributes:
        parts.append(np.ascontiguousarray(np.asarray(values).astype(NG_TYPES[kind])).tobytes())
    return b"".join(parts)


def encode_mesh_fragment(positions: np.ndarray, faces: np.ndarray) -> bytes:
    """A legacy mesh fragment: vertex count, float32 positions, uint32 triangles."""
    pos = np.asarray(positions, "<f4").reshape(-1, 3)
    f = np.asarray(faces, np.int64).reshape(-1, 3)
    if len(f) and (f.min() < 0 or f.max() >= len(pos)):
        raise InputError("mesh faces must index its vertices")
    return np.array([len(pos)], "<u4").tobytes() + pos.tobytes() + f.astype("<u4").tobytes()


def _json_number(v: Any) -> Any:
    f = float(v)
    return int(f) if f.is_integer() and abs(f) < 2**53 else f


def _as_text(values: np.ndarray) -> np.ndarray:
    """Dates, and numbers with NaN or infinity (which JSON numbers cannot hold), as strings."""
    if values.dtype.kind == "M":
        return np.datetime_as_string(values)
    if values.dtype.kind == "f" and not np.all(np.isfinite(values)):
        return values.astype(str)
    return values


def segment_properties_info(ids: np.ndarray, columns: dict[str, np.ndarray]) -> dict[str, Any]:
    """``neuroglancer_segment_properties`` inline info: string columns become a ``label``
    (the one named ``name`` or ``label``, else the first) and ``string`` properties, numeric
    ones ``number`` properties."""
    columns = {n: _as_text(v) for n, v in columns.items()}
    strings = [n for n, v in columns.items() if v.dtype.kind in "USO"]
    label = next((n for n in strings if n.lower() in ("name", "label")), strings[0] if strings else None)
    props: list[dict[str, Any]] = []
    for name, values in columns.items():
        if values.ndim != 1:
            continue
        if name in strings:
            kind = "label" if name == label else "string"
            props.append({"id": name, "type": kind, "values": [str(v) for v in values.tolist()]})
        elif values.dtype.kind in "iufb":
            dtype = ng_dtype(values.dtype)
            vals = [_json_number(v) for v in values.astype(np.float64).tolist()]
            props.append({"id": name, "type": "number", "data_type": dtype, "values": vals})
    ids_text = [str(int(i)) for i in np.asarray(ids).astype(np.uint64).tolist()]
    return {"@type": "neuroglancer_segment_properties", "inline": {"ids": ids_text, "properties": props}}
