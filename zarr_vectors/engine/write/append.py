"""Append points to an existing point cloud: only the touched cells and the object tables change.

The new rows are keyed by cell; each touched cell is read back (positions, attributes and
the owner of each row), joined with its new rows and re-encoded exactly as a one-shot
write of the joined rows would encode it. Object ids stay dense and ascending: new ids
that fall between old ones renumber the old objects, and then the owner tables of the
untouched cells are rewritten as well (a few bytes per fragment). Coarser levels are
kept but marked stale (``zarr_vectors_level.stale``) until the pyramid is rebuilt.

The commit goes through :func:`~zarr_vectors.storage.commit.rebuild_session`: a local
store is exchanged whole with its staged copy (unchanged files hard-linked); another
store first gets a placeholder root, so an interrupted append reads as incomplete.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from zarr_vectors.engine.chunks.arrays import CellArray
from zarr_vectors.engine.chunks.pipeline import Pipeline, compression_of
from zarr_vectors.engine.ids import OBJECT_ID_ATTRIBUTE, DenseIds, as_id_array, kept_as_given
from zarr_vectors.engine.level import Level
from zarr_vectors.engine.store import VectorStore, table_values
from zarr_vectors.engine.write import inputs as _inputs
from zarr_vectors.engine.write.builder import StoreBuilder
from zarr_vectors.engine.write.cells import AttributeSpec, EncodedCells, PointCells
from zarr_vectors.engine.write.level0 import fragment_owner_payloads
from zarr_vectors.engine.write.partition import sort_keys
from zarr_vectors.engine.write.spill import CellSpill
from zarr_vectors.engine.write.stream import check_inside, encode_groups, write_cells, written
from zarr_vectors.engine.write.tables import manifests_of, write_object_tables
from zarr_vectors.errors import InputError
from zarr_vectors.format.fragments import FragmentIndex, decode_fragments
from zarr_vectors.format.grid import cell_key
from zarr_vectors.format.kinds import POINT_CLOUD
from zarr_vectors.format.metadata import RootMeta
from zarr_vectors.format.shards import inner_codecs, parse_sharding
from zarr_vectors.format.zarr_json import absent_fill
from zarr_vectors.storage import check_workers, placeholder_root, rebuild_session, writing

__all__ = [
    "STALE_KEY",
    "Footprint",
    "IdPlan",
    "Level0Edit",
    "append_points",
    "linear_cells",
    "new_rows",
    "rewrite_level0",
    "shards_of",
    "union_ids",
]

#: Key of ``zarr_vectors_level`` set on levels above 0 once level 0 has changed under them.
STALE_KEY = "stale"
#: Order of ``arrays_present`` (the one-shot writers' order).
_ORDER = [
    "vertices",
    "vertex_fragments",
    "vertex_attributes",
    "fragment_attributes",
    "object_index",
    "object_attributes",
    "groups",
    "group_attributes",
]


def _rank(family: str) -> int:
    return _ORDER.index(family) if family in _ORDER else len(_ORDER)


#: Touched cells re-encoded per group (old and new rows together).
GROUP_ROWS = 1 << 20


def _specs(level: Level) -> list[AttributeSpec]:
    out = []
    for name, arr in level.vertex_attributes.items():
        attrs = arr.attrs
        row_shape = tuple(int(v) for v in attrs.get("row_shape") or [])
        names = attrs.get("channel_names")
        unit = attrs.get("time_unit")
        out.append(
            AttributeSpec(name, arr.dtype.newbyteorder("<"), row_shape, tuple(names) if names else None, unit)
        )
    return out


def _pipelines(level: Level) -> dict[str, Pipeline]:
    """The codecs the level's arrays already use, per array path (relative to the level)."""
    out = {
        "data": Pipeline.from_codecs(inner_codecs(level.vertices.doc)),
        "fragments": Pipeline.from_codecs(inner_codecs(level.fragments.doc) if level.fragments else []),
    }
    for name, arr in level.vertex_attributes.items():
        out[f"vertex_attributes/{name}"] = Pipeline.from_codecs(inner_codecs(arr.doc))
    if level.fragment_object_ids is not None:
        out["fragment_attributes/object_id"] = Pipeline.from_codecs(
            inner_codecs(level.fragment_object_ids.doc)
        )
    return out


