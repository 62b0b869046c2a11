"""Mesh files in and out through trimesh: PLY, OBJ, STL, GLB/GLTF, OFF.

Ingest reads every file first (one object per file, ids in the order given), so a file
trimesh cannot read stops the run before anything is written. Export writes a box or
some objects of a mesh store back to one file.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from zarr_vectors.engine import shape_vector
from zarr_vectors.errors import InputError
from zarr_vectors.io._files import input_files

if TYPE_CHECKING:
    from zarr_vectors.dataset import Dataset

__all__ = [
    "MESH_SUFFIXES",
    "mesh_files",
    "load_mesh",
    "merge_duplicates",
    "ingest_meshes",
    "export_mesh",
    "save_trimesh",
]

MESH_SUFFIXES = (".ply", ".obj", ".stl", ".glb", ".gltf", ".off")


def mesh_files(paths: Iterable[str | Path], *, recursive: bool = False) -> list[Path]:
    """Files named by ``paths``; a folder contributes its mesh files, sorted by name (with
    ``recursive``, those of its subfolders too, sorted by relative path)."""
    return input_files(paths, MESH_SUFFIXES, "mesh", recursive=recursive)


def merge_duplicates(vertices: np.ndarray, faces: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Identical vertices (bit-equal rows) as one: the distinct rows in order of first use,
    faces renumbered to them. A triangle soup (STL) becomes an indexed mesh; faces keep
    their corners' positions exactly."""
    if len(vertices) == 0:
        return vertices, faces
    rows = np.ascontiguousarray(vertices).view(
        np.dtype((np.void, vertices.dtype.itemsize * vertices.shape[1]))
    )
    _, first, inverse = np.unique(rows.ravel(), return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")  # distinct rows in order of first appearance
    rank = np.empty(len(order), np.int64)
    rank[order] = np.arange(len(order))
    return vertices[first[order]], rank[inverse.ravel()][faces]


def load_mesh(path: str | Path, *, merge_vertices: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(vertices, faces) of one file; scenes (GLB/GLTF) are merged into one mesh, and
    identical vertices into one (:func:`merge_duplicates`) unless ``merge_vertices=False``."""
    import trimesh

    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path} does not exist or is not a file")
    try:
        loaded = trimesh.load(path, force="mesh", process=False)
    except (ValueError, KeyError, IndexError, OSError, TypeError, AttributeError) as exc:
        raise InputError(f"{path}: trimesh cannot read it as a mesh ({type(exc).__name__}: {exc})") from exc
    if not isinstance(loaded, trimesh.Trimesh) or len(loaded.faces) == 0:
        raise InputError(f"{path}: no triangle faces found (point clouds and empty scenes are not meshes)")
    vertices = np.asarray(loaded.vertices, dtype=np.float64)
    if not np.all(np.isfinite(vertices)):
        raise InputError(f"{path}: the mesh has NaN or infinite vertex coordinates")
    faces = np.asarray(loaded.faces, dtype=np.int64)
    return merge_duplicates(vertices, faces) if merge_vertices else (vertices, faces)


def ingest_meshes(
    target: Any,
    paths: Sequence[str | Path],
    *,
    chunk_shape: Any,
    encoding: str = "raw",
    progress: bool = True,
    object_ids: Any = None,
    ids_from_names: bool = True,
    merge_vertices: bool = True,
    **kwargs: Any,
) -> Dataset:
    """Write mesh files into a new store, one object per file, with the file's name as the
    object attribute ``name``.

    A file's object id is ``object_ids[i]`` when given; else, when every file name is an
    integer (``720575940621039145.ply``, segment ids as cloud-volume and navis save them)
    and ``ids_from_names``, that integer (uint64); else ``i``, its place in ``paths``.
    Identical vertices of a file are merged (``merge_vertices=False`` keeps them), so STL
    and other triangle soups arrive indexed and their pyramids can simplify them.
    Keyword arguments go to :func:`zarr_vectors.write_meshes` (``quantization_bits``,
    ``compression``, ``overwrite``, ``storage_options``, ...).
    """
    from tqdm.auto import tqdm

    from zarr_vectors.api import write_meshes
    from zarr_vectors.engine import file_ids
    from zarr_vectors.kinds.meshes import face_array

    shape_vector(chunk_shape, 3, "chunk_shape")  # options first, then the files
    files = [Path(p) for p in paths]
    ids = file_ids(files, object_ids, ids_from_names, "ids_from_names=False (CLI: --sequential-ids)")
    meshes = []
    with tqdm(files, desc="reading meshes", unit="file", disable=not progress or len(files) < 2) as bar:
        for f in bar:  # the bar is closed on error too, so the error starts a line of its own
            vertices, faces = load_mesh(f, merge_vertices=merge_vertices)
            try:
                face_array(faces, len(vertices))
            except InputError as exc:
                raise InputError(f"{f}: {exc}") from exc
            meshes.append((vertices, faces))
    names = {"name": [f.name for f in files], **kwargs.pop("object_attributes", {})}
    return write_meshes(
        target,
        meshes,
        chunk_shape=chunk_shape,
        encoding=encoding,
        object_attributes=names,
        object_ids=None if np.array_equal(ids, np.arange(len(ids))) else ids,
        **kwargs,
    )


def export_mesh(
    ds: Dataset,
    path: str | Path,
    *,
    bbox: Any = None,
    objects: Sequence[int] | None = None,
    faces: str = "inside",
    level: int = 0,
) -> tuple[int, int]:
    """Write a box (``bbox``) or whole ``objects`` of a mesh store to ``path`` (format from the
    suffix: any trimesh exports, e.g. .ply .obj .stl .glb .off); returns (vertices, faces)."""
    if "mesh" not in ds.geometry_types:
        raise InputError(f"mesh export needs a mesh store; this one holds {', '.join(ds.geometry_types)}")
    if (bbox is None) == (objects is None):
        raise InputError("give exactly one of bbox= or objects=")
    result = (
        ds.objects(objects, level=level) if objects is not None else ds.query(bbox, level=level, faces=faces)
    )
    mesh = result.to_trimesh()
    save_trimesh(mesh, path)
    return len(mesh.vertices), len(mesh.faces)


def save_trimesh(mesh: Any, path: str | Path) -> None:
    """Write a trimesh to ``path`` in the format of its suffix; ``.gltf`` embeds its buffers
    (one self-contained file, as ``.glb`` is)."""
    import trimesh

    suffix = Path(path).suffix.lower()
    if suffix not in MESH_SUFFIXES:
        raise InputError(f"cannot tell the mesh format of {path}: use one of {', '.join(MESH_SUFFIXES)}")
    if suffix == ".gltf":
        files = trimesh.exchange.gltf.export_gltf(trimesh.Scene(mesh), embed_buffers=True)
        Path(path).write_bytes(files["model.gltf"])
        return
    mesh.export(str(path))
