"""Pyramids of lines, skeletons and graphs: Douglas-Peucker within tolerance, topology and ids
kept, attributes carried, exact box queries at coarse levels."""

from __future__ import annotations

import json

import numpy as np
import pytest

import zarr_vectors as zv
from tests._builders import random_walks
from tests.conftest import brute_force_box, sorted_rows
from zarr_vectors.errors import InputError
from zarr_vectors.pyramid import Sparsity


def _walks(rng, n_lines=40):
    lines = random_walks(rng, n_lines, lengths=(20, 80), step=6, start=(100, 300))
    return [np.clip(line, 0, 400).astype(np.float32) for line in lines]


def _seg_dist(p, a, b):
    ab, ap = b - a, p - a
    denom = (ab * ab).sum(axis=-1)
    t = np.clip((ap * ab).sum(axis=-1) / np.where(denom > 0, denom, 1), 0, 1)
    return np.linalg.norm(ap - t[..., None] * ab, axis=-1)


def _max_deviation(fine: np.ndarray, coarse: np.ndarray) -> float:
    """Largest distance of a fine vertex to the coarse polyline (whose vertices are a subsequence)."""
    idx = [int(np.flatnonzero(np.all(fine == c, axis=1))[0]) for c in coarse]
    assert idx == sorted(idx) and idx[0] == 0 and idx[-1] == len(fine) - 1
    worst = 0.0
    for a, b in zip(idx[:-1], idx[1:]):
        if b > a + 1:
            worst = max(
                worst,
                float(_seg_dist(fine[a + 1 : b].astype(np.float64), coarse[0] * 0 + fine[a], fine[b]).max()),
            )
    return worst


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["polyline", "streamline"])
def test_lines_are_simplified_within_tolerance(tmp_path, rng, kind):
    lines = _walks(rng)
    radius = [rng.random(len(line)).astype(np.float32) for line in lines]
    zv.write_lines(
        tmp_path / "l.zarr",
        lines,
        kind=kind,
        chunk_shape=50,
        bounds=([0] * 3, [400] * 3),
        attributes={"radius": radius},
        object_attributes={"length": np.arange(40.0)},
    )
    zv.open(tmp_path / "l.zarr", mode="r+").build_pyramid([2, 2])
    ds = zv.open(tmp_path / "l.zarr")
    assert ds.levels == [0, 1, 2]
    assert ds.vertex_count(0) > ds.vertex_count(1) > ds.vertex_count(2) >= 80
    tolerances = {k: float(ds.level(k).grid.bin_shape.min()) / 2 for k in (1, 2)}
    prev = ds.objects(np.arange(40), level=0)
    for k in (1, 2):
        cur = ds.objects(np.arange(40), level=k)
        assert len(cur.line_offsets) == 41 and np.array_equal(np.unique(cur.object_ids), np.arange(40))
        for i in range(40):
            f = prev.positions[prev.line_offsets[i] : prev.line_offsets[i + 1]]
            c = cur.positions[cur.line_offsets[i] : cur.line_offsets[i + 1]]
            assert _max_deviation(f, c) <= tolerances[k] + 1e-4
            fr = prev.attributes["radius"][prev.line_offsets[i] : prev.line_offsets[i + 1]]
            cr = cur.attributes["radius"][cur.line_offsets[i] : cur.line_offsets[i + 1]]
            keep = [int(np.flatnonzero(np.all(f == p, axis=1))[0]) for p in c]
            assert np.array_equal(fr[keep], cr)  # kept vertices carry their attributes
        np.testing.assert_array_equal(ds.object_attributes("length", level=k), np.arange(40.0))
        prev = cur
    lv = json.loads((tmp_path / "l.zarr/2/zarr.json").read_text())["attributes"]["zarr_vectors_level"]
    assert lv["coarsening_method"] == "manual" and lv["coarsening_algorithm"] == "douglas_peucker"
    assert lv["simplify_tolerance"] == tolerances[2] and lv["parent_level"] == 1


