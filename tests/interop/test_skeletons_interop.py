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
    reference.write_graph(
        tmp_path,
        store,
        positions=pos,
        edges=np.stack([child, par[child]], axis=1),
        chunk_shape=np.full(3, 100.0),
        tree=np.array([True]),
        attr__radius=np.arange(len(pos), dtype=np.float32),
    )
    ds = zv.open(store)
    assert "skeleton" in ds.geometry_types
    full = ds.query()
    assert sorted(map(tuple, full.positions.tolist())) == sorted(map(tuple, pos.tolist()))
    want = sorted((tuple(pos[par[c]]), tuple(pos[c])) for c in child)
    assert sorted((tuple(full.positions[a]), tuple(full.positions[b])) for a, b in full.edges) == want
    assert np.array_equal(pos[full.attributes["radius"].astype(int)], full.positions)


def _key(p):
    return tuple(p.tolist())


def _forest(rng, trees):
    """Trees ``[(object id, vertex count), ...]`` concatenated: positions, parents, object ids.
    An id given twice is an object with two trees (two roots)."""
    pos, par, oids = [], [], []
    for oid, n in trees:
        p, q = _tree(rng, n)
        par.append(np.where(q >= 0, q + sum(map(len, pos)), -1))
        pos.append(p)
        oids.append(np.full(n, oid))
    return np.concatenate(pos), np.concatenate(par), np.concatenate(oids)


@pytest.mark.parametrize("type_dtype", [np.uint8, np.int16])
def test_reference_reads_our_skeletons_with_attributes(tmp_path, rng, reference, type_dtype):
    """Several skeletons (object ids 0, 3, 7; object 3 holds two trees, so two roots) with
    ``radius`` (float32) and ``type`` per vertex and an object attribute, read by the
    reference. Its whole read returns positions, (child, parent) edges and the vertex
    attributes: compared as the vertex set, the (parent, child) edge set and the attributes
    per vertex matched by exact position. It cannot select a skeleton by object
    (``select(objects=)`` raises for skeletons) and returns no per-vertex object ids, so
    membership is checked from each object's manifest (driver ``read-objects``) and the
    object table from ``building.read_object_attributes``. Its bbox read returns positions
    and edges only (no attributes), compared against brute force."""
    pos, par, oids = _forest(rng, [(3, 70), (0, 90), (3, 50), (7, 60)])
    n = len(pos)
    radius = rng.uniform(0.1, 5.0, n).astype(np.float32)
    kind = rng.integers(0, 8, n).astype(type_dtype)
    volume = np.array([1.0, np.nan, np.nan, 2.5, np.nan, np.nan, np.nan, -4.0])
    store = tmp_path / "ours.zarr"
    zv.write_skeleton(
        store,
        pos,
        par,
        chunk_shape=100,
        object_ids=oids,
        attributes={"radius": radius, "type": kind},
        object_attributes={"volume": volume},
    )
    info = reference.info(store)
    assert info["valid"], info
    lv = info["levels"][0]
    assert lv["kind"] == "skeleton"
    assert sorted(lv["vertex_attributes"]) == ["radius", "type"]
    assert lv["num_objects_present"] == 3

    row = {_key(p): i for i, p in enumerate(pos)}
    assert len(row) == n
    child = np.flatnonzero(par >= 0)
    assert n - len(child) == 4
    want_edges = sorted(zip(par[child].tolist(), child.tolist()))
    got = reference.read_graph(tmp_path, store)
    m = np.array([row[_key(p)] for p in got["positions"]])  # input row of each returned vertex
    assert sorted(m.tolist()) == list(range(n))
    assert sorted(zip(m[got["edges"][:, 1]].tolist(), m[got["edges"][:, 0]].tolist())) == want_edges
    assert got["attr__radius"].dtype == np.float32 and np.array_equal(got["attr__radius"], radius[m])
    assert got["attr__type"].dtype == np.dtype(type_dtype) and np.array_equal(got["attr__type"], kind[m])
    assert np.array_equal(got["object_ids"], oids[m])
    assert np.array_equal(got["oattr__volume"][[0, 3, 7]], volume[[0, 3, 7]])

    members = reference.read_objects(tmp_path, store)
    assert sorted(members) == [0, 3, 7]
    for oid, rows in members.items():
        assert sorted(row[_key(p)] for p in rows) == np.flatnonzero(oids == oid).tolist()

    lo, hi = np.array([250.0, 240.0, 260.0]), np.array([560.0, 600.0, 580.0])
    box = reference.read_graph(tmp_path, store, (lo, hi))
    inside = np.all((pos >= lo) & (pos <= hi), axis=1)
    assert 0 < inside.sum() < n
    mb = np.array([row[_key(p)] for p in box["positions"]], dtype=np.int64)
    assert sorted(mb.tolist()) == np.flatnonzero(inside).tolist()
    keep = child[inside[child] & inside[par[child]]]
    assert sorted(zip(mb[box["edges"][:, 1]].tolist(), mb[box["edges"][:, 0]].tolist())) == sorted(
        zip(par[keep].tolist(), keep.tolist())
    )


