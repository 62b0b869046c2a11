"""Streaming writes and appends killed with SIGKILL at random times: nothing is lost.

A child process streams a new version of a point cloud over an existing store with
``zarr_vectors.create`` (or appends a batch with ``Dataset.append``) and is killed after a
seeded random delay, before and during ``close()``. The store at the target then answers
every box query exactly like the store before the write or exactly like the store after
it (numpy brute force over the known rows); an in-place target (S3) may instead refuse to
open with :class:`~zarr_vectors.errors.IncompleteStoreError`. Whatever the killed writer
left (staging folders, spilled rows) is removed by the next write to the same target.
"""

from __future__ import annotations

import inspect
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import zarr_vectors as zv
from tests.conftest import brute_force_box, sorted_rows
from tests.storage.s3server import DUMMY_AWS_ENV, start_s3_server
from zarr_vectors.errors import IncompleteStoreError
from zarr_vectors.storage.commit import find_leftovers

pytestmark = [pytest.mark.slow, pytest.mark.kill]  # writers killed in subprocesses

ROOT = Path(__file__).resolve().parents[2]
BOUNDS = ([0.0, 0.0, 0.0], [100.0, 100.0, 100.0])
#: Store options of every version (the children's zv.create uses the same).
STORE = {"bounds": BOUNDS, "compression": "zstd"}
BOXES = [([10, 20, 30], [60, 70, 80]), ([0, 0, 0], [15, 15, 15]), ([80, 0, 50], [100, 40, 100])]


def version(seed: int, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows of version ``seed``: positions, an attribute naming the version and row, and object
    ids that interleave with every other version's (so an append renumbers the old objects)."""
    rng = np.random.default_rng(seed)
    pos = rng.uniform(0, 100, (n, 3)).astype(np.float32)
    v = (seed * 10_000_000 + np.arange(n)).astype(np.int64)
    ids = (rng.integers(0, 40, n) * 1000 + seed).astype(np.uint64)
    return pos, v, ids


CHILD = (
    "from __future__ import annotations\nimport numpy as np\n\n\n"
    + inspect.getsource(version)
    + r"""
import json, sys, time
import zarr_vectors as zv

cfg = json.loads(sys.argv[1])
target, so = cfg["target"], cfg.get("storage_options")
pos, v, ids = version(cfg["seed"], cfg["n"])
print("ready", flush=True)
if cfg["op"] == "create":
    w = zv.create(target, "points", chunk_shape=cfg["chunk"], bounds=([0.0] * 3, [100.0] * 3), compression="zstd", memory_limit=16 << 20, overwrite=True, storage_options=so)
    for part in np.array_split(np.arange(len(pos)), 4):
        w.append(pos[part], attributes={"v": v[part]}, object_ids=ids[part])
    print("closing", flush=True)
    if cfg.get("stall"):  # hold the spilled batches until killed
        time.sleep(600)
    w.close()
else:
    ds = zv.open(target, "r+", storage_options=so)
    print("closing", flush=True)
    ds.append(pos, attributes={"v": v}, object_ids=ids)
print("done", flush=True)
"""
)


class Versions:
    """The rows a store should hold: the versions written into it, joined."""

    def __init__(self, *parts: tuple[int, int]) -> None:
        self.parts = list(parts)

    def plus(self, seed: int, n: int) -> Versions:
        return Versions(*self.parts, (seed, n))

    def rows(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        got = [version(s, n) for s, n in self.parts]
        return tuple(np.concatenate([g[i] for g in got]) for i in range(3))  # type: ignore[return-value]

    def count(self) -> int:
        return sum(n for _, n in self.parts)


def answers_like(ds: zv.Dataset, want: Versions) -> bool:
    """Whether ``ds`` answers every box exactly as ``want``'s rows (brute force); False when
    the counts differ, an assertion error on a mixed answer."""
    if ds.vertex_count() != want.count():
        return False
    pos, v, ids = want.rows()
    for lo, hi in BOXES:
        inside = brute_force_box(pos, lo, hi)
        res = ds.query(bbox=(lo, hi))
        got = sorted_rows(res.positions, res.attributes["v"], res.object_ids.astype(np.float64))
        exp = sorted_rows(pos[inside], v[inside], ids[inside].astype(np.float64))
        assert got.shape == exp.shape and np.array_equal(got, exp), f"box {lo}-{hi}: a partial or mixed store"
    assert np.array_equal(ds.object_ids(), np.unique(ids))
    return True


def child_env(tmp: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "codecs"), env.get("PYTHONPATH", "")])
    env["TMPDIR"] = str(tmp)  # the child's staging and spill folders, to look for leftovers
    env.update(DUMMY_AWS_ENV)
    return env


