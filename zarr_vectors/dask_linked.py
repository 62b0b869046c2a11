"""Lines, skeletons, graphs and meshes written from Dask collections, their cells built by Dask tasks.

The writers take a Dask bag or a list of delayed objects, each element one whole object in
the form the matching in-memory writer takes, and run the kind's streaming writer
(:class:`~zarr_vectors.engine.write.linkedstream.LinkedStream`) on the cluster:

1. When the grid is known before the data (``bounds`` and a ``chunk_shape``), each partition
   is a task, twice: first it counts its vertices, records and objects; then, numbered after
   the partitions before it, it checks its objects, keys their rows, link requests and the
   kind's own records by cell and spills them as sorted runs into the writer's spill folder,
   returning only the runs' cell lists and file names, its ids and counters. Otherwise the
   client appends the partitions a window at a time (the grid is fixed from all of them).
2. At ``close`` both sweeps of the streaming writer (the groups of whole cells, then the home
   cells of cross-chunk links) run as tasks, one per group of whole chunks: a task reads its
   rows from the spill folder, builds and compresses its cells, and for a local target stores
   them (and the shards lying whole inside its group) in the store's staging folder. The
   client gets the cell lists, fragment records, resolved link endpoints and the cells of
   shards that straddle two groups, and writes those shards, the object index, tables and
   metadata, the root ``zarr.json`` last.

The spill folder must be readable and writable by every worker: local disk is right for a
``LocalCluster`` (the default folder is beside a local target, else the temporary folder);
on a cluster of several machines give ``spill_dir`` on a shared file system. The store does
not depend on the number of partitions, workers or tasks: it is the store the in-memory
writer makes of the same objects in the same order.
"""

from __future__ import annotations

import dataclasses
import pickle
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from zarr_vectors._extras import needs

try:
    import dask
except ImportError as exc:  # pragma: no cover - the extra is installed in the tests
    raise ImportError(needs("zarr_vectors.dask", "dask[dataframe]", "dask")) from exc

from zarr_vectors import api
from zarr_vectors.dataset import Dataset
from zarr_vectors.engine import (
    DEFAULT_MEMORY_LIMIT,
    LinkedStream,
    StoreBuilder,
    StoreOptions,
    SweepContext,
    Tables,
)
from zarr_vectors.errors import InputError
from zarr_vectors.format.grid import Grid, cell_key
from zarr_vectors.format.shards import ShardLayout, encode_shard
from zarr_vectors.kinds.graph_stream import GraphStream
from zarr_vectors.kinds.line_stream import LineStream
from zarr_vectors.kinds.mesh_stream import MeshStream
from zarr_vectors.kinds.skeleton_stream import SkeletonStream
from zarr_vectors.storage import LocalBackend, local_path

__all__ = ["write_graphs", "write_lines", "write_meshes", "write_skeletons"]

#: The array kinds of ``StoreBuilder.compressors``.
ARRAY_KINDS = ("data", "links", "fragments")
#: Keywords of the one-shot writers that are not the store's options (see ``zarr_vectors.create``).
TABLE_KEYWORDS = ("channel_names", "object_attributes", "groups", "group_attributes", "group_names")


@dataclass(frozen=True)
class _Dest:
    """Where tasks store their cells: the staging folder of a local target, the chunks per
    shard (None: one file per cell) and the compressors of each array kind."""

    folder: str
    shards: tuple[int, ...] | None
    compressors: dict[str, list[dict[str, Any]]]


