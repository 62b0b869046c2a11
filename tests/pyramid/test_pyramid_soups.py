"""Mesh pyramids of triangle soups (vertices repeated per face, as STL files load) and of
meshes whose pieces collapse away: every level validates, closed surfaces stay closed,
and every fine vertex, duplicates included, has a coarse parent."""

from __future__ import annotations

import numpy as np
import pytest
import trimesh

import zarr_vectors as zv
from tests.cli.test_cli_query import _run
from zarr_vectors.errors import InputError
from zarr_vectors.pyramid import meshes as pyramid_meshes
from zarr_vectors.pyramid.meshes import decimate

pytest.importorskip("fast_simplification")


def _soup(subdivisions: int = 4, scale: float = 1.0, shift: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """An icosphere with every face's vertices its own: no vertex is shared."""
    s = trimesh.creation.icosphere(subdivisions)
    v = s.vertices[s.faces].reshape(-1, 3) * scale + shift
    return v, np.arange(len(v)).reshape(-1, 3)


def _same_parent_when_coincident(v: np.ndarray, parent: np.ndarray) -> bool:
    _, group = np.unique(v, axis=0, return_inverse=True)
    group = group.ravel()
    first = np.full(group.max() + 1, -1)
    first[group[::-1]] = parent[::-1]
    return bool(np.array_equal(first[group], parent))


def test_decimating_a_soup_merges_coincident_vertices():
    v, f = _soup(4)
    coarse, tri, parent = decimate(v, f, 0.25)
    assert parent.shape == (len(v),) and set(parent.tolist()) == set(range(len(coarse)))
    assert _same_parent_when_coincident(v, parent)
    mesh = trimesh.Trimesh(coarse, tri, process=False)
    assert mesh.is_watertight and len(tri) == len(f) // 4
    assert np.linalg.norm(coarse[parent] - v, axis=1).max() < 0.5  # collapsed into a nearby vertex


def test_a_merged_mesh_decimates_as_before():
    """Merging keeps a mesh without duplicates in its order: the same result as decimating it directly."""
    import fast_simplification

    s = trimesh.creation.icosphere(3)
    coarse, tri, _ = decimate(s.vertices, s.faces, 0.25)
    pts, faces = fast_simplification.simplify(
        s.vertices, s.faces.astype(np.int32), target_count=len(s.faces) // 4
    )
    np.testing.assert_array_equal(coarse, pts)
    np.testing.assert_array_equal(tri, faces)


def test_faces_collapsing_away_leave_loose_vertices_at_their_centroid():
    """Separate small triangles collapse to nothing: their vertices become loose coarse vertices."""
    rng = np.random.default_rng(2)
    v, f = _soup(3)
    tiny = (rng.uniform(5, 6, (60, 1, 3)) + rng.normal(0, 0.001, (60, 3, 3))).reshape(-1, 3)
    v2 = np.concatenate([v, tiny])
    f2 = np.concatenate([f, len(v) + np.arange(len(tiny)).reshape(-1, 3)])
    coarse, tri, parent = decimate(v2, f2, 0.25)
    assert set(parent.tolist()) == set(range(len(coarse)))
    used = np.unique(tri)
    loose = np.setdiff1d(np.arange(len(coarse)), used)
    assert len(loose) > 0  # some small triangles collapsed away
    for c in loose.tolist():  # each loose vertex is the centroid of the fine vertices it stands for
        np.testing.assert_allclose(coarse[c], v2[parent == c].mean(axis=0))
    assert tri.max() < len(coarse) and np.all((tri[:, 0] != tri[:, 1]) & (tri[:, 1] != tri[:, 2]))


@pytest.mark.slow
@pytest.mark.parametrize("encoding", ["raw", "draco"])
def test_pyramid_of_a_soup_validates_and_stays_closed(tmp_path, encoding):
    meshes = [_soup(4, 90, 110), _soup(3, 60, 300)]
    store = tmp_path / "soup.zarr"
    zv.write_meshes(store, meshes, chunk_shape=60, bounds=([0] * 3, [400] * 3), encoding=encoding)
    zv.open(store, mode="r+").build_pyramid([2, 2], cross_level="explicit")
    report = zv.validate(store)
    assert report.ok, str(report)
    ds = zv.open(store)
    for oid, (v, f) in enumerate(meshes):
        for level in (1, 2):
            coarse = ds.objects([oid], level=level)
            mesh = trimesh.Trimesh(coarse.positions, coarse.faces, process=False)
            assert mesh.is_watertight, (oid, level)
        assert len(ds.objects([oid], level=1).faces) < len(f) // 2


@pytest.mark.slow
def test_soup_stl_through_the_command(tmp_path):
    """The user's path: an STL file ingested, then a pyramid built, by the command."""
    v, f = _soup(4, 50, 100)
    trimesh.Trimesh(v, f, process=False).export(tmp_path / "ball.stl")
    ingest = _run(
        "ingest", "mesh", "ball.stl", "-o", "b.zarr", "--chunk-size", "40", "--no-progress", cwd=tmp_path
    )
    assert ingest.returncode == 0, ingest.stderr
    distinct = len(np.unique(v, axis=0))
    assert distinct < len(v)
    assert zv.open(tmp_path / "b.zarr").vertex_count() == distinct  # identical vertices merged
    kept = _run(
        "ingest", "mesh", "ball.stl", "-o", "k.zarr", "--chunk-size", "40", "--no-progress",
        "--keep-duplicate-vertices", cwd=tmp_path,
    )  # fmt: skip
    assert kept.returncode == 0, kept.stderr
    assert zv.open(tmp_path / "k.zarr").vertex_count() == len(v)  # the soup as it is
    proc = _run("pyramid", "b.zarr", "--factors", "2", "--no-progress", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert zv.validate(tmp_path / "b.zarr").ok
    coarse = zv.open(tmp_path / "b.zarr").objects([0], level=1)
    assert trimesh.Trimesh(coarse.positions, coarse.faces, process=False).is_watertight


def test_an_undecimatable_mesh_says_which_object_why_and_what_to_do(tmp_path, monkeypatch):
    """A simplifier whose output disagrees with its collapse history (here: the real one with
    its last face dropped) cannot be linked to the fine level."""
    import fast_simplification

    class Dropping:
        @staticmethod
        def simplify(*args, **kwargs):
            pts, tri, collapses = fast_simplification.simplify(*args, **kwargs)
            return pts, tri[:-1], collapses

    store = tmp_path / "m.zarr"
    zv.write_meshes(
        store, [_soup(2, 50, 100), _soup(3, 50, 250)], chunk_shape=100, bounds=([0] * 3, [400] * 3)
    )
    monkeypatch.setattr(pyramid_meshes, "_simplifier", lambda: Dropping)
    with pytest.raises(
        InputError,
        match=r"^object 0: cannot decimate a mesh of 960 vertices and 320 faces: "
        r".*does not follow its collapse history.*Repair the mesh.*"
        r"face_fraction=1 \(--face-fraction 1\)",
    ):
        zv.open(store, mode="r+").build_pyramid([2])
    assert zv.open(store).levels == [0]
