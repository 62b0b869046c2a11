"""Requests of a sharded ingest over HTTP, counted by the latency proxy (20 ms a request):
they grow with the shards and minishards touched, not with the objects, because the
entries of one minishard are read as one coalesced request per batch (without coalescing,
303 requests for the 300 objects; with it, 5)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import zarr_vectors as zv
from tests._latency import LatencyProxy, StaticServer
from zarr_vectors.io.neuroglancer import ingest_neuroglancer
from zarr_vectors.neuroglancer import export_neuroglancer
from zarr_vectors.neuroglancer.precomputed_read import parse_sharding
from zarr_vectors.neuroglancer.precomputed_source import PrecomputedSource, coalesce
from zarr_vectors.neuroglancer.sharded_read import locate_keys

N = 300


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path, np.ndarray]]:
    d = tmp_path_factory.mktemp("ngreq")
    rng = np.random.default_rng(2)
    ids = np.sort(rng.choice(2**62, N, replace=False).astype(np.uint64) + np.uint64(2**63))
    m = 4
    pos = rng.uniform(0, 1000, (N * m, 3)).astype(np.float32)
    parents = np.tile(np.arange(-1, m - 1), N) + np.repeat(np.arange(N) * m, m) * (
        np.tile(np.arange(m), N) > 0
    )
    zv.write_skeleton(d / "cells.zarr", pos, parents, chunk_shape=250.0, object_ids=np.repeat(ids, m))
    export_neuroglancer(d / "cells.zarr", d / "ng", sharding=True)
    with StaticServer(d / "ng", listings=False) as server:
        yield server.url, d / "ng" / "cells", ids


@pytest.mark.slow
def test_requests_grow_with_minishards_not_objects(
    served: tuple[str, Path, np.ndarray], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, local, ids = served
    info = json.loads((local / "skeletons" / "info").read_text())
    spec = parse_sharding(info["sharding"], "info")
    assert spec is not None
    shard, mini = locate_keys(ids, spec)
    shards, minis = len(set(shard.tolist())), len(set(zip(shard.tolist(), mini.tolist())))
    read, batches = PrecomputedSource.read, []

    def counting(self: PrecomputedSource, *args: object, **kwargs: object) -> object:
        batches.append(1)
        return read(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(PrecomputedSource, "read", counting)
    with LatencyProxy(url, delay=0.02) as proxy:
        with proxy.measure() as window:
            ds = ingest_neuroglancer(
                f"{proxy.url}/cells", tmp_path / "in.zarr", progress=False, chunk_shape=250.0
            )
    assert ds.object_ids().tolist() == ids.tolist()
    paths = [r.path for r in window.traffic.requests]
    on_shards = sum(p.endswith(".shard") for p in paths)
    # every shard index, every minishard index once; then per batch one data request per
    # minishard holding objects of the batch
    assert shards + minis < on_shards <= shards + minis + minis * len(batches), (on_shards, shards, minis)
    assert len(paths) - on_shards <= 8, paths  # info probes and segment properties, whatever N
    assert on_shards < N / 4


def test_coalesce_joins_near_ranges_of_one_file() -> None:
    files = {"a": np.arange(20_000_000, dtype=np.uint8).tobytes(), "b": bytes(range(50))}
    ranges = [("a", 100, 10), ("b", 0, 5), ("a", 0, 50), ("a", 60, 20), ("a", 10_000_000, 4), ("b", 7, None)]
    requests, pieces = coalesce(ranges)
    assert requests == [("a", 0, 110), ("a", 10_000_000, 4), ("b", 0, 5), ("b", 7, None)]
    bodies = [files[n][s:] if k is None else files[n][s : s + k] for n, s, k in requests]
    for (name, start, length), (k, lo, hi) in zip(ranges, pieces):
        want = files[name][start:] if length is None else files[name][start : start + length]
        assert bodies[k][lo:hi] == want
