"""The store-wide keywords every writer takes, gathered once.

``chunk_shape``, ``bounds``, ``bin_shape``, ``axes``, ``units`` frame the spatial grid;
``crs`` is recorded in the root, and ``root_extra`` (library keys such as a source file's
header, e.g. ``las_header``) joins the root ``zarr_vectors`` block, kept through pyramids; ``compression`` and ``checksums`` choose the codecs of
every array; ``overwrite`` and ``storage_options`` decide where and whether the store is
written. The public writers take them as keywords (``docs/writing.md`` documents them
once) and hand them on as one :class:`StoreOptions`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["StoreOptions"]


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
    overwrite: bool = False
    storage_options: dict[str, Any] | None = None
    root_extra: Mapping[str, Any] | None = None
