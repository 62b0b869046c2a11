"""Failures part way through writes to in-place targets (memory, S3), and object-storage faults.

A write is built completely before anything of the old store is touched; its commit
to an in-place target is interrupted here after K key operations (writes and deletes)
for many K. Whatever K, a reader gets the old store exactly, the new store exactly, or
``IncompleteStoreError``: never part of one. Object-storage faults raise ``StoreError``
naming the store and the key, within the request time limit.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import zarr

import zarr_vectors as zv
from zarr_vectors.errors import IncompleteStoreError, StoreError
from zarr_vectors.storage.protocol import DEFAULT_TIMEOUT
from zarr_vectors.storage.resolve import open_backend
from zarr_vectors.storage.zarr_store import ZarrStoreBackend

from .conftest import StoreTarget, kind_param
from .s3server import start_s3_server


class Crash(RuntimeError):
    """The injected interruption."""


@contextlib.contextmanager
def crash_after(k: int | None) -> Iterator[dict[str, int]]:
    """Let the in-place backend perform ``k`` key writes or deletes, then raise Crash
    (``None``: never; the count of operations is in the yielded dict)."""
    state = {"ops": 0}

    def wrap(real: Any, unpack: bool) -> Any:
        def op(self: Any, batch: Any) -> None:
            batch = list(batch)
            allowed = len(batch) if k is None else max(0, min(len(batch), k - state["ops"]))
            real(self, batch[:allowed])
            state["ops"] += allowed
            if allowed < len(batch):
                raise Crash(f"interrupted after {state['ops']} key operations")

        return op

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ZarrStoreBackend, "set_many", wrap(ZarrStoreBackend.set_many, True))
        mp.setattr(ZarrStoreBackend, "delete_many", wrap(ZarrStoreBackend.delete_many, False))
        yield state


def version(seed: int, n: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    return {
        "positions": rng.uniform(0, 100, (n, 3)).astype(np.float32),
        "attributes": {"v": np.full(n, seed, np.int32)},
        "object_ids": rng.integers(0, 7, n),
        "object_attributes": {"name": np.array([f"obj{seed}-{i}" for i in range(7)])},
    }


def rows(res: zv.Result) -> np.ndarray:
    table = np.column_stack([res.positions, res.attributes["v"]]).astype(np.float64)
    return table[np.lexsort(table.T[::-1])]


def expected(v: dict[str, Any]) -> np.ndarray:
    table = np.column_stack([v["positions"], v["attributes"]["v"]]).astype(np.float64)
    return table[np.lexsort(table.T[::-1])]


def outcome(t: StoreTarget, old: dict[str, Any], new: dict[str, Any]) -> str:
    """'old', 'new' or 'incomplete'; fails on anything else (a partial or mixed store)."""
    try:
        ds = t.open()
    except IncompleteStoreError as exc:
        assert "is incomplete: a write was interrupted" in str(exc)
        return "incomplete"
    got = rows(ds.read())
    for name, v in (("old", old), ("new", new)):
        if got.shape == expected(v).shape and np.array_equal(got, expected(v)):
            assert list(ds.object_attributes("name")) == list(v["object_attributes"]["name"])
            return name
    pytest.fail(
        f"a reader got {len(got)} rows matching neither version (old {len(old['positions'])}, "
        f"new {len(new['positions'])})"
    )


OLD = version(1, 500)
NEW = version(2, 300)


def write(t: StoreTarget, v: dict[str, Any], chunk: float, **kwargs: Any) -> zv.Dataset:
    return zv.write_points(t.target, chunk_shape=chunk, storage_options=t.storage_options, **v, **kwargs)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("kind", "samples", "chunks"),
    [
        pytest.param("memory_store", 25, (25, 50), id="memory_store"),
        pytest.param("s3_url", 2, (50, 100), id="s3_url", marks=pytest.mark.s3),  # moto: about 20 ms a key
    ],
)
def test_overwrite_interrupted_after_any_number_of_key_operations(
    make_target: Any, kind: str, samples: int, chunks: tuple[int, int]
) -> None:
    old_chunk, new_chunk = chunks
    # Unsharded (S3 stores are sharded by default): one key per cell makes many points to interrupt at.
    probe = make_target(kind)
    write(probe, OLD, old_chunk, shards=None)
    with crash_after(None) as count:
        write(probe, NEW, new_chunk, overwrite=True, shards=None)
    total = count["ops"]
    assert outcome(probe, OLD, NEW) == "new" and total > 20
    # the placeholder (1), deletes of stale keys, writes of new keys, the root (last)
    rng = np.random.default_rng(5)
    ks = sorted({0, 1, 2, total - 1, *rng.integers(3, total - 1, samples).tolist()})
    seen = {}
    for k in ks:
        t = make_target(kind)
        write(t, OLD, old_chunk, shards=None)
        with crash_after(k), pytest.raises(Crash):
            write(t, NEW, new_chunk, overwrite=True, shards=None)
        seen[k] = outcome(t, OLD, NEW)
        if k == ks[-1]:  # an interrupted store is recovered by an overwrite
            write(t, NEW, new_chunk, overwrite=True, shards=None)
            assert outcome(t, OLD, NEW) == "new"
    assert seen[0] == "old"
    assert all(seen[k] == "incomplete" for k in ks[1:])


@pytest.mark.parametrize("kind", [kind_param("memory_store"), kind_param("s3_url"), kind_param("local")])
def test_unencodable_attribute_fails_before_the_old_store_is_touched(make_target: Any, kind: str) -> None:
    t = make_target(kind)
    write(t, OLD, 50)
    keys_before = None
    if kind != "local":
        keys_before = sorted(
            open_backend(t.target, read_only=True, storage_options=t.storage_options).list_keys()
        )
    bad = version(3, 200)
    bad["object_attributes"] = {"name": np.array(["fine"] * 6 + ["lone \ud800 surrogate"])}
    with pytest.raises((UnicodeEncodeError, zv.InputError)):
        write(t, bad, 50, overwrite=True)
    assert outcome(t, OLD, NEW) == "old"
    if keys_before is not None:
        backend = open_backend(t.target, read_only=True, storage_options=t.storage_options)
        assert sorted(backend.list_keys()) == keys_before


@pytest.mark.slow
def test_pyramid_rebuild_in_place_interrupted_anywhere() -> None:
    """Memory store with levels 0, 1 rebuilt as 0, 1, 2: after an interruption the root
    lists the old levels, level 0 only, or the new levels, and each listed level reads
    exactly as built."""

    def prepared(factors: list[Any]) -> zarr.storage.MemoryStore:
        store = zarr.storage.MemoryStore()
        zv.write_points(store, chunk_shape=25, **OLD)
        zv.open(store, mode="r+").build_pyramid(factors)
        return store

    def levels_of(store: Any) -> dict[int, np.ndarray]:
        ds = zv.open(store)
        return {lv: rows(ds.read(level=lv)) for lv in ds.levels}

    old_levels = levels_of(prepared([2]))
    new_store = prepared([2])
    with crash_after(None) as count:
        zv.open(new_store, mode="r+").build_pyramid([4, 2], overwrite=True)
    new_levels = levels_of(new_store)
    assert sorted(new_levels) == [0, 1, 2] and not np.array_equal(new_levels[1], old_levels[1])
    total = count["ops"]
    seen = set()
    for k in sorted({0, 1, total - 1, *np.random.default_rng(9).integers(2, total - 1, 5).tolist()}):
        store = prepared([2])
        with crash_after(k), pytest.raises(Crash):
            zv.open(store, mode="r+").build_pyramid([4, 2], overwrite=True)
        got = levels_of(store)
        assert np.array_equal(got[0], old_levels[0])
        if sorted(got) == [0, 1] and np.array_equal(got[1], old_levels[1]):
            seen.add("old")
        elif sorted(got) == [0]:
            seen.add("level 0 only")
        else:
            pytest.fail(
                f"interrupted after {k} operations, the store lists levels {sorted(got)} with other data"
            )
    assert seen == {"old", "level 0 only"}
    zv.open(store, mode="r+").build_pyramid([4, 2], overwrite=True)  # a new build recovers
    got = levels_of(store)
    assert all(np.array_equal(got[lv], new_levels[lv]) for lv in (0, 1, 2))


# -- object-storage faults ----------------------------------------------------------------------
@pytest.mark.s3
def test_s3_faults_name_store_and_key(s3_server: tuple[str, dict[str, Any]]) -> None:
    _, options = s3_server
    url = "s3://no-such-bucket-zv/cells.zarr"
    with pytest.raises(StoreError) as info:
        zv.write_points(url, OLD["positions"], chunk_shape=50, storage_options=options)
    assert info.value.store == url and info.value.key == ""
    assert str(info.value).startswith(
        f"store {url}: listing failed: FileNotFoundError: The specified bucket does not exist"
    )
    assert "check the path or URL" in str(info.value) and "\n" not in str(info.value)

    server = start_s3_server("zv-fault-bucket")  # a server of this test's own, stopped below
    try:
        url = "s3://zv-fault-bucket/cells.zarr"
        opts = {**server.storage_options, "zv_timeout": 5}
        zv.write_points(url, chunk_shape=25, storage_options=opts, **OLD)
        ds = zv.open(url, storage_options=opts)
    finally:
        server.stop()
    start = time.monotonic()
    with pytest.raises(StoreError, match="reading (failed|got no answer)") as info:
        ds.read()
    assert time.monotonic() - start < 60
    assert info.value.store == url and info.value.key.startswith("0/")  # a key of level 0, named


@pytest.fixture
def silent_server() -> Iterator[str]:
    """A TCP server on 127.0.0.1 that accepts connections and never answers."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(64)
    srv.settimeout(0.2)
    held: list[socket.socket] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            with contextlib.suppress(OSError):
                held.append(srv.accept()[0])

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{srv.getsockname()[1]}"
    stop.set()
    thread.join(5)
    for conn in held:
        conn.close()
    srv.close()


