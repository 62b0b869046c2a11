"""Hostile web servers (tests/_hostile_http.py on 127.0.0.1): every answer that lies about its
size is cut off with StoreError naming the store and key, after a bounded number of bytes;
listing walks of invented folders stop (issue 28, item 5)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import zarr_vectors as zv
import zarr_vectors.storage.http_store as storage
from tests._hostile_http import HostileServer, chunked_endless, endless, longer, shorter
from tests.conftest import brute_force_box, sorted_rows
from zarr_vectors.errors import StoreError

CELL = "/p.zarr/0/vertices/c/0/0/0"
SHARD = "/s.zarr/0/vertices/c/0/0/0"
LIMIT = {"zv_max_object_bytes": 1 << 20, "zv_timeout": 20}


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, np.ndarray]:
    root = tmp_path_factory.mktemp("hostile")
    pos = np.random.default_rng(3).uniform(0, 399, (3000, 3)).astype(np.float32)
    bounds = ([0.0] * 3, [399.0] * 3)
    zv.write_points(root / "p.zarr", pos, chunk_shape=100, bounds=bounds, shards=None)  # whole-cell requests
    zv.write_points(root / "s.zarr", pos, chunk_shape=100, bounds=bounds, shards=2)
    return root, pos


@pytest.fixture()
def server(folder: tuple[Path, np.ndarray]) -> Iterator[HostileServer]:
    with HostileServer(folder[0]) as srv:
        yield srv


def _query(url: str, **options: object) -> zv.QueryResult:
    return zv.open(url, storage_options=dict(options) or None).query()


@pytest.mark.parametrize("trick", [endless, chunked_endless], ids=["close-delimited", "chunked"])
def test_an_endless_cell_is_cut_at_the_object_limit(server, trick):
    server.tricks[CELL] = trick
    t0 = time.monotonic()
    with pytest.raises(StoreError, match=r"key '0/vertices/c/0/0/0'.*runs past 1048576 bytes") as err:
        _query(f"{server.url}/p.zarr", **LIMIT)
    assert server.url in str(err.value) and "zv_max_object_bytes" in str(err.value)
    assert time.monotonic() - t0 < 15  # not the 20 s request limit
    time.sleep(0.2)  # the server notices the hang-up
    assert server.sent < 32 << 20, server.sent  # the limit, plus what socket buffers held


def test_an_endless_answer_to_a_range_is_cut_at_the_range(server):
    """A shard's index is a suffix range of a few hundred bytes: an endless 206 answer to it is
    refused after that many, with the default limits."""

    def endless_partial(h, data):
        h.wfile.write(b"HTTP/1.1 206 Partial\r\nConnection: close\r\n\r\n")
        while True:
            h.wfile.write(b"\0" * 65536)
            h.server.owner.add_sent(65536)

    server.tricks[SHARD] = endless_partial
    with pytest.raises(
        StoreError, match=r"key '0/vertices/c/0/0/0'.*runs past \d+ bytes, more than the range"
    ):
        _query(f"{server.url}/s.zarr")
    time.sleep(0.2)
    assert server.sent < 32 << 20


def test_a_range_answered_with_an_endless_whole_object_reads_only_the_range(folder, server):
    """A server that ignores ``Range`` (200) is read up to the end of the range asked for, and
    the answer is right; the endless rest is never read."""
    data = (folder[0] / SHARD.lstrip("/")).read_bytes()

    def ignore_range(h, _):
        asked = h.headers.get("Range", "")
        if asked.startswith("bytes=-"):  # the index: honest
            tail = data[-int(asked[7:]) :]
            h.wfile.write(f"HTTP/1.1 206 OK\r\nContent-Length: {len(tail)}\r\n\r\n".encode() + tail)
            return
        h.wfile.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + data)
        while True:
            h.wfile.write(b"\xee" * 65536)
            h.server.owner.add_sent(65536)

    server.tricks[SHARD] = ignore_range
    pos = folder[1]
    lo, hi = np.zeros(3), np.full(3, 199.0)
    got = zv.open(f"{server.url}/s.zarr").query((lo, hi))
    assert np.array_equal(sorted_rows(got.positions), sorted_rows(pos[brute_force_box(pos, lo, hi)]))


def test_a_body_longer_than_its_content_length_is_refused(server):
    server.tricks[CELL] = longer(4096)
    with pytest.raises(StoreError, match=r"key '0/vertices/c/0/0/0'.*(Bad status line|Data after)"):
        _query(f"{server.url}/p.zarr")


def test_a_body_shorter_than_its_content_length_is_refused(server):
    server.tricks[CELL] = shorter(100)
    with pytest.raises(StoreError, match=r"key '0/vertices/c/0/0/0'.*ClientPayloadError"):
        _query(f"{server.url}/p.zarr")


def test_a_content_length_over_the_limit_is_refused_unread(server):
    def huge(h, data):
        h.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: 1000000000000\r\n\r\n" + data)
        h.server.owner.add_sent(len(data))

    server.tricks[CELL] = huge
    with pytest.raises(
        StoreError, match=r"declares 1000000000000 bytes \(Content-Length\), more than the 1048576"
    ):
        _query(f"{server.url}/p.zarr", **LIMIT)


def test_a_wrong_content_range_is_refused(folder, server):
    data = (folder[0] / SHARD.lstrip("/")).read_bytes()

    def shifted(h, _):
        n = int(h.headers["Range"][7:])  # bytes=-n: answer a range starting elsewhere
        body = data[-n - 8 : -8]
        h.wfile.write(
            f"HTTP/1.1 206 OK\r\nContent-Length: {n}\r\nContent-Range: bytes 0-{n - 1}/{len(data)}\r\n\r\n".encode()
            + body
        )

    server.tricks[SHARD] = shifted
    with pytest.raises(StoreError, match="wrong range"):
        _query(f"{server.url}/s.zarr")


def test_the_object_limit_is_an_option(server):
    with pytest.raises(zv.InputError, match="zv_max_object_bytes must be a positive integer"):
        zv.open(f"{server.url}/p.zarr", storage_options={"zv_max_object_bytes": 0})
    with pytest.raises(
        StoreError,
        match=r"key .zarr.json.: the answer declares \d+ bytes \(Content-Length\), more than the 100",
    ):
        zv.open(f"{server.url}/p.zarr", storage_options={"zv_max_object_bytes": 100})


def test_invented_folders_stop_the_walk(folder, monkeypatch):
    with HostileServer(folder[0], inventing="/inv.zarr/", fanout=3) as srv:
        monkeypatch.setattr(storage, "MAX_HTTP_PAGES", 300)
        with pytest.raises(StoreError, match="more than 300 folders"):
            zv.validate(f"{srv.url}/inv.zarr")
        assert srv.requests < 1000
        monkeypatch.undo()
        monkeypatch.setattr(storage, "MAX_HTTP_LISTED", 500)
        with pytest.raises(StoreError, match="list more than 500 names"):
            zv.validate(f"{srv.url}/inv.zarr")
    with HostileServer(folder[0], inventing="/inv.zarr/", fanout=1) as srv:
        with pytest.raises(StoreError, match="nest deeper than 16 levels"):
            zv.validate(f"{srv.url}/inv.zarr")
        assert srv.requests < 40


def test_an_endless_directory_page_is_cut(folder, server, monkeypatch):
    monkeypatch.setattr(storage, "MAX_PAGE_BYTES", 1 << 20)
    server.tricks["/p.zarr/"] = endless
    with pytest.raises(StoreError, match="runs past 1048576 bytes"):
        zv.validate(f"{server.url}/p.zarr")


def test_a_partial_answer_to_a_whole_object_request_is_refused(server):
    def partial(h, data):
        part = data[: len(data) // 2]
        head = f"HTTP/1.1 206 P\r\nContent-Length: {len(part)}\r\nContent-Range: bytes 0-{len(part) - 1}/{len(data)}"
        h.wfile.write(f"{head}\r\n\r\n".encode() + part)

    server.tricks[CELL] = partial
    with pytest.raises(StoreError, match=r"key '0/vertices/c/0/0/0'.*part of the object \(HTTP 206\)"):
        _query(f"{server.url}/p.zarr")
