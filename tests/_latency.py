"""Test servers on 127.0.0.1: a latency proxy that counts requests, and a static file server.

:class:`LatencyProxy` is an HTTP/1.1 reverse proxy in front of one upstream (the moto S3
server, a static server, the GCS emulator). Every request waits ``delay`` seconds before it
is forwarded, the way a far-away store answers, and is recorded with its start and end
times and body sizes. :class:`Traffic` summarises a window of requests: how many, bytes
each way, and how many sequential *waves* they took (a wave is a maximal run of requests
whose lifetimes overlap: requests issued together form one, a request that waited for
another's answer starts a new one).

:class:`StaticServer` serves a local folder the way a static web server does, with single
``Range`` requests (``206``/``416``) and, optionally, directory pages.

Both run in daemon threads, listen on 127.0.0.1 only on a port the OS picks, and answer each
connection in its own thread (keep-alive supported). The benchmarks import this module too
(``sys.path`` holding ``tests/``).
"""

from __future__ import annotations

import heapq
import http.client
import json
import os
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit
from urllib.request import urlopen

__all__ = [
    "remote_mark",
    "remote_traffic",
    "LatencyProxy",
    "Request",
    "StaticServer",
    "Traffic",
    "Window",
    "count_waves",
    "chain_depth",
]

#: Headers that describe one connection, never forwarded (RFC 9110, 7.6.1).
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "expect",  # the proxy answers 100-continue itself and forwards whole bodies
    }
)
#: Largest chunk of a chunked request body accepted (bytes); bounds the reading loop too.
MAX_CHUNK = 1 << 30
#: Path prefix of the proxy's own answers (not forwarded, not delayed, not recorded): see
#: :func:`remote_mark` and :func:`remote_traffic`, for clients in other processes.
CONTROL = "/__latency__"
#: Connections the listening socket queues (socketserver's default of 5 drops bursts of 64).
BACKLOG = 256


@dataclass(frozen=True)
class Request:
    """One forwarded request: ``start`` when it arrived, ``end`` when its answer was ready to
    send (``time.monotonic`` seconds; so a request sent after another's answer starts after
    its end); ``bytes_in`` its body, ``bytes_out`` the answer's body."""

    method: str
    path: str
    status: int
    start: float
    end: float
    bytes_in: int
    bytes_out: int


def count_waves(requests: Iterator[Request] | list[Request] | tuple[Request, ...]) -> int:
    """Maximal groups of requests whose lifetimes overlap (touching counts as overlapping)."""
    spans = sorted((r.start, r.end) for r in requests)
    waves, reach = 0, float("-inf")
    for start, end in spans:
        if start > reach:
            waves += 1
        reach = max(reach, end)
    return waves


def chain_depth(requests: Iterator[Request] | list[Request] | tuple[Request, ...]) -> int:
    """The longest chain of requests each starting after the previous one ended: the number of
    round trips a client waited for one after another (at least :func:`count_waves` when the
    client queues requests behind a connection limit; never more than the request count)."""
    done: list[tuple[float, int]] = []  # (end, depth) of requests started so far
    best_before = 0  # deepest chain among requests that ended before the current start
    deepest = 0
    for r in sorted(requests, key=lambda r: r.start):
        while done and done[0][0] < r.start:
            best_before = max(best_before, heapq.heappop(done)[1])
        depth = best_before + 1
        heapq.heappush(done, (r.end, depth))
        deepest = max(deepest, depth)
    return deepest


