"""Stores with the user's object ids (uint64 segment ids near 7.2e17) read by the reference 0.9.2.

The reference knows nothing of the id map: it sees dense OIDs ``0 .. B-1`` and an ordinary
object attribute ``object_id`` (DECISIONS 8). Each OID's vertices, as its manifest lists
them, must be exactly the vertices written under the user's id ``object_id[OID]``.
"""

from __future__ import annotations

import numpy as np
import pytest

import zarr_vectors as zv
from tests.conftest import sorted_rows

pytestmark = pytest.mark.interop

SEG = np.uint64(720575940621039145)


def _ids(rng: np.random.Generator, k: int) -> np.ndarray:
    return SEG + rng.choice(10**9, k, replace=False).astype(np.uint64)


def _check_objects(
    members: dict[int, np.ndarray], table: np.ndarray, pos: np.ndarray, oid: np.ndarray
) -> None:
    """Reference OID -> rows matches our user id -> rows, exactly, through ``table``."""
    assert sorted(members) == list(range(len(table)))
    for k, rows in members.items():
        want = pos[oid == table[k]]
        assert np.array_equal(sorted_rows(rows), sorted_rows(want)), table[k]


def test_reference_reads_points_with_segment_ids(tmp_path, rng, reference):
    ids = _ids(rng, 25)
    pos = rng.uniform(0, 1000, (4000, 3)).astype(np.float32)
    oid = ids[rng.integers(0, len(ids), len(pos))]
    volume = rng.random(len(ids))
    store = tmp_path / "ours.zarr"
    zv.write_points(
        store, pos, chunk_shape=250, bin_shape=125, object_ids=oid, object_attributes={"volume": volume}
    )
    info = reference.info(store)
    assert info["valid"], info
    assert info["levels"][0]["object_attributes"] and "object_id" in info["levels"][0]["object_attributes"]
    got = reference.read_points(tmp_path, store)
    table = got["oattr__object_id"]
    assert table.dtype == np.uint64 and np.array_equal(table, np.sort(ids))
    assert np.array_equal(got["oattr__volume"], volume)  # rows per distinct id, ascending, as given
    # Per vertex, the reference reports the OID; through the table it is the id we wrote.
    by_pos = {tuple(p): int(o) for p, o in zip(pos.tolist(), oid.tolist())}
    assert [int(table[o]) for o in got["object_ids"]] == [by_pos[tuple(p)] for p in got["positions"].tolist()]
    _check_objects(reference.read_objects(tmp_path, store), table, pos, oid)


def test_reference_reads_skeletons_and_meshes_with_segment_ids(tmp_path, rng, reference):
    import trimesh

    ids = _ids(rng, 4)
    n = 60
    pos = np.concatenate([np.cumsum(rng.normal(0, 8, (n, 3)), axis=0) + 100 * k + 300 for k in range(4)])
    pos = pos.astype(np.float32)
    par = np.concatenate([np.r_[-1, np.arange(n * k, n * k + n - 1)] for k in range(4)])
    oid = np.repeat(ids, n)
    sk = tmp_path / "skel.zarr"
    zv.write_skeleton(sk, pos, par, chunk_shape=40, object_ids=oid)
    assert reference.info(sk)["valid"]
    graph = reference.read_graph(tmp_path, sk)
    table = graph["oattr__object_id"]
    assert table.dtype == np.uint64 and np.array_equal(table, np.sort(ids))
    _check_objects(reference.read_objects(tmp_path, sk), table, pos, oid)

    meshes = [
        trimesh.creation.icosphere(subdivisions=2, radius=3 + k).apply_translation([12.0 * k, 0, 0])
        for k in range(3)
    ]
    me = tmp_path / "mesh.zarr"
    mesh_ids = ids[[2, 0, 3]]
    zv.write_meshes(me, meshes, chunk_shape=5, object_ids=mesh_ids)
    assert reference.info(me)["valid"]
    mesh = reference.read_mesh(tmp_path, me, objects=True)
    table = mesh["oattr__object_id"]
    assert np.array_equal(table, np.sort(mesh_ids))
    vpos = np.concatenate([np.asarray(m.vertices) for m in meshes])
    voids = np.repeat(mesh_ids, [len(m.vertices) for m in meshes])
    o, p = mesh["object_offsets"], mesh["object_positions"]
    members = {int(k): p[o[i] : o[i + 1]] for i, k in enumerate(mesh["object_list"])}
    _check_objects(members, table, vpos.astype(p.dtype), voids)
