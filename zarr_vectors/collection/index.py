"""The relationship index of a member (``docs/format-collections.md``): for one integer vertex
attribute of level 0, a covering copy of every row (value, object id, position, the other
vertex attributes) in hash buckets of the value, as Zarr v3 arrays under
``zv_relationships/<attribute>/``.

A lookup reads the buckets of the asked ids and nothing of the member's cells: its cost follows
the answer (and the bucket size, about :data:`BUCKET_ROWS` rows). An edit rewrites only the
buckets of the values its rows had or have (:func:`update_index`). The build streams the member
through spill files holding at most about ``memory_limit`` bytes of rows (:mod:`.spill`).
"""

from __future__ import annotations

import json
import math
import tempfile
from collections.abc import Iterator
from typing import Any

import numpy as np

from zarr_vectors.collection.buckets import (
    Column,
    Rows,
    bucket_items,
    bucket_keys,
    bucket_of,
    canonical_order,
    read_buckets,
)
from zarr_vectors.collection.spill import Partitions
from zarr_vectors.dataset import Dataset
from zarr_vectors.engine import DEFAULT_MEMORY_LIMIT, fetch_cells, row_owners
from zarr_vectors.errors import FormatError, InputError
from zarr_vectors.format.zarr_json import dense_array_doc, group_doc
from zarr_vectors.result import Origin, Result
from zarr_vectors.storage import GENERATION_KEY, Backend, dump_json, open_backend

__all__ = [
    "INDEX_GROUP",
    "StaleIndexError",
    "build_index",
    "drop_index",
    "lookup",
    "index_attributes",
    "index_generation_ok",
    "member_generation",
    "rows_of",
    "update_index",
]

INDEX_GROUP = "zv_relationships"
INDEX_KEY = "zv:relationshipIndex"
VERSION = 2
HASH = "splitmix64-top-bits"
#: Mean rows per bucket the build aims at (buckets = the next power of two of rows / this).
BUCKET_ROWS = 65536
#: Member chunks fetched per batch while building.
BUILD_BATCH = 256


class StaleIndexError(FormatError):
    """The member was written after its relationship index was built (rebuild the index)."""


def member_generation(backend: Backend) -> Any:
    """The member root's ``zarr_vectors_generation`` (renewed by every write of the store)."""
    raw = backend.get_many(["zarr.json"])[0]
    if raw is None:
        raise FormatError(f"{backend.description}: no root zarr.json")
    return json.loads(raw).get("attributes", {}).get(GENERATION_KEY)


def _raw_meta(backend: Backend, attribute: str) -> dict[str, Any] | None:
    raw = backend.get_many([f"{INDEX_GROUP}/{attribute}/zarr.json"])[0]
    return None if raw is None else dict(json.loads(raw)["attributes"][INDEX_KEY])


def index_attributes(backend: Backend, attribute: str) -> dict[str, Any] | None:
    """The index group's ``zv:relationshipIndex`` record (None when the member has no index);
    an index of another version is refused with StaleIndexError."""
    meta = _raw_meta(backend, attribute)
    if meta is not None and meta.get("version") != VERSION:
        raise StaleIndexError(
            f"the relationship index of {attribute!r} in {backend.description} has version "
            f"{meta.get('version')}, this library reads {VERSION}; rebuild it with Collection.build_index"
        )
    return meta


def index_generation_ok(backend: Backend, attribute: str) -> bool:
    """Whether the index of ``attribute`` exists, has this version and matches the member's
    current generation."""
    meta = _raw_meta(backend, attribute)
    return (
        meta is not None
        and meta.get("version") == VERSION
        and meta.get("generation") == member_generation(backend)
    )


def drop_index(backend: Backend, attribute: str) -> None:
    """Delete the index of ``attribute`` (nothing when there is none)."""
    keys = backend.list_keys(f"{INDEX_GROUP}/{attribute}/")
    if keys:
        backend.delete_many(keys)


# -- rows of the member ---------------------------------------------------------------------
def _columns(ds: Dataset, attribute: str) -> tuple[list[Column], str]:
    """The index columns of ``attribute`` in ``ds`` and the attribute's own dtype."""
    lv = ds.level(0)
    if attribute not in lv.vertex_attributes:
        raise InputError(
            f"relationship attribute {attribute!r} is not a vertex attribute of {ds!r} "
            f"(vertex attributes: {sorted(lv.vertex_attributes)})"
        )
    specs = {n: a.doc.get("attributes", {}) for n, a in lv.vertex_attributes.items()}
    own = np.dtype(specs[attribute].get("dtype", "int64"))
    if own.kind not in "ui" or specs[attribute].get("row_shape", []) not in ([], [1]):
        raise InputError(f"relationship attribute {attribute!r} must hold one integer per row, not {own}")
    cols = [Column("values", "<u8", ())]
    if lv.manifests is not None:
        cols.append(Column("object_ids", "<u8", ()))
    cols.append(Column("positions", np.dtype(lv.vertices.dtype).newbyteorder("<").str, (lv.grid.ndim,)))
    for n in sorted(specs):
        if n != attribute:
            dt = np.dtype(specs[n].get("dtype", "float64")).newbyteorder("<").str
            cols.append(Column(f"attr.{n}", dt, tuple(specs[n].get("row_shape", []))))
    return cols, own.newbyteorder("<").str


