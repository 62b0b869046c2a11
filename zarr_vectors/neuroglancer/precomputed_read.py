"""Neuroglancer precomputed skeletons and meshes, read: bytes and JSON to numpy, no I/O.

Written from the precomputed format's specification (``skeletons.md``, ``meshes.md``); the
inverse of :mod:`~zarr_vectors.neuroglancer.encode` and
:mod:`~zarr_vectors.neuroglancer.multilod` for what those write, and of any conforming
writer. Every function takes ``where`` (the file or key the bytes came from) and raises
:class:`~zarr_vectors.errors.PrecomputedFormatError` naming it when the bytes or JSON break
the specification: a wrong ``@type``, a count that does not match the length, an index out
of range. Invariants of what they return:

* positions are float64 ``(n, 3)`` in the "model" space (nanometres) after the info's
  ``transform`` (:func:`apply_transform`), edges and faces int64 indices into them;
* a skeleton's vertex attributes are ``(n, components)`` arrays of the info's data types;
* a multi-resolution fragment's positions are the spec's
  ``grid_origin + vertex_offsets[lod] + chunk_shape * 2**lod * (node + x / (2**bits - 1))``
  of the integers ``x`` in its Draco mesh (Draco's own quantisation, which the format does
  not allow, is refused when it leaves values that are not those integers).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from zarr_vectors.errors import InputError, PrecomputedFormatError
from zarr_vectors.neuroglancer.encode import NG_TYPES
from zarr_vectors.neuroglancer.sharded import ShardingSpec

__all__ = [
    "MeshInfo",
    "MultilodManifest",
    "SkeletonInfo",
    "apply_transform",
    "decode_legacy_fragment",
    "decode_legacy_manifest",
    "decode_multilod_fragments",
    "decode_multilod_manifest",
    "decode_segment_properties",
    "decode_skeleton",
    "parse_json",
    "parse_mesh_info",
    "parse_sharding",
    "parse_skeleton_info",
]

SKELETON_TYPE = "neuroglancer_skeletons"
MULTILOD_TYPE = "neuroglancer_multilod_draco"
LEGACY_TYPE = "neuroglancer_legacy_mesh"
SHARDED_TYPE = "neuroglancer_uint64_sharded_v1"
IDENTITY = np.array([[1.0, 0, 0, 0], [0, 1.0, 0, 0], [0, 0, 1.0, 0]])


def _fail(where: str, message: str) -> PrecomputedFormatError:
    return PrecomputedFormatError(f"{where}: {message}")


def parse_json(body: bytes, where: str) -> dict[str, Any]:
    """A JSON object from ``body`` (UTF-8)."""
    try:
        doc = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _fail(where, f"not JSON ({exc})") from exc
    if not isinstance(doc, dict):
        raise _fail(where, f"must hold a JSON object, not {type(doc).__name__}")
    return doc


def parse_sharding(doc: Any, where: str) -> ShardingSpec | None:
    """The ``sharding`` member of an info file (None: unsharded)."""
    if doc is None:
        return None
    if not isinstance(doc, dict) or doc.get("@type") != SHARDED_TYPE:
        raise _fail(where, f"sharding must be an object of @type {SHARDED_TYPE!r}, got {doc!r}")
    try:
        return ShardingSpec(
            preshift_bits=_int(doc, "preshift_bits", where),
            hash=str(doc.get("hash")),
            minishard_bits=_int(doc, "minishard_bits", where),
            shard_bits=_int(doc, "shard_bits", where),
            minishard_index_encoding=str(doc.get("minishard_index_encoding", "raw")),
            data_encoding=str(doc.get("data_encoding", "raw")),
        )
    except InputError as exc:
        raise _fail(where, str(exc)) from exc


def _int(doc: dict[str, Any], name: str, where: str) -> int:
    value = doc.get(name)
    if isinstance(value, bool) or not isinstance(value, int):
        raise _fail(where, f"{name} must be an integer, got {value!r}")
    return value


def _transform(doc: dict[str, Any], where: str) -> np.ndarray:
    """The info's 4x3 homogeneous ``transform`` as a (3, 4) row-major matrix (identity if absent)."""
    value = doc.get("transform")
    if value is None:
        return IDENTITY.copy()
    try:
        out = np.asarray(value, np.float64)
    except (TypeError, ValueError) as exc:
        raise _fail(where, f"transform must be 12 numbers, got {value!r}") from exc
    if out.shape != (12,) or not np.all(np.isfinite(out)):
        raise _fail(where, f"transform must be 12 finite numbers, got {value!r}")
    return out.reshape(3, 4)


