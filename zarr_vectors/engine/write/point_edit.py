"""Replace and delete objects of a point cloud opened with ``mode="r+"``.

Both edits go through the level-0 rewrite appends use (:func:`~.append.rewrite_level0`):
the cells holding rows of the edited objects (and, for a replace, the cells the new rows
fall in) are read back, the edited objects' old rows left out, the new rows joined, and
each cell re-encoded exactly as a one-shot write of its final rows would encode it. A
cell left without rows is removed (with shards: its shard is written again without it,
or removed when it keeps no cell). The object tables are written again; every other
cell is kept as it is, unless the object ids are renumbered (then only the owner tables
of the other cells change, as on an append).

Invariant: afterwards the store uses the id form a one-shot write of the final data
would (:func:`~zarr_vectors.engine.ids.kept_as_given`), so it answers every query as
that write does. Coarser levels are marked stale until the pyramid is rebuilt.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from zarr_vectors.engine.ids import OBJECT_ID_ATTRIBUTE, DenseIds, as_id_array, kept_as_given
from zarr_vectors.engine.level import Level
from zarr_vectors.engine.store import VectorStore
from zarr_vectors.engine.write import inputs as _inputs
from zarr_vectors.engine.write.append import (
    Footprint,
    IdPlan,
    Level0Edit,
    linear_cells,
    new_rows,
    rewrite_level0,
    shards_of,
    union_ids,
)
from zarr_vectors.engine.write.partition import sort_keys
from zarr_vectors.engine.write.spill import CellSpill
from zarr_vectors.errors import InputError
from zarr_vectors.format.kinds import POINT_CLOUD
from zarr_vectors.format.metadata import RootMeta
from zarr_vectors.storage import check_workers, writing

__all__ = ["delete_points", "replace_points"]


@writing
def delete_points(
    store: VectorStore,
    ids: Any,
    *,
    workers: int | None = None,
    progress: bool | None = None,
    footprint: list[Footprint] | None = None,
) -> RootMeta:
    """Remove the objects ``ids`` (every point, manifest, object attribute row and group
    membership) from level 0 of a point cloud opened with ``mode="r+"``; return the new root.

    Raises InputError for an id the store does not hold (naming the first) or a store
    without objects; no id at all changes nothing (an empty :class:`Footprint` then goes to
    ``footprint``, as for every edit: see :func:`~.append.append_points`).
    """
    level = _object_level(store, "delete")
    workers = check_workers(workers)
    gone = _held(level, ids, "delete")
    if not len(gone):
        return _nothing(store, footprint)
    plan = _EditPlan(level, gone, gone, None)
    spill = CellSpill(None)
    spill.finish()
    edit = _touched(store, level, plan, spill, 0)
    return rewrite_level0(store, level, plan, spill, edit, None, workers, progress, footprint)


def _nothing(store: VectorStore, footprint: list[Footprint] | None) -> RootMeta:
    """An edit that changes nothing: the root as it is, an empty footprint."""
    if footprint is not None:
        z = np.zeros(0, np.int64)
        footprint.append(Footprint(np.zeros((0, store.level(0).grid.ndim), np.int64), z, z, False))
    return store.root


@writing
def replace_points(
    store: VectorStore,
    ids: Any,
    positions: Any,
    *,
    attributes: Mapping[str, Any] | None = None,
    object_ids: Any = None,
    object_attributes: Mapping[str, Mapping[Any, Any]] | None = None,
    workers: int | None = None,
    progress: bool | None = None,
    footprint: list[Footprint] | None = None,
) -> RootMeta:
    """Give the objects ``ids`` of a point cloud opened with ``mode="r+"`` new points, in one
    commit; return the new root.

    ``positions`` and ``attributes`` are as for an append (the store's vertex attributes,
    inside its bounds); ``object_ids`` names one of ``ids`` per point. The old points of
    every object in ``ids`` go; an object of ``ids`` given no point is deleted. Object
    attribute rows are kept unless ``object_attributes`` (``{name: {id: value}}``, ids among
    the replaced objects) gives new ones; group memberships are kept. ``footprint``: as for
    :func:`~.append.append_points`.
    """
    level = _object_level(store, "replace")
    workers = check_workers(workers)
    gone = _held(level, ids, "replace")
    pos, values = new_rows(store, level, positions, attributes, "replace")
    user = _inputs.object_id_array(object_ids, len(pos))
    if user is None:
        raise InputError("replace needs object_ids: one per point, each one of the ids being replaced")
    if not len(gone) and not len(pos):
        return _nothing(store, footprint)
    oids, found = level.object_id_map.lookup(user)
    inside = found & np.isin(oids, gone)
    if not inside.all():
        bad = int(user[np.argmin(inside)])
        raise InputError(
            f"object_ids name {bad}, which is not one of the ids being replaced; replace gives new "
            "points to those objects only (add new objects with append)"
        )
    kept = np.unique(oids)
    _check_object_attributes(level, object_attributes, user)
    plan = _EditPlan(level, gone, np.setdiff1d(gone, kept), user)
    spill = CellSpill(None)
    columns = {"positions": pos, **{f"a{i}": v for i, v in enumerate(values)}, "ids": plan.new_oids}
    spill.add(sort_keys(pos, level.grid) // level.grid.n_bins, columns)
    spill.finish()
    edit = _touched(store, level, plan, spill, len(pos))
    return rewrite_level0(store, level, plan, spill, edit, object_attributes, workers, progress, footprint)


def _object_level(store: VectorStore, verb: str) -> Level:
    """Level 0 of a writable point cloud with objects (else ReadOnlyError / InputError)."""
    store.require_writable()
    kinds = list(store.root.geometry_types)
    if kinds != [POINT_CLOUD]:
        raise InputError(f"{verb} edits the objects of a point cloud; this store holds {kinds}")
    level = store.level(0)
    if level.manifests is None:
        raise InputError(
            f"{verb} names objects by id, and this store's points have no object ids "
            "(write it with object_ids to edit objects)"
        )
    shards_of(store, level)  # an unusual shard layout is refused before any work
    return level


def _held(level: Level, ids: Any, verb: str) -> np.ndarray:
    """The old OIDs of ``ids`` (distinct, ascending); InputError naming the first id that is
    not an object of the store."""
    given = as_id_array(ids, "ids").reshape(-1)
    id_map = level.object_id_map
    oids, found = id_map.lookup(given)
    found &= level.are_objects(oids)
    if not found.all():
        listed = id_map.to_user(level.listed_objects)
        held = (
            f"its {len(listed):,} objects have ids {int(listed[0])} .. {int(listed[-1])}"
            if len(listed)
            else "it has no objects"
        )
        raise InputError(
            f"object id {int(given[np.argmin(found)])} is not in this store ({held}); "
            f"{verb} takes ids of the store's objects"
        )
    return np.unique(oids)


def _check_object_attributes(
    level: Level, given: Mapping[str, Mapping[Any, Any]] | None, user: np.ndarray
) -> None:
    """Rows given for a replace name the store's object attributes and replaced objects with points."""
    names = sorted(n for n in level.object_attributes if n != OBJECT_ID_ATTRIBUTE)
    for name, rows in (given or {}).items():
        if name not in names:
            raise InputError(
                f"object attribute {name!r} is not in this store; a replace can give rows of its "
                f"own object attributes only ({names})"
            )
        if not isinstance(rows, Mapping):
            raise InputError(f"object_attributes[{name!r}] must be a mapping {{object id: value}}")
        keys = as_id_array(list(rows), f"object_attributes[{name!r}] ids") if rows else user[:0]
        if keys.dtype != user.dtype:
            both = union_ids(keys, user)
            keys, have = keys.astype(both.dtype), user.astype(both.dtype)
        else:
            have = user
        missing = ~np.isin(keys, have)
        if missing.any():
            raise InputError(
                f"object_attributes[{name!r}] names object id {int(keys[np.argmax(missing)])}, "
                "which gets no point in this replace"
            )


