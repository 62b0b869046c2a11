"""Lines streamed by ``create(target, "lines")``: the one-shot writer's store, in bounded memory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import zarr_vectors as zv
from tests._builders import random_walks
from tests._oneshot import write_lines_at_once
from tests._streams import peak_of, stored_files
from zarr_vectors.errors import InputError


def _batches(rng: np.random.Generator, sizes: list[int]) -> list[dict[str, Any]]:
    """Batches of random walks in [0, 1000), with a per-line (list) attribute."""
    out = []
    for count in sizes:
        walks = [np.clip(w, 0, 999).astype(np.float32) for w in random_walks(rng, count)]
        out.append(
            {"lines": walks, "attributes": {"fa": [rng.random(len(w)).astype(np.float32) for w in walks]}}
        )
    return out


CASES = {
    "polylines-grid-at-close": dict(create="polylines", kw=dict(chunk_shape=90, shards=None), ids=False),
    "streamlines-given-ids": dict(
        create="streamlines",
        kw=dict(
            chunk_shape=(70, 120, 80), bounds=([0] * 3, [1000] * 3), shards=(3, 2, 2), compression="zstd"
        ),
        ids=True,
    ),
    "segments-auto-chunks": dict(create="line", kw=dict(shards=None), ids=True),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_streamed_lines_are_the_one_shot_store_byte_for_byte(tmp_path: Path, case: str) -> None:
    rng = np.random.default_rng(sorted(CASES).index(case))
    spec: dict[str, Any] = CASES[case]
    batches = _batches(rng, [30, 4, 55])
    kind = {"polylines": "polyline", "streamlines": "streamline", "line": "line"}[spec["create"]]
    if kind == "line":  # straight segments: (M, 2, D)
        for b in batches:
            b["lines"] = np.stack([np.stack([w[0], w[-1]]) for w in b["lines"]])
            b["attributes"] = {"fa": rng.random(2 * len(b["lines"])).astype(np.float32)}
    counts = [len(b["lines"]) for b in batches]
    ids: list[Any] = [None] * len(batches)
    tables: dict[str, Any] = {}
    if spec["ids"]:  # small ids with gaps (kept as given) on one side, none on the other
        pool = rng.permutation(5000)[: sum(counts)] * 3 + 1
        ids = np.split(pool, np.cumsum(counts)[:-1])
        tables = dict(object_attributes={"length": rng.random(sum(counts))}, groups=[pool[:4].tolist()])
    every = (
        np.concatenate([b["lines"] for b in batches])
        if kind == "line"
        else [w for b in batches for w in b["lines"]]
    )
    fa: Any = [a for b in batches for a in b["attributes"]["fa"]]  # per line
    if kind == "line":
        fa = np.concatenate([b["attributes"]["fa"] for b in batches])  # per vertex
    whole = dict(
        kind=kind,
        attributes={"fa": fa},
        object_ids=np.concatenate(ids) if spec["ids"] else None,
        **spec["kw"],
        **tables,
    )
    write_lines_at_once(tmp_path / "one", every, **whole)
    zv.write_lines(tmp_path / "wrapped", every, **whole)  # the stream given every line at once
    with zv.create(tmp_path / "many", spec["create"], memory_limit=1 << 20, **spec["kw"], **tables) as w:
        for b, i in zip(batches, ids):
            w.append(b["lines"], attributes=b["attributes"], object_ids=i)
    one = stored_files(tmp_path / "one")
    for other in ("many", "wrapped"):
        got = stored_files(tmp_path / other)
        assert sorted(one) == sorted(got), other
        differ = [k for k in one if one[k] != got[k]]
        assert not differ, (other, differ[:5])


def test_streamed_lines_with_auto_shards_answer_like_the_one_shot_writer(tmp_path: Path) -> None:
    """Default ``shards="auto"``: only the shard layout may differ (see the skeleton test)."""
    rng = np.random.default_rng(9)
    batches = _batches(rng, [40, 25])
    every = [w for b in batches for w in b["lines"]]
    write_lines_at_once(tmp_path / "one", every, chunk_shape=110, kind="streamline")
    one = zv.open(tmp_path / "one")
    with zv.create(tmp_path / "many", "streamlines", chunk_shape=110, memory_limit=1 << 20) as w:
        w.extend(b["lines"] for b in batches)
    many = zv.open(tmp_path / "many")
    assert many.geometry_types == one.geometry_types
    for box in [([0] * 3, [999] * 3), ([100, 200, 150], [500, 600, 700]), ([0, 0, 0], [300, 999, 999])]:
        a, b = many.query(bbox=box), one.query(bbox=box)
        assert np.array_equal(a.positions, b.positions) and np.array_equal(a.line_offsets, b.line_offsets), (
            box
        )
        assert np.array_equal(a.object_ids, b.object_ids)
    for oid, line in enumerate(every):
        assert np.array_equal(many.objects([oid]).positions, line)  # each line back whole, in order


@pytest.mark.slow
def test_streamed_line_memory_does_not_grow_with_the_data() -> None:
    """Peak traced allocation of a 4 MiB stream at 6 and 24 batches of 200 streamlines of 200
    vertices (0.92 MiB of input a batch): about the same, far below the input (the batch
    writer joined every batch and ran the one-shot writer: 29 and 109 MiB)."""
    peaks = {}
    for count in (6, 24):
        peak, vertices, objects = peak_of("streamlines", count, 4 << 20)
        assert (vertices, objects) == (count * 40_000, count * 200)
        peaks[count] = peak
    assert peaks[24] < 12 << 20, peaks
    assert peaks[24] < 1.15 * peaks[6], peaks
    assert peaks[24] < 24 * (0.92 * 2**20) / 2, peaks


def test_streamed_line_batches_are_checked(tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    (b,) = _batches(rng, [3])
    with zv.create(tmp_path / "l", "polylines", chunk_shape=100, bounds=([0] * 3, [999] * 3)) as w:
        w.append(b["lines"], object_ids=[7, 8, 9])
        with pytest.raises(InputError, match="object 8 for several lines"):
            w.append(b["lines"][:2], object_ids=[10, 8])
        with pytest.raises(InputError, match="line 1 has"):
            w.append(b["lines"], attributes={"fa": [np.ones(len(b["lines"][0]))] * 3}, object_ids=[1, 2, 3])
        with pytest.raises(InputError, match="cannot change per batch"):
            w.append(b["lines"], object_ids=[1, 2, 3], kind="streamline")
    ds = zv.open(tmp_path / "l")
    assert ds.object_ids().tolist() == [7, 8, 9] and ds.geometry_types == ("polyline",)
