"""GIS completeness: GeoDataFrames out, date-time attributes, and polygon ``intersects``."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import shapely

import zarr_vectors as zv
from zarr_vectors.errors import InputError

gpd = pytest.importorskip("geopandas")
pd = pytest.importorskip("pandas")


@pytest.fixture(scope="module")
def parcels(tmp_path_factory):
    """A jittered grid of 900 quads (shrunk so neighbours do not touch), plus one big parcel."""
    rng = np.random.default_rng(11)
    xs = np.linspace(0, 600, 31)
    polys = []
    for i in range(30):
        for j in range(30):
            x0, x1, y0, y1 = xs[i], xs[i + 1], xs[j], xs[j + 1]
            jitter = rng.uniform(-3, 3, (4, 2))
            quad = np.array([(x0, y0), (x1, y0), (x1, y1), (x0, y1)]) + jitter
            polys.append(shapely.Polygon(quad).buffer(-1.0))
    polys.append(shapely.Polygon([(700, 0), (1900, 0), (1900, 1200), (700, 1200)]))  # vertices far apart
    ids = (np.arange(len(polys)) * 7919 + 2**40).astype(np.uint64)
    path = tmp_path_factory.mktemp("gis") / "parcels.zarr"
    ds = zv.write_geometries(
        path,
        polys,
        chunk_shape=40,
        object_ids=ids,
        crs="EPSG:32633",
        object_attributes={"area": np.array([p.area for p in polys])},
    )
    return ds, gpd.GeoDataFrame({"id": ids}, geometry=polys, crs="EPSG:32633")


@pytest.mark.parametrize(
    "roi",
    [
        shapely.Point(1300, 600).buffer(5),  # inside the big parcel: none of its vertices near
        shapely.LineString([(3, 3), (590, 410)]).buffer(0.3),  # a thin road through many parcels
        shapely.Polygon([(50, 60), (420, 90), (260, 530)]),
        shapely.box(590, -10, 800, 50),  # across the gap into the big parcel
    ],
)
def test_intersects_matches_geopandas(parcels, roi):
    ds, gdf = parcels
    res = ds.query(polygon=roi, predicate="intersects")
    want = np.sort(gdf["id"].to_numpy()[gdf.intersects(roi).to_numpy()])
    assert np.array_equal(np.unique(res.object_ids), want) and len(want)
    whole = ds.objects(want)
    assert len(res) == len(whole)  # whole objects, every vertex
    contains = np.unique(ds.query(polygon=roi).object_ids) if len(ds.query(polygon=roi)) else []
    assert set(contains) <= set(want.tolist())


def test_intersects_within_a_bbox_and_its_limits(parcels):
    ds, gdf = parcels
    roi = shapely.box(0, 0, 600, 600)
    box = ([100, 100], [130, 125])
    res = ds.query(polygon=roi, bbox=box, predicate="intersects")
    want = np.sort(gdf["id"].to_numpy()[gdf.intersects(shapely.box(100, 100, 130, 125)).to_numpy()])
    assert np.array_equal(np.unique(res.object_ids), want)
    with pytest.raises(InputError, match="predicate must be one of 'contains', 'intersects'; got 'touches'"):
        ds.query(polygon=roi, predicate="touches")
    with pytest.raises(InputError, match="predicate='intersects' goes with a polygon query"):
        ds.query(bbox=box, predicate="intersects")


def test_intersects_without_objects_keeps_boundary_vertices():
    pts = np.array([[0.0, 0.0], [1.0, 1.0], [2.0, 0.5], [5.0, 5.0]])
    ds = zv.write_points("memory://gis-boundary", pts, chunk_shape=2)
    square = shapely.box(0, 0, 2, 2)
    assert len(ds.query(polygon=square)) == 1  # strictly inside: (1, 1)
    assert sorted(map(tuple, ds.query(polygon=square, predicate="intersects").positions.tolist())) == [
        (0.0, 0.0),
        (1.0, 1.0),
        (2.0, 0.5),
    ]


def test_geodataframe_of_objects_keeps_ids_attributes_and_crs(parcels):
    ds, gdf = parcels
    res = ds.query(polygon=shapely.box(0, 0, 100, 100), predicate="intersects")
    out = res.to_geodataframe()
    assert out.crs.to_epsg() == 32633 and list(out.columns) == ["object_id", "area", "geometry"]
    assert out["object_id"].dtype == np.uint64
    ref = gdf.set_index("id").loc[out["object_id"].to_numpy()]
    assert all(shapely.equals_exact(a, b, tolerance=0) for a, b in zip(out.geometry, ref.geometry))
    assert np.allclose(out["area"], ref.geometry.area)


def test_geodataframe_of_a_point_cloud_is_a_point_per_vertex():
    pts = np.random.default_rng(2).uniform(0, 10, (50, 3))
    ds = zv.write_points(
        "memory://gis-points", pts, chunk_shape=5, attributes={"rgb": np.ones((50, 3), np.uint8)}
    )
    out = ds.read().to_geodataframe()
    assert list(out.columns) == ["rgb_0", "rgb_1", "rgb_2", "geometry"] and out.crs is None
    assert np.array_equal(
        np.sort(shapely.get_coordinates(out.geometry, include_z=True), axis=0), np.sort(pts, axis=0)
    )


def test_datetime_object_attributes_round_trip(tmp_path):
    when = np.array(["2024-01-02T03:04:05.123", "NaT", "1969-12-31T23:59:59.999"], "datetime64[ms]")
    ds = zv.write_points(
        tmp_path / "t.zarr",
        np.zeros((3, 2)),
        chunk_shape=4,
        object_ids=[4, 9, 2**62],
        object_attributes={"seen": when},
    )
    back = zv.open(tmp_path / "t.zarr").object_attributes("seen")
    assert back.dtype == np.dtype("datetime64[ms]")
    assert np.array_equal(back, when, equal_nan=True)
    assert ds.object_attributes("seen", [2**62])[0] == when[2]
    with pytest.raises(InputError, match="datetime64 without a unit"):
        zv.write_points(
            "memory://gis-generic",
            np.zeros((1, 2)),
            chunk_shape=4,
            object_ids=[1],
            object_attributes={"t": np.zeros(1, "datetime64")},  # no unit
        )


def test_datetimes_from_geopackage_and_geodataframe(tmp_path):
    from zarr_vectors.io.geojson import export_geojson, ingest_vector

    when = pd.to_datetime(["2024-01-02 03:04:05", "2020-05-06 00:00:00", None])
    frame = gpd.GeoDataFrame(
        {"when": when, "v": [1.5, 2.0, 3.0]},
        geometry=[shapely.box(0, 0, 1, 1), shapely.Point(3, 3), shapely.box(2, 2, 3, 3)],
        crs="EPSG:32633",
    )
    frame.to_file(tmp_path / "f.gpkg", driver="GPKG")
    from zarr_vectors.io.geojson import PropertiesSkippedWarning

    with warnings.catch_warnings():
        warnings.simplefilter("error", PropertiesSkippedWarning)  # nothing is skipped
        ds = ingest_vector(tmp_path / "f.zarr", tmp_path / "f.gpkg", chunk_shape=4)
    got = ds.object_attributes("when")
    assert got.dtype.kind == "M" and np.isnat(got[2])
    assert got[:2].astype("datetime64[s]").tolist() == when[:2].to_numpy().astype("datetime64[s]").tolist()
    same = ingest_vector(tmp_path / "g.zarr", frame, chunk_shape=4).object_attributes("when")
    assert np.array_equal(same.astype("datetime64[s]"), got.astype("datetime64[s]"), equal_nan=True)
    export_geojson(ds.read(), tmp_path / "f.geojson")
    text = (tmp_path / "f.geojson").read_text()
    assert '"when": "2024-01-02T03:04:05' in text and '"when": null' in text


@pytest.mark.slow
def test_cli_polygon_from_wkt_and_file(tmp_path):
    import json
    import subprocess
    import sys

    polys = [shapely.box(x, y, x + 9, y + 9) for x in range(0, 100, 10) for y in range(0, 100, 10)]
    polys.append(shapely.box(200, 0, 900, 900))
    zv.write_geometries(tmp_path / "p.zarr", polys, chunk_shape=50)
    gdf = gpd.GeoDataFrame(geometry=polys)
    roi = shapely.Polygon([(5, 6), (42, 9), (300, 53)])
    gpd.GeoDataFrame(geometry=[roi]).to_file(tmp_path / "roi.geojson", driver="GeoJSON")
    want = int(gdf.intersects(roi).sum())
    run = [sys.executable, "-m", "zarr_vectors", "query", str(tmp_path / "p.zarr")]
    for spec in (roi.wkt, str(tmp_path / "roi.geojson")):
        out = subprocess.run(
            [*run, "--polygon", spec, "--predicate", "intersects", "--count"],
            capture_output=True,
            text=True,
            check=True,
        )
        assert f", {want:,} objects" in out.stdout
    inside = subprocess.run(
        [*run, "--polygon", roi.wkt, "-o", str(tmp_path / "in.geojson")],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "wrote" in inside.stdout and json.loads((tmp_path / "in.geojson").read_text())["features"]
    bad = subprocess.run(
        [*run, "--polygon", "LINESTRING (0 0, 1 1)", "--count"], capture_output=True, text=True
    )
    assert bad.returncode != 0 and "is a LineString; give a Polygon or MultiPolygon" in bad.stderr


@pytest.mark.parametrize("suffix", [".gpkg", ".fgb"])
def test_vector_files_round_trip_ids_attributes_and_crs(tmp_path, suffix):
    from zarr_vectors.io.geojson import ingest_vector
    from zarr_vectors.io.vector_export import TextIdsWarning, export_vector

    shapes = [shapely.box(i, 0, i + 0.8, 1) for i in range(4)] + [
        shapely.LineString([(0, 2), (3, 3)]),
        shapely.Point(7, 7),
    ]
    ids = np.array([3, 9, 2**40, 2**63 + 3, 17, 11], np.uint64)
    when = np.array(
        ["2024-01-01T10:00", "NaT", "2023-05-05", "2020-01-01", "2021-02-02", "2019-09-09"], "datetime64[s]"
    )
    ds = zv.write_geometries(
        tmp_path / "a.zarr",
        shapes,
        chunk_shape=2,
        object_ids=ids,
        crs="EPSG:32633",
        object_attributes={"v": np.arange(6.0), "when": when},
    )
    with pytest.warns(TextIdsWarning, match="'object_id' holds ids above 2\\*\\*63 - 1"):
        export_vector(ds.read(), tmp_path / f"a{suffix}")
    back = ingest_vector(tmp_path / "b.zarr", tmp_path / f"a{suffix}", chunk_shape=2)
    assert back.object_ids().tolist() == sorted(ids.tolist()) and back.crs.code == "EPSG:32633"
    i1, g1, a1 = ds.read().to_shapely(object_attributes=True)
    i2, g2, a2 = back.read().to_shapely(object_attributes=True)
    assert np.array_equal(i1, i2) and all(shapely.equals_exact(a, b, tolerance=0) for a, b in zip(g1, g2))
    assert np.array_equal(a1["v"], a2["v"])
    assert np.array_equal(a1["when"], a2["when"].astype("datetime64[s]"), equal_nan=True)


def test_geoparquet_and_shapefile(tmp_path):
    from zarr_vectors.io.vector_export import export_vector

    ds = zv.write_geometries(
        tmp_path / "a.zarr",
        [shapely.box(0, 0, 1, 1), shapely.box(2, 2, 3, 4)],
        chunk_shape=2,
        object_ids=[5, 2**62],
        crs="EPSG:3857",
        object_attributes={"v": [1.5, 2.5]},
    )
    export_vector(ds.read(), tmp_path / "a.parquet")
    frame = gpd.read_parquet(tmp_path / "a.parquet")
    assert frame["object_id"].tolist() == [5, 2**62] and frame.crs.to_epsg() == 3857
    assert frame.geometry.area.tolist() == [1.0, 2.0]
    export_vector(ds.read(), tmp_path / "a.shp")
    assert gpd.read_file(tmp_path / "a.shp")["v"].tolist() == [1.5, 2.5]
    mixed = zv.write_geometries(
        tmp_path / "m.zarr", [shapely.box(0, 0, 1, 1), shapely.Point(5, 5)], chunk_shape=2
    )
    with pytest.raises(
        InputError, match="a Shapefile holds one kind of geometry; this result has Point, Polygon"
    ):
        export_vector(mixed.read(), tmp_path / "m.shp")
    with pytest.raises(InputError, match="cannot write .* as a vector file; use one of .gpkg"):
        export_vector(mixed.read(), tmp_path / "m.kml")
