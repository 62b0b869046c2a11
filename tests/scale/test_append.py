"""``Dataset.append``: the store afterwards is the store a one-shot write of everything gives."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

import zarr_vectors as zv
from tests.conftest import brute_force_box, sorted_rows

BOUNDS = ([0.0, 0.0, 0.0], [100.0, 100.0, 100.0])
BOXES = [BOUNDS, ([10, 20, 30], [60, 70, 80]), ([75, 0, 0], [100, 25, 25])]


def _data(n: int, seed: int = 0, n_objects: int = 40) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "pts": rng.uniform(0, 100, (n, 3)).astype(np.float32),
        "w": rng.random((n, 2)).astype(np.float32),
        "ids": rng.integers(0, n_objects, n).astype(np.uint64) * np.uint64(2**40) + np.uint64(3),
    }


def _files(path: Path) -> dict[Path, bytes]:
    return {p.relative_to(path): p.read_bytes() for p in path.rglob("*") if p.is_file()}


def _write(path: Path, d: dict[str, np.ndarray], s: slice, objects: bool = True) -> zv.Dataset:
    return zv.write_points(
        path,
        d["pts"][s],
        chunk_shape=25,
        bin_shape=12.5,
        bounds=BOUNDS,
        attributes={"w": d["w"][s]},
        object_ids=d["ids"][s] if objects else None,
        compression="zstd",
    )


@pytest.mark.parametrize(("objects", "shift"), [(False, 0), (True, 0), (True, 7)])
def test_append_gives_the_one_shot_store(tmp_path: Path, objects: bool, shift: int) -> None:
    """No objects; new points of existing objects; new ids between the old ones (renumbering)."""
    d = _data(60_000)
    cut = 54_000
    d["ids"][cut:] += np.uint64(shift)  # shift 7: every new id falls between two old ones
    _write(tmp_path / "one", d, slice(None), objects)
    _write(tmp_path / "app", d, slice(0, cut), objects)
    ds = zv.open(tmp_path / "app", "r+")
    ds.append(
        d["pts"][cut:],
        attributes={"w": d["w"][cut:]},
        object_ids=d["ids"][cut:] if objects else None,
        extend=True,
    )
    one, app = _files(tmp_path / "one"), _files(tmp_path / "app")
    assert one.keys() == app.keys()
    assert [k for k in one if one[k] != app[k]] == [Path("zarr.json")]  # only the root's write generation
    assert ds.vertex_count() == 60_000  # the dataset reads on from the new version


def test_only_touched_cells_are_rewritten(tmp_path: Path) -> None:
    d = _data(20_000)
    _write(tmp_path / "s", d, slice(None))
    cells = tmp_path / "s" / "0" / "vertices" / "c"
    inodes = {p: p.stat().st_ino for p in cells.rglob("*") if p.is_file()}
    new = np.array([[1.0, 1.0, 1.0], [2.0, 3.0, 4.0]], np.float32)  # both in chunk (0, 0, 0)
    zv.open(tmp_path / "s", "r+").append(
        new, attributes={"w": np.zeros((2, 2), np.float32)}, object_ids=[5, 5]
    )
    changed = [p.relative_to(cells) for p, ino in inodes.items() if p.stat().st_ino != ino]
    assert changed == [Path("0/0/0")]  # every other cell file is the same file (hard link)
    ds = zv.open(tmp_path / "s")
    got = ds.objects([5])
    assert np.array_equal(sorted_rows(got.positions), sorted_rows(new))
    assert ds.object_ids()[0] == 3 and 5 in ds.object_ids()


def test_append_to_an_in_memory_store_and_object_attributes() -> None:
    d = _data(5_000, seed=2, n_objects=5)
    zv.write_points(
        "memory://append-mem",
        d["pts"],
        chunk_shape=25,
        bounds=BOUNDS,
        object_ids=d["ids"],
        object_attributes={"name": {int(i): f"o{k}" for k, i in enumerate(np.unique(d["ids"]))}},
    )
    ds = zv.open("memory://append-mem", "r+")
    ds.append([[50.0, 50.0, 50.0]], object_ids=[2], object_attributes={"name": {2: "new"}})
    assert ds.object_attributes("name", ids=[2, int(d["ids"].min())]).tolist() == ["new", "o0"]
    assert ds.objects([2]).positions.tolist() == [[50.0, 50.0, 50.0]]


def test_a_single_object_store_gains_objects(tmp_path: Path) -> None:
    pts = _data(3_000, seed=3)["pts"]
    zv.write_points(tmp_path / "s", pts, chunk_shape=25, bounds=BOUNDS, object_ids=np.full(3_000, 9))
    ds = zv.open(tmp_path / "s", "r+")
    ds.append(pts[:10] / 2, object_ids=np.arange(10), extend=True)  # ids 0..9: 9 extends, the others are new
    with pytest.raises(zv.InputError):  # 9 is already there
        ds.append(pts[:1], object_ids=[9])
    ds = zv.open(tmp_path / "s")
    assert ds.object_ids().tolist() == list(range(10))
    assert len(ds.objects([9]).positions) == 3_001
    assert zv.validate(tmp_path / "s").ok
    for lo, hi in BOXES:
        r = ds.query(bbox=(lo, hi))
        both = np.concatenate([pts, pts[:10] / 2])
        assert np.array_equal(sorted_rows(r.positions), sorted_rows(both[brute_force_box(both, lo, hi)]))


def test_append_errors(tmp_path: Path) -> None:
    d = _data(2_000, seed=4)
    _write(tmp_path / "s", d, slice(None))
    w = np.zeros((1, 2), np.float32)
    with pytest.raises(zv.ReadOnlyError, match="reopen it with mode='r\\+'"):
        zv.open(tmp_path / "s").append([[1.0, 1.0, 1.0]], attributes={"w": w}, object_ids=[1])
    ds = zv.open(tmp_path / "s", "r+")
    with pytest.raises(zv.InputError, match="outside the store's bounds .* write a new store whose bounds="):
        ds.append([[150.0, 1.0, 1.0]], attributes={"w": w}, object_ids=[1])
    with pytest.raises(zv.InputError, match="already in the store \\(first: 3\\); pass extend=True"):
        ds.append([[1.0, 1.0, 1.0]], attributes={"w": w}, object_ids=[3])
    with pytest.raises(zv.InputError, match="give exactly the store's attributes"):
        ds.append([[1.0, 1.0, 1.0]], object_ids=[1])
    with pytest.raises(zv.InputError, match="this store has objects: give object_ids"):
        ds.append([[1.0, 1.0, 1.0]], attributes={"w": w})
    with pytest.raises(zv.InputError, match="object_attributes \\['size'\\] are not in this store"):
        ds.append([[1.0, 1.0, 1.0]], attributes={"w": w}, object_ids=[1], object_attributes={"size": {1: 2}})
    assert zv.open(tmp_path / "s").vertex_count() == 2_000  # nothing was applied
    zv.write_lines(tmp_path / "l", [np.array([[0.0, 0, 0], [5, 5, 5]])], chunk_shape=4)
    # Lines take new objects as write_lines does (see tests/kinds/test_linked_edits.py).
    with pytest.raises(zv.InputError, match="append needs object_ids for the new objects"):
        zv.open(tmp_path / "l", "r+").append([np.array([[1.0, 1.0, 1.0], [2, 2, 2]])])


def test_coarse_levels_are_stale_until_rebuilt(tmp_path: Path) -> None:
    d = _data(20_000, seed=5)
    _write(tmp_path / "s", d, slice(None), objects=False)
    ds = zv.open(tmp_path / "s", "r+")
    ds.build_pyramid([2, 2])
    assert ds.stale_levels() == []
    budget = zv.open(tmp_path / "s").vertex_count(2) + 1
    assert ds.level_for(max_vertices=budget) == 2
    ds.append(d["pts"][:100] * 0.5, attributes={"w": d["w"][:100]}, pyramid="stale")
    assert ds.stale_levels() == [1, 2]
    assert ds.level_for(max_vertices=budget) == 0  # stale levels are never chosen
    with pytest.warns(zv.StaleLevelWarning, match="level 1 .* is stale: points were appended"):
        ds.query(bbox=BOUNDS, level=1)
    assert zv.validate(tmp_path / "s").ok
    ds.append(d["pts"][:10] * 0.25, attributes={"w": d["w"][:10]}, pyramid=True)
    assert ds.stale_levels() == []
    with warnings.catch_warnings():
        warnings.simplefilter("error", zv.StaleLevelWarning)
        coarse = ds.query(bbox=BOUNDS, level=1)
    assert len(coarse.positions) > 0
    assert ds.levels == [0, 1, 2] and ds.vertex_count() == 20_110
    assert zv.validate(tmp_path / "s").ok


def test_groups_follow_renumbered_objects(tmp_path: Path) -> None:
    """Ids past 65,536 are remapped (DECISIONS 8), so new ids between old ones renumber them."""
    m = 10**6
    pts = _data(1_000, seed=6)["pts"]
    ids = np.repeat(np.array([10, 20, 30, 40]) * m, 250)
    groups = {70_000: [10 * m, 30 * m], 80_000: [20 * m, 40 * m]}
    zv.write_points(tmp_path / "s", pts, chunk_shape=25, bounds=BOUNDS, object_ids=ids, groups=groups)
    ds = zv.open(tmp_path / "s", "r+")
    ds.append(
        pts[:4], object_ids=np.array([15, 25, 35, 5]) * m
    )  # every new id lies below or between old ones
    ds = zv.open(tmp_path / "s")
    assert ds.object_ids().tolist() == [k * m for k in (5, 10, 15, 20, 25, 30, 35, 40)]
    assert [g.tolist() for g in ds.groups()] == [[10 * m, 30 * m], [20 * m, 40 * m]]
    assert ds.group(70_000).object_ids.tolist() == [10 * m] * 250 + [30 * m] * 250
    assert zv.validate(tmp_path / "s").ok


def test_points_in_empty_chunks_and_empty_appends(tmp_path: Path) -> None:
    """New points in chunks the store had no rows in (a group of only new cells)."""
    pts = np.random.default_rng(7).uniform(0, 40, (2_000, 3)).astype(np.float32)  # chunks 0-1 only
    w = np.ones((2_000, 2), np.float32)
    zv.write_points(
        tmp_path / "s",
        pts,
        chunk_shape=25,
        bounds=BOUNDS,
        attributes={"w": w},
        object_ids=np.arange(2_000) % 7,
    )
    far = np.random.default_rng(8).uniform(60, 100, (500, 3)).astype(np.float32)  # chunks 2-3 only
    ds = zv.open(tmp_path / "s", "r+")
    ds.append(far, attributes={"w": np.zeros((500, 2), np.float32)}, object_ids=np.arange(500) % 3 + 100)
    ds.append(
        np.zeros((0, 3), np.float32),
        attributes={"w": np.zeros((0, 2), np.float32)},
        object_ids=np.zeros(0, int),
    )
    ds = zv.open(tmp_path / "s")
    both = np.concatenate([pts, far])
    for lo, hi in BOXES:
        r = ds.query(bbox=(lo, hi))
        assert np.array_equal(sorted_rows(r.positions), sorted_rows(both[brute_force_box(both, lo, hi)]))
    assert len(ds.objects([101]).positions) == len(far[np.arange(500) % 3 == 1])
    assert zv.validate(tmp_path / "s").ok
