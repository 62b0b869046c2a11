"""zarr_vectors: point clouds, lines, skeletons, graphs and meshes in Zarr v3 (Zarr Vectors 0.9)."""

from __future__ import annotations

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
from zarr_vectors.dataset import Dataset
from zarr_vectors.engine.reshard import reshard
from zarr_vectors.errors import (
    AttributeNotFoundError,
    CorruptCellError,
    DecodeError,
    FormatError,
    IncompleteStoreError,
    InputError,
    LevelNotFoundError,
    ReadOnlyError,
    StaleLevelWarning,
    StoreChangedError,
    StoreConflictError,
    StoreError,
    StoreExistsError,
    StoreNotFoundError,
    UnknownIdError,
    ZarrV2StoreError,
    ZarrVectorsError,
)
from zarr_vectors.format.metadata import UnknownCapabilityWarning
from zarr_vectors.kinds.shapes import GeometryRepairedWarning
from zarr_vectors.result import Result
from zarr_vectors.streaming import BatchWriter, PointStream, create
from zarr_vectors.validation import validate

__version__ = "0.1.0"

__all__ = [
    "Dataset",
    "Result",
    "open",
    "create",
    "PointStream",
    "BatchWriter",
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
    "UnknownCapabilityWarning",
    "StaleLevelWarning",
    "StoreConflictError",
    "validate",
    "reshard",
    "__version__",
]
