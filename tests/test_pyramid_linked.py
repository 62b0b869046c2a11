"""Pyramids of lines, skeletons and graphs: Douglas-Peucker within tolerance, topology and ids
kept, attributes carried, exact box queries at coarse levels."""

from __future__ import annotations

import json

import numpy as np
import pytest

import zarr_vectors as zv
from tests.conftest import brute_force_box, sorted_rows
from zarr_vectors.errors import InputError
from zarr_vectors.pyramid import Sparsity


def _walks(rng, n_lines=40):
    lines = [np.cumsum(rng.normal(0, 6, (int(rng.integers(20, 80)), 3)), axis=0) + rng.uniform(100, 300, 3)
             for _ in range(n_lines)]  # fmt: skip
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


@pytest.mark.parametrize("kind", ["polyline", "streamline"])
def test_lines_are_simplified_within_tolerance(tmp_path, rng, kind):
    lines = _walks(rng)
    radius = [rng.random(len(line)).astype(np.float32) for line in lines]
    zv.write_lines(tmp_path / "l.zarr", lines, kind=kind, chunk_shape=50, bounds=([0] * 3, [400] * 3),
                   attributes={"radius": radius}, object_attributes={"length": np.arange(40.0)})  # fmt: skip
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
    zv.write_graph(tmp_path / "g.zarr", pos, edges, chunk_shape=100, bounds=([0] * 3, [400] * 3), object_ids=oids,
                   edge_attributes={"weight": weight}, directed=True)  # fmt: skip
    zv.open(tmp_path / "g.zarr", mode="r+").build_pyramid([2], tolerance=5.0)
    ds = zv.open(tmp_path / "g.zarr")
    g0 = ds.objects([0], level=1)
    ends = sorted_rows(g0.positions)
    assert np.array_equal(ends, sorted_rows(pos[[0, 29, 58]]))  # straight chains: only the hub and ends
    lookup = {tuple(p): i for i, p in enumerate(pos.tolist())}
    coarse_edges = sorted((lookup[tuple(g0.positions[a])], lookup[tuple(g0.positions[b])], w)
                          for (a, b), w in zip(g0.edges.tolist(), g0.edge_attributes["weight"].tolist()))  # fmt: skip
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
