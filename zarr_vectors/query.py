"""Bounding-box and object reads of vertex data: plan the cells, fetch them in one batch, decode.

The planner is pure: from the level's grid and ``nonempty_chunks`` it decides
which chunks a box touches, which of them it covers wholly (every row is a
hit, no test needed) and which partly (only the rows of the bins the box meets
are tested). Fragment indices are fetched for partly covered chunks only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .errors import CorruptCellError, DecodeError, InputError
from ._arrays import CellArray
from .format.fragments import FragmentIndex, decode_fragments, decode_range_table, ranges_to_rows
from .level import Level
from .result import Result

__all__ = ["BoxPlan", "plan_box", "query_box", "read_objects"]


@dataclass(frozen=True, eq=False)
class BoxPlan:
    """Chunks (absolute coords) a box needs: ``full`` are wholly inside it, ``partial`` cut by it."""

    lo: np.ndarray
    hi: np.ndarray
    full: np.ndarray  # (K1, D)
    partial: np.ndarray  # (K2, D)


def parse_box(bbox: object, ndim: int) -> tuple[np.ndarray, np.ndarray]:
    try:
        lo, hi = bbox  # type: ignore[misc]
        lo = np.broadcast_to(np.asarray(lo, np.float64), (ndim,)).copy()
        hi = np.broadcast_to(np.asarray(hi, np.float64), (ndim,)).copy()
    except (TypeError, ValueError) as exc:
        raise InputError(f"bbox must be (lo, hi) with {ndim} numbers each, got {bbox!r}") from exc
    if np.any(np.isnan(lo)) or np.any(np.isnan(hi)):
        raise InputError(f"bbox contains NaN: {bbox!r}")
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


def _attribute_names(level: Level, attributes: Sequence[str] | bool | None) -> list[str]:
    if attributes is None or attributes is True:
        return list(level.vertex_attributes)
    if attributes is False:
        return []
    names = [attributes] if isinstance(attributes, str) else list(attributes)
    unknown = [n for n in names if n not in level.vertex_attributes]
    if unknown:
        raise KeyError(f"unknown vertex attributes {unknown}; level {level.index} has {sorted(level.vertex_attributes)}")
    return names


def _owners_of_rows(level: Level, chunk: np.ndarray, frag: FragmentIndex, n_rows: int) -> np.ndarray:
    """Object id of every row of a chunk (-1 for rows no object claims)."""
    grid = level.grid
    lin = int(np.ravel_multi_index(tuple(np.asarray(chunk) - grid.origin), tuple(int(s) for s in grid.shape)))
    owners = level.fragment_owners.of_cell(lin, frag.num_fragments)
    out = np.full(n_rows, -1, np.int64)
    ranged = np.flatnonzero(frag.is_range)
    counts = frag.ranges[:, 1]
    out[ranges_to_rows(frag.ranges[:, 0], counts)] = np.repeat(owners[ranged], counts)
    for f in np.flatnonzero(~frag.is_range & (owners >= 0)):
        out[frag.rows(int(f))] = owners[f]
    return out


def _decode_frag(level: Level, data: memoryview, chunk: np.ndarray, n_rows: int) -> FragmentIndex:
    assert level.fragments is not None
    try:
        return decode_fragments(data, n_rows)
    except DecodeError as exc:
        raise CorruptCellError(level.fragments.path, ".".join(map(str, chunk)), str(exc)) from exc


def _partial_rows(
    level: Level, chunks: np.ndarray, frag_payloads: list[memoryview | None], offsets: np.ndarray,
    lo: np.ndarray, hi: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Rows (indices into the concatenated cells) of partly covered chunks: (surely inside, to test).

    With a usable per-bin fragment index only the bins the box meets are taken;
    bins it covers wholly need no test. Otherwise every row of the chunk is tested.
    """
    grid = level.grid
    counts = np.diff(offsets)
    tables, binned, whole = [], [], []
    for i, payload in enumerate(frag_payloads):
        table = None if payload is None else decode_range_table(payload, grid.n_bins)
        if table is None and payload is not None:
            _decode_frag(level, payload, chunks[i], int(counts[i]))  # raises if corrupt
        if table is None:
            whole.append(i)
            continue
        tables.append(table)
        binned.append(i)
    whole_idx = np.asarray(whole, np.int64)
    test = [ranges_to_rows(offsets[whole_idx], counts[whole_idx])]
    sure = []
    if binned:
        idx = np.asarray(binned, np.int64)
        table = np.stack(tables)  # (K, F, 2)
        bad = (table.min(axis=(1, 2)) < 0) | ((table[:, :, 0] + table[:, :, 1]).max(axis=1) > counts[idx])
        if bad.any():
            assert level.fragments is not None
            chunk = ".".join(map(str, chunks[idx[np.argmax(bad)]]))
            raise CorruptCellError(level.fragments.path, chunk, "a range fragment lies outside the cell's rows")
        touched, inside = grid.box_bins(chunks[idx], lo, hi)
        starts = table[:, :, 0] + offsets[idx][:, None]
        for mask, out in ((touched & inside, sure), (touched & ~inside, test)):
            out.append(ranges_to_rows(starts[mask], table[:, :, 1][mask]))
    cat = lambda parts: np.concatenate(parts) if parts else np.zeros(0, np.int64)  # noqa: E731
    return cat(sure), cat(test)


