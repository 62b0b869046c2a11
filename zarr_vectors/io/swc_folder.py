"""Folders of SWC files into a skeleton store in parallel and in checkpoints:
:func:`ingest_swc_files`.

Files are parsed by a process pool (``workers``), several files per task, and each
checkpoint of ``checkpoint`` files is one commit (:mod:`zarr_vectors.io.ingest_checkpoint`):
the first creates the store, streaming each task's files to the writer as they arrive, so
parsing overlaps writing; later ones are one ``Dataset.append`` each, while the pool parses
the next checkpoint. Memory is bounded by two checkpoints' parsed files. Invariants: objects are the files in ascending id order (ids
from integer file stems, as :func:`zarr_vectors.io.swc.ingest_swc`), each with ``radius``
and ``type`` per vertex and ``n_samples`` and ``name`` per object, so the store answers
queries as :func:`~zarr_vectors.io.swc.ingest_swc`'s one-shot write on the same grid does.
``resume=True`` skips the checkpoints whose ids the store already holds.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from zarr_vectors.errors import InputError
from zarr_vectors.io import ingest_checkpoint as ckpt
from zarr_vectors.io.swc import Swc, read_swc

__all__ = ["SerialPool", "ingest_swc_files"]


def _append(target: Any, items: list[tuple[int, Swc]]) -> None:
    """One batch of parsed files (ascending ids) appended to a writer or an ``r+`` dataset."""
    sizes = np.array([len(s.positions) for _, s in items], np.int64)
    base = np.cumsum(sizes) - sizes
    target.append(
        np.concatenate([s.positions for _, s in items]),
        np.concatenate([np.where(s.parents >= 0, s.parents + b, -1) for (_, s), b in zip(items, base)]),
        attributes={
            "radius": np.concatenate([s.radius for _, s in items]),
            "type": np.concatenate([s.type for _, s in items]),
        },
        object_ids=np.repeat(np.array([i for i, _ in items], np.uint64), sizes),
    )


def ingest_swc_files(
    target: Any,
    files: Sequence[str | Path],
    *,
    chunk_shape: Any,
    bounds: Any = None,
    workers: int = 1,
    checkpoint: int = ckpt.DEFAULT_CHECKPOINT,
    resume: bool = False,
    ids_from_names: bool = True,
    progress: bool = False,
    overwrite: bool = False,
    memory_limit: int | None = 1 << 30,
    **options: Any,
) -> Any:
    """Write SWC files into a skeleton store, parsed by ``workers`` processes, committed every
    ``checkpoint`` files (``bounds`` and a numeric ``chunk_shape`` needed when there are
    several checkpoints). ``resume`` continues an interrupted run into ``target`` (same
    files, ids and ``checkpoint``); returns the store opened for reading.

    Raises
    ------
    InputError
        No files, a malformed file, ``workers`` not positive, several checkpoints without a
        fixed grid, or a store to resume holding ids the files do not give.
    """
    from zarr_vectors.api import open as open_store
    from zarr_vectors.engine import file_ids
    from zarr_vectors.streaming import create

    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise InputError(f"workers must be a positive integer, got {workers!r}")
    paths = [Path(f) for f in files]
    if not paths:
        raise InputError("no SWC files given")
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
    from tqdm.auto import tqdm

    todo = [part for _, part, done in plan if not done]
    per_task = max(1, min(64, checkpoint // (4 * workers)))
    with (
        ProcessPoolExecutor(workers) if workers > 1 else SerialPool() as pool,
        tqdm(total=len(paths), desc="reading SWC", unit="file", disable=not progress) as bar,
    ):
        bar.update(len(paths) - sum(len(p) for p in todo))

        def submit(part: np.ndarray) -> list[Any]:
            chosen = [paths[where[int(i)]] for i in part]
            return [pool.submit(_parse, chosen[lo : lo + per_task]) for lo in range(0, len(chosen), per_task)]

        ahead = submit(todo[0]) if todo else []
        exists = held is not None
        for k, part in enumerate(todo):
            tasks, ahead = ahead, (submit(todo[k + 1]) if k + 1 < len(todo) else [])  # parse k+1 meanwhile
            ids_part = part.tolist()
            rows: dict[str, dict[int, Any]] = {"n_samples": {}, "name": {i: names[i] for i in ids_part}}
            batches = _results(tasks, ids_part, rows, bar)
            if not exists:  # the writer reads the rows at close, when every file has been parsed
                options = dict(create_options, object_attributes=rows)
                with create(target, "skeletons", **options) as writer:
                    for batch in batches:
                        _append(writer, batch)
                exists = True
            else:
                items = [item for batch in batches for item in batch]
                ds = open_store(target, mode="r+", storage_options=storage_options)
                _append(_WithRows(ds, rows), items)
    return open_store(target, storage_options=storage_options)


def _parse(files: list[Path]) -> list[Swc]:
    """One task of the pool: several files parsed (fewer round trips than one per file)."""
    return [read_swc(f) for f in files]


def _results(
    tasks: list[Any], ids: list[int], rows: dict[str, dict[int, Any]], bar: Any
) -> Iterator[list[tuple[int, Swc]]]:
    """The parsed files of the tasks, in order, as ``(id, Swc)`` batches; fills ``n_samples``."""
    at = 0
    for task in tasks:
        parsed = task.result()
        batch = list(zip(ids[at : at + len(parsed)], parsed))
        for i, sw in batch:
            rows["n_samples"][i] = np.int64(len(sw.positions))
        at += len(parsed)
        bar.update(len(parsed))
        yield batch


class _WithRows:
    """``ds.append`` with the object attribute rows of the appended ids."""

    def __init__(self, ds: Any, rows: dict[str, dict[int, Any]]) -> None:
        self.ds, self.rows = ds, rows

    def append(self, *data: Any, **keywords: Any) -> None:
        self.ds.append(*data, object_attributes=self.rows, **keywords)


class SerialPool:
    """The pool of one worker: ``map`` in this process."""

    def __enter__(self) -> SerialPool:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def map(self, fn: Any, items: Sequence[Any], chunksize: int = 1) -> Iterator[Any]:
        return map(fn, items)

    def submit(self, fn: Any, *args: Any) -> _Deferred:
        """``fn(*args)``, run when its result is asked for (nothing is parsed ahead)."""
        return _Deferred(fn, args)


class _Deferred:
    def __init__(self, fn: Any, args: tuple[Any, ...]) -> None:
        self.fn, self.args = fn, args

    def result(self) -> Any:
        return self.fn(*self.args)
