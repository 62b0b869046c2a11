"""Every writer takes the store-wide keywords and the object and group tables."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
import shapely

import zarr_vectors as zv

STORE_WIDE = {
    "chunk_shape",
    "bounds",
    "axes",
    "units",
    "crs",
    "compression",
    "checksums",
    "shards",
    "overwrite",
    "storage_options",
}
TABLES = {"object_ids", "object_attributes", "groups", "group_attributes", "group_names"}
WRITERS = ["write_points", "write_lines", "write_graph", "write_skeleton", "write_mesh", "write_geometries"]


@pytest.mark.parametrize("name", WRITERS)
def test_every_writer_takes_the_shared_keywords(name):
    params = inspect.signature(getattr(zv, name)).parameters
    missing = sorted((STORE_WIDE | TABLES) - set(params))
    assert not missing, f"{name} lacks {missing}"
    assert inspect.signature(getattr(zv, name)).return_annotation is zv.Dataset


def _stores(tmp_path):
    pts = np.array([[0, 0, 0], [1, 1, 1], [5, 5, 5], [6, 6, 6]], np.float32)
    ids = np.array([10, 10, 20, 30])
    sq = shapely.Polygon([(0, 0), (2, 0), (2, 2)])
    common = dict(groups=[[10, 20], [30]], group_names=["a", "b"], chunk_shape=4)
    yield "points", zv.write_points(tmp_path / "p.zarr", pts, object_ids=ids, **common)
    yield "graph", zv.write_graph(tmp_path / "g.zarr", pts, [[0, 1], [2, 3]], object_ids=ids, **common)
    yield (
        "skeleton",
        zv.write_skeleton(tmp_path / "s.zarr", pts, [-1, 0, -1, -1], object_ids=ids, **common),
    )
    yield (
        "geometries",
        zv.write_geometries(
            tmp_path / "x.zarr",
            [sq, shapely.Point(5, 5), shapely.Point(6, 6)],
            object_ids=[10, 20, 30],
            **common,
        ),
    )


def test_group_names_and_groups_round_trip_for_every_kind(tmp_path):
    for kind, ds in _stores(tmp_path):
        assert ds.group_names() == ["a", "b"], kind
        got = [sorted(g.tolist()) for g in ds.groups()]
        assert got == [[10, 20], [30]], kind
        assert sorted(np.unique(ds.group(0).object_ids).tolist()) == [10, 20], kind
