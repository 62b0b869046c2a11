"""``serve`` against a hostile web page and hostile clients, on a real server on 127.0.0.1.

Each attack of issue 28 is driven with raw sockets: CORS only for listed origins, a wrong
``Host`` refused, no machine path in any body, idle sockets holding no thread, bad
``Content-Length`` answered at once, ``HEAD /events`` without a stream, and a 4xx answer
(never a dropped connection, never a 5xx) for every malformed URL.
"""

from __future__ import annotations

import http.client
import logging
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import zarr_vectors as zv
from tests._serve_stores import build_stores, get, raw_request
from zarr_vectors.neuroglancer.server import Server

LONG = "1" * 4301  # more digits than int() converts by default


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return build_stores(tmp_path_factory.mktemp("serve"))


@pytest.fixture(scope="module")
def server(stores: dict[str, Path]) -> Iterator[Server]:
    with zv.serve(list(stores.values()), client=False) as s:
        yield s


def _port(server: Server) -> int:
    return int(server.url.rsplit(":", 1)[1])


def test_no_cors_header_by_default(server: Server) -> None:
    port = _port(server)
    answer = get(port, "/zv/synapses/ann/info", {"Origin": "https://evil.example"})
    assert answer.status == 200
    assert not [k for k in answer.headers if k.startswith("access-control-")]
    pre = get(port, "/zv/synapses/ann/info", {"Origin": "https://evil.example"}, method="OPTIONS")
    assert pre.status == 204 and "access-control-allow-origin" not in pre.headers


def test_cors_only_for_listed_origins(stores: dict[str, Path]) -> None:
    trusted = "https://ng.example:8443"
    with zv.serve(stores["points"], client=False, cors=[trusted, "http://127.0.0.1:9000"]) as s:
        port = _port(s)
        ok = get(port, "/zv/synapses/ann/info", {"Origin": trusted})
        assert ok.status == 200 and ok.headers["access-control-allow-origin"] == trusted
        assert ok.headers["vary"] == "Origin"
        other = get(port, "/zv/synapses/ann/info", {"Origin": "https://evil.example"})
        assert other.status == 200 and "access-control-allow-origin" not in other.headers
        assert other.headers["vary"] == "Origin"
        pre = get(port, "/zv/synapses/ann/info", {"Origin": trusted}, method="OPTIONS")
        assert pre.headers["access-control-allow-origin"] == trusted
        assert "Range" in pre.headers["access-control-allow-headers"]


def test_cors_star_is_explicit_and_warned(stores: dict[str, Path]) -> None:
    with pytest.warns(UserWarning, match="every web page"):
        s = zv.serve(stores["points"], client=False, cors=["*"])
    with s:
        answer = get(_port(s), "/zv/synapses/ann/info", {"Origin": "https://any.example"})
        assert answer.headers["access-control-allow-origin"] == "*"
    for bad in ("evil.example", "https://x.example/path", "https://x.example:port", ""):
        with pytest.raises(zv.InputError, match="scheme://host"):
            zv.serve(stores["points"], client=False, cors=[bad])


def test_host_must_be_the_listening_address(server: Server) -> None:
    port = _port(server)
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"LOCALHOST:{port}"):
        assert get(port, "/zv/synapses/ann/info", {"Host": host}).status == 200, host
    for host in (
        f"evil.example:{port}",
        "127.0.0.1",
        f"127.0.0.1:{port + 1}",
        f"rebind.127.0.0.1.nip.io:{port}",
    ):
        answer = get(port, "/zv/synapses/ann/info", {"Host": host})
        assert answer.status == 421 and b"misdirected" in answer.body, host
    missing = raw_request(port, b"GET /zv/synapses/ann/info HTTP/1.1\r\n\r\n")
    assert missing.status == 421
    two = raw_request(
        port,
        f"GET /zv/synapses/ann/info HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nHost: evil.example\r\n\r\n".encode(),
    )
    assert two.status == 421


