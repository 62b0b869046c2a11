"""Write the level-wide object tables: manifests, object attributes, groups, group attributes."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np

from zarr_vectors.engine.ids import OBJECT_ID_ATTRIBUTE
from zarr_vectors.engine.write.builder import MANIFEST_BUCKET, OBJECT_ATTRIBUTE_CHUNK, StoreBuilder
from zarr_vectors.engine.write.inputs import NamedArray
from zarr_vectors.engine.write.partition import Partition
from zarr_vectors.format.grid import Grid
from zarr_vectors.format.manifests import encode_manifests_batch
from zarr_vectors.format.zarr_json import absent_fill

__all__ = ["build_manifests", "manifests_of", "write_object_index", "write_object_tables"]


def build_manifests(part: Partition, grid: Grid, num_objects: int) -> list[bytes]:
    """One manifest per object id in ``[0, num_objects)``; absent ids get the empty manifest."""
    assert part.frag_object is not None
    chunks = part.cells[part.frag_cell] + grid.origin
    return manifests_of(part.frag_object, chunks, part.frag_local, num_objects, part.frag_cell)


def manifests_of(
    obj: np.ndarray,
    chunks: np.ndarray,
    local: np.ndarray,
    num_objects: int,
    cell_order: np.ndarray | None = None,
) -> list[bytes]:
    """Manifests from every fragment's ``(object, chunk coordinates (F, D), local index)``.

    Within an object, chunks are listed in ``cell_order`` (the cells' linear order; by
    default the chunk coordinates' C order, which is the same) and fragments ascending.
    """
    if cell_order is None:
        cell_order = (
            np.ravel_multi_index(tuple((chunks - chunks.min(axis=0)).T), tuple(np.ptp(chunks, axis=0) + 1))
            if len(chunks)
            else np.zeros(0, np.int64)
        )
    order = np.lexsort((local, cell_order, obj))
    obj_s, cell_s, local_s = obj[order], cell_order[order], local[order]
    new_block = np.ones(len(obj_s), bool)
    new_block[1:] = (obj_s[1:] != obj_s[:-1]) | (cell_s[1:] != cell_s[:-1])
    block_first = np.flatnonzero(new_block)
    block_offsets = np.append(block_first, len(obj_s))
    return encode_manifests_batch(
        num_objects, obj_s[block_first], chunks[order[block_first]], block_offsets, local_s
    )


def write_object_index(
    builder: StoreBuilder,
    level_path: str,
    sid_ndim: int,
    num_objects: int,
    buckets: Iterable[tuple[int, list[bytes]]],
) -> None:
    """The object index given bucket by bucket: ``(b, manifests of objects b * MANIFEST_BUCKET
    onwards)`` for every bucket in ascending order; the same bytes as :func:`write_object_tables`."""
    present = 0

    def counted() -> Iterator[tuple[int, list[bytes]]]:
        nonlocal present
        for b, manifests in buckets:
            present += sum(1 for m in manifests if len(m) > 4)
            yield b, manifests

    builder.vlen_list_chunks(
        f"{level_path}/object_index/manifests", num_objects, MANIFEST_BUCKET, counted(), {}
    )
    builder.group(
        f"{level_path}/object_index",
        {
            "zv_array": "object_index",
            "num_objects": num_objects,
            "num_present": present,
            "sid_ndim": sid_ndim,
            "layout": "vlen_manifests_v1",
        },
    )


def _dtype_name(values: np.ndarray) -> str:
    return "string" if values.dtype.kind == "U" else values.dtype.name


def _padded(attr: NamedArray, rows: int) -> tuple[np.ndarray, object]:
    values = attr.values
    fill = absent_fill(values.dtype)
    if len(values) < rows:
        pad = np.full((rows - len(values), *values.shape[1:]), fill, dtype=values.dtype)
        values = np.concatenate([values, pad])
    return values, fill


def write_object_tables(
    builder: StoreBuilder,
    level_path: str,
    *,
    sid_ndim: int,
    num_objects: int,
    manifests: list[bytes] | None,
    object_attributes: list[NamedArray],
    groups: list[np.ndarray],
    group_attributes: list[NamedArray],
    group_names: list[str] | None = None,
) -> list[str]:
    """Add the object index, object attributes, groups and group attributes; return their family names."""
    present: list[str] = []
    if manifests is not None:
        builder.group(
            f"{level_path}/object_index",
            {
                "zv_array": "object_index",
                "num_objects": num_objects,
                "num_present": sum(1 for m in manifests if len(m) > 4),
                "sid_ndim": sid_ndim,
                "layout": "vlen_manifests_v1",
            },
        )
        builder.vlen_list_array(f"{level_path}/object_index/manifests", manifests, MANIFEST_BUCKET, {})
        present.append("object_index")
    if object_attributes:
        builder.group(f"{level_path}/object_attributes")
        for attr in object_attributes:
            values, fill = _padded(attr, num_objects)
            meta = {
                "zv_array": "object_attribute",
                "name": attr.name,
                "dtype": _dtype_name(values),
                "shape": list(values.shape),
                "fill_sentinel_meaning": "absent",
            }
            if attr.time_unit is not None:
                meta["time_unit"] = attr.time_unit  # int64 counts of this unit since 1970-01-01
            # The id table is new to the format's users: sized to the objects, not padded to a full chunk.
            chunk = OBJECT_ATTRIBUTE_CHUNK
            if attr.name == OBJECT_ID_ATTRIBUTE:
                chunk = min(chunk, max(len(values), 1))
            builder.dense_array(f"{level_path}/object_attributes/{attr.name}", values, chunk, fill, meta)
        present.append("object_attributes")
    if groups:
        items = [g.astype("<i8").tobytes() for g in groups]
        builder.vlen_list_array(
            f"{level_path}/groups",
            items,
            max(len(items), 1),
            {
                "zv_array": "groups",
                "num_groups": len(items),
                **({"group_names": list(group_names)} if group_names else {}),
            },
        )
        present.append("groups")
    if group_attributes:
        builder.group(f"{level_path}/group_attributes")
        for attr in group_attributes:
            values, fill = _padded(attr, len(groups))
            meta = {
                "zv_array": "groupings_attribute",
                "name": attr.name,
                "dtype": _dtype_name(values),
                "shape": list(values.shape),
            }
            builder.dense_array(
                f"{level_path}/group_attributes/{attr.name}", values, max(len(values), 1), fill, meta
            )
        present.append("group_attributes")
    return present
