"""Bounding-box and object reads of vertex data: plan the cells, fetch them in one batch, decode.

The planner is pure: from the level's grid and ``nonempty_chunks`` it decides
which chunks a box touches, which of them it covers wholly (every row is a
hit, no test needed) and which partly (only the rows of the bins the box meets
are tested). Fragment indices are fetched for partly covered chunks only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from zarr_vectors.engine.chunks.arrays import CellArray
from zarr_vectors.engine.level import Level
from zarr_vectors.engine.read.keys import KeyBatch
from zarr_vectors.engine.read.where import RowFilter, apply_filter
from zarr_vectors.errors import AttributeNotFoundError, CorruptCellError, FormatError, InputError, decoding
from zarr_vectors.format.fragments import (
    FragmentIndex,
    decode_fragments,
    range_tables,
    ranges_outside,
    ranges_to_rows,
)
from zarr_vectors.result import Result
from zarr_vectors.storage import arena, map_cells

__all__ = [
    "Cells",
    "attribute_names",
    "box_batches",
    "build_result",
    "float32_bounds",
    "inside_box",
    "fetch_cells",
    "fetch_objects",
    "parse_box",
    "row_owners",
    "BoxPlan",
    "plan_box",
    "query_box",
    "read_objects",
]


@dataclass(frozen=True, eq=False)
class BoxPlan:
    """Chunks (absolute coords) a box needs: ``full`` are wholly inside it, ``partial`` cut by it."""

    lo: np.ndarray
    hi: np.ndarray
    full: np.ndarray  # (K1, D)
    partial: np.ndarray  # (K2, D)


def parse_box(bbox: object, ndim: int, axes: Sequence[str] = ()) -> tuple[np.ndarray, np.ndarray]:
    """``(lo, hi)`` float64 (D,) of an inclusive box; lo <= hi on every axis (named from ``axes``)."""
    lo_in: object
    hi_in: object
    try:
        lo_in, hi_in = bbox  # type: ignore[misc]  # any object: one that is not a pair raises, handled below
        lo = np.broadcast_to(np.asarray(lo_in, np.float64), (ndim,)).copy()
        hi = np.broadcast_to(np.asarray(hi_in, np.float64), (ndim,)).copy()
    except (TypeError, ValueError) as exc:
        raise InputError(f"bbox must be (lo, hi) with {ndim} numbers each, got {bbox!r}") from exc
    if np.any(np.isnan(lo)) or np.any(np.isnan(hi)):
        raise InputError(f"bbox contains NaN: {bbox!r}")
    flipped = np.flatnonzero(lo > hi)
    if len(flipped):
        k = int(flipped[0])
        name = f"axis {k} ({axes[k]})" if k < len(axes) else f"axis {k}"
        raise InputError(
            f"bbox has lo > hi on {name}: {lo[k]:g} > {hi[k]:g}; give the low corner first, then the high corner"
        )
    return lo, hi


def plan_box(level: Level, lo: np.ndarray, hi: np.ndarray) -> BoxPlan:
    """Which listed chunks intersect ``[lo, hi]``, split into wholly and partly covered."""
    grid = level.grid
    chunks = level.vertices.nonempty
    d = grid.ndim
    if np.any(lo > hi) or len(chunks) == 0:
        empty = np.zeros((0, d), np.int64)
        return BoxPlan(lo, hi, empty, empty)
    c_lo = np.floor(lo / grid.chunk_shape)
    c_hi = np.floor(hi / grid.chunk_shape)
    hit = np.all((chunks >= c_lo) & (chunks <= c_hi), axis=1)
    chunks = chunks[hit]
    eps = 1e-9 * grid.chunk_shape
    start = chunks * grid.chunk_shape
    inside = np.all((start - eps >= lo) & (start + grid.chunk_shape + eps <= hi), axis=1)
    return BoxPlan(lo, hi, chunks[inside], chunks[~inside])


def attribute_names(level: Level, attributes: Sequence[str] | bool | None) -> list[str]:
    if attributes is None or attributes is True:
        return list(level.vertex_attributes)
    if attributes is False:
        return []
    names = [attributes] if isinstance(attributes, str) else list(attributes)
    unknown = [n for n in names if n not in level.vertex_attributes]
    if unknown:
        raise AttributeNotFoundError("vertex", unknown, level.index, level.vertex_attributes)
    return names


def _owners_of_rows(
    level: Level, chunk: np.ndarray, frag: FragmentIndex, n_rows: int, table: np.ndarray | None = None
) -> np.ndarray:
    """Object id of every row of a chunk (-1 for rows no object claims).

    ``table`` is the chunk's ``fragment_attributes/object_id`` cell when it was fetched;
    otherwise owners come from the level's manifests (all of them, read once).
    """
    if table is not None:
        owners = table.astype(np.int64)
    else:
        grid = level.grid
        lin = int(
            np.ravel_multi_index(tuple(np.asarray(chunk) - grid.origin), tuple(int(s) for s in grid.shape))
        )
        owners = level.fragment_owners.of_cell(lin, frag.num_fragments)
    counts = frag.ranges[:, 1]
    if frag.all_ranges and len(counts) and int(counts.sum()) == n_rows:
        starts = frag.ranges[:, 0]
        if starts[0] == 0 and np.array_equal(starts[1:], np.cumsum(counts[:-1])):
            return np.repeat(owners, counts)  # fragments tile the cell in row order (as written here)
    out = np.full(n_rows, -1, np.int64)
    ranged = np.flatnonzero(frag.is_range)
    out[ranges_to_rows(frag.ranges[:, 0], counts)] = np.repeat(owners[ranged], counts)
    for f in np.flatnonzero(~frag.is_range & (owners >= 0)):
        out[frag.rows(int(f))] = owners[f]
    return out


def _fragments_array(level: Level) -> CellArray:
    """The level's ``vertex_fragments`` array; a FormatError when the store lacks it."""
    if level.fragments is None:
        raise FormatError(
            f"level {level.index} has no vertex_fragments array ({level.index}/vertex_fragments/zarr.json is "
            "missing), which this read needs to tell objects and fragments apart"
        )
    return level.fragments


