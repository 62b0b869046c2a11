"""Sharded stores on S3 (moto): the default there, few objects, box queries in few request waves."""

from __future__ import annotations

import json

import numpy as np
import pytest

import zarr_vectors as zv
from tests._io import count_requests
from tests.conftest import brute_force_box, sorted_rows
from zarr_vectors.storage.resolve import open_backend

pytestmark = pytest.mark.s3


def test_s3_stores_are_sharded_by_default_and_read_in_few_waves(s3_server, rng, tmp_path):
    prefix, options = s3_server
    pos = rng.uniform(0, 1000, (40_000, 3)).astype(np.float32)
    kw = dict(chunk_shape=100, bin_shape=50, bounds=([0.0] * 3, [1000.0] * 3), storage_options=options)
    kw["attributes"] = {"a": rng.random(len(pos)).astype(np.float32)}
    sharded = zv.write_points(f"{prefix}/default.zarr", pos, **kw)
    kw.pop("storage_options")
    zv.write_points(tmp_path / "plain.zarr", pos, shards=None, **kw)  # the same objects unsharded
    doc = json.loads(sharded._store.backend.get_many(["0/vertices/zarr.json"])[0])
    assert doc["codecs"][0]["name"] == "sharding_indexed"
    on_s3 = open_backend(f"{prefix}/default.zarr", read_only=True, storage_options=options).list_keys()
    plain = [p for p in (tmp_path / "plain.zarr").rglob("*") if p.is_file()]
    # Shards sized for a 1 % local append (on this 11^3 grid, 2 cells each): half the objects.
    assert len(on_s3) <= 0.55 * len(plain), (len(on_s3), len(plain))

    ds = zv.open(f"{prefix}/default.zarr", storage_options=options)
    counter = count_requests(ds)
    lo = np.array([300.0, 420.0, 610.0])
    hi = lo + 215.0  # a 1 % box
    got = ds.query(bbox=(lo, hi))
    mask = brute_force_box(pos, lo, hi)
    assert np.array_equal(
        sorted_rows(got.positions, got.attributes["a"]), sorted_rows(pos[mask], kw["attributes"]["a"][mask])
    )
    assert len(counter.ranges) + len(counter.gets) <= 4  # indexes, ranges, the root check
    shards = {k for wave in counter.ranges for k, start, _ in wave if start < 0}
    assert len([r for wave in counter.ranges for r in wave if r[1] < 0]) == len(shards)
