"""Raw triangle-mesh stores cross between this library and the reference 0.9.2, both ways.

Layouts differ on disk: we keep intra-chunk faces as flat ``0.0.0_0.0.0`` records (with
``link_fragments``); both sides store cross-chunk faces in an undirected canonical family
whose ``perm_idx`` restores the winding. Each side must read the other's faces back with
their winding.

The reference's bbox read (``select(bbox=...).read()`` -> ``read_mesh``): it loads the
chunks the box touches, keeps the vertices with ``lo <= p <= hi`` and only the faces whose
every vertex was kept, i.e. our ``faces="inside"``. It returns no attributes and cannot
select a mesh by object; the driver adds both by matching positions (see its docstring).
"""

from __future__ import annotations

import numpy as np
import pytest
import trimesh

import zarr_vectors as zv
from tests._builders import icosphere

pytestmark = pytest.mark.interop

BOXES = [  # corners chosen to cut chunks of 100 and 250 and both meshes
    (np.array([100.0, 50.0, 120.0]), np.array([560.0, 640.0, 700.0])),
    (np.array([0.0, 400.0, 250.0]), np.array([500.0, 1000.0, 750.0])),
    (np.array([650.0, 250.0, 400.0]), np.array([1000.0, 750.0, 800.0])),
]


def _sphere() -> tuple[np.ndarray, np.ndarray]:
    return icosphere(3, 499.0, 500.0, np.float32)


def _torus() -> tuple[np.ndarray, np.ndarray]:
    m = trimesh.creation.torus(major_radius=150.0, minor_radius=40.0)
    return (m.vertices + [400.0, 600.0, 500.0]).astype(np.float32), m.faces.astype(np.int64)


