"""Meshes (raw and Draco) streamed by ``create(target, "meshes")``: the one-shot writer's store, in bounded memory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import zarr_vectors as zv
from tests._builders import icosphere
from tests._oneshot import write_mesh_at_once, write_meshes_at_once
from tests._streams import peak_of, stored_files
from tests.conftest import sorted_rows
from zarr_vectors.errors import InputError


def _meshes(rng: np.random.Generator, per_batch: list[int]) -> list[list[tuple[np.ndarray, np.ndarray]]]:
    """Batches of scaled, moved icospheres (642 vertices, 1,280 faces) and a few lone triangles."""
    v, f = icosphere(3, scale=40, offset=0)
    out = []
    for count in per_batch:
        batch = [
            ((v * rng.uniform(0.3, 1.3) + rng.uniform(50, 250, 3)).astype(np.float32), f)
            for _ in range(count)
        ]
        batch.append((rng.uniform(0, 300, (3, 3)).astype(np.float32), np.array([[0, 1, 2]])))
        out.append(batch)
    return out


CASES = {
    "default-ids-grid-at-close": dict(kw=dict(chunk_shape=40, shards=None), ids=False),
    "given-ids-grid-up-front": dict(
        kw=dict(
            chunk_shape=(45, 35, 50),
            bounds=([0, -10, 0], [320, 300, 310]),
            shards=(3, 2, 2),
            compression="zstd",
        ),
        ids=True,
    ),
    "auto-chunks": dict(kw=dict(shards=None, encoding="raw"), ids=True),
    # Draco: a chunk's vertices and inner faces one blob; cross-chunk faces name decoded rows
    "draco-grid-at-close": dict(kw=dict(chunk_shape=40, shards=None, encoding="draco"), ids=False),
    "draco-sharded-ids": dict(
        kw=dict(
            chunk_shape=55, shards=(2, 2, 2), encoding="draco", quantization_bits=14, compression_level=3
        ),
        ids=True,
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_streamed_meshes_are_the_one_shot_store_byte_for_byte(tmp_path: Path, case: str) -> None:
    rng = np.random.default_rng(sorted(CASES).index(case))
    spec: dict[str, Any] = CASES[case]
    batches = _meshes(rng, [2, 1, 4])
    every = [m for b in batches for m in b]
    tables: dict[str, Any] = {}
    ids: list[Any] = [None] * len(batches)
    if spec["ids"]:  # segment-like ids in no order; attributes one row per mesh in the order given
        pool = rng.permutation(1000)[: len(every)].astype(np.uint64) * np.uint64(10**12) + np.uint64(2**60)
        cuts = np.cumsum([len(b) for b in batches])[:-1]
        ids = np.split(pool, cuts)
        tables = dict(object_attributes={"volume": rng.random(len(every)), "label": np.arange(len(every))})
    whole = dict(object_ids=None if not spec["ids"] else np.concatenate(ids), **spec["kw"], **tables)
    write_meshes_at_once(tmp_path / "one", every, **whole)
    zv.write_meshes(tmp_path / "wrapped", every, **whole)  # the stream given every mesh at once
    with zv.create(tmp_path / "many", "meshes", memory_limit=1 << 20, **spec["kw"], **tables) as w:
        for b, i in zip(batches, ids):
            w.append(b, object_ids=i)
    one = stored_files(tmp_path / "one")
    for other in ("many", "wrapped"):
        got = stored_files(tmp_path / other)
        assert sorted(one) == sorted(got), other
        differ = [k for k in one if one[k] != got[k]]
        assert not differ, (other, differ[:5])


def test_streamed_meshes_with_auto_shards_answer_like_the_one_shot_writer(tmp_path: Path) -> None:
    """Default ``shards="auto"``: only the shard layout may differ (see the skeleton test)."""
    rng = np.random.default_rng(5)
    batches = _meshes(rng, [3, 2])
    every = [m for b in batches for m in b]
    write_meshes_at_once(tmp_path / "one", every, chunk_shape=60)
    one = zv.open(tmp_path / "one")
    with zv.create(tmp_path / "many", "meshes", chunk_shape=60, memory_limit=1 << 20) as w:
        w.extend(batches)
    many = zv.open(tmp_path / "many")
    for box in [([0] * 3, [400] * 3), ([80, 90, 100], [200, 210, 220]), ([0, 0, 0], [120, 400, 400])]:
        a, b = many.query(bbox=box), one.query(bbox=box)
        assert np.array_equal(a.positions, b.positions) and np.array_equal(a.faces, b.faces), box
        assert np.array_equal(a.object_ids, b.object_ids)
    for oid, (v, f) in enumerate(every):
        got, want = many.objects([oid]), one.objects([oid])
        assert np.array_equal(got.positions, want.positions) and np.array_equal(got.faces, want.faces)
        triangles = got.positions[got.faces].reshape(len(f), 9)  # the mesh as given, winding kept
        assert np.array_equal(sorted_rows(triangles), sorted_rows(v[f].reshape(len(f), 9)))


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["meshes", "draco-meshes"])
def test_streamed_mesh_memory_does_not_grow_with_the_data(kind: str) -> None:
    """Peak traced allocation of a 4 MiB stream at 6 and 24 batches of 200 meshes (196
    vertices, 338 faces: 2.0 MiB of input a batch), raw and Draco: about the same, far below
    the input (the batch writer joined every batch and ran the one-shot writer: raw, 104 and
    404 MiB)."""
    peaks = {}
    for count in (6, 24):
        peak, vertices, objects = peak_of(kind, count, 4 << 20)
        assert (vertices, objects) == (count * 200 * 196, count * 200)
        peaks[count] = peak
    assert peaks[24] < 20 << 20, peaks
    assert peaks[24] < 1.15 * peaks[6], peaks
    assert peaks[24] < 24 * (2.0 * 2**20) / 3, peaks


def test_streamed_mesh_batches_are_checked(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    (batch,) = _meshes(rng, [2])
    with zv.create(tmp_path / "m", "meshes", chunk_shape=50, bounds=([0] * 3, [400] * 3)) as w:
        w.append(batch, object_ids=[10, 20, 30])
        with pytest.raises(InputError, match="object 20 for several meshes"):
            w.append(batch[:2], object_ids=[40, 20])
        with pytest.raises(InputError, match="object 50 for several meshes"):
            w.append(batch[:2], object_ids=[50, 50])
        with pytest.raises(InputError, match="every batch must give object_ids, or none"):
            w.append(batch[0])
        with pytest.raises(InputError, match="mesh 0: vertices must be"):
            w.append([(batch[0][0].T, batch[0][1])], object_ids=[60])
        w.append(batch[0], object_ids=[70])  # one mesh, not in a list
    ds = zv.open(tmp_path / "m")
    assert ds.object_ids().tolist() == [10, 20, 30, 70]
    with pytest.raises(InputError, match="no meshes were appended"):
        zv.create(tmp_path / "n", "meshes", chunk_shape=50).close()


@pytest.mark.parametrize("encoding", ["raw", "draco"])
def test_write_mesh_is_the_at_once_store_with_vertex_ids_and_attributes(
    tmp_path: Path, encoding: str
) -> None:
    """``write_mesh`` (per-vertex object ids and attributes) goes through the stream as one batch."""
    rng = np.random.default_rng(8)
    pairs = _meshes(rng, [3])[0]
    counts = [len(v) for v, _ in pairs]
    starts = np.cumsum([0] + counts[:-1])
    vertices = np.concatenate([v for v, _ in pairs])
    faces = np.concatenate([f + s for (_, f), s in zip(pairs, starts)])
    kw = dict(
        chunk_shape=45,
        shards=None,
        encoding=encoding,
        object_ids=np.repeat([9, 4, 2, 7], counts),
        attributes={
            "curv": rng.random(len(vertices)).astype(np.float32),
            "rgb": rng.integers(0, 9, (len(vertices), 3)),
        },
    )
    write_mesh_at_once(tmp_path / "one", vertices, faces, **kw)
    zv.write_mesh(tmp_path / "wrapped", vertices, faces, **kw)
    one, got = stored_files(tmp_path / "one"), stored_files(tmp_path / "wrapped")
    assert sorted(one) == sorted(got)
    assert not [k for k in one if one[k] != got[k]]
    with pytest.raises(InputError, match=r"face 0 \[0, 1, 2\] joins vertices of objects \[1, 2\]"):
        zv.write_mesh(tmp_path / "bad", vertices[:3], [[0, 1, 2]], object_ids=[1, 2, 2])