def _decode_frag(level: Level, data: memoryview, chunk: np.ndarray, n_rows: int) -> FragmentIndex:
    fragments = _fragments_array(level)
    with decoding(fragments.path, chunk):
        index = decode_fragments(data, n_rows)
    if level.meta.fragments_tile and index.all_ranges and int(index.ranges[:, 1].sum()) != n_rows:
        raise CorruptCellError(
            fragments.path,
            ".".join(map(str, chunk)),
            f"its fragments cover {int(index.ranges[:, 1].sum())} rows but the vertex cell has {n_rows} "
            "(fragments_tile says every row is in one fragment): the cell or the vertices dtype is corrupt",
        )
    return index


@dataclass(frozen=True, eq=False)
class Cells:
    """The decoded cells of one fetch, concatenated over ``chunks`` in order.

    Rows of chunk ``i`` are ``offsets[i]:offsets[i + 1]`` of ``positions`` and of
    every array in ``attributes``; ``fragments`` maps a chunk's position in
    ``chunks`` to its fragment-index payload, for the chunks it was fetched for, and
    ``owner_tables`` to its ``fragment_attributes/object_id`` rows where those were fetched;
    ``intra_faces`` holds the chunk-local faces decoded from Draco cells.
    """

    chunks: np.ndarray
    positions: np.ndarray
    offsets: np.ndarray
    attributes: dict[str, np.ndarray]
    fragments: dict[int, memoryview]
    owner_tables: dict[int, np.ndarray]
    intra_faces: dict[int, np.ndarray] = field(default_factory=dict)
    _indexes: dict[int, FragmentIndex] = field(default_factory=dict)

    def fragment_index(self, level: Level, i: int) -> FragmentIndex:
        """Decoded fragment index of chunk ``i`` (decoded once, then reused)."""
        index = self._indexes.get(i)
        if index is None:
            n = int(self.offsets[i + 1] - self.offsets[i])
            index = self._indexes[i] = _decode_frag(level, self.fragments[i], self.chunks[i], n)
        return index


