"""The validator accepts every store this library writes, with no problem and no warning:
every kind, with pyramids, checksums, compression and sparse uint64 ids."""

from __future__ import annotations

import numpy as np
import pytest
import shapely

import zarr_vectors as zv
from tests._builders import (
    STORES,
    graph_store,
    lines_store,
    mesh_store,
    meshes_store,
    points_store,
    polygons_store,
    skeleton_store,
)
from zarr_vectors.format.metadata import LIBRARY_LEVEL_KEYS


def _clean(path) -> None:
    report = zv.validate(path)
    assert report.ok, str(report)
    assert not report.warnings, "\n".join(map(str, report.warnings))


@pytest.mark.parametrize("kind", sorted(STORES))
def test_every_kind_validates_without_warning(tmp_path, kind):
    _clean(STORES[kind](tmp_path / f"{kind}.zarr"))


@pytest.mark.parametrize("kind", ["points", "lines", "skeleton", "graph", "mesh", "polygons"])
def test_every_kind_with_a_pyramid_validates_without_warning(tmp_path, kind):
    path = STORES[kind](tmp_path / f"{kind}.zarr")
    ds = zv.open(path, mode="r+")
    ds.build_pyramid([2], object_sparsity=None if kind != "points" else 0.5)
    _clean(path)
    for k in zv.open(path).levels[1:]:
        assert set(zv.open(path).level(k).meta.extra) <= LIBRARY_LEVEL_KEYS


def test_multi_part_lines_and_points_of_write_geometries_validate_without_warning(tmp_path):
    two = shapely.MultiLineString([[(0, 0), (10, 10)], [(20, 20), (30, 10)]])
    zv.write_geometries(tmp_path / "m.zarr", [two, shapely.LineString([(1, 1), (5, 9)])], chunk_shape=8)
    assert zv.open(tmp_path / "m.zarr").geometry_types == ("multi_polyline",)
    _clean(tmp_path / "m.zarr")
    zv.write_geometries(tmp_path / "p.zarr", [shapely.Point(1, 2), shapely.Point(5, 6)], chunk_shape=4)
    _clean(tmp_path / "p.zarr")


@pytest.mark.parametrize("compression", ["zstd", "gzip", "blosc", "lz4"])
def test_compressed_checksummed_sparse_id_stores_validate_without_warning(tmp_path, compression):
    rng = np.random.default_rng(3)
    pts = rng.uniform(0, 100, (300, 3)).astype(np.float32)
    ids = np.array([720575940621039145, 5, 2**63 + 7], np.uint64)[rng.integers(0, 3, len(pts))]
    path = tmp_path / "s.zarr"
    zv.write_points(path, pts, chunk_shape=25, object_ids=ids, compression=compression, checksums=True)
    _clean(path)


BUILDERS = {
    "points": points_store,
    "lines": lines_store,
    "graph": graph_store,
    "skeleton": skeleton_store,
    "mesh": mesh_store,
    "meshes": meshes_store,
    "polygons": polygons_store,
}


@pytest.mark.parametrize("kind", sorted(STORES))
def test_every_kind_sharded_validates_and_reads_as_unsharded(tmp_path, kind):
    builders = {**BUILDERS, "draco": lambda p, **kw: mesh_store(p, encoding="draco", **kw)}
    plain = builders[kind](tmp_path / "plain.zarr")
    sharded = builders[kind](tmp_path / "sharded.zarr", shards=2)
    vertices = (sharded / "0" / "vertices" / "zarr.json").read_text()
    assert '"sharding_indexed"' in vertices
    _clean(sharded)
    a, b = zv.open(plain).query(), zv.open(sharded).query()
    assert np.array_equal(np.sort(a.positions, axis=0), np.sort(b.positions, axis=0))
