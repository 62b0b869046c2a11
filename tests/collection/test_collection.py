"""Collections: the RFC-8 layout, members that open alone, related() against numpy brute force
(uint64 ids near 2**64, several index chunks), edits keeping the index exact, error paths."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import zarr_vectors as zv
from zarr_vectors.collection import index as rel_index

TOP = np.uint64(2**64 - 1)


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Index buckets of about 4 rows and build batches of 3 member chunks: lookups and edits
    cross many buckets."""
    monkeypatch.setattr(rel_index, "BUCKET_ROWS", 4)
    monkeypatch.setattr(rel_index, "BUILD_BATCH", 3)


def _synapses(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    pos = rng.uniform(0, 40, (n, 3)).astype("float32")
    # Ids packed just below 2**64 and a few small ones: uint64 end to end.
    post = np.where(
        rng.random(n) < 0.8,
        TOP - rng.integers(0, 30, n).astype(np.uint64),
        rng.integers(0, 5, n).astype(np.uint64),
    )
    pre = rng.integers(0, 50, n).astype(np.uint64)
    assert post.dtype == np.uint64 and int(post.max()) > 2**64 - 31  # exact ids near 2**64
    return pos, post, pre


def _collection(tmp_path: Path, n: int = 600) -> tuple[zv.Collection, np.ndarray, np.ndarray, np.ndarray]:
    pos, post, pre = _synapses(n)
    coll = zv.create_collection(tmp_path / "c.zarr", id_spaces={"segments": {"description": "neurons"}})
    coll.add_member(
        "synapses",
        "points",
        pos,
        chunk_shape=10,
        bounds=([0, 0, 0], [40, 40, 40]),
        attributes={"post_segment": post, "pre_segment": pre},
        role="synapses",
        relationships={"post_segment": "segments", "pre_segment": "segments"},
    )
    return coll, pos, post, pre


def _rows(positions: np.ndarray, values: np.ndarray) -> list[tuple[tuple[float, ...], int]]:
    """Sorted (position, id) rows; ids stay exact Python ints (float64 would merge 2**64 - 1 and - 2)."""
    ids = np.asarray(values).reshape(len(positions)).astype(np.uint64).tolist()
    return sorted(zip(map(tuple, positions.astype(np.float64).tolist()), ids))


def _check_related(
    coll: zv.Collection, ids: list[int], attr: str, pos: np.ndarray, vals: np.ndarray, attributes: Any = None
) -> None:
    res = coll.related(ids, attr, attributes=attributes)
    got = res.attributes[attr].reshape(-1)
    # Grouped by id in the order given (first occurrence), each group exactly numpy's rows.
    order = list(dict.fromkeys(int(i) for i in ids))
    expected_ids = [i for i in order for _ in range(int((vals == np.uint64(i)).sum()))]
    assert got.tolist() == expected_ids
    for i in order:
        mine = got == np.uint64(i)
        truth = vals == np.uint64(i)
        assert _rows(res.positions[mine], got[mine]) == _rows(pos[truth], vals[truth])


def test_related_equals_brute_force_near_2_64(tmp_path: Path, small_chunks: None) -> None:
    coll, pos, post, pre = _collection(tmp_path)
    ids = [int(TOP), int(TOP) - 7, 3, int(TOP) - 29, 0, int(TOP) - 7, 12345]  # repeats and an absent id
    _check_related(coll, ids, "post_segment", pos, post)
    _check_related(coll, [49, 0, 17], "pre_segment", pos, pre)
    _check_related(coll, ids, "post_segment", pos, post, attributes=False)
    _check_related(coll, ids, "post_segment", pos, post, attributes=["post_segment"])
    assert len(coll.related([12345, 2**63], "post_segment")) == 0
    assert len(coll.related([], "post_segment")) == 0


def test_related_with_default_chunks_and_every_id(tmp_path: Path) -> None:
    coll, pos, post, _pre = _collection(tmp_path, n=300)
    ids = np.unique(post)
    res = coll.related(ids, "post_segment")
    assert len(res) == len(post)
    assert _rows(res.positions, res.attributes["post_segment"]) == _rows(pos, post)


def test_layout_is_an_rfc8_collection_and_members_open_alone(tmp_path: Path) -> None:
    coll, pos, post, _pre = _collection(tmp_path, n=200)
    doc = json.loads((tmp_path / "c.zarr" / "zarr.json").read_text())
    assert doc["zarr_format"] == 3 and doc["node_type"] == "group"
    ome = doc["attributes"]["ome"]
    assert ome["type"] == "collection" and ome["name"] == "c.zarr"
    assert ome["attributes"]["zv:idSpaces"] == {"segments": {"description": "neurons"}}
    (node,) = ome["nodes"]
    assert node["type"] == "zv:vectors" and node["name"] == node["id"] == "synapses"
    assert node["path"] == {"type": "zarr", "path": "./synapses"}
    assert node["attributes"]["zv:role"] == "synapses"
    assert node["attributes"]["zv:kind"] == "point_cloud"
    assert node["attributes"]["zv:relationships"] == {"post_segment": "segments", "pre_segment": "segments"}
    # Every key this project adds to RFC-8 attributes is prefixed.
    assert all(k.startswith("zv:") for k in [*ome["attributes"], *node["attributes"]])

    opened = zv.open(tmp_path / "c.zarr")
    assert isinstance(opened, zv.Collection)
    assert list(opened.members) == ["synapses"]
    assert opened.members["synapses"].relationships == {"post_segment": "segments", "pre_segment": "segments"}
    alone = zv.open(tmp_path / "c.zarr" / "synapses")
    assert isinstance(alone, zv.Dataset) and alone.vertex_count() == len(pos)
    box = alone.query(([0, 0, 0], [20, 20, 20]))
    inside = np.all((pos >= 0) & (pos <= 20), axis=1)
    assert _rows(box.positions, box.attributes["post_segment"]) == _rows(pos[inside], post[inside])
    report = zv.validate(tmp_path / "c.zarr" / "synapses")
    assert report.ok, report.problems
    assert opened.related([int(post[0])], "post_segment").attributes["post_segment"].tolist() == [
        int(post[0])
    ] * int((post == post[0]).sum())


def test_query_gives_one_result_per_member(tmp_path: Path) -> None:
    coll, pos, post, _pre = _collection(tmp_path, n=200)
    rng = np.random.default_rng(1)
    spos = rng.uniform(0, 40, (30, 3))
    parents = np.r_[-1, np.arange(29)]
    coll.add_member(
        "skeletons", "skeleton", spos, parents, chunk_shape=10, object_ids=[7] * 30, id_space="segments"
    )
    out = coll.query(([0, 0, 0], [15, 15, 15]))
    assert sorted(out) == ["skeletons", "synapses"]
    inside = np.all(pos <= 15, axis=1)
    assert _rows(out["synapses"].positions, out["synapses"].attributes["post_segment"]) == _rows(
        pos[inside], post[inside]
    )
    assert len(out["skeletons"]) == int(np.all(spos <= 15, axis=1).sum())
    only = coll.query(([0, 0, 0], [15, 15, 15]), members=["skeletons"])
    assert list(only) == ["skeletons"]


def test_objects_across_members_equal_each_members_objects(tmp_path: Path) -> None:
    coll = zv.create_collection(tmp_path / "c.zarr", id_spaces=["segments"])
    big = 2**64 - 3
    rng = np.random.default_rng(2)
    spos = rng.uniform(0, 40, (20, 3))
    parents = np.r_[-1, np.arange(9), -1, np.arange(10, 19)]
    ids = np.array([big] * 10 + [5] * 10, np.uint64)
    coll.add_member(
        "skeletons", "skeleton", spos, parents, chunk_shape=10, object_ids=ids, id_space="segments"
    )
    ppos = rng.uniform(0, 40, (12, 3))
    coll.add_member(
        "somas", "points", ppos, chunk_shape=10, object_ids=np.array([5] * 12, np.uint64), id_space="segments"
    )
    got = coll.objects([big, 5])
    assert sorted(got) == ["skeletons", "somas"]
    direct = coll.member("skeletons").objects([big, 5])
    assert np.array_equal(got["skeletons"].positions, direct.positions)
    assert np.array_equal(got["skeletons"].object_ids, direct.object_ids)
    # The soma member holds no object 2**64 - 3: it is left out, not an error.
    assert np.array_equal(got["somas"].positions, coll.member("somas").objects([5]).positions)


def test_edits_through_the_collection_keep_related_exact(tmp_path: Path, small_chunks: None) -> None:
    coll, pos, post, pre = _collection(tmp_path, n=150)
    coll = zv.open(tmp_path / "c.zarr", "r+")
    more, mpost, mpre = _synapses(40, seed=9)
    coll.append("synapses", more, attributes={"post_segment": mpost, "pre_segment": mpre})
    pos, post = np.concatenate([pos, more]), np.concatenate([post, mpost])
    _check_related(coll, [int(TOP), 2, int(TOP) - 11], "post_segment", pos, post)


def test_an_edit_outside_the_collection_is_refused_until_rebuilt(tmp_path: Path) -> None:
    coll, pos, post, _pre = _collection(tmp_path, n=100)
    more, mpost, mpre = _synapses(10, seed=4)
    ds = zv.open(tmp_path / "c.zarr" / "synapses", "r+")
    ds.append(more, attributes={"post_segment": mpost, "pre_segment": mpre})
    fresh = zv.open(tmp_path / "c.zarr", "r+")
    with pytest.raises(zv.StaleIndexError, match="older than the store.*rebuild it"):
        fresh.related([int(TOP)], "post_segment")
    fresh.build_index("synapses")
    _check_related(
        fresh, [int(TOP), 1], "post_segment", np.concatenate([pos, more]), np.concatenate([post, mpost])
    )


def test_error_paths(tmp_path: Path) -> None:
    coll, _pos, _post, _pre = _collection(tmp_path, n=50)
    with pytest.raises(
        zv.InputError, match="no member 'meshes' in the collection \\(members: \\['synapses'\\]\\)"
    ):
        coll.member("meshes")
    with pytest.raises(zv.InputError, match="no member 'meshes'"):
        coll.query(None, members=["meshes"])
    with pytest.raises(zv.InputError, match="no member declares relationship 'cell_type'"):
        coll.related([1], "cell_type")
    with pytest.raises(zv.InputError, match="member 'synapses' declares no relationship 'cell_type'"):
        coll.related([1], "cell_type", member="synapses")
    with pytest.raises(zv.InputError, match="related ids must be non-negative"):
        coll.related([-1], "post_segment")
    with pytest.raises(zv.InputError, match=r"names id space\(s\) \['axons'\] the collection does not list"):
        coll.add_member("x", "points", [[0, 0, 0]], chunk_shape=1, relationships={"a": "axons"})
    with pytest.raises(zv.StoreExistsError, match="already has a member 'synapses'"):
        coll.add_member("synapses", "points", [[0, 0, 0]], chunk_shape=1)
    with pytest.raises(zv.InputError, match="unknown member kind 'cloud'"):
        coll.add_member("y", "cloud", [[0, 0, 0]])
    with pytest.raises(zv.InputError, match="must match"):
        coll.add_member("../up", "points", [[0, 0, 0]])
    with pytest.raises(zv.InputError, match="is not a vertex attribute"):
        coll.add_member("z", "points", [[0, 0, 0]], chunk_shape=1, relationships={"nope": "segments"})
    reading = zv.open(tmp_path / "c.zarr")
    with pytest.raises(zv.InputError, match="open it with mode='r\\+'"):
        reading.add_member("w", "points", [[0, 0, 0]], chunk_shape=1)
    with pytest.raises(zv.StoreExistsError, match="is not empty"):
        zv.create_collection(tmp_path / "c.zarr", id_spaces=["segments"])
    with pytest.raises(zv.InputError, match="must be prefixed"):
        zv.create_collection(tmp_path / "d.zarr", attributes={"color": "red"})


def test_a_store_that_is_no_collection_still_fails_to_open(tmp_path: Path) -> None:
    (tmp_path / "g").mkdir()
    (tmp_path / "g" / "zarr.json").write_text(
        json.dumps({"zarr_format": 3, "node_type": "group", "attributes": {}})
    )
    with pytest.raises(zv.FormatError):
        zv.open(tmp_path / "g")


def test_registering_and_moving_in_existing_stores(tmp_path: Path) -> None:
    coll = zv.create_collection(tmp_path / "c.zarr", id_spaces=["segments"])
    pos, post, _pre = _synapses(80, seed=3)
    zv.write_points(tmp_path / "outside", pos, chunk_shape=10, attributes={"post_segment": post})
    coll.add_member("moved", source=tmp_path / "outside", relationships={"post_segment": "segments"})
    assert not (tmp_path / "outside").exists()
    zv.write_points(tmp_path / "c.zarr" / "here", pos, chunk_shape=10, attributes={"post_segment": post})
    coll.add_member("here", relationships={"post_segment": "segments"})
    reopened = zv.open(tmp_path / "c.zarr")
    assert list(reopened.members) == ["moved", "here"]
    for name in ("moved", "here"):
        res = reopened.related([int(TOP)], "post_segment", member=name)
        assert _rows(res.positions, res.attributes["post_segment"]) == _rows(
            pos[post == TOP], post[post == TOP]
        )
    with pytest.raises(zv.InputError, match="choose one with member="):
        reopened.related([1], "post_segment")


def test_memory_collection(small_chunks: None) -> None:
    coll = zv.create_collection("memory://coll-test-mem", id_spaces=["segments"])
    pos, post, _pre = _synapses(60, seed=5)
    coll.add_member(
        "s",
        "points",
        pos,
        chunk_shape=10,
        attributes={"post_segment": post},
        relationships={"post_segment": "segments"},
    )
    opened = zv.open("memory://coll-test-mem")
    assert isinstance(opened, zv.Collection)
    _check_related(opened, [int(TOP), 4], "post_segment", pos, post)


def test_the_reference_reads_a_raw_member(tmp_path: Path, reference: Any) -> None:
    """The reference 0.9.2 reads a member (relationship index inside) as any store."""
    _coll, pos, post, _pre = _collection(tmp_path, n=200)
    store = tmp_path / "c.zarr" / "synapses"
    info = reference.info(store)
    assert info["valid"], info
    got = reference.read_points(tmp_path, store)
    assert sorted(map(tuple, got["positions"].tolist())) == sorted(
        map(tuple, pos.astype(np.float64).tolist())
    )


def _join_collection(tmp_path: Path) -> tuple[zv.Collection, Any, Any]:
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(11)
    seg_ids = np.array([2**64 - 1, 2**64 - 2, 7, 9, 2**63 + 5], np.uint64)
    kinds = np.array(["basket", "pyramidal", "basket", "chandelier", "pyramidal"])
    size = np.array([1.5, 2.0, 3.0, 0.5, 8.0])
    soma = rng.uniform(0, 40, (len(seg_ids), 3))
    n = 400
    pos = rng.uniform(0, 40, (n, 3)).astype("float32")
    post = seg_ids[rng.integers(0, len(seg_ids), n)]
    score = rng.uniform(0, 1, n).astype("float32")
    coll = zv.create_collection(tmp_path / "j.zarr", id_spaces=["segments"])
    coll.add_member(
        "neurons",
        "points",
        soma,
        chunk_shape=20,
        object_ids=seg_ids,
        object_attributes={
            "cell_type": dict(zip(seg_ids.tolist(), kinds.tolist())),
            "size": dict(zip(seg_ids.tolist(), size.tolist())),
        },
        id_space="segments",
    )
    coll.add_member(
        "synapses",
        "points",
        pos,
        chunk_shape=10,
        attributes={"post_segment": post, "score": score},
        relationships={"post_segment": "segments"},
    )
    syn = pd.DataFrame({"x": pos[:, 0], "y": pos[:, 1], "z": pos[:, 2], "post_segment": post, "score": score})
    seg = pd.DataFrame({"post_segment": seg_ids, "cell_type": kinds, "size": size})
    return coll, syn.merge(seg, on="post_segment"), pd


@pytest.mark.parametrize(
    "where, select",
    [
        ("post_segment.cell_type == 'basket'", lambda m: m.cell_type == "basket"),
        (
            'post_segment.cell_type != "basket" and score > 0.5',
            lambda m: (m.cell_type != "basket") & (m.score > 0.5),
        ),
        (
            "post_segment.size >= 2 and post_segment.cell_type == 'pyramidal'",
            lambda m: (m["size"] >= 2) & (m.cell_type == "pyramidal"),
        ),
        ("post_segment.cell_type == 'and'", lambda m: m.cell_type == "and"),
    ],
)
def test_where_across_the_relationship_equals_a_pandas_merge(tmp_path: Path, where: str, select: Any) -> None:
    coll, merged, _pd = _join_collection(tmp_path)
    lo, hi = [0, 0, 0], [30, 40, 25]
    got = coll.query((lo, hi), members=["synapses"], where=where)["synapses"]
    inside = (merged.x <= 30) & (merged.z <= 25)
    want = merged[select(merged) & inside]
    assert len(want) > 0 or "'and'" in where
    assert _rows(got.positions, got.attributes["post_segment"]) == _rows(
        want[["x", "y", "z"]].to_numpy(np.float32), want.post_segment.to_numpy(np.uint64)
    )


def test_where_across_an_unknown_relationship_or_attribute(tmp_path: Path) -> None:
    coll, _merged, _pd = _join_collection(tmp_path)
    with pytest.raises(zv.InputError, match="'pre_segment' in .* is not a relationship of the member"):
        coll.query(None, members=["synapses"], where="pre_segment.cell_type == 'basket'")
    with pytest.raises(
        zv.InputError, match="no member of id space 'segments' has the object attribute 'colour'"
    ):
        coll.query(None, members=["synapses"], where="post_segment.colour == 'red'")


def test_related_from_the_index_alone_reads_no_cell(tmp_path: Path, small_chunks: None) -> None:
    coll, pos, post, pre = _collection(tmp_path, n=300)
    full = coll.related([int(TOP), 1], "post_segment")
    assert full.object_ids is None and sorted(full.attributes) == ["post_segment", "pre_segment"]
    # Without the member's vertex cells, only the index can answer: rows with attributes too.
    shutil.rmtree(tmp_path / "c.zarr" / "synapses" / "0" / "vertices" / "c")
    for name in ("post_segment", "pre_segment"):
        shutil.rmtree(tmp_path / "c.zarr" / "synapses" / "0" / "vertex_attributes" / name / "c")
    fresh = zv.open(tmp_path / "c.zarr")
    ids = [int(TOP), 1, int(TOP) - 3]
    _check_related(fresh, ids, "post_segment", pos, post, attributes=False)
    _check_related(fresh, ids, "post_segment", pos, post)
    res = fresh.related(ids, "post_segment", attributes=["pre_segment"])
    assert sorted(res.attributes) == ["pre_segment"]
    truth = np.isin(post, np.array(ids, np.uint64))
    got = sorted(zip(map(tuple, res.positions.tolist()), res.attributes["pre_segment"].tolist()))
    assert got == sorted(zip(map(tuple, pos[truth].astype(np.float64).tolist()), pre[truth].tolist()))
    with pytest.raises(zv.InputError, match="\\['colour'\\] are not vertex attributes"):
        fresh.related(ids, "post_segment", attributes=["colour"])


def test_ids_below_between_and_above_the_indexed_ones(tmp_path: Path, small_chunks: None) -> None:
    coll = zv.create_collection(tmp_path / "c.zarr", id_spaces=["segments"])
    rng = np.random.default_rng(8)
    pos = rng.uniform(0, 40, (90, 3)).astype("float32")
    post = (np.arange(90) % 30 * 10 + 100).astype(np.uint64)  # ids 100, 110, ..., 390
    coll.add_member(
        "s",
        "points",
        pos,
        chunk_shape=10,
        attributes={"post_segment": post},
        relationships={"post_segment": "segments"},
    )
    for ids in ([5], [0, 99], [105, 395, 2**64 - 1], [5, 100, 395, 390]):
        _check_related(coll, ids, "post_segment", pos, post)
        _check_related(coll, ids, "post_segment", pos, post, attributes=False)


def test_delete_through_the_collection_keeps_related_exact(tmp_path: Path, small_chunks: None) -> None:
    pos, post, _pre = _synapses(120, seed=6)
    syn_ids = np.arange(120, dtype=np.uint64) + np.uint64(2**63)
    coll = zv.create_collection(tmp_path / "c.zarr", id_spaces=["segments", "synapses"])
    coll.add_member(
        "synapses",
        "points",
        pos,
        chunk_shape=10,
        object_ids=syn_ids,
        attributes={"post_segment": post},
        id_space="synapses",
        relationships={"post_segment": "segments"},
    )
    gone = syn_ids[::3]
    coll.delete("synapses", gone.tolist())
    keep = ~np.isin(syn_ids, gone)
    res = coll.related([int(TOP), 2], "post_segment")
    _check_related(coll, [int(TOP), 2, int(TOP) - 4], "post_segment", pos[keep], post[keep])
    # Object ids come back with the rows, the user's uint64 ids.
    truth = keep & np.isin(post, [TOP, np.uint64(2)])
    assert sorted(res.object_ids.tolist()) == sorted(syn_ids[truth].tolist())


@pytest.mark.slow
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    n=st.integers(1, 60),
    pool=st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=8, unique=True),
    asked=st.lists(st.integers(0, 2**64 - 1), max_size=5),
    seed=st.integers(0, 2**16),
    cut=st.floats(0, 40),
)
def test_related_and_joins_equal_pandas_property(
    tmp_path_factory: pytest.TempPathFactory, n: int, pool: list[int], asked: list[int], seed: int, cut: float
) -> None:
    """related() of any ids and a numeric join equal a pandas merge on the same data."""
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(seed)
    seg = np.array(pool, np.uint64)
    post = seg[rng.integers(0, len(seg), n)]
    pos = rng.uniform(0, 40, (n, 3)).astype("float32")
    size = rng.uniform(0, 40, len(seg))
    folder = tmp_path_factory.mktemp("prop")
    coll = zv.create_collection(folder / "c.zarr", id_spaces=["segments"])
    coll.add_member(
        "neurons",
        "points",
        rng.uniform(0, 40, (len(seg), 3)),
        chunk_shape=20,
        object_ids=seg,
        object_attributes={"size": dict(zip(seg.tolist(), size.tolist()))},
        id_space="segments",
    )
    coll.add_member(
        "synapses",
        "points",
        pos,
        chunk_shape=10,
        attributes={"post_segment": post},
        relationships={"post_segment": "segments"},
    )
    ids = asked + pool[: len(pool) // 2]
    _check_related(coll, ids, "post_segment", pos, post)
    merged = pd.DataFrame({"i": np.arange(n), "post_segment": post}).merge(
        pd.DataFrame({"post_segment": seg, "size": size}), on="post_segment"
    )
    want = np.sort(merged.i[merged["size"] > cut].to_numpy())
    got = coll.query(None, members=["synapses"], where=f"post_segment.size > {cut!r}")["synapses"]
    assert _rows(got.positions, got.attributes["post_segment"]) == _rows(pos[want], post[want])