@pytest.mark.slow
def test_line_box_queries_are_exact_at_coarse_levels(tmp_path, rng):
    zv.write_lines(tmp_path / "l.zarr", _walks(rng), chunk_shape=50, bounds=([0] * 3, [400] * 3))
    zv.open(tmp_path / "l.zarr", mode="r+").build_pyramid([2, 2], tolerance=2.0)
    ds = zv.open(tmp_path / "l.zarr")
    for k in ds.levels:
        full = ds.read(level=k)
        for _ in range(5):
            lo = rng.uniform(50, 250, 3)
            hi = lo + rng.uniform(20, 150, 3)
            got = ds.query((lo, hi), level=k)
            m = brute_force_box(full.positions, lo, hi)
            assert np.array_equal(
                sorted_rows(got.object_ids, got.positions), sorted_rows(full.object_ids[m], full.positions[m])
            )
            assert all(
                np.all(np.diff(got.object_ids[a:b]) == 0)
                for a, b in zip(got.line_offsets[:-1], got.line_offsets[1:])
            )


def _tree(rng, n=400, offset=(50, 50, 50)):
    parents = np.r_[-1, [int(rng.integers(max(0, i - 3), i)) for i in range(1, n)]]
    pos = np.zeros((n, 3))
    for i in range(1, n):
        pos[i] = pos[parents[i]] + rng.normal(0, 4, 3)
    return (pos - pos.min(axis=0) + offset).astype(np.float32), parents


def _ancestors_kept(parents: np.ndarray, kept: set[int], v: int) -> int:
    p = parents[v]
    while p >= 0 and p not in kept:
        p = parents[p]
    return int(p)


def test_skeleton_keeps_roots_leaves_and_branches(tmp_path, rng):
    pos_a, par_a = _tree(rng)
    pos_b, par_b = _tree(rng, 300, (150, 150, 150))
    pos = np.concatenate([pos_a, pos_b])
    par = np.concatenate([par_a, np.where(par_b >= 0, par_b + len(pos_a), -1)])
    radius = rng.random(len(pos)).astype(np.float32)
    zv.write_skeleton(tmp_path / "s.zarr", pos, par, chunk_shape=40, attributes={"radius": radius})
    zv.open(tmp_path / "s.zarr", mode="r+").build_pyramid([2], tolerance=3.0)
    ds = zv.open(tmp_path / "s.zarr")
    children = np.bincount(par[par >= 0], minlength=len(pos))
    must = set(np.flatnonzero((par < 0) | (children != 1)).tolist())
    coarse = ds.read(level=1)
    index = {tuple(p): i for i, p in enumerate(pos.tolist())}
    kept = [index[tuple(p)] for p in coarse.positions.tolist()]
    assert must <= set(kept) and len(kept) < len(pos)
    np.testing.assert_array_equal(coarse.attributes["radius"], radius[kept])
    assert np.array_equal(
        np.sort(coarse.object_ids), np.sort((np.asarray(kept) >= len(pos_a)).astype(np.int64))
    )
    kset = set(kept)
    for row, v in enumerate(kept):  # each kept vertex's parent is its nearest kept ancestor
        want = _ancestors_kept(par, kset, v)
        got = coarse.parents[row]
        assert (want < 0 and got < 0) or kept[got] == want
    for oid in (0, 1):
        whole = ds.objects([oid], level=1)
        assert (whole.parents < 0).sum() == 1