def apply_transform(positions: np.ndarray, transform: np.ndarray) -> np.ndarray:
    """``positions`` (n, 3) mapped by a (3, 4) transform, in float64 (the identity copies)."""
    p = np.asarray(positions, np.float64).reshape(-1, 3)
    if np.array_equal(transform, IDENTITY):
        return p.copy()
    return p @ transform[:, :3].T + transform[:, 3]


@dataclass(frozen=True)
class SkeletonInfo:
    """A ``neuroglancer_skeletons`` info: attributes are ``(id, numpy dtype, components)``."""

    transform: np.ndarray
    attributes: tuple[tuple[str, str, int], ...]
    sharding: ShardingSpec | None
    segment_properties: str | None = None


def parse_skeleton_info(doc: dict[str, Any], where: str) -> SkeletonInfo:
    """A skeleton source's ``info``."""
    if doc.get("@type") != SKELETON_TYPE:
        raise _fail(where, f"@type must be {SKELETON_TYPE!r}, got {doc.get('@type')!r}")
    attrs = []
    seen: set[str] = set()
    for a in doc.get("vertex_attributes") or []:
        if not isinstance(a, dict) or not isinstance(a.get("id"), str) or not a["id"] or a["id"] in seen:
            raise _fail(where, f"vertex attribute {a!r} needs a unique non-empty string id")
        if a.get("data_type") not in NG_TYPES:
            raise _fail(
                where,
                f"vertex attribute {a['id']!r}: data_type must be one of {sorted(NG_TYPES)}, "
                f"got {a.get('data_type')!r}",
            )
        comps = a.get("num_components")
        if isinstance(comps, bool) or not isinstance(comps, int) or comps < 1:
            raise _fail(where, f"vertex attribute {a['id']!r}: num_components must be a positive integer")
        seen.add(a["id"])
        attrs.append((a["id"], NG_TYPES[a["data_type"]], comps))
    props = doc.get("segment_properties")
    return SkeletonInfo(
        _transform(doc, where), tuple(attrs), parse_sharding(doc.get("sharding"), where), props
    )


@dataclass(frozen=True)
class MeshInfo:
    """A mesh source's ``info``: ``kind`` is ``"legacy"`` or ``"multilod"``."""

    kind: str
    transform: np.ndarray = field(default_factory=IDENTITY.copy)
    bits: int = 0
    lod_scale_multiplier: float = 1.0
    sharding: ShardingSpec | None = None
    segment_properties: str | None = None


def parse_mesh_info(doc: dict[str, Any] | None, where: str) -> MeshInfo:
    """A mesh source's ``info`` (None: a legacy mesh folder without one, as the spec allows)."""
    if doc is None:
        return MeshInfo("legacy")
    kind = doc.get("@type")
    props = doc.get("segment_properties")
    if kind == LEGACY_TYPE:
        if doc.get("sharding") is not None:
            raise _fail(where, "legacy meshes have no sharded form")
        return MeshInfo("legacy", segment_properties=props)
    if kind != MULTILOD_TYPE:
        raise _fail(where, f"@type must be {MULTILOD_TYPE!r} or {LEGACY_TYPE!r}, got {kind!r}")
    bits = doc.get("vertex_quantization_bits")
    if bits not in (10, 16) or isinstance(bits, bool):
        raise _fail(where, f"vertex_quantization_bits must be 10 or 16, got {bits!r}")
    scale = doc.get("lod_scale_multiplier", 1.0)
    if isinstance(scale, bool) or not isinstance(scale, (int, float)):
        raise _fail(where, f"lod_scale_multiplier must be a number, got {scale!r}")
    return MeshInfo(
        "multilod",
        _transform(doc, where),
        int(bits),
        float(scale),
        parse_sharding(doc.get("sharding"), where),
        props,
    )


