"""The precomputed decoders (zarr_vectors.neuroglancer.precomputed_read, sharded_read)
against bytes built here by hand from Neuroglancer's skeletons.md, meshes.md and sharded.md,
and their refusals of broken input (type and message)."""

from __future__ import annotations

import gzip
import json
import struct

import numpy as np
import pytest

from zarr_vectors.errors import FormatError, PrecomputedFormatError
from zarr_vectors.io.neuroglancer import edges_to_parents
from zarr_vectors.neuroglancer.precomputed_read import (
    decode_legacy_fragment,
    decode_legacy_manifest,
    decode_multilod_fragments,
    decode_multilod_manifest,
    decode_skeleton,
    parse_json,
    parse_mesh_info,
    parse_sharding,
    parse_skeleton_info,
)
from zarr_vectors.neuroglancer.sharded import ShardingSpec, murmurhash3_x86_128_low64
from zarr_vectors.neuroglancer.sharded_read import (
    decode_data,
    decode_minishard_index,
    decode_shard_index,
    locate_keys,
    shard_names,
)

SKELETON_INFO = {
    "@type": "neuroglancer_skeletons",
    "transform": [2, 0, 0, 10, 0, 3, 0, 20, 0, 0, 4, 30],
    "vertex_attributes": [
        {"id": "radius", "data_type": "float32", "num_components": 1},
        {"id": "rgb", "data_type": "uint8", "num_components": 3},
        {"id": "kind", "data_type": "int16", "num_components": 1},
    ],
}


def _skeleton_bytes() -> bytes:
    """Three vertices, two edges, then radius (3 float32), rgb (9 uint8), kind (3 int16)."""
    return b"".join(
        [
            struct.pack("<II", 3, 2),
            struct.pack("<9f", 1, 2, 3, 4, 5, 6, 7, 8, 9),
            struct.pack("<4I", 0, 1, 1, 2),
            struct.pack("<3f", 0.5, 1.5, 2.5),
            bytes([1, 2, 3, 4, 5, 6, 7, 8, 9]),
            struct.pack("<3h", -1, 0, 300),
        ]
    )


def test_skeleton_layout_and_transform() -> None:
    info = parse_skeleton_info(SKELETON_INFO, "sk/info")
    pos, edges, attrs = decode_skeleton(_skeleton_bytes(), info, "sk/1")
    raw = np.arange(1, 10, dtype=np.float64).reshape(3, 3)
    assert pos.tolist() == (raw * [2, 3, 4] + [10, 20, 30]).tolist()
    assert edges.tolist() == [[0, 1], [1, 2]] and edges.dtype == np.int64
    assert attrs["radius"].tolist() == [[0.5], [1.5], [2.5]] and attrs["radius"].dtype == np.float32
    assert attrs["rgb"].tolist() == [[1, 2, 3], [4, 5, 6], [7, 8, 9]] and attrs["rgb"].dtype == np.uint8
    assert attrs["kind"].ravel().tolist() == [-1, 0, 300] and attrs["kind"].dtype == np.int16


@pytest.mark.parametrize(
    "cut, message",
    [
        (4, r"sk/1: 4 bytes, too short for the vertex and edge counts \(8 bytes needed\)"),
        (-1, r"sk/1: 86 bytes, but 3 vertices, 2 edges and attributes \['radius', 'rgb', 'kind'\] take 87"),
    ],
)
def test_skeleton_truncated(cut: int, message: str) -> None:
    info = parse_skeleton_info(SKELETON_INFO, "sk/info")
    with pytest.raises(PrecomputedFormatError, match=f"^{message}$"):
        decode_skeleton(_skeleton_bytes()[:cut], info, "sk/1")


def test_skeleton_bad_counts_and_edges() -> None:
    info = parse_skeleton_info({"@type": "neuroglancer_skeletons"}, "sk/info")
    body = struct.pack("<II", 2, 1) + struct.pack("<6f", *range(6)) + struct.pack("<2I", 0, 1)
    assert decode_skeleton(body, info, "k")[1].tolist() == [[0, 1]]
    with pytest.raises(
        PrecomputedFormatError, match=r"^k: 40 bytes, but 2 vertices, 2 edges and attributes \[\] take 48$"
    ):
        decode_skeleton(struct.pack("<II", 2, 2) + body[8:], info, "k")
    with pytest.raises(PrecomputedFormatError, match=r"^k: an edge names vertex 2 of 2$"):
        decode_skeleton(body[:-4] + struct.pack("<I", 2), info, "k")
    assert issubclass(PrecomputedFormatError, FormatError)