def fetch_cells(
    level: Level,
    chunks: np.ndarray,
    names: list[str],
    frag_idx: np.ndarray,
    extra: Sequence[str] = (),
    owners: bool = False,
) -> tuple[Cells, list[bytes | None]]:
    """Fetch, in one batch, the vertex and attribute cells of ``chunks``, the fragment
    indices of ``chunks[frag_idx]`` (with their object-id tables when ``owners`` and the
    level has them) and the ``extra`` keys (returned raw); check every attribute cell
    matches its vertex cell."""
    arrays = [level.vertices] + [level.vertex_attributes[n] for n in names]
    batch = KeyBatch()
    for arr in arrays:
        batch.add(arr.path, arr.keys(chunks))
    table = level.fragment_object_ids if owners else None
    fragments = _fragments_array(level) if len(frag_idx) else None
    if fragments is not None:
        batch.add(fragments.path, fragments.keys(chunks[frag_idx]))
        if table is not None:
            batch.add(table.path, table.keys(chunks[frag_idx]))
    batch.add("extra", extra)
    raws = level.backend.get_many(batch.keys)
    k, d = len(chunks), level.grid.ndim
    faces: dict[int, np.ndarray] = {}
    vertex_cells = batch.take(raws, level.vertices.path)
    if level.vertices.draco:
        cells = []
        for i in range(k):
            pos, faces[i] = level.vertices.mesh_rows(vertex_cells[i], chunks[i])
            cells.append(pos)
    else:
        cells = [level.vertices.rows(vertex_cells[i], chunks[i], d) for i in range(k)]
    offsets = np.zeros(k + 1, np.int64)
    np.cumsum([len(c) for c in cells], out=offsets[1:])
    attrs = {}
    for arr, name in zip(arrays[1:], names):
        parts = [arr.rows(raw, chunk) for raw, chunk in zip(batch.take(raws, arr.path), chunks)]
        for i, part in enumerate(parts):
            if len(part) != len(cells[i]):
                chunk = ".".join(map(str, chunks[i]))
                raise CorruptCellError(arr.path, chunk, f"{len(part)} rows but vertices has {len(cells[i])}")
        flat = np.concatenate(parts) if parts else np.zeros((0, arr.row_width), arr.dtype)
        attrs[name] = arr.as_read(flat.reshape((-1, *(arr.attrs.get("row_shape") or []))))
    frags, tables = {}, {}
    if fragments is not None:
        frag_cells = batch.take(raws, fragments.path)
        table_cells = batch.take(raws, table.path) if table is not None else [None] * len(frag_idx)
        for i, frag_raw, table_raw in zip(frag_idx.tolist(), frag_cells, table_cells):
            frags[i] = fragments.payload(frag_raw, chunks[i])
            if table is not None and table_raw is not None:
                tables[i] = table.rows(table_raw, chunks[i]).reshape(-1)
    positions = np.concatenate(cells) if cells else np.zeros((0, d), level.vertices.dtype)
    return Cells(chunks, positions, offsets, attrs, frags, tables, faces), batch.take(raws, "extra")


def row_owners(level: Level, cells: Cells) -> np.ndarray:
    """Object id of every fetched row (-1 where no object claims it)."""
    parts = []
    for i, chunk in enumerate(cells.chunks):
        n = int(cells.offsets[i + 1] - cells.offsets[i])
        if i in cells.fragments:
            frag = cells.fragment_index(level, i)
            table = cells.owner_tables.get(i)
            if table is not None and len(table) != frag.num_fragments:
                assert level.fragment_object_ids is not None  # the owner tables were read from it
                raise CorruptCellError(
                    level.fragment_object_ids.path,
                    ".".join(map(str, chunk)),
                    f"{len(table)} object ids for {frag.num_fragments} fragments",
                )
            parts.append(_owners_of_rows(level, chunk, frag, n, table))
        else:
            parts.append(np.full(n, -1, np.int64))
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


def build_result(
    level: Level,
    cells: Cells,
    rows: np.ndarray | None,
    object_ids: np.ndarray | None = None,
    *,
    owners: np.ndarray | None = None,
    edges: np.ndarray | None = None,
    edge_attributes: dict[str, np.ndarray] | None = None,
    line_offsets: np.ndarray | None = None,
    parents: np.ndarray | None = None,
    faces: np.ndarray | None = None,
) -> Result:
    """The :class:`Result` of rows ``rows`` of the fetched ``cells`` (all rows when None).

    ``object_ids`` has one OID per fetched row; ``owners`` one per result row (give one or
    neither). Connectivity indexes result rows.
    """

    def take(a: np.ndarray) -> np.ndarray:
        return a if rows is None else a[rows]

    return Result(
        take(cells.positions),
        {n: take(v) for n, v in cells.attributes.items()},
        owners if object_ids is None else take(object_ids),
        tuple(a.name for a in level.root.axes if a.type == "space"),
        edges=edges,
        faces=faces,
        line_offsets=line_offsets,
        parents=parents,
        edge_attributes={} if edge_attributes is None else edge_attributes,
    )


