"""Two writers on one store: each call lands whole or raises StoreConflictError, never a lost
update or an unreadable store (races in processes: ``benchmarks/race_writers.py``)."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import zarr_vectors as zv
from zarr_vectors.errors import InputError, StoreConflictError
from zarr_vectors.storage.commit import find_leftovers
from zarr_vectors.storage.writelock import lock_path

ROOT = Path(__file__).resolve().parents[2]


def _race_module(monkeypatch: pytest.MonkeyPatch) -> Any:
    # the spawned workers import the module by name, from the parent's sys.path
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    return importlib.import_module("race_writers")


def _store(path: Path, n: int = 300, value: int = 0) -> None:
    pos = np.random.default_rng(n + value).uniform(0, 100, (n, 3))
    zv.write_points(
        path, pos, attributes={"v": np.full(n, value, np.int32)}, chunk_shape=50, bounds=([0] * 3, [100] * 3)
    )


def _add(ds: zv.Dataset, value: int, n: int = 20) -> None:
    pos = np.random.default_rng(value).uniform(0, 100, (n, 3))
    ds.append(pos, attributes={"v": np.full(n, value, np.int32)})


def test_a_stale_dataset_cannot_append_over_another_writers_append(tmp_path: Path) -> None:
    path = tmp_path / "cells.zarr"
    _store(path)
    first, second = zv.open(path, "r+"), zv.open(path, "r+")
    _add(first, 1)
    with pytest.raises(StoreConflictError, match=r"cells\.zarr was changed by another writer"):
        _add(second, 2)
    with pytest.raises(StoreConflictError, match="changed by another writer"):
        second.build_pyramid([2])
    values = zv.open(path).read(attributes=["v"]).attributes["v"]
    assert np.bincount(values).tolist() == [300, 20]  # the first append whole, nothing of the second
    _add(first, 3)  # the dataset that wrote last reads and writes on
    assert zv.open(path).vertex_count() == 340
    assert not find_leftovers(path) and not lock_path(path).exists()


def test_an_overwrite_between_open_and_append_is_a_conflict(tmp_path: Path) -> None:
    path = tmp_path / "cells.zarr"
    _store(path)
    ds = zv.open(path, "r+")
    zv.write_points(
        path, [[1.0, 2.0, 3.0]], attributes={"v": np.array([9], np.int32)}, chunk_shape=50, overwrite=True
    )
    with pytest.raises(StoreConflictError):
        _add(ds, 1)
    assert zv.open(path).read(attributes=["v"]).attributes["v"].tolist() == [9]


_HOLD = r"""
import sys, time
from pathlib import Path
from zarr_vectors.storage.writelock import writer_lock
with writer_lock(Path(sys.argv[1])):
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
"""


def _holder(path: Path, seconds: float) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(path), str(seconds)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


@pytest.mark.slow
def test_a_held_lock_is_a_conflict_or_a_wait(tmp_path: Path) -> None:
    path = tmp_path / "cells.zarr"
    _store(path)
    holder = _holder(path.resolve(), 60)
    try:
        ds = zv.open(path, "r+")
        with pytest.raises(StoreConflictError, match=r"another writer is writing to .*cells\.zarr.*wait=0"):
            _add(ds, 1)
        with pytest.raises(StoreConflictError, match="wait=0.3"):
            zv.open(path, "r+", wait=0.3).build_pyramid([2])
        with pytest.raises(StoreConflictError):
            zv.write_points(path, [[1.0, 1, 1]], chunk_shape=50, overwrite=True)
        with pytest.raises(StoreConflictError):
            zv.reshard(path, path, shards=2, overwrite=True, progress=False)
    finally:
        holder.kill()
        holder.wait()
    assert zv.open(path).vertex_count() == 300  # nothing was applied
    # A lock left by a killed writer is taken over; a writer that waits gets the lock once it is let go.
    _add(zv.open(path, "r+"), 1)
    holder = _holder(path.resolve(), 1.0)
    try:
        start = time.monotonic()
        _add(zv.open(path, "r+", wait=30), 2)
        assert time.monotonic() - start > 0.3
    finally:
        holder.wait()
    assert np.bincount(zv.open(path).read(attributes=["v"]).attributes["v"]).tolist() == [300, 20, 20]


def test_wait_must_be_seconds(tmp_path: Path) -> None:
    path = tmp_path / "cells.zarr"
    _store(path)
    with pytest.raises(InputError, match="wait must be a number of seconds >= 0, got -1"):
        zv.open(path, "r+", wait=-1)
    with pytest.raises(InputError, match="zv_wait must be a number of seconds >= 0, got 'x'"):
        zv.write_points(path, [[1.0, 1, 1]], chunk_shape=50, overwrite=True, storage_options={"zv_wait": "x"})


def test_memory_stores_check_the_generation(tmp_path: Path) -> None:
    _store_mem = "memory://race-generation"
    zv.write_points(_store_mem, np.zeros((3, 2)), chunk_shape=4, bounds=([0, 0], [8, 8]), overwrite=True)
    first, second = zv.open(_store_mem, "r+"), zv.open(_store_mem, "r+")
    first.append([[1.0, 1.0]])
    with pytest.raises(StoreConflictError, match="memory://race-generation"):
        second.append([[2.0, 2.0]])
    assert zv.open(_store_mem).vertex_count() == 4


@pytest.mark.slow
def test_every_pair_of_writers_races_safely(monkeypatch: pytest.MonkeyPatch) -> None:
    race = _race_module(monkeypatch)
    results = race.run(race.PAIRS, trials=4)
    print(race.table(results))
    for ops, tally in results.items():
        assert tally.trials == 4
        bad = {k: v for k, v in tally.outcomes.items() if k in ("lost update", "unreadable", "other")}
        assert not bad, (ops, bad, tally.notes)
        assert tally.outcomes["landed both"] + tally.outcomes["one conflict"] == 4, (ops, tally.outcomes)