@pytest.mark.parametrize(
    "doc, message",
    [
        ({"@type": "neuroglancer_multilod_draco"}, r"@type must be 'neuroglancer_skeletons'"),
        (
            {
                "@type": "neuroglancer_skeletons",
                "vertex_attributes": [{"id": "a", "data_type": "float64", "num_components": 1}],
            },
            r"vertex attribute 'a': data_type must be one of",
        ),
        (
            {
                "@type": "neuroglancer_skeletons",
                "vertex_attributes": [{"id": "a", "data_type": "uint8", "num_components": 0}],
            },
            r"vertex attribute 'a': num_components must be a positive integer",
        ),
        ({"@type": "neuroglancer_skeletons", "transform": [1, 2, 3]}, r"transform must be 12 finite numbers"),
        (
            {
                "@type": "neuroglancer_skeletons",
                "sharding": {
                    "@type": "neuroglancer_uint64_sharded_v1",
                    "hash": "md5",
                    "preshift_bits": 0,
                    "minishard_bits": 0,
                    "shard_bits": 0,
                },
            },
            r"sharding hash must be one of identity, murmurhash3_x86_128, not 'md5'",
        ),
    ],
)
def test_skeleton_info_refusals(doc: dict, message: str) -> None:
    with pytest.raises(PrecomputedFormatError, match=f"^sk/info: {message}"):
        parse_skeleton_info(doc, "sk/info")


def test_json_refusals() -> None:
    with pytest.raises(PrecomputedFormatError, match=r"^m/info: not JSON"):
        parse_json(b"{nope", "m/info")
    with pytest.raises(PrecomputedFormatError, match=r"^m/info: must hold a JSON object, not list$"):
        parse_json(b"[1]", "m/info")


def test_mesh_info_kinds() -> None:
    assert parse_mesh_info(None, "m/info").kind == "legacy"
    assert parse_mesh_info({"@type": "neuroglancer_legacy_mesh"}, "m/info").kind == "legacy"
    info = parse_mesh_info(
        {
            "@type": "neuroglancer_multilod_draco",
            "vertex_quantization_bits": 10,
            "transform": [1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0],
            "lod_scale_multiplier": 2,
            "sharding": {
                "@type": "neuroglancer_uint64_sharded_v1",
                "hash": "identity",
                "preshift_bits": 1,
                "minishard_bits": 2,
                "shard_bits": 3,
                "data_encoding": "gzip",
            },
        },
        "m/info",
    )
    assert (info.kind, info.bits, info.lod_scale_multiplier) == ("multilod", 10, 2.0)
    assert info.sharding == ShardingSpec(1, "identity", 2, 3, "raw", "gzip")
    with pytest.raises(
        PrecomputedFormatError, match=r"^m/info: vertex_quantization_bits must be 10 or 16, got 12$"
    ):
        parse_mesh_info({"@type": "neuroglancer_multilod_draco", "vertex_quantization_bits": 12}, "m/info")
    with pytest.raises(PrecomputedFormatError, match=r"^m/info: @type must be"):
        parse_mesh_info({"@type": "neuroglancer_skeletons"}, "m/info")


def test_legacy_fragment_and_manifest() -> None:
    body = struct.pack("<I", 4) + struct.pack("<12f", *range(12)) + struct.pack("<6I", 0, 1, 2, 1, 3, 2)
    pos, faces = decode_legacy_fragment(body, "m/frag")
    assert pos.tolist() == np.arange(12.0).reshape(4, 3).tolist()
    assert faces.tolist() == [[0, 1, 2], [1, 3, 2]]
    with pytest.raises(
        PrecomputedFormatError, match=r"^m/frag: 8 bytes after 4 vertices, not a whole number of triangles"
    ):
        decode_legacy_fragment(body[:-16], "m/frag")
    with pytest.raises(
        PrecomputedFormatError, match=r"^m/frag: 40 bytes, too short for 4 vertices \(52 bytes needed\)$"
    ):
        decode_legacy_fragment(body[:40], "m/frag")
    with pytest.raises(PrecomputedFormatError, match=r"^m/frag: a triangle names vertex 4 of 4$"):
        decode_legacy_fragment(body[:-4] + struct.pack("<I", 4), "m/frag")
    assert decode_legacy_manifest(b'{"fragments": ["a", "b:0:1-2"]}', "m/7:0") == ["a", "b:0:1-2"]
    with pytest.raises(
        PrecomputedFormatError, match=r"^m/7:0: 'fragments' must be a list of file names, got None$"
    ):
        decode_legacy_manifest(b"{}", "m/7:0")


