"""zarr_vectors: point clouds, lines, skeletons, graphs and meshes in Zarr v3 (Zarr Vectors 0.9)."""

from __future__ import annotations

from .dataset import Dataset, open
from .errors import (
    CorruptCellError,
    DecodeError,
    FormatError,
    IncompleteStoreError,
    InputError,
    ReadOnlyError,
    StoreChangedError,
    StoreError,
    StoreExistsError,
    UnknownIdError,
    ZarrVectorsError,
)
from .format.metadata import UnknownCapabilityWarning
from .geometry.graphs import write_graph
from .geometry.lines import write_lines
from .geometry.meshes import write_mesh, write_meshes
from .geometry.points import write_points
from .geometry.shapes import GeometryRepairedWarning, write_geometries
from .geometry.skeletons import write_skeleton
from .result import Result
from .storage import ZarrV2StoreError
from .validate import validate

__version__ = "0.1.0"

__all__ = [
    "Dataset",
    "Result",
    "open",
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
    "UnknownCapabilityWarning",
    "validate",
    "__version__",
]
