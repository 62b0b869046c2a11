"""Encode whole cells of a point cloud's level 0, a group of cells at a time.

:class:`PointCells` turns the rows of some whole cells (positions, vertex attributes,
object ids) into the encoded chunks of every level-0 cell array, plus the fragments
each object owns there (for the object index). Groups of cells are independent: the
streaming writer, the appender and Dask tasks encode them apart (in threads, processes
or machines) and the level's tables and metadata are finished once, from the
:class:`EncodedCells` summaries. Encoding is pure computation; nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from zarr_vectors.engine.chunks.pipeline import Pipeline
from zarr_vectors.engine.write.inputs import NamedArray
from zarr_vectors.engine.write.level0 import (
    OBJECT_ID_META,
    attribute_meta,
    fragment_owner_payloads,
    row_payloads,
)
from zarr_vectors.engine.write.partition import Partition, partition
from zarr_vectors.errors import InputError
from zarr_vectors.format.fragments import FragmentIndex, encode_fragments, encode_range_batch
from zarr_vectors.format.grid import Grid, cell_key

__all__ = ["AttributeSpec", "EncodedCells", "PointCells", "fragment_payloads"]


def fragment_payloads(part: Partition) -> list[bytes]:
    """Encoded ``vertex_fragments`` cells, one per occupied cell."""
    if part.per_bin:
        k = len(part.cells)
        if k == 0:
            return []
        return encode_range_batch(part.frag_start.reshape(k, -1), part.frag_count.reshape(k, -1))
    out = []
    for k in range(len(part.cells)):
        lo, hi = part.cell_frag_offsets[k], part.cell_frag_offsets[k + 1]
        out.append(
            encode_fragments(FragmentIndex.from_ranges(part.frag_start[lo:hi], part.frag_count[lo:hi]))
        )
    return out


@dataclass(frozen=True)
class AttributeSpec:
    """A vertex attribute's name, little-endian dtype, row shape and channel names."""

    name: str
    dtype: np.dtype
    row_shape: tuple[int, ...]
    channel_names: tuple[str, ...] | None = None
    #: Date-times: the unit of the int64 counts ``dtype`` holds.
    time_unit: str | None = None

    @classmethod
    def of(cls, attr: NamedArray) -> AttributeSpec:
        shape = tuple(attr.values.shape[1:])
        return cls(attr.name, attr.values.dtype, shape, attr.channel_names, attr.time_unit)

    def meta(self) -> dict[str, Any]:
        """The array's ``zv_array: attribute`` metadata."""
        sample = NamedArray(
            self.name, np.zeros((0, *self.row_shape), self.dtype), self.channel_names, self.time_unit
        )
        return attribute_meta(sample)

    def conform(self, values: Any, n: int) -> np.ndarray:
        """``values`` as (n, *row_shape) of this dtype; a cast that changes values is refused."""
        arr = np.asarray(values)
        if arr.shape != (n, *self.row_shape):
            raise InputError(
                f"attribute {self.name!r} must have shape {(n, *self.row_shape)} in this batch "
                f"(as in the first), got {arr.shape}"
            )
        if self.time_unit is not None or arr.dtype.kind == "M":
            return self._counts(arr)
        if arr.dtype == self.dtype:
            return np.ascontiguousarray(arr)
        numeric = arr.dtype.kind in "iuf" and self.dtype.kind in "iuf"
        if not numeric and not np.can_cast(arr.dtype, self.dtype, "same_kind"):
            raise InputError(
                f"attribute {self.name!r} is {self.dtype.name} in this store, and {arr.dtype.name} "
                "values cannot be stored there; cast them first"
            )
        with np.errstate(invalid="ignore", over="ignore"):
            out = arr.astype(self.dtype)
        if numeric and not np.array_equal(out, arr, equal_nan=arr.dtype.kind == "f"):
            raise InputError(
                f"attribute {self.name!r} is {self.dtype.name} in this store; these {arr.dtype.name} "
                "values do not fit it exactly"
            )
        return out

    def _counts(self, arr: np.ndarray) -> np.ndarray:
        """Date-times as int64 counts of this attribute's unit; a unit change that loses
        precision is refused, as are date-times for a numeric attribute and the reverse."""
        if self.time_unit is None or arr.dtype.kind != "M":
            held = "numbers" if self.time_unit is None else f"date-times (datetime64[{self.time_unit}])"
            raise InputError(
                f"attribute {self.name!r} holds {held} in this store and these values are {arr.dtype}; "
                "give values of the same kind"
            )
        out = arr.astype(f"datetime64[{self.time_unit}]")
        if not np.array_equal(out, arr, equal_nan=True):
            raise InputError(
                f"attribute {self.name!r} holds datetime64[{self.time_unit}] in this store; these "
                f"{arr.dtype} values are finer than that: round them first"
            )
        return np.ascontiguousarray(out.view(np.int64))