def _box_setup(
    level: Level,
    lo: np.ndarray,
    hi: np.ndarray,
    attributes: Sequence[str] | bool | None,
    with_object_ids: bool | None,
    row_filter: RowFilter | None,
) -> tuple[BoxPlan, list[str], bool, bool]:
    """The plan, attribute names, whether object ids are returned, and whether they are read
    (also for the filter's object conditions)."""
    with_ids = level.manifests is not None if with_object_ids is None else with_object_ids
    need_ids = with_ids or (row_filter is not None and bool(row_filter.objects))
    return plan_box(level, lo, hi), attribute_names(level, attributes), with_ids, need_ids


def _per_cell(level: Level, with_ids: bool) -> bool:
    """Whether box reads of ``level`` take the per-cell path (:func:`_box_rows`): raw vertex
    cells, and fragment indices where owners are needed."""
    return not level.vertices.draco and (not with_ids or level.fragments is not None)


def query_box(
    level: Level,
    lo: np.ndarray,
    hi: np.ndarray,
    attributes: Sequence[str] | bool | None = None,
    with_object_ids: bool | None = None,
    workers: int | None = None,
    row_filter: RowFilter | None = None,
) -> Result:
    """Every vertex with ``lo <= p <= hi`` on all axes (and meeting ``row_filter``), with the
    asked attributes.

    One batch fetches the vertex and attribute cells of every chunk the box
    touches, plus fragment indices where they are needed (partly covered chunks,
    or every chunk when object ids are asked for).
    """
    plan, names, with_ids, need_ids = _box_setup(level, lo, hi, attributes, with_object_ids, row_filter)
    chunks = np.concatenate([plan.full, plan.partial])
    if _per_cell(level, need_ids):
        res = _box_rows(level, chunks, len(plan.full), names, lo, hi, workers, need_ids, row_filter)
        return res if with_ids == need_ids else replace(res, object_ids=None)
    if row_filter is not None:  # filtered after the read
        extra = [n for n in row_filter.vertex_names if n not in names]
        res = query_box(level, lo, hi, [*names, *extra], need_ids, workers)
        return apply_filter(res, row_filter, names, with_ids)
    frag_idx = np.arange(len(chunks)) if level.fragments is not None and with_ids else np.zeros(0, np.int64)
    cells, _ = fetch_cells(level, chunks, names, frag_idx, owners=with_ids)
    rows = None
    if len(plan.partial):
        start = int(cells.offsets[len(plan.full)])
        mask = np.ones(len(cells.positions), bool)  # rows of wholly covered chunks need no test
        mask[start:] = inside_box(cells.positions[start:], lo, hi)
        rows = np.flatnonzero(mask)
    return build_result(level, cells, rows, row_owners(level, cells) if with_ids else None)


def box_batches(
    level: Level,
    lo: np.ndarray,
    hi: np.ndarray,
    attributes: Sequence[str] | bool | None = None,
    with_object_ids: bool | None = None,
    workers: int | None = None,
    row_filter: RowFilter | None = None,
    batch_chunks: int = 64,
) -> Iterator[Result]:
    """The rows of :func:`query_box`, as results of at most ``batch_chunks`` chunks each (the
    same rows in the same order, concatenated); only one batch's cells are held at a time."""
    plan, names, with_ids, need_ids = _box_setup(level, lo, hi, attributes, with_object_ids, row_filter)
    if not _per_cell(level, need_ids):
        yield query_box(level, lo, hi, attributes, with_object_ids, workers, row_filter)
        return
    for chunks, full in ((plan.full, True), (plan.partial, False)):
        for start in range(0, len(chunks), batch_chunks):
            part = chunks[start : start + batch_chunks]
            res = _box_rows(
                level, part, len(part) if full else 0, names, lo, hi, workers, need_ids, row_filter
            )
            yield res if with_ids == need_ids else replace(res, object_ids=None)


#: Bytes read by a box query from which its cells are decoded in threads when ``workers`` is
#: left to the default (measured: below it one thread was as fast or faster).
AUTO_THREADS_BYTES = 16 << 20


