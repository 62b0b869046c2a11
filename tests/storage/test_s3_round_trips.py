"""Round trips of S3 reads, counted by the latency proxy in front of the moto server.

A box query must cost one wave of cell GETs (no HEAD before each: s3fs's default is
overridden) and the one root read of the consistency check; opening reads the metadata
without a HEAD either.
"""

from __future__ import annotations

import uuid

import numpy as np
import pytest

import zarr_vectors as zv
from tests._latency import LatencyProxy
from tests.conftest import brute_force_box, sorted_rows
from zarr_vectors.storage.protocol import CONCURRENCY

pytestmark = pytest.mark.s3


def test_box_query_is_one_wave_of_gets_and_the_root_check(s3_server):
    prefix, options = s3_server
    endpoint = options["client_kwargs"]["endpoint_url"]
    rng = np.random.default_rng(11)
    pos = rng.uniform(0, 1000, (20_000, 3)).astype(np.float32)
    inten = rng.random(len(pos)).astype(np.float32)
    with LatencyProxy(endpoint, delay=0.2) as proxy:  # longer than any stall of the client
        opts = {**options, "client_kwargs": {**options["client_kwargs"], "endpoint_url": proxy.url}}
        url = f"{prefix}/rt-{uuid.uuid4().hex[:8]}.zarr"
        # one object per cell (S3 defaults to shards; tests/storage/test_sharded_s3.py counts those)
        zv.write_points(
            url, pos, chunk_shape=200, attributes={"i": inten}, storage_options=options, shards=None
        )
        with proxy.measure() as opening:
            ds = zv.open(url, storage_options=opts)
            ds.level(0)
        assert set(opening.traffic.by_method()) == {"GET"}, opening.traffic.summary()
        lo, hi = np.array([150.0, 220, 90]), np.array([520.0, 610, 480])
        ds.query((lo, hi))  # connections opened
        with proxy.measure() as window:
            res = ds.query((lo, hi))
        inside = brute_force_box(pos, lo, hi)
        assert np.array_equal(
            sorted_rows(res.positions, res.attributes["i"]), sorted_rows(pos[inside], inten[inside])
        )
        t = window.traffic
        assert t.by_method() == {"GET": t.count}, t.summary()
        cells = 3 * 3 * 3  # chunks of 200 the box touches on each axis
        # vertices and attribute of each cell (fragments where bins prune rows), then zarr.json
        assert 2 * cells + 1 <= t.count <= 3 * cells + 1, t.summary()
        assert all("/c/" in r.path for r in t.requests[:-1])
        assert t.count - 1 < CONCURRENCY  # so every cell read is in flight at once
        assert t.waves == 2, (
            t.summary()
        )  # (depth can exceed it when issuing 50 requests takes longer than the delay)
        assert t.requests[-1].path.endswith("/zarr.json")
