"""Meshes written batch by batch in bounded memory: :class:`MeshStream`, and
:func:`write_mesh` / :func:`write_meshes`, the same writer given every mesh at once.

The store is the one :func:`~zarr_vectors.kinds.meshes.write_meshes` writes from the
concatenated batches: a mesh's faces are records of three vertices, kept with the chunk
of their vertices when all three share one, else joined at their smallest corner's chunk
through the shared :class:`~zarr_vectors.engine.write.linkjoin.LinkJoin` (the graph
stream's machinery at ``link_width = 3``). Each mesh arrives whole in one batch.

With ``encoding="draco"`` a chunk's vertices and the faces inside it become one Draco blob
when the chunk's group is encoded; the rows Draco decodes to are the ones the cross-chunk
faces of the second sweep name, as in the one-shot writer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from zarr_vectors.engine import (
    DEFAULT_MEMORY_LIMIT,
    GroupCells,
    StoreOptions,
    SweepContext,
    check_shards,
    dense_ids,
    draco_codec,
    fragment_owner_payloads,
    grid_of,
    partition,
    row_payloads,
    table_rows,
)
from zarr_vectors.errors import InputError, choice_message
from zarr_vectors.kinds.graph_stream import GraphStream
from zarr_vectors.kinds.graphs import vertex_locals
from zarr_vectors.kinds.meshes import (
    ENCODINGS,
    draco_cells,
    face_array,
    mesh_ids_of,
    mesh_pairs,
    mesh_vertices,
    one_mesh,
)

__all__ = ["MeshStream", "write_mesh", "write_meshes"]


class MeshStream(GraphStream):
    """Meshes given in batches: ``append(meshes, object_ids=)`` as for
    :func:`zarr_vectors.write_meshes` (a list of ``(vertices, faces)`` pairs or mesh objects,
    or one mesh), each with its own id (default: its number across batches)."""

    geometry_type: ClassVar[str] = "mesh"
    links_convention: ClassVar[str] = "explicit"
    kind_name: ClassVar[str] = "meshes"
    width: ClassVar[int] = 3
    create_keywords: ClassVar[tuple[str, ...]] = ("encoding", "quantization_bits", "compression_level")

    def __init__(
        self,
        *args: Any,
        encoding: str = "raw",
        quantization_bits: int = 11,
        compression_level: int = 7,
        **kwargs: Any,
    ) -> None:
        if encoding not in ENCODINGS:
            raise InputError(choice_message("encoding", encoding, ENCODINGS))
        if encoding == "draco" and not 1 <= int(quantization_bits) <= 30:
            raise InputError(f"quantization_bits must be in 1..30, got {quantization_bits}")
        if encoding == "draco" and not 0 <= int(compression_level) <= 10:
            raise InputError(f"compression_level must be in 0..10, got {compression_level}")
        super().__init__(*args, directed=False, **kwargs)
        self.encoding = encoding
        self.draco = (int(quantization_bits), int(compression_level))
        if self.ndim is None:
            self.ndim = 3
            self.shards = check_shards(self.options.shards, 3, self.target)

    def append(self, meshes: Any, *, object_ids: Any = None, **unknown: Any) -> None:  # type: ignore[override]
        """Add whole meshes; ``object_ids`` one distinct id per mesh, new to this writer."""
        self._per_batch(unknown, ("object_ids",))
        self._require_open()
        if one_mesh(meshes):
            meshes = [meshes]
        vertices, faces, counts = mesh_pairs(meshes)
        per_mesh = None if object_ids is None else mesh_ids_of(object_ids, len(counts))
        if per_mesh is not None:
            self._new_items(per_mesh, "mesh", "meshes")
        n = len(vertices)
        given = None if per_mesh is None else np.repeat(per_mesh, counts)
        self._given_ids(given, n)
        if per_mesh is None:
            per_mesh = self._meshes() + np.arange(len(counts), dtype=np.int64)
        pos = self._positions(vertices)
        self._attributes(None, n)
        self._queue({"positions": pos, "ids": np.repeat(per_mesh, counts), "edges": faces})
        self._items.append(per_mesh)
        self._edges += len(faces)

    def append_mesh(
        self,
        vertices: Any,
        faces: Any,
        *,
        attributes: Mapping[str, Any] | None = None,
        object_ids: Any = None,
    ) -> None:
        """Add vertices and the faces between them as :func:`write_mesh` takes them: per-vertex
        ``object_ids`` (default: one object, 0) and ``attributes``; a face joins one object."""
        self._require_open()
        self._add(self._positions(mesh_vertices(vertices)), faces, attributes, object_ids, None)

    def _records(self, records: Any, n: int) -> np.ndarray:
        return face_array(records, n)

    def _check_objects(self, records: np.ndarray, ids: np.ndarray) -> None:
        mixed = np.flatnonzero(np.any(ids[records] != ids[records[:, :1]], axis=1))
        if len(mixed):
            i = int(mixed[0])
            joined = sorted(set(ids[records[i]].tolist()))
            raise InputError(f"face {i} {records[i].tolist()} joins vertices of objects {joined}")

    def _meshes(self) -> int:
        return sum(len(m) for m in self._items)

    def _stored(self) -> int:
        """Draco keeps the faces inside a chunk in its blob: the links hold the others."""
        return self._edges if self.encoding == "raw" else self._links.count

    def _present(self, values: bool) -> list[str]:
        if not self._stored():
            return []
        return ["links"] + (["link_fragments"] if self._intra_count else [])

    def _metas(self, ctx: SweepContext) -> dict[str, tuple[Any, ...]]:
        out = super()._metas(ctx)
        if self.encoding == "draco":
            meta = {"zv_array": "vertices", "dtype": "float32", "encoding": "draco"}
            out["vertices"] = (meta, "data", [draco_codec(*self.draco)])
        return out

    def _encode(self, rows: dict[str, np.ndarray], ctx: SweepContext, lo: int, hi: int) -> GroupCells:
        if self.encoding == "raw":
            return super()._encode(rows, ctx, lo, hi)
        grid = ctx.grid
        by_vertex = np.argsort(rows["vertex"], kind="stable")  # the one-shot writer's input order
        vertex, pos = rows["vertex"][by_vertex], rows["positions"][by_vertex]
        part = partition(pos, grid, ctx.oids(rows["ids"][by_vertex]))
        faces = self._intra.read(lo, hi)
        order = np.argsort(faces["record"], kind="stable") if faces else np.zeros(0, np.int64)
        inside = np.searchsorted(vertex, faces["ends"][order]) if faces else np.zeros((0, 3), np.int64)
        blobs, part, frags = draco_cells(pos, inside, part, np.ones(len(inside), bool), *self.draco)
        cells = part.cells
        arrays: dict[str, tuple[np.ndarray, list[bytes]]] = {
            "vertices": (cells, blobs),
            "vertex_fragments": (cells, frags),
        }
        for i, spec in enumerate(ctx.specs):  # rows in the order the blobs decode to
            values = rows[f"a{i}"][by_vertex]
            arrays[f"vertex_attributes/{spec.name}"] = (cells, list(row_payloads(values, part)))
        assert part.frag_object is not None
        if ctx.num_objects > 1:
            owners = fragment_owner_payloads(part.frag_cell, part.frag_local, part.frag_object, len(cells))
            arrays["fragment_attributes/object_id"] = (cells, owners)
        cell, local, _ = vertex_locals(part)  # rows in decoded order
        linear = np.ravel_multi_index(tuple(cells.T), tuple(int(s) for s in grid.shape)).astype(np.int64)
        zero = np.zeros(len(part.frag_cell), np.int64)
        fragments = (part.frag_object, zero, linear[part.frag_cell], part.frag_local)
        return GroupCells(arrays, fragments, vertex, linear[cell], local)


def write_mesh(
    target: Any,
    vertices: Any,
    faces: Any,
    *,
    chunk_shape: Any = "auto",
    encoding: str = "raw",
    quantization_bits: int = 11,
    compression_level: int = 7,
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
    """Write a triangle mesh: ``vertices`` (N, 3), ``faces`` (F, 3) vertex indices.

    Reads return ``Result.faces`` as rows of the result; see :meth:`Result.to_trimesh`.

    Parameters
    ----------
    target
        Where to write, as in :func:`zarr_vectors.write_points`.
    vertices
        (N, 3) finite coordinates.
    faces
        (F, 3) triangles, each naming three distinct vertices in ``[0, N)``.
    chunk_shape
        Edge length of a spatial chunk: one number or one per axis, or ``"auto"`` (the
        default): cubes sized from the data so that each non-empty chunk holds about 16,384
        vertices on average (see ``docs/writing.md``).
    encoding
        ``"raw"`` (exact) or ``"draco"``: each chunk's vertices and intra-chunk faces as a
        Draco blob quantized to ``quantization_bits`` over the chunk's bounding box (see
        ``docs/meshes.md`` for the error bound). Draco may reorder a chunk's vertices.
    quantization_bits
        Draco position quantization, 1 to 30 bits.
    compression_level
        Draco compression effort, 0 to 10.
    bounds
        Inclusive ``(lo, hi)`` corners; every vertex must lie inside. Default: the data's extent.
    attributes
        Per-vertex values, name -> (N,) or (N, C) array.
    channel_names
        Optional channel names per attribute: name -> one name per channel.
    object_ids
        One object per vertex (default: one object, id 0); every face must join vertices
        of one object.
    object_attributes
        name -> one row per distinct object id in ascending order, or a mapping ``{id: value}``, as
        in :func:`zarr_vectors.write_points`.
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
        Malformed input: vertices that are not (N, 3), faces out of range, degenerate or
        joining two objects, an unknown ``encoding``, Draco settings out of range, and the
        input errors of :func:`zarr_vectors.write_points`.
    StoreExistsError
        ``target`` holds data and ``overwrite`` is false.

    Examples
    --------
    >>> import zarr_vectors as zv
    >>> vertices = [[0, 0, 0], [1, 0, 0], [0, 1, 0], [1, 1, 0]]
    >>> ds = zv.write_mesh("memory://doc-mesh", vertices, [[0, 1, 2], [1, 3, 2]], chunk_shape=2)
    >>> res = ds.read()
    >>> res.faces.tolist(), float(res.to_trimesh().area)
    ([[0, 1, 2], [1, 3, 2]], 1.0)
    """
    if encoding not in ENCODINGS:
        raise InputError(choice_message("encoding", encoding, ENCODINGS))
    pos = mesh_vertices(vertices)
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
    with MeshStream(
        target,
        grid_of(pos, options),
        encoding=encoding,
        quantization_bits=quantization_bits,
        compression_level=compression_level,
        channel_names=channel_names,
        object_attributes=object_attributes,
        groups=groups,
        group_attributes=group_attributes,
        group_names=group_names,
        memory_limit=DEFAULT_MEMORY_LIMIT,
        workers=workers,
    ) as stream:
        stream.append_mesh(pos, faces, attributes=attributes, object_ids=object_ids)


def write_meshes(
    target: Any, meshes: Sequence[Any], *, chunk_shape: Any = "auto", object_ids: Any = None, **kwargs: Any
) -> None:
    """Write several meshes: ``(vertices, faces)`` pairs or ``trimesh.Trimesh`` objects.

    Mesh ``i`` is object ``object_ids[i]``; :meth:`Dataset.objects` reads a mesh back whole.

    Parameters
    ----------
    target
        Where to write, as in :func:`zarr_vectors.write_points`.
    meshes
        A sequence of ``(vertices, faces)`` pairs ((n_i, 3) and (f_i, 3), faces indexing
        their own mesh's vertices) or ``trimesh.Trimesh`` objects.
    chunk_shape
        As in :func:`zarr_vectors.write_points`.
    object_ids
        One distinct int64 or uint64 id per mesh, of any value (segment ids, ...); default ``i``.
    **kwargs
        The other keywords of :func:`write_mesh`. ``object_attributes`` hold one row per
        mesh in the order given (a name, a volume, ...), or a mapping ``{id: value}``.

    Returns
    -------
    Dataset
        The new store, opened for reading.

    Raises
    ------
    InputError
        No meshes, an item that is neither a pair nor a ``trimesh.Trimesh``, vertices that
        are not (n, 3), and the input errors of :func:`write_mesh`.
    StoreExistsError
        ``target`` holds data and ``overwrite`` is false.

    Examples
    --------
    >>> import zarr_vectors as zv
    >>> triangle = ([[0, 0, 0], [1, 0, 0], [0, 1, 0]], [[0, 1, 2]])
    >>> moved = ([[5, 5, 5], [6, 5, 5], [5, 6, 5]], [[0, 1, 2]])
    >>> ds = zv.write_meshes(
    ...     "memory://doc-meshes", [triangle, moved], chunk_shape=4, object_ids=[100, 200],
    ...     object_attributes={"name": ["near", "far"]},
    ... )
    >>> ds.object_ids().tolist()
    [100, 200]
    >>> far = ds.objects([200])
    >>> far.positions.tolist(), far.faces.tolist()
    ([[5, 5, 5], [6, 5, 5], [5, 6, 5]], [[0, 1, 2]])
    """
    vertices, faces, counts = mesh_pairs(meshes)
    if object_ids is None:
        per_mesh = np.arange(len(counts))
    else:
        per_mesh = mesh_ids_of(object_ids, len(counts))
        mesh_ids = dense_ids(per_mesh)
        given = kwargs.pop("object_attributes", None) or {}
        kwargs["object_attributes"] = {
            k: table_rows(v, mesh_ids, k, "object attribute", True) for k, v in given.items()
        }
    write_mesh(
        target, vertices, faces, chunk_shape=chunk_shape, object_ids=np.repeat(per_mesh, counts), **kwargs
    )
