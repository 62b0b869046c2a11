"""One resolution level of an opened store: its metadata and arrays, loaded in two batches."""

from __future__ import annotations

import math
import warnings
from collections.abc import Collection
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from zarr_vectors.engine.chunks.arrays import (
    BOUND_SLACK,
    DRACO_BYTES,
    FRAGMENT_BYTES,
    CellArray,
    LinkArray,
    TableArray,
)
from zarr_vectors.engine.chunks.pipeline import DEFAULT_MAX_DECODED
from zarr_vectors.engine.ids import GROUP_ID_ATTRIBUTE, OBJECT_ID_ATTRIBUTE, IdMap, IdTableWarning
from zarr_vectors.errors import (
    CorruptCellError,
    FormatError,
    UnknownIdError,
    decoding,
)
from zarr_vectors.format.codecs import DRACO, geometry_codec
from zarr_vectors.format.documents import parse_cell_array
from zarr_vectors.format.findings import raise_for
from zarr_vectors.format.grid import Grid
from zarr_vectors.format.groups import LinksFamily, check_object_index, parse_links_family, parse_object_index
from zarr_vectors.format.manifests import ManifestBlock, decode_manifest, decode_manifests_batch
from zarr_vectors.format.metadata import MAX_READ_BINS, LevelMeta, RootMeta, check_arrays_present, parse_level
from zarr_vectors.format.shards import inner_codecs
from zarr_vectors.format.zarr_json import check_zarr_v3, load_json
from zarr_vectors.storage import Backend

__all__ = ["Level"]

_FAMILIES = ("vertex_attributes", "object_attributes", "group_attributes", "fragment_attributes", "links/0")
_SINGLES = (
    "vertices",
    "vertex_fragments",
    "object_index",
    "object_index/manifests",
    "object_index/object_ids",
    "groups",
    "cross_chunk_links",
    "links/0",
    "link_fragments",
    "links",
    "vertex_attributes",
    "object_attributes",
    "group_attributes",
    "fragment_attributes",
    "link_attributes",
)


def _parse(raw: bytes | None, where: str) -> dict[str, Any] | None:
    if raw is None:
        return None
    return check_zarr_v3(load_json(raw, where), where)


def _owner_table(p: str, doc: dict[str, Any] | None, max_rows: int, nd: int) -> CellArray | None:
    """``fragment_attributes/object_id`` when it is a usable owner table (one integer per fragment)."""
    if doc is None:
        return None
    arr = CellArray(f"{p}/fragment_attributes/object_id", doc, max_rows=max_rows, ndim=nd)
    if arr.row_width != 1 or arr.dtype.kind not in "iu":
        return None
    return arr


def _level_grid(p: str, root: RootMeta, meta: LevelMeta, index: int, vertices: CellArray) -> Grid:
    """The level's grid from the root and level metadata and the vertices array's shape."""
    root_cs = np.asarray(root.chunk_shape, np.float64)
    cs = root_cs if meta.chunk_shape is None else np.asarray(meta.chunk_shape, np.float64)
    bin_shape = (
        root.level_bin_shapes[index] if index < len(root.level_bin_shapes) else root.effective_bin_shape
    )
    bs = np.asarray(bin_shape, np.float64)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        ratio = np.rint(cs / bs)
        tiles = np.all(np.isfinite(ratio)) and np.allclose(ratio * bs, cs, rtol=1e-9)
    if not tiles or math.prod(int(r) for r in ratio) > MAX_READ_BINS:
        bs = cs  # a bin shape that does not tile the chunk (or absurdly fine bins) cannot prune rows
    try:
        grid = Grid(cs, bs, vertices.origin, np.asarray(vertices.shape, np.int64))
    except ValueError as exc:
        raise FormatError(f"level {p}: {exc}") from exc
    _check_listed_in_bounds(p, root, cs, vertices)
    return grid


