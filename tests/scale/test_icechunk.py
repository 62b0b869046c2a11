"""Writes and appends as Icechunk commits: before or after, never between; races lose cleanly."""

from __future__ import annotations

import numpy as np
import pytest

import zarr_vectors as zv
from tests.conftest import brute_force_box, sorted_rows

icechunk = pytest.importorskip("icechunk")
zvi = pytest.importorskip("zarr_vectors.icechunk")

BOUNDS = ([0.0, 0.0, 0.0], [100.0, 100.0, 100.0])
BOX = ([10, 10, 10], [70, 60, 90])


def _points(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.uniform(0, 100, (n, 3)), rng.integers(1, 30, n).astype(np.uint64) << np.uint64(40)


def _repo(tmp_path) -> object:
    return icechunk.Repository.create(icechunk.local_filesystem_storage(str(tmp_path / "repo")))


def _read(repo) -> zv.Dataset:
    return zv.open(repo.readonly_session(branch="main").store)


def _box(ds: zv.Dataset) -> np.ndarray:
    r = ds.query(bbox=BOX)
    return sorted_rows(r.positions, r.object_ids.astype(np.float64))


def _expected(pts: np.ndarray, ids: np.ndarray) -> np.ndarray:
    inside = brute_force_box(pts, *BOX)
    return sorted_rows(pts[inside], ids[inside].astype(np.float64))


def test_write_then_append_are_commits(tmp_path) -> None:
    repo = _repo(tmp_path)
    pts, ids = _points(20_000, 1)
    zvi.commit(
        repo,
        lambda store: zv.write_points(
            store, pts, chunk_shape=25, bounds=BOUNDS, object_ids=ids, compression="zstd"
        ),
        message="first",
    )
    first = repo.lookup_branch("main")
    more, more_ids = _points(500, 2)
    session = repo.writable_session("main")
    zv.open(session.store, "r+").append(more, object_ids=more_ids, extend=True)
    # Until the commit, readers of the branch see the store as it was.
    assert np.array_equal(_box(_read(repo)), _expected(pts, ids))
    session.commit("append")
    both, both_ids = np.concatenate([pts, more]), np.concatenate([ids, more_ids])
    assert np.array_equal(_box(_read(repo)), _expected(both, both_ids))
    old = zv.open(repo.readonly_session(snapshot_id=first).store)  # history keeps the old version
    assert old.vertex_count() == 20_000
    assert zv.validate(repo.readonly_session(branch="main").store).ok


def test_racing_appenders_one_wins_the_other_applies_nothing(tmp_path) -> None:
    repo = _repo(tmp_path)
    pts, ids = _points(10_000, 3)
    zvi.commit(
        repo,
        lambda store: zv.write_points(store, pts, chunk_shape=25, bounds=BOUNDS, object_ids=ids),
        message="base",
    )
    a, a_ids = _points(300, 4)
    b, b_ids = _points(200, 5)
    first, second = repo.writable_session("main"), repo.writable_session("main")
    zv.open(first.store, "r+").append(a, object_ids=a_ids, extend=True)
    zv.open(second.store, "r+").append(b, object_ids=b_ids, extend=True)
    first.commit("a")
    with pytest.raises(icechunk.ConflictError):
        second.commit("b")
    after = _read(repo)
    assert after.vertex_count() == 10_300
    assert np.array_equal(_box(after), _expected(np.concatenate([pts, a]), np.concatenate([ids, a_ids])))

    # The helper turns the lost race into the library's error, naming what to do.
    def slow_append(store) -> None:
        zv.open(store, "r+").append(b, object_ids=b_ids, extend=True)
        zvi.append(repo, a[:10], object_ids=a_ids[:10], extend=True)  # another writer commits meanwhile

    with pytest.raises(
        zv.StoreConflictError, match="another writer committed to branch 'main'.*run the write again"
    ):
        zvi.commit(repo, slow_append, message="slow")
    assert _read(repo).vertex_count() == 10_310  # the winner only
