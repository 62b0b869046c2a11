"""Region-of-interest queries: the vertices inside a shapely polygon.

The polygon's bounding box (on the two axes it is tested on, narrowed by any ``bbox``
given) goes through the ordinary box query, so only the chunks the box touches are
read, in one batch; the rows that come back are tested at once with
``shapely.contains_xy`` against a prepared copy of the polygon. A vertex on the
polygon's boundary is not inside (the ``contains`` predicate).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from zarr_vectors.engine import Level, owned
from zarr_vectors.errors import InputError, choice_message
from zarr_vectors.format.kinds import family_of
from zarr_vectors.result import Origin, Region, Result

__all__ = ["BoxReader", "polygon_axes_of", "as_polygon", "contains", "object_extents", "query_polygon"]


class BoxReader(Protocol):
    """What a polygon query needs of an opened store (:class:`zarr_vectors.Dataset` is one)."""

    @property
    def ndim(self) -> int: ...

    @property
    def axes(self) -> tuple[str, ...]: ...

    def level(self, index: int = 0) -> Level: ...

    def query(
        self,
        bbox: Any = None,
        *,
        level: int = 0,
        attributes: Any = None,
        object_ids: Any = None,
        where: Any = None,
    ) -> Result: ...

    def objects(self, ids: Any, *, level: int = 0, attributes: Any = None) -> Result: ...


def polygon_axes_of(ds: BoxReader, polygon_axes: Sequence[str | int] | None) -> tuple[int, int]:
    """Indices of the two axes a polygon is tested on (named, or given as indices)."""
    if polygon_axes is None:
        if ds.ndim != 2:
            raise InputError(
                f"this store has {ds.ndim} axes {list(ds.axes)}; say which two the polygon lies in, "
                f"e.g. polygon_axes=({ds.axes[0]!r}, {ds.axes[1]!r})"
            )
        return 0, 1
    if isinstance(polygon_axes, str) or len(polygon_axes) != 2:
        raise InputError(f"polygon_axes must name two axes, got {polygon_axes!r}")
    out = []
    for a in polygon_axes:
        if isinstance(a, (int, np.integer)) and not isinstance(a, bool) and 0 <= int(a) < ds.ndim:
            out.append(int(a))
        elif isinstance(a, str) and a in ds.axes:
            out.append(ds.axes.index(a))
        else:
            raise InputError(choice_message("a polygon axis", a, ds.axes) + " (or an axis index)")
    if out[0] == out[1]:
        raise InputError(f"polygon_axes must be two different axes, got {polygon_axes!r}")
    return out[0], out[1]


def as_polygon(polygon: Any) -> Any:
    """A prepared 2-D copy of a valid, non-empty Polygon or MultiPolygon (InputError otherwise)."""
    import shapely

    if not isinstance(polygon, (shapely.Polygon, shapely.MultiPolygon)):
        raise InputError(f"polygon must be a shapely Polygon or MultiPolygon, got {type(polygon).__name__}")
    if polygon.is_empty:
        raise InputError("polygon is empty: it contains no point")
    if not polygon.is_valid:
        raise InputError(
            f"polygon is invalid ({shapely.is_valid_reason(polygon)}); fix it, e.g. with shapely.make_valid"
        )
    flat = shapely.force_2d(polygon)
    if flat is polygon:  # never prepare the caller's object
        flat = shapely.from_wkb(shapely.to_wkb(polygon))
    shapely.prepare(flat)
    return flat


def _boundary_cells(poly: Any, x0: float, y0: float, size: np.ndarray, cells: int) -> np.ndarray:
    """(cells, cells) mask of grid cells within one cell of the polygon's boundary.

    The boundary is sampled at least twice per cell width, so every cell it crosses holds a
    sample or neighbours one that does; marking each sample's 3 x 3 neighbourhood therefore
    covers every crossed cell, with a cell to spare against rounding of row cell indices.
    """
    import shapely

    pad = 2 * size
    near = shapely.clip_by_rect(
        shapely.boundary(poly),
        x0 - pad[0],
        y0 - pad[1],
        x0 + (cells + 2) * size[0],
        y0 + (cells + 2) * size[1],
    )
    pts = shapely.get_coordinates(shapely.segmentize(near, float(size.min()) / 2))
    bx = np.clip(np.floor((pts[:, 0] - x0) / size[0]), -1, cells).astype(np.int64) + 1
    by = np.clip(np.floor((pts[:, 1] - y0) / size[1]), -1, cells).astype(np.int64) + 1
    hit = np.zeros((cells + 4, cells + 4), bool)
    for dx in (0, 1, 2):
        for dy in (0, 1, 2):
            hit[bx + dx, by + dy] = True
    return hit[2 : cells + 2, 2 : cells + 2]


#: How a polygon query selects: ``contains``, the vertices strictly inside; ``intersects``, the
#: objects whose geometry meets the polygon (vertices inside or on it, without objects).
PREDICATES = ("contains", "intersects")


def _intersects_xy(poly: Any, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    import shapely

    return shapely.intersects_xy(poly, x, y)


def object_extents(level: Level) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(oids, lo, hi)``: each object the manifests name and the extent (absolute
    coordinates) of the chunks its fragments lie in, which holds all of its vertices."""
    owners = level.fragment_owners
    grid = level.grid
    cells = np.stack(np.unravel_index(owners.cell, tuple(int(s) for s in grid.shape)), axis=1) + grid.origin
    order = np.argsort(owners.object_id, kind="stable")
    obj, cells = owners.object_id[order], cells[order].reshape(-1, grid.ndim)
    if not len(obj):
        empty = np.zeros((0, grid.ndim))
        return np.zeros(0, np.int64), empty, empty
    starts = np.flatnonzero(np.r_[True, obj[1:] != obj[:-1]])
    lo = np.minimum.reduceat(cells, starts, axis=0) * grid.chunk_shape
    hi = (np.maximum.reduceat(cells, starts, axis=0) + 1) * grid.chunk_shape
    return obj[starts], lo, hi


