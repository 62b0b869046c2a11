"""Object edits (append, replace, delete) of linked stores against one-shot writes of the final objects."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import zarr_vectors as zv
from zarr_vectors.errors import InputError

B = ([0.0, 0.0, 0.0], [8.0, 8.0, 8.0])


def _walk(rng: np.random.Generator, n: int) -> np.ndarray:
    """A random walk crossing chunk seams (chunk edge 4 in a 0..8 box)."""
    return np.clip(np.cumsum(rng.normal(0, 1.3, (n, 3)), axis=0) + rng.uniform(2, 6, 3), 0, 8)


def _skeleton(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    n = int(rng.integers(3, 12))
    par = np.r_[-1, [int(rng.integers(0, i)) if rng.random() < 0.25 else i - 1 for i in range(1, n)]]
    return _walk(rng, n), par


def _mesh(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    n = int(rng.integers(4, 10))
    faces = np.stack([np.arange(n - 2), np.arange(1, n - 1), np.arange(2, n)], axis=1)
    return _walk(rng, n), faces


def _line(rng: np.random.Generator) -> np.ndarray:
    return _walk(rng, int(rng.integers(2, 10)))


def _graph(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    n = int(rng.integers(3, 10))
    edges = np.stack([np.arange(n - 1), np.arange(1, n)], axis=1)
    extra = rng.integers(0, n, (2, 2))
    return _walk(rng, n), np.concatenate([edges, extra[extra[:, 0] != extra[:, 1]]])


MAKERS = {"skeleton": _skeleton, "mesh": _mesh, "lines": _line, "graph": _graph}


def _write(kind: str, target: Any, objs: dict[int, Any], shards: Any) -> Any:
    """One-shot write of ``objs`` in ascending id order."""
    ids = sorted(objs)
    common = {"chunk_shape": 4, "bounds": B, "shards": shards, "overwrite": True}
    if kind == "mesh":
        return zv.write_meshes(target, [objs[i] for i in ids], object_ids=ids, **common)
    if kind == "lines":
        return zv.write_lines(target, [objs[i] for i in ids], object_ids=ids, **common)
    pos = np.concatenate([objs[i][0] for i in ids])
    offs = np.cumsum([0] + [len(objs[i][0]) for i in ids])
    oid = np.concatenate([np.full(len(objs[i][0]), i) for i in ids])
    r = (pos[:, 0] * 7).astype(np.float32)
    if kind == "skeleton":
        par = np.concatenate([np.where(objs[i][1] >= 0, objs[i][1] + o, -1) for i, o in zip(ids, offs)])
        return zv.write_skeleton(target, pos, par, object_ids=oid, attributes={"r": r}, **common)
    edges = np.concatenate([objs[i][1] + o for i, o in zip(ids, offs)])
    w = {"w": _weights(pos, edges)}
    return zv.write_graph(
        target, pos, edges, object_ids=oid, attributes={"r": r}, edge_attributes=w, **common
    )


def _weights(pos: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """An edge attribute that follows the edge: its endpoints' summed coordinates."""
    return (pos[edges[:, 0]].sum(axis=1) * 10 + pos[edges[:, 1]].sum(axis=1)).astype(np.float32)


def _args(kind: str, obj: Any, oid: int) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """One object as the writer takes it (for ``Dataset.append`` / ``replace``)."""
    if kind == "mesh":
        return ([obj],), {"object_ids": [oid]}
    if kind == "lines":
        return ([obj],), {"object_ids": [oid]}
    r = (obj[0][:, 0] * 7).astype(np.float32)
    kw = {"object_ids": np.full(len(obj[0]), oid), "attributes": {"r": r}}
    if kind == "graph":
        kw["edge_attributes"] = {"w": _weights(obj[0], obj[1])}
    return (obj[0], obj[1]), kw