def rows_of(
    columns: list[Column], attribute: str, positions: Any, attributes: dict[str, Any], object_ids: Any
) -> Rows:
    """Index rows from a batch of member rows (positions, vertex attributes by name, user object
    ids or None), cast to the index's columns; negative relationship values are refused."""
    v = np.asarray(attributes[attribute])
    if v.dtype.kind == "i" and len(v) and int(v.min()) < 0:
        raise InputError(f"relationship attribute {attribute!r} holds negative ids")
    n = len(v)
    out: dict[str, np.ndarray] = {}
    for c in columns:
        if c.name == "values":
            value = v.reshape(n).astype(np.uint64)
        elif c.name == "object_ids":
            value = np.asarray(object_ids, np.uint64).reshape(n)
        elif c.name == "positions":
            value = np.asarray(positions).reshape(n, *c.row_shape)
        else:
            value = np.asarray(attributes[c.name[len("attr.") :]]).reshape(n, *c.row_shape)
        out[c.name] = np.ascontiguousarray(value, c.dtype)
    return Rows(out)


def _batches(ds: Dataset, attribute: str, columns: list[Column]) -> Iterator[Rows]:
    """Index rows of every level-0 row of ``ds``, BUILD_BATCH member chunks at a time."""
    lv = ds.level(0)
    names = sorted(lv.vertex_attributes)
    with_ids = lv.manifests is not None
    chunks = np.asarray(lv.vertices.nonempty, np.int64).reshape(-1, lv.grid.ndim)
    for start in range(0, len(chunks), BUILD_BATCH):
        part = chunks[start : start + BUILD_BATCH]
        frag_idx = np.arange(len(part)) if with_ids and lv.fragments is not None else np.zeros(0, np.int64)
        cells, _ = fetch_cells(lv, part, names, frag_idx, owners=with_ids)
        oids = lv.object_id_map.to_user(row_owners(lv, cells)) if with_ids else None
        yield rows_of(columns, attribute, cells.positions, cells.attributes, oids)


# -- writing buckets ------------------------------------------------------------------------
def bucket_bits(rows: int, bucket_rows: int) -> int:
    """Bits of the bucket number: the next power of two of ``rows / bucket_rows`` buckets."""
    return max(0, math.ceil(math.log2(rows / bucket_rows))) if rows > bucket_rows else 0


def _bucket_groups(rows: Rows, bits: int) -> Iterator[tuple[int, Rows]]:
    """``(bucket, its rows in canonical order)`` of every bucket ``rows`` touch, ascending."""
    buckets = bucket_of(rows.columns["values"], bits)
    order = canonical_order(rows, buckets)
    rows, buckets = rows.take(order), buckets[order]
    firsts = np.flatnonzero(np.r_[True, buckets[1:] != buckets[:-1]]) if len(buckets) else np.zeros(0, int)
    ends = np.r_[firsts[1:], len(buckets)]
    for a, b in zip(firsts.tolist(), ends.tolist(), strict=True):
        yield int(buckets[a]), rows.take(slice(a, b))


def _single_chunk_items(path: str, values: np.ndarray) -> list[tuple[str, bytes]]:
    values = np.ascontiguousarray(values, values.dtype.newbyteorder("<"))
    doc = dense_array_doc(values.shape, (max(len(values), 1),), values.dtype, 0, [], {})
    return [(f"{path}/zarr.json", dump_json(doc)), (f"{path}/c/0", values.tobytes())]


def _finish(
    backend: Backend, attribute: str, meta: dict[str, Any], counts: np.ndarray, generation: Any
) -> None:
    """Write ``counts`` then the index group (its generation last, so an interrupted update
    leaves an index that reads as stale, never a wrong one)."""
    path = f"{INDEX_GROUP}/{attribute}"
    backend.set_many(_single_chunk_items(f"{path}/counts", counts.astype("<i8")))
    meta = {**meta, "rows": int(counts.sum()), "generation": generation}
    backend.set_many(
        [
            (f"{INDEX_GROUP}/zarr.json", dump_json(group_doc({}))),
            (f"{path}/zarr.json", dump_json(group_doc({INDEX_KEY: meta}))),
        ]
    )


