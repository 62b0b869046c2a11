"""What every writer shares: the grid from user input, the object tables, and writing level 0.

A geometry module validates its own inputs, partitions its vertices and produces its
fragment cells and (optionally) link arrays; :func:`write_level0` writes everything
else the same way for every kind, with the root ``zarr.json`` last.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from zarr_vectors.engine import ids as _ids
from zarr_vectors.engine.write import inputs as _inputs
from zarr_vectors.engine.write.autochunk import auto_chunk_shape, is_auto
from zarr_vectors.engine.write.builder import StoreBuilder
from zarr_vectors.engine.write.options import StoreOptions, check_shards
from zarr_vectors.engine.write.tables import write_object_tables
from zarr_vectors.errors import InputError
from zarr_vectors.format.grid import Grid
from zarr_vectors.format.metadata import Axis, LevelMeta, RootMeta
from zarr_vectors.storage import write_session

__all__ = [
    "OBJECT_ID_META",
    "attribute_meta",
    "fragment_owner_payloads",
    "MAX_BINS_PER_CHUNK",
    "LevelArrays",
    "Layout",
    "Tables",
    "make_layout",
    "object_tables",
    "write_level0",
    "write_level_arrays",
    "write_tables",
    "root_meta",
    "row_payloads",
    "partition_owners",
]

#: Upper limit on bins per chunk (``prod(chunk_shape / bin_shape)``).
MAX_BINS_PER_CHUNK = 4096


@dataclass(frozen=True, eq=False)
class Layout:
    """The spatial frame of a new store: grid, inclusive bounds, axes."""

    grid: Grid
    bounds: np.ndarray  # (2, D)
    axes: tuple[Axis, ...]


def axes_from(axes: Sequence[Any] | None, ndim: int, units: str | None = None) -> tuple[Axis, ...]:
    """Space axes from names or ``{"name", "unit"}`` dicts; default x, y, z, then dim0..."""
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
    _inputs.check_names([a.name for a in out], "axis")
    return tuple(out)


def make_layout(positions: np.ndarray, options: StoreOptions) -> Layout:
    """Check ``options``' chunk and bin shapes and bounds against the positions; build the grid
    (``chunk_shape="auto"``: sized from the positions, see :mod:`.autochunk`)."""
    d = positions.shape[1]
    b = _inputs.resolve_bounds(options.bounds, positions)
    if is_auto(options.chunk_shape):
        given_bins = (
            None if options.bin_shape is None else _inputs.shape_vector(options.bin_shape, d, "bin_shape")
        )
        cs = auto_chunk_shape(positions, b, given_bins)
    else:
        cs = _inputs.shape_vector(options.chunk_shape, d, "chunk_shape")
    bs = cs if options.bin_shape is None else _inputs.shape_vector(options.bin_shape, d, "bin_shape")
    try:
        grid = Grid.from_bounds(b, cs, bs)
    except ValueError as exc:
        raise InputError(str(exc)) from exc
    if grid.n_bins > MAX_BINS_PER_CHUNK:
        raise InputError(
            f"bin_shape {bs.tolist()} makes {grid.n_bins} bins per chunk; at most {MAX_BINS_PER_CHUNK} "
            "are allowed (each bin costs 16 bytes of index per chunk): choose a larger bin_shape"
        )
    if grid.n_cells > 1 << 40:  # Python ints: np.prod of the shape wraps past 2**63
        raise InputError(f"the chunk grid {grid.shape.tolist()} is too large; choose a larger chunk_shape")
    return Layout(grid, b, axes_from(options.axes, d, options.units))


@dataclass(frozen=True, eq=False)
class Tables:
    """Validated per-object and per-group inputs; object ids are ``0 .. num_objects - 1``.

    Where the user's ids are remapped (not kept as given, :func:`~zarr_vectors.engine.ids.kept_as_given`)
    the first object attribute is their ``object_id`` table (and the first group attribute
    the ``group_id`` table).
    """

    num_objects: int
    object_attributes: list[_inputs.NamedArray]
    groups: list[np.ndarray]
    group_attributes: list[_inputs.NamedArray]
    group_names: list[str] | None = None
    #: OID of every input entry (vertex or item), when built by :func:`object_tables`.
    ids: _ids.DenseIds | None = None

    @property
    def oids(self) -> np.ndarray:
        assert self.ids is not None
        return self.ids.dense


def _indexed_by_id(dense: _ids.DenseIds, object_attributes: Mapping[str, Any]) -> _ids.DenseIds:
    """The id space rows indexed by id ask for: when a sequence has more rows than there are
    distinct ids and one row for every id up to the largest, ids ``0 .. rows-1`` are the
    objects (those without vertices too) and no id table is stored. Otherwise ``dense``."""
    lengths = [len(v) for v in object_attributes.values() if not isinstance(v, Mapping)]
    if (dense.user is None and dense.present is None) or not lengths or max(lengths) <= dense.distinct:
        return dense
    given = dense.user if dense.user is not None else dense.present
    assert given is not None
    longest = max(lengths)
    if (given.dtype.kind == "i" and int(given[0]) < 0) or int(given[-1]) >= longest:
        name = next(
            k for k, v in object_attributes.items() if not isinstance(v, Mapping) and len(v) == longest
        )
        raise InputError(
            f"object attribute {name!r} has {longest} rows for {dense.distinct} distinct object ids "
            f"({int(given[0])} .. {int(given[-1])}); give one row per distinct id in ascending order, "
            "or a mapping {id: value} (rows indexed by id need ids in 0 .. rows-1)"
        )
    oids = dense.dense if dense.user is None else dense.user[dense.dense].astype(np.int64)
    return _ids.DenseIds(oids, longest, None)


def _id_table(name: str, user: np.ndarray) -> _inputs.NamedArray:
    """The ``object_id`` / ``group_id`` table: the user's ids, ascending, little-endian."""
    return _inputs.NamedArray(name, user.astype(user.dtype.newbyteorder("<")))