class _OnDask(LinkedStream):
    """A streaming writer whose sweeps run as Dask tasks (mixed in before the kind's class).

    Every spill a task reads writes each batch as a run on disk (limit 0; the endpoints
    resolved in the first sweep once that sweep ends), so a task reads its rows from the
    spill folder, and the pickled writer it gets holds only the runs' cell lists.
    """

    #: Groups in flight at once (set by the writers from the cluster's threads).
    window: int = 4
    #: Where the tasks store their cells (None: they send them to the client).
    dest: _Dest | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for spill in (self._vertices, self._links.requests, *self._spills):
            spill.limit = 0

    def __getstate__(self) -> dict[str, Any]:
        """What a task needs: no target, exit stack, fragments, waiting batches or tables."""
        state = dict(self.__dict__)
        for name in ("target", "_folders", "_fragments", "_waiting", "_items", "_tables_in"):
            state[name] = None
        return state

    def _sweep(
        self, builder: StoreBuilder, ctx: SweepContext, linear: np.ndarray, counts: np.ndarray, tables: Tables
    ) -> list[str]:
        """The sweeps, the tasks storing their cells straight into a local target's staging
        folder (beside the target, so on the file system the workers share). Remote targets
        are staged in the client's temporary folder, which other machines do not see: there
        the tasks send their cells to the client."""
        folder = builder.backend.local_dir
        if folder is not None and local_path(self.target) is not None:
            codecs = {k: builder.compressors(k) for k in ARRAY_KINDS}
            self.dest = _Dest(str(folder), builder.chunks_per_shard(ctx.grid), codecs)
        return super()._sweep(builder, ctx, linear, counts, tables)

    def _map_spans(
        self, method: str, args: tuple[Any, ...], spans: Iterable[tuple[int, int]]
    ) -> Iterator[Any]:
        if method == "_make_cross":  # the endpoints resolved in the first sweep: to disk, not in the pickle
            self._links.resolved.spill()
        spans = list(spans)  # finishes the spills the spans come from before the writer is pickled
        return _ordered(pickle.dumps((self, method, args), protocol=5), spans, self.window)


def _store_cells(
    dest: _Dest, grid: Grid, path: str, kind: str, cells: np.ndarray, data: list[bytes], lo: int, hi: int
) -> list[bytes | None]:
    """Store the cells of ``path`` a task built for linear cells ``lo <= c < hi``: unsharded
    every one; sharded the shards that lie whole in that range (no other task has cells of
    them). Returns ``data`` with None for each stored cell; the rest go to the client."""
    cells = np.asarray(cells, np.int64).reshape(-1, grid.ndim)
    key = f"0/{path}"
    if dest.shards is None:
        LocalBackend(dest.folder).set_many([(f"{key}/{cell_key(c)}", d) for c, d in zip(cells, data)])
        return [None] * len(data)
    layout = ShardLayout(dest.shards, (1,) * grid.ndim, tuple(dest.compressors[kind]))
    shard, inner = layout.locate(cells)
    shape = tuple(int(n) for n in grid.shape)
    per = np.asarray(dest.shards, np.int64)
    first = np.ravel_multi_index(tuple((shard * per).T), shape)
    last = np.ravel_multi_index(tuple((np.minimum((shard + 1) * per, shape) - 1).T), shape)
    whole = (first >= lo) & (last < hi)
    out: list[bytes | None] = list(data)
    members: dict[tuple[int, ...], dict[int, bytes]] = {}
    for i in np.flatnonzero(whole).tolist():
        members.setdefault(tuple(shard[i].tolist()), {})[int(inner[i])] = data[i]
        out[i] = None
    LocalBackend(dest.folder).set_many(
        [(f"{key}/{cell_key(s)}", encode_shard(layout, chunks)) for s, chunks in members.items()]
    )
    return out


def _stored(stream: _OnDask, method: str, args: tuple[Any, ...], result: Any, lo: int, hi: int) -> Any:
    """``result`` of a sweep's group with its cells stored by this task (see :func:`_store_cells`)."""
    dest, grid = stream.dest, args[0].grid
    if dest is None:
        return result
    if method == "_make_group":
        kinds = args[2]
        for path, (cells, data) in result.arrays.items():
            result.arrays[path] = (cells, _store_cells(dest, grid, path, kinds[path], cells, data, lo, hi))
        return result
    top, cross = result
    for path, (meta, kind, cells, data) in cross.items():
        cross[path] = (meta, kind, cells, _store_cells(dest, grid, path, kind, cells, data, lo, hi))
    return top, cross


