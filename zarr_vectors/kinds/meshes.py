"""Triangle meshes: the layout, as the writers (:mod:`zarr_vectors.kinds.mesh_stream`) and
the pyramid build it.

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
from collections.abc import Sequence
from typing import Any

import numpy as np

from zarr_vectors.engine import (
    Partition,
    as_id_array,
    dense_ids,
)
from zarr_vectors.engine import inputs as _inputs
from zarr_vectors.errors import InputError
from zarr_vectors.format.fragments import FragmentIndex, encode_fragments
from zarr_vectors.kinds.graphs import vertex_locals

__all__ = ["draco_cells", "face_array", "mesh_ids_of", "mesh_pairs", "mesh_vertices", "one_mesh", "ENCODINGS"]

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


def mesh_vertices(vertices: Any) -> np.ndarray:
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
