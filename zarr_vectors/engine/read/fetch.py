"""Fetching a level's cells in one batch and decoding them: :class:`Cells` (vertices,
attributes, fragment indexes and object-id tables of some chunks, concatenated), the cells
of whole objects from their manifests, and the object of each row."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from zarr_vectors.engine.chunks.arrays import CellArray
from zarr_vectors.engine.level import Level
from zarr_vectors.engine.read.keys import KeyBatch
from zarr_vectors.errors import CorruptCellError, FormatError, decoding
from zarr_vectors.format.fragments import (
    FragmentIndex,
    decode_fragments,
    range_tables,
    ranges_outside,
    ranges_to_rows,
)

__all__ = [
    "Cells",
    "cell_owners",
    "decode_fragment_index",
    "fetch_cells",
    "fetch_objects",
    "fragments_array",
    "owners_of_rows",
    "row_owners",
]


def owners_of_rows(
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


def fragments_array(level: Level) -> CellArray:
    """The level's ``vertex_fragments`` array; a FormatError when the store lacks it."""
    if level.fragments is None:
        raise FormatError(
            f"level {level.index} has no vertex_fragments array ({level.index}/vertex_fragments/zarr.json is "
            "missing), which this read needs to tell objects and fragments apart"
        )
    return level.fragments


def decode_fragment_index(level: Level, data: memoryview, chunk: np.ndarray, n_rows: int) -> FragmentIndex:
    fragments = fragments_array(level)
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
            index = self._indexes[i] = decode_fragment_index(level, self.fragments[i], self.chunks[i], n)
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
    fragments = fragments_array(level) if len(frag_idx) else None
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
            parts.append(owners_of_rows(level, chunk, frag, n, table))
        else:
            parts.append(np.full(n, -1, np.int64))
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


def cell_owners(
    level: Level, chunk: Any, frag_raw: bytes | None, table_raw: bytes | None, n: int
) -> np.ndarray:
    """The object (OID) of each of a cell's ``n`` rows, from its raw fragment index and, when
    the level has that table, its raw ``fragment_attributes/object_id`` cell."""
    frag = decode_fragment_index(level, fragments_array(level).payload(frag_raw, chunk), chunk, n)
    table = None
    if level.fragment_object_ids is not None and table_raw is not None:
        table = level.fragment_object_ids.rows(table_raw, chunk).reshape(-1)
        if len(table) != frag.num_fragments:
            raise CorruptCellError(
                level.fragment_object_ids.path,
                ".".join(map(str, chunk)),
                f"{len(table)} object ids for {frag.num_fragments} fragments",
            )
    return owners_of_rows(level, chunk, frag, n, table)


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
        fragments_array(level)
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
            fragments_array(level).path, chunk, "a range fragment lies outside the cell's rows"
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