def build_index(
    ds: Dataset,
    target: Any,
    attribute: str,
    storage_options: dict[str, Any] | None = None,
    *,
    memory_limit: int | None = DEFAULT_MEMORY_LIMIT,
    bucket_rows: int | None = None,
    bucket_bits_: int | None = None,
) -> None:
    """Write (or replace) the index of ``attribute`` into the member store at ``target``.

    With ``memory_limit`` (bytes) the rows pass through spill files in a temporary folder and
    at most about that many bytes of rows are held at once (a bucket is always held whole);
    ``None`` sorts everything in memory. Both write the same bytes. ``bucket_rows`` is the
    mean bucket size aimed at (default :data:`BUCKET_ROWS`); ``bucket_bits_`` fixes the
    number of buckets instead (``2**bucket_bits_``; an edited index keeps the count it was
    built with, so a rebuild compared with it takes that count).
    """
    bucket_rows = BUCKET_ROWS if bucket_rows is None else bucket_rows
    if bucket_rows < 1:
        raise InputError(f"bucket_rows must be at least 1, got {bucket_rows}")
    columns, value_dtype = _columns(ds, attribute)
    backend = open_backend(target, read_only=False, storage_options=storage_options)
    generation = member_generation(backend)
    drop_index(backend, attribute)
    root = f"{INDEX_GROUP}/{attribute}"
    if memory_limit is None:
        parts = list(_batches(ds, attribute, columns))
        rows = Rows.concat(parts, columns)
        bits = bucket_bits(len(rows), bucket_rows) if bucket_bits_ is None else bucket_bits_
        groups: Iterator[Rows] = iter([rows])
        counts = _write_groups(backend, root, groups, bits)
    else:
        with tempfile.TemporaryDirectory(prefix="zv-relindex-") as folder:
            estimate = ds.vertex_count(0)
            spill = Partitions(folder, columns, estimate, memory_limit)
            for part in _batches(ds, attribute, columns):
                spill.add(part)
            bits = bucket_bits(spill.total, bucket_rows) if bucket_bits_ is None else bucket_bits_
            counts = _write_groups(backend, root, spill.groups(bits), bits)
    meta = {
        "version": VERSION,
        "attribute": attribute,
        "level": 0,
        "hash": HASH,
        "bucket_bits": bits,
        "value_dtype": value_dtype,
        "columns": [c.json() for c in columns],
    }
    _finish(backend, attribute, meta, counts, generation)


def _write_groups(backend: Backend, root: str, groups: Iterator[Rows], bits: int) -> np.ndarray:
    """Write the buckets of each group of rows (groups hold whole buckets); the row count of
    every bucket."""
    counts = np.zeros(1 << bits, np.int64)
    for rows in groups:
        items: list[tuple[str, bytes]] = []
        for b, mine in _bucket_groups(rows, bits):
            counts[b] = len(mine)
            items += bucket_items(f"{root}/{b}", mine)
        if items:
            backend.set_many(items)
            backend.refresh()  # a local backend remembers every folder it made: keep memory flat
    return counts


# -- edits ----------------------------------------------------------------------------------
def update_index(
    backend: Backend,
    attribute: str,
    removed: np.ndarray | None,
    old_values: np.ndarray,
    new_rows: Rows,
    generation: Any,
) -> list[int]:
    """Bring the index of ``attribute`` up to an edit, rewriting only the buckets it touches:
    entries of the objects ``removed`` (user ids; None removes nothing) go, ``new_rows`` come.
    ``old_values`` are the relationship values the removed objects held (their buckets are
    read). The index must match the member before the edit. Returns the rewritten buckets."""
    meta = index_attributes(backend, attribute)
    if meta is None:
        raise InputError(f"{backend.description} has no relationship index for {attribute!r}")
    columns = [Column.parse(c) for c in meta["columns"]]
    bits = int(meta["bucket_bits"])
    root = f"{INDEX_GROUP}/{attribute}"
    counts = _read_counts(backend, root, bits)
    touched = np.unique(
        np.concatenate(
            [bucket_of(np.asarray(old_values, np.uint64), bits), bucket_of(new_rows.columns["values"], bits)]
        )
    )
    current = [r for r in read_buckets(backend, root, touched, columns, counts) if r is not None]
    rows = Rows.concat([*current, new_rows], columns)
    if removed is not None and len(removed) and current:
        n_old = sum(len(r) for r in current)
        keep = np.ones(len(rows), bool)
        keep[:n_old] = ~np.isin(rows.columns["object_ids"][:n_old], np.asarray(removed, np.uint64))
        rows = rows.take(keep)
    items: list[tuple[str, bytes]] = []
    filled = set()
    for b, mine in _bucket_groups(rows, bits):
        filled.add(b)
        counts[b] = len(mine)
        items += bucket_items(f"{root}/{b}", mine)
    emptied = [int(b) for b in touched if int(b) not in filled and counts[int(b)]]
    for b in emptied:
        counts[b] = 0
    if emptied:
        backend.delete_many([k for b in emptied for k in bucket_keys(f"{root}/{b}", columns)])
    if items:
        backend.set_many(items)
    _finish(
        backend,
        attribute,
        {k: v for k, v in meta.items() if k not in ("rows", "generation")},
        counts,
        generation,
    )
    return sorted(filled | set(emptied))


