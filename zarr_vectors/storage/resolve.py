"""Where a store's bytes live: a path, URL, zip file or zarr ``Store`` resolved to a backend
(:class:`~zarr_vectors.storage.local.LocalBackend`, a zarr-store or an HTTP backend), with the
storage options read by this library taken out before the rest go to fsspec."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path
from typing import Any

from zarr.abc.store import Store

from zarr_vectors.errors import (
    InputError,
    ReadOnlyError,
    StoreNotFoundError,
    ZarrV2StoreError,
    ZarrVectorsError,
)
from zarr_vectors.storage.http_store import HTTP_PROTOCOLS, HttpStoreBackend
from zarr_vectors.storage.local import LocalBackend
from zarr_vectors.storage.protocol import CONCURRENCY, Backend, StorageOptions, run_sync
from zarr_vectors.storage.zarr_store import ZarrStoreBackend

__all__ = [
    "check_not_v2",
    "fsspec_options",
    "local_path",
    "open_backend",
    "remote_backend",
    "store_from_url",
]


def _is_url(text: str) -> bool:
    return "://" in text


def fsspec_options(url: str, options: StorageOptions) -> dict[str, Any]:
    """The fsspec options for ``url``: the caller's, over this library's defaults for S3.

    s3fs reads a whole key with a HEAD first (to split large ones) unless
    ``max_concurrency`` is 1, and botocore keeps 10 connections unless told otherwise:
    for keys of a few MB at most, that doubles the round trips of every read and queues a
    batch of CONCURRENCY requests behind 10 connections. The caller's values win.
    """
    given = dict(options.fsspec or {})
    if url.split("://", 1)[0].lower() not in ("s3", "s3a"):
        return given
    config = {"max_pool_connections": CONCURRENCY, **(given.get("config_kwargs") or {})}
    return {"max_concurrency": 1, **given, "config_kwargs": config}


def store_from_url(url: str, options: StorageOptions, read_only: bool) -> Store:
    from zarr.storage import FsspecStore

    if url.split("://", 1)[0].lower() in HTTP_PROTOCOLS and not read_only:
        raise ReadOnlyError(
            f"cannot write to {url}: stores served over HTTP(S) are read-only. Write the store to local "
            "disk or object storage (s3://, gs://) and serve that folder or bucket"
        )
    try:
        return FsspecStore.from_url(url, storage_options=fsspec_options(url, options), read_only=read_only)
    except ImportError as exc:  # fsspec or the protocol's package (s3fs, gcsfs) is missing
        protocol = url.split("://", 1)[0]
        if protocol in ("s3", "s3a"):
            hint = (
                "install the s3 extra of zarrvec: pip install 'zarrvec[s3]' "
                '(or, in a checkout of the source, pip install -e ".[s3]")'
            )
        elif protocol in ("gs", "gcs"):
            hint = (
                "install the gcs extra of zarrvec: pip install 'zarrvec[gcs]' "
                '(or, in a checkout of the source, pip install -e ".[gcs]")'
            )
        elif protocol in HTTP_PROTOCOLS:
            hint = "install aiohttp (pip install aiohttp), which fsspec reads http(s):// URLs with"
        else:
            hint = f"install the fsspec package for {protocol}:// URLs (e.g. adlfs for az://)"
        raise ZarrVectorsError(f"cannot open {url!r}: {exc}; {hint}") from exc


def local_path(target: Any) -> Path | None:
    """The local path a target names (a path or ``file://`` URL), else None."""
    if isinstance(target, Store) or not isinstance(target, (str, os.PathLike)):
        return None
    text = os.fspath(target)
    if text.startswith("file://"):
        return Path(text[len("file://") :])
    return None if _is_url(text) else Path(text)


def remote_backend(target: Any, options: StorageOptions, read_only: bool) -> ZarrStoreBackend:
    """The backend of a zarr Store or a URL other than ``file://``."""
    if isinstance(target, Store):
        return ZarrStoreBackend(target, timeout=options.timeout)
    text = os.fspath(target)
    store = store_from_url(text, options, read_only)
    if text.split("://", 1)[0].lower() in HTTP_PROTOCOLS:
        return HttpStoreBackend(store, text, options.timeout, options.max_object_bytes)
    return ZarrStoreBackend(store, text, options.timeout)


def open_backend(target: Any, *, read_only: bool, storage_options: dict[str, Any] | None = None) -> Backend:
    """A backend for reading (or updating in place) an existing store."""
    options = StorageOptions.parse(storage_options)
    if not isinstance(target, (Store, str, os.PathLike)):
        raise InputError(f"cannot open a store from {type(target).__name__}; give a path, URL or zarr Store")
    path = local_path(target)
    if path is None:
        return remote_backend(target, options, read_only)
    if path.is_file() and zipfile.is_zipfile(path):
        from zarr.storage import ZipStore

        return ZarrStoreBackend(run_sync(ZipStore.open(path, mode="r")), str(path), options.timeout)
    if not path.exists():
        assert not isinstance(target, Store)  # local_path gives None for a Store
        raise StoreNotFoundError(os.fspath(target))
    return LocalBackend(path, read_only=read_only, follow_symlinks=options.follow_symlinks)


def check_not_v2(backend: Backend) -> None:
    """Raise :class:`ZarrV2StoreError` when the root holds Zarr v2 metadata and no zarr.json."""
    root, zgroup, zarray = backend.get_many(["zarr.json", ".zgroup", ".zarray"])
    if root is None and (zgroup is not None or zarray is not None):
        raise ZarrV2StoreError(
            f"{backend.description} is a Zarr v2 store; Zarr Vectors needs Zarr v3. "
            "Rewrite the data with zarr_vectors.write_* (zarr-python 3 can read the v2 arrays)."
        )