class _EditPlan(IdPlan):
    """Old and new object ids around an edit: ``gone`` (old OIDs) lose their rows, ``dropped``
    (a subset) stop being objects, ``user`` are the new rows' ids (None: no new rows).

    The final ids are the surviving old ones and ``user``'s; they are kept as given or
    remapped exactly as a one-shot write of them would be. ``old_to_new`` is -1 for dropped
    objects; ``drop_rows`` has one entry per old OID and a last, False one, so that rows
    without an object (OID -1) stay.
    """

    def __init__(self, level: Level, gone: np.ndarray, dropped: np.ndarray, user: np.ndarray | None) -> None:
        old = level.object_id_map.ids()
        alive = np.zeros(len(old), bool)
        alive[level.listed_objects] = True
        alive[dropped] = False
        new = np.unique(user) if user is not None else old[:0]
        final = union_ids(old[alive], new)
        user = final[:0] if user is None else user
        negative = final.dtype.kind == "i" and len(final) and int(final[0]) < 0
        if not negative and (not len(final) or kept_as_given(int(final[-1]), len(final))):
            count = int(final[-1]) + 1 if len(final) else 0
            self.dense = DenseIds(final.astype(np.int64), count, None)
            self.old_to_new = np.where(alive, old.astype(np.int64), -1)
            self.new_oids = user.astype(np.int64)
        else:
            self.dense = DenseIds(np.arange(len(final), dtype=np.int64), len(final), final)
            moved = np.searchsorted(final, old.astype(final.dtype))
            self.old_to_new = np.where(alive, moved, -1).astype(np.int64)
            self.new_oids = np.searchsorted(final, user.astype(final.dtype)).astype(np.int64)
        every = np.arange(len(old))
        self.renumbered = bool(np.any(self.old_to_new[alive] != every[alive]))
        self.num_objects = self.dense.count
        self.old_count = len(old)
        self.regroup = self.renumbered or bool(len(dropped))
        self.drop_rows = np.zeros(len(old) + 1, bool)
        self.drop_rows[gone] = True


