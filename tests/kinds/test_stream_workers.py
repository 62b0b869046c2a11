"""``workers=`` of the linked kinds' writers: cells made in threads, a store that does not depend on it.

Every kind (lines, skeletons, graphs, raw and Draco meshes), unsharded and sharded, is written
with one, two and three workers under a 1 MiB memory limit, in groups of a few hundred rows
(so each sweep makes many groups on small data), and the stores are compared file by file,
byte for byte.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import zarr_vectors as zv
from tests._builders import icosphere
from tests._streams import stored_files
from zarr_vectors.engine.write.cellpool import can_fork
from zarr_vectors.engine.write.linkedstream import LinkedStream

SPAN = 300.0


def _walks(rng: np.random.Generator, count: int, size: int) -> np.ndarray:
    """``count`` random walks of ``size`` vertices inside [0, SPAN): (count, size, 3) float32."""
    start = rng.uniform(40, SPAN - 40, (count, 1, 3))
    return np.clip(start + np.cumsum(rng.normal(0, 5, (count, size, 3)), axis=1), 0, SPAN - 1).astype(
        np.float32
    )


def _skeletons(rng: np.random.Generator, w: Any) -> None:
    for _ in range(2):
        trees, size = 8, 150
        par = np.tile(np.arange(-1, size - 1), trees)
        at = np.arange(20, size, 20)
        par.reshape(trees, size)[:, at] = rng.integers(0, at, (trees, len(at)))
        par = np.where(par >= 0, par + np.repeat(np.arange(trees) * size, size), -1)
        pos = _walks(rng, trees, size).reshape(-1, 3)
        w.append(pos, par, attributes={"radius": rng.random(len(pos)).astype(np.float32)})


def _lines(rng: np.random.Generator, w: Any) -> None:
    for _ in range(2):
        walks = list(_walks(rng, 8, 150))
        w.append(walks, attributes={"fa": [rng.random(150).astype(np.float32) for _ in walks]})


def _graphs(rng: np.random.Generator, w: Any) -> None:
    for _ in range(2):
        pos = _walks(rng, 8, 150).reshape(-1, 3)
        n = len(pos)
        pairs = rng.integers(0, n, (n // 40, 2))
        edges = np.concatenate(
            [np.stack([np.arange(n - 1), np.arange(1, n)], 1), pairs[pairs[:, 0] != pairs[:, 1]]]
        )
        w.append(
            pos,
            edges,
            attributes={"r": rng.random(n).astype(np.float32)},
            object_ids=rng.integers(0, 5, n),
            edge_attributes={"weight": rng.random(len(edges))},
        )


def _meshes(rng: np.random.Generator, w: Any) -> None:
    v, f = icosphere(2, scale=40, offset=0)  # 162 vertices, 320 faces
    for b in range(2):
        meshes = [
            ((v * rng.uniform(0.5, 1.2) + rng.uniform(60, 240, 3)).astype(np.float32), f) for _ in range(7)
        ]
        w.append(meshes, object_ids=np.arange(7) * 7 + 1000 * b)


KINDS: dict[str, tuple[str, Any, dict[str, Any]]] = {
    "lines": ("streamlines", _lines, {}),
    "skeletons": ("skeletons", _skeletons, {}),
    "graphs": ("graphs", _graphs, {"directed": True}),
    "meshes-raw": ("meshes", _meshes, {}),
    "meshes-draco": ("meshes", _meshes, {"encoding": "draco"}),
}
LAYOUTS = {
    "unsharded": dict(shards=None, compression="zstd"),
    "sharded": dict(shards=(2, 2, 2), compression="blosc"),
}


def _write(target: Path, kind: str, layout: str, workers: int) -> None:
    name, fill, extra = KINDS[kind]
    rng = np.random.default_rng(7)
    grid = dict(chunk_shape=45, bounds=([0] * 3, [SPAN] * 3))
    with zv.create(
        target, name, memory_limit=1 << 20, workers=workers, **grid, **LAYOUTS[layout], **extra
    ) as w:
        fill(rng, w)


#: Two cases run in every suite; the rest of the matrix is marked slow.
QUICK = {("meshes-raw", "sharded"), ("skeletons", "unsharded")}
MATRIX = [
    pytest.param(k, lay, marks=() if (k, lay) in QUICK else pytest.mark.slow, id=f"{k}-{lay}")
    for k in KINDS
    for lay in LAYOUTS
]


@pytest.mark.parametrize(("kind", "layout"), MATRIX)
def test_a_store_does_not_depend_on_the_number_of_workers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str, layout: str
) -> None:
    log = tmp_path / "made.txt"  # (workers, process, thread) of every group made, from any process
    make = LinkedStream._make_group

    def spy(self: LinkedStream, *args: Any) -> Any:
        with log.open("a") as f:
            f.write(f"{self.workers} {os.getpid()} {threading.current_thread().name}\n")
        return make(self, *args)

    monkeypatch.setattr(LinkedStream, "_make_group", spy)
    monkeypatch.setattr(LinkedStream, "_group_rows", lambda self, total: 300)
    for workers in (1, 2, 3):
        _write(tmp_path / f"w{workers}", kind, layout, workers)
    one = stored_files(tmp_path / "w1")
    assert len(one) > 12
    for workers in (2, 3):
        got = stored_files(tmp_path / f"w{workers}")
        assert sorted(got) == sorted(one), workers
        differ = [k for k in one if one[k] != got[k]]
        assert not differ, (workers, differ[:5])
    made = [line.split(" ", 2) for line in log.read_text().splitlines()]
    by = {w: [(int(p), t) for k, p, t in made if int(k) == w] for w in (1, 2, 3)}
    assert len(by[1]) >= 4 and len(by[2]) >= 4, "each sweep should make several groups"
    assert all(p == os.getpid() and t == "MainThread" for p, t in by[1])
    if can_fork():  # groups made in worker processes
        assert all(p != os.getpid() for p, _ in by[2] + by[3])
    else:
        assert all(t.startswith("zv-cells") for _, t in by[2] + by[3])


def test_one_shot_writers_take_workers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(LinkedStream, "_group_rows", lambda self, total: 300)
    rng = np.random.default_rng(3)
    v, f = icosphere(2, scale=40, offset=0)
    meshes = [((v + rng.uniform(60, 240, 3)).astype(np.float32), f) for _ in range(6)]
    for workers in (1, 2):
        zv.write_meshes(tmp_path / f"m{workers}", meshes, chunk_shape=45, workers=workers, compression="zstd")
        walks = _walks(np.random.default_rng(4), 10, 200)
        par = np.tile(np.arange(-1, 199), 10)
        par = np.where(par >= 0, par + np.repeat(np.arange(10) * 200, 200), -1)
        zv.write_skeleton(
            tmp_path / f"s{workers}", walks.reshape(-1, 3), par, chunk_shape=45, workers=workers
        )
    for name in ("m", "s"):
        assert stored_files(tmp_path / f"{name}1") == stored_files(tmp_path / f"{name}2")
    got = zv.open(tmp_path / "m2").objects([3])
    assert np.array_equal(np.sort(got.positions, axis=0), np.sort(meshes[3][0], axis=0))
    with pytest.raises(zv.InputError, match="workers must be a positive integer"):
        zv.write_meshes(tmp_path / "bad", meshes, chunk_shape=45, workers=0)
