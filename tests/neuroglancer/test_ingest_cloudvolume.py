"""Precomputed layers written by cloud-volume's own writers (its skeleton upload, unsharded
and sharded, and its legacy mesh ``put``), ingested and compared with what was written,
exactly: ids as uint64 (near 2**53 and 2**64), skeleton vertices, edges and vertex
attributes, mesh triangles (up to vertex order)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from zarr_vectors.io.neuroglancer import ingest_neuroglancer

pytest.importorskip("cloudvolume")

IDS = [7, 2**53 + 1, 2**63 + 5, 2**64 - 1]
SHARDING = {
    "@type": "neuroglancer_uint64_sharded_v1",
    "preshift_bits": 0,
    "hash": "murmurhash3_x86_128",
    "minishard_bits": 1,
    "shard_bits": 1,
    "minishard_index_encoding": "gzip",
    "data_encoding": "gzip",
}


def _volume(root: Path) -> str:
    from cloudvolume import CloudVolume

    info = CloudVolume.create_new_info(
        num_channels=1,
        layer_type="segmentation",
        data_type="uint64",
        encoding="raw",
        resolution=[4, 4, 40],
        voxel_offset=[0, 0, 0],
        volume_size=[256, 256, 64],
        chunk_size=[64, 64, 16],
        mesh="mesh",
        skeletons="skeletons",
    )
    path = f"file://{root}"
    CloudVolume(path, info=info).commit_info()
    return path


def _skeletons(rng: np.random.Generator) -> list[tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    out = []
    for k, sid in enumerate(IDS):
        n = 6 + 3 * k
        parent = np.array([int(rng.integers(0, i)) for i in range(1, n)])
        edges = np.column_stack([parent, np.arange(1, n)]).astype(np.uint32)
        vertices = rng.uniform(0, 900, (n, 3)).astype(np.float32)
        out.append(
            (sid, vertices, edges, rng.random(n).astype(np.float32), rng.integers(0, 4, n).astype(np.uint8))
        )
    return out


def _segments(pos: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Edges as sorted rows of their two end points' coordinates (order of ends and of rows free)."""
    ends = np.sort(pos[edges].reshape(len(edges), 2, 3).view("f4,f4,f4").reshape(len(edges), 2), axis=1)
    rows = ends.view(np.float32).reshape(len(edges), 6).astype(np.float64)
    return rows[np.lexsort(rows.T[::-1])]


def _rows(*columns: np.ndarray) -> np.ndarray:
    rows = np.column_stack([np.asarray(c, np.float64).reshape(len(c), -1) for c in columns])
    return rows[np.lexsort(rows.T[::-1])]


@pytest.mark.parametrize("sharded", [False, True])
def test_cloudvolume_skeletons(tmp_path: Path, sharded: bool) -> None:
    from cloudvolume import CloudVolume, Skeleton

    path = _volume(tmp_path / "seg")
    cv = CloudVolume(path)
    cv.skeleton.meta.info = {
        "@type": "neuroglancer_skeletons",
        "transform": [1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0],
        "vertex_attributes": [
            {"id": "radius", "data_type": "float32", "num_components": 1},
            {"id": "vertex_types", "data_type": "uint8", "num_components": 1},
        ],
        "spatial_index": None,
        **({"sharding": SHARDING} if sharded else {}),
    }
    cv.skeleton.meta.commit_info()
    cv = CloudVolume(path)
    truth = _skeletons(np.random.default_rng(4))
    if sharded:  # cloud-volume's sharded writer takes one shard per call
        from cloudvolume.datasource.precomputed.sharding import ShardingSpecification

        spec = ShardingSpecification.from_dict(SHARDING)
        for shard in {spec.compute_shard_location(t[0]).shard_number for t in truth}:
            part = [t for t in truth if spec.compute_shard_location(t[0]).shard_number == shard]
            cv.skeleton.upload([Skeleton(v, e, radii=r, vertex_types=c, segid=s) for s, v, e, r, c in part])
        assert len(list((tmp_path / "seg" / "skeletons").glob("*.shard"))) == 2
    else:
        cv.skeleton.upload([Skeleton(v, e, radii=r, vertex_types=c, segid=s) for s, v, e, r, c in truth])
    ds = ingest_neuroglancer(
        tmp_path / "seg", tmp_path / "sk.zarr", kind="skeletons", progress=False, chunk_shape=300.0
    )
    assert ds.object_ids().dtype == np.uint64 and ds.object_ids().tolist() == IDS
    for sid, v, e, r, c in truth:
        got = ds.objects([sid], attributes=True)
        assert np.array_equal(
            _rows(got.positions, got.attributes["radius"], got.attributes["vertex_types"]), _rows(v, r, c)
        )
        assert got.attributes["vertex_types"].dtype == np.uint8
        assert np.array_equal(_segments(got.positions, got.edges), _segments(v, e.astype(np.int64)))


