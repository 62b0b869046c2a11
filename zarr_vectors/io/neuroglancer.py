"""Neuroglancer precomputed skeletons, meshes and annotations into a store: :func:`ingest_neuroglancer`.

The source is read with :class:`~zarr_vectors.neuroglancer.precomputed_source.PrecomputedSource`
(local folders, ``http(s)://``, ``gs://``, ``s3://``; sharded or not) a batch of objects at a
time, and written through :func:`zarr_vectors.create`'s streaming writers, so memory stays
near ``memory_limit`` whatever the number of objects. Invariants of the store written:

* object ids are the segment ids, as uint64, exactly (no id is rounded, however large);
* positions are float32 nanometres (the sources' "model" space: the info's ``transform``
  applied), the axes ``x, y, z`` in ``nanometer``;
* a skeleton's ``(source, target)`` edges become parents: when every vertex is the target
  of at most one edge and the edges make no cycle, ``parent[target] = source`` as given;
  otherwise each tree is rooted at its lowest vertex and oriented from there. A skeleton
  with a cycle is refused. Its vertex attributes are vertex attributes (``(n,)`` for one
  component, ``(n, c)`` for more);
* a mesh is its fragments' triangles (a multi-resolution mesh's LOD ``lod``, the finest by
  default), with vertices of equal position merged (``merge_vertices``).

Segments whose skeleton or mesh has no vertices are left out of the store. Objects are
fetched a batch at a time, the batches sized so that decoded objects waiting for the writer
stay near an eighth of ``memory_limit`` (:func:`next_batch`).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from zarr_vectors.errors import InputError, PrecomputedFormatError
from zarr_vectors.io.neuroglancer_annotations import ingest_annotations
from zarr_vectors.neuroglancer.annotation_source import AnnotationSource, open_layer
from zarr_vectors.neuroglancer.precomputed_source import Decoded, PrecomputedSource
from zarr_vectors.storage import check_workers, map_cells

__all__ = ["edges_to_parents", "ingest_neuroglancer", "DEFAULT_BATCH"]

#: Objects fetched and decoded together at most (one batch of requests per step); fewer
#: when they are large (:func:`next_batch`).
DEFAULT_BATCH = 256
#: Objects of the first batch, before their size is known.
FIRST_BATCH = 8
_ONE = {"skeletons": "skeleton", "meshes": "mesh", "annotations": "annotation"}


def _as_ids(ids: Iterable[Any] | None) -> np.ndarray | None:
    """Segment ids as uint64, refused when one is negative, not whole or above 2**64 - 1."""
    if ids is None:
        return None
    values = [ids] if isinstance(ids, (int, np.integer, str)) else list(ids)
    out = np.empty(len(values), np.uint64)
    for k, v in enumerate(values):
        try:
            value = int(v)
        except (TypeError, ValueError) as exc:
            raise InputError(f"segment id {v!r} is not an integer") from exc
        if isinstance(v, (float, np.floating)) and float(v) != value:
            raise InputError(f"segment id {v!r} is not an integer")
        if not 0 <= value < 1 << 64:
            raise InputError(f"segment id {value} is outside uint64 (0 .. 2**64 - 1)")
        out[k] = value
    if len(np.unique(out)) != len(out):
        raise InputError("segment ids repeat; give each once")
    return out


def _components(n: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per vertex, the lowest vertex of its connected component (edges ``a[i]-b[i]``):
    min-label hooking (of both ends and of their labels) with pointer jumping, vectorised,
    until nothing changes. Invariant: ``label[v] <= v`` and lies in ``v``'s component, so
    the fixed point, equal along every edge, is the component's lowest vertex."""
    label = np.arange(n, dtype=np.int64)
    while True:
        before = label.copy()
        m = np.minimum(label[a], label[b])
        for ends in (a, b):
            np.minimum.at(label, label[ends], m)
            np.minimum.at(label, ends, m)
        while True:
            jumped = label[label]
            if np.array_equal(jumped, label):
                break
            label = jumped
        if np.array_equal(label, before):
            return label


