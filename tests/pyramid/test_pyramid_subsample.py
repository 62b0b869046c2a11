"""Point levels of real points (``point_strategy="subsample"``, the default without objects)."""

from __future__ import annotations

import numpy as np
import pytest

import zarr_vectors as zv
from tests.conftest import brute_force_box, sorted_rows
from zarr_vectors.errors import InputError
from zarr_vectors.pyramid.points import coordinate_hash, subsample_groups
from zarr_vectors.pyramid.reduce import Groups


@pytest.fixture(scope="module")
def cloud(tmp_path_factory):
    rng = np.random.default_rng(17)
    n = 120_000
    pts = np.concatenate([rng.uniform(0, 400, (n // 2, 3)), rng.normal(200, 15, (n // 2, 3)).clip(0, 399)])
    pts = pts.astype(np.float32)
    attrs = {"w": rng.random(n).astype(np.float32), "cls": rng.integers(0, 7, n).astype(np.uint8)}
    path = tmp_path_factory.mktemp("subsample") / "c.zarr"
    zv.write_points(path, pts, chunk_shape=100, bin_shape=25, attributes=attrs)
    ds = zv.open(path, mode="r+")
    assert ds.build_pyramid([2, 2]) == [1, 2]
    return path, ds, pts, attrs


def _rows(res):
    return sorted_rows(res.positions, res.attributes["w"], res.attributes["cls"])


def test_each_level_is_a_nested_subset_with_attributes_unchanged(cloud):
    path, ds, pts, attrs = cloud
    levels = [ds.read(level=k) for k in ds.levels]
    finer = sorted_rows(pts, attrs["w"], attrs["cls"])
    for k, res in enumerate(levels[1:], start=1):
        rows = _rows(res)
        view = {tuple(r) for r in finer.tolist()}
        assert all(tuple(r) in view for r in rows.tolist()), f"level {k} holds a row level {k - 1} lacks"
        assert 0.11 < len(rows) / len(finer) < 0.16  # about 1/8 per factor 2 in 3-D (ceil per bin)
        finer = rows


def test_no_coarse_bin_with_data_is_left_empty(cloud):
    path, ds, pts, attrs = cloud
    for k in ds.levels[1:]:
        bin_shape = np.asarray(ds.root.level_bin_shapes[k])
        below = ds.read(level=k - 1).positions
        here = ds.read(level=k).positions
        occupied = {tuple(b) for b in np.floor(below / bin_shape).astype(int).tolist()}
        kept = {tuple(b) for b in np.floor(here / bin_shape).astype(int).tolist()}
        assert occupied == kept


def test_coarse_box_queries_are_exact_and_the_store_valid(cloud):
    path, ds, pts, attrs = cloud
    whole = ds.read(level=1)
    box = ([50, 120, 33], [260, 333, 190])
    got = ds.query(bbox=box, level=1)
    keep = brute_force_box(whole.positions, *box)
    assert np.array_equal(
        _rows(got),
        sorted_rows(whole.positions[keep], whole.attributes["w"][keep], whole.attributes["cls"][keep]),
    )
    assert zv.validate(path).ok
    assert ds.level_for(max_vertices=len(whole) - 1) == 2 and ds.level_for(max_vertices=len(whole)) == 1


def test_the_choice_depends_on_coordinates_only():
    rng = np.random.default_rng(2)
    pos = rng.uniform(0, 1, (1000, 3)).astype(np.float32)
    assert np.array_equal(coordinate_hash(pos[::-1])[::-1], coordinate_hash(pos))
    assert len(np.unique(coordinate_hash(pos))) == 1000
    groups = Groups(None, np.array([0, 1, 9, 1000]))
    rows, _, sub = subsample_groups(pos, np.arange(1000), groups, 1 / 8)
    assert sub.kept.sum() == 1 + 1 + 124  # ceil(n / 8) per group, at least one
    assert np.array_equal(sub.parent[sub.kept], np.arange(sub.kept.sum()))  # kept rows are their own parents
    first = np.flatnonzero(sub.kept)[[0, 1, 2]]
    assert (sub.parent[1:9] == sub.parent[first[1]]).all()


def test_strategy_choice_and_refusals(tmp_path):
    rng = np.random.default_rng(9)
    pts = rng.uniform(0, 8, (500, 2))
    zv.write_points(tmp_path / "o.zarr", pts, chunk_shape=4, bin_shape=1, object_ids=rng.integers(0, 5, 500))
    objs = zv.open(tmp_path / "o.zarr", mode="r+")
    with pytest.raises(
        InputError, match="'subsample' is for point clouds without objects; this store has objects"
    ):
        objs.build_pyramid([2], point_strategy="subsample")
    objs.build_pyramid([2])  # auto: metavertices, one per bin and object
    zv.write_points(tmp_path / "p.zarr", pts, chunk_shape=4, bin_shape=1, attributes={"x": pts[:, 0]})
    plain = zv.open(tmp_path / "p.zarr", mode="r+")
    with pytest.raises(InputError, match="point_strategy must be one of 'auto', 'subsample', 'metavertex'"):
        plain.build_pyramid([2], point_strategy="random")
    with pytest.raises(InputError, match="reductions apply to metavertices"):
        plain.build_pyramid([2], point_strategy="subsample", reductions={"x": "mean"})
    plain.build_pyramid([2], point_strategy="metavertex")
    assert len(plain.read(level=1)) == len(np.unique(np.floor(pts / 2), axis=0))  # one per occupied bin
