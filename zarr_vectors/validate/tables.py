"""The non-spatial arrays of a level: object index (manifests, object ids), object
attributes, groups and group attributes. Level-2 checks of their metadata and level-3
checks of their contents against the fragments of the level."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._arrays import TableArray
from ..errors import DecodeError, FormatError
from ..format.manifests import decode_manifest, decode_manifests_batch
from ._report import Collector
from ._store import StoreView, batched
from .metadata import RootInfo

__all__ = ["TableModel", "check_table_meta", "check_table_data"]

LAYOUTS = ("vlen_manifests_v1", "vlen_manifests_v2")


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


def _count(attrs: dict[str, Any], key: str, path: str, out: Collector, rule: str) -> int | None:
    v = attrs.get(key)
    if not isinstance(v, int) or isinstance(v, bool) or v < 0:
        out.error(rule, path, f"{key} must be an integer >= 0, got {v!r}")
        return None
    return v


def _one_d(view: StoreView, path: str, vlen: bool, rule: str, out: Collector) -> TableArray | None:
    if not view.is_array(path):
        return None
    doc = view.docs[path]
    shape, grid = doc.get("shape"), (doc.get("chunk_grid") or {}).get("configuration", {}).get("chunk_shape")
    dims = (1,) if vlen else (1, 2)
    if not isinstance(shape, list) or len(shape) not in dims or not isinstance(grid, list) or len(grid) != len(shape):
        out.error(rule, path, f"shape {shape!r} / chunks {grid!r} are not a {'1-D' if vlen else '1-D or 2-D'} table")
        return None
    if not all(isinstance(g, int) and not isinstance(g, bool) and g > 0 for g in grid):
        out.error(rule, path, f"chunks {grid!r} must be positive integers")
        return None
    if vlen != (doc.get("data_type") in ("variable_length_bytes", "bytes")):
        out.error(rule, path, f"data_type {doc.get('data_type')!r} is {'not ' * vlen}variable-length bytes")
        return None
    if not vlen and doc.get("data_type") == "string":  # names, labels (1-D, vlen-utf8)
        if len(shape) != 1:
            out.error(rule, path, f"a string table must be 1-D, got shape {shape!r}")
            return None
    elif not vlen:
        try:
            if np.dtype(doc.get("data_type")).kind not in "biuf":
                raise TypeError
        except TypeError:
            out.error(rule, path, f"data_type {doc.get('data_type')!r} is not a numeric type")
            return None
    return TableArray(path, doc)


def _object_index(view: StoreView, p: str, root: RootInfo, t: TableModel, out: Collector) -> None:
    path = f"{p}/object_index"
    a = view.attrs(path)
    rule = "metadata.object-index"
    if a.get("zv_array") != "object_index":
        out.error("metadata.zv-array", path, f"zv_array is {a.get('zv_array')!r}, expected 'object_index'")
    layout = a.get("layout", "vlen_manifests_v1")
    if layout not in LAYOUTS:
        out.error(rule, path, f"layout {layout!r} is unknown ({', '.join(LAYOUTS)}); its manifests cannot be read")
        return
    t.layout = layout
    t.num_objects = _count(a, "num_objects", path, out, rule)
    t.num_present = _count(a, "num_present", path, out, rule)
    if t.num_objects is not None and t.num_present is not None and t.num_present > t.num_objects:
        out.error(rule, path, f"num_present {t.num_present} exceeds num_objects {t.num_objects}")
    if a.get("sid_ndim", root.sid_ndim) != root.sid_ndim:
        out.error(rule, path, f"sid_ndim is {a.get('sid_ndim')!r} but the store has {root.sid_ndim} space axes")
    t.manifests = _one_d(view, f"{path}/manifests", True, rule, out)
    if t.manifests is None:
        out.error(rule, path, "object_index has no usable manifests array")
        return
    if t.num_objects is not None and t.manifests.length != t.num_objects:
        out.error(rule, t.manifests.path, f"has {t.manifests.length} rows but num_objects is {t.num_objects}")
    if layout == "vlen_manifests_v2":
        t.object_ids = _one_d(view, f"{path}/object_ids", False, rule, out)
        if t.object_ids is None:
            out.error(rule, path, "layout vlen_manifests_v2 needs an integer object_ids array beside manifests")
        elif np.dtype(t.object_ids.doc.get("data_type", "f8")).kind not in "iu" or t.object_ids.length != t.manifests.length:
            out.error(rule, t.object_ids.path, "object_ids must be integers with one row per manifest row")
            t.object_ids = None


def _named_tables(view: StoreView, family: str, zv: str, rule: str, out: Collector) -> list[TableArray]:
    found = []
    for name in view.children(family):
        path = f"{family}/{name}"
        arr = _one_d(view, path, False, rule, out)
        if arr is None:
            continue
        a = arr.attrs
        if a.get("zv_array") != zv:
            out.error("metadata.zv-array", path, f"zv_array is {a.get('zv_array')!r}, expected {zv!r}")
        if a.get("name", name) != name:
            out.error(rule, path, f"name is {a.get('name')!r} but the array is {name!r}")
        if "dtype" in a and a["dtype"] != arr.doc.get("data_type"):
            out.error(rule, path, f"dtype attribute {a['dtype']!r} differs from data_type {arr.doc.get('data_type')!r}")
        found.append(arr)
    return found


def check_table_meta(view: StoreView, lv: int, root: RootInfo, out: Collector) -> TableModel:
    p = str(lv)
    t = TableModel()
    if view.is_group(f"{p}/object_index"):
        _object_index(view, p, root, t, out)
    t.object_attrs = _named_tables(view, f"{p}/object_attributes", "object_attribute", "metadata.tables", out)
    t.group_attrs = _named_tables(view, f"{p}/group_attributes", "groupings_attribute", "metadata.tables", out)
    t.groups = _one_d(view, f"{p}/groups", True, "metadata.tables", out)
    if t.groups is not None:
        a = t.groups.attrs
        if a.get("zv_array") != "groups":
            out.error("metadata.zv-array", t.groups.path, f"zv_array is {a.get('zv_array')!r}, expected 'groups'")
        if a.get("num_groups", t.groups.length) != t.groups.length:
            out.error("metadata.tables", t.groups.path, f"num_groups is {a.get('num_groups')!r} but the array has "
                      f"{t.groups.length} rows")  # fmt: skip
        ranges = a.get("group_ranges", {})
        if not isinstance(ranges, dict) or not all(
            isinstance(v, list) and len(v) == 2 and all(isinstance(x, int) for x in v) and 0 <= v[0] <= v[1]
            for v in ranges.values()
        ):
            out.error("metadata.tables", t.groups.path, f"group_ranges must map group ids to [start, stop], got {ranges!r}")
        else:
            t.group_ranges = ranges
    return t


# ------------------------------------------------------------------ level 3


def _vlen_rows(arr: TableArray, backend: Any, out: Collector) -> list[memoryview] | None:
    """Every element of a 1-D vlen table, or None when a chunk cannot be decoded."""
    n_chunks = -(-arr.length // arr.chunk) if arr.length else 0
    rows: list[memoryview] = []
    ok = True
    for chunks in batched(list(range(n_chunks))):
        for c, raw in zip(chunks, backend.get_many(arr.chunk_keys(chunks))):
            try:
                rows += arr.vlen_items(raw, c)
            except FormatError as exc:
                out.error("cells.decode", f"{arr.path}/c/{c}", str(exc))
                ok = False
    return rows if ok else None


def _dense(arr: TableArray, backend: Any, out: Collector) -> np.ndarray | None:
    n_chunks = -(-arr.length // arr.chunk) if arr.length else 0
    try:
        return arr.dense(backend.get_many(arr.chunk_keys(list(range(n_chunks)))))
    except (FormatError, ValueError, TypeError, KeyError) as exc:
        out.error("cells.decode", arr.path, f"cannot read the table: {exc}")
        return None


def _manifests(t: TableModel, backend: Any, nd: int, frag_counts: dict[tuple[int, ...], int] | None,
               ids: np.ndarray, out: Collector) -> None:  # fmt: skip
    arr = t.manifests
    assert arr is not None
    items = _vlen_rows(arr, backend, out)
    if items is None:
        return
    present = sum(1 for it in items if len(it) > 4 or (len(it) >= 4 and bytes(it[:4]) != b"\0\0\0\0"))
    if t.num_present is not None and present != t.num_present:
        out.error("consistency.num-present", arr.path, f"{present} manifests are non-empty but num_present is {t.num_present}")
    padded = [it if len(it) else memoryview(b"\0\0\0\0") for it in items]
    try:
        row, chunk, frag = decode_manifests_batch(padded, nd)
    except DecodeError:
        for r, it in enumerate(padded):
            try:
                decode_manifest(it, nd)
            except DecodeError as exc:
                out.error("consistency.manifests", f"{arr.path}[{r}]", f"manifest of object {int(ids[r])}: {exc}")
        return
    if frag_counts is None:
        if len(frag):
            out.error("consistency.manifest-refs", arr.path, "manifests name fragments but the level has no readable "
                      "vertex_fragments array")  # fmt: skip
        return
    f_of = np.array([frag_counts.get(tuple(c), -1) for c in chunk.tolist()], np.int64) if len(chunk) else np.zeros(0, np.int64)
    for i in np.flatnonzero((f_of < 0) | (frag >= f_of))[:50].tolist():
        c = ".".join(map(str, chunk[i].tolist()))
        what = f"chunk {c}, which has no vertex_fragments cell" if f_of[i] < 0 else \
            f"fragment {int(frag[i])} of chunk {c}, which has {int(f_of[i])} fragments"
        out.error("consistency.manifest-refs", f"{arr.path}[{int(row[i])}]", f"object {int(ids[row[i]])} names {what}")


def _id_space(t: TableModel, backend: Any, out: Collector) -> tuple[np.ndarray, int] | None:
    """(object id of each manifest row, size of the id space)."""
    n = t.manifests.length if t.manifests is not None else 0
    if t.object_ids is None:
        return np.arange(n, dtype=np.int64), n
    ids = _dense(t.object_ids, backend, out)
    if ids is None:
        return None
    ids = ids.astype(np.int64)
    if len(ids) and (ids[0] < 0 or np.any(np.diff(ids) <= 0)):
        out.error("consistency.object-ids", t.object_ids.path, "object ids must be >= 0 and strictly increasing")
        return None
    return ids, int(ids[-1]) + 1 if len(ids) else 0


def _groups(t: TableModel, backend: Any, space: int | None, out: Collector) -> None:
    arr = t.groups
    assert arr is not None
    rows = _vlen_rows(arr, backend, out)
    if rows is None:
        return
    for g, item in enumerate(rows):
        if len(item) % 8:
            out.error("consistency.groups", f"{arr.path}[{g}]", f"group {g} is {len(item)} bytes, not a list of int64 ids")
            continue
        members = np.frombuffer(item, "<i8")
        if space is not None and len(members) and (members.min() < 0 or members.max() >= space):
            bad = members[(members < 0) | (members >= space)]
            out.error("consistency.groups", f"{arr.path}[{g}]", f"group {g} names object {int(bad[0])}, outside the "
                      f"object ids 0..{space - 1}")  # fmt: skip
    for gid in t.group_ranges:
        if not gid.isdigit() or int(gid) >= arr.length:
            out.error("consistency.groups", arr.path, f"group_ranges names group {gid!r}, which is not a row of groups")


def check_table_data(t: TableModel, backend: Any, nd: int, frag_counts: dict[tuple[int, ...], int] | None,
                     out: Collector) -> int | None:  # fmt: skip
    """Level 3 for the tables; returns the size of the object id space (None when unknown)."""
    space = None
    if t.manifests is not None:
        found = _id_space(t, backend, out)
        if found is not None:
            ids, space = found
            _manifests(t, backend, nd, frag_counts, ids, out)
    for arr in t.object_attrs:
        if space is not None and arr.length != space:
            out.error("consistency.object-attributes", arr.path, f"has {arr.length} rows but the object ids are "
                      f"0..{space - 1} ({space} rows expected)")  # fmt: skip
        _dense(arr, backend, out)
    if t.groups is not None:
        _groups(t, backend, space, out)
        for arr in t.group_attrs:
            if arr.length != t.groups.length:
                out.error("consistency.group-attributes", arr.path, f"has {arr.length} rows but there are "
                          f"{t.groups.length} groups")  # fmt: skip
            _dense(arr, backend, out)
    return space
