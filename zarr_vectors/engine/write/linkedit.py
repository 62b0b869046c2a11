"""Edit the objects of a linked store (lines, skeletons, graphs, raw meshes) in place.

:func:`edit_linked` deletes objects, replaces them or adds new ones. The new geometry comes
as a *scratch* store that the kind's own writer wrote with the store's grid (so it was
checked and partitioned as a one-shot write would); the edit then rebuilds exactly the
level-0 chunks it touches (those holding rows of deleted or replaced objects, and those
the new objects fall in) object by object (:mod:`.linkcells`), remaps the cross-chunk
link records that point into them (home chunk = touched chunk - offsets, for every
offsets segment), and rewrites the object tables (manifests, object attributes, groups).
Every other chunk file stays as it is (sharded: the touched shards are rewritten whole).

Result: the store answers every query as a one-shot write of the final objects in
ascending object id would. Coarser levels are kept but marked stale. The commit goes
through :func:`~zarr_vectors.storage.commit.rebuild_session`, as appends of points do.

The same edit can be made at a coarse level (``index=k``, the new objects from the scratch
store's level k): that is how :mod:`zarr_vectors.pyramid.linked_update` updates the levels,
keeping each level's cross-level links (``keep_cross_level``) and remapping them itself with
the rebuilt cells' row maps that :class:`LevelEdit` reports.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from zarr_vectors.engine.chunks.pipeline import compression_of
from zarr_vectors.engine.ids import OBJECT_ID_ATTRIBUTE, as_id_array, dense_ids
from zarr_vectors.engine.level import Level
from zarr_vectors.engine.store import VectorStore, table_values
from zarr_vectors.engine.write import inputs as _inputs
from zarr_vectors.engine.write.builder import StoreBuilder
from zarr_vectors.engine.write.linkcells import CellMerge, MergedCell, read_cells
from zarr_vectors.engine.write.linkcommit import EditWriter
from zarr_vectors.engine.write.linkedstream import manifests_from
from zarr_vectors.engine.write.linkremap import CrossCells, cross_cells
from zarr_vectors.engine.write.tables import write_object_tables
from zarr_vectors.errors import InputError
from zarr_vectors.format.kinds import EDITED_LINKED_FAMILIES, family_of
from zarr_vectors.format.shards import inner_codecs
from zarr_vectors.format.zarr_json import absent_fill
from zarr_vectors.storage import check_workers, placeholder_root, rebuild_session, writing

__all__ = ["LevelEdit", "edit_linked", "forget_folder", "object_user_ids"]


def object_user_ids(level: Level) -> np.ndarray:
    """The user ids of the level's objects, ascending."""
    return np.asarray(level.object_id_map.to_user(level.listed_objects))


def check_editable(store: VectorStore, index: int = 0) -> Level:
    """Level ``index`` of a store whose objects :func:`edit_linked` can edit; InputError otherwise."""
    kinds = tuple(store.root.geometry_types)
    if len(kinds) != 1 or family_of(kinds) not in EDITED_LINKED_FAMILIES:
        raise InputError(
            f"object edits work on lines, skeletons, graphs and meshes; this store holds {list(kinds)}"
        )
    level = store.level(index)
    if level.vertices.draco:
        raise InputError(
            "this mesh store is Draco-encoded: Draco quantizes each chunk over the box of its vertices, "
            "so an edit cannot give the positions a write of the final meshes would (those are not "
            "stored); write the meshes again with zarr_vectors.write_meshes, or keep a raw copy and edit that"
        )
    if level.grid.n_bins != 1:
        raise InputError(
            f"this store has {level.grid.n_bins} bins per chunk; object edits need one bin per chunk "
            "(base_bin_shape equal to chunk_shape, the writers' default); write the store again without bin_shape"
        )
    if level.manifests is None or level.fragments is None:
        raise InputError("this store has no object index, so its objects cannot be edited")
    return level


