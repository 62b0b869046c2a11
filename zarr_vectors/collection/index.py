"""The relationship index of a member (``docs/format-collections.md``): for one integer vertex
attribute of level 0, the sorted distinct values, offsets, and one ``(chunk coordinates, row)``
ref per point, as sharded Zarr v3 arrays under ``zv_relationships/<attribute>/``.

A lookup reads the fence, the chunks of ``ids``, ``offsets`` and ``refs`` that hold the asked
ids, then only the member's cells of the chunks the refs name: its cost follows the answer.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from zarr_vectors.dataset import Dataset
from zarr_vectors.engine import fetch_cells, row_owners
from zarr_vectors.errors import FormatError, InputError
from zarr_vectors.format.shards import encode_shard, parse_sharding, sharded_doc
from zarr_vectors.format.zarr_json import dense_array_doc, group_doc
from zarr_vectors.result import Origin, Result
from zarr_vectors.storage import GENERATION_KEY, Backend, ShardReader, dump_json, open_backend

__all__ = ["INDEX_GROUP", "StaleIndexError", "build_index", "drop_index", "lookup", "index_attributes"]

INDEX_GROUP = "zv_relationships"
INDEX_KEY = "zv:relationshipIndex"
ARRAYS = ("ids", "offsets", "refs", "positions", "fence")
#: Entries per inner chunk of ``ids``, ``offsets``, ``fence`` and rows per chunk of ``refs``.
CHUNK = 65536
#: Inner chunks per shard.
SHARD_CHUNKS = 64
#: Member chunks fetched per batch while building.
BUILD_BATCH = 256


class StaleIndexError(FormatError):
    """The member was written after its relationship index was built (rebuild the index)."""


def _generation(backend: Backend) -> Any:
    raw = backend.get_many(["zarr.json"])[0]
    if raw is None:
        raise FormatError(f"{backend.description}: no root zarr.json")
    return json.loads(raw).get("attributes", {}).get(GENERATION_KEY)


def _array_items(path: str, values: np.ndarray) -> list[tuple[str, bytes]]:
    """``zarr.json`` and shard blobs of a 1-D or 2-D little-endian array chunked by CHUNK rows."""
    dtype = values.dtype.newbyteorder("<")
    values = np.ascontiguousarray(values, dtype)
    width = values.shape[1:]
    doc = sharded_doc(
        dense_array_doc(values.shape, (CHUNK, *width), dtype, 0, [], {}), (SHARD_CHUNKS, *[1] * len(width))
    )
    layout = parse_sharding(path, doc)
    assert layout is not None  # sharded_doc made it sharded
    items = [(f"{path}/zarr.json", dump_json(doc))]
    n_chunks = -(-len(values) // CHUNK)
    suffix = "/0" * len(width)
    for shard in range(-(-n_chunks // SHARD_CHUNKS)):
        inner = {}
        for pos in range(min(SHARD_CHUNKS, n_chunks - shard * SHARD_CHUNKS)):
            k = shard * SHARD_CHUNKS + pos
            part = values[k * CHUNK : (k + 1) * CHUNK]
            full = np.zeros((CHUNK, *width), dtype)
            full[: len(part)] = part
            inner[pos] = full.tobytes()
        items.append((f"{path}/c/{shard}{suffix}", encode_shard(layout, inner)))
    return items


def _collect(ds: Dataset, attribute: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Values (uint64), refs (chunk coordinates, row) and positions of every level-0 row, chunk
    by chunk."""
    lv = ds.level(0)
    if attribute not in lv.vertex_attributes:
        raise InputError(
            f"relationship attribute {attribute!r} is not a vertex attribute of {ds!r} "
            f"(vertex attributes: {sorted(lv.vertex_attributes)})"
        )
    chunks = np.asarray(lv.vertices.nonempty, np.int64).reshape(-1, lv.grid.ndim)
    values, refs, positions = [], [], []
    for start in range(0, len(chunks), BUILD_BATCH):
        part = chunks[start : start + BUILD_BATCH]
        cells, _ = fetch_cells(lv, part, [attribute], np.zeros(0, np.int64))
        v = np.asarray(cells.attributes[attribute])
        if v.dtype.kind not in "ui" or (v.ndim > 1 and v.shape[1:] != (1,)):
            raise InputError(
                f"relationship attribute {attribute!r} must hold one integer per row, not {v.dtype}"
            )
        v = v.reshape(-1)
        if v.dtype.kind == "i" and len(v) and int(v.min()) < 0:
            raise InputError(f"relationship attribute {attribute!r} holds negative ids")
        counts = np.diff(cells.offsets)
        rows = np.arange(len(v), dtype=np.int64) - np.repeat(cells.offsets[:-1], counts)
        refs.append(np.column_stack([np.repeat(part, counts, axis=0), rows]))
        values.append(v.astype(np.uint64))
        positions.append(cells.positions)
    width = lv.grid.ndim + 1
    return (
        np.concatenate(values) if values else np.zeros(0, np.uint64),
        np.concatenate(refs) if refs else np.zeros((0, width), np.int64),
        np.concatenate(positions) if positions else np.zeros((0, width - 1), lv.vertices.dtype),
    )


