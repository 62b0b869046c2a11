"""The connection layer of ``serve``: who may connect, for how long, and who may read.

:class:`GuardedServer` accepts connections on the serving thread but gives none a worker
thread until it has sent something: a new or kept-alive connection waits in a selector
("parked", at most ``max_idle`` of them, the oldest dropped first) and is closed after
``idle_timeout`` seconds of silence. A connection with bytes to read gets one of
``max_connections`` worker slots for one request, then goes back to wait; with every slot
busy it is answered ``503`` and closed. So idle or slow clients hold sockets, never threads.

:func:`allowed_hosts` and :func:`cors_headers` are the two origin rules: a request's ``Host``
must name the listening address (a DNS-rebinding name does not), and a CORS header is sent
only to an origin the server was told to trust.
"""

from __future__ import annotations

import logging
import re
import selectors
import socket
import threading
import time
import warnings
from collections.abc import Sequence
from http.server import HTTPServer
from typing import Any

from zarr_vectors.errors import InputError

__all__ = [
    "GuardedServer",
    "allowed_hosts",
    "check_origins",
    "cors_headers",
    "LOG",
    "MAX_CONNECTIONS",
    "IDLE_TIMEOUT",
]

LOG = logging.getLogger("zarr_vectors.serve")
MAX_CONNECTIONS = 64  # requests handled at once; more are answered 503
MAX_IDLE = 512  # connections waiting for a request; beyond, the oldest is closed
IDLE_TIMEOUT = 5.0  # seconds a connection may stay silent (or stall mid-request)
_BUSY = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nContent-Length: 23\r\n"
    b"Retry-After: 1\r\nConnection: close\r\n\r\nserver busy; try again\n"
)
_ORIGIN = re.compile(r"https?://[A-Za-z0-9.\-]+(?::[0-9]{1,5})?|https?://\[[0-9A-Fa-f:.]+\](?::[0-9]{1,5})?")


def check_origins(cors: Sequence[str] | str | None) -> tuple[str, ...]:
    """The trusted origins as given (``scheme://host[:port]``, or ``"*"`` alone for any
    page, with a warning); :class:`InputError` for anything else."""
    items = (cors,) if isinstance(cors, str) else tuple(cors or ())
    for origin in items:
        if origin != "*" and not _ORIGIN.fullmatch(origin):
            raise InputError(
                f"cors origin {origin!r} is not scheme://host[:port] (e.g. https://neuroglancer-demo.appspot.com) "
                "or '*'"
            )
    if "*" in items:
        warnings.warn(
            "serving with cors='*': every web page open in the browser can read the served stores",
            UserWarning,
            stacklevel=3,
        )
    return items


def cors_headers(origin: str | None, trusted: Sequence[str]) -> dict[str, str]:
    """The CORS headers of an answer to ``origin``: none unless it is trusted."""
    if not trusted:
        return {}
    if "*" in trusted:
        return {
            "Access-Control-Allow-Origin": "*",
            "Access-Control-Expose-Headers": "Content-Range, Content-Length",
        }
    out = {"Vary": "Origin"}
    if origin is not None and origin in trusted:
        out["Access-Control-Allow-Origin"] = origin
        out["Access-Control-Expose-Headers"] = "Content-Range, Content-Length"
    return out


def allowed_hosts(host: str, port: int) -> frozenset[str]:
    """The ``Host`` values a server bound to ``host:port`` answers (lower case)."""
    names = {host, "127.0.0.1", "localhost"} if host in ("127.0.0.1", "localhost") else {host}
    if host in ("::1", "[::1]"):
        names = {"[::1]", "localhost"}
    return frozenset(f"{n.lower()}:{port}" for n in names)