def _run_span(blob: bytes, lo: int, hi: int) -> Any:
    """One task: the writer's ``method(*args, lo, hi)`` on its own copy of the writer, its
    cells stored here when the target is a local folder."""
    stream, method, args = pickle.loads(blob)
    try:
        return _stored(stream, method, args, getattr(stream, method)(*args, lo, hi), lo, hi)
    finally:
        stream.close_files()


def _client() -> Any:
    """The current ``distributed`` client, or None (then the current Dask scheduler runs windows)."""
    try:
        from distributed import get_client
    except ImportError:
        return None
    try:
        return get_client()
    except ValueError:
        return None


def _threads() -> int:
    """Threads of the cluster (1 without a ``distributed`` client)."""
    client = _client()
    if client is None:
        return 1
    workers = client.scheduler_info().get("workers", {})
    return max(sum(int(w.get("nthreads", 1)) for w in workers.values()), 1)


def _ordered(blob: bytes, spans: list[tuple[int, int]], window: int) -> Iterator[Any]:
    """:func:`_run_span` of every span as a task, results in span order, ``window`` in flight."""
    client = _client()
    if client is None:
        for a in range(0, len(spans), window):
            part = spans[a : a + window]
            yield from dask.compute(*[dask.delayed(_run_span)(blob, lo, hi) for lo, hi in part])
        return
    shared = client.scatter(blob, broadcast=True, hash=False)
    pending: deque[Any] = deque()
    try:
        for lo, hi in spans:
            pending.append(client.submit(_run_span, shared, lo, hi, pure=False))
            if len(pending) >= window:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        if pending:
            client.cancel(list(pending))
        client.cancel([shared])


class _DaskLines(_OnDask, LineStream):
    pass


class _DaskSkeletons(_OnDask, SkeletonStream):
    pass


class _DaskGraphs(_OnDask, GraphStream):
    pass


class _DaskMeshes(_OnDask, MeshStream):
    pass


def _batches(items: Any, window: int) -> Iterator[list[Any]]:
    """The elements of a bag (a partition at a time) or a list of delayed objects (``window``
    at a time), computed ``window`` partitions at a time, in order."""
    import dask.bag as db

    if isinstance(items, db.Bag):
        parts = items.to_delayed()
        for a in range(0, len(parts), window):
            for part in dask.compute(*parts[a : a + window]):
                yield list(part)
        return
    if isinstance(items, (str, bytes)) or not isinstance(items, Iterable):
        raise InputError(f"expected a Dask bag or a list of delayed objects, got {type(items).__name__}")
    listed = list(items)
    for a in range(0, len(listed), window):
        yield list(dask.compute(*listed[a : a + window]))


#: The writer's counters that number vertices, records, roots and batches (summed over partitions).
COUNTERS = ("rows", "_batches", "_keyed", "_roots", "_edges", "_keyed_edges")
#: What the first batch fixes (dtypes, attribute specs, axes).
FIRST = ("ndim", "shards", "_dtype", "_specs", "_edge_specs")
_Append = Callable[[Any, list[Any], Any, int], None]


def _counters(stream: Any) -> dict[str, int]:
    return {k: int(getattr(stream, k)) for k in COUNTERS if type(getattr(stream, k, None)) is int}


def _loaded(blob: bytes) -> Any:
    """A writer from :func:`_template`'s bytes."""
    cls, state, links = pickle.loads(blob)
    stream = cls.__new__(cls)
    stream.__dict__.update(state)
    stream._links.count = links
    return stream


def _template(
    writer: _OnDask, counts: dict[str, int], links: int, items: int, first: dict[str, Any]
) -> bytes:
    """The empty writer as a partition's task starts it: counters at the partitions before it."""
    state = writer.__getstate__()
    state.update(counts, _items=[np.zeros(items, np.int64)], **first)
    return pickle.dumps((type(writer), state, links), protocol=5)


