"""Copy a store with its per-chunk arrays sharded differently (or unsharded), shard by shard.

:func:`reshard` reads the source through a :class:`~zarr_vectors.storage.shards.ShardReader`
(so a sharded source hands out cells) and writes the destination through the usual write
session: cells and shards first, array documents, groups deepest first, the root last with a
new write generation. Only the per-chunk arrays (those with ``nonempty_chunks``) change: their
cells are regrouped into the new shards, their bytes unchanged; every other key is copied as is.
Memory stays near one batch of destination shards (:data:`BATCH_BYTES`).

The source is read through a :class:`~zarr_vectors.storage.wrappers.ConsistentBackend`: a
writer replacing it meanwhile makes the copy fail (:class:`~zarr_vectors.errors.StoreChangedError`)
rather than mix two versions. Resharding a store into itself (``overwrite=True``) commits only
if the store is still the one read, else :class:`~zarr_vectors.errors.StoreConflictError`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import numpy as np

from zarr_vectors.engine.write.builder import StoreBuilder
from zarr_vectors.engine.write.options import check_shards
from zarr_vectors.errors import FormatError, StoreChangedError, StoreConflictError
from zarr_vectors.format.grid import cell_key, parse_chunk_key
from zarr_vectors.format.shards import (
    ShardLayout,
    auto_chunks_per_shard,
    encode_shard,
    parse_sharding,
    sharded_doc,
    unsharded_doc,
)
from zarr_vectors.format.zarr_json import load_json
from zarr_vectors.storage import (
    Backend,
    ConsistentBackend,
    ShardReader,
    check_complete,
    check_not_v2,
    local_path,
    open_backend,
    write_session,
)

__all__ = ["reshard", "BATCH_BYTES"]

#: Source bytes read per batch (whole destination shards, at least one).
BATCH_BYTES = 64 << 20
#: Cells read per batch at most.
BATCH_CELLS = 4096


def _docs(source: Backend) -> tuple[list[str], dict[str, dict[str, Any]]]:
    """Every key of the source (hidden names left out) and its parsed ``zarr.json`` documents by node."""
    keys = [k for k in source.list_keys() if not k.startswith(".") and "/." not in k]
    meta = [k for k in keys if k == "zarr.json" or k.endswith("/zarr.json")]
    docs = {}
    for key, raw in zip(meta, source.get_many(meta)):
        if raw is not None:
            node = key[: -len("zarr.json")].rstrip("/")
            doc = load_json(raw, node or "(root)")
            if isinstance(doc, dict):
                docs[node] = doc
    return keys, docs


def _cells(path: str, doc: dict[str, Any]) -> np.ndarray:
    """Cell indices (K, D) of the chunks a per-chunk array lists."""
    attrs = doc.get("attributes") or {}
    rank = len(doc["shape"])
    origin = np.asarray(attrs.get("chunk_grid_origin") or [0] * rank, np.int64)
    try:
        chunks = np.array([parse_chunk_key(k) for k in attrs["nonempty_chunks"]], np.int64)
    except (TypeError, ValueError) as exc:
        raise FormatError(f"array {path!r}: nonempty_chunks is not a list of chunk keys ({exc})") from exc
    return chunks.reshape(-1, rank) - origin


def _batches(order: np.ndarray, shard_ids: np.ndarray, cell_bytes: float) -> Iterator[np.ndarray]:
    """Runs of ``order`` (cells sorted by shard) ending on shard boundaries, about a batch each."""
    per = max(1, min(BATCH_CELLS, int(BATCH_BYTES // max(cell_bytes, 1.0))))
    start = 0
    while start < len(order):
        stop = min(len(order), start + per)
        while stop < len(order) and shard_ids[order[stop]] == shard_ids[order[stop - 1]]:
            stop += 1
        yield order[start:stop]
        start = stop


def _copy_array(
    source: Backend, builder: StoreBuilder, path: str, doc: dict[str, Any], shards: Any, bar: Any
) -> dict[str, Any]:
    """Write the cells of one per-chunk array into ``builder`` in its new shards; its new document."""
    base = unsharded_doc(doc) if parse_sharding(path, doc) is not None else doc
    shape = [int(s) for s in base["shape"]]
    cells = _cells(path, base)
    stored = sum(source.key_sizes(path).values())
    cell_bytes = stored / max(len(cells), 1)
    asked = check_shards(shards, len(shape))
    cps: tuple[int, ...] | None = None
    if asked == "auto":
        cps = auto_chunks_per_shard(shape, cell_bytes)
    elif isinstance(asked, tuple):
        cps = tuple(min(k, n) for k, n in zip(asked, shape))
    if cps is not None:
        layout = ShardLayout(cps, (1,) * len(shape), tuple(base["codecs"]))
        shard, inner = layout.locate(cells)
        ids = (
            np.ravel_multi_index(shard.T, [-(-n // k) for n, k in zip(shape, cps)])
            if len(cells)
            else shard[:, 0]
        )
    else:
        inner = ids = np.arange(len(cells))
    order = np.argsort(ids, kind="stable")
    for batch in _batches(order, ids, cell_bytes):
        raws = source.get_many([f"{path}/{cell_key(c)}" for c in cells[batch]])
        if cps is None:
            for i, raw in zip(batch.tolist(), raws):
                if raw is not None:
                    builder.put(f"{path}/{cell_key(cells[i])}", raw)
        else:
            groups: dict[int, dict[int, bytes]] = {}
            for i, raw in zip(batch.tolist(), raws):
                if raw is not None:
                    groups.setdefault(int(ids[i]), {})[int(inner[i])] = raw
            for members_of, members in groups.items():
                at = int(batch[ids[batch] == members_of][0])
                builder.put(f"{path}/{cell_key(shard[at])}", encode_shard(layout, members))
        bar.update(len(batch))
    return base if cps is None else sharded_doc(base, cps)


def reshard(
    src: Any,
    dst: Any,
    shards: Any = "auto",
    *,
    overwrite: bool = False,
    progress: bool | None = None,
    storage_options: dict[str, Any] | None = None,
    dst_storage_options: dict[str, Any] | None = None,
) -> None:
    """Copy a store with its per-chunk arrays sharded anew, or unsharded; shard by shard.

    The cells' bytes, the tables and the metadata are copied unchanged; only how the cells
    of every per-chunk array (at every level) are grouped into stored objects changes. The
    copy is written like any new store: complete before its root appears.

    Parameters
    ----------
    src
        The store to copy (path, URL or zarr Store), sharded or not.
    dst
        Where to write the copy (as for :func:`zarr_vectors.write_points`).
    shards
        ``"auto"`` (sized from the grid as writers do, at most 64 MB a shard), chunks per shard
        (one integer, or one per axis), or None / ``"none"``: one object per cell (unshard).
    overwrite
        Replace an existing store at ``dst``.
    progress
        A progress bar over the cells copied (default: when stderr is a terminal).
    storage_options, dst_storage_options
        Storage options of ``src`` and of ``dst``.

    Examples
    --------
    >>> import numpy as np, zarr_vectors as zv
    >>> pts = np.random.default_rng(0).uniform(0, 100, (2000, 3))
    >>> _ = zv.write_points("memory://doc-reshard-src", pts, chunk_shape=10)
    >>> zv.reshard("memory://doc-reshard-src", "memory://doc-reshard-dst", shards=5, progress=False)
    >>> zv.open("memory://doc-reshard-dst").vertex_count()
    2000
    """
    raw = open_backend(src, read_only=True, storage_options=storage_options)
    check_not_v2(raw)
    source = ConsistentBackend(ShardReader(raw), raw.get_many(["zarr.json"])[0])
    try:
        _reshard(source, src, dst, shards, overwrite, progress, dst_storage_options)
    except StoreChangedError as exc:
        if not _same_store(src, dst):
            raise
        raise StoreConflictError(
            f"{source.description} was changed by another writer while it was being resharded into "
            "itself; nothing was applied. Run the reshard again"
        ) from exc


def _same_store(src: Any, dst: Any) -> bool:
    """Whether ``dst`` names the store ``src`` (the same real path, URL or ``Store`` object)."""
    a, b = local_path(src), local_path(dst)
    if a is not None and b is not None:
        return os.path.realpath(a) == os.path.realpath(b)
    if isinstance(src, str) and isinstance(dst, str):
        return a is None and b is None and src.rstrip("/") == dst.rstrip("/")
    return src is dst


def _reshard(
    source: ConsistentBackend,
    src: Any,
    dst: Any,
    shards: Any,
    overwrite: bool,
    progress: bool | None,
    dst_storage_options: dict[str, Any] | None,
) -> None:
    """:func:`reshard` from the opened ``source``."""
    from tqdm import tqdm

    keys, docs = _docs(source)
    root = docs.get("")
    if root is None or root.get("node_type") != "group":
        raise FormatError(
            f"{source.description} has no zarr.json group at its root: it is not a Zarr Vectors store"
        )
    attributes = dict(root.get("attributes") or {})
    check_complete(attributes, source.description)
    arrays = {p: d for p, d in docs.items() if p and d.get("node_type") == "array"}
    per_chunk = {
        p for p, d in arrays.items() if isinstance((d.get("attributes") or {}).get("nonempty_chunks"), list)
    }
    for path in per_chunk:
        check_shards(shards, len(arrays[path].get("shape") or []))  # a bad value: InputError before writing
    total = sum(len(arrays[p]["attributes"]["nonempty_chunks"]) for p in per_chunk)
    same = _same_store(src, dst)
    with write_session(
        dst, overwrite=overwrite, storage_options=dst_storage_options, expect=source.expected if same else ...
    ) as backend:
        builder = StoreBuilder(backend)
        with tqdm(
            total=total, unit="cell", desc="resharding", disable=None if progress is None else not progress
        ) as bar:
            for path in sorted(per_chunk):
                builder.arrays[path] = _copy_array(source, builder, path, arrays[path], shards, bar)
        owned = tuple(f"{p}/" for p in per_chunk)
        rest = [k for k in keys if not k.endswith("zarr.json") and not k.startswith(owned)]
        for start in range(0, len(rest), BATCH_CELLS):
            part = rest[start : start + BATCH_CELLS]
            for key, raw in zip(part, source.get_many(part)):
                if raw is not None:
                    builder.put(key, raw)
        for path, doc in arrays.items():
            builder.arrays.setdefault(path, json.loads(json.dumps(doc)))
        for path, doc in docs.items():
            if path and doc.get("node_type") == "group":
                builder.groups[path] = doc
        builder.commit(attributes)
