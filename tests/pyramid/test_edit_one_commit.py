"""An edit and its level update are one commit (``zarr_vectors.pyramid.one_commit``).

A failure between the edit and the update leaves the store as before the edit (files and
answers); a reader during the update sees the store before the edit; another writer that
commits meanwhile makes the edit raise StoreConflictError with nothing of it applied; and
``pyramid="update"`` is the default when the store has levels; a writer killed between the
edit and the update leaves the store as before."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import zarr_vectors as zv
import zarr_vectors.dataset.levels as dataset_levels
import zarr_vectors.pyramid.linked_update as linked_update
from zarr_vectors.errors import StoreConflictError
from zarr_vectors.storage import find_leftovers

BOUNDS = ([0.0, 0.0, 0.0], [100.0, 100.0, 100.0])


def _points(url: str | Path) -> zv.Dataset:
    rng = np.random.default_rng(3)
    pts = rng.uniform(0, 100, (600, 3)).astype(np.float32)
    zv.write_points(url, pts, chunk_shape=25, bounds=BOUNDS, object_ids=rng.integers(0, 10, 600), shards=None)
    ds = zv.open(url, mode="r+")
    ds.build_pyramid([2, 2])
    return ds


def _skeletons(url: str | Path) -> zv.Dataset:
    rng = np.random.default_rng(4)
    pos = np.clip(rng.uniform(20, 80, 3) + np.cumsum(rng.normal(0, 3, (60, 3)), axis=0), 0, 99)
    parents = np.r_[-1, np.arange(29), -1, np.arange(30, 59)]
    oids = np.repeat([1, 2], 30)
    zv.write_skeleton(url, pos.astype(np.float32), parents, object_ids=oids, chunk_shape=25, bounds=BOUNDS)
    ds = zv.open(url, mode="r+")
    ds.build_pyramid([2])
    return ds


STORES = {"points": _points, "skeletons": _skeletons}


def _files(path: Path) -> dict[str, tuple[int, bytes]]:
    """Every file of a local store: its inode and bytes."""
    out = {}
    for root, _, names in os.walk(path):
        for name in names:
            full = Path(root) / name
            out[str(full.relative_to(path))] = (full.stat().st_ino, full.read_bytes())
    return out


def _failing_update(monkeypatch: pytest.MonkeyPatch, check: Any = None) -> None:
    """Make the level update (region-wise or whole) of an edit raise, after ``check()``."""

    def fail(*args: Any, **kwargs: Any) -> None:
        if check is not None:
            check()
        raise RuntimeError("the level update failed")

    monkeypatch.setattr(dataset_levels, "update_levels", fail)
    monkeypatch.setattr(dataset_levels, "build_pyramid", fail)
    monkeypatch.setattr(linked_update, "update_linked_levels", fail)  # lines, skeletons, meshes


@pytest.mark.parametrize("kind", sorted(STORES))
def test_a_failed_update_leaves_the_local_store_as_before_the_edit(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.zarr"
    ds = STORES[kind](path)
    before, count = _files(path), ds.vertex_count()
    seen: list[int] = []

    def reader_sees_the_old_store() -> None:  # the edit is done, its update not yet
        other = zv.open(path)
        seen.append(other.vertex_count())
        assert other.stale_levels() == []

    _failing_update(monkeypatch, reader_sees_the_old_store)
    with pytest.raises(RuntimeError, match="the level update failed"):
        ds.delete([1])
    assert seen == [count]
    assert _files(path) == before  # same files, same inodes, same bytes
    assert find_leftovers(path) == []
    again = zv.open(path)
    assert again.vertex_count() == count and 1 in again.object_ids().tolist()


@pytest.mark.parametrize("kind", sorted(STORES))
def test_a_failed_update_leaves_a_store_in_memory_as_before_the_edit(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"memory://one-commit-fail-{kind}-{os.getpid()}"
    ds = STORES[kind](url)
    backend = ds._store.backend.inner.inner  # the memory store's keys, past the shard reader
    keys = sorted(backend.list_keys())
    before = dict(zip(keys, backend.get_many(keys)))
    _failing_update(monkeypatch)
    with pytest.raises(RuntimeError, match="the level update failed"):
        ds.delete([2])
    after_keys = sorted(backend.list_keys())
    assert after_keys == keys and dict(zip(keys, backend.get_many(keys))) == before
    assert 2 in zv.open(url).object_ids().tolist()


def test_a_writer_between_the_edit_and_the_update_is_a_conflict_with_nothing_applied(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url = f"memory://one-commit-race-{os.getpid()}"
    ds = _points(url)
    count = ds.vertex_count()
    update = dataset_levels.update_levels

    raced: list[bool] = []

    def other_writer_first(*args: Any, **kwargs: Any) -> None:
        if not raced:  # the other writer's own update runs as usual
            raced.append(True)
            zv.open(url, mode="r+").append([[1.0, 2.0, 3.0]], object_ids=[99])
        update(*args, **kwargs)

    monkeypatch.setattr(dataset_levels, "update_levels", other_writer_first)
    with pytest.raises(StoreConflictError):
        ds.delete([4])
    now = zv.open(url)
    assert now.vertex_count() == count + 1  # the other writer's point, none of the delete
    assert 4 in now.object_ids().tolist() and 99 in now.object_ids().tolist()
    assert now.stale_levels() == [] and raced == [True]


@pytest.mark.parametrize("kind", sorted(STORES))
def test_update_is_the_default_and_one_commit(kind: str, tmp_path: Path) -> None:
    ds = STORES[kind](tmp_path / "default.zarr")
    explicit = STORES[kind](tmp_path / "explicit.zarr")
    root = (tmp_path / "default.zarr" / "zarr.json").stat().st_ino
    ds.delete([2])
    explicit.delete([2], pyramid="update")
    assert ds.stale_levels() == [] and explicit.stale_levels() == []
    for k in ds.levels:
        a, b = ds.read(level=k).positions, explicit.read(level=k).positions
        assert np.array_equal(a, b), k
    assert ds.vertex_count(1) < ds.vertex_count(0)
    # one exchange of the store folder: the root file is a new one, and no staging folder stays
    assert (tmp_path / "default.zarr" / "zarr.json").stat().st_ino != root
    assert find_leftovers(tmp_path / "default.zarr") == []


@pytest.mark.parametrize("kind", sorted(STORES))
def test_an_icechunk_edit_with_its_update_is_one_snapshot(kind: str, tmp_path: Path) -> None:
    icechunk = pytest.importorskip("icechunk")
    zvi = pytest.importorskip("zarr_vectors.icechunk")
    repo = icechunk.Repository.create(icechunk.local_filesystem_storage(str(tmp_path / "repo")))
    zvi.commit(repo, lambda store: STORES[kind](store), message="base with levels")
    before = len(list(repo.ancestry(branch="main")))
    zvi.delete(repo, [2])
    assert len(list(repo.ancestry(branch="main"))) == before + 1
    got = zv.open(repo.readonly_session(branch="main").store)
    want = STORES[kind](tmp_path / "want.zarr")
    want.delete([2])
    assert got.stale_levels() == [] and 2 not in got.object_ids(1).tolist()
    for k in want.levels:
        a, b = got.read(level=k).positions, want.read(level=k).positions
        assert np.array_equal(a[np.lexsort(a.T)], b[np.lexsort(b.T)]), k


_KILLED_BETWEEN = """
import os, signal, sys
import zarr_vectors as zv
import zarr_vectors.dataset.levels as dataset_levels
import zarr_vectors.pyramid.linked_update as linked_update

def die(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)

dataset_levels.update_levels = dataset_levels.build_pyramid = linked_update.update_linked_levels = die
zv.open(sys.argv[1], mode="r+").delete([1])
"""


@pytest.mark.slow  # a subprocess importing the library: a few seconds
@pytest.mark.parametrize("kind", sorted(STORES))
def test_killed_between_the_edit_and_the_update_leaves_the_old_store(kind: str, tmp_path: Path) -> None:
    path = tmp_path / "s.zarr"
    ds = STORES[kind](path)
    before, count = _files(path), ds.vertex_count()
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), str(root / "codecs")])}
    proc = subprocess.run([sys.executable, "-c", _KILLED_BETWEEN, str(path)], env=env, capture_output=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]
    assert _files(path) == before
    again = zv.open(path)
    assert again.vertex_count() == count and again.stale_levels() == [] and 1 in again.object_ids().tolist()
    again = zv.open(path, mode="r+")
    again.delete([1])  # the killed writer's leftovers do not stand in the way
    assert 1 not in again.object_ids(1).tolist() and find_leftovers(path) == []
