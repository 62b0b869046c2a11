"""``ingest_mesh_files``: parallel, checkpointed mesh folder ingest equals ``ingest_meshes``'s
one-shot write on the same grid; resumed after an interruption equals uninterrupted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import zarr_vectors as zv
from zarr_vectors.io import mesh_folder
from zarr_vectors.io.meshes import ingest_meshes

IDS = [2, 11, 2**53 + 1, 2**64 - 1]
GRID = {"chunk_shape": 50.0, "bounds": ([0.0, 0.0, 0.0], [200.0, 200.0, 200.0])}


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    import trimesh

    d = tmp_path_factory.mktemp("meshes")
    for k, sid in enumerate(IDS):
        m = trimesh.creation.icosphere(subdivisions=1)
        m.vertices = m.vertices * 10 + [30 + 40 * k, 60, 90]
        m.export(d / f"{sid}.ply")
    return sorted(d.glob("*.ply"))


def _same(a: zv.Dataset, b: zv.Dataset) -> None:
    assert a.object_ids().tolist() == b.object_ids().tolist() == IDS
    assert a.object_attributes("name").tolist() == b.object_attributes("name").tolist()
    for sid in IDS:
        x, y = a.objects([sid]), b.objects([sid])
        assert np.array_equal(x.positions, y.positions) and np.array_equal(x.faces, y.faces)


def test_parallel_checkpoints_equal_one_shot(folder: list[Path], tmp_path: Path) -> None:
    one = ingest_meshes(tmp_path / "one.zarr", folder, progress=False, **GRID)
    two = mesh_folder.ingest_mesh_files(tmp_path / "two.zarr", folder, workers=2, checkpoint=3, **GRID)
    _same(one, two)


def test_interrupted_then_resumed(
    folder: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = mesh_folder.ingest_mesh_files(tmp_path / "whole.zarr", folder, checkpoint=2, **GRID)
    dst = tmp_path / "part.zarr"
    real, calls = mesh_folder._append, []

    def failing(target: object, items: list) -> None:  # type: ignore[type-arg]
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        real(target, items)

    monkeypatch.setattr(mesh_folder, "_append", failing)
    with pytest.raises(KeyboardInterrupt):
        mesh_folder.ingest_mesh_files(dst, folder, checkpoint=2, **GRID)
    assert zv.open(dst).object_ids().tolist() == IDS[:2]
    monkeypatch.setattr(mesh_folder, "_append", real)
    _same(whole, mesh_folder.ingest_mesh_files(dst, folder, checkpoint=2, resume=True, **GRID))


def test_cli_mesh_workers_and_resume(folder: list[Path], tmp_path: Path) -> None:
    out = tmp_path / "cli.zarr"
    cmd = [sys.executable, "-m", "zarr_vectors", "ingest", "mesh", str(folder[0].parent), "-o", str(out)]
    cmd += ["--chunk-size", "50", "--bounds", "0,0,0,200,200,200", "--no-progress", "--checkpoint", "3"]
    proc = subprocess.run([*cmd, "--workers", "2"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    _same(ingest_meshes(tmp_path / "one.zarr", folder, progress=False, **GRID), zv.open(out))
    assert proc.stdout.strip() == f"wrote {len(IDS)} meshes, {zv.open(out).vertex_count()} vertices to {out}"
    again = subprocess.run([*cmd, "--resume"], capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
    draco = subprocess.run([*cmd, "--resume", "--draco"], capture_output=True, text=True)
    assert draco.returncode == 2 and "--draco cannot go with --workers" in draco.stderr
