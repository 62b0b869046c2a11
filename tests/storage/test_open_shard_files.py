"""Local sharded stores keep their shard files open for ranged reads: reused across queries,
bounded, closed with the dataset (or its garbage collection), never serving a replaced store."""

from __future__ import annotations

import gc
import os

import numpy as np
import pytest

import zarr_vectors as zv
from zarr_vectors.errors import StoreChangedError
from zarr_vectors.storage import LocalBackend
from zarr_vectors.storage.openfiles import OpenFiles

BOX = ([0.0, 0.0, 0.0], [40.0, 40.0, 40.0])


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _local(ds: zv.Dataset) -> LocalBackend:
    backend = ds._backend
    while not isinstance(backend, LocalBackend):
        backend = backend.inner
    return backend


def _write(path, seed: int = 0, n: int = 2_000) -> np.ndarray:
    pos = np.random.default_rng(seed).uniform(0, 140, (n, 3)).astype(np.float32)
    zv.write_points(path, pos, chunk_shape=20, attributes={"a": pos[:, 0]})
    return pos


def _inside(pos: np.ndarray) -> int:
    return int(np.all((pos >= BOX[0]) & (pos <= BOX[1]), axis=1).sum())


pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts /proc/self/fd")


def test_queries_reuse_the_open_shard_files(tmp_path):
    pos = _write(tmp_path / "s.zarr")
    with zv.open(tmp_path / "s.zarr") as ds:
        files = _local(ds).open_files
        assert len(ds.query(BOX)) == _inside(pos)
        first = files.opened
        assert first > 0 and len(files) == first  # one open per shard read, all kept
        for _ in range(3):
            assert len(ds.query(BOX)) == _inside(pos)
        assert files.opened == first  # the same shards again: no file opened anew
    assert len(files) == 0  # closed with the dataset


def test_open_files_stay_within_their_bound(tmp_path):
    pos = _write(tmp_path / "s.zarr")
    ds = zv.open(tmp_path / "s.zarr")
    files = _local(ds).open_files
    files.limit = 3
    before = _fds()
    assert len(ds.query()) == len(pos)
    assert len(files) <= 3 and _fds() <= before + 3
    assert files.opened > 3


@pytest.mark.slow  # a write and three queries (about 1 s)
def test_close_and_garbage_collection_close_the_files(tmp_path):
    pos = _write(tmp_path / "s.zarr")
    before = _fds()
    ds = zv.open(tmp_path / "s.zarr")
    assert len(ds.query(BOX)) == _inside(pos)
    assert _fds() > before + 2
    ds.close()
    assert _fds() <= before
    assert len(ds.query(BOX)) == _inside(pos)  # still usable: files reopened
    del ds
    gc.collect()
    assert _fds() <= before


@pytest.mark.parametrize("closed", [False, True])
def test_a_replaced_store_is_never_read_through_a_kept_file(tmp_path, closed):
    path = tmp_path / "s.zarr"
    _write(path, seed=1)
    ds = zv.open(path)
    assert len(ds.query(BOX)) > 0  # shard files and indexes now held
    if closed:
        ds.close()  # files closed, shard indexes still cached: the new shards differ from them
    _write_over(path)
    with pytest.raises(StoreChangedError, match=r"store .*s\.zarr.*changed while it was being read"):
        ds.query(BOX)
    fresh = zv.open(path)
    assert len(fresh.query(BOX)) == 500


def _write_over(path) -> None:
    pos = np.random.default_rng(9).uniform(0, 35, (500, 3)).astype(np.float32)
    zv.write_points(path, pos, chunk_shape=20, attributes={"a": pos[:, 0]}, overwrite=True)


@pytest.mark.slow  # a write and an append (about 1.5 s)
def test_an_append_through_the_dataset_reads_back_its_rows(tmp_path):
    path = tmp_path / "s.zarr"
    pos = _write(path)
    ds = zv.open(path, mode="r+")
    assert len(ds.query(BOX)) == _inside(pos)
    more = np.random.default_rng(4).uniform(0, 30, (300, 3)).astype(np.float32)
    ds.append(more, attributes={"a": more[:, 0]})
    assert len(ds.query(BOX)) == _inside(pos) + 300
    assert len(zv.open(path).query(BOX)) == _inside(pos) + 300