def _manifest(lods: list[list[tuple[tuple[int, int, int], int]]], offsets: list[list[float]]) -> bytes:
    """A multilod manifest by the spec: chunk (2, 4, 8), origin (100, 200, 300), scales 1, 2, ..."""
    n = len(lods)
    parts = [struct.pack("<3f", 2, 4, 8), struct.pack("<3f", 100, 200, 300), struct.pack("<I", n)]
    parts.append(struct.pack(f"<{n}f", *[float(k + 1) for k in range(n)]))
    parts.append(struct.pack(f"<{3 * n}f", *[v for row in offsets for v in row]))
    parts.append(struct.pack(f"<{n}I", *[len(lod) for lod in lods]))
    for lod in lods:
        for axis in range(3):
            parts.append(struct.pack(f"<{len(lod)}I", *[node[axis] for node, _ in lod]))
        parts.append(struct.pack(f"<{len(lod)}I", *[size for _, size in lod]))
    return b"".join(parts)


def _draco(points: np.ndarray, faces: np.ndarray, bits: int) -> bytes:
    """A Draco mesh of integer positions whose Draco quantisation is the identity."""
    import DracoPy

    top = float((1 << bits) - 1)
    return bytes(
        DracoPy.encode(
            points.astype(np.float64),
            faces.astype(np.uint32),
            quantization_bits=bits,
            quantization_range=top,
            quantization_origin=[0.0, 0.0, 0.0],
        )
    )


def test_multilod_manifest_and_fragment_positions() -> None:
    bits = 10
    q = np.array([[0, 0, 0], [1023, 0, 0], [0, 1023, 512]])
    blob = _draco(q, np.array([[0, 1, 2]]), bits)
    empty = b""
    lods = [[((0, 0, 0), len(blob)), ((1, 0, 0), 0)], [((0, 0, 0), len(blob))]]
    body = _manifest(lods, [[0, 0, 0], [0.5, -1, 2]])
    man = decode_multilod_manifest(body, "m/5.index")
    assert man.chunk_shape.tolist() == [2, 4, 8] and man.grid_origin.tolist() == [100, 200, 300]
    assert man.lod_scales.tolist() == [1, 2] and man.vertex_offsets.tolist() == [[0, 0, 0], [0.5, -1, 2]]
    assert [p.tolist() for p in man.positions] == [[[0, 0, 0], [1, 0, 0]], [[0, 0, 0]]]
    assert man.lod_range(0) == (0, len(blob)) and man.lod_range(1) == (len(blob), len(blob))
    info = parse_mesh_info(
        {
            "@type": "neuroglancer_multilod_draco",
            "vertex_quantization_bits": bits,
            "transform": [1, 0, 0, 5, 0, 1, 0, 0, 0, 0, 1, 0],
        },
        "m/info",
    )
    pos, faces = decode_multilod_fragments(man, blob + empty, 1, info, "m/5")
    # grid_origin + vertex_offsets[1] + chunk * 2 * (node + x / 1023), then the transform (+5 on x)
    want = np.array([100.5, 199, 302]) + np.array([2, 4, 8]) * 2.0 * (q / 1023.0) + [5, 0, 0]
    order = np.lexsort(pos.T[::-1])
    assert np.allclose(pos[order], want[np.lexsort(want.T[::-1])], rtol=0, atol=1e-9)
    assert len(faces) == 1 and sorted(pos[faces[0]].tolist()) == sorted(want.tolist())
    with pytest.raises(
        PrecomputedFormatError,
        match=r"^m/5.index: 99 bytes, but 2 levels of detail of \[2, 1\] fragments take 116$",
    ):
        decode_multilod_manifest(body[:99], "m/5.index")
    with pytest.raises(
        PrecomputedFormatError, match=r"^m/5: LOD 0 has 3 bytes of fragments, its manifest says"
    ):
        decode_multilod_fragments(man, blob[:3], 0, info, "m/5")
    with pytest.raises(
        PrecomputedFormatError, match=r"^m/5: LOD 0 fragment at \[0, 0, 0\]: not a Draco mesh"
    ):
        decode_multilod_fragments(man, b"x" * len(blob), 0, info, "m/5")


