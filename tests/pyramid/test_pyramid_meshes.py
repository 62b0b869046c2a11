"""Mesh pyramids: decimated closed surfaces per object, ids and attributes, Draco levels."""

from __future__ import annotations

import json

import numpy as np
import pytest
import trimesh

import zarr_vectors as zv
from tests._builders import icosphere
from tests.conftest import brute_force_box
from zarr_vectors.errors import InputError, ReadOnlyError
from zarr_vectors.format.shards import inner_codecs
from zarr_vectors.pyramid import Sparsity
from zarr_vectors.pyramid.meshes import decimate

pytest.importorskip("fast_simplification")


def _spheres(subdivisions=3):
    return [icosphere(subdivisions, 90, 110, np.float32), icosphere(subdivisions - 1, 60, 300, np.float32)]


def test_decimate_keeps_a_closed_surface_and_maps_every_vertex():
    s = trimesh.creation.icosphere(subdivisions=3)
    v, f, parent = decimate(s.vertices, s.faces, 0.25)
    mesh = trimesh.Trimesh(v, f, process=False)
    assert mesh.is_watertight and len(f) == len(s.faces) // 4
    assert parent.shape == (len(s.vertices),) and set(parent.tolist()) == set(range(len(v)))
    assert np.linalg.norm(v[parent] - s.vertices, axis=1).max() < 0.5  # collapsed into a nearby vertex
    _, tiny_f, tiny_p = decimate(s.vertices[:4], np.array([[0, 1, 2], [0, 2, 3]]), 0.25)
    assert len(tiny_f) == 2 and tiny_p.tolist() == [0, 1, 2, 3]  # too small to decimate: unchanged


@pytest.mark.slow
def test_mesh_pyramid(tmp_path, rng):
    meshes = _spheres()
    zv.write_meshes(tmp_path / "m.zarr", meshes, chunk_shape=60, bounds=([0] * 3, [400] * 3))
    zv.open(tmp_path / "m.zarr", mode="r+").build_pyramid([2])
    ds = zv.open(tmp_path / "m.zarr")
    assert ds.levels == [0, 1]
    for oid, (v, f) in enumerate(meshes):
        coarse = ds.objects([oid], level=1)
        mesh = coarse.to_trimesh()
        assert mesh.is_watertight and np.all(coarse.object_ids == oid)
        assert 0.2 <= len(coarse.faces) / len(f) <= 0.3
        center, radius = v.mean(axis=0), np.linalg.norm(v - v.mean(axis=0), axis=1).max()
        dist = np.abs(np.linalg.norm(coarse.positions - center, axis=1) - radius)
        assert dist.max() < 2 * float(ds.level(1).grid.bin_shape.max())
    full = ds.read(level=1)
    lo, hi = np.array([40.0, 40, 40]), np.array([200.0, 180, 220])
    got = ds.query((lo, hi), level=1)
    assert len(got) == brute_force_box(full.positions, lo, hi).sum()
    assert np.all(brute_force_box(got.positions, lo, hi)) and np.all(
        brute_force_box(got.positions[got.faces.ravel()], lo, hi)
    )
    lv = json.loads((tmp_path / "m.zarr/1/zarr.json").read_text())["attributes"]["zarr_vectors_level"]
    assert lv["coarsening_algorithm"] == "quadric_edge_collapse" and lv["face_fraction"] == 0.25


def test_mesh_attributes_are_reduced_over_collapsed_vertices(tmp_path):
    (v, f), _ = _spheres(2)
    height = v[:, 2].astype(np.float32)
    zv.write_mesh(
        tmp_path / "m.zarr",
        v,
        f,
        chunk_shape=400,
        bounds=([0] * 3, [400] * 3),
        attributes={"height": height, "part": (v[:, 0] > 110).astype(np.int32)},
    )
    zv.open(tmp_path / "m.zarr", mode="r+").build_pyramid([2], face_fraction=0.5)
    coarse = zv.open(tmp_path / "m.zarr").read(level=1)
    assert coarse.attributes["height"].dtype == np.float32 and coarse.attributes["part"].dtype == np.int32
    assert np.abs(coarse.attributes["height"] - coarse.positions[:, 2]).max() < 40  # means of nearby vertices
    assert set(np.unique(coarse.attributes["part"])) <= {0, 1}


def test_draco_levels_stay_draco(tmp_path):
    (v, f), _ = _spheres(3)
    zv.write_mesh(tmp_path / "d.zarr", v, f, chunk_shape=100, encoding="draco")
    zv.open(tmp_path / "d.zarr", mode="r+").build_pyramid([2])
    doc = json.loads((tmp_path / "d.zarr/1/vertices/zarr.json").read_text())
    assert inner_codecs(doc)[0]["name"] == "draco" and doc["attributes"]["encoding"] == "draco"
    mesh = zv.open(tmp_path / "d.zarr").objects([0], level=1).to_trimesh()
    assert mesh.is_watertight and 0.2 <= len(mesh.faces) / len(f) <= 0.3


def test_mesh_options_are_checked(tmp_path):
    (v, f), _ = _spheres(2)
    zv.write_mesh(tmp_path / "m.zarr", v, f, chunk_shape=100)
    ds = zv.open(tmp_path / "m.zarr", mode="r+")
    with pytest.raises(InputError, match="face_fraction"):
        ds.build_pyramid([2], face_fraction=1.5)
    with pytest.raises(InputError, match="'length' applies"):
        ds.build_pyramid([2], object_sparsity=Sparsity(0.5, by="length"))
    assert zv.open(tmp_path / "m.zarr").levels == [0]


def test_mesh_sparsity_by_size_and_zip_refusal(tmp_path):
    zv.write_meshes(tmp_path / "m.zarr", _spheres(), chunk_shape=100, bounds=([0] * 3, [400] * 3))
    zv.open(tmp_path / "m.zarr", mode="r+").build_pyramid([2], object_sparsity=Sparsity(0.5, by="size"))
    ds = zv.open(tmp_path / "m.zarr")
    assert np.unique(ds.read(level=1).object_ids).tolist() == [0] and ds.num_objects(1) == 2
    assert len(ds.objects([1], level=1)) == 0 and ds.objects([0], level=1).to_trimesh().is_watertight
    zv.write_meshes(tmp_path / "m.zip", _spheres(2), chunk_shape=100)
    with pytest.raises(ReadOnlyError, match="directory copy"):
        zv.open(tmp_path / "m.zip", mode="r+").build_pyramid([2])
