"""A hostile web server on 127.0.0.1: a static server (tests/_latency.py) whose answers to
chosen paths lie.

:class:`HostileServer` serves a folder like :class:`~tests._latency.StaticServer` (single
ranges, directory pages) except for the URL paths in ``tricks``: each maps to a function
``trick(handler, data)`` that writes whatever it likes to the socket (``data``: the file's
bytes at that path, or ``b""``). ``sent`` counts the body bytes the tricks wrote, so a test
can check that a client stopped reading. The tricks below are the ones the tests use.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests._latency import _ServerThread, _StaticHandler

__all__ = ["HostileServer", "Trick", "endless", "chunked_endless", "longer", "shorter", "garbage", "slow"]

Trick = Callable[[Any, bytes], None]
#: Bytes an endless body writes per send.
PIECE = 64 << 10


class HostileServer(_ServerThread):
    """Serves ``root`` on 127.0.0.1 with directory pages, except that a GET of a path in
    ``tricks`` (``"/p.zarr/0/vertices/c/0/0/0"``) runs that trick instead; ``inventing``: a
    folder page below that path (``"/inv.zarr/"``) lists a ``zarr.json`` and ``fanout``
    subfolders, for ever deeper folders."""

    def __init__(
        self, root: Path, tricks: dict[str, Trick] | None = None, inventing: str = "", fanout: int = 3
    ):
        self.root = str(root)
        self.listings = True
        self.cors = False
        self.tricks = dict(tricks or {})
        self.inventing, self.fanout = inventing, fanout
        self.sent = 0
        self.requests = 0
        self.log: list[tuple[str, str, int]] = []
        self._lock = threading.Lock()
        directory = self.root

        class Handler(_HostileHandler):
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, directory=directory, **kwargs)

        super().__init__(Handler)
        self._server.handle_error = lambda request, address: None  # type: ignore[method-assign]  # hang-ups are expected

    def _count(self) -> None:
        with self._lock:
            self.requests += 1

    def add_sent(self, n: int) -> None:
        with self._lock:
            self.sent += n


class _HostileHandler(_StaticHandler):
    def do_GET(self) -> None:
        owner: HostileServer = self.server.owner  # type: ignore[attr-defined]
        path = self.path.split("?", 1)[0]
        trick = owner.tricks.get(path)
        if trick is not None:
            owner._count()
            file = Path(self.translate_path(path))
            try:
                trick(self, file.read_bytes() if file.is_file() else b"")
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client stopped reading: what it should do
            self.close_connection = True
            return
        if owner.inventing and path.startswith(owner.inventing) and path.endswith("/"):
            owner._count()
            names = ["zarr.json"] + [f"d{i}/" for i in range(owner.fanout)]
            page = "".join(f'<li><a href="{n}">{n}</a></li>' for n in names).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)
            return
        super().do_GET()


def _send(h: Any, raw: bytes) -> None:
    h.wfile.write(raw)
    h.wfile.flush()
    h.server.owner.add_sent(len(raw))


def _head(h: Any, status: int, headers: dict[str, str]) -> None:
    lines = [f"HTTP/1.1 {status} X"] + [f"{k}: {v}" for k, v in headers.items()]
    h.wfile.write(("\r\n".join(lines) + "\r\n\r\n").encode())


def endless(h: Any, data: bytes) -> None:
    """200, no Content-Length, a body that never ends (until the client hangs up)."""
    _head(h, 200, {"Content-Type": "application/octet-stream", "Connection": "close"})
    piece = (data or b"\0") * (PIECE // max(len(data), 1) + 1)
    while True:
        _send(h, piece[:PIECE])


def chunked_endless(h: Any, data: bytes) -> None:
    """200, chunked transfer encoding, chunks for ever."""
    _head(h, 200, {"Transfer-Encoding": "chunked"})
    piece = b"\x07" * PIECE
    while True:
        _send(h, f"{len(piece):x}\r\n".encode() + piece + b"\r\n")


def longer(extra: int) -> Trick:
    """The true Content-Length, then ``extra`` more bytes, in one write."""

    def trick(h: Any, data: bytes) -> None:
        head = f"HTTP/1.1 200 OK\r\nContent-Length: {len(data)}\r\n\r\n".encode()
        _send(h, head + data + b"\xab" * extra)

    return trick


def shorter(missing: int) -> Trick:
    """A Content-Length ``missing`` bytes longer than the body sent, then the connection closes."""

    def trick(h: Any, data: bytes) -> None:
        _head(h, 200, {"Content-Length": str(len(data) + missing)})
        _send(h, data)

    return trick


def garbage(raw: bytes) -> Trick:
    """``raw`` bytes instead of an HTTP answer."""
    return lambda h, data: _send(h, raw)


def slow(gap: float, status_line: bool = True) -> Trick:
    """One byte of the answer every ``gap`` seconds (headers first)."""

    def trick(h: Any, data: bytes) -> None:
        raw = f"HTTP/1.1 200 OK\r\nContent-Length: {len(data)}\r\n\r\n".encode() + data
        for i in range(0 if status_line else 5, len(raw)):
            _send(h, raw[i : i + 1])
            time.sleep(gap)

    return trick