def _table(values: Any, rows: int, name: str, what: str) -> _inputs.NamedArray:
    return _inputs.table_attributes({name: values}, rows, what)[0]


def object_tables(
    ids: _ids.DenseIds | int,
    object_attributes: Mapping[str, Any] | None,
    groups: Any,
    group_attributes: Mapping[str, Any] | None,
    group_names: Sequence[str] | None = None,
    *,
    item_order: bool = False,
) -> Tables:
    """Object and group tables in OID order; ``Tables.oids`` numbers the input entries.

    ``ids`` numbers the user's object ids (an int ``B`` means ids ``0 .. B-1``). Object
    attribute values are a mapping ``{user id: row}`` or a sequence of rows: with
    ``item_order`` one per input item (line, mesh, geometry: item ``i`` is OID
    ``ids.dense[i]``); otherwise one per distinct id in ascending order, or indexed by id
    (row ``i`` is object ``i``) when ids are ``0 .. B-1`` or a sequence covers every id
    (see :func:`_indexed_by_id`): then a shorter sequence leaves the missing rows absent and
    a longer one adds objects without vertices. Ids kept as given with gaps place each row at
    its id, the gaps absent. Groups name members by user id; group ids given as mapping keys
    may be any integers (kept as given, or stored as ``group_id``, by the objects' rule),
    and group attributes and ``group_names`` follow the groups in ascending group id.
    """
    dense = _ids.DenseIds.identity(ids) if isinstance(ids, int) else ids
    _inputs.check_names(object_attributes or {}, "object attribute")
    _inputs.check_names(group_attributes or {}, "group attribute")
    for k in object_attributes or {}:
        _ids.check_not_reserved(k, "object attribute")
    for k in group_attributes or {}:
        _ids.check_not_reserved(k, "group attribute")
    if not item_order:
        dense = _indexed_by_id(dense, object_attributes or {})
    given = {
        k: _ids.table_rows(v, dense, k, "object attribute", item_order)
        for k, v in (object_attributes or {}).items()
    }
    num_objects = dense.count
    if dense.user is None and not item_order:
        num_objects = max([num_objects] + [len(np.asarray(v)) for v in given.values()])
    oattrs = [_table(v, len(np.asarray(v)), k, "object attribute") for k, v in given.items()]
    if dense.user is not None:
        oattrs.insert(0, _id_table(_ids.OBJECT_ID_ATTRIBUTE, dense.user))
    object_map = _ids.IdMap(dense.user, num_objects)
    group_list, gids = _inputs.group_lists(groups, object_map)
    gattrs = [
        _table(_ids.table_rows(v, gids, k, "group attribute", False), len(group_list), k, "group attribute")
        for k, v in (group_attributes or {}).items()
    ]
    if gids.user is not None:
        gattrs.insert(0, _id_table(_ids.GROUP_ID_ATTRIBUTE, gids.user))
    names = None if group_names is None else [str(g) for g in group_names]
    if names is not None and gids.present is not None and len(names) == gids.distinct:
        names = _ids.table_rows(names, gids, "group_names", "group attribute", False)
    if names is not None and len(names) != len(group_list):
        raise InputError(f"group_names has {len(names)} names but there are {len(group_list)} groups")
    return Tables(num_objects, oattrs, group_list, gattrs, names, dense)