def test_graph_edges_and_edge_attributes(tmp_path, rng):
    # two chains joined at a hub, plus a ring: degree-2 runs are simplified, the hub stays
    t = np.linspace(0, 1, 30)
    chain1 = np.stack([100 + 150 * t, 100 + 0 * t, 100 + 0 * t], axis=1)
    chain2 = np.stack([100 + 0 * t[1:], 100 + 150 * t[1:], 100 + 0 * t[1:]], axis=1)
    ring_t = np.linspace(0, 2 * np.pi, 20, endpoint=False)
    ring = np.stack([300 + 30 * np.cos(ring_t), 300 + 30 * np.sin(ring_t), 300 + 0 * ring_t], axis=1)
    pos = np.concatenate([chain1, chain2, ring]).astype(np.float32)
    e1 = np.stack([np.arange(29), np.arange(1, 30)], axis=1)
    e2 = np.stack([np.r_[0, np.arange(30, 58)], np.arange(30, 59)], axis=1)
    e3 = np.stack([np.arange(59, 79), np.r_[np.arange(60, 79), 59]], axis=1)
    edges = np.concatenate([e1, e2, e3])
    weight = np.arange(len(edges), dtype=np.float64)
    oids = np.r_[np.zeros(59, np.int64), np.ones(20, np.int64)]
    zv.write_graph(
        tmp_path / "g.zarr",
        pos,
        edges,
        chunk_shape=100,
        bounds=([0] * 3, [400] * 3),
        object_ids=oids,
        edge_attributes={"weight": weight},
        directed=True,
    )
    zv.open(tmp_path / "g.zarr", mode="r+").build_pyramid([2], tolerance=5.0)
    ds = zv.open(tmp_path / "g.zarr")
    g0 = ds.objects([0], level=1)
    ends = sorted_rows(g0.positions)
    assert np.array_equal(ends, sorted_rows(pos[[0, 29, 58]]))  # straight chains: only the hub and ends
    lookup = {tuple(p): i for i, p in enumerate(pos.tolist())}
    coarse_edges = sorted(
        (lookup[tuple(g0.positions[a])], lookup[tuple(g0.positions[b])], w)
        for (a, b), w in zip(g0.edges.tolist(), g0.edge_attributes["weight"].tolist())
    )
    assert coarse_edges == [(0, 29, weight[:29].mean()), (0, 58, weight[29:58].mean())]
    ring1 = ds.objects([1], level=1)
    assert 2 <= len(ring1) < 20 and len(ring1.edges) == len(ring1)


def test_linked_sparsity_by_length(tmp_path, rng):
    lines = _walks(rng, 20)
    zv.write_lines(tmp_path / "l.zarr", lines, chunk_shape=50, bounds=([0] * 3, [400] * 3))
    zv.open(tmp_path / "l.zarr", mode="r+").build_pyramid([2], object_sparsity=Sparsity(0.25, by="length"))
    ds = zv.open(tmp_path / "l.zarr")
    length = np.array(
        [np.linalg.norm(np.diff(line.astype(np.float64), axis=0), axis=1).sum() for line in lines]
    )
    kept = np.unique(ds.read(level=1).object_ids)
    assert set(kept) == set(np.argsort(-length)[:5])
    assert ds.num_objects(1) == 20 and len(ds.objects([int(np.argmin(length))], level=1)) == 0
    with pytest.raises(InputError, match="tolerance"):
        zv.open(tmp_path / "l.zarr", mode="r+").build_pyramid([2], tolerance=-1.0, overwrite=True)


def _ring(rng, centre, radius, n, noise=0.0, clockwise=False):
    t = np.linspace(0, 2 * np.pi, n, endpoint=False) * (-1 if clockwise else 1)
    r = radius + noise * rng.standard_normal(n)
    return np.c_[centre[0] + r * np.cos(t), centre[1] + r * np.sin(t)]


def _shapes(rng):
    """Polygons with holes (one hole so close to its exterior that simplifying each ring on its
    own cuts through it; one hole far smaller than the tolerance), a multipolygon, a multiline."""
    import shapely

    out = []
    for i in range(3):
        for j in range(3):
            c = np.array([70.0 + 130 * i, 70.0 + 130 * j])
            out.append(
                shapely.Polygon(
                    _ring(rng, c, 55, 80, 3), [_ring(rng, c, 18, 40, 1, True), _ring(rng, c + [30, 0], 6, 12)]
                )
            )
    c = np.array([200.0, 430.0])
    out.append(shapely.Polygon(_ring(rng, c, 55, 200), [_ring(rng, c + 44 * np.sqrt(0.5), 6, 30)]))
    out.append(shapely.Polygon(_ring(rng, (60, 440), 30, 50), [_ring(rng, (60, 440), 1.5, 10)]))
    out.append(
        shapely.MultiPolygon(
            [
                shapely.Polygon(_ring(rng, (350, 420), 25, 40), [_ring(rng, (350, 420), 8, 20)]),
                shapely.Polygon(_ring(rng, (430, 420), 25, 40)),
            ]
        )
    )
    out.append(
        shapely.MultiLineString(
            [
                np.c_[np.linspace(10, 480, 60), 490 + rng.normal(0, 2, 60)],
                [(480.0, 10.0), (440.0, 200.0), (475.0, 400.0)],
            ]
        )
    )
    return np.array(out, dtype=object)


