"""A local Neuroglancer: the client's static files plus stores as precomputed sources.

The server listens on 127.0.0.1 only. ``/v/zv/`` serves the Neuroglancer client shipped in the
optional ``neuroglancer`` package (the build for Python servers: it also opens ``/events/zv``,
kept open and silent here, and posts state to ``/state/zv``, acknowledged and ignored); ``/zv/<layer>/<path>`` serves :class:`StoreSource` paths,
each read on request (only the cells a request needs), and ``/zv/<layer>/overview/<path>``
the layer's overview (:mod:`~zarr_vectors.neuroglancer.overview`) when it has one.

Safe by default (:mod:`~zarr_vectors.neuroglancer._http`): no CORS header unless ``cors``
names the origins that may read (another Neuroglancer), a ``Host`` other than the listening
address is answered 421, error bodies name layers and paths, never machine paths, and idle
or slow clients hold no thread (capped worker slots, an idle timeout, bounded bodies).
"""

from __future__ import annotations

import importlib.util
import json
import logging
import mimetypes
import re
import socket
import threading
import time
import urllib.parse
import webbrowser
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from zarr_vectors._extras import needs
from zarr_vectors.dataset import Dataset
from zarr_vectors.dataset import open as open_store
from zarr_vectors.errors import InputError, ZarrVectorsError
from zarr_vectors.neuroglancer._http import (
    IDLE_TIMEOUT,
    LOG,
    MAX_CONNECTIONS,
    GuardedServer,
    allowed_hosts,
    check_origins,
    cors_headers,
)
from zarr_vectors.neuroglancer.collection_view import (
    collection_of,
    collection_state,
    collection_view,
    framed_state,
)
from zarr_vectors.neuroglancer.overview import OVERVIEW_MODES, overview_layers, overview_of
from zarr_vectors.neuroglancer.source import NotFound, StoreSource

__all__ = ["Server", "serve", "client_dir", "viewer_state", "open_sources", "overviews_of"]

COLOURS = ("#ff6e4a", "#4ac0ff", "#ffd24a", "#8cff4a", "#e04aff", "#4affc8")
MAX_POST = 1 << 20  # bytes of a client notification read at most
MAX_STREAMS = 8  # event streams open at once (each holds a worker slot)
MAX_SEGMENTS = 500  # segments listed as visible in the first view
mimetypes.add_type("application/wasm", ".wasm")
mimetypes.add_type("text/javascript", ".js")


def client_dir() -> Path:
    """The Neuroglancer client's static files (``neuroglancer/static/client`` of the package)."""
    spec = importlib.util.find_spec("neuroglancer")
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for base in locations:
        path = Path(base) / "static" / "client"
        if (path / "index.html").is_file():
            return path
    raise InputError(needs("serving the Neuroglancer viewer", "neuroglancer", "neuroglancer"))


def _layer_name(target: Any, taken: set[str]) -> str:
    stem = re.sub(r"\.zarr$", "", Path(str(target).rstrip("/")).name) or "store"
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", stem)
    out, k = name, 1
    while out in taken:
        out, k = f"{name}_{k}", k + 1
    taken.add(out)
    return out


def open_sources(
    stores: Any, storage_options: dict[str, Any] | None = None, mesh_format: str = "multilod"
) -> list[StoreSource]:
    """One :class:`StoreSource` per store (paths, URLs or opened :class:`Dataset`); mesh stores
    in ``mesh_format`` (``"multilod"`` or ``"legacy"``)."""
    items = [stores] if isinstance(stores, (str, Path, Dataset)) else list(stores)
    if not items:
        raise InputError("give at least one store to serve")
    taken: set[str] = set()
    out: list[StoreSource] = []
    for item in items:
        ds = item if isinstance(item, Dataset) else open_store(item, storage_options=storage_options)
        name = _layer_name(f"store{len(out)}" if isinstance(item, Dataset) else item, taken)
        out.append(StoreSource(ds, name, mesh_format))
    return out


def overviews_of(sources: Sequence[StoreSource], overview: str | bool = "auto") -> dict[str, Any]:
    """``{layer name: overview source}`` of the sources that get one (``overview`` as in
    :func:`serve`; ``True`` skips stores of other kinds rather than failing)."""
    out = {}
    for src in sources:
        if overview is True and (src.kind == "annotations" or (src.kind == "mesh" and src.levels == [0])):
            continue
        found = overview_of(src, overview)
        if found is not None:
            out[src.name] = found
    return out