@pytest.mark.s3
def test_server_that_never_answers_times_out(silent_server: str, s3_server: Any) -> None:
    options = {
        "key": "testing",
        "secret": "testing",
        "zv_timeout": 1,
        "client_kwargs": {"endpoint_url": silent_server, "region_name": "us-east-1"},
    }
    url = "s3://zv-bucket/cells.zarr"
    start = time.monotonic()
    with pytest.raises(StoreError, match=r"got no answer within 1 s.*zv_timeout") as info:
        zv.open(url, storage_options=options)
    assert time.monotonic() - start < 15
    assert info.value.store == url and info.value.key in ("zarr.json", ".zgroup", ".zarray")
    start = time.monotonic()
    with pytest.raises(StoreError, match="listing got no answer within 1 s"):
        zv.write_points(url, OLD["positions"], chunk_shape=50, storage_options=options)
    assert time.monotonic() - start < 15


def test_timeout_option() -> None:
    backend = open_backend(zarr.storage.MemoryStore(), read_only=True)
    assert backend.timeout == DEFAULT_TIMEOUT == 30.0
    assert open_backend("memory://t", read_only=True, storage_options={"zv_timeout": None}).timeout is None
    assert open_backend("memory://t", read_only=True, storage_options={"zv_timeout": 2}).timeout == 2.0
    for bad in (0, -1, "30", True):
        with pytest.raises(
            zv.ZarrVectorsError, match="zv_timeout must be a positive number of seconds or None"
        ):
            zv.open("memory://t", storage_options={"zv_timeout": bad})


def test_missing_s3_package_names_the_extra() -> None:
    """In an interpreter without s3fs, an s3:// URL names the distribution's extra, both ways."""
    code = (
        "import sys; sys.modules['s3fs'] = None\n"  # as if s3fs were not installed
        "import zarr_vectors as zv\n"
        "try:\n    zv.open('s3://bucket/cells.zarr')\n"
        "except zv.ZarrVectorsError as exc:\n    print(exc)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    text = proc.stdout
    assert "cannot open 's3://bucket/cells.zarr'" in text, proc.stderr
    assert "pip install 'zarrvec[s3]'" in text and 'pip install -e ".[s3]"' in text
    assert "zarr-vectors-py" not in text
