"""Shapely geometries in (write_geometries) and out (Result.to_shapely), GeoJSON and vector files."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
import shapely
from hypothesis import given, settings
from hypothesis import strategies as st

import zarr_vectors as zv
from zarr_vectors.cli import main
from zarr_vectors.errors import InputError
from zarr_vectors.io.geojson import (
    PropertiesSkippedWarning,
    export_geojson,
    ingest_vector,
    read_geojson,
    to_feature_collection,
)
from zarr_vectors.kinds.shapes import decompose
from zarr_vectors.result import Result
from zarr_vectors.shapely_io import geometries_from_paths


def _star(rng, center, r_min, r_max, n):
    """A star-shaped ring around ``center``: always a simple (valid) ring."""
    angles = (np.arange(n) + rng.uniform(0.0, 0.5, n)) * (2 * np.pi / n)  # spread out: a simple ring
    radii = rng.uniform(r_min, r_max, n)
    pts = np.c_[center[0] + radii * np.cos(angles), center[1] + radii * np.sin(angles)]
    return np.vstack([pts, pts[:1]])


def countries(rng, n=40):
    """A synthetic country layer: star polygons, some with lakes (holes), some with islands
    (multi-part, islands with their own lakes), in lon/lat-like float64 coordinates."""
    out = []
    for i in range(n):
        c = rng.uniform([-170, -80], [170, 80])
        shell = _star(rng, c, 2.0, 6.0, int(rng.integers(12, 60)))
        holes = [_star(rng, c + off, 0.2, 0.6, 7) for off in ([0.0, 0.0], [1.2, 0.0])[: i % 3]]
        main_part = shapely.Polygon(shell, holes)
        if i % 4 == 1:
            islands = [
                shapely.Polygon(
                    _star(rng, c + [9.0 + 3 * k, 0.0], 0.5, 1.2, 9),
                    [_star(rng, c + [9.0 + 3 * k, 0.0], 0.1, 0.2, 5)] if k else [],
                )
                for k in range(2)
            ]
            out.append(shapely.MultiPolygon([main_part, *islands]))
        else:
            out.append(main_part)
    assert shapely.is_valid(np.array(out)).all()
    return out


def _exact(a, b):
    return all(shapely.equals_exact(x, y, tolerance=0) and x.geom_type == y.geom_type for x, y in zip(a, b))


def test_country_layer_round_trips_exactly(tmp_path, rng):
    layer = countries(rng)
    pop = rng.integers(1, 10**9, len(layer))
    ds = zv.write_geometries(
        tmp_path / "c.zarr",
        layer,
        chunk_shape=20,
        crs="EPSG:4326",
        object_attributes={"pop": pop, "area": shapely.area(np.array(layer))},
    )
    assert ds.geometry_types == ("polygon",) and ds.num_objects() == len(layer)
    ids, geoms, attrs = ds.objects(list(range(len(layer)))[::-1]).to_shapely(object_attributes=True)
    assert ids.tolist() == list(range(len(layer))) and _exact(geoms, layer)
    assert attrs["pop"].tolist() == pop.tolist() and set(attrs) == {"pop", "area"}
    ids, geoms = ds.read().to_shapely()  # a whole-store read reconstructs the same
    assert _exact(geoms, layer)
    ids, geoms = ds.objects([3, 1], attributes=False).to_shapely()  # geom_* attributes are fetched
    assert ids.tolist() == [1, 3] and _exact(geoms, [layer[1], layer[3]])
    holes = sum(len(p.interiors) for g in layer for p in getattr(g, "geoms", [g]))
    assert holes > 10 and ds.attribute_names() == ["geom_part", "geom_ring"]


@pytest.mark.slow
def test_natural_earth_countries_round_trip_exactly(tmp_path):
    """A real layer: Natural Earth's low-resolution countries (177 polygons and multipolygons,
    Lesotho a hole in South Africa), the copy that ships inside pyogrio's test fixtures."""
    pyogrio = pytest.importorskip("pyogrio")
    from pathlib import Path

    shp = (
        Path(pyogrio.__file__).parent
        / "tests"
        / "fixtures"
        / "naturalearth_lowres"
        / "naturalearth_lowres.shp"
    )
    if not shp.exists():
        pytest.skip(f"this pyogrio build has no {shp.name}")
    meta, _, wkb, fields = pyogrio.raw.read(shp)
    layer = shapely.from_wkb(wkb)
    names = fields[meta["fields"].tolist().index("name")].astype(str)
    ds = zv.write_geometries(
        tmp_path / "ne.zarr",
        layer,
        chunk_shape=30,
        crs="EPSG:4326",
        object_attributes={"pop_est": fields[meta["fields"].tolist().index("pop_est")]},
    )
    ids, geoms = ds.read().to_shapely()
    assert ids.tolist() == list(range(len(layer))) and _exact(geoms, layer)
    assert sum(len(p.interiors) for g in layer for p in getattr(g, "geoms", [g])) >= 1
    assert {g.geom_type for g in layer} == {"Polygon", "MultiPolygon"}
    south_africa = int(np.flatnonzero(names == "South Africa")[0])
    _, box_geoms = ds.query(
        bbox=(list(layer[south_africa].bounds[:2]), list(layer[south_africa].bounds[2:])), whole_objects=True
    ).to_shapely()
    assert any(shapely.equals_exact(g, layer[south_africa], tolerance=0) for g in box_geoms)


