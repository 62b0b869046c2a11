"""Decoders of Neuroglancer precomputed bytes, written from the format's specification alone
(independent of zarr_vectors.neuroglancer.encode), for the protocol tests."""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

SIZES = {"float32": 4, "uint32": 4, "int32": 4, "uint16": 2, "int16": 2, "uint8": 1, "int8": 1}
DTYPES = {
    "float32": "<f4",
    "uint32": "<u4",
    "int32": "<i4",
    "uint16": "<u2",
    "int16": "<i2",
    "uint8": "u1",
    "int8": "i1",
}


def _geometry_floats(info: dict[str, Any]) -> int:
    rank = len(info["dimensions"])
    return {"POINT": rank, "LINE": 2 * rank, "AXIS_ALIGNED_BOUNDING_BOX": 2 * rank, "ELLIPSOID": 2 * rank}[
        info["annotation_type"]
    ]


def _record(info: dict[str, Any], buf: bytes, at: int) -> tuple[np.ndarray, dict[str, Any], int]:
    """One annotation's geometry and properties starting at ``at``; returns the offset after padding."""
    n = _geometry_floats(info)
    geom = np.frombuffer(buf, "<f4", n, at).copy()
    at += 4 * n
    props: dict[str, Any] = {}
    # properties: 4-byte ones, then 2-byte ones, then 1-byte ones, each group in info order
    for size in (4, 2, 1):
        for p in info["properties"]:
            if SIZES[p["type"]] == size:
                props[p["id"]] = np.frombuffer(buf, DTYPES[p["type"]], 1, at)[0]
                at += size
    at += (-at) % 4 if at % 4 else 0
    return geom, props, at


def annotation_list(info: dict[str, Any], buf: bytes) -> tuple[np.ndarray, dict[str, np.ndarray], np.ndarray]:
    """A multiple-annotation encoding: (geometry (n, k), properties, ids)."""
    (count,) = struct.unpack_from("<Q", buf, 0)
    at = 8
    geoms, props = [], {p["id"]: [] for p in info["properties"]}
    for _ in range(count):
        start = at
        g, pr, at = _record(info, buf, at)
        at = start + _padded(at - start)
        geoms.append(g)
        for k, v in pr.items():
            props[k].append(v)
    ids = np.frombuffer(buf, "<u8", count, at)
    assert at + 8 * count == len(buf), "trailing bytes after the ids"
    k = _geometry_floats(info)
    return (np.array(geoms).reshape(count, k), {k2: np.array(v) for k2, v in props.items()}, ids)


def _padded(n: int) -> int:
    return n + (-n) % 4


def one_annotation(info: dict[str, Any], buf: bytes) -> tuple[np.ndarray, dict[str, Any], list[np.ndarray]]:
    """A single-annotation encoding: geometry, properties, related ids per relationship."""
    g, pr, at = _record(info, buf, 0)
    at = _padded(at)
    related = []
    for _ in info["relationships"]:
        (n,) = struct.unpack_from("<I", buf, at)
        related.append(np.frombuffer(buf, "<u8", n, at + 4))
        at += 4 + 8 * n
    assert at == len(buf)
    return g, pr, related


def skeleton(info: dict[str, Any], buf: bytes) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    nv, ne = struct.unpack_from("<II", buf, 0)
    pos = np.frombuffer(buf, "<f4", 3 * nv, 8).reshape(nv, 3)
    at = 8 + 12 * nv
    edges = np.frombuffer(buf, "<u4", 2 * ne, at).reshape(ne, 2)
    at += 8 * ne
    attrs = {}
    for a in info["vertex_attributes"]:
        c = a["num_components"]
        attrs[a["id"]] = np.frombuffer(buf, DTYPES[a["data_type"]], nv * c, at).reshape(nv, c)
        at += SIZES[a["data_type"]] * nv * c
    assert at == len(buf)
    return pos, edges, attrs


def legacy_fragment(buf: bytes) -> tuple[np.ndarray, np.ndarray]:
    (nv,) = struct.unpack_from("<I", buf, 0)
    pos = np.frombuffer(buf, "<f4", 3 * nv, 4).reshape(nv, 3)
    rest = len(buf) - 4 - 12 * nv
    assert rest % 12 == 0
    faces = np.frombuffer(buf, "<u4", rest // 4, 4 + 12 * nv).reshape(-1, 3)
    return pos, faces