def _check_listed_in_bounds(p: str, root: RootMeta, cs: np.ndarray, vertices: CellArray) -> None:
    """Every chunk ``vertices`` lists overlaps the store's bounds at chunk shape ``cs``: a
    chunk shape (or grid origin) that does not match the data is refused, not read wrongly."""
    chunks = vertices.nonempty
    if not len(chunks):
        return
    lo, hi = (np.asarray(b, np.float64) for b in root.bounds)
    with np.errstate(over="ignore"):
        start, stop = chunks * cs, (chunks + 1) * cs
    slack = 1e-9 * np.maximum(np.abs(lo), np.abs(hi)) + 1e-12
    outside = np.any((start > hi + slack) | (stop < lo - slack), axis=1)
    if outside.any():
        i = int(np.argmax(outside))
        raise FormatError(
            f"level {p}: chunk {'.'.join(map(str, chunks[i]))} of {p}/vertices spans {start[i].tolist()} .. "
            f"{stop[i].tolist()} at chunk_shape {cs.tolist()}, outside the bounds {lo.tolist()} .. {hi.tolist()}; "
            "the chunk shape or the listing is corrupt"
        )


def _links_family(p: str, doc: dict[str, Any] | None, arrays: bool, nd: int) -> LinksFamily | None:
    """The parsed ``links/0`` group (None when the level has none); links arrays without it are refused."""
    if doc is None:
        if arrays:
            raise FormatError(f"{p}/links/0 holds links arrays but has no zarr.json of its own")
        return None
    family, found = parse_links_family(f"{p}/links/0", doc.get("attributes") or {}, 0, nd)
    raise_for(found)
    return family


def _link_arrays(
    p: str, docs: dict[str, dict[str, Any]], family: LinksFamily | None, records: int | None, nd: int
) -> dict[str, LinkArray]:
    """The ``links/0/<offsets>`` arrays, each checked against its family's policy."""
    if family is None:
        return {}
    return {
        name: LinkArray(
            f"{p}/links/0/{name}",
            doc,
            records,
            segment=name,
            link_width=family.link_width,
            delta=0,
            ndim=nd,
            family=family,
        )
        for name, doc in docs.items()
    }


def _vertices(p: str, vdoc: dict[str, Any], vertex_count: int, nd: int) -> CellArray:
    """The ``vertices`` array: raw rows of ``nd`` coordinates or Draco blobs, ``vertex_count`` at most per cell."""
    parsed, found = parse_cell_array(f"{p}/vertices", vdoc, nd)
    raise_for(found)
    assert parsed is not None and parsed.dtype is not None
    if geometry_codec(inner_codecs(vdoc)) == DRACO:
        return CellArray(f"{p}/vertices", vdoc, vertex_count, DRACO_BYTES, parsed=parsed)
    return CellArray(f"{p}/vertices", vdoc, vertex_count, parsed.dtype.itemsize * nd, parsed=parsed)


def _is_child(name: str) -> bool:
    """A listed name that is a child node (not the family's own zarr.json, not a hidden file)."""
    return not name.endswith(".json") and not name.startswith(".")


def _families(
    backend: Backend, p: str, docs: dict[str, dict[str, Any] | None], declared: Collection[str] = ()
) -> dict[str, dict[str, dict[str, Any]]]:
    """The array documents of each family folder (``vertex_attributes/<name>``, ...); a folder
    without its ``zarr.json`` is a FormatError (its data would silently be missing).

    Only families whose group ``zarr.json`` is in ``docs``, or that the level's
    ``arrays_present`` (``declared``) names (``links`` for ``links/0``), are listed: a level
    without attribute arrays opens without any listing, which plain HTTP servers may not offer,
    and a family whose group document was lost is still found, not silently dropped."""
    fam_names = {
        fam: backend.list_dir(f"{p}/{fam}")
        if docs.get(fam) is not None or fam.split("/")[0] in declared
        else []
        for fam in _FAMILIES
    }
    link_names = backend.list_dir(f"{p}/link_attributes") if docs.get("link_attributes") is not None else []
    for name in link_names:
        if _is_child(name):
            fam_names[f"link_attributes/{name}/0"] = backend.list_dir(f"{p}/link_attributes/{name}/0")
    fam_keys = [(fam, n) for fam, names in fam_names.items() for n in names if _is_child(n)]
    fam_docs = backend.get_many([f"{p}/{fam}/{n}/zarr.json" for fam, n in fam_keys])
    fams: dict[str, dict[str, dict[str, Any]]] = {fam: {} for fam in fam_names}
    for (fam, n), raw in zip(fam_keys, fam_docs):
        doc = _parse(raw, f"{p}/{fam}/{n}")
        if doc is None:
            raise FormatError(
                f"{p}/{fam}/{n} is a folder without a zarr.json: the array's metadata is missing"
            )
        if doc.get("node_type") == "array":
            fams[fam][n] = doc
    return fams