def _reference_forest(tmp_path, rng, reference):
    """A reference ``add_graph(tree=True)`` store of four trees, objects 0, 2, 3, 1 (the
    reference stores one rooted tree per object: it refuses a second root), with ``radius``
    (float32) and ``type`` (int16) per vertex."""
    pos, par, oids = _forest(rng, [(0, 90), (2, 70), (3, 100), (1, 40)])
    radius = rng.uniform(0.1, 5.0, len(pos)).astype(np.float32)
    kind = rng.integers(0, 8, len(pos)).astype(np.int16)
    child = np.flatnonzero(par >= 0)
    store = tmp_path / "ref.zv"
    reference.write_graph(
        tmp_path,
        store,
        positions=pos,
        edges=np.stack([child, par[child]], axis=1),
        chunk_shape=np.full(3, 100.0),
        tree=np.array([True]),
        object_ids=oids,
        attr__radius=radius,
        attr__type=kind,
    )
    return store, pos, par, oids, radius, kind


def _pairs_with_parent(positions, parents):
    """Set of (position, parent position or None) pairs."""
    return sorted((_key(positions[i]), _key(positions[p]) if p >= 0 else None) for i, p in enumerate(parents))


def test_we_read_reference_skeleton_objects(tmp_path, rng, reference):
    """``ds.objects([id])`` on the reference's tree store: every vertex with its parent, as a
    set of (position, parent position) pairs (the reference lists vertices in its own
    order), the attributes per vertex, the object ids; and several ids at once."""
    store, pos, par, oids, radius, kind = _reference_forest(tmp_path, rng, reference)
    ds = zv.open(store)
    assert "skeleton" in ds.geometry_types
    row = {_key(p): i for i, p in enumerate(pos)}
    for oid in [0, 1, 2, 3]:
        res = ds.objects([oid])
        sel = np.flatnonzero(oids == oid)
        assert len(res) == len(sel)
        want = sorted((_key(pos[i]), _key(pos[par[i]]) if par[i] >= 0 else None) for i in sel)
        assert _pairs_with_parent(res.positions, res.parents) == want
        m = np.array([row[_key(p)] for p in res.positions])
        assert np.array_equal(res.attributes["radius"], radius[m])
        assert res.attributes["type"].dtype == np.int16 and np.array_equal(res.attributes["type"], kind[m])
        assert np.array_equal(res.object_ids, np.full(len(sel), oid))
        assert sorted(zip(m[res.edges[:, 0]].tolist(), m[res.edges[:, 1]].tolist())) == sorted(
            (int(par[i]), int(i)) for i in sel if par[i] >= 0
        )
    both = ds.objects([3, 0])
    assert both.object_ids.tolist() == [3] * int((oids == 3).sum()) + [0] * int((oids == 0).sum())
    sel = np.flatnonzero((oids == 3) | (oids == 0))
    assert _pairs_with_parent(both.positions, both.parents) == sorted(
        (_key(pos[i]), _key(pos[par[i]]) if par[i] >= 0 else None) for i in sel
    )


_BOXES = [((300.0, 280.0, 320.0), (560.0, 600.0, 580.0)), ((150.0, 150.0, 150.0), (450.0, 420.0, 700.0))]


def test_box_vertices_of_reference_skeletons(tmp_path, rng, reference):
    """A box query on the reference's tree store: exactly the vertices inside (brute force
    on the reference's input), with their attributes and object ids."""
    store, pos, par, oids, radius, kind = _reference_forest(tmp_path, rng, reference)
    ds = zv.open(store)
    row = {_key(p): i for i, p in enumerate(pos)}
    for lo, hi in _BOXES:
        box = ds.query(bbox=(lo, hi))
        inside = np.all((pos >= lo) & (pos <= hi), axis=1)
        assert 0 < inside.sum() < len(pos)
        m = np.array([row[_key(p)] for p in box.positions], dtype=np.int64)
        assert sorted(m.tolist()) == np.flatnonzero(inside).tolist()
        assert np.array_equal(box.attributes["radius"], radius[m])
        assert np.array_equal(box.attributes["type"], kind[m])
        assert np.array_equal(box.object_ids, oids[m])


def test_box_edges_of_reference_skeletons(tmp_path, rng, reference):
    """A box query on the reference's tree store: exactly the (parent, child) edges with both
    ends inside (brute force on the reference's input), and ``parents`` agreeing with them.
    The reference files a child's explicit parent at the parent's chunk when that chunk is
    the smaller, so a box must also read the cells anchored next to it that point inside."""
    store, pos, par, oids, radius, kind = _reference_forest(tmp_path, rng, reference)
    ds = zv.open(store)
    row = {_key(p): i for i, p in enumerate(pos)}
    child = np.flatnonzero(par >= 0)
    for lo, hi in _BOXES:
        box = ds.query(bbox=(lo, hi))
        inside = np.all((pos >= lo) & (pos <= hi), axis=1)
        m = np.array([row[_key(p)] for p in box.positions], dtype=np.int64)
        keep = child[inside[child] & inside[par[child]]]
        want = sorted(zip(par[keep].tolist(), keep.tolist()))
        assert sorted(zip(m[box.edges[:, 0]].tolist(), m[box.edges[:, 1]].tolist())) == want
        parent_rows = np.where(box.parents >= 0, m[box.parents], -1)
        assert sorted((int(p), int(c)) for p, c in zip(parent_rows, m) if p >= 0) == want
