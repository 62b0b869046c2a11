"""Box and object reads of a level of any kind, chosen by the kind table's family.

``points`` read vertices (:mod:`zarr_vectors.engine.read`); ``lines``, ``graph`` and
``shapes`` add edges (:mod:`zarr_vectors.engine.edges`); ``mesh`` adds faces
(:mod:`zarr_vectors.engine.faces`). A store whose kinds the table does not know reads as points.
Results carry on-disk object numbers (OIDs); the caller translates them to the user's ids.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from zarr_vectors.engine.edges import objects_with_edges, query_lines_box
from zarr_vectors.engine.faces import mesh_objects, query_mesh_box
from zarr_vectors.engine.level import Level
from zarr_vectors.engine.read import query_box, read_objects
from zarr_vectors.errors import FormatError
from zarr_vectors.format.kinds import family_of
from zarr_vectors.result import Result

__all__ = ["box", "is_linked", "objects"]

Names = Sequence[str] | bool | None


def _family(level: Level) -> str | None:
    return family_of(level.root.geometry_types)


def is_linked(level: Level) -> bool:
    """Whether reads of ``level`` return edges (line, graph and shape kinds)."""
    return _family(level) in ("lines", "graph", "shapes")


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
) -> Result:
    """Vertices of ``level`` with ``lo <= p <= hi`` (with edges or faces as the kind has them).

    ``everything``: the box is the whole level, so the rows read must add up to the level's
    ``vertex_count`` (a listing or dtype that disagrees is a :class:`FormatError`).
    """
    family = _family(level)
    if family == "mesh":
        res = query_mesh_box(level, lo, hi, attributes, with_object_ids, faces)
    elif family in ("lines", "graph", "shapes"):
        res = query_lines_box(level, lo, hi, attributes, with_object_ids, whole_objects)
    else:
        res = query_box(level, lo, hi, attributes, with_object_ids, workers)
    if everything and len(res.positions) != level.meta.vertex_count:
        raise FormatError(
            f"level {level.index} of {level.backend.description} holds {len(res.positions)} vertices in its "
            f"listed cells but its metadata says vertex_count {level.meta.vertex_count}: a listing or a "
            "dtype is corrupt"
        )
    return res


def objects(level: Level, oids: np.ndarray, attributes: Names = None) -> Result:
    """Whole objects ``oids`` (on-disk numbers, distinct) grouped by object in that order."""
    family = _family(level)
    if family == "mesh":
        return mesh_objects(level, oids, attributes)
    if family in ("lines", "graph", "shapes"):
        return objects_with_edges(level, oids, attributes)
    return read_objects(level, oids, attributes)
