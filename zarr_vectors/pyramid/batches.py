"""The records that pass between a pyramid's readers, reducers and level writers.

:class:`ObjectBatch` holds whole objects read from a source level; :class:`Written` says
where a coarse level's vertices were stored. Both are plain data: this module imports only
numpy and the level plan, so the modules that produce and consume them do not import each
other for their types.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from zarr_vectors.pyramid.plan import LevelPlan

__all__ = ["ObjectBatch", "Written", "written"]


@dataclass(eq=False)
class ObjectBatch:
    """Whole objects of a level: vertices in object order with their stored place, and edges.

    ``edges`` (E, 2) index rows, directed (along a line, parent to child in a tree).
    """

    positions: np.ndarray
    attributes: dict[str, np.ndarray]
    owners: np.ndarray
    chunks: np.ndarray  # (N, D) absolute chunk of each row at the source level
    local: np.ndarray  # (N,) row inside that chunk's cell
    edges: np.ndarray
    edge_attributes: dict[str, np.ndarray] = field(default_factory=dict)
    faces: np.ndarray | None = None


@dataclass(frozen=True, eq=False)
class Written:
    """Where a coarse level's vertices went: occupied ``chunks`` (K, D, absolute, in
    ``nonempty_chunks`` order), their ``rows``, and each vertex's ``cell`` (into chunks) and
    ``local`` row; ``present`` lists the families written."""

    chunks: np.ndarray
    rows: np.ndarray
    cell: np.ndarray
    local: np.ndarray
    present: list[str]


def written(
    plan: LevelPlan, cells: np.ndarray, cell: np.ndarray, local: np.ndarray, present: list[str]
) -> Written:
    return Written(
        cells + plan.grid.origin,
        np.bincount(cell, minlength=len(cells)).astype(np.int64),
        cell,
        local,
        present,
    )