def test_a_retired_file_closes_once_its_last_read_ends(tmp_path):
    (tmp_path / "k").write_bytes(b"abc")
    files = OpenFiles(limit=1)
    fd, token = files.acquire("k", lambda key: os.open(tmp_path / key, os.O_RDONLY))
    files.retire(["k"])
    assert os.pread(fd, 3, 0) == b"abc"  # still open for the read holding it
    fd2, token2 = files.acquire("k", lambda key: os.open(tmp_path / key, os.O_RDONLY))
    assert files.opened == 2  # a retired descriptor is never handed out again
    files.release(token)
    with pytest.raises(OSError):
        os.fstat(fd)
    files.release(token2)
    files.close()
    with pytest.raises(OSError):
        os.fstat(fd2)
    assert files.acquire("gone", lambda key: None) is None


def test_a_pickled_dataset_starts_with_no_file_open(tmp_path):
    """Datasets go to Dask workers pickled: the copy carries no descriptor and reads alone."""
    import pickle

    pos = _write(tmp_path / "s.zarr")
    ds = zv.open(tmp_path / "s.zarr")
    assert len(ds.query(BOX)) == _inside(pos)
    blob = pickle.dumps(ds)
    assert blob == pickle.dumps(ds)  # deterministic (Dask tokenizes it)
    copy = pickle.loads(blob)
    assert len(_local(copy).open_files) == 0
    assert len(copy.query(BOX)) == _inside(pos)


def test_a_warm_box_reads_each_run_with_one_pread_and_no_fstat(tmp_path, monkeypatch):
    """Once a shard file is open and its index cached, each run of wanted cells costs one
    ``pread``: no ``fstat`` per range (the file was checked once, when opened). The only
    ``fstat`` calls left are those of the documents read whole (the root checks), each
    opened afresh."""
    pos = _write(tmp_path / "s.zarr")
    with zv.open(tmp_path / "s.zarr") as ds:
        assert len(ds.query(BOX)) == _inside(pos)  # warm: files open, indexes cached
        reader = ds._backend.inner
        calls = {"fstat": 0, "open": 0, "pread": 0}
        for name in calls:
            real = getattr(os, name)

            def counted(*args, _real=real, _name=name, **kwargs):
                calls[_name] += 1
                return _real(*args, **kwargs)

            monkeypatch.setattr(os, name, counted)
        runs = reader.range_requests
        assert len(ds.query(BOX)) == _inside(pos)
        runs = reader.range_requests - runs
        monkeypatch.undo()
        assert runs > 0 and calls["pread"] >= runs
        assert calls["fstat"] == calls["open"]  # documents only
        assert calls["pread"] - runs == calls["open"]  # one read per document, one per run


def test_a_batch_asking_a_cell_twice_and_absent_cells_reads_like_one_file_per_cell(tmp_path):
    """The planner groups a batch's cells by shard and coalesces their runs: a cell asked twice
    (in the same batch), cells of absent shards and keys that are not cells answer as they
    would in the unsharded store."""
    pos = _write(tmp_path / "s.zarr")
    zv.write_points(tmp_path / "u.zarr", pos, chunk_shape=20, attributes={"a": pos[:, 0]}, shards=None)
    keys = ["0/vertices/c/0/0/0", "0/vertex_attributes/a/c/1/0/0", "0/vertices/c/0/0/0"]
    keys += ["0/vertices/c/6/6/6", "0/vertices/c/6/6/5", "0/vertices/zarr.json", "0/vertices/c/99/0/0"]
    keys += ["0/vertex_attributes/a/c/0/0/0", "0/vertices/c/0/0/1", "0/vertices/c/x/0/0"]
    docs = ["0/vertices/zarr.json", "0/vertex_attributes/a/zarr.json"]
    with zv.open(tmp_path / "s.zarr") as s, zv.open(tmp_path / "u.zarr") as u:
        s._backend.get_many(docs)  # readers read an array's document before its cells
        got = s._backend.get_many(keys)
        want = u._backend.get_many(keys)
    for key, a, b in zip(keys, got, want):
        if key.endswith("zarr.json"):
            assert (a is None) == (b is None), key
        else:
            assert a == b, key
