"""Graphs streamed by ``create(target, "graphs")``: the one-shot writer's store, in bounded memory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import zarr_vectors as zv
from tests._oneshot import write_graph_at_once
from tests._streams import peak_of, stored_files
from zarr_vectors.errors import InputError

SPAN = 300.0


def _batches(rng: np.random.Generator, sizes: list[int], objects: bool) -> list[dict[str, Any]]:
    """Batches of vertices with edges between them: a chain through each batch (short edges,
    mostly inside a chunk) and random pairs (mostly across chunks), with edge attributes of one
    value and of two channels; each batch's edges index its own rows."""
    out = []
    for n in sizes:
        pos = rng.uniform(0, SPAN, (n, 3)).astype(np.float32)
        pos[: n // 2] = np.clip(np.cumsum(rng.normal(0, 4, (n // 2, 3)), axis=0) + 150, 0, SPAN - 1)
        pairs = rng.integers(0, n, (n, 2))
        edges = np.concatenate(
            [np.stack([np.arange(n - 1), np.arange(1, n)], 1), pairs[pairs[:, 0] != pairs[:, 1]]]
        )
        batch: dict[str, Any] = {
            "positions": pos,
            "edges": edges,
            "attributes": {"r": rng.random(n).astype(np.float32)},
            "edge_attributes": {
                "weight": rng.random(len(edges)),
                "pair": rng.integers(0, 9, (len(edges), 2)).astype(np.int16),
            },
        }
        if objects:  # ids shared across batches: an object's vertices come in several batches
            batch["object_ids"] = (rng.integers(0, 6, n) * 10**15).astype(np.int64) - 3
        out.append(batch)
    return out


def _one_shot(
    target: Path, batches: list[dict[str, Any]], writer: Any = write_graph_at_once, **kw: Any
) -> None:
    """The batches joined, written by ``writer`` (the former at-once writer, or ``write_graph``)."""
    shift = np.cumsum([0] + [len(b["positions"]) for b in batches])
    writer(
        target,
        np.concatenate([b["positions"] for b in batches]),
        np.concatenate([b["edges"] + s for b, s in zip(batches, shift)]),
        attributes={"r": np.concatenate([b["attributes"]["r"] for b in batches])},
        edge_attributes={
            k: np.concatenate([b["edge_attributes"][k] for b in batches]) for k in ("weight", "pair")
        },
        object_ids=np.concatenate([b["object_ids"] for b in batches]) if "object_ids" in batches[0] else None,
        **kw,
    )


CASES = {
    "undirected-grid-at-close": dict(kw=dict(chunk_shape=75, shards=None), objects=False),
    "directed-grid-up-front": dict(
        kw=dict(
            chunk_shape=(60, 90, 70),
            bounds=([-5, 0, 0], [SPAN, SPAN + 20, SPAN]),
            shards=(2, 2, 3),
            compression="zstd",
            directed=True,
        ),
        objects=True,
    ),
    "auto-chunks-with-objects": dict(kw=dict(shards=None), objects=True),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_streamed_graphs_are_the_one_shot_store_byte_for_byte(tmp_path: Path, case: str) -> None:
    rng = np.random.default_rng(sorted(CASES).index(case))
    spec: dict[str, Any] = CASES[case]
    batches = _batches(rng, [400, 1200, 9, 1500], spec["objects"])
    _one_shot(tmp_path / "one", batches, **spec["kw"])
    _one_shot(tmp_path / "wrapped", batches, zv.write_graph, **spec["kw"])  # the stream, one batch
    with zv.create(tmp_path / "many", "graphs", memory_limit=1 << 20, **spec["kw"]) as w:
        for b in batches:
            w.append(
                b["positions"], b["edges"], **{k: v for k, v in b.items() if k not in ("positions", "edges")}
            )
    one = stored_files(tmp_path / "one")
    for other in ("many", "wrapped"):
        got = stored_files(tmp_path / other)
        assert sorted(one) == sorted(got), other
        differ = [k for k in one if one[k] != got[k]]
        assert not differ, (other, differ[:5])


@pytest.mark.slow
def test_streamed_graphs_with_auto_shards_answer_like_the_one_shot_writer(tmp_path: Path) -> None:
    """Default ``shards="auto"``: only the shard layout may differ (see the skeleton test)."""
    rng = np.random.default_rng(11)
    batches = _batches(rng, [1000, 1500], objects=True)
    _one_shot(tmp_path / "one", batches, chunk_shape=70)
    with zv.create(tmp_path / "many", "graphs", chunk_shape=70, memory_limit=1 << 20) as w:
        w.extend({k: v for k, v in b.items()} for b in batches)
    one, many = zv.open(tmp_path / "one"), zv.open(tmp_path / "many")
    pos = np.concatenate([b["positions"] for b in batches])
    for box in [([0] * 3, [SPAN] * 3), ([100, 120, 90], [200, 230, 260]), ([0, 0, 150], [80, 300, 300])]:
        a, b = many.query(bbox=box), one.query(bbox=box)
        assert np.array_equal(a.positions, b.positions) and np.array_equal(a.edges, b.edges)
        assert np.array_equal(a.edge_attributes["pair"], b.edge_attributes["pair"])
        assert np.array_equal(a.object_ids, b.object_ids)
        inside = np.all((pos >= np.asarray(box[0])) & (pos <= np.asarray(box[1])), axis=1)
        assert len(a.positions) == int(inside.sum())
    for oid in one.object_ids():
        a, b = many.objects([oid]), one.objects([oid])
        assert np.array_equal(a.positions, b.positions) and np.array_equal(a.edges, b.edges)


@pytest.mark.slow
def test_streamed_graph_memory_does_not_grow_with_the_data() -> None:
    """Peak traced allocation of a 4 MiB stream at 6 and 24 batches of 40,000 vertices and
    39,800 edges (1.6 MiB of input each): about the same (the distinct object ids, 200 a
    batch, are the part that grows), and far below the input."""
    peaks = {}
    for count in (6, 24):
        peak, vertices, objects = peak_of("graphs", count, 4 << 20)
        assert (vertices, objects) == (count * 40_000, count * 200)
        peaks[count] = peak
    assert peaks[24] < 14 << 20, peaks
    assert peaks[24] < 1.15 * peaks[6], peaks
    assert peaks[24] < 24 * (1.6 * 2**20) / 3, peaks


def test_streamed_graph_batches_are_checked(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    (b,) = _batches(rng, [60], objects=False)
    with zv.create(tmp_path / "g", "graphs", chunk_shape=50, directed=True) as w:
        w.append(b["positions"], b["edges"], edge_attributes=b["edge_attributes"])
        with pytest.raises(InputError, match="every batch must give the same edge attributes"):
            w.append(b["positions"], b["edges"], edge_attributes={"weight": b["edge_attributes"]["weight"]})
        with pytest.raises(InputError, match="names a vertex outside"):
            w.append(b["positions"][:10], b["edges"], edge_attributes=b["edge_attributes"])
        w.append(
            b["positions"],
            np.zeros((0, 2), np.int64),
            edge_attributes={"weight": [], "pair": np.zeros((0, 2))},
        )
    ds = zv.open(tmp_path / "g")
    assert ds.vertex_count() == 120
    assert len(ds.read().edges) == len(b["edges"])


def test_wrappers_write_an_empty_store_as_the_at_once_writers_did(tmp_path: Path) -> None:
    """No vertices but a grid (bounds and chunk_shape): an empty store, not an error."""
    from tests._oneshot import write_mesh_at_once, write_skeleton_at_once

    grid = dict(bounds=([0] * 3, [1] * 3), chunk_shape=1, shards=None)
    none = np.zeros((0, 3))
    cases = [
        ("graph", zv.write_graph, write_graph_at_once, (none, np.zeros((0, 2), int))),
        ("skeleton", zv.write_skeleton, write_skeleton_at_once, (none, np.zeros(0, int))),
        ("mesh", zv.write_mesh, write_mesh_at_once, (none, np.zeros((0, 3), int))),
    ]
    for name, wrapped, at_once, args in cases:
        at_once(tmp_path / f"{name}-1", *args, **grid)
        assert wrapped(tmp_path / f"{name}-2", *args, **grid).vertex_count() == 0
        assert stored_files(tmp_path / f"{name}-1") == stored_files(tmp_path / f"{name}-2"), name