@dataclass(frozen=True, eq=False)
class EncodedCells:
    """Encoded chunks of some whole cells and what the level's tables need of them.

    ``items`` are ``(key, chunk bytes)`` with keys relative to the level (``"vertices/0.1.2"``);
    ``cells`` (K, D) the cell indices, in ascending linear order; ``fragments`` is
    ``(object id, chunk coordinates (F, D), local index)`` of every fragment, with objects.
    """

    items: list[tuple[str, bytes]]
    cells: np.ndarray
    rows: int
    fragments: tuple[np.ndarray, np.ndarray, np.ndarray] | None

    @property
    def nbytes(self) -> int:
        return sum(len(v) for _, v in self.items)


class PointCells:
    """The level-0 cell arrays of a point cloud: which there are, and how each is encoded.

    ``pipelines`` maps ``"data"`` and ``"fragments"`` to the chunk pipeline of those
    array kinds. ``owners`` says whether ``fragment_attributes/object_id`` is written
    (a store with more than one object).
    """

    def __init__(
        self,
        grid: Grid,
        pipelines: dict[str, Pipeline],
        attributes: Sequence[AttributeSpec],
        *,
        objects: bool,
        owners: bool,
    ) -> None:
        self.grid = grid
        self.pipelines = pipelines
        self.attributes = list(attributes)
        self.objects = objects
        self.owners = owners and objects

    def paths(self) -> list[str]:
        """Every cell array this level has, relative to the level."""
        out = ["vertices", "vertex_fragments", *(f"vertex_attributes/{a.name}" for a in self.attributes)]
        return out + (["fragment_attributes/object_id"] if self.owners else [])

    def metas(self, position_dtype: np.dtype) -> dict[str, tuple[dict[str, Any], str]]:
        """path -> (array attributes without ``nonempty_chunks``, pipeline kind)."""
        out: dict[str, tuple[dict[str, Any], str]] = {
            "vertices": ({"zv_array": "vertices", "dtype": position_dtype.name, "encoding": "raw"}, "data"),
            "vertex_fragments": (
                {"zv_array": "vertex_fragments", "encoding": "fragment_index_v1"},
                "fragments",
            ),
        }
        for a in self.attributes:
            out[f"vertex_attributes/{a.name}"] = (a.meta(), "data")
        if self.owners:
            out["fragment_attributes/object_id"] = (dict(OBJECT_ID_META), "data")
        return out

    def encode(
        self, positions: np.ndarray, attributes: Sequence[np.ndarray], oids: np.ndarray | None
    ) -> EncodedCells:
        """Encode the rows of whole cells: every row of each cell they touch must be here.

        Rows keep their order within a bin (and, with objects, within a bin and object).
        """
        grid = self.grid
        part = partition(positions, grid, oids if self.objects else None)
        keys = [cell_key(c) for c in part.cells]
        data, frag = self.pipelines["data"], self.pipelines["fragments"]
        items: list[tuple[str, bytes]] = []
        items += [(f"vertices/{k}", data.encode(p)) for k, p in zip(keys, row_payloads(positions, part))]
        items += [(f"vertex_fragments/{k}", frag.encode(p)) for k, p in zip(keys, fragment_payloads(part))]
        for spec, values in zip(self.attributes, attributes):
            path = f"vertex_attributes/{spec.name}"
            items += [(f"{path}/{k}", data.encode(p)) for k, p in zip(keys, row_payloads(values, part))]
        fragments = None
        if self.objects:
            assert part.frag_object is not None
            if self.owners:
                owners = fragment_owner_payloads(part.frag_cell, part.frag_local, part.frag_object, len(keys))
                items += [
                    (f"fragment_attributes/object_id/{k}", data.encode(p)) for k, p in zip(keys, owners)
                ]
            chunks = part.cells[part.frag_cell] + grid.origin
            fragments = (part.frag_object, chunks, part.frag_local)
        return EncodedCells(items, part.cells, len(positions), fragments)