def start(cfg: dict[str, Any], tmp: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, json.dumps(cfg)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env(tmp),
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    assert line == "ready", proc.stderr.read() if proc.stderr else line
    return proc


def run_to_end(cfg: dict[str, Any], tmp: Path) -> dict[str, float]:
    """Run the child to the end; seconds from ``ready`` to ``closing`` and to ``done``."""
    proc = start(cfg, tmp)
    t0 = time.perf_counter()
    assert proc.stdout is not None
    marks = {}
    for line in proc.stdout:
        marks[line.strip()] = time.perf_counter() - t0
    assert proc.wait(120) == 0, proc.stderr.read() if proc.stderr else ""
    return marks


def kill_after(cfg: dict[str, Any], tmp: Path, delay: float, after_closing: bool) -> None:
    """Start the child and SIGKILL it ``delay`` seconds after ``ready`` (or after ``closing``)."""
    proc = start(cfg, tmp)
    assert proc.stdout is not None
    if after_closing:
        assert proc.stdout.readline().strip() == "closing"
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)


def kill_times(rng: np.random.Generator, marks: dict[str, float], k: int) -> Iterator[tuple[float, bool]]:
    """``k`` delays: one during the batches, the rest spread over ``close()`` (and a bit past it)."""
    yield float(rng.uniform(0, marks["closing"])), False
    span = marks["done"] - marks["closing"]
    for lo in np.linspace(0, 1.1, k - 1, endpoint=False):
        yield float(span * (lo + rng.uniform(0, 1.1 / (k - 1)))), True


def kill_trials(
    cfg: dict[str, Any], current: Versions, first: int, k: int, tmp: Path, in_place: bool = False
) -> tuple[Versions, list[str]]:
    """Run ``cfg``'s write to the end once (elsewhere, ``cfg["timing"]``) to time it, then ``k``
    times killed at seeded delays over it (versions ``first + 1``...); after each kill the store must answer like
    ``current`` (before) or like ``current`` with the write (after), or, ``in_place``, refuse
    to open as incomplete (then the test restores ``current``). Return the last state and the
    outcomes."""
    so = cfg.get("storage_options")
    marks = run_to_end({**cfg, "target": cfg["timing"], "seed": first}, tmp)
    rng = np.random.default_rng(first)
    outcomes = []
    for seed, (delay, in_close) in enumerate(kill_times(rng, marks, k), start=first + 1):
        n = cfg["n"] + seed  # every version has its own count
        kill_after({**cfg, "seed": seed, "n": n}, tmp, delay, in_close)
        when = f"killed {delay:.2f}s after {'closing' if in_close else 'ready'}"
        after = current.plus(seed, n) if cfg["op"] == "append" else Versions((seed, n))
        try:
            ds = zv.open(cfg["target"], storage_options=so)
        except IncompleteStoreError as exc:
            assert in_place, f"{when}: a local store is never incomplete"
            message = str(exc)
            assert "\n" not in message and message.endswith("rewrite it or restore it"), message
            outcomes.append("incomplete")
            write_version(cfg["target"], current, cfg["chunk"], overwrite=True, storage_options=so)
            continue
        report = zv.validate(cfg["target"], storage_options=so)
        assert report.ok, f"{when}: {report}"
        if answers_like(ds, current):
            outcomes.append("before")
        else:
            assert answers_like(ds, after), f"{when}: neither the store before the write nor after it"
            outcomes.append("after")
            current = after
    return current, outcomes


# ------------------------------------------------------------------ local directory


