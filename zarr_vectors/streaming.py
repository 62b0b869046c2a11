"""``zarr_vectors.create``: a writer that takes the data in batches, in bounded memory.

Point clouds stream through :class:`~zarr_vectors.engine.write.stream.PointStream`; lines,
skeletons, graphs and meshes through the linked streams
(:class:`~zarr_vectors.engine.write.linkedstream.LinkedStream`: :class:`LineStream`,
:class:`SkeletonStream`, :class:`GraphStream`, :class:`MeshStream`), which key each batch
by chunk as it comes and build cells, cross-chunk links and tables a group of chunks at a
time at ``close``. Each store equals the one-shot writer's on the concatenated batches.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import numpy as np

from zarr_vectors.engine import (
    DEFAULT_MEMORY_LIMIT,
    LinkedStream,
    PointStream,
    StoreOptions,
    chunk_shape_of,
    expected_chunk_edge,
    inputs,
    is_auto,
)
from zarr_vectors.errors import InputError, choice_message
from zarr_vectors.format.kinds import KINDS, writer_kinds
from zarr_vectors.kinds.graph_stream import GraphStream
from zarr_vectors.kinds.line_stream import LineStream
from zarr_vectors.kinds.mesh_stream import MeshStream
from zarr_vectors.kinds.skeleton_stream import SkeletonStream

__all__ = ["create", "GraphStream", "LineStream", "MeshStream", "PointStream", "SkeletonStream"]

#: The store-wide keywords (``chunk_shape`` and ``bounds`` first), as ``StoreOptions`` names them.
_STORE_KEYWORDS = tuple(f.name for f in dataclasses.fields(StoreOptions))
#: Every kind name ``create()`` accepts -> the writer kind.
_KINDS = writer_kinds()


def _expected_shape(kind: str, bounds: Any, expected: Any, bin_shape: Any) -> Any:
    """``chunk_shape="auto"`` for a writer that does not see the data first: from ``bounds``
    and ``expected`` vertices spread evenly over them."""
    missing = [k for k, v in (("bounds", bounds), ("expected_vertices", expected)) if v is None]
    if missing:
        raise InputError(
            f"create() of {kind} with chunk_shape='auto' (the default) needs bounds=(lo, hi) and "
            f"expected_vertices= (about how many vertices will be appended) to size the chunks "
            f"before the first batch; {' and '.join(missing)} missing. Or give chunk_shape"
        )
    if isinstance(expected, bool) or not isinstance(expected, (int, np.integer)) or expected < 1:
        raise InputError(f"expected_vertices must be a positive integer, got {expected!r}")
    try:
        box = np.asarray(bounds, np.float64).reshape(2, -1)
    except (TypeError, ValueError) as exc:
        raise InputError(f"bounds must be (lo, hi) with one number per axis each, got {bounds!r}") from exc
    if not np.all(np.isfinite(box)) or np.any(box[0] > box[1]):
        raise InputError(f"bounds must be finite with lo <= hi on every axis, got {box.tolist()}")
    d = box.shape[1]
    bins = None if bin_shape is None else inputs.shape_vector(bin_shape, d, "bin_shape")
    return chunk_shape_of(expected_chunk_edge(box, int(expected)), d, bins)


#: Per-object and per-group keywords a streaming writer takes at ``create()``.
_TABLE_KEYWORDS = ("channel_names", "object_attributes", "groups", "group_attributes", "group_names")


def _line_kind(name: str) -> str:
    """The geometry kind ``create()``'s kind name asks for: ``"streamlines"`` -> ``"streamline"``,
    ``"line"`` -> ``"line"``; ``"lines"`` (the family) -> ``"polyline"``, as ``write_lines``."""
    for row in KINDS.values():
        if row.streamed == "lines" and name in (row.name, *row.aliases):
            return row.name
    return "polyline"


def _linked(
    cls: type[LinkedStream],
    target: Any,
    chunk_shape: Any,
    bounds: Any,
    memory_limit: int | None,
    workers: int | None,
    spill_dir: Any,
    progress: bool | None,
    options: dict[str, Any],
) -> LinkedStream:
    """A streaming writer of a linked kind, the keywords split into store-wide and table ones."""
    store = {k: options.pop(k) for k in _STORE_KEYWORDS[2:] if k in options}
    tables = {k: options.pop(k) for k in (*_TABLE_KEYWORDS, *cls.create_keywords) if k in options}
    if options:
        raise InputError(f"create() of {cls.kind_name} got unknown keywords {sorted(options)}")
    return cls(
        target,
        StoreOptions(chunk_shape, bounds=bounds, **store),
        memory_limit=memory_limit,
        workers=workers,
        spill_dir=spill_dir,
        progress=progress,
        **tables,
    )


def create(
    target: Any,
    kind: str,
    *,
    chunk_shape: Any = "auto",
    bounds: Any = None,
    expected_vertices: int | None = None,
    memory_limit: int | None = DEFAULT_MEMORY_LIMIT,
    workers: int | None = None,
    spill_dir: str | os.PathLike[str] | None = None,
    progress: bool | None = None,
    **options: Any,
) -> PointStream | LinkedStream:
    """A writer for a new store at ``target`` that takes the data in batches.

    Call ``append(...)`` once per batch, then ``close()``, or use it in a ``with`` block
    (closed on a clean exit; on an exception nothing is written). The store appears at
    ``target`` only when it is complete, its root ``zarr.json`` written last.

    Parameters
    ----------
    target
        Where to write, as for :func:`zarr_vectors.write_points`.
    kind
        ``"points"``, ``"lines"`` (polylines; ``"streamlines"`` and ``"line"`` name those
        kinds), ``"skeletons"``, ``"graphs"`` or ``"meshes"`` (raw or ``encoding="draco"``).
        Batches: ``append(positions, attributes=, object_ids=)`` for points;
        ``append(lines, attributes=, object_ids=)``; ``append(positions, parents,
        attributes=, object_ids=)`` for skeletons; ``append(positions, edges, attributes=,
        object_ids=, edge_attributes=)`` for graphs; ``append(meshes, object_ids=)``. Each
        batch's indices (parents, edges, faces) number its own rows; a line, tree or mesh
        lies whole in one batch.
    chunk_shape, bounds
        The chunk grid. Point clouds need ``bounds`` (the grid is fixed before the first
        batch), and a batch outside them is refused. ``chunk_shape="auto"`` (the default)
        needs ``expected_vertices`` with ``bounds`` for point clouds: cubes that hold about
        16,384 vertices each were the vertices spread evenly over ``bounds`` (the data is not
        seen before the grid is fixed; see ``docs/writing.md``). Other kinds without them
        set their batches aside on disk and fix the grid at ``close`` from all of them, as
        the one-shot writers do (bounds from the extent, ``"auto"`` from the same sample),
        then key them: one more pass over the data on disk.
    expected_vertices
        About how many vertices will be appended, for ``chunk_shape="auto"``.
    memory_limit
        Bytes of memory to stay near, whatever the total size (default 1 GiB): rows beyond a
        quarter of it (and, for the other kinds, waiting links and fragments beyond a
        sixteenth each) wait in sorted runs in ``spill_dir``; cells are built a group at a
        time. A batch itself is held while it is checked. ``None``: no limit.
    workers
        Points: threads that encode and compress cells at ``close`` (default: every core).
        Other kinds: worker processes (threads where ``fork`` is unavailable) that build
        groups of whole cells at ``close``, and threads that sort large spilled runs.
    spill_dir
        Where waiting rows go (default: beside a local target, else the temporary folder).
    progress
        A progress bar while the cells are written (default: when stderr is a terminal).
    options
        Every other keyword of the matching one-shot writer that is not per batch
        (``bin_shape``, ``compression``, ``object_attributes``, ``groups``, ``crs``, ...).

    Examples
    --------
    >>> import numpy as np, zarr_vectors as zv
    >>> rng = np.random.default_rng(0)
    >>> with zv.create("memory://doc-create", "points", chunk_shape=50, bounds=([0, 0, 0], [100, 100, 100])) as w:
    ...     for _ in range(4):
    ...         w.append(rng.uniform(0, 100, (2500, 3)), attributes={"i": rng.random(2500)})
    >>> zv.open("memory://doc-create").vertex_count()
    10000
    """
    name = _KINDS.get(kind) if isinstance(kind, str) else None
    if name is None:
        raise InputError(choice_message("kind", kind, sorted(set(_KINDS.values()))))
    if is_auto(chunk_shape) and (name == "points" or expected_vertices is not None):
        chunk_shape = _expected_shape(name, bounds, expected_vertices, options.get("bin_shape"))
    elif expected_vertices is not None:
        raise InputError(
            f"expected_vertices sizes chunk_shape='auto'; it means nothing with chunk_shape={chunk_shape!r}"
        )
    if name == "points":
        store = {k: options.pop(k) for k in _STORE_KEYWORDS[2:] if k in options}
        tables = {
            k: options.pop(k)
            for k in ("object_attributes", "groups", "group_attributes", "group_names", "channel_names")
            if k in options
        }
        if options:
            raise InputError(f"create() of points got unknown keywords {sorted(options)}")
        return PointStream(
            target,
            StoreOptions(chunk_shape, bounds=bounds, **store),
            memory_limit=memory_limit,
            workers=workers,
            spill_dir=spill_dir,
            progress=progress,
            **tables,
        )
    streams: dict[str, type[LinkedStream]] = {
        "lines": LineStream,
        "skeletons": SkeletonStream,
        "graphs": GraphStream,
        "meshes": MeshStream,
    }
    if name == "lines":
        options["kind"] = _line_kind(kind)
    return _linked(
        streams[name], target, chunk_shape, bounds, memory_limit, workers, spill_dir, progress, options
    )