def _same(a: Any, b: Any) -> None:
    for key in ("positions", "object_ids", "parents", "line_offsets", "edges", "faces"):
        x, y = getattr(a, key), getattr(b, key)
        assert (x is None) == (y is None), key
        if x is not None:
            np.testing.assert_array_equal(x, y, err_msg=key)
    assert sorted(a.attributes or {}) == sorted(b.attributes or {})
    assert sorted(a.edge_attributes or {}) == sorted(b.edge_attributes or {})
    for key in a.edge_attributes or {}:
        np.testing.assert_array_equal(a.edge_attributes[key], b.edge_attributes[key])
    for key in a.attributes or {}:
        np.testing.assert_array_equal(a.attributes[key], b.attributes[key])


def _compare(edited: Any, path: Path, kind: str, objs: dict[int, Any], shards: Any, rng: Any) -> None:
    ref = _write(kind, path / "ref.zarr", objs, shards)
    ds = zv.open(edited)
    np.testing.assert_array_equal(ds.object_ids(), ref.object_ids())
    assert ds.vertex_count() == ref.vertex_count()
    report = zv.validate(edited)
    assert report.ok, str(report)
    _same(ds.read(), ref.read())
    for i in ref.object_ids().tolist():
        _same(ds.objects([i]), ref.objects([i]))
    for _ in range(4):
        lo = rng.uniform(0, 8, 3)
        box = (lo, lo + rng.uniform(0.5, 5, 3))
        _same(ds.query(box), ref.query(box))


def _edit_sequence(tmp_path: Path, kind: str, shards: Any, steps: int, every: bool, seed: int) -> None:
    """``steps`` random edits (delete, append, replace in turn) compared with a one-shot write
    of the final objects after every step (``every``) or after the last one."""
    rng = np.random.default_rng(seed)
    make = MAKERS[kind]
    objs = {i: make(rng) for i in (1, 3, 4, 7, 9)}
    target = tmp_path / "edited.zarr"
    _write(kind, target, objs, shards)
    nxt = 10
    for step in range(steps):
        ds = zv.open(target, mode="r+")
        op = ("delete", "append", "replace")[step % 3]
        if op == "delete":
            gone = int(rng.choice(sorted(objs)))
            ds.delete([gone])
            del objs[gone]
        elif op == "append":
            obj = make(rng)
            data, kw = _args(kind, obj, nxt)
            ds.append(*data, **kw)
            objs[nxt] = obj
            nxt += 2
        else:
            which = int(rng.choice(sorted(objs)))
            obj = make(rng)
            data, kw = _args(kind, obj, which)
            ds.replace([which], *data, **kw)
            objs[which] = obj
        if every or step == steps - 1:
            _compare(target, tmp_path, kind, objs, shards, rng)


@pytest.mark.parametrize("kind", ["lines", "mesh", "skeleton", pytest.param("graph", marks=pytest.mark.slow)])
def test_edits_match_one_shot(tmp_path: Path, kind: str) -> None:
    _edit_sequence(tmp_path, kind, None, 3, False, len(kind))


@pytest.mark.parametrize("kind", [pytest.param("mesh", marks=pytest.mark.slow), "skeleton"])
def test_edits_match_one_shot_sharded(tmp_path: Path, kind: str) -> None:
    _edit_sequence(tmp_path, kind, (2, 1, 2), 3, False, 3 * len(kind))


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(MAKERS))
@pytest.mark.parametrize("shards", [None, (2, 1, 2), "auto"])
@pytest.mark.parametrize("seed", [0, 1])
def test_random_edit_sequences_match_one_shot(tmp_path: Path, kind: str, shards: Any, seed: int) -> None:
    _edit_sequence(tmp_path, kind, shards, 6, True, seed)


def _files(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha1(p.read_bytes()).hexdigest()
        for p in root.rglob("*")
        if p.is_file() and "/c/" in str(p.relative_to(root)).replace("\\", "/")
    }


