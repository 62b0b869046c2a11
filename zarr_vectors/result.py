"""The result of a read: flat vertex arrays plus whatever connectivity the geometry has."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["Result"]


@dataclass(eq=False)
class Result:
    """Vertices of a query or object read, with row-aligned attributes.

    ``positions`` is (N, D); every array in ``attributes`` has N rows; ``object_ids``
    is (N,) int64 or None when the level has no object index. Connectivity indexes
    rows of ``positions``: ``edges`` (E, 2); for lines, line ``i`` is rows
    ``line_offsets[i]:line_offsets[i + 1]`` in order along the line; for skeletons,
    ``edges`` are ``(parent, child)`` and ``parents[i]`` is row i's parent row (-1 for a
    root or a parent outside the result).
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

    @property
    def lines(self) -> list[np.ndarray] | None:
        """Positions of each line (or line piece), from ``line_offsets``; None for other geometry."""
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
        """Draw the result with matplotlib (extra ``plot``) and return the axes; the keywords
        (``ax``, ``view``, ``color_by``, ...) are those of :func:`zarr_vectors.plot.plot`."""
        from .plot import plot

        return plot(self, **kwargs)

    def to_trimesh(self, process: bool = False) -> Any:
        """The result as a ``trimesh.Trimesh`` (positions and ``faces``; meshes only).

        ``process=False`` keeps every vertex and face as read (no merging or reordering).
        """
        if self.faces is None:
            raise ValueError("this result has no faces: to_trimesh needs a mesh query or object read")
        import trimesh

        return trimesh.Trimesh(vertices=self.positions, faces=self.faces, process=process)

    def sorted(self) -> Result:
        """A copy with rows in lexicographic order of (object id, position): a canonical order for comparing."""
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
