"""Cross-chunk link cells of an edit: the records homed in rebuilt chunks, and those that point
into them from chunks that stay, with every endpoint row remapped.

A record in ``links/0/<offsets>`` at home chunk ``h`` names a row of ``h`` and of each
``h + offsets[k]``. When any of those chunks is rebuilt (:mod:`.linkcells`), the cell at
``h`` is rewritten: homes are the touched chunks and every touched chunk minus each offset.
At a rebuilt home, the kept records of the store and the new objects' records of the
scratch store are put in the order a one-shot write gives (ascending final object id,
each object's records in their order); elsewhere the records keep their order and only
the rows that point into rebuilt chunks change. ``perm_idx`` codes stay: an object's rows
keep their relative order inside a chunk, so the canonical order of a record's endpoints
does not change.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from zarr_vectors.engine.chunks.arrays import CellArray, LinkArray
from zarr_vectors.engine.level import Level
from zarr_vectors.engine.write.linkcells import MergedCell, cross_records
from zarr_vectors.errors import InputError

__all__ = ["CrossCell", "CrossCells", "cross_cells"]


@dataclass(eq=False)
class CrossCell:
    """The final records of one cross-chunk link cell (no records: the cell goes)."""

    rows: np.ndarray  # (M, W) endpoint rows in stored order
    perm: np.ndarray | None
    values: dict[str, np.ndarray]


@dataclass(eq=False)
class CrossCells:
    """Rewritten cells per links segment, the link arrays describing each segment, and the
    change in the number of records."""

    cells: dict[str, dict[int, CrossCell]] = field(default_factory=dict)
    arrays: dict[str, LinkArray] = field(default_factory=dict)
    value_arrays: dict[str, dict[str, CellArray]] = field(default_factory=dict)
    delta: int = 0


def _homes(touched: np.ndarray, offsets: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Linear home cells whose records may point into ``touched``: the touched cells and each
    touched cell minus every offset of the segment (inside the grid)."""
    cells = np.stack(np.unravel_index(touched, shape), axis=1).reshape(-1, len(shape))
    out = [touched]
    for off in np.asarray(offsets, np.int64).reshape(-1, len(shape)):
        home = cells - off
        ok = np.all((home >= 0) & (home < np.asarray(shape)), axis=1)
        if ok.any():
            out.append(np.ravel_multi_index(tuple(home[ok].T), shape))
    return np.unique(np.concatenate(out))


def _read(
    level: Level | None, seg: str, homes: np.ndarray
) -> tuple[dict[int, tuple[np.ndarray, np.ndarray | None]], dict[str, dict[int, np.ndarray]]]:
    """Records (rows, perm) and edge values of the listed cells among ``homes`` of one segment."""
    if level is None or seg not in level.links:
        return {}, {}
    arr = level.links[seg]
    grid = level.grid
    shape = tuple(int(s) for s in grid.shape)
    homes = homes[np.isin(homes, arr.listed_ids(grid))]
    chunks = np.stack(np.unravel_index(homes, shape), axis=1).reshape(-1, grid.ndim) + grid.origin
    vals = {n: fam[seg] for n, fam in level.link_attributes.items() if seg in fam}
    arrays: list[CellArray] = [arr, *vals.values()]
    k = len(chunks)
    raws = level.backend.get_many([a.key(c) for a in arrays for c in chunks]) if k else []
    recs: dict[int, tuple[np.ndarray, np.ndarray | None]] = {}
    values: dict[str, dict[int, np.ndarray]] = {n: {} for n in vals}
    for i, (h, ch) in enumerate(zip(homes.tolist(), chunks)):
        recs[h] = cross_records(arr.payload(raws[i], ch), arr.link_width, arr.has_perm, arr.dtype)
        for j, (n, va) in enumerate(vals.items()):
            width = int(np.prod(va.attrs.get("row_shape") or [1]))
            values[n][h] = va.rows(raws[(1 + j) * k + i], ch, width).copy()
    return recs, values


def _remap(
    rows: np.ndarray,
    home: np.ndarray,
    offsets: np.ndarray,
    merged: dict[int, MergedCell],
    src: int,
    shape: tuple[int, ...],
) -> np.ndarray:
    """Endpoint rows after the rebuild (-1 where the row's object goes)."""
    out = rows.copy()
    for k in range(rows.shape[1]):
        cell = home if k == 0 else home + offsets[k - 1]
        if np.any(cell < 0) or np.any(cell >= np.asarray(shape)):
            raise InputError("a cross-chunk link points outside the chunk grid")
        lin = int(np.ravel_multi_index(tuple(int(c) for c in cell), shape))
        m = merged.get(lin)
        if m is not None:
            out[:, k] = m.row_map[src][rows[:, k]]
        elif src == 1:
            raise InputError("a new object's link points into a chunk the edit does not rebuild")
    return out


def cross_cells(
    level: Level, new: Level | None, merged: dict[int, MergedCell], touched: np.ndarray
) -> CrossCells:
    """Every cross-chunk link cell the edit rewrites, per segment."""
    shape = tuple(int(s) for s in level.grid.shape)
    out = CrossCells()
    segs = {s: a for lv in (new, level) if lv is not None for s, a in lv.links.items() if not a.intra}
    for seg, ref in sorted(segs.items()):
        offsets = np.asarray(ref.offsets, np.int64).reshape(-1, level.grid.ndim)
        homes = _homes(touched, offsets, shape)
        old, old_vals = _read(level, seg, homes)
        fresh, new_vals = _read(new, seg, homes)
        out.arrays[seg] = ref
        out.value_arrays[seg] = {
            n: fam[seg]
            for lv in (new, level)
            if lv is not None
            for n, fam in lv.link_attributes.items()
            if seg in fam
        }
        cells: dict[int, CrossCell] = {}
        for h in sorted(set(old) | set(fresh)):
            home = np.asarray(np.unravel_index(h, shape), np.int64)
            rows_l, perm_l, obj_l = [], [], []
            vals_l: dict[str, list[np.ndarray]] = {n: [] for n in out.value_arrays[seg]}
            before = 0
            for src, (recs, vals) in enumerate([(old, old_vals), (fresh, new_vals)]):
                if h not in recs:
                    continue
                rows, perm = recs[h]
                before += len(rows) if src == 0 else 0
                mapped = _remap(rows, home, offsets, merged, src, shape)
                keep = np.all(mapped >= 0, axis=1)
                rows_l.append(mapped[keep])
                perm_l.append(None if perm is None else perm[keep])
                for n in vals_l:
                    if n in vals:
                        vals_l[n].append(vals[n][h][keep])
                m = merged.get(h)
                obj_l.append(
                    m.data.row_owner[mapped[keep, 0]]
                    if m is not None
                    else np.zeros(int(keep.sum()), np.int64)
                )
            rows = np.concatenate(rows_l)
            order = np.argsort(np.concatenate(obj_l), kind="stable")
            perms = [p for p in perm_l if p is not None]
            cells[h] = CrossCell(
                rows[order],
                np.concatenate(perms)[order] if perms else None,
                {n: np.concatenate(v)[order] for n, v in vals_l.items() if v},
            )
            out.delta += len(rows) - before
        out.cells[seg] = cells
    return out
