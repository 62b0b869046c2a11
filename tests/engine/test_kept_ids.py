"""Small non-negative ids are stored as the OIDs themselves (DECISIONS 8 as amended).

Ids that are all >= 0 and whose largest value is below ``max(65,536, 4 x distinct ids)`` are
kept as given: the OID space is ``0 .. max``, ids without rows are empty objects and no
``object_id`` table is written. Larger or negative ids are remapped to ``0 .. B-1``.
"""

from __future__ import annotations

import numpy as np
import pytest

import zarr_vectors as zv
from tests.conftest import sorted_rows
from zarr_vectors.engine import dense_ids
from zarr_vectors.engine.ids import kept_as_given, table_rows
from zarr_vectors.errors import UnknownIdError

SPARSE = np.arange(3, 277, 7)  # 3, 10, 17, ... 276: the 40 ids


# -- the rule at its edges -----------------------------------------------------------


@pytest.mark.parametrize(
    ("largest", "distinct", "kept"),
    [(65_535, 1, True), (65_536, 1, False), (65_539, 16_385, True), (65_540, 16_385, False)],
)
def test_rule_edges(largest, distinct, kept):
    assert kept_as_given(largest, distinct) is kept


def test_floor_edge_with_few_objects():
    below = dense_ids(np.array([3, 65_535, 3], np.int64))
    assert below.user is None and below.count == 65_536
    assert below.dense.tolist() == [3, 65_535, 3] and below.present.tolist() == [3, 65_535]
    above = dense_ids(np.array([3, 65_536, 3], np.int64))
    assert above.count == 2 and above.dense.tolist() == [0, 1, 0] and above.user.tolist() == [3, 65_536]


def test_four_times_distinct_edge_counts_distinct_ids_not_rows():
    base = np.arange(19_999, dtype=np.int64)  # with one more id: 20,000 distinct, 4 x 20,000 = 80,000
    kept = dense_ids(np.r_[base, 79_999])
    assert kept.user is None and kept.count == 80_000 and kept.distinct == 20_000
    remapped = dense_ids(np.r_[base, 80_000])
    assert remapped.count == 20_000 and remapped.user[-1] == 80_000
    # Many rows of few ids: the rule counts the 2 distinct ids, not the 100,001 rows.
    rows = dense_ids(np.r_[np.zeros(100_000, np.int64), 70_000])
    assert rows.user is not None and rows.user.tolist() == [0, 70_000] and rows.count == 2


def test_negative_ids_are_remapped():
    ids = dense_ids(np.array([-1, 5, 5], np.int64))
    assert ids.user.tolist() == [-1, 5] and ids.dense.tolist() == [0, 1, 1]


def test_uint64_ids():
    small = dense_ids(np.array([7, 2, 7], np.uint64))
    assert small.user is None and small.dense.dtype == np.int64 and small.count == 8
    big = dense_ids(np.array([2**64 - 1, 2], np.uint64))
    assert (
        big.user.dtype == np.uint64 and big.user.tolist() == [2, 2**64 - 1] and big.dense.tolist() == [1, 0]
    )
    dense = dense_ids(np.array([1, 0, 2], np.uint64))
    assert dense.user is None and dense.present is None and dense.count == 3


def test_rows_per_distinct_id_land_at_their_ids():
    ids = dense_ids(np.array([5, 2, 5], np.int64))
    rows = table_rows(np.array([20.0, 50.0]), ids, "v", "object attribute", False)
    assert rows.mask.tolist() == [True, True, False, True, True, False]
    assert rows[[2, 5]].tolist() == [20.0, 50.0]
    per_item = dense_ids(np.array([5, 2], np.int64))  # items in the order given
    names = table_rows(["five", "two"], per_item, "name", "object attribute", True)
    assert names == ["", "", "two", "", "", "five"]


# -- every kind with sparse small ids ---------------------------------------------------


