"""Level 3 (and the per-vertex rules of level 4): read every per-chunk cell in batches and
check its bytes, its row counts against the arrays beside it, and the vertices it holds.

Pass A reads, chunk by chunk, the arrays aligned with ``vertices`` (fragments, vertex
and fragment attributes); pass B (:mod:`.links`) reads the link arrays once the row
count of every chunk of every level is known.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numcodecs
import numpy as np

from zarr_vectors.engine import Pipeline
from zarr_vectors.errors import DECODE_FAILURES, failure_reason
from zarr_vectors.format.fragments import HEADER, FragmentIndex, decode_fragments
from zarr_vectors.format.grid import bins_per_chunk
from zarr_vectors.format.kinds import POINT_CLOUD
from zarr_vectors.validation._report import Collector
from zarr_vectors.validation._store import StoreView, batched
from zarr_vectors.validation.arrays import CellArray, LevelModel
from zarr_vectors.validation.metadata import RootInfo

__all__ = [
    "LevelCells",
    "check_vertex_cells",
    "stored_chunks",
    "decode_cell",
    "read_fragments",
]

Chunk = tuple[int, ...]


@dataclass(eq=False)
class LevelCells:
    """What pass A learnt about one level: rows per chunk (None for Draco cells, whose row
    count is not decoded here) and fragments per chunk."""

    rows: dict[Chunk, int | None] = field(default_factory=dict)
    fragments: dict[Chunk, int] | None = None
    cells_read: int = 0


def stored_chunks(view: StoreView, arr: CellArray, out: Collector) -> set[Chunk]:
    """Chunks whose cell is stored; checks them against the grid and ``nonempty_chunks``."""
    found: set[Chunk] = set()
    hi = np.asarray(arr.shape, np.int64) - 1
    for key, rule, message in view.shard_problems.get(arr.path, []):
        out.error(rule, key, message)
    for key in view.cells.get(arr.path, []):
        chunk = arr.chunk_of(key)
        cell = None if chunk is None else np.asarray(chunk, np.int64) - arr.origin
        if chunk is None or cell is None or np.any(cell < 0) or np.any(cell > hi):
            out.error(
                "cells.present",
                f"{arr.path}/{key}",
                f"stored key is not a cell of the {list(arr.shape)} grid",
            )
            continue
        found.add(chunk)
    chunks = arr.listing[0]
    if chunks is None or arr.pipeline is None:
        return found
    listed: set[Chunk] = set(map(tuple, chunks.tolist()))
    for c in sorted(listed - found):
        out.error(
            "cells.present",
            arr.key(c),
            f"chunk {'.'.join(map(str, c))} is listed in nonempty_chunks but no cell is stored",
        )
    for c in sorted(found - listed):
        out.error(
            "cells.present",
            arr.key(c),
            f"a cell is stored for chunk {'.'.join(map(str, c))} but nonempty_chunks does not list it",
        )
    return found


def decode_cell(arr: CellArray, chunk: Chunk, raw: bytes, out: Collector) -> memoryview | None:
    assert arr.pipeline is not None
    if (why := _frame_problem(arr.pipeline, raw)) is not None:
        out.error("cells.decode", arr.key(chunk), f"cell does not decode through the codecs: {why}")
        return None
    try:
        return arr.pipeline.decode(raw)
    except DECODE_FAILURES as exc:
        out.error(
            "cells.decode", arr.key(chunk), f"cell does not decode through the codecs: {failure_reason(exc)}"
        )
        return None


def _frame_problem(pipeline: Pipeline, raw: bytes) -> str | None:
    """Why the outermost compressed frame cannot be whole, when its header says so: a Blosc
    frame records its own length, which a truncated cell no longer matches."""
    if pipeline.compressors and isinstance(pipeline.compressors[-1], numcodecs.Blosc):
        if len(raw) < 16:
            return f"a Blosc frame has a 16-byte header; the cell holds {len(raw)} bytes"
        cbytes = int.from_bytes(raw[12:16], "little")
        if cbytes != len(raw):
            return f"the Blosc header says the frame is {cbytes} bytes; the cell holds {len(raw)}"
    return None


def read_fragments(data: memoryview, n_rows: int | None) -> FragmentIndex | str:
    """The fragment index in ``data``, or why it cannot be read. The header's counts are checked
    against the bytes present before the decoder sizes anything from them."""
    if len(data) >= HEADER.size:
        _, _, _, f, r = HEADER.unpack_from(data, 0)
        if 0 < f and r <= f:
            need = HEADER.size + ((f + 7) // 8 + 7) // 8 * 8 + 16 * r + 4 * (f - r + 1)
            if len(data) < need:
                return f"header claims {f} fragments ({r} ranges), which take at least {need} bytes; the cell holds {len(data)}"
    try:
        return decode_fragments(data, n_rows)
    except DECODE_FAILURES as exc:
        return failure_reason(exc)


def _draco_rows(arr: CellArray, chunk: Chunk, data: memoryview, out: Collector) -> int | None:
    """Vertex count of a Draco cell (None when it does not decode)."""
    from zarr_vectors._draco import decode_cell as decode_draco

    if not len(data):
        out.error(
            "cells.vertices", arr.key(chunk), "Draco cell is empty; a stored cell must hold a Draco blob"
        )
        return None
    try:
        return len(decode_draco(bytes(data))[0])
    except DECODE_FAILURES as exc:
        out.error("cells.vertices", arr.key(chunk), f"Draco blob does not decode: {failure_reason(exc)}")
        return None


def _rows(
    arr: CellArray,
    chunk: Chunk,
    data: memoryview,
    rule: str,
    what: str,
    out: Collector,
    width: int | None = None,
) -> np.ndarray | None:
    """The cell's rows of ``width`` values (default: the array's row width)."""
    width = arr.width if width is None else width
    stride = arr.dtype.itemsize * width
    if len(data) % stride:
        out.error(
            rule,
            arr.key(chunk),
            f"{len(data)} bytes is not a whole number of {what} "
            f"({width} x {arr.dtype.name} = {stride} bytes each)",
        )
        return None
    return np.frombuffer(data, arr.dtype).reshape(-1, width)


@dataclass(eq=False)
class _Geometry:
    """Level-4 per-vertex checks: finite, inside the cell's chunk, inside the root bounds, bins."""

    chunk_shape: np.ndarray
    bounds: np.ndarray | None
    bins: np.ndarray | None  # bins per chunk when per-bin fragments are to be checked
    bin_shape: np.ndarray | None

    def chunks(self, arr: CellArray, chunks: set[Chunk], out: Collector) -> None:
        """Stored chunks must meet the root bounds (Draco cells included, whose positions are
        quantised and not checked one by one)."""
        if self.bounds is None or not chunks:
            return
        c = np.asarray(sorted(chunks), np.float64)
        lo, hi = c * self.chunk_shape, (c + 1) * self.chunk_shape
        tol = 1e-9 * np.maximum(np.abs(self.bounds).max(axis=0), self.chunk_shape)
        outside = np.any((lo > self.bounds[1] + tol) | (hi < self.bounds[0] - tol), axis=1)
        for i in np.flatnonzero(outside)[:20].tolist():
            chunk = tuple(int(x) for x in c[i])
            out.error(
                "geometry.bounds",
                arr.key(chunk),
                f"chunk {'.'.join(map(str, chunk))} spans {lo[i].tolist()}.."
                f"{hi[i].tolist()}, wholly outside the root bounds {self.bounds[0].tolist()}..{self.bounds[1].tolist()}",
            )

    def check(
        self, arr: CellArray, chunk: Chunk, pos: np.ndarray, frag: FragmentIndex | None, out: Collector
    ) -> None:
        p = pos.astype(np.float64)
        key = arr.key(chunk)
        bad = ~np.all(np.isfinite(p), axis=1)
        if bad.any():
            out.error("geometry.finite", key, f"{int(bad.sum())} vertices have NaN or infinite coordinates")
            p = p[~bad]
        if not len(p):
            return
        eps = np.finfo(pos.dtype).eps * 4 if pos.dtype.kind == "f" else 0.0
        lo = np.asarray(chunk, np.float64) * self.chunk_shape
        hi = lo + self.chunk_shape
        tol = 1e-9 * self.chunk_shape + eps * np.maximum(np.abs(lo), np.abs(hi))
        out_of = np.any((p < lo - tol) | (p > hi + tol), axis=1)
        if out_of.any():
            row = int(np.argmax(out_of))
            out.error(
                "geometry.vertex-chunk",
                key,
                f"{int(out_of.sum())} vertices lie outside chunk "
                f"{'.'.join(map(str, chunk))} ({lo.tolist()}..{hi.tolist()}), e.g. row {row} at {p[row].tolist()}",
            )
        if self.bounds is not None:
            blo, bhi = self.bounds
            btol = 1e-9 * self.chunk_shape + eps * np.maximum(np.abs(blo), np.abs(bhi))
            outside = np.any((p < blo - btol) | (p > bhi + btol), axis=1)
            if outside.any():
                row = int(np.argmax(outside))
                out.error(
                    "geometry.bounds",
                    key,
                    f"{int(outside.sum())} vertices lie outside the root bounds, e.g. "
                    f"row {row} at {p[row].tolist()}",
                )
        if (
            self.bins is not None
            and frag is not None
            and frag.all_ranges
            and frag.num_fragments == int(np.prod(self.bins))
        ):
            self._bins(key, chunk, pos.astype(np.float64), frag, lo, out)

    def _bins(
        self, key: str, chunk: Chunk, p: np.ndarray, frag: FragmentIndex, lo: np.ndarray, out: Collector
    ) -> None:
        assert self.bins is not None and self.bin_shape is not None
        counts = frag.ranges[:, 1]
        slot = np.repeat(np.arange(len(counts)), counts)
        rows = frag.rows_of(np.arange(len(counts)))
        if len(rows) != len(slot) or (len(rows) and rows.max() >= len(p)):
            return
        rel = np.floor((p[rows] - lo) / self.bin_shape + 1e-9).astype(np.int64)
        rel = np.clip(rel, 0, self.bins - 1)
        want = np.ravel_multi_index(tuple(rel.T), tuple(self.bins)) if len(rel) else slot
        wrong = want != slot
        if wrong.any():
            out.error(
                "geometry.bins",
                key,
                f"{int(wrong.sum())} points sit in a per-bin fragment that is not their bin",
            )


