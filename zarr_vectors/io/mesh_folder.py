"""Folders of mesh files into a raw mesh store in parallel and in checkpoints:
:func:`ingest_mesh_files` (the mesh counterpart of :mod:`zarr_vectors.io.swc_folder`).

Files are loaded by a process pool (``workers``) a checkpoint of ``checkpoint`` files at a
time; each checkpoint is one commit (:mod:`zarr_vectors.io.ingest_checkpoint`). Invariants:
objects are the files in ascending id order (ids from integer file stems, as
:func:`zarr_vectors.io.meshes.ingest_meshes`), each with its file ``name`` as an object
attribute; the store answers queries as ``ingest_meshes``'s one-shot write on the same grid.
Raw meshes only (Draco stores refuse appends).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from zarr_vectors.errors import InputError
from zarr_vectors.io import ingest_checkpoint as ckpt
from zarr_vectors.io.meshes import load_mesh
from zarr_vectors.io.swc_folder import SerialPool

__all__ = ["ingest_mesh_files"]

Mesh = tuple[np.ndarray, np.ndarray]


def _append(target: Any, items: list[tuple[int, Mesh]]) -> None:
    target.append([m for _, m in items], object_ids=np.array([i for i, _ in items], np.uint64))


def ingest_mesh_files(
    target: Any,
    files: Sequence[str | Path],
    *,
    chunk_shape: Any,
    bounds: Any = None,
    workers: int = 1,
    checkpoint: int = ckpt.DEFAULT_CHECKPOINT,
    resume: bool = False,
    ids_from_names: bool = True,
    merge_vertices: bool = True,
    progress: bool = False,
    overwrite: bool = False,
    memory_limit: int | None = 1 << 30,
    **options: Any,
) -> Any:
    """Write mesh files (PLY, OBJ, STL, GLB, OFF) into a raw mesh store, loaded by ``workers``
    processes and committed every ``checkpoint`` files (``bounds`` and a numeric
    ``chunk_shape`` needed when there are several checkpoints); ``resume`` continues an
    interrupted run. Returns the store opened for reading.

    Raises
    ------
    InputError
        No files, ``workers`` not positive, ``encoding="draco"``, several checkpoints without
        a fixed grid, or a store to resume holding ids the files do not give.
    """
    from zarr_vectors.api import open as open_store
    from zarr_vectors.engine import file_ids

    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise InputError(f"workers must be a positive integer, got {workers!r}")
    if options.get("encoding", "raw") != "raw":
        raise InputError("checkpointed mesh ingest writes raw meshes (Draco stores refuse appends)")
    paths = [Path(f) for f in files]
    if not paths:
        raise InputError("no mesh files given")
    ids = file_ids(paths, None, ids_from_names, "ids_from_names=False (CLI: --sequential-ids)")
    order = np.argsort(ids, kind="stable")
    paths, ids = [paths[i] for i in order], np.asarray(ids[order], np.uint64)
    storage_options = options.get("storage_options")
    held = ckpt.held_ids(target, storage_options) if resume else None
    plan = list(ckpt.plan_checkpoints(ids, checkpoint, held, every_id_an_object=True))
    create_options = {"chunk_shape": chunk_shape, "bounds": bounds, "memory_limit": memory_limit, **options}
    ckpt.check_grid(len(plan), create_options)
    create_options["overwrite"] = overwrite
    names = dict(zip(ids.tolist(), (p.name for p in paths)))
    where = {int(i): k for k, i in enumerate(ids.tolist())}
    props: dict[str, dict[int, Any]] = {"name": {}}
    load = functools.partial(load_mesh, merge_vertices=merge_vertices)
    from tqdm.auto import tqdm

    with (
        ProcessPoolExecutor(workers) if workers > 1 else SerialPool() as pool,
        tqdm(total=len(paths), desc="reading meshes", unit="file", disable=not progress) as bar,
    ):

        def parts() -> Iterator[tuple[np.ndarray, list[tuple[int, Mesh]]]]:
            for _, part, done in plan:
                if not done:
                    chosen = [paths[where[int(i)]] for i in part]
                    loaded = list(pool.map(load, chosen, chunksize=max(1, len(chosen) // (4 * workers))))
                    for i in part.tolist():  # rows read by write_checkpoints
                        props["name"][i] = names[i]
                    yield part, list(zip(part.tolist(), loaded))
                bar.update(len(part))

        ckpt.write_checkpoints(
            target,
            "meshes",
            parts(),
            _append,
            props=props,
            create_options=create_options,
            exists=held is not None,
        )
    return open_store(target, storage_options=storage_options)