def _box_rows(
    level: Level,
    chunks: np.ndarray,
    n_full: int,
    names: list[str],
    lo: np.ndarray,
    hi: np.ndarray,
    workers: int | None,
    with_ids: bool = False,
    row_filter: RowFilter | None = None,
) -> Result:
    """A box query: one batch of reads; each cell decoded (with the object of each row, when
    asked) and, when the box covers it partly, tested on the sides of the box that cut it,
    then on ``row_filter`` (``workers`` cells at a time); then the kept rows copied once,
    straight into the result, in chunk order. Cells are read and decompressed into a reused
    arena, which the result never refers to; wholly covered cells, when nothing else is
    asked of them, are decompressed straight into the result instead."""
    extra = [] if row_filter is None else [n for n in row_filter.vertex_names if n not in names]
    arrays = [level.vertices] + [level.vertex_attributes[n] for n in [*names, *extra]]
    n_out = 1 + len(names)  # columns returned: vertices and the asked attributes (then extra)
    batch = KeyBatch()
    for j, arr in enumerate(arrays):
        batch.add(str(j), arr.keys(chunks))  # sections named by position in ``arrays``
    owners = level.fragment_object_ids if with_ids else None
    if with_ids:
        fragments = _fragments_array(level)
        batch.add("fragments", fragments.keys(chunks))
        if owners is not None:
            batch.add("owners", owners.keys(chunks))
    k, d = len(chunks), level.grid.ndim
    widths = [d] + [arr.row_width for arr in arrays[1:n_out]]
    dtypes = [arr.dtype for arr in arrays[:n_out]] + ([np.dtype(np.int64)] if with_ids else [])
    if with_ids:
        widths.append(1)
    tests = _cell_tests(level, chunks, n_full, lo, hi)
    with arena() as scratch:
        raws = level.backend.get_many_into(batch.keys, scratch)
        columns = [batch.take(raws, str(j)) for j in range(len(arrays))]  # columns[array][cell]
        # fragment indexes may be kept: copied out of the arena
        frag_cells = [None if raw is None else bytes(raw) for raw in batch.take(raws, "fragments")]
        table_cells = [None if raw is None else bytes(raw) for raw in batch.take(raws, "owners")]

        def decode(i: int) -> tuple[list[np.ndarray], np.ndarray | None]:
            pos = level.vertices.rows(columns[0][i], chunks[i], d, scratch)
            cols = [pos]
            for j, arr in enumerate(arrays[1:], start=1):
                part = arr.rows(columns[j][i], chunks[i], None, scratch)
                if len(part) != len(pos):
                    chunk = ".".join(map(str, chunks[i]))
                    raise CorruptCellError(arr.path, chunk, f"{len(part)} rows but vertices has {len(pos)}")
                cols.append(part)
            if with_ids:
                table = table_cells[i] if table_cells else None
                owners = _cell_owners(level, chunks[i], frag_cells[i], table, len(pos))
                cols.append(owners.reshape(-1, 1))
            keep = _test_rows(pos, tests[i])
            if row_filter is not None:
                wanted = set(row_filter.vertex_names)
                named = {n: c for n, c in zip([*names, *extra], cols[1:]) if n in wanted}
                index = None if keep is None else np.flatnonzero(keep)
                keep = _filtered(row_filter, index, len(pos), named, cols[-1] if with_ids else None)
            return cols[:n_out] + cols[len(arrays) :], keep

        if workers is None and sum(len(r) for r in raws if r is not None) < AUTO_THREADS_BYTES:
            workers = 1  # small reads: handing cells to threads costs more than it saves
        direct = (
            [] if with_ids or row_filter is not None else _direct_sizes(arrays, columns, chunks, n_full, d)
        )
        n_direct = len(direct)
        cells = map_cells(lambda i: decode(n_direct + i), k - n_direct, workers)
        sizes = direct + [_kept(cols[0], keep) for cols, keep in cells]
        offsets = np.zeros(k + 1, np.int64)
        np.cumsum(sizes, out=offsets[1:])
        out = [np.empty((int(offsets[-1]), w), dt) for w, dt in zip(widths, dtypes)]

        def copy(i: int) -> None:
            a, b = int(offsets[i]), int(offsets[i + 1])
            if i < n_direct:
                for arr, column, dst in zip(arrays, columns, out):
                    arr.rows_to(column[i], chunks[i], dst[a:b])  # type: ignore[arg-type]
                return
            cols, keep = cells[i - n_direct]
            for dst, src in zip(out, cols):
                if keep is None or b - a == len(src):
                    dst[a:b] = src
                elif keep.dtype == bool:
                    np.compress(keep, src, axis=0, out=dst[a:b])
                else:
                    np.take(src, keep, axis=0, out=dst[a:b])

        map_cells(copy, k, workers)
    attrs = {
        n: arr.as_read(col.reshape((-1, *(arr.attrs.get("row_shape") or []))))
        for n, col, arr in zip(names, out[1:], arrays[1:n_out])
    }
    axes = tuple(a.name for a in level.root.axes if a.type == "space")
    return Result(out[0], attrs, out[-1].reshape(-1) if with_ids else None, axes)