def _count_part(blob: bytes, part: Any, append: _Append) -> dict[str, Any]:
    """Pass one of a partition (nothing kept): its counters, objects, links and first-batch state."""
    stream = _loaded(blob)
    for spill in stream.task_spills():
        spill.limit = None
    before, part = _counters(stream), list(part)
    if part:
        append(stream, part, None, 0)
    after = _counters(stream)
    return {
        "counts": {k: after[k] - before[k] for k in after},
        "links": stream._links.count,
        "objects": len(part),
        "first": {k: getattr(stream, k) for k in FIRST if hasattr(stream, k)} if part else None,
    }


def _spill_part(blob: bytes, part: Any, append: _Append, ids: Any, first: int) -> dict[str, Any]:
    """Pass two: the partition appended to its writer, every row spilled to disk; returns the
    runs (their files stay in the shared spill folder) and what the client's writer must note."""
    stream, part = _loaded(blob), list(part)
    links = stream._links.count
    before = _counters(stream)
    if part:
        append(stream, part, ids, first)
    spills = stream.task_spills()
    for spill in spills:
        spill.spill()
    after = _counters(stream)
    return {
        "counts": {k: after[k] - before[k] for k in after},
        "links": stream._links.count - links,
        "items": stream._items[1:],
        "ids": stream._ids,
        "extent": stream._extent,
        "runs": [(spill.runs, spill.rows) for spill in spills],
    }


