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
