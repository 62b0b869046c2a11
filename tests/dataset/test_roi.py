"""Polygon region-of-interest queries against shapely.contains_xy on the full data, and Result.subset."""

from __future__ import annotations

import numpy as np
import pytest
import shapely
from hypothesis import given, settings
from hypothesis import strategies as st

import zarr_vectors as zv
from tests._io import open_counting
from zarr_vectors.errors import InputError
from zarr_vectors.result import Result

_ANGLES = np.linspace(0, 2 * np.pi, 24, endpoint=False)
_RADII = np.tile([380.0, 150.0], 12)
STAR = shapely.Polygon(
    np.c_[500 + _RADII * np.cos(_ANGLES), 500 + _RADII * np.sin(_ANGLES)],
    [[(470, 470), (530, 470), (530, 530), (470, 530)]],
)  # a star with a square hole
LAKE_ISLAND = shapely.Point(700, 750).buffer(120).difference(shapely.Point(690, 760).buffer(40))
ISLANDS = shapely.MultiPolygon([shapely.box(40, 40, 260, 180), LAKE_ISLAND, shapely.box(900, 0, 1000, 90)])


def _rows(positions, *columns):
    table = np.column_stack([positions, *[np.asarray(c, float).reshape(len(positions), -1) for c in columns]])
    return table[np.lexsort(table.T[::-1])]


@pytest.mark.parametrize("polygon", [STAR, ISLANDS], ids=["star-with-hole", "multipolygon"])
@pytest.mark.parametrize("bin_shape", [None, 25.0])
def test_points_inside_match_contains_xy(tmp_path, rng, polygon, bin_shape):
    pos = rng.uniform(0, 1000, (40_000, 2))
    pos[:24] = shapely.get_coordinates(STAR.exterior)[:-1]  # on the boundary: not inside
    pos[24:28] = shapely.get_coordinates(STAR.interiors[0])[:-1]
    mass = rng.random(len(pos)).astype(np.float32)
    oid = rng.integers(0, 300, len(pos))
    ds = zv.write_points(
        tmp_path / "p.zarr",
        pos,
        chunk_shape=100,
        bin_shape=bin_shape,
        attributes={"mass": mass},
        object_ids=oid,
    )
    res = ds.query(polygon=polygon)
    want = shapely.contains_xy(polygon, pos[:, 0], pos[:, 1])
    assert len(res) == int(want.sum()) > 1000
    assert np.array_equal(
        _rows(res.positions, res.attributes["mass"], res.object_ids), _rows(pos[want], mass[want], oid[want])
    )
    whole = ds.query(polygon=polygon, whole_objects=True)  # point clouds: whole objects need the index
    assert np.array_equal(np.unique(whole.object_ids), np.unique(oid[want]))


def test_reads_only_the_chunks_of_the_polygon_box(tmp_path, rng):
    pos = rng.uniform(0, 1000, (20_000, 2))
    zv.write_points(tmp_path / "p.zarr", pos, chunk_shape=100)
    ds, counter = open_counting(tmp_path / "p.zarr")
    roi = shapely.Polygon([(130, 210), (380, 250), (250, 390)])
    res = ds.query(polygon=roi)
    assert len(counter.gets) == 1
    cells = {k.rsplit("/c/", 1)[1] for k in counter.gets[0] if k.startswith("0/vertices/")}
    assert cells == {f"{i}/{j}" for i in (1, 2, 3) for j in (2, 3)}
    assert len(res) == int(shapely.contains_xy(roi, pos[:, 0], pos[:, 1]).sum())


def test_three_d_store_over_two_named_axes(tmp_path, rng):
    pos = rng.uniform(0, 1000, (15_000, 3))
    ds = zv.write_points(tmp_path / "p.zarr", pos, chunk_shape=200, attributes={"i": np.arange(len(pos))})
    res = ds.query(polygon=STAR, polygon_axes=("x", "z"))
    want = shapely.contains_xy(STAR, pos[:, 0], pos[:, 2])
    assert sorted(res.attributes["i"].tolist()) == np.flatnonzero(want).tolist()
    lo, hi = [0, 0, 0], [1000, 400, 1000]  # a box narrows the other axis too
    res = ds.query(bbox=(lo, hi), polygon=STAR, polygon_axes=["z", "x"])
    want = shapely.contains_xy(STAR, pos[:, 2], pos[:, 0]) & (pos[:, 1] <= 400)
    assert sorted(res.attributes["i"].tolist()) == np.flatnonzero(want).tolist()
    with pytest.raises(
        InputError, match=r"say which two the polygon lies in, e.g. polygon_axes=\('x', 'y'\)"
    ):
        ds.query(polygon=STAR)
    with pytest.raises(
        InputError, match=r"a polygon axis must be one of 'x', 'y', 'z'; got 'w' \(or an axis index\)"
    ):
        ds.query(polygon=STAR, polygon_axes=("x", "w"))
    with pytest.raises(InputError, match="two different axes"):
        ds.query(polygon=STAR, polygon_axes=(0, "x"))


