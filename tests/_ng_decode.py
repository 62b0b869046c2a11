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


def multilod_manifest(buf: bytes) -> dict[str, Any]:
    """A ``neuroglancer_multilod_draco`` manifest (``{id}.index``): chunk_shape, grid_origin,
    lod_scales, vertex_offsets, and per LOD its node positions (n, 3) and fragment sizes."""
    chunk = np.frombuffer(buf, "<f4", 3, 0).astype(np.float64)
    origin = np.frombuffer(buf, "<f4", 3, 12).astype(np.float64)
    (n,) = struct.unpack_from("<I", buf, 24)
    at = 28
    scales = np.frombuffer(buf, "<f4", n, at)
    offsets = np.frombuffer(buf, "<f4", 3 * n, at + 4 * n).reshape(n, 3)
    counts = np.frombuffer(buf, "<u4", n, at + 16 * n)
    at += 20 * n
    positions, sizes = [], []
    for m in counts.tolist():
        positions.append(np.frombuffer(buf, "<u4", 3 * m, at).reshape(3, m).T.astype(np.int64))
        sizes.append(np.frombuffer(buf, "<u4", m, at + 12 * m).astype(np.int64))
        at += 16 * m
    assert at == len(buf), "trailing bytes after the last LOD"
    return {
        "chunk_shape": chunk,
        "grid_origin": origin,
        "lod_scales": scales,
        "vertex_offsets": offsets,
        "positions": positions,
        "sizes": sizes,
    }


def multilod_fragments(
    info: dict[str, Any], manifest: dict[str, Any], data: bytes
) -> list[list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]]:
    """Per LOD, per node with data: ``(node position, quantised (V, 3) ints, faces,
    model-space (V, 3) positions)``. Fragments are consecutive in ``data``, LOD 0 first; a
    coordinate ``x`` maps to ``origin + offset + chunk * 2**lod * (position + x / (2**bits - 1))``
    and then through the info's transform."""
    import DracoPy

    bits = info["vertex_quantization_bits"]
    top = (1 << bits) - 1
    transform = np.asarray(info["transform"], np.float64).reshape(3, 4)
    out: list[list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]] = []
    at = 0
    for lod, (nodes, sizes) in enumerate(zip(manifest["positions"], manifest["sizes"])):
        frags = []
        for node, size in zip(nodes, sizes.tolist()):
            blob, at = data[at : at + size], at + size
            if not size:
                continue
            mesh = DracoPy.decode(blob)
            raw = np.asarray(mesh.points, np.float64)
            q = np.rint(raw).astype(np.int64)
            assert np.array_equal(raw, q), "positions must be the quantised integers"
            assert q.min() >= 0 and q.max() <= top
            box = manifest["chunk_shape"] * 2.0**lod
            stored = manifest["grid_origin"] + manifest["vertex_offsets"][lod] + box * (node + q / top)
            model = stored @ transform[:, :3].T + transform[:, 3]
            frags.append((node, q, np.asarray(mesh.faces, np.int64).reshape(-1, 3), model))
        out.append(frags)
    assert at == len(data), "fragment sizes do not add up to the data file"
    return out


def zorder(positions: np.ndarray) -> np.ndarray:
    """Z-curve keys of (n, 3) positions (x the lowest bit), one bit at a time."""
    key = np.zeros(len(positions), dtype=object)
    p = np.asarray(positions, np.int64)
    for bit in range(21):
        for axis in range(3):
            key = key + (((p[:, axis] >> bit) & 1).astype(object) << (3 * bit + axis))
    return key


# -- neuroglancer_uint64_sharded_v1, read the way the client reads it ----------------------


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & 0xFFFFFFFF


def _fmix(h: int) -> int:
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & 0xFFFFFFFF
    return h ^ (h >> 16)