def _two_objects() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sphere (object 0) and torus (object 1) as one vertex array, faces and per-vertex ids."""
    (v0, f0), (v1, f1) = _sphere(), _torus()
    ids = np.repeat([0, 1], [len(v0), len(v1)])
    return np.concatenate([v0, v1]), np.concatenate([f0, f1 + len(v0)]), ids


def _triangles(positions: np.ndarray, faces: np.ndarray) -> list[tuple[float, ...]]:
    """Faces as sorted position triples, winding kept: each rotated so its smallest vertex
    (lexicographic by position) comes first. A reversed face gives a different triple."""
    faces = np.asarray(faces, np.int64).reshape(-1, 3)
    if not len(faces):
        return []
    _, rank = np.unique(positions, axis=0, return_inverse=True)
    k = rank.reshape(-1)[faces].argmin(axis=1)
    rot = np.stack([faces[np.arange(len(faces)), (k + i) % 3] for i in range(3)], axis=1)
    return sorted(map(tuple, positions[rot].reshape(len(rot), 9).tolist()))


def _rows(positions: np.ndarray) -> list[tuple[float, ...]]:
    return sorted(map(tuple, np.asarray(positions).tolist()))


def _by_position(positions: np.ndarray, values: np.ndarray, at: np.ndarray) -> np.ndarray:
    """``values`` (one per row of ``positions``) looked up at the rows ``at``."""
    lookup = {tuple(p): v for p, v in zip(positions.tolist(), values.tolist())}
    return np.array([lookup[tuple(p)] for p in np.asarray(at).tolist()])


def _brute(v: np.ndarray, f: np.ndarray, lo: np.ndarray, hi: np.ndarray, touching: bool):
    """Expected sub-mesh of the input: (vertex rows, faces into v)."""
    inside = np.all((v >= lo) & (v <= hi), axis=1)
    hit = inside[f].any(axis=1) if touching else inside[f].all(axis=1)
    keep = inside.copy()
    keep[f[hit].ravel()] = True
    return v[keep], f[hit]


def _check_reference_read(got: dict, v: np.ndarray, f: np.ndarray, w: np.ndarray, ids: np.ndarray) -> None:
    assert _rows(got["positions"]) == _rows(v)
    assert _triangles(got["positions"], got["faces"]) == _triangles(v, f)
    assert np.array_equal(got["attr__w"], _by_position(v, w, got["positions"]))
    assert np.array_equal(got["object_ids"], _by_position(v, ids, got["positions"]))


def test_reference_reads_our_mesh(tmp_path, rng, reference):
    v, f = _sphere()
    w = rng.random(len(v)).astype(np.float32)
    store = tmp_path / "ours.zarr"
    ds = zv.write_mesh(store, v, f, chunk_shape=100, attributes={"w": w})
    info = reference.info(store)
    assert info["valid"], info
    assert info["geometry_types"] == ["mesh"] and info["levels"][0]["vertex_count"] == len(v)
    _check_reference_read(reference.read_mesh(tmp_path, store), v, f, w, np.zeros(len(v), np.int64))
    for lo, hi in BOXES[::2]:  # each reference read costs seconds; two boxes suffice here
        box = reference.read_mesh(tmp_path, store, (lo, hi))
        want_v, want_f = _brute(v, f, lo, hi, touching=False)
        assert len(want_f) and len(want_f) < len(f)
        assert _rows(box["positions"]) == _rows(want_v)
        assert _triangles(box["positions"], box["faces"]) == _triangles(v, want_f)
        ours = ds.query(bbox=(lo, hi))  # same semantics as our faces="inside"
        assert _triangles(box["positions"], box["faces"]) == _triangles(ours.positions, ours.faces)


def test_reference_reads_our_objects(tmp_path, rng, reference):
    v, f, ids = _two_objects()
    w = rng.normal(size=len(v)).astype(np.float32)
    store = tmp_path / "ours.zarr"
    meshes = [(v[ids == k], f[ids[f[:, 0]] == k] - np.flatnonzero(ids == k)[0]) for k in (0, 1)]
    zv.write_meshes(
        store,
        [trimesh.Trimesh(*meshes[0], process=False), meshes[1]],
        chunk_shape=250,
        attributes={"w": w},
        object_attributes={"segment": np.array([11, 22])},
    )
    info = reference.info(store)
    assert info["valid"], info
    assert info["levels"][0]["num_objects_present"] == 2
    got = reference.read_mesh(tmp_path, store, objects=True)
    _check_reference_read(got, v, f, w, ids)
    assert got["oattr__segment"].ravel().tolist() == [11, 22]
    assert got["object_list"].tolist() == [0, 1]
    offs = got["object_offsets"]
    for k in (0, 1):  # each manifest lists exactly that mesh's vertices
        assert _rows(got["object_positions"][offs[k] : offs[k + 1]]) == _rows(v[ids == k])
    lo, hi = BOXES[1]
    box = reference.read_mesh(tmp_path, store, (lo, hi))
    want_v, want_f = _brute(v, f, lo, hi, touching=False)
    assert _rows(box["positions"]) == _rows(want_v)
    assert _triangles(box["positions"], box["faces"]) == _triangles(v, want_f)
    assert np.array_equal(box["attr__w"], _by_position(v, w, box["positions"]))


@pytest.mark.parametrize("chunk", [100, 250])
def test_we_read_reference_meshes(tmp_path, rng, reference, chunk):
    v, f, ids = _two_objects()
    w = rng.random(len(v)).astype(np.float32)
    store = tmp_path / "ref.zv"
    reference.write_mesh(
        tmp_path,
        store,
        positions=v,
        faces=f,
        object_ids=ids,
        attr__w=w,
        oattr__segment=np.array([11, 22]),
        chunk_shape=np.full(3, float(chunk)),
    )
    ds = zv.open(store)
    assert ds.geometry_types == ("mesh",)
    full = ds.query()
    assert _rows(full.positions) == _rows(v)
    assert _triangles(full.positions, full.faces) == _triangles(v, f)
    assert np.array_equal(full.attributes["w"], _by_position(v, w, full.positions))
    assert np.array_equal(full.object_ids, _by_position(v, ids, full.positions))
    assert ds.object_attributes("segment").tolist() == [11, 22]
    for lo, hi in BOXES:
        for mode in ("inside", "touching"):
            r = ds.query(bbox=(lo, hi), faces=mode)
            want_v, want_f = _brute(v, f, lo, hi, touching=mode == "touching")
            assert len(want_f), (lo, hi, mode)
            assert _rows(r.positions) == _rows(want_v), (lo, hi, mode)
            assert _triangles(r.positions, r.faces) == _triangles(v, want_f), (lo, hi, mode)
            assert np.array_equal(r.attributes["w"], _by_position(v, w, r.positions))
    for sel in ([0], [1], [1, 0]):
        r = ds.objects(sel)
        mask = np.isin(ids, sel)
        assert _rows(r.positions) == _rows(v[mask])
        assert _triangles(r.positions, r.faces) == _triangles(v, f[mask[f[:, 0]]])
        assert np.array_equal(r.object_ids, _by_position(v, ids, r.positions))
        assert r.object_ids[0] == sel[0]  # grouped by object, in the order asked
    tm = ds.objects([1]).to_trimesh()
    assert tm.is_watertight and tm.is_winding_consistent and tm.volume > 0
