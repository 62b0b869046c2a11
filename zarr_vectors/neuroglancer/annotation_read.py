"""Neuroglancer precomputed annotations (``neuroglancer_annotations_v1``), read: no I/O.

Written from the specification (``annotations.md``). :func:`parse_annotation_info` reads the
``info``; :func:`decode_single_annotations` the ``by_id`` entries of many annotations at once
(vectorised: the fixed-size records are gathered into one structured array, then each
relationship's id lists are read for every annotation together). Invariants:

* a record is the geometry (float32: ``rank`` values per point, 1 point for ``POINT``, 2 for
  ``LINE``), then the properties of 4-byte types, of 2-byte types, of 1-byte types
  (``rgb`` and ``rgba`` are 3 and 4 ``uint8``), each group in info order, then zero padding
  to a multiple of 4 bytes; a ``by_id`` entry adds, per relationship, a uint32 count and
  that many uint64 ids, and ends there;
* boxes, ellipsoids and polylines are refused (:class:`~zarr_vectors.errors.InputError`):
  no store kind holds them as such yet.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from zarr_vectors.errors import InputError, PrecomputedFormatError
from zarr_vectors.neuroglancer.encode import NG_TYPES
from zarr_vectors.neuroglancer.precomputed_read import parse_sharding
from zarr_vectors.neuroglancer.sharded import ShardingSpec

__all__ = ["ANNOTATION_TYPE", "AnnotationInfo", "decode_single_annotations", "parse_annotation_info"]

ANNOTATION_TYPE = "neuroglancer_annotations_v1"
#: Geometry types read, with their points per annotation.
POINTS = {"POINT": 1, "LINE": 2}
_OTHER = ("AXIS_ALIGNED_BOUNDING_BOX", "ELLIPSOID", "POLYLINE")
#: Property types: numpy dtype and components.
PROPERTY_TYPES = {**{k: (v, 1) for k, v in NG_TYPES.items()}, "rgb": ("u1", 3), "rgba": ("u1", 4)}


@dataclass(frozen=True)
class AnnotationInfo:
    """An annotation layer's ``info``: what a record holds and where its ids are indexed."""

    names: tuple[str, ...]
    scales: np.ndarray
    units: tuple[str, ...]
    lower: np.ndarray
    upper: np.ndarray
    kind: str
    properties: tuple[tuple[str, str, int], ...]  # (id, numpy dtype, components), info order
    enum_labels: dict[str, dict[int | float, str]]
    relationships: tuple[str, ...]
    by_id: str
    by_id_sharding: ShardingSpec | None

    @property
    def rank(self) -> int:
        return len(self.names)

    @property
    def points(self) -> int:
        return POINTS[self.kind]

    def record_dtype(self) -> np.dtype:
        """The structured dtype of one record, padding included (spec order)."""
        fields: list[tuple[str, Any, Any]] = [("geometry", "<f4", (self.points * self.rank,))]
        size = 4 * self.points * self.rank
        for width in (4, 2, 1):
            for name, dtype, comps in self.properties:
                if np.dtype(dtype).itemsize == width:
                    fields.append((f"p_{name}", np.dtype(dtype).newbyteorder("<"), (comps,)))
                    size += width * comps
        if size % 4:
            fields.append(("_pad", "u1", (4 - size % 4,)))
        return np.dtype(fields)


def _fail(where: str, message: str) -> PrecomputedFormatError:
    return PrecomputedFormatError(f"{where}: {message}")


def parse_annotation_info(doc: dict[str, Any], where: str) -> AnnotationInfo:
    """An annotation layer's ``info`` (POINT and LINE layers; others are refused)."""
    if doc.get("@type") != ANNOTATION_TYPE:
        raise _fail(where, f"@type must be {ANNOTATION_TYPE!r}, got {doc.get('@type')!r}")
    kind = doc.get("annotation_type")
    if isinstance(kind, str) and kind.upper() in _OTHER:
        raise InputError(f"{where}: {kind} annotations cannot be ingested yet (points and lines can)")
    if not isinstance(kind, str) or kind.upper() not in POINTS:
        raise _fail(where, f"annotation_type must be one of {[*POINTS, *_OTHER]}, got {kind!r}")
    dims = doc.get("dimensions")
    if not isinstance(dims, dict) or not dims:
        raise _fail(where, "dimensions must be an object of name: [scale, unit]")
    scales, units = [], []
    for name, value in dims.items():
        if not (
            isinstance(value, list)
            and len(value) == 2
            and isinstance(value[0], (int, float))
            and value[0] > 0
        ):
            raise _fail(where, f"dimension {name!r} must be [positive scale, unit], got {value!r}")
        scales.append(float(value[0]))
        units.append(str(value[1]))
    rank = len(dims)
    lower, upper = (_vector(doc.get(k), rank, k, where) for k in ("lower_bound", "upper_bound"))
    props, labels = _properties(doc.get("properties") or [], where)
    rels = []
    for rel in doc.get("relationships") or []:
        if not isinstance(rel, dict) or not isinstance(rel.get("id"), str) or not rel["id"]:
            raise _fail(where, f"relationship {rel!r} needs a string id")
        rels.append(rel["id"])
    by_id = doc.get("by_id")
    if not isinstance(by_id, dict) or not isinstance(by_id.get("key"), str):
        raise _fail(where, "by_id must be an object with a key")
    return AnnotationInfo(
        tuple(dims),
        np.array(scales),
        tuple(units),
        lower,
        upper,
        kind.upper(),
        props,
        labels,
        tuple(rels),
        by_id["key"].strip("/"),
        parse_sharding(by_id.get("sharding"), where),
    )


