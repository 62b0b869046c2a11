"""Validation of a collection (``docs/format-collections.md``): its RFC-8 node, each member as a
store of its own (findings prefixed by the member's name), and each relationship index.

An independent reading of the format: the collection node is parsed here from its JSON and the
index checked against the layout the document fixes (hash, bucket arrays, counts), without the
writer's code.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import numpy as np

from zarr_vectors.errors import StoreNotFoundError
from zarr_vectors.storage import Backend, open_backend
from zarr_vectors.validation._report import Collector, Report

__all__ = ["is_collection_root", "validate_collection"]

_NAME = re.compile(r"[a-zA-Z0-9_.-]+")
_INDEX = "zv_relationships"


def is_collection_root(doc: Any) -> bool:
    """Whether a root document holds an RFC-8 collection node with ``zv:idSpaces``."""
    ome = doc.get("attributes", {}).get("ome") if isinstance(doc, dict) else None
    return (
        isinstance(ome, dict)
        and ome.get("type") == "collection"
        and "zv:idSpaces" in (ome.get("attributes") or {})
    )


def _members(doc: dict[str, Any], out: Collector) -> list[tuple[str, dict[str, str]]]:
    """``(name, relationships)`` of every well-formed member node; problems for the others."""
    ome = doc["attributes"]["ome"]
    spaces = ome["attributes"].get("zv:idSpaces")
    if not isinstance(spaces, dict):
        out.error("collection.node", "", "zv:idSpaces must be an object")
        spaces = {}
    members = []
    for node in ome.get("nodes") or []:
        if not isinstance(node, dict) or node.get("type") != "zv:vectors":
            continue
        name = node.get("name")
        if not isinstance(name, str) or not _NAME.fullmatch(name) or name in (".", ".."):
            out.error("collection.node", "", f"member name {name!r} must match [a-zA-Z0-9-_.]+")
            continue
        if node.get("path") != {"type": "zarr", "path": f"./{name}"}:
            out.error(
                "collection.node",
                "",
                f"member {name!r} must have path {{'type': 'zarr', 'path': './{name}'}}",
            )
            continue
        attrs = node.get("attributes") or {}
        rel = attrs.get("zv:relationships") or {}
        if not isinstance(rel, dict) or not all(isinstance(v, str) for v in rel.values()):
            out.error("collection.node", name, "zv:relationships must map attribute names to id spaces")
            rel = {}
        named = [s for s in [attrs.get("zv:idSpace"), *rel.values()] if s is not None]
        unknown = sorted({s for s in named if s not in spaces})
        if unknown:
            out.error("collection.node", name, f"names id space(s) {unknown} the collection does not list")
        members.append((name, dict(rel)))
    return members


def _mix(values: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser (the index's hash), wrapping uint64 arithmetic."""
    z = values.astype(np.uint64)
    for shift, mult in ((30, 0xBF58476D1CE4E5B9), (27, 0x94D049BB133111EB)):
        z = (z ^ (z >> np.uint64(shift))) * np.uint64(mult)
    return z ^ (z >> np.uint64(31))


def _read(backend: Backend, key: str) -> bytes | None:
    raw = backend.get_many([key])[0]
    return None if raw is None else bytes(raw)


def _check_index(backend: Backend, name: str, attribute: str, out: Collector) -> None:
    """Counts, bucket columns, order and hash of the index of ``attribute`` in member ``name``."""
    path = f"{_INDEX}/{attribute}"
    where = f"{name}/{path}"
    raw = _read(backend, f"{path}/zarr.json")
    if raw is None:
        out.warn(
            "collection.index-missing",
            f"{name}",
            f"relationship {attribute!r} has no index (related() refuses it)",
        )
        return
    meta = json.loads(raw).get("attributes", {}).get("zv:relationshipIndex") or {}
    root = json.loads(_read(backend, "zarr.json") or b"{}").get("attributes", {})
    if meta.get("generation") != root.get("zarr_vectors_generation"):
        out.warn(
            "collection.index-stale",
            where,
            "the index is older than the member (rebuild it: collection reindex)",
        )
        return
    bits = int(meta.get("bucket_bits", -1))
    columns = meta.get("columns") or []
    counts_raw = _read(backend, f"{path}/counts/c/0")
    if bits < 0 or not columns or columns[0].get("name") != "values" or counts_raw is None:
        out.error("collection.index", where, "the index lacks bucket_bits, columns (values first) or counts")
        return
    counts = np.frombuffer(counts_raw, "<i8")
    level0 = (
        json.loads(_read(backend, "0/zarr.json") or b"{}").get("attributes", {}).get("zarr_vectors_level", {})
    )
    if len(counts) != 1 << bits or int(counts.sum()) != int(meta.get("rows", -1)):
        out.error("collection.index", where, f"{len(counts)} counts summing to {int(counts.sum())} for "
                  f"{1 << bits} buckets and {meta.get('rows')} rows")  # fmt: skip
    elif int(counts.sum()) != int(level0.get("vertex_count", -1)):
        out.error(
            "collection.index", where, f"{int(counts.sum())} rows for {level0.get('vertex_count')} vertices"
        )
    present = {k.split("/")[2] for k in backend.list_keys(f"{path}/") if k.split("/")[2].isdigit()}
    for b in sorted(present | {str(i) for i in np.flatnonzero(counts[: 1 << bits])}, key=int):
        _check_bucket(
            backend,
            where,
            path,
            int(b),
            bits,
            columns,
            int(counts[int(b)]) if int(b) < len(counts) else 0,
            out.error,
        )