def _sources_of(src: StoreSource, base: str) -> tuple[dict[str, Any], list[str]]:
    """The layer's type and source URLs, and its segments (for segmentation layers)."""
    url = f"precomputed://{base}/{src.name}"
    if src.kind == "annotations":
        return {"type": "annotation", "source": f"{url}/ann"}, []
    sources = [f"{url}/{'skeletons' if src.kind == 'skeletons' else 'mesh'}"]
    ids = [str(i + (1 << 64) if i < 0 else i) for i in src.ds.object_ids()[:MAX_SEGMENTS].tolist()]
    return {"type": "segmentation", "source": sources}, ids


def viewer_state(
    sources: Sequence[StoreSource],
    base: str,
    layout: str = "4panel",
    overviews: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A Neuroglancer state showing every source, centred on the union of their bounds.

    ``base`` is the URL the sources live under (``{base}/{layer}/...``). Global dimensions are
    the first store's axes and units; positions are in those units. A store with an overview
    (``overviews``: layer name -> source, :func:`~zarr_vectors.neuroglancer.overview.overview_of`)
    gets its overview layers right after its per-object layer, which then starts with no
    segment shown (:func:`~zarr_vectors.neuroglancer.overview.overview_layers`).
    """
    overviews = overviews or {}
    layers = []
    for i, src in enumerate(sources):
        layer, segments = _sources_of(src, base)
        colour = COLOURS[i % len(COLOURS)]
        layer["name"] = src.name
        if layer["type"] == "annotation":
            layer["annotationColor"] = colour
            if src.has_objects:  # the objects' properties, searchable; selecting filters the points
                layer["linkedSegmentationLayer"] = {"object": f"{src.name} objects"}
        else:
            layer["segments"] = [] if src.name in overviews else segments
            layer["segmentDefaultColor"] = colour
        layers.append(layer)
        if src.name in overviews:
            layers.extend(
                overview_layers(src.name, overviews[src.name], f"{base}/{src.name}/overview", colour)
            )
        if layer["type"] == "annotation" and src.has_objects:
            objects = {"type": "segmentation", "source": f"precomputed://{base}/{src.name}/props"}
            layers.append(dict(objects, name=f"{src.name} objects", segments=[]))
    return framed_state(sources, layers, layout)


def state_url(viewer: str, state: dict[str, Any]) -> str:
    """``viewer#!<state>`` with the JSON state percent-encoded."""
    text = json.dumps(state, separators=(",", ":"))
    return viewer + "#!" + urllib.parse.quote(text, safe="")


@dataclass
class RequestRecord:
    """One answered request: path, status, body size in bytes, seconds spent, finish time."""

    path: str
    status: int
    size: int
    seconds: float
    done: float


@dataclass(eq=False)
class Server:
    """A running server: ``url`` (its root), ``viewer_url`` (the client with a state showing
    every store), ``requests`` (the last answered requests), ``close()``."""

    url: str
    viewer_url: str
    sources: list[StoreSource]
    #: layer name -> overview source (served under ``/zv/<layer>/overview/``)
    overviews: dict[str, Any] = field(default_factory=dict)
    requests: deque[RequestRecord] = field(default_factory=lambda: deque(maxlen=100_000))
    _httpd: Any = None
    _thread: threading.Thread | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _streams: threading.BoundedSemaphore = field(
        default_factory=lambda: threading.BoundedSemaphore(MAX_STREAMS)
    )

    def close(self) -> None:
        """Stop serving and release the port (open event streams end within a second)."""
        self._stop.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=10)

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _handler(server: Server, client: Path | None, cors: Sequence[str], hosts: frozenset[str]) -> type[Any]:
    by_name = {s.name: s for s in server.sources}
    places = _store_places(server.sources)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "zarr-vectors"
        default_request_version = "HTTP/1.0"  # a malformed request line still gets a status line
        sys_version = ""

        def setup(self) -> None:
            super().setup()
            self.connection.settimeout(self.server.idle_timeout)  # type: ignore[attr-defined]
            # headers and body are two writes: without this, Nagle's algorithm and the
            # client's delayed ACK hold the body for ~40 ms
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def handle(self) -> None:
            """The requests already sent; a kept-alive connection then waits without a thread."""
            self.handle_one_request()
            while not self.close_connection and self._pending():
                self.handle_one_request()

        def _pending(self) -> bool:
            """Whether the next request has begun to arrive (buffered or on the socket):
            without waiting, so an idle connection can go back to the server's selector."""
            self.connection.settimeout(0)
            try:
                reader: Any = self.rfile  # a BufferedReader (rbufsize -1)
                return bool(reader.peek(1))
            except OSError:
                return False
            finally:
                self.connection.settimeout(self.server.idle_timeout)  # type: ignore[attr-defined]

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002  # ours go to LOG
            return

        def _send(
            self, status: int, body: bytes, ctype: str, started: float, extra: dict[str, str] | None = None
        ) -> None:
            try:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("X-Content-Type-Options", "nosniff")
                for key, value in {**cors_headers(self.headers.get("Origin"), cors), **(extra or {})}.items():
                    self.send_header(key, value)
                self.send_header("Cache-Control", "no-store")
                if self.close_connection:
                    self.send_header("Connection", "close")
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)
            except OSError:  # the viewer cancelled the request, or stopped reading
                self.close_connection = True
                status = 499
            now = time.perf_counter()
            server.requests.append(RequestRecord(self.path, status, len(body), now - started, now))

        def _fail(self, status: int, message: str, started: float, close: bool = False) -> None:
            """A short plain-text answer (no machine paths), logged."""
            self.close_connection = self.close_connection or close
            text = _public(message, places)
            LOG.log(
                logging.INFO if status == 404 else logging.WARNING,
                "serve: %s %.200r -> %d %s",
                self.command,
                self.path,
                status,
                text,
            )
            self._send(status, (text + "\n").encode(), "text/plain; charset=utf-8", started)

        def _admitted(self, started: float) -> str | None:
            """The request's decoded path when it may be answered; otherwise it is answered."""
            names = self.headers.get_all("Host") or []
            if len(names) != 1 or names[0].strip().lower() not in hosts:
                shown = names[0][:100] if names else "none"
                self._fail(421, f"misdirected request: Host {shown!r} is not this server", started, True)
                return None
            if self.command != "POST" and (
                self.headers.get("Content-Length", "0").strip() not in ("", "0")
                or "Transfer-Encoding" in self.headers
            ):
                self.close_connection = True  # a body this server does not read
            raw = self.path.split("?", 1)[0].split("#", 1)[0]
            try:
                path = urllib.parse.unquote(raw, errors="strict")
            except UnicodeDecodeError:
                path = ""
            if not path.startswith("/") or re.search(r"[\x00-\x1f\x7f]", path):
                self._fail(400, "malformed path: it must start with / and be printable UTF-8", started)
                return None
            return path

        def do_OPTIONS(self) -> None:  # noqa: N802
            started = time.perf_counter()
            if self._admitted(started) is None:
                return
            extra = {
                "Access-Control-Allow-Methods": "GET, HEAD, OPTIONS",
                "Access-Control-Allow-Headers": "Range",
            }
            origin = cors_headers(self.headers.get("Origin"), cors)
            self._send(
                204, b"", "text/plain", started, extra if "Access-Control-Allow-Origin" in origin else None
            )

        def do_HEAD(self) -> None:  # noqa: N802
            self.do_GET()

        def do_POST(self) -> None:  # noqa: N802
            """The client's state and action notifications: read, acknowledged, ignored."""
            started = time.perf_counter()
            if self._admitted(started) is None:
                return
            if "Transfer-Encoding" in self.headers:
                self._fail(411, "a notification needs a Content-Length", started, True)
                return
            lengths = self.headers.get_all("Content-Length") or ["0"]
            text = lengths[0].strip()
            if len(lengths) != 1 or not re.fullmatch(r"[0-9]{1,12}", text):
                self._fail(400, "Content-Length must be one non-negative whole number", started, True)
                return
            if int(text) > MAX_POST:
                self._fail(413, f"a notification is at most {MAX_POST} bytes", started, True)
                return
            if not _read_exactly(self.rfile, int(text), started + 2 * self.server.idle_timeout):  # type: ignore[attr-defined]
                self._fail(408, "the request body did not arrive in time", started, True)
                return
            self._send(200, b'{"g": "0"}', "application/json", started)

        def _events(self, started: float) -> None:
            """The client's server-sent event stream: kept open (a comment a second) and
            silent, so the client sees a live server; ends when the server closes. ``HEAD``
            gets the headers only."""
            if self.command == "HEAD":
                self._send(200, b"", "text/event-stream", started)
                return
            if not server._streams.acquire(blocking=False):
                self._fail(503, "too many event streams", started, True)
                return
            self.close_connection = True
            try:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-store")
                self.send_header("Connection", "close")
                for key, value in cors_headers(self.headers.get("Origin"), cors).items():
                    self.send_header(key, value)
                self.end_headers()
                while not server._stop.wait(1.0):
                    self.wfile.write(b": alive\n\n")
                    self.wfile.flush()
            except OSError:  # the client went away
                return
            finally:
                server._streams.release()

        def do_GET(self) -> None:  # noqa: N802
            started = time.perf_counter()
            path = self._admitted(started)
            if path is None:
                return
            if path.startswith("/events/"):
                self._events(started)
                return
            if path == "/favicon.ico":  # browsers ask; no icon, and no error in their console
                self._send(204, b"", "image/x-icon", started)
                return
            try:
                body, ctype = self._route(path)
            except NotFound as exc:
                self._fail(404, str(exc), started)
            except InputError as exc:
                self._fail(400, str(exc), started)
            except (ZarrVectorsError, OSError, LookupError, ArithmeticError, ValueError) as exc:
                LOG.error("serve: %s %.200r failed", self.command, self.path, exc_info=exc)
                self._fail(
                    500,
                    f"internal error ({type(exc).__name__}) answering this path; see the server log",
                    started,
                )
            else:
                self._send_range(body, ctype, started)

        def _send_range(self, body: bytes, ctype: str, started: float) -> None:
            """The body, or the one byte range the ``Range`` header asks for (206; 416 when it
            cannot be served): multi-resolution mesh fragments are read this way."""
            header = self.headers.get("Range")
            if header is None:
                self._send(200, body, ctype, started)
                return
            span = _byte_range(header, len(body))
            if span is None:
                self._send(416, b"", "text/plain", started, {"Content-Range": f"bytes */{len(body)}"})
                return
            start, stop = span
            extra = {"Content-Range": f"bytes {start}-{stop - 1}/{len(body)}"}
            self._send(206, body[start:stop], ctype, started, extra)

        def _route(self, path: str) -> tuple[bytes, str]:
            if path.startswith("/zv/"):
                name, _, rest = path[4:].partition("/")
                if name not in by_name:
                    raise NotFound(f"no layer {name[:100]!r}")
                if rest.startswith("overview/") and name in server.overviews:
                    return server.overviews[name].get(rest[9:])
                return by_name[name].get(rest)
            match = re.fullmatch(r"/v/[^/]+/(.*)", path)
            if match and client is not None:
                rel = match.group(1) or "index.html"
                file = (client / rel).resolve()
                if client.resolve() not in file.parents or not file.is_file():
                    raise NotFound(f"no client file {rel[:100]!r}")
                return file.read_bytes(), mimetypes.guess_type(file.name)[0] or "application/octet-stream"
            raise NotFound(f"nothing at {path[:100]!r}; the viewer is at /v/zv/")

    return Handler