def _touched(store: VectorStore, level: Level, plan: _EditPlan, spill: CellSpill, n_new: int) -> Level0Edit:
    """The cells an edit rewrites: those holding rows of the objects losing theirs and those the
    new rows fall in; the listed cells left with no row are emptied. With shards, every other
    listed cell of a shard holding an emptied cell is touched too, so the shard is written
    again whole (or removed, when none of its cells keeps a row)."""
    assert plan.drop_rows is not None
    grid = level.grid
    shape = tuple(int(s) for s in grid.shape)
    owners = level.fragment_owners
    lose = plan.drop_rows[owners.object_id]
    new_cells, new_counts = spill.cells()
    hit = np.unique(owners.cell[lose])
    emptied = np.setdiff1d(hit, np.union1d(owners.cell[~lose], new_cells))
    touched = np.union1d(hit, new_cells)
    shards = shards_of(store, level)
    if shards is not None and len(emptied):
        listed = linear_cells(level.vertices.nonempty - grid.origin, grid)
        unit = np.stack(np.unravel_index(listed, shape), axis=1) // np.asarray(shards)
        gone_units = np.stack(np.unravel_index(emptied, shape), axis=1) // np.asarray(shards)
        width = np.asarray(shape) // np.asarray(shards) + 1
        same = np.isin(
            np.ravel_multi_index(tuple(unit.T), width), np.ravel_multi_index(tuple(gone_units.T), width)
        )
        touched = np.union1d(touched, np.setdiff1d(listed[same], emptied))
    counts = np.zeros(len(touched), np.int64)
    counts[np.searchsorted(touched, new_cells)] = new_counts
    cells = np.stack(np.unravel_index(emptied, shape), axis=1).reshape(-1, grid.ndim)
    return Level0Edit(touched, counts, cells, n_new)
