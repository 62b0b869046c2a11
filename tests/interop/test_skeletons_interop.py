"""Skeleton stores cross between this library and the reference 0.9.2 (``add_graph(tree=True)``)."""

from __future__ import annotations

import numpy as np
import pytest

import zarr_vectors as zv

pytestmark = pytest.mark.interop


def _tree(rng, n=300):
    par = np.full(n, -1)
    pos = np.zeros((n, 3))
    pos[0] = rng.uniform(200, 700, 3)
    for i in range(1, n):
        par[i] = rng.integers(max(0, i - 12), i)
        pos[i] = pos[par[i]] + rng.normal(0, 25, 3)
    return pos.astype(np.float32), par


def _pairs(positions, edges):
    """Unordered vertex pairs: the reference's graph reader does not promise an orientation."""
    return sorted(tuple(sorted((tuple(positions[a]), tuple(positions[b])))) for a, b in edges)


def test_reference_reads_our_skeleton(tmp_path, rng, reference):
    pos, par = _tree(rng)
    store = tmp_path / "ours.zarr"
    zv.write_skeleton(store, pos, par, chunk_shape=100)
    info = reference.info(store)
    assert info["valid"], info
    got = reference.read_graph(tmp_path, store)
    child = np.flatnonzero(par >= 0)
    assert sorted(map(tuple, got["positions"].tolist())) == sorted(map(tuple, pos.tolist()))
    assert _pairs(got["positions"], got["edges"]) == _pairs(pos, np.stack([par[child], child], axis=1))


def test_we_read_reference_skeletons(tmp_path, rng, reference):
    pos, par = _tree(rng)
    child = np.flatnonzero(par >= 0)
    store = tmp_path / "ref.zv"
    reference.write_graph(tmp_path, store, positions=pos, edges=np.stack([child, par[child]], axis=1),
                          chunk_shape=np.full(3, 100.0), tree=np.array([True]),
                          attr__radius=np.arange(len(pos), dtype=np.float32))
    ds = zv.open(store)
    assert "skeleton" in ds.geometry_types
    full = ds.query()
    assert sorted(map(tuple, full.positions.tolist())) == sorted(map(tuple, pos.tolist()))
    want = sorted((tuple(pos[par[c]]), tuple(pos[c])) for c in child)
    assert sorted((tuple(full.positions[a]), tuple(full.positions[b])) for a, b in full.edges) == want
    assert np.array_equal(pos[full.attributes["radius"].astype(int)], full.positions)