def test_cloudvolume_legacy_meshes(tmp_path: Path) -> None:
    import trimesh
    from cloudvolume import CloudVolume, Mesh

    path = _volume(tmp_path / "seg")
    (tmp_path / "seg" / "mesh").mkdir()
    (tmp_path / "seg" / "mesh" / "info").write_text(json.dumps({"@type": "neuroglancer_legacy_mesh"}))
    cv = CloudVolume(path)
    rng = np.random.default_rng(6)
    sphere = trimesh.creation.icosphere(subdivisions=2)
    truth = {
        sid: ((sphere.vertices * 40 + rng.uniform(100, 800, 3)).astype(np.float32), sphere.faces)
        for sid in IDS
    }
    cv.mesh.put(
        [Mesh(v, f.astype(np.uint32), None, segid=sid) for sid, (v, f) in truth.items()], compress="gzip"
    )
    ds = ingest_neuroglancer(
        tmp_path / "seg", tmp_path / "m.zarr", kind="meshes", progress=False, chunk_shape=300.0
    )
    assert ds.object_ids().dtype == np.uint64 and ds.object_ids().tolist() == IDS
    for sid, (v, f) in truth.items():
        got = ds.objects([sid])
        assert len(got.positions) == len(v) and len(got.faces) == len(f)
        assert np.array_equal(_canonical(got.positions[got.faces]), _canonical(v[f]))


def _canonical(tri: np.ndarray) -> np.ndarray:
    """Triangles (T, 3, 3) each rotated to start at its least corner (winding kept), then sorted."""
    t = np.asarray(tri, np.float64)
    keys = t[:, :, 0] * 1e12 + t[:, :, 1] * 1e6 + t[:, :, 2]
    first = np.argmin(keys, axis=1)
    rolled = t[np.arange(len(t))[:, None], (first[:, None] + np.arange(3)) % 3].reshape(len(t), 9)
    return rolled[np.lexsort(rolled.T[::-1])]


def test_cloudvolume_sharded_multilod_draco_meshes(tmp_path: Path) -> None:
    """A sharded multi-resolution Draco layer assembled the way igneous does with
    cloud-volume's pieces: its manifest class, its shard writer (``synthesize_shard_files``
    with ``data_offset``, the manifest's length, pointing each index entry at the manifest
    that follows the fragments). One fragment per mesh, 10-bit positions; the ingest equals the source's own
    quantised positions (float32) and triangles."""
    import DracoPy
    import trimesh
    from cloudvolume.datasource.precomputed.mesh.multilod import MultiLevelPrecomputedMeshManifest
    from cloudvolume.datasource.precomputed.sharding import ShardingSpecification, synthesize_shard_files

    bits, top = 10, 1023
    sphere = trimesh.creation.icosphere(subdivisions=1)
    rng = np.random.default_rng(8)
    data, offsets, truth = {}, {}, {}
    for sid in IDS:
        v = sphere.vertices * rng.uniform(20, 60) + rng.uniform(100, 800, 3)
        lo, size = v.min(axis=0), np.ptp(v, axis=0)
        q = np.rint((v - lo) / size * top)
        blob = bytes(
            DracoPy.encode(q, sphere.faces.astype(np.uint32), quantization_bits=bits, quantization_range=float(top),
                           quantization_origin=[0.0, 0.0, 0.0])
        )  # fmt: skip
        manifest = MultiLevelPrecomputedMeshManifest(
            segment_id=sid, chunk_shape=size, grid_origin=lo, num_lods=1, lod_scales=[1.0],
            vertex_offsets=[[0.0, 0.0, 0.0]], num_fragments_per_lod=[1], fragment_positions=[[[0], [0], [0]]],
            fragment_offsets=[len(blob)],
        )  # fmt: skip
        data[sid], offsets[sid] = blob + manifest.to_binary(), len(manifest.to_binary())
        # the decoder's position: grid_origin + chunk * q / top in the manifest's float32 values
        want = lo.astype(np.float32).astype(np.float64) + size.astype(np.float32).astype(np.float64) * q / top
        truth[sid] = (want.astype(np.float32), sphere.faces)
    folder = tmp_path / "seg" / "mesh"
    folder.mkdir(parents=True)
    sharding = {**SHARDING, "data_encoding": "raw"}  # fragments are found by raw offsets
    spec = ShardingSpecification.from_dict(sharding)
    for name, body in synthesize_shard_files(spec, data, data_offset=offsets).items():
        (folder / name).write_bytes(body)
    info = {"@type": "neuroglancer_multilod_draco", "vertex_quantization_bits": bits, "lod_scale_multiplier": 1.0,
            "transform": [1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0], "sharding": sharding}  # fmt: skip
    (folder / "info").write_text(json.dumps(info))
    assert len(list(folder.glob("*.shard"))) == 2
    ds = ingest_neuroglancer(folder, tmp_path / "m.zarr", progress=False, chunk_shape=300.0)
    assert ds.object_ids().dtype == np.uint64 and ds.object_ids().tolist() == IDS
    for sid, (v, f) in truth.items():
        got = ds.objects([sid])
        assert len(got.positions) == len(v) and len(got.faces) == len(f)
        assert np.allclose(_canonical(got.positions[got.faces]), _canonical(v[f]), rtol=0, atol=1e-4)
