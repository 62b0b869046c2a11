"""Triangle meshes: whole meshes back exactly, sub-meshes of a box against brute force, I/O, bad input."""

from __future__ import annotations

import numpy as np
import pytest
import trimesh

import zarr_vectors as zv
from tests._builders import icosphere
from tests._io import open_counting
from zarr_vectors.errors import CorruptCellError, InputError


def _sphere(sub=3, scale=499.0, offset=500.0):
    return icosphere(sub, scale, offset)


def _canon(faces: np.ndarray) -> set[tuple[int, ...]]:
    """Faces as a set of triangles with winding: each rotated so its smallest index is first."""
    if len(faces) == 0:
        return set()
    k = np.argmin(faces, axis=1)
    rot = np.stack([faces[np.arange(len(faces)), (k + i) % 3] for i in range(3)], axis=1)
    return set(map(tuple, rot.tolist()))


def _input_index(vertices: np.ndarray, positions: np.ndarray) -> np.ndarray:
    lookup = {tuple(p): i for i, p in enumerate(vertices.tolist())}
    return np.array([lookup[tuple(p)] for p in positions.tolist()], np.int64)


@pytest.fixture
def two_meshes():
    v1, f1 = _sphere(3, 300.0, 400.0)
    box = trimesh.creation.box(extents=(250.0, 180.0, 320.0))
    v2, f2 = box.vertices + 650.0, box.faces.astype(np.int64)
    return [(v1, f1), (v2, f2)]


def test_objects_come_back_whole_with_winding(tmp_path, two_meshes):
    names = np.array([11, 22], np.int64)
    ds = zv.write_meshes(
        tmp_path / "m.zarr",
        [trimesh.Trimesh(*two_meshes[0], process=False), two_meshes[1]],
        chunk_shape=100,
        object_attributes={"segment": names},
    )
    assert ds.geometry_types == ("mesh",)
    for oid, (v, f) in enumerate(two_meshes):
        r = ds.objects([oid])
        assert np.array_equal(np.unique(r.object_ids), [oid])
        idx = _input_index(v, r.positions)
        assert sorted(idx.tolist()) == list(range(len(v)))  # every vertex once
        assert _canon(idx[r.faces]) == _canon(f)
    assert ds.object_attributes("segment").tolist() == [11, 22]
    both = ds.objects([1, 0])
    assert both.object_ids[0] == 1 and len(both.faces) == len(two_meshes[0][1]) + len(two_meshes[1][1])


@pytest.mark.parametrize("directed", [False, True])
def test_both_face_families_keep_winding(tmp_path, monkeypatch, directed):
    """Cross-chunk faces are written undirected canonical with perm_idx (as the reference does);
    a store whose face family is directed (faces in input order, no perm_idx) reads the same."""
    import json

    from tests import _oneshot

    v, f = _sphere(3)
    if directed:  # the at-once writer with its face family made directed
        real = _oneshot.write_edges
        monkeypatch.setattr(_oneshot, "write_edges", lambda b, g, p, e, _d, a: real(b, g, p, e, True, a))
        _oneshot.write_mesh_at_once(tmp_path / "m.zarr", v, f, chunk_shape=150)
    else:
        zv.write_mesh(tmp_path / "m.zarr", v, f, chunk_shape=150)
    ds = zv.open(tmp_path / "m.zarr")
    family = json.loads((tmp_path / "m.zarr" / "0" / "links" / "0" / "zarr.json").read_text())["attributes"]
    assert family["directed"] is directed and family["store"] == "canonical"
    arrays = [
        json.loads(z.read_text())["attributes"]
        for z in (tmp_path / "m.zarr" / "0" / "links" / "0").glob("*/zarr.json")
    ]
    assert any(a["has_perm"] for a in arrays) is not directed
    r = ds.objects([0])
    idx = _input_index(v, r.positions)
    assert _canon(idx[r.faces]) == _canon(f)
    lo, hi = np.array([300.0, 300.0, 300.0]), np.array([700.0, 700.0, 1000.0])
    box = ds.query(bbox=(lo, hi))
    inside = np.all((v >= lo) & (v <= hi), axis=1)
    assert _canon(_input_index(v, box.positions)[box.faces]) == _canon(f[inside[f].all(axis=1)])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_box_sub_mesh_inside_and_touching_match_brute_force(tmp_path, seed):
    rng = np.random.default_rng(seed)
    v, f = _sphere(4)
    attr = rng.random(len(v)).astype(np.float32)
    ds = zv.write_mesh(
        tmp_path / "m.zarr", v, f, chunk_shape=rng.choice([100, 137, 250]), attributes={"a": attr}
    )
    for _ in range(4):
        lo = rng.uniform(0, 800, 3)
        hi = lo + rng.uniform(50, 400, 3)
        inside = np.all((v >= lo) & (v <= hi), axis=1)
        r = ds.query(bbox=(lo, hi))
        idx = _input_index(v, r.positions)
        assert sorted(idx.tolist()) == np.flatnonzero(inside).tolist()
        assert np.array_equal(r.attributes["a"], attr[idx])
        assert _canon(idx[r.faces]) == _canon(f[inside[f].all(axis=1)])
        t = ds.query(bbox=(lo, hi), faces="touching")
        touch = f[inside[f].any(axis=1)]
        tidx = _input_index(v, t.positions)
        assert sorted(tidx.tolist()) == sorted(
            set(np.flatnonzero(inside).tolist()) | set(touch.ravel().tolist())
        )
        assert _canon(tidx[t.faces]) == _canon(touch)


