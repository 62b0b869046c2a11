"""Mesh files: duplicate vertices merged on ingest, and every export format read back."""

from __future__ import annotations

import numpy as np
import pytest
import trimesh

import zarr_vectors as zv
from zarr_vectors.errors import InputError
from zarr_vectors.io.export import export_result
from zarr_vectors.io.meshes import export_mesh, ingest_meshes, load_mesh, merge_duplicates


def _corners(vertices: np.ndarray, faces: np.ndarray) -> np.ndarray:
    """Each face's corner positions, faces sorted: the geometry without its indexing."""
    tri = np.asarray(vertices, np.float64)[np.asarray(faces)].reshape(len(faces), -1)
    return tri[np.lexsort(tri.T[::-1])]


def test_merge_duplicates_indexes_a_soup_exactly():
    soup = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [1, 0, 0], [1, 1, 0], [0, 1, 0]], np.float64)
    faces = np.arange(6).reshape(2, 3)
    v, f = merge_duplicates(soup, faces)
    assert v.tolist() == [[0, 0, 0], [1, 0, 0], [0, 1, 0], [1, 1, 0]]  # order of first use
    assert f.tolist() == [[0, 1, 2], [1, 3, 2]]
    assert np.array_equal(v[f], soup[faces])


def test_stl_arrives_indexed_unless_asked(tmp_path):
    sphere = trimesh.creation.icosphere(subdivisions=3)
    sphere.export(tmp_path / "s.stl")
    v, f = load_mesh(tmp_path / "s.stl")
    assert (len(v), len(f)) == (len(sphere.vertices), len(sphere.faces))  # 642 vertices, not 3 x 1280
    soup_v, soup_f = load_mesh(tmp_path / "s.stl", merge_vertices=False)
    assert len(soup_v) == 3 * len(sphere.faces)
    assert np.array_equal(_corners(v, f), _corners(soup_v, soup_f))
    ds = ingest_meshes(
        f"memory://{tmp_path.name}/m.zarr", [tmp_path / "s.stl"], chunk_shape=1.0, progress=False
    )
    assert ds.vertex_count() == len(sphere.vertices)
    kept = ingest_meshes(
        f"memory://{tmp_path.name}/k.zarr",
        [tmp_path / "s.stl"],
        chunk_shape=1.0,
        merge_vertices=False,
        progress=False,
    )
    assert kept.vertex_count() == 3 * len(sphere.faces)


@pytest.mark.parametrize("suffix", [".glb", ".gltf", ".ply", ".obj", ".stl"])
def test_mesh_exports_read_back(tmp_path, suffix):
    box = trimesh.creation.box(extents=(4, 4, 4))
    box.apply_translation((5, 5, 5))
    other = trimesh.creation.icosphere(subdivisions=1)
    other.apply_translation((20, 5, 5))
    ds = zv.write_meshes(
        f"memory://{tmp_path.name}/m.zarr",
        [(box.vertices, box.faces), (other.vertices, other.faces)],
        chunk_shape=10,
        object_ids=[7, 9],
    )
    out = tmp_path / f"one{suffix}"
    nv, nf = export_mesh(ds, out, objects=[7])
    back = trimesh.load(out, force="mesh", process=False)
    assert (nv, nf) == (8, 12)
    assert np.allclose(_corners(back.vertices, back.faces), _corners(box.vertices, box.faces), atol=1e-6)
    res = ds.query(([0, 0, 0], [9.9, 9.9, 9.9]))
    export_result(res, tmp_path / f"box{suffix}")
    back = trimesh.load(tmp_path / f"box{suffix}", force="mesh", process=False)
    assert len(back.faces) == len(res.faces) == 12
    if suffix == ".gltf":  # one self-contained file
        assert sorted(p.name for p in tmp_path.iterdir()) == ["box.gltf", "one.gltf"]


def test_mesh_formats_need_faces(tmp_path):
    res = zv.Result(np.zeros((3, 3)))
    with pytest.raises(InputError, match=".glb holds triangle meshes and this result has no faces"):
        export_result(res, tmp_path / "x.glb")
