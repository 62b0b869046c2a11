"""Resumable ingest by committed appends: :func:`write_checkpoints`.

The objects of a source, in the source's own (deterministic) id order, are cut into
checkpoints of ``checkpoint`` consecutive ids. The first checkpoint that holds objects
creates the store through :func:`zarr_vectors.create`; each later one is one
``Dataset.append`` on the store opened ``"r+"``, which is atomic (an interrupted append
leaves the store as it was). So after a kill the store holds exactly the objects of the
checkpoints committed so far, and ``resume=True`` skips every checkpoint of which the store
holds an id and continues at the same boundaries. No journal is kept: the store's own ids
are the record of progress.

Invariants: every checkpoint is written on the same grid, so ``bounds`` and a numeric
``chunk_shape`` must be given when there is more than one checkpoint (an appended object
must lie inside the store's bounds); the final store reads as a one-shot write of all the
objects (``Dataset.append``'s guarantee). Coarser levels are left stale by the appends;
build them once at the end with ``pyramid``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from zarr_vectors.errors import InputError

__all__ = ["DEFAULT_CHECKPOINT", "held_ids", "plan_checkpoints", "write_checkpoints"]

#: Objects (source ids) per checkpoint by default.
DEFAULT_CHECKPOINT = 2000

#: ``append(target, items)`` writes one batch of prepared items to a writer or dataset.
Appender = Callable[[Any, list[Any]], None]


def held_ids(dst: Any, storage_options: dict[str, Any] | None = None) -> np.ndarray | None:
    """The object ids of the store at ``dst`` (uint64), or None when there is no store yet."""
    from zarr_vectors.api import open as open_store
    from zarr_vectors.errors import ZarrVectorsError

    if "://" not in str(dst) and not (Path(str(dst)) / "zarr.json").exists():
        return None
    try:
        ds = open_store(dst, storage_options=storage_options)
    except FileNotFoundError:
        return None
    except ZarrVectorsError as exc:
        if "://" in str(dst):
            return None
        raise InputError(f"{dst} is no readable store to resume: {exc}") from exc
    return np.asarray(ds.object_ids(), np.uint64)


def plan_checkpoints(
    segments: np.ndarray, checkpoint: int, held: np.ndarray | None, every_id_an_object: bool = False
) -> Iterator[tuple[int, np.ndarray, bool]]:
    """``(index, ids, done)`` per checkpoint of ``checkpoint`` consecutive ``segments``;
    ``done`` when the store (``held``) holds one of its ids (appends are atomic, so then it
    holds all of them that have objects).

    Raises
    ------
    InputError
        The store holds ids that are not among ``segments`` (it is not this ingest's), or,
        when ``every_id_an_object`` (files: each is an object), only part of a checkpoint's
        ids (the first run used another ``checkpoint``).
    """
    if isinstance(checkpoint, bool) or not isinstance(checkpoint, int) or checkpoint < 1:
        raise InputError(f"checkpoint must be a positive integer, got {checkpoint!r}")
    have = np.zeros(0, np.uint64) if held is None else held
    stray = have[~np.isin(have, segments)]
    if len(stray):
        raise InputError(
            f"the store to resume holds id(s) {stray[:5].tolist()} that the source does not list; "
            "it was not written by this ingest"
        )
    for k, lo in enumerate(range(0, len(segments), checkpoint)):
        part = segments[lo : lo + checkpoint]
        inside = np.isin(part, have)
        if every_id_an_object and inside.any() and not inside.all():
            raise InputError(
                f"the store to resume holds {int(inside.sum())} of the {len(part)} ids of checkpoint {k}; "
                "resume with the checkpoint size of the first run"
            )
        yield k, part, bool(inside.any())


def check_grid(n_checkpoints: int, options: dict[str, Any]) -> None:
    """Refuse several checkpoints without a fixed grid (``bounds`` and numeric ``chunk_shape``)."""
    if n_checkpoints <= 1:
        return
    if options.get("bounds") is None or isinstance(options.get("chunk_shape", "auto"), str):
        raise InputError(
            "an ingest in several checkpoints (or resumed) needs bounds= and a numeric chunk_shape= "
            "(every checkpoint is appended on the first one's grid); give them, or one checkpoint"
        )


class _WithAttributes:
    """``ds.append`` with the object attributes of the appended ids."""

    def __init__(self, ds: Any, rows: dict[str, dict[int, Any]]) -> None:
        self.ds, self.rows = ds, rows

    def append(self, *data: Any, **keywords: Any) -> None:
        self.ds.append(*data, object_attributes=self.rows or None, **keywords)


def _rows(props: dict[str, dict[int, Any]], ids: list[int]) -> dict[str, dict[int, Any]]:
    return {name: {i: table[i] for i in ids if i in table} for name, table in props.items()}


def write_checkpoints(
    dst: Any,
    kind: str,
    parts: Iterator[tuple[np.ndarray, list[tuple[int, Any]]]],
    append: Appender,
    *,
    props: dict[str, dict[int, Any]],
    create_options: dict[str, Any],
    exists: bool,
) -> bool:
    """Write each checkpoint's items (``parts`` yields ``(ids, items)``, items ``(id, data)``)
    as one commit: the writer of :func:`zarr_vectors.create` while there is no store
    (``exists`` False), then ``Dataset.append`` on the store opened ``"r+"``. Returns
    whether a store exists at the end."""
    from zarr_vectors.api import open as open_store
    from zarr_vectors.streaming import create

    storage_options = create_options.get("storage_options")
    for _, items in parts:
        if not items:
            continue
        rows = _rows(props, [i for i, _ in items])
        if not exists:
            options = dict(create_options)
            if rows:
                options["object_attributes"] = {**rows, **options.get("object_attributes", {})}
            with create(dst, kind, **options) as writer:
                append(writer, items)
            exists = True
        else:
            ds = open_store(dst, mode="r+", storage_options=storage_options)
            append(_WithAttributes(ds, rows), items)
    return exists