def test_result_converts_to_trimesh(tmp_path):
    v, f = _sphere(2)
    mesh = zv.write_mesh(tmp_path / "m.zarr", v, f, chunk_shape=250).objects([0]).to_trimesh()
    assert isinstance(mesh, trimesh.Trimesh)
    assert len(mesh.faces) == len(f) and mesh.is_watertight
    with pytest.raises(ValueError, match="no faces"):
        zv.write_points(tmp_path / "p.zarr", v, chunk_shape=250).query().to_trimesh()


def test_small_box_reads_only_cells_anchored_in_touched_chunks(tmp_path):
    v, f = _sphere(5)
    path = tmp_path / "m.zarr"
    zv.write_mesh(path, v, f, chunk_shape=100)
    ds, counter = open_counting(path)
    lo, hi = np.array([0.0, 400.0, 400.0]), np.array([60.0, 560.0, 560.0])
    r = ds.query(bbox=(lo, hi), object_ids=False)
    keys = [k for b in counter.gets for k in b]
    assert len(counter.gets) == 1
    level = ds.level(0)
    touched = {
        tuple(c)
        for c in np.concatenate([p for p in (level.vertices.nonempty,)]).tolist()
        if all(np.floor(lo / 100) <= c) and all(c <= np.floor(hi / 100))
    }
    origin = level.grid.origin
    cells = {"/".join(map(str, np.array(c) - origin)) for c in touched}
    assert all(k.rsplit("/c/", 1)[1] in cells for k in keys), "a key outside the touched chunks was read"
    n_links = sum(len(a.nonempty) for a in level.links.values())
    assert sum("/links/" in k for k in keys) < n_links / 10
    inside = np.all((v >= lo) & (v <= hi), axis=1)
    assert len(r) == inside.sum() and len(r.faces) == inside[f].all(axis=1).sum()


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["inside", "touching"])
def test_draco_box_decodes_only_the_blobs_it_needs(tmp_path, monkeypatch, mode):
    """A Draco box query decodes the blobs of the touched chunks (and, for faces="touching",
    of the neighbours its faces reach) and no others; its result is exact on the stored positions."""
    from zarr_vectors import _draco

    v, f = _sphere(5)
    ds = zv.write_mesh(tmp_path / "d.zarr", v, f, chunk_shape=100, encoding="draco")
    full = ds.read()
    decoded = []
    real = _draco.decode_cell
    monkeypatch.setattr(
        _draco, "decode_cell", lambda blob, **limits: decoded.append(blob) or real(blob, **limits)
    )
    lo, hi = np.array([0.0, 400.0, 400.0]), np.array([60.0, 560.0, 560.0])
    box = ds.query(bbox=(lo, hi), faces=mode)
    n_blobs = len(ds.level(0).vertices.nonempty)
    touched = [
        c
        for c in ds.level(0).vertices.nonempty.tolist()
        if all(np.floor(lo / 100) <= c) and all(c <= np.floor(hi / 100))
    ]
    if mode == "inside":
        assert len(decoded) == len(touched)
    else:
        assert len(touched) <= len(decoded) <= len(touched) * 27
    assert len(decoded) < n_blobs / 5
    inside = np.all((full.positions >= lo) & (full.positions <= hi), axis=1)
    got_inside = np.all((box.positions >= lo) & (box.positions <= hi), axis=1)
    assert got_inside.sum() == inside.sum()
    want_faces = inside[full.faces].all(axis=1) if mode == "inside" else inside[full.faces].any(axis=1)
    assert len(box.faces) == want_faces.sum()