@dataclass(frozen=True)
class Traffic:
    """The requests of one window, in arrival order."""

    requests: tuple[Request, ...]

    @property
    def count(self) -> int:
        return len(self.requests)

    @property
    def bytes_in(self) -> int:
        return sum(r.bytes_in for r in self.requests)

    @property
    def bytes_out(self) -> int:
        return sum(r.bytes_out for r in self.requests)

    @property
    def waves(self) -> int:
        return count_waves(self.requests)

    @property
    def depth(self) -> int:
        return chain_depth(self.requests)

    def by_method(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.requests:
            out[r.method] = out.get(r.method, 0) + 1
        return out

    def summary(self) -> dict[str, Any]:
        return {
            "requests": self.count,
            "waves": self.waves,
            "depth": self.depth,
            "bytes_in": self.bytes_in,
            "bytes_out": self.bytes_out,
            "methods": self.by_method(),
        }


@dataclass
class Window:
    """What :meth:`LatencyProxy.measure` saw; ``traffic`` is filled when the block ends."""

    traffic: Traffic = field(default_factory=lambda: Traffic(()))


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # keep-alive connections of clients must not hold up stop()
    request_queue_size = BACKLOG


class _ServerThread:
    """One :class:`_Server` on 127.0.0.1 (free port) served by a daemon thread."""

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self._server = _Server(("127.0.0.1", 0), handler)
        self._server.owner = self  # type: ignore[attr-defined]
        host, port = self._server.server_address[:2]
        assert host == "127.0.0.1", host
        self.port = int(port)
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _ProxyHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    _upstream: http.client.HTTPConnection | None = None

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base's name)
        return None

    def finish(self) -> None:
        """The client's connection is done: close the upstream one it used."""
        try:
            super().finish()
        finally:
            if self._upstream is not None:
                self._upstream.close()
                self._upstream = None

    def _body(self) -> bytes:
        length = self.headers.get("Content-Length")
        if length is not None:
            return self.rfile.read(int(length))
        if "chunked" not in self.headers.get("Transfer-Encoding", "").lower():
            return b""
        parts = []
        while True:  # ends at the zero-size chunk; each chunk is bounded by MAX_CHUNK
            size = int(self.rfile.readline(64).split(b";")[0].strip() or b"0", 16)
            if size > MAX_CHUNK:
                raise ValueError(f"chunk of {size} bytes")
            if size == 0:
                while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return b"".join(parts)
            parts.append(self.rfile.read(size))
            self.rfile.readline(3)

    def _forward(self, body: bytes) -> tuple[http.client.HTTPResponse, bytes]:
        proxy: LatencyProxy = self.server.owner  # type: ignore[attr-defined]
        for attempt in (0, 1):  # a kept-alive upstream connection may have been closed
            if self._upstream is None:
                self._upstream = http.client.HTTPConnection(
                    proxy.upstream_host, proxy.upstream_port, timeout=60
                )
            conn = self._upstream
            try:
                conn.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
                for name, value in self.headers.items():
                    if name.lower() not in HOP_BY_HOP and name.lower() != "content-length":
                        conn.putheader(name, value)
                if body or self.command in ("PUT", "POST"):
                    conn.putheader("Content-Length", str(len(body)))
                conn.endheaders(body or None)
                resp = conn.getresponse()
                return resp, resp.read()
            except (ConnectionError, http.client.HTTPException):
                conn.close()
                self._upstream = None
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def _control(self, proxy: LatencyProxy) -> None:
        """``GET /__latency__/mark`` and ``/__latency__/traffic?since=N``, answered here."""
        parts = urlsplit(self.path)
        if parts.path == f"{CONTROL}/mark":
            doc: dict[str, Any] = {"mark": proxy.mark()}
        elif parts.path == f"{CONTROL}/traffic":
            since = int(parse_qs(parts.query).get("since", ["0"])[0])
            proxy.settle()
            doc = proxy.traffic(since).summary()
        else:
            doc = {"error": f"unknown control path {parts.path}"}
        data = json.dumps(doc).encode()
        self.send_response(200 if "error" not in doc else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _handle(self) -> None:
        proxy: LatencyProxy = self.server.owner  # type: ignore[attr-defined]
        if self.path.startswith(CONTROL + "/"):
            self._control(proxy)
            return
        with proxy._lock:
            proxy._in_flight += 1
        try:
            self._proxy(proxy)
        finally:
            with proxy._lock:
                proxy._in_flight -= 1

    def _proxy(self, proxy: LatencyProxy) -> None:
        start = time.monotonic()
        body = self._body()
        if proxy.delay > 0:
            time.sleep(proxy.delay)
        try:
            resp, data = self._forward(body)
        except (ConnectionError, http.client.HTTPException, TimeoutError) as exc:
            message = f"upstream failed: {type(exc).__name__}".encode()
            self.send_response(502)
            self.send_header("Content-Length", str(len(message)))
            self.end_headers()
            self.wfile.write(message)
            proxy._record(Request(self.command, self.path, 502, start, time.monotonic(), len(body), 0))
            return
        end = time.monotonic()  # before the client can have the answer (and send its next request)
        self.send_response_only(resp.status, resp.reason)
        chunked = "chunked" in (resp.getheader("Transfer-Encoding") or "").lower()
        for name, value in resp.getheaders():
            lower = name.lower()
            if lower in HOP_BY_HOP or (chunked and lower == "content-length"):
                continue
            self.send_header(name, value)
        if chunked or (resp.getheader("Content-Length") is None and self.command != "HEAD"):
            self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD" and data:
            self.wfile.write(data)
        self.wfile.flush()
        proxy._record(Request(self.command, self.path, resp.status, start, end, len(body), len(data)))

    do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _handle


class LatencyProxy(_ServerThread):
    """A reverse proxy on 127.0.0.1 to ``upstream`` (``http://host:port``) adding ``delay``
    seconds to every request and recording every request (see :class:`Request`).

    Invariant: every request answered is recorded exactly once, after its answer was sent.
    ``delay`` may be changed while running; it applies to requests arriving afterwards.
    """

    def __init__(self, upstream: str, delay: float = 0.0) -> None:
        parts = urlsplit(upstream)
        if parts.scheme != "http" or parts.hostname is None or parts.port is None:
            raise ValueError(f"upstream must be http://host:port, got {upstream!r}")
        self.upstream_host, self.upstream_port = parts.hostname, parts.port
        self.delay = float(delay)
        self._lock = threading.Lock()
        self._log: list[Request] = []
        self._in_flight = 0  # requests being forwarded, not yet recorded
        super().__init__(_ProxyHandler)

    def _record(self, request: Request) -> None:
        with self._lock:
            self._log.append(request)

    def settle(self, timeout: float = 5.0) -> None:
        """Wait (at most ``timeout`` s) until no request is being forwarded: a client has its
        answer a moment before the proxy records the request."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if not self._in_flight:
                    return
            time.sleep(0.002)

    def mark(self) -> int:
        """A position in the log, for :meth:`traffic`."""
        with self._lock:
            return len(self._log)

    def traffic(self, since: int = 0) -> Traffic:
        """The requests recorded from position ``since`` on."""
        with self._lock:
            return Traffic(tuple(self._log[since:]))

    def reset(self) -> None:
        with self._lock:
            self._log.clear()

    @contextmanager
    def measure(self) -> Iterator[Window]:
        """Record the requests made inside the block into the yielded :class:`Window` (after
        :meth:`settle`, so every request answered inside the block is in it)."""
        window = Window()
        since = self.mark()
        yield window
        self.settle()
        window.traffic = self.traffic(since)


_RANGE = re.compile(r"bytes=(\d*)-(\d*)$")


class _StaticHandler(SimpleHTTPRequestHandler):
    """Files with single byte ranges; folders as directory pages only when the server lists."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        return None

    def _file(self, head: bool) -> None:
        owner: StaticServer = self.server.owner  # type: ignore[attr-defined]
        owner._count()
        path = Path(self.translate_path(self.path))
        if path.is_dir():
            if owner.listings:
                (super().do_HEAD if head else super().do_GET)()
            else:
                self.send_error(404, "no directory pages here")
            return
        if not path.is_file():
            self.send_error(404, "not found")
            return
        size = path.stat().st_size
        start, stop, status = 0, size, 200
        match = _RANGE.match(self.headers.get("Range", "").strip())
        if match and (match.group(1) or match.group(2)):
            first, last = match.groups()
            if first:
                start, stop = int(first), min(int(last) + 1, size) if last else size
            else:
                start, stop = max(size - int(last), 0), size
            if start >= size or start >= stop:
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{size}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            status = 206
        self.send_response(status)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(stop - start))
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{stop - 1}/{size}")
        self.end_headers()
        if not head:
            with path.open("rb") as fh:
                fh.seek(start)
                self.wfile.write(fh.read(stop - start))

    def do_GET(self) -> None:
        self._file(head=False)

    def do_HEAD(self) -> None:
        self._file(head=True)

    def do_OPTIONS(self) -> None:
        """A CORS preflight (for ``Range``), answered when the server allows other origins."""
        if not self.server.owner.cors:  # type: ignore[attr-defined]
            self.send_error(405, "no OPTIONS here")
            return
        self.send_response(204)
        self.send_header("Access-Control-Allow-Methods", "GET, HEAD")
        self.send_header("Access-Control-Allow-Headers", "Range")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def send_response(self, code: int, message: str | None = None) -> None:
        self.server.owner.log.append((self.command, self.path, code))  # type: ignore[attr-defined]
        super().send_response(code, message)

    def end_headers(self) -> None:
        if self.server.owner.cors:  # type: ignore[attr-defined]
            self.send_header("Access-Control-Allow-Origin", "*")
            self.send_header("Access-Control-Expose-Headers", "Content-Range, Content-Length, Accept-Ranges")
        super().end_headers()


class StaticServer(_ServerThread):
    """Serves the folder ``root`` read-only on 127.0.0.1 (``url``), GET and HEAD with single
    ranges; directory pages only when ``listings`` (as ``python -m http.server`` gives them);
    with ``cors``, answers pages of other origins too (CORS headers and preflights).
    ``requests`` counts the requests answered, ``log`` lists ``(method, path, status)``."""

    def __init__(self, root: Path | str, listings: bool = True, cors: bool = False) -> None:
        self.root = os.fspath(root)
        self.listings = listings
        self.cors = cors
        self.log: list[tuple[str, str, int]] = []
        self.requests = 0
        self._lock = threading.Lock()
        directory = self.root

        class Handler(_StaticHandler):
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, directory=directory, **kwargs)

        super().__init__(Handler)

    def _count(self) -> None:
        with self._lock:
            self.requests += 1


def remote_mark(proxy_url: str) -> int:
    """:meth:`LatencyProxy.mark` of the proxy at ``proxy_url``, from any process."""
    with urlopen(f"{proxy_url}{CONTROL}/mark", timeout=10) as resp:
        return int(json.load(resp)["mark"])


def remote_traffic(proxy_url: str, since: int) -> dict[str, Any]:
    """:meth:`Traffic.summary` of the requests since ``since`` at the proxy ``proxy_url``."""
    with urlopen(f"{proxy_url}{CONTROL}/traffic?since={since}", timeout=10) as resp:
        return dict(json.load(resp))


def main() -> None:
    """``python tests/_latency.py UPSTREAM DELAY``: run a proxy until killed, printing its URL."""
    import sys

    proxy = LatencyProxy(sys.argv[1], float(sys.argv[2]))
    print(proxy.url, flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