MIXED_2D = [
    shapely.Point(1.5, 2.25),
    shapely.MultiPoint([(9.0, 9.0), (0.5, 0.5), (9.0, 9.0), (4.0, 1.0)]),  # order and repeats kept
    shapely.LineString([(0, 0), (3, 3.5), (7, 1), (9.9, 9.9)]),
    shapely.MultiLineString([[(0, 9), (9, 0)], [(1, 1), (1, 8), (8, 8)], [(5, 5), (5.5, 5.5)]]),
    shapely.Polygon(
        [(1, 1), (8, 1), (8, 8), (1, 8), (1, 1)],
        [[(2, 2), (3, 2), (3, 3), (2, 2)], [(5, 5), (6, 6), (5, 6), (5, 5)]],
    ),
    shapely.MultiPolygon([shapely.box(0, 0, 2, 2), shapely.Polygon([(4, 4), (9, 4), (9, 9), (4, 4)])]),
]


@pytest.mark.parametrize("ndim", [2, 3])
def test_every_type_round_trips_in_order(tmp_path, ndim):
    geoms = MIXED_2D
    if ndim == 3:  # z varies with x and y, so rings stay closed
        geoms = [
            shapely.transform(
                shapely.force_3d(g), lambda c: np.c_[c[:, :2], c[:, 0] * 0.5 - c[:, 1] ** 2], include_z=True
            )
            for g in geoms
        ]
    ds = zv.write_geometries(tmp_path / "m.zarr", geoms, chunk_shape=2.5)
    assert ds.ndim == ndim and ds.geometry_types == ("polygon",)
    ids, back = ds.objects([5, 3, 0, 1, 2, 4]).to_shapely()
    assert ids.tolist() == [0, 1, 2, 3, 4, 5] and _exact(back, geoms)
    assert shapely.has_z(back).all() == (ndim == 3)


def test_declared_types(tmp_path):
    pts = [shapely.Point(0, 0), shapely.MultiPoint([(3, 3), (0.5, 0.5), (3, 0)])]
    ds = zv.write_geometries(tmp_path / "p.zarr", pts, chunk_shape=1, bin_shape=0.5)
    assert ds.geometry_types == ("point_cloud",) and ds.attribute_names() == ["geom_part"]
    assert _exact(ds.objects([0, 1]).to_shapely()[1], pts)  # MultiPoint order restored across chunks
    lines = [shapely.LineString([(0, 0), (5, 5)]), shapely.Point(1, 4)]
    ds = zv.write_geometries(tmp_path / "l.zarr", lines, chunk_shape=1)
    assert ds.geometry_types == ("polyline",)
    res = ds.objects([0, 1])
    assert [len(x) for x in res.lines] == [2, 1]  # plain polylines: one line per object
    assert _exact(res.to_shapely()[1], lines)
    multi = [shapely.MultiLineString([[(0, 0), (1, 1)], [(2, 2), (3, 1)]])]
    assert zv.write_geometries(tmp_path / "ml.zarr", multi, chunk_shape=1).geometry_types == (
        "multi_polyline",
    )