@pytest.mark.parametrize(
    ("faces", "match"),
    [
        (np.array([[0, 1, 99]]), "outside"),
        (np.array([[0, 1, 1]]), "repeats a vertex"),
        (np.array([[0, 1, 2, 3]]), "only triangles"),
        (np.array([[0.0, 1.0, 2.0]]), "integer"),
    ],
)
def test_bad_faces_are_refused_and_nothing_is_written(tmp_path, faces, match):
    v = np.random.default_rng(0).uniform(0, 10, (5, 3))
    with pytest.raises(InputError, match=match):
        zv.write_mesh(tmp_path / "m.zarr", v, faces, chunk_shape=5)
    assert not (tmp_path / "m.zarr").exists()


def test_nan_vertices_and_faces_across_objects_are_refused(tmp_path):
    v = np.random.default_rng(0).uniform(0, 10, (6, 3))
    f = np.array([[0, 1, 2], [3, 4, 5]])
    bad = v.copy()
    bad[4, 1] = np.nan
    with pytest.raises(InputError, match="NaN|finite"):
        zv.write_mesh(tmp_path / "a.zarr", bad, f, chunk_shape=5)
    with pytest.raises(InputError, match="joins vertices of objects"):
        zv.write_mesh(
            tmp_path / "b.zarr", v, np.array([[0, 1, 3]]), chunk_shape=5, object_ids=[0, 0, 0, 1, 1, 1]
        )
    with pytest.raises(InputError, match="mesh 1"):
        zv.write_meshes(tmp_path / "c.zarr", [(v, f), (v, np.array([[0, 0, 1]]))], chunk_shape=5)


def test_corrupt_face_cell_names_array_and_chunk(tmp_path):
    import struct

    v, f = _sphere(2)
    path = tmp_path / "m.zarr"
    zv.write_mesh(path, v, f, chunk_shape=250, shards=None)  # one file per cell: one is rewritten
    intra = path / "0" / "links" / "0" / "0.0.0_0.0.0" / "c"
    cell = next(p for p in intra.rglob("*") if p.is_file())
    raw = cell.read_bytes()
    payload = raw[8:]
    cell.write_bytes(struct.pack("<II", 1, len(payload) - 1) + payload[:-1])  # not whole rows
    with pytest.raises(CorruptCellError, match=r"0/links/0/0\.0\.0_0\.0\.0.*chunk"):
        zv.open(path).query()


def _match(decoded: np.ndarray, original: np.ndarray) -> tuple[np.ndarray, float]:
    """Index of the nearest original vertex of every decoded one, and the largest per-axis error."""
    dist = np.abs(decoded[:, None, :] - original[None, :, :]).max(axis=2)
    idx = np.argmin(dist, axis=1)
    return idx, float(dist[np.arange(len(decoded)), idx].max())


def test_draco_keeps_every_vertex_and_face_within_the_bound(tmp_path):
    from zarr_vectors_draco import quantization_bound

    v, f = _sphere(3)
    attr = np.arange(len(v), dtype=np.float32)
    ds = zv.write_mesh(tmp_path / "d.zarr", v, f, chunk_shape=250, encoding="draco", attributes={"id": attr})
    assert ds.level(0).vertices.attrs["encoding"] == "draco"
    r = ds.objects([0])
    idx, err = _match(r.positions.astype(np.float64), v)
    assert sorted(idx.tolist()) == list(range(len(v)))  # a bijection: no vertex dropped or merged
    assert err <= quantization_bound(np.array([[0.0] * 3, [250.0] * 3]), 11) + 1e-9
    assert np.array_equal(r.attributes["id"], attr[idx])  # attributes follow the decoded order
    assert _canon(idx[r.faces]) == _canon(f)  # faces exact, winding kept


