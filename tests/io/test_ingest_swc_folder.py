"""``ingest_swc_files``: parallel, checkpointed SWC folder ingest equals ``ingest_swc``'s
one-shot write on the same grid; an interrupted run resumed equals an uninterrupted one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import zarr_vectors as zv
from zarr_vectors.errors import InputError
from zarr_vectors.io import swc_folder
from zarr_vectors.io.swc import ingest_swc, write_swc

IDS = [5, 40, 2**53 + 1, 2**63 + 7, 2**64 - 2, 2**64 - 1]
GRID = {"chunk_shape": 50.0, "bounds": ([0.0, 0.0, 0.0], [200.0, 200.0, 200.0])}


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    d = tmp_path_factory.mktemp("swcs")
    rng = np.random.default_rng(3)
    for k, sid in enumerate(IDS):
        m = 4 + k
        pos = rng.uniform(10, 190, (m, 3))
        write_swc(d / f"{sid}.swc", pos, np.arange(-1, m - 1), radius=rng.uniform(0.5, 2, m))
    return sorted(d.glob("*.swc"))


def _same(a: zv.Dataset, b: zv.Dataset) -> None:
    assert a.object_ids().tolist() == b.object_ids().tolist() == IDS
    for name in ("n_samples", "name"):
        assert a.object_attributes(name).tolist() == b.object_attributes(name).tolist()
    for sid in IDS:
        x, y = a.objects([sid], attributes=True), b.objects([sid], attributes=True)
        assert np.array_equal(x.positions, y.positions) and np.array_equal(x.parents, y.parents)
        assert np.array_equal(x.attributes["radius"], y.attributes["radius"])


def test_parallel_checkpoints_equal_one_shot(folder: list[Path], tmp_path: Path) -> None:
    one = ingest_swc(tmp_path / "one.zarr", folder, progress=False, **GRID)
    two = swc_folder.ingest_swc_files(tmp_path / "two.zarr", folder, workers=2, checkpoint=4, **GRID)
    _same(one, two)


def test_interrupted_then_resumed(
    folder: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = swc_folder.ingest_swc_files(tmp_path / "whole.zarr", folder, checkpoint=2, **GRID)
    dst = tmp_path / "part.zarr"
    real, calls = swc_folder._append, []

    def failing(target: object, items: list) -> None:  # type: ignore[type-arg]
        calls.append(1)
        if isinstance(target, swc_folder._WithRows):  # the second checkpoint's append
            raise KeyboardInterrupt
        real(target, items)

    monkeypatch.setattr(swc_folder, "_append", failing)
    with pytest.raises(KeyboardInterrupt):
        swc_folder.ingest_swc_files(dst, folder, checkpoint=2, **GRID)
    assert zv.open(dst).object_ids().tolist() == IDS[:2]
    monkeypatch.setattr(swc_folder, "_append", real)
    with pytest.raises(
        InputError, match="holds 2 of the 3 ids of checkpoint 0; resume with the checkpoint size"
    ):
        swc_folder.ingest_swc_files(dst, folder, checkpoint=3, resume=True, **GRID)
    _same(whole, swc_folder.ingest_swc_files(dst, folder, checkpoint=2, resume=True, **GRID))


def test_refusals(folder: list[Path], tmp_path: Path) -> None:
    with pytest.raises(InputError, match="workers must be a positive integer, got 0"):
        swc_folder.ingest_swc_files(tmp_path / "a.zarr", folder, workers=0, **GRID)
    with pytest.raises(InputError, match="needs bounds= and a numeric chunk_shape="):
        swc_folder.ingest_swc_files(tmp_path / "b.zarr", folder, checkpoint=2, chunk_shape=50.0)


def test_cli_workers_checkpoints_and_resume(folder: list[Path], tmp_path: Path) -> None:
    """As a process: two workers, checkpoints of 4 files; --resume of the complete store
    reads nothing again and leaves it as it was; without --resume the output is refused."""
    out = tmp_path / "cli.zarr"
    cmd = [sys.executable, "-m", "zarr_vectors", "ingest", "swc", str(folder[0].parent), "-o", str(out)]
    cmd += ["--chunk-size", "50", "--bounds", "0,0,0,200,200,200", "--no-progress", "--checkpoint", "4"]
    proc = subprocess.run([*cmd, "--workers", "2"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    ds = zv.open(out)
    _same(ingest_swc(tmp_path / "one.zarr", folder, progress=False, **GRID), ds)
    assert proc.stdout.strip() == f"wrote {len(IDS)} skeletons, {ds.vertex_count()} samples to {out}"
    before = sorted((p, p.stat().st_mtime_ns) for p in out.rglob("*"))
    again = subprocess.run([*cmd, "--resume"], capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
    assert sorted((p, p.stat().st_mtime_ns) for p in out.rglob("*")) == before
    refused = subprocess.run(cmd, capture_output=True, text=True)
    assert refused.returncode == 2 and "already exists; add --overwrite" in refused.stderr
