"""Point clouds: ``write_points``."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import _inputs
from .._object_tables import build_manifests, write_object_tables
from .._partition import Partition, partition
from .._writer import StoreBuilder
from ..errors import InputError
from ..format.fragments import FragmentIndex, encode_fragments, encode_range_batch
from ..format.grid import Grid
from ..format.metadata import Axis, LevelMeta, RootMeta
from ..storage import write_session

if TYPE_CHECKING:
    from ..dataset import Dataset

__all__ = ["write_points", "MAX_BINS_PER_CHUNK"]

#: Upper limit on bins per chunk (``prod(chunk_shape / bin_shape)``).
MAX_BINS_PER_CHUNK = 4096


def axes_from(axes: Sequence[Any] | None, ndim: int, units: str | None = None) -> tuple[Axis, ...]:
    """Space axes from names or ``{"name", "unit"}`` dicts; default x, y, z, then dim3..."""
    if axes is None:
        names = ["x", "y", "z"][:ndim] if ndim <= 3 else [f"dim{i}" for i in range(ndim)]
        return tuple(Axis(n, "space", units) for n in names)
    if len(axes) != ndim:
        raise InputError(f"axes has {len(axes)} entries but positions have {ndim} columns")
    out = []
    for a in axes:
        if isinstance(a, Axis):
            out.append(a)
        elif isinstance(a, Mapping):
            out.append(Axis(str(a["name"]), "space", a.get("unit", units)))
        else:
            out.append(Axis(str(a), "space", units))
    if len({a.name for a in out}) != len(out):
        raise InputError(f"axis names must be unique, got {[a.name for a in out]}")
    return tuple(out)


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
        out.append(encode_fragments(FragmentIndex.from_ranges(part.frag_start[lo:hi], part.frag_count[lo:hi])))
    return out


def row_payloads(values: np.ndarray, part: Partition) -> Iterator[bytes]:
    """Raw row bytes of ``values`` for each occupied cell, gathered one cell at a time."""
    order, offs = part.order, part.row_offsets
    for k in range(len(part.cells)):
        yield np.take(values, order[offs[k] : offs[k + 1]], axis=0).tobytes()


def attribute_meta(attr: _inputs.NamedArray) -> dict[str, Any]:
    """``zv_array: attribute`` metadata of a per-vertex attribute array."""
    meta: dict[str, Any] = {
        "zv_array": "attribute", "name": attr.name, "dtype": attr.values.dtype.name, "row_shape": attr.row_shape,
    }  # fmt: skip
    if attr.row_shape:
        # The reference 0.9.2 sizes rows by channel_names (not row_shape) and skips
        # multi-channel attributes without them, so default names are always written.
        meta["channel_names"] = list(attr.channel_names or (f"ch{i}" for i in range(attr.row_shape[0])))
    return meta


def write_points(
    target: Any,
    positions: Any,
    *,
    chunk_shape: Any,
    bounds: Any = None,
    bin_shape: Any = None,
    attributes: Mapping[str, Any] | None = None,
    channel_names: Mapping[str, Sequence[str]] | None = None,
    object_ids: Any = None,
    object_attributes: Mapping[str, Any] | None = None,
    groups: Any = None,
    group_attributes: Mapping[str, Any] | None = None,
    axes: Sequence[Any] | None = None,
    units: str | None = None,
    crs: Any = None,
    compression: str | None = "none",
    overwrite: bool = False,
    storage_options: dict[str, Any] | None = None,
) -> Dataset:
    """Write a point cloud to a new Zarr Vectors store and return it opened for reading.

    Parameters
    ----------
    target
        A directory path, a ``.zip`` path, a URL (``s3://``, ``memory://``, ``file://``)
        or a zarr v3 ``Store``.
    positions
        (N, D) float or integer coordinates, finite.
    chunk_shape
        Edge length of a spatial chunk: one number or one per axis.
    bounds
        Inclusive ``(lo, hi)`` corners; every position must lie inside. Default: the data's extent.
    bin_shape
        Bin edge inside a chunk (must divide ``chunk_shape``); each bin is a contiguous
        row range, so a box query touching part of a chunk tests only the bins it meets.
        Default: one bin per chunk.
    attributes, channel_names
        Per-point values, name -> (N,) or (N, C) array; optional channel names per attribute.
    object_ids
        One non-negative integer per point. Object ``i``'s points are found through its manifest.
    object_attributes
        name -> (B,) or (B, C), row ``i`` describing object ``i``; missing rows read as absent
        (NaN, or the integer dtype's minimum / maximum).
    groups, group_attributes
        Groups of object ids (a list of lists, or a mapping group id -> ids), and per-group values.
    axes, units, crs
        Axis names (or ``{"name", "unit"}`` dicts), a default unit, and an opaque CRS record.
    compression
        ``"none"`` (the format's default), ``"zstd"``, ``"gzip"`` or ``"blosc"``.
    overwrite
        Replace an existing store. Local and zip targets are swapped in only once complete.

    Examples
    --------
    >>> import numpy as np, zarr_vectors as zv
    >>> pts = np.random.default_rng(0).uniform(0, 100, (1000, 3)).astype("float32")
    >>> ds = zv.write_points("memory://doc-points", pts, chunk_shape=25, bin_shape=12.5)
    >>> int(ds.query(bbox=([0, 0, 0], [50, 50, 50])).positions.shape[1])
    3
    """
    from ..dataset import Dataset

    pos = _inputs.positions_array(positions)
    n, d = pos.shape
    cs = _inputs.shape_vector(chunk_shape, d, "chunk_shape")
    bs = cs if bin_shape is None else _inputs.shape_vector(bin_shape, d, "bin_shape")
    b = _inputs.resolve_bounds(bounds, pos)
    try:
        grid = Grid.from_bounds(b, cs, bs)
    except ValueError as exc:
        raise InputError(str(exc)) from exc
    if grid.n_bins > MAX_BINS_PER_CHUNK:
        raise InputError(
            f"bin_shape {bs.tolist()} makes {grid.n_bins} bins per chunk; at most {MAX_BINS_PER_CHUNK} "
            "are allowed (each bin costs 16 bytes of index per chunk): choose a larger bin_shape"
        )
    if int(np.prod(grid.shape)) > 1 << 40:
        raise InputError(f"the chunk grid {grid.shape.tolist()} is too large; choose a larger chunk_shape")
    vattrs = _inputs.vertex_attributes(attributes, n, channel_names)
    oids = _inputs.object_id_array(object_ids, n)
    oattr_in = dict(object_attributes or {})
    num_objects = max([int(oids.max()) + 1 if oids is not None and n else 0]
                      + [len(np.asarray(v)) for v in oattr_in.values()])  # fmt: skip
    if oattr_in and oids is None:
        raise InputError("object_attributes need object_ids (one object id per point)")
    oattrs = [
        _inputs.NamedArray(a.name, a.values)
        for a in (
            _inputs.table_attributes({k: v}, len(np.asarray(v)), "object attribute")[0]
            for k, v in oattr_in.items()
        )
    ]
    if groups is not None and oids is None:
        raise InputError("groups need object_ids: a group is a list of object ids")
    group_list = _inputs.group_lists(groups, num_objects)
    gattrs = _inputs.table_attributes(group_attributes, len(group_list), "group attribute")
    axes_t = axes_from(axes, d, units)

    part = partition(pos, grid, oids)
    root = RootMeta(
        chunk_shape=tuple(float(c) for c in cs),
        bounds=(tuple(float(v) for v in b[0]), tuple(float(v) for v in b[1])),
        axes=axes_t,
        geometry_types=("point_cloud",),
        base_bin_shape=None if bin_shape is None else tuple(float(v) for v in bs),
        crs=crs,
    )
    with write_session(target, overwrite=overwrite, storage_options=storage_options) as backend:
        builder = StoreBuilder(backend, compression)
        builder.cell_array(
            "0/vertices", grid, part.cells, row_payloads(pos, part),
            {"zv_array": "vertices", "dtype": pos.dtype.name, "encoding": "raw"},
        )  # fmt: skip
        builder.cell_array(
            "0/vertex_fragments", grid, part.cells, fragment_payloads(part),
            {"zv_array": "vertex_fragments", "encoding": "fragment_index_v1"}, kind="fragments",
        )  # fmt: skip
        present = ["vertices", "vertex_fragments"]
        if vattrs:
            builder.group("0/vertex_attributes")
            present.append("vertex_attributes")
        for attr in vattrs:
            builder.cell_array(
                f"0/vertex_attributes/{attr.name}", grid, part.cells, row_payloads(attr.values, part),
                attribute_meta(attr),
            )  # fmt: skip
        manifests = build_manifests(part, grid, num_objects) if oids is not None else None
        present += write_object_tables(
            builder, "0", sid_ndim=d, num_objects=num_objects, manifests=manifests,
            object_attributes=oattrs, groups=group_list, group_attributes=gattrs,
        )  # fmt: skip
        level = LevelMeta(level=0, vertex_count=n, arrays_present=tuple(present), fragments_tile=True)
        builder.group("0", {"zarr_vectors_level": level.to_json()})
        builder.commit(root.to_attributes())
    return Dataset.open(target, mode="r", storage_options=storage_options)