def test_box_query_whole_or_clipped(tmp_path):
    ds = zv.write_geometries(tmp_path / "m.zarr", MIXED_2D, chunk_shape=2.5)
    lo, hi = [0.0, 0.0], [2.5, 2.5]
    res = ds.query(bbox=(lo, hi))
    inside = np.all((res.positions >= lo) & (res.positions <= hi), axis=1)
    assert inside.all() and len(res) > 0
    ids, whole = res.to_shapely()
    expected_ids = [
        i
        for i, g in enumerate(MIXED_2D)
        if np.all((shapely.get_coordinates(g) >= lo) & (shapely.get_coordinates(g) <= hi), axis=1).any()
    ]
    assert ids.tolist() == expected_ids and _exact(whole, [MIXED_2D[i] for i in ids])
    ids, clipped = res.to_shapely(clip=True)
    box = shapely.box(*lo, *hi)
    for i, g in zip(ids, clipped):
        assert shapely.equals(g, shapely.intersection(MIXED_2D[i], box)) and shapely.covered_by(g, box)
    assert ds.query(bbox=(lo, hi), whole_objects=True).to_shapely()[0].tolist() == expected_ids


def test_clip_refuses_what_shapely_cannot_cut(tmp_path):
    geoms = [shapely.LineString([(0, 0, 0), (4, 4, 4)])]
    ds = zv.write_geometries(tmp_path / "z.zarr", geoms, chunk_shape=1)
    res = ds.query(bbox=([0, 0, 0], [2, 2, 2]))
    with pytest.raises(InputError, match=r"cuts in the \(x, y\) plane only"):
        res.to_shapely(clip=True)
    flat = ds.query(bbox=([0, 0, -np.inf], [2, 2, np.inf])).to_shapely(clip=True)[1][0]
    assert shapely.equals_exact(flat, shapely.LineString([(0, 0, 0), (2, 2, 2)]), 1e-12)


def test_structural_geometries_of_other_stores(tmp_path, rng):
    pts = rng.uniform(0, 10, (30, 2))
    oid = np.repeat([4, 1, 7], 10)
    ds = zv.write_points(tmp_path / "p.zarr", pts, chunk_shape=3, object_ids=oid)
    ids, geoms = ds.read().to_shapely()
    assert ids.tolist() == [1, 4, 7]
    for i, g in zip(ids, geoms):
        assert g.geom_type == "MultiPoint"
        assert sorted(map(tuple, shapely.get_coordinates(g))) == sorted(map(tuple, pts[oid == i]))
    lines = [rng.uniform(0, 10, (5, 2)), rng.uniform(0, 10, (3, 2))]
    ds = zv.write_lines(tmp_path / "l.zarr", lines, chunk_shape=3)
    _, geoms = ds.objects([0, 1]).to_shapely()
    assert _exact(geoms, [shapely.LineString(x) for x in lines])
    ds = zv.write_graph(tmp_path / "g.zarr", pts[:4], np.array([[0, 1], [1, 2], [2, 3]]), chunk_shape=3)
    _, (graph,) = ds.objects([0]).to_shapely()
    assert graph.geom_type == "MultiLineString" and len(graph.geoms) == 3
    assert shapely.equals(graph, shapely.MultiLineString([pts[[0, 1]], pts[[1, 2]], pts[[2, 3]]]))
    with pytest.raises(InputError, match="needs object ids"):
        Result(positions=pts).to_shapely()
    with pytest.raises(InputError, match="to_trimesh"):
        Result(positions=pts[:3], object_ids=np.zeros(3, int), faces=np.array([[0, 1, 2]])).to_shapely()


BOWTIE = shapely.Polygon([(0, 0), (2, 2), (2, 0), (0, 2), (0, 0)])


