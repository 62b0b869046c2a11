"""A local Neuroglancer: the client's static files plus stores as precomputed sources.

The server listens on 127.0.0.1 only. ``/v/zv/`` serves the Neuroglancer client shipped in the
optional ``neuroglancer`` package (the build for Python servers: it also opens ``/events/zv``,
kept open and silent here, and posts state to ``/state/zv``, acknowledged and ignored); ``/zv/<layer>/<path>`` serves :class:`StoreSource` paths,
each read on request (only the cells a request needs). Every answer carries
``Access-Control-Allow-Origin: *`` so another Neuroglancer can load the sources too.
"""

from __future__ import annotations

import importlib.util
import json
import mimetypes
import re
import threading
import time
import urllib.parse
import webbrowser
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np

from zarr_vectors._extras import needs
from zarr_vectors.dataset import Dataset
from zarr_vectors.dataset import open as open_store
from zarr_vectors.errors import InputError, ZarrVectorsError
from zarr_vectors.neuroglancer.source import NotFound, StoreSource

__all__ = ["Server", "serve", "client_dir", "viewer_state", "open_sources"]

COLOURS = ("#ff6e4a", "#4ac0ff", "#ffd24a", "#8cff4a", "#e04aff", "#4affc8")
MAX_POST = 16 << 20  # bytes of a client notification read at most
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


def _sources_of(src: StoreSource, base: str) -> tuple[dict[str, Any], list[str]]:
    """The layer's type and source URLs, and its segments (for segmentation layers)."""
    url = f"precomputed://{base}/{src.name}"
    if src.kind == "annotations":
        return {"type": "annotation", "source": f"{url}/ann"}, []
    sources = [f"{url}/{'skeletons' if src.kind == 'skeletons' else 'mesh'}"]
    ids = [str(i + (1 << 64) if i < 0 else i) for i in src.ds.object_ids()[:MAX_SEGMENTS].tolist()]
    return {"type": "segmentation", "source": sources}, ids


def viewer_state(sources: Sequence[StoreSource], base: str, layout: str = "4panel") -> dict[str, Any]:
    """A Neuroglancer state showing every source, centred on the union of their bounds.

    ``base`` is the URL the sources live under (``{base}/{layer}/...``). Global dimensions are
    the first store's axes and units; positions are in those units.
    """
    first = sources[0]
    lo = np.min([s.ds.bounds[0] for s in sources if s.ds.ndim == first.ds.ndim], axis=0)
    hi = np.max([s.ds.bounds[1] for s in sources if s.ds.ndim == first.ds.ndim], axis=0)
    extent = float(np.max(hi - lo)) or 1.0
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
            layer["segments"] = segments
            layer["segmentDefaultColor"] = colour
        layers.append(layer)
        if layer["type"] == "annotation" and src.has_objects:
            objects = {"type": "segmentation", "source": f"precomputed://{base}/{src.name}/props"}
            layers.append(dict(objects, name=f"{src.name} objects", segments=[]))
    return {
        "dimensions": first.dimensions,
        "position": [float(v) for v in (lo + hi) / 2],
        "crossSectionScale": extent / 500,
        "projectionScale": extent * 1.6,
        "layers": layers,
        "layout": layout,
    }


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
    requests: deque[RequestRecord] = field(default_factory=lambda: deque(maxlen=100_000))
    _httpd: Any = None
    _thread: threading.Thread | None = None
    _stop: threading.Event = field(default_factory=threading.Event)

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