def intersecting_objects(
    ds: BoxReader,
    poly: Any,
    ax: tuple[int, int],
    box: tuple[np.ndarray, np.ndarray],
    level: int,
    attributes: Any,
) -> Result:
    """Whole objects whose geometry (:meth:`Result.to_shapely`) intersects ``poly`` cut to
    ``box`` (which may bound the polygon's axes only): candidates come from the manifests
    alone (objects whose chunks reach the region), then each is read whole and tested exactly."""
    import shapely

    others = [k for k in range(ds.ndim) if k not in ax]
    if np.isfinite(box[0][others]).any() or np.isfinite(box[1][others]).any():
        raise InputError(
            "predicate='intersects' takes a bbox on the polygon's axes only; select on the other axes with "
            "predicate='contains' or after the read"
        )
    lv = ds.level(level)
    oids, lo, hi = object_extents(lv)
    region = poly
    b_lo, b_hi = box[0][list(ax)], box[1][list(ax)]
    if np.isfinite(b_lo).any() or np.isfinite(b_hi).any():
        p_lo, p_hi = np.array(poly.bounds[:2]), np.array(poly.bounds[2:])
        cut = shapely.box(*np.maximum(b_lo, p_lo), *np.minimum(b_hi, p_hi))
        region = (
            shapely.intersection(poly, cut)
            if (np.maximum(b_lo, p_lo) <= np.minimum(b_hi, p_hi)).all()
            else cut
        )
    near = np.zeros(len(oids), bool)
    if not region.is_empty:
        r_lo, r_hi = np.array(region.bounds[:2]), np.array(region.bounds[2:])
        near = np.all((hi[:, list(ax)] >= r_lo) & (lo[:, list(ax)] <= r_hi), axis=1)
    whole = ds.objects(lv.object_id_map.to_user(oids[near]), level=level, attributes=attributes)
    if not len(whole):
        return whole
    ids, geoms = whole.to_shapely()
    assert whole.object_ids is not None  # an object read always has them
    return whole.subset(np.isin(whole.object_ids, ids[shapely.intersects(geoms, region)]))


