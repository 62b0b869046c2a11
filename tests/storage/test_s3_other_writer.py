"""A store rewritten by another process reads as rewritten when this process opens it again.

fsspec filesystems cache listings per process; a store's levels and link arrays are found by
listing, so a stale listing would pair a new root with old arrays.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import numpy as np
import pytest

import zarr_vectors as zv
from tests.storage.s3server import DUMMY_AWS_ENV

pytestmark = [pytest.mark.s3, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def _chains(oids: list[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One chain of 20 vertices per id, crossing chunks of 25."""
    pos, par, ids = [], [], []
    for o in oids:
        rng = np.random.default_rng(o)
        p = np.clip(np.cumsum(rng.uniform(-9, 9, (20, 3)), axis=0) + rng.uniform(20, 80, 3), 0, 99.9)
        par.append(np.where(np.arange(20) == 0, -1, np.arange(-1, 19) + 20 * len(pos)))
        pos.append(p)
        ids.append(np.full(20, o, np.uint64))
    return np.concatenate(pos), np.concatenate(par), np.concatenate(ids)


_APPEND = """
import json, sys
import zarr_vectors as zv
from tests.storage.test_s3_other_writer import _chains
pos, par, ids = _chains([7, 8])
zv.open(sys.argv[1], "r+", storage_options=json.loads(sys.argv[2])).append(pos, par, object_ids=ids)
"""


def test_reopened_store_lists_what_another_process_wrote(s3_server):
    prefix, so = s3_server
    url = f"{prefix}/other-{uuid.uuid4().hex[:8]}.zarr"
    pos, par, ids = _chains([1, 2, 3])
    zv.write_skeleton(
        url, pos, par, object_ids=ids, chunk_shape=25, bounds=([0] * 3, [100] * 3), storage_options=so
    )
    box = ([0, 0, 0], [100, 100, 100])
    assert len(zv.open(url, storage_options=so).query(bbox=box).positions) == 60  # listings now cached

    env = {**os.environ, **DUMMY_AWS_ENV, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "codecs")])}
    done = subprocess.run(
        [sys.executable, "-c", _APPEND, url, json.dumps(so)],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-2000:]

    ds = zv.open(url, storage_options=so)
    assert ds.object_ids().tolist() == [1, 2, 3, 7, 8]
    everything = ds.query(bbox=box)
    want, _, want_ids = _chains([1, 2, 3, 7, 8])
    got = np.column_stack([everything.positions, everything.object_ids])
    expected = np.column_stack([want, want_ids])
    assert np.array_equal(got[np.lexsort(got.T[::-1])], expected[np.lexsort(expected.T[::-1])])
