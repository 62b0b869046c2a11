"""Graph stores cross between this library and the reference 0.9.2, both ways."""

from __future__ import annotations

import numpy as np
import pytest

import zarr_vectors as zv

pytestmark = pytest.mark.interop


def _edge_set(positions, edges, directed=True):
    pairs = [(tuple(positions[a]), tuple(positions[b])) for a, b in edges]
    return sorted(pairs if directed else [tuple(sorted(p)) for p in pairs])


def _graph(rng, n=300, e=700):
    pos = rng.uniform(0, 500, (n, 3)).astype(np.float32)
    pos = pos[np.argsort(pos[:, 0])]
    edges = rng.integers(0, n, (e, 2))
    near = rng.random(e) < 0.5
    edges[near, 1] = np.clip(edges[near, 0] + rng.integers(1, 4, near.sum()), 0, n - 1)
    edges = edges[edges[:, 0] != edges[:, 1]]
    return pos, edges


def test_reference_reads_our_graphs(tmp_path, rng, reference):
    pos, edges = _graph(rng)
    w = rng.random(len(pos)).astype(np.float32)
    store = tmp_path / "ours.zarr"
    zv.write_graph(store, pos, edges, chunk_shape=100, attributes={"w": w}, object_ids=(pos[:, 1] // 250).astype(int))
    info = reference.info(store)
    assert info["valid"], info
    got = reference.read_graph(tmp_path, store)
    assert sorted(map(tuple, got["positions"].tolist())) == sorted(map(tuple, pos.tolist()))
    # The reference keeps direction through perm_idx like we do; compare oriented pairs.
    assert _edge_set(got["positions"], got["edges"]) == _edge_set(pos, edges)
    lo, hi = np.array([100.0, 50.0, 120.0]), np.array([350.0, 400.0, 480.0])
    box = reference.read_graph(tmp_path, store, (lo, hi))
    inside = np.all((pos >= lo) & (pos <= hi), axis=1)
    assert sorted(map(tuple, box["positions"].tolist())) == sorted(map(tuple, pos[inside].tolist()))
    keep = inside[edges[:, 0]] & inside[edges[:, 1]]
    assert _edge_set(box["positions"], box["edges"]) == _edge_set(pos, edges[keep])


def test_we_read_reference_graphs(tmp_path, rng, reference):
    pos, edges = _graph(rng)
    w = rng.random(len(pos)).astype(np.float32)
    store = tmp_path / "ref.zv"
    reference.write_graph(tmp_path, store, positions=pos, edges=edges, chunk_shape=np.full(3, 100.0), attr__w=w)
    ds = zv.open(store)
    full = ds.query()
    assert sorted(map(tuple, full.positions.tolist())) == sorted(map(tuple, pos.tolist()))
    assert _edge_set(full.positions, full.edges) == _edge_set(pos, edges)
    lookup = {tuple(p): v for p, v in zip(pos.tolist(), w.tolist())}
    assert [lookup[tuple(p)] for p in full.positions.tolist()] == full.attributes["w"].tolist()
    lo, hi = np.array([100.0, 50.0, 120.0]), np.array([350.0, 400.0, 480.0])
    box = ds.query(bbox=(lo, hi))
    inside = np.all((pos >= lo) & (pos <= hi), axis=1)
    keep = inside[edges[:, 0]] & inside[edges[:, 1]]
    assert sorted(map(tuple, box.positions.tolist())) == sorted(map(tuple, pos[inside].tolist()))
    assert _edge_set(box.positions, box.edges) == _edge_set(pos, edges[keep])


def test_edge_attributes_from_the_reference(tmp_path, rng, reference):
    pos, edges = _graph(rng)
    edges = np.unique(edges, axis=0)
    w = rng.random(len(edges)).astype(np.float32)
    store = tmp_path / "ref.zv"
    reference.write_graph(tmp_path, store, positions=pos, edges=edges, chunk_shape=np.full(3, 100.0), eattr__w=w)
    full = zv.open(store).query()
    want = {(tuple(pos[a]), tuple(pos[b])): v for (a, b), v in zip(edges.tolist(), w.tolist())}
    got = {(tuple(full.positions[a]), tuple(full.positions[b])): v
           for (a, b), v in zip(full.edges.tolist(), full.edge_attributes["w"].tolist())}
    assert got == want