#: The tests of one cell's rows: ``(axis, bound, upper)``, ``upper`` meaning ``p <= bound``.
CellTests = list[tuple[int, Any, bool]]


def _cell_tests(
    level: Level, chunks: np.ndarray, n_full: int, lo: np.ndarray, hi: np.ndarray
) -> list[CellTests]:
    """For each of ``chunks`` (the first ``n_full`` wholly inside the box), the sides of the
    box its rows must be tested against: those that cut the chunk's extent (by more than a
    rounding margin). Bounds are numpy scalars of the comparison's type: float32 rows are
    compared with the bounds rounded inwards (:func:`float32_bounds`), which keeps exactly
    the rows the float64 test keeps; other rows with the float64 bounds."""
    out: list[CellTests] = [[] for _ in range(len(chunks))]
    if n_full == len(chunks):
        return out
    cs = level.grid.chunk_shape
    cell_lo = chunks[n_full:] * cs
    margin = 1e-9 * (np.abs(cs) + 1)
    cut_lo = (cell_lo - margin < lo).tolist()
    cut_hi = (cell_lo + cs + margin > hi).tolist()
    lo_b, hi_b = np.asarray(lo, np.float64), np.asarray(hi, np.float64)
    if level.vertices.dtype == np.float32:
        lo_b, hi_b = float32_bounds(lo_b, hi_b)
    lows, highs = list(lo_b), list(hi_b)  # numpy scalars: no Python float re-rounded to float32
    for i, (cl, ch) in enumerate(zip(cut_lo, cut_hi), start=n_full):
        out[i] = [(ax, lows[ax], False) for ax in range(len(cl)) if cl[ax]]
        out[i] += [(ax, highs[ax], True) for ax in range(len(ch)) if ch[ax]]
    return out


def _test_rows(positions: np.ndarray, tests: CellTests) -> np.ndarray | None:
    """Boolean mask of the rows that pass ``tests`` (None: no test, every row passes)."""
    mask: np.ndarray | None = None
    for ax, bound, upper in tests:
        col = positions[:, ax]
        hit = col <= bound if upper else col >= bound
        if mask is None:
            mask = hit
        else:
            mask &= hit
    return mask


def _direct_sizes(
    arrays: list[CellArray],
    columns: list[list[bytes | memoryview | None]],
    chunks: np.ndarray,
    n_full: int,
    d: int,
) -> list[int]:
    """Row counts of the first ``n_full`` cells when every array's cell of each can be
    decoded straight into the result (:meth:`CellArray.rows_to`), read from their headers;
    empty when any cannot (``columns[j][i]``: array ``j``'s raw cell of chunk ``i``)."""
    sizes = []
    for i in range(n_full):
        n = arrays[0].direct_rows(columns[0][i], chunks[i], d)
        if n is None:
            return []
        for arr, column in zip(arrays[1:], columns[1:]):
            m = arr.direct_rows(column[i], chunks[i])
            if m is None:
                return []
            if m != n:
                raise CorruptCellError(
                    arr.path, ".".join(map(str, chunks[i])), f"{m} rows but vertices has {n}"
                )
        sizes.append(n)
    return sizes


def _kept(rows: np.ndarray, keep: np.ndarray | None) -> int:
    """Rows a cell contributes: all, those of a boolean mask, or an index array's length."""
    if keep is None:
        return len(rows)
    return int(np.count_nonzero(keep)) if keep.dtype == bool else len(keep)