def build_index(
    ds: Dataset, target: Any, attribute: str, storage_options: dict[str, Any] | None = None
) -> None:
    """Write (or replace) the index of ``attribute`` into the member store at ``target``."""
    values, refs, positions = _collect(ds, attribute)
    order = np.argsort(values, kind="stable")
    values, refs, positions = values[order], refs[order], positions[order]
    ids, starts = np.unique(values, return_index=True)
    offsets = np.append(starts, len(values)).astype(np.int64)
    backend = open_backend(target, read_only=False, storage_options=storage_options)
    path = f"{INDEX_GROUP}/{attribute}"
    drop_index(backend, attribute)
    meta = {
        "version": 1,
        "attribute": attribute,
        "level": 0,
        "chunk_length": CHUNK,
        "rows": len(values),
        "ids": len(ids),
        "generation": _generation(backend),
        "positions_dtype": positions.dtype.newbyteorder("<").str,
    }
    items = [(f"{INDEX_GROUP}/zarr.json", dump_json(group_doc({})))]
    items.append((f"{path}/zarr.json", dump_json(group_doc({INDEX_KEY: meta}))))
    items += _array_items(f"{path}/ids", ids)
    items += _array_items(f"{path}/offsets", offsets)
    items += _array_items(f"{path}/refs", refs)
    items += _array_items(f"{path}/positions", positions)
    items += _array_items(f"{path}/fence", ids[::CHUNK])
    backend.set_many(items)


def drop_index(backend: Backend, attribute: str) -> None:
    """Delete the index of ``attribute`` (nothing when there is none)."""
    prefix = f"{INDEX_GROUP}/{attribute}/"
    keys = backend.list_keys(prefix)
    if keys:
        backend.delete_many(keys)


def index_attributes(backend: Backend, attribute: str) -> dict[str, Any] | None:
    """The index group's ``zv:relationshipIndex`` record (None when the member has no index).
    The arrays' documents are read in the same batch, so a ShardReader learns their layout."""
    path = f"{INDEX_GROUP}/{attribute}"
    raw = backend.get_many([f"{path}/zarr.json", *(f"{path}/{a}/zarr.json" for a in ARRAYS)])[0]
    if raw is None:
        return None
    return json.loads(raw)["attributes"][INDEX_KEY]


def _read_chunks(reader: ShardReader, path: str, chunks: np.ndarray, dtype: str, width: int) -> np.ndarray:
    """Inner chunks ``chunks`` (sorted unique) of a CHUNK-row array, end to end."""
    suffix = "/0" if width else ""
    raws = reader.get_many([f"{path}/c/{int(k)}{suffix}" for k in chunks])
    if any(r is None for r in raws):
        raise FormatError(f"{path}: a chunk of the relationship index is missing")
    flat = np.frombuffer(b"".join(bytes(r) for r in raws if r is not None), dtype)
    return flat.reshape(-1, width) if width else flat