def union_ids(old: np.ndarray, new: np.ndarray) -> np.ndarray:
    if old.dtype != new.dtype:
        both = as_id_array(np.concatenate([old.astype(object), new.astype(object)]), "object ids")
        old, new = both[: len(old)], both[len(old) :]
    return np.union1d(old, new)


def linear_cells(cells: np.ndarray, grid: Any) -> np.ndarray:
    shape = tuple(int(v) for v in grid.shape)
    return np.ravel_multi_index(tuple(cells.T), shape) if len(cells) else np.zeros(0, np.int64)


def _row_owners(index: FragmentIndex, owner: np.ndarray, n_rows: int) -> np.ndarray:
    """The object of each row of a cell from its fragments' owners (-1 where none)."""
    every = np.arange(index.num_fragments)
    sizes = index.ranges[:, 1] if index.all_ranges else [len(index.rows(int(f))) for f in every]
    out = np.full(n_rows, -1, np.int64)
    out[index.rows_of(every)] = np.repeat(owner, sizes)
    return out


class _Cells:
    """Read back the rows of existing cells: positions, attributes and each row's old OID."""

    def __init__(self, level: Level, specs: list[AttributeSpec], objects: bool) -> None:
        self.level, self.specs, self.objects = level, specs, objects
        self.owners = level.fragment_owners if objects else None
        self.listed = linear_cells(level.vertices.nonempty - level.grid.origin, level.grid)

    def read(self, lins: np.ndarray) -> dict[str, np.ndarray]:
        """Rows of the cells ``lins`` (linear indices; cells the level does not list have none)."""
        level, grid, specs = self.level, self.level.grid, self.specs
        lins = lins[np.isin(lins, self.listed)]
        chunks = np.stack(np.unravel_index(lins, tuple(int(v) for v in grid.shape)), axis=1)
        chunks = chunks.reshape(-1, grid.ndim) + grid.origin
        arrays = [level.vertices, *(level.vertex_attributes[s.name] for s in specs)]
        if self.objects:
            assert level.fragments is not None
            arrays.append(level.fragments)
        k = len(chunks)
        raws = level.backend.get_many([a.key(ch) for a in arrays for ch in chunks])
        pos = [level.vertices.rows(raws[i], ch, grid.ndim) for i, ch in enumerate(chunks)]
        out = {"positions": np.concatenate(pos) if pos else np.zeros((0, grid.ndim), level.vertices.dtype)}
        for j, spec in enumerate(specs):
            arr, width = level.vertex_attributes[spec.name], int(np.prod(spec.row_shape))
            vals = [arr.rows(raws[(j + 1) * k + i], ch, width) for i, ch in enumerate(chunks)]
            out[f"a{j}"] = (
                np.concatenate(vals).reshape(-1, *spec.row_shape)
                if vals
                else np.zeros((0, *spec.row_shape), spec.dtype)
            )
        if self.objects:
            assert self.owners is not None and level.fragments is not None
            ids = []
            for i, ch in enumerate(chunks):
                raw = raws[(len(specs) + 1) * k + i]
                index = decode_fragments(level.fragments.payload(raw, ch), len(pos[i]))
                ids.append(
                    _row_owners(index, self.owners.of_cell(int(lins[i]), index.num_fragments), len(pos[i]))
                )
            out["ids"] = np.concatenate(ids) if ids else np.zeros(0, np.int64)
        return out


