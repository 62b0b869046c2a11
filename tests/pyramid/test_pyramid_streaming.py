"""Pyramids of linked geometry and meshes stream in object batches: the store written does not
depend on the batch size, and the cross-level parents are held as compact runs."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest

import zarr_vectors as zv
from zarr_vectors.format.grid import Grid
from zarr_vectors.pyramid import Sparsity, linked, parents
from zarr_vectors.pyramid.parents import ParentRuns


def _files(root) -> dict[str, bytes]:
    out = {}
    for d, _, names in os.walk(root):
        for n in names:
            p = os.path.join(d, n)
            with open(p, "rb") as f:
                out[os.path.relpath(p, root)] = f.read()
    root_doc = json.loads(out["zarr.json"])
    root_doc["attributes"].pop("zarr_vectors_generation")  # a new random value per write
    out["zarr.json"] = json.dumps(root_doc).encode()
    return out


def _lines(tmp_path, rng):
    walks = [np.cumsum(rng.normal(0, 6, (int(rng.integers(20, 80)), 3)), axis=0) for _ in range(120)]
    lines = [np.clip(w + rng.uniform(0, 400, 3), 0, 400).astype(np.float32) for w in walks]
    zv.write_lines(
        tmp_path / "src.zarr",
        lines,
        chunk_shape=50,
        bounds=([0] * 3, [400] * 3),
        attributes={"radius": [rng.random(len(x)).astype(np.float32) for x in lines]},
    )
    return [2, 2]


def _meshes(tmp_path, rng):
    trimesh = pytest.importorskip("trimesh")
    pytest.importorskip("fast_simplification")
    s = trimesh.creation.icosphere(subdivisions=3)
    meshes = [
        ((s.vertices * rng.uniform(20, 50) + rng.uniform(60, 340, 3)).astype(np.float32), s.faces)
        for _ in range(8)
    ]
    zv.write_meshes(tmp_path / "src.zarr", meshes, chunk_shape=60, bounds=([0] * 3, [400] * 3))
    return [2]


EXPLICIT_HALF = {"cross_level": "explicit", "object_sparsity": Sparsity(0.5, by="size")}


@pytest.mark.slow
@pytest.mark.parametrize("make", [_lines, _meshes])
@pytest.mark.parametrize("options", [{}, EXPLICIT_HALF])
def test_store_does_not_depend_on_the_batch_size(tmp_path, rng, monkeypatch, make, options):
    factors = make(tmp_path, rng)
    stores = {}
    for name, batch, emit in (("one", 10**9, 10**9), ("many", 200, 150)):
        monkeypatch.setattr(linked, "BATCH_VERTICES", batch)
        monkeypatch.setattr(parents, "EMIT_VERTICES", emit)
        path = tmp_path / f"{name}.zarr"
        shutil.copytree(tmp_path / "src.zarr", path)
        zv.open(path, mode="r+").build_pyramid(factors, **options)
        stores[name] = _files(path)
    assert len(linked.object_batches(zv.open(tmp_path / "many.zarr").level(0), spatial=True)) > 3
    assert stores["one"].keys() == stores["many"].keys()
    assert [k for k in stores["one"] if stores["one"][k] != stores["many"][k]] == []
    assert any("links/+1" in k for k in stores["one"])


def test_object_batches_cover_every_object_once(tmp_path, rng, monkeypatch):
    _lines(tmp_path, rng)
    monkeypatch.setattr(linked, "BATCH_VERTICES", 500)
    level = zv.open(tmp_path / "src.zarr").level(0)
    for spatial in (False, True):
        batches = linked.object_batches(level, spatial=spatial)
        assert len(batches) > 1 and all(np.all(np.diff(b) > 0) for b in batches)
        assert np.array_equal(np.sort(np.concatenate(batches)), np.arange(120))


class _Recorder:
    """Collects what ParentRuns.emit writes, as (fine chunk, fine row, coarse cell, coarse row)."""

    down = None

    def __init__(self) -> None:
        self.up: list[tuple] = []

    def add_up(self, ft, fi, fl, ct, ci, cl) -> None:
        assert len(np.unique(fi)) == len(ft)  # the table lists only chunks with records
        self.up += [(tuple(ft[a]), int(b), int(c), int(d)) for a, b, c, d in zip(fi, fl, ci, cl)]


@pytest.mark.parametrize("per_vertex", [False, True])
def test_parent_runs_are_compact_and_emit_every_record_in_order(rng, monkeypatch, per_vertex):
    from types import SimpleNamespace

    monkeypatch.setattr(parents, "EMIT_VERTICES", 7)
    grid = Grid(
        chunk_shape=np.ones(2), bin_shape=np.ones(2), origin=np.array([-1, 0]), shape=np.array([4, 3])
    )
    runs = ParentRuns(grid, per_vertex=per_vertex)
    expected = []
    count = 0
    for _ in range(3):  # batches: row ranges of random chunks, a parent per 10 rows
        n = 40
        chunks = np.repeat(rng.integers([-1, 0], [3, 3], (8, 2)), 5, axis=0)
        local = count + np.arange(n)  # every (chunk, row) once; five rows a chunk in a row
        parent = (count + np.arange(n)) // 10
        runs.add(chunks, local, parent)
        expected += [(tuple(c), int(lr), int(p)) for c, lr, p in zip(chunks, local, parent)]
        count += n
    n_runs, n_parents = sum(len(x) for x in runs._lin), sum(len(x) for x in runs._parent)
    assert n_runs <= 24 + (0 if per_vertex else 12)  # breaks: chunk changes (+ parent changes)
    assert n_parents == (120 if per_vertex else n_runs)
    final = np.where(np.arange(count) % 3 == 0, -1, np.arange(count))  # some coarse vertices dropped
    out = SimpleNamespace(
        chunks=np.zeros((1, 2), np.int64), cell=np.zeros(count, np.int64), local=np.arange(count)
    )  # one coarse chunk; coarse row = vertex number
    rec = _Recorder()
    runs.emit(rec, out, final)
    want = sorted((c, lr, 0, int(final[p])) for c, lr, p in expected if final[p] >= 0)
    assert rec.up == want
