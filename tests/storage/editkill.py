"""Stores, edits and kill points shared by ``test_kill_edits`` and the child processes it kills.

A *moment* is the k-th storage mutation of a run (a ``set_many``/``delete_many``/
``delete_prefix`` of a local or zarr-store backend, a local commit's exchange, or the removal
of a folder); :func:`hook` labels them in order and, given ``die_after``, SIGKILLs the process
as soon as the ``die_after``-th one has returned.

The *commit* is the mutation after which readers see the new store: a local store's last
exchange, or an in-place store's last root write (``zarr.json`` written by a zarr-store backend).
"""

from __future__ import annotations

import os
import signal
from typing import Any

import numpy as np

import zarr_vectors as zv
from zarr_vectors.storage import commit as _commit
from zarr_vectors.storage import local as _local
from zarr_vectors.storage import zarr_store as _zarr_store

BOUNDS = ([0.0, 0.0, 0.0], [100.0, 100.0, 100.0])
#: Store options; the S3 tests use larger chunks (fewer keys: moto takes about 20 ms a key).
OPTS: dict[str, Any] = {"chunk_shape": 25, "bounds": BOUNDS}


def opts(chunk: float) -> dict[str, Any]:
    return {**OPTS, "chunk_shape": chunk}


BOX = ([10, 20, 5], [70, 90, 60])


def hook(die_after: int | None, patch: Any = setattr) -> list[str]:
    """Label this process's storage mutations in order (the returned list grows as they run),
    dying with SIGKILL as soon as the ``die_after``-th one has returned; ``patch`` sets the
    wrappers (a test passes ``monkeypatch.setattr`` to undo them)."""
    labels: list[str] = []

    def counted(real: Any, label: str) -> Any:
        def run(*args: Any, **kwargs: Any) -> Any:
            out = real(*args, **kwargs)
            root = label.endswith("set_many") and any(k == "zarr.json" for k, _ in args[1])
            labels.append(label + ("+root" if root else ""))
            if die_after is not None and len(labels) == die_after:
                os.kill(os.getpid(), signal.SIGKILL)
            return out

        return run

    for cls in (_local.LocalBackend, _zarr_store.ZarrStoreBackend):
        for name in ("set_many", "delete_many", "delete_prefix"):
            patch(cls, name, counted(getattr(cls, name), f"{cls.__name__}.{name}"))
    patch(_commit, "exchange", counted(_commit.exchange, "exchange"))
    patch(_commit, "remove_tree", counted(_commit.remove_tree, "remove_tree"))
    return labels


def commit_moment(labels: list[str], in_place: bool) -> int:
    """The 1-based number of the commit among ``labels`` (see the module's docstring)."""
    mark = "ZarrStoreBackend.set_many+root" if in_place else "exchange"
    assert mark in labels, labels
    return len(labels) - labels[::-1].index(mark)