def row_payloads(values: np.ndarray, part: Any) -> Iterable[bytes]:
    """Raw row bytes of ``values`` for each occupied cell, gathered one cell at a time.

    ``part`` has ``order`` (input rows in stored order), ``row_offsets`` and ``cells``.
    """
    order, offs = part.order, part.row_offsets
    for k in range(len(part.cells)):
        yield np.take(values, order[offs[k] : offs[k + 1]], axis=0).tobytes()


#: Metadata of ``fragment_attributes/object_id``: the owner of every fragment, uint64
#: (the name and dtype the reference implementation uses for the same table).
OBJECT_ID_META = {"zv_array": "fragment_attribute", "name": "object_id", "dtype": "uint64", "row_shape": []}


def fragment_owner_payloads(
    cell: np.ndarray, local: np.ndarray, owner: np.ndarray, n_cells: int
) -> list[bytes]:
    """Per occupied cell, the uint64 object id of each of its fragments in fragment order.

    Every cell's local indices must be exactly ``0 .. F - 1``.
    """
    order = np.lexsort((local, cell))
    ids = owner[order].astype("<u8")
    bounds = np.searchsorted(cell[order], np.arange(n_cells + 1))
    return [ids[a:b].tobytes() for a, b in zip(bounds[:-1], bounds[1:])]


