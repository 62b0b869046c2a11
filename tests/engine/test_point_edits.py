"""``delete_points`` / ``replace_points``: after any sequence of appends, replaces and deletes the
store answers every query exactly as a one-shot ``write_points`` of the final data (and is, file
for file, that store but for the root's write generation)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import zarr_vectors as zv
from tests.conftest import brute_force_box, sorted_rows
from zarr_vectors.engine import append_points
from zarr_vectors.engine.write.point_edit import delete_points, replace_points

BOUNDS = ([0.0, 0.0, 0.0], [100.0, 100.0, 100.0])
BIG = np.uint64(2**40)


@dataclass
class Final:
    """The data a one-shot write of the edited store's content takes, rows in edit order."""

    pts: np.ndarray
    w: np.ndarray
    ids: np.ndarray
    size: dict[int, float] = field(default_factory=dict)
    groups: dict[int, list[int]] = field(default_factory=dict)

    def drop(self, ids: np.ndarray, objects: np.ndarray) -> None:
        """Remove the rows of ``ids``; ``objects`` (of ``ids``) stop being objects."""
        keep = ~np.isin(self.ids, ids)
        self.pts, self.w, self.ids = self.pts[keep], self.w[keep], self.ids[keep]
        gone = {int(i) for i in objects}
        self.size = {k: v for k, v in self.size.items() if k not in gone}
        self.groups = {g: [m for m in ms if m not in gone] for g, ms in self.groups.items()}

    def add(self, pts: np.ndarray, w: np.ndarray, ids: np.ndarray) -> None:
        self.pts = np.concatenate([self.pts, pts])
        self.w = np.concatenate([self.w, w])
        self.ids = np.concatenate([self.ids, ids.astype(self.ids.dtype)])


def _write(path: Path, f: Final, shards: Any) -> zv.Dataset:
    return zv.write_points(
        path,
        f.pts,
        chunk_shape=25,
        bin_shape=12.5,
        bounds=BOUNDS,
        attributes={"w": f.w},
        object_ids=f.ids,
        object_attributes={"size": dict(f.size)},
        groups={g: list(ms) for g, ms in f.groups.items()},
        compression="zstd",
        shards=shards,
    )


