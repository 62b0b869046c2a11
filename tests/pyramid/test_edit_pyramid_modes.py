"""``pyramid=`` of ``Dataset.append/replace/delete``: ``"update"`` and ``"rebuild"`` leave every
level as a one-shot write of the final data plus a full build with the *recorded* settings
(reductions included), ``"stale"`` marks the levels, and other values are refused."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

import zarr_vectors as zv
from zarr_vectors.errors import InputError
from zarr_vectors.storage import GENERATION_KEY

BOUNDS = ([0.0, 0.0, 0.0], [100.0, 100.0, 100.0])
SETTINGS: dict[str, Any] = {"reductions": {"w": "max"}}


def _stored(ds: zv.Dataset) -> dict[str, bytes]:
    backend = ds._store.backend
    keys = sorted(backend.list_keys())
    return dict(zip(keys, backend.get_many(keys)))


def _assert_same_store(a: dict[str, bytes], b: dict[str, bytes]) -> None:
    """Every stored object equal; the roots equal but for their write generation."""
    assert sorted(a) == sorted(b)
    for key in a:
        if key == "zarr.json":
            ra, rb = json.loads(a[key]), json.loads(b[key])
            ra["attributes"].pop(GENERATION_KEY), rb["attributes"].pop(GENERATION_KEY)
            assert ra == rb
        else:
            assert a[key] == b[key], key


def _data(seed: int, n: int, first_id: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    pts = rng.uniform(0, 100, (n, 3)).astype(np.float32)
    return pts, rng.random(n).astype(np.float32), first_id + rng.integers(0, 20, n)


def _one_shot(url: str, pts: np.ndarray, w: np.ndarray, ids: np.ndarray) -> zv.Dataset:
    zv.write_points(
        url,
        pts,
        chunk_shape=25,
        bin_shape=12.5,
        bounds=BOUNDS,
        attributes={"w": w},
        object_ids=ids,
        shards=None,
    )
    ds = zv.open(url, mode="r+")
    ds.build_pyramid([2, 2], **SETTINGS)
    return ds


@pytest.mark.parametrize("mode", ["update", "rebuild", True])
def test_edits_with_pyramid_leave_every_level_as_a_full_build_with_the_recorded_settings(mode: Any) -> None:
    pts, w, ids = _data(0, 3000, 0)
    ds = _one_shot(f"memory://modes-{mode}", pts, w, ids)
    new_pts, new_w, new_ids = _data(1, 200, 100)
    ds.append(new_pts, attributes={"w": new_w}, object_ids=new_ids, pyramid=mode)
    ds.delete([3, 7], pyramid=mode)
    keep = ~np.isin(ids, [3, 7])
    final = (np.concatenate([pts[keep], new_pts]), np.concatenate([w[keep], new_w]))
    final_ids = np.concatenate([ids[keep], new_ids])
    assert ds.stale_levels() == []
    want = _one_shot(f"memory://modes-{mode}-want", *final, final_ids)
    _assert_same_store(_stored(ds), _stored(want))


def test_pyramid_stale_marks_the_levels_and_nothing_else_is_accepted() -> None:
    pts, w, ids = _data(2, 500, 0)
    ds = _one_shot("memory://modes-stale", pts, w, ids)
    ds.delete([1], pyramid="stale")
    assert ds.stale_levels() == [1, 2]
    with pytest.raises(InputError, match=r"pyramid='later': give 'update'"):
        ds.delete([2], pyramid="later")
    assert 2 in ds.object_ids()


def test_update_after_every_edit_is_a_one_shot_write_with_a_full_build() -> None:
    """With ``pyramid="update"``, edits of a store with levels leave them current: the store is
    then what a one-shot write of the final data plus a full build writes."""
    pts, w, ids = _data(3, 1000, 0)
    ds = _one_shot("memory://modes-default", pts, w, ids)
    new_pts, new_w, new_ids = _data(4, 50, 100)
    ds.append(new_pts, attributes={"w": new_w}, object_ids=new_ids, pyramid="update")
    ds.replace([5], new_pts[:7], attributes={"w": new_w[:7]}, object_ids=[5] * 7, pyramid="update")
    ds.delete([9], pyramid="update")
    assert ds.stale_levels() == []
    keep = ~np.isin(ids, [5, 9])
    final = (
        np.concatenate([pts[keep], new_pts, new_pts[:7]]),
        np.concatenate([w[keep], new_w, new_w[:7]]),
        np.concatenate([ids[keep], new_ids, [5] * 7]),
    )
    want = _one_shot("memory://modes-default-want", *final)
    _assert_same_store(_stored(ds), _stored(want))


def _skeletons(url: str, objs: dict[int, tuple[np.ndarray, np.ndarray]]) -> zv.Dataset:
    ids = sorted(objs)
    pos = np.concatenate([objs[i][0] for i in ids])
    offsets = np.cumsum([0] + [len(objs[i][0]) for i in ids])
    parents = np.concatenate([np.where(objs[i][1] < 0, -1, objs[i][1] + o) for i, o in zip(ids, offsets)])
    oids = np.concatenate([np.full(len(objs[i][0]), i) for i in ids])
    zv.write_skeleton(url, pos, parents, object_ids=oids, chunk_shape=25, bounds=BOUNDS, shards=None)
    ds = zv.open(url, mode="r+")
    ds.build_pyramid([2])
    return ds


def _chain(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    steps = rng.normal(0, 3, (n, 3))
    pos = np.clip(rng.uniform(20, 80, 3) + np.cumsum(steps, axis=0), 0, 99).astype(np.float32)
    return pos, np.arange(n) - 1


def test_update_keeps_the_levels_of_a_skeleton_store_current() -> None:
    rng = np.random.default_rng(12)
    objs = {i: _chain(rng, 40) for i in (1, 2, 3, 4)}
    ds = _skeletons("memory://modes-default-skel", objs)
    ds.delete([2], pyramid="update")
    new = _chain(rng, 30)
    ds.replace([3], new[0], new[1], pyramid="update")
    assert ds.stale_levels() == []
    del objs[2]
    objs[3] = new
    want = _skeletons("memory://modes-default-skel-want", objs)
    # A linked edit is query-identical to a one-shot write (not file-identical): compare answers.
    for k in (0, 1):
        assert ds.object_ids(k).tolist() == want.object_ids(k).tolist() == [1, 3, 4]
        for i in (1, 3, 4):
            got, exp = ds.objects([i], level=k), want.objects([i], level=k)
            assert np.array_equal(got.positions, exp.positions), (k, i)
        box = ([10.0, 10, 10], [60.0, 60, 60])
        assert np.array_equal(ds.query(box, level=k).positions, want.query(box, level=k).positions)
    assert ds.vertex_count(1) < ds.vertex_count(0)


def test_update_rebuilds_levels_that_do_not_record_their_settings() -> None:
    pts, w, ids = _data(5, 400, 0)
    ds = _one_shot("memory://modes-unrecorded", pts, w, ids)
    backend = ds._store.backend
    for k in (1, 2):
        doc = json.loads(backend.get_many([f"{k}/zarr.json"])[0])
        del doc["attributes"]["zarr_vectors_level"]["pyramid_build"]
        backend.set_many([(f"{k}/zarr.json", json.dumps(doc).encode())])
    ds = zv.open("memory://modes-unrecorded", mode="r+")
    ds.delete([4], pyramid="update")
    assert ds.stale_levels() == []
    assert 4 not in zv.open("memory://modes-unrecorded").object_ids(1)


def test_the_default_updates_the_levels() -> None:
    """Without ``pyramid=``, an edit of a store with levels brings them up to date in the
    edit's own commit: the store is what ``pyramid="update"`` writes."""
    pts, w, ids = _data(6, 400, 0)
    ds = _one_shot("memory://modes-default-update", pts, w, ids)
    explicit = _one_shot("memory://modes-default-explicit", pts, w, ids)
    ds.delete([3])
    explicit.delete([3], pyramid="update")
    assert ds.stale_levels() == []
    assert 3 not in ds.object_ids(1).tolist()
    _assert_same_store(_stored(ds), _stored(explicit))