def test_error_bodies_name_no_machine_path(
    stores: dict[str, Path], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A chunk replaced by a FIFO: the answer is a 5xx naming the layer, the log names the file."""
    import shutil

    store = tmp_path / "synapses.zarr"
    shutil.copytree(stores["points"], store)
    src = zv.neuroglancer.source.StoreSource(zv.open(store), "synapses")
    cell = next(p for p in src.paths(ids=False) if p.startswith("ann/spatial"))
    victims = [
        p for p in (store / "0").rglob("*") if p.is_file() and "vertices" in p.parts and p.name != "zarr.json"
    ]
    for victim in victims:
        victim.unlink()
        os.mkfifo(victim)
    with caplog.at_level(logging.WARNING, logger="zarr_vectors.serve"):
        with zv.serve(store, client=False) as s:
            port = _port(s)
            bodies = []
            for path in (
                f"/zv/synapses/{cell.replace('spatial0', f'spatial{len(src.levels) - 1}')}",
                "/zv/synapses/ann/by_id/0",
                "/zv/synapses/ann/rel_object/1000",
                "/zv/nothing/info",
                "/zv/synapses/ann/spatial0/0_0",
            ):
                answer = get(port, path)
                assert answer.status is not None and 400 <= answer.status < 600, path
                bodies.append((answer.status, answer.body))
    assert any(status >= 500 for status, _ in bodies)
    for _, body in bodies:
        assert str(tmp_path).encode() not in body and str(Path.home()).encode() + b"/" not in body
        assert b"/tmp/" not in body
    assert str(tmp_path) in caplog.text  # the log line keeps the detail


@pytest.mark.slow
def test_idle_sockets_hold_no_thread_and_are_closed(stores: dict[str, Path]) -> None:
    import threading

    with zv.serve(stores["points"], client=False, idle_timeout=3.0) as s:
        port = _port(s)
        threads = threading.active_count()
        t0 = time.monotonic()
        idle = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(400)]
        try:
            started = time.monotonic()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            conn.request("GET", "/zv/synapses/ann/info")
            response = conn.getresponse()
            assert response.status == 200 and response.read()
            assert time.monotonic() - started < 2.5  # served before the idle sockets time out
            conn.close()
            assert threading.active_count() - threads < 5  # 400 idle sockets, no thread each
            deadline = time.monotonic() + 30
            for sock in idle:  # closed by the server after the idle timeout
                sock.settimeout(max(0.1, deadline - time.monotonic()))
                try:
                    assert sock.recv(1) == b""
                except ConnectionResetError:
                    pass
            assert time.monotonic() - t0 >= 2.9  # not before the timeout
        finally:
            for sock in idle:
                sock.close()


def test_stalled_request_is_closed_after_the_timeout(stores: dict[str, Path]) -> None:
    with zv.serve(stores["points"], client=False, idle_timeout=1.0) as s:
        with socket.create_connection(("127.0.0.1", _port(s)), timeout=15) as sock:
            sock.sendall(b"GET /zv/synapses/ann/info HTTP/1.1\r\n")  # and never the rest
            started = time.monotonic()
            assert sock.recv(100) == b""
            assert time.monotonic() - started < 10


def test_bad_content_length_is_answered_at_once(server: Server) -> None:
    port = _port(server)
    host = f"Host: 127.0.0.1:{port}\r\n"
    cases = {"-1": 400, "abc": 400, "1e3": 400, "٣": 400, " ": 400, "99999999999": 413, "5, 5": 400}
    for value, status in cases.items():
        started = time.monotonic()
        head = f"POST /state/zv HTTP/1.1\r\n{host}Content-Length: {value}\r\n\r\n".encode()
        answer = raw_request(port, head, timeout=5)
        assert answer.status == status, value
        assert time.monotonic() - started < 3, value
        assert answer.headers.get("connection") == "close"
    chunked = raw_request(
        port, f"POST /state/zv HTTP/1.1\r\n{host}Transfer-Encoding: chunked\r\n\r\n".encode()
    )
    assert chunked.status == 411
    ok = raw_request(port, f"POST /state/zv HTTP/1.1\r\n{host}Content-Length: 2\r\n\r\n{{}}".encode())
    assert ok.status == 200


def test_head_events_sends_no_stream(server: Server) -> None:
    port = _port(server)
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(f"HEAD /events/zv HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
        buf = b""
        while b"\r\n\r\n" not in buf:
            buf += sock.recv(4096)
        assert buf.startswith(b"HTTP/1.1 200") and buf.endswith(b"\r\n\r\n")
        sock.settimeout(2.5)  # a stream would send a comment within a second
        with pytest.raises(TimeoutError):
            sock.recv(4096)
        sock.sendall(f"GET /zv/synapses/ann/info HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
        sock.settimeout(5)
        assert sock.recv(12) == b"HTTP/1.1 200"  # the connection still serves requests


def test_busy_server_answers_503(stores: dict[str, Path]) -> None:
    with zv.serve(stores["points"], client=False, max_connections=1) as s:
        port = _port(s)
        with socket.create_connection(("127.0.0.1", port), timeout=5) as stream:
            stream.sendall(f"GET /events/zv HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
            assert stream.recv(12) == b"HTTP/1.1 200"  # the one slot is held by the stream
            answer = get(port, "/zv/synapses/ann/info")
            assert answer.status == 503 and answer.headers["connection"] == "close"
        deadline = time.monotonic() + 10
        while get(port, "/zv/synapses/ann/info").status != 200:  # the slot is freed
            assert time.monotonic() < deadline
            time.sleep(0.2)


MALFORMED = [
    # ids: Unicode digits, signs, bases, floats, huge, empty, NUL, unknown
    *(f"/zv/synapses/ann/by_id/{s}" for s in ("%D9%A3", "%C2%B2", "%EF%BC%91", "-1", "+1", "0x10", "1e3", "1.0", "%201", "", LONG, "9" * 25, str(1 << 64), "1%00", "%00")),
    *(f"/zv/synapses/ann/rel_object/{s}" for s in ("999999", "12", "0", str((1 << 64) - 1), LONG, "%D9%A3", "abc", "-1000", "1000%00", "")),
    *(f"/zv/neuron/skeletons/{s}" for s in ("12", "0", LONG, "%C2%B2", "%00", str(1 << 64), "7.5")),
    *(f"/zv/soma/mesh/{s}" for s in ("12.index", "12", "%D9%A3.index", ".index", f"{LONG}.index", "7:0", "frag/7", "7%00")),
    # cells: wrong rank, out of range, huge, negative, Unicode, NUL
    *(f"/zv/synapses/ann/spatial{s}" for s in ("0/0_0", "0/0_0_0_0", "0/" + "_".join(["0"] * 3000), "0/9223372036854775807_0_0", "0/99999999999999999999_0_0", "0/18446744073709551616_0_0", "99/0_0_0", f"{LONG}/0_0_0", "0/-1_0_0", "0/%D9%A3_0_0", "0/0_0_0%00", "0/0__0", "0/_0_0", "0/0_0_", "0")),
    # the rest of the paths: NUL, bad UTF-8, control characters, traversal, unknown parts
    "/zv/synapses/ann/info%00", "/zv/syn%00apses/ann/info", "/zv/synapses/ann/%FF", "/zv/synapses/%C0%AF",
    "/zv/synapses/ann/info%0D%0AX-Evil:%201", "/zv/synapses/../../../etc/passwd", "/zv/%2e%2e/%2e%2e/etc/passwd",
    "/v/zv/../../../../etc/passwd", "/zv/synapses/props/x", "/zv/synapses/skeletons/7", "/zv/nothing/ann/info",
    "/zv/", "/zv", "/", "/zv/synapses/mesh/info", "/zv/neuron/ann/info", "//", "//[x/zv/synapses/ann/info",
    "/events", "/zv/synapses/ann/by_id/x?x=1", "zv/synapses/ann/info", "*", "http://evil.example/zv/synapses/ann/info",
]  # fmt: skip


def test_every_malformed_url_gets_a_4xx(server: Server) -> None:
    assert len(MALFORMED) >= 55
    port = _port(server)
    statuses = {}
    for path in MALFORMED:
        answer = get(port, path)
        assert answer.status is not None and 400 <= answer.status < 500, (path[:80], answer.status)
        statuses[path] = answer.status
    ids = [
        p for p in MALFORMED if p.rsplit("/", 1)[-1] in ("999999", "12", "0", "12.index", str((1 << 64) - 1))
    ]
    assert ids and all(statuses[p] == 404 for p in ids)  # unknown ids
    raw_nul = raw_request(
        port, f"GET /zv/synapses/ann/by_id/1\x00 HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()
    )
    assert raw_nul.status == 400
    long_line = raw_request(port, b"GET /" + b"a" * 70000 + b" HTTP/1.1\r\n\r\n")
    assert long_line.status == 414
    junk = raw_request(port, b"\x00\x01\x02 garbage\r\n\r\n")
    assert junk.status == 400


def _env() -> dict[str, str]:
    root = Path(zv.__file__).resolve().parents[1]
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), str(root / "codecs")])}


@pytest.mark.slow
def test_cli_cors_flag(stores: dict[str, Path]) -> None:
    import subprocess
    import sys

    base = [sys.executable, "-m", "zarr_vectors", "serve", str(stores["points"]), "--port", "0"]
    bad = subprocess.run(
        [*base, "--cors", "evil.example"], capture_output=True, text=True, env=_env(), timeout=60
    )
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "scheme://host" in bad.stderr
    for flags, origin, expect in (
        (
            ["--cors", "https://a.example", "--cors", "https://b.example"],
            "https://b.example",
            "https://b.example",
        ),
        (["--cors", "*"], "https://any.example", "*"),
        ([], "https://a.example", None),
    ):
        proc = subprocess.Popen(
            [*base, *flags], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env()
        )
        try:
            assert proc.stdout is not None
            port = int(proc.stdout.readline().split("/v/", 1)[0].rsplit(":", 1)[1])
            answer = get(port, "/zv/synapses/ann/info", {"Origin": origin})
            assert answer.status == 200 and answer.headers.get("access-control-allow-origin") == expect, flags
        finally:
            proc.terminate()
            _, err = proc.communicate(timeout=10)
        assert ("every web page" in err) == (expect == "*"), err


def test_pipelined_and_kept_alive_requests_are_all_answered(server: Server) -> None:
    """Requests sent together are answered in order; a kept-alive connection serves again
    after waiting without a thread."""
    port = _port(server)
    one = f"GET /zv/synapses/ann/info HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(one * 3)
        got = b""
        while got.count(b"HTTP/1.1 200") < 3 or not got.endswith(b"}"):  # three JSON bodies
            chunk = sock.recv(65536)
            assert chunk
            got += chunk
        time.sleep(0.5)
        sock.sendall(one)
        assert sock.recv(12) == b"HTTP/1.1 200"
