"""The opened store: :class:`Dataset` and :func:`open`."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from zarr_vectors.dataset.groups import GroupReads
from zarr_vectors.dataset.levels import LevelUpdates
from zarr_vectors.dataset.polygon import query_polygon
from zarr_vectors.engine import (
    OBJECT_ID_ATTRIBUTE,
    Level,
    VectorStore,
    box_batches,
    parse_box,
    parse_where,
    table_values,
)
from zarr_vectors.engine import query as engine_query
from zarr_vectors.errors import AttributeNotFoundError, InputError
from zarr_vectors.format.kinds import family_of, read_family
from zarr_vectors.result import Origin, Region, Result

__all__ = ["Dataset", "open"]


class Dataset(GroupReads, LevelUpdates):
    """A Zarr Vectors store opened for reading (``mode="r"``) or updating (``"r+"``).

    Metadata of the root is read on open; each level's metadata is read the first
    time the level is used. Cell data is read only by queries. Every batch of reads is
    checked against the root read on open: when another writer replaced the store in
    the meantime, :class:`~zarr_vectors.errors.StoreChangedError` is raised instead of
    an answer mixing two versions (open the store again).

    Get one from :func:`zarr_vectors.open` or from any ``write_*`` function.

    Examples
    --------
    >>> import zarr_vectors as zv
    >>> ds = zv.write_points("memory://doc-dataset", [[0, 0], [1, 2], [6, 7]], chunk_shape=4)
    >>> ds
    <zarr_vectors.Dataset memory://doc-dataset point_cloud axes=x,y bounds=[0.0, 0.0]..[6.0, 7.0] levels=[0]>
    >>> ds.geometry_types, ds.axes, ds.ndim, ds.levels
    (('point_cloud',), ('x', 'y'), 2, [0])
    >>> ds.query(bbox=([0, 0], [2, 2])).positions.tolist()
    [[0, 0], [1, 2]]
    """

    def __init__(self, store: VectorStore) -> None:
        self._store = store

    @classmethod
    def open(
        cls,
        target: Any,
        mode: str = "r",
        storage_options: dict[str, Any] | None = None,
        *,
        wait: float | None = None,
    ) -> Dataset:
        """Open ``target``; the same as :func:`zarr_vectors.open`.

        Parameters
        ----------
        target
            A directory, a ``.zip`` file, a URL or a zarr v3 ``Store``.
        mode
            ``"r"`` (read only) or ``"r+"`` (coarser levels may be added).
        storage_options
            Options for fsspec and the storage layer, as for :func:`zarr_vectors.open`.
        wait
            Seconds a write waits for another writer's lock, as for :func:`zarr_vectors.open`.

        Returns
        -------
        Dataset

        Examples
        --------
        >>> import zarr_vectors as zv
        >>> _ = zv.write_points("memory://doc-dataset-open", [[0, 0, 0]], chunk_shape=1)
        >>> zv.Dataset.open("memory://doc-dataset-open").vertex_count()
        1
        """
        return cls(VectorStore.open(target, mode, storage_options, wait))

    @property
    def mode(self) -> str:
        """``"r"`` (read only) or ``"r+"`` (levels may be added)."""
        return self._store.mode

    @property
    def root(self) -> Any:
        """The root's parsed ``zarr_vectors`` metadata (:class:`~zarr_vectors.format.metadata.RootMeta`)."""
        return self._store.root

    @property
    def _backend(self) -> Any:
        return self._store.backend

    # -- description -----------------------------------------------------------------
    @property
    def levels(self) -> list[int]:
        """Level indices, finest (0) first."""
        return self._store.levels

    @property
    def ndim(self) -> int:
        """Number of spatial axes."""
        return self._store.ndim

    @property
    def axes(self) -> tuple[str, ...]:
        """Names of the spatial axes."""
        return self._store.axes

    @property
    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """The store's inclusive bounds ``(lo, hi)``, two float arrays of length :attr:`ndim`.

        Examples
        --------
        >>> import zarr_vectors as zv
        >>> ds = zv.write_points("memory://doc-bounds", [[0, 5], [3, 1]], chunk_shape=2)
        >>> [corner.tolist() for corner in ds.bounds]
        [[0.0, 1.0], [3.0, 5.0]]
        """
        return np.asarray(self.root.bounds[0]), np.asarray(self.root.bounds[1])

    @property
    def chunk_shape(self) -> np.ndarray:
        """Edge lengths of a level-0 spatial chunk, one per axis (coarser levels may have larger chunks)."""
        return np.asarray(self.root.chunk_shape)

    @property
    def bin_shape(self) -> np.ndarray:
        """Edge lengths of a level-0 bin, one per axis; equal to :attr:`chunk_shape` when
        every chunk is one bin.

        Examples
        --------
        >>> import zarr_vectors as zv
        >>> ds = zv.write_points("memory://doc-bins", [[0, 0], [7, 7]], chunk_shape=4, bin_shape=2)
        >>> ds.chunk_shape.tolist(), ds.bin_shape.tolist()
        ([4.0, 4.0], [2.0, 2.0])
        """
        return np.asarray(self.root.effective_bin_shape)

    @property
    def geometry_types(self) -> tuple[str, ...]:
        """The geometry kinds the store declares (``"point_cloud"``, ``"polyline"``,
        ``"streamline"``, ``"skeleton"``, ``"graph"``, ``"mesh"``, ...)."""
        return self.root.geometry_types

    @property
    def crs(self) -> Any:
        """The store's CRS: a :class:`~zarr_vectors.geo.CRS` (a dict of GeoZarr ``proj:`` keys,
        with ``code``/``wkt2``/``projjson`` and ``to_pyproj()``), another stored record as it
        is, or None.

        Examples
        --------
        >>> import zarr_vectors as zv
        >>> ds = zv.write_points("memory://doc-crs", [[13.4, 52.5]], chunk_shape=1, crs="EPSG:4326")
        >>> ds.crs.code
        'EPSG:4326'
        """
        from zarr_vectors.geo import crs_view

        return crs_view(self.root.crs)

    def level(self, index: int = 0) -> Level:
        """Level ``index`` (its metadata read on first use): the engine's view of one level.

        Parameters
        ----------
        index
            A level of :attr:`levels`; 0 is the finest.

        Returns
        -------
        zarr_vectors.engine.level.Level

        Raises
        ------
        LevelNotFoundError
            The store has no level ``index`` (a ``KeyError``).

        Examples
        --------
        >>> import zarr_vectors as zv
        >>> ds = zv.write_points("memory://doc-level", [[0, 0], [1, 1]], chunk_shape=1)
        >>> ds.level(0).meta.vertex_count
        2
        """
        return self._store.level(index)

    def vertex_count(self, level: int = 0) -> int:
        """Number of vertices stored at ``level``, from its metadata (no vertex data is read).

        Parameters
        ----------
        level
            The level to count.

        Returns
        -------
        int

        Examples
        --------
        >>> import zarr_vectors as zv
        >>> ds = zv.write_points("memory://doc-vertex-count", [[0, 0], [1, 1], [2, 2]], chunk_shape=1)
        >>> ds.vertex_count()
        3
        """
        return self.level(level).meta.vertex_count

    def num_objects(self, level: int = 0) -> int:
        """Size of the object id space on disk (OIDs ``0 .. n-1``): the number of distinct ids
        when remapped, the largest id plus one when small ids are kept as given (the ids between
        have no rows and are no objects: :meth:`object_ids` lists the objects).

        Parameters
        ----------
        level
            The level to count.

        Returns
        -------
        int
            0 when the level has no object index.

        Examples
        --------
        >>> import zarr_vectors as zv
        >>> pts = [[0, 0], [1, 1], [5, 5]]
        >>> ds = zv.write_points("memory://doc-num-objects", pts, chunk_shape=4, object_ids=[7, 7, 9])
        >>> ds.num_objects()  # ids kept as given: 0 .. 9
        10
        >>> big = zv.write_points("memory://doc-num-big", pts, chunk_shape=4, object_ids=[7, 7, 10**9])
        >>> big.num_objects()  # remapped through an object_id table
        2
        """
        return self.level(level).num_objects

    def object_ids(self, level: int = 0) -> np.ndarray:
        """The objects' ids, ascending: the user's ids (int64 or uint64) when the store remaps
        them (``object_attributes/object_id``), else the OIDs that have rows at ``level`` (small
        ids are kept as given; an id between them without rows is no object, and reads empty).

        Parameters
        ----------
        level
            The level to list.

        Returns
        -------
        numpy.ndarray
            (B,) int64 or uint64.

        Examples
        --------
        >>> import zarr_vectors as zv
        >>> pts = [[0, 0], [1, 1], [5, 5]]
        >>> ds = zv.write_points("memory://doc-object-ids", pts, chunk_shape=4, object_ids=[2**40, 12, 2**40])
        >>> ds.object_ids().tolist()
        [12, 1099511627776]
        >>> zv.write_points("memory://doc-object-ids-kept", pts, chunk_shape=4, object_ids=[90, 12, 90]).object_ids().tolist()
        [12, 90]
        """
        lv = self.level(level)
        return lv.object_id_map.to_user(lv.listed_objects)

    def attribute_names(self, level: int = 0) -> list[str]:
        """Names of the per-vertex attributes of ``level``, sorted.

        Parameters
        ----------
        level
            The level to list.

        Returns
        -------
        list of str

        Examples
        --------
        >>> import zarr_vectors as zv
        >>> attrs = {"intensity": [0.5, 2.0], "label": [3, 4]}
        >>> pts = [[0, 0], [1, 1]]
        >>> ds = zv.write_points("memory://doc-attribute-names", pts, chunk_shape=1, attributes=attrs)
        >>> ds.attribute_names()
        ['intensity', 'label']
        """
        return sorted(self.level(level).vertex_attributes)

    def object_attribute_names(self, level: int = 0) -> list[str]:
        """Object attribute names, sorted; the id table ``object_id`` is left out (see :meth:`object_ids`).

        Parameters
        ----------
        level
            The level to list.

        Returns
        -------
        list of str

        Examples
        --------
        >>> import zarr_vectors as zv
        >>> ds = zv.write_points(
        ...     "memory://doc-object-attribute-names", [[0, 0], [1, 1]], chunk_shape=1,
        ...     object_ids=[5, 8], object_attributes={"volume": [2.5, 4.0]},
        ... )
        >>> ds.object_attribute_names()
        ['volume']
        """
        lv = self.level(level)
        hidden = {OBJECT_ID_ATTRIBUTE} if lv.object_id_map.user is not None else set()
        return sorted(set(lv.object_attributes) - hidden)

    def close(self) -> None:
        """Close the files the dataset keeps open for reading (the shards of a local store).

        Garbage collection does the same, and so does leaving a ``with`` block. The dataset
        stays usable: later reads open the files they need again.

        Examples
        --------
        >>> import tempfile, pathlib, zarr_vectors as zv
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     path = pathlib.Path(folder) / "points.zarr"
        ...     _ = zv.write_points(path, [[0, 0], [1, 1], [5, 5]], chunk_shape=4)
        ...     ds = zv.open(path)
        ...     first = len(ds.query(bbox=([0, 0], [2, 2])))
        ...     ds.close()
        ...     again = len(ds.query(bbox=([0, 0], [2, 2])))
        >>> first, again
        (2, 2)
        """
        self._store.backend.close()

    def __enter__(self) -> Dataset:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        lo, hi = self.bounds
        return (
            f"<zarr_vectors.Dataset {self._store.description} {'/'.join(self.geometry_types)} "
            f"axes={','.join(self.axes)} bounds={lo.tolist()}..{hi.tolist()} levels={self.levels}>"
        )

    # -- reading ---------------------------------------------------------------------
    def query(
        self,
        bbox: Any = None,
        *,
        level: int = 0,
        attributes: Sequence[str] | bool | None = None,
        object_ids: bool | None = None,
        whole_objects: bool = False,
        faces: str = "inside",
        polygon: Any = None,
        polygon_axes: Sequence[str | int] | None = None,
        max_vertices: int | None = None,
        workers: int | None = None,
        where: Any = None,
        predicate: str = "contains",
    ) -> Result:
        """Vertices with ``lo <= p <= hi`` on every axis (``bbox=(lo, hi)``; None reads everything).

        Only the cells of chunks the box touches are fetched, in one batch. For lines the
        result also has ``edges`` and ``line_offsets`` (pieces cut at the box); for meshes it
        has ``faces``. ``Result.to_shapely()`` turns any result into geometries.

        Parameters
        ----------
        bbox
            ``(lo, hi)``: the inclusive low and high corners, each a number or one per axis.
            None reads the whole level.
        level
            The level to read (0, the finest, by default).
        attributes
            Vertex attribute names to read; default (None or True) all, ``False`` none.
        object_ids
            Whether to map rows to objects (``Result.object_ids``); default: when the level
            has an object index.
        whole_objects
            Lines: return every complete line with a vertex inside instead of the pieces
            inside the box.
        faces
            Meshes: ``"inside"`` keeps the faces with all three vertices inside;
            ``"touching"`` every face with a vertex inside (with all its vertices).
        polygon
            A shapely Polygon or MultiPolygon: keep only the vertices strictly inside it
            (``shapely.contains_xy``), reading only the chunks its bounding box (within
            ``bbox``, when given) touches.
        polygon_axes
            The two axes (names or indices) ``polygon`` is tested on; default the axes of a
            2-D store.
        max_vertices
            Instead of ``level``: read the finest level whose estimated count in the box is
            at most this many (see :meth:`level_for`); ``result.origin.level`` tells which.
        workers
            Threads that decode and filter cells. Default: every core when the query reads
            16 MB or more, else this thread (handing small reads to threads costs more than it
            saves); ``1``: this thread.
            The result is the same whatever the number.
        where
            Keep only the rows whose numeric attributes meet every condition, tested cell by
            cell as the cells are decoded: ``{"confidence": (">", 0.8)}``, ``"confidence > 0.8
            and type == 3"``, or a list of such strings or ``(name, op, value)`` triples.
            Operators: ``< <= > >= == !=``, ``in`` and ``not in`` (a list), ``between``
            (inclusive ``(low, high)``). A name is a vertex attribute or, failing that, an
            object attribute (the row's object's value; rows without an object fail). Lines and
            meshes lose the vertices that fail, with the edges and faces that use them.
        predicate
            With ``polygon``: ``"contains"`` (default) keeps the vertices strictly inside it;
            ``"intersects"`` returns, whole, every object whose geometry meets the polygon,
            even with no vertex inside (a road crossing it, a parcel around it), as
            ``geopandas`` ``intersects`` finds them. Candidates come from the object index,
            so only their objects are read. Without objects it keeps the vertices inside the
            polygon or on its boundary.

        Raises
        ------
        InputError
            A malformed or inverted ``bbox``, an unknown polygon axis, or both ``level`` and
            ``max_vertices`` given.
        AttributeNotFoundError
            A vertex attribute the level does not have (a ``KeyError``).
        LevelNotFoundError
            A level the store does not have (a ``KeyError``).

        Examples
        --------
        >>> import zarr_vectors as zv
        >>> pts = [[0, 0], [1, 1], [5, 5], [9, 2]]
        >>> ds = zv.write_points("memory://doc-query", pts, chunk_shape=4, attributes={"t": [1, 2, 3, 4]})
        >>> res = ds.query(bbox=([0, 0], [5, 5]))
        >>> res.positions.tolist(), res.attributes["t"].tolist()
        ([[0, 0], [1, 1], [5, 5]], [1, 2, 3])

        ``where`` keeps the rows whose attributes pass:

        >>> ds.query(bbox=([0, 0], [9, 9]), where="t >= 3").attributes["t"].tolist()
        [3, 4]

        A polygon query tests the vertices against the polygon:

        >>> import shapely
        >>> ds.query(polygon=shapely.box(4, 0, 10, 6)).positions.tolist()
        [[5, 5], [9, 2]]

        Lines come back cut at the box, or whole with ``whole_objects=True``:

        >>> lines = [[[0, 0], [2, 1], [6, 3]], [[7, 7], [8, 8]]]
        >>> ls = zv.write_lines("memory://doc-query-lines", lines, chunk_shape=4)
        >>> ls.query(bbox=([0, 0], [3, 3])).lines[0].tolist()
        [[0, 0], [2, 1]]
        >>> ls.query(bbox=([0, 0], [3, 3]), whole_objects=True).line_offsets.tolist()
        [0, 3]
        """
        if max_vertices is not None:
            if level != 0:
                raise InputError("give level= or max_vertices=, not both")
            level = self.level_for(max_vertices=max_vertices, bbox=bbox)
        lv = self.level(level)
        if bbox is None:
            lo = np.full(self.ndim, -np.inf)
            hi = np.full(self.ndim, np.inf)
        else:
            lo, hi = parse_box(bbox, self.ndim, self.axes)
        if polygon is not None:
            return query_polygon(
                self,
                polygon,
                polygon_axes,
                (lo, hi),
                level=level,
                attributes=attributes,
                object_ids=object_ids,
                whole_objects=whole_objects,
                faces=faces,
                where=where,
                predicate=predicate,
            )
        if predicate != "contains":
            raise InputError(f"predicate={predicate!r} goes with a polygon query; give polygon=")
        res = engine_query.box(
            lv,
            lo,
            hi,
            attributes,
            object_ids,
            whole_objects=whole_objects,
            faces=faces,
            everything=bbox is None,
            workers=workers,
            where=parse_where(where),
        )
        return dataclasses.replace(
            res,
            object_ids=_user_ids(lv, res.object_ids),
            region=Region(lo, hi),
            origin=Origin(self, level, complete=whole_objects and self._is_linked),
        )

    def query_batches(
        self,
        bbox: Any = None,
        *,
        level: int = 0,
        attributes: Sequence[str] | bool | None = None,
        object_ids: bool | None = None,
        where: Any = None,
        batch_chunks: int = 64,
        workers: int | None = None,
    ) -> Iterator[Result]:
        """The rows of :meth:`query` as a sequence of results, each from at most
        ``batch_chunks`` chunks, for results larger than memory: only one batch is held at a
        time. Concatenated, the batches are the rows of ``query(bbox, ...)`` in the same order.
        Point clouds are split by chunk; other kinds come as one batch (their rows are joined
        by edges and faces). An empty box yields no batch.

        Parameters
        ----------
        bbox, level, attributes, object_ids, where, workers
            As for :meth:`query`.
        batch_chunks
            Chunks read per batch (the chunks the box covers wholly first, then those it cuts).

        Yields
        ------
        Result
            Each batch's rows, with ``region`` and ``origin`` set.

        Examples
        --------
        >>> import numpy as np, zarr_vectors as zv
        >>> pts = np.random.default_rng(0).uniform(0, 8, (1000, 2))
        >>> ds = zv.write_points("memory://doc-batches", pts, chunk_shape=2)
        >>> sizes = [len(b) for b in ds.query_batches(batch_chunks=4)]
        >>> len(sizes), sum(sizes)
        (4, 1000)
        """
        if isinstance(batch_chunks, bool) or not isinstance(batch_chunks, int) or batch_chunks < 1:
            raise InputError(f"batch_chunks must be a positive integer, got {batch_chunks!r}")
        lv = self.level(level)
        if family_of(self.geometry_types) not in (None, "points"):
            yield self.query(bbox, level=level, attributes=attributes, object_ids=object_ids, where=where)
            return
        lo, hi = (
            (np.full(self.ndim, -np.inf), np.full(self.ndim, np.inf))
            if bbox is None
            else parse_box(bbox, self.ndim, self.axes)
        )
        conditions = parse_where(where)
        row_filter = engine_query.row_filter_for(lv, conditions) if conditions else None
        for res in box_batches(lv, lo, hi, attributes, object_ids, workers, row_filter, batch_chunks):
            yield dataclasses.replace(
                res,
                object_ids=_user_ids(lv, res.object_ids),
                region=Region(lo, hi),
                origin=Origin(self, level, complete=False),
            )

    @property
    def _is_mesh(self) -> bool:
        return read_family(self.geometry_types).has_faces

    @property
    def _is_linked(self) -> bool:
        """Geometry with connectivity: queries return edges (and line pieces for lines)."""
        return read_family(self.geometry_types).linked

    def read(
        self, *, level: int = 0, attributes: Sequence[str] | bool | None = None, where: Any = None
    ) -> Result:
        """Every vertex of a level: ``query(None, level=level, attributes=attributes, where=where)``.

        Parameters
        ----------
        level
            The level to read.
        attributes
            Vertex attribute names to read; default all, ``False`` none.
        where
            Attribute conditions the rows must meet (see :meth:`query`).

        Returns
        -------
        Result

        Examples
        --------
        >>> import zarr_vectors as zv
        >>> ds = zv.write_points("memory://doc-read", [[0, 0], [5, 5]], chunk_shape=4)
        >>> len(ds.read())
        2
        """
        return self.query(None, level=level, attributes=attributes, where=where)

    def objects(
        self, ids: Sequence[int] | int, *, level: int = 0, attributes: Sequence[str] | bool | None = None
    ) -> Result:
        """All vertices of the objects ``ids`` (the user's ids, see :meth:`object_ids`), grouped
        by object in the order given (an id given twice is read once).

        Lines come in order along each line, with ``line_offsets``; linked geometry also
        has ``edges``; skeletons ``parents``; meshes ``faces``.

        Parameters
        ----------
        ids
            One object id or a sequence of them.
        level
            The level to read.
        attributes
            Vertex attribute names to read; default all, ``False`` none.

        Returns
        -------
        Result
            With ``origin.complete`` true: every object in it is whole.

        Raises
        ------
        UnknownIdError
            An id the level does not hold (a ``KeyError``).

        Examples
        --------
        >>> import zarr_vectors as zv
        >>> pts = [[0, 0], [1, 1], [5, 5]]
        >>> ds = zv.write_points("memory://doc-objects", pts, chunk_shape=4, object_ids=[7, 9, 7])
        >>> res = ds.objects([9, 7])
        >>> res.object_ids.tolist(), res.positions.tolist()
        ([9, 7, 7], [[1, 1], [0, 0], [5, 5]])
        """
        lv = self.level(level)
        oids = lv.object_id_map.to_oids(ids)
        _, first = np.unique(oids, return_index=True)
        oids = oids[np.sort(first)]
        res = engine_query.objects(lv, oids, attributes)
        return dataclasses.replace(
            res, object_ids=_user_ids(lv, res.object_ids), origin=Origin(self, level, complete=True)
        )

    def object_attributes(self, name: str, ids: Sequence[int] | None = None, *, level: int = 0) -> np.ndarray:
        """Values of one object attribute, one row per object in the order of :meth:`object_ids`
        (or of the user's ``ids``); absent entries read as NaN or the dtype's sentinel.

        Parameters
        ----------
        name
            The attribute (see :meth:`object_attribute_names`).
        ids
            Object ids to read, in the order wanted; default every object.
        level
            The level to read.

        Returns
        -------
        numpy.ndarray
            (B,) or (B, C), in the attribute's dtype.

        Raises
        ------
        AttributeNotFoundError
            The level has no object attribute ``name`` (a ``KeyError``).
        UnknownIdError
            The level does not hold one of ``ids`` (a ``KeyError``).

        Examples
        --------
        >>> import numpy as np, zarr_vectors as zv
        >>> ds = zv.write_points(
        ...     "memory://doc-object-attributes", [[0, 0], [1, 1]], chunk_shape=1,
        ...     object_ids=[5, 8], object_attributes={"volume": [2.5, 4.0]},
        ... )
        >>> ds.object_attributes("volume").tolist(), ds.object_attributes("volume", [8]).tolist()
        ([2.5, 4.0], [4.0])
        >>> ds.num_objects(), bool(np.isnan(ds.object_attributes("volume", [6])[0]))  # ids 0 .. 8 kept
        (9, True)
        """
        lv = self.level(level)
        if name not in lv.object_attributes:
            raise AttributeNotFoundError("object", [name], level, self.object_attribute_names(level))
        values = table_values(lv, lv.object_attributes[name])
        if ids is not None:
            return values[lv.object_id_map.to_oids(ids)]
        if lv.object_id_map.user is not None or len(values) != lv.num_objects:
            return values
        return values[lv.listed_objects]


