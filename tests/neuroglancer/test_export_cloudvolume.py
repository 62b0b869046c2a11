"""cloud-volume, a reader this project did not write, reads our Neuroglancer exports: the
annotation index (unsharded and sharded, every level) and legacy meshes. Skipped where
cloud-volume is not installed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import zarr_vectors as zv
from zarr_vectors.neuroglancer import export_neuroglancer

pytest.importorskip("cloudvolume")

RNG = np.random.default_rng(4)


def _rows(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a, np.float64).reshape(len(a), -1)
    return a[np.lexsort(a.T[::-1])]


@pytest.mark.parametrize("sharding", [False, True])
def test_cloud_volume_reads_each_point_once(tmp_path: Path, sharding: bool) -> None:
    from cloudvolume.datasource.precomputed.annotation import PrecomputedAnnotationSource

    n = 1500
    pts = np.concatenate([RNG.uniform(0, 40, (n // 2, 3)), RNG.uniform(360, 400, (n - n // 2, 3))])
    zv.write_points(tmp_path / "p.zarr", pts, chunk_shape=20, object_ids=RNG.integers(1, 6, n))
    zv.open(tmp_path / "p.zarr", mode="r+").build_pyramid([2, 2])
    export_neuroglancer(tmp_path / "p.zarr", tmp_path / "out", sharding=sharding)
    src = PrecomputedAnnotationSource(f"precomputed://file://{tmp_path}/out/p/ann")
    got = [src.get_all(mip=mip) for mip in range(3)]  # every cell of every level
    ids = np.concatenate([np.asarray(g.ids) for g in got])
    geom = np.concatenate([np.asarray(g.geometry) for g in got])
    assert len(np.unique(ids)) == len(ids) == n
    assert np.array_equal(_rows(geom), _rows(pts.astype("f4")))
    one = src.get_by_id([int(ids[0])])[int(ids[0])]
    assert np.asarray(one.geometry).ravel().tolist() == geom[0].tolist()


def test_cloud_volume_reads_legacy_meshes(tmp_path: Path) -> None:
    trimesh = pytest.importorskip("trimesh")
    from cloudvolume import CloudVolume

    m = trimesh.creation.icosphere(subdivisions=1)
    zv.write_meshes(
        tmp_path / "m.zarr",
        [(m.vertices * 10 + 50 * k, m.faces) for k in range(3)],
        chunk_shape=40,
        object_ids=[11, 12, 13],
    )
    export_neuroglancer(tmp_path / "m.zarr", tmp_path / "out", mesh_format="legacy")
    scale = {
        "key": "1",
        "resolution": [1, 1, 1],
        "voxel_offset": [0, 0, 0],
        "size": [256] * 3,
        "chunk_sizes": [[64] * 3],
        "encoding": "raw",
    }
    info = {
        "type": "segmentation",
        "data_type": "uint64",
        "num_channels": 1,
        "mesh": "mesh",
        "scales": [scale],
    }
    cv = CloudVolume(f"precomputed://file://{tmp_path}/out/m", info=info)
    ds = zv.open(tmp_path / "m.zarr")
    for segid in (11, 12, 13):
        mesh = cv.mesh.get(segid)
        mesh = mesh[segid] if isinstance(mesh, dict) else mesh
        brute = ds.objects([segid])
        assert np.allclose(_rows(mesh.vertices), _rows(brute.positions), rtol=1e-6)
        assert len(mesh.faces) == len(brute.faces)
