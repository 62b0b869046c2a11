"""Fine-to-coarse parent records, kept compact while a coarse level is built in object batches.

Every fine vertex read in a batch of objects gets a *parent*: the coarse vertex that stands
for it (the kept vertex starting its piece of line, the vertex a mesh vertex collapsed
into). The cross-level links (``links/+1``, ``links/-1``) store these pairs per fine (and
coarse) chunk, but a batch of objects covers parts of many chunks, and a coarse vertex's
place (its chunk and row) is known only once the whole coarse level is written. The pairs
are therefore accumulated as *runs*: consecutive rows ``start .. start + count - 1`` of one
fine chunk, with one parent per run (``per_vertex=False``: lines, skeletons, graphs,
polygons, where a run covers a whole piece of line) or a compact parent per vertex
(``per_vertex=True``: meshes). A run costs 16 bytes (int32 chunk, row, count and parent;
int64 past 2**31), a per-vertex parent 4, instead of the ~40 bytes per fine vertex of plain
arrays. Runs break at least where a line leaves a chunk, so there are about as many as the
fine level has fragments plus the coarse level has vertices.

Invariants: runs never overlap (each fine vertex is read once, in exactly one batch);
parents are coarse vertex numbers in the order the batches produced them (``final`` maps
them to the written level, -1 for a dropped vertex); records are written in the order the
unbatched build wrote them — ``+1`` by (fine chunk, fine row), ``-1`` by (coarse chunk
index, coarse row, fine chunk, fine row) — in groups of whole chunks of about
:data:`EMIT_VERTICES` records, so the links are byte-identical and memory stays bounded.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from zarr_vectors.format.fragments import ranges_to_rows
from zarr_vectors.format.grid import Grid

if TYPE_CHECKING:
    from zarr_vectors.pyramid.batches import Written
    from zarr_vectors.pyramid.xlevel import CrossLevelWriter

__all__ = ["EMIT_VERTICES", "ParentRuns"]

#: Records expanded at once when the links are written (a chunk is never split).
EMIT_VERTICES = 500_000


def _small(values: np.ndarray) -> np.ndarray:
    """``values`` (non-negative integers, or -1) as int32 when they fit, else int64."""
    fits = int(values.max(initial=0)) < 2**31 - 1
    return np.asarray(values).astype(np.int32 if fits else np.int64)


def _groups(counts: np.ndarray) -> Iterator[tuple[int, int]]:
    """Consecutive ``[a, b)`` ranges of ``counts`` summing to about :data:`EMIT_VERTICES`
    (one item alone may exceed it)."""
    cum = np.cumsum(counts)
    a, n = 0, len(counts)
    while a < n:
        base = cum[a - 1] if a else 0
        b = max(int(np.searchsorted(cum, base + EMIT_VERTICES, side="right")), a + 1)
        yield a, min(b, n)
        a = min(b, n)


# (lin, start, count, parent, vertex offsets of the runs or None when not per vertex)
_Runs = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]


@dataclass(eq=False)
class ParentRuns:
    """Parent records of one level pair as runs of fine rows (see the module docstring).

    ``grid`` is the fine level's grid; runs name chunks by their linear cell index in it.
    """

    grid: Grid
    per_vertex: bool
    _lin: list[np.ndarray] = field(default_factory=list)
    _start: list[np.ndarray] = field(default_factory=list)
    _count: list[np.ndarray] = field(default_factory=list)
    _parent: list[np.ndarray] = field(default_factory=list)

    def add(self, chunks: np.ndarray, local: np.ndarray, parent: np.ndarray) -> None:
        """Fine row ``local[i]`` of absolute chunk ``chunks[i]`` has coarse vertex ``parent[i]``."""
        n = len(local)
        if n == 0:
            return
        lin = np.ravel_multi_index(
            tuple((np.asarray(chunks, np.int64) - self.grid.origin).T), tuple(int(s) for s in self.grid.shape)
        )
        brk = np.ones(n, bool)
        brk[1:] = (lin[1:] != lin[:-1]) | (local[1:] != local[:-1] + 1)
        if not self.per_vertex:
            brk[1:] |= parent[1:] != parent[:-1]
        starts = np.flatnonzero(brk)
        self._lin.append(_small(lin[starts]))
        self._start.append(_small(np.asarray(local[starts])))
        self._count.append(_small(np.diff(np.append(starts, n))))
        self._parent.append(_small(np.asarray(parent if self.per_vertex else parent[starts])))

    def _arrays(self) -> _Runs:
        z = np.zeros(0, np.int64)
        cat = lambda parts: np.concatenate(parts) if parts else z  # noqa: E731
        lin, start, count, parent = cat(self._lin), cat(self._start), cat(self._count), cat(self._parent)
        self._lin, self._start, self._count, self._parent = [lin], [start], [count], [parent]
        voff = None
        if self.per_vertex:
            voff = np.zeros(len(count) + 1, np.int64)
            np.cumsum(count, out=voff[1:])
        return lin, start, count, parent, voff

    def _expand(
        self, runs: np.ndarray, arrays: _Runs, final: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(fine lin, fine row, final parent) of every row of ``runs``, run by run."""
        lin, start, count, parent, voff = arrays
        c = count[runs].astype(np.int64)
        rep = np.repeat(runs, c)
        within = ranges_to_rows(np.zeros(len(runs), np.int64), c)
        p = (parent[ranges_to_rows(voff[runs], c)] if voff is not None else parent[rep]).astype(np.int64)
        if final is not None:
            p = final[p]
        return lin[rep].astype(np.int64), start[rep].astype(np.int64) + within, p

    def _table(self, lin: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Distinct absolute chunks of ``lin`` (sorted) and each row's index among them."""
        uniq, idx = np.unique(lin, return_inverse=True)
        table = np.stack(np.unravel_index(uniq, tuple(int(s) for s in self.grid.shape)), axis=1)
        return table.reshape(-1, self.grid.ndim) + self.grid.origin, idx.reshape(-1)

    def emit(self, xl: CrossLevelWriter, out: Written, final: np.ndarray | None) -> None:
        """Write every record whose parent survives (``final``: batch-order coarse vertex ->
        written vertex, -1 dropped; None: the identity) with ``xl``, chunk group by group."""
        arrays = self._arrays()
        lin, start, count = arrays[:3]
        order = np.lexsort((start, lin))
        heads = np.flatnonzero(np.r_[True, lin[order][1:] != lin[order][:-1]]) if len(order) else order
        per_chunk = np.add.reduceat(count[order].astype(np.int64), heads) if len(heads) else heads
        bounds = np.append(heads, len(order))
        for a, b in _groups(per_chunk):
            fl, local, p = self._expand(order[bounds[a] : bounds[b]], arrays, final)
            ok = p >= 0
            if ok.any():
                table, idx = self._table(fl[ok])
                pv = p[ok]
                xl.add_up(table, idx, local[ok], out.chunks, out.cell[pv], out.local[pv])
        if xl.down is not None:
            self._emit_down(xl, out, final, arrays)

    def _emit_down(self, xl: CrossLevelWriter, out: Written, final: np.ndarray | None, arrays: _Runs) -> None:
        """``-1`` records, by groups of whole coarse chunks (indices into ``out.chunks``)."""
        lin, start, count, parent, voff = arrays
        n_cells = len(out.chunks)
        if self.per_vertex:
            per_cell = np.zeros(n_cells + 1, np.int64)
            for a in range(0, len(parent), EMIT_VERTICES):
                cells = _coarse_cell(parent[a : a + EMIT_VERTICES], final, out)
                per_cell += np.bincount(cells, minlength=n_cells + 1)
            run_cell = None
        else:
            run_cell = _coarse_cell(parent, final, out)
            weights = count.astype(np.float64)
            per_cell = np.bincount(run_cell, weights=weights, minlength=n_cells + 1).astype(np.int64)
        for a, b in _groups(per_cell[:n_cells]):
            if run_cell is not None:
                fl, local, p = self._expand(np.flatnonzero((run_cell >= a) & (run_cell < b)), arrays, final)
            else:
                fl, local, p = self._pick_vertices(a, b, arrays, final, out)
            if not len(p):
                continue
            ci, cl = out.cell[p], out.local[p]
            order = np.lexsort((local, fl, cl, ci))
            table, idx = self._table(fl[order])
            xl.add_down(table, idx, local[order], out.chunks, ci[order], cl[order])

    def _pick_vertices(
        self, a: int, b: int, arrays: _Runs, final: np.ndarray | None, out: Written
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(fine lin, fine row, final parent) of the per-vertex records whose coarse cell is in
        ``[a, b)``, scanning the parents slice by slice."""
        lin, start, count, parent, voff = arrays
        assert voff is not None  # only per-vertex runs come here, and they have vertex offsets
        picked = []
        for s in range(0, len(parent), EMIT_VERTICES):
            c = _coarse_cell(parent[s : s + EMIT_VERTICES], final, out)
            picked.append(np.flatnonzero((c >= a) & (c < b)) + s)
        v = np.concatenate(picked) if picked else np.zeros(0, np.int64)
        run = np.searchsorted(voff, v, side="right") - 1
        p = parent[v].astype(np.int64)
        return lin[run].astype(np.int64), start[run] + v - voff[run], final[p] if final is not None else p


def _coarse_cell(parent: np.ndarray, final: np.ndarray | None, out: Written) -> np.ndarray:
    """Index into ``out.chunks`` of each parent's written coarse vertex (``len(out.chunks)``
    for a dropped one)."""
    p = parent.astype(np.int64)
    if final is not None:
        p = final[p]
    return np.where(p >= 0, out.cell[np.maximum(p, 0)], len(out.chunks))
