"""The opened store: :class:`Dataset` and :func:`open`."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from zarr_vectors.engine import query as engine_query
from zarr_vectors.engine.ids import OBJECT_ID_ATTRIBUTE
from zarr_vectors.engine.level import Level
from zarr_vectors.engine.polygon import query_polygon
from zarr_vectors.engine.read import parse_box
from zarr_vectors.engine.store import VectorStore, table_values
from zarr_vectors.errors import AttributeNotFoundError, CorruptCellError, InputError
from zarr_vectors.format.kinds import family_of
from zarr_vectors.pyramid import build_pyramid, level_for
from zarr_vectors.result import Origin, Region, Result

__all__ = ["Dataset", "open"]


class Dataset:
    """A Zarr Vectors store opened for reading (``mode="r"``) or updating (``"r+"``).

    Metadata of the root is read on open; each level's metadata is read the first
    time the level is used. Cell data is read only by queries. Every batch of reads is
    checked against the root read on open: when another writer replaced the store in
    the meantime, :class:`~zarr_vectors.errors.StoreChangedError` is raised instead of
    an answer mixing two versions (open the store again).
    """

    def __init__(self, store: VectorStore) -> None:
        self._store = store

    @classmethod
    def open(cls, target: Any, mode: str = "r", storage_options: dict[str, Any] | None = None) -> Dataset:
        """Open ``target``; see :func:`zarr_vectors.open`."""
        return cls(VectorStore.open(target, mode, storage_options))

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
        return np.asarray(self.root.bounds[0]), np.asarray(self.root.bounds[1])

    @property
    def chunk_shape(self) -> np.ndarray:
        return np.asarray(self.root.chunk_shape)

    @property
    def bin_shape(self) -> np.ndarray:
        return np.asarray(self.root.effective_bin_shape)

    @property
    def geometry_types(self) -> tuple[str, ...]:
        return self.root.geometry_types

    @property
    def crs(self) -> Any:
        """The store's CRS: a :class:`~zarr_vectors.geo.CRS` (a dict of GeoZarr ``proj:`` keys,
        with ``code``/``wkt2``/``projjson`` and ``to_pyproj()``), another stored record as it
        is, or None."""
        from zarr_vectors.geo import crs_view

        return crs_view(self.root.crs)

    def level(self, index: int = 0) -> Level:
        """Level ``index`` (its metadata read on first use)."""
        return self._store.level(index)

    def vertex_count(self, level: int = 0) -> int:
        return self.level(level).meta.vertex_count

    def num_objects(self, level: int = 0) -> int:
        """Number of objects (OIDs ``0 .. n-1`` on disk, whatever ids the user gave them)."""
        return self.level(level).num_objects

    def object_ids(self, level: int = 0) -> np.ndarray:
        """The objects' ids, ascending: the user's ids (int64 or uint64) when the store keeps
        them (``object_attributes/object_id``), else ``0 .. num_objects - 1``."""
        return self.level(level).object_id_map.ids()

    def attribute_names(self, level: int = 0) -> list[str]:
        return sorted(self.level(level).vertex_attributes)

    def object_attribute_names(self, level: int = 0) -> list[str]:
        """Object attribute names; the id table ``object_id`` is left out (see :meth:`object_ids`)."""
        lv = self.level(level)
        hidden = {OBJECT_ID_ATTRIBUTE} if lv.object_id_map.user is not None else set()
        return sorted(set(lv.object_attributes) - hidden)

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
    ) -> Result:
        """Vertices with ``lo <= p <= hi`` on every axis (``bbox=(lo, hi)``; None reads everything).

        ``attributes``: names to read (default all, ``False`` for none). ``object_ids``:
        whether to map rows to objects (default: when the level has an object index).
        Only the cells of chunks the box touches are fetched, in one batch.
        For lines the result also has ``edges`` and ``line_offsets`` (pieces cut at the
        box); ``whole_objects=True`` returns instead every complete line with a vertex inside.
        For meshes the result has ``faces``: those with all three vertices inside, or with
        ``faces="touching"`` every face with a vertex inside (with all its vertices).

        ``polygon`` (a shapely Polygon or MultiPolygon) keeps only the vertices strictly
        inside it (``shapely.contains_xy``), tested on ``polygon_axes`` (two axis names;
        default the axes of a 2-D store), reading only the chunks its bounding box (within
        ``bbox``, when given) touches. ``Result.to_shapely()`` turns any result into geometries.

        ``max_vertices=N`` (instead of ``level``) reads the finest level whose estimated
        count in the box is at most N (see :meth:`level_for`); ``result.origin.level`` tells which.
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
            )
        res = engine_query.box(
            lv,
            lo,
            hi,
            attributes,
            object_ids,
            whole_objects=whole_objects,
            faces=faces,
            everything=bbox is None,
        )
        return dataclasses.replace(
            res,
            object_ids=_user_ids(lv, res.object_ids),
            region=Region(lo, hi),
            origin=Origin(self, level, complete=whole_objects and self._is_linked),
        )

    @property
    def _is_mesh(self) -> bool:
        return family_of(self.geometry_types) == "mesh"

    @property
    def _is_linked(self) -> bool:
        """Geometry with connectivity: queries return edges (and line pieces for lines)."""
        return family_of(self.geometry_types) in ("lines", "graph", "shapes")

    def read(self, *, level: int = 0, attributes: Sequence[str] | bool | None = None) -> Result:
        """Every vertex of a level."""
        return self.query(None, level=level, attributes=attributes)

    def objects(
        self, ids: Sequence[int] | int, *, level: int = 0, attributes: Sequence[str] | bool | None = None
    ) -> Result:
        """All vertices of the objects ``ids`` (the user's ids, see :meth:`object_ids`), grouped
        by object in the order given (an id given twice is read once). Lines come in order
        along each line, with ``line_offsets``; linked geometry also has ``edges``. An id the
        level does not hold raises :class:`~zarr_vectors.errors.UnknownIdError` (a ``KeyError``)."""
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
        (or of the user's ``ids``); absent entries read as NaN or the dtype's sentinel."""
        lv = self.level(level)
        if name not in lv.object_attributes:
            raise AttributeNotFoundError("object", [name], level, self.object_attribute_names(level))
        values = table_values(lv, lv.object_attributes[name])
        return values if ids is None else values[lv.object_id_map.to_oids(ids)]

    def group_ids(self, *, level: int = 0) -> np.ndarray:
        """The groups' ids, ascending: the user's group ids when the store keeps them
        (``group_attributes/group_id``), else ``0 .. G-1``."""
        return self.level(level).group_id_map.ids()

    def groups(self, *, level: int = 0) -> list[np.ndarray]:
        """Member object ids (the user's ids) of every group, in the order of :meth:`group_ids`."""
        lv = self.level(level)
        if lv.groups is None:
            return []
        arr = lv.groups
        n_chunks = -(-arr.length // arr.chunk)
        raws = lv.backend.get_many(arr.chunk_keys(range(n_chunks)))
        items = [it for c, raw in enumerate(raws) for it in arr.vlen_items(raw, c)][: arr.length]
        ranges = arr.attrs.get("group_ranges") or {}
        out = []
        for gid, it in enumerate(items):
            if len(it) % 8:
                raise CorruptCellError(
                    arr.path, str(gid // arr.chunk), f"group {gid} is not a whole number of int64 ids"
                )
            members = np.frombuffer(it, "<i8").astype(np.int64)
            if len(members) == 0 and str(gid) in ranges:
                start, stop = ranges[str(gid)]
                members = np.arange(int(start), int(stop), dtype=np.int64)
            out.append(lv.object_id_map.to_user(members))
        return out

    def group_names(self, *, level: int = 0) -> list[str] | None:
        """Names of the groups, when the writer recorded them (``group_names`` on ``groups``)."""
        lv = self.level(level)
        names = None if lv.groups is None else lv.groups.attrs.get("group_names")
        return None if names is None else [str(n) for n in names]

    def group_attributes(self, name: str, *, level: int = 0) -> np.ndarray:
        """Values of one group attribute, one row per group in the order of :meth:`group_ids`."""
        lv = self.level(level)
        if name not in lv.group_attributes:
            raise AttributeNotFoundError("group", [name], level, lv.group_attributes)
        return table_values(lv, lv.group_attributes[name])

    def group(self, gid: int, *, level: int = 0, attributes: Sequence[str] | bool | None = None) -> Result:
        """All vertices of the objects in group ``gid`` (the user's group id, see :meth:`group_ids`)."""
        groups = self.groups(level=level)
        (index,) = self.level(level).group_id_map.to_oids([gid])
        return self.objects(groups[index], level=level, attributes=attributes)

    # -- levels of detail ------------------------------------------------------------
    def build_pyramid(
        self,
        factors: Sequence[Any] = (2, 2, 2),
        *,
        chunk_scale: Any = "auto",
        reductions: dict[str, str] | None = None,
        cross_level: str = "implicit",
        object_sparsity: Any = None,
        tolerance: float | None = None,
        face_fraction: float | None = None,
        overwrite: bool = False,
        progress: bool = False,
    ) -> list[int]:
        """Add coarser levels ``1, 2, ...``, one per factor, each built from the level before
        (the store must be opened with ``mode="r+"``). Returns the new level indices.

        ``factors``: bin growth per level, a number or one per axis (each level's bins are
        the previous level's times the factor). ``chunk_scale``: ``"auto"`` grows the chunks
        with the bins (``round(factor)``, raised until the bins tile them), ``None`` keeps
        them, or one integer step (or one per axis) per level. ``reductions``: vertex
        attribute -> ``mean``/``mode``/``sum``/``min``/``max``/``first`` for point
        metavertices (default: mean for floats, mode for integers). ``cross_level``:
        ``"implicit"`` writes ``links/+1`` (each fine vertex's coarse parent, compact
        indices), ``"explicit"`` also ``links/-1``, ``"none"`` neither. ``object_sparsity``:
        a fraction of objects kept per level, a :class:`~zarr_vectors.pyramid.Sparsity`, or one
        per level. ``tolerance``: Douglas-Peucker tolerance for lines, skeletons, graphs and
        the paths of polygon / multi-line stores (default half the level's smallest bin edge;
        a polygon ring keeps a triangle and polygons stay valid). ``face_fraction``: faces kept per level for
        meshes (default ``1 / mean(factor) ** 2``). ``overwrite=True`` rebuilds existing
        coarse levels. See ``docs/levels.md``.
        """
        return build_pyramid(
            self._store,
            factors,
            chunk_scale=chunk_scale,
            reductions=reductions,
            cross_level=cross_level,
            object_sparsity=object_sparsity,
            tolerance=tolerance,
            face_fraction=face_fraction,
            overwrite=overwrite,
            progress=progress,
        )

    def level_for(self, *, max_vertices: int | None = None, resolution: Any = None, bbox: Any = None) -> int:
        """The level to read for a vertex budget (the finest whose estimated count in ``bbox``
        fits ``max_vertices``, else the coarsest) or a ``resolution`` (the coarsest whose bins
        are no larger). Decided from level metadata alone: no vertex data is read."""
        return level_for(self._store, max_vertices=max_vertices, resolution=resolution, bbox=bbox)


def _user_ids(level: Level, oids: np.ndarray | None) -> np.ndarray | None:
    """A result's OIDs as the user's object ids (unchanged where the level keeps none)."""
    return None if oids is None else level.object_id_map.to_user(oids)


def open(target: Any, mode: str = "r", *, storage_options: dict[str, Any] | None = None) -> Dataset:  # noqa: A001
    """Open a Zarr Vectors store: a directory, a ``.zip`` file, a URL or a zarr v3 ``Store``.

    Raises ``ValueError`` (:class:`~zarr_vectors.engine.storage.ZarrV2StoreError`) for a Zarr v2
    store and :class:`~zarr_vectors.errors.FormatError` for a Zarr v3 group that is not a
    Zarr Vectors 0.9 store. ``storage_options`` go to fsspec, except ``zv_timeout``
    (seconds per request to an object store, default 30) and ``zv_follow_symlinks``
    (local stores: read links that lead out of the store); see ``docs/storage.md``.
    """
    return Dataset.open(target, mode=mode, storage_options=storage_options)