def _read_exactly(stream: Any, size: int, deadline: float) -> bool:
    """Read and drop ``size`` bytes of ``stream`` before ``deadline`` (perf_counter); False
    when the client stops sending or is too slow."""
    while size > 0 and time.perf_counter() < deadline:
        got = stream.read(min(size, 1 << 16))
        if not got:
            return False
        size -= len(got)
    return size == 0


def _store_places(sources: Sequence[StoreSource]) -> list[tuple[str, str]]:
    """``(location, layer name)`` of each store, longest location first: what error bodies
    say instead of a machine path."""
    out = []
    for src in sources:
        where = str(src.ds._store.description)
        for form in {
            where,
            where.removeprefix("file://"),
            str(Path(where).resolve()) if "://" not in where else where,
        }:
            out.append((form, f"<{src.name}>"))
    return sorted(out, key=lambda p: -len(p[0]))


_ABS_PATH = re.compile(
    r"(?<![\w.:/])(?:[A-Za-z]:)?[\\/](?!zv/|v/|events/|state/)(?:[^\s\'\"\\/]+[\\/])+[^\s\'\"]*"
)


def _public(message: str, places: Sequence[tuple[str, str]]) -> str:
    """``message`` for a response body: store locations become ``<layer>``, any other
    absolute path ``<path>``; at most 300 characters on one line."""
    message = message[:4000]
    for where, name in places:
        message = message.replace(where, name)
    message = _ABS_PATH.sub("<path>", message.replace("file://", ""))
    return " ".join(message.split())[:300]


