"""Object ids as users have them (DECISIONS 8): sparse int64 / uint64 ids, dense OIDs on disk."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest
import shapely
from hypothesis import given, settings
from hypothesis import strategies as st

import zarr_vectors as zv
from tests._dense_stores import digests, write_dense_stores
from tests.conftest import brute_force_box, sorted_rows
from zarr_vectors.engine.ids import IdMap, IdTableWarning, dense_ids
from zarr_vectors.errors import InputError, UnknownIdError, ZarrVectorsError

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "dense_ids_golden.json"
SEG = np.uint64(720575940621039145)  # a connectomics segment id


def _segment_ids(rng: np.random.Generator, k: int) -> np.ndarray:
    """k distinct uint64 ids near 7.2e17, in no particular order."""
    ids = SEG + rng.choice(10**9, k, replace=False).astype(np.uint64)
    ids[0] = np.uint64(2**64 - 2)  # and one near the top of the range
    return ids


def _zarr_json(store: Path, path: str) -> dict:
    return json.loads((store / path / "zarr.json").read_text())


@pytest.mark.slow
def test_dense_id_stores_are_byte_identical_to_the_recorded_ones(tmp_path):
    """Stores whose ids are already 0..B-1 store no id map: every file matches the digests
    recorded from the writers before sparse ids existed."""
    want = json.loads(GOLDEN.read_text())
    got = digests(write_dense_stores(tmp_path))
    assert sorted(got) == sorted(want)
    changed = [k for k in want if got[k] != want[k]]
    assert not changed, changed[:20]


def test_two_far_apart_ids_write_two_objects_quickly(tmp_path, rng):
    """{5, 1e8}: the cost follows the 2 objects, not the id 1e8 (before: 310 s, 1.2 GB)."""
    pos = rng.uniform(0, 100, (1000, 3))
    oid = np.where(rng.random(1000) < 0.5, 5, 100_000_000)
    t0 = time.perf_counter()
    ds = zv.write_points(tmp_path / "s.zarr", pos, chunk_shape=25, object_ids=oid)
    assert time.perf_counter() - t0 < 20
    assert sum(f.stat().st_size for f in (tmp_path / "s.zarr").rglob("*") if f.is_file()) < 1_000_000
    assert ds.num_objects() == 2
    assert ds.object_ids().tolist() == [5, 100_000_000]
    for k in (5, 100_000_000):
        got = ds.objects([k])
        assert np.array_equal(sorted_rows(got.positions), sorted_rows(pos[oid == k]))
        assert (got.object_ids == k).all()
    full = ds.read()
    assert np.array_equal(sorted_rows(full.positions, full.object_ids), sorted_rows(pos, oid))


@pytest.mark.slow
def test_segment_ids_round_trip_on_points(tmp_path, rng):
    """uint64 ids near 7.2e17 (one near 2**64): reads report them with their dtype, take them,
    and the object attributes follow them (sorted rows, or a mapping)."""
    ids = _segment_ids(rng, 40)
    pos = rng.uniform(0, 500, (5000, 3)).astype(np.float32)
    oid = ids[rng.integers(0, 40, len(pos))]
    users = np.unique(oid)
    volume = rng.random(len(users))
    ds = zv.write_points(
        tmp_path / "s.zarr",
        pos,
        chunk_shape=100,
        bin_shape=50,
        object_ids=oid,
        attributes={"row": np.arange(len(pos))},
        object_attributes={"volume": volume, "name": {int(users[3]): "three", int(users[0]): "zero"}},
    )
    assert ds.num_objects() == len(users)
    assert ds.object_ids().dtype == np.uint64 and np.array_equal(ds.object_ids(), users)
    assert ds.object_attribute_names() == ["name", "volume"]
    assert np.array_equal(ds.object_attributes("object_id"), users)
    assert np.array_equal(ds.object_attributes("volume"), volume)
    assert ds.object_attributes("volume", [users[7], users[2]]).tolist() == [volume[7], volume[2]]
    names = ds.object_attributes("name")
    assert names[3] == "three" and names[0] == "zero" and set(names[[1, 2, 4]]) == {""}
    meta = _zarr_json(tmp_path / "s.zarr", "0/object_attributes/object_id")
    assert meta["data_type"] == "uint64" and meta["shape"] == [len(users)]

    want_rows = np.flatnonzero(np.isin(oid, users[[5, 0]]))
    got = ds.objects(
        [int(users[5]), users[0], users[5]]
    )  # Python int and numpy uint64 alike; repeats read once
    assert got.object_ids.dtype == np.uint64
    assert sorted(got.attributes["row"].tolist()) == want_rows.tolist()
    assert np.array_equal(got.object_ids, oid[got.attributes["row"]])
    first = int((oid == users[5]).sum())
    assert (got.object_ids[:first] == users[5]).all()  # grouped in the order asked

    lo, hi = [50, 100, 0], [300, 420, 350]
    box = ds.query(bbox=(lo, hi))
    assert sorted(box.attributes["row"].tolist()) == np.flatnonzero(brute_force_box(pos, lo, hi)).tolist()
    assert box.object_ids.dtype == np.uint64
    assert np.array_equal(box.object_ids, oid[box.attributes["row"]])


@pytest.mark.parametrize("bad", [SEG + np.uint64(1), -3, 2**64 - 1])
def test_unknown_id_is_a_key_error_naming_it(tmp_path, rng, bad):
    ids = np.array([SEG, SEG + np.uint64(7)], np.uint64)
    ds = zv.write_points(
        tmp_path / "s.zarr", rng.uniform(0, 10, (20, 2)), chunk_shape=5, object_ids=np.repeat(ids, 10)
    )
    for call in (lambda: ds.objects([ids[0], bad]), lambda: ds.object_attributes("object_id", [bad])):
        with pytest.raises(
            UnknownIdError,
            match=rf"object id {int(bad)} is not in level 0: its 2 objects have ids "
            rf"{int(ids[0])} \.\. {int(ids[1])}",
        ) as info:
            call()
        assert isinstance(info.value, KeyError) and isinstance(info.value, ZarrVectorsError)


def test_negative_int64_ids_and_dense_stores_keep_int64(tmp_path, rng):
    pos = rng.uniform(0, 10, (300, 2))
    oid = rng.choice(np.array([-(2**62), -1, 0, 3, 2**62]), 300)
    oid[:5] = [-(2**62), -1, 0, 3, 2**62]
    ds = zv.write_points(
        tmp_path / "s.zarr", pos, chunk_shape=2.5, object_ids=oid, attributes={"row": np.arange(300)}
    )
    assert ds.object_ids().dtype == np.int64 and ds.object_ids().tolist() == [-(2**62), -1, 0, 3, 2**62]
    r = ds.objects([-1])
    assert sorted(r.attributes["row"].tolist()) == np.flatnonzero(oid == -1).tolist()
    assert np.array_equal(ds.read().object_ids, oid[ds.read().attributes["row"]])
    dense = zv.write_points(tmp_path / "d.zarr", pos, chunk_shape=2.5, object_ids=(oid > 0).astype(np.uint64))
    assert dense.object_ids().dtype == np.int64 and dense.object_ids().tolist() == [0, 1]
    assert not (tmp_path / "d.zarr" / "0" / "object_attributes").exists()


def test_rows_indexed_by_id_keep_objects_without_vertices(tmp_path, rng):
    """A sequence covering every id (0..39, object 13 without points) is read as indexed by id:
    no id table, 45 objects; the same ids with rows per distinct id make a sparse store."""
    pos = rng.uniform(0, 100, (2000, 3))
    oid = rng.integers(0, 40, 2000)
    oid[oid == 13] = 14
    ds = zv.write_points(
        tmp_path / "a.zarr",
        pos,
        chunk_shape=50,
        object_ids=oid,
        object_attributes={"v": np.arange(45.0), "w": np.arange(30)},
    )
    # Objects 13 and 40 .. 44 have attribute rows but no vertices: without an id table they
    # read as ids kept as given with gaps (DECISIONS 8 amended), so listings leave them out.
    assert ds.num_objects() == 45 and ds.object_ids().tolist() == [i for i in range(40) if i != 13]
    assert ds.object_attributes("v", [13, 44]).tolist() == [13.0, 44.0]
    assert len(ds.objects([13])) == 0 and len(ds.objects([44])) == 0
    assert "object_id" not in ds.level(0).object_attributes
    # Rows per distinct id: small ids are kept as given (DECISIONS 8), id 13 an empty object.
    sparse = zv.write_points(
        tmp_path / "b.zarr", pos, chunk_shape=50, object_ids=oid, object_attributes={"v": np.arange(39.0)}
    )
    assert sparse.num_objects() == 40 and "object_id" not in sparse.level(0).object_attributes
    assert sparse.object_attributes("v", [12, 14]).tolist() == [12.0, 13.0]
    assert np.isnan(sparse.object_attributes("v", [13])).all() and len(sparse.objects([13])) == 0
    with pytest.raises(UnknownIdError, match="object id 40 is not in level 0"):
        sparse.objects([40])


@pytest.mark.slow
def test_groups_with_sparse_member_and_group_ids(tmp_path, rng):
    ids = _segment_ids(rng, 6)
    pos = rng.uniform(0, 50, (600, 3))
    oid = np.repeat(ids, 100)
    gkeys = [2**63 + 5, 17, 900]
    groups = {gkeys[0]: [ids[0], ids[3]], gkeys[1]: [ids[5]], gkeys[2]: []}
    ds = zv.write_points(
        tmp_path / "s.zarr",
        pos,
        chunk_shape=10,
        object_ids=oid,
        attributes={"row": np.arange(600)},
        groups=groups,
        group_attributes={"size": {gkeys[0]: 2, gkeys[1]: 1}},
    )
    assert ds.group_ids().dtype == np.uint64 and ds.group_ids().tolist() == sorted(gkeys)
    members = ds.groups()
    assert [m.tolist() for m in members] == [[int(ids[5])], [], [int(ids[0]), int(ids[3])]]
    assert all(m.dtype == np.uint64 for m in members)
    assert ds.group_attributes("size").tolist() == [1, np.iinfo(np.int64).min, 2]
    g = ds.group(gkeys[0])
    assert sorted(g.attributes["row"].tolist()) == np.flatnonzero(np.isin(oid, ids[[0, 3]])).tolist()
    with pytest.raises(UnknownIdError, match="group id 18 is not in level 0: its 3 groups have ids"):
        ds.group(18)
    dense = zv.write_points(
        tmp_path / "d.zarr", pos, chunk_shape=10, object_ids=oid, groups={1: [ids[1]], 0: []}
    )
    # Group 0 has no members: kept as given, it is an index without members (DECISIONS 8 amended).
    assert dense.group_ids().tolist() == [1] and "group_id" not in dense.level(0).group_attributes
    assert dense.level(0).groups.length == 2 and len(dense.group(0)) == 0
    with pytest.raises(InputError, match="group attribute name 'group_id' is reserved"):
        zv.write_points(
            tmp_path / "e.zarr",
            pos,
            chunk_shape=10,
            object_ids=oid,
            groups=[[ids[0]]],
            group_attributes={"group_id": [3]},
        )


def _lines(rng, k):
    return [np.cumsum(rng.normal(0, 3, (int(rng.integers(2, 30)), 3)), axis=0) + 50 for _ in range(k)]


@pytest.mark.slow
def test_lines_take_one_id_per_line_and_rows_per_line(tmp_path, rng):
    lines = _lines(rng, 12)
    ids = _segment_ids(rng, 12)
    ds = zv.write_lines(
        tmp_path / "l.zarr",
        lines,
        chunk_shape=8,
        object_ids=ids,
        object_attributes={"n": np.array([len(x) for x in lines])},
        groups=[[ids[4], ids[0]]],
    )
    order = np.argsort(ids)
    assert np.array_equal(ds.object_ids(), ids[order])
    assert np.array_equal(ds.object_attributes("n"), np.array([len(x) for x in lines])[order])
    for i in (0, 4, 11):
        got = ds.objects([ids[i]])
        assert np.array_equal(got.positions, lines[i]) and (got.object_ids == ids[i]).all()
    whole = ds.query(bbox=([40] * 3, [60] * 3), whole_objects=True)
    assert set(whole.object_ids.tolist()) <= set(ids.tolist())
    assert [m.tolist() for m in ds.groups()] == [[int(ids[4]), int(ids[0])]]
    with pytest.raises(InputError, match=f"object_ids name object {int(ids[0])} for several lines"):
        zv.write_lines(tmp_path / "x.zarr", lines[:2], chunk_shape=8, object_ids=[ids[0], ids[0]])


@pytest.mark.slow
def test_skeletons_graphs_and_meshes_with_segment_ids(tmp_path, rng):
    import trimesh

    ids = _segment_ids(rng, 3)
    n = 40
    par = np.r_[-1, np.arange(n - 1)]
    pos = [np.cumsum(rng.normal(0, 4, (n, 3)), axis=0) + 40 * k for k in range(3)]
    sk = zv.write_skeleton(
        tmp_path / "s.zarr",
        np.concatenate(pos),
        np.concatenate([np.where(par >= 0, par + n * k, -1) for k in range(3)]),
        chunk_shape=10,
        object_ids=np.repeat(ids, n),
        object_attributes={"soma": {int(ids[1]): 1.5}},
    )
    for k in range(3):
        got = sk.objects([ids[k]])
        assert np.array_equal(got.positions, pos[k]) and got.parents.tolist() == par.tolist()
    assert (
        np.isnan(sk.object_attributes("soma", [ids[0]])[0])
        and sk.object_attributes("soma", [ids[1]])[0] == 1.5
    )
    edges = np.stack([np.arange(n - 1), np.arange(1, n)], axis=1)
    gr = zv.write_graph(
        tmp_path / "g.zarr", pos[0], edges, chunk_shape=10, object_ids=np.repeat(ids[:2], n // 2)
    )
    half = gr.objects([ids[1]])
    assert sorted(map(tuple, half.positions.tolist())) == sorted(map(tuple, pos[0][n // 2 :].tolist()))
    meshes = [
        trimesh.creation.icosphere(subdivisions=1, radius=1 + k).apply_translation([5 * k, 0, 0])
        for k in range(3)
    ]
    me = zv.write_meshes(
        tmp_path / "m.zarr",
        meshes,
        chunk_shape=2,
        object_ids=ids,
        object_attributes={"r": np.array([1.0, 2.0, 3.0])},
    )
    order = np.argsort(ids)
    assert np.array_equal(me.object_attributes("r"), np.array([1.0, 2.0, 3.0])[order])
    for k in range(3):
        got = me.objects([ids[k]]).to_trimesh()
        assert np.isclose(got.volume, meshes[k].volume) and len(got.faces) == len(meshes[k].faces)
    box = me.query(bbox=([-10] * 3, [3] * 3))
    assert box.object_ids.dtype == np.uint64 and set(box.object_ids.tolist()) <= set(ids.tolist())


def test_geometries_with_feature_ids_and_polygon_queries(tmp_path):
    sq = [shapely.box(3 * k, 0, 3 * k + 2, 2) for k in range(4)]
    feature_ids = [90210, -7, 2**40, 5]
    ds = zv.write_geometries(
        tmp_path / "g.zarr",
        sq,
        chunk_shape=2.5,
        object_ids=feature_ids,
        object_attributes={"k": np.arange(4)},
    )
    assert ds.object_ids().tolist() == sorted(feature_ids)
    assert ds.object_attributes("k", feature_ids).tolist() == [0, 1, 2, 3]
    ids, geoms = ds.objects([2**40, -7]).to_shapely()
    assert ids.tolist() == [-7, 2**40]
    assert geoms[0].equals(sq[1]) and geoms[1].equals(sq[2])
    hit = ds.query(polygon=shapely.box(2.5, -1, 6.5, 3), whole_objects=True)
    assert sorted(set(hit.object_ids.tolist())) == [-7, 2**40]
    pts = zv.write_geometries(
        tmp_path / "p.zarr",
        [shapely.Point(1, 1), shapely.MultiPoint([(4, 4), (5, 5)])],
        chunk_shape=2,
        object_ids=np.array([2**64 - 1, 3], np.uint64),
    )
    ids, geoms = pts.query(polygon=shapely.box(0, 0, 6, 6)).to_shapely()
    assert ids.tolist() == [3, 2**64 - 1] and geoms[0].equals(shapely.MultiPoint([(4, 4), (5, 5)]))


@pytest.mark.slow
def test_pyramids_keep_the_users_ids_at_every_level(tmp_path, rng):
    ids = _segment_ids(rng, 30)
    pos = rng.uniform(0, 400, (20000, 3))
    oid = ids[rng.integers(0, 30, len(pos))]
    ds = zv.write_points(tmp_path / "p.zarr", pos, chunk_shape=100, object_ids=oid)
    ds = zv.open(tmp_path / "p.zarr", mode="r+")
    ds.build_pyramid([2, 2])
    for level in (1, 2):
        res = ds.read(level=level)
        assert res.object_ids.dtype == np.uint64 and set(res.object_ids.tolist()) == set(ids.tolist())
        one = ds.objects([ids[3]], level=level)
        assert len(one) and (one.object_ids == ids[3]).all()
        lo, hi = pos[oid == ids[3]].min(axis=0), pos[oid == ids[3]].max(axis=0)
        assert brute_force_box(one.positions, lo, hi).all()  # metavertices stay inside their object's rows
        assert np.array_equal(ds.object_ids(level), np.sort(ids))
    k = ds.level_for(max_vertices=len(ds.read(level=2)))
    assert np.array_equal(np.unique(ds.read(level=k).object_ids), np.sort(ids))
    lines = _lines(rng, 10)
    lids = _segment_ids(rng, 10)
    zv.write_lines(tmp_path / "l.zarr", lines, chunk_shape=10, object_ids=lids)
    ln = zv.open(tmp_path / "l.zarr", mode="r+")
    ln.build_pyramid([2])
    for i in range(10):
        coarse = ln.objects([lids[i]], level=1)
        assert (coarse.object_ids == lids[i]).all()
        assert np.array_equal(coarse.positions[[0, -1]], lines[i][[0, -1]])  # end points are kept


@pytest.mark.slow
def test_cli_ingest_uses_integer_file_names_as_ids(tmp_path, rng):
    import subprocess
    import sys

    folder = tmp_path / "swc"
    folder.mkdir()
    names = [str(int(SEG) + 11), str(int(SEG) + 3), "18446744073709551615"]
    for k, name in enumerate(names):
        rows = [f"{i + 1} 3 {10 * k + i} {i} 0 1.0 {i if i else -1}" for i in range(5)]
        (folder / f"{name}.swc").write_text("\n".join(rows) + "\n")

    def run(*args):
        return subprocess.run(
            [sys.executable, "-m", "zarr_vectors", *args],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=tmp_path,
        )

    out = run("ingest", "swc", str(folder), "-o", "n.zarr", "--chunk-size", "20", "--no-progress")
    assert out.returncode == 0, out.stderr
    ds = zv.open(tmp_path / "n.zarr")
    assert ds.object_ids().dtype == np.uint64 and ds.object_ids().tolist() == sorted(int(n) for n in names)
    assert ds.object_attributes("name", [int(names[0])]).tolist() == [f"{names[0]}.swc"]
    out = run("export", "swc", "n.zarr", "--object", "18446744073709551615", "-o", "top.swc")
    assert out.returncode == 0, out.stderr
    assert [
        float(line.split()[2])
        for line in (tmp_path / "top.swc").read_text().splitlines()
        if not line.startswith("#")
    ] == [20.0, 21.0, 22.0, 23.0, 24.0]
    out = run("query", "n.zarr", "--objects", names[1], "--count")
    assert out.returncode == 0 and out.stdout.strip() == "5 vertices, 1 objects, 4 edges", (
        out.stdout + out.stderr
    )
    out = run("export", "swc", "n.zarr", "--object", "18446744073709551616", "-o", "x.swc")
    assert out.returncode == 2 and "outside the 64-bit id range" in out.stderr
    out = run("export", "swc", "n.zarr", "--object", "5", "-o", "x.swc")
    assert out.returncode == 2 and "object id 5 is not in level 0: its 3 objects have ids" in out.stderr
    out = run(
        "ingest",
        "swc",
        str(folder),
        "-o",
        "s.zarr",
        "--chunk-size",
        "20",
        "--no-progress",
        "--sequential-ids",
    )
    assert out.returncode == 0, out.stderr
    assert zv.open(tmp_path / "s.zarr").object_ids().tolist() == [0, 1, 2]
    (folder / "0011.swc").write_text((folder / f"{names[1]}.swc").read_text())
    (folder / "11.swc").write_text((folder / f"{names[1]}.swc").read_text())
    out = run("ingest", "swc", str(folder), "-o", "d.zarr", "--chunk-size", "20", "--no-progress")
    assert out.returncode == 2 and "both have object id 11" in out.stderr and "--sequential-ids" in out.stderr


def test_mesh_ingest_uses_integer_file_names_as_ids(tmp_path):
    import trimesh

    from zarr_vectors.io.meshes import ingest_meshes

    names = ["720575940621039145.ply", "9.ply", "10.ply"]
    for k, name in enumerate(names):
        trimesh.creation.icosphere(subdivisions=1, radius=1 + k).apply_translation([5 * k, 0, 0]).export(
            tmp_path / name
        )
    ds = ingest_meshes(tmp_path / "m.zarr", [tmp_path / n for n in names], chunk_shape=3, progress=False)
    assert ds.object_ids().tolist() == [9, 10, 720575940621039145]
    assert ds.object_attributes("name").tolist() == ["9.ply", "10.ply", "720575940621039145.ply"]
    assert np.isclose(
        ds.objects([720575940621039145]).to_trimesh().volume,
        trimesh.creation.icosphere(subdivisions=1, radius=1).volume,
    )
    seq = ingest_meshes(
        tmp_path / "s.zarr",
        [tmp_path / n for n in names],
        chunk_shape=3,
        progress=False,
        ids_from_names=False,
    )
    assert seq.object_ids().tolist() == [0, 1, 2] and seq.object_attributes("name").tolist() == names


def test_an_id_table_that_is_not_one_is_read_as_an_attribute(tmp_path, rng):
    store = tmp_path / "s.zarr"
    zv.write_points(store, rng.uniform(0, 10, (20, 2)), chunk_shape=5, object_ids=np.repeat([5, 10**8], 10))
    chunk = store / "0" / "object_attributes" / "object_id" / "c" / "0"
    chunk.write_bytes(np.array([10**8, 5], "<i8").tobytes() + chunk.read_bytes()[16:])
    ds = zv.open(store)
    with pytest.warns(IdTableWarning, match="0/object_attributes/object_id is not an id table"):
        assert ds.object_ids().tolist() == [0, 1]
    assert "object_id" in ds.object_attribute_names()
    assert len(ds.objects([1])) == 10


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(-(2**63), 2**63 - 1), min_size=1, max_size=50),
    st.sampled_from(["small", "wide", "unsigned"]),
)
def test_dense_numbering_is_ascending_and_invertible(values, kind):
    if kind == "small":
        arr = np.abs(np.asarray(values, np.int64) % 60)
    elif kind == "unsigned":
        arr = np.asarray(values, np.int64).view(np.uint64)
    else:
        arr = np.asarray(values, np.int64)
    d = dense_ids(arr)
    user = np.arange(d.count) if d.user is None else d.user
    assert np.array_equal(user[d.dense], arr)
    assert np.all(np.diff(user.astype(object)) > 0) if len(user) > 1 else True
    assert d.user is None or d.user.dtype == arr.dtype
    m = IdMap(d.user, d.count)
    assert np.array_equal(m.to_oids(arr), d.dense)
    assert np.array_equal(m.to_user(d.dense), arr)
    queries = np.asarray(values, np.int64)
    _, found = m.lookup(queries)
    held = {int(v) for v in arr}
    assert found.tolist() == [int(q) in held for q in queries]


def test_geojson_round_trip_keeps_feature_ids(tmp_path):
    """export_geojson writes each feature's id as the property object_id; ingest_vector takes
    it back as the object ids (uint64 exactly), and a property object_id that is not one
    distinct integer per feature is kept as object_id_ with a warning."""
    from zarr_vectors.io.geojson import PropertiesSkippedWarning, export_geojson, ingest_vector

    sq = [shapely.box(3 * k, 0, 3 * k + 2, 2) for k in range(3)]
    ids = np.array([2**64 - 1, int(SEG), 7], np.uint64)
    ds = zv.write_geometries(
        tmp_path / "a.zarr", sq, chunk_shape=2.5, object_ids=ids, object_attributes={"k": [1, 2, 3]}
    )
    export_geojson(ds.read(), tmp_path / "a.geojson")
    back = ingest_vector(tmp_path / "b.zarr", tmp_path / "a.geojson", chunk_shape=2.5)
    assert back.object_ids().dtype == np.uint64 and np.array_equal(back.object_ids(), np.sort(ids))
    assert back.object_attribute_names() == ["geom_type", "k"]
    assert back.object_attributes("k", ids).tolist() == [1, 2, 3]
    got_ids, geoms = back.objects([2**64 - 1]).to_shapely()
    assert got_ids.tolist() == [2**64 - 1] and geoms[0].equals(sq[0])
    doc = {
        "type": "FeatureCollection",
        "features": [
            {
                "type": "Feature",
                "geometry": {"type": "Point", "coordinates": [k, k]},
                "properties": {"object_id": "a"},
            }
            for k in range(2)
        ],
    }
    (tmp_path / "c.geojson").write_text(json.dumps(doc))
    with pytest.warns(PropertiesSkippedWarning, match="'object_id' stored as 'object_id_'"):
        other = ingest_vector(tmp_path / "c.zarr", tmp_path / "c.geojson", chunk_shape=2.5)
    assert other.object_ids().tolist() == [0, 1] and other.object_attributes("object_id_").tolist() == [
        "a",
        "a",
    ]
