"""The result of a read: flat vertex arrays plus whatever connectivity the geometry has."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from zarr_vectors.errors import InputError

__all__ = ["Result", "Region", "Origin"]


class Region(NamedTuple):
    """What a query selected: the inclusive box ``lo``..``hi`` (infinite where unbounded) and,
    for a polygon query, the shapely polygon tested on the axes ``polygon_axes`` (indices)."""

    lo: np.ndarray
    hi: np.ndarray
    polygon: Any = None
    polygon_axes: tuple[int, int] = (0, 1)


class Origin(NamedTuple):
    """Where a result's rows came from: the :class:`~zarr_vectors.Dataset`, the level, and
    whether every object in it is complete (an object read) or only its rows in a region."""

    dataset: Any
    level: int
    complete: bool


@dataclass(eq=False)
class Result:
    """Vertices of a query or object read, with row-aligned attributes.

    ``positions`` is (N, D); every array in ``attributes`` has N rows; ``object_ids``
    is (N,) or None when the level has no object index: the user's ids with their dtype
    (int64 or uint64) where the store keeps them, else int64 ``0 .. B-1``. Connectivity indexes
    rows of ``positions``: ``edges`` (E, 2); for lines, line ``i`` is rows
    ``line_offsets[i]:line_offsets[i + 1]`` in order along the line; for skeletons,
    ``edges`` are ``(parent, child)`` and ``parents[i]`` is row i's parent row (-1 for a
    root or a parent outside the result); for meshes, ``faces`` (F, 3).

    Examples
    --------
    >>> import zarr_vectors as zv
    >>> ds = zv.write_points("memory://doc-result", [[0.0, 0.0], [1.0, 1.0], [5.0, 5.0]], chunk_shape=4)
    >>> res = ds.query(bbox=([0, 0], [2, 2]))
    >>> res
    <Result 2 vertices x 2 axes; attributes: none>
    >>> len(res), res.axes, res.positions.tolist()
    (2, ('x', 'y'), [[0.0, 0.0], [1.0, 1.0]])

    A result can also be made by hand, for example to export or draw:

    >>> import numpy as np
    >>> zv.Result(np.zeros((3, 2)), attributes={"t": np.arange(3)})
    <Result 3 vertices x 2 axes; attributes: t>
    """

    positions: np.ndarray
    attributes: dict[str, np.ndarray] = field(default_factory=dict)
    object_ids: np.ndarray | None = None
    axes: tuple[str, ...] = ()
    edges: np.ndarray | None = None
    faces: np.ndarray | None = None
    line_offsets: np.ndarray | None = None
    parents: np.ndarray | None = None
    edge_attributes: dict[str, np.ndarray] = field(default_factory=dict)
    #: The query's region (None for object reads and hand-made results).
    region: Region | None = None
    #: The store the rows came from (set by ``Dataset.query`` and ``Dataset.objects``).
    origin: Origin | None = None

    @property
    def lines(self) -> list[np.ndarray] | None:
        """Positions of each line (or line piece), from ``line_offsets``; None for other geometry.

        Examples
        --------
        >>> import zarr_vectors as zv
        >>> lines = [[[0, 0], [1, 1]], [[3, 3], [3, 4], [4, 4]]]
        >>> ds = zv.write_lines("memory://doc-result-lines", lines, chunk_shape=4)
        >>> [line.tolist() for line in ds.read().lines]
        [[[0, 0], [1, 1]], [[3, 3], [3, 4], [4, 4]]]
        """
        if self.line_offsets is None:
            return None
        o = self.line_offsets
        return [self.positions[o[i] : o[i + 1]] for i in range(len(o) - 1)]

    def __len__(self) -> int:
        return len(self.positions)

    def __repr__(self) -> str:
        names = ", ".join(self.attributes) or "none"
        objs = "" if self.object_ids is None else f", {len(np.unique(self.object_ids))} objects"
        return f"<Result {len(self)} vertices x {self.positions.shape[1]} axes; attributes: {names}{objs}>"

    def plot(self, **kwargs: Any) -> Any:
        """Draw the result with matplotlib (extra ``plot``) and return the axes.

        Parameters
        ----------
        **kwargs
            ``ax``, ``view``, ``color_by``, ...: the keywords of :func:`zarr_vectors.plot.plot`.

        Returns
        -------
        matplotlib.axes.Axes

        Examples
        --------
        >>> import zarr_vectors as zv
        >>> from matplotlib.figure import Figure
        >>> ds = zv.write_points("memory://doc-result-plot", [[0, 0], [1, 2], [3, 1]], chunk_shape=2)
        >>> ax = ds.read().plot(ax=Figure().add_subplot(), title="three points")
        >>> ax.get_title()
        'three points'
        """
        from zarr_vectors.plot import plot

        return plot(self, **kwargs)

    def subset(self, mask: np.ndarray) -> Result:
        """The rows where ``mask`` is true, with connectivity kept consistent.

        Edges and faces survive when all their rows do; a line piece splits where rows
        are dropped; a parent outside the subset becomes -1. ``region`` and ``origin``
        are carried over (the caller narrows ``region`` when it means to).

        Parameters
        ----------
        mask
            (N,) booleans, one per row.

        Returns
        -------
        Result

        Raises
        ------
        InputError
            ``mask`` does not have one entry per row.

        Examples
        --------
        >>> import zarr_vectors as zv
        >>> ds = zv.write_lines("memory://doc-subset", [[[0, 0], [1, 0], [2, 0], [3, 0]]], chunk_shape=4)
        >>> res = ds.read()
        >>> part = res.subset(res.positions[:, 0] != 1)
        >>> [line.tolist() for line in part.lines]
        [[[0, 0]], [[2, 0], [3, 0]]]
        >>> part.edges.tolist()
        [[1, 2]]
        """
        mask = np.asarray(mask, bool)
        if mask.shape != (len(self),):
            raise InputError(f"mask must have shape ({len(self)},), got {mask.shape}")
        rows = np.flatnonzero(mask)
        remap = np.full(len(self) + 1, -1, np.int64)  # slot -1 maps a missing parent to -1
        remap[rows] = np.arange(len(rows))
        out = Result(
            self.positions[rows],
            {k: v[rows] for k, v in self.attributes.items()},
            None if self.object_ids is None else self.object_ids[rows],
            self.axes,
            region=self.region,
            origin=self.origin,
        )
        if self.edges is not None:
            keep = mask[self.edges].all(axis=1) if len(self.edges) else np.zeros(0, bool)
            out.edges = remap[self.edges[keep]].reshape(-1, 2)
            out.edge_attributes = {k: v[keep] for k, v in self.edge_attributes.items()}
        if self.faces is not None:
            keep = mask[self.faces].all(axis=1) if len(self.faces) else np.zeros(0, bool)
            out.faces = remap[self.faces[keep]].reshape(-1, self.faces.shape[1])
        if self.parents is not None:
            out.parents = remap[self.parents[rows]]
        if self.line_offsets is not None:
            starts = np.zeros(len(self), bool)
            starts[self.line_offsets[:-1][np.diff(self.line_offsets) > 0]] = True
            starts[1:] |= ~mask[:-1]
            out.line_offsets = np.append(np.flatnonzero(starts[rows]), len(rows)).astype(np.int64)
        return out

    def to_shapely(self, clip: bool = False, *, object_attributes: Any = None) -> Any:
        """Shapely geometries of the result's objects: ``(ids, geometries)``.

        ``ids`` are the object ids present, ascending; ``geometries`` an aligned object
        array. A region query's objects are read whole (one more batch) and returned whole,
        or cut to the query's box or polygon with ``clip=True``. Stores written by
        :func:`~zarr_vectors.write_geometries` give back the geometries written; other
        stores give MultiPoint (points), (Multi)LineString (lines) or MultiLineString
        (graph edges) per object. ``object_attributes`` (True for all, or names) adds a
        third item, a dict name -> values aligned with ``ids``. See
        :func:`zarr_vectors.shapely_io.result_to_shapely`.

        Parameters
        ----------
        clip
            Cut a region query's objects to its box or polygon.
        object_attributes
            True for every object attribute, or a list of names: add a dict name -> values
            aligned with ``ids`` as a third item.

        Returns
        -------
        tuple
            ``(ids, geometries)``, or ``(ids, geometries, attributes)``.

        Examples
        --------
        >>> import zarr_vectors as zv
        >>> lines = [[[0, 0], [4, 0]], [[0, 2], [0, 6]]]
        >>> ds = zv.write_lines("memory://doc-to-shapely", lines, chunk_shape=2, object_ids=[11, 12])
        >>> ids, geoms = ds.query(bbox=([0, 0], [1, 1])).to_shapely()
        >>> ids.tolist(), [g.wkt for g in geoms]
        ([11], ['LINESTRING (0 0, 4 0)'])
        >>> ids, geoms = ds.query(bbox=([0, 0], [1, 1])).to_shapely(clip=True)
        >>> [g.wkt for g in geoms]
        ['LINESTRING (0 0, 1 0)']
        """
        from zarr_vectors.shapely_io import result_to_shapely

        return result_to_shapely(self, clip=clip, object_attributes=object_attributes)

    def to_geodataframe(self, clip: bool = False, *, object_attributes: Any = True) -> Any:
        """The result as a ``geopandas.GeoDataFrame`` in the store's CRS (the ``geo`` extra).

        With object ids: one feature per object, as :meth:`to_shapely` builds it, with columns
        ``object_id`` and the object attributes (``name_0 ..`` for several values per object).
        Without: one Point per vertex, with the vertex attributes.

        Parameters
        ----------
        clip
            Cut each object to the query's region (see :meth:`to_shapely`).
        object_attributes
            True (all), a list of names, or False (none) for the object attribute columns.

        Returns
        -------
        geopandas.GeoDataFrame

        Examples
        --------
        >>> import shapely, zarr_vectors as zv
        >>> ds = zv.write_geometries("memory://doc-gdf", [shapely.box(0, 0, 2, 2), shapely.Point(5, 5)],
        ...                          chunk_shape=4, crs="EPSG:32633", object_attributes={"rank": [1, 2]})
        >>> gdf = ds.read().to_geodataframe()
        >>> gdf[["object_id", "rank"]].values.tolist(), gdf.crs.to_epsg(), list(gdf.geom_type)
        ([[0, 1], [1, 2]], 32633, ['Polygon', 'Point'])
        """
        from zarr_vectors.shapely_io import result_to_geodataframe

        return result_to_geodataframe(self, clip, object_attributes)

    def to_trimesh(self, process: bool = False) -> Any:
        """The result as a ``trimesh.Trimesh`` (positions and ``faces``; meshes only).

        Parameters
        ----------
        process
            Let trimesh merge and reorder vertices; ``False`` keeps every vertex and face as read.

        Returns
        -------
        trimesh.Trimesh

        Raises
        ------
        InputError
            The result has no faces (not a mesh read).

        Examples
        --------
        >>> import zarr_vectors as zv
        >>> vertices = [[0, 0, 0], [1, 0, 0], [0, 1, 0], [1, 1, 0]]
        >>> ds = zv.write_mesh("memory://doc-to-trimesh", vertices, [[0, 1, 2], [1, 3, 2]], chunk_shape=2)
        >>> mesh = ds.read().to_trimesh()
        >>> mesh.vertices.shape, mesh.faces.tolist(), float(mesh.area)
        ((4, 3), [[0, 1, 2], [1, 3, 2]], 1.0)
        """
        if self.faces is None:
            raise InputError("this result has no faces: to_trimesh needs a mesh query or object read")
        import trimesh

        return trimesh.Trimesh(vertices=self.positions, faces=self.faces, process=process)

    def to_pandas(self) -> Any:
        """The rows as a ``pandas.DataFrame``: a column per axis, ``object_id``, ``line`` and
        ``parent`` where the result has them, then the attributes (``name_0 ..`` for an
        attribute of several values per row). Needs the ``dataframe`` extra.

        Examples
        --------
        >>> import numpy as np, zarr_vectors as zv
        >>> res = zv.Result(np.array([[0.0, 1.0], [2.0, 3.0]]), {"t": np.array([5, 6])}, axes=("x", "y"))
        >>> res.to_pandas()
             x    y  t
        0  0.0  1.0  5
        1  2.0  3.0  6
        """
        from zarr_vectors.tables import to_pandas

        return to_pandas(self)

    def to_arrow(self) -> Any:
        """The rows as a ``pyarrow.Table`` with the columns of :meth:`to_pandas` (the axes and,
        for a store with one, the CRS in the schema's metadata). Needs the ``dataframe`` extra.

        Examples
        --------
        >>> import numpy as np, zarr_vectors as zv
        >>> res = zv.Result(np.zeros((3, 3), np.float32), object_ids=np.array([7, 7, 9]), axes=("x", "y", "z"))
        >>> res.to_arrow().column_names
        ['x', 'y', 'z', 'object_id']
        """
        from zarr_vectors.tables import to_arrow

        return to_arrow(self)

    def sorted(self) -> Result:
        """A copy with rows in lexicographic order of (object id, position): a canonical order
        for comparing. Connectivity is not carried over.

        Returns
        -------
        Result

        Examples
        --------
        >>> import numpy as np, zarr_vectors as zv
        >>> res = zv.Result(np.array([[2.0, 0.0], [1.0, 5.0], [1.0, 3.0]]), object_ids=np.array([0, 1, 0]))
        >>> res.sorted().positions.tolist()
        [[1.0, 3.0], [2.0, 0.0], [1.0, 5.0]]
        """
        keys = [self.positions[:, i] for i in reversed(range(self.positions.shape[1]))]
        if self.object_ids is not None:
            keys.append(self.object_ids)
        order = np.lexsort(keys) if len(self) else np.zeros(0, np.int64)
        return Result(
            positions=self.positions[order],
            attributes={k: v[order] for k, v in self.attributes.items()},
            object_ids=None if self.object_ids is None else self.object_ids[order],
            axes=self.axes,
        )
