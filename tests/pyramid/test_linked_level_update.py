"""Levels of lines, skeletons and meshes after edits.

1. The premise of a region-wise update for linked kinds: a coarse level is built object by
   object, so an object's coarse geometry does not depend on the other objects of the store.
2. After a seeded random sequence of appends, replaces and deletes with ``pyramid="update"``
   (the default; today a rebuild with the recorded settings for these kinds), every
   level answers object reads and box queries exactly as a one-shot write of the final data
   with a full pyramid does."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import zarr_vectors as zv

BOUNDS = ([0.0, 0.0, 0.0], [100.0, 100.0, 100.0])
GRID: dict[str, Any] = {"chunk_shape": 25, "bounds": BOUNDS, "shards": None}
BOXES = [([0.0, 0, 0], [50.0, 50, 50]), ([30.0, 20, 40], [90.0, 80, 100]), (BOUNDS[0], BOUNDS[1])]

Obj = Any  # one object as its kind's writer takes it


def _sphere(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A closed UV sphere (5 rings of 8, 2 poles: 64 faces) of radius 4-10 inside the bounds."""
    lat, lon = np.linspace(0, np.pi, 7)[1:-1], np.linspace(0, 2 * np.pi, 9)[:-1]
    ring = np.stack(
        [
            np.outer(np.sin(lat), np.cos(lon)),
            np.outer(np.sin(lat), np.sin(lon)),
            np.repeat(np.cos(lat), 8).reshape(5, 8),
        ],
        axis=-1,
    ).reshape(-1, 3)
    verts = np.concatenate([[[0, 0, 1]], ring, [[0, 0, -1]]])
    faces = [[0, 1 + j, 1 + (j + 1) % 8] for j in range(8)]
    for i in range(4):
        for j in range(8):
            a, b = 1 + 8 * i + j, 1 + 8 * i + (j + 1) % 8
            faces += [[a, a + 8, b], [b, a + 8, b + 8]]
    faces += [[41, 33 + (j + 1) % 8, 33 + j] for j in range(8)]
    r = rng.uniform(4, 10)
    centre = rng.uniform(12, 88, 3)
    return (centre + r * verts).astype(np.float32), np.asarray(faces, np.int64)


def _chain(rng: np.random.Generator) -> np.ndarray:
    n = int(rng.integers(10, 40))
    start = rng.uniform(20, 80, 3)
    return np.clip(start + np.cumsum(rng.normal(0, 3, (n, 3)), axis=0), 0, 99).astype(np.float32)


