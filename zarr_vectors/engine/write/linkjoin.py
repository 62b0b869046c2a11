"""Cross-chunk link records in bounded memory: endpoints resolved to chunk rows, joined at home.

A record (an edge, a face) whose endpoints lie in different chunks is stored in its *home*
chunk (where the placement policy puts it: the smallest endpoint chunk of a canonical
record, the source chunk of a directed edge) and names each endpoint by its row in that
endpoint's own chunk, which is known only once every row of that chunk is in. So each
endpoint waits as a *request* keyed by its own chunk; while the writer encodes a group of
whole chunks it :meth:`LinkJoin.resolve` s their requests to rows, which wait keyed by the
home chunk; :meth:`LinkJoin.records` then joins the endpoints of every record of a range of
home chunks. Both waits are :class:`~zarr_vectors.engine.write.spill.CellSpill` s, so memory
stays near their limit whatever the number of records.

Invariant: a record is known by a number unique in the level (its position in the one-shot
writer's record order), and :meth:`records` returns records in that order.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import numpy as np

from zarr_vectors.engine.write.spill import CellSpill
from zarr_vectors.errors import ZarrVectorsError

__all__ = ["LinkJoin"]


class LinkJoin:
    """Records of ``width`` endpoints, each endpoint a vertex number and its linear cell."""

    def __init__(
        self, width: int, limit: int | None, folder: str | os.PathLike[str] | None, workers: int = 1
    ) -> None:
        self.width = width
        self.requests = CellSpill(limit, folder, workers)
        self.resolved = CellSpill(limit, folder, workers)
        #: Records added so far.
        self.count = 0
        self._finished = False

    def add(self, record: np.ndarray, vertex: np.ndarray, cell: np.ndarray, home: np.ndarray) -> None:
        """Queue M records: ``record`` (M,) their numbers, ``vertex`` and ``cell`` (M, width) the
        vertex number and linear cell of each endpoint, ``home`` (M,) the linear home cell."""
        m, w = len(record), self.width
        if not m:
            return
        self.requests.add(
            np.asarray(cell, np.int64).reshape(-1),
            {
                "record": np.repeat(np.asarray(record, np.int64), w),
                "slot": np.tile(np.arange(w, dtype=np.uint8), m),
                "vertex": np.asarray(vertex, np.int64).reshape(-1),
                "home": np.repeat(np.asarray(home, np.int64), w),
            },
        )
        self.count += m

    def resolve(self, lo: int, hi: int, vertex: np.ndarray, cell: np.ndarray, local: np.ndarray) -> None:
        """Resolve the requests of cells ``lo <= cell < hi``: ``vertex`` (ascending) numbers every
        row of those cells, ``cell`` and ``local`` give each one's linear cell and row there.
        Call after the last :meth:`add` (the first call finishes the requests)."""
        self.finish_requests()
        self.take(self.resolved_rows(lo, hi, vertex, cell, local))

    def finish_requests(self) -> None:
        """End the requests (no :meth:`add` after this); :meth:`resolved_rows` needs it."""
        if not self._finished:
            self.requests.finish()
            self._finished = True

    def resolved_rows(
        self, lo: int, hi: int, vertex: np.ndarray, cell: np.ndarray, local: np.ndarray
    ) -> tuple[np.ndarray, dict[str, np.ndarray]] | None:
        """:meth:`resolve`'s rows for :meth:`take`, computed without changing this join (so any
        thread may call it for its own cells once :meth:`finish_requests` ran): the home cell
        of each resolved endpoint and its columns; None when those cells have no requests."""
        if not self._finished:
            raise ZarrVectorsError("finish_requests() must come before resolving endpoints")
        rows = self.requests.read(lo, hi)
        if not rows or not len(rows["vertex"]):
            return None
        at = np.searchsorted(vertex, rows["vertex"])
        at = np.minimum(at, max(len(vertex) - 1, 0))
        if not len(vertex) or np.any(vertex[at] != rows["vertex"]):
            raise ZarrVectorsError(f"a link names a vertex that is not in its chunk (cells {lo}..{hi})")
        columns = {"record": rows["record"], "slot": rows["slot"], "local": local[at], "cell": cell[at]}
        return rows["home"], columns

    def take(self, resolved: tuple[np.ndarray, dict[str, np.ndarray]] | None) -> None:
        """Queue endpoints from :meth:`resolved_rows` by home cell (one thread at a time; the
        order of calls does not matter: :meth:`records` orders by record and slot)."""
        if resolved is not None:
            self.resolved.add(*resolved)

    def groups(self, max_records: int) -> Iterator[tuple[int, int]]:
        """Ranges of home cells holding about ``max_records`` records each (after every resolve)."""
        self.resolved.finish()
        yield from self.resolved.groups(max_records * self.width)

    def records(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The records of home cells ``lo <= cell < hi`` in record order: numbers (M,), linear
        cells (M, width) and chunk rows (M, width) of their endpoints."""
        rows = self.resolved.read(lo, hi)
        w = self.width
        if not rows or not len(rows["record"]):
            return np.zeros(0, np.int64), np.zeros((0, w), np.int64), np.zeros((0, w), np.int64)
        order = np.lexsort((rows["slot"], rows["record"]))
        if len(order) % w:
            raise ZarrVectorsError(f"link records of cells {lo}..{hi} lack endpoints")
        record = rows["record"][order].reshape(-1, w)
        if np.any(record != record[:, :1]):
            raise ZarrVectorsError(f"link records of cells {lo}..{hi} lack endpoints")
        return record[:, 0], rows["cell"][order].reshape(-1, w), rows["local"][order].reshape(-1, w)

    def close(self) -> None:
        """Forget every record and remove the spill folders."""
        self.requests.close()
        self.resolved.close()
