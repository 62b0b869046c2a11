"""The reference 0.9.2 reads edited skeleton and mesh stores as it reads one-shot writes of
the same final objects."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import zarr_vectors as zv

pytestmark = pytest.mark.interop

B = ([0.0, 0.0, 0.0], [80.0, 80.0, 80.0])


def _tree(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    par = np.r_[-1, [int(rng.integers(max(0, i - 4), i)) for i in range(1, n)]]
    pos = np.zeros((n, 3), np.float32)
    pos[0] = rng.uniform(20, 60, 3)
    for i in range(1, n):
        pos[i] = np.clip(pos[par[i]] + rng.normal(0, 12, 3), 0, 80)
    return pos, par


def _skeletons(target: Path, objs: dict[int, Any]) -> None:
    ids = sorted(objs)
    offs = np.cumsum([0] + [len(objs[i][0]) for i in ids])
    pos = np.concatenate([objs[i][0] for i in ids])
    par = np.concatenate([np.where(objs[i][1] >= 0, objs[i][1] + o, -1) for i, o in zip(ids, offs)])
    oid = np.concatenate([np.full(len(objs[i][0]), i) for i in ids])
    zv.write_skeleton(target, pos, par, object_ids=oid, chunk_shape=20, bounds=B, overwrite=True)


def _rows(got: dict[str, np.ndarray]) -> tuple[list[Any], list[Any]]:
    pos = got["positions"]
    pairs = sorted(tuple(sorted((tuple(pos[a]), tuple(pos[b])))) for a, b in got["edges"])
    return sorted(map(tuple, pos.tolist())), pairs


def test_reference_reads_an_edited_skeleton_store(tmp_path: Path, rng: Any, reference: Any) -> None:
    objs = {i: _tree(rng, 40) for i in (1, 2, 3)}
    edited = tmp_path / "edited.zarr"
    _skeletons(edited, objs)
    ds = zv.open(edited, mode="r+")
    ds.delete([2])
    del objs[2]
    objs[5] = _tree(rng, 30)
    ds.append(objs[5][0], objs[5][1], object_ids=np.full(30, 5))
    objs[1] = _tree(rng, 25)
    ds.replace([1], objs[1][0], objs[1][1])
    once = tmp_path / "once.zarr"
    _skeletons(once, objs)
    assert reference.info(edited)["valid"]
    assert _rows(reference.read_graph(tmp_path, edited)) == _rows(reference.read_graph(tmp_path, once))


def test_reference_reads_an_edited_mesh_store(tmp_path: Path, rng: Any, reference: Any) -> None:
    def mesh(n: int) -> tuple[np.ndarray, np.ndarray]:
        v = np.clip(np.cumsum(rng.normal(0, 9, (n, 3)), axis=0) + 40, 0, 80).astype(np.float32)
        return v, np.stack([np.arange(n - 2), np.arange(1, n - 1), np.arange(2, n)], axis=1)

    objs = {i: mesh(12) for i in (1, 2, 3)}
    common = {"chunk_shape": 20, "bounds": B, "overwrite": True}
    edited = tmp_path / "edited.zarr"
    zv.write_meshes(edited, [objs[i] for i in sorted(objs)], object_ids=sorted(objs), **common)
    ds = zv.open(edited, mode="r+")
    ds.delete([3])
    del objs[3]
    objs[4] = mesh(9)
    ds.append([objs[4]], object_ids=[4])
    once = tmp_path / "once.zarr"
    zv.write_meshes(once, [objs[i] for i in sorted(objs)], object_ids=sorted(objs), **common)
    assert reference.info(edited)["valid"]
    a, b = reference.read_mesh(tmp_path, edited), reference.read_mesh(tmp_path, once)
    assert sorted(a) == sorted(b)
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)
