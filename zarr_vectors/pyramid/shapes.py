"""Coarsening stores of :func:`~zarr_vectors.write_geometries`: polygons and multi-part lines.

Such a store keeps every *path* (a line, a part of a multi-line, a polygon ring with its
closing vertex repeated) as a line of its own, its object being the geometry, with the
vertex attributes ``geom_part`` / ``geom_ring`` saying where each vertex belongs. A coarse
level simplifies every path with Douglas-Peucker (a closed ring keeps at least a
triangle, see :mod:`~zarr_vectors.pyramid.simplify`); kept vertices keep their attributes,
so the coarse level reads back as the same geometry types.

Rings simplified one by one can cross each other or themselves. Each polygonal geometry is
therefore checked with ``shapely.is_valid`` after simplification; an invalid one is
simplified again with half the tolerance, a few times, then with tolerance 0 (only exactly
redundant vertices go), and at last kept whole: a valid input stays valid, and its
distance to the input never grows past the level's tolerance.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from zarr_vectors.errors import FormatError
from zarr_vectors.kinds.shapes import PART_ATTRIBUTE, RING_ATTRIBUTE
from zarr_vectors.pyramid.simplify import Simplified, chains, douglas_peucker

if TYPE_CHECKING:
    from zarr_vectors.pyramid.batches import ObjectBatch

__all__ = ["path_offsets", "simplify_paths"]

#: Geometry types written by ``write_geometries`` that hold several paths per object.
_POLYGONAL = (3, 6)
#: Tolerance factors tried, in turn, on polygons left invalid (``-1``: keep every vertex).
RETRY_FACTORS = (0.5, 0.25, 0.125, 0.0625, 0.0, -1.0)


def _path_starts(n: int, edges: np.ndarray, what: str) -> np.ndarray:
    """Start mask of the paths of ``n`` vertices whose ``edges`` join each vertex to the next."""
    if len(edges) and not np.array_equal(edges[:, 1], edges[:, 0] + 1):
        raise FormatError(
            f"{what}: the links of a polygon / multi-line store must join each vertex of a path to the "
            "next one in the objects' manifest order; this store's do not, so its paths cannot be "
            "simplified (validate it with `zarr-vectors validate`)"
        )
    starts = np.ones(n, bool)
    starts[edges[:, 1]] = False
    return starts


def path_offsets(n: int, edges: np.ndarray) -> np.ndarray:
    """Offsets (P + 1,) of the paths of ``n`` vertices linked by ``edges`` (each vertex to the next)."""
    return np.append(np.flatnonzero(_path_starts(n, edges, "coarse level")), n).astype(np.int64)


def _keep(positions: np.ndarray, edges: np.ndarray, tolerance: float) -> np.ndarray:
    """Kept mask of Douglas-Peucker on paths (``tolerance < 0`` keeps every vertex)."""
    kept, ch = chains(len(positions), edges)
    if tolerance < 0:
        return np.ones(len(positions), bool)
    flat = douglas_peucker(positions, ch, tolerance)
    kept[ch.vertices[flat]] = True
    return kept


def _from_keep(keep: np.ndarray, edges: np.ndarray, starts: np.ndarray) -> Simplified:
    """The :class:`Simplified` of paths (edges ``(i, i + 1)``) keeping the vertices ``keep``."""
    n = len(keep)
    kept = np.flatnonzero(keep)
    path = np.cumsum(starts) - 1
    same = path[kept[1:]] == path[kept[:-1]]
    new_edges = np.stack([kept[:-1][same], kept[1:][same]], axis=1).reshape(-1, 2)
    parent = np.maximum.accumulate(np.where(keep, np.arange(n), -1)) if n else np.zeros(0, np.int64)
    out_edge = np.full(n, -1, np.int64)
    out_edge[new_edges[:, 0]] = np.arange(len(new_edges))
    edge_of = out_edge[parent[edges[:, 0]]] if len(edges) else np.zeros(0, np.int64)
    return Simplified(kept, new_edges, edge_of, parent.astype(np.int64))


def _invalid(batch: ObjectBatch, keep: np.ndarray, candidates: np.ndarray, types: np.ndarray) -> np.ndarray:
    """The objects among ``candidates`` whose kept vertices make an invalid (multi)polygon."""
    import shapely

    from zarr_vectors.shapely_io import geometries_from_paths

    rows = np.flatnonzero(keep & np.isin(batch.owners, candidates))
    if not len(rows):
        return candidates[:0]
    ids, obj = np.unique(batch.owners[rows], return_inverse=True)
    part = batch.attributes[PART_ATTRIBUTE][rows].astype(np.int64)
    ring = batch.attributes[RING_ATTRIBUTE][rows].astype(np.int64)
    order = np.lexsort((ring, part, obj))  # stable: each path keeps its own vertex order
    geoms = geometries_from_paths(
        batch.positions[rows[order]],
        obj[order],
        part[order],
        ring[order],
        types[ids].astype(np.int64),
    )
    return ids[~shapely.is_valid(geoms)]


def simplify_paths(batch: ObjectBatch, tolerance: float, types: np.ndarray | None) -> Simplified:
    """Douglas-Peucker on every path of ``batch``; polygonal objects (``types``: the shapely
    type id of every object id, None when unknown) are simplified again, more finely, until
    valid."""
    starts = _path_starts(len(batch.positions), batch.edges, "source level")
    keep = _keep(batch.positions, batch.edges, tolerance)
    if types is not None and PART_ATTRIBUTE in batch.attributes and RING_ATTRIBUTE in batch.attributes:
        present = np.unique(batch.owners)
        pending = present[np.isin(types[present], _POLYGONAL)]
        for factor in RETRY_FACTORS:
            pending = _invalid(batch, keep, pending, types)
            if not len(pending):
                break
            sub = np.isin(batch.owners, pending)
            index = np.cumsum(sub) - 1
            sub_edges = index[batch.edges[sub[batch.edges[:, 0]]]].reshape(-1, 2)
            keep[sub] = _keep(batch.positions[sub], sub_edges, tolerance * factor if factor >= 0 else -1.0)
    return _from_keep(keep, batch.edges, starts)
