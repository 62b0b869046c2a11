"""The read arena: slices that stay valid until reset, reuse across queries, and results
that never share its memory."""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest

import zarr_vectors as zv
from zarr_vectors.errors import InputError
from zarr_vectors.storage import local as local_module
from zarr_vectors.storage import scratch as scratch_module
from zarr_vectors.storage.local import LocalBackend
from zarr_vectors.storage.scratch import Arena, arena, retained_limit


def test_slices_are_disjoint_aligned_and_reused_after_reset():
    a = Arena()
    views = [a.take(n) for n in (5, 3 << 20, 17, 0, 1 << 20)]  # the second needs a new block
    for v, n in zip(views, (5, 3 << 20, 17, 0, 1 << 20)):
        assert len(v) == n and not v.readonly
    for i, v in enumerate(views):
        np.frombuffer(v, np.uint8)[:] = i
    for i, v in enumerate(views):
        assert (np.frombuffer(v, np.uint8) == i).all()  # no slice overlaps another
    addresses = [np.frombuffer(v, np.uint8).ctypes.data for v in views if len(v)]
    assert all(addr % 8 == 0 for addr in addresses)
    used = a.capacity
    a.reset()
    assert a.capacity == used  # merged into one block of the same size

    def first_address() -> int:
        address = np.frombuffer(a.take(4 << 20), np.uint8).ctypes.data
        a.reset()
        return address

    assert first_address() == first_address()  # the same memory, query after query


