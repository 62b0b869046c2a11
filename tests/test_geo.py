"""CRS parsing and the GeoZarr proj:/spatial: conventions on the root group."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import zarr_vectors as zv
from zarr_vectors import geo
from zarr_vectors.errors import InputError
from zarr_vectors.format.metadata import Axis, RootMeta

pyproj = pytest.importorskip("pyproj")

ROOT = Path(__file__).resolve().parents[1]
UTM33_WKT = pyproj.CRS.from_epsg(32633).to_wkt()
UTM33_JSON = pyproj.CRS.from_epsg(32633).to_json_dict()
LOCAL_WKT = (
    'ENGCRS["site grid",EDATUM["site"],CS[Cartesian,2],AXIS["x",east],AXIS["y",north],LENGTHUNIT["metre",1]]'
)


@pytest.fixture(params=["with pyproj", "without pyproj"])
def parsing(request, monkeypatch):
    """Run a test with pyproj's checks and with the pure parser alone."""
    if request.param == "without pyproj":
        monkeypatch.setattr(geo, "_pyproj", lambda: None)
    return request.param


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("EPSG:4326", {"proj:code": "EPSG:4326"}),
        ("epsg:32633", {"proj:code": "EPSG:32633"}),
        (3857, {"proj:code": "EPSG:3857"}),
        ("urn:ogc:def:crs:EPSG::2056", {"proj:code": "EPSG:2056"}),
        ("http://www.opengis.net/def/crs/EPSG/0/25832", {"proj:code": "EPSG:25832"}),
        (UTM33_WKT, {"proj:wkt2": UTM33_WKT, "proj:code": "EPSG:32633"}),
        (UTM33_JSON, {"proj:projjson": UTM33_JSON, "proj:code": "EPSG:32633"}),
        (json.dumps(UTM33_JSON), {"proj:projjson": UTM33_JSON, "proj:code": "EPSG:32633"}),
        (LOCAL_WKT, {"proj:wkt2": LOCAL_WKT}),
        ({"proj:code": "epsg:4326"}, {"proj:code": "EPSG:4326"}),
    ],
)
def test_parse_crs_forms(parsing, given, expected):
    crs = geo.parse_crs(given)
    assert isinstance(crs, geo.CRS) and dict(crs) == expected
    assert crs.code == expected.get("proj:code")


def test_pyproj_objects_become_codes_or_projjson():
    assert geo.parse_crs(pyproj.CRS.from_epsg(3035)) == {"proj:code": "EPSG:3035"}
    custom = pyproj.CRS.from_proj4("+proj=tmerc +lat_0=0 +lon_0=15.5 +k=0.9996 +x_0=500000 +datum=WGS84")
    crs = geo.parse_crs(custom)
    assert crs.code is None and crs.projjson["type"] == "ProjectedCRS"
    assert crs.to_pyproj() == custom


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ("WGS84 please", "unknown CRS 'WGS84 please'"),
        ('GEOGCS["WGS 84",DATUM["WGS_1984"]]', "WKT1"),
        ('PROJCRS["x",BASEGEOGCRS["y"]', "unbalanced brackets"),
        ('GEOGCRS["WGS 84]', "unterminated quoted name"),
        ({"type": "Feature"}, "not PROJJSON of a CRS"),
        ("{not json", "not valid JSON"),
        ({"proj:code": "EPSG"}, "not an authority code"),
        (4.5, "got float"),
        (True, "got True"),
    ],
)
def test_parse_crs_refuses(parsing, given, message):
    with pytest.raises(InputError, match=message):
        geo.parse_crs(given)


def test_unknown_epsg_code_refused_when_pyproj_knows_better():
    with pytest.raises(InputError, match=r"unknown CRS 'EPSG:999999': PROJ does not recognise it"):
        geo.parse_crs("EPSG:999999")


def test_writer_refuses_unknown_crs_before_writing(tmp_path):
    with pytest.raises(InputError, match="unknown CRS 'Mars'"):
        zv.write_points(tmp_path / "p.zarr", np.zeros((3, 2)), chunk_shape=1, crs="Mars")
    assert not (tmp_path / "p.zarr").exists()


def _root_attrs(path: Path) -> dict:
    return json.loads((path / "zarr.json").read_text())["attributes"]


