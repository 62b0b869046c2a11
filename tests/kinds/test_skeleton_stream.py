"""Skeletons streamed by ``create(target, "skeletons")`` (and ``write_skeleton``, its wrapper):
the store the one-shot writer wrote, in bounded memory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import zarr_vectors as zv
from tests._oneshot import write_skeleton_at_once
from tests._streams import peak_of, stored_files
from zarr_vectors.errors import InputError

SPAN = 400.0


def _tree(rng: np.random.Generator, size: int, branch: int = 12) -> tuple[np.ndarray, np.ndarray]:
    """A neuron-like tree: chains (each vertex the parent of the next) with a branch back to an
    earlier vertex about every ``branch`` vertices; a random walk inside [0, SPAN)."""
    par = np.arange(-1, size - 1)
    jumps = np.flatnonzero(rng.random(size) < 1 / branch)
    jumps = jumps[jumps > 1]
    par[jumps] = [int(rng.integers(0, j - 1)) for j in jumps]
    pos = np.zeros((size, 3))
    pos[0] = rng.uniform(40, SPAN - 40, 3)
    steps = rng.normal(0, 6, (size, 3))
    for i in range(1, size):
        pos[i] = pos[par[i]] + steps[i]
    return np.clip(pos, 0, SPAN - 1e-3).astype(np.float32), par


def _batches(rng: np.random.Generator, sizes: list[list[int]]) -> list[dict[str, Any]]:
    """Batches of whole trees; each batch's parents index its own rows."""
    out = []
    for trees in sizes:
        made = [_tree(rng, s) for s in trees]
        starts = np.cumsum([0] + [len(p) for p, _ in made])
        pos = np.concatenate([p for p, _ in made])
        par = np.concatenate([np.where(q >= 0, q + s, -1) for (_, q), s in zip(made, starts)])
        out.append({"positions": pos, "parents": par, "trees": [int(s) for s in starts[:-1]]})
    return out


def _joined(batches: list[dict[str, Any]], key: str) -> np.ndarray:
    return np.concatenate([b[key] for b in batches])


def _joined_parents(batches: list[dict[str, Any]]) -> np.ndarray:
    shift = np.cumsum([0] + [len(b["positions"]) for b in batches])
    return np.concatenate([np.where(b["parents"] >= 0, b["parents"] + s, -1) for b, s in zip(batches, shift)])


def _with_ids(rng: np.random.Generator, batches: list[dict[str, Any]], spanning: bool) -> None:
    """uint64 segment ids near 7.2e17, one per tree, in no order; ``spanning``: the first tree
    of every batch shares its object with the last tree of the batch before (an object across
    batches, as a lab's several SWC files of one neuron)."""
    pool = rng.permutation(10_000)[:1000].astype(np.uint64) + np.uint64(720_575_940_379_000_000)
    at = 0
    for k, b in enumerate(batches):
        n, starts = len(b["positions"]), b["trees"]
        counts = np.diff(np.append(starts, n))
        tree_ids = pool[at : at + len(starts)].copy()
        if spanning and k:
            tree_ids[0] = batches[k - 1]["object_ids"][-1]
        at += len(starts)
        b["object_ids"] = np.repeat(tree_ids, counts)


