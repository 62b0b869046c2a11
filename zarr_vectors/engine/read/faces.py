"""Box and object reads of triangle meshes.

A face is a three-vertex record: intra-chunk faces live in the flat ``0.0.0_0.0.0`` link
cells (raw) or inside each chunk's Draco blob; faces across chunks live in
``links/0/<offsets>`` cells. A box query fetches, in one batch, the vertex cells of the
chunks it touches and the link cells whose faces can have a vertex there — for
``faces="inside"`` only cells whose every endpoint chunk is touched; for
``faces="touching"`` every cell with an endpoint chunk touched, plus the vertex cells of
the neighbouring chunks those faces reach.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from zarr_vectors.engine.level import Level
from zarr_vectors.engine.read.fetch import Cells, fetch_cells, row_owners
from zarr_vectors.engine.read.links import (
    LinkPlan,
    fetch_linked_objects,
    link_edges,
    link_keys,
    link_plan,
    plan_endpoint_chunks,
)
from zarr_vectors.engine.read.plan import attribute_names, plan_box
from zarr_vectors.engine.read.points import build_result
from zarr_vectors.errors import check_choice
from zarr_vectors.result import Result

__all__ = ["all_faces", "query_mesh_box", "mesh_objects", "FACE_MODES"]

FACE_MODES = ("inside", "touching")


def all_faces(level: Level, cells: Cells, plan: LinkPlan, raws: list[bytes | None]) -> np.ndarray:
    """(F, 3) faces in concatenated-row numbering, input winding: linked ones, then Draco intra ones."""
    linked, _ = link_edges(level, cells, plan, raws)
    parts = [linked.reshape(-1, 3)] if linked.size else []
    for i, local in cells.intra_faces.items():
        if len(local):
            n = int(cells.offsets[i + 1] - cells.offsets[i])
            if local.max() >= n or local.min() < 0:
                from zarr_vectors.errors import CorruptCellError

                raise CorruptCellError(
                    level.vertices.path,
                    ".".join(map(str, cells.chunks[i])),
                    f"a Draco face names vertex {int(local.max())} of {n}",
                )
            parts.append(local + cells.offsets[i])
    return np.concatenate(parts) if parts else np.zeros((0, 3), np.int64)


def _mesh_result(
    level: Level,
    cells: Cells,
    rows: np.ndarray,
    faces: np.ndarray,
    object_ids: np.ndarray | None,
    owners: np.ndarray | None = None,
) -> Result:
    """Rows ``rows`` of the fetched cells with the ``faces`` among them, renumbered
    (``object_ids`` per fetched row or ``owners`` per result row, as in ``build_result``)."""
    remap = np.full(len(cells.positions), -1, np.int64)
    remap[rows] = np.arange(len(rows))
    keep = np.all(remap[faces] >= 0, axis=1) if len(faces) else np.zeros(0, bool)
    return build_result(
        level, cells, rows, object_ids, owners=owners, faces=remap[faces[keep]].reshape(-1, 3)
    )


def query_mesh_box(
    level: Level,
    lo: np.ndarray,
    hi: np.ndarray,
    attributes: Sequence[str] | bool | None = None,
    with_object_ids: bool | None = None,
    faces: str = "inside",
) -> Result:
    """The sub-mesh in ``[lo, hi]``: vertices inside and the faces whose three vertices are
    inside; ``faces="touching"`` adds every face with a vertex inside, with all its vertices."""
    check_choice("faces", faces, FACE_MODES)
    box = plan_box(level, lo, hi)
    touched = np.concatenate([box.full, box.partial])
    names = attribute_names(level, attributes)
    touching = faces == "touching"
    plan = link_plan(level, touched, any_end=touching)
    chunks = touched
    if touching and plan:
        ends = plan_endpoint_chunks(plan)
        listed = level.vertices.nonempty
        extra = (
            ends[(ends[:, None, :] == listed[None, :, :]).all(axis=2).any(axis=1)]
            if len(listed)
            else ends[:0]
        )
        chunks = np.unique(np.concatenate([touched, extra]), axis=0)
    with_ids = level.manifests is not None if with_object_ids is None else with_object_ids
    cells, raws = fetch_cells(
        level,
        chunks,
        names,
        np.arange(len(chunks)) if with_ids else np.zeros(0, np.int64),
        link_keys(level, plan),
        owners=with_ids,
    )
    inside = np.all((cells.positions >= lo) & (cells.positions <= hi), axis=1)
    tris = all_faces(level, cells, plan, raws)
    owners = row_owners(level, cells) if with_ids else None
    if touching:
        hit = inside[tris].any(axis=1) if len(tris) else np.zeros(0, bool)
        keep = inside.copy()
        keep[tris[hit].ravel()] = True
        return _mesh_result(level, cells, np.flatnonzero(keep), tris[hit], owners)
    return _mesh_result(level, cells, np.flatnonzero(inside), tris, owners)


def mesh_objects(level: Level, ids: np.ndarray, attributes: Sequence[str] | bool | None = None) -> Result:
    """Whole meshes of objects ``ids``: their vertices (grouped by object, in ``ids`` order) and faces."""
    ids = np.atleast_1d(np.asarray(ids, dtype=np.int64))
    names = attribute_names(level, attributes)
    got = fetch_linked_objects(level, ids, names)
    tris = all_faces(level, got.cells, got.plan, got.raws)
    return _mesh_result(level, got.cells, got.rows, tris, None, got.owners)