def _byte_range(header: str, size: int) -> tuple[int, int] | None:
    """``(start, stop)`` of a single ``bytes=a-b``, ``bytes=a-`` or ``bytes=-n`` range of a body
    of ``size`` bytes, or None when the header is not one satisfiable range."""
    match = re.fullmatch(r"\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*", header)
    if match is None or match.group(1) + match.group(2) == "":
        return None
    first, last = match.group(1), match.group(2)
    if first == "":
        start, stop = max(0, size - int(last)), size
    else:
        start = int(first)
        stop = size if last == "" else min(size, int(last) + 1)
    return (start, stop) if start < stop else None


def serve(
    stores: Any,
    port: int = 0,
    open: bool = False,  # noqa: A002
    *,
    layout: str = "4panel",
    client: bool = True,
    storage_options: dict[str, Any] | None = None,
    mesh_format: str = "multilod",
    cors: Sequence[str] = (),
    overview: str | bool = "auto",
    max_connections: int = MAX_CONNECTIONS,
    idle_timeout: float = IDLE_TIMEOUT,
) -> Server:
    """Serve ``stores`` (a path, URL, :class:`Dataset` or a list of them) to Neuroglancer on
    127.0.0.1, in a background thread; ``port=0`` takes any free port. A collection (a
    :class:`~zarr_vectors.Collection`, or one path of one) is served as one view
    (:mod:`~zarr_vectors.neuroglancer.collection_view`; no overview layers).

    Returns a :class:`Server` whose ``viewer_url`` opens every store in the bundled client
    (``client=False``: no client is needed; the sources are served for another viewer).
    ``open=True`` opens that URL in the default web browser. ``storage_options`` are passed
    to :func:`zarr_vectors.open` for stores given as paths or URLs. Mesh stores are
    multi-resolution Draco meshes (``mesh_format="multilod"``, one level of detail per store
    level) or legacy single-resolution meshes (``"legacy"``).

    ``overview``: mesh and skeleton stores also get an overview layer of all their objects
    from the coarse levels (:mod:`~zarr_vectors.neuroglancer.overview`): ``"auto"`` (the
    default) when the store has coarse levels and more than
    :data:`~zarr_vectors.neuroglancer.overview.AUTO_OBJECTS` objects, ``True`` for every mesh
    store with coarse levels and every skeleton store, ``False`` never.

    The bundled viewer is served from the same origin and needs no CORS. ``cors`` lists the
    origins (``"https://host[:port]"``) of other viewers that may read the sources: only they
    get an ``Access-Control-Allow-Origin`` header; ``["*"]`` lets every web page read them
    (warned about). Requests whose ``Host`` is not the listening address are answered 421.
    At most ``max_connections`` requests are handled at once (more get 503); a connection
    silent for ``idle_timeout`` seconds is closed and holds no thread meanwhile.

    Raises
    ------
    InputError
        No store, a store kind without a Neuroglancer form, an unknown ``mesh_format``, a
        ``cors`` entry that is not an origin, no ``neuroglancer`` package when ``client``
        is true, or an ``overview`` a store cannot have.
    """
    trusted = check_origins(cors)
    if overview not in OVERVIEW_MODES:
        raise InputError(f"overview must be 'auto', True or False, not {overview!r}")
    coll = collection_of(stores, storage_options)
    view = None if coll is None else collection_view(coll, mesh_format)
    sources = view.sources if view is not None else open_sources(stores, storage_options, mesh_format)
    static = client_dir() if client else None
    handle = Server("", "", sources, overviews={} if view is not None else overviews_of(sources, overview))
    httpd = GuardedServer(
        ("127.0.0.1", int(port)),
        BaseHTTPRequestHandler,
        max_connections=max_connections,
        idle_timeout=idle_timeout,
    )
    bound = int(httpd.server_address[1])
    httpd.RequestHandlerClass = _handler(handle, static, trusted, allowed_hosts("127.0.0.1", bound))
    handle.url = f"http://127.0.0.1:{bound}"
    if view is not None:
        state = collection_state(view, f"{handle.url}/zv", layout)
    else:
        state = viewer_state(sources, f"{handle.url}/zv", layout, handle.overviews)
    handle.viewer_url = state_url(f"{handle.url}/v/zv/", state)
    handle._httpd = httpd
    handle._thread = threading.Thread(target=httpd.serve_forever, name="zarr-vectors-serve", daemon=True)
    handle._thread.start()
    if open:
        webbrowser.open(handle.viewer_url)
    return handle
