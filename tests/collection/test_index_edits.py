"""The relationship index kept current by edits (only the touched buckets rewritten) and built
in bounded memory (spilled build equal byte for byte to the in-memory one)."""

from __future__ import annotations

import json
import os
import shutil
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import zarr_vectors as zv
from zarr_vectors.collection import index as rel_index
from zarr_vectors.storage import open_backend

INDEX = Path("zv_relationships")


@pytest.fixture
def small_buckets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rel_index, "BUCKET_ROWS", 10)
    monkeypatch.setattr(rel_index, "BUILD_BATCH", 4)


def _files(root: Path) -> dict[str, bytes]:
    return {
        os.path.relpath(os.path.join(d, f), root): Path(d, f).read_bytes()
        for d, _, fs in os.walk(root)
        for f in fs
    }


def _stats(root: Path) -> dict[str, tuple[int, int]]:
    out = {}
    for d, _, fs in os.walk(root):
        for f in fs:
            st = os.stat(os.path.join(d, f))
            out[os.path.relpath(os.path.join(d, f), root)] = (st.st_ino, st.st_mtime_ns)
    return out


def _rebuilt(member: Path, tmp: Path, attribute: str, memory_limit: int | None = None) -> dict[str, bytes]:
    """The index files of ``attribute`` as a fresh build of a copy of ``member`` writes them
    (with the bucket count of the member's index: edits keep the count the build chose)."""
    meta = rel_index.index_attributes(open_backend(member, read_only=True), attribute)
    assert meta is not None
    copy = tmp / f"copy-{attribute}"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(member, copy)
    rel_index.build_index(
        zv.open(copy), copy, attribute, memory_limit=memory_limit, bucket_bits_=meta["bucket_bits"]
    )
    return _files(copy / INDEX / attribute)


class Truth:
    """The member's rows as numpy arrays, edited alongside it."""

    def __init__(self, oid: np.ndarray, pos: np.ndarray, post: np.ndarray, pre: np.ndarray) -> None:
        self.oid, self.pos, self.post, self.pre = oid, pos, post, pre

    def drop(self, ids: np.ndarray) -> None:
        keep = ~np.isin(self.oid, ids)
        self.oid, self.pos, self.post, self.pre = (a[keep] for a in (self.oid, self.pos, self.post, self.pre))

    def add(self, oid: np.ndarray, pos: np.ndarray, post: np.ndarray, pre: np.ndarray) -> None:
        self.oid = np.concatenate([self.oid, oid])
        self.pos = np.concatenate([self.pos, pos])
        self.post = np.concatenate([self.post, post])
        self.pre = np.concatenate([self.pre, pre])

    def check(self, coll: Any, ids: list[int]) -> None:
        for attr, vals in (("post_segment", self.post), ("pre_segment", self.pre)):
            res = coll.related(ids, attr)
            got = sorted(
                zip(
                    res.attributes[attr].tolist(),
                    res.object_ids.tolist(),
                    map(tuple, res.positions.tolist()),
                    res.attributes["pre_segment" if attr == "post_segment" else "post_segment"].tolist(),
                )
            )
            other = self.pre if attr == "post_segment" else self.post
            m = np.isin(vals, np.array(ids, np.uint64))
            want = sorted(
                zip(
                    vals[m].tolist(),
                    self.oid[m].tolist(),
                    map(tuple, self.pos[m].tolist()),
                    other[m].tolist(),
                )
            )
            assert got == want
            # Grouped by id in the order asked.
            firsts = [i for i in ids if i in set(vals[m].tolist())]
            seen = list(dict.fromkeys(res.attributes[attr].tolist()))
            assert seen == list(dict.fromkeys(firsts))


