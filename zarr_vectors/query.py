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
from .format.fragments import FragmentIndex, decode_fragments, ranges_to_rows
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


def _bin_rows(level: Level, frag: FragmentIndex, chunk: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Rows of the bins the box meets, split into (surely inside, to test); None if bins are unusable."""
    grid = level.grid
    if grid.n_bins == 1 or frag.num_fragments != grid.n_bins or not frag.all_ranges:
        return None
    b_lo, b_hi = grid.bin_span(chunk, lo, hi)
    axes = [np.arange(a, b + 1) for a, b in zip(b_lo, b_hi)]
    mesh = np.meshgrid(*axes, indexing="ij")
    bins = np.ravel_multi_index(tuple(m.ravel() for m in mesh), tuple(grid.bins))
    masks = grid.bins_inside(chunk, lo, hi)
    sure = np.ones(len(bins), bool)
    for ax, m in enumerate(mesh):
        sure &= masks[ax][m.ravel()]
    starts, counts = frag.ranges[bins, 0], frag.ranges[bins, 1]
    return ranges_to_rows(starts[sure], counts[sure]), ranges_to_rows(starts[~sure], counts[~sure])


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
    table = level.fragment_owners.get(tuple(int(c) for c in chunk))
    out = np.full(n_rows, -1, np.int64)
    if table is None:
        return out
    owners = np.full(frag.num_fragments, -1, np.int64)
    m = min(len(table), frag.num_fragments)
    owners[:m] = table[:m]
    ranged = np.flatnonzero(frag.is_range)
    counts = frag.ranges[:, 1]
    out[ranges_to_rows(frag.ranges[:, 0], counts)] = np.repeat(owners[ranged], counts)
    for f in np.flatnonzero(~frag.is_range & (owners >= 0)):
        out[frag.rows(int(f))] = owners[f]
    return out


def _decode_frag(level: Level, raw: bytes | None, chunk: np.ndarray, n_rows: int) -> FragmentIndex:
    assert level.fragments is not None
    data = level.fragments.payload(raw, chunk)
    try:
        return decode_fragments(data, n_rows)
    except DecodeError as exc:
        raise CorruptCellError(level.fragments.path, ".".join(map(str, chunk)), str(exc)) from exc


def query_box(
    level: Level,
    lo: np.ndarray,
    hi: np.ndarray,
    attributes: Sequence[str] | bool | None = None,
    with_object_ids: bool | None = None,
) -> Result:
    """Every vertex with ``lo <= p <= hi`` on all axes, with the asked attributes."""
    plan = plan_box(level, lo, hi)
    names = _attribute_names(level, attributes)
    with_ids = level.manifests is not None if with_object_ids is None else with_object_ids
    chunks = np.concatenate([plan.full, plan.partial])
    n_full = len(plan.full)
    need_frag = level.fragments is not None and (level.grid.n_bins > 1 or with_ids)
    frag_chunks = chunks if with_ids else plan.partial
    arrays = [level.vertices] + [level.vertex_attributes[n] for n in names]
    keys = [a.key(c) for a in arrays for c in chunks]
    if need_frag:
        keys += [level.fragments.key(c) for c in frag_chunks]  # type: ignore[union-attr]
    raws = level.backend.get_many(keys)
    k = len(chunks)
    frag_raws = raws[len(arrays) * k :] if need_frag else []
    frag_at = {i if with_ids else n_full + i: r for i, r in enumerate(frag_raws)}
    out_pos, out_attr, out_ids = [], {n: [] for n in names}, []
    d = level.grid.ndim
    for i, chunk in enumerate(chunks):
        pos = level.vertices.rows(raws[i], chunk, d)
        frag = _decode_frag(level, frag_at[i], chunk, len(pos)) if i in frag_at else None
        if i < n_full:
            rows = None
        else:
            split = _bin_rows(level, frag, chunk, lo, hi) if frag is not None else None
            if split is None:
                cand = np.flatnonzero(np.all((pos >= lo) & (pos <= hi), axis=1))
                rows = cand
            else:
                sure, test = split
                tp = pos[test]
                rows = np.concatenate([sure, test[np.all((tp >= lo) & (tp <= hi), axis=1)]])
            if len(rows) == 0:
                continue
        out_pos.append(pos if rows is None else pos[rows])
        for j, n in enumerate(names, start=1):
            arr = level.vertex_attributes[n]
            vals = arr.rows(raws[j * k + i], chunk)
            if len(vals) != len(pos):
                raise CorruptCellError(arr.path, ".".join(map(str, chunk)), f"{len(vals)} rows but vertices has {len(pos)}")
            vals = vals if rows is None else vals[rows]
            out_attr[n].append(vals)
        if with_ids:
            owners = _owners_of_rows(level, chunk, frag, len(pos)) if frag is not None else np.full(len(pos), -1)
            out_ids.append(owners if rows is None else owners[rows])
    return _assemble(level, out_pos, out_attr, out_ids if with_ids else None)


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
        frag = _decode_frag(level, raws[len(arrays) * k + i], chunk, len(pos))
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
