"""Triangle meshes: ``write_mesh`` and ``write_meshes``.

Vertices are partitioned like a graph's (one fragment per object and chunk). A face is
a ``link_width = 3`` record: faces whose three vertices share a chunk are flat rows of
``links/0/0.0.0_0.0.0`` grouped by ``link_fragments``; the others go to
``links/0/<offsets>`` cells of an undirected canonical family, as the reference writes
them: each face is stored at its smallest (chunk, vertex) corner with its corners sorted,
and a leading ``perm_idx`` column restores the input order, so winding is kept. Sorting
makes every offset non-negative in the first differing axis, which halves the number of
offset arrays against storing faces in input order.

With ``encoding="draco"`` each chunk's vertices and intra-chunk faces are one Draco blob
(the ``draco`` codec in the ``vertices`` codec list decodes it to raw rows). Draco picks
the vertex order; attributes, fragments and cross-chunk faces are written in that order.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from zarr_vectors.engine import (
    Layout,
    LevelArrays,
    Partition,
    StoreBuilder,
    StoreOptions,
    as_id_array,
    build_manifests,
    dense_ids,
    draco_codec,
    fragment_payloads,
    make_layout,
    object_tables,
    partition,
    partition_owners,
    table_rows,
    write_level0,
)
from zarr_vectors.engine import inputs as _inputs
from zarr_vectors.errors import InputError, choice_message
from zarr_vectors.format.fragments import FragmentIndex, encode_fragments
from zarr_vectors.kinds.graphs import vertex_locals, write_edges

__all__ = ["write_mesh", "write_meshes", "face_array", "mesh_ids_of", "mesh_pairs", "one_mesh", "ENCODINGS"]

ENCODINGS = ("raw", "draco")


def face_array(faces: Any, n: int) -> np.ndarray:
    """(F, 3) int64 triangles, each naming three distinct vertices in ``[0, n)``."""
    arr = np.asarray(faces)
    if arr.size == 0:
        return np.zeros((0, 3), np.int64)
    if arr.ndim != 2 or arr.dtype.kind not in "iu":
        raise InputError(
            f"faces must be an (F, 3) integer array of vertex indices, got shape {arr.shape} {arr.dtype}"
        )
    if arr.shape[1] != 3:
        raise InputError(
            f"faces have {arr.shape[1]} vertices each; only triangles are supported "
            "(triangulate first, e.g. trimesh.Trimesh(vertices, faces).triangles)"
        )
    arr = arr.astype(np.int64)
    bad = np.flatnonzero(np.any((arr < 0) | (arr >= n), axis=1))
    if len(bad):
        raise InputError(
            f"face {int(bad[0])} {arr[bad[0]].tolist()} names a vertex outside [0, {n}) (the vertices given)"
        )
    degenerate = np.flatnonzero(
        (arr[:, 0] == arr[:, 1]) | (arr[:, 1] == arr[:, 2]) | (arr[:, 0] == arr[:, 2])
    )
    if len(degenerate):
        raise InputError(
            f"face {int(degenerate[0])} {arr[degenerate[0]].tolist()} repeats a vertex; remove degenerate "
            "faces first (e.g. trimesh's mesh.update_faces(mesh.nondegenerate_faces()))"
        )
    return arr


def _mesh_vertices(vertices: Any) -> np.ndarray:
    pos = _inputs.positions_array(vertices, 3, "vertices")
    if pos.shape[1] != 3:
        raise InputError(f"mesh vertices must be (N, 3), got {pos.shape}")
    return pos


def draco_cells(
    pos: np.ndarray, faces: np.ndarray, part: Partition, intra: np.ndarray, bits: int, level: int
) -> tuple[list[bytes], Partition, list[bytes]]:
    """Encode every chunk's vertices and intra faces; return the blobs, the partition with
    rows in decoded order, and the fragment cells (explicit rows where a chunk has several)."""
    from zarr_vectors._draco import encode_cell

    cell, local, _ = vertex_locals(part)
    face_cell = cell[faces[intra, 0]]
    by_cell = np.argsort(face_cell, kind="stable")
    face_bounds = np.searchsorted(face_cell[by_cell], np.arange(len(part.cells) + 1))
    intra_local = local[faces[intra]][by_cell]
    order = part.order.copy()
    blobs, frags = [], []
    for k in range(len(part.cells)):
        a, b = part.row_offsets[k], part.row_offsets[k + 1]
        blob, dec = encode_cell(
            pos[part.order[a:b]],
            intra_local[face_bounds[k] : face_bounds[k + 1]],
            quantization_bits=bits,
            compression_level=level,
        )
        order[a:b] = part.order[a:b][dec]
        blobs.append(blob)
        f0, f1 = part.cell_frag_offsets[k], part.cell_frag_offsets[k + 1]
        if f1 - f0 == 1:
            frags.append(
                encode_fragments(FragmentIndex.from_ranges(np.zeros(1, np.int64), np.array([b - a])))
            )
            continue
        row_of = np.empty(b - a, np.int64)
        row_of[dec] = np.arange(b - a)  # original local row -> decoded row
        lists = [np.sort(row_of[s : s + c]) for s, c in zip(part.frag_start[f0:f1], part.frag_count[f0:f1])]
        frags.append(encode_fragments(FragmentIndex.from_explicit(lists)))
    return blobs, dataclasses.replace(part, order=order), frags


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
    if encoding == "draco" and not 1 <= int(quantization_bits) <= 30:
        raise InputError(f"quantization_bits must be in 1..30, got {quantization_bits}")
    if encoding == "draco" and not 0 <= int(compression_level) <= 10:
        raise InputError(f"compression_level must be in 0..10, got {compression_level}")
    pos = _mesh_vertices(vertices)
    n = len(pos)
    f = face_array(faces, n)
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
    layout = make_layout(pos, options)
    vattrs = _inputs.vertex_attributes(attributes, n, channel_names)
    user_ids = _inputs.object_id_array(object_ids, n)
    user_ids = np.zeros(n, np.int64) if user_ids is None else user_ids
    ids = dense_ids(user_ids)
    oids = ids.dense
    mixed = np.flatnonzero(np.any(oids[f] != oids[f[:, :1]], axis=1)) if len(f) else np.zeros(0, np.int64)
    if len(mixed):
        i = int(mixed[0])
        raise InputError(
            f"face {i} {f[i].tolist()} joins vertices of objects {sorted(set(user_ids[f[i]].tolist()))}"
        )
    tables = object_tables(ids, object_attributes, groups, group_attributes, group_names)
    part = partition(pos, layout.grid, tables.oids)
    _write(
        target,
        layout,
        pos,
        f,
        part,
        vattrs,
        tables,
        encoding,
        int(quantization_bits),
        int(compression_level),
        options,
    )


def _write(
    target: Any,
    layout: Layout,
    pos: np.ndarray,
    faces: np.ndarray,
    part: Partition,
    vattrs: list[_inputs.NamedArray],
    tables: Any,
    encoding: str,
    bits: int,
    level: int,
    options: StoreOptions,
) -> None:
    grid = layout.grid
    manifests = build_manifests(part, grid, tables.num_objects)
    owners = partition_owners(part)
    cell, _, _ = vertex_locals(part)
    intra = np.all(cell[faces] == cell[faces[:, :1]], axis=1)
    if encoding == "draco":
        blobs, part, frags = draco_cells(pos, faces, part, intra, bits, level)
        stored_faces, vertex_payloads = faces[~intra], blobs
        codec = draco_codec(bits, level)
        vertex_codecs = [codec]
    else:
        stored_faces, vertex_payloads, frags, vertex_codecs = faces, None, fragment_payloads(part), []

    def links(builder: StoreBuilder) -> list[str]:
        if not write_edges(builder, grid, part, stored_faces, False, []):
            return []
        has_intra = encoding == "raw" and bool(intra.any())
        return ["links"] + (["link_fragments"] if has_intra else [])

    write_level0(
        target,
        options,
        layout,
        "mesh",
        "explicit",
        LevelArrays(
            positions=pos,
            part=part,
            fragments=frags,
            vertex_attributes=vattrs,
            tables=tables,
            manifests=manifests,
            fragment_objects=owners,
            links=links,
            vertex_payloads=vertex_payloads,
            vertex_codecs=vertex_codecs,
            vertex_encoding=encoding,
        ),
    )


def _as_pair(mesh: Any, i: int) -> tuple[np.ndarray, np.ndarray]:
    if hasattr(mesh, "vertices") and hasattr(mesh, "faces"):
        return np.asarray(mesh.vertices), np.asarray(mesh.faces)
    try:
        v, f = mesh
    except (TypeError, ValueError) as exc:
        raise InputError(
            f"mesh {i} must be a (vertices, faces) pair or a trimesh.Trimesh, got {type(mesh).__name__}"
        ) from exc
    return np.asarray(v), np.asarray(f)


def one_mesh(value: Any) -> bool:
    """A single mesh (a ``(vertices, faces)`` pair of 2-D arrays, or a mesh object), not a list of them."""
    if not isinstance(value, (list, tuple)):
        return True
    return len(value) == 2 and all(isinstance(v, np.ndarray) and v.ndim == 2 for v in value)


def mesh_pairs(meshes: Sequence[Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Meshes checked and joined: all vertices, faces indexing them, and each mesh's vertex count."""
    pairs = [_as_pair(m, i) for i, m in enumerate(meshes)]
    if not pairs:
        raise InputError("no meshes given")
    for i, (v, f) in enumerate(pairs):
        if v.ndim != 2 or v.shape[1] != 3:
            flipped = v.ndim == 2 and v.shape[0] == 3
            raise InputError(
                f"mesh {i}: vertices must be (N, 3), got {v.shape}"
                + ("; they look transposed: pass vertices.T" if flipped else "")
            )
        try:
            face_array(f, len(v))
        except InputError as exc:
            raise InputError(f"mesh {i}: {exc}") from exc
    counts = np.array([len(v) for v, _ in pairs], np.int64)
    starts = np.cumsum(counts) - counts
    vertices = np.concatenate([v for v, _ in pairs])
    faces = np.concatenate([np.asarray(f, np.int64).reshape(-1, 3) + s for (_, f), s in zip(pairs, starts)])
    return vertices, faces, counts


def mesh_ids_of(object_ids: Any, count: int) -> np.ndarray:
    """One distinct id per mesh (int64 or uint64); a repeated id is refused."""
    per_mesh = as_id_array(object_ids, "object_ids")
    if per_mesh.shape != (count,):
        raise InputError(f"object_ids must have one id per mesh ({count}), got shape {per_mesh.shape}")
    mesh_ids = dense_ids(per_mesh)
    if mesh_ids.distinct != count:
        dup = np.flatnonzero(np.bincount(mesh_ids.dense) > 1)[0]
        raise InputError(
            f"object_ids name object {int(mesh_ids.id_map().ids()[dup])} for several meshes; "
            "give each mesh its own id"
        )
    return per_mesh


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
