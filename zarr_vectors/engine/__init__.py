"""The read and write machinery every geometry kind shares, and its one face: modules outside
``engine`` import these names from here, never from its modules.

Rooms: ``chunks`` (cell and table arrays, compressors, the codec pipeline), ``read`` (box plans
and fetches, links, faces, queries, ``where=``), ``write`` (inputs, partitions, cells,
streams and spills, appends, reshard); ``ids``, ``level`` and ``store`` are the model both
sides share. ``read`` and ``write`` never import each other."""

from zarr_vectors.engine.chunks.arrays import DRACO_BYTES, FRAGMENT_BYTES, CellArray, LinkArray, TableArray
from zarr_vectors.engine.chunks.pipeline import Pipeline, compression_of, compressor_json, draco_codec
from zarr_vectors.engine.ids import (
    OBJECT_ID_ATTRIBUTE,
    DenseIds,
    as_id_array,
    dense_ids,
    file_ids,
    owned,
    table_rows,
)
from zarr_vectors.engine.level import Level
from zarr_vectors.engine.read import query
from zarr_vectors.engine.read.faces import all_faces
from zarr_vectors.engine.read.fetch import fetch_cells, row_owners
from zarr_vectors.engine.read.links import box_edges, fetch_linked_objects, is_lines
from zarr_vectors.engine.read.plan import attribute_names, parse_box, plan_box
from zarr_vectors.engine.read.points import box_batches
from zarr_vectors.engine.read.where import parse_where
from zarr_vectors.engine.store import VectorStore, table_values
from zarr_vectors.engine.write import inputs
from zarr_vectors.engine.write.append import STALE_KEY, Footprint, append_points
from zarr_vectors.engine.write.autochunk import (
    AUTO_VERTICES_PER_CHUNK,
    VERTICES_PER_CHUNK_RANGE,
    auto_chunk_shape,
    chunk_fill_warning,
    chunk_shape_of,
    expected_chunk_edge,
    is_auto,
)
from zarr_vectors.engine.write.builder import CellStream, StoreBuilder, shard_items
from zarr_vectors.engine.write.cells import AttributeSpec, EncodedCells, PointCells, fragment_payloads
from zarr_vectors.engine.write.inputs import NamedArray, extent, positive_numbers, shape_vector, valid_name
from zarr_vectors.engine.write.level0 import (
    MAX_BINS_PER_CHUNK,
    OBJECT_ID_META,
    Layout,
    LevelArrays,
    Tables,
    fragment_owner_payloads,
    make_layout,
    object_tables,
    partition_owners,
    row_payloads,
    write_level0,
    write_level_arrays,
)
from zarr_vectors.engine.write.linkedit import edit_linked
from zarr_vectors.engine.write.linkedstream import GroupCells, LinkedStream, SweepContext, cells_of, grid_of
from zarr_vectors.engine.write.options import StoreOptions, check_shards
from zarr_vectors.engine.write.partition import Partition, cell_indices, partition, sort_keys
from zarr_vectors.engine.write.point_edit import delete_points, replace_points
from zarr_vectors.engine.write.reshard import reshard
from zarr_vectors.engine.write.spill import cell_groups, stable_order
from zarr_vectors.engine.write.stream import DEFAULT_MEMORY_LIMIT, PointStream, check_inside, finish_level
from zarr_vectors.engine.write.tables import build_manifests, manifests_of, write_object_tables

__all__ = [
    "delete_points",
    "edit_linked",
    "replace_points",
    "AUTO_VERTICES_PER_CHUNK",
    "VERTICES_PER_CHUNK_RANGE",
    "auto_chunk_shape",
    "chunk_fill_warning",
    "chunk_shape_of",
    "expected_chunk_edge",
    "is_auto",
    "AttributeSpec",
    "CellArray",
    "CellStream",
    "DEFAULT_MEMORY_LIMIT",
    "DRACO_BYTES",
    "DenseIds",
    "EncodedCells",
    "FRAGMENT_BYTES",
    "GroupCells",
    "LinkedStream",
    "SweepContext",
    "cells_of",
    "grid_of",
    "Layout",
    "Level",
    "LevelArrays",
    "LinkArray",
    "MAX_BINS_PER_CHUNK",
    "NamedArray",
    "OBJECT_ID_ATTRIBUTE",
    "OBJECT_ID_META",
    "Partition",
    "Pipeline",
    "PointCells",
    "PointStream",
    "StoreBuilder",
    "StoreOptions",
    "check_shards",
    "shard_items",
    "TableArray",
    "Tables",
    "VectorStore",
    "all_faces",
    "append_points",
    "as_id_array",
    "attribute_names",
    "box_batches",
    "box_edges",
    "build_manifests",
    "manifests_of",
    "STALE_KEY",
    "Footprint",
    "cell_groups",
    "cell_indices",
    "check_inside",
    "compression_of",
    "compressor_json",
    "dense_ids",
    "draco_codec",
    "extent",
    "fetch_cells",
    "fetch_linked_objects",
    "file_ids",
    "finish_level",
    "fragment_owner_payloads",
    "fragment_payloads",
    "inputs",
    "is_lines",
    "make_layout",
    "object_tables",
    "owned",
    "parse_box",
    "parse_where",
    "partition",
    "partition_owners",
    "plan_box",
    "positive_numbers",
    "query",
    "reshard",
    "row_owners",
    "row_payloads",
    "shape_vector",
    "sort_keys",
    "stable_order",
    "table_rows",
    "table_values",
    "valid_name",
    "write_level0",
    "write_level_arrays",
    "write_object_tables",
]
