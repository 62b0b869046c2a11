"""A read-only view of a store for validation: every key name, every parsed ``zarr.json``,
and the stored cell keys of each array, gathered with one listing and one batch read."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from zarr_vectors.errors import CorruptShardError, FormatError, StoreError
from zarr_vectors.format.zarr_json import check_zarr_v3, load_json
from zarr_vectors.storage import Backend, ShardReader
from zarr_vectors.validation._report import Collector

__all__ = ["StoreView", "list_keys", "batched"]

#: Cells fetched per ``get_many`` call: large enough for concurrency on object storage,
#: small enough to bound memory.
BATCH = 1024


def list_keys(backend: Backend) -> list[str]:
    """Every key of the store, ``/``-separated, in no particular order; names starting with
    ``.`` (temporary files of writes, ``.DS_Store``) and what lies under them are no keys."""
    return [k for k in backend.list_keys() if not k.startswith(".") and "/." not in k]


def batched(items: Sequence[Any], size: int = BATCH) -> Iterator[Sequence[Any]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


@dataclass
class StoreView:
    """Keys and node documents of one store.

    ``docs`` maps a node path (``""`` for the root, ``"0/vertices"``) to its parsed
    ``zarr.json``; ``bad_docs`` maps node paths whose ``zarr.json`` is not JSON to the
    reader's message, and ``node_problems`` those whose JSON is not a Zarr v3 group or array
    document (the reader's :func:`~zarr_vectors.format.zarr_json.check_zarr_v3`). ``cells``
    maps an array path to its stored chunk keys relative to the array (``"c/1/2/3"``),
    filled by :meth:`index_cells`; for a sharded array (``backend`` a
    :class:`~zarr_vectors.storage.shards.ShardReader`), the cells its shards' indexes list.
    """

    backend: Backend
    keys: list[str]
    docs: dict[str, Any] = field(default_factory=dict)
    bad_docs: dict[str, str] = field(default_factory=dict)
    node_problems: dict[str, str] = field(default_factory=dict)
    cells: dict[str, list[str]] = field(default_factory=dict)
    loose: list[str] = field(default_factory=list)
    #: For sharded arrays: the shards whose index is damaged (rule ``cells.decode``) or whose file
    #: cannot be read (``cells.read``), ``{array path: [(shard key, rule, message)]}``.
    shard_problems: dict[str, list[tuple[str, str, str]]] = field(default_factory=dict)

    @classmethod
    def load(cls, backend: Backend) -> StoreView:
        keys = list_keys(backend)
        view = cls(backend, keys)
        meta = sorted(k for k in keys if k == "zarr.json" or k.endswith("/zarr.json"))
        for batch in batched(meta):
            raws, failed = view.read_each(batch)
            for key, raw in zip(batch, raws):
                node = key[: -len("zarr.json")].rstrip("/")
                if key in failed:
                    view.bad_docs[node] = failed[key][1]
                if raw is None:
                    continue
                try:
                    view.docs[node] = doc = load_json(raw, node or "(root)")
                    check_zarr_v3(doc, node or "(root)")
                except FormatError as exc:  # the reader's own parse: same depth and encoding limits
                    if node in view.docs:
                        view.node_problems[node] = str(exc)
                    else:
                        view.bad_docs[node] = str(exc)
        view.index_cells()
        return view

    def read(self, keys: Sequence[str], out: Collector) -> list[bytes | None]:
        """The bytes of ``keys`` (None: absent); a key that cannot be read is reported to ``out``
        (``cells.decode`` for a damaged shard, ``cells.read`` for a local file refused or
        failing) and reads as None. A remote store's failure (unreachable) still raises."""
        raws, failed = self.read_each(keys)
        for key, (rule, message) in failed.items():
            out.error(rule, key, message)
        return raws

    def read_each(self, keys: Sequence[str]) -> tuple[list[bytes | None], dict[str, tuple[str, str]]]:
        """``(bytes or None per key, {unreadable key: (rule, message)})``: one batch, or, when
        the batch fails on something :meth:`read` reports, key by key to name each culprit."""
        try:
            return list(self.backend.get_many(list(keys))), {}
        except (CorruptShardError, StoreError) as exc:
            if not self._reportable(exc):
                raise
        raws: list[bytes | None] = []
        failed: dict[str, tuple[str, str]] = {}
        for key in keys:
            try:
                raws.append(self.backend.get_many([key])[0])
            except (CorruptShardError, StoreError) as exc:
                if not self._reportable(exc):
                    raise
                raws.append(None)
                failed[key] = (
                    "cells.decode" if isinstance(exc, CorruptShardError) else "cells.read",
                    str(exc),
                )
        return raws, failed

    def _reportable(self, exc: Exception) -> bool:
        """Whether a read failure is a finding about the store (a damaged shard, a local file
        refused or failing), not a store that cannot be reached."""
        return isinstance(exc, CorruptShardError) or self.backend.local_dir is not None

    def is_array(self, path: str) -> bool:
        doc = self.docs.get(path)
        return isinstance(doc, dict) and doc.get("node_type") == "array"

    def is_group(self, path: str) -> bool:
        doc = self.docs.get(path)
        return isinstance(doc, dict) and doc.get("node_type") == "group"

    def children(self, path: str) -> list[str]:
        """Names of the nodes directly below ``path`` (those with a zarr.json)."""
        prefix = f"{path}/" if path else ""
        out = set()
        for node in list(self.docs) + list(self.bad_docs):
            if node.startswith(prefix) and node != path:
                rest = node[len(prefix) :]
                out.add(rest.split("/", 1)[0])
        return sorted(out)

    def attrs(self, path: str) -> dict[str, Any]:
        doc = self.docs.get(path)
        attrs = doc.get("attributes") if isinstance(doc, dict) else None
        return attrs if isinstance(attrs, dict) else {}

    def index_cells(self) -> None:
        """Assign every non-metadata key to the array that owns it (``<array>/c/...``)."""
        arrays = {p for p in self.docs if self.is_array(p)}
        cells: dict[str, list[str]] = {p: [] for p in arrays}
        for key in self.keys:
            if key == "zarr.json" or key.endswith("/zarr.json"):
                continue
            parts = key.split("/")
            owner = None
            for i in range(len(parts) - 1, -1, -1):
                if parts[i] == "c" and "/".join(parts[:i]) in arrays:
                    owner = "/".join(parts[:i])
                    cells[owner].append("/".join(parts[i:]))
                    break
            if owner is None:
                self.loose.append(key)
        self.cells = cells
        if isinstance(self.backend, ShardReader):
            for path in sorted(set(self.backend.layouts) & arrays):
                self._expand_shards(self.backend, path)

    def _expand_shards(self, reader: ShardReader, path: str) -> None:
        """Replace the shard keys of sharded array ``path`` by the cell keys their indexes list."""
        inner: list[str] = []
        for batch in batched(self.cells[path]):
            found: dict[str, list[str]] = {}
            try:
                found = reader.shard_cells(path, list(batch))
            except (CorruptShardError, StoreError) as exc:  # one shard at a time, to name each culprit
                if not self._reportable(exc):
                    raise
                for key in batch:
                    try:
                        found |= reader.shard_cells(path, [key])
                    except (CorruptShardError, StoreError) as bad:
                        if not self._reportable(bad):
                            raise
                        rule = "cells.decode" if isinstance(bad, CorruptShardError) else "cells.read"
                        self.shard_problems.setdefault(path, []).append((f"{path}/{key}", rule, str(bad)))
            for cells in found.values():
                inner += cells
        self.cells[path] = inner
