"""Small stores of every served kind, and a raw HTTP/1.1 client for attacking ``serve``.

:func:`raw_request` speaks bytes on a socket (so NUL bytes, bad lengths and missing headers
can be sent as they are) and returns the parsed answer, or ``None`` for the status when the
server closed the connection without answering.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

import zarr_vectors as zv


def build_stores(d: Path) -> dict[str, Path]:
    """Points with objects and a pyramid (layer ``synapses``), a skeleton (``neuron``, objects
    7 and 8) and a mesh (``soma``, object 7)."""
    rng = np.random.default_rng(3)
    n = 3000
    zv.write_points(
        d / "synapses.zarr",
        rng.uniform(0, 1000, (n, 3)),
        chunk_shape=250,
        attributes={"score": rng.random(n).astype("f4")},
        object_ids=rng.integers(1, 12, n) * 1000,
    )
    zv.open(d / "synapses.zarr", mode="r+").build_pyramid([2])
    t = np.linspace(0, 1, 30)
    pos = np.stack([200 + 600 * t, 500 + 200 * np.sin(6 * t), 500 + 100 * np.cos(4 * t)], 1)
    zv.write_skeleton(
        d / "neuron.zarr",
        np.concatenate([pos, pos + 50]),
        np.concatenate([np.arange(-1, 29), np.r_[-1, np.arange(30, 59)]]),
        chunk_shape=250,
        object_ids=np.repeat([7, 8], 30),
    )
    verts = np.array([[1, 0, 0], [-1, 0, 0], [0, 1, 0], [0, -1, 0], [0, 0, 1], [0, 0, -1]], float)
    faces = np.array([[0, 2, 4], [2, 1, 4], [1, 3, 4], [3, 0, 4], [2, 0, 5], [1, 2, 5], [3, 1, 5], [0, 3, 5]])
    zv.write_meshes(d / "soma.zarr", [(verts * 100 + 500, faces)], chunk_shape=250, object_ids=[7])
    return {"points": d / "synapses.zarr", "skeleton": d / "neuron.zarr", "mesh": d / "soma.zarr"}


@dataclass
class Answer:
    """A parsed HTTP answer; ``status`` is None when the connection closed with none."""

    status: int | None
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""


def raw_request(port: int, data: bytes, timeout: float = 10.0, read_body: bool = True) -> Answer:
    """Send ``data`` as it is to 127.0.0.1:``port`` and read one answer (headers, then the
    ``Content-Length`` bytes of body when ``read_body``)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(data)
        buf = b""
        while b"\r\n\r\n" not in buf:
            try:
                got = sock.recv(65536)
            except ConnectionResetError:
                got = b""
            if not got:
                return Answer(None)
            buf += got
        head, _, body = buf.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = {}
        for line in lines[1:]:
            key, _, value = line.partition(":")
            headers[key.strip().lower()] = value.strip()
        want = int(headers.get("content-length", "0")) if read_body else 0
        while len(body) < want:
            got = sock.recv(65536)
            if not got:
                break
            body += got
        return Answer(int(lines[0].split()[1]), headers, body)


def get(port: int, path: str, headers: dict[str, str] | None = None, method: str = "GET") -> Answer:
    """One ``method path`` request with ``Host: 127.0.0.1:port`` and ``headers``."""
    fields = {"Host": f"127.0.0.1:{port}", **(headers or {})}
    text = f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in fields.items()) + "\r\n"
    return raw_request(port, text.encode("latin-1"), read_body=method != "HEAD")
