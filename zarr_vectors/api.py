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


def open(  # noqa: A001
    target: Any, mode: str = "r", *, storage_options: dict[str, Any] | None = None, wait: float | None = None
) -> Any:
    """Open a Zarr Vectors store as a :class:`Dataset`, or a collection of stores
    (``docs/collections.md``) as a :class:`~zarr_vectors.Collection`.

    Only the root metadata is read here. A collection is recognised only after the store
    reader refused the root, so opening a store costs nothing more.

    Parameters
    ----------
    target
        A directory path, a ``.zip`` path, a URL (``s3://``, ``memory://``, ``file://``, ...)
        or a zarr v3 ``Store`` (a collection: a path or URL).
    mode
        ``"r"`` (read only) or ``"r+"`` (levels may be added, points appended, objects
        replaced or deleted; a collection's members may be added and edited).
    storage_options
        Options for fsspec and the storage layer (see :meth:`Dataset.open` and ``docs/storage.md``).
    wait
        ``mode="r+"``: seconds each write waits for another writer's lock before it raises
        :class:`~zarr_vectors.errors.StoreConflictError` (see :meth:`Dataset.open`).

    Returns
    -------
    Dataset or Collection

    Raises
    ------
    ZarrV2StoreError
        ``target`` is a Zarr v2 store (a ``ValueError``).
    FormatError
        ``target`` is a Zarr v3 group that is neither a Zarr Vectors 0.9 store nor a collection.
    StoreNotFoundError
        Nothing is stored at a local ``target`` (a ``FileNotFoundError``).
    InputError
        ``mode`` is neither ``"r"`` nor ``"r+"``, or ``wait`` is not a number >= 0.

    Examples
    --------
    >>> import zarr_vectors as zv
    >>> _ = zv.write_points("memory://doc-open", [[0, 0, 0], [4, 5, 6]], chunk_shape=2)
    >>> zv.open("memory://doc-open").vertex_count()
    2
    >>> coll = zv.create_collection("memory://doc-open-coll", id_spaces=["segments"])
    >>> _ = coll.add_member("cells", "points", [[0, 0, 0]], chunk_shape=1)
    >>> zv.open("memory://doc-open-coll")
    <zarr_vectors.Collection memory://doc-open-coll members=['cells']>
    """
    try:
        return open_dataset(target, mode, storage_options=storage_options, wait=wait)
    except FormatError:
        if not _holds_collection(target, storage_options):
            raise
    return Collection.open(target, mode, storage_options=storage_options)


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