def test_multilod_refuses_draco_quantised_floats() -> None:
    import DracoPy

    pts = np.array([[0, 0, 0], [1000, 0, 0], [0, 700, 3]], np.float64)
    blob = bytes(DracoPy.encode(pts, np.array([[0, 1, 2]], np.uint32), quantization_bits=10))
    man = decode_multilod_manifest(_manifest([[((0, 0, 0), len(blob))]], [[0, 0, 0]]), "m/1.index")
    info = parse_mesh_info({"@type": "neuroglancer_multilod_draco", "vertex_quantization_bits": 10}, "m/info")
    with pytest.raises(PrecomputedFormatError, match=r"positions are not integers in \[0, 1023\]"):
        decode_multilod_fragments(man, blob, 0, info, "m/1")


# ------------------------------------------------------------------ sharded


def _hand_shard() -> tuple[ShardingSpec, bytes]:
    """One shard (shard_bits 0), two minishards (identity hash): keys 2 (minishard 0), 5 and
    7 (minishard 1); 3 bytes of unindexed data before key 7's entry."""
    spec = ShardingSpec(0, "identity", 1, 0, "raw", "raw")
    data = b"two" + b"five!" + b"xyz" + b"seven7"  # 2 at 0, 5 at 3, gap 3, 7 at 11
    mini0 = struct.pack("<3Q", 2, 0, 3)  # [ids], [offsets], [sizes] with n = 1
    mini1 = struct.pack("<6Q", 5, 2, 3, 3, 5, 6)  # ids 5, 7 (delta 2); offsets 3 (after 2's end), 3 (gap)
    at = len(data)
    index = struct.pack("<4Q", at, at + len(mini0), at + len(mini0), at + len(mini0) + len(mini1))
    return spec, index + data + mini0 + mini1


def test_shard_and_minishard_index_by_hand() -> None:
    spec, shard = _hand_shard()
    table = decode_shard_index(shard[:32], spec, "0.shard")
    assert table.tolist() == [[32 + 17, 32 + 41], [32 + 41, 32 + 89]]
    keys, starts, sizes = decode_minishard_index(shard[table[1, 0] : table[1, 1]], spec, "0.shard")
    assert keys.tolist() == [5, 7] and sizes.tolist() == [5, 6]
    assert [shard[s : s + n] for s, n in zip(starts, sizes)] == [b"five!", b"seven7"]
    keys, starts, sizes = decode_minishard_index(shard[table[0, 0] : table[0, 1]], spec, "0.shard")
    assert keys.tolist() == [2] and shard[starts[0] : starts[0] + sizes[0]] == b"two"
    assert locate_keys(np.array([2, 5, 7], np.uint64), spec)[1].tolist() == [0, 1, 1]
    assert shard_names(ShardingSpec(0, "identity", 0, 5)) == [f"{s:02x}.shard" for s in range(32)]


def test_murmur_hash_picks_shard_and_minishard() -> None:
    spec = ShardingSpec(2, "murmurhash3_x86_128", 3, 4)
    key = np.array([2**64 - 1, 123456789], np.uint64)
    h = murmurhash3_x86_128_low64(key >> np.uint64(2))
    shard, mini = locate_keys(key, spec)
    assert mini.tolist() == (h & np.uint64(7)).astype(np.int64).tolist()
    assert shard.tolist() == ((h >> np.uint64(3)) & np.uint64(15)).astype(np.int64).tolist()


def test_gzip_encodings_and_refusals() -> None:
    spec = ShardingSpec(0, "identity", 0, 0, "gzip", "gzip")
    raw = struct.pack("<3Q", 9, 4, 2)
    keys, starts, sizes = decode_minishard_index(gzip.compress(raw), spec, "s")
    assert (keys.tolist(), starts.tolist(), sizes.tolist()) == ([9], [16 + 4], [2])
    assert decode_data(gzip.compress(b"body"), spec, "s") == b"body"
    with pytest.raises(PrecomputedFormatError, match=r"^s: an entry is not valid gzip"):
        decode_data(b"body", spec, "s")
    with pytest.raises(PrecomputedFormatError, match=r"^s: a minishard index is not valid gzip"):
        decode_minishard_index(raw, spec, "s")
    with pytest.raises(
        PrecomputedFormatError, match=r"^s: minishard index of 23 bytes is not \[3, n\] uint64"
    ):
        decode_minishard_index(gzip.compress(raw[:23]), spec, "s")
    with pytest.raises(PrecomputedFormatError, match=r"^s: shard index of 8 bytes, 16 expected"):
        decode_shard_index(b"\0" * 8, spec, "s")
    with pytest.raises(
        PrecomputedFormatError, match=r"^s: minishard 0 index range \[9, 3\] ends before it starts"
    ):
        decode_shard_index(struct.pack("<2Q", 9, 3), spec, "s")
    with pytest.raises(PrecomputedFormatError, match=r"^m/info: sharding must be an object of @type"):
        parse_sharding({"@type": "other"}, "m/info")
    assert json.loads(json.dumps(spec.to_json()))["data_encoding"] == "gzip"


