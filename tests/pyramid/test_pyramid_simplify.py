"""Pure pyramid building blocks against brute force: group reductions, chains and Douglas-Peucker,
level plans."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zarr_vectors.errors import InputError
from zarr_vectors.pyramid.plan import plan_levels
from zarr_vectors.pyramid.reduce import Groups, centroids, reduce_rows
from zarr_vectors.pyramid.simplify import chains, douglas_peucker, simplify_graph
from zarr_vectors.pyramid.sparsity import Sparsity, select_objects

groups_and_values = st.integers(1, 40).flatmap(
    lambda n: st.tuples(
        st.lists(st.integers(0, 5), min_size=n, max_size=n),
        st.lists(st.integers(-50, 50), min_size=n, max_size=n),
    )
)


@settings(max_examples=60, deadline=None)
@given(groups_and_values)
def test_reductions_match_python(data):
    raw_group, raw_values = data
    _, group = np.unique(raw_group, return_inverse=True)
    values = np.asarray(raw_values, np.int16)
    m = int(group.max()) + 1
    g = Groups.of(group, m)
    members = [values[group == i] for i in range(m)]
    assert reduce_rows(values, g, "sum").tolist() == [int(v.sum()) for v in members]
    assert reduce_rows(values, g, "sum").dtype == np.int64
    assert reduce_rows(values, g, "min").tolist() == [int(v.min()) for v in members]
    assert reduce_rows(values, g, "max").tolist() == [int(v.max()) for v in members]
    assert reduce_rows(values, g, "first").tolist() == [int(v[0]) for v in members]
    assert reduce_rows(values, g, "mean").tolist() == [int(np.rint(v.mean())) for v in members]
    modes = []
    for v in members:
        u, c = np.unique(v, return_counts=True)
        modes.append(int(u[np.argmax(c)]))  # ties: the smallest value
    assert reduce_rows(values, g, "mode").tolist() == modes
    two = np.stack([values, -values], axis=1)
    assert reduce_rows(two, g, "mode")[:, 0].tolist() == modes


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(0, 1000, width=32), min_size=3, max_size=60))
def test_centroids_stay_in_their_bin(xs):
    pos = np.asarray(xs, np.float32).reshape(-1, 1)
    pos = np.concatenate([pos, pos[::-1]], axis=1)
    key = np.floor(pos.astype(np.float64) / 7.5).astype(np.int64)
    _, group = np.unique(key, axis=0, return_inverse=True)
    group = group.reshape(-1)
    g = Groups.of(group, int(group.max()) + 1)
    c = centroids(pos, g)
    assert c.dtype == np.float32
    assert np.array_equal(np.floor(c.astype(np.float64) / 7.5).astype(np.int64), key[g.order[g.starts[:-1]]])


def _point_segment(p, a, b):
    ab, ap = b - a, p - a
    t = 0.0 if not ab.any() else np.clip(ap @ ab / (ab @ ab), 0, 1)
    return float(np.linalg.norm(ap - t * ab))


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 80), st.integers(0, 10_000), st.floats(0.5, 20))
def test_douglas_peucker_error_bound(n, seed, tol):
    rng = np.random.default_rng(seed)
    pos = np.cumsum(rng.normal(0, 3, (n, 3)), axis=0)
    edges = np.stack([np.arange(n - 1), np.arange(1, n)], axis=1)
    kept, ch = chains(n, edges)
    assert kept.tolist() == [True] + [False] * (n - 2) + [True]
    keep = ch.vertices[douglas_peucker(pos, ch, tol)]
    assert keep[0] == 0 and keep[-1] == n - 1 and np.all(np.diff(keep) > 0)
    for a, b in zip(keep[:-1], keep[1:]):
        for v in range(a + 1, b):
            assert _point_segment(pos[v], pos[a], pos[b]) <= tol + 1e-9


def test_simplify_tree_keeps_topology():
    #     0 - 1 - 2 - 3 (leaf)          a straight trunk with a branch at 2 and a bent leaf path
    #             \ 4 - 5 - 6 (leaf)
    pos = np.array([[0, 0, 0], [1, 0, 0], [2, 0, 0], [3, 0, 0], [2, 1, 0], [2, 2, 0], [5, 2, 0]], float)
    edges = np.array([[0, 1], [1, 2], [2, 3], [2, 4], [4, 5], [5, 6]])
    s = simplify_graph(pos, edges, 0.1)
    assert s.kept.tolist() == [0, 2, 3, 5, 6]  # root, branch point, leaves, and the corner at 5
    assert sorted(map(tuple, s.edges.tolist())) == [(0, 2), (2, 3), (2, 5), (5, 6)]
    assert s.parent.tolist() == [0, 0, 2, 3, 2, 5, 6]
    new = s.edges[s.edge_of]
    assert new.tolist() == [[0, 2], [0, 2], [2, 3], [2, 5], [2, 5], [5, 6]]


def test_cycles_keep_two_vertices():
    n = 8
    t = np.linspace(0, 2 * np.pi, n, endpoint=False)
    pos = np.stack([np.cos(t), np.sin(t), 0 * t], axis=1)
    edges = np.stack([np.arange(n), (np.arange(n) + 1) % n], axis=1)
    s = simplify_graph(pos, edges, 5.0)  # a huge tolerance: the ring still keeps two vertices
    assert len(s.kept) == 2 and len(s.edges) == 2 and not np.any(s.edges[:, 0] == s.edges[:, 1])


def test_sparsity_selection():
    present = np.array([2, 5, 7, 9])
    assert select_objects(present, Sparsity(0.5, by="size"), np.array([1, 9, 9, 3])).tolist() == [5, 7]
    assert select_objects(
        present, Sparsity(0.5, by="size", largest=False), np.array([1, 9, 9, 3])
    ).tolist() == [2, 9]
    a = select_objects(present, Sparsity(0.5, seed=3))
    assert a.tolist() == select_objects(present, Sparsity(0.5, seed=3)).tolist() and len(a) == 2
    assert select_objects(present, Sparsity(0.01)).size == 1
    with pytest.raises(InputError, match="attribute="):
        Sparsity(0.5, by="attribute")
    with pytest.raises(InputError, match="strategy"):
        Sparsity(0.5, by="colour")


def test_plans():
    plans = plan_levels(
        root_chunk_shape=np.array([100.0, 100.0]),
        bounds=np.array([[0, 0], [1000, 1000]]),
        first_bin=np.array([25.0, 25.0]),
        first_scale=np.array([1, 1]),
        first_index=0,
        factors=[2, 3, (2, 1)],
    )
    assert [p.bin_shape.tolist() for p in plans] == [[50, 50], [150, 150], [300, 150]]
    assert [p.chunk_shape.tolist() for p in plans] == [[200, 200], [600, 600], [1200, 600]]
    assert [p.grid.shape.tolist() for p in plans] == [[6, 6], [2, 2], [1, 2]]
    with pytest.raises(InputError, match="bins per chunk"):
        plan_levels(
            root_chunk_shape=np.array([100.0]),
            bounds=np.array([[0], [1000]]),
            first_bin=np.array([0.01]),
            first_scale=np.array([1]),
            first_index=0,
            factors=[2],
        )