@pytest.mark.parametrize(
    ("geoms", "message"),
    [
        ([BOWTIE], r"1 polygons are invalid \(first: geometry 0: Self-intersection"),
        ([shapely.Point(0, 0), shapely.Polygon()], "1 geometries are empty .first: geometry 1, a Polygon"),
        (
            [shapely.Point(0, 0), shapely.Point(1, 1, 1), shapely.Point(2, 2)],
            "mixed dimensions: 1 geometries are 3-D",
        ),
        ([shapely.GeometryCollection([shapely.Point(0, 0)])], "is a GeometryCollection"),
        ([shapely.LinearRing([(0, 0), (1, 0), (1, 1)])], "is a LinearRing"),
        ([shapely.Point(0, 0), None], "geometry 1 is NoneType, not a shapely geometry"),
        ([], "no geometries given"),
        (shapely.Point(0, 0), "wrap a single one in a list"),
        ([shapely.from_wkt("POINT M (1 2 3)")], "has M values"),
        (
            [
                shapely.MultiPoint([(0, 0)]).union(shapely.Point(1, 1)),
                shapely.from_wkt("MULTIPOINT (EMPTY, (1 1))"),
            ],
            "empty part",
        ),
    ],
)
def test_bad_input_is_refused(tmp_path, geoms, message):
    with pytest.raises(InputError, match=message):
        zv.write_geometries(tmp_path / "x.zarr", geoms, chunk_shape=1)
    assert not (tmp_path / "x.zarr").exists()


def test_repair_is_asked_for_and_reported(tmp_path):
    good = shapely.box(5, 5, 6, 6)
    with pytest.warns(zv.GeometryRepairedWarning, match=r"repaired 1 invalid polygons .* \(geometries 1\)"):
        ds = zv.write_geometries(tmp_path / "r.zarr", [good, BOWTIE], chunk_shape=1, repair=True)
    _, back = ds.objects([0, 1]).to_shapely()
    assert _exact([back[0]], [good])
    fixed = shapely.make_valid(BOWTIE, method="structure", keep_collapsed=False)
    assert (
        back[1].geom_type == "MultiPolygon"
        and shapely.equals_exact(back[1], fixed, 0)
        and back[1].area == 2.0
    )


def test_object_attribute_checks(tmp_path):
    with pytest.raises(InputError, match="'geom_type' is reserved"):
        zv.write_geometries(
            tmp_path / "a.zarr", [BOWTIE.envelope], chunk_shape=1, object_attributes={"geom_type": [1]}
        )
    with pytest.raises(InputError, match="has 2 rows but there are 1 geometries"):
        zv.write_geometries(
            tmp_path / "a.zarr", [BOWTIE.envelope], chunk_shape=1, object_attributes={"a": [1, 2]}
        )


coords = st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False, width=64)
point2 = st.tuples(coords, coords)


@st.composite
def geometry(draw):
    kind = draw(
        st.sampled_from(["Point", "MultiPoint", "LineString", "MultiLineString", "Polygon", "MultiPolygon"])
    )
    if kind == "Point":
        return shapely.Point(draw(point2))
    if kind == "MultiPoint":
        return shapely.MultiPoint(draw(st.lists(point2, min_size=1, max_size=4)))
    line = st.lists(point2, min_size=2, max_size=5)
    if kind == "LineString":
        return shapely.LineString(draw(line))
    if kind == "MultiLineString":
        return shapely.MultiLineString(draw(st.lists(line, min_size=1, max_size=3)))
    # (possibly invalid) polygons: decomposition must not care about validity
    ring = st.lists(point2, min_size=3, max_size=5).map(lambda r: [*r, r[0]])
    poly = st.builds(lambda s, h: shapely.Polygon(s, h), ring, st.lists(ring, max_size=1))
    if kind == "Polygon":
        return draw(poly)
    return shapely.MultiPolygon(draw(st.lists(poly, min_size=1, max_size=2)))