def _check_points_like(ds, pos, oid, ids):
    assert ds.num_objects() == int(ids.max()) + 1
    assert "object_id" not in ds.level(0).object_attributes
    for i in ids:
        got = ds.objects([int(i)])
        assert np.array_equal(sorted_rows(got.positions), sorted_rows(pos[oid == i])), i
        assert set(got.object_ids.tolist()) == {int(i)}
    assert ds.object_ids().tolist() == sorted(set(int(i) for i in ids))  # the gaps are no objects
    top = int(ids.max())
    for gap in (0, 4, top - 1):
        assert len(ds.objects([gap]).positions) == 0
    with pytest.raises(UnknownIdError, match=f"object id {top + 1} is not in level 0"):
        ds.objects([top + 1])


def test_points_with_sparse_small_ids(tmp_path, rng):
    pos = rng.uniform(0, 100, (3000, 3)).astype(np.float32)
    oid = SPARSE[rng.integers(0, len(SPARSE), len(pos))]
    volume = rng.random(len(SPARSE))
    ds = zv.write_points(
        tmp_path / "p.zarr", pos, chunk_shape=25, object_ids=oid, object_attributes={"volume": volume}
    )
    _check_points_like(ds, pos, oid, SPARSE)
    assert np.array_equal(ds.object_attributes("volume", SPARSE), volume)
    assert np.isnan(ds.object_attributes("volume", [4])).all()


def test_graphs_and_skeletons_with_sparse_small_ids(tmp_path, rng):
    n = 12
    ids = SPARSE[::4]
    pos = np.concatenate([np.cumsum(rng.normal(0, 3, (n, 3)), 0) + 10 * k + 50 for k in range(len(ids))])
    par = np.concatenate([np.r_[-1, np.arange(n * k, n * k + n - 1)] for k in range(len(ids))])
    oid = np.repeat(ids, n)
    zv.write_skeleton(tmp_path / "s.zarr", pos, par, chunk_shape=8, object_ids=oid)
    sk = zv.open(tmp_path / "s.zarr")
    _check_points_like(sk, pos, oid, ids)
    assert sk.objects([int(ids[2])]).parents.tolist() == [-1, *range(n - 1)]
    edges = np.stack([np.flatnonzero(par >= 0), par[par >= 0]], axis=1)
    zv.write_graph(tmp_path / "g.zarr", pos, edges, chunk_shape=8, object_ids=oid)
    _check_points_like(zv.open(tmp_path / "g.zarr"), pos, oid, ids)


def test_lines_with_sparse_small_ids(tmp_path, rng):
    ids = SPARSE[::-3]  # in no particular order
    lines = [np.cumsum(rng.normal(0, 4, (int(rng.integers(2, 9)), 3)), 0) + 50 for _ in ids]
    zv.write_lines(
        tmp_path / "l.zarr",
        lines,
        chunk_shape=6,
        object_ids=ids,
        object_attributes={"k": np.arange(len(ids))},
    )
    ds = zv.open(tmp_path / "l.zarr")
    assert ds.num_objects() == 277 and "object_id" not in ds.level(0).object_attributes
    for i, line in zip(ids.tolist(), lines):
        assert np.array_equal(ds.objects([i]).positions, line.astype(ds.objects([i]).positions.dtype)), i
    assert ds.object_attributes("k", ids).tolist() == list(range(len(ids)))
    assert len(ds.objects([4]).positions) == 0


def test_meshes_with_sparse_small_ids(tmp_path):
    tet = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]], np.float32)
    faces = np.array([[0, 1, 2], [0, 1, 3], [0, 2, 3], [1, 2, 3]])
    ids = np.array([276, 3, 122])
    meshes = [(tet * (k + 1) + 3 * k, faces) for k in range(3)]
    zv.write_meshes(tmp_path / "m.zarr", meshes, chunk_shape=2, object_ids=ids)
    ds = zv.open(tmp_path / "m.zarr")
    assert ds.num_objects() == 277 and "object_id" not in ds.level(0).object_attributes
    for i, (v, f) in zip(ids.tolist(), meshes):
        got = ds.objects([i])
        assert np.array_equal(sorted_rows(got.positions), sorted_rows(v)), i
        assert sorted(map(tuple, np.sort(got.positions[got.faces], axis=1).tolist())) == sorted(
            map(tuple, np.sort(v[f], axis=1).tolist())
        )
    assert len(ds.objects([4]).positions) == 0


