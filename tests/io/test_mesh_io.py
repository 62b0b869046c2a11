"""Mesh files in and out: the Python API and the ``zarr-vectors`` command run as a process."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import trimesh

import zarr_vectors as zv
from zarr_vectors.errors import InputError
from zarr_vectors.io.meshes import export_mesh, ingest_meshes


def _cli(*args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "zarr_vectors", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
    )


def _canon(v: np.ndarray, f: np.ndarray) -> set:
    """Faces as position triples rotated to start at the smallest position: winding kept."""
    tri = [tuple(map(tuple, np.round(v[face], 9).tolist())) for face in f]
    return {min(t[i:] + t[:i] for i in range(3)) for t in tri}


@pytest.fixture
def mesh_dir(tmp_path):
    d = tmp_path / "meshes"
    d.mkdir()
    a = trimesh.creation.icosphere(subdivisions=2, radius=40.0)
    a.apply_translation([50, 50, 50])
    b = trimesh.creation.box(extents=(30, 20, 10))
    b.apply_translation([120, 60, 40])
    a.export(d / "a.ply")
    b.export(d / "b.obj")
    (d / "notes.txt").write_text("not a mesh")
    return d, [a, b]


@pytest.mark.slow
def test_ingest_folder_and_export_objects_by_command(tmp_path, mesh_dir):
    d, _ = mesh_dir
    store = tmp_path / "m.zarr"
    proc = _cli("ingest", "mesh", d, "-o", store, "--chunk-size", 32, "--no-progress")
    assert proc.returncode == 0, proc.stderr
    assert "object 0:" in proc.stdout and "a.ply" in proc.stdout and "wrote 2 meshes" in proc.stdout
    assert zv.open(store).object_attributes("name").tolist() == ["a.ply", "b.obj"]
    for oid, name in enumerate(["a.ply", "b.obj"]):
        mesh = trimesh.load(d / name, process=False)  # what ingest read
        out = tmp_path / f"o{oid}.ply"
        proc = _cli("export", "mesh", store, "--object", oid, "-o", out)
        assert proc.returncode == 0, proc.stderr
        back = trimesh.load(out, process=False)
        assert _canon(np.asarray(back.vertices), back.faces) == _canon(np.asarray(mesh.vertices), mesh.faces)
    both = [trimesh.load(d / n, process=False) for n in ("a.ply", "b.obj")]
    proc = _cli("export", "mesh", store, "--object", 0, "--object", 1, "-o", tmp_path / "ab.off")
    assert proc.returncode == 0, proc.stderr
    back = trimesh.load(tmp_path / "ab.off", process=False)
    want = set().union(*(_canon(np.asarray(m.vertices), m.faces) for m in both))
    assert _canon(np.asarray(back.vertices), back.faces) == want
    proc = _cli("export", "swc", store, "--object", 0, "--object", 1, "-o", tmp_path / "x.swc")
    assert proc.returncode == 2 and "exactly one --object ID" in proc.stderr


def test_export_a_box_through_the_api(tmp_path, mesh_dir):
    d, meshes = mesh_dir
    ds = ingest_meshes(
        tmp_path / "m.zarr", sorted(d.glob("*.ply")) + sorted(d.glob("*.obj")), chunk_shape=32, progress=False
    )
    lo, hi = np.array([0.0, 0.0, 0.0]), np.array([60.0, 100.0, 100.0])
    nv, nf = export_mesh(ds, tmp_path / "box.obj", bbox=(lo, hi))
    v, f = np.asarray(meshes[0].vertices), meshes[0].faces
    inside = np.all((v >= lo) & (v <= hi), axis=1)
    assert nv == inside.sum() and nf == inside[f].all(axis=1).sum()


@pytest.mark.slow
def test_unreadable_file_is_named_and_nothing_written(tmp_path, mesh_dir):
    d, _ = mesh_dir
    bad = d / "broken.stl"
    bad.write_bytes(b"solid nonsense\n this is not an stl file")
    store = tmp_path / "m.zarr"
    proc = _cli("ingest", "mesh", d / "a.ply", bad, "-o", store, "--chunk-size", 32)
    assert proc.returncode == 2
    assert "broken.stl" in proc.stderr
    assert not store.exists()
    with pytest.raises(InputError, match="does not exist"):
        ingest_meshes(tmp_path / "x.zarr", [d / "missing.ply"], chunk_shape=10)


def test_export_refuses_non_mesh_stores_and_unknown_suffixes(tmp_path):
    ds = zv.write_points(tmp_path / "p.zarr", np.random.default_rng(0).uniform(0, 10, (50, 3)), chunk_shape=5)
    with pytest.raises(InputError, match="needs a mesh store"):
        export_mesh(ds, tmp_path / "x.ply", objects=[0])
    m = trimesh.creation.box()
    ms = zv.write_mesh(tmp_path / "m.zarr", m.vertices, m.faces, chunk_shape=5)
    with pytest.raises(InputError, match="cannot tell the mesh format"):
        export_mesh(ms, tmp_path / "x.xyz", objects=[0])
