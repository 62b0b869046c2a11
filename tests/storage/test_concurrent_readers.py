"""Readers while another writer replaces the store: one consistent version, or a clear error.

A reader process races 200 overwrites of one local store (different data each time);
every answer it gets is exactly one of the written versions, or
``StoreChangedError`` (a dataset opened before an overwrite). The same with a memory
store written in place from another thread, and a dataset opened before a pyramid
rebuild. Never a partial or mixed answer.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr

import zarr_vectors as zv
from zarr_vectors.errors import IncompleteStoreError, StoreChangedError

pytestmark = pytest.mark.slow  # races: hundreds of overwrites, reader subprocesses

N = 1000
BOX = ([10.0, 0.0, 0.0], [70.0, 100.0, 60.0])


def version(k: int) -> dict[str, Any]:
    """Version k of the store: N points of its own, each carrying k."""
    rng = np.random.default_rng(1000 + k)
    return {
        "positions": rng.uniform(0, 100, (N, 3)).astype(np.float32),
        "attributes": {"v": np.full(N, k, np.int32)},
    }


_CHECK = r"""
import numpy as np
import zarr_vectors as zv

N = 1000
BOX = ([10.0, 0.0, 0.0], [70.0, 100.0, 60.0])


def expected(k, box):
    pos = np.random.default_rng(1000 + k).uniform(0, 100, (N, 3)).astype(np.float32)
    if box:
        pos = pos[np.all((pos >= BOX[0]) & (pos <= BOX[1]), axis=1)]
    return pos[np.lexsort(pos.T)]


def verdict(res, box):
    v = np.unique(res.attributes["v"])
    if len(v) != 1:
        return f"mixed versions {v.tolist()[:5]} in one answer ({len(res)} rows)"
    pos = res.positions[np.lexsort(res.positions.T)]
    want = expected(int(v[0]), box)
    if pos.shape != want.shape or not np.array_equal(pos, want):
        return f"partial answer: {len(pos)} rows where version {int(v[0])} has {len(want)}"
    return None
"""

READER = (
    _CHECK
    + r"""
import json, os, sys

store, stop = sys.argv[1], sys.argv[2]
counts = {"answers": 0, "changed": 0, "bad": []}
print("ready", flush=True)
ds, i = None, 0
while not os.path.exists(stop) or i < 20:
    i += 1
    try:
        if ds is None or i % 3 == 0:  # mostly reuse an opened dataset across overwrites
            ds = zv.open(store)
        box = i % 2 == 0
        res = ds.query(BOX, object_ids=False) if box else ds.read()
    except zv.StoreChangedError as exc:
        assert "the store changed while it was being read; open it again" in str(exc)
        counts["changed"] += 1
        ds = None
        continue
    counts["answers"] += 1
    bad = verdict(res, box)
    if bad:
        counts["bad"].append(bad)
print(json.dumps(counts))
"""
)


def test_reader_racing_200_overwrites(tmp_path: Path) -> None:
    store = tmp_path / "s.zarr"
    zv.write_points(store, chunk_shape=50, **version(0))
    stop = tmp_path / "stop"
    reader = subprocess.Popen(
        [sys.executable, "-c", READER, str(store), str(stop)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert reader.stdout is not None and reader.stdout.readline().strip() == "ready"
        for k in range(1, 201):
            zv.write_points(store, chunk_shape=50, overwrite=True, **version(k))
    finally:
        stop.touch()
        out, err = reader.communicate(timeout=120)
    assert reader.returncode == 0, err
    counts = json.loads(out)
    assert counts["bad"] == [], counts["bad"][:5]
    assert counts["answers"] >= 20 and counts["changed"] >= 1, counts  # the race did happen


def test_memory_store_rewritten_in_place_from_another_thread() -> None:
    store = zarr.storage.MemoryStore()
    zv.write_points(store, chunk_shape=25, **version(0))
    ns: dict[str, Any] = {}
    exec(_CHECK, ns)
    done = threading.Event()
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            for k in range(1, 41):
                zv.write_points(store, chunk_shape=25, overwrite=True, **version(k))
        except BaseException as exc:  # noqa: BLE001 - reported by the test below
            errors.append(exc)
        finally:
            done.set()

    thread = threading.Thread(target=writer)
    thread.start()
    answers, changed, incomplete, bad = 0, 0, 0, []
    i = 0
    while not done.is_set() or answers < 10:  # after the writer ends every read answers
        i += 1
        try:
            ds = zv.open(store)
            box = i % 2 == 0
            res = ds.query(BOX, object_ids=False) if box else ds.read()
        except StoreChangedError:
            changed += 1
            continue
        except IncompleteStoreError:
            incomplete += 1
            continue
        answers += 1
        problem = ns["verdict"](res, box)
        if problem:
            bad.append(problem)
    thread.join()
    assert errors == []
    assert bad == [], bad[:5]
    assert answers >= 10 and changed + incomplete >= 1, (answers, changed, incomplete)


@pytest.mark.parametrize("loaded", [False, True])
def test_dataset_opened_before_a_pyramid_rebuild(tmp_path: Path, loaded: bool) -> None:
    store = tmp_path / "p.zarr"
    zv.write_points(store, chunk_shape=25, **version(1))
    zv.open(store, mode="r+").build_pyramid([2])
    stale = zv.open(store)
    if loaded:
        before = stale.read(level=1)
        assert len(before) == stale.vertex_count(1)
    zv.open(store, mode="r+").build_pyramid([4], overwrite=True)  # another writer rebuilds level 1
    fresh = zv.open(store)
    assert len(fresh.read(level=1)) == fresh.vertex_count(1)
    with pytest.raises(
        StoreChangedError, match="the store changed while it was being read; open it again"
    ) as info:
        stale.query(([0, 0, 0], [100, 100, 100]), level=1)
    assert info.value.store == str(store)
    with pytest.raises(StoreChangedError):
        stale.read(level=0)
    # the writer's own dataset reads on after its build
    rw = zv.open(store, mode="r+")
    rw.build_pyramid([2], overwrite=True)
    assert len(rw.read(level=1)) == rw.vertex_count(1) == zv.open(store).vertex_count(1)