@pytest.mark.slow
@settings(max_examples=80, deadline=None)
@given(st.lists(geometry(), min_size=1, max_size=6))
def test_decompose_then_rebuild_is_identity(geoms):
    """The pure encoder/decoder pair: paths in, geometries back, exactly, in any row order of the objects."""
    arr = np.array(geoms, dtype=object)
    types = shapely.get_type_id(arr)
    paths = decompose(arr, types, 2)
    obj = paths.per_vertex(paths.geometry)
    part, ring = paths.per_vertex(paths.part), paths.per_vertex(paths.ring)
    assert len(paths.positions) == shapely.get_num_coordinates(arr).sum()
    back = geometries_from_paths(paths.positions, obj, part, ring, types)
    assert _exact(back, geoms)


# -- GeoJSON and vector files ------------------------------------------------------------------


def _feature_collection(layer, props):
    features = [
        {
            "type": "Feature",
            "geometry": shapely.geometry.mapping(g),
            "properties": {k: v[i] for k, v in props.items()},
        }
        for i, g in enumerate(layer)
    ]
    return {"type": "FeatureCollection", "features": features}


def test_geojson_ingest_export_round_trip(tmp_path, rng):
    layer = countries(rng, 12)
    props = {
        "name": [f"land {i}" if i != 5 else None for i in range(12)],
        "tags": [["a", "b"]] * 12,  # lists are neither numbers nor strings: left out, and said so
        "pop": [int(x) for x in rng.integers(0, 10**6, 12)],
        "gdp per head": [None if i == 3 else float(i) * 1.5 for i in range(12)],
        "coastal": [bool(i % 2) for i in range(12)],
        "code": [7] * 11 + [None],
    }
    src = tmp_path / "in.geojson"
    src.write_text(json.dumps(_feature_collection(layer, props)))
    with pytest.warns(
        PropertiesSkippedWarning,
        match=r"'tags' \(neither numbers nor strings\), 'gdp per head' stored as 'gdp_per_head'",
    ):
        ds = ingest_vector(tmp_path / "c.zarr", src, chunk_shape=15)
    assert ds.crs.code == "EPSG:4326"
    assert ds.object_attribute_names() == ["coastal", "code", "gdp_per_head", "geom_type", "name", "pop"]
    out = tmp_path / "out.geojson"
    assert export_geojson(ds.read(), out) == 12
    doc = json.loads(out.read_text())
    assert "crs" not in doc  # EPSG:4326 is GeoJSON's own
    back = read_geojson(out)
    assert _exact(back.geometries, layer)
    feats = doc["features"]
    assert [f["id"] for f in feats] == list(range(12))
    assert [f["properties"]["pop"] for f in feats] == props["pop"]
    assert [f["properties"]["name"] for f in feats] == props["name"]  # a missing name stays null
    assert feats[3]["properties"]["gdp_per_head"] is None and feats[4]["properties"]["gdp_per_head"] == 6.0
    assert [f["properties"]["coastal"] for f in feats] == [int(x) for x in props["coastal"]]
    assert feats[11]["properties"]["code"] is None and feats[0]["properties"]["code"] == 7


def test_geojson_export_of_a_polygon_query_and_of_plain_points(tmp_path, rng):
    ds = zv.write_geometries(tmp_path / "m.zarr", MIXED_2D, chunk_shape=2.5, crs="EPSG:32633")
    roi = shapely.box(0, 0, 3, 3)
    doc = to_feature_collection(ds.query(polygon=roi), clip=True)
    assert doc["crs"]["properties"]["name"] == "urn:ogc:def:crs:EPSG::32633"
    for f in doc["features"]:
        g = shapely.geometry.shape(f["geometry"])
        assert shapely.equals(g, shapely.intersection(MIXED_2D[f["id"]], roi))
    res = Result(positions=np.array([[1.0, 2.0], [3.0, 4.0]]), attributes={"a": np.array([0.5, np.nan])})
    feats = to_feature_collection(res)["features"]
    assert [f["geometry"]["coordinates"] for f in feats] == [[1.0, 2.0], [3.0, 4.0]]
    assert [f["properties"]["a"] for f in feats] == [0.5, None]


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        (
            {
                "type": "FeatureCollection",
                "features": [{"type": "Feature", "geometry": None, "properties": {}}],
            },
            "feature 0 has no geometry",
        ),
        ({"type": "Topology"}, "not a GeoJSON document"),
        (
            {"type": "Feature", "geometry": {"type": "Polygon", "coordinates": [[[0, 0], [1]]]}},
            "unreadable geometry",
        ),
    ],
)
def test_geojson_refusals(doc, message):
    with pytest.raises(InputError, match=message):
        read_geojson(doc)


