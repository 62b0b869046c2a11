"""An opened Zarr Vectors store as the engine sees it: a backend, the root metadata and the
levels, each level's metadata read once, on first use.

:class:`VectorStore` is what readers, the pyramid builder and :class:`zarr_vectors.Dataset`
share. Its root and backend change only through :meth:`VectorStore.staged` (a build writing
into a staging overlay) and :meth:`VectorStore.replace_root` (a level committed), both of which
forget the levels read so far.
"""

from __future__ import annotations

import contextlib
import json
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np

from zarr_vectors.engine.chunks.arrays import TableArray
from zarr_vectors.engine.level import Level
from zarr_vectors.errors import (
    FormatError,
    LevelNotFoundError,
    ReadOnlyError,
    StaleLevelWarning,
    check_choice,
)
from zarr_vectors.format.metadata import RootMeta
from zarr_vectors.format.zarr_json import check_zarr_v3, load_json
from zarr_vectors.storage import (
    Backend,
    ConsistentBackend,
    ShardReader,
    StorageOptions,
    check_complete,
    check_not_v2,
    check_wait,
    open_backend,
)

__all__ = ["MODES", "VectorStore", "table_values"]

#: Modes a store opens in: read only, or read and add levels.
MODES = ("r", "r+")


class VectorStore:
    """A store's backend, root metadata and levels (read lazily, kept once read).

    Invariant: every level in the cache was read under the current ``root`` and ``backend``.
    ``wait`` is how long a write waits for another writer's lock (seconds).
    """

    def __init__(self, backend: Backend, root: RootMeta, mode: str, wait: float = 0.0) -> None:
        self.backend = backend
        self.root = root
        self.mode = mode
        self.wait = wait
        self._levels: dict[int, Level] = {}

    @classmethod
    def open(
        cls,
        target: Any,
        mode: str = "r",
        storage_options: dict[str, Any] | None = None,
        wait: float | None = None,
    ) -> VectorStore:
        """Open ``target`` (path, URL, ``.zip`` or zarr Store); see :func:`zarr_vectors.open`."""
        check_choice("mode", mode, MODES, hint="write new stores with write_points() etc.")
        wait = StorageOptions.parse(storage_options).wait if wait is None else check_wait(wait)
        backend = open_backend(target, read_only=mode == "r", storage_options=storage_options)
        check_not_v2(backend)
        raw = backend.get_many(["zarr.json"])[0]
        if raw is None:
            raise FormatError(
                f"{backend.description} has no zarr.json at its root: it is not a Zarr v3 store"
            )
        doc = check_zarr_v3(load_json(raw, f"{backend.description} (root)"), backend.description)
        if doc["node_type"] != "group":
            raise FormatError(f"{backend.description} is a zarr array, not a Zarr Vectors group")
        attributes = doc.get("attributes") or {}
        check_complete(attributes, backend.description)
        root = RootMeta.from_attributes(attributes)
        return cls(ConsistentBackend(ShardReader(backend), raw), root, mode, wait)

    @property
    def description(self) -> str:
        """The store's location, for messages."""
        return self.backend.description

    @property
    def levels(self) -> list[int]:
        """Level indices, finest (0) first."""
        return list(range(max(len(self.root.level_bin_shapes), 1)))

    @property
    def ndim(self) -> int:
        """Number of spatial axes."""
        return self.root.sid_ndim

    @property
    def axes(self) -> tuple[str, ...]:
        """Names of the spatial axes."""
        return tuple(a.name for a in self.root.axes if a.type == "space")

    @property
    def geometry_types(self) -> tuple[str, ...]:
        """The root's ``geometry_types``."""
        return self.root.geometry_types

    def level(self, index: int = 0) -> Level:
        """Level ``index``, its metadata read on first use."""
        if index not in self.levels:
            raise LevelNotFoundError(index, self.levels)
        if index not in self._levels:
            level = Level.load(self.backend, self.root, index)
            if level.meta.extra.get("stale") is True:
                warnings.warn(
                    f"level {index} of {self.description} is stale: points were appended to level 0 after it "
                    "was built, so it lacks them; rebuild the pyramid (build_pyramid(..., overwrite=True), "
                    "or append(..., pyramid=True))",
                    StaleLevelWarning,
                    stacklevel=3,
                )
            self._levels[index] = level
        return self._levels[index]

    def is_stale(self, index: int) -> bool:
        """Whether level ``index`` was marked stale by an append (read from its metadata only)."""
        if index == 0:
            return False
        raw = self.backend.get_many([f"{index}/zarr.json"])[0]
        if raw is None:
            return False
        try:
            block = (json.loads(raw).get("attributes") or {}).get("zarr_vectors_level") or {}
        except (json.JSONDecodeError, AttributeError):
            return False
        return isinstance(block, dict) and block.get("stale") is True

    def require_writable(self) -> None:
        """Raise :class:`~zarr_vectors.errors.ReadOnlyError` unless opened with ``mode="r+"``."""
        if self.mode != "r+":
            raise ReadOnlyError(
                "this dataset was opened with mode='r'; reopen it with mode='r+' to modify it"
            )

    def replace_root(self, root: RootMeta, *levels: int) -> None:
        """Adopt a newly committed ``root``; forget ``levels`` (all levels when none are named)."""
        self.root = root
        if not levels:
            self._levels.clear()
        for index in levels:
            self._levels.pop(index, None)

    @contextlib.contextmanager
    def staged(self, overlay: Backend, root: RootMeta) -> Iterator[None]:
        """Read and write through ``overlay`` with ``root`` until the block ends, then return to
        the store's backend; the root stays as the block left it unless the block raised."""
        backend, root_before = self.backend, self.root
        self.backend = overlay
        self.replace_root(root)
        completed = False
        try:
            yield
            completed = True
        finally:
            self.backend = backend
            self._levels.clear()
            if not completed:
                self.root = root_before


def table_values(level: Level, table: TableArray) -> np.ndarray:
    """Every row of an object or group table of ``level`` (absent rows as the fill value)."""
    n_chunks = -(-table.length // table.chunk)
    return table.dense(level.backend.get_many(table.chunk_keys(range(n_chunks))))
