"""Cross-level links between a level and the next coarser one: ``links/+1`` and ``links/-1``.

A record is ``(vertex here, vertex in the other level)`` (``link_width = 2``, directed, no
``perm_idx``), stored in the cell of the chunk of its first endpoint; the offsets name the
other endpoint's chunk relative to the *anchor* ``floor(c * r_here / r_there)`` in the other
level's grid (spec §9.6), and cells are inline ragged blobs. This is the reference
implementation's form. ``+1`` at the fine level gives each fine vertex its coarse parent;
``-1`` at the coarse level lists each coarse vertex's fine children.

Records arrive in batches (:meth:`CrossLevelWriter.add`); each chunk's records must all come
in one batch, since its cell is written when it arrives.
"""

from __future__ import annotations

import numpy as np

from zarr_vectors.engine import CellStream, StoreBuilder
from zarr_vectors.format.grid import Grid
from zarr_vectors.format.links import cross_level_anchor, encode_ragged, format_offsets, parse_offsets

__all__ = ["CrossLevelWriter", "link_dtype"]


def link_dtype(max_rows: int) -> np.dtype:
    """Smallest unsigned dtype for chunk-local indices below ``max_rows`` (spec SHOULD)."""
    for name in ("uint8", "uint16", "uint32"):
        if max_rows - 1 <= np.iinfo(name).max:
            return np.dtype(name)
    return np.dtype("int64")


