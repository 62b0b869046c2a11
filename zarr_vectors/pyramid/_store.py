"""Store-level I/O of a pyramid build: raw ``zarr.json`` documents, copies, row counts."""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from zarr_vectors.engine import Level, TableArray
from zarr_vectors.engine import compression_of as compression_of_codecs
from zarr_vectors.errors import FormatError
from zarr_vectors.format.fragments import decode_fragments, range_tables
from zarr_vectors.format.shards import inner_codecs, parse_sharding
from zarr_vectors.storage import Backend, dump_json

__all__ = [
    "checksums_of",
    "compression_of",
    "copy_tables",
    "read_doc",
    "rows_per_chunk",
    "shards_of",
    "write_docs",
]


def read_doc(backend: Backend, key: str) -> dict[str, Any] | None:
    raw = backend.get_many([key])[0]
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise FormatError(f"{backend.description}/{key} is not valid JSON ({exc})") from exc


def write_docs(backend: Backend, docs: dict[str, dict[str, Any]]) -> None:
    backend.set_many([(key, dump_json(doc)) for key, doc in docs.items()])


def compression_of(level: Level) -> tuple[str, int | None]:
    """The ``compression=`` name and level a writer would give to reproduce the level's
    ``vertices`` compressor (``"none"`` when it has none); see :func:`compression_of_codecs`."""
    return compression_of_codecs(inner_codecs(level.vertices.doc) or [])


def checksums_of(level: Level) -> bool:
    """Whether the level's ``vertices`` carry Zarr's ``crc32c`` codec (the writer's ``checksums=True``)."""
    return any(c.get("name") == "crc32c" for c in inner_codecs(level.vertices.doc) or [])


def shards_of(level: Level) -> str | None:
    """The ``shards`` a pyramid level is written with: ``"auto"`` (sized for its own grid) when
    level 0's ``vertices`` are sharded, None when they are one object per cell: a pyramid keeps
    the layout of the store it is built on (``zarr_vectors.reshard`` converts a store)."""
    return "auto" if parse_sharding(level.vertices.path, level.vertices.doc) is not None else None


def _table_keys(arr: TableArray) -> list[str]:
    n_chunks = -(-arr.length // arr.chunk) if arr.length else 0
    return [f"{arr.path}/zarr.json", *arr.chunk_keys(range(n_chunks))]


def copy_tables(backend: Backend, src: Level, dst_index: int) -> list[str]:
    """Copy object attributes, groups and group attributes of ``src`` verbatim to level
    ``dst_index`` (object ids are kept, so the tables mean the same there). Returns the
    families copied, for ``arrays_present``; the container groups are included."""
    prefix = f"{src.index}/"
    keys: list[str] = []
    present = []
    for family, arrays in (
        ("object_attributes", src.object_attributes),
        ("group_attributes", src.group_attributes),
    ):
        if arrays:
            keys.append(f"{prefix}{family}/zarr.json")
            present.append(family)
            for arr in arrays.values():
                keys += _table_keys(arr)
    if src.groups is not None:
        keys += _table_keys(src.groups)
        present.append("groups")
    for start in range(0, len(keys), 1024):
        part = keys[start : start + 1024]
        items = [
            (f"{dst_index}/{k[len(prefix) :]}", raw)
            for k, raw in zip(part, backend.get_many(part))
            if raw is not None
        ]
        backend.set_many(items)
    return sorted(present, key=("object_attributes", "groups", "group_attributes").index)


def rows_per_chunk(
    level: Level, batch: int = 4096, chunks: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Vertex rows of every listed chunk (or of ``chunks`` (K, D), listed ones), from the
    fragment indices alone (no vertex data).

    Returns ``(chunks (K, D), rows (K,))``. A level without ``vertex_fragments`` gets the
    level's total vertex count for every chunk (an upper bound).
    """
    chunks = level.vertices.nonempty if chunks is None else chunks
    if level.fragments is None:
        return chunks, np.full(len(chunks), max(level.meta.vertex_count, 1), np.int64)
    out = np.zeros(len(chunks), np.int64)
    for start in range(0, len(chunks), batch):
        part = chunks[start : start + batch]
        raws = level.backend.get_many(level.fragments.keys(part))
        payloads: list[bytes | memoryview] = [level.fragments.payload(raw, c) for raw, c in zip(raws, part)]
        tables = range_tables(payloads)
        if tables is not None:
            out[start : start + len(part)] = [int((t[:, 0] + t[:, 1]).max()) if len(t) else 0 for t in tables]
            continue
        for i, payload in enumerate(payloads):
            index = decode_fragments(payload)
            ends = [0]
            if len(index.ranges):
                ends.append(int((index.ranges[:, 0] + index.ranges[:, 1]).max()))
            if len(index.explicit_indices):
                ends.append(int(index.explicit_indices.max()) + 1)
            out[start + i] = max(ends)
    return chunks, out