def _clustered(
    rng: np.random.Generator, ids: np.ndarray, per: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """About ``per`` points per object near a centre of its own (so deletes empty whole cells)."""
    counts = rng.integers(1, 2 * per, len(ids))
    centre = rng.uniform(5, 95, (len(ids), 3))
    rows = np.repeat(np.arange(len(ids)), counts)
    pts = np.clip(centre[rows] + rng.normal(0, 6, (len(rows), 3)), 0, 100).astype(np.float32)
    order = rng.permutation(len(rows))
    w = rng.random((len(rows), 2)).astype(np.float32)
    return pts[order], w[order], ids[rows][order]


def _id_values(big: bool, keys: np.ndarray) -> np.ndarray:
    """Object ids: small ints kept as given, or large sparse uint64 ids (remapped)."""
    return keys.astype(np.uint64) * BIG + np.uint64(3) if big else keys.astype(np.int64)


def _objects(ds: zv.Dataset) -> dict[str, bytes | None]:
    """Every stored object of a store, by key, as stored (below the reader that finds cells in shards)."""
    backend = ds._store.backend
    while hasattr(backend, "inner"):
        backend = backend.inner
    keys = sorted(backend.list_keys())
    return dict(zip(keys, backend.get_many(keys)))


def _same_answers(edited: zv.Dataset, one: zv.Dataset, f: Final, rng: np.random.Generator) -> None:
    """Whole-store read, every object (64 sampled beyond that), random boxes, object attributes and
    groups, exactly."""
    a, b = edited.read(), one.read()
    assert np.array_equal(a.positions, b.positions) and np.array_equal(a.object_ids, b.object_ids)
    assert np.array_equal(a.attributes["w"], b.attributes["w"])
    assert np.array_equal(sorted_rows(a.positions, a.attributes["w"]), sorted_rows(f.pts, f.w))
    assert np.array_equal(edited.object_ids(), np.unique(f.ids))
    assert np.array_equal(edited.object_ids(), one.object_ids())
    every = np.unique(f.ids)
    for i in (every if len(every) <= 64 else rng.choice(every, 64, replace=False)).tolist():
        got, want = edited.objects([i]), one.objects([i])
        assert np.array_equal(got.positions, want.positions)
        assert np.array_equal(got.attributes["w"], want.attributes["w"])
        assert np.array_equal(sorted_rows(got.positions), sorted_rows(f.pts[f.ids == i]))
    for _ in range(6):
        lo = rng.uniform(0, 80, 3)
        hi = lo + rng.uniform(5, 60, 3)
        got, want = edited.query(bbox=(lo, hi)), one.query(bbox=(lo, hi))
        assert np.array_equal(got.positions, want.positions)
        assert np.array_equal(got.object_ids, want.object_ids)
        inside = brute_force_box(f.pts, lo, hi)
        assert np.array_equal(sorted_rows(got.positions), sorted_rows(f.pts[inside]))
    ids = np.unique(f.ids)
    if len(ids):
        sizes = edited.object_attributes("size", ids=ids.tolist())
        want_sizes = np.array([f.size.get(int(i), np.nan) for i in ids])
        assert np.array_equal(sizes, want_sizes, equal_nan=True)
        assert np.array_equal(sizes, one.object_attributes("size", ids=ids.tolist()), equal_nan=True)
    assert np.array_equal(edited.group_ids(), one.group_ids())
    for g, members in f.groups.items():
        assert edited.group(g).object_ids.tolist() == one.group(g).object_ids.tolist()
        assert np.array_equal(
            np.unique(edited.group(g).object_ids), np.unique(np.asarray(members, f.ids.dtype))
        )


def _op_append(store: Any, f: Final, rng: np.random.Generator, big: bool, fresh: list[int]) -> None:
    keys = np.arange(fresh[0], fresh[0] + int(rng.integers(1, 4)))
    fresh[0] = int(keys[-1]) + 1
    pts, w, ids = _clustered(rng, _id_values(big, keys), 8)
    named = {int(ids[0]): float(rng.integers(1, 100))}
    append_points(store, pts, attributes={"w": w}, object_ids=ids, object_attributes={"size": named})
    f.add(pts, w, ids)
    f.size.update(named)


def _op_replace(store: Any, f: Final, rng: np.random.Generator) -> None:
    present = np.unique(f.ids)
    chosen = rng.choice(present, min(len(present), int(rng.integers(1, 4))), replace=False)
    given = chosen[rng.random(len(chosen)) < 0.8]  # the others get no point: they go
    pts, w, ids = _clustered(rng, given, 8)
    rows = {int(i): float(rng.integers(100, 200)) for i in given[:1]}
    replace_points(
        store, chosen, pts, attributes={"w": w}, object_ids=ids, object_attributes={"size": rows}, workers=2
    )
    f.drop(chosen, np.setdiff1d(chosen, given))
    f.add(pts, w, ids)
    f.size.update(rows)


def _op_delete(store: Any, f: Final, rng: np.random.Generator) -> None:
    present = np.unique(f.ids)
    chosen = rng.choice(present, min(len(present) - 1, int(rng.integers(1, 4))), replace=False)
    delete_points(store, chosen, workers=2)
    f.drop(chosen, chosen)


@pytest.mark.parametrize("shards", [None, (2, 2, 2)], ids=["unsharded", "sharded"])
@pytest.mark.parametrize("big", [False, True], ids=["kept-ids", "remapped-ids"])
@pytest.mark.parametrize(
    "seed", [pytest.param(1, id="local", marks=pytest.mark.slow), pytest.param(2, id="memory")]
)
def test_random_edits_give_the_one_shot_store(tmp_path: Path, shards: Any, big: bool, seed: int) -> None:
    """Seed 1 edits a local store (staged and exchanged), seed 2 an in-memory one (edited in place)."""
    rng = np.random.default_rng(seed)
    where = f"{tmp_path}/" if seed == 1 else f"memory://edits-{seed}-{big}-{shards is None}-"
    keys = np.arange(12)
    f = Final(*_clustered(rng, _id_values(big, keys), 10))
    values = _id_values(big, keys)
    f.size = {int(i): float(k) for k, i in enumerate(values) if k % 3}
    f.groups = {7: [int(values[1]), int(values[4]), int(values[9])], 2**50: [int(values[4]), int(values[2])]}
    _write(where + "edited", f, shards)
    ds = zv.open(where + "edited", "r+")
    fresh = [100]
    for step in range(6):
        op = (
            ["append", "replace", "delete"][int(rng.integers(0, 3))]
            if step > 2
            else ["replace", "delete", "append"][step]
        )
        if op == "append":
            _op_append(ds._store, f, rng, big, fresh)
        elif op == "replace":
            _op_replace(ds._store, f, rng)
        else:
            _op_delete(ds._store, f, rng)
    one = _write(where + "one", f, shards)
    edited = zv.open(where + "edited")
    _same_answers(edited, one, f, rng)
    a, b = _objects(edited), _objects(one)
    assert sorted(a) == sorted(b)
    assert [k for k in a if a[k] != b[k]] == ["zarr.json"]  # only the root's write generation
    assert zv.validate(where + "edited").ok


def _points(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.uniform(0, 100, (n, 3)).astype(np.float32), rng.random((n, 2)).astype(np.float32)


def _same_store(edited: str, f: Final) -> None:
    """The edited store is a one-shot write of ``f``, object for object (the root's write
    generation aside), and answers as it does."""
    one = _write(edited + "-one", f, None)
    ds = zv.open(edited)
    a, b = _objects(ds), _objects(one)
    assert sorted(a) == sorted(b)
    assert [k for k in a if a[k] != b[k]] == ["zarr.json"]
    _same_answers(ds, one, f, np.random.default_rng(0))


@pytest.mark.parametrize(
    ("ids", "delete", "replace"),
    [
        # remapped -> kept: the large id goes, the small ones become the OIDs (owner tables rewritten)
        (np.array([3, 5, 2**50, 9], np.uint64), [2**50], None),
        # kept -> remapped: 4 x the distinct ids falls to the largest id or below
        pytest.param(np.arange(17_600, dtype=np.int64) * 4, np.arange(100) * 4, None, marks=pytest.mark.slow),
        # two remapped objects -> one: no owner table any more
        (np.array([2**40, 2**41], np.uint64), [2**41], None),
        # every object deleted: an empty store with an empty object index
        (np.array([1, 2], np.int64), [1, 2], None),
        # a replace that gives one of its ids no point deletes it and renumbers the others
        (np.array([2**40, 2**41, 2**42], np.uint64), None, ([2**40, 2**41], [2**41])),
    ],
    ids=["remapped-to-kept", "kept-to-remapped", "one-object-left", "all-deleted", "replace-drops"],
)
def test_the_id_form_follows_the_final_ids(ids: np.ndarray, delete: Any, replace: Any) -> None:
    n = max(len(ids), 300)
    pts, w = _points(n, 11)
    f = Final(pts, w, ids[np.arange(n) % len(ids)])
    f.size = {int(i): float(k) for k, i in enumerate(np.unique(ids)[:3])}
    f.groups = {4: [int(i) for i in np.unique(ids)[:2]]}
    where = f"memory://id-form-{len(ids)}-{int(ids[-1])}-{replace is None}"
    _write(where, f, None)
    store = zv.open(where, "r+")._store
    if delete is not None:
        delete_points(store, delete)
        f.drop(np.asarray(delete, ids.dtype), np.asarray(delete, ids.dtype))
    else:
        chosen, given = (np.asarray(v, ids.dtype) for v in replace)
        new_pts, new_w = _points(40, 12)
        new_ids = np.repeat(given, 40)[:40]
        replace_points(store, chosen, new_pts, attributes={"w": new_w}, object_ids=new_ids)
        f.drop(chosen, np.setdiff1d(chosen, given))
        f.add(new_pts, new_w, new_ids)
    _same_store(where, f)


CELL_ARRAYS = ("vertices", "vertex_fragments", "vertex_attributes", "fragment_attributes")


def test_untouched_cell_files_stay_the_same_files(tmp_path: Path) -> None:
    """A local delete and replace rewrite only the cells holding the edited objects' rows: every
    other cell file of every cell array is the same file (hard-linked), byte for byte."""
    pts, w = _points(1_500, 13)
    ids = (pts[:, 0] // 10).astype(np.int64) + 10 * (pts[:, 1] // 50).astype(np.int64)  # 20 slabs
    f = Final(pts, w, ids)
    _write(tmp_path / "s", f, None)
    root = tmp_path / "s" / "0"
    cells = [
        p
        for p in root.rglob("*")
        if p.is_file() and "c" in p.parts and p.relative_to(root).parts[0] in CELL_ARRAYS
    ]
    before = {p: (p.stat().st_ino, p.read_bytes()) for p in cells}
    store = zv.open(tmp_path / "s", "r+")._store
    delete_points(store, [0, 10])  # x < 10: cells (0, *, *)
    new_pts = np.array([[1.0, 1.0, 1.0], [2.0, 30.0, 4.0]], np.float32)  # cells (0, 0, 0) and (0, 1, 0)
    replace_points(store, [1], new_pts, attributes={"w": w[:2]}, object_ids=[1, 1])  # x 10..20: (0, *, *)
    kept = {
        p
        for p, (ino, raw) in before.items()
        if p.exists() and p.stat().st_ino == ino and p.read_bytes() == raw
    }
    assert {p.parts[-3] for p in set(before) - kept} == {
        "0"
    }  # rewritten: cells of the first chunk column only
    assert {p.parts[-3] for p in kept} == {"1", "2", "3"}  # every other cell of every cell array kept
    assert len(kept) == 3 * 16 * len(CELL_ARRAYS)
    f.drop(np.array([0, 10, 1]), np.array([0, 10]))
    f.add(new_pts, w[:2], np.array([1, 1]))
    _same_store(str(tmp_path / "s"), f)


def test_sharded_delete_removes_emptied_shards_and_keeps_the_rest() -> None:
    """Shards of 2 x 2 x 2 cells: deleting object 1 empties shard (1, 1, 1), which goes; deleting
    object 2 empties cell (0, 0, 0), whose shard is written again with cell (1, 1, 1) only."""
    rng = np.random.default_rng(16)
    box = {1: ([55, 55, 55], [95, 95, 95]), 2: ([1, 1, 1], [24, 24, 24]), 3: ([26, 26, 26], [49, 49, 49])}
    box[4] = ([0, 55, 0], [45, 100, 100])
    pts = np.concatenate([rng.uniform(lo, hi, (50, 3)) for lo, hi in box.values()]).astype(np.float32)
    f = Final(pts, rng.random((200, 2)).astype(np.float32), np.repeat(np.arange(1, 5), 50))
    _write("memory://edit-shards", f, (2, 2, 2))
    before = set(_objects(zv.open("memory://edit-shards")))
    assert "0/vertices/c/1/1/1" in before and "0/vertices/c/0/0/0" in before
    delete_points(zv.open("memory://edit-shards", "r+")._store, [1, 2])
    f.drop(np.array([1, 2]), np.array([1, 2]))
    ds = zv.open("memory://edit-shards")
    assert "0/vertices/c/1/1/1" not in _objects(ds)
    assert len(ds.query(bbox=([0, 0, 0], [25, 25, 25])).positions) == 0
    assert len(ds.query(bbox=([25, 25, 25], [50, 50, 50])).positions) == 50
    one = _write("memory://edit-shards-one", f, (2, 2, 2))
    a, b = _objects(ds), _objects(one)
    assert sorted(a) == sorted(b) and [k for k in a if a[k] != b[k]] == ["zarr.json"]
    _same_answers(ds, one, f, rng)


def test_edit_errors() -> None:
    pts, w = _points(500, 14)
    f = Final(pts, w, np.arange(500) % 5 + 10)
    _write("memory://edit-errors", f, None)
    store = zv.open("memory://edit-errors", "r+")._store
    with pytest.raises(
        zv.InputError,
        match=r"object id 99 is not in this store \(its 5 objects have ids 10 \.\. 14\); delete",
    ):
        delete_points(store, [11, 99, 98])
    with pytest.raises(zv.InputError, match=r"object id 3 is not in this store .*; replace takes ids"):
        replace_points(store, [3], pts[:1], attributes={"w": w[:1]}, object_ids=[3])
    with pytest.raises(
        zv.InputError, match=r"object_ids name 12, which is not one of the ids being replaced"
    ):
        replace_points(store, [10, 11], pts[:3], attributes={"w": w[:3]}, object_ids=[10, 12, 11])
    with pytest.raises(zv.InputError, match=r"replace needs object_ids: one per point"):
        replace_points(store, [10], pts[:1], attributes={"w": w[:1]})
    with pytest.raises(zv.InputError, match=r"this replace gives \[\]: give exactly the store's attributes"):
        replace_points(store, [10], pts[:1], object_ids=[10])
    with pytest.raises(
        zv.InputError, match=r"object_attributes\['size'\] names object id 11, which gets no point"
    ):
        replace_points(
            store,
            [10, 11],
            pts[:1],
            attributes={"w": w[:1]},
            object_ids=[10],
            object_attributes={"size": {11: 1.0}},
        )
    with pytest.raises(zv.InputError, match=r"object attribute 'mass' is not in this store"):
        replace_points(
            store,
            [10],
            pts[:1],
            attributes={"w": w[:1]},
            object_ids=[10],
            object_attributes={"mass": {10: 1.0}},
        )
    with pytest.raises(zv.ReadOnlyError):
        delete_points(zv.open("memory://edit-errors")._store, [10])
    ds = zv.open("memory://edit-errors")
    assert ds.vertex_count() == 500 and ds.object_ids().tolist() == [10, 11, 12, 13, 14]  # nothing applied
    zv.write_points("memory://edit-no-objects", pts, chunk_shape=25, bounds=BOUNDS)
    bare = zv.open("memory://edit-no-objects", "r+")._store
    for call in (
        lambda: delete_points(bare, [0]),
        lambda: replace_points(bare, [0], pts[:1], object_ids=[0]),
    ):
        with pytest.raises(
            zv.InputError, match=r"names objects by id, and this store's points have no object ids"
        ):
            call()
    zv.write_lines("memory://edit-lines", [np.array([[0.0, 0, 0], [5, 5, 5]])], chunk_shape=4)
    with pytest.raises(zv.InputError, match=r"delete edits the objects of a point cloud; this store holds"):
        delete_points(zv.open("memory://edit-lines", "r+")._store, [0])


def test_coarse_levels_are_marked_stale() -> None:
    pts, w = _points(2_000, 15)
    f = Final(pts, w, np.arange(2_000) % 7)
    _write("memory://edit-stale", f, None)
    ds = zv.open("memory://edit-stale", "r+")
    ds.build_pyramid([2])
    assert ds.stale_levels() == []
    delete_points(ds._store, [3])
    assert ds.stale_levels() == [1]
    ds.build_pyramid([2], overwrite=True)
    replace_points(ds._store, [4], pts[:5], attributes={"w": w[:5]}, object_ids=[4] * 5)
    assert ds.stale_levels() == [1]
    assert ds.vertex_count() == 2_000 - int(np.count_nonzero(np.isin(np.arange(2_000) % 7, [3, 4]))) + 5
