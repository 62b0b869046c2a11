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


# ------------------------------------------------------------------ edits of every kind

SK_OPTS = {"chunk_shape": 25, "bounds": BOUNDS}


def _skeleton(oid: int, seed: int, n: int = 30) -> tuple[np.ndarray, np.ndarray]:
    """A chain of ``n`` vertices wandering through several chunks."""
    rng = np.random.default_rng(seed)
    pos = np.clip(np.cumsum(rng.uniform(-6, 6, (n, 3)), axis=0) + rng.uniform(20, 80, 3), 0, 99.9)
    return pos, np.arange(-1, n - 1)


def _skeletons(oids: list[int], seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    parts = [_skeleton(o, seed + o) for o in oids]
    offs = np.cumsum([0] + [len(p) for p, _ in parts])[:-1]
    pos = np.concatenate([p for p, _ in parts])
    par = np.concatenate([np.where(q < 0, -1, q + off) for (_, q), off in zip(parts, offs, strict=True)])
    ids = np.concatenate([np.full(len(p), o, np.uint64) for o, (p, _) in zip(oids, parts, strict=True)])
    return pos, par, ids


def _answers(ds: zv.Dataset) -> tuple[list[int], list[np.ndarray], np.ndarray]:
    """Object ids, every object's vertices (sorted rows), and a box's rows."""
    ids = ds.object_ids().tolist()
    objs = [sorted_rows(ds.objects([i]).positions) for i in ids]
    return ids, objs, _box(ds)


def _same(a: zv.Dataset, b: zv.Dataset) -> bool:
    x, y = _answers(a), _answers(b)
    return (
        x[0] == y[0]
        and all(np.array_equal(p, q) for p, q in zip(x[1], y[1], strict=True))
        and np.array_equal(x[2], y[2])
    )


def _skeleton_repo(tmp_path, oids: list[int]) -> object:
    repo = _repo(tmp_path)
    pos, par, ids = _skeletons(oids, 0)
    zvi.commit(repo, lambda s: zv.write_skeleton(s, pos, par, object_ids=ids, **SK_OPTS), message="base")
    return repo


def _one_shot(path, oids: list[int], replaced: dict[int, int] | None = None) -> zv.Dataset:
    """The store written at once with the skeletons ``oids`` (object ``o`` from seed
    ``replaced.get(o, 0) + o``)."""
    parts = [_skeletons([o], (replaced or {}).get(o, 0)) for o in oids]
    offs = np.cumsum([0] + [len(p[0]) for p in parts])[:-1]
    pos = np.concatenate([p[0] for p in parts])
    par = np.concatenate([np.where(p[1] < 0, -1, p[1] + off) for p, off in zip(parts, offs, strict=True)])
    ids = np.concatenate([p[2] for p in parts])
    zv.write_skeleton(str(path), pos, par, object_ids=ids, **SK_OPTS)
    return zv.open(str(path))


def _snapshots(repo) -> int:
    return len(list(repo.ancestry(branch="main")))


@pytest.mark.parametrize("edit", ["append", "replace", "delete"])
def test_skeleton_edit_is_one_commit(tmp_path, edit: str) -> None:
    repo = _skeleton_repo(tmp_path, [1, 2, 3])
    before = _snapshots(repo)
    if edit == "append":
        pos, par, ids = _skeletons([4], 0)
        zvi.append(repo, pos, par, object_ids=ids)
        want = _one_shot(tmp_path / "want.zarr", [1, 2, 3, 4])
    elif edit == "replace":
        pos, par, _ = _skeletons([2], 50)
        zvi.replace(repo, [2], pos, par)
        want = _one_shot(tmp_path / "want.zarr", [1, 2, 3], {2: 50})
    else:
        zvi.delete(repo, [2])
        want = _one_shot(tmp_path / "want.zarr", [1, 3])
    assert _snapshots(repo) == before + 1
    assert _same(_read(repo), want)
    assert zv.validate(repo.readonly_session(branch="main").store).ok


def test_racing_skeleton_editors_one_wins_nothing_of_the_other(tmp_path) -> None:
    repo = _skeleton_repo(tmp_path, [1, 2, 3])
    first, second = repo.writable_session("main"), repo.writable_session("main")
    pos, par, _ = _skeletons([2], 50)
    zv.open(first.store, "r+").replace([2], pos, par)
    zv.open(second.store, "r+").delete([1, 3])
    first.commit("replace 2")
    with pytest.raises(icechunk.ConflictError):
        second.commit("delete 1, 3")
    want = _one_shot(tmp_path / "want.zarr", [1, 2, 3], {2: 50})
    assert _same(_read(repo), want)

    def racing_delete(store) -> None:
        zv.open(store, "r+").delete([1, 3])
        zvi.append(repo, *_skeletons([7], 0)[:2], object_ids=_skeletons([7], 0)[2])  # another editor

    with pytest.raises(zv.StoreConflictError, match="another writer committed to branch 'main'"):
        zvi.commit(repo, racing_delete, message="slow delete")
    assert _same(_read(repo), _one_shot(tmp_path / "want7.zarr", [1, 2, 3, 7], {2: 50}))


def _cloud(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.uniform(0, 100, (3000, 3)), rng.integers(1, 20, 3000).astype(np.uint64)


@pytest.mark.parametrize("edit", ["replace", "delete"])
def test_point_edit_is_one_commit_and_races_lose_cleanly(tmp_path, edit: str) -> None:
    repo = _repo(tmp_path)
    pts, ids = _cloud(1)
    zvi.commit(
        repo, lambda s: zv.write_points(s, pts, object_ids=ids, chunk_shape=25, bounds=BOUNDS), message="b"
    )
    new, _ = _cloud(2)
    new = new[:40]
    before = _snapshots(repo)
    if edit == "replace":
        zvi.replace(repo, [5], new, object_ids=np.full(40, 5, np.uint64))
        keep = ids != 5
        want_pts, want_ids = (
            np.concatenate([pts[keep], new]),
            np.concatenate([ids[keep], np.full(40, 5, np.uint64)]),
        )
    else:
        zvi.delete(repo, [5, 6])
        keep = (ids != 5) & (ids != 6)
        want_pts, want_ids = pts[keep], ids[keep]
    assert _snapshots(repo) == before + 1
    ds = _read(repo)
    assert ds.vertex_count() == len(want_pts) and np.array_equal(_box(ds), _expected(want_pts, want_ids))
    assert ds.object_ids().tolist() == np.unique(want_ids).tolist()

    def racing(store) -> None:
        zv.open(store, "r+").delete([7])
        zvi.delete(repo, [8])  # another editor commits meanwhile

    with pytest.raises(zv.StoreConflictError, match="another writer committed"):
        zvi.commit(repo, racing, message="slow")
    keep = want_ids != 8
    ds = _read(repo)
    assert np.array_equal(_box(ds), _expected(want_pts[keep], want_ids[keep]))
    assert 7 in ds.object_ids().tolist() and 8 not in ds.object_ids().tolist()


def test_a_rebuilt_pyramid_that_drops_arrays_is_one_commit(tmp_path) -> None:
    """Rebuilding levels without explicit cross-level links deletes whole arrays (their chunks,
    then their documents, which Icechunk needs in that order) in one snapshot."""
    repo = _skeleton_repo(tmp_path, [1, 2, 3])
    zvi.commit(repo, lambda s: zv.open(s, "r+").build_pyramid([2, 2], cross_level="explicit"), message="p1")
    before = _snapshots(repo)
    zvi.commit(
        repo,
        lambda s: zv.open(s, "r+").build_pyramid([2], cross_level="implicit", overwrite=True),
        message="p2",
    )
    assert _snapshots(repo) == before + 1
    got = _read(repo)
    want = _one_shot(tmp_path / "want.zarr", [1, 2, 3])
    zv.open(str(tmp_path / "want.zarr"), "r+").build_pyramid([2], cross_level="implicit")
    want = zv.open(str(tmp_path / "want.zarr"))
    assert got.levels == want.levels == [0, 1]
    for level in (0, 1):
        a, b = got.query(bbox=BOX, level=level), want.query(bbox=BOX, level=level)
        assert np.array_equal(sorted_rows(a.positions), sorted_rows(b.positions))
    assert zv.validate(repo.readonly_session(branch="main").store).ok
