"""zarr_vectors: point clouds, lines, skeletons, graphs and meshes in Zarr v3 (Zarr Vectors 0.9)."""

from __future__ import annotations

from typing import Any

from zarr_vectors.api import (
    open,
    write_geometries,
    write_graph,
    write_lines,
    write_mesh,
    write_meshes,
    write_points,
    write_skeleton,
)
from zarr_vectors.collection import Collection, StaleIndexError, create_collection
from zarr_vectors.dataset import Dataset
from zarr_vectors.engine import reshard
from zarr_vectors.errors import (
    AttributeNotFoundError,
    CoordinatesRoundedWarning,
    CorruptCellError,
    DecodeError,
    FormatError,
    GeometryRepairedWarning,
    IdTableWarning,
    IncompleteStoreError,
    InputError,
    LevelNotFoundError,
    PropertiesSkippedWarning,
    ReadOnlyError,
    StaleLevelWarning,
    StoreChangedError,
    StoreConflictError,
    StoreError,
    StoreExistsError,
    StoreNotFoundError,
    TextIdsWarning,
    UnknownCapabilityWarning,
    UnknownIdError,
    ZarrV2StoreError,
    ZarrVectorsError,
    ZarrVectorsWarning,
)
from zarr_vectors.result import Result
from zarr_vectors.streaming import GraphStream, LineStream, MeshStream, PointStream, SkeletonStream, create
from zarr_vectors.validation import validate

__version__ = "0.1.0"

__all__ = [
    "Dataset",
    "Collection",
    "create_collection",
    "StaleIndexError",
    "Result",
    "open",
    "create",
    "PointStream",
    "GraphStream",
    "LineStream",
    "MeshStream",
    "SkeletonStream",
    "write_points",
    "write_lines",
    "write_graph",
    "write_skeleton",
    "write_mesh",
    "write_meshes",
    "write_geometries",
    "GeometryRepairedWarning",
    "ZarrVectorsError",
    "FormatError",
    "CorruptCellError",
    "DecodeError",
    "InputError",
    "ReadOnlyError",
    "StoreExistsError",
    "UnknownIdError",
    "StoreError",
    "StoreChangedError",
    "IncompleteStoreError",
    "ZarrV2StoreError",
    "StoreNotFoundError",
    "LevelNotFoundError",
    "AttributeNotFoundError",
    "ZarrVectorsWarning",
    "UnknownCapabilityWarning",
    "StaleLevelWarning",
    "IdTableWarning",
    "TextIdsWarning",
    "PropertiesSkippedWarning",
    "CoordinatesRoundedWarning",
    "StoreConflictError",
    "validate",
    "reshard",
    "serve",
    "__version__",
]


def serve(stores: Any, port: int = 0, open: bool = False, **kwargs: Any) -> Any:  # noqa: A002
    """Serve stores to Neuroglancer on 127.0.0.1, translated on request into precomputed
    sources (extra ``neuroglancer`` for the bundled viewer); see ``docs/neuroglancer.md``.

    Parameters
    ----------
    stores
        A store (path, URL or :class:`Dataset`) or a list of them: one layer each; or a
        collection (its path or a :class:`Collection`): one segmentation layer per id space and
        one annotation layer per point member, linked through its relationships.
    port
        The port; 0 takes any free one.
    open
        Open the viewer URL in the web browser.
    **kwargs
        ``layout`` (Neuroglancer layout, default ``"4panel"``), ``client`` (serve the bundled
        client, default True; False serves the sources alone).

    Returns
    -------
    zarr_vectors.neuroglancer.Server
        ``url``, ``viewer_url`` (a state showing every store), ``close()``; a context manager.

    Examples
    --------
    >>> import json, urllib.request, zarr_vectors as zv
    >>> ds = zv.write_points("memory://doc-serve", [[0, 0, 0], [5, 5, 5]], chunk_shape=4)
    >>> with zv.serve(ds, client=False) as server:
    ...     info = json.load(urllib.request.urlopen(server.url + "/zv/store0/ann/info"))
    >>> info["@type"], info["annotation_type"]
    ('neuroglancer_annotations_v1', 'POINT')
    """
    from zarr_vectors.neuroglancer.server import serve as serve_stores

    return serve_stores(stores, port, open, **kwargs)
