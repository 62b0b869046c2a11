"""Skeletons: parent trees round trip exactly, in boxes and by object; bad trees are refused."""

from __future__ import annotations

import numpy as np
import pytest

import zarr_vectors as zv
from zarr_vectors.errors import InputError


def _forest(rng, n_trees=4, size=300, d=3):
    pos, par = [], []
    for t in range(n_trees):
        base = t * size
        p = np.full(size, -1)
        x = np.zeros((size, d))
        x[0] = rng.uniform(200, 800, d)
        for i in range(1, size):
            p[i] = rng.integers(max(0, i - 15), i)
            x[i] = x[p[i]] + rng.normal(0, 20, d)
        extra_root = size // 2  # a second root inside the tree's object, as SWC files allow
        p[extra_root] = -1
        par.append(np.where(p >= 0, p + base, -1))
        pos.append(x)
    return np.concatenate(pos).round(4), np.concatenate(par)


def _parent_pairs(positions, edges):
    return sorted((tuple(positions[a]), tuple(positions[b])) for a, b in edges)


def test_trees_round_trip(tmp_path, rng):
    pos, par = _forest(rng)
    oid = np.repeat(np.arange(4), 300)
    radius = rng.random(len(pos)).astype(np.float32)
    ds = zv.write_skeleton(
        tmp_path / "s.zarr",
        pos,
        par,
        chunk_shape=100,
        object_ids=oid,
        attributes={"radius": radius, "type": np.full(len(pos), 3, np.uint8)},
    )
    assert ds.geometry_types == ("skeleton",) and ds.num_objects() == 4
    want = [(tuple(pos[par[i]]), tuple(pos[i])) for i in range(len(pos)) if par[i] >= 0]
    full = ds.query()
    assert _parent_pairs(full.positions, full.edges) == sorted(want)
    assert (full.parents >= 0).sum() == len(want)
    lookup = {tuple(p): r for p, r in zip(pos.tolist(), radius.tolist())}
    assert [lookup[tuple(p)] for p in full.positions.tolist()] == full.attributes["radius"].tolist()
    one = ds.objects([2])
    sel = oid == 2
    assert sorted(map(tuple, one.positions.tolist())) == sorted(map(tuple, pos[sel].tolist()))
    assert _parent_pairs(one.positions, one.edges) == sorted(
        w for w, i in zip(want, np.flatnonzero(par >= 0)) if sel[i]
    )
    for _ in range(5):
        lo = rng.uniform(100, 600, 3)
        hi = lo + 250
        box = ds.query(bbox=(lo, hi))
        inside = np.all((pos >= lo) & (pos <= hi), axis=1)
        assert sorted(map(tuple, box.positions.tolist())) == sorted(map(tuple, pos[inside].tolist()))
        keep = [
            (tuple(pos[par[i]]), tuple(pos[i]))
            for i in range(len(pos))
            if par[i] >= 0 and inside[i] and inside[par[i]]
        ]
        assert _parent_pairs(box.positions, box.edges) == sorted(keep)


def test_default_objects_are_trees(tmp_path):
    pos = np.array([[0.0, 0], [1, 1], [50, 50], [51, 50]])
    ds = zv.write_skeleton(tmp_path / "s.zarr", pos, [-1, 0, -1, 2], chunk_shape=10)
    assert ds.num_objects() == 2
    assert sorted(map(tuple, ds.objects([1]).positions.tolist())) == [(50.0, 50.0), (51.0, 50.0)]


@pytest.mark.parametrize(
    "parents, message",
    [
        ([1, 2, 0], "cycle"),
        ([-1, 5, 0], r"parent 5, outside \[-1, 3\)"),
        ([-1, 1, 0], "its own parent"),
        ([-1, 0], r"must be \(3,\)"),
    ],
)
def test_bad_trees_are_refused(tmp_path, parents, message):
    with pytest.raises(InputError, match=message):
        zv.write_skeleton(tmp_path / "s.zarr", np.zeros((3, 3)), parents, chunk_shape=1)
    assert not (tmp_path / "s.zarr").exists()


def test_parent_in_another_object_is_refused(tmp_path):
    with pytest.raises(InputError, match="has parent 0 in object 0"):
        zv.write_skeleton(tmp_path / "s.zarr", np.zeros((2, 3)), [-1, 0], chunk_shape=1, object_ids=[0, 1])


def test_spec_form_directed_parent_child_records_read_as_parents(tmp_path):
    """Spec §14.3 stores a skeleton's explicit records as directed (parent, child); the reference
    stores (child, parent) under an undirected family. Both must give the same parents."""
    import json

    from zarr_vectors.engine.chunks.pipeline import Pipeline

    pos = np.array([[10.0, 10, 10], [20, 10, 10], [30, 10, 10], [20, 30, 10]])
    parents = np.array([-1, 0, 1, 1])
    path = tmp_path / "s.zarr"
    # one file per cell: the link cell is rewritten below
    zv.write_skeleton(path, pos, parents, chunk_shape=100, bounds=([0] * 3, [100] * 3), shards=None)
    before = zv.open(path).objects([0])
    cell = path / "0/links/0/0.0.0/c/0/0/0"
    pipe = Pipeline.from_codecs([{"name": "vlen-bytes"}])
    rows = np.frombuffer(bytes(pipe.decode(cell.read_bytes())), np.uint8).reshape(-1, 2)
    assert rows.tolist() == [[3, 1]]  # (child, parent), as the reference writes
    cell.write_bytes(pipe.encode(rows[:, ::-1].tobytes()))
    fam = path / "0/links/0/zarr.json"
    doc = json.loads(fam.read_text())
    doc["attributes"]["directed"] = True
    fam.write_text(json.dumps(doc))
    after = zv.open(path).objects([0])
    assert after.positions.tolist() == before.positions.tolist() == pos.tolist()
    assert after.parents.tolist() == before.parents.tolist() == parents.tolist()


def test_objects_come_back_in_input_order(tmp_path, rng):
    """objects() gives each skeleton's vertices in the order they were written (not depth
    first), parents as indices into that order, attributes alongside; also when the input
    interleaves objects and is not a depth-first order."""
    n = 2400
    oid = np.repeat(np.arange(6) % 3, n // 6)  # objects 0, 1, 2, 0, 1, 2 in blocks
    par = np.full(n, -1)
    for o in range(3):
        members = np.flatnonzero(oid == o)
        for k in range(1, len(members)):
            par[members[k]] = members[rng.integers(max(0, k - 12), k)]  # any earlier vertex nearby
        par[members[len(members) // 3]] = -1  # a second root
    pos = np.zeros((n, 3))
    for i in range(n):
        pos[i] = (pos[par[i]] if par[i] >= 0 else rng.uniform(300, 700, 3)) + rng.normal(0, 15, 3)
    radius = rng.random(n).astype(np.float32)
    ds = zv.write_skeleton(
        tmp_path / "s.zarr", pos, par, object_ids=oid, chunk_shape=60, attributes={"radius": radius}
    )
    for ids in ([1], [2, 0]):
        got = ds.objects(ids)
        members = np.concatenate([np.flatnonzero(oid == o) for o in ids])
        local = np.full(n, -1)
        local[members] = np.arange(len(members))
        assert np.array_equal(got.positions, pos[members])
        assert np.array_equal(
            got.parents, np.where(par[members] >= 0, local[np.maximum(par[members], 0)], -1)
        )
        assert np.array_equal(got.attributes["radius"], radius[members])
        assert np.array_equal(got.object_ids, oid[members])