@writing
def append_points(
    store: VectorStore,
    positions: Any,
    *,
    attributes: Mapping[str, Any] | None = None,
    object_ids: Any = None,
    object_attributes: Mapping[str, Mapping[Any, Any]] | None = None,
    extend: bool = False,
    workers: int | None = None,
    progress: bool | None = None,
    footprint: list[Footprint] | None = None,
) -> RootMeta:
    """Add points to level 0 of a point cloud opened with ``mode="r+"``; return the new root.

    ``footprint``: a list that receives the edit's :class:`Footprint`, for
    :func:`zarr_vectors.pyramid.update.update_levels` (then level 0's cross-level links are
    kept, to be brought up to date with the levels)."""
    store.require_writable()
    root = store.root
    if tuple(root.geometry_types) != (POINT_CLOUD,):
        raise InputError(
            f"append adds points to a point cloud; this store holds {list(root.geometry_types)} "
            "(write lines, skeletons, graphs and meshes again with zarr_vectors.create)"
        )
    level = store.level(0)
    shards_of(store, level)  # an unusual layout is refused before any work
    grid = level.grid
    workers = check_workers(workers)
    pos, values = new_rows(store, level, positions, attributes, "append")
    n = len(pos)
    objects = level.manifests is not None
    user = _inputs.object_id_array(object_ids, n)
    if objects != (user is not None):
        need = "has objects: give object_ids" if objects else "has no objects: leave object_ids out"
        raise InputError(f"this store {need} (one per point)")
    plan = IdPlan(level, user, extend) if user is not None else None
    if object_attributes and plan is None:
        raise InputError("object_attributes need object_ids")
    # New rows by cell; the touched cells are re-encoded with their old rows.
    spill = CellSpill(None)
    cols = {"positions": pos, **{f"a{i}": v for i, v in enumerate(values)}}
    if plan is not None:
        cols["ids"] = plan.new_oids
    spill.add(sort_keys(pos, grid) // grid.n_bins, cols)
    spill.finish()
    touched, counts = spill.cells()
    edit = Level0Edit(touched, counts, np.zeros((0, grid.ndim), np.int64), n)
    return rewrite_level0(store, level, plan, spill, edit, object_attributes, workers, progress, footprint)


def new_rows(
    store: VectorStore, level: Level, positions: Any, attributes: Mapping[str, Any] | None, verb: str
) -> tuple[np.ndarray, list[np.ndarray]]:
    """New points checked against level 0: positions in its dtype, inside the store's bounds,
    and exactly the store's vertex attributes (in :func:`_specs` order)."""
    grid = level.grid
    pos = _inputs.positions_array(positions, grid.ndim)
    n = len(pos)
    if pos.shape[1] != grid.ndim:
        raise InputError(f"positions have {pos.shape[1]} columns but the store has {grid.ndim} axes")
    vdtype = level.vertices.dtype.newbyteorder("<")
    if pos.dtype != vdtype:
        pos = AttributeSpec("positions", vdtype, (grid.ndim,)).conform(pos, n)
    check_inside(pos, np.asarray(store.root.bounds, np.float64), "positions")
    specs = _specs(level)
    given = dict(attributes or {})
    if sorted(given) != sorted(s.name for s in specs):
        raise InputError(
            f"the store's points have attributes {sorted(s.name for s in specs)}; this {verb} gives "
            f"{sorted(given)}: give exactly the store's attributes"
        )
    return pos, [s.conform(given[s.name], n) for s in specs]


@dataclass(frozen=True, eq=False)
class Footprint:
    """What an edit of level 0 touched, for bringing the coarser levels up to date: ``cells``
    (K, D) the absolute chunks of level 0 rewritten or emptied (ascending linear order),
    ``objects`` the object OIDs (after the edit) given rows, ``dropped`` the old OIDs that
    stopped being objects, and whether the surviving objects' OIDs were ``renumbered``."""

    cells: np.ndarray
    objects: np.ndarray
    dropped: np.ndarray
    renumbered: bool


@dataclass(frozen=True)
class Level0Edit:
    """What an edit of level 0 rewrites: the touched cells (linear, ascending; every cell whose
    rows change) with their new row counts, the listed cells left empty (relative indices
    (K, D), none of them given new rows) and the number of new rows."""

    touched: np.ndarray
    new_counts: np.ndarray
    emptied: np.ndarray
    new_rows: int


def rewrite_level0(
    store: VectorStore,
    level: Level,
    plan: IdPlan | None,
    spill: CellSpill,
    edit: Level0Edit,
    object_attributes: Mapping[str, Mapping[Any, Any]] | None,
    workers: int,
    progress: bool | None,
    footprint: list[Footprint] | None = None,
) -> RootMeta:
    """Re-encode the touched cells (old rows kept by ``plan``, joined with the spilled new rows),
    drop the emptied ones, rewrite the object tables and commit; return the new root.

    With ``footprint`` (a list), level 0's cross-level links are kept (they go stale with the
    coarser levels, until :func:`~zarr_vectors.pyramid.update.update_levels` rewrites them) and
    the edit's :class:`Footprint` is appended to the list once the edit is committed."""
    grid = level.grid
    shards = shards_of(store, level)
    vdtype = level.vertices.dtype.newbyteorder("<")
    specs = _specs(level)
    objects = level.manifests is not None
    num_objects = plan.num_objects if plan is not None else 0
    cells = PointCells(grid, _pipelines(level), specs, objects=objects, owners=num_objects > 1)
    arrays = _cell_arrays(level)
    encode = _Joiner(_Cells(level, specs, objects), spill, plan, cells, edit.touched)
    groups = _groups(edit.touched, edit.new_counts, level, GROUP_ROWS)
    hidden = _hidden_tables(level, plan, keep_links=footprint is not None)
    if level.fragment_object_ids is not None and not cells.owners:
        hidden += ("0/fragment_attributes/",)  # one object left: a one-shot write has no owner table
    gone = set(_emptied_keys(arrays, edit.emptied, shards))
    with rebuild_session(
        store.backend,
        hidden=lambda key: key.startswith(hidden) or key in gone,
        first={"zarr.json": placeholder_root()},
        wait=store.wait,
    ) as overlay:
        name, clevel = compression_of(inner_codecs(level.vertices.doc) or [])
        checksums = any(c.get("name") == "crc32c" for c in inner_codecs(level.vertices.doc) or [])
        builder = StoreBuilder(overlay, name, clevel, checksums=checksums, shards=shards)
        if shards is None:
            encode.target = overlay  # each worker writes the cells it encoded
        else:  # the touched shards are rewritten whole, their other cells kept, at commit
            builder.merge_shards(
                grid,
                level.backend.get_many,
                {f"0/{p}": _without(a.nonempty - grid.origin, edit.emptied, grid) for p, a in arrays.items()},
            )
        occupied, fragments = write_cells(
            builder, cells, encode_groups(encode, groups, workers), vdtype, len(groups), progress
        )
        new_cells = np.concatenate(occupied) if occupied else np.zeros((0, grid.ndim), np.int64)
        _register(builder, level, cells, new_cells, vdtype, edit.emptied)
        present = set(level.meta.arrays_present) - ({"links"} if footprint is None else set())
        if plan is not None:
            present -= {"object_index", "object_attributes", *(["groups"] if plan.regroup else [])}
            present |= _finish_objects(builder, level, plan, edit.touched, fragments, object_attributes)
        if cells.owners:
            present.add("fragment_attributes")
        else:
            present.discard("fragment_attributes")
        count = level.meta.vertex_count + edit.new_rows - sum(encode.dropped)
        new_root = _finish_levels(builder, store, level, count, present)
    store.replace_root(new_root)
    if footprint is not None:
        footprint.append(_footprint(level, plan, edit))
    return new_root


def _footprint(level: Level, plan: IdPlan | None, edit: Level0Edit) -> Footprint:
    grid = level.grid
    shape = tuple(int(v) for v in grid.shape)
    lin = np.union1d(edit.touched, linear_cells(edit.emptied, grid))
    cells = np.stack(np.unravel_index(lin, shape), axis=1).reshape(-1, grid.ndim) + grid.origin
    z = np.zeros(0, np.int64)
    if plan is None:
        return Footprint(cells, z, z, False)
    dropped = np.flatnonzero(plan.old_to_new < 0) if plan.drop_rows is not None else z
    return Footprint(cells, np.unique(plan.new_oids), dropped, plan.renumbered)


def _without(cells: np.ndarray, emptied: np.ndarray, grid: Any) -> np.ndarray:
    """The rows of ``cells`` (K, D, relative indices) that are not in ``emptied`` (E, D)."""
    if not len(emptied) or not len(cells):
        return cells
    return cells[~np.isin(linear_cells(cells, grid), linear_cells(emptied, grid))]


def _emptied_keys(
    arrays: Mapping[str, CellArray], emptied: np.ndarray, shards: tuple[int, ...] | None
) -> list[str]:
    """Store keys an edit removes: the emptied cells of every cell array, or with ``shards`` the
    shards of emptied cells (the caller touches every other listed cell of those shards, so a
    shard that keeps any row is written again)."""
    if not len(emptied):
        return []
    units = emptied if shards is None else np.unique(emptied // np.asarray(shards), axis=0)
    return [f"0/{p}/{cell_key(u)}" for p in arrays for u in units]


class _Joiner:
    """Encode a group of touched cells: their old rows read back (less the rows of objects the
    plan drops) and joined with the new ones (old first, so rows keep the order a one-shot
    write of everything gives); written to ``target`` once it is set. ``dropped`` counts the
    old rows left out, one entry per group."""

    def __init__(
        self, old: _Cells, spill: CellSpill, plan: IdPlan | None, cells: PointCells, touched: np.ndarray
    ) -> None:
        self.old, self.spill, self.plan, self.cells, self.touched = old, spill, plan, cells, touched
        self.target: Any = None
        self.dropped: list[int] = []

    def __call__(self, lo: int, hi: int) -> EncodedCells:
        before = self.old.read(self.touched[(self.touched >= lo) & (self.touched < hi)])
        after = self.spill.read(lo, hi) or {k: v[:0] for k, v in before.items()}  # no new rows at all
        oids = None
        if self.plan is not None:
            if self.plan.drop_rows is not None:
                keep = ~self.plan.drop_rows[before["ids"]]
                self.dropped.append(len(keep) - int(np.count_nonzero(keep)))
                before = {k: v[keep] for k, v in before.items()}
            oids = np.concatenate([self.plan.remap(before["ids"]), after["ids"]])
        joined = [
            np.concatenate([before[f"a{i}"], after[f"a{i}"]]) for i in range(len(self.cells.attributes))
        ]
        done = self.cells.encode(np.concatenate([before["positions"], after["positions"]]), joined, oids)
        return done if self.target is None else written(self.target, done)


def _groups(cells: np.ndarray, new: np.ndarray, level: Level, max_rows: int) -> list[tuple[int, int]]:
    """Ranges of the touched ``cells`` (linear, ascending; ``new`` rows each) of about ``max_rows``
    old and new rows each (the old rows of a cell estimated as the level's mean per listed
    cell), so memory holds a few groups."""
    listed = max(len(level.vertices.nonempty), 1)
    old = level.meta.vertex_count // listed
    out, start, acc = [], 0, 0
    for i, n in enumerate((new + old).tolist()):
        if acc and acc + n > max_rows:
            out.append((int(cells[start]), int(cells[i])))
            start, acc = i, 0
        acc += n
    if len(cells):
        out.append((int(cells[start]), int(cells[-1]) + 1))
    return out


def _hidden_tables(level: Level, plan: IdPlan | None, keep_links: bool = False) -> tuple[str, ...]:
    """Key prefixes an append replaces whole: the object tables, and level 0's links to level 1
    (they name rows of the cells being rewritten; the pyramid rebuild writes them anew), unless
    ``keep_links`` (a level update follows and rewrites those of the cells it recomputes)."""
    out = [] if keep_links else ["0/links/"]
    if plan is None:
        return tuple(out)
    out += ["0/object_index/", "0/object_attributes/"]
    if plan.regroup:
        out += ["0/groups/"]
    return tuple(out)


class IdPlan:
    """Old and new object ids: the OID space after the append, old OIDs -> new OIDs, new rows' OIDs.

    The joined ids are kept as given when the store's objects with rows and the new ids pass
    :func:`~zarr_vectors.engine.ids.kept_as_given`; else they are remapped, every old OID keeping
    its place (a store whose ids were kept switches to an ``object_id`` table without moving an
    old object, unless a new id sorts below an old one, such as a negative id).
    """

    def __init__(self, level: Level, user: np.ndarray, extend: bool) -> None:
        id_map = level.object_id_map
        old = id_map.ids()
        new = np.unique(user)
        # Kept ids have empty OIDs between them: only those with rows are objects.
        had = old if id_map.user is not None else np.unique(level.fragment_owners.object_id)
        if id_map.user is None and new.dtype == np.uint64:
            # kept ids (no table) carry no dtype and are non-negative: they take the given
            # ids' uint64, so the table an append writes has a one-shot write's dtype
            old, had = old.astype(np.uint64), had.astype(np.uint64)
        if len(had) and not extend:
            clash = np.isin(new, had.astype(new.dtype)) if had.dtype == new.dtype else _clash(had, new)
            if clash.any():
                first = new[np.argmax(clash)]
                raise InputError(
                    f"{int(clash.sum())} of these object ids are already in the store (first: {int(first)}); "
                    "pass extend=True to add points to those objects, or give new ids"
                )
        joined = union_ids(had, new)
        negative = joined.dtype.kind == "i" and len(joined) and int(joined[0]) < 0
        if not negative and len(joined) and kept_as_given(int(joined[-1]), len(joined)):
            count = max(int(joined[-1]) + 1, len(old))
            self.dense = DenseIds(joined.astype(np.int64), count, None)
            self.old_to_new = old.astype(np.int64)
            self.new_oids = user.astype(np.int64)
        else:
            union = union_ids(old, new)
            self.dense = DenseIds(np.arange(len(union), dtype=np.int64), len(union), union)
            self.old_to_new = np.searchsorted(union, old.astype(union.dtype)).astype(np.int64)
            self.new_oids = np.searchsorted(union, user.astype(union.dtype)).astype(np.int64)
        self.renumbered = bool(len(old)) and not np.array_equal(self.old_to_new, np.arange(len(old)))
        self.num_objects = self.dense.count
        self.old_count = len(old)
        #: Whether group members change (renumbered, or objects dropped: ``old_to_new`` -1).
        self.regroup = self.renumbered
        #: Per old OID, whether its rows are dropped (edits; None on append).
        self.drop_rows: np.ndarray | None = None

    def remap(self, oids: np.ndarray) -> np.ndarray:
        """New OIDs of old ones (-1, no object, stays -1)."""
        out = np.asarray(oids, np.int64).copy()
        ok = out >= 0
        out[ok] = self.old_to_new[out[ok]]
        return out


def _clash(old: np.ndarray, new: np.ndarray) -> np.ndarray:
    """Which of ``new`` are in ``old`` when their dtypes differ (int64 against uint64)."""
    union = union_ids(old, new)
    return np.isin(
        np.searchsorted(union, new.astype(union.dtype)), np.searchsorted(union, old.astype(union.dtype))
    )


def _cell_arrays(level: Level) -> dict[str, CellArray]:
    """The per-chunk arrays of level 0 an append rewrites, by path below ``0/``."""
    out: dict[str, CellArray] = {"vertices": level.vertices}
    if level.fragments is not None:
        out["vertex_fragments"] = level.fragments
    out |= {f"vertex_attributes/{n}": a for n, a in level.vertex_attributes.items()}
    if level.fragment_object_ids is not None:
        out["fragment_attributes/object_id"] = level.fragment_object_ids
    return out


def shards_of(store: VectorStore, level: Level) -> tuple[int, ...] | None:
    """Chunks per shard of level 0's cell arrays (None: unsharded); all must agree."""
    layouts = [parse_sharding(a.path, a.doc) for a in _cell_arrays(level).values()]
    cps = {None if lay is None else lay.chunks_per_shard for lay in layouts}
    usual = all(lay is None or (lay.index_location == "end" and lay.checksum) for lay in layouts)
    if len(cps) != 1 or not usual:
        raise InputError(
            f"{store.description}: the cell arrays of level 0 are sharded differently from one another (or "
            "with a shard index this library does not write), which append cannot keep; rewrite the store "
            "with one layout first (zarr_vectors.reshard), then append"
        )
    return cps.pop()


def _register(
    builder: StoreBuilder,
    level: Level,
    cells: PointCells,
    new_cells: np.ndarray,
    dtype: np.dtype,
    emptied: np.ndarray,
) -> None:
    """Every cell array's ``zarr.json``: its old document with the joined ``nonempty_chunks``
    (the ``emptied`` cells left out)."""
    grid = level.grid
    listed = _without(level.vertices.nonempty - grid.origin, emptied, grid)
    every = np.unique(np.concatenate([listed.reshape(-1, grid.ndim), new_cells]), axis=0)
    lin = (
        np.ravel_multi_index(tuple(every.T), tuple(int(s) for s in grid.shape))
        if len(every)
        else np.zeros(0, np.int64)
    )
    every = every[np.argsort(lin)]
    docs = {
        "vertices": level.vertices.doc,
        "vertex_fragments": level.fragments.doc if level.fragments else None,
    }
    docs |= {f"vertex_attributes/{n}": a.doc for n, a in level.vertex_attributes.items()}
    if level.fragment_object_ids is not None:
        docs["fragment_attributes/object_id"] = level.fragment_object_ids.doc
    metas = cells.metas(dtype)
    for path in cells.paths():
        doc = docs.get(path)
        if doc is None:  # an owner table the store did not need before
            builder.group("0/fragment_attributes")
            builder.register_cells(f"0/{path}", grid, every, metas[path][0], metas[path][1])
            continue
        doc = json.loads(json.dumps(doc))
        doc["attributes"]["nonempty_chunks"] = [".".join(str(int(v)) for v in c) for c in every + grid.origin]
        builder.arrays[f"0/{path}"] = doc


def _finish_objects(
    builder: StoreBuilder,
    level: Level,
    plan: IdPlan,
    touched: np.ndarray,
    fragments: list[tuple[np.ndarray, np.ndarray, np.ndarray]],
    object_attributes: Mapping[str, Mapping[Any, Any]] | None,
) -> set[str]:
    """Manifests, object attributes and groups for the joined objects; owners of untouched cells."""
    grid = level.grid
    shape = tuple(int(s) for s in grid.shape)
    owners = level.fragment_owners
    keep = ~np.isin(owners.cell, touched)
    obj = plan.remap(owners.object_id[keep])
    cell = owners.cell[keep]
    chunks = np.stack(np.unravel_index(cell, shape), axis=1).reshape(-1, grid.ndim) + grid.origin
    local = owners.fragment[keep]
    if plan.num_objects > 1 and (plan.renumbered or level.fragment_object_ids is None):
        # The untouched cells' owner tables name old OIDs (or do not exist yet): rewrite them.
        pipe = _owner_pipeline(builder, level)
        ucell, inverse = np.unique(cell, return_inverse=True)
        payloads = fragment_owner_payloads(inverse.reshape(-1), local, obj, len(ucell))
        for c, p in zip(np.stack(np.unravel_index(ucell, shape), axis=1).reshape(-1, grid.ndim), payloads):
            builder.put(f"0/fragment_attributes/object_id/{cell_key(c)}", pipe.encode(p))
    for f_obj, f_chunks, f_local in fragments:
        obj = np.concatenate([obj, f_obj])
        chunks = np.concatenate([chunks, f_chunks])
        local = np.concatenate([local, f_local])
    manifests = manifests_of(obj, chunks, local, plan.num_objects)
    oattrs = _object_tables(level, plan, object_attributes)
    groups: list[np.ndarray] = []
    if level.groups is not None and plan.regroup:
        members = [plan.old_to_new[m] for m in level.group_members]
        groups = [m[m >= 0] for m in members]  # dropped objects leave their groups
    names = None
    if level.groups is not None:
        names = level.groups.attrs.get("group_names")
    present = write_object_tables(
        builder,
        "0",
        sid_ndim=grid.ndim,
        num_objects=plan.num_objects,
        manifests=manifests,
        object_attributes=oattrs,
        groups=groups,
        group_attributes=[],
        group_names=names if plan.regroup else None,
    )
    return set(present)


def _owner_pipeline(builder: StoreBuilder, level: Level) -> Pipeline:
    if level.fragment_object_ids is not None:
        return Pipeline.from_codecs(inner_codecs(level.fragment_object_ids.doc))
    return Pipeline.from_codecs([{"name": "vlen-bytes"}, *builder.compressors("data")])


def _object_tables(
    level: Level, plan: IdPlan, given: Mapping[str, Mapping[Any, Any]] | None
) -> list[_inputs.NamedArray]:
    """Old object attribute rows moved to their new OIDs, the new objects' rows absent or given."""
    out = []
    given = dict(given or {})
    for name, arr in level.object_attributes.items():
        if name == OBJECT_ID_ATTRIBUTE:
            continue
        old = table_values(level, arr)[: plan.old_count]
        values = np.full((plan.num_objects, *old.shape[1:]), absent_fill(old.dtype), old.dtype)
        moved = plan.old_to_new[: len(old)]
        values[moved[moved >= 0]] = old[moved >= 0]  # rows of dropped objects (-1) go
        rows = given.pop(name, None)
        if rows is not None:
            if not isinstance(rows, Mapping):
                raise InputError(
                    f"object_attributes[{name!r}] must be a mapping {{object id: value}} on append"
                )
            oids = plan.dense.id_map().to_oids(list(rows))
            given_values = np.asarray(list(rows.values()))
            if old.dtype.kind == "U":  # a longer name widens the column
                _inputs.check_utf8(given_values.astype(str), f"object attribute {name!r}")
                values = values.astype(np.result_type(values.dtype, given_values.dtype))
            values[oids] = given_values
        out.append(_inputs.NamedArray(name, values))
    if given:
        raise InputError(
            f"object_attributes {sorted(given)} are not in this store; an append can fill the store's "
            f"own object attributes only ({sorted(n for n in level.object_attributes if n != OBJECT_ID_ATTRIBUTE)})"
        )
    if plan.dense.user is not None:
        user = plan.dense.user
        out.insert(0, _inputs.NamedArray(OBJECT_ID_ATTRIBUTE, user.astype(user.dtype.newbyteorder("<"))))
    return out


def _finish_levels(
    builder: StoreBuilder, store: VectorStore, level: Level, vertex_count: int, present: set[str]
) -> RootMeta:
    """Level 0's new metadata (``vertex_count`` rows), coarser levels marked stale, the root last."""
    meta = replace(level.meta, vertex_count=vertex_count, arrays_present=tuple(sorted(present, key=_rank)))
    raw = store.backend.get_many(["0/zarr.json"])[0]
    assert raw is not None
    doc = json.loads(raw)
    doc.setdefault("attributes", {})["zarr_vectors_level"] = meta.to_json()
    builder.groups["0"] = doc
    for k in store.levels:
        if k == 0:
            continue
        raw = store.backend.get_many([f"{k}/zarr.json"])[0]
        if raw is None:
            continue
        kdoc = json.loads(raw)
        kdoc.setdefault("attributes", {}).setdefault("zarr_vectors_level", {})[STALE_KEY] = True
        builder.groups[str(k)] = kdoc
    root = store.root
    builder.commit(root.to_attributes())
    return root