# ------------------------------------------------------------------ edges to parents


def _edge_set(parents: np.ndarray) -> set[tuple[int, int]]:
    return {tuple(sorted((int(p), c))) for c, p in enumerate(parents.tolist()) if p >= 0}


def test_edges_to_parents_keeps_given_direction() -> None:
    edges = np.array([[0, 1], [1, 2], [1, 3], [5, 4]])
    assert edges_to_parents(6, edges).tolist() == [-1, 0, 1, 1, 5, -1]


def test_edges_to_parents_orients_undirected_trees() -> None:
    rng = np.random.default_rng(5)
    n = 300
    parents = np.array([-1] + [int(rng.integers(0, i)) for i in range(1, n)])
    parents[150] = -1  # two trees
    edges = np.array([[c, p] for c, p in enumerate(parents.tolist()) if p >= 0])  # child first
    flip = rng.random(len(edges)) < 0.5
    edges[flip] = edges[flip][:, ::-1]
    got = edges_to_parents(n, np.concatenate([edges, edges[:3]]))  # duplicates count once
    assert _edge_set(got) == _edge_set(parents)
    assert np.count_nonzero(got < 0) == 2 and got[0] == -1  # each tree rooted at its lowest vertex


def test_edges_to_parents_refuses_cycles_and_loops() -> None:
    with pytest.raises(PrecomputedFormatError, match=r"^skeleton 9: its 3 edges make a cycle"):
        edges_to_parents(4, np.array([[0, 1], [1, 2], [2, 0]]), "skeleton 9")
    with pytest.raises(PrecomputedFormatError, match=r"^skeleton: edge \[2, 2\] joins a vertex to itself$"):
        edges_to_parents(4, np.array([[0, 1], [2, 2]]))


def test_segment_properties_refusals() -> None:
    from zarr_vectors.neuroglancer.precomputed_read import decode_segment_properties

    def doc(**inline: object) -> dict:
        return {"@type": "neuroglancer_segment_properties", "inline": {"ids": ["1", "2"], **inline}}

    ids, cols = decode_segment_properties(doc(properties=[]), "p/info")
    assert ids.tolist() == [1, 2] and cols == {}
    cases = [
        (
            doc(properties=[{"id": "a", "type": "colour", "values": [1, 2]}]),
            r"needs a unique string id and a type",
        ),
        (
            doc(properties=[{"id": "a", "type": "label", "values": ["x"]}]),
            r"property 'a': values must be a list of 2",
        ),
        (
            doc(properties=[{"id": "a", "type": "number", "data_type": "int64", "values": [1, 2]}]),
            r"data_type must be",
        ),
        (
            doc(properties=[{"id": "a", "type": "tags", "tags": ["x"], "values": [[0], [1]]}]),
            r"indices into its 1 tags",
        ),
        ({"@type": "neuroglancer_segment_properties", "inline": {"ids": ["-1"]}}, r"base-10 uint64 strings"),
        ({"@type": "x"}, r"@type must be 'neuroglancer_segment_properties'"),
    ]
    for bad, message in cases:
        with pytest.raises(PrecomputedFormatError, match=message):
            decode_segment_properties(bad, "p/info")


# ------------------------------------------------------------------ annotations


ANN_INFO = {
    "@type": "neuroglancer_annotations_v1",
    "dimensions": {"x": [4e-9, "m"], "y": [4e-9, "m"], "z": [4e-8, "m"]},
    "lower_bound": [0, 0, 0],
    "upper_bound": [100, 100, 10],
    "annotation_type": "POINT",
    "properties": [
        {"id": "a", "type": "uint8", "enum_values": [0, 1], "enum_labels": ["no", "yes"]},
        {"id": "b", "type": "float32"},
        {"id": "c", "type": "rgb"},
        {"id": "d", "type": "int16"},
    ],
    "relationships": [{"id": "pre", "key": "rel_pre"}, {"id": "post", "key": "rel_post"}],
    "by_id": {"key": "by_id"},
    "spatial": [],
}