def _filtered(
    row_filter: RowFilter,
    keep: np.ndarray | None,
    n_rows: int,
    columns: dict[str, np.ndarray],
    owners: np.ndarray | None,
) -> np.ndarray:
    """``keep`` (row indices of a cell of ``n_rows``; None: all of them) narrowed to the rows
    that meet ``row_filter`` (``columns``: the cell's rows of the attributes it names)."""
    if keep is not None:
        columns = {name: np.take(col, keep, axis=0) for name, col in columns.items()}
        owners = None if owners is None else owners[keep]
    n = n_rows if keep is None else len(keep)
    ok = row_filter.mask(columns, None if owners is None else owners.reshape(-1), n)
    return np.flatnonzero(ok) if keep is None else keep[ok]


def _cell_owners(
    level: Level, chunk: Any, frag_raw: bytes | None, table_raw: bytes | None, n: int
) -> np.ndarray:
    """The object (OID) of each of a cell's ``n`` rows, from its raw fragment index and, when
    the level has that table, its raw ``fragment_attributes/object_id`` cell."""
    frag = _decode_frag(level, _fragments_array(level).payload(frag_raw, chunk), chunk, n)
    table = None
    if level.fragment_object_ids is not None and table_raw is not None:
        table = level.fragment_object_ids.rows(table_raw, chunk).reshape(-1)
        if len(table) != frag.num_fragments:
            raise CorruptCellError(
                level.fragment_object_ids.path,
                ".".join(map(str, chunk)),
                f"{len(table)} object ids for {frag.num_fragments} fragments",
            )
    return _owners_of_rows(level, chunk, frag, n, table)


def inside_box(
    positions: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    cell_lo: np.ndarray | None = None,
    cell_hi: np.ndarray | None = None,
) -> np.ndarray:
    """``lo <= p <= hi`` on every axis, per row, with the result of comparing in float64.

    With the extent of the rows' chunk (``cell_lo``, ``cell_hi``), a side of an axis the
    chunk lies within (by more than a rounding margin) is not tested: every row passes it.
    float32 rows are compared with the bounds rounded inwards to float32 (see
    :func:`float32_bounds`), which keeps exactly the same rows without widening them.
    """
    lo, hi = np.asarray(lo, np.float64), np.asarray(hi, np.float64)
    if positions.dtype == np.float32:
        lo, hi = float32_bounds(lo, hi)
    out = np.ones(len(positions), bool)
    margin = None if cell_lo is None or cell_hi is None else 1e-9 * (np.abs(cell_hi - cell_lo) + 1)
    for ax in range(positions.shape[1]):
        col = positions[:, ax]
        if margin is None or cell_lo[ax] - margin[ax] < lo[ax]:  # type: ignore[index]
            out &= col >= lo[ax]
        if margin is None or cell_hi[ax] + margin[ax] > hi[ax]:  # type: ignore[index]
            out &= col <= hi[ax]
    return out


