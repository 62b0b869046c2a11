"""Level-0 cells of a linked store (lines, skeletons, graphs, raw meshes) merged object by object.

The one-shot writers of linked kinds store a chunk's rows object by object, in ascending
object id, each object's rows in an order that depends on that object alone; a chunk's
fragments tile its rows in that order (one object each), its intra-chunk link records
follow their first endpoint's fragment, and the cross-chunk records of a home chunk
follow the record order, again object by object. So the final content of a chunk an edit
touches is the concatenation, in ascending final object id, of each surviving object's
blocks: the kept objects' blocks from the store, the new objects' blocks from a scratch
store the kind's own writer wrote with the same grid. :class:`CellMerge` builds those
cells and the row and fragment maps (old or scratch chunk row -> final chunk row) that
every record pointing into a rebuilt chunk is remapped with.

Invariant (checked): every cell's fragments are ranges tiling its rows in order, each
owned by one object; a store with several bins per chunk is refused.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from zarr_vectors.engine.chunks.arrays import CellArray
from zarr_vectors.engine.level import Level
from zarr_vectors.errors import InputError
from zarr_vectors.format.fragments import FragmentIndex, decode_fragments, encode_fragments
from zarr_vectors.format.links import decode_flat_rows, decode_ragged

__all__ = [
    "CellData",
    "CellMerge",
    "MergedCell",
    "cross_records",
    "fragment_payload",
    "read_cells",
    "tile_ranges",
]


@dataclass(eq=False)
class CellData:
    """One chunk of one source: rows, fragments and their final owners, intra-chunk links."""

    positions: np.ndarray
    attributes: dict[str, np.ndarray]
    ranges: np.ndarray  # (F, 2) start, count
    owner: np.ndarray  # (F,) final OID of each fragment, -1 where the object goes
    intra: np.ndarray  # (M, W) intra-chunk records, chunk rows
    intra_counts: np.ndarray  # (F,) intra records per fragment (link_fragments)
    intra_values: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def row_owner(self) -> np.ndarray:
        return np.repeat(self.owner, self.ranges[:, 1]) if len(self.ranges) else np.zeros(0, np.int64)


@dataclass(eq=False)
class MergedCell:
    """A rebuilt chunk: its payload columns and the maps from each source's rows and fragments."""

    data: CellData
    row_map: list[np.ndarray]  # per source: source row -> final row, -1 where dropped
    frag_map: list[np.ndarray]  # per source: source fragment -> final fragment, -1 where dropped


def tile_ranges(index: FragmentIndex, n_rows: int, where: str) -> np.ndarray:
    """The (F, 2) ranges of a fragment index that tiles ``n_rows`` rows in order."""
    if not index.all_ranges:
        raise InputError(f"{where}: its fragments are not row ranges, which edits cannot rebuild")
    ranges = index.ranges.reshape(-1, 2).astype(np.int64)
    starts = np.cumsum(ranges[:, 1]) - ranges[:, 1]
    if int(ranges[:, 1].sum()) != n_rows or not np.array_equal(ranges[:, 0], starts):
        raise InputError(f"{where}: its fragments do not tile its rows in order, which edits cannot rebuild")
    return ranges


