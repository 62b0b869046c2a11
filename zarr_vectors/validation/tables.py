"""The non-spatial arrays of a level: object index (manifests, object ids), object
attributes, groups and group attributes. Level-2 checks of their metadata and level-3
checks of their contents against the fragments of the level."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from zarr_vectors.engine import TableArray
from zarr_vectors.errors import DECODE_FAILURES, ZarrVectorsError, failure_reason
from zarr_vectors.format.groups import check_object_index, parse_object_index
from zarr_vectors.validation._report import Collector, short
from zarr_vectors.validation._store import StoreView, batched
from zarr_vectors.validation.arrays import unknown_codecs
from zarr_vectors.validation.manifests import check_refs, walk_manifests
from zarr_vectors.validation.metadata import RootInfo, report

__all__ = ["TableModel", "check_table_meta", "check_table_data"]


@dataclass(eq=False)
class TableModel:
    """Readable non-spatial arrays of one level (None / empty where absent or unusable)."""

    layout: str = "vlen_manifests_v1"
    num_objects: int | None = None
    num_present: int | None = None
    manifests: TableArray | None = None
    object_ids: TableArray | None = None
    object_attrs: list[TableArray] = field(default_factory=list)
    groups: TableArray | None = None
    group_ranges: dict[str, Any] = field(default_factory=dict)
    group_attrs: list[TableArray] = field(default_factory=list)


def _table(view: StoreView, path: str, out: Collector) -> TableArray | None:
    """The table at ``path`` as the reader parses it (None when absent, or when a finding
    blocks reading it: a reader would refuse it)."""
    if not view.is_array(path):
        return None
    arr, findings = TableArray.parse(path, view.docs[path])
    report(findings, out)
    return None if any(f.blocks_reading for f in findings) else arr


def _object_index(view: StoreView, p: str, root: RootInfo, t: TableModel, out: Collector) -> None:
    path = f"{p}/object_index"
    index, findings = parse_object_index(path, view.attrs(path), root.sid_ndim)
    report(findings, out)
    if index is None:
        return
    t.layout, t.num_objects, t.num_present = index.layout, index.num_objects, index.num_present
    t.manifests = _table(view, f"{path}/manifests", out)
    if index.layout == "vlen_manifests_v2":
        t.object_ids = _table(view, f"{path}/object_ids", out)
    found = check_object_index(
        path,
        index,
        None if t.manifests is None else t.manifests.parsed,
        None if t.object_ids is None else t.object_ids.parsed,
    )
    report(found, out)
    ids = t.object_ids
    if ids is not None and (
        ids.parsed is None or ids.parsed.dtype is None or any(f.path == ids.path for f in found)
    ):
        t.object_ids = None


def _named_tables(view: StoreView, family: str, out: Collector) -> list[TableArray]:
    found = []
    for name in view.children(family):
        arr = _table(view, f"{family}/{name}", out)
        if arr is not None:
            found.append(arr)
    return found


def check_table_meta(view: StoreView, lv: int, root: RootInfo, out: Collector) -> TableModel:
    p = str(lv)
    t = TableModel()
    if view.is_group(f"{p}/object_index"):
        _object_index(view, p, root, t, out)
    t.object_attrs = _named_tables(view, f"{p}/object_attributes", out)
    t.group_attrs = _named_tables(view, f"{p}/group_attributes", out)
    t.groups = _table(view, f"{p}/groups", out)
    if t.groups is not None and t.groups.parsed is not None:
        t.group_ranges = t.groups.parsed.group_ranges
    return t


# ------------------------------------------------------------------ level 3
#
# Only stored chunks are read, one batch at a time, and nothing is sized from a shape:
# a table claiming 2**40 rows costs what its stored chunks cost.


def _readable(arr: TableArray, out: Collector) -> bool:
    assert arr.parsed is not None
    if unknown := unknown_codecs(list(arr.parsed.codecs)):
        out.error(
            "metadata.codecs",
            arr.path,
            f"codec {short(unknown[0])} is not one zarr knows, so no reader can decode these chunks",
        )
        return False
    try:
        arr.pipeline  # noqa: B018  (built on first use; raises for codec lists it cannot decode)
    except (ZarrVectorsError, ValueError, TypeError) as exc:
        out.warn(
            "metadata.codecs",
            arr.path,
            f"chunks are not checked: this validator cannot decode its codecs ({exc})",
        )
        return False
    return True


def _grid(arr: TableArray) -> list[int]:
    return [-(-s // c) for s, c in zip(arr.shape, arr.chunk_shape)]


def _stored(view: StoreView, arr: TableArray, out: Collector) -> list[tuple[int, ...]]:
    """Chunk indices of the stored chunks, in order; keys outside the chunk grid are reported."""
    grid = _grid(arr)
    found = []
    for key in view.cells.get(arr.path, []):
        try:
            idx = tuple(int(p) for p in key.split("/")[1:])
        except ValueError:
            idx = ()
        if len(idx) != len(grid) or not all(0 <= i < g for i, g in zip(idx, grid)):
            out.error(
                "cells.table-chunks",
                f"{arr.path}/{key}",
                f"stored key is not a chunk of the array's {grid} chunk grid (shape {list(arr.shape)})",
            )
            continue
        found.append(idx)
    return sorted(found)


def _chunks(
    view: StoreView, arr: TableArray, idx: list[tuple[int, ...]], out: Collector
) -> Iterator[tuple[tuple[int, ...], Any]]:
    """``(chunk index, bytes)`` of the stored chunks ``idx``; one that cannot be read is reported, not yielded."""
    for batch in batched(idx):
        keys = [f"{arr.path}/c/" + "/".join(map(str, i)) for i in batch]
        raws, failed = view.read_each(keys)
        for key, (rule, message) in failed.items():
            out.error(rule, key, message)
        yield from ((i, raw) for i, key, raw in zip(batch, keys, raws) if key not in failed)


def _complete(view: StoreView, arr: TableArray, what: str, out: Collector) -> list[tuple[int, ...]] | None:
    """Stored chunks of a table every entry of which must be stored (None when some are missing)."""
    stored = _stored(view, arr, out)
    total = _grid(arr)[0]
    if len(stored) < total:
        have = {i[0] for i in stored}
        first = next(c for c in range(total) if c not in have)
        out.error(
            "cells.table-chunks",
            f"{arr.path}/c/{first}",
            f"{total - len(stored)} of the {total} chunks are "
            f"missing (the first is c/{first}); every {what} must be stored",
        )
        return None
    return stored


def _vlen_rows(
    view: StoreView, arr: TableArray, idx: list[tuple[int, ...]], out: Collector
) -> dict[int, list[memoryview]]:
    """Elements of the given stored chunks of a 1-D vlen table (chunks that do not decode are reported)."""
    rows = {}
    for (c,), raw in _chunks(view, arr, idx, out):
        try:
            rows[c] = arr.vlen_items(raw, c)
        except DECODE_FAILURES as exc:
            out.error("cells.decode", f"{arr.path}/c/{c}", failure_reason(exc))
    return rows


def _dense_chunks(
    view: StoreView, arr: TableArray, idx: list[tuple[int, ...]], out: Collector
) -> dict[int, np.ndarray]:
    """Values of the given stored chunks of a dense table; each must decode to a whole chunk."""
    if arr.doc.get("data_type") == "string":
        for c, items in _vlen_rows(view, arr, idx, out).items():
            try:
                [bytes(v).decode("utf-8") for v in items]
            except UnicodeDecodeError as exc:
                out.error("cells.decode", f"{arr.path}/c/{c}", f"an element is not UTF-8 ({exc.reason})")
        return {}
    dtype = arr.dense_dtype
    chunk = list(arr.chunk_shape)
    want = int(np.prod(chunk, dtype=object)) * dtype.itemsize
    values = {}
    for i, raw in _chunks(view, arr, idx, out):
        key = f"{arr.path}/c/" + "/".join(map(str, i))
        try:
            data = arr.pipeline.decode(raw)
        except DECODE_FAILURES as exc:
            out.error("cells.decode", key, failure_reason(exc))
            continue
        if len(data) != want:
            out.error(
                "cells.decode",
                key,
                f"chunk decodes to {len(data)} bytes; a chunk of {chunk} {dtype.name} values is {want}",
            )
            continue
        values[i[0]] = np.frombuffer(data, dtype).reshape(chunk)
    return values


def _manifests(
    t: TableModel,
    view: StoreView,
    nd: int,
    frag_counts: dict[tuple[int, ...], int] | None,
    ids: np.ndarray | None,
    out: Collector,
) -> None:
    arr = t.manifests
    assert arr is not None
    stored = _complete(view, arr, "object's manifest (4 zero bytes when absent)", out)
    rows = _vlen_rows(view, arr, stored if stored is not None else _stored(view, arr, out), out)
    row_of = [c * arr.chunk + k for c, items in sorted(rows.items()) for k in range(len(items))]
    items = [it for _, chunk_items in sorted(rows.items()) for it in chunk_items]
    present = sum(1 for it in items if len(it) > 4 or (len(it) >= 4 and bytes(it[:4]) != b"\0\0\0\0"))
    complete = stored is not None and len(rows) == len(stored)
    if complete and t.num_present is not None and present != t.num_present:
        out.error(
            "consistency.num-present",
            arr.path,
            f"{present} manifests are non-empty but num_present is {t.num_present}",
        )

    def where(k: int) -> tuple[str, int]:
        r = row_of[k]
        return f"{arr.path}[{r}]", int(ids[r]) if ids is not None else r

    blocks, bad = walk_manifests([it if len(it) else memoryview(b"\0\0\0\0") for it in items], nd)
    for k, why in sorted(bad.items()):
        path, oid = where(k)
        out.error("consistency.manifests", path, f"manifest of object {oid} {why}")
    if frag_counts is None:
        if len(blocks.mode):
            out.error(
                "consistency.manifest-refs",
                arr.path,
                "manifests name fragments but the level has no readable vertex_fragments array",
            )
        return
    for k, why in check_refs(blocks, frag_counts):
        path, oid = where(k)
        out.error("consistency.manifest-refs", path, f"object {oid} {why}")


def _id_space(t: TableModel, view: StoreView, out: Collector) -> tuple[np.ndarray | None, int] | None:
    """(object id of each manifest row, or None when the row is the id; size of the id space).

    A chunk of object_ids that is not stored reads as the fill value; as ids increase
    strictly, that can hold for one row at most (the reference writes ``[0]`` that way)."""
    assert t.manifests is not None
    if t.object_ids is None:
        return None, t.manifests.length
    arr = t.object_ids
    if not _readable(arr, out):
        return None
    stored = _stored(view, arr, out)
    have = {i[0] for i in stored}
    rows = {c: min(arr.chunk, arr.length - c * arr.chunk) for c in have}
    if arr.length - sum(rows.values()) > 1:
        first = next(c for c in range(_grid(arr)[0]) if c not in have)
        out.error(
            "cells.table-chunks",
            f"{arr.path}/c/{first}",
            f"{arr.length - sum(rows.values())} object ids are "
            f"in chunks that are not stored (the first is c/{first}); they read as the fill value, so the ids "
            "cannot increase",
        )
        return None
    chunks = _dense_chunks(view, arr, stored, out)
    fill = arr.doc.get("fill_value", 0)
    if len(chunks) != len(stored) or not isinstance(fill, int):
        return None
    ids = np.full(arr.length, fill, np.int64)
    for c, values in chunks.items():
        ids[c * arr.chunk : c * arr.chunk + rows[c]] = values[: rows[c]]
    if len(ids) and (ids[0] < 0 or np.any(np.diff(ids) <= 0)):
        out.error("consistency.object-ids", arr.path, "object ids must be >= 0 and strictly increasing")
        return None
    return ids, int(ids[-1]) + 1 if len(ids) else 0


def _groups(t: TableModel, view: StoreView, space: int | None, out: Collector) -> None:
    arr = t.groups
    assert arr is not None
    for c, items in sorted(_vlen_rows(view, arr, _stored(view, arr, out), out).items()):
        for k, item in enumerate(items):
            g = c * arr.chunk + k
            if len(item) % 8:
                out.error(
                    "consistency.groups",
                    f"{arr.path}[{g}]",
                    f"group {g} is {len(item)} bytes, not a list of int64 ids",
                )
                continue
            members = np.frombuffer(item, "<i8")
            if space is not None and len(members) and (members.min() < 0 or members.max() >= space):
                bad = members[(members < 0) | (members >= space)]
                out.error(
                    "consistency.groups",
                    f"{arr.path}[{g}]",
                    f"group {g} names object {int(bad[0])}, outside the object ids 0..{space - 1}",
                )
    for gid in t.group_ranges:
        if not gid.isdigit() or int(gid) >= arr.length:
            out.error(
                "consistency.groups",
                arr.path,
                f"group_ranges names group {short(gid)}, which is not a row of groups",
            )


def check_table_data(
    t: TableModel, view: StoreView, nd: int, frag_counts: dict[tuple[int, ...], int] | None, out: Collector
) -> int | None:
    """Level 3 for the tables; returns the size of the object id space (None when unknown)."""
    space = None
    if t.manifests is not None and _readable(t.manifests, out):
        found = _id_space(t, view, out)
        if found is not None:
            ids, space = found
            _manifests(t, view, nd, frag_counts, ids, out)
    for arr in t.object_attrs:
        if space is not None and arr.length != space:
            out.error(
                "consistency.object-attributes",
                arr.path,
                f"has {arr.length} rows but the object ids are 0..{space - 1} ({space} rows expected)",
            )
        if _readable(arr, out):
            _dense_chunks(view, arr, _stored(view, arr, out), out)
    if t.groups is not None:
        if _readable(t.groups, out):
            _groups(t, view, space, out)
        for arr in t.group_attrs:
            if arr.length != t.groups.length:
                out.error(
                    "consistency.group-attributes",
                    arr.path,
                    f"has {arr.length} rows but there are {t.groups.length} groups",
                )
            if _readable(arr, out):
                _dense_chunks(view, arr, _stored(view, arr, out), out)
    return space
