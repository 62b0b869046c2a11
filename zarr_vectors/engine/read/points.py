"""The point reader: a box query plans its cells (:mod:`.plan`), fetches them in one batch,
decodes each, tests the rows of partly covered cells on the sides that cut them, and copies
the kept rows once into the result; whole objects are read from their fragments
(:mod:`.fetch`)."""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace

import numpy as np

from zarr_vectors.engine.chunks.arrays import CellArray
from zarr_vectors.engine.level import Level
from zarr_vectors.engine.read.fetch import (
    Cells,
    cell_owners,
    fetch_cells,
    fetch_objects,
    fragments_array,
    row_owners,
)
from zarr_vectors.engine.read.keys import KeyBatch
from zarr_vectors.engine.read.plan import (
    BoxPlan,
    CellTests,
    attribute_names,
    cell_tests,
    inside_box,
    plan_box,
    rows_passing,
)
from zarr_vectors.engine.read.where import RowFilter, apply_filter
from zarr_vectors.errors import CorruptCellError
from zarr_vectors.result import Result
from zarr_vectors.storage import Arena, arena, check_workers, map_cells

__all__ = ["AUTO_THREADS_BYTES", "box_batches", "build_result", "query_box", "read_objects"]


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
    """A box query: one batch of reads, then, when neither owners nor a filter are asked and
    every cell decodes straight (plain or zstd vlen cells), :func:`_direct_box`. Otherwise each
    cell is decoded (with the object of each row, when asked) and, when the box covers it
    partly, tested on the sides of the box that cut it, then on ``row_filter`` (``workers``
    cells at a time); then the kept rows are copied once, straight into the result, in chunk
    order. Cells are read and decompressed into a reused arena, which the result never refers
    to."""
    extra = [] if row_filter is None else [n for n in row_filter.vertex_names if n not in names]
    arrays = [level.vertices] + [level.vertex_attributes[n] for n in [*names, *extra]]
    n_out = 1 + len(names)  # columns returned: vertices and the asked attributes (then extra)
    batch = KeyBatch()
    for j, arr in enumerate(arrays):
        batch.add(str(j), arr.keys(chunks))  # sections named by position in ``arrays``
    owners = level.fragment_object_ids if with_ids else None
    if with_ids:
        fragments = fragments_array(level)
        batch.add("fragments", fragments.keys(chunks))
        if owners is not None:
            batch.add("owners", owners.keys(chunks))
    k, d = len(chunks), level.grid.ndim
    widths = [d] + [arr.row_width for arr in arrays[1:n_out]]
    dtypes = [arr.dtype for arr in arrays[:n_out]] + ([np.dtype(np.int64)] if with_ids else [])
    if with_ids:
        widths.append(1)
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
                owners = cell_owners(level, chunks[i], frag_cells[i], table, len(pos))
                cols.append(owners.reshape(-1, 1))
            keep = rows_passing(pos, tests[i])
            if row_filter is not None:
                wanted = set(row_filter.vertex_names)
                named = {n: c for n, c in zip([*names, *extra], cols[1:]) if n in wanted}
                index = None if keep is None else np.flatnonzero(keep)
                keep = _filtered(row_filter, index, len(pos), named, cols[-1] if with_ids else None)
            return cols[:n_out] + cols[len(arrays) :], keep

        if workers is None and sum(len(r) for r in raws if r is not None) < AUTO_THREADS_BYTES:
            workers = 1  # small reads: handing cells to threads costs more than it saves
        if not with_ids and row_filter is None:
            tests_of = functools.partial(cell_tests, level, chunks, n_full, lo, hi)
            whole = _direct_box(
                arrays, columns, chunks, n_full, (lo, hi), tests_of, widths, dtypes, workers, scratch
            )
            if whole is not None:
                return _box_result(level, names, arrays, whole, with_ids)
        tests = cell_tests(level, chunks, n_full, lo, hi)
        cells = map_cells(decode, k, workers)
        sizes = [_kept(cols[0], keep) for cols, keep in cells]
        offsets = np.zeros(k + 1, np.int64)
        np.cumsum(sizes, out=offsets[1:])
        out = [np.empty((int(offsets[-1]), w), dt) for w, dt in zip(widths, dtypes)]

        def copy(i: int) -> None:
            a, b = int(offsets[i]), int(offsets[i + 1])
            cols, keep = cells[i]
            for dst, src in zip(out, cols):
                if keep is None or b - a == len(src):
                    dst[a:b] = src
                elif keep.dtype == bool:
                    np.compress(keep, src, axis=0, out=dst[a:b])
                else:
                    np.take(src, keep, axis=0, out=dst[a:b])

        map_cells(copy, k, workers)
    return _box_result(level, names, arrays, out, with_ids)