def partition_owners(part: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``(cell, local, object)`` of every fragment of a :class:`Partition` with objects."""
    if part.frag_object is None:
        return None
    return part.frag_cell, part.frag_local, part.frag_object


def attribute_meta(attr: _inputs.NamedArray) -> dict[str, Any]:
    """``zv_array: attribute`` metadata of a per-vertex attribute array."""
    meta: dict[str, Any] = {
        "zv_array": "attribute",
        "name": attr.name,
        "dtype": attr.values.dtype.name,
        "row_shape": attr.row_shape,
    }
    if attr.row_shape:
        # The reference 0.9.2 sizes rows by channel_names (not row_shape) and skips
        # multi-channel attributes without them, so default names are always written.
        meta["channel_names"] = list(attr.channel_names or (f"ch{i}" for i in range(attr.row_shape[0])))
    if attr.time_unit is not None:
        meta["time_unit"] = attr.time_unit  # int64 counts of this unit since 1970-01-01
    return meta


@dataclass(frozen=True, eq=False)
class LevelArrays:
    """What a kind writes into one level: vertices partitioned into cells, their fragment
    cells, vertex attributes, object tables and manifests, and (through ``links(builder)``,
    which returns the families it added to ``arrays_present``) its link arrays.

    ``vertex_payloads`` replace the raw rows of ``positions`` as the ``vertices`` cells
    (Draco blobs, with ``vertex_codecs`` naming their codec). ``fragment_objects`` is
    ``(cell, local index, object id)`` of every fragment; with it the owners are written as
    ``fragment_attributes/object_id`` so a box query can tell the object of each row without
    reading every manifest.
    """

    positions: np.ndarray
    part: Any
    fragments: Iterable[bytes]
    vertex_attributes: list[_inputs.NamedArray]
    tables: Tables
    manifests: list[bytes] | None
    fragment_objects: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
    links: Callable[[Any], list[str]] | None = None
    vertex_payloads: Iterable[bytes] | None = None
    vertex_codecs: list[dict[str, Any]] | None = None
    vertex_encoding: str = "raw"


def write_level_arrays(builder: Any, grid: Grid, arrays: LevelArrays) -> list[str]:
    """Write one level's arrays at ``0/...`` paths of ``builder`` (a :class:`StoreBuilder`, or
    ``builder.at_level(k)`` for level k) and return the families for ``arrays_present``.

    The level group itself (its ``zarr_vectors_level`` block) is left to the caller.
    """
    positions, part, fragments = arrays.positions, arrays.part, arrays.fragments
    vertex_attributes, tables, manifests = arrays.vertex_attributes, arrays.tables, arrays.manifests
    fragment_objects, links = arrays.fragment_objects, arrays.links
    vertex_payloads, vertex_codecs, vertex_encoding = (
        arrays.vertex_payloads,
        arrays.vertex_codecs,
        arrays.vertex_encoding,
    )
    if vertex_payloads is None:
        vertex_payloads = row_payloads(positions, part)
    dtype = "float32" if vertex_encoding == "draco" else positions.dtype.name
    builder.cell_array(
        "0/vertices",
        grid,
        part.cells,
        vertex_payloads,
        {"zv_array": "vertices", "dtype": dtype, "encoding": vertex_encoding},
        array_codecs=vertex_codecs,
    )
    builder.cell_array(
        "0/vertex_fragments",
        grid,
        part.cells,
        fragments,
        {"zv_array": "vertex_fragments", "encoding": "fragment_index_v1"},
        kind="fragments",
    )
    present = ["vertices", "vertex_fragments"]
    if vertex_attributes:
        builder.group("0/vertex_attributes")
        present.append("vertex_attributes")
    for attr in vertex_attributes:
        builder.cell_array(
            f"0/vertex_attributes/{attr.name}",
            grid,
            part.cells,
            row_payloads(attr.values, part),
            attribute_meta(attr),
        )
    if fragment_objects is not None and manifests is not None and tables.num_objects > 1:
        # One object's fragments are all its own: readers take that from its one manifest,
        # and the store saves a file per chunk.
        builder.group("0/fragment_attributes")
        builder.cell_array(
            "0/fragment_attributes/object_id",
            grid,
            part.cells,
            fragment_owner_payloads(*fragment_objects, len(part.cells)),
            OBJECT_ID_META,
        )
        present.append("fragment_attributes")
    if links is not None:
        present += links(builder)
    present += write_tables(builder, grid.ndim, tables, manifests)
    return present


def write_tables(builder: Any, ndim: int, tables: Tables, manifests: list[bytes] | None) -> list[str]:
    """Level 0's object index and object and group tables; the families written."""
    return write_object_tables(
        builder,
        "0",
        sid_ndim=ndim,
        num_objects=tables.num_objects,
        manifests=manifests,
        object_attributes=tables.object_attributes,
        groups=tables.groups,
        group_attributes=tables.group_attributes,
        group_names=tables.group_names,
    )


def root_meta(layout: Layout, options: StoreOptions, geometry_type: str, links_convention: str) -> RootMeta:
    """The root block of a new one-level store."""
    grid = layout.grid
    return RootMeta(
        chunk_shape=tuple(float(c) for c in grid.chunk_shape),
        bounds=(tuple(float(v) for v in layout.bounds[0]), tuple(float(v) for v in layout.bounds[1])),
        axes=layout.axes,
        geometry_types=(geometry_type,),
        links_convention=links_convention,
        crs=options.crs,
        base_bin_shape=tuple(float(v) for v in grid.bin_shape),
        extra=dict(options.root_extra or {}),
    )


def write_level0(
    target: Any,
    options: StoreOptions,
    layout: Layout,
    geometry_type: str,
    links_convention: str,
    arrays: LevelArrays,
) -> None:
    """Write a one-level store of ``geometry_type``, its root ``zarr.json`` last."""
    grid = layout.grid
    root = root_meta(layout, options, geometry_type, links_convention)
    with write_session(
        target, overwrite=options.overwrite, storage_options=options.storage_options
    ) as backend:
        shards = check_shards(options.shards, grid.ndim, target)
        builder = StoreBuilder(backend, options.compression, checksums=options.checksums, shards=shards)
        present = write_level_arrays(builder, grid, arrays)
        level = LevelMeta(
            level=0, vertex_count=len(arrays.positions), arrays_present=tuple(present), fragments_tile=True
        )
        builder.group("0", {"zarr_vectors_level": level.to_json()})
        builder.commit(root.to_attributes())
