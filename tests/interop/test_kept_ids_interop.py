"""Small sparse ids both ways with the reference 0.9.2 (DECISIONS 8 as amended, issue 30).

The issue's case: 40 objects with ids 3, 10, 17, ... 276. They are stored as the OIDs
themselves (no ``object_id`` table, objects 0, 1, 2, 4, ... empty), so the reference's
``select(objects=[3])`` returns object 3's points; and the reference's own store of such
ids reads back here by the same ids.
"""

from __future__ import annotations

import numpy as np
import pytest

import zarr_vectors as zv
from tests.conftest import sorted_rows

pytestmark = [pytest.mark.interop, pytest.mark.slow]

SPARSE = np.arange(3, 277, 7)  # 40 ids with gaps


def _cloud(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    pos = rng.uniform(0, 1000, (4000, 3)).astype(np.float32)
    return pos, SPARSE[rng.integers(0, len(SPARSE), len(pos))]


def test_reference_reads_our_sparse_small_ids_by_the_same_ids(tmp_path, rng, reference):
    pos, oid = _cloud(rng)
    volume = rng.random(len(SPARSE))
    store = tmp_path / "ours.zarr"
    zv.write_points(
        store, pos, chunk_shape=250, bin_shape=125, object_ids=oid, object_attributes={"volume": volume}
    )
    info = reference.info(store)
    assert info["valid"], info
    assert "object_id" not in (info["levels"][0]["object_attributes"] or [])
    for i in (3, 122, 276):
        got = reference.read_points(tmp_path, store, ids=[i])
        assert np.array_equal(sorted_rows(got["positions"]), sorted_rows(pos[oid == i])), i
        assert set(got["object_ids"].tolist()) == {i}
        assert np.array_equal(got["oattr__volume"][SPARSE], volume)  # rows at the ids themselves
    members = reference.read_objects(tmp_path, store)
    assert sorted(members) == SPARSE.tolist()
    for i, rows in members.items():
        assert np.array_equal(sorted_rows(rows), sorted_rows(pos[oid == i])), i


def test_reference_reads_our_sparse_small_ids_on_skeletons(tmp_path, rng, reference):
    ids = SPARSE[[0, 17, 39]]  # 3, 122, 276
    n = 40
    pos = np.concatenate([np.cumsum(rng.normal(0, 8, (n, 3)), 0) + 100 * k + 300 for k in range(3)])
    pos = pos.astype(np.float32)
    par = np.concatenate([np.r_[-1, np.arange(n * k, n * k + n - 1)] for k in range(3)])
    oid = np.repeat(ids, n)
    store = tmp_path / "skel.zarr"
    zv.write_skeleton(store, pos, par, chunk_shape=40, object_ids=oid)
    assert reference.info(store)["valid"]
    members = reference.read_objects(tmp_path, store)
    assert sorted(members) == ids.tolist()
    for i, rows in members.items():
        assert np.array_equal(sorted_rows(rows), sorted_rows(pos[oid == i])), i


def test_we_read_the_references_sparse_ids(tmp_path, rng, reference):
    pos, oid = _cloud(rng)
    store = tmp_path / "ref.zv"
    reference.write_points(
        tmp_path,
        store,
        positions=pos,
        chunk_shape=np.full(3, 250.0),
        bin_shape=np.full(3, 125.0),
        bounds=np.array([[0.0] * 3, [1000.0] * 3]),
        object_ids=oid,
    )
    ds = zv.open(store)
    assert ds.num_objects() == 277 and "object_id" not in ds.level(0).object_attributes
    for i in SPARSE.tolist():
        got = ds.objects([i])
        assert np.array_equal(sorted_rows(got.positions), sorted_rows(pos[oid == i])), i
        assert set(got.object_ids.tolist()) == {i}
    assert len(ds.objects([4]).positions) == 0
    full = ds.read()
    assert np.array_equal(sorted_rows(full.positions, full.object_ids), sorted_rows(pos, oid))