def _annotation(
    x: float, a: int, b: float, c: tuple[int, int, int], d: int, pre: list[int], post: list[int]
) -> bytes:
    """By the spec: geometry, then 4-byte properties (b), 2-byte (d), 1-byte (a, then c), pad to
    a multiple of 4 (12 + 4 + 2 + 1 + 3 = 22, so 2 bytes), then each relationship's ids."""
    body = struct.pack("<3f", x, x + 1, x + 2) + struct.pack("<f", b) + struct.pack("<h", d)
    body += bytes([a, *c]) + b"\0\0"
    for ids in (pre, post):
        body += struct.pack("<I", len(ids)) + struct.pack(f"<{len(ids)}Q", *ids)
    return body


def test_annotation_records_by_hand() -> None:
    from zarr_vectors.io.neuroglancer_annotations import relationship_columns
    from zarr_vectors.neuroglancer.annotation_read import decode_single_annotations, parse_annotation_info

    info = parse_annotation_info(ANN_INFO, "ann/info")
    assert info.record_dtype().itemsize == 24 and info.enum_labels == {"a": {0: "no", 1: "yes"}}
    bodies = [
        _annotation(1, 1, 0.5, (1, 2, 3), -7, [2**64 - 1], []),
        _annotation(5, 0, -2.0, (9, 8, 7), 300, [], [4]),
    ]
    geometry, props, related = decode_single_annotations(bodies, info, "ann/by_id")
    assert geometry.tolist() == [[[1, 2, 3]], [[5, 6, 7]]]
    assert props["a"].ravel().tolist() == [1, 0] and props["b"].ravel().tolist() == [0.5, -2.0]
    assert props["c"].tolist() == [[1, 2, 3], [9, 8, 7]] and props["d"].ravel().tolist() == [-7, 300]
    assert [c.tolist() for c, _ in related] == [[1, 0], [0, 1]]
    assert [v.tolist() for _, v in related] == [[2**64 - 1], [4]]
    cols = relationship_columns(info, related, np.array([10, 11], np.uint64))
    assert cols["pre"].tolist() == [2**64 - 1, 0] and cols["post"].tolist() == [0, 4]
    with pytest.raises(
        PrecomputedFormatError, match=r"^ann/by_id: annotation 1 of the batch has 3 bytes after"
    ):
        decode_single_annotations([bodies[0], bodies[1] + b"xyz"], info, "ann/by_id")
    with pytest.raises(
        PrecomputedFormatError, match=r"^ann/by_id: an annotation ends inside the ids of relationship 'pre'"
    ):
        decode_single_annotations([bodies[0][:30]], info, "ann/by_id")
    with pytest.raises(
        PrecomputedFormatError,
        match=r"^ann/by_id: annotation 0 of the batch has 20 bytes, a record needs 24$",
    ):
        decode_single_annotations([bodies[0][:20]], info, "ann/by_id")
    two = decode_single_annotations([_annotation(1, 1, 0.5, (1, 2, 3), -7, [3, 4], [])], info, "ann/by_id")[2]
    from zarr_vectors.errors import InputError

    with pytest.raises(InputError, match=r"annotation 10 lists 2 ids for relationship 'pre'"):
        relationship_columns(info, two, np.array([10], np.uint64))


def test_annotation_info_refusals() -> None:
    from zarr_vectors.errors import InputError
    from zarr_vectors.neuroglancer.annotation_read import parse_annotation_info

    with pytest.raises(InputError, match=r"^ann/info: ELLIPSOID annotations cannot be ingested yet"):
        parse_annotation_info({**ANN_INFO, "annotation_type": "ELLIPSOID"}, "ann/info")
    with pytest.raises(PrecomputedFormatError, match=r"^ann/info: property 'e': type must be one of"):
        parse_annotation_info({**ANN_INFO, "properties": [{"id": "e", "type": "uint64"}]}, "ann/info")
    with pytest.raises(PrecomputedFormatError, match=r"^ann/info: lower_bound must be 3 finite numbers"):
        parse_annotation_info({**ANN_INFO, "lower_bound": [0, 0]}, "ann/info")
