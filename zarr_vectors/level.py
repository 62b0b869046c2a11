"""One resolution level of an opened store: its metadata and arrays, loaded in two batches."""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from ._arrays import CellArray, LinkArray, TableArray
from ._ids import GROUP_ID_ATTRIBUTE, OBJECT_ID_ATTRIBUTE, IdMap, IdTableWarning
from .errors import CorruptCellError, DecodeError, FormatError
from .format.grid import Grid
from .format.manifests import ManifestBlock, decode_manifest, decode_manifests_batch
from .format.metadata import LevelMeta, RootMeta
from .format.zarr_json import check_zarr_v3
from .storage import Backend

__all__ = ["Level"]

_FAMILIES = ("vertex_attributes", "object_attributes", "group_attributes", "fragment_attributes", "links/0")
_SINGLES = (
    "vertices", "vertex_fragments", "object_index", "object_index/manifests", "object_index/object_ids",
    "groups", "cross_chunk_links", "links/0", "link_fragments",
)  # fmt: skip
#: Object index layouts this reader understands. ``vlen_manifests_v2`` (written by the
#: reference implementation 0.9.2, not in spec 0.9) adds ``object_ids``: row r of
#: ``manifests`` describes object ``object_ids[r]``.
_LAYOUTS = ("vlen_manifests_v1", "vlen_manifests_v2")


def _parse(raw: bytes | None, where: str) -> dict[str, Any] | None:
    if raw is None:
        return None
    try:
        return check_zarr_v3(json.loads(raw), where)
    except json.JSONDecodeError as exc:
        raise FormatError(f"{where}: zarr.json is not valid JSON ({exc})") from exc


def _owner_table(p: str, doc: dict[str, Any] | None) -> CellArray | None:
    """``fragment_attributes/object_id`` when it is a usable owner table (one integer per fragment)."""
    if doc is None:
        return None
    arr = CellArray(f"{p}/fragment_attributes/object_id", doc)
    if arr.row_width != 1 or arr.dtype.kind not in "iu":
        return None
    return arr