def _box_result(
    level: Level, names: list[str], arrays: list[CellArray], out: list[np.ndarray], with_ids: bool
) -> Result:
    """The :class:`Result` of a box's columns ``out``: positions, the asked attributes (in the
    order of ``names``, after ``arrays[0]``), then the owners when ``with_ids``."""
    attrs = {
        n: arr.as_read(col.reshape((-1, *(arr.attrs.get("row_shape") or []))))
        for n, col, arr in zip(names, out[1:], arrays[1 : 1 + len(names)])
    }
    axes = tuple(a.name for a in level.root.axes if a.type == "space")
    return Result(out[0], attrs, out[-1].reshape(-1) if with_ids else None, axes)


#: Rows per partly covered cell (on average) from which :func:`_direct_box` tests each cell on
#: the sides of the box that cut it rather than every row on every side in one pass.
CELL_TEST_ROWS = 4096


def _direct_box(
    arrays: list[CellArray],
    columns: list[list[bytes | memoryview | None]],
    chunks: np.ndarray,
    n_full: int,
    box: tuple[np.ndarray, np.ndarray],
    tests_of: Callable[[], list[CellTests]],
    widths: list[int],
    dtypes: list[np.dtype],
    workers: int | None,
    scratch: Arena,
) -> list[np.ndarray] | None:
    """The columns of a box query whose every cell decodes straight into an array (None when
    one does not): the partly covered cells are decoded into ``scratch`` laid end to end and
    tested, then the wholly covered cells are decoded straight into the result and the kept
    rows copied after them. Small cells are tested together, every row against every side
    of the box in one vectorised pass (a handful of numpy calls per query, not per cell);
    cells of :data:`CELL_TEST_ROWS` rows or more on average each on the sides that cut it
    (``tests_of()``, see :func:`cell_tests`), which for large cells is less work."""
    k = len(chunks)
    sizes = arrays[0].direct_rows_many(columns[0], chunks, widths[0])
    if sizes is None:
        return None
    for arr, column in zip(arrays[1:], columns[1:]):
        other = arr.direct_rows_many(column, chunks)
        if other is None:
            return None
        if other != sizes:
            i = next(i for i, (m, n) in enumerate(zip(other, sizes)) if m != n)
            raise CorruptCellError(
                arr.path, ".".join(map(str, chunks[i])), f"{other[i]} rows but vertices has {sizes[i]}"
            )
    bounds = [0, *itertools.accumulate(sizes)]
    full_rows, part_rows = bounds[n_full], bounds[k] - bounds[n_full]
    staged = [
        np.frombuffer(scratch.take(part_rows * w * dt.itemsize), dt).reshape(part_rows, w)
        for w, dt in zip(widths, dtypes)
    ]

    def decode(into: list[np.ndarray], cells: slice, origin: int) -> None:
        """Cells ``cells`` decoded into ``into``, whose row 0 is the cells' row ``origin``."""
        starts = [b - origin for b in bounds[cells.start : cells.stop + 1]]
        for arr, column, dst in zip(arrays, columns, into):
            arr.rows_to_many(column[cells], chunks[cells], dst, starts)

    def spread(into: list[np.ndarray], first: int, stop: int) -> None:
        """Cells ``first .. stop - 1`` decoded in ``workers`` runs of consecutive cells."""
        if stop <= first:
            return
        w = min(check_workers(workers), stop - first)
        cuts = np.linspace(first, stop, w + 1).astype(int).tolist() if w > 1 else [first, stop]
        map_cells(lambda j: decode(into, slice(cuts[j], cuts[j + 1]), bounds[first]), len(cuts) - 1, w)

    spread(staged, n_full, k)
    n_part = k - n_full
    if n_part and part_rows >= CELL_TEST_ROWS * n_part:
        tests = tests_of()
        keep = np.ones(part_rows, bool)
        for i in range(n_full, k):
            rows = slice(bounds[i] - full_rows, bounds[i + 1] - full_rows)
            passing = rows_passing(staged[0][rows], tests[i])
            if passing is not None:
                keep[rows] = passing
    else:
        keep = inside_box(staged[0], *box)
    # One scan of the mask, then each column gathers only the kept rows (cheaper than
    # ``np.compress``, which scans the whole mask again for every column).
    kept = np.flatnonzero(keep)
    out = [np.empty((full_rows + len(kept), w), dt) for w, dt in zip(widths, dtypes)]
    spread(out, 0, n_full)
    for dst, src in zip(out, staged):
        np.take(src, kept, axis=0, out=dst[full_rows:], mode="clip")  # indices are in range
    return out


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


def read_objects(
    level: Level, ids: Sequence[int] | np.ndarray, attributes: Sequence[str] | bool | None = None
) -> Result:
    """All vertices of the given objects, grouped by object in the order of ``ids``."""
    ids = np.atleast_1d(np.asarray(ids, dtype=np.int64))
    cells, rows, owners, _ = fetch_objects(level, ids, attribute_names(level, attributes))
    return build_result(level, cells, rows, owners=owners)
