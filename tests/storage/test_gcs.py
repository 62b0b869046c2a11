"""``gs://`` stores through gcsfs, against the gcp-storage-emulator server on 127.0.0.1.

Write, reopen and query: every answer equals numpy brute force; overwrite replaces the store;
validate lists the bucket. Skipped (with the reason) only when gcsfs or the emulator is not
installed.
"""

from __future__ import annotations

import uuid

import numpy as np
import pytest

import zarr_vectors as zv
from tests.conftest import brute_force_box, sorted_rows

pytestmark = pytest.mark.slow


def test_points_write_reopen_query_overwrite(gcs_server):
    prefix, options = gcs_server
    url = f"{prefix}/p-{uuid.uuid4().hex[:8]}.zarr"
    rng = np.random.default_rng(3)
    pos = rng.uniform(0, 1000, (4000, 3)).astype(np.float32)
    ids = rng.integers(0, 50, len(pos))
    inten = rng.random(len(pos)).astype(np.float32)
    zv.write_points(
        url, pos, chunk_shape=250, object_ids=ids, attributes={"i": inten}, storage_options=options
    )
    ds = zv.open(url, storage_options=options)
    for _ in range(4):
        lo = rng.uniform(0, 700, 3)
        hi = lo + rng.uniform(100, 300, 3)
        got = ds.query((lo, hi))
        inside = brute_force_box(pos, lo, hi)
        assert np.array_equal(
            sorted_rows(got.positions, got.object_ids, got.attributes["i"]),
            sorted_rows(pos[inside], ids[inside], inten[inside]),
        )
    assert np.array_equal(sorted_rows(ds.objects([7]).positions), sorted_rows(pos[ids == 7]))
    assert zv.validate(url, storage_options=options).ok
    with pytest.raises(zv.StoreExistsError):
        zv.write_points(url, pos, chunk_shape=250, storage_options=options)
    zv.write_points(url, pos[:10], chunk_shape=500, overwrite=True, storage_options=options)
    again = zv.open(url, storage_options=options)
    assert len(again.read()) == 10 and again.level(0).vertex_attributes == {}


def test_mesh_on_gcs(gcs_server):
    from tests._builders import icosphere

    prefix, options = gcs_server
    url = f"{prefix}/m-{uuid.uuid4().hex[:8]}.zarr"
    v, f = icosphere(2, 499.0, 500.0)
    zv.write_mesh(url, v, f, chunk_shape=250, storage_options=options)
    ds = zv.open(url, storage_options=options)
    whole = ds.objects([0])
    assert len(whole.faces) == len(f) and np.array_equal(sorted_rows(whole.positions), sorted_rows(v))
    lo, hi = np.array([0.0, 0, 0]), np.array([600.0, 600, 600])
    got = ds.query((lo, hi))
    assert np.array_equal(sorted_rows(got.positions), sorted_rows(v[brute_force_box(v, lo, hi)]))