def _geometry(root: RootInfo, model: LevelModel, level: int) -> _Geometry | None:
    if level < 4:
        return None
    bins = bin_shape = None
    only_points = set(root.geometry_types) == {POINT_CLOUD}
    if only_points and model.tables is not None and model.tables.manifests is None:
        bin_shape = root.level_bins.get(model.index, model.chunk_shape)
        try:
            bins = bins_per_chunk(model.chunk_shape, bin_shape)
        except ValueError:
            bins = None
    return _Geometry(model.chunk_shape, root.bounds, bins, bin_shape)


def _fragments(
    model: LevelModel, chunk: Chunk, raw: Any, n_rows: int | None, out: Collector
) -> FragmentIndex | None:
    arr = model.fragments
    assert arr is not None
    data = decode_cell(arr, chunk, raw, out)
    if data is None:
        return None
    frag = read_fragments(data, n_rows)
    if isinstance(frag, str):
        out.error("cells.fragments", arr.key(chunk), f"fragment index: {frag}")
        return None
    return frag


def _tiles(frag: FragmentIndex, n: int) -> bool:
    """Every one of the ``n`` rows lies in exactly one fragment (ranges, or explicit lists as
    Draco cells have them, whose decoded order is the codec's)."""
    counts = frag.ranges[:, 1]
    sizes = np.diff(frag.explicit_offsets) if len(frag.explicit_offsets) else np.zeros(0, np.int64)
    if int(counts.sum()) + int(sizes.sum()) != n:
        return False
    if frag.all_ranges:
        order = np.argsort(frag.ranges[:, 0], kind="stable")
        starts, counts = frag.ranges[order, 0], counts[order]
        return bool(np.all(starts == np.cumsum(counts) - counts))
    rows = np.sort(frag.rows_of(np.arange(frag.num_fragments)))
    return bool(np.array_equal(rows, np.arange(n)))