@dataclass(eq=False)
class _Ids:
    """Final object ids: the user ids ascending, their OIDs, and each source's OID -> final OID."""

    final: np.ndarray
    count: int
    user: np.ndarray | None
    old_to_final: np.ndarray
    new_to_final: np.ndarray
    identity: bool  # the kept objects keep their OIDs
    #: Replaced objects: their old OIDs and final OIDs (they keep their attribute rows unless given).
    carried: tuple[np.ndarray, np.ndarray] = (np.zeros(0, np.int64), np.zeros(0, np.int64))

    @property
    def members(self) -> np.ndarray:
        """Old OID -> final OID of every object that stays (replaced ones too), else -1."""
        out = self.old_to_final.copy()
        out[self.carried[0]] = self.carried[1]
        return out


def _both(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two id arrays in one dtype (int64 or uint64, refused when both cannot be held)."""
    if a.dtype == b.dtype:
        return a, b
    if not len(a) or not len(b):  # no ids: no dtype of their own
        return (a.astype(b.dtype), b) if not len(a) else (a, b.astype(a.dtype))
    both = as_id_array(np.concatenate([a.astype(object), b.astype(object)]), "object ids")
    return both[: len(a)], both[len(a) :]


def _plan_ids(
    old: Level, new: Level | None, remove: np.ndarray, added: np.ndarray, replaced: np.ndarray
) -> _Ids:
    """Check the ids of the edit and number the final objects as a one-shot write would."""
    old_oids = old.listed_objects
    old_user = object_user_ids(old)
    new_oids = new.listed_objects if new is not None else np.zeros(0, np.int64)
    new_user = object_user_ids(new) if new is not None else np.zeros(0, np.int64)
    if old.object_id_map.user is None and new_user.dtype == np.uint64:
        old_user = old_user.astype(np.uint64)  # kept ids (no table) take the given ids' dtype
    have, gone = _both(old_user, remove)
    missing = ~np.isin(gone, have)
    if missing.any():
        raise InputError(f"object id {int(gone[np.argmax(missing)])} is not in this store")
    have, fresh = _both(old_user, added)
    clash = np.isin(fresh, have)
    if clash.any():
        raise InputError(
            f"{int(clash.sum())} of the new objects' ids are already in the store "
            f"(first: {int(fresh[np.argmax(clash)])}); replace them, or give new ids"
        )
    have, gone = _both(old_user, remove)
    kept = have[~np.isin(have, gone)]
    kept, nu = _both(kept, new_user)
    final = np.union1d(kept, nu)
    dense = dense_ids(final)
    old_to_final = np.full(max(old.num_objects, 1), -1, np.int64)
    keep = np.isin(have, kept)
    final_of = dense.dense
    old_to_final[old_oids[keep]] = final_of[np.searchsorted(final, kept)]
    new_to_final = np.full(max(new.num_objects if new is not None else 0, 1), -1, np.int64)
    if len(nu):
        new_to_final[new_oids] = final_of[np.searchsorted(final, nu)]
    identity = bool(np.array_equal(old_to_final[old_oids[keep]], old_oids[keep]))
    swapped = np.isin(have, _both(have, replaced)[1]) if len(replaced) else np.zeros(len(have), bool)
    carried = (old_oids[swapped], final_of[np.searchsorted(final, _both(final, have[swapped])[1])])
    return _Ids(final, dense.count, dense.user, old_to_final, new_to_final, identity, carried)


@dataclass(eq=False)
class LevelEdit:
    """What :func:`edit_linked` did to one level: the new ``root``, the ``touched`` cells
    (linear, ascending: every cell rebuilt or emptied), each rebuilt cell's maps from the old
    rows (source 0) and the new objects' rows (source 1) to its final rows, and each source's
    OID -> final OID (-1: gone)."""

    root: Any
    index: int
    touched: np.ndarray
    merged: dict[int, MergedCell]
    old_to_final: np.ndarray
    new_to_final: np.ndarray
    count: int


@writing
def edit_linked(
    store: VectorStore,
    *,
    delete: Any = None,
    replace: Any = None,
    added: VectorStore | None = None,
    workers: int | None = None,
    progress: bool | None = None,
    index: int = 0,
    keep_cross_level: bool = False,
    direct: bool = False,
) -> LevelEdit:
    """Delete the objects ``delete``, give the objects ``replace`` the geometry they have in
    ``added``, and add the other objects of ``added``, at level ``index`` (0: the data; a
    coarse level when a level update edits it with ``added``'s level ``index``); return what
    was rebuilt (:class:`LevelEdit`, its ``root`` the new root).

    ``added`` is a store the kind's writer wrote with this store's grid (chunk shape, bounds),
    vertex dtype and vertex attributes; its object attributes fill the new (or replaced)
    objects' rows, and replaced objects without them keep theirs. Unknown ids, and new ids
    already in the store, are refused with InputError. The level's cross-level links are
    dropped (a rebuild writes them) unless ``keep_cross_level``: then they stay as they are,
    for a level update of the same commit to remap, and with ``direct`` (the store's backend is
    the overlay of an enclosing commit, :func:`zarr_vectors.pyramid.one_commit`) the edit is
    written straight into it, without a commit of its own.
    """
    store.require_writable()
    check_workers(workers)
    level = check_editable(store, index)
    new = added.level(index) if added is not None else None
    deleted = _id_list(delete, "delete")
    replaced = _id_list(replace, "replace")
    new_user = object_user_ids(new) if new is not None else np.zeros(0, np.int64)
    if len(replaced):
        a, b = _both(np.unique(replaced), new_user)
        if not np.array_equal(a, b):
            raise InputError(
                f"replace names objects {a.tolist()[:10]} but the new geometry holds objects "
                f"{b.tolist()[:10]}: give new geometry for exactly the objects replaced"
            )
    added_ids = new_user if not len(replaced) else np.zeros(0, new_user.dtype)
    remove = np.concatenate(_both(deleted, replaced)) if len(replaced) else deleted
    if new is not None:
        _check_scratch(level, new)
    ids = _plan_ids(level, new, remove, added_ids, replaced)
    shape = tuple(int(s) for s in level.grid.shape)
    owners = level.fragment_owners
    gone = (
        level.listed_objects[ids.old_to_final[level.listed_objects] < 0]
        if len(level.listed_objects)
        else np.zeros(0, np.int64)
    )
    touched = np.unique(owners.cell[np.isin(owners.object_id, gone)])
    if new is not None:
        ncells = np.ravel_multi_index(tuple((new.vertices.nonempty - new.grid.origin).T), shape)
        touched = np.union1d(touched, ncells)
    intra = _intra_path(level, new)
    old_cells = read_cells(level, touched, ids.old_to_final, intra)
    new_cells = read_cells(new, touched, ids.new_to_final, intra) if new is not None else {}
    width = int(level.links_family.get("link_width", 2)) if level.links_family else _scratch_width(new)
    values = sorted(
        {n for lv in (level, new) if lv is not None for n, f in lv.link_attributes.items() if intra in f}
    )
    merger = CellMerge(sorted(level.vertex_attributes), values, width)
    vdtype = level.vertices.dtype.newbyteorder("<")
    merged = {
        int(t): merger.merge([old_cells.get(int(t)), new_cells.get(int(t))], level.grid.ndim, vdtype)
        for t in touched.tolist()
    }
    cross = cross_cells(level, new, merged, touched)
    writer = EditWriter(store, level, new, ids.count, keep_cross_level=keep_cross_level)
    writer.fit_link_dtype(merged)
    old_rows = sum(len(c.positions) for c in old_cells.values())
    old_intra = sum(len(c.intra) for c in old_cells.values())
    writer.plan_cells(merged, old_rows, old_intra, intra)
    writer.plan_cross(cross)
    writer.plan_widened()
    writer.plan_owners(ids.old_to_final, ids.identity, touched)
    writer.plan_removals()
    root = _commit(store, level, new, ids, merged, cross, writer, direct and keep_cross_level)
    return LevelEdit(root, index, touched, merged, ids.old_to_final, ids.new_to_final, ids.count)


def forget_folder(backend: Any, prefix: str) -> None:
    """Remove an array folder whose keys a commit removed that ``backend`` still lists (an
    enclosing commit's overlay lists the folder of removed base keys); nothing otherwise."""
    parent, _, name = prefix.rstrip("/").rpartition("/")
    if name in backend.list_dir(parent):
        backend.delete_prefix(prefix)


def _id_list(ids: Any, what: str) -> np.ndarray:
    if ids is None:
        return np.zeros(0, np.int64)
    arr = as_id_array(np.atleast_1d(np.asarray(ids)), f"{what} ids")
    if len(np.unique(arr)) != len(arr):
        raise InputError(f"{what} names an object id more than once")
    return arr


def _check_scratch(level: Level, new: Level) -> None:
    a, b = level.grid, new.grid
    same = (
        np.array_equal(a.shape, b.shape)
        and np.array_equal(a.origin, b.origin)
        and np.allclose(a.chunk_shape, b.chunk_shape)
    )
    if not same:
        raise InputError("the new objects were written on another chunk grid than the store's")
    if sorted(level.vertex_attributes) != sorted(new.vertex_attributes):
        raise InputError(
            f"the store's vertices have attributes {sorted(level.vertex_attributes)}; the new objects "
            f"give {sorted(new.vertex_attributes)}: give exactly the store's attributes"
        )
    if level.links and new.links and sorted(level.link_attributes) != sorted(new.link_attributes):
        raise InputError(
            f"the store's edges have attributes {sorted(level.link_attributes)}; the new objects give "
            f"{sorted(new.link_attributes)}: give exactly the store's edge attributes"
        )


def _intra_path(level: Level, new: Level | None) -> str | None:
    for lv in (level, new):
        if lv is None:
            continue
        for name, arr in lv.links.items():
            if arr.intra:
                return name
    return None


def _scratch_width(new: Level | None) -> int:
    if new is not None and new.links_family:
        return int(new.links_family.get("link_width", 2))
    return 2


def _commit(
    store: VectorStore,
    level: Level,
    new: Level | None,
    ids: _Ids,
    merged: dict[int, MergedCell],
    cross: CrossCells,
    writer: EditWriter,
    direct: bool = False,
) -> Any:
    """Write the planned cells, the object tables and the metadata in one rebuild session (or,
    ``direct``, straight into the store's backend: the overlay of an enclosing commit)."""
    k = level.index
    hidden: tuple[str, ...] = (
        f"{k}/object_index/",
        f"{k}/object_attributes/",
        *writer.level_link_prefixes(),
        *writer.dropped_arrays,
    )
    groups_changed = level.groups is not None and (not ids.identity or _groups_lose(level, ids))
    if groups_changed:
        hidden += (f"{k}/groups/",)
    session = (
        contextlib.nullcontext(store.backend)
        if direct
        else rebuild_session(
            store.backend,
            hidden=lambda key: key.startswith(hidden) or key in writer.removed_keys,
            first={"zarr.json": placeholder_root()},
            wait=store.wait,
        )
    )
    tables = _tables(level, new, ids, merged, groups_changed)
    with session as overlay:
        if direct:  # an enclosing commit's overlay: what a session would hide is deleted in it
            for prefix in hidden:
                overlay.delete_prefix(prefix.rstrip("/"))
            overlay.delete_many(sorted(writer.removed_keys))
        vdoc = level.vertices.doc
        name, clevel = compression_of(inner_codecs(vdoc) or [])
        checksums = any(c.get("name") == "crc32c" for c in inner_codecs(vdoc) or [])
        builder = StoreBuilder(overlay, name, clevel, checksums=checksums, shards=writer.shards)
        for prefix in writer.dropped_arrays:
            overlay.delete_prefix(prefix)
        present = writer.write(builder)
        present |= set(write_object_tables(builder, str(k), **tables))
        root = writer.finish_levels(builder, present, cross)
    for prefix in writer.dropped_arrays:  # its keys are gone; an enclosing overlay forgets the folder too
        forget_folder(store.backend, prefix)
    store.replace_root(root)
    return root


def _groups_lose(level: Level, ids: _Ids) -> bool:
    members = level.group_members
    moved = ids.members
    return any(bool(np.any(moved[m] < 0)) for m in members if len(m))


def _manifests(level: Level, new: Level | None, ids: _Ids, merged: dict[int, MergedCell]) -> list[bytes]:
    """Every final object's manifest: kept objects' fragments in their old order (rebuilt
    chunks' fragments renumbered), new objects' as the scratch writer ordered them."""
    shape = tuple(int(s) for s in level.grid.shape)
    parts = []
    for s, (lv, to_final) in enumerate([(level, ids.old_to_final), (new, ids.new_to_final)]):
        if lv is None:
            continue
        oids = lv.listed_objects
        oids = oids[to_final[oids] >= 0] if len(oids) else oids
        if not len(oids):
            continue
        pos, chunk, frag = lv.object_fragments(oids)
        lin = np.ravel_multi_index(tuple((chunk - lv.grid.origin).T), shape).astype(np.int64)
        local = frag.astype(np.int64).copy()
        for t in np.unique(lin).tolist():
            cell = merged.get(int(t))
            if cell is None:
                continue
            at = lin == t
            local[at] = cell.frag_map[s][local[at]]
        if np.any(local < 0):
            raise InputError("an object's manifest names a fragment its chunk no longer has")
        parts.append((to_final[oids[pos]], lin, local))
    if not parts:
        z = np.zeros(0, np.int64)
        return manifests_from(z, z, z, z, level.grid, ids.count)
    oid = np.concatenate([p[0] for p in parts])
    lin = np.concatenate([p[1] for p in parts])
    local = np.concatenate([p[2] for p in parts])
    return manifests_from(oid, np.arange(len(oid)), lin, local, level.grid, ids.count)


def _tables(
    level: Level,
    new: Level | None,
    ids: _Ids,
    merged: dict[int, MergedCell],
    groups_changed: bool,
) -> dict[str, Any]:
    """Manifests, object attributes and (when members go or move) groups of the final objects,
    as :func:`write_object_tables` takes them (read before the old tables are hidden)."""
    manifests = _manifests(level, new, ids, merged)
    oattrs = _object_attributes(level, new, ids)
    groups: list[np.ndarray] = []
    names = None
    if groups_changed:
        for members in level.group_members:
            moved = ids.members[members] if len(members) else members
            groups.append(np.asarray(moved[moved >= 0] if len(moved) else moved, np.int64))
        names = level.groups.attrs.get("group_names") if level.groups is not None else None
    return {
        "sid_ndim": level.grid.ndim,
        "num_objects": ids.count,
        "manifests": manifests,
        "object_attributes": oattrs,
        "groups": groups,
        "group_attributes": [],
        "group_names": names,
    }


def _object_attributes(level: Level, new: Level | None, ids: _Ids) -> list[_inputs.NamedArray]:
    """Old rows at their final OIDs (replaced objects keep theirs), new objects' rows from the
    scratch store's tables (absent where it has none)."""
    out = []
    given = {
        n: a
        for n, a in (new.object_attributes.items() if new is not None else [])
        if n != OBJECT_ID_ATTRIBUTE
    }
    unknown = sorted(set(given) - set(level.object_attributes))
    if unknown:
        raise InputError(
            f"object_attributes {unknown} are not in this store; edits fill the store's own object "
            f"attributes only ({sorted(n for n in level.object_attributes if n != OBJECT_ID_ATTRIBUTE)})"
        )
    old_oids = np.flatnonzero(ids.old_to_final >= 0)
    for name, arr in level.object_attributes.items():
        if name == OBJECT_ID_ATTRIBUTE:
            continue
        old = table_values(level, arr)
        values = np.full((ids.count, *old.shape[1:]), absent_fill(old.dtype), old.dtype)
        held = old_oids[old_oids < len(old)]
        values[ids.old_to_final[held]] = old[held]
        was, now = ids.carried
        inside = was < len(old)
        if name not in given:
            values[now[inside]] = old[was[inside]]
        if name in given and new is not None:
            rows = table_values(new, given[name])
            noids = np.flatnonzero(ids.new_to_final >= 0)
            noids = noids[noids < len(rows)]
            add = rows[noids]
            if values.dtype.kind == "U" or add.dtype != values.dtype:
                values = values.astype(np.result_type(values.dtype, add.dtype))
            values[ids.new_to_final[noids]] = add
        out.append(_inputs.NamedArray(name, values))
    if ids.user is not None:
        out.insert(
            0, _inputs.NamedArray(OBJECT_ID_ATTRIBUTE, ids.user.astype(ids.user.dtype.newbyteorder("<")))
        )
    return out
