"""Graph stores cross between this library and the reference 0.9.2, both ways."""

from __future__ import annotations

import json

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
    zv.write_graph(
        store, pos, edges, chunk_shape=100, attributes={"w": w}, object_ids=(pos[:, 1] // 250).astype(int)
    )
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


def _key(p):
    return tuple(p.tolist())


def _read_links(reference, tmp, store):
    """The driver's ``read-links``: every stored link record with endpoint positions and
    link attributes (``building``), and the family policy."""
    out = tmp / f"{store.name}-links.npz"
    report = json.loads(reference.run("read-links", str(store), str(out)))
    with np.load(out) as data:
        return report, {k: data[k] for k in data.files}


@pytest.mark.parametrize("directed", [False, True], ids=["undirected", "directed"])
def test_reference_reads_our_graph_attributes(tmp_path, rng, reference, directed):
    """Vertex, edge and object attributes, object membership and direction of our graphs,
    as the reference sees them. Its data api (``select().read()``) returns positions,
    edges and, on a whole read only, vertex attributes: compared per vertex by exact
    position, edges as oriented pairs (a set of directed pairs; the directed graph holds
    reciprocal pairs). It returns no edge attributes, no link direction and cannot select
    a graph by object (``select(objects=)`` raises for graphs), so those are checked
    through the reference's ``building`` surface: link records with their attributes and
    family policy (driver ``read-links``), object tables, and each object's vertices from
    its manifest (``read-objects``). A bbox read returns positions and edges only."""
    pos, edges = _graph(rng)
    if directed:
        edges = np.unique(np.concatenate([edges, edges[:60, ::-1]]), axis=0)
    else:  # one record per unordered pair, in a random orientation
        edges = np.unique(np.sort(edges, axis=1), axis=0)
        flip = rng.random(len(edges)) < 0.5
        edges[flip] = edges[flip, ::-1]
    n = len(pos)
    w = rng.random(n).astype(np.float32)
    tag = rng.integers(-300, 300, (n, 2)).astype(np.int16)
    ew = rng.random(len(edges)).astype(np.float32)
    code = rng.integers(0, 60000, (len(edges), 2)).astype(np.uint16)
    oids = (pos[:, 1] // 125).astype(np.int64)  # objects 0..3
    size = np.array([1.5, -2.0, 3.25, 8.0])
    store = tmp_path / "ours.zarr"
    zv.write_graph(
        store,
        pos,
        edges,
        chunk_shape=100,
        directed=directed,
        attributes={"w": w, "tag": tag},
        edge_attributes={"ew": ew, "code": code},
        object_ids=oids,
        object_attributes={"size": size},
    )
    info = reference.info(store)
    assert info["valid"], info
    lv = info["levels"][0]
    assert lv["kind"] == "graph"
    assert sorted(lv["vertex_attributes"]) == ["tag", "w"]
    assert sorted(lv["link_attributes"]) == ["code", "ew"]
    assert lv["object_attributes"] == ["size"]

    got = reference.read_graph(tmp_path, store)
    row = {_key(p): i for i, p in enumerate(pos)}
    assert len(row) == n
    m = np.array([row[_key(p)] for p in got["positions"]])  # input row of each returned vertex
    assert sorted(m.tolist()) == list(range(n))
    got_edges = sorted(zip(m[got["edges"][:, 0]].tolist(), m[got["edges"][:, 1]].tolist()))
    assert got_edges == sorted(map(tuple, edges.tolist()))
    assert got["attr__w"].dtype == w.dtype and np.array_equal(got["attr__w"], w[m])
    assert got["attr__tag"].dtype == tag.dtype and np.array_equal(got["attr__tag"], tag[m])
    assert np.array_equal(got["object_ids"], oids[m])
    assert np.array_equal(got["oattr__size"], size)

    members = reference.read_objects(tmp_path, store)
    assert sorted(members) == sorted(np.unique(oids).tolist())
    for oid, rows in members.items():
        assert sorted(map(_key, rows)) == sorted(map(_key, pos[oids == oid]))

    report, links = _read_links(reference, tmp_path, store)
    assert report["policy"]["directed"] is directed
    assert sorted(report["link_attributes"]) == ["code", "ew"]
    lp = links["link_positions"]
    assert lp.shape == (len(edges), 2, 3)
    want = {(a, b): (ew[k], tuple(code[k].tolist())) for k, (a, b) in enumerate(edges.tolist())}
    ends = [(row[_key(x[0])], row[_key(x[1])]) for x in lp]
    have = {e: (links["lattr__ew"][k], tuple(links["lattr__code"][k].tolist())) for k, e in enumerate(ends)}
    assert len(have) == len(ends)  # no record returned twice
    assert links["lattr__ew"].dtype == ew.dtype and links["lattr__code"].dtype == code.dtype
    assert have == want

    lo, hi = np.array([100.0, 50.0, 120.0]), np.array([350.0, 400.0, 480.0])
    box = reference.read_graph(tmp_path, store, (lo, hi))
    inside = np.all((pos >= lo) & (pos <= hi), axis=1)
    mb = np.array([row[_key(p)] for p in box["positions"]], dtype=np.int64)
    assert sorted(mb.tolist()) == np.flatnonzero(inside).tolist()
    keep = inside[edges[:, 0]] & inside[edges[:, 1]]
    got_edges = sorted(zip(mb[box["edges"][:, 0]].tolist(), mb[box["edges"][:, 1]].tolist()))
    assert got_edges == sorted(map(tuple, edges[keep].tolist()))


def test_we_read_reference_graphs(tmp_path, rng, reference):
    pos, edges = _graph(rng)
    w = rng.random(len(pos)).astype(np.float32)
    store = tmp_path / "ref.zv"
    reference.write_graph(
        tmp_path, store, positions=pos, edges=edges, chunk_shape=np.full(3, 100.0), attr__w=w
    )
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
    reference.write_graph(
        tmp_path, store, positions=pos, edges=edges, chunk_shape=np.full(3, 100.0), eattr__w=w
    )
    full = zv.open(store).query()
    want = {(tuple(pos[a]), tuple(pos[b])): v for (a, b), v in zip(edges.tolist(), w.tolist())}
    got = {
        (tuple(full.positions[a]), tuple(full.positions[b])): v
        for (a, b), v in zip(full.edges.tolist(), full.edge_attributes["w"].tolist())
    }
    assert got == want