def _brute_pieces(lines, inside_of):
    pieces = []
    for line in lines:
        inside = inside_of(line)
        start = None
        for i, ok in enumerate(np.append(inside, False)):
            if ok and start is None:
                start = i
            elif not ok and start is not None:
                pieces.append(tuple(map(tuple, line[start:i])))
                start = None
    return sorted(pieces)


def test_line_pieces_and_edges_inside_a_polygon(tmp_path, rng):
    lines = [
        np.cumsum(rng.normal(0, 20, (int(rng.integers(2, 150)), 2)), axis=0) + rng.uniform(200, 800, 2)
        for _ in range(80)
    ]
    ds = zv.write_lines(tmp_path / "l.zarr", lines, chunk_shape=100)
    res = ds.query(polygon=STAR)

    def inside_of(p):
        return shapely.contains_xy(STAR, p[:, 0], p[:, 1])

    assert sorted(tuple(map(tuple, x)) for x in res.lines) == _brute_pieces(lines, inside_of)
    assert shapely.contains_xy(STAR, res.positions[:, 0], res.positions[:, 1]).all()
    steps = np.diff(res.edges, axis=1).ravel()
    assert (steps == 1).all() and len(res.edges) == len(res) - (len(res.line_offsets) - 1)
    whole = ds.query(polygon=STAR, whole_objects=True)
    hit = [i for i, line in enumerate(lines) if inside_of(line).any()]
    assert np.unique(whole.object_ids).tolist() == hit and len(whole) == sum(len(lines[i]) for i in hit)


def test_geometry_store_clip_to_polygon(tmp_path):
    roads = [
        shapely.LineString([(0, 500), (300, 505), (1000, 520)]),
        shapely.LineString([(500, 0), (520, 1000)]),
        shapely.LineString([(0, 0), (100, 30)]),
    ]
    parks = [shapely.box(450, 450, 560, 560), shapely.Polygon([(600, 600), (700, 600), (650, 700)])]
    ds = zv.write_geometries(tmp_path / "g.zarr", roads + parks, chunk_shape=100)
    res = ds.query(polygon=STAR)
    ids, whole = res.to_shapely()
    assert ids.tolist() == [0, 3, 4]  # objects with a vertex strictly inside (road 1 only crosses it)
    assert all(shapely.equals_exact(whole[k], (roads + parks)[i], 0) for k, i in enumerate(ids))
    ids, clipped = res.to_shapely(clip=True)
    for k, i in enumerate(ids):
        assert shapely.equals(clipped[k], shapely.intersection((roads + parks)[i], STAR))


def test_mesh_faces_inside_a_polygon(tmp_path):
    trimesh = pytest.importorskip("trimesh")
    m = trimesh.creation.icosphere(subdivisions=3)
    v, f = m.vertices * 400 + 500, m.faces
    ds = zv.write_mesh(tmp_path / "m.zarr", v, f, chunk_shape=200)
    res = ds.query(polygon=STAR, polygon_axes=("x", "y"))
    inside = shapely.contains_xy(STAR, v[:, 0], v[:, 1])
    assert len(res) == int(inside.sum()) and len(res.faces) == int(inside[f].all(axis=1).sum())
    with pytest.raises(InputError, match="faces='inside' only"):
        ds.query(polygon=STAR, polygon_axes=("x", "y"), faces="touching")


@pytest.mark.parametrize(
    ("polygon", "message"),
    [
        (shapely.Polygon([(0, 0), (2, 2), (2, 0), (0, 2)]), r"polygon is invalid \(Self-intersection"),
        (shapely.Polygon(), "polygon is empty"),
        (shapely.Point(0, 0).buffer(1).exterior, "got LinearRing"),
        ([(0, 0), (1, 0), (1, 1)], "got list"),
    ],
)
def test_bad_polygons(tmp_path, polygon, message):
    ds = zv.write_points(tmp_path / "p.zarr", np.array([[0.5, 0.2], [3.0, 3.0]]), chunk_shape=1)
    with pytest.raises(InputError, match=message):
        ds.query(polygon=polygon)