def _take(reader: ShardReader, path: str, index: np.ndarray, dtype: str, width: int = 0) -> np.ndarray:
    """Entries ``index`` of a CHUNK-row array, reading only the chunks holding them."""
    need, inverse = np.unique(index // CHUNK, return_inverse=True)
    data = _read_chunks(reader, path, need, dtype, width)
    return data[inverse * CHUNK + index % CHUNK]


def _ranges(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """``concatenate([arange(s, e) for s, e in zip(starts, ends)])`` without a Python loop."""
    lengths = ends - starts
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, np.int64)
    run_starts = np.repeat(starts - np.r_[0, np.cumsum(lengths)[:-1]], lengths)
    return run_starts + np.arange(total, dtype=np.int64)


def _matches(
    reader: ShardReader, path: str, meta: dict[str, Any], ids: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Index rows (into ``refs`` and ``positions``) of the points whose value is one of ``ids``,
    grouped by id in the order of ``ids``, and each row's id."""
    n_ids = int(meta["ids"])
    if n_ids == 0 or len(ids) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.uint64)
    n_fence = -(-n_ids // CHUNK)
    fence = _read_chunks(reader, f"{path}/fence", np.arange(-(-n_fence // CHUNK)), "<u8", 0)[:n_fence]
    block = np.searchsorted(fence, ids, side="right") - 1
    ids = ids[block >= 0]
    if len(ids) == 0:  # every id is below the smallest indexed one
        return np.zeros(0, np.int64), np.zeros(0, np.uint64)
    need = np.unique(block[block >= 0])
    flat = _read_chunks(reader, f"{path}/ids", need, "<u8", 0).copy()
    where = np.repeat(need * CHUNK, CHUNK) + np.tile(np.arange(CHUNK), len(need))
    flat[where >= n_ids] = np.iinfo(np.uint64).max  # the last chunk's padding: keep flat sorted
    at = np.minimum(np.searchsorted(flat, ids), len(flat) - 1)
    found = (flat[at] == ids) & (where[at] < n_ids)
    pos, hits = where[at][found], ids[found]
    bounds = _take(reader, f"{path}/offsets", np.concatenate([pos, pos + 1]), "<i8")
    starts, ends = bounds[: len(pos)], bounds[len(pos) :]
    return _ranges(starts, ends), np.repeat(hits, ends - starts)


def lookup(
    ds: Dataset,
    reader: ShardReader,
    attribute: str,
    ids: np.ndarray,
    attributes: Any = None,
) -> Result:
    """Level-0 rows of ``ds`` whose ``attribute`` is one of ``ids`` (uint64, unique), grouped by id
    in the order given, through the index read by ``reader`` (the member's backend)."""
    meta = index_attributes(reader, attribute)
    if meta is None:
        raise InputError(f"member {ds!r} has no relationship index for {attribute!r} (build_index first)")
    if meta.get("generation") != _generation(reader):
        raise StaleIndexError(
            f"the relationship index of {attribute!r} in {reader.description} is older than the store "
            "(it was written since); rebuild it with Collection.build_index"
        )
    lv = ds.level(0)
    path = f"{INDEX_GROUP}/{attribute}"
    rows, row_ids = _matches(reader, path, meta, ids)
    axes = tuple(a.name for a in lv.root.axes if a.type == "space")
    if attributes is not None and len(attributes) == 0:  # the index alone answers
        positions = _take(reader, f"{path}/positions", rows, meta["positions_dtype"], lv.grid.ndim)
        return Result(positions, {attribute: row_ids}, None, axes, origin=Origin(ds, 0, complete=False))
    refs = _take(reader, f"{path}/refs", rows, "<i8", lv.grid.ndim + 1)
    chunks, inverse = np.unique(refs[:, :-1], axis=0, return_inverse=True)
    names = sorted(lv.vertex_attributes) if attributes is None else list(attributes)
    with_ids = lv.manifests is not None
    frag_idx = np.arange(len(chunks)) if with_ids and lv.fragments is not None else np.zeros(0, np.int64)
    cells, _ = fetch_cells(lv, chunks, names, frag_idx, owners=with_ids)
    rows = cells.offsets[inverse.reshape(-1)] + refs[:, -1]
    owners = row_owners(lv, cells)[rows] if with_ids else None
    object_ids = None if owners is None else lv.object_id_map.to_user(owners)
    return Result(
        cells.positions[rows],
        {n: v[rows] for n, v in cells.attributes.items()},
        object_ids,
        axes,
        origin=Origin(ds, 0, complete=False),
    )
