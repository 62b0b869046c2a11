"""Neuroglancer precomputed annotations into a store (called by
:func:`zarr_vectors.io.neuroglancer.ingest_neuroglancer` for annotation layers).

``POINT`` annotations become a point cloud, ``LINE`` annotations straight segments (kind
``line``). Invariants of the store written:

* each annotation is one object whose id is the annotation id (uint64, exactly);
* positions are the geometry times the ``dimensions`` scales, in nanometres when every
  dimension is in metres (``units="nanometer"``), else the stored coordinates unscaled;
* each property is a vertex attribute of its type (``rgb`` and ``rgba``: (n, 3) and (n, 4)
  uint8), enum values as stored; a property's ``enum_values``/``enum_labels`` are kept in
  that attribute array's metadata, key ``zv:enum_labels`` = ``{"values": [...], "labels":
  [...]}`` in the info's order (:func:`enum_labels` reads them back);
* each relationship is a uint64 vertex attribute holding the related id (0 when the
  annotation lists none); an annotation listing several ids for one relationship is refused
  (a vertex attribute has one width for the whole store, fixed by the first batch, while the
  number of related ids varies from annotation to annotation and is known only once every
  annotation is read);
* the ids come from the ``by_id`` index and are read a batch at a time, in bounded memory;
* with ``checkpoint``/``resume`` the store is written as committed checkpoints (a first write,
  then ``Dataset.append``s) on a grid fixed by the info's bounds (unless ``bounds`` is given)
  and a numeric ``chunk_shape``; a resumed store answers as an uninterrupted one.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import numpy as np

from zarr_vectors.errors import InputError
from zarr_vectors.neuroglancer.annotation_read import AnnotationInfo
from zarr_vectors.neuroglancer.annotation_source import Annotations, AnnotationSource

__all__ = ["ENUM_KEY", "enum_labels", "ingest_annotations", "relationship_columns"]

#: The key of an attribute array's metadata holding a property's enum labels.
ENUM_KEY = "zv:enum_labels"


def _frame(info: AnnotationInfo) -> tuple[np.ndarray, str | None]:
    """``(factor per axis, unit)``: nanometres when every dimension is in metres."""
    if all(u == "m" for u in info.units):
        return info.scales / 1e-9, "nanometer"
    return np.ones(info.rank), None


def relationship_columns(
    info: AnnotationInfo, related: list[tuple[np.ndarray, np.ndarray]], ids: np.ndarray
) -> dict[str, np.ndarray]:
    """One uint64 column per relationship (named by its id, or ``{id}_ids`` when a property
    has that name): the related id, 0 when none."""
    out: dict[str, np.ndarray] = {}
    taken = {name for name, _, _ in info.properties}
    for rel, (counts, values) in zip(info.relationships, related):
        several = np.flatnonzero(counts > 1)
        if len(several):
            k = int(several[0])
            raise InputError(
                f"annotation {int(ids[k])} lists {int(counts[k])} ids for relationship {rel!r}; one related "
                "id per annotation can be kept (the relationship becomes a uint64 vertex attribute, whose "
                "width is fixed for the whole store by the first batch). Ingest the annotations that list "
                "at most one id (ids=), or split the relationship in the source"
            )
        column = np.zeros(len(counts), np.uint64)
        column[counts == 1] = values
        out[rel if rel not in taken else f"{rel}_ids"] = column
    return out


def _columns(info: AnnotationInfo, batch: Annotations, ids: np.ndarray) -> dict[str, np.ndarray]:
    _, props, related = batch
    out = {name: (v[:, 0] if v.shape[1] == 1 else v) for name, v in props.items()}
    out.update(relationship_columns(info, related, ids))
    return out


def ingest_annotations(
    source: AnnotationSource,
    dst: Any,
    segments: np.ndarray,
    *,
    memory_limit: int | None,
    progress: bool | None,
    batch: int,
    bar: Any,
    store_options: dict[str, Any],
    checkpoint: int | None = None,
    resume: bool = False,
) -> None:
    """Write the annotations ``segments`` of ``source`` to a new store at ``dst``: in one
    write, or (``checkpoint``/``resume``) as committed checkpoints of ``checkpoint``
    annotation ids, as :mod:`zarr_vectors.io.ingest_checkpoint` describes."""
    from zarr_vectors.streaming import create

    info = source.info
    factor, unit = _frame(info)
    options = dict(store_options)
    if unit is not None:
        options.setdefault("units", unit)
    options.setdefault("axes", list(info.names))
    checkpointed = checkpoint is not None or resume
    if info.kind == "POINT" or checkpointed:
        # float32 like the positions: rounding is monotone, so geometry within the info's
        # bounds stays within them
        bounds = ((info.lower * factor).astype(np.float32), (info.upper * factor).astype(np.float32))
        options.setdefault("bounds", bounds)
    if info.kind == "POINT" and not checkpointed and options.get("chunk_shape", "auto") == "auto":
        options["expected_vertices"] = len(segments)
    kind = "points" if info.kind == "POINT" else "line"
    step = max(
        1, min(batch * 256, (memory_limit or 1 << 30) // 8 // max(64, info.record_dtype().itemsize * 4))
    )
    if checkpointed:
        create_options = {"memory_limit": memory_limit, "progress": progress, **options}
        _checkpointed(source, dst, segments, kind, step, bar, checkpoint, resume, factor, create_options)
    else:
        writer: Any = create(dst, kind, memory_limit=memory_limit, progress=progress, **options)
        with writer:
            for ids, geometry, columns in _batches(source, segments, step, factor, bar):
                _append(writer, kind, ids, geometry, columns)
    _keep_enum_labels(dst, info, options.get("storage_options"))


def _attribute_key(name: str) -> str:
    return f"0/vertex_attributes/{name}/zarr.json"


def _keep_enum_labels(dst: Any, info: AnnotationInfo, storage_options: dict[str, Any] | None) -> None:
    """Add each enum property's labels to its attribute array's metadata (:data:`ENUM_KEY`),
    once the store is written (a resumed ingest adds them again: the same bytes)."""
    if not info.enum_labels:
        return
    from zarr_vectors.storage import dump_json, open_backend

    backend = open_backend(dst, read_only=False, storage_options=storage_options)
    names = list(info.enum_labels)
    docs = backend.get_many([_attribute_key(n) for n in names])
    updates = []
    for name, body in zip(names, docs):
        if body is None:
            raise InputError(f"{dst}: the store has no vertex attribute {name!r} to label")
        doc = json.loads(body)
        table = info.enum_labels[name]
        doc.setdefault("attributes", {})[ENUM_KEY] = {"values": list(table), "labels": list(table.values())}
        updates.append((_attribute_key(name), dump_json(doc)))
    backend.set_many(updates)


def enum_labels(store: Any, attribute: str, storage_options: dict[str, Any] | None = None) -> dict[Any, str]:
    """The enum labels kept for a vertex attribute by the annotation ingest, ``{value:
    label}`` in the source's order; empty when the attribute has none.

    Raises
    ------
    InputError
        The store has no vertex attribute ``attribute``.
    """
    from zarr_vectors.storage import open_backend

    (body,) = open_backend(store, read_only=True, storage_options=storage_options).get_many(
        [_attribute_key(attribute)]
    )
    if body is None:
        raise InputError(f"{store}: no vertex attribute {attribute!r}")
    kept = json.loads(body).get("attributes", {}).get(ENUM_KEY)
    return {} if kept is None else dict(zip(kept["values"], kept["labels"]))


def _batches(
    source: AnnotationSource, segments: np.ndarray, step: int, factor: np.ndarray, bar: Any
) -> Iterator[tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]]:
    """``(ids, geometry (n, k, rank) float64 in the store's units, columns)`` per ``step`` ids.

    Raises
    ------
    InputError
        The source has no annotation for an id asked for.
    """
    for lo in range(0, len(segments), step):
        ids = segments[lo : lo + step]
        decoded, missing = source.read(ids)
        if missing:
            raise InputError(
                f"{source.url} has no annotation {missing[:5]}"
                + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
            )
        yield ids, decoded[0].astype(np.float64) * factor, _columns(source.info, decoded, ids)
        if bar is not None:
            bar.update(len(ids))


def _append(
    target: Any, kind: str, ids: np.ndarray, geometry: np.ndarray, columns: dict[str, np.ndarray]
) -> None:
    """One batch to a streaming writer or (an append) a dataset: points, or segments whose
    two vertices both carry the annotation's columns."""
    if kind == "points":
        target.append(geometry[:, 0, :].astype(np.float32), attributes=columns or None, object_ids=ids)
    else:
        repeated = {k: np.repeat(v, 2, axis=0) for k, v in columns.items()}
        target.append(geometry.astype(np.float32), attributes=repeated or None, object_ids=ids)


def _checkpointed(
    source: AnnotationSource,
    dst: Any,
    segments: np.ndarray,
    kind: str,
    step: int,
    bar: Any,
    checkpoint: int | None,
    resume: bool,
    factor: np.ndarray,
    options: dict[str, Any],
) -> None:
    """The ingest as committed appends; a checkpoint's annotations are read (a ``step`` at a
    time) and held until appended as one commit."""
    from zarr_vectors.io import ingest_checkpoint as ckpt

    size = ckpt.DEFAULT_CHECKPOINT if checkpoint is None else checkpoint
    held = ckpt.held_ids(dst, options.get("storage_options")) if resume else None
    plan = list(ckpt.plan_checkpoints(segments, size, held, every_id_an_object=True))
    ckpt.check_grid(len(plan), options)

    def parts() -> Iterator[tuple[np.ndarray, list[tuple[int, Any]]]]:
        for _, ids, done in plan:
            if done:
                if bar is not None:
                    bar.update(len(ids))
                continue
            got = list(_batches(source, ids, step, factor, bar))
            columns = {name: np.concatenate([c[name] for _, _, c in got]) for name in got[0][2]}
            yield ids, [(int(ids[0]), (ids, np.concatenate([g for _, g, _ in got]), columns))]

    def append(target: Any, items: list[tuple[int, Any]]) -> None:
        for _, (ids, geometry, columns) in items:
            _append(target, kind, ids, geometry, columns)

    ckpt.write_checkpoints(
        dst, kind, parts(), append, props={}, create_options=options, exists=held is not None
    )