@pytest.mark.slow
def test_draco_box_query_equals_filtering_the_full_read(tmp_path):
    v, f = _sphere(4)
    ds = zv.write_mesh(tmp_path / "d.zarr", v, f, chunk_shape=100, encoding="draco")
    full = ds.objects([0])
    key = {tuple(p): i for i, p in enumerate(full.positions.tolist())}
    rng = np.random.default_rng(5)
    for _ in range(3):
        lo = rng.uniform(0, 700, 3)
        hi = lo + 300
        inside = np.all((full.positions >= lo) & (full.positions <= hi), axis=1)
        r = ds.query(bbox=(lo, hi))
        idx = np.array([key[tuple(p)] for p in r.positions.tolist()], np.int64)
        assert sorted(idx.tolist()) == np.flatnonzero(inside).tolist()
        assert _canon(idx[r.faces]) == _canon(full.faces[inside[full.faces].all(axis=1)])


def test_reading_draco_without_the_codec_says_what_is_missing(tmp_path, monkeypatch):
    import sys

    from zarr_vectors.errors import FormatError

    v, f = _sphere(1)
    zv.write_mesh(tmp_path / "d.zarr", v, f, chunk_shape=500, encoding="draco")
    monkeypatch.setitem(sys.modules, "zarr_vectors_draco", None)  # the import now fails
    with pytest.raises(FormatError, match="codec draco is not available.*pip install"):
        zv.open(tmp_path / "d.zarr").query()


def test_zarr_python_decodes_a_draco_cell_to_raw_rows(tmp_path):
    import zarr

    v, f = _sphere(2)
    ds = zv.write_mesh(tmp_path / "d.zarr", v, f, chunk_shape=500, encoding="draco")
    arr = zarr.open_array(str(tmp_path / "d.zarr"), path="0/vertices", mode="r")
    cell = tuple(
        slice(int(c), int(c) + 1) for c in ds.level(0).vertices.nonempty[0] - ds.level(0).grid.origin
    )
    # a slice, not integer indexing: zarr-python returns a scalar vlen-bytes read as a 0-d
    # array holding a fixed-width ``S`` array, whose .item() would drop trailing zero bytes
    element = arr[cell].reshape(-1)[0]
    assert isinstance(element, bytes)  # raw vertex rows, like any vlen-bytes element
    rows = np.frombuffer(element, "<f4").reshape(-1, 3)
    full = ds.query(
        bbox=(ds.level(0).vertices.nonempty[0] * 500.0, ds.level(0).vertices.nonempty[0] * 500.0 + 499.999)
    )
    assert rows.shape == full.positions.shape
    assert sorted(map(tuple, rows.tolist())) == sorted(map(tuple, full.positions.tolist()))
    # A fresh interpreter that imports only zarr finds the codec by its entry point.
    import subprocess
    import sys

    script = (
        "import sys, zarr, numpy as np\n"
        f"a = zarr.open_array({str(tmp_path / 'd.zarr')!r}, path='0/vertices', mode='r')\n"
        f"e = a[{cell!r}].reshape(-1)[0]\n"
        "sys.stdout.write(np.frombuffer(e, '<f4').tobytes().hex())\n"
    )
    done = subprocess.run([sys.executable, "-I", "-c", script], capture_output=True, text=True, cwd="/")
    assert done.returncode == 0, done.stderr
    assert bytes.fromhex(done.stdout) == rows.tobytes()


@pytest.mark.slow
def test_object_names_are_string_attributes(tmp_path, two_meshes):
    """Per-object names are UTF-8 ``string`` arrays (vlen-utf8): read back here and by zarr
    itself; objects beyond a short list read as absent (""); mixed lists are refused."""
    import zarr

    path = tmp_path / "m.zarr"
    ds = zv.write_meshes(
        path,
        two_meshes,
        chunk_shape=100,
        object_attributes={"name": ["soma A", "noyau é"], "segment": [17, 42]},
    )
    assert zv.open(path).object_attributes("name").tolist() == ["soma A", "noyau é"]
    assert ds.object_attributes("segment").tolist() == [17, 42]
    assert zarr.open_array(str(path / "0/object_attributes/name"), mode="r")[:].tolist() == [
        "soma A",
        "noyau é",
    ]
    assert zv.validate(path).ok
    short = zv.write_meshes(
        tmp_path / "s.zarr",
        [*two_meshes, two_meshes[0]],
        chunk_shape=100,
        object_attributes={"name": ["only the first"]},
    )
    assert short.object_attributes("name").tolist() == ["only the first", "", ""]
    with pytest.raises(InputError, match="mixes strings with other values"):
        zv.write_meshes(
            tmp_path / "x.zarr", two_meshes, chunk_shape=100, object_attributes={"name": ["a", 3]}
        )
    assert not (tmp_path / "x.zarr").exists()
