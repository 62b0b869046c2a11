"""Point clouds written to files a piece at a time, in memory bounded by the piece size.

:func:`chunk_boxes` cuts the listed chunks of a level into boxes of whole chunks, each
expected to hold about ``rows`` points; :func:`iter_pieces` queries them in turn (public
``Dataset.query`` per box) and keeps in each piece exactly the rows of its chunks, so every
point is in one piece. The boxes follow the chunks' linear order, so the pieces joined are
the rows of one ``Dataset.query`` in the same order. :func:`export_points` writes the pieces
to CSV, PLY, OBJ, NPZ or LAS/LAZ with a progress bar.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import zipfile
from collections.abc import Generator, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import numpy as np
from numpy.lib.format import dtype_to_descr, write_array, write_array_header_2_0

from zarr_vectors.errors import CoordinatesRoundedWarning, InputError
from zarr_vectors.format.kinds import POINT_CLOUD
from zarr_vectors.io.export import csv_header, ply_column, write_csv_rows, xyz
from zarr_vectors.io.las import LAS_SUFFIXES, LasWriter, narrow_fields
from zarr_vectors.result import Result
from zarr_vectors.tables import axis_names, vertex_table

if TYPE_CHECKING:
    from zarr_vectors.dataset import Dataset

__all__ = [
    "STREAM_FORMATS",
    "PIECE_ROWS",
    "ChunkBox",
    "chunk_boxes",
    "iter_pieces",
    "export_points",
    "prefetched",
]

#: Extensions :func:`export_points` writes piece by piece.
STREAM_FORMATS = (".csv", ".ply", ".obj", ".npz", *LAS_SUFFIXES)
#: Points per piece aimed at (a piece is whole chunks, so one large chunk can exceed it).
PIECE_ROWS = 1 << 19


@dataclass(frozen=True)
class ChunkBox:
    """Chunks ``prefix + (first .. last on axis len(prefix)) + anything`` of a level's grid."""

    prefix: tuple[int, ...]
    first: int
    last: int
    chunks: int

    def owns(self, cells: np.ndarray) -> np.ndarray:
        """Whether each (N, D) chunk coordinate is one of this box's chunks."""
        a = len(self.prefix)
        keep = (cells[:, a] >= self.first) & (cells[:, a] <= self.last)
        for ax, c in enumerate(self.prefix):
            keep &= cells[:, ax] == c
        return keep

    def extent(self, chunk_shape: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The box's (lo, hi), one chunk-rounding margin wider than its chunks."""
        d = len(chunk_shape)
        lo, hi = np.full(d, -np.inf), np.full(d, np.inf)
        for ax, c in enumerate(self.prefix):
            lo[ax], hi[ax] = c * chunk_shape[ax], (c + 1) * chunk_shape[ax]
        a = len(self.prefix)
        lo[a], hi[a] = self.first * chunk_shape[a], (self.last + 1) * chunk_shape[a]
        margin = 1e-9 * chunk_shape
        return lo - margin, hi + margin


def _split(chunks: np.ndarray, prefix: tuple[int, ...], limit: int, out: list[ChunkBox]) -> None:
    """Boxes of ``chunks`` (lexicographically sorted, sharing ``prefix``) of at most ``limit``
    chunks where one value of the next axis allows it, in order."""
    a = len(prefix)
    values, starts, counts = np.unique(chunks[:, a], return_index=True, return_counts=True)
    i = 0
    while i < len(values):
        if counts[i] > limit and a + 1 < chunks.shape[1]:
            part = chunks[starts[i] : starts[i] + counts[i]]
            _split(part, (*prefix, int(values[i])), limit, out)
            i += 1
            continue
        total = np.cumsum(counts[i:])
        j = i + max(1, int(np.searchsorted(total, limit, side="right")))
        out.append(ChunkBox(prefix, int(values[i]), int(values[j - 1]), int(total[j - i - 1])))
        i = j


def chunk_boxes(ds: Dataset, bbox: Any = None, *, level: int = 0, rows: int = PIECE_ROWS) -> list[ChunkBox]:
    """Boxes of the level's listed chunks (those meeting ``bbox`` when given), in linear
    chunk order, each of about ``rows`` points at the level's mean points per chunk."""
    lv = ds.level(level)
    cs = np.asarray(lv.grid.chunk_shape, np.float64)
    chunks = np.asarray(lv.vertices.nonempty, np.int64)
    if len(chunks) == 0:
        return []
    per_chunk = max(1.0, ds.vertex_count(level) / len(chunks))
    if bbox is not None:
        lo, hi = (np.broadcast_to(np.asarray(b, np.float64), (ds.ndim,)) for b in bbox)
        hit = np.all((chunks >= np.floor(lo / cs)) & (chunks <= np.floor(hi / cs)), axis=1)
        chunks = chunks[hit]
    chunks = chunks[np.lexsort(chunks.T[::-1])]
    out: list[ChunkBox] = []
    if len(chunks):
        _split(chunks, (), max(1, int(rows / per_chunk)), out)
    return out


def iter_pieces(
    ds: Dataset,
    bbox: Any = None,
    *,
    level: int = 0,
    attributes: Sequence[str] | bool | None = None,
    rows: int = PIECE_ROWS,
    select: Mapping[str, Any] | None = None,
) -> Iterator[Result]:
    """The rows of ``ds.query(bbox, level=level, attributes=attributes, **select)`` of a point
    cloud, one :class:`ChunkBox` at a time; joined, they are that query's rows in its order
    (``select``: ``where``, ``polygon``, ``polygon_axes``, row tests that keep rows apart)."""
    if any(t not in (POINT_CLOUD, "points") for t in ds.geometry_types):
        raise InputError(
            f"piecewise export reads point clouds; this store holds {', '.join(ds.geometry_types)}"
        )
    cs = np.asarray(ds.level(level).grid.chunk_shape, np.float64)
    user = None
    if bbox is not None:
        user = tuple(np.broadcast_to(np.asarray(b, np.float64), (ds.ndim,)) for b in bbox)
    for box in chunk_boxes(ds, user, level=level, rows=rows):
        lo, hi = box.extent(cs)
        if user is not None:
            lo, hi = np.maximum(lo, user[0]), np.minimum(hi, user[1])
            if np.any(lo > hi):
                continue
        piece = ds.query((lo, hi), level=level, attributes=attributes, **(select or {}))
        owned = box.owns(np.floor(piece.positions.astype(np.float64, copy=False) / cs).astype(np.int64))
        yield piece if owned.all() else piece.subset(owned)


def prefetched(items: Iterator[Any]) -> Generator[Any, None, None]:
    """``items``, the next one made in a thread while the caller handles the current one
    (at most two are held at once). Close the generator to stop early."""
    with ThreadPoolExecutor(1, thread_name_prefix="zv-prefetch") as pool:
        pending: Future[Any] = pool.submit(next, items, None)
        while (item := pending.result()) is not None:
            pending = pool.submit(next, items, None)
            yield item


# -- writers -----------------------------------------------------------------------------


class _CsvOut:
    def __init__(self, fh: BinaryIO) -> None:
        self.fh = fh
        self.names: list[str] | None = None

    def write(self, piece: Result) -> None:
        names, cols = csv_header(piece)
        if self.names is None:
            self.names = names
            self.fh.write((",".join(names) + "\n").encode("utf-8"))
        write_csv_rows(self.fh, cols)

    def close(self, empty: Result) -> None:
        if self.names is None:
            self.write(empty)


class _PlyOut:
    """Binary PLY whose vertex count is patched in once known (a fixed-width header field)."""

    WIDTH = 20

    def __init__(self, fh: BinaryIO) -> None:
        self.fh = fh
        self.dtype: np.dtype | None = None
        self.count, self.at = 0, 0

    def _start(self, piece: Result) -> None:
        typed = [(n, *ply_column(n, v)) for n, v in vertex_table(piece) if n not in ("line", "parent")]
        self.dtype = np.dtype([(n, v.dtype) for n, _, v in typed])
        head = b"ply\nformat binary_little_endian 1.0\ncomment written by zarr_vectors\nelement vertex "
        self.fh.write(head)
        self.at = self.fh.tell()
        props = "".join(f"property {t} {n}\n" for n, t, _ in typed)
        self.fh.write(b" " * self.WIDTH + b"\n" + props.encode("ascii") + b"end_header\n")

    def write(self, piece: Result) -> None:
        if self.dtype is None:
            self._start(piece)
        assert self.dtype is not None
        table = np.empty(len(piece), self.dtype)
        for n, v in vertex_table(piece):
            if n in (self.dtype.names or ()):
                table[n] = ply_column(n, v)[1]
        self.fh.write(table.tobytes())
        self.count += len(piece)

    def close(self, empty: Result) -> None:
        if self.dtype is None:
            self._start(empty)
        end = self.fh.tell()
        self.fh.seek(self.at)
        self.fh.write(str(self.count).ljust(self.WIDTH).encode("ascii"))
        self.fh.seek(end)


class _ObjOut:
    """``v`` lines (OBJ of points: no faces, no attributes)."""

    def __init__(self, fh: BinaryIO) -> None:
        self.fh = fh
        fh.write(b"# written by zarr_vectors\n")

    def write(self, piece: Result) -> None:
        pos = xyz(piece, "OBJ")
        write_csv_rows(self.fh, [np.full(len(piece), "v"), *pos.T], sep=" ")

    def close(self, empty: Result) -> None:
        xyz(empty, "OBJ")  # more than 3 axes: the error, even for an empty result


class _NpzOut:
    """The arrays :func:`~zarr_vectors.io.export.read_npz` reads, each column appended to an
    anonymous temporary file, then copied into the (uncompressed) zip with its final shape."""

    def __init__(self, fh: BinaryIO, folder: Path) -> None:
        self.fh, self.folder = fh, folder
        self.columns: dict[str, tuple[Any, np.dtype, tuple[int, ...]]] = {}
        self.axes: np.ndarray | None = None
        self.count = 0

    def write(self, piece: Result) -> None:
        if self.axes is None:
            self.axes = np.array(axis_names(piece))
        arrays = {"positions": piece.positions}
        if piece.object_ids is not None:
            arrays["object_ids"] = piece.object_ids
        arrays |= {f"attributes/{k}": np.asarray(v) for k, v in piece.attributes.items()}
        for name, values in arrays.items():
            if name not in self.columns:
                spool = tempfile.TemporaryFile(dir=self.folder, prefix=".zv-npz-")
                self.columns[name] = (spool, values.dtype, values.shape[1:])
            np.ascontiguousarray(values).tofile(self.columns[name][0])
        self.count += len(piece)

    def close(self, empty: Result) -> None:
        if self.axes is None:
            self.write(empty)
        with zipfile.ZipFile(self.fh, "w", zipfile.ZIP_STORED, allowZip64=True) as z:
            for name, (spool, dtype, shape) in self.columns.items():
                header = {
                    "descr": dtype_to_descr(dtype),
                    "fortran_order": False,
                    "shape": (self.count, *shape),
                }
                with spool, z.open(f"{name}.npy", "w", force_zip64=True) as out:
                    write_array_header_2_0(out, header)
                    spool.seek(0)
                    shutil.copyfileobj(spool, out, 1 << 22)
            assert self.axes is not None  # set by the first write
            with z.open("axes.npy", "w") as out:
                write_array(out, self.axes)


def _empty(ds: Dataset, level: int, attributes: Sequence[str] | bool | None) -> Result:
    """A zero-row result with the columns a query of the level would have."""
    lo = np.asarray(ds.bounds[0], np.float64) - 1.0
    return ds.query((lo, lo), level=level, attributes=attributes)


def export_points(
    ds: Dataset,
    path: str | Path,
    *,
    bbox: Any = None,
    level: int = 0,
    attributes: Sequence[str] | bool | None = None,
    rows: int = PIECE_ROWS,
    progress: bool = True,
    where: Any = None,
    polygon: Any = None,
    polygon_axes: Sequence[str | int] | None = None,
) -> int:
    """Write the points of a box (``bbox``; default everything) to ``path`` piece by piece,
    and return how many. The format comes from the suffix: ``.csv``, ``.obj`` and ``.npz`` (the
    files :func:`~zarr_vectors.io.export.export_result` writes; NPZ uncompressed, its columns
    spooled to temporary files), ``.ply`` (binary), ``.las`` or
    ``.laz`` (with the store's ``las_header`` when it was ingested from LAS, so the same
    integers come back; its CRS when pyproj is installed). Memory stays near ``rows``
    points whatever the result's size; the file is written to ``path`` only when complete.
    ``where``, ``polygon`` and ``polygon_axes`` select rows as :meth:`Dataset.query` does.
    """
    select = {
        k: v
        for k, v in (("where", where), ("polygon", polygon), ("polygon_axes", polygon_axes))
        if v is not None
    }
    from tqdm.auto import tqdm

    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in STREAM_FORMATS:
        raise InputError(f"cannot stream {path.name!r}; use one of {', '.join(STREAM_FORMATS)}")
    empty = _empty(ds, level, attributes)
    part = path.with_name(f".{path.stem}.zv-part{path.suffix}")  # the suffix names the format
    try:
        open(part, "wb").close()
    except OSError as exc:  # say the user's path, not the part file's
        raise type(exc)(exc.errno, exc.strerror, str(path)) from exc
    written = 0
    try:
        with tqdm(
            total=ds.vertex_count(level) if bbox is None else None,
            unit="pt",
            unit_scale=True,
            desc=f"writing {path.name}",
            disable=not progress,
        ) as bar:
            if suffix in LAS_SUFFIXES:
                ranges = _las_ranges(ds, empty, bbox, level, rows, select)
                pieces = prefetched(
                    iter_pieces(ds, bbox, level=level, attributes=attributes, rows=rows, select=select)
                )
                count = ds.vertex_count(level) if bbox is None and not select else 0
                written = _write_las(ds, part, empty, pieces, bar, ranges, count)
            else:
                pieces = prefetched(
                    iter_pieces(ds, bbox, level=level, attributes=attributes, rows=rows, select=select)
                )
                with open(part, "wb") as fh, contextlib.closing(pieces):
                    out = _writer(suffix, fh, part.parent)
                    for piece in pieces:
                        out.write(piece)
                        written += len(piece)
                        bar.update(len(piece))
                    out.close(empty)
        os.replace(part, path)
    finally:
        part.unlink(missing_ok=True)
    return written


def _writer(suffix: str, fh: BinaryIO, folder: Path) -> Any:
    if suffix == ".csv":
        return _CsvOut(fh)
    if suffix == ".ply":
        return _PlyOut(fh)
    return _ObjOut(fh) if suffix == ".obj" else _NpzOut(fh, folder)


def _las_ranges(
    ds: Dataset, empty: Result, bbox: Any, level: int, rows: int, select: dict[str, Any]
) -> dict[str, tuple[float, float]]:
    """``(min, max)`` of the attributes deciding whether LAS 1.2 holds a store without a
    ``las_header`` (:func:`~zarr_vectors.io.las.narrow_fields`): one streamed pass reading
    only those, made only when the store has them."""
    names = narrow_fields(empty.attributes) if ds.root.extra.get("las_header") is None else []
    lo = {n: np.inf for n in names}
    hi = {n: -np.inf for n in names}
    pieces = iter_pieces(ds, bbox, level=level, attributes=names, rows=rows, select=select) if names else ()
    for piece in pieces:
        for n in names:
            values = np.asarray(piece.attributes[n])
            if len(values):
                lo[n], hi[n] = min(lo[n], float(values.min())), max(hi[n], float(values.max()))
    return {n: (lo[n], hi[n]) for n in names}


def _write_las(
    ds: Dataset,
    part: Path,
    empty: Result,
    pieces: Generator[Result, None, None],
    bar: Any,
    ranges: dict[str, tuple[float, float]],
    count: int,
) -> int:
    crs = None
    if ds.crs is not None and hasattr(ds.crs, "to_pyproj"):
        try:
            crs = ds.crs.to_pyproj()
        except ImportError:  # no pyproj: the file is written without its CRS
            crs = None
    kinds = {k: v.dtype for k, v in empty.attributes.items()}
    record = ds.root.extra.get("las_header")
    objects = empty.object_ids is not None
    las = LasWriter(
        part, kinds, bounds=ds.bounds, record=record, crs=crs, ranges=ranges, count=count, object_ids=objects
    )
    with las as out, contextlib.closing(pieces):
        for piece in pieces:
            out.write(piece.positions, piece.attributes, piece.object_ids)
            bar.update(len(piece))
    if out.rounded:
        import warnings

        warnings.warn(
            f"{out.rounded} coordinates were rounded to the LAS grid (scale {list(out.scale)})",
            CoordinatesRoundedWarning,
            stacklevel=3,
        )
    return out.count