def _check_chunk(
    model: LevelModel,
    chunk: Chunk,
    raws: dict[str, Any],
    cells: LevelCells,
    geo: _Geometry | None,
    out: Collector,
) -> None:
    """All vertex-aligned cells of one chunk (``raws`` maps array path to stored bytes or None)."""
    v = model.vertices
    assert v is not None
    n: int | None = None
    pos = None
    raw = raws.get(v.path)
    if raw is not None and v.pipeline is not None and (data := decode_cell(v, chunk, raw, out)) is not None:
        if v.draco:
            n = _draco_rows(v, chunk, data, out)
        elif (rows := _rows(v, chunk, data, "cells.vertices", "vertex rows", out, len(v.shape))) is not None:
            n, pos = len(rows), rows
    if raw is not None:
        cells.rows[chunk] = n
    frag = None
    if model.fragments is not None and model.fragments.pipeline is not None:
        fraw = raws.get(model.fragments.path)
        if (fraw is None) != (raw is None):
            out.error(
                "cells.fragments",
                model.fragments.key(chunk),
                "vertex_fragments must have a cell exactly where vertices has one",
            )
        if fraw is not None:
            frag = _fragments(model, chunk, fraw, n, out)
            if cells.fragments is not None:
                cells.fragments[chunk] = frag.num_fragments if frag is not None else 0
    if (
        frag is not None
        and model.fragments is not None  # always so when frag is set
        and n is not None
        and model.meta is not None
        and model.meta.fragments_tile
        and not _tiles(frag, n)
    ):
        out.error(
            "consistency.fragments-tile",
            model.fragments.key(chunk),
            "fragments_tile is true but this chunk's fragments do not cover its rows in order",
        )
    for arr, count, what in [(a, n, "vertex") for a in model.vertex_attrs] + [
        (a, None if frag is None else frag.num_fragments, "fragment") for a in model.fragment_attrs
    ]:
        _attribute_cell(arr, chunk, raws.get(arr.path), count, raw is not None, what, out)
    if geo is not None and pos is not None:
        geo.check(v, chunk, pos, frag, out)