def float32_bounds(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """float32 ``(lo32, hi32)`` with ``x >= lo32 <=> x >= lo`` and ``x <= hi32 <=> x <= hi`` for
    every float32 ``x`` (compared in float64 on the right): the smallest float32 not below
    ``lo`` and the largest not above ``hi``. An empty side (``lo32 > hi32``) selects nothing,
    as the float64 test does."""
    with np.errstate(over="ignore"):
        lo32, hi32 = lo.astype(np.float32), hi.astype(np.float32)
    lo32 = np.where(lo32.astype(np.float64) < lo, np.nextafter(lo32, np.float32(np.inf)), lo32)
    hi32 = np.where(hi32.astype(np.float64) > hi, np.nextafter(hi32, np.float32(-np.inf)), hi32)
    return lo32, hi32


def fetch_objects(
    level: Level,
    ids: np.ndarray,
    names: list[str],
    extra_for: Callable[[np.ndarray], list[str]] | None = None,
) -> tuple[Cells, np.ndarray, np.ndarray, list[bytes | None]]:
    """Fetch the cells holding objects ``ids`` (plus ``extra_for(chunks)`` keys) in one batch.

    Returns the cells, the concatenated-row indices of the objects' vertices (grouped by
    object in the order of ``ids``, each in manifest order), their object ids, and the
    extra raws.
    """
    pos, frag_chunks, frags = level.object_fragments(ids)
    d = level.grid.ndim
    chunks, cell_of = np.unique(frag_chunks.reshape(-1, d), axis=0, return_inverse=True)
    cell_of = cell_of.reshape(-1)
    if len(chunks):
        _fragments_array(level)
        unlisted = ~level.vertices.listed(chunks)
        if unlisted.any():
            raise FormatError(
                f"{level.manifests.path if level.manifests else 'the object index'} names chunk "
                f"{'.'.join(map(str, chunks[np.argmax(unlisted)]))}, which {level.vertices.path} does not list "
                "in nonempty_chunks: the listing or the manifest is corrupt"
            )
    extra = extra_for(chunks) if extra_for is not None else []
    cells, raws = fetch_cells(level, chunks, names, np.arange(len(chunks)), extra)
    tables = range_tables([cells.fragments[i] for i in range(len(chunks))])
    if tables is not None:
        return cells, *_range_rows(level, cells, tables, ids, pos, frag_chunks, cell_of, frags), raws
    indexes = [cells.fragment_index(level, i) for i in range(len(chunks))]
    n_frag = np.array([ix.num_fragments for ix in indexes], np.int64)
    bad = np.flatnonzero(frags >= n_frag[cell_of]) if len(frags) else np.zeros(0, np.int64)
    if len(bad):
        b = int(bad[0])
        raise CorruptCellError(
            level.manifests.path if level.manifests else "object_index",
            str(int(ids[pos[b]])),
            f"manifest names fragment {int(frags[b])} of chunk {frag_chunks[b].tolist()}, "
            f"which has {int(n_frag[cell_of[b]])}",
        )
    if all(ix.all_ranges for ix in indexes):
        base = np.zeros(len(indexes) + 1, np.int64)
        np.cumsum(n_frag, out=base[1:])
        table = np.concatenate([ix.ranges for ix in indexes]) if indexes else np.zeros((0, 2), np.int64)
        g = base[cell_of] + frags
        counts = table[g, 1]
        rows = ranges_to_rows(table[g, 0] + cells.offsets[cell_of], counts)
    else:
        parts = [indexes[c].rows(f) + cells.offsets[c] for c, f in zip(cell_of.tolist(), frags.tolist())]
        counts = np.array([len(p) for p in parts], np.int64)
        rows = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    return cells, rows, np.repeat(ids[pos], counts), raws


def _range_rows(
    level: Level,
    cells: Cells,
    tables: list[np.ndarray],
    ids: np.ndarray,
    pos: np.ndarray,
    frag_chunks: np.ndarray,
    cell_of: np.ndarray,
    frags: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Rows and owners of the named fragments when every fetched cell has an all-range index
    (checked here: ranges inside their cells, fragments named exist)."""
    n_frag = np.array([len(t) for t in tables], np.int64)
    base = np.zeros(len(tables) + 1, np.int64)
    np.cumsum(n_frag, out=base[1:])
    table = np.concatenate(tables).astype(np.int64) if tables else np.zeros((0, 2), np.int64)
    cell_rows = np.diff(cells.offsets)
    owner_cell = np.repeat(np.arange(len(tables)), n_frag)
    bad = ranges_outside(table[:, 0], table[:, 1], cell_rows[owner_cell]) if len(table) else np.zeros(0, bool)
    if bad.any():
        chunk = ".".join(map(str, cells.chunks[owner_cell[np.argmax(bad)]]))
        raise CorruptCellError(
            _fragments_array(level).path, chunk, "a range fragment lies outside the cell's rows"
        )
    over = np.flatnonzero(frags >= n_frag[cell_of]) if len(frags) else np.zeros(0, np.int64)
    if len(over):
        b = int(over[0])
        raise CorruptCellError(
            level.manifests.path if level.manifests else "object_index",
            str(int(ids[pos[b]])),
            f"manifest names fragment {int(frags[b])} of chunk {frag_chunks[b].tolist()}, "
            f"which has {int(n_frag[cell_of[b]])}",
        )
    g = base[cell_of] + frags
    counts = table[g, 1]
    return ranges_to_rows(table[g, 0] + cells.offsets[cell_of], counts), np.repeat(ids[pos], counts)


def read_objects(
    level: Level, ids: Sequence[int] | np.ndarray, attributes: Sequence[str] | bool | None = None
) -> Result:
    """All vertices of the given objects, grouped by object in the order of ``ids``."""
    ids = np.atleast_1d(np.asarray(ids, dtype=np.int64))
    cells, rows, owners, _ = fetch_objects(level, ids, attribute_names(level, attributes))
    return build_result(level, cells, rows, owners=owners)