def test_callers_polygon_is_left_alone(tmp_path):
    ds = zv.write_points(tmp_path / "p.zarr", np.array([[0.5, 0.2], [3.0, 3.0]]), chunk_shape=1)
    poly = shapely.box(0, 0, 1, 1)
    assert len(ds.query(polygon=poly)) == 1 and not shapely.is_prepared(poly)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 6), min_size=1, max_size=6), st.data())
def test_subset_keeps_line_pieces_consistent(lengths, data):
    """Pieces of a subset are the maximal runs of kept rows inside each original piece."""
    n = sum(lengths)
    offsets = np.r_[0, np.cumsum(lengths)]
    owner = np.repeat(np.arange(len(lengths)), lengths)
    follows = np.flatnonzero(owner[1:] == owner[:-1])
    res = Result(
        positions=np.arange(n, dtype=float)[:, None],
        object_ids=owner,
        line_offsets=offsets,
        edges=np.stack([follows, follows + 1], axis=1),
        attributes={"a": np.arange(n) * 2},
    )
    mask = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    sub = res.subset(mask)
    got = [tuple(x[:, 0].astype(int)) for x in sub.lines]
    want, run = [], []
    for row in range(n):  # brute force: walk every row
        if row in offsets or not mask[row]:
            want += [tuple(run)] if run else []
            run = []
        if mask[row]:
            run.append(row)
    want += [tuple(run)] if run else []
    assert got == want
    assert np.array_equal(sub.attributes["a"], res.attributes["a"][mask])
    kept = sub.positions[sub.edges][:, :, 0]
    assert (np.diff(kept, axis=1) == 1).all() and len(sub.edges) == len(sub) - len(got)


@pytest.mark.parametrize("seed", range(4))
def test_grid_shortcut_equals_contains_xy(seed):
    """contains() decides most rows by grid cell; it must agree with contains_xy row for row,
    also for rows on the polygon's boundary, on its vertices and on cell edges."""
    from zarr_vectors.dataset.polygon import as_polygon, contains

    rng = np.random.default_rng(seed)
    n_vertices = int(rng.integers(5, 200))
    a = np.sort(rng.uniform(0, 2 * np.pi, n_vertices))
    r = rng.uniform(50, 400, n_vertices)
    ring = np.c_[500 + r * np.cos(a), 500 + r * np.sin(a)]
    shape = shapely.Polygon(ring)  # star-shaped around (500, 500): simple
    poly = as_polygon(shape.difference(shapely.box(480, 480, 520, 520)) if seed % 2 else shape)
    pts = rng.uniform(0, 1000, (60_000, 2))
    pts[:n_vertices] = ring  # polygon vertices: on the boundary
    pts[n_vertices : 2 * n_vertices] = (ring + np.roll(ring, 1, axis=0)) / 2  # edge midpoints
    pts[-1000:] = np.round(pts[-1000:] / 25) * 25  # on a lattice, like cell edges
    assert np.array_equal(
        contains(poly, pts[:, 0], pts[:, 1]), shapely.contains_xy(poly, pts[:, 0], pts[:, 1])
    )


@pytest.mark.parametrize("spread", [0.0, 0.01])
def test_grid_shortcut_with_rows_flat_on_one_axis(spread):
    """Rows along a road (or a slab seen edge-on) have no extent on one axis; the shortcut
    must still agree with contains_xy, without sampling the boundary at a vanishing step."""
    from zarr_vectors.dataset.polygon import as_polygon, contains

    rng = np.random.default_rng(7)
    x = rng.uniform(0, 1000, 30_000)
    y = 500 + rng.uniform(0, spread, len(x))
    a = np.linspace(0, 2 * np.pi, 60, endpoint=False)
    star = shapely.Polygon(
        np.c_[
            500 + np.where(np.arange(60) % 2, 200, 450) * np.cos(a),
            500 + np.where(np.arange(60) % 2, 200, 450) * np.sin(a),
        ]
    )
    for shape in (star, shapely.box(-1e6, -1e6, 1e6, 1e6).difference(star)):
        poly = as_polygon(shape)
        got = contains(poly, x, y)
        assert np.array_equal(got, shapely.contains_xy(poly, x, y)) and 0 < got.sum() < len(x)
