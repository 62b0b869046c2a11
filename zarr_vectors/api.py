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

from zarr_vectors.collection import Collection, is_collection_doc
from zarr_vectors.dataset import Dataset
from zarr_vectors.dataset import open as open_dataset
from zarr_vectors.errors import FormatError
from zarr_vectors.format.zarr_json import load_json
from zarr_vectors.kinds import graph_stream, line_stream, mesh_stream, points, shapes, skeleton_stream
from zarr_vectors.storage import open_backend

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


def open(target: Any, mode: str = "r", **keywords: Any) -> Any:  # noqa: A001
    """Open a store as a :class:`Dataset` (see :func:`zarr_vectors.dataset.open` for the
    parameters), or a collection (``docs/collections.md``) as a
    :class:`~zarr_vectors.collection.Collection`.

    A collection is recognised only after the store reader refused the root, so opening a
    store costs nothing more.
    """
    try:
        return open_dataset(target, mode, **keywords)
    except FormatError:
        if not _holds_collection(target, keywords.get("storage_options")):
            raise
    return Collection.open(target, mode, storage_options=keywords.get("storage_options"))


def _holds_collection(target: Any, storage_options: Any) -> bool:
    """Whether ``target``'s root document is a collection node."""
    raw = open_backend(target, read_only=True, storage_options=storage_options).get_many(["zarr.json"])[0]
    if raw is None:
        return False
    try:
        return is_collection_doc(load_json(raw, "zarr.json"))
    except FormatError:
        return False


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