def test_takes_from_many_threads_never_overlap():
    a = Arena()
    got: list[memoryview] = []
    lock = threading.Lock()

    def work(j: int) -> None:
        for _ in range(200):
            v = a.take(1000 + j)
            np.frombuffer(v, np.uint8)[:] = j
            with lock:
                got.append(v)

    threads = [threading.Thread(target=work, args=(j,)) for j in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for v in got:
        assert (np.frombuffer(v, np.uint8) == len(v) - 1000).all()


def test_the_pool_keeps_small_arenas_and_frees_large_ones(monkeypatch):
    monkeypatch.setattr(scratch_module, "_pool", [])
    monkeypatch.setattr(scratch_module, "MAX_RETAINED", 4 << 20)
    with arena() as a:
        a.take(1 << 20)
    with arena() as b:
        assert b is a  # lent again
        b.take(8 << 20)
    assert [x.capacity for x in scratch_module._pool] == [0]  # grew past MAX_RETAINED: memory freed


def test_the_pool_keeps_arenas_while_together_they_fit_the_limit(monkeypatch):
    monkeypatch.setattr(scratch_module, "_pool", [])
    monkeypatch.setattr(scratch_module, "MAX_RETAINED", 6 << 20)
    with arena() as a, arena() as b:  # two queries at once; b is returned first
        assert a is not b
        a.take(4 << 20)
        b.take(3 << 20)
    assert scratch_module._pool == [b]  # a would take the two past 6 MiB: dropped
    with arena() as c, arena() as d:
        assert c is b and d is not a
        d.take(2 << 20)
    assert sorted(x.capacity for x in scratch_module._pool) == [2 << 20, 3 << 20]


def test_the_retained_limit_follows_the_environment_or_the_memory():
    assert retained_limit({"ZV_SCRATCH_RETAIN_MB": "300"}) == 300 << 20
    assert retained_limit({"ZV_SCRATCH_RETAIN_MB": "0"}) == 0
    memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    assert retained_limit({}) == min(max(64 << 20, memory // 32), 1 << 30)
    assert retained_limit({"ZV_SCRATCH_RETAIN_MB": " "}) == retained_limit({})
    for bad in ("abc", "-5", "1.5"):
        with pytest.raises(
            InputError, match=rf"ZV_SCRATCH_RETAIN_MB must be a whole number of MiB, 0 or more; got '{bad}'"
        ):
            retained_limit({"ZV_SCRATCH_RETAIN_MB": bad})


def test_a_few_large_files_are_read_by_threads_in_order(tmp_path, monkeypatch):
    backend = LocalBackend(str(tmp_path), read_only=False)
    rng = np.random.default_rng(4)
    items = [(f"c/{i}", rng.bytes(local_module.LARGE_FILE + i)) for i in range(5)] + [("s", b"tiny")]
    backend.set_many(items)
    calls: list[int] = []
    real = local_module.map_cells
    monkeypatch.setattr(local_module, "map_cells", lambda fn, n, *a: calls.append(n) or real(fn, n, *a))
    keys = ["c/0", "s", "missing", "c/1", "c/2", "c/3", "c/4"]
    with arena() as scratch:
        got = backend.get_many_into(keys, scratch)
        assert [None if v is None else bytes(v) for v in got] == backend.get_many(keys)
        assert calls  # spread over threads although fewer than PARALLEL_READS keys
        calls.clear()
        small = backend.get_many_into(["s", "c/0", "c/1", "c/2"], scratch)  # the first file is small
        assert [None if v is None else bytes(v) for v in small] == backend.get_many(
            ["s", "c/0", "c/1", "c/2"]
        )
        assert not calls
        assert backend.get_many_into([], scratch) == []


def test_many_small_files_are_read_on_one_thread_and_many_medium_ones_by_threads(tmp_path, monkeypatch):
    backend = LocalBackend(str(tmp_path), read_only=False)
    rng = np.random.default_rng(5)
    n = local_module.PARALLEL_READS
    small = [(f"s/{i}", rng.bytes(local_module.SMALL_FILE - 1 - i)) for i in range(n)]
    medium = [(f"m/{i}", rng.bytes(local_module.SMALL_FILE + i)) for i in range(n)]
    backend.set_many(small + medium)
    calls: list[int] = []
    real = local_module.map_cells
    monkeypatch.setattr(local_module, "map_cells", lambda fn, k, *a: calls.append(k) or real(fn, k, *a))
    with arena() as scratch:
        for items, threaded in ((small, False), (medium, True), (medium[: n - 2], False)):
            keys = [k for k, _ in items]
            got = backend.get_many_into([*keys, "missing"], scratch)
            assert [None if v is None else bytes(v) for v in got] == [v for _, v in items] + [None]
            assert bool(calls) == threaded, (len(keys), items[0][0])
            calls.clear()
        # an absent first key (an empty chunk) says nothing of the sizes: many keys go to threads
        got = backend.get_many_into(["missing", *[k for k, _ in small]], scratch)
        assert [None if v is None else bytes(v) for v in got] == [None] + [v for _, v in small]
        assert calls


def test_local_reads_into_an_arena_equal_plain_reads(tmp_path):
    backend = LocalBackend(str(tmp_path), read_only=False)
    backend.set_many([("a/b", b"hello"), ("c", bytes(range(256)) * 300), ("empty", b"")])
    keys = ["a/b", "c", "missing", "empty", "a"]  # "a" is a folder: absent like a missing key
    with arena() as scratch:
        into = backend.get_many_into(keys, scratch)
        assert [None if v is None else bytes(v) for v in into] == backend.get_many(keys)
        many = backend.get_many_into(keys * 40, scratch)  # a batch large enough for threads
        assert [None if v is None else bytes(v) for v in many] == backend.get_many(keys) * 40


@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_a_result_keeps_its_rows_when_later_queries_reuse_the_arena(tmp_path, compression):
    rng = np.random.default_rng(3)
    pts = rng.random((20_000, 3), dtype=np.float32) * 100
    ds = zv.write_points(
        tmp_path / "p.zarr",
        pts,
        chunk_shape=25,
        attributes={"w": rng.random(20_000, dtype=np.float32)},
        compression=compression,
    )
    first = ds.query(bbox=([10, 10, 10], [60, 60, 60]), workers=1)
    kept = (first.positions.copy(), first.attributes["w"].copy())
    for lo in range(0, 60, 7):  # other boxes write other rows over the arena
        ds.query(bbox=([lo] * 3, [lo + 40] * 3), workers=2)
    assert np.array_equal(first.positions, kept[0]) and np.array_equal(first.attributes["w"], kept[1])
    inside = np.all((pts >= 10) & (pts <= 60), axis=1)
    assert len(first.positions) == int(inside.sum())
