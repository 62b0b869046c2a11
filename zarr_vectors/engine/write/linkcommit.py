"""The writing half of an object edit (:mod:`.linkedit`): which cells of which level-0 arrays
are rewritten or removed, their bytes in each array's own codecs, the array and group
documents, and the level metadata with the coarser levels marked stale.

Unsharded arrays: a rewritten cell replaces its file, a removed cell's file is hidden (left
out of the rebuilt store). Sharded arrays: the shards holding rewritten or removed cells
are rewritten whole (:meth:`StoreBuilder.merge_shards`), a shard left with no cell is dropped.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import numpy as np

from zarr_vectors.engine.chunks.arrays import CellArray
from zarr_vectors.engine.chunks.pipeline import Pipeline
from zarr_vectors.engine.level import Level
from zarr_vectors.engine.store import VectorStore
from zarr_vectors.engine.write.append import STALE_KEY
from zarr_vectors.engine.write.builder import StoreBuilder
from zarr_vectors.engine.write.level0 import OBJECT_ID_META, fragment_owner_payloads
from zarr_vectors.engine.write.linkcells import MergedCell, fragment_payload
from zarr_vectors.engine.write.linkremap import CrossCells
from zarr_vectors.errors import InputError
from zarr_vectors.format.grid import cell_key
from zarr_vectors.format.links import build_rows, encode_flat_rows, encode_ragged, smallest_index_dtype
from zarr_vectors.format.metadata import RootMeta
from zarr_vectors.format.shards import inner_codecs, parse_sharding

__all__ = ["EditWriter"]

_FAMILIES = {
    "vertex_attributes": "vertex_attributes",
    "fragment_attributes": "fragment_attributes",
    "links": "links",
    "link_fragments": "link_fragments",
    "link_attributes": "link_attributes",
}


def _kind(path: str) -> str:
    if path.startswith("links/"):
        return "links"
    if path in ("vertex_fragments", "link_fragments"):
        return "fragments"
    return "data"


class EditWriter:
    """Collects the edit's cell payloads per array, then writes them through a builder."""

    def __init__(
        self,
        store: VectorStore,
        level: Level,
        new: Level | None,
        count: int,
        *,
        keep_cross_level: bool = False,
    ) -> None:
        self.store, self.level, self.new = store, level, new
        #: The level edited (its arrays live below ``<index>/``).
        self.index = level.index
        #: Keep the level's cross-level links (``links/+1``, ``links/-1``) as they are: a level
        #: update in the same commit rewrites the cells that name rebuilt rows.
        self.keep_cross_level = keep_cross_level
        self.count = count
        self.grid = level.grid
        self.shape = tuple(int(s) for s in level.grid.shape)
        self.old_arrays = _cell_arrays(level)
        self.new_arrays = _cell_arrays(new) if new is not None else {}
        self.shards = _shards_of(store, self.old_arrays)
        self.owners = level.fragment_object_ids is not None or count > 1
        #: path -> {linear cell: raw payload or None (the cell goes)}
        self.payloads: dict[str, dict[int, bytes | None]] = {}
        self.removed_keys: set[str] = set()
        #: Prefixes of the link arrays the edit leaves without a cell (left out whole).
        self.dropped_arrays: list[str] = []
        self.link_dtype = _link_dtype(level, new)
        self.widened = False
        self.vertex_delta = 0
        self.intra_delta = 0

    # -- planning (before the commit session) -----------------------------------------
    def fit_link_dtype(self, merged: dict[int, MergedCell]) -> None:
        """Widen the link index dtype when a rebuilt chunk holds more rows than it can name (then
        every other link cell is re-encoded too, see :meth:`plan_widened`)."""
        most = max((len(m.data.positions) for m in merged.values()), default=0)
        if most and most - 1 > np.iinfo(self.link_dtype).max:
            self.widened = True
            self.link_dtype = smallest_index_dtype(most)

    def plan_widened(self) -> None:
        """Every link cell the edit does not rebuild, re-encoded in the widened dtype."""
        if not self.widened:
            return
        level = self.level
        for seg, arr in level.links.items():
            path = f"links/0/{seg}"
            done = self.payloads.get(path, {})
            lins = self._lins(arr.nonempty - self.grid.origin)
            lins = lins[~np.isin(lins, list(done))]
            chunks = self._chunks(lins)
            raws = level.backend.get_many([arr.key(c) for c in chunks]) if len(chunks) else []
            for lin, chunk, raw in zip(lins.tolist(), chunks, raws):
                vertices, perm = arr.records(raw, chunk)
                rows = build_rows(vertices, perm)
                payload = (
                    encode_flat_rows(rows, self.link_dtype)
                    if arr.intra
                    else encode_ragged([rows], self.link_dtype)
                )
                self._set(path, int(lin), payload)

    def level_link_prefixes(self) -> tuple[str, ...]:
        """The level's links to other levels, left out of the edited store (they name rows of
        rebuilt chunks; the pyramid rebuild writes them anew); none when they are kept."""
        if self.keep_cross_level:
            return ()
        return (f"{self.index}/links/+", f"{self.index}/links/-")

    def _set(self, path: str, lin: int, payload: bytes | None) -> None:
        self.payloads.setdefault(path, {})[lin] = payload

    def plan_cells(
        self, merged: dict[int, MergedCell], old_rows: int, old_intra: int, intra: str | None
    ) -> None:
        level = self.level
        vdtype = level.vertices.dtype.newbyteorder("<")
        names = sorted(level.vertex_attributes)
        values = sorted(
            {
                n
                for lv in (level, self.new)
                if lv is not None
                for n, f in lv.link_attributes.items()
                if intra in f
            }
        )
        rows = intra_n = 0
        for t, m in merged.items():
            d = m.data
            n = len(d.positions)
            rows += n
            intra_n += len(d.intra)
            if not n:
                for path in set(self.old_arrays) | set(self.new_arrays):
                    if not path.startswith("links/") or path == f"links/0/{intra}":
                        self._set(path, t, None)
                continue
            self._set("vertices", t, d.positions.astype(vdtype).tobytes())
            self._set("vertex_fragments", t, fragment_payload(d.ranges))
            for name in names:
                dt = level.vertex_attributes[name].dtype.newbyteorder("<")
                self._set(f"vertex_attributes/{name}", t, _cast(d.attributes[name], dt, name))
            if self.owners:
                self._set("fragment_attributes/object_id", t, d.owner.astype("<u8").tobytes())
            if intra is None:
                continue
            ipaths = [
                f"links/0/{intra}",
                "link_fragments",
                *(f"link_attributes/{v}/0/{intra}" for v in values),
            ]
            if not len(d.intra):
                for path in ipaths:
                    self._set(path, t, None)
                continue
            self._set(ipaths[0], t, encode_flat_rows(d.intra, self.link_dtype))
            starts = np.cumsum(d.intra_counts) - d.intra_counts
            self._set("link_fragments", t, fragment_payload(np.stack([starts, d.intra_counts], axis=1)))
            for v in values:
                self._set(
                    f"link_attributes/{v}/0/{intra}", t, self._values(f"{v}/0/{intra}", d.intra_values[v])
                )
        self.vertex_delta = rows - old_rows
        self.intra_delta = intra_n - old_intra

    def _values(self, tail: str, values: np.ndarray) -> bytes:
        """Edge values in the store's dtype for that array (the scratch store's for a new one)."""
        arr = self.old_arrays.get(f"link_attributes/{tail}")
        if arr is None:
            return np.ascontiguousarray(values).tobytes()
        return _cast(values, arr.dtype.newbyteorder("<"), tail.split("/")[0])

    def plan_cross(self, cross: CrossCells) -> None:
        for seg, cells in cross.cells.items():
            for h, cell in cells.items():
                if not len(cell.rows):
                    self._set(f"links/0/{seg}", h, None)
                    for n in cross.value_arrays.get(seg, {}):
                        self._set(f"link_attributes/{n}/0/{seg}", h, None)
                    continue
                stored = build_rows(cell.rows, cell.perm)
                self._set(f"links/0/{seg}", h, encode_ragged([stored], self.link_dtype))
                for n, v in cell.values.items():
                    self._set(f"link_attributes/{n}/0/{seg}", h, self._values(f"{n}/0/{seg}", v))

    def plan_owners(self, old_to_final: np.ndarray, identity: bool, touched: np.ndarray) -> None:
        """Owner cells of the chunks the edit leaves, when their OIDs move or the table is new."""
        level = self.level
        if not self.owners or (identity and level.fragment_object_ids is not None):
            return
        own = level.fragment_owners
        keep = ~np.isin(own.cell, touched)
        cell, local, obj = own.cell[keep], own.fragment[keep], old_to_final[own.object_id[keep]]
        ucell, inverse = np.unique(cell, return_inverse=True)
        payloads = fragment_owner_payloads(inverse.reshape(-1), local, obj, len(ucell))
        for c, p in zip(ucell.tolist(), payloads):
            self._set("fragment_attributes/object_id", int(c), p)

    def plan_removals(self) -> None:
        """Keys the rebuilt store leaves out: removed cells (unsharded), or the shards of removed
        cells that nothing else keeps (sharded)."""
        for path, cells in self.payloads.items():
            arr = self.old_arrays.get(path)
            if arr is None:
                continue
            gone = [lin for lin, p in cells.items() if p is None]
            if gone and self._dropped(path):  # a link array left without a cell goes (a write has none)
                self.dropped_arrays.append(f"{arr.path}/")
                self.removed_keys.add(arr.path)  # the folder itself, as a listing names it
            if not gone:
                continue
            chunks = self._chunks(np.asarray(gone, np.int64))
            if self.shards is None:
                self.removed_keys.update(arr.key(c) for c in chunks)
                continue
            kept = self._shard_of(self._final_cells(path))
            dropped = np.setdiff1d(self._shard_of(np.asarray(gone, np.int64)), kept)
            counts = -(-np.asarray(self.shape, np.int64) // np.asarray(self.shards, np.int64))
            for s in np.stack(np.unravel_index(dropped, tuple(int(c) for c in counts)), axis=1):
                self.removed_keys.add(f"{arr.path}/c/{'/'.join(str(int(v)) for v in s)}")

    # -- writing (inside the commit session) ------------------------------------------
    def write(self, builder: StoreBuilder) -> set[str]:
        """Queue every payload and array document; return the families now present."""
        grid = self.grid
        if self.shards is not None:
            old_cells = {}
            for path in self.old_arrays:
                listed = self._final_cells(path)
                keepers = listed[~np.isin(listed, list(self.payloads.get(path, {})))]
                old_cells[f"{self.index}/{path}"] = self._cells(keepers)
            builder.merge_shards(grid, self.level.backend.get_many, old_cells)
            self._touch_shards(builder)
        present: set[str] = set()
        for path in sorted(set(self.payloads) | set(self.old_arrays)):
            arr = self.old_arrays.get(path)
            doc = arr.doc if arr is not None else None
            kind = _kind(path)
            if doc is not None:
                pipe = Pipeline.from_codecs(inner_codecs(doc))
            else:
                pipe = Pipeline.from_codecs([{"name": "vlen-bytes"}, *builder.compressors(kind)])
            for lin, payload in sorted(self.payloads.get(path, {}).items()):
                if payload is not None:
                    chunk = self._chunks(np.asarray([lin], np.int64))[0]
                    builder.put(f"{self.index}/{path}/{cell_key(chunk - grid.origin)}", pipe.encode(payload))
            final = self._final_cells(path)
            if doc is not None and self._dropped(path):
                continue
            if doc is not None:
                doc = json.loads(json.dumps(doc))
                if path.startswith("links/"):
                    doc["attributes"]["dtype"] = self.link_dtype.name
                doc["attributes"]["nonempty_chunks"] = [
                    ".".join(map(str, c)) for c in self._chunks(final).tolist()
                ]
                builder.arrays[f"{self.index}/{path}"] = doc
            elif len(final):
                builder.register_cells(
                    f"{self.index}/{path}", grid, self._cells(final), self._new_attributes(path), kind
                )
            else:
                continue
            family = path.split("/")[0]
            present.add(_FAMILIES.get(family, family))
            self._parents(builder, path)
        return present

    def _dropped(self, path: str) -> bool:
        """Whether the level's link array ``path`` (cross-chunk links or their values) is left
        without a cell (a one-shot write of the final objects has no such array)."""
        if not path.startswith(("links/", "link_attributes/")) or path not in self.old_arrays:
            return False
        return not len(self._final_cells(path))

    def _shard_of(self, lins: np.ndarray) -> np.ndarray:
        """Linear shard index of each linear cell."""
        cps = np.asarray(self.shards, np.int64)
        counts = -(-np.asarray(self.shape, np.int64) // cps)
        cells = self._cells(lins) // cps
        if not len(cells):
            return np.zeros(0, np.int64)
        return np.asarray(np.ravel_multi_index(tuple(cells.T), tuple(int(c) for c in counts)), np.int64)

    def _touch_shards(self, builder: StoreBuilder) -> None:
        """Make the shards of removed cells pending (rewritten whole) when other cells stay there
        and no rebuilt cell of the array falls in them: one kept cell is put back as it is."""
        for path, cells in self.payloads.items():
            if path not in self.old_arrays:
                continue
            lins = np.asarray(list(cells), np.int64)
            gone = np.asarray([p is None for p in cells.values()], bool)
            if not gone.any():
                continue
            need = np.setdiff1d(self._shard_of(lins[gone]), self._shard_of(lins[~gone]))
            final = self._final_cells(path)
            shard = self._shard_of(final)
            at = np.isin(shard, need)
            _, first = np.unique(shard[at], return_index=True)
            keys = [f"{self.index}/{path}/{cell_key(c)}" for c in self._cells(final[at][first])]
            for key, raw in zip(keys, self.level.backend.get_many(keys) if keys else []):
                builder.put(key, raw or b"")

    def _new_attributes(self, path: str) -> dict[str, Any]:
        if path == "fragment_attributes/object_id":
            return dict(OBJECT_ID_META)
        arr = self.new_arrays[path]
        attrs = {k: v for k, v in arr.attrs.items() if k not in ("nonempty_chunks", "chunk_grid_origin")}
        if path.startswith("links/"):
            attrs["dtype"] = self.link_dtype.name
        return attrs

    def _parents(self, builder: StoreBuilder, path: str) -> None:
        """Group documents of the array's parents that the store lacks (taken from the scratch store)."""
        parts = path.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            group = f"{self.index}/" + "/".join(parts[:i])
            if group in builder.groups:
                continue
            raw = self.store.backend.get_many([f"{group}/zarr.json"])[0]
            if raw is not None:
                continue
            src = self.new.backend.get_many([f"{group}/zarr.json"])[0] if self.new is not None else None
            builder.groups[group] = (
                json.loads(src)
                if src is not None
                else {
                    "zarr_format": 3,
                    "node_type": "group",
                    "attributes": {},
                }
            )

    def _final_cells(self, path: str) -> np.ndarray:
        arr = self.old_arrays.get(path)
        listed = set() if arr is None else set(self._lins(arr.nonempty - self.grid.origin).tolist())
        for lin, p in self.payloads.get(path, {}).items():
            if p is None:
                listed.discard(lin)
            else:
                listed.add(lin)
        return np.asarray(sorted(listed), np.int64)

    def _lins(self, cells: np.ndarray) -> np.ndarray:
        cells = np.asarray(cells, np.int64).reshape(-1, self.grid.ndim)
        if not len(cells):
            return np.zeros(0, np.int64)
        return np.asarray(np.ravel_multi_index(tuple(cells.T), self.shape), np.int64)

    def _cells(self, lins: np.ndarray) -> np.ndarray:
        lins = np.asarray(lins, np.int64)
        return np.stack(np.unravel_index(lins, self.shape), axis=1).reshape(-1, self.grid.ndim)

    def _chunks(self, lins: np.ndarray) -> np.ndarray:
        return self._cells(lins) + self.grid.origin

    # -- metadata ---------------------------------------------------------------------------
    def finish_levels(self, builder: StoreBuilder, present: set[str], cross: CrossCells) -> RootMeta:
        """The edited level's metadata and links family counts, the root last. An edit of level 0
        marks the coarser levels stale; an edit of a coarse level (a level update) clears its own
        mark and records the new number of objects it inherits."""
        store, level = self.store, self.level
        every = set(level.meta.arrays_present) | present
        order = _ORDER if every != set(level.meta.arrays_present) else list(level.meta.arrays_present)
        extra = level.meta.extra
        inherited = level.meta.inherited_num_objects
        if self.index:
            extra = {k: v for k, v in extra.items() if k != STALE_KEY}
            inherited = self.count if inherited is not None else None
        meta = replace(
            level.meta,
            vertex_count=level.meta.vertex_count + self.vertex_delta,
            arrays_present=tuple(sorted(every, key=lambda f: order.index(f) if f in order else len(order))),
            extra=extra,
            inherited_num_objects=inherited,
        )
        raw = store.backend.get_many([f"{self.index}/zarr.json"])[0]
        assert raw is not None
        doc = json.loads(raw)
        doc.setdefault("attributes", {})["zarr_vectors_level"] = meta.to_json()
        builder.groups[str(self.index)] = doc
        self._links_family(builder, cross.delta + self.intra_delta)
        for k in store.levels if not self.index else []:
            if k == 0:
                continue
            kraw = store.backend.get_many([f"{k}/zarr.json"])[0]
            if kraw is None:
                continue
            kdoc = json.loads(kraw)
            kdoc.setdefault("attributes", {}).setdefault("zarr_vectors_level", {})[STALE_KEY] = True
            builder.groups[str(k)] = kdoc
        root = store.root
        builder.commit(root.to_attributes())
        return root

    def _links_family(self, builder: StoreBuilder, delta: int) -> None:
        """``links/0``'s record counts moved by ``delta`` (taken from the scratch store when the
        store had no links)."""
        path = f"{self.index}/links/0"
        raw = self.store.backend.get_many([f"{path}/zarr.json"])[0]
        base = None
        if raw is None and self.new is not None:
            raw, base = self.new.backend.get_many([f"{path}/zarr.json"])[0], 0
        if raw is None:
            return
        doc = json.loads(raw)
        attrs = doc["attributes"]
        for key in ("num_links", "num_physical_records"):
            old = int(attrs.get(key, 0)) if base is None else base
            attrs[key] = old + delta
        builder.groups[path] = doc


_ORDER = [
    "vertices",
    "vertex_fragments",
    "vertex_attributes",
    "fragment_attributes",
    "links",
    "link_fragments",
    "link_attributes",
    "object_index",
    "object_attributes",
    "groups",
    "group_attributes",
]


def _cast(values: np.ndarray, dtype: np.dtype, name: str) -> bytes:
    """``values`` as raw bytes of the store's ``dtype``; a cast across kinds (float to int) is refused."""
    if values.dtype != dtype and not np.can_cast(values.dtype, dtype, "same_kind"):
        raise InputError(
            f"attribute {name!r} is {dtype.name} in this store; the new values are {values.dtype}"
        )
    return np.ascontiguousarray(values, dtype=dtype).tobytes()


def _cell_arrays(level: Level | None) -> dict[str, CellArray]:
    """Every per-chunk array of level 0 by path below ``0/``."""
    if level is None:
        return {}
    out: dict[str, CellArray] = {"vertices": level.vertices}
    if level.fragments is not None:
        out["vertex_fragments"] = level.fragments
    out |= {f"vertex_attributes/{n}": a for n, a in level.vertex_attributes.items()}
    if level.fragment_object_ids is not None:
        out["fragment_attributes/object_id"] = level.fragment_object_ids
    out |= {f"links/0/{s}": a for s, a in level.links.items()}
    if level.link_fragments is not None:
        out["link_fragments"] = level.link_fragments
    for name, fam in level.link_attributes.items():
        out |= {f"link_attributes/{name}/0/{s}": a for s, a in fam.items()}
    return out


def _shards_of(store: VectorStore, arrays: dict[str, CellArray]) -> tuple[int, ...] | None:
    """Chunks per shard of level 0's cell arrays (None: unsharded); all must agree."""
    layouts = [parse_sharding(a.path, a.doc) for a in arrays.values()]
    cps = {None if lay is None else lay.chunks_per_shard for lay in layouts}
    usual = all(lay is None or (lay.index_location == "end" and lay.checksum) for lay in layouts)
    if len(cps) != 1 or not usual:
        raise InputError(
            f"{store.description}: the cell arrays of level 0 are sharded differently from one another (or "
            "with a shard index this library does not write), which an edit cannot keep; rewrite the store "
            "with one layout first (zarr_vectors.reshard), then edit it"
        )
    return cps.pop()


def _link_dtype(level: Level, new: Level | None) -> np.dtype:
    """The index dtype of the store's link arrays (the scratch store's when the store has none)."""
    for lv in (level, new):
        if lv is None:
            continue
        for arr in lv.links.values():
            return np.dtype(arr.attrs.get("dtype", "uint32"))
    return np.dtype("uint32")
