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

from zarr_vectors.engine import VectorStore
from zarr_vectors.errors import StoreNotFoundError, ZarrVectorsError
from zarr_vectors.storage import Backend, open_backend
from zarr_vectors.validation._report import Collector, Report

__all__ = ["is_collection_root", "validate_collection"]

_NAME = re.compile(r"[a-zA-Z0-9_.-]+")
_INDEX = "zv_relationships"
#: Dangling ids a ``collection.dangling`` warning shows.
EXAMPLES = 5


class Dangling:
    """Relationship values that no member of the id space holds, summed over the buckets of
    one index (a value lives in one bucket, so distinct counts add)."""

    def __init__(self, held: np.ndarray) -> None:
        self.held = held  # sorted unique uint64
        self.rows = 0
        self.ids = 0
        self.examples: list[int] = []

    def add(self, values: np.ndarray) -> None:
        """Count the ``values`` (one bucket's, sorted) that are not held."""
        at = np.searchsorted(self.held, values)
        found = at < len(self.held)
        found[found] = self.held[at[found]] == values[found]
        missing = values[~found]
        if len(missing):
            distinct = np.unique(missing)
            self.rows += len(missing)
            self.ids += len(distinct)
            self.examples = sorted(self.examples + distinct[:EXAMPLES].tolist())[:EXAMPLES]


def is_collection_root(doc: Any) -> bool:
    """Whether a root document holds an RFC-8 collection node with ``zv:idSpaces``."""
    ome = doc.get("attributes", {}).get("ome") if isinstance(doc, dict) else None
    return (
        isinstance(ome, dict)
        and ome.get("type") == "collection"
        and "zv:idSpaces" in (ome.get("attributes") or {})
    )


def _members(doc: dict[str, Any], out: Collector) -> list[tuple[str, dict[str, str], str | None]]:
    """``(name, relationships, id space)`` of every well-formed member node; problems for the
    others."""
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
        space = attrs.get("zv:idSpace")
        members.append((name, dict(rel), space if isinstance(space, str) else None))
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


def _check_index(
    backend: Backend, name: str, attribute: str, out: Collector, dangling: Dangling | None = None
) -> None:
    """Counts, bucket columns, order and hash of the index of ``attribute`` in member ``name``;
    each bucket's values go to ``dangling`` when given (a current index only)."""
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
        values = _check_bucket(
            backend,
            where,
            path,
            int(b),
            bits,
            columns,
            int(counts[int(b)]) if int(b) < len(counts) else 0,
            out.error,
        )
        if dangling is not None and values is not None:
            dangling.add(values)


def _check_bucket(
    backend: Backend, where: str, path: str, b: int, bits: int, columns: list[dict[str, Any]], count: int,
    error: Callable[[str, str, str], None],
) -> np.ndarray | None:  # fmt: skip
    """Check bucket ``b``; its values (None when its columns do not match its count)."""
    keys = [f"{path}/{b}/{c['name']}/{'.'.join(['0'] * (1 + len(c.get('row_shape', []))))}" for c in columns]
    raws = backend.get_many(keys)
    if any(r is None for r in raws) or count == 0:
        error("collection.index", f"{where}/{b}", f"bucket {b} is counted {count} rows but its columns are "
              f"{'missing' if any(r is None for r in raws) else 'present'}")  # fmt: skip
        return None
    for c, raw in zip(columns, raws, strict=True):
        n = len(bytes(raw)) // (np.dtype(c["dtype"]).itemsize * int(np.prod(c.get("row_shape", [])) or 1))  # type: ignore[arg-type]
        if n != count:
            error("collection.index", f"{where}/{b}/{c['name']}", f"{n} rows, the bucket counts {count}")
            return None
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
    return values


def _held_ids(path: str, storage_options: dict[str, Any] | None) -> np.ndarray | None:
    """The level-0 object ids of the member store at ``path`` as uint64 (int64 ids wrap, as
    relationship values do), sorted; empty without object ids; None when it does not open
    (its own validation says why). Costs the member's object count, not its rows."""
    try:
        lv = VectorStore.open(path, "r", storage_options).level(0)
        if lv.manifests is None:
            return np.zeros(0, np.uint64)
        return np.sort(np.asarray(lv.object_id_map.to_user(lv.listed_objects)).astype(np.uint64))
    except (ZarrVectorsError, OSError):
        return None


def _dangling(
    members: list[tuple[str, dict[str, str], str | None]],
    base: str,
    storage_options: dict[str, Any] | None,
) -> dict[str, Dangling]:
    """Per id space that a relationship names, a :class:`Dangling` of the ids its members hold
    (spaces with a member that does not open are left out: nothing sure can be said)."""
    named = {s for _, rel, _ in members for s in rel.values()}
    out = {}
    for space in sorted(named):
        parts = [_held_ids(f"{base}/{n}", storage_options) for n, _, s in members if s == space]
        if all(p is not None for p in parts):
            held = np.unique(np.concatenate([np.zeros(0, np.uint64), *parts]))
            out[space] = Dangling(held)
    return out


def _report_dangling(
    name: str, attribute: str, space: str, dangling: Dangling | None, out: Collector
) -> None:
    if dangling is None or not dangling.rows:
        return
    out.warn(
        "collection.dangling",
        f"{name}/{_INDEX}/{attribute}",
        f"{dangling.rows:,} rows name {dangling.ids:,} ids that no member of id space {space!r} "
        f"holds as an object id (e.g. {', '.join(map(str, dangling.examples))})",
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
    ``<name>/``) and, from level 3, every relationship index, and the relationship values of a
    current index that no member of the id space holds as an object id (read bucket by bucket,
    against the ids of the space's members)."""
    out = Collector()
    members = _members(doc, out)
    cells = 0
    problems, warnings = [], []
    base = str(target).rstrip("/")
    spaces = _dangling(members, base, storage_options) if level >= 3 else {}
    for name, relationships, _ in members:
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
            for attribute, space in relationships.items():
                held = spaces.get(space)
                dangling = None if held is None else Dangling(held.held)
                _check_index(member, name, attribute, out, dangling)
                _report_dangling(name, attribute, space, dangling, out)
    out.finish()
    return Report(
        target=f"{backend.description} (collection, {len(members)} members)",
        level=level,
        problems=[p for p in [*out.problems, *problems] if p.level <= level],
        warnings=[p for p in [*out.warnings, *warnings] if p.level <= level],
        cells_checked=cells,
    )
