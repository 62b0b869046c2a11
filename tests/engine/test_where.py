"""Attribute filters (``where=``): parsing, and queries of every family against numpy."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import shapely
from hypothesis import given, settings
from hypothesis import strategies as st

import zarr_vectors as zv
from tests.conftest import brute_force_box, sorted_rows
from zarr_vectors.engine.read.where import Condition, parse_where
from zarr_vectors.errors import AttributeNotFoundError, InputError

N = 30_000


@pytest.fixture(scope="module")
def synapses(tmp_path_factory):
    rng = np.random.default_rng(8)
    pts = rng.uniform(0, 400, (N, 3)).astype(np.float32)
    conf = rng.random(N).astype(np.float32)
    kind = rng.integers(0, 6, N).astype(np.uint8)
    seg = rng.choice(np.array([2**63 + 5, 7, 720575940621039145, 2**40], np.uint64), N)
    path = tmp_path_factory.mktemp("where") / "syn.zarr"
    seg_ids = np.unique(seg)
    zv.write_points(
        path,
        pts,
        chunk_shape=100,
        bin_shape=25,
        attributes={"confidence": conf, "kind": kind},
        object_ids=seg,
        object_attributes={"volume": np.arange(len(seg_ids)) * 10.0},
    )
    volume = dict(zip(seg_ids.tolist(), (np.arange(len(seg_ids)) * 10.0).tolist()))
    return zv.open(path), pts, conf, kind, seg, np.array([volume[s] for s in seg.tolist()])


def test_forms_parse_to_the_same_conditions():
    want = [Condition("confidence", ">", 0.8), Condition("kind", "==", 3)]
    assert parse_where({"confidence": (">", 0.8), "kind": 3}) == want
    assert parse_where("confidence > 0.8 and kind == 3") == want
    assert parse_where("0.8 < confidence AND kind = 3") == want
    assert parse_where(["confidence > 0.8", ("kind", "==", 3)]) == want
    assert parse_where({"confidence": [(">", 0.8), ("<=", 1)]})[1] == Condition("confidence", "<=", 1)
    assert parse_where(None) == []


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ("confidence >> 0.8", "cannot read 'confidence >> 0.8'"),
        ("confidence > high", "cannot read"),
        ({"confidence": ("~", 1)}, "unknown operator '~'"),
        ({"confidence": (">", "high")}, "needs a number or a date, got 'high'"),
        ({"kind": ("in", 3)}, "needs a list of numbers"),
        ({"kind": ("between", (1, 2, 3))}, "between needs (low, high)"),
        (42, "where must be a mapping, a string or a list"),
        ([("kind", 3)], "each item must be a string or (name, op, value)"),
    ],
)
def test_malformed_filters_say_what_to_write(where, message):
    with pytest.raises(InputError) as err:
        parse_where(where)
    assert message in str(err.value)


_OPS = st.sampled_from(["<", "<=", ">", ">=", "==", "!="])


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(st.floats(allow_nan=True, width=32), min_size=1, max_size=40),
    op=_OPS,
    bound=st.floats(allow_nan=False, allow_infinity=True),
)
def test_a_condition_equals_numpy(values, op, bound):
    col = np.array(values, np.float32)
    (cond,) = parse_where({"a": (op, bound)})
    exact = np.array(
        [
            {
                "<": x < bound,
                "<=": x <= bound,
                ">": x > bound,
                ">=": x >= bound,
                "==": x == bound,
                "!=": x != bound,
            }[op]
            for x in col.astype(np.float64).tolist()
        ]
    )
    assert np.array_equal(cond.mask(col), exact)


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(st.integers(0, 255), min_size=1, max_size=40),
    op=_OPS,
    bound=st.one_of(st.integers(-1000, 1000), st.floats(-300, 300)),
)
def test_integer_columns_compare_exactly_even_past_their_dtype(values, op, bound):
    col = np.array(values, np.uint8)
    (cond,) = parse_where([("a", op, bound)])
    exact = np.array(
        [
            {
                "<": x < bound,
                "<=": x <= bound,
                ">": x > bound,
                ">=": x >= bound,
                "==": x == bound,
                "!=": x != bound,
            }[op]
            for x in values
        ]
    )
    assert np.array_equal(cond.mask(col), exact)


BOX = ([37.5, 80.0, 10.0], [260.0, 333.3, 290.0])


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize(
    ("where", "rows"),
    [
        ({"confidence": (">", 0.8)}, lambda c, k, v: c > 0.8),
        ("confidence >= 0.25 and kind != 2", lambda c, k, v: (c >= 0.25) & (k != 2)),
        ({"kind": ("in", [1, 4])}, lambda c, k, v: np.isin(k, [1, 4])),
        ({"volume": ("between", (10, 20))}, lambda c, k, v: (v >= 10) & (v <= 20)),
        ("volume > 0 and confidence < 0.5", lambda c, k, v: (v > 0) & (c < 0.5)),
    ],
)
def test_box_with_where_equals_brute_force(synapses, where, rows, workers):
    ds, pts, conf, kind, seg, volume = synapses
    keep = brute_force_box(pts, *BOX) & rows(conf, kind, volume)
    res = ds.query(bbox=BOX, where=where, workers=workers)
    assert len(res) == keep.sum() > 0
    got = sorted_rows(res.positions, res.attributes["confidence"], res.attributes["kind"], res.object_ids)
    assert np.array_equal(got, sorted_rows(pts[keep], conf[keep], kind[keep], seg[keep]))
    assert res.object_ids.dtype == np.uint64


def test_filter_attributes_need_not_be_returned(synapses):
    ds, pts, conf, kind, seg, volume = synapses
    res = ds.query(bbox=BOX, attributes=["kind"], object_ids=False, where="confidence > 0.9 and volume >= 10")
    keep = brute_force_box(pts, *BOX) & (conf > 0.9) & (volume >= 10)
    assert list(res.attributes) == ["kind"] and res.object_ids is None
    assert np.array_equal(
        sorted_rows(res.positions, res.attributes["kind"]), sorted_rows(pts[keep], kind[keep])
    )


def test_where_on_whole_reads_and_polygons(synapses):
    ds, pts, conf, kind, seg, volume = synapses
    assert len(ds.read(where={"kind": 5})) == int((kind == 5).sum())
    poly = shapely.Polygon([(0, 0), (300, 40), (120, 390)])
    res = ds.query(polygon=poly, polygon_axes=("x", "y"), where="confidence < 0.1")
    inside = shapely.contains_xy(poly, pts[:, 0], pts[:, 1]) & (conf < 0.1)
    assert np.array_equal(sorted_rows(res.positions), sorted_rows(pts[inside]))


def test_unknown_and_unfit_attributes_are_refused(synapses):
    ds = synapses[0]
    with pytest.raises(AttributeNotFoundError, match="'colour'; level 0 has vertex or object attributes"):
        ds.query(bbox=BOX, where="colour > 1")


def test_multi_column_attributes_are_refused(tmp_path):
    ds = zv.write_points(
        tmp_path / "rgb.zarr", np.zeros((4, 2)), chunk_shape=4, attributes={"rgb": np.ones((4, 3))}
    )
    with pytest.raises(InputError, match="'rgb' is float64 with 3 values per row"):
        ds.query(where="rgb > 0")


def test_lines_lose_the_vertices_that_fail(tmp_path):
    lines = [np.array([[0, 0], [1, 0], [2, 0], [3, 0]], float), np.array([[0, 2], [3, 2]], float)]
    t = [np.array([1.0, 5.0, 1.0, 1.0]), np.array([1.0, 1.0])]
    ds = zv.write_lines(tmp_path / "l.zarr", lines, chunk_shape=2, attributes={"t": t})
    res = ds.query(bbox=([0, 0], [3, 3]), where="t < 2")
    assert sorted(map(len, res.lines)) == [1, 2, 2]  # the first line splits where its vertex fails
    assert len(res) == 5 and (res.attributes["t"] < 2).all()
    assert all(res.attributes["t"][e].max() < 2 for e in res.edges)


def test_meshes_drop_the_faces_of_failing_vertices(tmp_path):
    import trimesh

    mesh = trimesh.creation.icosphere(subdivisions=2, radius=10)
    height = mesh.vertices[:, 2].copy()
    ds = zv.write_mesh(
        tmp_path / "m.zarr", mesh.vertices, mesh.faces, chunk_shape=8, attributes={"h": height}
    )
    res = ds.query(bbox=([-20] * 3, [20] * 3), where="h > 0")
    assert len(res) == int((height > 0).sum()) and (res.attributes["h"] > 0).all()
    want = mesh.faces[(height[mesh.faces] > 0).all(axis=1)]
    assert len(res.faces) == len(want)


@pytest.mark.slow
def test_cli_where(tmp_path):
    rng = np.random.default_rng(3)
    pts, c = rng.uniform(0, 100, (3000, 3)), rng.random(3000)
    zv.write_points(tmp_path / "s.zarr", pts, chunk_shape=25, attributes={"confidence": c})
    run = [sys.executable, "-m", "zarr_vectors", "query", str(tmp_path / "s.zarr")]
    out = subprocess.run(
        [*run, "--bbox", "0,0,0,50,50,50", "--where", "confidence > 0.8", "--count"],
        capture_output=True,
        text=True,
        check=True,
    )
    want = int((brute_force_box(pts, [0] * 3, [50] * 3) & (c > 0.8)).sum())
    assert out.stdout.strip() == f"{want:,} vertices"
    tri = shapely.Polygon([(0, 0), (80, 10), (40, 90)])
    out = tmp_path / "o.csv"  # point clouds to CSV are written piece by piece: the filters go along
    subprocess.run([*run, "--where", "confidence > 0.8", "--polygon", tri.wkt, "-o", str(out)], check=True)
    rows = np.loadtxt(out, delimiter=",", skiprows=1, ndmin=2)
    keep = (c > 0.8) & shapely.contains_xy(tri, pts[:, 0], pts[:, 1])
    assert np.array_equal(sorted_rows(rows[:, :3]), sorted_rows(pts[keep]))
    bad = subprocess.run([*run, "--where", "confidence >> 1", "--count"], capture_output=True, text=True)
    assert bad.returncode != 0 and "cannot read 'confidence >> 1'" in bad.stderr


@pytest.mark.slow
def test_export_points_takes_where_and_polygon(tmp_path):
    rng = np.random.default_rng(8)
    pts, c = rng.uniform(0, 100, (4000, 2)), rng.random(4000)
    zv.write_points(tmp_path / "s.zarr", pts, chunk_shape=25, attributes={"confidence": c})
    tri = shapely.Polygon([(5, 0), (95, 20), (30, 90)])
    run = [sys.executable, "-m", "zarr_vectors", "export"]
    out = tmp_path / "o.csv"
    subprocess.run(
        [
            *run,
            "points",
            str(tmp_path / "s.zarr"),
            "--where",
            "confidence <= 0.3",
            "--polygon",
            tri.wkt,
            "-o",
            str(out),
            "--no-progress",
        ],
        check=True,
        capture_output=True,
    )
    rows = np.loadtxt(out, delimiter=",", skiprows=1, ndmin=2)
    keep = (c <= 0.3) & shapely.contains_xy(tri, pts[:, 0], pts[:, 1])
    assert np.array_equal(sorted_rows(rows[:, :2]), sorted_rows(pts[keep]))
    bad = subprocess.run(
        [*run, "swc", str(tmp_path / "s.zarr"), "--where", "confidence > 1", "-o", "x.swc"],
        capture_output=True,
        text=True,
    )
    assert bad.returncode != 0 and "--polygon and --where go with export points, not export swc" in bad.stderr
