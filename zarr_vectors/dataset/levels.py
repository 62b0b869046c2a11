"""Levels of detail and appends, part of :class:`~zarr_vectors.Dataset`."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from zarr_vectors.engine import append_points
from zarr_vectors.errors import InputError
from zarr_vectors.format.kinds import EDITED_LINKED_FAMILIES, family_of
from zarr_vectors.pyramid import (
    LinkedUpdate,
    build_pyramid,
    counted,
    existing_factors,
    level_for,
    one_commit,
    stored_settings,
    update_levels,
)

if TYPE_CHECKING:
    from zarr_vectors.engine import VectorStore

__all__ = ["LevelUpdates"]


class LevelUpdates:
    """Pyramid building, appends and level choice of :class:`~zarr_vectors.Dataset` (which
    provides the attributes declared below for type checking only)."""

    if TYPE_CHECKING:
        _store: VectorStore

        @property
        def levels(self) -> list[int]: ...

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
        point_strategy: str = "auto",
    ) -> list[int]:
        """Add coarser levels ``1, 2, ...``, one per factor, each built from the level before
        (the store must be opened with ``mode="r+"``). See ``docs/levels.md``.

        Parameters
        ----------
        factors
            One entry per new level: its bin growth, a number or one per axis (each level's
            bins are the previous level's times the factor).
        chunk_scale
            ``"auto"`` grows the chunks with the bins (``round(factor)``, raised until the
            bins tile them), ``None`` keeps them, or one integer step (or one per axis) per level.
        reductions
            Vertex attribute -> ``mean``/``mode``/``sum``/``min``/``max``/``first`` for point
            metavertices (default: mean for floats, mode for integers).
        point_strategy
            Point clouds: ``"subsample"`` makes each level a subset of real points of the level
            below (about ``1 / prod(factor)`` of them in every coarse bin, at least one, chosen by
            a hash of their coordinates; attributes unchanged; nested, so a viewer can add a
            level's points to the coarser ones); ``"metavertex"`` one reduced point per coarse
            bin and object; ``"auto"`` (default) subsample without objects, else metavertex.
        cross_level
            ``"implicit"`` writes ``links/+1`` (each fine vertex's coarse parent, compact
            indices), ``"explicit"`` also ``links/-1``, ``"none"`` neither.
        object_sparsity
            A fraction of objects kept per level, a :class:`~zarr_vectors.pyramid.Sparsity`,
            or one per level.
        tolerance
            Douglas-Peucker tolerance for lines, skeletons, graphs and the paths of polygon /
            multi-line stores (default half the level's smallest bin edge; a polygon ring
            keeps a triangle and polygons stay valid).
        face_fraction
            Faces kept per level for meshes (default ``1 / mean(factor) ** 2``).
        overwrite
            Rebuild coarse levels that exist already.
        progress
            Show a progress bar on stderr.

        Returns
        -------
        list of int
            The new level indices.

        Raises
        ------
        ReadOnlyError
            The store was opened with ``mode="r"``.
        InputError
            Malformed factors or options.

        Examples
        --------
        >>> import numpy as np, zarr_vectors as zv
        >>> pts = np.random.default_rng(0).uniform(0, 8, (200, 2))
        >>> _ = zv.write_points("memory://doc-pyramid", pts, chunk_shape=4, bin_shape=1)
        >>> ds = zv.open("memory://doc-pyramid", mode="r+")
        >>> ds.build_pyramid([2, 2])
        [1, 2]
        >>> ds.levels, ds.vertex_count(1) < ds.vertex_count(0)
        ([0, 1, 2], True)
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
            point_strategy=point_strategy,
            overwrite=overwrite,
            progress=progress,
        )

    def append(
        self,
        positions: Any,
        *data: Any,
        attributes: dict[str, Any] | None = None,
        object_ids: Any = None,
        object_attributes: dict[str, dict[Any, Any]] | None = None,
        extend: bool = False,
        pyramid: bool | str = "update",
        workers: int | None = None,
        progress: bool | None = None,
        **keywords: Any,
    ) -> None:
        """Add points to this point cloud (opened with ``mode="r+"``); see ``docs/large-data.md``.

        Only the cells the new points fall in and the object tables are rewritten. The store's
        bounds must contain the points, and the batch must give the store's vertex attributes
        (and object ids when the store has objects). Coarser levels are brought up to date in the
        same commit unless ``pyramid`` says otherwise. A local store changes in one exchange; an
        interrupted append to another store leaves it readable as incomplete.

        Parameters
        ----------
        positions, attributes, object_ids
            As for :func:`zarr_vectors.write_points`.
        object_attributes
            Rows of the store's object attributes for new objects: ``{name: {id: value}}``.
        extend
            Allow ids that are already in the store (their objects gain the points);
            without it such ids are refused.
        pyramid
            What becomes of the coarser levels (when the store has any): ``"update"`` (the
            default) recomputes only the coarse cells above the cells the edit touched (point
            clouds, sharded or not: only the shards holding those cells are rewritten; lines,
            skeletons, graphs and meshes, and edits that renumber objects, get the rebuild),
            each level then as a rebuild with the recorded settings writes it; ``"rebuild"``
            (or True) builds them again with those settings; ``"stale"`` (or False) leaves
            them as they were, marked stale (reads of them warn, :meth:`level_for` skips
            them) until a rebuild. The edit and its update or rebuild are one commit
            (:func:`zarr_vectors.pyramid.one_commit`): a reader or a crash sees the store
            before the edit or after both, and a writer that gets in between makes the edit
            fail with nothing applied.

        Lines, skeletons, graphs and raw meshes take new objects as their writer does
        (``ds.append(positions, parents, object_ids=...)`` for skeletons,
        ``ds.append(lines, object_ids=...)``, ``ds.append(positions, edges, object_ids=...)``,
        ``ds.append(meshes, object_ids=...)``); ``object_ids`` must be new to the store. Only
        the chunks the new objects fall in, the link cells pointing into them and the object
        tables are rewritten; the store then reads as a one-shot write of all its objects in
        ascending id order.

        Examples
        --------
        >>> import numpy as np, zarr_vectors as zv
        >>> _ = zv.write_points("memory://doc-append", np.zeros((3, 2)), chunk_shape=4, bounds=([0, 0], [8, 8]))
        >>> ds = zv.open("memory://doc-append", mode="r+")
        >>> ds.append([[5.0, 5.0], [7.5, 1.0]])
        >>> ds.vertex_count()
        5
        """
        mode, footprint = self._pyramid_mode(pyramid)
        after = self._linked_update(mode, progress)
        with self._edit_commit(mode):
            if self._linked_edit():
                from zarr_vectors.kinds.linked_edit import append_objects

                if extend:
                    raise InputError(
                        "extend=True adds points to objects of a point cloud; give new object ids"
                    )

                given = {
                    "attributes": attributes,
                    "object_ids": object_ids,
                    "object_attributes": object_attributes,
                }
                append_objects(
                    self._store,
                    positions,
                    *data,
                    workers=workers,
                    progress=progress,
                    after=after,
                    **{k: v for k, v in given.items() if v is not None},
                    **keywords,
                )
            else:
                if data or keywords:
                    raise InputError(
                        "a point cloud's append takes positions and the keywords attributes, object_ids, "
                        "object_attributes, extend, pyramid, workers, progress"
                    )
                append_points(
                    self._store,
                    positions,
                    attributes=attributes,
                    object_ids=object_ids,
                    object_attributes=object_attributes,
                    extend=extend,
                    workers=workers,
                    progress=progress,
                    footprint=footprint,
                )
            self._after_edit(mode, footprint, progress, after)

    def replace(self, ids: Any, *data: Any, pyramid: bool | str = "update", **keywords: Any) -> None:
        """Give existing objects new geometry (opened with ``mode="r+"``); see ``docs/large-data.md``.

        ``data`` and ``keywords`` are as for :meth:`append` (point clouds: ``positions`` and
        ``attributes``, ``object_ids``, ``object_attributes``). The objects keep their object
        attribute rows unless ``object_attributes`` gives new ones. Unknown ids raise InputError.
        Only the chunks the old and new geometry touch are rewritten; coarser levels are brought
        up to date in the same commit unless ``pyramid`` says otherwise.

        Parameters
        ----------
        ids
            The objects to replace (user ids the store holds).
        data, keywords
            The new geometry as the kind's writer takes it. Without ``object_ids``, lines and
            meshes take ``ids`` in order, and a skeleton's or graph's vertices all belong to
            the one object ``ids`` names.
        pyramid
            ``"update"`` (default), ``"rebuild"``/True or ``"stale"``/False, as for :meth:`append`.

        Raises
        ------
        InputError
            An id the store lacks, new geometry for other objects, or data the writer refuses.

        Examples
        --------
        >>> import numpy as np, zarr_vectors as zv
        >>> pos = np.array([[1.0, 1, 1], [2, 2, 2], [5, 5, 5], [6, 6, 6]])
        >>> _ = zv.write_skeleton("memory://doc-replace", pos, [-1, 0, -1, 2], object_ids=[1, 1, 2, 2],
        ...                       chunk_shape=4, bounds=([0, 0, 0], [8, 8, 8]))
        >>> ds = zv.open("memory://doc-replace", mode="r+")
        >>> ds.replace([2], [[7.0, 7, 7], [7, 6, 5], [3, 3, 3]], [-1, 0, 1])
        >>> ds.objects([2]).positions.tolist()[2]
        [3.0, 3.0, 3.0]
        """
        mode, footprint = self._pyramid_mode(pyramid)
        after = self._linked_update(mode, keywords.get("progress"))
        with self._edit_commit(mode):
            if self._linked_edit():
                from zarr_vectors.kinds.linked_edit import replace_objects

                replace_objects(self._store, ids, *data, after=after, **keywords)
            else:
                from zarr_vectors.engine import replace_points

                replace_points(self._store, ids, *data, footprint=footprint, **keywords)
            self._after_edit(mode, footprint, keywords.get("progress"), after)

    def delete(
        self,
        ids: Any,
        *,
        pyramid: bool | str = "update",
        workers: int | None = None,
        progress: bool | None = None,
    ) -> None:
        """Remove objects from level 0 (opened with ``mode="r+"``); see ``docs/large-data.md``.

        Their rows leave the chunks that held them (and the link cells pointing there), and
        they leave the object tables and groups; unknown ids raise InputError. Coarser levels
        are brought up to date in the same commit unless ``pyramid`` says otherwise.

        Parameters
        ----------
        ids
            The objects to remove (user ids the store holds).
        pyramid
            ``"update"`` (default), ``"rebuild"``/True or ``"stale"``/False, as for :meth:`append`.
        workers, progress
            As for :meth:`append`.

        Raises
        ------
        InputError
            An id the store lacks.

        Examples
        --------
        >>> import numpy as np, zarr_vectors as zv
        >>> meshes = [(np.array([[1.0, 1, 1], [2, 1, 1], [1, 2, 1]]), [[0, 1, 2]]),
        ...           (np.array([[5.0, 5, 5], [6, 5, 5], [5, 6, 5]]), [[0, 1, 2]])]
        >>> _ = zv.write_meshes("memory://doc-delete", meshes, object_ids=[4, 9], chunk_shape=4,
        ...                     bounds=([0, 0, 0], [8, 8, 8]))
        >>> ds = zv.open("memory://doc-delete", mode="r+")
        >>> ds.delete([4])
        >>> ds.object_ids().tolist(), ds.vertex_count()
        ([9], 3)
        """
        mode, footprint = self._pyramid_mode(pyramid)
        after = self._linked_update(mode, progress)
        with self._edit_commit(mode):
            if self._linked_edit():
                from zarr_vectors.kinds.linked_edit import delete_objects

                delete_objects(self._store, ids, workers=workers, progress=progress, after=after)
            else:
                from zarr_vectors.engine import delete_points

                delete_points(self._store, ids, workers=workers, progress=progress, footprint=footprint)
            self._after_edit(mode, footprint, progress, after)

    def _linked_edit(self) -> bool:
        """Whether edits of this store go to the linked kinds' editor (lines, skeletons, graphs,
        meshes); else to the point cloud's, which refuses other stores."""
        return family_of(self._store.root.geometry_types) in EDITED_LINKED_FAMILIES

    def _pyramid_mode(self, pyramid: bool | str) -> tuple[str, list[Any] | None]:
        """The edit's ``pyramid=`` as ``"stale"``, ``"rebuild"`` or ``"update"``, and the list a
        point edit fills with its footprint (only when the levels are to be updated region by
        region: a point cloud with coarse levels)."""
        modes = {False: "stale", True: "rebuild", "stale": "stale", "rebuild": "rebuild", "update": "update"}
        mode = modes.get(pyramid) if isinstance(pyramid, (bool, str)) else None
        if mode is None:
            raise InputError(
                f"pyramid={pyramid!r}: give 'update' (recompute the coarse cells the edit touched), "
                "'rebuild' or True (rebuild every level), or 'stale' or False (mark the levels stale)"
            )
        has_levels = len(self._store.levels) > 1
        if not has_levels:
            return "stale", None
        regional = mode == "update" and not self._linked_edit()
        return mode, ([] if regional else None)

    def _linked_update(self, mode: str, progress: Any) -> LinkedUpdate | None:
        """The region-wise level update a linked edit runs (None: the levels are rebuilt, or
        marked stale, after the edit; the update's reason says why when it cannot be regional)."""
        if mode != "update" or not self._linked_edit() or len(self._store.levels) < 2:
            return None
        update = LinkedUpdate(self._store, progress=bool(progress))
        if update.reason is not None:
            counted(update.reason)
            return None
        return update

    def _edit_commit(self, mode: str) -> contextlib.AbstractContextManager[Any]:
        """The block an edit and its level update run in: one commit for both (nothing to join
        when the levels are only marked stale)."""
        return contextlib.nullcontext() if mode == "stale" else one_commit(self._store)

    def _after_edit(
        self, mode: str, footprint: list[Any] | None, progress: Any, linked: LinkedUpdate | None = None
    ) -> None:
        """Bring the coarse levels up to date as ``mode`` asks, with the settings they were built
        with (recorded in each level; levels built before the record get the factors alone),
        unless a linked edit's region-wise update did already."""
        if mode == "stale" or (linked is not None and linked.done):
            return
        try:
            settings = stored_settings(self._store)
        except InputError:  # levels built before their settings were recorded: the factors alone
            factors = existing_factors(self._store)
            if factors:
                self.build_pyramid(
                    factors[0], chunk_scale=factors[1], overwrite=True, progress=bool(progress)
                )
            return
        if footprint is not None:
            update_levels(self._store, footprint)
            return
        build_pyramid(
            self._store, settings.pop("factors"), overwrite=True, progress=bool(progress), **settings
        )

    def stale_levels(self) -> list[int]:
        """Levels above 0 built before points were appended (they lack those points).

        Examples
        --------
        >>> import numpy as np, zarr_vectors as zv
        >>> pts = np.random.default_rng(0).uniform(0, 8, (200, 2))
        >>> _ = zv.write_points("memory://doc-stale", pts, chunk_shape=4, bounds=([0, 0], [8, 8]))
        >>> ds = zv.open("memory://doc-stale", mode="r+")
        >>> ds.build_pyramid([2])
        [1]
        >>> ds.append([[1.0, 1.0]], pyramid="stale")
        >>> ds.stale_levels(), ds.level_for(max_vertices=10)
        ([1], 0)
        >>> ds.append([[2.0, 2.0]], pyramid=True)
        >>> ds.stale_levels()
        []
        """
        return [k for k in self.levels if self._store.is_stale(k)]

    def level_for(self, *, max_vertices: int | None = None, resolution: Any = None, bbox: Any = None) -> int:
        """The level to read for a vertex budget or a resolution, decided from level metadata
        alone (no vertex data is read).

        Parameters
        ----------
        max_vertices
            A vertex budget: the finest level whose estimated count in ``bbox`` fits it,
            else the coarsest.
        resolution
            A bin edge (one number or one per axis): the coarsest level whose bins are no
            larger.
        bbox
            ``(lo, hi)`` the budget applies to; default the whole store.

        Returns
        -------
        int
            A level of :attr:`levels`.

        Raises
        ------
        InputError
            Neither or both of ``max_vertices`` and ``resolution`` given, or malformed values.

        Examples
        --------
        >>> import numpy as np, zarr_vectors as zv
        >>> pts = np.random.default_rng(0).uniform(0, 8, (200, 2))
        >>> _ = zv.write_points("memory://doc-level-for", pts, chunk_shape=4, bin_shape=1)
        >>> ds = zv.open("memory://doc-level-for", mode="r+")
        >>> ds.build_pyramid([2, 2])
        [1, 2]
        >>> ds.level_for(max_vertices=1_000), ds.level_for(max_vertices=1)
        (0, 2)
        >>> ds.level_for(resolution=2)
        1
        """
        return level_for(self._store, max_vertices=max_vertices, resolution=resolution, bbox=bbox)