def _batch(
    rng: np.random.Generator, oids: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Rows for objects ``oids`` (1 to 3 points each), ids near 2**64 and small."""
    per = rng.integers(1, 4, len(oids))
    oid = np.repeat(oids, per)
    pos = rng.uniform(0, 40, (len(oid), 3)).astype("float32")
    post = np.uint64(2**64 - 1) - rng.integers(0, 25, len(oid)).astype(np.uint64)
    pre = rng.integers(0, 30, len(oid)).astype(np.uint64)
    return oid, pos, post, pre


def _member(tmp_path: Path, n_objects: int, seed: int) -> tuple[Any, Truth, np.random.Generator]:
    rng = np.random.default_rng(seed)
    oid, pos, post, pre = _batch(rng, np.arange(n_objects, dtype=np.uint64) + np.uint64(2**63))
    coll = zv.create_collection(tmp_path / "c.zarr", id_spaces=["segments", "synapses"])
    coll.add_member(
        "syn",
        "points",
        pos,
        chunk_shape=10,
        bounds=([0, 0, 0], [40, 40, 40]),
        object_ids=oid,
        attributes={"post_segment": post, "pre_segment": pre},
        id_space="synapses",
        relationships={"post_segment": "segments", "pre_segment": "segments"},
    )
    return coll, Truth(oid, pos, post, pre), rng


@pytest.mark.parametrize(
    ("seed", "steps"),
    [(1, 4), pytest.param(2, 10, marks=pytest.mark.slow), pytest.param(3, 10, marks=pytest.mark.slow)],
)
def test_random_edits_equal_a_rebuild_and_numpy(
    tmp_path: Path, small_buckets: None, seed: int, steps: int
) -> None:
    """Each of append, append extending objects, delete and replace, in turn: after every edit
    the index files equal a fresh build's and related() equals numpy."""
    coll, truth, rng = _member(tmp_path, 40, seed)
    member = tmp_path / "c.zarr" / "syn"
    next_id = 2**63 + 1000
    for step in range(steps):
        op = ["append", "delete", "replace", "extend"][(step + seed) % 4]
        held = np.unique(truth.oid)
        if op == "append":
            new = np.arange(next_id, next_id + 5, dtype=np.uint64)
            next_id += 5
            oid, pos, post, pre = _batch(rng, new)
            coll.append("syn", pos, object_ids=oid, attributes={"post_segment": post, "pre_segment": pre})
            truth.add(oid, pos, post, pre)
        elif op == "extend":
            oid, pos, post, pre = _batch(rng, rng.choice(held, 3, replace=False))
            coll.append(
                "syn", pos, object_ids=oid, attributes={"post_segment": post, "pre_segment": pre}, extend=True
            )
            truth.add(oid, pos, post, pre)
        elif op == "delete":
            gone = rng.choice(held, 4, replace=False)
            coll.delete("syn", gone.tolist())
            truth.drop(gone)
        else:
            ids = rng.choice(held, 3, replace=False)
            oid, pos, post, pre = _batch(rng, ids)
            coll.replace(
                "syn",
                ids.tolist(),
                pos,
                object_ids=oid,
                attributes={"post_segment": post, "pre_segment": pre},
            )
            truth.drop(ids)
            truth.add(oid, pos, post, pre)
        for attr in ("post_segment", "pre_segment"):
            assert _files(member / INDEX / attr) == _rebuilt(member, tmp_path, attr), (step, op, attr)
        asked = [int(v) for v in rng.choice(np.concatenate([truth.post, truth.pre]), 4)] + [12345]
        truth.check(coll, asked)


def test_an_edit_rewrites_only_the_buckets_of_its_values(tmp_path: Path, small_buckets: None) -> None:
    coll, truth, rng = _member(tmp_path, 80, 5)
    root = tmp_path / "c.zarr" / "syn" / INDEX / "post_segment"
    meta = rel_index.index_attributes(
        open_backend(tmp_path / "c.zarr" / "syn", read_only=True), "post_segment"
    )
    assert meta is not None and meta["bucket_bits"] >= 4  # many buckets
    before = _stats(root)
    gone = np.unique(truth.oid)[:1]  # one object: 1 to 3 rows
    values = np.unique(truth.post[np.isin(truth.oid, gone)])
    coll.delete("syn", gone.tolist())
    touched = {str(b) for b in rel_index.bucket_of(values, meta["bucket_bits"]).tolist()}
    after = _stats(root)
    changed = {k.split("/")[0] for k in before if before[k] != after.get(k)}
    assert changed == touched | {"counts", "zarr.json"}
    assert 1 <= len(touched) <= 3 < 2 ** meta["bucket_bits"] // 4


def test_appends_without_object_ids_update_in_place(tmp_path: Path, small_buckets: None) -> None:
    rng = np.random.default_rng(3)
    pos = rng.uniform(0, 40, (90, 3))
    post = rng.integers(0, 40, 90).astype(np.int32)
    coll = zv.create_collection(tmp_path / "c.zarr", id_spaces=["segments"])
    coll.add_member(
        "s",
        "points",
        pos,
        chunk_shape=10,
        bounds=([0, 0, 0], [40, 40, 40]),
        attributes={"post": post},
        relationships={"post": "segments"},
    )
    root = tmp_path / "c.zarr" / "s" / INDEX / "post"
    before = _stats(root)
    more = rng.uniform(0, 40, (3, 3))
    coll.append("s", more, attributes={"post": np.array([7, 7, 8], np.int32)})
    changed = {k.split("/")[0] for k in before if before[k] != _stats(root).get(k)}
    assert len(changed - {"counts", "zarr.json"}) <= 2
    assert _files(root) == _rebuilt(tmp_path / "c.zarr" / "s", tmp_path, "post")
    res = coll.related([7], "post")
    all_pos, all_post = np.concatenate([pos, more]), np.concatenate([post, [7, 7, 8]])
    assert res.attributes["post"].dtype == np.int32
    assert sorted(map(tuple, res.positions.tolist())) == sorted(map(tuple, all_pos[all_post == 7].tolist()))


def test_an_interrupted_index_update_reads_as_stale(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    coll, truth, _rng = _member(tmp_path, 20, 4)

    def crash(*args: Any, **kw: Any) -> None:
        raise OSError("killed between the edit and its index")

    monkeypatch.setattr("zarr_vectors.collection.core.update_index", crash)
    with pytest.raises(OSError, match="killed"):
        coll.delete("syn", [int(truth.oid[0])])
    monkeypatch.undo()
    fresh = zv.open(tmp_path / "c.zarr", "r+")
    with pytest.raises(zv.StaleIndexError, match="older than the store"):
        fresh.related([int(truth.post[0])], "post_segment")
    # The next edit through the collection finds the index stale and rebuilds it.
    truth.drop(truth.oid[:1])
    gone = np.unique(truth.oid)[:1]
    fresh.delete("syn", gone.tolist())
    truth.drop(gone)
    truth.check(fresh, [int(v) for v in truth.post[:5]])


def test_a_spilled_build_equals_the_in_memory_build(tmp_path: Path, small_buckets: None) -> None:
    _coll, truth, _rng = _member(tmp_path, 150, 6)
    member = tmp_path / "c.zarr" / "syn"
    for attr in ("post_segment", "pre_segment"):
        in_memory = _rebuilt(member, tmp_path, attr, memory_limit=None)
        spilled = _rebuilt(member, tmp_path, attr, memory_limit=500)
        assert spilled == in_memory
        assert _files(member / INDEX / attr) == in_memory  # add_member's default (streamed) build
    assert len(in_memory) > 50


def _points(tmp_path: Path, name: str, n_chunks: int, per_chunk: int) -> Path:
    """A point cloud of ``n_chunks`` non-empty chunks (of a 16**3 grid) of ``per_chunk`` rows."""
    rng = np.random.default_rng(n_chunks)
    cells = np.stack(np.unravel_index(np.arange(n_chunks), (16, 16, 16)), axis=1)
    pos = (np.repeat(cells, per_chunk, axis=0) * 4 + rng.uniform(0, 4, (n_chunks * per_chunk, 3))).astype(
        "f4"
    )
    path = tmp_path / name
    zv.write_points(
        path,
        pos,
        chunk_shape=4,
        bounds=([0, 0, 0], [64, 64, 64]),
        attributes={"post": rng.integers(0, 2**40, len(pos)).astype(np.uint64)},
    )
    return path


def test_build_memory_does_not_grow_with_the_member(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """6 and 24 build batches of 4 chunks (1000 rows each) through a 50 kB limit: the build's
    tracemalloc peak grows by far less than the rows (what grows is the storage layer's
    per-shard state of the member, a few hundred bytes a chunk) and stays well under them."""
    monkeypatch.setattr(rel_index, "BUILD_BATCH", 4)
    peaks, data = [], []
    for batches in (6, 24):
        path = _points(tmp_path, f"p{batches}", 4 * batches, 1000)
        ds = zv.open(path)
        tracemalloc.start()
        rel_index.build_index(ds, path, "post", memory_limit=50_000, bucket_rows=1024)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        counts = rel_index.read_counts(open_backend(path, read_only=True), "post")
        assert int(counts.sum()) == 4 * batches * 1000
        data.append(4 * batches * 1000 * (8 + 12))  # values and float32 positions
    assert peaks[1] - peaks[0] < (data[1] - data[0]) / 4, (peaks, data)
    assert peaks[1] < data[1] / 3, (peaks, data)


def test_an_index_of_another_version_is_stale_and_rebuilt_by_the_next_edit(tmp_path: Path) -> None:
    coll, truth, _rng = _member(tmp_path, 20, 7)
    meta_file = tmp_path / "c.zarr" / "syn" / INDEX / "post_segment" / "zarr.json"
    doc = json.loads(meta_file.read_text())
    doc["attributes"]["zv:relationshipIndex"]["version"] = 1
    meta_file.write_text(json.dumps(doc))
    with pytest.raises(zv.StaleIndexError, match="has version 1, this library reads 2"):
        coll.related([int(truth.post[0])], "post_segment")
    assert coll.describe()["members"][0]["relationships"]["post_segment"]["index"]["state"] == "stale"
    gone = np.unique(truth.oid)[:1]
    coll.delete("syn", gone.tolist())
    truth.drop(gone)
    truth.check(coll, [int(v) for v in truth.post[:4]])


def test_canonical_order_is_a_function_of_the_set_even_when_hashes_collide(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from zarr_vectors.collection import buckets

    rng = np.random.default_rng(0)
    n = 200
    cols = {
        "values": rng.integers(0, 4, n).astype(np.uint64),
        "positions": rng.integers(0, 3, (n, 3)).astype("<f4"),  # many identical rows
        "attr.w": rng.integers(0, 2, n).astype("<i2"),
    }
    rows = buckets.Rows(cols)

    def sorted_bytes(perm: np.ndarray) -> list[bytes]:
        shuffled = rows.take(perm)
        b = buckets.bucket_of(shuffled.columns["values"], 1)
        done = shuffled.take(buckets.canonical_order(shuffled, b))
        return [v.tobytes() for v in done.columns.values()]

    first = sorted_bytes(rng.permutation(n))
    assert sorted_bytes(rng.permutation(n)) == first
    with monkeypatch.context() as m:  # every row hash collides: the full sort decides
        m.setattr(buckets, "mix", lambda z: np.zeros(len(z), np.uint64))
        b = np.zeros(n, np.int64)
        a = rows.take(rng.permutation(n))
        c = rows.take(rng.permutation(n))
        ordered = [x.take(buckets.canonical_order(x, b)) for x in (a, c)]
        assert all(np.array_equal(ordered[0].columns[k], ordered[1].columns[k]) for k in cols)
        assert np.all(np.diff(ordered[0].columns["values"].astype(np.int64)) >= 0)