def _rings_one_by_one(poly, tol):
    """Each ring simplified on its own (no validity check), as a polygon."""
    import shapely

    from zarr_vectors.pyramid.simplify import simplify_graph

    rings = []
    for ring in [poly.exterior, *poly.interiors]:
        xy = np.asarray(ring.coords)
        edges = np.c_[np.arange(len(xy) - 1), np.arange(1, len(xy))]
        rings.append(xy[simplify_graph(xy, edges, tol).kept])
    return shapely.Polygon(rings[0], rings[1:])


def test_closed_rings_keep_a_triangle():
    from zarr_vectors.pyramid.simplify import simplify_graph

    t = np.linspace(0, 2 * np.pi, 30)
    xy = np.c_[np.cos(t), np.sin(t)] * 10
    xy[-1] = xy[0]  # a ring stored as a line: distinct first and last vertices, same place
    edges = np.c_[np.arange(29), np.arange(1, 30)]
    s = simplify_graph(xy, edges, 100.0)  # a huge tolerance
    assert s.kept[0] == 0 and s.kept[-1] == 29 and len(s.kept) == 4
    assert len(s.edges) == 3
    (ax, ay), (bx, by) = xy[s.kept[1]] - xy[0], xy[s.kept[2]] - xy[0]
    area = 0.5 * abs(ax * by - ay * bx)
    assert area > 100  # a real triangle (the inscribed maximum is 130), not a collapsed segment
    open_line = xy.copy()
    open_line[-1] += 0.5  # not closed: only its ends stay
    assert simplify_graph(open_line, edges, 100.0).kept.tolist() == [0, 29]


@pytest.mark.slow
def test_polygon_pyramid_stays_valid_within_tolerance(tmp_path, rng):
    import shapely

    shapes = _shapes(rng)
    area = shapely.area(shapes)
    zv.write_geometries(
        tmp_path / "p.zarr",
        shapes,
        chunk_shape=20,
        bounds=([0, 0], [500, 500]),
        object_attributes={"area": area},
    )
    ds = zv.open(tmp_path / "p.zarr", mode="r+")
    assert tuple(ds.geometry_types) == ("polygon",)
    ds.build_pyramid([2])
    ds = zv.open(tmp_path / "p.zarr")
    assert ds.levels == [0, 1]
    tol = float(ds.level(1).grid.bin_shape.min()) / 2
    assert tol == 20.0
    assert ds.vertex_count(1) < ds.vertex_count(0) / 5
    ids, coarse = ds.read(level=1).to_shapely()
    assert ids.tolist() == list(range(len(shapes)))
    assert [g.geom_type for g in coarse] == [g.geom_type for g in shapes]
    assert shapely.is_valid(coarse).all()
    hausdorff = shapely.hausdorff_distance(coarse, shapes, densify=0.01)
    assert np.all(hausdorff <= tol + 1e-9) and hausdorff.max() > tol / 2  # simplified, within tolerance
    # simplifying each ring on its own cuts the exterior through the hole of shape 9
    assert not _rings_one_by_one(shapes[9], tol).is_valid
    for fine, got in zip(shapes[:11], coarse[:11]):  # holes are still holes: same count, still empty
        assert len(got.interiors) == len(fine.interiors)
        for ring in got.interiors:
            assert len(ring.coords) >= 4 and ring.coords[0] == ring.coords[-1]
            inside = shapely.Polygon(ring).representative_point()
            assert not got.covers(inside) and not fine.covers(inside)
    assert len(coarse[10].interiors[0].coords) == 4  # a hole far below the tolerance: a triangle
    assert [len(p.interiors) for p in coarse[11].geoms] == [1, 0]
    assert [len(line.coords) for line in coarse[12].geoms][1] == 3  # a 3-vertex bend stays (> tol)
    np.testing.assert_array_equal(ds.object_attributes("area", level=1), area)
    np.testing.assert_array_equal(ds.object_attributes("geom_type", level=1), shapely.get_type_id(shapes))
    # kept vertices carry their part / ring attributes
    fine, cur = ds.read(level=0), ds.read(level=1)
    lookup = {
        (int(o), *p): (int(a), int(b))
        for o, p, a, b in zip(
            fine.object_ids,
            fine.positions.tolist(),
            fine.attributes["geom_part"],
            fine.attributes["geom_ring"],
        )
    }
    got = [(int(a), int(b)) for a, b in zip(cur.attributes["geom_part"], cur.attributes["geom_ring"])]
    assert got == [lookup[(int(o), *p)] for o, p in zip(cur.object_ids, cur.positions.tolist())]


