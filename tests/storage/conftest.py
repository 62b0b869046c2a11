"""Fixtures for the storage suite: a local S3 server, a GCS emulator and one store target per backend."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from http.server import HTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr

import zarr_vectors as zv

from .s3server import DUMMY_AWS_ENV, start_s3_server

#: Backends whose writes are swapped in whole (a failed write leaves the old store).
ATOMIC_KINDS = ("local", "file_url", "zip")
#: Backends written in place (cleared first on overwrite; root zarr.json written last).
IN_PLACE_KINDS = ("memory_store", "memory_url", "zip_store", "s3_url", "s3_store")


def kind_param(kind: str) -> Any:
    """``pytest.param`` for a backend kind with its marks (the s3 marker)."""
    marks: list[Any] = []
    if kind.startswith("s3"):
        marks.append(pytest.mark.s3)
    return pytest.param(kind, marks=marks, id=kind)


ALL_KINDS = [kind_param(k) for k in ("local", "file_url", "zip", *IN_PLACE_KINDS)]


@pytest.fixture(scope="session")
def s3_server() -> Iterator[tuple[str, dict[str, Any]]]:
    """A moto S3 server on 127.0.0.1 with one bucket: yields ``(url_prefix, storage_options)``."""
    with pytest.MonkeyPatch.context() as mp:
        for name, value in DUMMY_AWS_ENV.items():
            mp.setenv(name, value)
        server = start_s3_server()
        try:
            yield server.url_prefix, server.storage_options
        finally:
            server.stop()


@dataclass
class StoreTarget:
    """One place a store can be written to, and how to reach it again."""

    kind: str
    target: Any
    storage_options: dict[str, Any] | None
    atomic: bool
    path: Path | None = None  # the local file or directory, for local kinds

    def write(self, positions: np.ndarray, **kwargs: Any) -> zv.Dataset:
        kwargs.setdefault("chunk_shape", 50)
        return zv.write_points(self.target, positions, storage_options=self.storage_options, **kwargs)

    def open(self, mode: str = "r") -> zv.Dataset:
        return zv.open(self.target, mode, storage_options=self.storage_options)


@pytest.fixture
def make_target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[..., StoreTarget]]:
    """``make_target(kind, name="s")`` -> a fresh, empty :class:`StoreTarget` of that kind."""
    cleanups: list[Callable[[], None]] = []

    def make(kind: str, name: str = "s") -> StoreTarget:
        unique = f"{name}-{uuid.uuid4().hex[:10]}"
        if kind == "local":
            path = tmp_path / f"{name}.zarr"
            return StoreTarget(kind, path, None, True, path)
        if kind == "file_url":
            path = tmp_path / f"{name}.zarr"
            return StoreTarget(kind, f"file://{path}", None, True, path)
        if kind == "zip":
            path = tmp_path / f"{name}.zip"
            return StoreTarget(kind, str(path), None, True, path)
        if kind == "memory_store":
            return StoreTarget(kind, zarr.storage.MemoryStore(), None, False)
        if kind == "zip_store":  # a zarr ZipStore object, opened for writing by the caller
            from zarr.core.sync import sync

            store = sync(zarr.storage.ZipStore.open(tmp_path / f"{name}-store.zip", mode="w"))
            cleanups.append(store.close)
            return StoreTarget(kind, store, None, False)
        if kind == "memory_url":
            import fsspec

            fs = fsspec.filesystem("memory")
            cleanups.append(lambda: fs.rm(f"/{unique}", recursive=True) if fs.exists(f"/{unique}") else None)
            return StoreTarget(kind, f"memory://{unique}", None, False)
        if kind in ("s3_url", "s3_store"):
            prefix, options = request.getfixturevalue("s3_server")
            url = f"{prefix}/{unique}.zarr"
            if kind == "s3_url":
                return StoreTarget(kind, url, options, False)
            store = zarr.storage.FsspecStore.from_url(url, storage_options=options)
            return StoreTarget(kind, store, None, False)
        raise ValueError(f"unknown backend kind {kind!r}")

    yield make
    for cleanup in cleanups:
        cleanup()


@pytest.fixture(params=ALL_KINDS)
def target(request: pytest.FixtureRequest, make_target: Callable[..., StoreTarget]) -> StoreTarget:
    """A fresh, empty target of every backend kind in turn."""
    return make_target(request.param)


@pytest.fixture
def umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


#: The bucket of the GCS emulator's session.
GCS_BUCKET = "zv-gcs-tests"


@pytest.fixture(scope="session")
def gcs_server() -> Iterator[tuple[str, dict[str, Any]]]:
    """The ``gcp-storage-emulator`` package's server on 127.0.0.1 (in memory, one bucket), for
    gcsfs: yields ``(url_prefix, storage_options)``. Skipped when gcsfs or the emulator is not
    installed (both are in the ``test`` extra).

    gcsfs's default class first asks a gRPC control API for the bucket's layout, which the
    emulator does not serve (each lookup waits for a 60 s gRPC time limit); the plain
    ``gcsfs.core.GCSFileSystem`` speaks only the JSON API, so it is registered for ``gs://``.
    """
    pytest.importorskip("gcsfs", reason="gcsfs is not installed (pip install -e '.[test]')")
    emulator = pytest.importorskip(
        "gcp_storage_emulator.server",
        reason="gcp-storage-emulator is not installed (pip install -e '.[test]')",
    )
    import logging

    import fsspec
    import gcsfs.core

    logging.getLogger("gcp_storage_emulator").setLevel(logging.CRITICAL)  # logs every absent key

    class QueuedServer(HTTPServer):
        request_queue_size = 256  # the default 5 drops bursts of connections (1 s retries each)

    class Api(emulator.APIThread):
        """The emulator's thread, serving one request at a time as it does, with a deep queue."""

        def run(self) -> None:
            self._httpd = QueuedServer(
                (self._host, self._port), partial(emulator.RequestHandler, self._storage)
            )
            self.is_running.set()
            self._httpd.serve_forever()

    server = emulator.create_server("127.0.0.1", 0, in_memory=True, default_bucket=GCS_BUCKET)
    server._api = Api("127.0.0.1", 0, server._storage, daemon=True)
    server.start()
    try:
        host, port = server._api._httpd.server_address[:2]  # the emulator has no public accessor
        assert host == "127.0.0.1", host
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")
            for protocol in ("gs", "gcs"):
                fsspec.register_implementation(protocol, gcsfs.core.GCSFileSystem, clobber=True)
            options = {"endpoint_url": f"http://127.0.0.1:{port}", "token": "anon", "project": "zv-tests"}
            yield f"gs://{GCS_BUCKET}", options
    finally:
        server.stop()