@pytest.mark.parametrize("crs", ["EPSG:32633", UTM33_WKT, UTM33_JSON])
def test_root_declares_geozarr_consistently(tmp_path, rng, crs):
    pos = rng.uniform([500_000, 4_900_000], [600_000, 5_000_000], (500, 2))
    path = tmp_path / "utm.zarr"
    ds = zv.write_points(path, pos, chunk_shape=10_000, crs=crs, axes=["easting", "northing"])
    attrs = _root_attrs(path)
    assert geo.check_geozarr(attrs) == []
    uuids = [c["uuid"] for c in attrs["zarr_conventions"]]
    assert uuids == ["f17cb550-5864-4468-aeb7-f3180cfb622f", "689b58e2-cf7b-45e0-9fff-9cfc0883d6b4"]
    assert [c["name"] for c in attrs["zarr_conventions"]] == ["proj:", "spatial:"]
    assert attrs["proj:code"] == "EPSG:32633"
    assert attrs["zarr_vectors"]["crs"] == {k: v for k, v in attrs.items() if k.startswith("proj:")}
    lo, hi = pos.min(axis=0), pos.max(axis=0)
    assert attrs["spatial:bbox"] == [lo[0], lo[1], hi[0], hi[1]]
    assert attrs["spatial:dimensions"] == ["easting", "northing"]
    assert "multiscales" in attrs and isinstance(attrs["multiscales"], list)  # NGFF list kept, no GeoZarr one
    back = zv.open(path).crs
    assert isinstance(back, geo.CRS) and back.code == "EPSG:32633" and back == ds.crs
    assert back.to_pyproj() == pyproj.CRS.from_epsg(32633)


def test_three_d_bbox_and_opaque_records(tmp_path, rng):
    pos = rng.uniform(0, 10, (50, 3))
    zv.write_points(tmp_path / "a.zarr", pos, chunk_shape=5, crs=4979)
    attrs = _root_attrs(tmp_path / "a.zarr")
    assert attrs["spatial:bbox"] == [*pos.min(axis=0), *pos.max(axis=0)]
    assert attrs["spatial:dimensions"] == ["x", "y", "z"]
    # A dict that is neither PROJJSON nor proj: keys is an opaque record: kept, no GeoZarr.
    zv.write_points(tmp_path / "b.zarr", pos, chunk_shape=5, crs={"name": "scanner frame"})
    attrs = _root_attrs(tmp_path / "b.zarr")
    assert attrs["zarr_vectors"]["crs"] == {"name": "scanner frame"}
    assert not any(k.startswith(("proj:", "spatial:", "zarr_conventions")) for k in attrs)
    assert zv.open(tmp_path / "b.zarr").crs == {"name": "scanner frame"}
    zv.write_points(tmp_path / "c.zarr", pos, chunk_shape=5)
    assert zv.open(tmp_path / "c.zarr").crs is None and "zarr_conventions" not in _root_attrs(
        tmp_path / "c.zarr"
    )


def test_check_geozarr_reports_drift():
    meta = RootMeta(
        chunk_shape=(1.0, 1.0), bounds=((0.0, 0.0), (2.0, 3.0)), axes=(Axis("x"), Axis("y")), crs="EPSG:4326"
    )
    attrs = meta.to_attributes()
    assert geo.check_geozarr(attrs) == []
    attrs["proj:code"] = "EPSG:3857"
    attrs["spatial:bbox"] = [0.0, 0.0, 2.0, 4.0]
    attrs["spatial:dimensions"] = ["lon", "lat"]
    attrs["zarr_conventions"] = attrs["zarr_conventions"][:1]
    problems = geo.check_geozarr(attrs)
    assert len(problems) == 4
    assert "spatial: (689b58e2" in problems[0] and "proj:code is 'EPSG:3857'" in problems[1]
    assert "spatial:bbox" in problems[2] and "spatial:dimensions" in problems[3]


def test_stored_crs_is_not_reparsed_on_open():
    attrs = RootMeta(chunk_shape=(1.0,), bounds=((0.0,), (1.0,)), axes=(Axis("x"),)).to_attributes()
    attrs["zarr_vectors"]["crs"] = "something a foreign writer put here"
    meta = RootMeta.from_attributes(attrs)
    assert meta.crs == "something a foreign writer put here"


@pytest.mark.interop
def test_reference_reads_georeferenced_line_store(tmp_path, reference):
    """The reference 0.9.2 reads a write_geometries line store with GeoZarr attributes as polylines
    and validates a polygon store without errors."""
    import shapely

    lines = [
        shapely.LineString([(0, 0), (7, 3), (12, 12)]),
        shapely.Point(3, 9),
        shapely.LineString([(1, 11), (11, 1)]),
    ]
    zv.write_geometries(
        tmp_path / "l.zarr",
        lines,
        chunk_shape=4,
        crs="EPSG:32633",
        object_attributes={"rank": np.array([3, 1, 2], np.int32)},
    )
    out = tmp_path / "l.npz"
    reference.run("read-lines", str(tmp_path / "l.zarr"), str(out), "--objects", "all")
    with np.load(out) as data:
        offsets, positions = data["line_offsets"], data["positions"]
        assert data["oattr__rank"].tolist() == [3, 1, 2]
    for i, line in enumerate(lines):
        np.testing.assert_array_equal(positions[offsets[i] : offsets[i + 1]], shapely.get_coordinates(line))
    zv.write_geometries(tmp_path / "p.zarr", [shapely.box(0, 0, 5, 5), shapely.Point(1, 1)], chunk_shape=2)
    assert reference.info(tmp_path / "p.zarr")["errors"] == []
