"""Point clouds: ``write_points``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from zarr_vectors.engine import PointStream, StoreOptions, auto_chunk_shape, is_auto
from zarr_vectors.engine import inputs as _inputs
from zarr_vectors.errors import InputError

__all__ = ["write_points"]


def write_points(
    target: Any,
    positions: Any,
    *,
    chunk_shape: Any = "auto",
    bounds: Any = None,
    bin_shape: Any = None,
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
    """Write a point cloud to a new Zarr Vectors store and return it opened for reading.

    Parameters
    ----------
    target
        A directory path, a ``.zip`` path, a URL (``s3://``, ``memory://``, ``file://``)
        or a zarr v3 ``Store``.
    positions
        (N, D) float or integer coordinates, finite.
    chunk_shape
        Edge length of a spatial chunk: one number or one per axis, or ``"auto"`` (the
        default): cubes sized from the data so that each non-empty chunk holds about 16,384
        vertices on average (see ``docs/writing.md``).
    bounds
        Inclusive ``(lo, hi)`` corners; every position must lie inside. Default: the data's extent.
    bin_shape
        Bin edge inside a chunk (must divide ``chunk_shape``); each bin is a contiguous
        row range, so a box query touching part of a chunk tests only the bins it meets.
        Default: one bin per chunk.
    attributes
        Per-point values, name -> (N,) or (N, C) array.
    channel_names
        Optional channel names per attribute: name -> one name per channel.
    object_ids
        One integer per point: int64 or uint64 ids of any value (segment ids, feature ids).
        Objects are numbered ``0 .. B-1`` on disk in ascending id order; unless the ids
        already are ``0 .. B-1`` the store keeps them as the object attribute ``object_id``,
        and reads report and take them (see ``docs/objects.md``).
    object_attributes
        name -> one row per distinct object id in ascending order ((B,) or (B, C)), or a
        mapping ``{object id: value}`` (ids left out are absent). Where the ids are
        ``0 .. B-1``, shorter arrays leave the missing rows absent and longer ones add
        objects without points. Absent rows read as NaN, or the integer dtype's minimum /
        maximum. ``object_id`` is reserved.
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
        Threads that encode and compress the cells (default: every core). For data that
        does not fit in memory, or arrives in pieces, use :func:`zarr_vectors.create`.

    Returns
    -------
    Dataset
        The new store, opened for reading.

    Raises
    ------
    InputError
        Malformed input: positions that are not finite or not (N, D), positions outside
        ``bounds``, attributes without one row per point, object attributes or groups
        without ``object_ids``, an unknown compression.
    StoreExistsError
        ``target`` holds data and ``overwrite`` is false.

    Examples
    --------
    >>> import numpy as np, zarr_vectors as zv
    >>> pts = np.random.default_rng(0).uniform(0, 100, (1000, 3)).astype("float32")
    >>> ds = zv.write_points(
    ...     "memory://doc-points", pts, chunk_shape=25, bin_shape=12.5,
    ...     attributes={"intensity": np.linspace(0, 1, 1000, dtype="float32")},
    ... )
    >>> ds.vertex_count(), ds.attribute_names()
    (1000, ['intensity'])
    >>> box = ds.query(bbox=([0, 0, 0], [50, 50, 50]))
    >>> bool(np.all(box.positions <= 50)), box.positions.dtype.name
    (True, 'float32')

    Segment ids of any value name the objects:

    >>> ids = np.where(pts[:, 0] < 50, np.uint64(2**63 + 5), np.uint64(17))
    >>> ds = zv.write_points("memory://doc-points-ids", pts, chunk_shape=25, object_ids=ids)
    >>> ds.object_ids().tolist()
    [17, 9223372036854775813]
    """
    pos = _inputs.positions_array(positions, _inputs.call_ndim(chunk_shape, bounds, axes))
    n = len(pos)
    user_ids = _inputs.object_id_array(object_ids, n)
    if object_attributes and user_ids is None:
        raise InputError("object_attributes need object_ids (one object id per point)")
    if groups is not None and user_ids is None:
        raise InputError("groups need object_ids: a group is a list of object ids")
    box = _inputs.resolve_bounds(bounds, pos)
    if is_auto(chunk_shape):
        bins = None if bin_shape is None else _inputs.shape_vector(bin_shape, pos.shape[1], "bin_shape")
        chunk_shape = auto_chunk_shape(pos, box, bins)
    options = StoreOptions(
        chunk_shape,
        bounds=box,
        bin_shape=bin_shape,
        axes=axes,
        units=units,
        crs=crs,
        compression=compression,
        checksums=checksums,
        shards=shards,
        overwrite=overwrite,
        storage_options=storage_options,
    )
    writer = PointStream(
        target,
        options,
        channel_names=channel_names,
        object_attributes=object_attributes,
        groups=groups,
        group_attributes=group_attributes,
        group_names=group_names,
        memory_limit=None,  # the input is in memory already
        workers=workers,
        progress=False,
    )
    with writer:
        writer.append(pos, attributes=attributes, object_ids=user_ids)
