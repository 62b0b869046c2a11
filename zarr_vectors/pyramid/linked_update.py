"""Bringing the coarse levels of lines, skeletons, graphs and raw meshes up to date, region by region.

A coarse level of these kinds is built object by object (Douglas-Peucker per chain, mesh
decimation per object): an object's coarse geometry depends on that object alone. So the
update after an edit of level 0 is the same edit at every coarse level: the old coarse
geometry of the deleted and replaced objects goes, and the new objects' coarse geometry
comes in, simplified from the new objects alone with the recorded settings (a pyramid of
the edit's scratch store, built by :func:`~zarr_vectors.pyramid.build_pyramid`).
:func:`~zarr_vectors.engine.edit_linked` makes that edit at level k (only the cells holding
those objects are rebuilt, the cross-chunk links pointing into them remapped, the object
tables written again) and reports each rebuilt cell's row maps; :func:`rewrite_cross_level`
then rewrites the cross-level link cells (``k-1/links/+1``, ``k/links/-1``) that name a
rebuilt row on either side: the old records with both endpoints remapped (those of gone
objects dropped), and the new objects' records from the scratch pyramid, mapped the same way.
Every other cell file of every level keeps its bytes.

Invariant: afterwards every level answers every query (boxes, objects by id, cross-level
parents) as a full build with the same settings does. Files can differ from a full build's in
the order of rows inside a rebuilt cell only where the level-0 edit's can (see
:mod:`zarr_vectors.engine.write.linkedit`); cross-level link cells are written in the build's
record order (by row, then the other endpoint).

Where the update cannot be exact, :func:`linked_rebuild_reason` names why and the levels are
rebuilt whole instead: Draco levels (an edit rebuilds raw cells only), object sparsity (the
objects a level keeps are chosen over the whole level), levels already stale
before the edit, level 0 without its cross-level links, or (found while updating) an edit
that changes a cross-level link dtype (sized on the fullest cell of the level pair) or gives a
sharded cross-level family a new offsets segment. Sharded levels are edited shard by shard: the
object edits rewrite the shards holding a rebuilt cell, the cross-level cells go through
:class:`~zarr_vectors.pyramid.update_shards.ShardWriteBack`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from zarr_vectors.engine import Level, LinkArray, Pipeline, StoreBuilder, VectorStore, edit_linked
from zarr_vectors.errors import InputError, StaleLevelWarning
from zarr_vectors.format.grid import cell_key, chunk_key
from zarr_vectors.format.links import cross_level_anchor, encode_ragged, format_offsets, parse_offsets
from zarr_vectors.format.shards import inner_codecs, parse_sharding
from zarr_vectors.pyramid._store import checksums_of, compression_of, read_doc, rows_per_chunk
from zarr_vectors.pyramid.build import build_pyramid, stored_settings
from zarr_vectors.pyramid.points import level_ratio
from zarr_vectors.pyramid.together import committing
from zarr_vectors.pyramid.update_shards import ShardWriteBack
from zarr_vectors.pyramid.xlevel import link_dtype
from zarr_vectors.storage import placeholder_root, rebuild_session

__all__ = [
    "CROSS_LEVEL_UPDATES",
    "LinkedUpdate",
    "NotRegional",
    "counted",
    "linked_rebuild_reason",
    "rewrite_cross_level",
    "update_linked_levels",
]

log = logging.getLogger(__name__)

#: Counts of the level updates of linked kinds done region by region and rebuilt whole (by
#: reason), for tests and benchmarks to tell which path an update took.
CROSS_LEVEL_UPDATES: dict[str, int] = {"regional": 0, "rebuilt": 0}


class NotRegional(Exception):
    """A condition found while updating that a region-wise update cannot reproduce."""


def linked_rebuild_reason(store: VectorStore, settings: dict[str, Any] | None = None) -> str | None:
    """Why the coarse levels of a linked store (lines, skeletons, graphs, raw meshes) cannot be
    updated region by region after an edit of its objects (None: they can)."""
    settings = stored_settings(store) if settings is None else settings
    for k in store.levels:
        level = store.level(k)
        if level.vertices.draco:
            return f"level {k} is Draco-encoded, and edits rebuild raw cells only"
        if k and store.is_stale(k):
            return f"level {k} was stale before the edit"
        if level.grid.n_bins != 1:
            return f"level {k} has {level.grid.n_bins} bins per chunk; object edits need one"
        if level.manifests is None or level.fragments is None:
            return f"level {k} has no object index"
    if any(s is not None for s in settings["object_sparsity"]):
        return "object sparsity chooses the objects a level keeps over the whole level"
    if settings["cross_level"] != "none" and read_doc(store.backend, "0/links/+1/zarr.json") is None:
        return "level 0 has no cross-level links (an edit made without a level update dropped them)"
    return None


def update_linked_levels(
    store: VectorStore,
    first: Any,
    scratch: VectorStore | None,
    *,
    delete: Any = None,
    replace: Any = None,
    settings: dict[str, Any],
    progress: bool = False,
) -> None:
    """Edit every coarse level of ``store`` as the level-0 edit ``first`` (a
    :class:`~zarr_vectors.engine.write.linkedit.LevelEdit`) edited level 0: delete the objects
    ``delete`` and ``replace``, add the objects of ``scratch`` (the edit's new objects, a store
    on the same grid, opened ``mode="r+"``: its pyramid is built here with ``settings``), and
    rewrite the cross-level link cells naming a rebuilt row. NotRegional when an edit changes a
    cross-level link dtype (nothing of the current level pair's links is written then)."""
    explicit = settings["cross_level"] == "explicit"
    if scratch is not None:
        keywords = {k: v for k, v in settings.items() if k != "factors"}
        build_pyramid(scratch, settings["factors"], progress=progress, **keywords)
    below = first
    with warnings.catch_warnings():  # the levels are stale until each is edited
        warnings.simplefilter("ignore", StaleLevelWarning)
        for k in store.levels[1:]:
            edit = edit_linked(
                store,
                delete=delete,
                replace=replace,
                added=scratch,
                index=k,
                keep_cross_level=True,
                direct=committing(store),
            )
            if settings["cross_level"] != "none":
                rewrite_cross_level(store, below, edit, scratch, explicit)
            below = edit


class LinkedUpdate:
    """The level update an edit of a linked store runs inside its scratch context, when the
    levels can be updated region by region: ``reason`` is None then, and :attr:`done` True once
    every level is up to date (else the caller rebuilds the levels; ``reason`` says why)."""

    def __init__(self, store: VectorStore, progress: bool = False) -> None:
        self.store, self.progress, self.done = store, progress, False
        self.settings: dict[str, Any] = {}
        self.reason: str | None
        try:
            self.settings = stored_settings(store)
        except InputError as exc:
            self.reason = str(exc)
        else:
            self.reason = linked_rebuild_reason(store, self.settings)

    @property
    def direct(self) -> bool:
        """Whether the edits may write straight into the store's backend (inside :func:`one_commit`)."""
        return committing(self.store)

    def __call__(self, edit: Any, scratch: VectorStore | None, delete: Any, replace: Any) -> None:
        """Update the levels after the level-0 ``edit`` (made keeping level 0's cross-level links)."""
        try:
            update_linked_levels(
                self.store,
                edit,
                scratch,
                delete=delete,
                replace=replace,
                settings=dict(self.settings),
                progress=self.progress,
            )
            self.done = True
        except NotRegional as exc:
            self.reason = str(exc)
        counted(self.reason)


@dataclass(eq=False)
class _Side:
    """One level of a link family: its index, grid, chunk scale and the edit that rebuilt it."""

    level: Level
    ratio: np.ndarray
    edit: Any  # LevelEdit

    def lin(self, chunks: np.ndarray) -> np.ndarray:
        grid = self.level.grid
        if not len(chunks):
            return np.zeros(0, np.int64)
        shape = tuple(int(s) for s in grid.shape)
        return np.asarray(np.ravel_multi_index(tuple((chunks - grid.origin).T), shape), np.int64)

    def remap(self, lin: int, rows: np.ndarray, source: int) -> np.ndarray:
        """Rows of cell ``lin`` after the edit (-1: gone); unchanged in a cell it did not rebuild."""
        cell = self.edit.merged.get(lin)
        if cell is None:
            if source == 1:
                raise NotRegional("a new object's cross-level link names a cell the edit did not rebuild")
            return rows
        return np.asarray(cell.row_map[source], np.int64)[rows]


def _family_arrays(backend: Any, path: str, ndim: int) -> dict[str, LinkArray]:
    """The link arrays of one cross-level family, by offsets segment."""
    out: dict[str, LinkArray] = {}
    delta = int(path.rsplit("/", 1)[1])
    for seg in backend.list_dir(path):
        doc = read_doc(backend, f"{path}/{seg}/zarr.json")
        if doc is None:
            continue
        arr, _ = LinkArray.parse(f"{path}/{seg}", doc, segment=seg, link_width=2, delta=delta, ndim=ndim)
        if arr is not None:
            out[seg] = arr
    return out


def _records(arr: LinkArray, backend: Any, chunks: np.ndarray) -> list[np.ndarray]:
    """The (M, 2) records of each chunk of ``chunks`` (absolute) of one link array."""
    raws = backend.get_many(arr.keys(chunks)) if len(chunks) else []
    return [arr.records(raw, c)[0] for raw, c in zip(raws, chunks)]


def rewrite_cross_level(
    store: VectorStore, fine_edit: Any, coarse_edit: Any, scratch: VectorStore | None, explicit: bool
) -> None:
    """Rewrite the cells of ``fine/links/+1`` (and with ``explicit`` ``coarse/links/-1``) that
    name a row the two level edits rebuilt, in one commit."""
    fine, coarse = store.level(fine_edit.index), store.level(coarse_edit.index)
    f = _Side(fine, level_ratio(fine), fine_edit)
    c = _Side(coarse, level_ratio(coarse), coarse_edit)
    _check_dtype(store, f, c)
    families = [(f"{fine.index}/links/+{coarse.index - fine.index}", f, c)]
    if explicit:
        families.append((f"{coarse.index}/links/-{coarse.index - fine.index}", c, f))
    plans = [_plan_family(store, path, home, other, scratch) for path, home, other in families]
    sharded = any(plan.sharded for plan in plans)
    direct = committing(store)  # inside one_commit: written straight into its overlay
    removed = set() if sharded or direct else {key for plan in plans for key in plan.removed}
    name, clevel = compression_of(fine)
    session = (
        contextlib.nullcontext(store.backend)
        if direct
        else rebuild_session(
            store.backend,
            hidden=lambda key: key in removed,
            first={"zarr.json": placeholder_root()},
            wait=store.wait,
        )
    )
    with session as raw:
        overlay: Any = ShardWriteBack(raw) if sharded else raw
        builder = StoreBuilder(overlay, name, clevel, checksums=checksums_of(fine), shards=None)
        for plan in plans:
            for prefix in plan.dropped:
                overlay.delete_prefix(prefix)
            if sharded or direct:  # sharded: the cells go through their shards, rewritten at the flush
                overlay.delete_many(sorted(plan.removed))
            plan.write(builder, overlay)
        builder.commit(store.root.to_attributes())
        if sharded:
            overlay.flush()
    for plan in plans:  # their keys are gone; an enclosing overlay forgets the folders too
        for prefix in plan.dropped:
            parent, _, name = prefix.rpartition("/")
            if name in store.backend.list_dir(parent):
                store.backend.delete_prefix(prefix)
    store.replace_root(store.root)


def _check_dtype(store: VectorStore, f: _Side, c: _Side) -> None:
    """NotRegional when the pair's link dtype (sized by a build on the most rows of one cell of
    either level) is not the stored one any more."""
    path = f"{f.level.index}/links/+{c.level.index - f.level.index}"
    stored = {a.dtype for a in _family_arrays(store.backend, path, f.level.grid.ndim).values()}
    if len(stored) != 1:
        return
    have = next(iter(stored))
    touched = [len(m.data.positions) for side in (f, c) for m in side.edit.merged.values()]
    need = link_dtype(max(touched, default=1))
    if need.itemsize < have.itemsize:  # the edit may have emptied the fullest cell: count them all
        most = max(int(rows_per_chunk(side.level)[1].max(initial=1)) for side in (f, c))
        need = link_dtype(most)
    if need != have:
        raise NotRegional(
            f"the edit changes the cross-level link dtype of level {f.level.index} ({have} -> {need})"
        )


@dataclass(eq=False)
class _FamilyPlan:
    """The cells of one family to write (path -> {absolute chunk key: (chunk, records)}) and to remove."""

    path: str
    docs: dict[str, dict[str, Any]]
    listed: dict[str, np.ndarray]
    cells: dict[str, dict[tuple[int, ...], np.ndarray]]
    removed: set[str]
    dropped: list[str]  # arrays left without a cell
    sharded: bool
    group: dict[str, Any] | None
    delta: int
    dtype: np.dtype
    grid_origin: np.ndarray

    def write(self, builder: StoreBuilder, overlay: Any) -> None:
        """Queue the cells and documents; a new array of a sharded family has its document
        staged first, so that its cells find their shards."""
        for seg, cells in sorted(self.cells.items()):
            apath = f"{self.path}/{seg}"
            doc = json.loads(json.dumps(self.docs[seg]))
            if seg not in self.listed and self.sharded:
                overlay.set_many([(f"{apath}/zarr.json", json.dumps(doc).encode())])
            pipe = Pipeline.from_codecs(inner_codecs(doc))
            listed = {tuple(int(v) for v in ch) for ch in self.listed.get(seg, np.zeros((0, 0), np.int64))}
            for chunk, rows in cells.items():
                if len(rows):
                    payload = encode_ragged([rows], self.dtype)
                    rel = np.asarray(chunk, np.int64) - self.grid_origin
                    builder.put(f"{apath}/{cell_key(rel)}", pipe.encode(payload))
                    listed.add(chunk)
                else:
                    listed.discard(chunk)
            every = np.asarray(sorted(listed), np.int64).reshape(-1, len(self.grid_origin))
            if not len(every):
                continue
            doc["attributes"]["nonempty_chunks"] = [chunk_key(ch) for ch in every]
            builder.arrays[apath] = doc
        if self.group is not None:
            group = json.loads(json.dumps(self.group))
            attrs = group["attributes"]
            for key in ("num_links", "num_physical_records"):
                attrs[key] = int(attrs.get(key, 0)) + self.delta
            builder.groups[self.path] = group


def _plan_family(
    store: VectorStore, path: str, home: _Side, other: _Side, scratch: VectorStore | None
) -> _FamilyPlan:
    """The records of every cell of family ``path`` (stored at ``home``, naming rows of
    ``other``) that names a rebuilt row: the old ones remapped, the scratch pyramid's added."""
    backend = store.backend
    ndim = home.level.grid.ndim
    arrays = _family_arrays(backend, path, ndim)
    fresh = _family_arrays(scratch.backend, path, ndim) if scratch is not None else {}
    anchor = lambda chunks: cross_level_anchor(chunks, home.ratio, other.ratio)  # noqa: E731
    gathered: dict[tuple[int, ...], list[tuple[np.ndarray, np.ndarray]]] = {}
    delta = 0
    dtype = next(iter(arrays.values())).dtype if arrays else None
    for seg, arr in arrays.items():
        off = parse_offsets(seg, 2, ndim).reshape(ndim)
        listed = arr.nonempty
        hit = np.isin(home.lin(listed), home.edit.touched) | np.isin(
            other.lin(anchor(listed) + off), other.edit.touched
        )
        for chunk, rows in zip(listed[hit], _records(arr, backend, listed[hit])):
            delta -= len(rows)
            mapped = _map_rows(rows, chunk, anchor(chunk[None])[0] + off, home, other, 0)
            gathered.setdefault(tuple(int(v) for v in chunk), []).append(
                (mapped, anchor(chunk[None])[0] + off)
            )
    for seg, arr in fresh.items():
        off = parse_offsets(seg, 2, ndim).reshape(ndim)
        dtype = arr.dtype if dtype is None else dtype
        listed = arr.nonempty
        for chunk, rows in zip(listed, _records(arr, scratch.backend, listed)):  # type: ignore[union-attr]
            mapped = _map_rows(rows, chunk, anchor(chunk[None])[0] + off, home, other, 1)
            gathered.setdefault(tuple(int(v) for v in chunk), []).append(
                (mapped, anchor(chunk[None])[0] + off)
            )
    assert dtype is not None or not gathered
    cells: dict[str, dict[tuple[int, ...], np.ndarray]] = {}
    for chunk, parts in gathered.items():
        base = anchor(np.asarray(chunk, np.int64)[None])[0]
        for rows, target in parts:
            seg = format_offsets((target - base).reshape(1, ndim))
            cells.setdefault(seg, {}).setdefault(chunk, np.zeros((0, 2), np.int64))
            cells[seg][chunk] = np.concatenate([cells[seg][chunk], rows])
    for seg in cells:
        for chunk, rows in cells[seg].items():
            cells[seg][chunk] = rows[np.lexsort((rows[:, 1], rows[:, 0]))]
            delta += len(rows)
    docs = {seg: arr.doc for seg, arr in arrays.items()}
    for seg in cells:
        if seg not in docs:
            docs[seg] = _new_doc(fresh, arrays, seg, ndim)
    removed: set[str] = set()
    dropped: list[str] = []
    for seg, arr in arrays.items():
        gone = [np.asarray(ch, np.int64) for ch, rows in cells.get(seg, {}).items() if not len(rows)]
        removed.update(arr.key(ch) for ch in gone)
        left = {tuple(int(v) for v in ch) for ch in arr.nonempty} - {tuple(int(v) for v in g) for g in gone}
        if not left and not any(len(r) for r in cells.get(seg, {}).values()):
            dropped.append(f"{path}/{seg}")
    return _FamilyPlan(
        path,
        docs,
        {seg: arr.nonempty for seg, arr in arrays.items()},
        cells,
        removed,
        dropped,
        any(parse_sharding(a.path, a.doc) is not None for a in arrays.values()),
        read_doc(backend, f"{path}/zarr.json")
        or (read_doc(scratch.backend, f"{path}/zarr.json") if scratch else None),
        delta,
        np.dtype(dtype if dtype is not None else "uint32"),
        home.level.grid.origin,
    )


def _map_rows(
    rows: np.ndarray, chunk: np.ndarray, target: np.ndarray, home: _Side, other: _Side, source: int
) -> np.ndarray:
    """Records ``(home row, other row)`` of home ``chunk`` naming ``target`` after both edits
    (records of gone rows dropped)."""
    a = home.remap(int(home.lin(chunk[None])[0]), rows[:, 0], source)
    b = other.remap(int(other.lin(target[None])[0]), rows[:, 1], source)
    keep = (a >= 0) & (b >= 0)
    if np.any((a >= 0) != (b >= 0)):
        raise NotRegional("a cross-level link joins a row that stays to one that goes")
    return np.stack([a[keep], b[keep]], axis=1)


def _new_doc(
    fresh: dict[str, LinkArray], arrays: dict[str, LinkArray], seg: str, ndim: int
) -> dict[str, Any]:
    """The document of a segment the family did not have: a sibling's (in the store's codecs and
    shard layout), else the scratch pyramid's, with this segment's offsets."""
    source = next(iter(arrays.values()), None) or fresh.get(seg) or next(iter(fresh.values()))
    doc = json.loads(json.dumps(source.doc))
    doc["attributes"]["offsets"] = parse_offsets(seg, 2, ndim).tolist()
    doc["attributes"]["nonempty_chunks"] = []
    return doc


def counted(reason: str | None) -> None:
    """Count one level update of a linked store (``reason``: why it was rebuilt whole)."""
    CROSS_LEVEL_UPDATES["regional" if reason is None else "rebuilt"] += 1
    if reason is not None:
        log.info("levels rebuilt whole: %s", reason)