def edges_to_parents(n: int, edges: np.ndarray, where: str = "skeleton") -> np.ndarray:
    """Parents (int64, -1 for roots) of a forest of ``n`` vertices given by ``(source,
    target)`` edges (module docstring for the rule). Duplicate edges count once.

    Raises
    ------
    PrecomputedFormatError
        A self-loop, or a cycle (the edges are no forest).
    """
    e = np.asarray(edges, np.int64).reshape(-1, 2)
    if np.any(e[:, 0] == e[:, 1]):
        raise PrecomputedFormatError(
            f"{where}: edge {e[e[:, 0] == e[:, 1]][0].tolist()} joins a vertex to itself"
        )
    und = np.unique(np.sort(e, axis=1), axis=0)
    parents = np.full(n, -1, np.int64)
    if not len(und):
        return parents
    label = _components(n, und[:, 0], und[:, 1])
    if len(und) != n - len(np.unique(label)):
        raise PrecomputedFormatError(
            f"{where}: its {len(und)} edges make a cycle; a skeleton is a forest (ingest it as a graph)"
        )
    _, first = np.unique(e, axis=0, return_index=True)
    given = e[np.sort(first)]
    if len(np.unique(given[:, 1])) == len(given) and len(given) == len(und):
        parents[given[:, 1]] = given[:, 0]
        if _acyclic(parents):
            return parents
        parents[:] = -1
    return _orient(n, und, label)


def _acyclic(parents: np.ndarray) -> bool:
    """Whether following parents from every vertex reaches a root: the ``2**k``-th
    ancestors by pointer doubling, all absent once ``2**k >= n`` unless there is a cycle."""
    up = parents.copy()
    for _ in range(int(len(up)).bit_length() + 1):
        if np.all(up < 0):
            return True
        up = np.where(up >= 0, up[np.maximum(up, 0)], -1)
    return bool(np.all(up < 0))


def _orient(n: int, und: np.ndarray, label: np.ndarray) -> np.ndarray:
    """Parents by breadth-first search from each component's lowest vertex, one frontier at
    a time over a CSR adjacency (no Python loop per vertex)."""
    a = np.concatenate([und[:, 0], und[:, 1]])
    b = np.concatenate([und[:, 1], und[:, 0]])
    order = np.argsort(a, kind="stable")
    a, b = a[order], b[order]
    starts = np.searchsorted(a, np.arange(n + 1))
    parents = np.full(n, -1, np.int64)
    seen = np.zeros(n, bool)
    frontier = np.flatnonzero(label == np.arange(n))
    seen[frontier] = True
    while len(frontier):
        counts = starts[frontier + 1] - starts[frontier]
        src = np.repeat(frontier, counts)
        at = np.repeat(starts[frontier] - np.cumsum(counts) + counts, counts) + np.arange(int(counts.sum()))
        dst = b[at]
        new = ~seen[dst]
        src, dst = src[new], dst[new]
        parents[dst] = src
        seen[dst] = True
        frontier = np.unique(dst)
    return parents