def _manifests(
    p: str, doc: dict[str, Any] | None, present: int | None, nd: int, fragments: int
) -> TableArray | None:
    """The manifests table; a bucket decodes to at most ``BOUND_SLACK + bucket * (8 + (8 * nd + 25) * F)``
    bytes (and ``DEFAULT_MAX_DECODED``), ``F`` being the fragments the level can hold: each manifest
    names each fragment at most once (objects may share fragments, so the bound is per manifest)."""
    if doc is None:
        return None
    probe = TableArray(f"{p}/object_index/manifests", doc)
    rows = probe.length
    return TableArray(
        probe.path,
        doc,
        max_bytes=min(BOUND_SLACK + probe.chunk * (8 + (8 * nd + 25) * fragments), DEFAULT_MAX_DECODED),
        max_absent=None if present is None else max(rows - present, 0),
        parsed=probe.parsed,
    )


def _tables(
    p: str,
    meta: LevelMeta,
    grid: Grid,
    docs: dict[str, Any],
    fams: dict[str, dict[str, dict[str, Any]]],
    oi: dict[str, Any] | None,
    nd: int,
    listed: int,
) -> dict[str, Any]:
    """The level's object and group tables, checked to agree with the object index and groups
    (``F`` of the manifests' bound: ``vertex_count + (bins + 1) * listed chunks``)."""
    index = None
    if oi is not None:
        index, found = parse_object_index(f"{p}/object_index", oi.get("attributes") or {}, nd)
        raise_for(found)
    present = None if index is None else index.num_present
    manifests = _manifests(
        p, docs["object_index/manifests"], present, nd, _level_fragments(meta, grid, listed)
    )
    oids, groups = docs["object_index/object_ids"], docs["groups"]
    manifest_ids = None if oids is None else TableArray(f"{p}/object_index/object_ids", oids)
    if index is not None:
        raise_for(
            check_object_index(
                f"{p}/object_index",
                index,
                None if manifests is None else manifests.parsed,
                None if manifest_ids is None else manifest_ids.parsed,
            )
        )
    group_table = None if groups is None else TableArray(f"{p}/groups", groups)
    object_attributes = {
        n: TableArray(f"{p}/object_attributes/{n}", d) for n, d in fams["object_attributes"].items()
    }
    group_attributes = {
        n: TableArray(f"{p}/group_attributes/{n}", d) for n, d in fams["group_attributes"].items()
    }
    _same_length(object_attributes, None if manifests is None else manifests.length, "object index rows")
    _same_length(group_attributes, None if group_table is None else group_table.length, "groups")
    return {
        "manifests": manifests,
        "manifest_ids": manifest_ids,
        "object_attributes": object_attributes,
        "groups": group_table,
        "group_attributes": group_attributes,
    }


def _level_fragments(meta: LevelMeta, grid: Grid, listed: int) -> int:
    """Most fragments a level can hold: its rows plus one (possibly empty) fragment per bin of
    every listed chunk, and one more per chunk."""
    return meta.vertex_count + (grid.n_bins + 1) * listed


def _same_length(tables: dict[str, TableArray], expected: int | None, what: str) -> None:
    """Every table has ``expected`` rows (or, with nothing to compare to, they agree)."""
    if expected is None and tables:
        expected, what = next(iter(tables.values())).length, "rows in its sibling tables"
    for arr in tables.values():
        if arr.length != expected:
            raise FormatError(
                f"{arr.path} has {arr.length} rows but the level has {expected} {what}; its zarr.json shape is wrong"
            )