def _vector(value: Any, rank: int, name: str, where: str) -> np.ndarray:
    try:
        out = np.asarray(value, np.float64)
    except (TypeError, ValueError) as exc:
        raise _fail(where, f"{name} must be {rank} numbers") from exc
    if out.shape != (rank,) or not np.all(np.isfinite(out)):
        raise _fail(where, f"{name} must be {rank} finite numbers, got {value!r}")
    return out


def _properties(
    items: list[Any], where: str
) -> tuple[tuple[tuple[str, str, int], ...], dict[str, dict[int | float, str]]]:
    props, labels, seen = [], {}, set()
    for p in items:
        if not isinstance(p, dict) or not isinstance(p.get("id"), str) or p["id"] in seen:
            raise _fail(where, f"property {p!r} needs a unique string id")
        if p.get("type") not in PROPERTY_TYPES:
            raise _fail(
                where,
                f"property {p['id']!r}: type must be one of {sorted(PROPERTY_TYPES)}, got {p.get('type')!r}",
            )
        seen.add(p["id"])
        dtype, comps = PROPERTY_TYPES[p["type"]]
        props.append((p["id"], dtype, comps))
        values, names = p.get("enum_values"), p.get("enum_labels")
        if values is not None or names is not None:
            if not (isinstance(values, list) and isinstance(names, list) and len(values) == len(names)):
                raise _fail(
                    where, f"property {p['id']!r}: enum_values and enum_labels must be lists of one length"
                )
            labels[p["id"]] = {v: str(n) for v, n in zip(values, names)}
    return tuple(props), labels


def decode_single_annotations(
    bodies: list[bytes], info: AnnotationInfo, where: str
) -> tuple[np.ndarray, dict[str, np.ndarray], list[tuple[np.ndarray, np.ndarray]]]:
    """``(geometry (n, points, rank) float32, {property: (n, components)}, per relationship
    (counts (n,), ids (sum of counts,) uint64))`` of ``n`` by_id entries."""
    rec = info.record_dtype()
    size = rec.itemsize
    lengths = np.fromiter((len(b) for b in bodies), np.int64, len(bodies))
    if len(bodies) and int(lengths.min()) < size:
        k = int(np.argmin(lengths))
        raise _fail(where, f"annotation {k} of the batch has {int(lengths[k])} bytes, a record needs {size}")
    buf = np.frombuffer(b"".join(bodies), np.uint8)
    starts = np.cumsum(lengths) - lengths
    records = (
        buf[starts[:, None] + np.arange(size)].reshape(-1).view(rec) if len(bodies) else np.zeros(0, rec)
    )
    geometry = records["geometry"].reshape(len(bodies), info.points, info.rank)
    props = {
        name: records[f"p_{name}"].astype(np.dtype(dtype).newbyteorder("="))
        for name, dtype, _ in info.properties
    }
    at = starts + size
    ends = starts + lengths
    related = []
    for rel in info.relationships:
        if np.any(at + 4 > ends):
            raise _fail(where, f"an annotation ends before the id count of relationship {rel!r}")
        counts = _u32(buf, at)
        if np.any(at + 4 + 8 * counts > ends):
            raise _fail(where, f"an annotation ends inside the ids of relationship {rel!r}")
        first = np.repeat(at + 4 - 8 * (np.cumsum(counts) - counts), counts) + 8 * np.arange(
            int(counts.sum())
        )
        ids = buf[first[:, None] + np.arange(8)].reshape(-1).view("<u8").astype(np.uint64)
        related.append((counts, ids))
        at = at + 4 + 8 * counts
    if np.any(at != ends):
        k = int(np.flatnonzero(at != ends)[0])
        raise _fail(
            where, f"annotation {k} of the batch has {int(ends[k] - at[k])} bytes after its last relationship"
        )
    return geometry, props, related


def _u32(buf: np.ndarray, at: np.ndarray) -> np.ndarray:
    """The uint32le at each byte offset ``at`` of ``buf`` (int64)."""
    return buf[at[:, None] + np.arange(4)].reshape(-1).view("<u4").astype(np.int64)
