"""Append, replace and delete objects of a linked store (lines, skeletons, graphs, raw meshes).

New geometry is given as the kind's writer takes it (:func:`write_skeleton`,
:func:`write_lines`, :func:`write_graph`, :func:`write_meshes`); that writer checks and
partitions it into a scratch store in memory on the store's own grid, and
:func:`zarr_vectors.engine.edit_linked` merges the scratch store's cells into the touched
chunks of the store (see ``docs/large-data.md``, "Editing objects").

With ``after`` (a level update, :class:`zarr_vectors.pyramid.LinkedUpdate`), level 0's
cross-level links are kept through the edit and ``after(edit, scratch, delete, replace)``
runs while the scratch store still exists, so it can edit the coarse levels the same way.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from zarr_vectors.engine import VectorStore, edit_linked
from zarr_vectors.errors import InputError
from zarr_vectors.kinds import graph_stream, line_stream, mesh_stream, skeleton_stream
from zarr_vectors.storage import scratch_folder

__all__ = ["append_objects", "delete_objects", "replace_objects"]

#: A level update run after the level-0 edit: ``after(edit, scratch, delete ids, replace ids)``.
After = Callable[[Any, VectorStore | None, Any, Any], None]

#: Keywords an edit hands on to the kind's writer (the store fixes everything else).
_PER_OBJECT = ("object_ids", "attributes", "channel_names", "object_attributes", "edge_attributes")


def _direct(after: After | None) -> bool:
    """Whether the edit may write straight into an enclosing commit's overlay (its level update
    says so: ``after.direct``)."""
    return bool(getattr(after, "direct", False))


def _writer(store: VectorStore) -> tuple[Any, dict[str, Any], bool]:
    """The kind's writer, its store-wide keywords, and whether its objects are items."""
    kind = store.root.geometry_types[0]
    level = store.level(0)
    if kind == "skeleton":
        return skeleton_stream.write_skeleton, {}, False
    if kind == "graph":
        directed = bool(level.links_family.get("directed", False)) if level.links_family else False
        return graph_stream.write_graph, {"directed": directed}, False
    if kind == "mesh":
        return mesh_stream.write_meshes, {}, True
    return line_stream.write_lines, {"kind": kind}, True


@contextlib.contextmanager
def _scratch(store: VectorStore, data: tuple[Any, ...], keywords: dict[str, Any]) -> Iterator[VectorStore]:
    """The new objects written by the kind's writer on the store's grid, in a temporary folder
    (removed afterwards)."""
    unknown = sorted(set(keywords) - set(_PER_OBJECT))
    if unknown:
        raise InputError(f"{unknown} cannot be given to an edit; it takes {list(_PER_OBJECT)}")
    writer, fixed, _ = _writer(store)
    root = store.root
    with scratch_folder("zv-edit-") as folder:
        target = folder / "objects.zarr"
        writer(
            target,
            *data,
            chunk_shape=list(root.chunk_shape),
            bounds=[list(root.bounds[0]), list(root.bounds[1])],
            shards=None,
            **fixed,
            **keywords,
        )
        yield VectorStore.open(target, mode="r+")


def append_objects(
    store: VectorStore,
    *data: Any,
    workers: int | None = None,
    progress: bool | None = None,
    after: After | None = None,
    **keywords: Any,
) -> Any:
    """Add new objects (``data`` and ``keywords`` as the kind's writer takes them; ``object_ids``
    must be given and new to the store)."""
    store.require_writable()
    if keywords.get("object_ids") is None:
        raise InputError("append needs object_ids for the new objects (ids the store does not hold yet)")
    with _scratch(store, data, keywords) as scratch:
        edit = edit_linked(
            store,
            added=scratch,
            workers=workers,
            progress=progress,
            keep_cross_level=after is not None,
            direct=_direct(after),
        )
        if after is not None:
            after(edit, scratch, None, None)
        return edit


def replace_objects(
    store: VectorStore,
    ids: Any,
    *data: Any,
    workers: int | None = None,
    progress: bool | None = None,
    after: After | None = None,
    **keywords: Any,
) -> Any:
    """Give the objects ``ids`` new geometry (``data`` as the kind's writer takes it). Without
    ``object_ids``, items (lines, meshes) take ``ids`` in order, and the vertices of a
    skeleton or graph all belong to the one object ``ids`` names."""
    store.require_writable()
    ids = np.atleast_1d(np.asarray(ids))
    if keywords.get("object_ids") is None:
        _, _, items = _writer(store)
        if items:
            keywords["object_ids"] = ids
        elif len(ids) == 1:
            keywords["object_ids"] = np.full(len(np.asarray(data[0])), ids[0])
        else:
            raise InputError("replacing several skeletons or graphs needs object_ids (one per vertex)")
    with _scratch(store, data, keywords) as scratch:
        edit = edit_linked(
            store,
            replace=ids,
            added=scratch,
            workers=workers,
            progress=progress,
            keep_cross_level=after is not None,
            direct=_direct(after),
        )
        if after is not None:
            after(edit, scratch, None, ids)
        return edit


def delete_objects(
    store: VectorStore,
    ids: Any,
    *,
    workers: int | None = None,
    progress: bool | None = None,
    after: After | None = None,
) -> Any:
    """Remove the objects ``ids`` from level 0."""
    store.require_writable()
    edit = edit_linked(
        store, delete=ids, workers=workers, progress=progress, keep_cross_level=after is not None
    )
    if after is not None:
        after(edit, None, ids, None)
    return edit