def murmur_low64(key: int) -> int:
    """MurmurHash3_x86_128 (seed 0) of the 8 little-endian bytes of ``key``, low 64 bits:
    one key at a time, in plain integers (the general algorithm, any length, no shortcuts)."""
    data = key.to_bytes(8, "little")
    c1, c2, c3, c4 = 0x239B961B, 0xAB0E9789, 0x38B34AE5, 0xA1E38B93
    h = [0, 0, 0, 0]
    n_blocks = len(data) // 16  # 0 for 8 bytes: everything is in the tail
    tail = data[16 * n_blocks :]
    ks = [int.from_bytes(tail[4 * i : 4 * i + 4].ljust(4, b"\0"), "little") for i in range(4)]
    consts = [(c1, 15, c2), (c2, 16, c3), (c3, 17, c4), (c4, 18, c1)]
    for i in range(4):
        if len(tail) > 4 * i:
            a, r, b = consts[i]
            h[i] ^= (_rotl((ks[i] * a) & 0xFFFFFFFF, r) * b) & 0xFFFFFFFF
    h = [v ^ len(data) for v in h]
    h[0] = sum(h) & 0xFFFFFFFF
    h[1:] = [(v + h[0]) & 0xFFFFFFFF for v in h[1:]]
    h = [_fmix(v) for v in h]
    h[0] = sum(h) & 0xFFFFFFFF
    h[1:] = [(v + h[0]) & 0xFFFFFFFF for v in h[1:]]
    return h[0] | (h[1] << 32)


def morton_key(cell: tuple[int, ...], grid_shape: list[int]) -> int:
    """Compressed Morton code of ``cell``: for each bit (low first) and each axis in order,
    the axis's bit when the axis's extent minus one has that bit or a higher one set."""
    out, j = 0, 0
    for bit in range(32):
        for dim, size in enumerate(grid_shape):
            if (size - 1) >> bit:
                out |= ((cell[dim] >> bit) & 1) << j
                j += 1
    return out


def _decode(raw: bytes, encoding: str | None) -> bytes:
    import gzip

    return gzip.decompress(raw) if encoding == "gzip" else raw


def sharded_locate(read: Any, sharding: dict[str, Any], key: int) -> tuple[str, int, int] | None:
    """Where the bytes of ``key`` lie in a sharded index: ``(shard file, start, size)``, or
    None; ``read(filename, start, end)`` returns a byte range of a file in the index's folder
    (None: no such file)."""
    assert sharding["@type"] == "neuroglancer_uint64_sharded_v1"
    shifted = key >> sharding["preshift_bits"]
    hashed = shifted if sharding["hash"] == "identity" else murmur_low64(shifted)
    mbits, sbits = sharding["minishard_bits"], sharding["shard_bits"]
    minishard = hashed & ((1 << mbits) - 1)
    shard = (hashed >> mbits) & ((1 << sbits) - 1)
    name = format(shard, "x").zfill(-(-sbits // 4)) + ".shard"
    index_end = 16 << mbits
    entry = read(name, 16 * minishard, 16 * minishard + 16)
    if entry is None:
        return None
    start, end = struct.unpack("<QQ", entry)
    if start == end:
        return None
    raw = _decode(read(name, index_end + start, index_end + end), sharding.get("minishard_index_encoding"))
    assert len(raw) % 24 == 0, "a minishard index is [3, n] uint64"
    table = np.frombuffer(raw, "<u8").reshape(3, -1)
    ids = np.cumsum(table[0], dtype=np.uint64)
    hit = np.flatnonzero(ids == np.uint64(key))
    if not len(hit):
        return None
    i = int(hit[0])
    offset = (
        index_end
        + int(np.sum(table[1, : i + 1], dtype=np.uint64))
        + int(np.sum(table[2, :i], dtype=np.uint64))
    )
    return name, offset, int(table[2, i])


def sharded_get(read: Any, sharding: dict[str, Any], key: int) -> bytes | None:
    """The bytes stored for ``key`` in a sharded index (decoded), or None (see
    :func:`sharded_locate` for ``read``)."""
    found = sharded_locate(read, sharding, key)
    if found is None:
        return None
    name, offset, size = found
    return _decode(read(name, offset, offset + size), sharding.get("data_encoding"))


def files_reader(files: dict[str, bytes]) -> Any:
    """A ``read`` for :func:`sharded_get` over in-memory files."""

    def read(name: str, start: int, end: int) -> bytes | None:
        body = files.get(name)
        if body is None:
            return None
        assert 0 <= start <= end <= len(body), f"range {start}-{end} outside {name} ({len(body)} bytes)"
        return body[start:end]

    return read


def folder_reader(folder: Any) -> Any:
    """A ``read`` for :func:`sharded_get` over the files of a folder (a pathlib.Path)."""

    def read(name: str, start: int, end: int) -> bytes | None:
        path = folder / name
        if not path.is_file():
            return None
        with path.open("rb") as fh:
            fh.seek(start)
            body = fh.read(end - start)
        assert len(body) == end - start, f"range {start}-{end} outside {path}"
        return body

    return read