def query_box(
    level: Level,
    lo: np.ndarray,
    hi: np.ndarray,
    attributes: Sequence[str] | bool | None = None,
    with_object_ids: bool | None = None,
) -> Result:
    """Every vertex with ``lo <= p <= hi`` on all axes, with the asked attributes.

    One batch fetches the vertex and attribute cells of every chunk the box
    touches, plus fragment indices where they are needed (partly covered chunks,
    or every chunk when object ids are asked for).
    """
    plan = plan_box(level, lo, hi)
    names = _attribute_names(level, attributes)
    with_ids = level.manifests is not None if with_object_ids is None else with_object_ids
    chunks = np.concatenate([plan.full, plan.partial])
    n_full, k = len(plan.full), len(chunks)
    frags = level.fragments
    use_bins = frags is not None and level.grid.n_bins > 1
    frag_idx = np.arange(k) if (with_ids and frags is not None) else np.arange(n_full, k) if use_bins else np.arange(0)
    arrays = [level.vertices] + [level.vertex_attributes[n] for n in names]
    keys = [k for a in arrays for k in a.keys(chunks)]
    if len(frag_idx):
        keys += frags.keys(chunks[frag_idx])  # type: ignore[union-attr]
    raws = level.backend.get_many(keys)
    d = level.grid.ndim
    cells = [level.vertices.rows(raws[i], chunks[i], d) for i in range(k)]
    offsets = np.zeros(k + 1, np.int64)
    np.cumsum([len(c) for c in cells], out=offsets[1:])
    frag_payloads: dict[int, memoryview] = {}
    for j, i in enumerate(frag_idx):
        frag_payloads[int(i)] = frags.payload(raws[len(arrays) * k + j], chunks[i])  # type: ignore[union-attr]
    positions = np.concatenate(cells) if cells else np.zeros((0, d), level.vertices.dtype)
    rows: np.ndarray | None = None
    if len(plan.partial):
        sure, test = _partial_rows(
            level, plan.partial, [frag_payloads.get(n_full + i) if use_bins else None for i in range(len(plan.partial))],
            offsets[n_full:], lo, hi,
        )  # fmt: skip
        tp = positions[test]
        hit = test[np.all((tp >= lo) & (tp <= hi), axis=1)]
        rows = np.sort(np.concatenate([ranges_to_rows(offsets[:n_full], np.diff(offsets[: n_full + 1])), sure, hit]))
    out_attrs = {}
    for j, n in enumerate(names, start=1):
        arr = level.vertex_attributes[n]
        parts = [arr.rows(raws[j * k + i], chunks[i]) for i in range(k)]
        for i, part in enumerate(parts):
            if len(part) != len(cells[i]):
                raise CorruptCellError(arr.path, ".".join(map(str, chunks[i])), f"{len(part)} rows but vertices has {len(cells[i])}")
        out_attrs[n] = _take(np.concatenate(parts) if parts else np.zeros((0, arr.row_width), arr.dtype), rows, arr)
    object_ids = None
    if with_ids:
        owners = []
        for i in range(k):
            payload = frag_payloads.get(i)
            frag = _decode_frag(level, payload, chunks[i], len(cells[i])) if payload is not None else None
            owners.append(_owners_of_rows(level, chunks[i], frag, len(cells[i])) if frag is not None else np.full(len(cells[i]), -1, np.int64))
        object_ids = np.concatenate(owners) if owners else np.zeros(0, np.int64)
        object_ids = object_ids if rows is None else object_ids[rows]
    return Result(
        positions if rows is None else positions[rows], out_attrs, object_ids,
        tuple(a.name for a in level.root.axes if a.type == "space"),
    )  # fmt: skip