def _check_bucket(
    backend: Backend, where: str, path: str, b: int, bits: int, columns: list[dict[str, Any]], count: int,
    error: Callable[[str, str, str], None],
) -> None:  # fmt: skip
    keys = [f"{path}/{b}/{c['name']}/{'.'.join(['0'] * (1 + len(c.get('row_shape', []))))}" for c in columns]
    raws = backend.get_many(keys)
    if any(r is None for r in raws) or count == 0:
        error("collection.index", f"{where}/{b}", f"bucket {b} is counted {count} rows but its columns are "
              f"{'missing' if any(r is None for r in raws) else 'present'}")  # fmt: skip
        return
    for c, raw in zip(columns, raws, strict=True):
        n = len(bytes(raw)) // (np.dtype(c["dtype"]).itemsize * int(np.prod(c.get("row_shape", [])) or 1))  # type: ignore[arg-type]
        if n != count:
            error("collection.index", f"{where}/{b}/{c['name']}", f"{n} rows, the bucket counts {count}")
            return
    values = np.frombuffer(bytes(raws[0]), "<u8")  # type: ignore[arg-type]
    if np.any(values[1:] < values[:-1]):
        error("collection.index", f"{where}/{b}/values", "values are not sorted")
    own = (_mix(values) >> np.uint64(64 - bits)).astype(np.int64) if bits else np.zeros(len(values), np.int64)
    if np.any(own != b):
        error(
            "collection.index",
            f"{where}/{b}/values",
            f"{int((own != b).sum())} values hash to another bucket",
        )


def validate_collection(
    target: Any,
    backend: Backend,
    doc: dict[str, Any],
    level: int,
    validate_member: Callable[[Any, int], Report],
    storage_options: dict[str, Any] | None,
) -> Report:
    """The report of the collection at ``target`` whose root ``doc`` was read from ``backend``:
    its node, every member (``validate_member(member target, level)``, findings under
    ``<name>/``) and, from level 3, every relationship index."""
    out = Collector()
    members = _members(doc, out)
    cells = 0
    problems, warnings = [], []
    base = str(target).rstrip("/")
    for name, relationships in members:
        member_path = f"{base}/{name}"
        try:
            member = open_backend(member_path, read_only=True, storage_options=storage_options)
        except StoreNotFoundError:
            member = None
        if member is None or _read(member, "zarr.json") is None:
            out.error("collection.member", name, f"no store at ./{name}")
            continue
        report = validate_member(member_path, level)
        cells += report.cells_checked
        problems += [
            type(p)(p.level, f"{name}/{p.path}".rstrip("/"), p.message, p.rule) for p in report.problems
        ]
        warnings += [
            type(p)(p.level, f"{name}/{p.path}".rstrip("/"), p.message, p.rule)
            for p in report.warnings
            if (p.rule, p.path) != ("structure.unknown-node", _INDEX)  # the index: checked here
        ]
        if level >= 3:
            for attribute in relationships:
                _check_index(member, name, attribute, out)
    out.finish()
    return Report(
        target=f"{backend.description} (collection, {len(members)} members)",
        level=level,
        problems=[p for p in [*out.problems, *problems] if p.level <= level],
        warnings=[p for p in [*out.warnings, *warnings] if p.level <= level],
        cells_checked=cells,
    )