def _graph(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A chain with two extra edges (cycles and branches)."""
    pos = _chain(rng)
    n = len(pos)
    chain = np.stack([np.arange(n - 1), np.arange(1, n)], axis=1)
    extra = rng.integers(0, n, (2, 2))
    return pos, np.concatenate([chain, extra[extra[:, 0] != extra[:, 1]]])


def _write(
    kind: str, url: str, objs: dict[int, Obj], cross_level: str = "implicit", shards: Any = None
) -> zv.Dataset:
    """The objects written by their kind's writer (unsharded unless ``shards``) with a pyramid [2, 2]."""
    ids = sorted(objs)
    grid = {**GRID, "shards": shards}
    if kind == "mesh":
        zv.write_meshes(url, [objs[i] for i in ids], object_ids=ids, **grid)
    elif kind == "lines":
        zv.write_lines(url, [objs[i] for i in ids], object_ids=ids, **grid)
    elif kind == "graph":
        pos = np.concatenate([objs[i][0] for i in ids])
        offsets = np.cumsum([0] + [len(objs[i][0]) for i in ids])
        edges = np.concatenate([objs[i][1] + o for i, o in zip(ids, offsets)])
        oids = np.concatenate([np.full(len(objs[i][0]), i) for i in ids])
        zv.write_graph(url, pos, edges, object_ids=oids, **grid)
    else:
        pos = np.concatenate([objs[i] for i in ids])
        offsets = np.cumsum([0] + [len(objs[i]) for i in ids])
        parents = np.concatenate([np.r_[-1, np.arange(len(objs[i]) - 1) + o] for i, o in zip(ids, offsets)])
        oids = np.concatenate([np.full(len(objs[i]), i) for i in ids])
        zv.write_skeleton(url, pos, parents, object_ids=oids, **grid)
    ds = zv.open(url, mode="r+")
    ds.build_pyramid([2, 2], cross_level=cross_level)
    return ds


def _args(kind: str, obj: Obj) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``(data, keywords)`` giving one new object to append/replace (its id added by the caller)."""
    if kind in ("mesh", "lines"):
        return ([obj],), {}
    if kind == "graph":
        return (obj[0], obj[1]), {}
    return (obj, np.r_[-1, np.arange(len(obj) - 1)]), {}


MAKERS: dict[str, Callable[[np.random.Generator], Obj]] = {
    "mesh": _sphere,
    "lines": _chain,
    "skeleton": _chain,
    "graph": _graph,
}


def _assert_same_levels(ds: zv.Dataset, want: zv.Dataset, ids: list[int]) -> None:
    assert ds.levels == want.levels == [0, 1, 2] and ds.stale_levels() == []
    for k in ds.levels:
        assert ds.object_ids(k).tolist() == want.object_ids(k).tolist() == ids, k
        assert ds.vertex_count(k) == want.vertex_count(k), k
        for i in ids:
            got, exp = ds.objects([i], level=k), want.objects([i], level=k)
            for key in ("positions", "parents", "line_offsets", "edges", "faces"):
                a, b = getattr(got, key), getattr(exp, key)
                assert (a is None) == (b is None) and (a is None or np.array_equal(a, b)), (k, i, key)
        for box in BOXES:
            got, exp = ds.query(box, level=k).positions, want.query(box, level=k).positions
            assert np.array_equal(got[np.lexsort(got.T)], exp[np.lexsort(exp.T)]), (k, box)
    assert ds.vertex_count(2) < ds.vertex_count(0)


@pytest.mark.parametrize("kind", sorted(MAKERS))
def test_coarse_objects_do_not_depend_on_the_other_objects(kind: str) -> None:
    rng = np.random.default_rng(21)
    objs = {i: MAKERS[kind](rng) for i in (2, 5, 9)}
    base = f"memory://linked-per-object-{kind}-{os.getpid()}"
    every = _write(kind, f"{base}/every", objs)
    alone = _write(kind, f"{base}/alone", {5: objs[5]})
    for k in (1, 2):
        got = alone.objects([5], level=k).positions
        assert np.array_equal(every.objects([5], level=k).positions, got)
    assert alone.vertex_count(2) < alone.vertex_count(0)  # coarsened, not copied


@pytest.mark.slow  # four edits, each followed by a rebuild of two levels: 1-4 s
@pytest.mark.parametrize("kind", sorted(MAKERS))
def test_random_edits_with_update_match_a_full_build(kind: str) -> None:
    rng = np.random.default_rng(sorted(MAKERS).index(kind) + 30)
    make = MAKERS[kind]
    objs = {int(i): make(rng) for i in rng.choice(np.arange(1, 40), 5, replace=False)}
    base = f"memory://linked-level-update-{kind}-{os.getpid()}"
    ds = _write(kind, f"{base}/edited", objs)
    for step in range(4):
        what = ["replace", "append", "delete", "append"][step]
        if what == "append":
            new_id = int(max(objs) + 1 + rng.integers(0, 3))
            obj = make(rng)
            data, kw = _args(kind, obj)
            n = len(obj[0]) if kind == "graph" else len(obj)
            ds.append(  # the default: the levels brought up to date in the edit's commit
                *data,
                object_ids=[new_id] if kind in ("mesh", "lines") else np.full(n, new_id),
                **kw,
            )
            objs[new_id] = obj
        elif what == "replace":
            old = int(rng.choice(sorted(objs)))
            obj = make(rng)
            data, kw = _args(kind, obj)
            ds.replace([old], *data, pyramid="update", **kw)
            objs[old] = obj
        else:
            old = int(rng.choice(sorted(objs)))
            ds.delete([old], pyramid="update")
            del objs[old]
        assert ds.stale_levels() == []
    want = _write(kind, f"{base}/one", objs)
    _assert_same_levels(ds, want, sorted(objs))