def _take(values: np.ndarray, rows: np.ndarray | None, arr: CellArray) -> np.ndarray:
    shape = tuple(arr.attrs.get("row_shape") or [])
    values = values if rows is None else values[rows]
    return values.reshape((-1, *shape))


def _assemble(level: Level, pos: list[np.ndarray], attrs: dict[str, list[np.ndarray]], ids: list[np.ndarray] | None) -> Result:
    d = level.grid.ndim
    dtype = level.vertices.dtype
    positions = np.concatenate(pos) if pos else np.zeros((0, d), dtype)
    out_attrs = {}
    for n, parts in attrs.items():
        arr = level.vertex_attributes[n]
        shape = tuple(arr.attrs.get("row_shape") or [])
        if parts:
            cat = np.concatenate(parts)
        else:
            cat = np.zeros((0, arr.row_width), arr.dtype)
        out_attrs[n] = cat.reshape((-1, *shape))
    object_ids = None
    if ids is not None:
        object_ids = np.concatenate(ids).astype(np.int64) if ids else np.zeros(0, np.int64)
    return Result(positions, out_attrs, object_ids, tuple(a.name for a in level.root.axes if a.type == "space"))


def read_objects(level: Level, ids: Sequence[int] | np.ndarray, attributes: Sequence[str] | bool | None = None) -> Result:
    """All vertices of the given objects (in the order of ``ids``), through their manifests."""
    ids = np.atleast_1d(np.asarray(ids, dtype=np.int64))
    names = _attribute_names(level, attributes)
    manifests = level.read_manifests(ids)
    chunk_set = sorted({b.chunk for blocks in manifests for b in blocks})
    chunks = np.asarray(chunk_set, np.int64).reshape(-1, level.grid.ndim)
    arrays = [level.vertices] + [level.vertex_attributes[n] for n in names]
    assert level.fragments is not None
    keys = [a.key(c) for a in arrays for c in chunks] + [level.fragments.key(c) for c in chunks]
    raws = level.backend.get_many(keys)
    k = len(chunks)
    d = level.grid.ndim
    cells = {}
    for i, chunk in enumerate(chunks):
        pos = level.vertices.rows(raws[i], chunk, d)
        frag = _decode_frag(level, level.fragments.payload(raws[len(arrays) * k + i], chunk), chunk, len(pos))
        vals = [a.rows(raws[j * k + i], chunk) for j, a in enumerate(arrays[1:], start=1)]
        cells[chunk_set[i]] = (pos, frag, vals)
    out_pos, out_attr, out_ids = [], {n: [] for n in names}, []
    for oid, blocks in zip(ids.tolist(), manifests):
        for b in blocks:
            pos, frag, vals = cells[b.chunk]
            if len(b.fragments) and b.fragments.max() >= frag.num_fragments:
                raise CorruptCellError(
                    level.manifests.path if level.manifests else "object_index", str(oid),
                    f"manifest names fragment {int(b.fragments.max())} of chunk {b.chunk}, which has {frag.num_fragments}",
                )  # fmt: skip
            rows = frag.rows_of(b.fragments)
            out_pos.append(pos[rows])
            for n, v in zip(names, vals):
                out_attr[n].append(v[rows])
            out_ids.append(np.full(len(rows), oid, np.int64))
    return _assemble(level, out_pos, out_attr, out_ids)
