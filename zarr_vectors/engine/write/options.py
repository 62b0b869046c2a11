"""The store-wide keywords every writer takes, gathered once.

``chunk_shape``, ``bounds``, ``bin_shape``, ``axes``, ``units`` frame the spatial grid;
``crs`` is recorded in the root, and ``root_extra`` (library keys such as a source file's
header, e.g. ``las_header``) joins the root ``zarr_vectors`` block, kept through pyramids;
``compression`` and ``checksums`` choose the codecs of every array; ``shards`` groups the cells
of every per-chunk array into ``sharding_indexed`` shards; ``overwrite`` and ``storage_options``
decide where and whether the store is written. The public writers take them as keywords (``docs/writing.md`` documents them
once) and hand them on as one :class:`StoreOptions`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from zarr_vectors.errors import InputError

__all__ = ["StoreOptions", "check_shards", "default_shards"]


def default_shards(target: Any) -> str:
    """``"auto"`` on every backend (DECISIONS item 10: sharded arrays by default, local disk
    included); ``target`` is kept for callers that name it."""
    del target
    return "auto"


def check_shards(shards: Any, ndim: int, target: Any = None) -> str | tuple[int, ...] | None:
    """The ``shards`` keyword checked: None (one object per cell), ``"auto"`` (shards sized from
    the grid and the data, see :func:`~zarr_vectors.format.shards.auto_chunks_per_shard`) or
    chunks per shard along each of ``ndim`` axes. ``"default"`` is :func:`default_shards`
    (``"auto"``); ``"none"`` and False are None; an int is every axis."""
    if isinstance(shards, str) and shards == "default":
        return default_shards(target)
    if shards is None or shards is False or (isinstance(shards, str) and shards == "none"):
        return None
    if isinstance(shards, str) and shards == "auto":
        return "auto"
    values = [shards] * ndim if isinstance(shards, int) and not isinstance(shards, bool) else shards
    if (
        isinstance(values, (list, tuple))
        and len(values) == ndim
        and all(isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 1 << 20 for v in values)
    ):
        return tuple(int(v) for v in values)
    raise InputError(
        f"shards must be None or 'none' (one object per cell), 'auto', 'default', or chunks per shard: "
        f"one positive integer or {ndim} of them (one per axis); got {shards!r}"
    )


@dataclass(frozen=True)
class StoreOptions:
    """Store-wide writer keywords, as the user gave them (checked where they are used)."""

    chunk_shape: Any
    bounds: Any = None
    bin_shape: Any = None
    axes: Sequence[Any] | None = None
    units: str | None = None
    crs: Any = None
    compression: str | None = "none"
    checksums: bool = False
    shards: Any = "default"
    overwrite: bool = False
    storage_options: dict[str, Any] | None = None
    root_extra: Mapping[str, Any] | None = None
