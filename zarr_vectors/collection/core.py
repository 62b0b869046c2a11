""":class:`Collection`: several Zarr Vectors stores (members) in the sub-paths of one RFC-8
collection, with shared id spaces and relationships (``docs/collections.md``)."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from zarr_vectors.collection.buckets import Column, Rows
from zarr_vectors.collection.index import (
    INDEX_GROUP,
    StaleIndexError,
    build_index,
    drop_index,
    index_attributes,
    index_generation_ok,
    lookup,
    member_generation,
    rows_of,
    update_index,
)
from zarr_vectors.collection.join import JoinClause, passing_ids, split_where
from zarr_vectors.collection.layout import (
    CollectionDoc,
    Member,
    check_name,
    collection_doc,
    member_target,
    parse_collection,
)
from zarr_vectors.dataset import Dataset
from zarr_vectors.engine import DEFAULT_MEMORY_LIMIT, as_id_array
from zarr_vectors.errors import InputError, StoreExistsError
from zarr_vectors.kinds import graph_stream, line_stream, mesh_stream, points, shapes, skeleton_stream
from zarr_vectors.result import Result
from zarr_vectors.storage import Backend, dump_json, local_path, open_backend

__all__ = ["Collection", "create_collection", "WRITERS"]

#: ``add_member(kind=...)`` -> the writer that writes the member.
WRITERS: dict[str, Callable[..., None]] = {
    "points": points.write_points,
    "lines": line_stream.write_lines,
    "graph": graph_stream.write_graph,
    "skeleton": skeleton_stream.write_skeleton,
    "mesh": mesh_stream.write_mesh,
    "meshes": mesh_stream.write_meshes,
    "geometries": shapes.write_geometries,
}


def _backend(target: Any, storage_options: dict[str, Any] | None, create: bool) -> Backend:
    path = local_path(target) if isinstance(target, (str, os.PathLike)) else None
    if create and path is not None:
        path.mkdir(parents=True, exist_ok=True)
    return open_backend(target, read_only=not create, storage_options=storage_options)


def _ids(ids: Any) -> np.ndarray:
    """Distinct user object ids as uint64."""
    return np.unique(as_id_array(ids, "object ids").astype(np.uint64))


def _object_count(ds: Dataset) -> int:
    """Level-0 objects of ``ds``: every remapped id, or the kept ids that have rows."""
    lv = ds.level(0)
    if lv.manifests is None:
        return 0
    return int(lv.num_objects) if lv.object_id_map.user is not None else len(lv.objects_with_rows)


class Collection:
    """An opened collection: ``members`` by name, each an ordinary store in ``<target>/<name>``.

    Reads go to the members (``query``, ``objects``, ``related``); edits go through
    :meth:`append`, :meth:`replace` and :meth:`delete`, which rebuild the edited member's
    relationship indexes so that :meth:`related` stays exact.
    """

    def __init__(
        self, target: Any, doc: CollectionDoc, mode: str, storage_options: dict[str, Any] | None
    ) -> None:
        self.target = target
        self._doc = doc
        self.mode = mode
        self._options = storage_options
        self._datasets: dict[str, Dataset] = {}
        self._readers: dict[str, Backend] = {}

    # -- opening -----------------------------------------------------------------------
    @classmethod
    def open(
        cls, target: Any, mode: str = "r", *, storage_options: dict[str, Any] | None = None
    ) -> Collection:
        """Open the collection at ``target`` (FormatError when it holds no collection node)."""
        if mode not in ("r", "r+"):
            raise InputError(f"mode must be 'r' or 'r+', not {mode!r}")
        backend = _backend(target, storage_options, create=False)
        raw = backend.get_many(["zarr.json"])[0]
        doc = parse_collection(json.loads(raw) if raw is not None else None, str(target))
        return cls(target, doc, mode, storage_options)

    # -- description -------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._doc.name

    @property
    def members(self) -> dict[str, Member]:
        """Member nodes by name, in the collection's order."""
        return dict(self._doc.members)

    @property
    def id_spaces(self) -> dict[str, dict[str, Any]]:
        return dict(self._doc.id_spaces)

    def __repr__(self) -> str:
        return f"<zarr_vectors.Collection {self.target} members={list(self._doc.members)}>"

    def member(self, name: str) -> Dataset:
        """Member ``name`` opened as a :class:`Dataset` (in the collection's mode)."""
        if name not in self._doc.members:
            raise InputError(f"no member {name!r} in the collection (members: {list(self._doc.members)})")
        ds = self._datasets.get(name)
        if ds is None:
            ds = Dataset.open(member_target(self.target, name), self.mode, self._options)
            self._datasets[name] = ds
        return ds

    def __getitem__(self, name: str) -> Dataset:
        return self.member(name)

    # -- writing -----------------------------------------------------------------------
    def _writable(self) -> None:
        if self.mode != "r+":
            raise InputError("the collection is open for reading; open it with mode='r+' to change it")

    def _save(self) -> None:
        backend = _backend(self.target, self._options, create=True)
        backend.set_many([("zarr.json", dump_json(collection_doc(self._doc)))])

    def add_member(
        self,
        name: str,
        kind: str | None = None,
        *data: Any,
        source: Any = None,
        role: str | None = None,
        id_space: str | None = None,
        relationships: dict[str, str] | None = None,
        **writer_keywords: Any,
    ) -> Dataset:
        """Add member ``name`` at ``<target>/<name>`` and index its relationships.

        With ``kind`` (``"points"``, ``"lines"``, ``"graph"``, ``"skeleton"``, ``"mesh"``,
        ``"meshes"``, ``"geometries"``) the member is written from ``*data`` and
        ``**writer_keywords`` by that writer; with ``source`` (a local store directory) the store
        is moved there; with neither, the store already at the sub-path is registered.
        ``relationships`` maps vertex attribute names to id spaces of the collection; ``id_space``
        is the space the member's object ids belong to.
        """
        self._writable()
        check_name(name, "member name")
        if name in self._doc.members or name == INDEX_GROUP:
            raise StoreExistsError(f"the collection already has a member {name!r}")
        member = Member(name, role, None, id_space, dict(relationships or {}))
        self._doc.check_member(member)
        target = member_target(self.target, name)
        if kind is not None and source is not None:
            raise InputError("give kind= (write the member) or source= (move a store in), not both")
        if kind is not None:
            if kind not in WRITERS:
                raise InputError(f"unknown member kind {kind!r}; one of {sorted(WRITERS)}")
            WRITERS[kind](target, *data, storage_options=self._options, **writer_keywords)
        elif source is not None:
            self._move_in(source, target)
        elif data or writer_keywords:
            raise InputError("data given without kind=: name the writer with kind=")
        ds = Dataset.open(target, self.mode, self._options)
        member = Member(name, role, ds.geometry_types[0], id_space, dict(relationships or {}))
        self._datasets[name] = ds
        self._index(name, ds, member)
        self._doc.members[name] = member
        self._save()
        return ds

    def _move_in(self, source: Any, target: Any) -> None:
        src, dst = (local_path(p) if isinstance(p, (str, os.PathLike)) else None for p in (source, target))
        if src is None or dst is None:
            raise InputError(
                "source= moves a local store directory into a local collection; copy other stores"
            )
        if not (src / "zarr.json").is_file():
            raise InputError(f"source {src} is not a store (no zarr.json)")
        if dst.exists():
            raise StoreExistsError(f"{dst} already exists")
        shutil.move(os.fspath(src), os.fspath(dst))

    def _index(
        self, name: str, ds: Dataset, member: Member, memory_limit: int | None = DEFAULT_MEMORY_LIMIT
    ) -> None:
        target = member_target(self.target, name)
        for attribute in member.relationships:
            build_index(ds, target, attribute, self._options, memory_limit=memory_limit)
        self._readers.pop(name, None)

    def build_index(self, name: str, *, memory_limit: int | None = DEFAULT_MEMORY_LIMIT) -> None:
        """Rebuild every relationship index of member ``name`` (after edits made outside the
        collection), holding at most about ``memory_limit`` bytes of rows (None: all in memory)."""
        self._writable()
        ds = self._reopen(name)
        self._index(name, ds, self._doc.members[name], memory_limit)

    def _reopen(self, name: str) -> Dataset:
        self.member(name)
        ds = Dataset.open(member_target(self.target, name), self.mode, self._options)
        self._datasets[name] = ds
        return ds

    def _edit(
        self, name: str, method: str, removed: np.ndarray, added: np.ndarray, *args: Any, **keywords: Any
    ) -> None:
        """Run the edit ``method`` on member ``name``, then bring its indexes up to it.

        The rows of objects ``removed`` (user ids) are read before the edit, those of
        ``added`` after it, and only the index buckets of their values are rewritten. Without object ids (an append to a member without them) the new rows
        come from the edit's input. An index that was stale before the edit is rebuilt."""
        self._writable()
        ds = self.member(name)
        relationships = list(self._doc.members[name].relationships)
        backend = _backend(member_target(self.target, name), self._options, create=True)
        fresh = all(index_generation_ok(backend, a) for a in relationships)
        with_ids = ds.level(0).manifests is not None
        before = None
        if fresh and relationships and with_ids and len(removed):
            before = ds.objects(removed.tolist(), attributes=relationships)
        getattr(ds, method)(*args, **keywords)
        ds = self._reopen(name)
        self._readers.pop(name, None)
        if not relationships:
            return
        if not fresh or (not with_ids and method != "append"):
            self._index(name, ds, self._doc.members[name])
            return
        generation = member_generation(backend)
        for attribute in relationships:
            meta = index_attributes(backend, attribute)
            assert meta is not None  # fresh
            columns = [Column.parse(c) for c in meta["columns"]]
            new = self._new_rows(ds, columns, attribute, added, args, keywords)
            old = np.zeros(0, np.uint64) if before is None else before.attributes[attribute].reshape(-1)
            update_index(backend, attribute, removed if with_ids else None, old, new, generation)

    @staticmethod
    def _new_rows(
        ds: Dataset,
        columns: list[Column],
        attribute: str,
        added: np.ndarray,
        args: tuple[Any, ...],
        keywords: dict[str, Any],
    ) -> Rows:
        """Index rows the edit added: the edited objects read back, or (a member without
        object ids) the appended input cast to the index's columns."""
        if ds.level(0).manifests is not None:
            if len(added) == 0:
                return Rows.concat([], columns)
            res = ds.objects(added.tolist())
            return rows_of(columns, attribute, res.positions, res.attributes, res.object_ids)
        attrs = keywords.get("attributes") or {}
        if attribute not in attrs:
            raise InputError(f"the append gives no {attribute!r}, a relationship of the member")
        return rows_of(columns, attribute, args[0], attrs, None)

    def append(self, name: str, *data: Any, **keywords: Any) -> None:
        """``Dataset.append`` on member ``name``; its relationship indexes are updated in the
        buckets of the new rows' values only."""
        ids = keywords.get("object_ids")
        added = _ids(ids) if ids is not None else np.zeros(0, np.uint64)
        removed = np.zeros(0, np.uint64)
        if keywords.get("extend") and len(added):  # existing objects gain points: re-read them
            removed = added[np.isin(added, self.member(name).object_ids())]
        self._edit(name, "append", removed, added, *data, **keywords)

    def replace(self, name: str, ids: Any, *data: Any, **keywords: Any) -> None:
        """``Dataset.replace`` on member ``name``; its relationship indexes are updated in the
        buckets of the replaced and new rows' values only."""
        self._edit(name, "replace", _ids(ids), _ids(ids), ids, *data, **keywords)

    def delete(self, name: str, ids: Any, **keywords: Any) -> None:
        """``Dataset.delete`` on member ``name``; its relationship indexes are updated in the
        buckets of the deleted rows' values only."""
        self._edit(name, "delete", _ids(ids), np.zeros(0, np.uint64), ids, **keywords)

    # -- reading -----------------------------------------------------------------------
    def _names(self, members: Sequence[str] | None) -> list[str]:
        names = list(self._doc.members) if members is None else list(members)
        for n in names:
            if n not in self._doc.members:
                raise InputError(f"no member {n!r} in the collection (members: {list(self._doc.members)})")
        return names

    def query(
        self,
        bbox: Any = None,
        *,
        members: Sequence[str] | None = None,
        level: int = 0,
        where: Any = None,
        **keywords: Any,
    ) -> dict[str, Result]:
        """``Dataset.query(bbox, ...)`` of each member (all by default): one Result per member.

        ``where`` may hold join clauses ``<relationship>.<object attribute> op value`` (a value
        being a number, a date or a quoted string): a row is kept when the object its
        relationship names passes, the object attribute read from the first member of the
        relationship's id space that has it (see :mod:`zarr_vectors.collection.join`).
        """
        out = {}
        for n in self._names(members):
            try:
                out[n] = self._query_member(n, bbox, level, where, keywords)
            except InputError as exc:
                if type(exc) is not InputError:  # a subclass keeps its type and message
                    raise
                raise InputError(f"member {n!r}: {exc}") from exc
        return out

    def _query_member(self, n: str, bbox: Any, level: int, where: Any, keywords: dict[str, Any]) -> Result:
        """:meth:`query` of member ``n``."""
        relationships = self._doc.members[n].relationships
        own, joins = split_where(where, relationships)
        ds = self.member(n)
        attrs = keywords.get("attributes")
        if joins and attrs not in (None, True):
            wanted = [] if attrs is False else list(attrs)
            keywords = {
                **keywords,
                "attributes": wanted + [j.relationship for j in joins if j.relationship not in wanted],
            }
        res = ds.query(bbox, level=level, where=own, **keywords)
        if joins:
            keep = np.ones(len(res), bool)
            for clause in joins:
                ids = self._join_ids(clause, relationships[clause.relationship], level)
                keep &= np.isin(res.attributes[clause.relationship].reshape(len(res)), ids)
            res = res.subset(keep)
            if attrs not in (None, True):
                names = [] if attrs is False else list(attrs)
                res = dataclasses.replace(
                    res, attributes={k: v for k, v in res.attributes.items() if k in names}
                )
        return res

    def _join_ids(self, clause: JoinClause, space: str, level: int) -> np.ndarray:
        """Ids of ``space`` whose object attribute ``clause.attribute`` passes ``clause``."""
        for name, member in self._doc.members.items():
            if member.id_space != space:
                continue
            ds = self.member(name)
            if clause.attribute in ds.object_attribute_names(level):
                values = ds.object_attributes(clause.attribute, level=level)  # in object_ids' order
                return passing_ids(ds.object_ids(level), values, clause)
        raise InputError(
            f"where: no member of id space {space!r} has the object attribute {clause.attribute!r} "
            f"(needed by {clause.relationship}.{clause.attribute})"
        )

    def objects(
        self,
        ids: Sequence[int] | int,
        *,
        members: Sequence[str] | None = None,
        level: int = 0,
        attributes: Sequence[str] | bool | None = None,
    ) -> dict[str, Result]:
        """The geometry of objects ``ids`` in each member whose objects belong to an id space
        (by default every such member); ids a member does not hold are left out of its Result.
        ``attributes`` is passed to each member's ``Dataset.objects``."""
        wanted = as_id_array(ids, "object ids")
        names = [n for n in self._names(members) if members is not None or self._doc.members[n].id_space]
        out = {}
        for n in names:
            ds = self.member(n)
            held = wanted[np.isin(wanted, ds.object_ids(level))]
            out[n] = ds.objects(held.tolist(), level=level, attributes=attributes)
        return out

    def related(
        self,
        ids: Sequence[int] | int,
        relationship: str,
        *,
        member: str | None = None,
        attributes: Sequence[str] | bool | None = None,
    ) -> Result:
        """Level-0 rows whose ``relationship`` attribute is one of ``ids``, grouped by id in the
        order given, read through the member's relationship index (cost follows the answer).
        Within one id the rows come in the index's order (by a hash of each row: the same for
        the same rows, whatever the order they were written in), not the member's row order.

        ``member`` is needed only when several members declare ``relationship``. With
        ``attributes=False`` the index alone answers (positions and the relationship's ids,
        no object ids) and no cell of the member is read.
        """
        having = [n for n, m in self._doc.members.items() if relationship in m.relationships]
        if member is not None:
            if relationship not in self._doc.members.get(member, Member(member)).relationships:
                self._names([member])
                raise InputError(f"member {member!r} declares no relationship {relationship!r}")
            having = [member]
        if not having:
            declared = sorted({r for m in self._doc.members.values() for r in m.relationships})
            raise InputError(f"no member declares relationship {relationship!r} (relationships: {declared})")
        if len(having) > 1:
            raise InputError(f"members {having} all declare {relationship!r}: choose one with member=")
        name = having[0]
        given = as_id_array(ids, "related ids")
        if given.dtype.kind == "i" and len(given) and int(given.min()) < 0:
            raise InputError(f"related ids must be non-negative (ids are uint64), got {int(given.min())}")
        wanted = given.astype(np.uint64)
        _, first = np.unique(wanted, return_index=True)
        wanted = wanted[np.sort(first)]
        reader = self._readers.get(name)
        if reader is None:
            reader = self._readers[name] = open_backend(
                member_target(self.target, name), read_only=True, storage_options=self._options
            )
        names = (
            None
            if attributes is None or attributes is True
            else []
            if attributes is False
            else list(attributes)
        )
        return lookup(self.member(name), reader, relationship, wanted, names)

    def describe(self) -> dict[str, Any]:
        """A JSON-ready description: name, id spaces, and per member its kind, role, id space,
        level-0 vertex and object counts and, per relationship, its id space and index state
        (``current`` or ``stale``, rows, buckets; None without an index). ``objects``
        counts the level-0 objects (ids kept as given: those with rows)."""
        members = []
        for name, m in self._doc.members.items():
            backend = open_backend(
                member_target(self.target, name), read_only=True, storage_options=self._options
            )
            generation = member_generation(backend)
            relationships = {}
            for attribute, space in m.relationships.items():
                try:
                    meta = index_attributes(backend, attribute)
                except StaleIndexError:  # an index of another version
                    meta = {"generation": None, "rows": 0, "bucket_bits": 0}
                state = None
                if meta is not None:
                    state = {
                        "state": "current" if meta.get("generation") == generation else "stale",
                        "rows": int(meta["rows"]),
                        "buckets": 1 << int(meta["bucket_bits"]),
                    }
                relationships[attribute] = {"id_space": space, "index": state}
            members.append(
                {
                    "name": name,
                    "kind": m.kind,
                    "role": m.role,
                    "id_space": m.id_space,
                    "vertices": int(self.member(name).vertex_count(0)),
                    "objects": _object_count(self.member(name)),
                    "relationships": relationships,
                }
            )
        return {"name": self.name, "id_spaces": sorted(self._doc.id_spaces), "members": members}

    def drop_index(self, name: str, relationship: str) -> None:
        """Delete member ``name``'s index of ``relationship`` (``related`` then refuses it)."""
        self._writable()
        drop_index(_backend(member_target(self.target, name), self._options, create=True), relationship)
        self._readers.pop(name, None)