def _need(buf: bytes, size: int, where: str, what: str) -> None:
    if len(buf) < size:
        raise _fail(where, f"{len(buf)} bytes, too short for {what} ({size} bytes needed)")


def decode_skeleton(
    buf: bytes, info: SkeletonInfo, where: str
) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """``(positions (nv, 3) in model space, edges (ne, 2) int64, {attribute: (nv, c)})``."""
    _need(buf, 8, where, "the vertex and edge counts")
    nv, ne = (int(v) for v in np.frombuffer(buf, "<u4", 2))
    sizes = [np.dtype(t).itemsize * c * nv for _, t, c in info.attributes]
    size = 8 + 12 * nv + 8 * ne + sum(sizes)
    if len(buf) != size:
        raise _fail(
            where,
            f"{len(buf)} bytes, but {nv} vertices, {ne} edges and attributes "
            f"{[a for a, _, _ in info.attributes]} take {size}",
        )
    pos = np.frombuffer(buf, "<f4", 3 * nv, 8).reshape(nv, 3)
    at = 8 + 12 * nv
    edges = np.frombuffer(buf, "<u4", 2 * ne, at).reshape(ne, 2).astype(np.int64)
    at += 8 * ne
    if ne and int(edges.max()) >= nv:
        raise _fail(where, f"an edge names vertex {int(edges.max())} of {nv}")
    attrs: dict[str, np.ndarray] = {}
    for (name, dtype, comps), nbytes in zip(info.attributes, sizes):
        attrs[name] = (
            np.frombuffer(buf, dtype, nv * comps, at)
            .reshape(nv, comps)
            .astype(np.dtype(dtype).newbyteorder("="))
        )
        at += nbytes
    return apply_transform(pos, info.transform), edges, attrs


def decode_legacy_manifest(body: bytes, where: str) -> list[str]:
    """The fragment names (relative to the mesh folder) of a legacy ``{id}:0`` manifest."""
    doc = parse_json(body, where)
    frags = doc.get("fragments")
    if not isinstance(frags, list) or not all(isinstance(f, str) and f for f in frags):
        raise _fail(where, f"'fragments' must be a list of file names, got {frags!r}")
    return frags