def _handler(server: Server, client: Path | None) -> type[BaseHTTPRequestHandler]:
    by_name = {s.name: s for s in server.sources}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002  # quiet
            return

        def _send(
            self, status: int, body: bytes, ctype: str, started: float, extra: dict[str, str] | None = None
        ) -> None:
            try:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Access-Control-Allow-Origin", "*")
                self.send_header("Access-Control-Expose-Headers", "Content-Range, Content-Length")
                self.send_header("Accept-Ranges", "bytes")
                for key, value in (extra or {}).items():
                    self.send_header(key, value)
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):  # the viewer cancelled the request
                self.close_connection = True
                status = 499
            now = time.perf_counter()
            server.requests.append(RequestRecord(self.path, status, len(body), now - started, now))

        def do_OPTIONS(self) -> None:  # noqa: N802
            self.send_response(204)
            self.send_header("Access-Control-Allow-Origin", "*")
            self.send_header("Access-Control-Allow-Headers", "*")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_HEAD(self) -> None:  # noqa: N802
            self.do_GET()

        def do_POST(self) -> None:  # noqa: N802
            """The client's state and action notifications: read, acknowledged, ignored."""
            started = time.perf_counter()
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_POST:
                self._send(413, b"too large", "text/plain", started)
                return
            self.rfile.read(length)
            self._send(200, b'{"g": "0"}', "application/json", started)

        def _events(self) -> None:
            """The client's server-sent event stream: kept open (a comment a second) and
            silent, so the client sees a live server; ends when the server closes."""
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-store")
            self.send_header("Access-Control-Allow-Origin", "*")
            self.end_headers()
            try:
                while not server._stop.wait(1.0):
                    self.wfile.write(b": alive\n\n")
                    self.wfile.flush()
            except OSError:  # the client went away
                return

        def do_GET(self) -> None:  # noqa: N802
            started = time.perf_counter()
            path = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path)
            if path.startswith("/events/"):
                self._events()
                return
            if path == "/favicon.ico":  # browsers ask; no icon, and no error in their console
                self._send(204, b"", "image/x-icon", started)
                return
            try:
                body, ctype = self._route(path)
            except NotFound as exc:
                self._send(404, str(exc).encode(), "text/plain", started)
            except ZarrVectorsError as exc:
                self._send(
                    400 if isinstance(exc, InputError) else 500, str(exc).encode(), "text/plain", started
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
                    raise NotFound(f"no layer {name!r}")
                return by_name[name].get(rest)
            match = re.fullmatch(r"/v/[^/]+/(.*)", path)
            if match and client is not None:
                rel = match.group(1) or "index.html"
                file = (client / rel).resolve()
                if client.resolve() not in file.parents or not file.is_file():
                    raise NotFound(f"no client file {rel!r}")
                return file.read_bytes(), mimetypes.guess_type(file.name)[0] or "application/octet-stream"
            raise NotFound(f"nothing at {path!r}; the viewer is at /v/zv/")

    return Handler


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
) -> Server:
    """Serve ``stores`` (a path, URL, :class:`Dataset` or a list of them) to Neuroglancer on
    127.0.0.1, in a background thread; ``port=0`` takes any free port.

    Returns a :class:`Server` whose ``viewer_url`` opens every store in the bundled client
    (``client=False``: no client is needed; the sources are served for another viewer).
    ``open=True`` opens that URL in the default web browser. ``storage_options`` are passed
    to :func:`zarr_vectors.open` for stores given as paths or URLs. Mesh stores are
    multi-resolution Draco meshes (``mesh_format="multilod"``, one level of detail per store
    level) or legacy single-resolution meshes (``"legacy"``).

    Raises
    ------
    InputError
        No store, a store kind without a Neuroglancer form, an unknown ``mesh_format``, or no
        ``neuroglancer`` package when ``client`` is true.
    """
    sources = open_sources(stores, storage_options, mesh_format)
    static = client_dir() if client else None
    handle = Server("", "", sources)
    httpd = ThreadingHTTPServer(("127.0.0.1", int(port)), _handler(handle, static))
    httpd.daemon_threads = True
    handle.url = f"http://127.0.0.1:{int(httpd.server_address[1])}"
    handle.viewer_url = state_url(f"{handle.url}/v/zv/", viewer_state(sources, f"{handle.url}/zv", layout))
    handle._httpd = httpd
    handle._thread = threading.Thread(target=httpd.serve_forever, name="zarr-vectors-serve", daemon=True)
    handle._thread.start()
    if open:
        webbrowser.open(handle.viewer_url)
    return handle
