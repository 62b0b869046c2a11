"""Lines written batch by batch in bounded memory: :class:`LineStream`.

The store is the one :func:`~zarr_vectors.kinds.lines.write_lines` writes from the
concatenated batches. A line is a chain (each vertex the parent of the next), so the
skeleton stream's machinery applies: a vertex continues its fragment when the line's
previous vertex lies in its chunk, and a line leaving a chunk is a record joining two
vertices across chunks. Rows of a chunk keep input order (not object order), and each
line arrives whole in one batch.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from zarr_vectors.engine import Partition, SweepContext, as_id_array, dense_ids
from zarr_vectors.errors import InputError, choice_message
from zarr_vectors.format.grid import Grid
from zarr_vectors.format.links import parse_offsets
from zarr_vectors.kinds.lines import LINE_KINDS, as_line_arrays, flat_attributes, item_ids
from zarr_vectors.kinds.skeleton_stream import SkeletonStream
from zarr_vectors.kinds.skeletons import runs_partition

__all__ = ["LineStream"]


class LineStream(SkeletonStream):
    """Lines given in batches: ``append(lines, attributes=, object_ids=)`` as for
    :func:`zarr_vectors.write_lines` (one object per line; default ids number the lines
    across batches). ``kind`` (``"polyline"``, ``"streamline"``, ``"line"``) is given once."""

    links_convention: ClassVar[str] = "implicit_sequential"
    kind_name: ClassVar[str] = "lines"
    create_keywords: ClassVar[tuple[str, ...]] = ("kind",)
    child_first: ClassVar[bool] = False  # a record joins a segment's last vertex to the next one's first

    def __init__(self, *args: Any, kind: str = "polyline", **kwargs: Any) -> None:
        if kind not in LINE_KINDS:
            raise InputError(choice_message("kind", kind, LINE_KINDS))
        super().__init__(*args, **kwargs)
        self.geometry_type = kind  # type: ignore[misc]

    def append(  # type: ignore[override]
        self,
        lines: Any,
        *,
        attributes: Mapping[str, Any] | None = None,
        object_ids: Any = None,
        **unknown: Any,
    ) -> None:
        """Add whole lines; ``object_ids`` one distinct id per line, new to this writer."""
        self._per_batch(unknown, ("attributes", "object_ids"))
        self._require_open()
        pos, offsets = as_line_arrays(lines, self.geometry_type, self.ndim)
        count = len(offsets) - 1
        per_line = None
        if object_ids is not None:
            item_ids(object_ids, count, "line")  # one distinct id per line
            per_line = as_id_array(object_ids, "object_ids")
            self._new_items(per_line, "line", "lines")
        lengths = np.diff(offsets)
        self._given_ids(None if per_line is None else np.repeat(per_line, lengths), len(pos))
        if per_line is None:
            per_line = sum(len(i) for i in self._items) + np.arange(count, dtype=np.int64)
        pos = self._positions(pos)
        columns = self._attributes(flat_attributes(attributes, offsets), len(pos))
        parents = np.arange(-1, len(pos) - 1, dtype=np.int64)
        parents[offsets[:-1]] = -1
        self._queue({"positions": pos, "ids": np.repeat(per_line, lengths), "parents": parents, **columns})
        self._items.append(per_line)

    def _tables(self) -> Any:
        tables, ids, oid_of = super()._tables()
        lines = sum(len(i) for i in self._items)
        if tables.num_objects != (dense_ids(ids).count if self._objects else lines):
            raise InputError(f"object_attributes have {tables.num_objects} rows but there are {lines} lines")
        return tables, ids, oid_of

    def _runs(
        self, lin: np.ndarray, oids: np.ndarray, vertex: np.ndarray, cont: np.ndarray, grid: Grid
    ) -> Partition:
        """A group's rows by (cell, vertex number): a chunk's rows keep input order; a fragment
        is a line's run of vertices in it."""
        part = runs_partition(lin, np.zeros(len(lin), np.int64), vertex, cont, grid)
        first = part.order[part.row_offsets[part.frag_cell] + part.frag_start]
        return dataclasses.replace(part, frag_object=oids[first])

    def _segment_meta(self, ctx: SweepContext, segment: str, has_perm: bool) -> dict[str, Any]:
        return {
            "zv_array": "links",
            "dtype": ctx.index_dtype.name,
            "offsets": parse_offsets(segment, 2, ctx.grid.ndim).tolist(),
            "has_perm": has_perm,
            "link_width": 2,
            "level_delta": 0,
        }