def _merged(pos: np.ndarray, faces: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Vertices of equal float32 position joined (first occurrence order kept)."""
    p32 = np.ascontiguousarray(pos, np.float32)
    _, first, inverse = np.unique(p32.view("V12").ravel(), return_index=True, return_inverse=True)
    keep = np.sort(first)
    renumber = np.empty(len(first), np.int64)
    renumber[np.argsort(first)] = np.arange(len(first))
    # inverse numbers the sorted unique values; map each to its rank in first-occurrence order
    new_index = renumber[inverse.reshape(-1)]
    return p32[keep], new_index[faces]


def _appender(writer: Any, kind: str, merge_vertices: bool) -> Any:
    """A function that appends one batch of decoded objects (with their ids) to ``writer``,
    each object prepared (parents, merged vertices) by up to ``workers`` threads."""

    def skeletons(items: list[tuple[int, Decoded]], workers: int) -> None:
        parents = map_cells(
            lambda k: edges_to_parents(len(items[k][1][0]), items[k][1][1], f"skeleton {items[k][0]}"),
            len(items),
            workers,
        )
        counts = np.array([len(d[0]) for _, d in items], np.int64)
        shift = np.repeat(np.cumsum(counts) - counts, counts)
        par = np.concatenate(parents)
        names = list(items[0][1][2])
        writer.append(
            np.concatenate([d[0] for _, d in items]).astype(np.float32),
            np.where(par >= 0, par + shift, -1),
            attributes={n: _column([d[2][n] for _, d in items]) for n in names} or None,
            object_ids=np.repeat(np.array([sid for sid, _ in items], np.uint64), counts),
        )

    def meshes(items: list[tuple[int, Decoded]], workers: int) -> None:
        def prepare(k: int) -> tuple[np.ndarray, np.ndarray]:
            p, f, _ = items[k][1]
            return _merged(p, f) if merge_vertices else (p.astype(np.float32), f)

        batch = map_cells(prepare, len(items), workers)
        writer.append(batch, object_ids=np.array([sid for sid, _ in items], np.uint64))

    return skeletons if kind == "skeletons" else meshes


def _column(values: list[np.ndarray]) -> np.ndarray:
    """One vertex attribute of a batch: (n,) for one component, else (n, c)."""
    out = np.concatenate(values)
    return out[:, 0] if out.shape[1] == 1 else out


def ingest_neuroglancer(
    src: Any,
    dst: Any,
    *,
    ids: Iterable[Any] | None = None,
    kind: str | None = None,
    lod: int = 0,
    memory_limit: int | None = 1 << 30,
    progress: bool | None = None,
    source_options: dict[str, Any] | None = None,
    merge_vertices: bool = True,
    batch: int = DEFAULT_BATCH,
    workers: int | None = None,
    segment_properties: bool = True,
    checkpoint: int | None = None,
    resume: bool = False,
    **store_options: Any,
) -> Any:
    """Write the skeletons or meshes of a Neuroglancer precomputed source into a new store.

    Parameters
    ----------
    src
        A local folder or URL (``http(s)://``, ``gs://``, ``s3://``): a skeleton or mesh
        folder (its ``info``), a segmentation volume naming them, or a folder holding
        ``skeletons/`` or ``mesh/`` (what ``export neuroglancer`` writes per layer).
    dst
        The store to write (any target :func:`zarr_vectors.create` takes).
    ids
        Segment ids to read (uint64). Default: every segment in the source's index (sharded
        sources), or in the folder (local unsharded ones); remote unsharded sources need them.
    kind
        ``"skeletons"`` or ``"meshes"`` when the source holds both.
    lod
        Multi-resolution meshes: the level of detail to read (0, the finest, by default).
    memory_limit, progress
        As for :func:`zarr_vectors.create`; ``progress`` also shows a bar over the objects read.
    source_options
        Storage options of the source (fsspec options, ``zv_timeout``, ...).
    merge_vertices
        Meshes: join vertices of equal position (fragments repeat their shared vertices).
    batch
        Objects fetched and decoded together at most; fewer when the objects are large, so
        that decoded objects waiting for the writer stay near an eighth of ``memory_limit``.
    workers
        Threads that decode objects (Draco fragments) and prepare them for the writer
        (default: every core); the store does not depend on it.
    segment_properties
        Keep the source's segment properties (``label``, ``description``, ``string`` and
        ``number`` ones, and ``tags`` as the tag names joined by spaces) as object attributes
        named by the property ids.
    checkpoint
        Write in commits of this many source ids (every source kind; the store written must
        be raw, not ``encoding="draco"``): the first creates the store, each later one is a
        ``Dataset.append`` (atomic), so a killed ingest leaves the objects of whole
        checkpoints. Needs ``bounds`` (annotations: the info's by default) and a numeric
        ``chunk_shape`` when there is more than one checkpoint. Default: one write (no checkpoints), or
        :data:`~zarr_vectors.io.ingest_checkpoint.DEFAULT_CHECKPOINT` with ``resume``.
        A checkpoint after the first is held decoded in memory until it is appended.
    resume
        Continue an interrupted checkpointed ingest into the existing ``dst``: checkpoints of
        which the store holds an id are skipped, the rest appended at the same boundaries
        (pass the same ``checkpoint``, ``ids`` and store options). Without a store at
        ``dst`` it starts from the beginning.
    store_options
        Keywords of :func:`zarr_vectors.create` for the new store (``chunk_shape``,
        ``bounds``, ``compression``, ``shards``, ``encoding="draco"`` for meshes,
        ``overwrite``, ``storage_options``, ...).

    Returns
    -------
    Dataset
        The new store, opened for reading.

    Raises
    ------
    InputError
        No layer at ``src``, a bad id, an id the source does not hold, or a remote unsharded
        source without ``ids``.
    PrecomputedFormatError
        A file of the source does not follow the precomputed specification (it is named).
    """
    from zarr_vectors.api import open as open_store
    from zarr_vectors.streaming import create

    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise InputError(f"batch must be a positive integer, got {batch!r}")
    if isinstance(lod, bool) or not isinstance(lod, int) or lod < 0:
        raise InputError(f"lod must be a non-negative integer, got {lod!r}")
    if kind is not None and kind not in ("skeletons", "meshes", "annotations"):
        raise InputError(f"kind must be 'skeletons', 'meshes', 'annotations' or None, got {kind!r}")
    source = open_layer(src, kind, source_options)
    if source.kind != "meshes" and "encoding" in store_options:
        raise InputError(f"{source.url} holds {source.kind}; encoding= (Draco) applies to meshes only")
    wanted = _as_ids(ids)
    segments = source.segment_ids() if wanted is None else wanted
    if not len(segments):
        raise InputError(f"{source.url} holds no {source.kind} to ingest")
    show = progress if progress is not None else sys.stderr.isatty()
    if isinstance(source, AnnotationSource):
        bar = _bar(len(segments), show, source.kind)
        ingest_annotations(
            source,
            dst,
            segments,
            memory_limit=memory_limit,
            progress=progress,
            batch=batch,
            bar=bar,
            store_options=store_options,
            checkpoint=checkpoint,
            resume=resume,
        )
        if bar is not None:
            bar.close()
        return open_store(dst, storage_options=store_options.get("storage_options"))
    options = {"units": "nanometer", **store_options}
    workers = check_workers(workers)
    props = _properties(source, segments) if segment_properties else {}
    if props and checkpoint is None and not resume:
        options["object_attributes"] = {**props, **options.get("object_attributes", {})}
    bar = _bar(len(segments), show, source.kind)
    budget = _budget(memory_limit)
    if checkpoint is None and not resume:
        writer = create(dst, source.kind, memory_limit=memory_limit, progress=progress, **options)
        append = _appender(writer, source.kind, merge_vertices)
        with writer:
            for _, items in _decoded(source, segments, lod, workers, budget, batch, props, bar):
                if items:
                    append(items, workers)
    else:
        _checkpointed(
            source,
            dst,
            segments,
            lod,
            workers,
            budget,
            batch,
            props,
            bar,
            checkpoint,
            resume,
            merge_vertices,
            {"memory_limit": memory_limit, "progress": progress, **options},
        )
    if bar is not None:
        bar.close()
    return open_store(dst, storage_options=store_options.get("storage_options"))


def _decoded(
    source: PrecomputedSource,
    segments: np.ndarray,
    lod: int,
    workers: int,
    budget: int,
    batch: int,
    props: dict[str, dict[int, Any]],
    bar: Any,
) -> Iterator[tuple[np.ndarray, list[tuple[int, Decoded]]]]:
    """``(ids, items)`` per batch read: the non-empty decoded objects with their ids (empty
    segments are no objects, their properties dropped); batches sized by :func:`next_batch`.

    Raises
    ------
    InputError
        The source has no object for a segment asked for.
    """
    lo, per_object = 0, 0.0
    while lo < len(segments):
        chunk = segments[lo : lo + next_batch(per_object, budget, batch)]
        decoded = source.read(chunk, lod, workers)
        missing = [int(i) for i, d in zip(chunk.tolist(), decoded) if d is None]
        if missing:
            raise InputError(
                f"{source.url} has no {_ONE[source.kind]} for segment(s) {missing[:5]}"
                + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
            )
        items = [(int(i), d) for i, d in zip(chunk.tolist(), decoded) if d is not None and len(d[0])]
        if len(items) < len(chunk):  # empty segments are no objects: no properties either
            _drop(props, {i for i in chunk.tolist()} - {i for i, _ in items})
        size = sum(d[0].nbytes + d[1].nbytes + sum(a.nbytes for a in d[2].values()) for _, d in items)
        per_object = max(per_object, size / len(chunk))
        yield chunk, items
        lo += len(chunk)
        if bar is not None:
            bar.update(len(chunk))


def _checkpointed(
    source: PrecomputedSource,
    dst: Any,
    segments: np.ndarray,
    lod: int,
    workers: int,
    budget: int,
    batch: int,
    props: dict[str, dict[int, Any]],
    bar: Any,
    checkpoint: int | None,
    resume: bool,
    merge_vertices: bool,
    options: dict[str, Any],
) -> None:
    """The ingest as committed appends (:mod:`zarr_vectors.io.ingest_checkpoint`)."""
    from zarr_vectors.io import ingest_checkpoint as ckpt

    size = ckpt.DEFAULT_CHECKPOINT if checkpoint is None else checkpoint
    if options.get("encoding") == "draco":
        raise InputError(
            "checkpoint/resume commits each checkpoint as a Dataset.append, and a Draco-encoded mesh "
            "store cannot be appended to (an append merges raw vertex cells; nothing re-encodes Draco "
            "cells). Resume into a raw mesh store (leave encoding= out; a Draco source is fine)"
        )
    held = ckpt.held_ids(dst, options.get("storage_options")) if resume else None
    plan = list(ckpt.plan_checkpoints(segments, size, held))
    ckpt.check_grid(len(plan), options)

    def parts() -> Iterator[tuple[np.ndarray, list[tuple[int, Decoded]]]]:
        for _, ids, done in plan:
            if done:
                if bar is not None:
                    bar.update(len(ids))
                continue
            items = [
                it for _, got in _decoded(source, ids, lod, workers, budget, batch, props, bar) for it in got
            ]
            yield ids, items

    def append(target: Any, items: list[tuple[int, Decoded]]) -> None:
        _appender(target, source.kind, merge_vertices)(items, workers)

    ckpt.write_checkpoints(
        dst, source.kind, parts(), append, props=props, create_options=options, exists=held is not None
    )


def _properties(source: PrecomputedSource, segments: np.ndarray) -> dict[str, dict[int, Any]]:
    """The source's segment properties of ``segments``, as ``{property: {id: value}}``
    mappings (the writer reads them at ``close``; segments found empty are dropped from them
    before then). Segments without a value get the writer's fill (``""``, NaN, the type's
    minimum)."""
    ids, columns = source.segment_properties()
    keep = np.isin(ids, segments)
    kept = ids[keep].tolist()
    return {
        name: dict(zip(kept, values[keep])) for name, values in columns.items()
    }  # numpy scalars keep the dtype


def _drop(props: dict[str, dict[int, Any]], ids: set[int]) -> None:
    for table in props.values():
        for i in ids:
            table.pop(i, None)


def _budget(memory_limit: int | None) -> int:
    """Bytes of decoded objects held at once: an eighth of the limit (the writer keeps the
    rest), at least 1 MiB; 128 MiB without a limit."""
    return max(1 << 20, (memory_limit if memory_limit is not None else 1 << 30) // 8)


def next_batch(per_object: float, budget: int, batch: int) -> int:
    """Objects to fetch next: :data:`FIRST_BATCH` before any was seen, then as many as fit
    ``budget`` at the largest mean object size seen so far (at least 1, at most ``batch``)."""
    if per_object <= 0:
        return min(batch, FIRST_BATCH)
    return int(min(batch, max(1, budget // per_object)))


def _bar(total: int, show: bool, kind: str) -> Any:
    if not show:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, unit=" " + _ONE[kind], desc="reading", file=sys.stderr)