class GuardedServer(HTTPServer):
    """An HTTP server with capped worker slots and parked idle connections (module docstring)."""

    request_queue_size = 512  # the listen backlog: a burst of connections is accepted, not retried

    def __init__(
        self,
        address: tuple[str, int],
        handler: Any,
        *,
        max_connections: int = MAX_CONNECTIONS,
        idle_timeout: float = IDLE_TIMEOUT,
        max_idle: int = MAX_IDLE,
    ) -> None:
        super().__init__(address, handler)
        self.idle_timeout = float(idle_timeout)
        self.max_connections = int(max_connections)
        self._slots = threading.BoundedSemaphore(self.max_connections)
        self._max_idle = int(max_idle)
        self._incoming: list[tuple[socket.socket, Any]] = []
        self._lock = threading.Lock()
        self._closing = False
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_w.setblocking(False)
        self._watcher = threading.Thread(target=self._watch, name="zarr-vectors-serve-idle", daemon=True)
        self._watcher.start()

    # -- socketserver hooks ------------------------------------------------------------
    def process_request(self, request: Any, client_address: Any) -> None:
        """Park a new connection until it sends something."""
        self._park(request, client_address)

    def finish_request(self, request: Any, client_address: Any) -> Any:
        make: Any = self.RequestHandlerClass
        return make(request, client_address, self)

    def server_close(self) -> None:
        with self._lock:
            self._closing = True
        self._poke()
        self._watcher.join(timeout=5)
        super().server_close()
        self._wake_r.close()
        self._wake_w.close()

    # -- parking -------------------------------------------------------------------------
    def _poke(self) -> None:
        try:
            self._wake_w.send(b"\0")
        except OSError:  # the wake-up pipe is full: the watcher wakes anyway
            pass

    def _park(self, sock: socket.socket, addr: Any) -> None:
        with self._lock:
            closing = self._closing
            if not closing:
                self._incoming.append((sock, addr))
        if closing:
            self.shutdown_request(sock)
        self._poke()

    def _watch(self) -> None:
        """Wait for parked connections to speak (dispatch), time out (close) or overflow."""
        selector = selectors.DefaultSelector()
        selector.register(self._wake_r, selectors.EVENT_READ)
        parked: dict[socket.socket, tuple[float, Any]] = {}  # insertion order: oldest first
        try:
            while True:
                with self._lock:
                    closing = self._closing
                    new, self._incoming = self._incoming, []
                if closing:
                    for sock, _ in new:
                        self.shutdown_request(sock)
                    break
                now = time.monotonic()
                for sock, addr in new:
                    parked[sock] = (now + self.idle_timeout, addr)
                    selector.register(sock, selectors.EVENT_READ)
                while len(parked) > self._max_idle:
                    self._drop(selector, parked, next(iter(parked)))
                wait = min((d for d, _ in parked.values()), default=now + 1.0) - now
                for key, _ in selector.select(max(0.0, min(wait, 1.0))):
                    if key.fileobj is self._wake_r:
                        self._wake_r.recv(4096)
                        continue
                    sock = key.fileobj  # type: ignore[assignment]
                    selector.unregister(sock)
                    self._dispatch(sock, parked.pop(sock)[1])
                now = time.monotonic()
                for sock in [s for s, (d, _) in parked.items() if d <= now]:
                    self._drop(selector, parked, sock)
        finally:
            for sock in list(parked):
                self._drop(selector, parked, sock)
            selector.close()

    def _drop(
        self, selector: selectors.BaseSelector, parked: dict[socket.socket, Any], sock: socket.socket
    ) -> None:
        selector.unregister(sock)
        del parked[sock]
        self.shutdown_request(sock)

    def _dispatch(self, sock: socket.socket, addr: Any) -> None:
        if not self._slots.acquire(blocking=False):
            LOG.warning("serve: %d requests in progress; answered 503 to %s", self.max_connections, addr)
            try:
                sock.settimeout(1.0)
                sock.sendall(_BUSY)
            except OSError:
                pass  # the client left; closed below
            self.shutdown_request(sock)
            return
        threading.Thread(target=self._work, args=(sock, addr), daemon=True).start()

    def _work(self, sock: socket.socket, addr: Any) -> None:
        """One request on a worker slot; a kept-alive connection is parked again after it."""
        keep = False
        try:
            handler = self.finish_request(sock, addr)
            keep = not handler.close_connection
        except OSError as exc:  # the client reset or timed out mid-answer
            LOG.info("serve: connection from %s ended: %s", addr, exc)
        finally:
            self._slots.release()
            if keep:
                self._park(sock, addr)
            else:
                self.shutdown_request(sock)