def _read_counts(backend: Backend, root: str, bits: int) -> np.ndarray:
    raw = backend.get_many([f"{root}/counts/c/0"])[0]
    if raw is None:
        raise FormatError(f"{root}/counts: the relationship index has no bucket counts")
    counts = np.frombuffer(bytes(raw), "<i8").astype(np.int64)
    if len(counts) != 1 << bits:
        raise FormatError(f"{root}/counts: {len(counts)} counts for {1 << bits} buckets")
    return counts


def read_counts(backend: Backend, attribute: str) -> np.ndarray:
    """Rows per bucket of the index of ``attribute`` (for validation)."""
    meta = index_attributes(backend, attribute)
    if meta is None:
        raise InputError(f"{backend.description} has no relationship index for {attribute!r}")
    return _read_counts(backend, f"{INDEX_GROUP}/{attribute}", int(meta["bucket_bits"]))


# -- lookups --------------------------------------------------------------------------------
def lookup(
    ds: Dataset,
    reader: Backend,
    attribute: str,
    ids: np.ndarray,
    attributes: list[str] | None = None,
) -> Result:
    """Level-0 rows of ``ds`` whose ``attribute`` is one of ``ids`` (uint64, unique), grouped by id
    in the order given, read from the index alone through ``reader`` (the member's backend).
    ``attributes``: None for every vertex attribute and the object ids, ``[]`` for positions and
    the relationship only, else those attributes and the object ids."""
    meta = index_attributes(reader, attribute)
    if meta is None:
        raise InputError(f"member {ds!r} has no relationship index for {attribute!r} (build_index first)")
    if meta.get("generation") != member_generation(reader):
        raise StaleIndexError(
            f"the relationship index of {attribute!r} in {reader.description} is older than the store "
            "(it was written since); rebuild it with Collection.build_index"
        )
    columns = {c.name: c for c in (Column.parse(x) for x in meta["columns"])}
    names = sorted(n[len("attr.") :] for n in columns if n.startswith("attr."))
    wanted = names if attributes is None else [a for a in attributes if a != attribute]
    unknown = [a for a in wanted if f"attr.{a}" not in columns]
    if unknown:
        raise InputError(f"related: {unknown} are not vertex attributes of {ds!r} (attributes: {names})")
    needed = ["values", "positions"]
    if attributes != [] and "object_ids" in columns:
        needed.append("object_ids")
    needed += [f"attr.{a}" for a in wanted]
    hits = _hits(reader, meta, [columns[n] for n in needed], ids)
    lv = ds.level(0)
    axes = tuple(a.name for a in lv.root.axes if a.type == "space")
    values = hits.columns["values"]
    out: dict[str, np.ndarray] = {}
    if attributes is None or attributes == [] or attribute in attributes:
        out[attribute] = values.astype(meta["value_dtype"])
    out.update({a: hits.columns[f"attr.{a}"] for a in wanted})
    oids = hits.columns.get("object_ids")
    return Result(hits.columns["positions"], out, oids, axes, origin=Origin(ds, 0, complete=False))


def _hits(reader: Backend, meta: dict[str, Any], columns: list[Column], ids: np.ndarray) -> Rows:
    """The entries whose value is one of ``ids``, grouped by id in the order of ``ids``."""
    if len(ids) == 0 or int(meta["rows"]) == 0:
        return Rows.concat([], columns)
    bits = int(meta["bucket_bits"])
    root = f"{INDEX_GROUP}/{meta['attribute']}"
    own = bucket_of(ids, bits)
    buckets = np.unique(own)
    parts = [r for r in read_buckets(reader, root, buckets, columns) if r is not None]
    rows = Rows.concat(parts, columns)
    values = rows.columns["values"]
    # Buckets are each sorted by value, so one stable sort of their concatenation is cheap;
    # the rows of each asked id are then one run, picked in the order of ``ids``.
    order = np.argsort(values, kind="stable")
    sorted_values = values[order]
    starts = np.searchsorted(sorted_values, ids, side="left")
    ends = np.searchsorted(sorted_values, ids, side="right")
    lengths = ends - starts
    total = int(lengths.sum())
    run = np.repeat(starts - np.r_[0, np.cumsum(lengths)[:-1]], lengths) + np.arange(total, dtype=np.int64)
    return rows.take(order[run])
