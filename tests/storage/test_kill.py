"""Writers killed with SIGKILL, at chosen points and at random times, on local disk.

After every kill the store at the target is the old one exactly or the new one exactly
(a pyramid: the old levels or the new ones, and ``validate`` finds no problem); what
the killed writer left beside the store is reported by ``validate`` and removed by the
next write.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import zarr_vectors as zv
from zarr_vectors.storage.commit import find_leftovers

pytestmark = [pytest.mark.slow, pytest.mark.kill]  # writers killed in subprocesses

_SETUP = r"""
import os, signal, sys
import numpy as np
import zarr_vectors as zv
from zarr_vectors.storage import commit as _commit
from zarr_vectors.storage import local as _local


def die(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)


def version(seed):
    rng = np.random.default_rng(seed)
    n = 600 + 50 * (seed % 3)
    return {"positions": rng.uniform(0, 100, (n, 3)).astype(np.float32),
            "attributes": {"v": np.full(n, seed, np.int32)}}


def kill_at(point):
    if point == "staging":  # the stage is half written
        real, calls = _local.LocalBackend.set_many, [0]

        def set_many(self, items):
            calls[0] += 1
            if calls[0] == 2:
                die()
            real(self, items)

        _local.LocalBackend.set_many = set_many
    elif point == "linking":  # a pyramid's stage gets level 0 by hard links
        real_link, calls = _commit._link, [0]

        def link(src, dst):
            calls[0] += 1
            if calls[0] == 5:
                die()
            real_link(src, dst)

        _commit._link = link
    elif point == "before-swap":
        _commit.swap_in = die
    elif point == "after-exchange":
        real_exchange = _commit.exchange

        def exchange(a, b):
            assert real_exchange(a, b)
            die()

        _commit.exchange = exchange
    elif point == "removing-old":  # the old store, swapped out, is half deleted
        def remove(path):
            files = sorted(os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs)
            for f in files[: len(files) // 2]:
                os.unlink(f)
            die()

        _commit.remove_tree = remove
    elif point == "between-renames":  # a system without an atomic exchange
        _commit.exchange = lambda a, b: False
        real_replace = os.replace

        def replace(a, b):
            real_replace(a, b)
            die()

        _commit.os.replace = replace
"""

WRITE = (
    _SETUP
    + r"""
target, point, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
kill_at(point)
print("ready", flush=True)
while True:
    zv.write_points(target, chunk_shape=25, overwrite=True, **version(seed))
    if point != "loop":
        break
    seed += 1
"""
)

BUILD = (
    _SETUP
    + r"""
target, point = sys.argv[1], sys.argv[2]
kill_at(point)
print("ready", flush=True)
while True:
    zv.open(target, mode="r+").build_pyramid([4, 2], overwrite=True)
    zv.open(target, mode="r+").build_pyramid([2], overwrite=True)
    if point != "loop":
        break
"""
)


def version(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    n = 600 + 50 * (seed % 3)
    return np.column_stack([rng.uniform(0, 100, (n, 3)).astype(np.float32), np.full(n, seed)]).astype(
        np.float64
    )


def table(res: zv.Result) -> np.ndarray:
    t = np.column_stack([res.positions, res.attributes["v"]]).astype(np.float64)
    return t[np.lexsort(t.T[::-1])]


def which_version(path: Path, seeds: range) -> int | None:
    """The seed whose data the store holds exactly (None: no store); fails on anything else."""
    try:
        ds = zv.open(path)
    except FileNotFoundError:
        return None
    got = table(ds.read())
    seed = int(got[0, 3])
    want = version(seed)
    want = want[np.lexsort(want.T[::-1])]
    assert seed in seeds and got.shape == want.shape and np.array_equal(got, want), "a partial or mixed store"
    return seed


def run(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", script, *map(str, args)], capture_output=True, text=True, timeout=180
    )


def write_version(path: Path, seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 600 + 50 * (seed % 3)
    pos = rng.uniform(0, 100, (n, 3)).astype(np.float32)
    zv.write_points(path, pos, chunk_shape=25, attributes={"v": np.full(n, seed, np.int32)}, overwrite=True)


@pytest.mark.parametrize(
    ("point", "expect"),
    [
        ("staging", "old"),
        ("before-swap", "old"),
        ("after-exchange", "new"),
        ("removing-old", "new"),
        ("between-renames", "none"),
    ],
)
def test_write_killed_at_each_step(tmp_path: Path, point: str, expect: str) -> None:
    store = tmp_path / "s.zarr"
    write_version(store, 1)
    proc = run(WRITE, store, point, 2)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    got = which_version(store, range(1, 3))
    assert got == {"old": 1, "new": 2, "none": None}[expect]
    left = find_leftovers(store)
    assert left, "the killed writer left its staging folder (or the old store) beside the target"
    if got is not None:
        report = zv.validate(store)
        assert report.ok and {w.path for w in report.warnings if w.rule == "structure.leftovers"} == {
            f"../{p.name}" for p in left
        }
    write_version(store, 3)
    assert which_version(store, range(3, 4)) == 3
    assert find_leftovers(store) == [] and os.listdir(tmp_path) == ["s.zarr"]


def test_writes_killed_at_random_times(tmp_path: Path) -> None:
    store = tmp_path / "s.zarr"
    write_version(store, 0)
    rng = np.random.default_rng(2024)
    seen = []
    for _ in range(4):
        proc = subprocess.Popen(
            [sys.executable, "-c", WRITE, str(store), "loop", "100"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        time.sleep(float(rng.uniform(0.05, 1.5)))
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        seen.append(which_version(store, range(0, 200)))
    assert None not in seen
    write_version(store, 7)
    assert find_leftovers(store) == [] and os.listdir(tmp_path) == ["s.zarr"]


def test_pyramid_build_killed_at_each_step(tmp_path: Path) -> None:
    store = tmp_path / "p.zarr"
    write_version(store, 4)
    zv.open(store, mode="r+").build_pyramid([2])
    old = {lv: table(zv.open(store).read(level=lv)) for lv in (0, 1)}
    new_store = tmp_path / "new.zarr"
    write_version(new_store, 4)
    zv.open(new_store, mode="r+").build_pyramid([2])
    zv.open(new_store, mode="r+").build_pyramid([4, 2], overwrite=True)
    new = {lv: table(zv.open(new_store).read(level=lv)) for lv in (0, 1, 2)}
    assert not np.array_equal(new[1], old[1])
    outcomes = {}
    for point in ("staging", "linking", "before-swap", "after-exchange", "removing-old"):
        proc = run(BUILD, store, point)
        assert proc.returncode == -signal.SIGKILL, proc.stderr
        report = zv.validate(store)
        assert report.ok, f"killed at {point}: {report}"
        assert any(w.rule == "structure.leftovers" for w in report.warnings)
        ds = zv.open(store)
        got = {lv: table(ds.read(level=lv)) for lv in ds.levels}
        expected = old if ds.levels == [0, 1] else new
        assert sorted(got) == sorted(expected)
        assert all(np.array_equal(got[lv], expected[lv]) for lv in got), f"killed at {point}: mixed levels"
        outcomes[point] = "old" if expected is old else "new"
        if outcomes[point] == "new":  # back to the old levels for the next kill
            zv.open(store, mode="r+").build_pyramid([2], overwrite=True)
            assert np.array_equal(table(zv.open(store).read(level=1)), old[1])
    assert outcomes == {
        "staging": "old",
        "linking": "old",
        "before-swap": "old",
        "after-exchange": "new",
        "removing-old": "new",
    }
    rng = np.random.default_rng(7)
    for _ in range(4):  # and at random times, in a loop of rebuilds to [4, 2] and back to [2]
        proc = subprocess.Popen(
            [sys.executable, "-c", BUILD, str(store), "loop"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        time.sleep(float(rng.uniform(0.05, 2.0)))
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        report = zv.validate(store)
        assert report.ok, report
        ds = zv.open(store)
        expected = old if ds.levels == [0, 1] else new
        assert all(np.array_equal(table(ds.read(level=lv)), expected[lv]) for lv in ds.levels)
    zv.open(store, mode="r+").build_pyramid([2], overwrite=True)
    assert find_leftovers(store) == []  # the builds after the kills removed what the kills left
    root = json.loads((store / "zarr.json").read_text())["attributes"]
    assert len(root["zarr_vectors_generation"]) == 32