def _user_ids(level: Level, oids: np.ndarray | None) -> np.ndarray | None:
    """A result's OIDs as the user's object ids (unchanged where the level keeps none)."""
    return None if oids is None else level.object_id_map.to_user(oids)


def open(  # noqa: A001
    target: Any, mode: str = "r", *, storage_options: dict[str, Any] | None = None, wait: float | None = None
) -> Dataset:
    """Open a Zarr Vectors store: a directory, a ``.zip`` file, a URL or a zarr v3 ``Store``.

    Only the root metadata is read here; see :class:`Dataset` for what is read when.

    Parameters
    ----------
    target
        A directory path, a ``.zip`` path, a URL (``s3://``, ``memory://``, ``file://``, ...)
        or a zarr v3 ``Store``.
    mode
        ``"r"`` (read only) or ``"r+"`` (coarser levels may be added with
        :meth:`Dataset.build_pyramid`).
    storage_options
        Options for fsspec, except ``zv_timeout`` (seconds per request to an object store,
        default 30) and ``zv_follow_symlinks`` (local stores: read links that lead out of
        the store); see ``docs/storage.md``.
    wait
        ``mode="r+"``: seconds each write (``append``, ``build_pyramid``) waits for another
        writer holding the local store's lock before it raises
        :class:`~zarr_vectors.errors.StoreConflictError` (default: the ``zv_wait`` storage
        option, else 0, fail at once). A write also raises it when the store was changed by
        another writer since it was opened (or last written through this dataset): nothing is
        applied then; open the store again and repeat the write.

    Returns
    -------
    Dataset

    Raises
    ------
    ZarrV2StoreError
        ``target`` is a Zarr v2 store (a ``ValueError``).
    FormatError
        ``target`` is a Zarr v3 group that is not a Zarr Vectors 0.9 store.
    StoreNotFoundError
        Nothing is stored at a local ``target`` (a ``FileNotFoundError``).
    InputError
        ``mode`` is neither ``"r"`` nor ``"r+"``, or ``wait`` is not a number >= 0.

    Examples
    --------
    >>> import tempfile, pathlib, zarr_vectors as zv
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = pathlib.Path(folder) / "cells.zarr"
    ...     _ = zv.write_points(path, [[0, 0, 0], [4, 5, 6]], chunk_shape=2)
    ...     ds = zv.open(path)
    ...     print(ds.geometry_types, ds.vertex_count())
    ('point_cloud',) 2
    """
    return Dataset.open(target, mode=mode, storage_options=storage_options, wait=wait)
