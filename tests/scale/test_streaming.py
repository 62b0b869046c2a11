"""``zarr_vectors.create``: batches in, the same store out as the one-shot writers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import zarr_vectors as zv
from tests._builders import icosphere, random_tree, random_walks
from tests.conftest import sorted_rows

BOUNDS = ([0.0, 0.0, 0.0], [100.0, 100.0, 100.0])
BOXES = [BOUNDS, ([10, 20, 30], [60, 70, 80]), ([0, 0, 0], [25, 25, 25]), ([80, 0, 50], [100, 40, 100])]


def _points(n: int, seed: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    pts = rng.uniform(0, 100, (n, 3)).astype(np.float32)
    pts[:5] = [[0, 0, 0], [100, 100, 100], [25, 25, 25], [50, 0, 100], [99.99, 25, 0]]  # faces and corners
    rgb = rng.integers(0, 255, (n, 3)).astype(np.uint8)
    ids = (rng.integers(0, 60, n).astype(np.uint64) * np.uint64(2**41)) + np.uint64(2**63)
    return pts, rgb, ids


def _rows(r: zv.Result, with_ids: bool = True) -> np.ndarray:
    cols = [r.positions, r.attributes["rgb"]]
    return sorted_rows(*cols, r.object_ids.astype(np.float64)) if with_ids else sorted_rows(*cols)


def _same_answers(a: zv.Dataset, b: zv.Dataset, with_ids: bool = True) -> None:
    assert a.vertex_count() == b.vertex_count()
    for box in BOXES:
        assert np.array_equal(_rows(a.query(bbox=box), with_ids), _rows(b.query(bbox=box), with_ids)), box
    if with_ids:
        assert np.array_equal(a.object_ids(), b.object_ids())
        for oid in a.object_ids()[::9]:
            assert np.array_equal(_rows(a.objects([oid])), _rows(b.objects([oid])))


@pytest.mark.slow
@pytest.mark.parametrize("memory_limit", [1 << 20, None])
def test_batches_answer_like_one_shot(tmp_path: Path, memory_limit: int | None) -> None:
    pts, rgb, ids = _points(120_000)
    one = zv.write_points(
        tmp_path / "one",
        pts,
        chunk_shape=25,
        bin_shape=12.5,
        bounds=BOUNDS,
        attributes={"rgb": rgb},
        object_ids=ids,
    )
    fds = Path("/proc/self/fd")
    open_before = len(list(fds.iterdir())) if fds.is_dir() else None
    w = zv.create(
        tmp_path / "many",
        "points",
        chunk_shape=25,
        bin_shape=12.5,
        bounds=BOUNDS,
        memory_limit=memory_limit,
        workers=2,
        spill_dir=tmp_path,
    )
    assert isinstance(w, zv.PointStream)
    for start in range(0, len(pts), 7_000):  # an object arrives across many batches
        s = slice(start, start + 7_000)
        w.append(pts[s], attributes={"rgb": rgb[s]}, object_ids=ids[s])
    if memory_limit is not None:
        assert len(w._spill.runs) > 1  # rows really went to disk
    assert not (tmp_path / "many").exists()  # nothing at the target before close
    w.close()
    assert not list(tmp_path.glob("zv-spill-*"))  # the spill folder is gone
    if open_before is not None:  # the spill files' descriptors were closed with it
        assert len(list(fds.iterdir())) == open_before
    many = zv.open(tmp_path / "many")
    _same_answers(one, many)
    assert zv.validate(tmp_path / "many").ok


def test_stores_are_byte_identical_without_spill(tmp_path: Path) -> None:
    pts, rgb, ids = _points(30_000, seed=3)
    zv.write_points(
        tmp_path / "one",
        pts,
        chunk_shape=25,
        bounds=BOUNDS,
        attributes={"rgb": rgb},
        object_ids=ids,
        compression="zstd",
    )
    with zv.create(
        tmp_path / "many", "points", chunk_shape=25, bounds=BOUNDS, compression="zstd", workers=1
    ) as w:
        w.extend(
            {
                "positions": pts[s : s + 10_000],
                "attributes": {"rgb": rgb[s : s + 10_000]},
                "object_ids": ids[s : s + 10_000],
            }
            for s in range(0, 30_000, 10_000)
        )
    one = {
        p.relative_to(tmp_path / "one"): p.read_bytes() for p in (tmp_path / "one").rglob("*") if p.is_file()
    }
    many = {
        p.relative_to(tmp_path / "many"): p.read_bytes()
        for p in (tmp_path / "many").rglob("*")
        if p.is_file()
    }
    assert one.keys() == many.keys()
    differ = [k for k in one if one[k] != many[k]]
    assert differ == [Path("zarr.json")]  # only the root's write generation


def test_memory_mapped_input_and_object_tables(tmp_path: Path) -> None:
    pts, rgb, _ = _points(50_000, seed=4)
    np.save(tmp_path / "pts.npy", pts)
    mm = np.load(tmp_path / "pts.npy", mmap_mode="r")
    ids = np.repeat(np.array([7, 3, 11, 5], np.int64), len(pts) // 4)
    with zv.create(
        tmp_path / "s",
        "points",
        chunk_shape=20,
        bounds=BOUNDS,
        object_attributes={"name": {3: "c", 5: "e", 7: "g", 11: "k"}},
        groups={100: [3, 5], 200: [7, 11]},
    ) as w:
        w.append(mm, attributes={"rgb": rgb}, object_ids=ids)
    ds = zv.open(tmp_path / "s")
    assert ds.object_ids().tolist() == [3, 5, 7, 11]
    assert ds.object_attributes("name", ids=[11, 3]).tolist() == ["k", "c"]
    assert sorted(ds.group_ids().tolist()) == [100, 200]
    got = ds.objects([5])
    assert np.array_equal(sorted_rows(got.positions), sorted_rows(pts[ids == 5]))


def test_with_block_that_raises_writes_nothing(tmp_path: Path) -> None:
    pts, rgb, _ = _points(1000)
    with pytest.raises(RuntimeError, match="stop"):
        with zv.create(tmp_path / "s", "points", chunk_shape=25, bounds=BOUNDS) as w:
            w.append(pts)
            raise RuntimeError("stop")
    assert not (tmp_path / "s").exists()
    with pytest.raises(zv.ZarrVectorsError, match="this writer is closed"):
        w.append(pts)


def test_batch_errors(tmp_path: Path) -> None:
    pts, rgb, ids = _points(100)
    with pytest.raises(zv.InputError, match="needs bounds="):
        zv.create(tmp_path / "s", "points", chunk_shape=25)
    with pytest.raises(zv.InputError, match="kind must be one of"):
        zv.create(tmp_path / "s", "voxels", chunk_shape=25, bounds=BOUNDS)
    w = zv.create(tmp_path / "s", "points", chunk_shape=25, bounds=BOUNDS)
    w.append(pts, attributes={"rgb": rgb}, object_ids=ids)
    with pytest.raises(zv.InputError, match="outside the store's bounds .* write a new store whose bounds="):
        w.append(pts + 200, attributes={"rgb": rgb}, object_ids=ids)
    with pytest.raises(zv.InputError, match="every batch must give the same attributes"):
        w.append(pts, object_ids=ids)
    with pytest.raises(zv.InputError, match="every batch must give object_ids, or none: this batch has none"):
        w.append(pts, attributes={"rgb": rgb})
    with pytest.raises(
        zv.InputError, match="attribute 'rgb' is uint8 in this store; these int64 values do not fit"
    ):
        w.append(pts, attributes={"rgb": rgb.astype(np.int64) + 300}, object_ids=ids)
    w.append(
        pts, attributes={"rgb": rgb.astype(np.int64)}, object_ids=ids
    )  # a cast that keeps values is made
    w.close()
    assert zv.open(tmp_path / "s").vertex_count() == 200


def test_lines_skeletons_graphs_meshes_in_batches(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    walks = [np.clip(w, 0, 999) for w in random_walks(rng, 40)]
    zv.write_lines(tmp_path / "l1", walks, chunk_shape=100, object_ids=np.arange(40) * 3)
    with zv.create(tmp_path / "l2", "lines", chunk_shape=100) as w:
        w.append(walks[:25], object_ids=np.arange(25) * 3)
        w.append(walks[25:], object_ids=np.arange(25, 40) * 3)
    a, b = zv.open(tmp_path / "l1"), zv.open(tmp_path / "l2")
    for oid in (0, 30, 117):
        assert np.array_equal(a.objects([oid]).positions, b.objects([oid]).positions)

    pos, parents = random_tree(rng, 200)
    zv.write_skeleton(tmp_path / "k1", pos, parents, chunk_shape=100)
    with zv.create(tmp_path / "k2", "skeletons", chunk_shape=100) as w:
        w.append(pos[:120], parents[:120])
        tail = parents[120:] - 120  # the second batch's own numbering; -1 and earlier ids stay roots
        w.append(pos[120:], np.where(tail >= 0, tail, -1))
    a, b = zv.open(tmp_path / "k1"), zv.open(tmp_path / "k2")
    assert a.vertex_count() == b.vertex_count() == 200

    v, f = icosphere(2, scale=40, offset=50)
    zv.write_meshes(tmp_path / "m1", [(v, f), (v + 3, f)], chunk_shape=30, object_ids=[4, 9])
    with zv.create(tmp_path / "m2", "meshes", chunk_shape=30) as w:
        w.append([(v, f)], object_ids=[4])
        w.append((v + 3, f), object_ids=[9])
    a, b = zv.open(tmp_path / "m1"), zv.open(tmp_path / "m2")
    for oid in (4, 9):
        ra, rb = a.objects([oid]), b.objects([oid])
        assert np.array_equal(sorted_rows(ra.positions), sorted_rows(rb.positions))
    with pytest.raises(zv.InputError, match="cannot change per batch"):
        zv.create(tmp_path / "m3", "meshes", chunk_shape=30).append([(v, f)], compression="zstd")
    with pytest.raises(zv.InputError, match="no lines were appended"):
        zv.create(tmp_path / "l3", "lines", chunk_shape=30).close()


def test_graph_batches_shift_edges_to_the_joined_numbering(tmp_path: Path) -> None:
    rng = np.random.default_rng(9)
    pos = rng.uniform(0, 100, (60, 3))
    edges = np.array(
        [[i, (i + 1) % 30] for i in range(30)] + [[30 + i, 30 + (i + 7) % 30] for i in range(30)]
    )
    zv.write_graph(tmp_path / "g1", pos, edges, chunk_shape=30)
    with zv.create(tmp_path / "g2", "graphs", chunk_shape=30) as w:
        w.append(pos[:30], edges[:30])
        w.append(pos[30:], edges[30:] - 30)  # each batch numbers its own vertices
    a, b = zv.open(tmp_path / "g1").read(), zv.open(tmp_path / "g2").read()

    def segments(r: zv.Result) -> np.ndarray:
        return sorted_rows(r.positions[r.edges].reshape(len(r.edges), -1))

    assert len(a.edges) == len(b.edges) == 60
    assert np.array_equal(segments(a), segments(b))


def test_an_existing_target_is_refused_before_any_batch(tmp_path: Path) -> None:
    pts, _, _ = _points(100)
    zv.write_points(tmp_path / "s", pts, chunk_shape=25, bounds=BOUNDS)
    with pytest.raises(zv.StoreExistsError):
        zv.create(tmp_path / "s", "points", chunk_shape=25, bounds=BOUNDS)
    with zv.create(tmp_path / "s", "points", chunk_shape=25, bounds=BOUNDS, overwrite=True) as w:
        w.append(pts[:10])
    assert zv.open(tmp_path / "s").vertex_count() == 10
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s"]  # no staging or spill folder left


def test_scratch_folders_of_killed_writers_are_removed(tmp_path: Path) -> None:
    """A spill or batch folder nobody holds (its writer was killed) goes at the next writer's start."""
    dead_spill, dead_batches = tmp_path / "zv-spill-0123456789ab", tmp_path / "zv-batches-0123456789ab"
    for d in (dead_spill, dead_batches):
        d.mkdir()
        (d / "run00000.positions.bin").write_bytes(b"x" * 100)
    w = zv.create(
        "memory://scratch-test",
        "points",
        chunk_shape=25,
        bounds=BOUNDS,
        spill_dir=tmp_path,
        memory_limit=1 << 20,
    )
    assert not dead_spill.exists()
    live = [p for p in tmp_path.iterdir() if p.name.startswith("zv-spill-")]
    assert len(live) == 1  # the live writer's own, locked
    w2 = zv.create(tmp_path / "l", "lines", chunk_shape=25, spill_dir=tmp_path)
    assert not dead_batches.exists() and live[0].exists()  # a live writer's folder is kept
    w.abort()
    w2.abort()
    assert sorted(p.name for p in tmp_path.iterdir()) == []


@pytest.mark.slow
def test_stores_do_not_depend_on_the_number_of_workers(tmp_path: Path) -> None:
    """Above 2**20 rows the buffer is sorted as one run per worker: the store stays the same."""
    pts, rgb, ids = _points((1 << 20) + 5_000, seed=11)
    for w in (1, 3):
        zv.write_points(
            tmp_path / f"w{w}",
            pts,
            chunk_shape=25,
            bounds=BOUNDS,
            attributes={"rgb": rgb},
            object_ids=ids,
            workers=w,
        )
    one, three = _files(tmp_path / "w1"), _files(tmp_path / "w3")
    assert one.keys() == three.keys()
    assert [k for k in one if one[k] != three[k]] == [Path("zarr.json")]
    with pytest.raises(zv.InputError, match="workers must be a positive integer"):
        zv.write_points(tmp_path / "w0", pts[:10], chunk_shape=25, workers=0)


def _files(path: Path) -> dict[Path, bytes]:
    return {p.relative_to(path): p.read_bytes() for p in path.rglob("*") if p.is_file()}
