"""zarr_vectors.dask writers of lines, skeletons, graphs and meshes on a real two-process
LocalCluster: every stored file equals the in-memory writer's, whatever the partitions."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")

import dask  # noqa: E402
import dask.bag as db  # noqa: E402

import zarr_vectors as zv  # noqa: E402
from tests._streams import stored_files  # noqa: E402
from zarr_vectors import dask as zd  # noqa: E402
from zarr_vectors.errors import InputError  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.cluster]

GRID = {"chunk_shape": 10, "bounds": ([0, 0, 0], [100, 100, 100])}
SHARDS = [None, 2]


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    """Two worker processes of one thread each."""
    with (
        distributed.LocalCluster(
            n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None, host="127.0.0.1"
        ) as cluster,
        distributed.Client(cluster) as c,
    ):
        yield c


def walks(count: int, seed: int) -> list[np.ndarray]:
    """Random walks of 2 to 40 vertices inside the bounds, crossing many chunks."""
    rng = np.random.default_rng(seed)
    out = []
    for n in rng.integers(2, 40, count).tolist():
        start = rng.uniform(20, 80, 3)
        out.append(np.clip(start + np.cumsum(rng.normal(0, 4, (n, 3)), axis=0), 0, 100))
    return out


def trees(count: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Walks with a few branches: parents[i] < i, the first vertex the root."""
    rng = np.random.default_rng(seed)
    out = []
    for pos in walks(count, seed):
        parents = np.arange(-1, len(pos) - 1)
        branch = np.flatnonzero(rng.random(len(pos)) < 0.2)
        branch = branch[branch > 1]
        parents[branch] = rng.integers(0, branch)
        out.append((pos, parents))
    return out