def _id_map(level: Level, arr: TableArray | None, size: int, noun: str) -> IdMap:
    """The id map a ``object_id`` / ``group_id`` table gives: read once, checked to hold one
    strictly increasing int64 or uint64 id per object (group); else the identity, with a warning."""
    where = f"level {level.index}"
    if arr is None:
        return IdMap(None, size, noun, where)
    n_chunks = -(-arr.length // arr.chunk)
    values = arr.dense(level.backend.get_many(arr.chunk_keys(range(n_chunks))))
    ok = (
        values.ndim == 1 and values.dtype in (np.dtype(np.int64), np.dtype(np.uint64)) and len(values) == size
    )
    if not ok or (len(values) > 1 and np.any(values[1:] <= values[:-1])):
        warnings.warn(
            f"{arr.path} is not an id table ({size} strictly increasing int64 or uint64 {noun} ids); "
            f"it is read as an ordinary attribute and {noun}s are numbered 0 .. {size - 1}",
            IdTableWarning,
            stacklevel=3,
        )
        return IdMap(None, size, noun, where)
    return IdMap(values.astype(values.dtype.newbyteorder("=")), size, noun, where)


@dataclass(eq=False)
class Level:
    """Metadata and arrays of level ``index``; cell data is fetched by the query layer."""

    backend: Backend
    root: RootMeta
    index: int
    meta: LevelMeta
    grid: Grid
    vertices: CellArray
    fragments: CellArray | None
    vertex_attributes: dict[str, CellArray]
    object_index: dict[str, Any] | None
    manifests: TableArray | None
    manifest_ids: TableArray | None
    object_attributes: dict[str, TableArray]
    groups: TableArray | None
    group_attributes: dict[str, TableArray]
    links: dict[str, LinkArray]
    links_family: dict[str, Any]
    link_fragments: CellArray | None
    link_attributes: dict[str, dict[str, CellArray]]
    fragment_object_ids: CellArray | None = None

    @classmethod
    def load(cls, backend: Backend, root: RootMeta, index: int) -> Level:
        p, nd = str(index), root.sid_ndim
        keys = [f"{p}/zarr.json"] + [f"{p}/{name}/zarr.json" for name in _SINGLES]
        raw_docs = dict(zip(["level", *_SINGLES], backend.get_many(keys)))
        docs = {
            name: _parse(raw, f"{p}/{name}" if name != "level" else f"level {p}")
            for name, raw in raw_docs.items()
        }
        level_doc = docs["level"]
        if level_doc is None:
            raise FormatError(f"level {p} is listed in multiscales but {p}/zarr.json is missing")
        if docs["cross_chunk_links"] is not None:
            raise FormatError(
                f"level {p} has a cross_chunk_links group: a pre-0.9 store; rewrite it from source"
            )
        meta, found = parse_level((level_doc.get("attributes") or {}).get("zarr_vectors_level"), index, nd)
        raise_for(found)
        assert meta is not None
        raise_for(check_arrays_present(meta, index, {n for n, d in docs.items() if d is not None}))
        vdoc = docs["vertices"]
        if vdoc is None:
            raise FormatError(f"level {p} has no vertices array")
        vertices = _vertices(p, vdoc, meta.vertex_count, nd)
        grid = _level_grid(p, root, meta, index, vertices)
        fams = _families(backend, p, docs, meta.arrays_present)
        v = meta.vertex_count
        per_cell = v + grid.n_bins  # fragments one cell may hold: its bins, or runs of its rows
        family = _links_family(p, docs["links/0"], bool(fams["links/0"]), nd)
        records = None if family is None else family.num_physical_records
        tables = _tables(p, meta, grid, docs, fams, docs["object_index"], nd, len(vertices.nonempty))
        fdoc, lf = docs["vertex_fragments"], docs["link_fragments"]
        return cls(
            backend=backend,
            root=root,
            index=index,
            meta=meta,
            grid=grid,
            vertices=vertices,
            fragments=None
            if fdoc is None
            else CellArray(f"{p}/vertex_fragments", fdoc, per_cell, FRAGMENT_BYTES, ndim=nd),
            vertex_attributes={
                n: CellArray(f"{p}/vertex_attributes/{n}", d, v, ndim=nd)
                for n, d in fams["vertex_attributes"].items()
            },
            object_index=None
            if docs["object_index"] is None
            else docs["object_index"].get("attributes") or {},
            links=_link_arrays(p, fams["links/0"], family, records, nd),
            links_family={} if family is None else family.attributes,
            link_attributes={
                fam.split("/")[1]: {
                    seg: CellArray(f"{p}/{fam}/{seg}", d, records, ndim=nd) for seg, d in docs_.items()
                }
                for fam, docs_ in fams.items()
                if fam.startswith("link_attributes/")
            },
            link_fragments=None
            if lf is None
            else CellArray(
                f"{p}/link_fragments",
                lf,
                None if records is None else records + grid.n_bins,
                FRAGMENT_BYTES,
                ndim=nd,
            ),
            fragment_object_ids=_owner_table(p, fams["fragment_attributes"].get("object_id"), per_cell, nd),
            **tables,
        )

    @cached_property
    def row_object_ids(self) -> np.ndarray | None:
        """Object id of each manifest row for a ``vlen_manifests_v2`` index (None for v1: row = id)."""
        if self.manifest_ids is None:
            return None
        arr = self.manifest_ids
        n_chunks = -(-arr.length // arr.chunk)
        ids = arr.dense(self.backend.get_many(arr.chunk_keys(range(n_chunks)))).astype(np.int64)
        if len(ids) > 1 and np.any(np.diff(ids) <= 0):
            raise FormatError(f"{arr.path} must hold strictly increasing object ids")
        return ids

    @cached_property
    def object_id_map(self) -> IdMap:
        """OIDs <-> the user's object ids (``object_attributes/object_id``; identity without it)."""
        return _id_map(self, self.object_attributes.get(OBJECT_ID_ATTRIBUTE), self.num_objects, "object")

    @cached_property
    def group_id_map(self) -> IdMap:
        """Group index <-> the user's group ids (``group_attributes/group_id``; identity without it)."""
        n = 0 if self.groups is None else self.groups.length
        return _id_map(self, self.group_attributes.get(GROUP_ID_ATTRIBUTE), n, "group")

    @cached_property
    def objects_with_rows(self) -> np.ndarray:
        """OIDs whose manifest names data at this level, ascending (every manifest bucket read
        once; an empty manifest is its 4-byte block count, or nothing)."""
        if self.manifests is None:
            return np.zeros(0, np.int64)
        arr = self.manifests
        raws = self.backend.get_many(arr.chunk_keys(range(-(-arr.length // arr.chunk))))
        lengths = [len(it) for c, raw in enumerate(raws) for it in arr.vlen_items(raw, c)]
        rows = np.flatnonzero(np.asarray(lengths, np.int64) > 4)
        return rows if self.row_object_ids is None else self.row_object_ids[rows]

    @cached_property
    def listed_objects(self) -> np.ndarray:
        """OIDs that are objects of this level, ascending: all of ``0 .. num_objects - 1`` when
        an ``object_id`` table names them, else those with rows (ids kept as given leave empty
        OIDs between objects, and an OID without rows is no object, DECISIONS 8)."""
        if self.object_id_map.user is not None:
            return np.arange(self.num_objects, dtype=np.int64)
        return self.objects_with_rows

    def are_objects(self, oids: np.ndarray) -> np.ndarray:
        """Which of ``oids`` are objects of this level (in :attr:`listed_objects`)."""
        listed, oids = self.listed_objects, np.asarray(oids, np.int64)
        if not len(listed):
            return np.zeros(len(oids), bool)
        return listed[np.minimum(np.searchsorted(listed, oids), len(listed) - 1)] == oids

    @cached_property
    def group_members(self) -> list[np.ndarray]:
        """Member OIDs of every group index ``0 .. G-1`` (a ``group_ranges`` entry fills an
        empty stored list); empty when the level has no groups."""
        arr = self.groups
        if arr is None:
            return []
        raws = self.backend.get_many(arr.chunk_keys(range(-(-arr.length // arr.chunk))))
        items = [it for c, raw in enumerate(raws) for it in arr.vlen_items(raw, c)][: arr.length]
        ranges = arr.attrs.get("group_ranges") or {}
        out = []
        for gid, it in enumerate(items):
            if len(it) % 8:
                raise CorruptCellError(
                    arr.path, str(gid // arr.chunk), f"group {gid} is not a whole number of int64 ids"
                )
            members = np.frombuffer(it, "<i8").astype(np.int64)
            if len(members) == 0 and str(gid) in ranges:
                start, stop = ranges[str(gid)]
                members = np.arange(int(start), int(stop), dtype=np.int64)
            out.append(members)
        return out

    @cached_property
    def listed_groups(self) -> np.ndarray:
        """Group indices that are groups of this level, ascending: all of them when a
        ``group_id`` table names them, else those with members (as :attr:`listed_objects`)."""
        n = 0 if self.groups is None else self.groups.length
        if self.group_id_map.user is not None:
            return np.arange(n, dtype=np.int64)
        sizes = np.asarray([len(m) for m in self.group_members], np.int64)
        return np.flatnonzero(sizes > 0)

    @property
    def cell_fragments(self) -> int:
        """Most fragments one chunk can hold: its bins, or runs of its rows."""
        return self.meta.vertex_count + self.grid.n_bins

    @property
    def level_fragments(self) -> int:
        """Most fragments the whole level can hold, so the most one manifest can name."""
        return _level_fragments(self.meta, self.grid, len(self.vertices.nonempty))

    @property
    def num_objects(self) -> int:
        """Size of the object id space: ids are ``0 .. num_objects - 1``."""
        if self.manifests is None:
            return 0
        ids = self.row_object_ids
        if ids is not None:
            return int(ids[-1]) + 1 if len(ids) else 0
        return int((self.object_index or {}).get("num_objects", self.manifests.length))

    def read_manifests(self, ids: np.ndarray) -> list[list[ManifestBlock]]:
        """Decoded manifests of object ``ids`` (fetching only the buckets that hold them).

        An id inside the id space without a manifest row has no data here: ``[]``.
        """
        if self.manifests is None:
            raise FormatError(f"level {self.index} has no object index")
        ids = np.asarray(ids, dtype=np.int64)
        n = self.num_objects
        bad = ids[(ids < 0) | (ids >= n)]
        if len(bad):
            raise UnknownIdError(f"object id {int(bad[0])} is not in level {self.index} (ids are 0..{n - 1})")
        table = self.row_object_ids
        if table is None:
            rows, found = ids, np.ones(len(ids), bool)
        else:
            rows = np.minimum(np.searchsorted(table, ids), max(len(table) - 1, 0))
            found = table[rows] == ids if len(table) else np.zeros(len(ids), bool)
        bucket = self.manifests.chunk
        chunks = sorted(set((rows[found] // bucket).tolist()))
        raws = self.backend.get_many(self.manifests.chunk_keys(chunks))
        items = {c: self.manifests.vlen_items(raw, c) for c, raw in zip(chunks, raws)}
        out: list[list[ManifestBlock]] = []
        for oid, row, ok in zip(ids.tolist(), rows.tolist(), found.tolist()):
            if not ok:
                out.append([])
                continue
            c = row // bucket
            with decoding(self.manifests.path, c, f"object {oid}"):
                out.append(
                    decode_manifest(items[c][row - c * bucket], self.root.sid_ndim, self.cell_fragments)
                )
        return out

    def object_fragments(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every fragment the manifests of object ``ids`` name, decoded in one vectorised pass.

        Returns ``(position in ids, absolute chunk (K, D), fragment index)``, grouped by
        position in ``ids`` and in manifest order within each object. Ids inside the id
        space without a manifest row name nothing.
        """
        if self.manifests is None:
            raise FormatError(f"level {self.index} has no object index")
        ids = np.asarray(ids, dtype=np.int64)
        n = self.num_objects
        bad = ids[(ids < 0) | (ids >= n)]
        if len(bad):
            raise UnknownIdError(f"object id {int(bad[0])} is not in level {self.index} (ids are 0..{n - 1})")
        table = self.row_object_ids
        if table is None:
            rows, found = ids, np.ones(len(ids), bool)
        else:
            rows = np.minimum(np.searchsorted(table, ids), max(len(table) - 1, 0))
            found = table[rows] == ids if len(table) else np.zeros(len(ids), bool)
        bucket = self.manifests.chunk
        wanted: dict[int, list[int]] = {}
        for row in rows[found].tolist():
            wanted.setdefault(row // bucket, []).append(row % bucket)
        chunks = sorted(wanted)
        raws = self.backend.get_many(self.manifests.chunk_keys(chunks))
        items = {c: self.manifests.vlen_items_at(raw, c, wanted[c]) for c, raw in zip(chunks, raws)}
        empty = memoryview(b"\0\0\0\0")
        picked = []
        for row, ok in zip(rows.tolist(), found.tolist()):
            item = items[row // bucket][row % bucket] if ok else empty
            picked.append(item if len(item) else empty)
        with decoding(self.manifests.path, ", ".join(map(str, chunks[:10])), f"objects {ids.tolist()[:10]}"):
            pos, chunk, frag = decode_manifests_batch(
                picked, self.root.sid_ndim, self.cell_fragments, self.level_fragments
            )
        order = np.argsort(pos, kind="stable")
        return pos[order], chunk[order], frag[order]

    @cached_property
    def fragment_owners(self) -> FragmentOwners:
        """Object id of every fragment any manifest names, from all manifests.

        Reads every manifest bucket once (one batch); later calls reuse the table.
        """
        if self.manifests is None:
            return FragmentOwners.empty()
        arr = self.manifests
        n_chunks = -(-arr.length // arr.chunk)
        raws = self.backend.get_many(arr.chunk_keys(range(n_chunks)))
        objs, chunks, frags = [], [], []
        for c, raw in enumerate(raws):
            items = arr.vlen_items(raw, c)  # a missing bucket that must hold manifests raises here
            if raw is None:
                continue
            items = [it if len(it) else memoryview(b"\0\0\0\0") for it in items]
            with decoding(arr.path, c):
                o, ch, f = decode_manifests_batch(
                    items, self.root.sid_ndim, self.cell_fragments, self.level_fragments
                )
            objs.append(o + c * arr.chunk)
            chunks.append(ch)
            frags.append(f)
        if not objs:
            return FragmentOwners.empty()
        obj, chunk, frag = np.concatenate(objs), np.concatenate(chunks), np.concatenate(frags)
        if self.row_object_ids is not None:
            obj = self.row_object_ids[obj]
        cell = chunk - self.grid.origin
        outside = np.any((cell < 0) | (cell >= self.grid.shape), axis=1)
        if outside.any():
            raise FormatError(
                f"{arr.path}: a manifest names chunk {chunk[np.argmax(outside)].tolist()}, outside the grid"
            )
        lin = np.ravel_multi_index(tuple(cell.T), tuple(int(s) for s in self.grid.shape))
        order = np.argsort(lin * (int(frag.max()) + 1) + frag)  # a shared fragment keeps one owner
        return FragmentOwners(lin[order], frag[order], obj[order])


@dataclass(frozen=True, eq=False)
class FragmentOwners:
    """(cell, fragment) -> object id, as three arrays sorted by (cell, fragment)."""

    cell: np.ndarray  # linear cell index
    fragment: np.ndarray
    object_id: np.ndarray

    @classmethod
    def empty(cls) -> FragmentOwners:
        z = np.zeros(0, np.int64)
        return cls(z, z, z)

    def of_cell(self, lin: int, n_fragments: int) -> np.ndarray:
        """(n_fragments,) object id per fragment of one cell, -1 where none is named."""
        lo, hi = np.searchsorted(self.cell, [lin, lin + 1])
        out = np.full(n_fragments, -1, np.int64)
        frag = self.fragment[lo:hi]
        keep = frag < n_fragments
        out[frag[keep]] = self.object_id[lo:hi][keep]
        return out