def test_untouched_cells_stay_byte_identical(tmp_path: Path) -> None:
    far = (np.array([[0.5, 0.5, 0.5], [1.0, 1.0, 1.0], [1.5, 0.5, 1.0]]), np.array([[0, 1, 2]]))
    near = (np.array([[6.5, 6.5, 6.5], [7.0, 7.0, 7.0], [7.5, 6.5, 7.0]]), np.array([[0, 1, 2]]))
    seam = (np.array([[3.5, 1.0, 1.0], [4.5, 1.0, 1.0], [4.5, 2.0, 1.0]]), np.array([[0, 1, 2]]))
    target = tmp_path / "m.zarr"
    _write("mesh", target, {1: far, 2: near, 3: seam}, None)
    before = _files(target)
    ds = zv.open(target, mode="r+")
    ds.delete([2])
    after = _files(target)
    gone = {k for k in before if k not in after}
    assert gone and all(k.endswith("/c/1/1/1") for k in gone)
    kept = {k for k in before if "/c/1/1/1" not in k and not k.startswith("0/object_index")}
    changed = [k for k in kept if before[k] != after.get(k)]
    assert changed == []


def test_errors(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    objs = {1: _skeleton(rng), 2: _skeleton(rng)}
    target = tmp_path / "s.zarr"
    _write("skeleton", target, objs, None)
    ds = zv.open(target, mode="r+")
    with pytest.raises(InputError, match="object id 5 is not in this store"):
        ds.delete([5])
    with pytest.raises(InputError, match="object id 8 is not in this store"):
        ds.replace([8], *_args("skeleton", objs[1], 8)[0], **_args("skeleton", objs[1], 8)[1])
    data, kw = _args("skeleton", objs[1], 2)
    with pytest.raises(InputError, match=r"already in the store \(first: 2\)"):
        ds.append(*data, **kw)
    with pytest.raises(InputError, match="append needs object_ids"):
        ds.append(*data, attributes=kw["attributes"])
    with pytest.raises(InputError, match=r"vertex 2 has parent 7, outside"):
        ds.append(np.ones((3, 3)), [-1, 0, 7], object_ids=[30] * 3, attributes={"r": np.ones(3, np.float32)})
    with pytest.raises(InputError, match="exactly the store's attributes"):
        ds.append(*data[:2], object_ids=np.full(len(objs[1][0]), 30))
    assert zv.open(target).object_ids().tolist() == [1, 2]


def test_draco_refused(tmp_path: Path) -> None:
    v = np.array([[1.0, 1, 1], [2, 1, 1], [1, 2, 1]])
    zv.write_mesh(tmp_path / "d.zarr", v, [[0, 1, 2]], encoding="draco", chunk_shape=4, bounds=B)
    with pytest.raises(InputError, match="Draco-encoded"):
        zv.open(tmp_path / "d.zarr", mode="r+").delete([0])


def _tables_write(
    target: Any, objs: dict[int, Any], names: dict[int, str], groups: dict[int, list[int]]
) -> Any:
    ids = sorted(objs)
    pos = np.concatenate([objs[i][0] for i in ids])
    offs = np.cumsum([0] + [len(objs[i][0]) for i in ids])
    par = np.concatenate([np.where(objs[i][1] >= 0, objs[i][1] + o, -1) for i, o in zip(ids, offs)])
    oid = np.concatenate([np.full(len(objs[i][0]), i, np.uint64) for i in ids])
    return zv.write_skeleton(
        target,
        pos,
        par,
        object_ids=oid,
        object_attributes={"name": {i: names[i] for i in ids}},
        groups={g: [m for m in members if m in objs] for g, members in groups.items()},
        chunk_shape=4,
        bounds=B,
        shards=None,
        overwrite=True,
    )


@pytest.mark.slow
def test_object_tables_groups_and_remapped_ids(tmp_path: Path) -> None:
    rng = np.random.default_rng(11)
    big = 2**60
    objs = {big + k: _skeleton(rng) for k in (5, 1, 9, 3)}
    names = {i: f"n{i - big}" for i in objs}
    groups = {0: [big + 1, big + 9], 1: [big + 3, big + 5, big + 9]}
    target = tmp_path / "t.zarr"
    _tables_write(target, objs, names, groups)
    ds = zv.open(target, mode="r+")
    ds.delete([big + 3])  # renumbers every later object: untouched chunks' owner tables move too
    del objs[big + 3]
    new = _skeleton(rng)
    ds.replace([big + 9], new[0], new[1])  # keeps its name
    objs[big + 9] = new
    extra = _skeleton(rng)
    ds.append(
        extra[0],
        extra[1],
        object_ids=np.full(len(extra[0]), big + 2, np.uint64),
        object_attributes={"name": {big + 2: "longer name"}},
    )
    objs[big + 2] = extra
    names[big + 2] = "longer name"
    ref = _tables_write(tmp_path / "ref.zarr", objs, names, groups)
    got = zv.open(target)
    np.testing.assert_array_equal(got.object_ids(), ref.object_ids())
    np.testing.assert_array_equal(got.object_attributes("name"), ref.object_attributes("name"))
    assert [g.tolist() for g in got.groups()] == [g.tolist() for g in ref.groups()]
    for gid in ref.group_ids().tolist():
        _same(got.group(gid), ref.group(gid))
    _same(got.read(), ref.read())
    for i in ref.object_ids().tolist():
        _same(got.objects([i]), ref.objects([i]))


def test_delete_everything_then_append(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    objs = {1: _mesh(rng), 2: _mesh(rng)}
    target = tmp_path / "m.zarr"
    _write("mesh", target, objs, None)
    ds = zv.open(target, mode="r+")
    ds.delete([1, 2])
    assert ds.vertex_count() == 0 and len(ds.read()) == 0
    obj = _mesh(rng)
    ds.append([obj], object_ids=[4])
    _compare(target, tmp_path, "mesh", {4: obj}, None, rng)


@pytest.mark.slow
def test_pyramid_marked_stale_and_rebuilt(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    objs = {i: _skeleton(rng) for i in (1, 2, 3)}
    target = tmp_path / "p.zarr"
    _write("skeleton", target, objs, None)
    ds = zv.open(target, mode="r+")
    ds.build_pyramid([2])
    ds.delete([2], pyramid="stale")
    assert ds.stale_levels() == [1]
    data, kw = _args("skeleton", _skeleton(rng), 7)
    ds.append(*data, pyramid=True, **kw)
    assert ds.stale_levels() == []
    assert sorted(zv.open(target).object_ids(1).tolist()) == [1, 3, 7]


@pytest.mark.parametrize("kind", ["skeleton", "mesh"])
def test_append_widens_link_indices(tmp_path: Path, kind: str) -> None:
    """A chunk grown past 256 rows needs wider link indices: every link cell is re-encoded."""
    rng = np.random.default_rng(8)
    objs = {i: MAKERS[kind](rng) for i in (1, 2)}
    target = tmp_path / "w.zarr"
    _write(kind, target, objs, None)
    assert {a.attrs["dtype"] for a in zv.open(target).level(0).links.values()} == {"uint8"}
    n = 300
    pos = np.clip(rng.uniform(0.2, 3.8, (n, 3)), 0, 8)
    pos[-3:] += 4.0  # the last vertices cross into the next chunk
    if kind == "skeleton":
        big = (pos, np.r_[-1, [i - 1 if i % 7 else max(i - 5, 0) for i in range(1, n)]])
    else:
        big = (pos, np.stack([np.arange(n - 2), np.arange(1, n - 1), np.arange(2, n)], axis=1))
    data, kw = _args(kind, big, 5)
    zv.open(target, mode="r+").append(*data, **kw)
    objs[5] = big
    _compare(target, tmp_path, kind, objs, None, rng)
    assert {a.attrs["dtype"] for a in zv.open(target).level(0).links.values()} == {"uint16"}


@pytest.mark.parametrize("shards", [(1, 1, 1), (2, 2, 2)])
def test_delete_in_shards(tmp_path: Path, shards: tuple[int, ...]) -> None:
    """A chunk emptied by a delete: its shard goes when it held nothing else, else it is
    rewritten with the other chunks it holds."""
    far = (np.array([[0.5, 0.5, 0.5], [1.0, 1.0, 1.0], [1.5, 0.5, 1.0]]), np.array([[0, 1, 2]]))
    near = (np.array([[6.5, 6.5, 6.5], [7.0, 7.0, 7.0], [7.5, 6.5, 7.0]]), np.array([[0, 1, 2]]))
    seam = (np.array([[3.5, 1.0, 1.0], [4.5, 1.0, 1.0], [4.5, 2.0, 1.0]]), np.array([[0, 1, 2]]))
    objs = {1: far, 2: near, 3: seam}
    target = tmp_path / "m.zarr"
    _write("mesh", target, objs, shards)
    zv.open(target, mode="r+").delete([2])
    del objs[2]
    _compare(target, tmp_path, "mesh", objs, shards, np.random.default_rng(0))
    shard_file = target / "0" / "vertices" / "c" / "1" / "1" / "1"
    if shards == (1, 1, 1):
        assert not shard_file.exists()
    else:  # the shard holding the emptied chunk was rewritten without it
        backend = zv.open(target).level(0).backend
        assert backend.get_many(["0/vertices/c/1/1/1"]) == [None]
        assert backend.get_many(["0/vertices/c/0/0/0"])[0]


@pytest.mark.slow
def test_several_objects_per_edit_and_new_link_arrays(tmp_path: Path) -> None:
    """Lines that never cross a chunk (no links in the store), then crossing lines added and
    replaced several at a time: the link arrays and their family are created by the edit."""
    rng = np.random.default_rng(4)
    objs = {i: rng.uniform(0.5, 3.5, (4, 3)) for i in (2, 6, 8)}
    target = tmp_path / "l.zarr"
    _write("lines", target, objs, None)
    assert not zv.open(target).level(0).links
    new = {3: _line(rng), 11: _line(rng), 12: _line(rng)}
    ds = zv.open(target, mode="r+")
    ds.append([new[3], new[11], new[12]], object_ids=[3, 11, 12])
    objs |= new
    assert zv.open(target).level(0).links
    swap = {6: _line(rng), 11: _line(rng)}
    ds.replace([6, 11], [swap[6], swap[11]])
    objs |= swap
    ds.delete([2, 12])
    del objs[2], objs[12]
    _compare(target, tmp_path, "lines", objs, None, rng)


def test_errors_of_items_and_edges(tmp_path: Path) -> None:
    rng = np.random.default_rng(6)
    meshes = {1: _mesh(rng), 2: _mesh(rng)}
    _write("mesh", tmp_path / "m.zarr", meshes, None)
    ds = zv.open(tmp_path / "m.zarr", mode="r+")
    with pytest.raises(
        InputError, match=r"replace names objects \[1\] but the new geometry holds objects \[1, 5\]"
    ):
        ds.replace([1], [meshes[1], meshes[2]], object_ids=[1, 5])
    with pytest.raises(InputError, match=r"\['bounds'\] cannot be given to an edit"):
        ds.append([meshes[1]], object_ids=[7], bounds=B)
    with pytest.raises(InputError, match="extend=True adds points to objects of a point cloud"):
        ds.append([meshes[1]], object_ids=[7], extend=True)
    graphs = {1: _graph(rng)}
    _write("graph", tmp_path / "g.zarr", graphs, None)
    g = zv.open(tmp_path / "g.zarr", mode="r+")
    data, kw = _args("graph", _graph(rng), 4)
    del kw["edge_attributes"]
    with pytest.raises(
        InputError, match=r"the store's edges have attributes \['w'\]; the new objects give \[\]"
    ):
        g.append(*data, **kw)
    assert zv.open(tmp_path / "g.zarr").object_ids().tolist() == [1]
    assert zv.open(tmp_path / "m.zarr").object_ids().tolist() == [1, 2]


def test_several_bins_per_chunk_refused(tmp_path: Path) -> None:
    writer = zv.create(tmp_path / "b.zarr", "skeleton", chunk_shape=4, bin_shape=2, bounds=B)
    writer.append(np.ones((3, 3)), [-1, 0, 1], object_ids=[1, 1, 1])
    writer.close()
    with pytest.raises(
        InputError, match="this store has 8 bins per chunk; object edits need one bin per chunk"
    ):
        zv.open(tmp_path / "b.zarr", mode="r+").delete([1])