def read_cells(
    level: Level, lins: np.ndarray, oid_final: np.ndarray, intra_path: str | None
) -> dict[int, CellData]:
    """The listed cells among ``lins`` (linear) of ``level``; ``oid_final`` maps its OIDs to final
    OIDs (-1: the object goes). ``intra_path`` is the intra-chunk links segment (None: none)."""
    grid = level.grid
    shape = tuple(int(s) for s in grid.shape)
    listed = np.ravel_multi_index(tuple((level.vertices.nonempty - grid.origin).T), shape)
    lins = np.asarray(lins, np.int64)
    lins = lins[np.isin(lins, listed)]
    chunks = np.stack(np.unravel_index(lins, shape), axis=1).reshape(-1, grid.ndim) + grid.origin
    assert level.fragments is not None
    names = sorted(level.vertex_attributes)
    intra = level.links.get(intra_path) if intra_path else None
    values = {n: fam[intra_path] for n, fam in level.link_attributes.items() if intra_path in fam}
    arrays = [level.vertices, level.fragments, *(level.vertex_attributes[n] for n in names)]
    if intra is not None:
        assert level.link_fragments is not None
        arrays += [intra, level.link_fragments, *values.values()]
    k = len(chunks)
    raws = level.backend.get_many([a.key(ch) for a in arrays for ch in chunks]) if k else []
    owners = level.fragment_owners
    out: dict[int, CellData] = {}
    for i, (lin, ch) in enumerate(zip(lins.tolist(), chunks)):
        pos = level.vertices.rows(raws[i], ch, grid.ndim)
        n = len(pos)
        where = f"{level.fragments.path} chunk {'.'.join(map(str, ch))}"
        ranges = tile_ranges(decode_fragments(level.fragments.payload(raws[k + i], ch), n), n, where)
        oids = owners.of_cell(lin, len(ranges))
        if np.any(oids < 0):
            raise InputError(f"{where}: a fragment no manifest names, which edits cannot place")
        attrs = {}
        for j, name in enumerate(names):
            arr = level.vertex_attributes[name]
            width = int(np.prod(arr.attrs.get("row_shape") or [1]))
            attrs[name] = arr.rows(raws[(2 + j) * k + i], ch, width).copy()
        width = 2 if intra is None else intra.link_width
        records = np.zeros((0, width), np.int64)
        counts = np.zeros(len(ranges), np.int64)
        ivals: dict[str, np.ndarray] = {}
        base = (2 + len(names)) * k
        if intra is not None and intra.is_listed(ch):
            assert level.link_fragments is not None
            records = np.asarray(
                decode_flat_rows(intra.payload(raws[base + i], ch), intra.row_width, intra.dtype), np.int64
            )
            lf = decode_fragments(level.link_fragments.payload(raws[base + k + i], ch), len(records))
            lranges = tile_ranges(lf, len(records), f"{level.link_fragments.path} chunk {ch.tolist()}")
            counts[: len(lranges)] = lranges[:, 1]
            for j, (name, arr) in enumerate(values.items()):
                ivals[name] = arr.rows(raws[base + (2 + j) * k + i], ch, _width(arr)).copy()
        out[lin] = CellData(pos.copy(), attrs, ranges, oid_final[oids], records, counts, ivals)
    return out


def _width(arr: CellArray) -> int:
    attrs = arr.attrs
    return int(np.prod(attrs.get("row_shape") or [1]))


def cross_records(
    raw_payload: memoryview, width: int, has_perm: bool, dtype: np.dtype
) -> tuple[np.ndarray, np.ndarray | None]:
    """Endpoint rows (M, width) and perm codes of one cross-chunk link cell payload."""
    rows, _ = decode_ragged(raw_payload, width + int(has_perm), dtype)
    rows = np.asarray(rows, np.int64)
    return (rows[:, 1:], rows[:, 0]) if has_perm else (rows, None)