def _codes(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct rows of an (M, D) integer array (sorted) and each row's index among them."""
    lo = rows.min(axis=0)
    span = rows.max(axis=0) - lo + 1
    flat = np.ravel_multi_index(tuple((rows - lo).T), tuple(int(v) for v in span))
    uniq, inverse = np.unique(flat, return_inverse=True)
    distinct = np.stack(np.unravel_index(uniq, tuple(int(v) for v in span)), axis=1) + lo
    return distinct.reshape(-1, rows.shape[1]), inverse.reshape(-1)


class _Family:
    """One ``<level>/links/<delta>`` family being written."""

    def __init__(self, builder: StoreBuilder, level: int, delta: int, grid: Grid, dtype: np.dtype) -> None:
        self.builder, self.level, self.delta, self.grid, self.dtype = builder, level, delta, grid, dtype
        self.streams: dict[str, CellStream] = {}
        self.count = 0

    @property
    def path(self) -> str:
        return f"{self.level}/links/{self.delta:+d}"

    def add(
        self,
        src_table: np.ndarray,
        src_idx: np.ndarray,
        src_local: np.ndarray,
        dst_table: np.ndarray,
        dst_idx: np.ndarray,
        dst_local: np.ndarray,
        src_ratio: np.ndarray,
        dst_ratio: np.ndarray,
    ) -> None:
        """Store records in the cells of their source chunks (``src_table[src_idx]``), the other
        endpoint in chunk ``dst_table[dst_idx]``. The records of one source chunk must arrive in
        this one call; within a cell they keep their order. One ragged row group per cell."""
        m = len(src_idx)
        if m == 0:
            return
        d = src_table.shape[1]
        anchors = cross_level_anchor(src_table, src_ratio, dst_ratio)
        offsets = dst_table[dst_idx] - anchors[src_idx]
        if np.all(offsets == offsets[0]):
            seg_names, seg_of = offsets[:1], np.zeros(m, np.int64)
        else:
            seg_names, seg_of = _codes(offsets)
        key = seg_of * len(src_table) + src_idx
        cuts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
        if len(np.unique(key[cuts])) != len(cuts):  # a cell's records are not contiguous: sort them
            order = np.argsort(key, kind="stable")
            key = key[order]
            cuts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
        else:
            order = np.arange(m)
        ends = np.append(cuts[1:], m)
        rows = np.stack([src_local[order], dst_local[order]], axis=1)
        for a, b in zip(cuts.tolist(), ends.tolist()):
            segment = format_offsets(seg_names[seg_of[order[a]]].reshape(1, d))
            stream = self.streams.get(segment)
            if stream is None:
                meta = {
                    "zv_array": "links",
                    "dtype": self.dtype.name,
                    "offsets": parse_offsets(segment, 2, d).tolist(),
                    "has_perm": False,
                    "link_width": 2,
                    "level_delta": self.delta,
                }
                stream = self.streams[segment] = self.builder.cell_stream(
                    f"{self.path}/{segment}", self.grid, meta, kind="links"
                )
            cell = src_table[src_idx[order[a]]] - self.grid.origin
            stream.add(cell[None], [encode_ragged([rows[a:b]], self.dtype)])
        self.count += m

    def close(self) -> bool:
        """Register the arrays and the family group; False when nothing was written."""
        if not self.streams:
            return False
        for stream in self.streams.values():
            stream.close()
        self.builder.group(
            self.path,
            {
                "zv_array": "links_family",
                "level_delta": self.delta,
                "link_width": 2,
                "sid_ndim": self.grid.ndim,
                "directed": True,
                "store": "canonical",
                "num_links": self.count,
                "num_physical_records": self.count,
            },
        )
        return True


class CrossLevelWriter:
    """Writes ``fine/links/+1`` (and with ``explicit`` also ``coarse/links/-1``) for one level pair.

    ``fine_ratio`` and ``coarse_ratio`` are the two levels' chunk scales against the root.
    """

    def __init__(
        self,
        builder: StoreBuilder,
        *,
        fine: int,
        coarse: int,
        fine_grid: Grid,
        coarse_grid: Grid,
        fine_ratio: np.ndarray,
        coarse_ratio: np.ndarray,
        dtype: np.dtype,
        explicit: bool,
    ) -> None:
        self.fine_ratio = np.asarray(fine_ratio, np.int64)
        self.coarse_ratio = np.asarray(coarse_ratio, np.int64)
        self.up = _Family(builder, fine, +(coarse - fine), fine_grid, dtype)
        self.down = _Family(builder, coarse, -(coarse - fine), coarse_grid, dtype) if explicit else None

    def add(
        self,
        fine_table: np.ndarray,
        fine_idx: np.ndarray,
        fine_local: np.ndarray,
        coarse_table: np.ndarray,
        coarse_idx: np.ndarray,
        coarse_local: np.ndarray,
    ) -> None:
        """Parent records: fine vertex ``fine_local[i]`` of chunk ``fine_table[fine_idx[i]]``
        belongs to coarse vertex ``coarse_local[i]`` of chunk ``coarse_table[coarse_idx[i]]``
        (absolute chunk coordinates). Every record of a fine (and, with ``-1``, of a coarse)
        chunk must come in one call; they are stored in the order given."""
        self.add_up(fine_table, fine_idx, fine_local, coarse_table, coarse_idx, coarse_local)
        if self.down is not None:
            fi, fl = np.asarray(fine_idx, np.int64), np.asarray(fine_local, np.int64)
            ci, cl = np.asarray(coarse_idx, np.int64), np.asarray(coarse_local, np.int64)
            order = np.lexsort((fl, fi, cl, ci))
            self.add_down(fine_table, fi[order], fl[order], coarse_table, ci[order], cl[order])

    def add_up(
        self,
        fine_table: np.ndarray,
        fine_idx: np.ndarray,
        fine_local: np.ndarray,
        coarse_table: np.ndarray,
        coarse_idx: np.ndarray,
        coarse_local: np.ndarray,
    ) -> None:
        """``+1`` records only, as :meth:`add` takes them: every record of a fine chunk in one
        call, in the order they are to be stored."""
        ft, fi, fl, ct, ci, cl = (
            np.asarray(a, np.int64)
            for a in (fine_table, fine_idx, fine_local, coarse_table, coarse_idx, coarse_local)
        )
        self.up.add(ft, fi, fl, ct, ci, cl, self.fine_ratio, self.coarse_ratio)

    def add_down(
        self,
        fine_table: np.ndarray,
        fine_idx: np.ndarray,
        fine_local: np.ndarray,
        coarse_table: np.ndarray,
        coarse_idx: np.ndarray,
        coarse_local: np.ndarray,
    ) -> None:
        """``-1`` records only (ignored without ``explicit``): every record of a coarse chunk in
        one call, already in stored order (by coarse row, fine chunk, fine row)."""
        if self.down is None:
            return
        ft, fi, fl, ct, ci, cl = (
            np.asarray(a, np.int64)
            for a in (fine_table, fine_idx, fine_local, coarse_table, coarse_idx, coarse_local)
        )
        self.down.add(ct, ci, cl, ft, fi, fl, self.coarse_ratio, self.fine_ratio)

    def close(self) -> tuple[bool, bool]:
        """Finish both families; returns whether ``+1`` and ``-1`` hold records."""
        up = self.up.close()
        down = self.down.close() if self.down is not None else False
        return up, down