def skeletons(oids: list[int], seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Chains of 25 vertices (one per id) wandering over several chunks."""
    pos, par, ids = [], [], []
    for o in oids:
        rng = np.random.default_rng(seed * 1000 + o)
        p = np.clip(np.cumsum(rng.uniform(-8, 8, (25, 3)), axis=0) + rng.uniform(20, 80, 3), 0, 99.9)
        par.append(np.where(np.arange(25) == 0, -1, np.arange(-1, 24) + sum(map(len, pos))))
        pos.append(p)
        ids.append(np.full(25, o, np.uint64))
    return np.concatenate(pos), np.concatenate(par), np.concatenate(ids)


def meshes(oids: list[int], seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """One small fan mesh per id, spanning a few chunks."""
    out = []
    for o in oids:
        rng = np.random.default_rng(seed * 1000 + o)
        v = np.clip(rng.uniform(-15, 15, (12, 3)) + rng.uniform(15, 85, 3), 0, 99.9)
        out.append((v, np.column_stack([np.zeros(10, int), np.arange(1, 11), np.arange(2, 12)])))
    return out


def points(oids: list[int], seed: int) -> tuple[np.ndarray, np.ndarray]:
    """200 points per id, anywhere."""
    rng = np.random.default_rng(seed)
    return rng.uniform(0, 100, (200 * len(oids), 3)), np.repeat(np.asarray(oids, np.uint64), 200)


def write(target: Any, kind: str, oids: list[int], seed: int, chunk: float = 25, **kw: Any) -> None:
    """A one-shot store of ``kind`` holding the objects ``oids`` drawn with ``seed``."""
    if kind == "skeletons":
        pos, par, ids = skeletons(oids, seed)
        zv.write_skeleton(target, pos, par, object_ids=ids, **opts(chunk), **kw)
    elif kind == "meshes":
        zv.write_meshes(target, meshes(oids, seed), object_ids=oids, **opts(chunk), **kw)
    else:
        pts, ids = points(oids, seed)
        zv.write_points(target, pts, object_ids=ids, **opts(chunk), **kw)


BASE = [1, 2, 3, 4, 5, 6]


def run(target: Any, kind: str, op: str, so: dict[str, Any] | None, chunk: float = 25) -> None:
    """The operation under test, on ``target`` holding ``write(kind, BASE, 0)``."""
    if op == "stream":  # a new version (seed 1, other objects) streamed over the store
        w = zv.create(target, kind, memory_limit=1 << 20, overwrite=True, storage_options=so, **opts(chunk))
        for part in ([11, 12, 13], [14, 15, 16, 17]):
            if kind == "skeletons":
                pos, par, ids = skeletons(part, 1)
                w.append(pos, par, object_ids=ids)
            else:
                w.append(meshes(part, 1), object_ids=part)
        w.close()
        return
    ds = zv.open(target, "r+", storage_options=so)
    if op == "delete":
        ds.delete([2, 5])
    elif op == "append":
        new = [21, 22]
        if kind == "skeletons":
            pos, par, ids = skeletons(new, 2)
            ds.append(pos, par, object_ids=ids)
        elif kind == "meshes":
            ds.append(meshes(new, 2), object_ids=new)
        else:
            pts, ids = points(new, 2)
            ds.append(pts, object_ids=ids)
    else:  # replace 3 with new geometry
        if kind == "skeletons":
            pos, par, _ = skeletons([3], 3)
            ds.replace([3], pos, par)
        elif kind == "meshes":
            ds.replace([3], meshes([3], 3))
        else:
            pts, ids = points([3], 3)
            ds.replace([3], pts, object_ids=ids)


def answers(ds: zv.Dataset) -> tuple[list[int], list[np.ndarray], np.ndarray]:
    """Object ids, every object's vertices (rows sorted), and the rows of a box query."""
    ids = ds.object_ids().tolist()
    objs = []
    for i in ids:
        p = ds.objects([i]).positions
        objs.append(p[np.lexsort(p.T[::-1])])
    b = ds.query(bbox=BOX)
    rows = np.column_stack([b.positions, b.object_ids.astype(np.float64)])
    return ids, objs, rows[np.lexsort(rows.T[::-1])]


def same(
    a: tuple[list[int], list[np.ndarray], np.ndarray], b: tuple[list[int], list[np.ndarray], np.ndarray]
) -> bool:
    return (
        a[0] == b[0]
        and all(p.shape == q.shape and np.array_equal(p, q) for p, q in zip(a[1], b[1], strict=True))
        and a[2].shape == b[2].shape
        and np.array_equal(a[2], b[2])
    )


if (
    __name__ == "__main__"
):  # the child: python -m tests.storage.editkill target kind op die_after chunk [storage options as json]
    import json
    import sys

    target, kind, op, die_after = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    chunk = float(sys.argv[5])
    so = json.loads(sys.argv[6]) if len(sys.argv) > 6 else None
    hook(die_after)
    run(target, kind, op, so, chunk)
    print("done", flush=True)