def test_killed_stream_spill_is_removed_by_next_write(tmp_path: Path) -> None:
    """Rows a killed writer spilled beside the target are a leftover: reported, then removed."""
    target, tmp = tmp_path / "s.zarr", tmp_path / "tmp"
    tmp.mkdir()
    cfg = {"op": "create", "target": str(target), "n": 400_000, "seed": 1, "stall": True, "chunk": 50}
    kill_after(cfg, tmp, 0.0, after_closing=True)  # the batches are spilled (16 MiB limit)
    assert not target.exists()
    left = find_leftovers(target)
    assert len(left) == 1 and list(left[0].rglob("*.bin")), os.listdir(tmp_path)
    zv.write_points(target, np.zeros((1, 3)), chunk_shape=50, bounds=BOUNDS)
    assert sorted(os.listdir(tmp_path)) == ["s.zarr", "tmp"]


def write_version(target: Any, want: Versions, chunk: float, **kwargs: Any) -> None:
    pos, v, ids = want.rows()
    zv.write_points(target, pos, attributes={"v": v}, object_ids=ids, chunk_shape=chunk, **STORE, **kwargs)


@pytest.mark.parametrize("op", ["create", "append"])
def test_local_write_killed_leaves_before_or_after(tmp_path: Path, op: str) -> None:
    """A streamed rewrite (1 M points over 300 k) or an append (100 k points to 300 k)."""
    target, tmp = tmp_path / "out" / "s.zarr", tmp_path / "tmp"
    tmp.mkdir()
    base = Versions((1, 300_000))
    write_version(target, base, 20)
    write_version(tmp_path / "timing.zarr", base, 20)
    cfg = {"op": op, "target": str(target), "timing": str(tmp_path / "timing.zarr"), "chunk": 20}
    cfg["n"] = 1_000_000 if op == "create" else 100_000
    current, outcomes = kill_trials(cfg, base, 10, 5, tmp)
    assert "before" in outcomes, outcomes  # (the first kill always lands before the commit)
    # A write run to the end removes what the killed ones left beside the target.
    run_to_end({**cfg, "seed": 50, "n": 2000}, tmp)
    final = current.plus(50, 2000) if op == "append" else Versions((50, 2000))
    assert answers_like(zv.open(target), final)
    assert find_leftovers(target) == []
    assert os.listdir(target.parent) == ["s.zarr"], os.listdir(target.parent)
    assert os.listdir(tmp) == []


# ------------------------------------------------------------------ S3 (moto), written in place


@pytest.fixture(scope="module")
def s3_server() -> Iterator[tuple[str, dict[str, Any]]]:
    """A moto S3 server on 127.0.0.1 with one bucket: ``(url_prefix, storage_options)``."""
    with pytest.MonkeyPatch.context() as mp:
        for name, value in DUMMY_AWS_ENV.items():
            mp.setenv(name, value)
        server = start_s3_server("zv-interrupt")
        try:
            yield server.url_prefix, server.storage_options
        finally:
            server.stop()


@pytest.mark.s3
@pytest.mark.parametrize("op", ["create", "append"])
def test_s3_write_killed_leaves_before_after_or_incomplete(
    tmp_path: Path, s3_server: tuple[str, dict[str, Any]], op: str
) -> None:
    prefix, so = s3_server
    target, tmp = f"{prefix}/{op}.zarr", tmp_path / "tmp"
    tmp.mkdir()
    base = Versions((1, 20_000))
    write_version(target, base, 50, storage_options=so)  # 8 cells: moto takes about 20 ms a key
    write_version(f"{prefix}/{op}-timing.zarr", base, 50, storage_options=so)
    cfg = {"op": op, "target": target, "timing": f"{prefix}/{op}-timing.zarr", "storage_options": so}
    cfg["chunk"] = 50
    cfg["n"] = 20_000
    current, outcomes = kill_trials(cfg, base, 20, 5, tmp, in_place=True)
    assert "before" in outcomes, outcomes
    run_to_end({**cfg, "seed": 70, "n": 500}, tmp)
    final = current.plus(70, 500) if op == "append" else Versions((70, 500))
    assert answers_like(zv.open(target, storage_options=so), final)
    assert os.listdir(tmp) == []  # the staging folders of the killed writes are gone