def _id_map(level: Level, arr: TableArray | None, size: int, noun: str) -> IdMap:
    """The id map a ``object_id`` / ``group_id`` table gives: read once, checked to hold one
    strictly increasing int64 or uint64 id per object (group); else the identity, with a warning."""
    where = f"level {level.index}"
    if arr is None:
        return IdMap(None, size, noun, where)
    n_chunks = -(-arr.length // arr.chunk)
    values = arr.dense(level.backend.get_many(arr.chunk_keys(range(n_chunks))))
    ok = values.ndim == 1 and values.dtype in (np.dtype(np.int64), np.dtype(np.uint64)) and len(values) == size
    if not ok or (len(values) > 1 and np.any(values[1:] <= values[:-1])):
        warnings.warn(
            f"{arr.path} is not an id table ({size} strictly increasing int64 or uint64 {noun} ids); "
            f"it is read as an ordinary attribute and {noun}s are numbered 0 .. {size - 1}",
            IdTableWarning, stacklevel=3,
        )  # fmt: skip
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
        p = str(index)
        keys = [f"{p}/zarr.json"] + [f"{p}/{name}/zarr.json" for name in _SINGLES]
        docs = dict(zip(["level", *_SINGLES], backend.get_many(keys)))
        level_doc = _parse(docs["level"], f"level {p}")
        if level_doc is None:
            raise FormatError(f"level {p} is listed in multiscales but {p}/zarr.json is missing")
        if docs["cross_chunk_links"] is not None:
            raise FormatError(f"level {p} has a cross_chunk_links group: a pre-0.9 store; rewrite it from source")
        meta = LevelMeta.from_json((level_doc.get("attributes") or {}).get("zarr_vectors_level"), f"level {p}")
        vdoc = _parse(docs["vertices"], f"{p}/vertices")
        if vdoc is None:
            raise FormatError(f"level {p} has no vertices array")
        vertices = CellArray(f"{p}/vertices", vdoc)
        encoding = vertices.attrs.get("encoding", "raw")
        if encoding not in ("raw", "draco"):
            raise FormatError(f"{p}/vertices has encoding {encoding!r}, which this library cannot read")
        if encoding == "draco" and not vertices.draco:
            raise FormatError(
                f"{p}/vertices has encoding 'draco' but its codec list does not start with the draco codec "
                "(a Draco blob stored as plain vlen bytes); this library reads Draco cells through the codec"
            )
        fdoc = _parse(docs["vertex_fragments"], f"{p}/vertex_fragments")
        fam_names = {fam: backend.list_dir(f"{p}/{fam}") for fam in _FAMILIES}
        for name in backend.list_dir(f"{p}/link_attributes"):
            if not name.endswith(".json"):
                fam_names[f"link_attributes/{name}/0"] = backend.list_dir(f"{p}/link_attributes/{name}/0")
        fam_keys = [(fam, n) for fam, names in fam_names.items() for n in names if not n.endswith(".json")]
        fam_docs = backend.get_many([f"{p}/{fam}/{n}/zarr.json" for fam, n in fam_keys])
        fams: dict[str, dict[str, dict[str, Any]]] = {fam: {} for fam in fam_names}
        for (fam, n), raw in zip(fam_keys, fam_docs):
            doc = _parse(raw, f"{p}/{fam}/{n}")
            if doc is not None and doc.get("node_type") == "array":
                fams[fam][n] = doc
        root_cs = np.asarray(root.chunk_shape, np.float64)
        cs = root_cs if meta.chunk_shape is None else np.asarray(meta.chunk_shape, np.float64)
        bin_shape = root.level_bin_shapes[index] if index < len(root.level_bin_shapes) else root.effective_bin_shape
        bs = np.asarray(bin_shape, np.float64)
        if not np.allclose(np.rint(cs / bs) * bs, cs, rtol=1e-9):
            bs = cs  # a bin shape that does not tile the chunk cannot be used to prune rows
        shape = np.asarray(vdoc.get("shape") or [], np.int64)
        if len(shape) != root.sid_ndim:
            raise FormatError(f"{p}/vertices has {len(shape)} dimensions but the store has {root.sid_ndim} space axes")
        grid = Grid(cs, bs, vertices.origin, shape)
        man = _parse(docs["object_index/manifests"], f"{p}/object_index/manifests")
        groups = _parse(docs["groups"], f"{p}/groups")
        oids = _parse(docs["object_index/object_ids"], f"{p}/object_index/object_ids")
        fam_doc = _parse(docs["links/0"], f"{p}/links/0")
        family = {} if fam_doc is None else fam_doc.get("attributes") or {}
        width = int(family.get("link_width", 2))
        lf = _parse(docs["link_fragments"], f"{p}/link_fragments")
        oi = _parse(docs["object_index"], f"{p}/object_index")
        if oi is not None:
            layout = (oi.get("attributes") or {}).get("layout", "vlen_manifests_v1")
            if layout not in _LAYOUTS:
                raise FormatError(f"{p}/object_index has layout {layout!r}; this library reads {', '.join(_LAYOUTS)}")
            if layout == "vlen_manifests_v2" and docs["object_index/object_ids"] is None:
                raise FormatError(f"{p}/object_index has layout vlen_manifests_v2 but no object_ids array")
        return cls(
            backend=backend,
            root=root,
            index=index,
            meta=meta,
            grid=grid,
            vertices=vertices,
            fragments=None if fdoc is None else CellArray(f"{p}/vertex_fragments", fdoc),
            vertex_attributes={n: CellArray(f"{p}/vertex_attributes/{n}", d) for n, d in fams["vertex_attributes"].items()},
            object_index=None if oi is None else oi.get("attributes") or {},
            manifests=None if man is None else TableArray(f"{p}/object_index/manifests", man),
            manifest_ids=None if oids is None else TableArray(f"{p}/object_index/object_ids", oids),
            object_attributes={n: TableArray(f"{p}/object_attributes/{n}", d) for n, d in fams["object_attributes"].items()},
            groups=None if groups is None else TableArray(f"{p}/groups", groups),
            group_attributes={n: TableArray(f"{p}/group_attributes/{n}", d) for n, d in fams["group_attributes"].items()},
            links={
                n: LinkArray(f"{p}/links/0/{n}", d, segment=n, link_width=width, delta=0)
                for n, d in fams["links/0"].items()
            },
            links_family=family,
            link_attributes={
                fam.split("/")[1]: {seg: CellArray(f"{p}/{fam}/{seg}", d) for seg, d in docs_.items()}
                for fam, docs_ in fams.items() if fam.startswith("link_attributes/")
            },
            link_fragments=None if lf is None else CellArray(f"{p}/link_fragments", lf),
            fragment_object_ids=_owner_table(p, fams["fragment_attributes"].get("object_id")),
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
            raise KeyError(f"object id {int(bad[0])} is not in level {self.index} (ids are 0..{n - 1})")
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
            try:
                out.append(decode_manifest(items[c][row - c * bucket], self.root.sid_ndim))
            except DecodeError as exc:
                raise CorruptCellError(self.manifests.path, str(c), f"object {oid}: {exc}") from exc
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
            raise KeyError(f"object id {int(bad[0])} is not in level {self.index} (ids are 0..{n - 1})")
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
        try:
            pos, chunk, frag = decode_manifests_batch(picked, self.root.sid_ndim)
        except DecodeError as exc:
            raise CorruptCellError(self.manifests.path, "?", f"objects {ids.tolist()[:10]}: {exc}") from exc
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
            if raw is None:
                continue
            items = [it if len(it) else memoryview(b"\0\0\0\0") for it in arr.vlen_items(raw, c)]
            try:
                o, ch, f = decode_manifests_batch(items, self.root.sid_ndim)
            except DecodeError as exc:
                raise CorruptCellError(arr.path, str(c), str(exc)) from exc
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
            raise FormatError(f"{arr.path}: a manifest names chunk {chunk[np.argmax(outside)].tolist()}, outside the grid")
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