def _attribute_cell(
    arr: CellArray, chunk: Chunk, raw: Any, count: int | None, expected: bool, what: str, out: Collector
) -> None:
    if arr.pipeline is None:
        return
    if (raw is not None) != expected:
        out.error(
            "cells.attribute-rows",
            arr.key(chunk),
            f"{what} attribute cells must exist exactly where vertices has a cell",
        )
        return
    if raw is None or (data := decode_cell(arr, chunk, raw, out)) is None:
        return
    rows = _rows(arr, chunk, data, "cells.attribute-rows", "attribute rows", out)
    if rows is not None and count is not None and len(rows) != count:
        out.error(
            "cells.attribute-rows",
            arr.key(chunk),
            f"holds {len(rows)} rows but the chunk has {count} {what}{'es' if what == 'vertex' else 's'}",
        )


def check_vertex_cells(
    view: StoreView, root: RootInfo, model: LevelModel, level: int, out: Collector, bar: Any
) -> LevelCells:
    """Pass A over one level."""
    cells = LevelCells(
        fragments={} if model.fragments is not None and model.fragments.pipeline is not None else None
    )
    v = model.vertices
    if v is None:
        return cells
    arrays = [a for a in [v, model.fragments, *model.vertex_attrs, *model.fragment_attrs] if a is not None]
    chunks: set[Chunk] = set()
    for arr in arrays:
        found = stored_chunks(view, arr, out)
        if arr is v and v.pipeline is None:
            cells.rows = dict.fromkeys(found)  # present, row counts unknown
        chunks |= found
    geo = _geometry(root, model, level)
    if geo is not None:
        geo.chunks(v, set(cells.rows) if v.pipeline is None else chunks, out)
    readable = [a for a in arrays if a.pipeline is not None]
    for batch in batched(sorted(chunks), max(1, 1024 // max(1, len(readable)))):
        keys = [(a.path, c, a.key(c)) for c in batch for a in readable]
        raws = view.read([k for _, _, k in keys], out)
        by_chunk: dict[Chunk, dict[str, Any]] = {c: {} for c in batch}
        for (path, c, _), raw in zip(keys, raws):
            by_chunk[c][path] = raw
        for c in batch:
            _check_chunk(model, c, by_chunk[c], cells, geo, out)
        cells.cells_read += sum(r is not None for r in raws)
        bar.update(len(keys))
    declared = -1 if model.meta is None else model.meta.vertex_count  # -1: unusable, a finding already
    if level >= 3 and declared >= 0 and all(n is not None for n in cells.rows.values()):
        total = sum(n for n in cells.rows.values() if n is not None)
        if declared != total:
            out.error(
                "consistency.vertex-count",
                f"{model.index}/zarr.json",
                f"vertex_count is {declared} but the vertices cells hold {total} rows",
            )
    return cells