def test_legacy_crs_member_and_bare_geometry(tmp_path):
    doc = {
        "type": "FeatureCollection",
        "crs": {"type": "name", "properties": {"name": "urn:ogc:def:crs:EPSG::3857"}},
        "features": [
            {"type": "Feature", "geometry": {"type": "Point", "coordinates": [1, 2]}, "properties": {}}
        ],
    }
    assert read_geojson(doc).crs == "urn:ogc:def:crs:EPSG::3857"
    table = read_geojson({"type": "LineString", "coordinates": [[0, 0], [1, 1]]})
    assert table.geometries[0].equals(shapely.LineString([(0, 0), (1, 1)])) and table.crs is None


def test_vector_files_through_pyogrio_and_geopandas(tmp_path, rng):
    gpd = pytest.importorskip("geopandas")
    pytest.importorskip("pyogrio")
    layer = countries(rng, 6)
    frame = gpd.GeoDataFrame(
        {"rank": np.arange(6, dtype=np.int32), "label": list("abcdef")}, geometry=layer, crs="EPSG:3035"
    )
    frame.to_file(tmp_path / "c.gpkg", driver="GPKG", engine="pyogrio")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numbers and text are both stored as given
        ds = ingest_vector(tmp_path / "c.zarr", tmp_path / "c.gpkg", chunk_shape=10)
    assert ds.crs.code == "EPSG:3035" and ds.object_attributes("rank").tolist() == list(range(6))
    assert ds.object_attributes("label").tolist() == list("abcdef")
    as_read = gpd.read_file(tmp_path / "c.gpkg", engine="pyogrio").geometry.values  # GPKG promotes to multi
    assert _exact(ds.read().to_shapely()[1], as_read) and shapely.equals(as_read, np.array(layer)).all()
    ds = ingest_vector(tmp_path / "f.zarr", frame, chunk_shape=10, crs="EPSG:3035")
    assert _exact(ds.read().to_shapely()[1], layer) and ds.object_attributes("label").tolist() == list(
        "abcdef"
    )
    with pytest.raises(InputError, match="cannot read"):
        ingest_vector(tmp_path / "x.zarr", tmp_path / "missing.gpkg", chunk_shape=1)


def test_cli_ingest_geojson_and_query_to_geojson(tmp_path, rng, capsys):
    layer = countries(rng, 5)
    src = tmp_path / "in.geojson"
    src.write_text(json.dumps(_feature_collection(layer, {"name": list("abcde"), "tags": [[1]] * 5})))
    store = tmp_path / "c.zarr"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the command reports, it does not warn
        assert (
            main(
                ["ingest", "geojson", str(src), "-o", str(store), "--chunk-size", "20", "--crs", "EPSG:4326"]
            )
            == 0
        )
    captured = capsys.readouterr()
    assert "wrote 5 features (polygon)" in captured.out and "CRS EPSG:4326" in captured.out
    assert (
        "warning: feature properties not stored as given: 'tags' (neither numbers nor strings)"
        in captured.err
    )
    assert zv.open(store).object_attributes("name").tolist() == list("abcde")
    out = tmp_path / "q.geojson"
    assert main(["query", str(store), "-o", str(out)]) == 0
    assert _exact(read_geojson(out).geometries, layer)
    bad = tmp_path / "bad.geojson"
    bad.write_text(json.dumps(_feature_collection([BOWTIE], {})))
    assert main(["ingest", "geojson", str(bad), "-o", str(tmp_path / "b.zarr"), "--chunk-size", "1"]) == 2
    assert "Self-intersection" in capsys.readouterr().err
    assert (
        main(["ingest", "geojson", str(bad), "-o", str(tmp_path / "b.zarr"), "--chunk-size", "1", "--repair"])
        == 0
    )
    assert "repaired 1 invalid polygons" in capsys.readouterr().err
