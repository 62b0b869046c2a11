"""Stores written with ``checksums=True`` (Zarr's crc32c codec on every array) read in the
reference 0.9.2 exactly like stores without them."""

from __future__ import annotations

import json

import numpy as np
import pytest

import zarr_vectors as zv
from tests.conftest import brute_force_box, sorted_rows
from zarr_vectors.format.shards import inner_codecs

pytestmark = pytest.mark.interop


@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_reference_reads_our_checksummed_points(tmp_path, rng, reference, compression):
    pos = rng.uniform(0, 1000, (3000, 3)).astype(np.float32)
    value = rng.random(len(pos)).astype(np.float32)
    oids = rng.integers(0, 50, len(pos))
    weight = rng.random(50)
    store = tmp_path / "ours.zarr"
    zv.write_points(
        store,
        pos,
        chunk_shape=200.0,
        bin_shape=50.0,
        bounds=([0] * 3, [1000] * 3),
        attributes={"intensity": value},
        object_ids=oids,
        object_attributes={"weight": weight},
        compression=compression,
        checksums=True,
    )
    assert inner_codecs(json.loads((store / "0/vertices/zarr.json").read_text()))[-1] == {"name": "crc32c"}
    info = reference.info(store)
    assert info["valid"], info
    full = reference.read_points(tmp_path, store)
    assert np.array_equal(
        sorted_rows(full["positions"], full["attr__intensity"], full["object_ids"]),
        sorted_rows(pos, value, oids),
    )
    assert np.array_equal(full["oattr__weight"], weight)
    lo, hi = np.array([100.0, 250.0, 0.0]), np.array([620.0, 900.0, 480.0])
    box = reference.read_points(tmp_path, store, (lo, hi))
    mask = brute_force_box(pos, lo, hi)
    assert np.array_equal(sorted_rows(box["positions"]), sorted_rows(pos[mask]))


def test_reference_reads_our_checksummed_lines(tmp_path, rng, reference):
    lines = [np.cumsum(rng.normal(0, 8, (40, 3)), axis=0) + 500 for _ in range(12)]
    store = tmp_path / "lines.zarr"
    zv.write_lines(store, lines, chunk_shape=50.0, compression="zstd", checksums=True)
    theirs = reference.read_lines(tmp_path, store, objects=True)
    ours = zv.open(store).objects(np.arange(12))
    assert np.array_equal(sorted_rows(theirs["positions"]), sorted_rows(ours.positions))