def ribbons(count: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Triangle strips along walks (two vertices per step)."""
    out = []
    for pos in walks(count, seed):
        if len(pos) < 3:
            pos = np.concatenate([pos, pos[-1:] * 0.99, pos[-1:] * 0.98])
        side = np.clip(pos + [1.5, 0.5, 0.0], 0, 100)
        vertices = np.stack([pos, side], axis=1).reshape(-1, 3)
        k = np.arange(len(pos) - 1)
        faces = np.concatenate(
            [np.stack([2 * k, 2 * k + 1, 2 * k + 2], 1), np.stack([2 * k + 1, 2 * k + 3, 2 * k + 2], 1)]
        )
        out.append((vertices, faces))
    return out


def assert_same_files(got: Path, ref: Path) -> None:
    a, b = stored_files(got), stored_files(ref)
    assert sorted(a) == sorted(b)
    differ = [k for k in a if a[k] != b[k]]
    assert not differ, differ[:5]


@pytest.mark.parametrize("shards", SHARDS)
def test_lines_equal_the_in_memory_writer_file_for_file(client, tmp_path, shards):
    lines = walks(80, 1)
    ids = np.arange(80, dtype=np.int64) * 7 + 3
    kw = dict(GRID, shards=shards, object_ids=ids, kind="streamline", compression="zstd")
    zv.write_lines(tmp_path / "ref", lines, **kw)
    got = zd.write_lines(tmp_path / "bag", db.from_sequence(lines, npartitions=7), **kw)
    assert_same_files(tmp_path / "bag", tmp_path / "ref")
    zd.write_lines(tmp_path / "delayed", [dask.delayed(np.asarray)(x) for x in lines], **kw)
    assert_same_files(tmp_path / "delayed", tmp_path / "ref")
    np.testing.assert_array_equal(got.objects([ids[5]]).positions, lines[5])


@pytest.mark.parametrize("shards", SHARDS)
def test_skeletons_equal_the_in_memory_writer_file_for_file(client, tmp_path, shards):
    forest = trees(60, 2)
    sizes = [len(p) for p, _ in forest]
    starts = np.cumsum([0, *sizes[:-1]])
    parents = np.concatenate([np.where(q < 0, -1, q + s) for (_, q), s in zip(forest, starts)])
    ids = np.arange(60, dtype=np.int64)[::-1] * 11
    kw = dict(GRID, shards=shards)
    zv.write_skeleton(
        tmp_path / "ref",
        np.concatenate([p for p, _ in forest]),
        parents,
        object_ids=np.repeat(ids, sizes),
        **kw,
    )
    zd.write_skeletons(tmp_path / "got", db.from_sequence(forest, npartitions=4), object_ids=ids, **kw)
    assert_same_files(tmp_path / "got", tmp_path / "ref")


@pytest.mark.parametrize("shards", SHARDS)
def test_raw_meshes_equal_the_in_memory_writer_file_for_file(client, tmp_path, shards):
    meshes = ribbons(50, 3)
    ids = np.random.default_rng(0).permutation(50) + 1000
    kw = dict(GRID, shards=shards, object_ids=ids, object_attributes={"volume": np.arange(50.0)})
    zv.write_meshes(tmp_path / "ref", meshes, **kw)
    zd.write_meshes(tmp_path / "got", db.from_sequence(meshes, npartitions=6), **kw)
    assert_same_files(tmp_path / "got", tmp_path / "ref")


def test_draco_meshes_equal_the_in_memory_writer_file_for_file(client, tmp_path):
    pytest.importorskip("DracoPy")
    meshes = ribbons(30, 4)
    kw = dict(GRID, shards=2, encoding="draco")
    zv.write_meshes(tmp_path / "ref", meshes, **kw)
    zd.write_meshes(tmp_path / "got", [dask.delayed(m) for m in meshes], **kw)
    assert_same_files(tmp_path / "got", tmp_path / "ref")


def test_graphs_and_default_grid_equal_the_in_memory_writer(client, tmp_path):
    graphs = [(p, np.stack([q[1:], np.arange(1, len(q))], 1)) for p, q in trees(40, 5)]
    sizes = [len(p) for p, _ in graphs]
    starts = np.cumsum([0, *sizes[:-1]])
    zv.write_graph(
        tmp_path / "ref",
        np.concatenate([p for p, _ in graphs]),
        np.concatenate([e + s for (_, e), s in zip(graphs, starts)]),
        object_ids=np.repeat(np.arange(40), sizes),
    )
    zd.write_graphs(tmp_path / "got", db.from_sequence(graphs, npartitions=3))
    assert_same_files(tmp_path / "got", tmp_path / "ref")


def test_partitions_do_not_change_the_store(client, tmp_path):
    lines = walks(40, 6)
    for n in (1, 3, 40):
        zd.write_lines(tmp_path / f"p{n}", db.from_sequence(lines, npartitions=n), **GRID)
    assert_same_files(tmp_path / "p1", tmp_path / "p3")
    assert_same_files(tmp_path / "p1", tmp_path / "p40")


def test_refusals(client, tmp_path):
    lines = walks(5, 7)
    with pytest.raises(InputError, match="object_ids has 3 ids"):
        zd.write_lines(tmp_path / "a", db.from_sequence(lines, npartitions=2), object_ids=[1, 2, 3], **GRID)
    with pytest.raises(InputError, match="no per-vertex attributes"):
        zd.write_lines(tmp_path / "b", lines, attributes={"a": np.zeros(3)}, **GRID)
    with pytest.raises(InputError, match="collection is empty"):
        zd.write_lines(tmp_path / "c", db.from_sequence([], npartitions=1), **GRID)
    with pytest.raises(InputError, match="a Dask bag or a list"):
        zd.write_lines(tmp_path / "d", 5, **GRID)
    bad = (np.zeros((3, 3)) + [1, 2, 3], np.array([[0, 1, 5]]))
    with pytest.raises(InputError, match="face"):
        zd.write_meshes(tmp_path / "e", db.from_sequence([*ribbons(4, 7), bad], npartitions=2), **GRID)

    def broken() -> np.ndarray:
        raise RuntimeError("partition failed")

    with pytest.raises(RuntimeError, match="partition failed"):
        zd.write_lines(tmp_path / "f", [*lines, dask.delayed(broken)()], **GRID)
    assert not any((tmp_path / n).exists() for n in "acef")
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no spill folder left behind


def test_tasks_store_the_cells_and_send_back_none(client, tmp_path, monkeypatch):
    """In-process tasks (no cluster client): every cell of an unsharded local target is stored
    by its task; sharded, only cells of shards that straddle two groups go back."""
    from zarr_vectors import dask_linked

    lines = walks(60, 8)
    sent: list[int] = []
    stored: list[int] = []
    run = dask_linked._run_span

    def spy(blob: bytes, lo: int, hi: int) -> Any:
        out = run(blob, lo, hi)
        arrays = out.arrays.values() if hasattr(out, "arrays") else [(c, d) for _, _, c, d in out[1].values()]
        for _, data in arrays:
            sent.extend(len(d) for d in data if d is not None)
            stored.extend(1 for d in data if d is None)
        return out

    monkeypatch.setattr(dask_linked, "_client", lambda: None)
    monkeypatch.setattr(dask_linked, "_run_span", spy)
    monkeypatch.setitem(dask.config.config, "scheduler", "sync")
    zv.write_lines(tmp_path / "ref", lines, **GRID, shards=None)
    zd.write_lines(tmp_path / "got", lines, **GRID, shards=None)
    assert_same_files(tmp_path / "got", tmp_path / "ref")
    assert stored and not sent
    sent.clear()
    stored.clear()
    zv.write_lines(tmp_path / "ref2", lines, **GRID, shards=2)
    zd.write_lines(tmp_path / "got2", lines, **GRID, shards=2)
    assert_same_files(tmp_path / "got2", tmp_path / "ref2")
    assert stored


def test_partitions_and_groups_run_as_tasks_on_the_workers(client, tmp_path):
    """With the grid known, each partition is checked and spilled by its own tasks (counted,
    then spilled), and the cells are built by tasks; without it, only the cells."""
    lines = walks(30, 9)

    def tasks(**kw: Any) -> dict[str, int]:
        with distributed.get_task_stream(client) as ts:
            zd.write_lines(tmp_path / f"l{len(kw)}", db.from_sequence(lines, npartitions=3), **kw)
        names = [str(t["key"]).split("-")[0].strip("('") for t in ts.data]
        return {n: names.count(n) for n in ("_count_part", "_spill_part", "_run_span")}

    known = tasks(**GRID)
    assert known["_count_part"] == known["_spill_part"] == 3 and known["_run_span"] >= 2
    auto = tasks()
    assert auto["_count_part"] == auto["_spill_part"] == 0 and auto["_run_span"] >= 1


def test_an_id_given_in_two_partitions_is_refused(client, tmp_path):
    lines = walks(6, 11)
    with pytest.raises(InputError, match="object_ids name object 4 for several objects"):
        zd.write_lines(
            tmp_path / "a", db.from_sequence(lines, npartitions=2), object_ids=[1, 2, 4, 3, 4, 5], **GRID
        )
    assert not (tmp_path / "a").exists()


def test_zip_and_memory_targets_are_written_by_the_client_alike(client, tmp_path):
    meshes = ribbons(20, 10)
    kw = dict(GRID, shards=2)
    zv.write_meshes(tmp_path / "ref", meshes, **kw)
    ref = zv.open(tmp_path / "ref")
    for target in (tmp_path / "got.zip", f"memory://dask-kinds-{tmp_path.name}"):
        got = zd.write_meshes(target, db.from_sequence(meshes, npartitions=3), **kw)
        for i in (0, 7, 19):
            a, b = got.objects([i]), ref.objects([i])
            np.testing.assert_array_equal(a.positions, b.positions)
            np.testing.assert_array_equal(a.faces, b.faces)
        box = ([20, 20, 20], [60, 60, 60])
        np.testing.assert_array_equal(got.query(bbox=box).positions, ref.query(bbox=box).positions)


@pytest.mark.s3
def test_an_s3_target_holds_the_in_memory_writers_files(client, tmp_path, monkeypatch):
    """Remote targets: the tasks send their cells back and the client writes them (the workers
    never talk to the object store); every stored object equals the local store's file."""
    import uuid

    from tests.storage.s3server import DUMMY_AWS_ENV, start_s3_server

    for name, value in DUMMY_AWS_ENV.items():
        monkeypatch.setenv(name, value)
    server = start_s3_server("zv-dask-kinds")
    try:
        meshes = ribbons(30, 12)
        kw = dict(GRID, shards=2, compression="zstd")
        zv.write_meshes(tmp_path / "ref", meshes, **kw)
        target = f"{server.url_prefix}/{uuid.uuid4().hex}.zarr"
        opts = server.storage_options
        zd.write_meshes(target, db.from_sequence(meshes, npartitions=4), storage_options=opts, **kw)
        backend = zv.open(target, storage_options=opts)._backend
        keys = sorted(k for k in backend.list_keys() if k != "zarr.json")
        ref = stored_files(tmp_path / "ref")
        assert keys == sorted(k for k in ref if k != "zarr.json")
        assert [bytes(b) for b in backend.get_many(keys)] == [ref[k] for k in keys]
    finally:
        server.stop()