def test_geometries_with_sparse_small_ids(tmp_path):
    shapely = pytest.importorskip("shapely")
    geoms = [
        shapely.Polygon([(0, 0), (4, 0), (4, 4), (0, 4)]),
        shapely.LineString([(5, 5), (7, 6), (9, 9)]),
        shapely.Point(2, 8),
    ]
    ids = [122, 3, 276]
    zv.write_geometries(tmp_path / "g.zarr", geoms, chunk_shape=3, object_ids=ids)
    ds = zv.open(tmp_path / "g.zarr")
    assert ds.num_objects() == 277 and "object_id" not in ds.level(0).object_attributes
    got_ids, got = ds.objects(ids).to_shapely()
    by_id = dict(zip(np.asarray(got_ids).tolist(), got))
    assert sorted(by_id) == sorted(ids)
    assert all(by_id[i].equals(g) for i, g in zip(ids, geoms))


def test_group_ids_kept_as_given(tmp_path, rng):
    pos = rng.uniform(0, 10, (200, 2))
    oid = SPARSE[rng.integers(0, len(SPARSE), len(pos))]
    ds = zv.write_points(
        tmp_path / "g.zarr",
        pos,
        chunk_shape=5,
        object_ids=oid,
        groups={40: [3, 10], 7: [276]},
        group_attributes={"w": [1.5, 2.5]},
        group_names=["seven", "forty"],
    )
    assert "group_id" not in ds.level(0).group_attributes and ds.level(0).groups.length == 41
    # Listings name the groups with members only; the indices between read as empty groups.
    assert ds.group_ids().tolist() == [7, 40] and [sorted(m.tolist()) for m in ds.groups()] == [
        [276],
        [3, 10],
    ]
    assert set(ds.group(40).object_ids.tolist()) == {3, 10} and set(ds.group(7).object_ids.tolist()) == {276}
    assert len(ds.group(8).positions) == 0
    assert ds.group_attributes("w").tolist() == [1.5, 2.5]
    assert ds.group_names() == ["seven", "forty"]
    with pytest.raises(UnknownIdError):
        ds.group(41)


# -- appends --------------------------------------------------------------------------------


def _cell_files(path, family):
    root = path / "0" / family
    return {
        p.relative_to(root): p.read_bytes() for p in root.rglob("*") if p.is_file() and p.name != "zarr.json"
    }


def _check_all(ds, pos, oid):
    for i in np.unique(oid).tolist():
        got = ds.objects([i])
        assert np.array_equal(sorted_rows(got.positions), sorted_rows(pos[oid == i])), i
        assert set(got.object_ids.tolist()) == {i}


@pytest.mark.parametrize("shards", [None, "auto"])
def test_append_beyond_the_threshold_switches_to_an_id_table(tmp_path, rng, shards):
    """Kept ids, then an id past 65,535: the store gets an ``object_id`` table; no old OID
    moves, so untouched cells (and their owner tables) keep their bytes."""
    bounds = ([0.0, 0.0, 0.0], [100.0, 100.0, 100.0])
    pos = rng.uniform(0, 100, (3000, 3)).astype(np.float32)
    oid = SPARSE[rng.integers(0, len(SPARSE), len(pos))]
    path = tmp_path / "a.zarr"
    zv.write_points(
        path,
        pos,
        chunk_shape=25,
        bounds=bounds,
        object_ids=oid,
        object_attributes={"v": SPARSE * 1.0},
        shards=shards,
    )
    before = {f: _cell_files(path, f) for f in ("vertices", "fragment_attributes/object_id")}
    # A gap id (4) is new, not a clash; then 100,000 lies beyond max(65,536, 4 x 42).
    new_pos = rng.uniform(0, 10, (50, 3)).astype(np.float32)  # one corner: few cells touched
    new_oid = np.where(np.arange(50) % 2 == 0, 4, 100_000)
    ds = zv.open(path, "r+")
    ds.append(new_pos, object_ids=new_oid, object_attributes={"v": {100_000: 7.5}})
    ds = zv.open(path)
    table = ds.level(0).object_attributes
    assert "object_id" in table
    assert ds.object_ids()[-1] == 100_000 and ds.num_objects() == 278  # 0 .. 276 keep their OIDs
    allpos, alloid = np.concatenate([pos, new_pos]), np.concatenate([oid, new_oid])
    _check_all(ds, allpos, alloid)
    assert len(ds.objects([5]).positions) == 0
    assert ds.object_attributes("v", [3, 276, 100_000]).tolist() == [3.0, 276.0, 7.5]
    if shards is None:
        touched = {k for k, v in _cell_files(path, "vertices").items() if before["vertices"].get(k) != v}
        assert 0 < len(touched) < len(before["vertices"]) / 4
        owners = _cell_files(path, "fragment_attributes/object_id")
        kept = {k: v for k, v in before["fragment_attributes/object_id"].items() if k not in touched}
        assert kept and all(owners[k] == v for k, v in kept.items())