CASES = {
    # grid fixed at close from the batches' extent, unsharded, default ids (one object per tree)
    "grid-at-close": dict(kw=dict(chunk_shape=40, shards=None), ids=None),
    # grid up front, sharded, compressed, large uint64 ids, attributes, tables, spills on disk
    "grid-up-front": dict(
        kw=dict(
            chunk_shape=(40, 50, 30),
            bounds=([-10, -20, 0], [SPAN + 5, SPAN, SPAN + 30]),
            shards=(2, 3, 2),
            compression="zstd",
        ),
        ids="given",
    ),
    # chunk_shape sized at close from a sample of the waiting batches; checksums
    "auto-chunks": dict(kw=dict(shards=None, checksums=True), ids=None),
    # objects whose trees come in two batches
    "objects-across-batches": dict(kw=dict(chunk_shape=35, shards=(4, 4, 4)), ids="spanning"),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_streamed_skeletons_are_the_one_shot_store_byte_for_byte(tmp_path: Path, case: str) -> None:
    rng = np.random.default_rng(sorted(CASES).index(case))
    spec: dict[str, Any] = CASES[case]
    kw = dict(spec["kw"])
    batches = _batches(rng, [[400, 900, 60], [1200], [5, 700, 700, 30], [2500, 300]])
    if spec["ids"] is not None:
        _with_ids(rng, batches, spec["ids"] == "spanning")
    for b in batches:
        n = len(b["positions"])
        b["attributes"] = {
            "radius": rng.random(n).astype(np.float32),
            "type": rng.integers(0, 5, n).astype(np.uint8),
            "rgb": rng.integers(0, 255, (n, 3)).astype(np.uint8),
        }
    tables: dict[str, Any] = {}
    if spec["ids"] == "given":
        ids = np.unique(_joined(batches, "object_ids"))
        tables = dict(
            object_attributes={"soma": {int(i): float(k) for k, i in enumerate(ids[::2])}},
            groups={7: ids[:3].tolist(), 3: ids[3:5].tolist()},
        )
    attributes = {k: np.concatenate([b["attributes"][k] for b in batches]) for k in ("radius", "type", "rgb")}
    whole = dict(
        attributes=attributes,
        object_ids=None if spec["ids"] is None else _joined(batches, "object_ids"),
        **kw,
        **tables,
    )
    pos, par = _joined(batches, "positions"), _joined_parents(batches)
    write_skeleton_at_once(tmp_path / "one", pos, par, **whole)
    zv.write_skeleton(tmp_path / "wrapped", pos, par, **whole)  # the stream given every tree at once
    with zv.create(tmp_path / "many", "skeletons", memory_limit=1 << 20, **kw, **tables) as w:
        for b in batches:
            w.append(b["positions"], b["parents"], attributes=b["attributes"], object_ids=b.get("object_ids"))
    one = stored_files(tmp_path / "one")
    for other in ("many", "wrapped"):
        got = stored_files(tmp_path / other)
        assert sorted(one) == sorted(got), other
        differ = [k for k in one if one[k] != got[k]]
        assert not differ, (other, differ[:5])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["many", "one", "wrapped"]  # no spill folder left


def _answers(ds: zv.Dataset, box: Any) -> tuple[np.ndarray, ...]:
    r = ds.query(bbox=box)
    return r.positions, r.parents, r.attributes["radius"], r.object_ids


def test_streamed_skeletons_with_auto_shards_answer_like_the_one_shot_writer(tmp_path: Path) -> None:
    """Default ``shards="auto"``: the stream sizes shards before any cell is encoded (from the
    raw row size, whole trailing rows of chunks per shard, as the point stream does), the
    one-shot writer from its encoded vertex cells; only the shard layout may differ, every
    answer is the same."""
    rng = np.random.default_rng(7)
    batches = _batches(rng, [[800, 300], [1500, 40], [900]])
    _with_ids(rng, batches, spanning=False)
    for b in batches:
        b["attributes"] = {"radius": rng.random(len(b["positions"])).astype(np.float32)}
    pos, par = _joined(batches, "positions"), _joined_parents(batches)
    radius = np.concatenate([b["attributes"]["radius"] for b in batches])
    ids = _joined(batches, "object_ids")
    write_skeleton_at_once(
        tmp_path / "one", pos, par, chunk_shape=45, attributes={"radius": radius}, object_ids=ids
    )
    one = zv.open(tmp_path / "one")
    with zv.create(tmp_path / "many", "skeletons", chunk_shape=45, memory_limit=1 << 20) as w:
        w.extend((b["positions"], b["parents"]) for b in batches[:0])
        for b in batches:
            w.append(b["positions"], b["parents"], attributes=b["attributes"], object_ids=b["object_ids"])
    many = zv.open(tmp_path / "many")
    lo, hi = pos.min(axis=0), pos.max(axis=0)
    boxes = [
        (lo, hi),
        ([50, 60, 70], [220, 260, 300]),
        ([0, 0, 0], [90, 90, 90]),
        ([200, 10, 150], [400] * 3),
    ]
    for box in boxes:
        got, want = _answers(many, box), _answers(one, box)
        for g, w_ in zip(got, want):
            assert np.array_equal(g, w_), box
        inside = np.all((pos >= np.asarray(box[0])) & (pos <= np.asarray(box[1])), axis=1)
        assert len(got[0]) == int(inside.sum())
        assert np.array_equal(np.sort(got[3]), np.sort(ids[inside]))
    for oid in np.unique(ids)[::3]:
        a, b = many.objects([oid]), one.objects([oid])
        assert np.array_equal(a.positions, b.positions) and np.array_equal(a.parents, b.parents)
        assert np.array_equal(a.positions, pos[ids == oid])  # a whole tree comes back in input order
    assert np.array_equal(many.object_ids(), one.object_ids())


@pytest.mark.slow
def test_streamed_skeleton_memory_does_not_grow_with_the_data() -> None:
    """Peak traced allocation of a 4 MiB stream (batches of 200 trees of 200 nodes: 0.94 MiB of
    input each) at 6 and 24 batches: the same, and far below the input (the one-shot path
    joined every batch: 33 and 125 MiB)."""
    peaks = {}
    for count in (6, 24):
        peak, vertices, objects = peak_of("skeletons", count, 4 << 20)
        assert (vertices, objects) == (count * 40_000, count * 200)
        peaks[count] = peak
    input_bytes = 24 * 40_000 * 24  # float32 positions, int64 parents, float32 radius
    assert peaks[24] < 12 << 20, peaks
    assert peaks[24] < 1.15 * peaks[6], peaks
    assert peaks[24] < input_bytes / 2, peaks


def test_streamed_skeleton_batches_are_checked(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    (b,) = _batches(rng, [[50, 50]])
    box = dict(chunk_shape=50, bounds=([0] * 3, [SPAN] * 3))
    with zv.create(tmp_path / "a", "skeletons", **box) as w:
        w.append(b["positions"], b["parents"], object_ids=np.repeat([5, 6], 50))
        with pytest.raises(InputError, match="every batch must give object_ids, or none"):
            w.append(b["positions"], b["parents"])
        with pytest.raises(InputError, match="lie outside"):
            w.append(b["positions"] + SPAN, b["parents"], object_ids=np.repeat([7, 8], 50))
        crossing = b["parents"].copy()
        crossing[50] = 49  # the second tree's root hangs from the first tree, in another object
        with pytest.raises(InputError, match="has parent 49 in object 1"):
            w.append(b["positions"], crossing, object_ids=np.repeat([1, 2], 50))
        with pytest.raises(InputError, match="attributes"):
            w.append(
                b["positions"], b["parents"], attributes={"r": np.ones(100)}, object_ids=np.repeat([1, 2], 50)
            )
    assert zv.open(tmp_path / "a").vertex_count() == 100  # refused batches left nothing behind
    with pytest.raises(InputError, match="no skeletons were appended"):
        zv.create(tmp_path / "b", "skeletons", chunk_shape=50).close()
    with pytest.raises(InputError, match="unknown keywords"):
        zv.create(tmp_path / "c", "skeletons", chunk_shape=50, directed=True)
    w = zv.create(tmp_path / "d", "skeletons", chunk_shape=50, memory_limit=1 << 20)
    w.append(b["positions"], b["parents"])
    w.abort()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a"]


def test_streamed_skeleton_ids_keep_the_first_batch_dtype(tmp_path: Path) -> None:
    """uint64 ids after int64 ones are taken when they fit int64 (and refused when not)."""
    rng = np.random.default_rng(6)
    a, b = _batches(rng, [[40], [30]])
    with zv.create(tmp_path / "s", "skeletons", chunk_shape=60, memory_limit=1 << 20) as w:
        w.append(a["positions"], a["parents"], object_ids=np.full(40, 2**40, np.int64))
        w.append(b["positions"], b["parents"], object_ids=np.full(30, 5, np.uint64))
        with pytest.raises(InputError, match="do not fit the first batch's int64"):
            w.append(b["positions"], b["parents"], object_ids=np.full(30, 2**63, np.uint64))
    ds = zv.open(tmp_path / "s")
    assert ds.object_ids().tolist() == [5, 2**40]
    assert np.array_equal(ds.objects([5]).positions, b["positions"])