def decode_legacy_fragment(buf: bytes, where: str) -> tuple[np.ndarray, np.ndarray]:
    """``(positions (nv, 3) float64 in nanometres, faces (nf, 3) int64)`` of a legacy fragment."""
    _need(buf, 4, where, "the vertex count")
    nv = int(np.frombuffer(buf, "<u4", 1)[0])
    _need(buf, 4 + 12 * nv, where, f"{nv} vertices")
    rest = len(buf) - 4 - 12 * nv
    if rest % 12:
        raise _fail(
            where, f"{rest} bytes after {nv} vertices, not a whole number of triangles (12 bytes each)"
        )
    faces = np.frombuffer(buf, "<u4", rest // 4, 4 + 12 * nv).reshape(-1, 3).astype(np.int64)
    if len(faces) and int(faces.max()) >= nv:
        raise _fail(where, f"a triangle names vertex {int(faces.max())} of {nv}")
    return np.frombuffer(buf, "<f4", 3 * nv, 4).reshape(nv, 3).astype(np.float64), faces


@dataclass(frozen=True)
class MultilodManifest:
    """A ``{id}.index`` manifest: per LOD its node positions (n, 3) and fragment sizes."""

    chunk_shape: np.ndarray
    grid_origin: np.ndarray
    lod_scales: np.ndarray
    vertex_offsets: np.ndarray
    positions: tuple[np.ndarray, ...]
    sizes: tuple[np.ndarray, ...]

    @property
    def num_lods(self) -> int:
        return len(self.lod_scales)

    @property
    def data_size(self) -> int:
        """Bytes of the whole fragment data file."""
        return int(sum(int(s.sum()) for s in self.sizes))

    def lod_range(self, lod: int) -> tuple[int, int]:
        """``(start, length)`` of LOD ``lod``'s fragments in the fragment data file."""
        if not 0 <= lod < self.num_lods:
            raise InputError(f"LOD {lod} asked of a mesh with {self.num_lods} levels of detail")
        start = sum(int(s.sum()) for s in self.sizes[:lod])
        return start, int(self.sizes[lod].sum())


def decode_multilod_manifest(buf: bytes, where: str) -> MultilodManifest:
    """A multi-resolution mesh manifest; its byte length must match its counts exactly."""
    _need(buf, 28, where, "chunk_shape, grid_origin and num_lods")
    chunk = np.frombuffer(buf, "<f4", 3, 0).astype(np.float64)
    origin = np.frombuffer(buf, "<f4", 3, 12).astype(np.float64)
    n = int(np.frombuffer(buf, "<u4", 1, 24)[0])
    _need(buf, 28 + 20 * n, where, f"{n} levels of detail")
    scales = np.frombuffer(buf, "<f4", n, 28).astype(np.float64)
    offsets = np.frombuffer(buf, "<f4", 3 * n, 28 + 4 * n).reshape(n, 3).astype(np.float64)
    counts = np.frombuffer(buf, "<u4", n, 28 + 16 * n).astype(np.int64)
    size = 28 + 20 * n + 16 * int(counts.sum())
    if len(buf) != size:
        raise _fail(
            where, f"{len(buf)} bytes, but {n} levels of detail of {counts.tolist()} fragments take {size}"
        )
    if not (np.all(np.isfinite(chunk)) and np.all(chunk > 0)):
        raise _fail(where, f"chunk_shape must be positive, got {chunk.tolist()}")
    at = 28 + 20 * n
    positions, sizes = [], []
    for m in counts.tolist():
        positions.append(np.frombuffer(buf, "<u4", 3 * m, at).reshape(3, m).T.astype(np.int64))
        sizes.append(np.frombuffer(buf, "<u4", m, at + 12 * m).astype(np.int64))
        at += 16 * m
    return MultilodManifest(chunk, origin, scales, offsets, tuple(positions), tuple(sizes))


def decode_multilod_fragments(
    manifest: MultilodManifest, data: bytes, lod: int, info: MeshInfo, where: str
) -> tuple[np.ndarray, np.ndarray]:
    """``(positions (n, 3) float64 in model space, faces (f, 3) int64)`` of LOD ``lod``: its
    fragments' Draco meshes joined (no vertex shared between fragments); ``data`` is that
    LOD's part of the fragment data file (:meth:`MultilodManifest.lod_range`)."""
    import DracoPy

    sizes = manifest.sizes[lod]
    if len(data) != int(sizes.sum()):
        raise _fail(
            where, f"LOD {lod} has {len(data)} bytes of fragments, its manifest says {int(sizes.sum())}"
        )
    top = float((1 << info.bits) - 1)
    box = manifest.chunk_shape * 2.0**lod
    base = manifest.grid_origin + manifest.vertex_offsets[lod]
    pieces: list[np.ndarray] = []
    faces: list[np.ndarray] = []
    at = n = 0
    for node, size in zip(manifest.positions[lod], sizes.tolist()):
        if not size:
            continue
        try:
            mesh = DracoPy.decode(data[at : at + size])
        except (DracoPy.FileTypeException, ValueError, RuntimeError) as exc:
            raise _fail(where, f"LOD {lod} fragment at {node.tolist()}: not a Draco mesh ({exc})") from exc
        at += size
        raw = np.asarray(mesh.points, np.float64).reshape(-1, 3)
        q = np.rint(raw)
        if len(raw) and (np.abs(raw - q).max() > 1e-3 or q.min() < 0 or q.max() > top):
            raise _fail(
                where,
                f"LOD {lod} fragment at {node.tolist()}: positions are not integers in [0, {int(top)}] "
                "(Draco's own quantisation, which the format does not allow?)",
            )
        f = np.asarray(getattr(mesh, "faces", np.zeros((0, 3))), np.int64).reshape(-1, 3)
        pieces.append(base + box * (node + q / top))
        faces.append(f + n)
        n += len(q)
    pos = np.concatenate(pieces) if pieces else np.zeros((0, 3))
    tri = np.concatenate(faces) if faces else np.zeros((0, 3), np.int64)
    return apply_transform(pos, info.transform), tri


#: Segment property types, and the numeric types a ``number`` property may have.
PROPERTY_TYPES = ("label", "description", "string", "tags", "number")
PROPERTIES_TYPE = "neuroglancer_segment_properties"


def decode_segment_properties(doc: dict[str, Any], where: str) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """``(ids uint64, {property id: values})`` of an inline ``neuroglancer_segment_properties``
    info: strings (``label``, ``description``, ``string``) as ``str`` arrays, numbers in their
    ``data_type``, and tags as one string per segment of its tag names joined by spaces (tag
    names hold no spaces), every tag kept. Without ``inline``: no ids, no properties."""
    if doc.get("@type") != PROPERTIES_TYPE:
        raise _fail(where, f"@type must be {PROPERTIES_TYPE!r}, got {doc.get('@type')!r}")
    inline = doc.get("inline")
    if inline is None:
        return np.zeros(0, np.uint64), {}
    texts = inline.get("ids") if isinstance(inline, dict) else None
    if not isinstance(texts, list) or not all(isinstance(t, str) and _u64_text(t) for t in texts):
        raise _fail(where, "inline ids must be a list of base-10 uint64 strings")
    ids = np.array([int(t) for t in texts], np.uint64)
    if len(np.unique(ids)) != len(ids):
        raise _fail(where, "inline ids repeat")
    columns: dict[str, np.ndarray] = {}
    for prop in inline.get("properties") or []:
        name, kind = (prop.get("id"), prop.get("type")) if isinstance(prop, dict) else (None, None)
        if not isinstance(name, str) or not name or name in columns or kind not in PROPERTY_TYPES:
            raise _fail(
                where, f"property {prop!r} needs a unique string id and a type of {list(PROPERTY_TYPES)}"
            )
        values = prop.get("values")
        if not isinstance(values, list) or len(values) != len(ids):
            raise _fail(where, f"property {name!r}: values must be a list of {len(ids)} (one per id)")
        columns[name] = _property_values(prop, values, f"{where}: property {name!r}")
    return ids, columns


def _u64_text(text: str) -> bool:
    return text.isdigit() and text.isascii() and int(text) < 1 << 64


def _property_values(prop: dict[str, Any], values: list[Any], where: str) -> np.ndarray:
    kind = prop["type"]
    if kind == "number":
        dtype = NG_TYPES.get(prop.get("data_type"))  # type: ignore[arg-type]
        if dtype is None:
            raise PrecomputedFormatError(f"{where}: data_type must be one of {sorted(NG_TYPES)}")
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            raise PrecomputedFormatError(f"{where}: every value must be a number")
        return np.asarray(values, np.float64).astype(np.dtype(dtype).newbyteorder("="))
    if kind != "tags":
        if not all(isinstance(v, str) for v in values):
            raise PrecomputedFormatError(f"{where}: every value must be a string")
        return np.asarray(values, dtype=str)
    tags = prop.get("tags")
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise PrecomputedFormatError(f"{where}: tags must be a list of strings")
    out = []
    for v in values:
        if not isinstance(v, list) or not all(isinstance(i, int) and 0 <= i < len(tags) for i in v):
            raise PrecomputedFormatError(
                f"{where}: each value must be a list of indices into its {len(tags)} tags"
            )
        out.append(" ".join(tags[i] for i in v))
    return np.asarray(out, dtype=str)