def test_append_within_the_threshold_keeps_ids_and_negative_ids_remap(tmp_path, rng):
    pos = rng.uniform(0, 100, (800, 2)).astype(np.float32)
    oid = SPARSE[rng.integers(0, len(SPARSE), len(pos))]
    path = tmp_path / "k.zarr"
    zv.write_points(path, pos, chunk_shape=20, object_ids=oid)
    new_pos, new_oid = rng.uniform(0, 100, (30, 2)).astype(np.float32), np.full(30, 60_000)
    zv.open(path, "r+").append(new_pos, object_ids=new_oid)
    ds = zv.open(path)
    assert "object_id" not in ds.level(0).object_attributes and ds.num_objects() == 60_001
    pos, oid = np.concatenate([pos, new_pos]), np.concatenate([oid, new_oid])
    _check_all(ds, pos, oid)
    with pytest.raises(zv.InputError, match="already in the store"):
        zv.open(path, "r+").append(new_pos[:1], object_ids=[10])
    more_pos = rng.uniform(0, 100, (5, 2)).astype(np.float32)
    zv.open(path, "r+").append(more_pos, object_ids=[-2] * 5)
    ds = zv.open(path)
    assert ds.level(0).object_id_map.user is not None and ds.object_ids()[0] == -2
    _check_all(ds, np.concatenate([pos, more_pos]), np.concatenate([oid, [-2] * 5]))


# -- listings and attributes of kept ids ------------------------------------------------


def test_listings_name_only_objects_with_rows(tmp_path, rng):
    pos = rng.uniform(0, 10, (300, 2))
    oid = SPARSE[rng.permutation(np.arange(300) % len(SPARSE))]
    ds = zv.write_points(
        tmp_path / "l.zarr", pos, chunk_shape=5, object_ids=oid, object_attributes={"v": SPARSE * 0.5}
    )
    assert ds.num_objects() == 277 and ds.object_ids().tolist() == SPARSE.tolist()
    assert ds.object_attributes("v").tolist() == (SPARSE * 0.5).tolist()  # one row per listed object
    assert np.isnan(ds.object_attributes("v", [4])).all()  # in range, no rows: read by id, absent
    assert zv.open(tmp_path / "l.zarr").object_ids().tolist() == SPARSE.tolist()


def test_datetime_attributes_of_kept_ids_leave_the_gaps_absent(tmp_path):
    when = np.array(["2024-01-02T03:04:05", "1969-12-31T23:59:59"], "datetime64[s]")
    ds = zv.write_points(
        tmp_path / "t.zarr", np.zeros((2, 2)), chunk_shape=4, object_ids=[4, 9], object_attributes={"t": when}
    )
    back = zv.open(tmp_path / "t.zarr")
    assert back.num_objects() == 10 and back.object_ids().tolist() == [4, 9]
    assert np.array_equal(back.object_attributes("t"), when)
    assert np.isnat(ds.object_attributes("t", [5])).all()
