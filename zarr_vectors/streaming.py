"""``zarr_vectors.create``: a writer that takes the data in batches.

Point clouds stream with bounded memory (:class:`~zarr_vectors.engine.write.stream.PointStream`).
Lines, skeletons, graphs and meshes are taken batch by batch too: each batch is checked
for shape and set aside in a temporary folder, and ``close`` joins the batches (indices
of skeleton parents and graph edges shifted to the joined vertex numbering) and writes
them with the one-shot writer, so their finalisation holds the whole data in memory.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import pickle
from collections.abc import Iterable, Mapping
from pathlib import Path
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
from zarr_vectors.errors import InputError, ZarrVectorsError, choice_message
from zarr_vectors.format.kinds import KINDS, writer_kinds
from zarr_vectors.kinds import graphs, lines, meshes, skeletons
from zarr_vectors.kinds.graph_stream import GraphStream
from zarr_vectors.kinds.line_stream import LineStream
from zarr_vectors.kinds.mesh_stream import MeshStream
from zarr_vectors.kinds.skeleton_stream import SkeletonStream
from zarr_vectors.storage import check_target, scratch_folder

__all__ = ["create", "BatchWriter", "PointStream"]

#: The store-wide keywords (``chunk_shape`` and ``bounds`` first), as ``StoreOptions`` names them.
_STORE_KEYWORDS = tuple(f.name for f in dataclasses.fields(StoreOptions))
#: Every kind name ``create()`` accepts -> the writer kind.
_KINDS = writer_kinds()


def _join(parts: list[Any]) -> Any:
    """Batches of one argument joined: lists extend, arrays concatenate, mappings per key."""
    if all(p is None for p in parts):
        return None
    if any(p is None for p in parts):
        raise InputError("every batch must give the same arguments (one batch left one out)")
    first = parts[0]
    if isinstance(first, Mapping):
        keys = list(first)
        if any(sorted(p) != sorted(keys) for p in parts):
            raise InputError(f"every batch must give the same names; the first gave {sorted(keys)}")
        return {k: _join([p[k] for p in parts]) for k in keys}
    if isinstance(first, np.ndarray):
        return np.concatenate([np.asarray(p) for p in parts])
    out: list[Any] = []
    for p in parts:
        out.extend(p)
    return out


class BatchWriter:
    """Lines, skeletons, graphs or meshes given in batches; written at :meth:`close`.

    ``append`` takes a batch in the form of the matching one-shot writer's data arguments
    (``lines`` for lines; ``positions, parents`` for skeletons; ``positions, edges`` for
    graphs; ``meshes`` for meshes), with the per-item or per-vertex keywords of that writer.
    """

    _DATA = {
        "lines": ("lines",),
        "skeletons": ("positions", "parents"),
        "graphs": ("positions", "edges"),
        "meshes": ("meshes",),
    }
    _PER_BATCH = {
        "lines": ("attributes", "object_ids"),
        "skeletons": ("attributes", "object_ids"),
        "graphs": ("attributes", "object_ids", "edge_attributes"),
        "meshes": ("object_ids",),
    }

    def __init__(self, target: Any, kind: str, options: dict[str, Any], spill_dir: str | None = None) -> None:
        self.target, self.kind, self.options = target, kind, options
        check_target(
            target, overwrite=bool(options.get("overwrite")), storage_options=options.get("storage_options")
        )
        self._scratch = contextlib.ExitStack()
        self._folder = self._scratch.enter_context(scratch_folder("zv-batches-", spill_dir))
        self._files: list[Path] = []
        self._closed = False

    def append(self, *data: Any, **keywords: Any) -> None:
        """Set one batch aside (in a temporary file, so memory does not grow with batches)."""
        if self._closed:
            raise ZarrVectorsError("this writer is closed; create a new one")
        names = self._DATA[self.kind]
        if len(data) != len(names):
            raise InputError(
                f"a {self.kind} batch is ({', '.join(names)}), got {len(data)} positional arguments"
            )
        allowed = self._PER_BATCH[self.kind]
        unknown = set(keywords) - set(allowed)
        if unknown:
            raise InputError(
                f"{sorted(unknown)} cannot change per batch of {self.kind}; per batch: {list(allowed)} "
                "(give store-wide and per-object keywords to create())"
            )
        batch = dict(zip(names, data)) | keywords
        if self.kind == "meshes" and meshes.one_mesh(batch["meshes"]):
            batch["meshes"] = [batch["meshes"]]
        path = self._folder / f"batch{len(self._files):06d}.pickle"
        with path.open("wb") as f:
            pickle.dump(batch, f, protocol=5)
        self._files.append(path)

    def extend(self, batches: Iterable[Any]) -> None:
        """:meth:`append` each batch: a tuple of the data arguments, or a mapping of keywords."""
        for batch in batches:
            if isinstance(batch, Mapping):
                names = self._DATA[self.kind]
                self.append(*(batch[n] for n in names), **{k: v for k, v in batch.items() if k not in names})
            elif isinstance(batch, tuple):
                self.append(*batch)
            else:
                self.append(batch)

    def _joined(self) -> dict[str, Any]:
        batches = []
        for path in self._files:
            with path.open("rb") as f:
                batches.append(pickle.load(f))  # noqa: S301 - our own files, written above
        if not batches:
            raise InputError(f"no {self.kind} were appended; append at least one batch before close()")
        keys = set().union(*batches)
        out = {k: _join([b.get(k) for b in batches]) for k in keys}
        if self.kind in ("skeletons", "graphs"):
            index = "parents" if self.kind == "skeletons" else "edges"
            shift, parts = 0, []
            for b in batches:
                idx = np.asarray(b[index], np.int64)
                parts.append(
                    np.where(idx >= 0, idx + shift, idx) if self.kind == "skeletons" else idx + shift
                )
                shift += len(b["positions"])
            out[index] = np.concatenate(parts)
            out["positions"] = np.concatenate([np.asarray(b["positions"]) for b in batches])
        return out

    def close(self) -> None:
        """Join the batches and write the store (root ``zarr.json`` last)."""
        if self._closed:
            raise ZarrVectorsError("this writer is closed; create a new one")
        self._closed = True
        try:
            data = self._joined()
            if self.kind == "lines":
                lines.write_lines(self.target, **data, **self.options)
            elif self.kind == "skeletons":
                skeletons.write_skeleton(self.target, **data, **self.options)
            elif self.kind == "graphs":
                graphs.write_graph(self.target, **data, **self.options)
            else:
                meshes.write_meshes(self.target, **data, **self.options)
        finally:
            self._scratch.close()

    def abort(self) -> None:
        """Drop every batch; nothing is written."""
        self._closed = True
        self._scratch.close()

    def __enter__(self) -> BatchWriter:
        return self

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> None:
        if self._closed:
            return
        if kind is None:
            self.close()
        else:
            self.abort()


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
) -> PointStream | LinkedStream | BatchWriter:
    """A writer for a new store at ``target`` that takes the data in batches.

    Call ``append(...)`` once per batch, then ``close()``, or use it in a ``with`` block
    (closed on a clean exit; on an exception nothing is written). The store appears at
    ``target`` only when it is complete, its root ``zarr.json`` written last.

    Parameters
    ----------
    target
        Where to write, as for :func:`zarr_vectors.write_points`.
    kind
        ``"points"``, ``"lines"``, ``"skeletons"``, ``"graphs"`` or ``"meshes"``.
    chunk_shape, bounds
        The chunk grid. Point clouds need ``bounds`` (the grid is fixed before the first
        batch), and a batch outside them is refused. ``chunk_shape="auto"`` (the default)
        needs ``expected_vertices`` with ``bounds`` for point clouds: cubes that hold about
        16,384 vertices each were the vertices spread evenly over ``bounds`` (the data is not
        seen before the grid is fixed; see ``docs/writing.md``). Other kinds are written at
        ``close``, so without them their chunks are sized from the joined data, as by the
        one-shot writers.
    expected_vertices
        About how many vertices will be appended, for ``chunk_shape="auto"``.
    memory_limit
        Points: bytes of memory to stay near, whatever the total size (default 1 GiB);
        rows beyond a quarter of it wait in sorted runs in ``spill_dir``. ``None``: no limit.
    workers
        Points: threads that encode and compress cells at ``close`` (default: every core).
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
    if name == "lines":
        options["kind"] = _line_kind(kind)
        return _linked(
            LineStream, target, chunk_shape, bounds, memory_limit, workers, spill_dir, progress, options
        )
    if name == "meshes":
        return _linked(
            MeshStream, target, chunk_shape, bounds, memory_limit, workers, spill_dir, progress, options
        )
    if name == "graphs":
        return _linked(
            GraphStream, target, chunk_shape, bounds, memory_limit, workers, spill_dir, progress, options
        )
    if name == "skeletons":
        return _linked(
            SkeletonStream, target, chunk_shape, bounds, memory_limit, workers, spill_dir, progress, options
        )
    options = {"chunk_shape": chunk_shape, "bounds": bounds, **options}
    return BatchWriter(target, name, options, None if spill_dir is None else os.fspath(spill_dir))