@pytest.mark.slow
def test_polygon_pyramid_box_queries_are_exact(tmp_path, rng):
    zv.write_geometries(tmp_path / "p.zarr", _shapes(rng), chunk_shape=20, bounds=([0, 0], [500, 500]))
    zv.open(tmp_path / "p.zarr", mode="r+").build_pyramid([2, 2])
    ds = zv.open(tmp_path / "p.zarr")
    assert ds.vertex_count(0) > ds.vertex_count(1) >= ds.vertex_count(2) > 0
    for k in (1, 2):
        full = ds.read(level=k)
        cols = lambda r, m=slice(None): (
            r.object_ids[m],
            r.positions[m],
            r.attributes["geom_part"][m],
            r.attributes["geom_ring"][m],
        )
        for _ in range(8):
            lo = rng.uniform(0, 350, 2)
            hi = lo + rng.uniform(30, 200, 2)
            got = ds.query((lo, hi), level=k)
            m = brute_force_box(full.positions, lo, hi)
            assert m.any()
            assert np.array_equal(sorted_rows(*cols(got)), sorted_rows(*cols(full, m)))
        import shapely

        assert shapely.is_valid(ds.read(level=k).to_shapely()[1]).all()


def test_multi_line_pyramid_keeps_every_part(tmp_path, rng):
    import shapely

    walk = lambda: np.cumsum(rng.normal(0, 4, (int(rng.integers(20, 60)), 2)), axis=0) + 200
    lines = [shapely.MultiLineString([walk() for _ in range(int(rng.integers(2, 5)))]) for _ in range(15)]
    lines.append(shapely.LineString(np.cumsum(rng.normal(0, 4, (40, 2)), axis=0) + 200))
    zv.write_geometries(tmp_path / "m.zarr", lines, chunk_shape=25, bounds=([0, 0], [400, 400]))
    ds = zv.open(tmp_path / "m.zarr", mode="r+")
    assert tuple(ds.geometry_types) == ("multi_polyline",)
    ds.build_pyramid([2])
    tol = float(ds.level(1).grid.bin_shape.min()) / 2
    _, coarse = ds.read(level=1).to_shapely()
    assert ds.vertex_count(1) < ds.vertex_count(0)
    for fine, got in zip(lines, coarse):
        assert got.geom_type == fine.geom_type
        fine_parts = list(getattr(fine, "geoms", [fine]))
        got_parts = list(getattr(got, "geoms", [got]))
        assert len(got_parts) == len(fine_parts)
        for f, g in zip(fine_parts, got_parts):  # ends kept, within tolerance
            assert g.coords[0] == f.coords[0] and g.coords[-1] == f.coords[-1]
            assert shapely.hausdorff_distance(f, g, densify=0.01) <= tol + 1e-9


def test_a_polygon_below_the_tolerance_keeps_a_triangle(tmp_path):
    import shapely

    square = shapely.box(10, 10, 90, 90)
    zv.write_geometries(tmp_path / "q.zarr", [square], chunk_shape=50)
    zv.open(tmp_path / "q.zarr", mode="r+").build_pyramid([4])  # tolerance 100: more than the square
    _, got = zv.open(tmp_path / "q.zarr").read(level=1).to_shapely()
    corners = np.asarray(got[0].exterior.coords)
    assert len(corners) == 4 and got[0].is_valid and got[0].area == 3200.0  # half the square
    assert {tuple(c) for c in corners} <= {tuple(c) for c in np.asarray(square.exterior.coords)}