def create_collection(
    target: Any,
    *,
    name: str | None = None,
    id_spaces: dict[str, dict[str, Any]] | Sequence[str] = (),
    attributes: dict[str, Any] | None = None,
    storage_options: dict[str, Any] | None = None,
) -> Collection:
    """Create an empty collection at ``target`` and open it with ``mode="r+"``
    (``docs/collections.md``; the layout is ``docs/format-collections.md``).

    Parameters
    ----------
    target
        A directory path or URL, absent or empty; members are written in its sub-paths.
    name
        The collection's display name (default: the last part of ``target``).
    id_spaces
        The shared id spaces: names, or names -> a free JSON description.
    attributes
        Extra collection attributes; keys must be prefixed (``prefix:name``), not ``zv:``.
    storage_options
        Options for fsspec and the storage layer, as for :func:`zarr_vectors.open`.

    Returns
    -------
    Collection
        Add members with :meth:`Collection.add_member`.

    Raises
    ------
    StoreExistsError
        ``target`` is not empty.
    InputError
        An id space name or an attribute key is not allowed.

    Examples
    --------
    >>> import numpy as np, zarr_vectors as zv
    >>> coll = zv.create_collection("memory://doc-collection", id_spaces=["segments"])
    >>> post = np.array([7, 2**64 - 1, 7], np.uint64)
    >>> _ = coll.add_member(
    ...     "synapses", "points", [[0, 0, 0], [1, 1, 1], [2, 2, 2]], chunk_shape=2,
    ...     attributes={"post_segment": post}, relationships={"post_segment": "segments"},
    ... )
    >>> sorted(coll.related([7], "post_segment").positions.tolist())
    [[0, 0, 0], [2, 2, 2]]
    """
    spaces = dict(id_spaces) if isinstance(id_spaces, dict) else {s: {} for s in id_spaces}
    for s in spaces:
        check_name(s, "id space")
    extra = dict(attributes or {})
    bad = [k for k in extra if ":" not in k or k.startswith(("zv:", "ome:"))]
    if bad:
        raise InputError(
            f"collection attribute keys must be prefixed (prefix:name) and not zv: or ome:, got {bad}"
        )
    backend = _backend(target, storage_options, create=True)
    if not backend.is_empty():
        raise StoreExistsError(f"{target} is not empty: a collection is created in an absent or empty place")
    label = name or os.path.basename(os.fspath(target).rstrip("/")) or "collection"
    coll = Collection(target, CollectionDoc(label, spaces, {}, [], extra), "r+", storage_options)
    coll._save()
    return coll