def _partitions(items: Any, threads: int) -> list[Any]:
    """Delayed partitions (each a list of elements) of a bag or a list of delayed objects."""
    import dask.bag as db

    if isinstance(items, db.Bag):
        return list(items.to_delayed())
    if isinstance(items, (str, bytes)) or not isinstance(items, Iterable):
        raise InputError(f"expected a Dask bag or a list of delayed objects, got {type(items).__name__}")
    listed = list(items)
    size = max(1, -(-len(listed) // (4 * threads)))
    return [dask.delayed(list)(listed[a : a + size]) for a in range(0, len(listed), size)]


def _ingest(writer: _OnDask, items: Any, ids: np.ndarray | None, append: _Append, threads: int) -> int:
    """Every partition checked, keyed and spilled by its own task (two passes: counts, then
    rows numbered after the partitions before); the client's writer takes their runs in order.
    Returns the number of objects."""
    parts = _partitions(items, threads)
    blank = _template(writer, {}, 0, 0, {})
    counted = dask.compute(*[dask.delayed(_count_part)(blank, p, append) for p in parts])
    objects = sum(c["objects"] for c in counted)
    if ids is not None and objects != len(ids):
        raise InputError(f"object_ids has {len(ids)} ids for {objects} objects; give one id per object")
    first = next((c["first"] for c in counted if c["first"] is not None), None)
    if first is None:
        return 0
    tasks, counts, links, seen = [], dict.fromkeys(counted[0]["counts"], 0), 0, 0
    for part, c in zip(parts, counted):
        blob = _template(writer, counts, links, seen, {**first, "_ids": None, "_objects": ids is not None})
        given = None if ids is None else ids[seen : seen + c["objects"]]
        tasks.append(dask.delayed(_spill_part)(blob, part, append, given, seen))
        counts = {k: v + c["counts"][k] for k, v in counts.items()}
        links, seen = links + c["links"], seen + c["objects"]
    writer._objects = ids is not None
    for done in dask.compute(*tasks):
        _take(writer, done, first)
    return objects


def _take(writer: _OnDask, done: dict[str, Any], first: dict[str, Any]) -> None:
    """Note a partition's spilled runs and counters in the client's writer (in partition order)."""
    for name, delta in done["counts"].items():
        setattr(writer, name, getattr(writer, name) + delta)
    writer._links.count += done["links"]
    for name, value in first.items():
        setattr(writer, name, value)
    if done["ids"] is not None:
        if done["items"] and isinstance(writer, (LineStream, MeshStream)):
            writer._new_items(np.concatenate(done["items"]), "object", "objects")
        writer._note_ids(done["ids"])
    writer._items.extend(done["items"])
    ext = done["extent"]
    if ext is not None:
        old = writer._extent
        writer._extent = (
            ext if old is None else np.stack([np.minimum(old[0], ext[0]), np.maximum(old[1], ext[1])])
        )
    for spill, (runs, rows) in zip(writer.task_spills(), done["runs"]):
        spill.runs.extend(runs)
        spill.rows += rows


def _writer(
    cls: type[_OnDask],
    target: Any,
    chunk_shape: Any,
    bounds: Any,
    memory_limit: int | None,
    spill_dir: Any,
    keywords: dict[str, Any],
) -> _OnDask:
    """The streaming writer, the keywords split into the store's options, tables and the
    kind's own (``kind``, ``encoding``, ``directed``, ...) as ``zarr_vectors.create`` splits them."""
    names = [f.name for f in dataclasses.fields(StoreOptions)][2:]  # after chunk_shape, bounds
    store = {k: keywords[k] for k in names if k in keywords}
    own = {k: keywords[k] for k in (*TABLE_KEYWORDS, *cls.create_keywords) if k in keywords}
    unknown = sorted(set(keywords) - set(store) - set(own))
    if unknown:
        raise InputError(f"the Dask writer of {cls.kind_name} got unknown keywords {unknown}")
    options = StoreOptions(chunk_shape, bounds=bounds, **store)
    return cls(target, options, memory_limit=memory_limit, workers=1, spill_dir=spill_dir, **own)


def _write(
    cls: type[_OnDask],
    target: Any,
    items: Any,
    object_ids: Any,
    append: _Append,
    keywords: dict[str, Any],
) -> Dataset:
    """Write the elements through ``cls``: keyed and spilled by Dask tasks when the grid is
    known before the data (``bounds`` and a ``chunk_shape``), else appended by the client a
    window of partitions at a time; then closed, its sweeps as Dask tasks."""
    chunk_shape = keywords.pop("chunk_shape", "auto")
    bounds = keywords.pop("bounds", None)
    memory_limit = keywords.pop("memory_limit", DEFAULT_MEMORY_LIMIT)
    spill_dir = keywords.pop("spill_dir", None)
    if "attributes" in keywords:
        raise InputError(
            "the Dask writers take no per-vertex attributes yet; write them with zarr_vectors.create(...)"
        )
    ids = None if object_ids is None else np.asarray(object_ids)
    threads = _threads()
    storage_options = keywords.get("storage_options")
    writer = _writer(cls, target, chunk_shape, bounds, memory_limit, spill_dir, keywords)
    writer.window = max(2, 2 * threads)
    with writer:
        if writer.layout is not None:
            seen = _ingest(writer, items, ids, append, threads)
        else:
            seen = _append_all(writer, items, ids, append, threads)
        if not seen:
            raise InputError(f"no {cls.kind_name} to write: the collection is empty")
    return api.open(target, storage_options=storage_options)


def _append_all(writer: _OnDask, items: Any, ids: np.ndarray | None, append: _Append, threads: int) -> int:
    """Every element appended by the client, a window of partitions at a time; the objects."""
    seen = 0
    for batch in _batches(items, max(2, threads)):
        if not batch:
            continue
        given = None
        if ids is not None:
            given = ids[seen : seen + len(batch)]
            if len(given) != len(batch):
                raise InputError(f"object_ids has {len(ids)} ids but there are more objects than that")
        append(writer, batch, given, seen)
        seen += len(batch)
    if ids is not None and seen != len(ids):
        raise InputError(f"object_ids has {len(ids)} ids for {seen} objects; give one id per object")
    return seen


def _append_lines(writer: Any, batch: list[Any], ids: Any, first: int) -> None:
    writer.append([np.asarray(line) for line in batch], object_ids=ids)


def _append_meshes(writer: Any, batch: list[Any], ids: Any, first: int) -> None:
    writer.append(batch, object_ids=ids)


def _append_trees(writer: Any, batch: list[Any], ids: Any, first: int) -> None:
    pos, parents, tree = _forest(batch)
    writer.append(pos, parents, object_ids=None if ids is None else ids[tree])


def _append_graphs(writer: Any, batch: list[Any], ids: Any, first: int) -> None:
    positions = [np.asarray(p) for p, _ in batch]
    sizes = np.array([len(p) for p in positions], np.int64)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    edges = [np.asarray(e, np.int64).reshape(-1, 2) + s for (_, e), s in zip(batch, starts)]
    own = first + np.arange(len(batch)) if ids is None else ids
    writer.append(np.concatenate(positions), np.concatenate(edges), object_ids=np.repeat(own, sizes))


def write_lines(
    target: Any, lines: Any, *, object_ids: Sequence[Any] | None = None, **kwargs: Any
) -> Dataset:
    """Write polylines held in a Dask bag or a list of delayed (n, D) arrays, one line each.

    Line ``i`` (in bag order) is object ``object_ids[i]`` (default ``i``). The other keywords
    are :func:`zarr_vectors.write_lines`' store-wide ones (``chunk_shape``, ``bounds``,
    ``kind``, ``compression``, ``shards``, ``object_attributes``, ...), plus ``memory_limit``
    and ``spill_dir`` as for :func:`zarr_vectors.create`. The cells are built by Dask tasks
    (see the module docstring); the store is the one :func:`zarr_vectors.write_lines` writes.
    """

    return _write(_DaskLines, target, lines, object_ids, _append_lines, kwargs)


def write_meshes(
    target: Any, meshes: Any, *, object_ids: Sequence[Any] | None = None, **kwargs: Any
) -> Dataset:
    """Write meshes held in a Dask bag or a list of delayed ``(vertices, faces)`` pairs (or
    ``trimesh.Trimesh`` objects), raw or ``encoding="draco"``; mesh ``i`` is object
    ``object_ids[i]`` (default ``i``). Keywords and guarantees as :func:`write_lines` here,
    the store that of :func:`zarr_vectors.write_meshes`."""

    return _write(_DaskMeshes, target, meshes, object_ids, _append_meshes, kwargs)


def _forest(batch: list[Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Trees ``(positions, parents)`` (parents indexing their own tree) as one batch: positions,
    parents indexing the batch, and each vertex's tree number."""
    positions = [np.asarray(p) for p, _ in batch]
    sizes = np.array([len(p) for p in positions], np.int64)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    parents = np.concatenate([np.asarray(q, np.int64).reshape(-1) for _, q in batch])
    parents = np.where(parents < 0, -1, parents + np.repeat(starts, sizes))
    return np.concatenate(positions), parents, np.repeat(np.arange(len(batch)), sizes)


def write_skeletons(
    target: Any, skeletons: Any, *, object_ids: Sequence[Any] | None = None, **kwargs: Any
) -> Dataset:
    """Write skeletons held in a Dask bag or a list of delayed ``(positions, parents)`` trees
    (``parents[i]`` the row of vertex i's parent in its own tree, -1 for a root). Tree ``i``
    is object ``object_ids[i]``; without ids each root starts an object, numbered in order,
    as :func:`zarr_vectors.write_skeleton` numbers them. Keywords and guarantees as
    :func:`write_lines` here."""

    return _write(_DaskSkeletons, target, skeletons, object_ids, _append_trees, kwargs)


def write_graphs(
    target: Any, graphs: Any, *, object_ids: Sequence[Any] | None = None, **kwargs: Any
) -> Dataset:
    """Write graphs held in a Dask bag or a list of delayed ``(positions, edges)`` pairs (edges
    (E, 2) indexing their own graph's rows), graph ``i`` object ``object_ids[i]`` (default
    ``i``), as one graph store (``directed=`` once for all). Keywords and guarantees as
    :func:`write_lines` here; the store is :func:`zarr_vectors.write_graph`'s of the graphs
    concatenated, each graph's vertices carrying its id."""
    return _write(_DaskGraphs, target, graphs, object_ids, _append_graphs, kwargs)