class CellMerge:
    """Merge the cells of several sources (the store, then the scratch store) chunk by chunk."""

    def __init__(self, attribute_names: list[str], value_names: list[str], width: int) -> None:
        self.names, self.value_names, self.width = attribute_names, value_names, width

    def merge(self, parts: list[CellData | None], ndim: int, pdtype: np.dtype) -> MergedCell:
        """One chunk from each source's cell (None: the source has none there)."""
        frag_src, frag_idx, frag_owner = [], [], []
        for s, part in enumerate(parts):
            if part is None:
                continue
            keep = np.flatnonzero(part.owner >= 0)
            frag_src.append(np.full(len(keep), s))
            frag_idx.append(keep)
            frag_owner.append(part.owner[keep])
        src = np.concatenate(frag_src) if frag_src else np.zeros(0, np.int64)
        idx = np.concatenate(frag_idx) if frag_idx else np.zeros(0, np.int64)
        owner = np.concatenate(frag_owner) if frag_owner else np.zeros(0, np.int64)
        order = np.argsort(owner, kind="stable")  # objects ascending, each one's fragments in order
        src, idx, owner = src[order], idx[order], owner[order]
        row_map = [np.zeros(0, np.int64) for _ in parts]
        frag_map = [np.zeros(0, np.int64) for _ in parts]
        counts = np.zeros(len(src), np.int64)
        for s, part in enumerate(parts):
            if part is None:
                continue
            mine = src == s
            counts[mine] = part.ranges[idx[mine], 1]
        starts = np.cumsum(counts) - counts
        rec_parts, cnt = [], np.zeros(len(src), np.int64)
        val_parts: dict[str, list[np.ndarray]] = {n: [] for n in self.value_names}
        for s, part in enumerate(parts):
            if part is None:
                continue
            mine = np.flatnonzero(src == s)
            fmap = np.full(len(part.ranges), -1, np.int64)
            fmap[idx[mine]] = mine
            frag_map[s] = fmap
            rmap = np.full(len(part.positions), -1, np.int64)
            old_rows = _expand(part.ranges[idx[mine], 0], counts[mine])
            rmap[old_rows] = _expand(starts[mine], counts[mine])
            row_map[s] = rmap
        total = int(counts.sum())
        positions = np.zeros((total, ndim), pdtype)
        attrs: dict[str, np.ndarray] = {}
        for s, part in enumerate(parts):
            if part is None:
                continue
            rmap = row_map[s]
            kept = rmap >= 0
            positions[rmap[kept]] = part.positions[kept]
            for n in self.names:
                col = part.attributes[n]
                if n not in attrs:
                    attrs[n] = np.zeros((total, *col.shape[1:]), col.dtype)
                attrs[n][rmap[kept]] = col[kept]
        # Intra-chunk records follow their fragment, fragment by fragment in the final order.
        rec_frag: list[np.ndarray] = []
        for s, part in enumerate(parts):
            if part is None or not len(part.intra):
                continue
            frag = frag_map[s][np.repeat(np.arange(len(part.intra_counts)), part.intra_counts)]
            kept = frag >= 0
            rec_frag.append(frag[kept])
            rec_parts.append(row_map[s][part.intra[kept]])
            for n in self.value_names:
                val_parts[n].append(part.intra_values[n][kept])
        rec_order = np.argsort(np.concatenate(rec_frag), kind="stable") if rec_frag else None
        if rec_order is not None:
            cnt = np.bincount(np.concatenate(rec_frag), minlength=len(src)).astype(np.int64)
            rec_parts = [np.concatenate(rec_parts)[rec_order]]
            val_parts = {n: [np.concatenate(v)[rec_order]] for n, v in val_parts.items()}
        intra = np.concatenate(rec_parts) if rec_parts else np.zeros((0, self.width), np.int64)
        values = {n: np.concatenate(v) for n, v in val_parts.items() if v}
        ranges = np.stack([starts, counts], axis=1).reshape(-1, 2)
        data = CellData(positions, attrs, ranges, owner, intra, cnt, values)
        return MergedCell(data, row_map, frag_map)


def _expand(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Concatenated ``arange(start, start + count)`` of every pair."""
    counts = np.asarray(counts, np.int64)
    if not len(counts):
        return np.zeros(0, np.int64)
    offs = np.cumsum(counts) - counts
    return np.repeat(np.asarray(starts, np.int64) - offs, counts) + np.arange(int(counts.sum()))


def fragment_payload(ranges: np.ndarray) -> bytes:
    """The fragment index of range fragments ``(start, count)``."""
    return encode_fragments(FragmentIndex.from_ranges(ranges[:, 0], ranges[:, 1]))