def contains(poly: Any, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``shapely.contains_xy(poly, x, y)``, testing only rows near the polygon's boundary.

    Rows fall into a grid of about n / 4 cells. Cells the boundary does not come near are
    wholly inside or wholly outside, and so is each run of such cells along a grid column
    (the boundary crosses no segment between their centres): one centre per run decides
    for all its rows. Only rows of the cells near the boundary are tested one by one.
    """
    import shapely

    n = len(x)
    if n < 20_000:
        return shapely.contains_xy(poly, x, y)
    cells = int(np.clip(np.sqrt(n / 4), 16, 1024))
    x0, y0 = float(x.min()), float(y.min())
    ext = np.array([float(x.max()) - x0, float(y.max()) - y0])
    # Square cells: rows spread thinly on one axis (a road, a flat slab seen edge-on) must
    # not shrink the cells, and with them the boundary's sample spacing, to nothing.
    size = np.full(2, max(float(ext.max()) / cells, 1e-9 * max(float(np.abs([x0, y0]).max()), 1.0)))
    box = shapely.box(x0, y0, x0 + cells * size[0], y0 + cells * size[1])
    if shapely.length(shapely.clip_by_rect(shapely.boundary(poly), *box.bounds)) > 2 * n * size[0]:
        return shapely.contains_xy(poly, x, y)  # more boundary samples than rows: test rows directly
    near = _boundary_cells(poly, x0, y0, size, cells)
    start = ~near
    start[:, 1:] &= near[:, :-1]  # first far cell of each run along a column
    gx, gy = np.nonzero(start)
    run_inside = shapely.contains_xy(poly, x0 + (gx + 0.5) * size[0], y0 + (gy + 0.5) * size[1])
    run = np.cumsum(start.ravel()) - 1
    inside = np.where(near.ravel(), False, run_inside[np.maximum(run, 0)] if len(run_inside) else False)
    cell = np.minimum(((x - x0) / size[0]).astype(np.int64), cells - 1) * cells
    cell += np.minimum(((y - y0) / size[1]).astype(np.int64), cells - 1)
    out = inside[cell]
    test = np.flatnonzero(near.ravel()[cell])
    out[test] = shapely.contains_xy(poly, x[test], y[test])
    return out


def _boxes(
    points_only: bool, poly: Any, ax: tuple[int, int], lo: np.ndarray, hi: np.ndarray
) -> list[tuple[Any, Any, Any]]:
    """``(lo, hi, polygon)`` of each box query to run: one for the whole polygon, or for a
    MultiPolygon over point data (no connectivity to keep) one per part when their boxes
    cover much less than the whole box does. A point strictly inside one part is inside no
    other part, so the per-part results never overlap."""
    import shapely

    def clipped(bounds: Any) -> tuple[np.ndarray, np.ndarray]:
        b_lo, b_hi = lo.copy(), hi.copy()
        b_lo[list(ax)] = np.maximum(lo[list(ax)], bounds[:2])
        b_hi[list(ax)] = np.minimum(hi[list(ax)], bounds[2:])
        # A polygon beside the box leaves lo > hi; the plane at lo holds no point strictly
        # inside the polygon, so querying it instead returns the same (empty) selection.
        return b_lo, np.maximum(b_hi, b_lo)

    whole = [(*clipped(np.asarray(poly.bounds)), poly)]
    if not isinstance(poly, shapely.MultiPolygon) or not points_only:
        return whole
    parts = shapely.get_parts(poly)
    b = shapely.bounds(parts)

    def area(q: np.ndarray) -> float:
        return float(np.prod(np.maximum(q[..., 2:] - q[..., :2], 0.0), axis=-1).sum())

    if area(b) > 0.5 * area(np.asarray(poly.bounds)):
        return whole
    out = []
    for part, bounds in zip(parts, b):
        shapely.prepare(part)
        out.append((*clipped(bounds), part))
    return out


def _concat(parts: list[Result]) -> Result:
    """Point results of disjoint regions, one after the other."""
    if len(parts) == 1:
        return parts[0]
    first = parts[0]
    ids = None if first.object_ids is None else np.concatenate([p.object_ids for p in parts])
    return Result(
        np.concatenate([p.positions for p in parts]),
        {k: np.concatenate([p.attributes[k] for p in parts]) for k in first.attributes},
        ids,
        first.axes,
    )


def query_polygon(
    ds: BoxReader,
    polygon: Any,
    polygon_axes: Sequence[str | int] | None = None,
    bbox: tuple[np.ndarray, np.ndarray] | None = None,
    *,
    level: int = 0,
    attributes: Sequence[str] | bool | None = None,
    object_ids: bool | None = None,
    whole_objects: bool = False,
    faces: str = "inside",
    where: Any = None,
    predicate: str = "contains",
) -> Result:
    """Vertices strictly inside ``polygon`` (and inside ``bbox`` when given, and meeting
    ``where``), with the edges,
    faces and line pieces among them; ``whole_objects=True`` returns instead every whole
    object with a vertex inside."""
    if faces != "inside":
        raise InputError("polygon queries return faces='inside' only (faces whose vertices are all inside)")
    if predicate not in PREDICATES:
        raise InputError(choice_message("predicate", predicate, PREDICATES))
    ax = polygon_axes_of(ds, polygon_axes)
    poly = as_polygon(polygon)
    lo, hi = (np.full(ds.ndim, -np.inf), np.full(ds.ndim, np.inf)) if bbox is None else bbox
    if predicate == "intersects" and ds.level(level).manifests is not None:
        if where is not None:
            raise InputError("where= does not go with predicate='intersects', which returns whole objects")
        found = intersecting_objects(
            ds, poly, ax, (np.asarray(lo, float), np.asarray(hi, float)), level, attributes
        )
        return dataclasses.replace(
            found, region=Region(np.asarray(lo, float), np.asarray(hi, float), poly, ax)
        )
    test = contains if predicate == "contains" else _intersects_xy
    with_ids = True if whole_objects else object_ids
    parts = []
    points_only = family_of(ds.level(level).root.geometry_types) in (None, "points")
    for b_lo, b_hi, part in _boxes(points_only, poly, ax, np.asarray(lo, float), np.asarray(hi, float)):
        res = ds.query(
            (b_lo, b_hi),
            level=level,
            attributes=False if whole_objects and where is None else attributes,
            object_ids=with_ids,
            where=where,
        )
        parts.append(res.subset(test(part, res.positions[:, ax[0]], res.positions[:, ax[1]])))
    out = _concat(parts)
    b_lo, b_hi = np.asarray(lo, float).copy(), np.asarray(hi, float).copy()
    b_lo[list(ax)] = np.maximum(b_lo[list(ax)], poly.bounds[:2])
    b_hi[list(ax)] = np.minimum(b_hi[list(ax)], poly.bounds[2:])
    region = Region(b_lo, b_hi, poly, ax)
    if whole_objects:
        if out.object_ids is None:
            raise InputError("whole_objects=True needs an object index; this level has none")
        whole = ds.objects(
            owned(out.object_ids, ds.level(level).object_id_map), level=level, attributes=attributes
        )
        return dataclasses.replace(whole, region=region)
    return dataclasses.replace(out, region=region, origin=Origin(ds, level, complete=False))
