"""The entry layer: :func:`open` and the ``write_*`` functions.

Each writer of :mod:`zarr_vectors.kinds` writes a store and returns nothing; the function
of the same name here runs it and opens what it wrote, so every writer returns a
:class:`~zarr_vectors.Dataset` opened for reading, with the writer's own signature and
documentation.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from zarr_vectors.dataset import Dataset, open
from zarr_vectors.kinds import graph_stream, line_stream, mesh_stream, points, shapes, skeleton_stream

__all__ = [
    "open",
    "write_geometries",
    "write_graph",
    "write_lines",
    "write_mesh",
    "write_meshes",
    "write_points",
    "write_skeleton",
]


def _opening(writer: Callable[..., None]) -> Callable[..., Dataset]:
    """``writer`` followed by opening its target for reading (same target and storage options)."""

    @functools.wraps(writer)
    def write(target: Any, *args: Any, **kwargs: Any) -> Dataset:
        writer(target, *args, **kwargs)
        return Dataset.open(target, mode="r", storage_options=kwargs.get("storage_options"))

    write.__signature__ = inspect.signature(writer).replace(return_annotation=Dataset)  # type: ignore[attr-defined]  # inspect reads it; not in function stubs
    write.__annotations__ = {**writer.__annotations__, "return": Dataset}
    return write


write_points = _opening(points.write_points)
write_lines = _opening(line_stream.write_lines)
write_graph = _opening(graph_stream.write_graph)
write_skeleton = _opening(skeleton_stream.write_skeleton)
write_mesh = _opening(mesh_stream.write_mesh)
write_meshes = _opening(mesh_stream.write_meshes)
write_geometries = _opening(shapes.write_geometries)
