"""Lines written batch by batch in bounded memory: :class:`LineStream`, and
:func:`write_lines`, the same writer given every line at once.

The store is the one :func:`~zarr_vectors.kinds.lines.write_lines` writes from the
concatenated batches. A line is a chain (each vertex the parent of the next), so the
skeleton stream's machinery applies: a vertex continues its fragment when the line's
previous vertex lies in its chunk, and a line leaving a chunk is a record joining two
vertices across chunks. Rows of a chunk keep input order (not object order), and each
line arrives whole in one batch.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from zarr_vectors.engine import (
    DEFAULT_MEMORY_LIMIT,
    Partition,
    StoreOptions,
    SweepContext,
    as_id_array,
    dense_ids,
    grid_of,
)
from zarr_vectors.engine import inputs as _inputs
from zarr_vectors.errors import InputError, choice_message
from zarr_vectors.format.grid import Grid
from zarr_vectors.format.links import parse_offsets
from zarr_vectors.kinds.lines import LINE_KINDS, as_line_arrays, flat_attributes, item_ids
from zarr_vectors.kinds.skeleton_stream import SkeletonStream
from zarr_vectors.kinds.skeletons import runs_partition

__all__ = ["LineStream", "write_lines"]


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
        self.append_flat(pos, offsets, attributes=attributes, object_ids=object_ids)

    def append_flat(
        self,
        positions: np.ndarray,
        offsets: np.ndarray,
        *,
        attributes: Mapping[str, Any] | None = None,
        object_ids: Any = None,
    ) -> None:
        """Add lines given flat: (V, D) ``positions`` and (L + 1,) checked ``offsets``."""
        pos = positions
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


def write_lines(
    target: Any,
    lines: Any,
    *,
    chunk_shape: Any = "auto",
    kind: str = "polyline",
    bounds: Any = None,
    attributes: Mapping[str, Any] | None = None,
    channel_names: Mapping[str, Sequence[str]] | None = None,
    object_ids: Any = None,
    object_attributes: Mapping[str, Any] | None = None,
    groups: Any = None,
    group_attributes: Mapping[str, Any] | None = None,
    group_names: Sequence[str] | None = None,
    axes: Sequence[Any] | None = None,
    units: str | None = None,
    crs: Any = None,
    compression: str | None = "none",
    checksums: bool = False,
    shards: Any = "default",
    overwrite: bool = False,
    storage_options: dict[str, Any] | None = None,
    workers: int | None = None,
) -> None:
    """Write polylines, streamlines or straight segments; line ``i`` is object ``object_ids[i]``.

    Reads return lines in order along each line, with ``Result.line_offsets`` and
    ``Result.edges``; a box query cuts lines into the pieces inside the box.

    Parameters
    ----------
    target
        Where to write, as in :func:`zarr_vectors.write_points`.
    lines
        A list of (n_i, D) arrays, or ``(positions, offsets)`` with line i at
        ``positions[offsets[i]:offsets[i + 1]]``; for ``kind="line"``, an (M, 2, D) array of
        segments.
    chunk_shape
        Edge length of a spatial chunk: one number or one per axis, or ``"auto"`` (the
        default): cubes sized from the data so that each non-empty chunk holds about 16,384
        vertices on average (see ``docs/writing.md``).
    kind
        ``"polyline"``, ``"streamline"`` or ``"line"`` (two-point segments): the declared
        geometry type.
    bounds
        Inclusive ``(lo, hi)`` corners; every vertex must lie inside. Default: the data's extent.
    attributes
        name -> per-vertex values, flat in line order or as one array per line.
    channel_names
        Optional channel names per attribute: name -> one name per channel.
    object_ids
        One distinct int64 or uint64 id per line, of any value; default ``i``.
    object_attributes
        name -> one row per line in the order given, or a mapping ``{id: value}``.
    groups
        Groups of object ids: a list of lists, or a mapping group id -> ids (group ids of any
        integer value).
    group_attributes
        Per-group values: one per group in ascending group id, or a mapping ``{group id: value}``.
    group_names
        Optional names of the groups, one per group (read back by :meth:`Dataset.group_names`).
    axes
        Axis names, or ``{"name", "unit"}`` dicts.
    units
        A default unit for the axes.
    crs
        A coordinate reference system: an EPSG code, WKT2, PROJJSON or ``pyproj.CRS`` (see
        :func:`zarr_vectors.geo.parse_crs`); a dict of other keys is stored as an opaque record.
    compression
        ``"none"`` (the format's default), ``"zstd"``, ``"gzip"``, ``"blosc"``, ``"lz4"``, ``"zlib"``,
        ``"bz2"``, ``"lzma"`` or ``"numcodecs.<id>"`` (see ``docs/writing.md``).
    checksums
        Append Zarr's ``crc32c`` codec to every array, so a changed byte in any cell is a
        :class:`~zarr_vectors.errors.CorruptCellError` on read (and a problem in ``validate``).
    shards
        Group the cells of every per-chunk array into ``sharding_indexed`` shards, one stored
        object each: ``"auto"`` (the default, on every backend: sized from the grid so that a
        1 % local append rewrites about 5 % of the store), chunks per shard (one integer, or
        one per axis), or None / ``"none"`` (one object per cell); see ``docs/writing.md``.
    overwrite
        Replace an existing store. Local and zip targets are swapped in only once complete.
    storage_options
        Options for fsspec and the storage layer, as for :func:`zarr_vectors.open`.
    workers
        Worker processes (threads where ``fork`` is unavailable) that build and compress
        groups of whole cells (default: every core); the store does not depend on it.

    Returns
    -------
    Dataset
        The new store, opened for reading.

    Raises
    ------
    InputError
        Malformed input: an unknown ``kind``, lines with inconsistent offsets or axes,
        per-line attributes whose lengths differ from their lines', repeated ``object_ids``,
        and the input errors of :func:`zarr_vectors.write_points`.
    StoreExistsError
        ``target`` holds data and ``overwrite`` is false.

    Examples
    --------
    >>> import numpy as np, zarr_vectors as zv
    >>> lines = [np.array([[0.0, 0.0], [2.0, 1.0], [6.0, 3.0]]), np.array([[7.0, 7.0], [8.0, 8.0]])]
    >>> ds = zv.write_lines(
    ...     "memory://doc-lines", lines, chunk_shape=4, kind="streamline", object_ids=[100, 200],
    ...     attributes={"fa": [np.array([0.1, 0.2, 0.3]), np.array([0.4, 0.5])]},
    ... )
    >>> res = ds.objects([100])
    >>> res.positions.tolist(), res.attributes["fa"].tolist()
    ([[0.0, 0.0], [2.0, 1.0], [6.0, 3.0]], [0.1, 0.2, 0.3])
    >>> [piece.tolist() for piece in ds.query(bbox=([0, 0], [3, 3])).lines]
    [[[0.0, 0.0], [2.0, 1.0]]]
    """
    if kind not in LINE_KINDS:
        raise InputError(choice_message("kind", kind, LINE_KINDS))
    pos, offsets = as_line_arrays(lines, kind, _inputs.call_ndim(chunk_shape, bounds, axes))
    options = StoreOptions(
        chunk_shape,
        bounds=bounds,
        axes=axes,
        units=units,
        crs=crs,
        compression=compression,
        checksums=checksums,
        shards=shards,
        overwrite=overwrite,
        storage_options=storage_options,
    )
    with LineStream(
        target,
        grid_of(pos, options),
        kind=kind,
        channel_names=channel_names,
        object_attributes=object_attributes,
        groups=groups,
        group_attributes=group_attributes,
        group_names=group_names,
        memory_limit=DEFAULT_MEMORY_LIMIT,
        workers=workers,
    ) as stream:
        stream.append_flat(pos, offsets, attributes=attributes, object_ids=object_ids)
