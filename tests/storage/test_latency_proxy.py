"""The latency proxy and the static server of tests/_latency.py, which the I/O tests and
benchmarks/bench_cloud.py measure with: counts exact, delay applied, waves as defined."""

from __future__ import annotations

import http.client
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._latency import LatencyProxy, Request, StaticServer, Traffic, chain_depth, count_waves

DELAY = 0.05
BODY = bytes(range(256)) * 40  # 10,240 bytes


@pytest.fixture
def site(tmp_path: Path) -> Iterator[tuple[StaticServer, LatencyProxy]]:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "blob").write_bytes(BODY)
    with StaticServer(tmp_path) as server, LatencyProxy(server.url, delay=DELAY) as proxy:
        yield server, proxy


def _get(
    url: str, path: str, method: str = "GET", headers: dict[str, str] | None = None
) -> tuple[int, dict, bytes]:
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        conn.request(method, path, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, dict(resp.getheaders()), resp.read()
    finally:
        conn.close()


def _req(start: float, end: float) -> Request:
    return Request("GET", "/k", 200, start, end, 0, 1)


def test_waves_and_depth_by_definition():
    # two overlapping, then one after both, then two touching in a chain
    reqs = [_req(0, 2), _req(1, 3), _req(4, 5), _req(6, 7), _req(7, 8)]
    assert count_waves(reqs) == 3  # touching intervals are one wave
    assert chain_depth(reqs) == 3  # 0-2, 4-5, 6-7 (7-8 touches 6-7: not strictly after)
    queued = [_req(0, 1), _req(0, 1), _req(0.5, 1.5)]  # the third waited for a free slot
    assert count_waves(queued) == 1 and chain_depth(queued) == 1
    chain = [_req(i, i + 0.5) for i in range(5)]
    assert count_waves(chain) == 5 == chain_depth(chain)
    assert count_waves([]) == 0 == chain_depth([])
    t = Traffic(tuple(reqs))
    assert t.summary() == {
        "requests": 5,
        "waves": 3,
        "depth": 3,
        "bytes_in": 0,
        "bytes_out": 5,
        "methods": {"GET": 5},
    }


def test_get_range_head_and_404_forwarded_counted_and_delayed(site):
    server, proxy = site
    with proxy.measure() as window:
        t = time.monotonic()
        status, _, body = _get(proxy.url, "/d/blob")
        assert time.monotonic() - t >= DELAY
        assert status == 200 and body == BODY
        status, headers, body = _get(proxy.url, "/d/blob", headers={"Range": "bytes=100-199"})
        assert status == 206 and body == BODY[100:200]
        assert headers["Content-Range"] == f"bytes 100-199/{len(BODY)}"
        status, headers, body = _get(proxy.url, "/d/blob", headers={"Range": "bytes=-10"})
        assert status == 206 and body == BODY[-10:]
        status, headers, body = _get(proxy.url, "/d/blob", method="HEAD")
        assert status == 200 and body == b"" and int(headers["Content-Length"]) == len(BODY)
        status, _, _ = _get(proxy.url, "/d/blob", headers={"Range": f"bytes={len(BODY)}-"})
        assert status == 416
        status, _, _ = _get(proxy.url, "/d/absent")
        assert status == 404
    traffic = window.traffic
    assert traffic.count == 6 == server.requests
    assert [r.method for r in traffic.requests] == ["GET", "GET", "GET", "HEAD", "GET", "GET"]
    assert [r.status for r in traffic.requests] == [200, 206, 206, 200, 416, 404]
    assert traffic.bytes_in == 0
    assert [r.bytes_out for r in traffic.requests[:4]] == [len(BODY), 100, 10, 0]
    assert all(r.end - r.start >= DELAY for r in traffic.requests)
    assert traffic.waves == 6 == traffic.depth  # one after the other


def test_concurrent_requests_are_one_wave_and_keep_alive_is_kept(site):
    server, proxy = site
    n = 8
    results: list[int] = []
    lock = threading.Lock()

    def fetch() -> None:
        status, _, body = _get(proxy.url, "/d/blob")
        with lock:
            results.append(status if body == BODY else -1)

    threads = [threading.Thread(target=fetch) for _ in range(n)]
    with proxy.measure() as window:
        t = time.monotonic()
        for th in threads:
            th.start()
        for th in threads:
            th.join(timeout=10)
        elapsed = time.monotonic() - t
    assert results == [200] * n
    assert elapsed < n * DELAY / 2  # delayed side by side, not one after another
    assert window.traffic.count == n and window.traffic.waves == 1 and window.traffic.depth == 1
    # one kept-alive connection carries several requests
    host, port = proxy.url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    with proxy.measure() as window:
        socks = []
        for _ in range(3):
            conn.request("GET", "/d/blob")
            assert conn.getresponse().read() == BODY
            socks.append(conn.sock)
    conn.close()
    assert socks[0] is not None and socks[0] is socks[1] is socks[2]
    assert window.traffic.count == 3 and window.traffic.waves == 3


def test_directory_pages_only_when_listing(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "k").write_bytes(b"x")
    with StaticServer(tmp_path, listings=True) as listing, StaticServer(tmp_path, listings=False) as bare:
        status, _, page = _get(listing.url, "/a/")
        assert status == 200 and b'href="k"' in page
        assert _get(bare.url, "/a/")[0] == 404
        assert _get(bare.url, "/a/k")[2] == b"x"


def test_servers_listen_on_loopback_only(site):
    server, proxy = site
    assert server.url.startswith("http://127.0.0.1:") and proxy.url.startswith("http://127.0.0.1:")
    assert server._server.server_address[0] == "127.0.0.1" == proxy._server.server_address[0]


@pytest.mark.s3
def test_put_multipart_chunked_and_delete_through_the_proxy(s3_server):
    """s3fs's multipart upload (POST, PUTs of 5 MB parts, POST), a chunked PUT, GET and DELETE."""
    import boto3
    import s3fs

    prefix, options = s3_server
    endpoint = options["client_kwargs"]["endpoint_url"]
    with LatencyProxy(endpoint, delay=0.01) as proxy:
        opts = {**options, "client_kwargs": {**options["client_kwargs"], "endpoint_url": proxy.url}}
        fs = s3fs.S3FileSystem(skip_instance_cache=True, **opts)
        data = bytes(range(256)) * (11 * 4096)  # 11 MiB
        key = f"{prefix.removeprefix('s3://')}/proxy/multi"
        with proxy.measure() as window:
            with fs.open(key, "wb", block_size=5 * 2**20) as fh:
                fh.write(data)
        methods = window.traffic.by_method()
        assert methods.get("POST") == 2 and methods.get("PUT", 0) >= 1, methods  # create, parts, complete
        assert window.traffic.bytes_in >= len(data)
        assert fs.cat_file(key) == data
        assert fs.cat_file(key, start=5, end=9) == data[5:9]
        # a chunked body (no Content-Length) reaches the server whole
        host, port = proxy.url.removeprefix("http://").split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=10)
        bucket = prefix.removeprefix("s3://")
        conn.request("PUT", f"/{bucket}/proxy/chunked", body=iter([b"abc", b"defg"]), encode_chunked=True)
        assert conn.getresponse().status == 200
        conn.close()
        assert fs.cat_file(f"{bucket}/proxy/chunked") == b"abcdefg"
        with proxy.measure() as window:
            fs.rm(key)  # s3fs deletes with a POST ?delete
            boto3.client("s3", endpoint_url=proxy.url, region_name="us-east-1").delete_object(
                Bucket=bucket, Key="proxy/chunked"
            )
        assert window.traffic.by_method() == {"POST": 1, "DELETE": 1}
        assert not fs.exists(key) and not fs.exists(f"{bucket}/proxy/chunked")
        assert all(r.end - r.start >= 0.01 for r in proxy.traffic().requests)
