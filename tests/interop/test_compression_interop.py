"""Stores written with ``compression="blosc"`` (zarr's blosc codec) and ``compression="lz4"``
(``numcodecs.lz4``) read in the reference 0.9.2 exactly like uncompressed ones; reference
blosc stores read here."""

from __future__ import annotations

import json

import numpy as np
import pytest

import zarr_vectors as zv
from tests.conftest import brute_force_box, sorted_rows
from zarr_vectors.engine.chunks.pipeline import compressor_json
from zarr_vectors.format.shards import inner_codecs

pytestmark = pytest.mark.interop


@pytest.mark.parametrize("compression", ["blosc", "lz4"])
def test_reference_reads_our_compressed_points(tmp_path, rng, reference, compression):
    pos = rng.uniform(0, 1000, (4000, 3)).astype(np.float32)
    value = rng.random(len(pos)).astype(np.float32)
    oids = rng.integers(0, 60, len(pos))
    weight = rng.random(60)
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
    )
    codecs = inner_codecs(json.loads((store / "0/vertices/zarr.json").read_text()))
    assert codecs[1:] == compressor_json(compression)
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
    assert np.array_equal(
        sorted_rows(box["positions"], box["attr__intensity"]), sorted_rows(pos[mask], value[mask])
    )


@pytest.mark.parametrize("compression", ["blosc", "lz4"])
def test_reference_reads_our_compressed_lines(tmp_path, rng, reference, compression):
    lines = [
        (
            np.cumsum(rng.normal(0, 12, (int(rng.integers(5, 90)), 3)), axis=0) + rng.uniform(150, 850, 3)
        ).astype(np.float32)
        for _ in range(30)
    ]
    speed = [rng.random(len(x)).astype(np.float32) for x in lines]
    store = tmp_path / "lines.zarr"
    zv.write_lines(
        store, lines, chunk_shape=100, attributes={"speed": np.concatenate(speed)}, compression=compression
    )
    for doc in (store / "0/links").rglob("*/zarr.json"):
        if json.loads(doc.read_text())["node_type"] == "array":
            want = compressor_json("blosc-bitshuffle" if compression == "blosc" else compression)
            assert inner_codecs(json.loads(doc.read_text()))[1:] == want
    info = reference.info(store)
    assert info["valid"], info
    got = reference.read_lines(tmp_path, store, objects=True)
    o, ids = got["line_offsets"], got["object_ids"]
    assert sorted(ids.tolist()) == list(range(len(lines)))
    for i, oid in enumerate(ids.tolist()):
        assert np.array_equal(got["positions"][o[i] : o[i + 1]], lines[oid])
        assert np.array_equal(got["attr__speed"][o[i] : o[i + 1]], speed[oid])


def test_we_read_reference_blosc_points(tmp_path, rng, reference):
    pos = rng.uniform(0, 500, (3000, 3)).astype(np.float32)
    value = rng.random(len(pos)).astype(np.float32)
    store = tmp_path / "ref.zv"
    npz = tmp_path / "in.npz"
    np.savez(npz, positions=pos, chunk_shape=np.full(3, 100.0), attr__v=value)
    reference.run("write-points", str(npz), str(store), "--writer", "write_points", "--compression", "blosc")
    codecs = json.loads((store / "0/vertices/zarr.json").read_text())["codecs"]
    assert codecs[-1]["name"] == "blosc" and codecs[-1]["configuration"]["shuffle"] == "bitshuffle"
    got = zv.open(store).read()
    assert np.array_equal(sorted_rows(got.positions, got.attributes["v"]), sorted_rows(pos, value))
