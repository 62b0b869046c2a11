"""Box and object reads of a level of any kind, chosen by the kind table's family.

``points`` read vertices (:mod:`zarr_vectors.engine.read.points`); ``lines``, ``graph`` and
``shapes`` add edges (:mod:`zarr_vectors.engine.read.links`); ``mesh`` adds faces
(:mod:`zarr_vectors.engine.read.faces`). A store whose kinds the table does not know reads as points.
Results carry on-disk object numbers (OIDs); the caller translates them to the user's ids.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from zarr_vectors.engine.level import Level
from zarr_vectors.engine.read.faces import mesh_objects, query_mesh_box
from zarr_vectors.engine.read.links import objects_with_edges, query_lines_box
from zarr_vectors.engine.read.plan import attribute_names
from zarr_vectors.engine.read.points import query_box, read_objects
from zarr_vectors.engine.read.where import Condition, RowFilter, apply_filter
from zarr_vectors.engine.store import table_values
from zarr_vectors.errors import AttributeNotFoundError, FormatError
from zarr_vectors.format.kinds import read_family
from zarr_vectors.result import Result

__all__ = ["box", "is_linked", "objects", "row_filter_for"]

Names = Sequence[str] | bool | None


def is_linked(level: Level) -> bool:
    """Whether reads of ``level`` return edges (line, graph and shape kinds)."""
    return read_family(level.root.geometry_types).linked


def box(
    level: Level,
    lo: np.ndarray,
    hi: np.ndarray,
    attributes: Names = None,
    with_object_ids: bool | None = None,
    *,
    whole_objects: bool = False,
    faces: str = "inside",
    everything: bool = False,
    workers: int | None = None,
    where: Sequence[Condition] = (),
) -> Result:
    """Vertices of ``level`` with ``lo <= p <= hi`` (with edges or faces as the kind has them)
    that meet every condition of ``where``.

    ``everything``: the box is the whole level, so the rows read must add up to the level's
    ``vertex_count`` (a listing or dtype that disagrees is a :class:`FormatError`).
    """
    family = read_family(level.root.geometry_types)
    row_filter = row_filter_for(level, where) if where else None
    if (family.has_faces or family.linked) and row_filter is not None:
        names = attribute_names(level, attributes)
        with_ids = level.manifests is not None if with_object_ids is None else with_object_ids
        extra = [n for n in row_filter.vertex_names if n not in names]
        need_ids = with_ids or bool(row_filter.objects)
        res = box(level, lo, hi, [*names, *extra], need_ids, whole_objects=whole_objects, faces=faces)
        return apply_filter(res, row_filter, names, with_ids)
    if family.has_faces:
        res = query_mesh_box(level, lo, hi, attributes, with_object_ids, faces)
    elif family.linked:
        res = query_lines_box(level, lo, hi, attributes, with_object_ids, whole_objects)
    else:
        res = query_box(level, lo, hi, attributes, with_object_ids, workers, row_filter)
    if everything and row_filter is None and len(res.positions) != level.meta.vertex_count:
        raise FormatError(
            f"level {level.index} of {level.backend.description} holds {len(res.positions)} vertices in its "
            f"listed cells but its metadata says vertex_count {level.meta.vertex_count}: a listing or a "
            "dtype is corrupt"
        )
    return res


def row_filter_for(level: Level, conditions: Sequence[Condition]) -> RowFilter:
    """``conditions`` bound to ``level``: each names a numeric one-column vertex attribute or,
    failing that, object attribute (whose values are read once, whole)."""
    vertex, objects, values, times = [], [], {}, {}
    for cond in conditions:
        if cond.name in level.vertex_attributes:
            arr = level.vertex_attributes[cond.name]
            cond.check_column(arr.read_dtype, arr.row_width, "vertex")
            vertex.append(cond)
            if arr.read_dtype != arr.dtype:
                times[cond.name] = arr.read_dtype
        elif cond.name in level.object_attributes:
            table = level.object_attributes[cond.name]
            if cond.name not in values:
                values[cond.name] = table_values(level, table)
            col = values[cond.name]
            cond.check_column(col.dtype, 1 if col.ndim == 1 else int(np.prod(col.shape[1:])), "object")
            objects.append(cond)
        else:
            known = sorted({*level.vertex_attributes, *level.object_attributes})
            raise AttributeNotFoundError("vertex or object", [cond.name], level.index, known)
    return RowFilter(tuple(vertex), tuple(objects), values, times)


def objects(level: Level, oids: np.ndarray, attributes: Names = None) -> Result:
    """Whole objects ``oids`` (on-disk numbers, distinct) grouped by object in that order."""
    family = read_family(level.root.geometry_types)
    if family.has_faces:
        return mesh_objects(level, oids, attributes)
    if family.linked:
        return objects_with_edges(level, oids, attributes)
    return read_objects(level, oids, attributes)
