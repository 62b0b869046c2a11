"""Levels of detail and appends, part of :class:`~zarr_vectors.Dataset`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from zarr_vectors.engine import append_points
from zarr_vectors.pyramid import build_pyramid, existing_factors, level_for

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
        *,
        attributes: dict[str, Any] | None = None,
        object_ids: Any = None,
        object_attributes: dict[str, dict[Any, Any]] | None = None,
        extend: bool = False,
        pyramid: bool = False,
        workers: int | None = None,
        progress: bool | None = None,
    ) -> None:
        """Add points to this point cloud (opened with ``mode="r+"``); see ``docs/large-data.md``.

        Only the cells the new points fall in and the object tables are rewritten. The store's
        bounds must contain the points, and the batch must give the store's vertex attributes
        (and object ids when the store has objects). Coarser levels are marked stale (reads of
        them warn, :meth:`level_for` skips them) until the pyramid is rebuilt; ``pyramid=True``
        rebuilds it at once with the same factors. A local store changes in one exchange; an
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

        Examples
        --------
        >>> import numpy as np, zarr_vectors as zv
        >>> _ = zv.write_points("memory://doc-append", np.zeros((3, 2)), chunk_shape=4, bounds=([0, 0], [8, 8]))
        >>> ds = zv.open("memory://doc-append", mode="r+")
        >>> ds.append([[5.0, 5.0], [7.5, 1.0]])
        >>> ds.vertex_count()
        5
        """
        factors = existing_factors(self._store) if pyramid else None
        append_points(
            self._store,
            positions,
            attributes=attributes,
            object_ids=object_ids,
            object_attributes=object_attributes,
            extend=extend,
            workers=workers,
            progress=progress,
        )
        if factors:
            self.build_pyramid(factors[0], chunk_scale=factors[1], overwrite=True, progress=bool(progress))

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
        >>> ds.append([[1.0, 1.0]])
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
