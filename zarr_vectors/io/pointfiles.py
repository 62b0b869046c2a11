"""Point-cloud files into a store: LAS/LAZ (extra ``las``), PLY point clouds, CSV/XYZ/TXT.

:func:`ingest_points` streams every file into one store through :func:`zarr_vectors.create`,
``chunk_rows`` points at a time, so memory stays near ``memory_limit`` whatever the size.
All headers are read (and the bounds of files without them scanned) before anything is
written; the next block of a file is read in a thread while the previous one is added.
Uncompressed LAS files of one record layout are instead sorted by chunk in place
(:mod:`zarr_vectors.io.las_sort`) and handed to the writer whole: the same store, faster.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from zarr_vectors.engine import PointStream
from zarr_vectors.errors import InputError, choice_message
from zarr_vectors.geo import parse_crs
from zarr_vectors.io._files import input_files
from zarr_vectors.io.las import LAS_SUFFIXES, LasSource, las_header_record, open_las, read_las_chunks
from zarr_vectors.io.las_sort import sort_las, sortable
from zarr_vectors.io.plytext import TEXT_SUFFIXES, PlySource, PointSource, TextSource
from zarr_vectors.io.stream_export import prefetched
from zarr_vectors.storage import check_target

if TYPE_CHECKING:
    from zarr_vectors.dataset import Dataset

__all__ = ["POINT_SUFFIXES", "FILE_ID_MODES", "ingest_points", "open_point_file", "point_files"]

POINT_SUFFIXES = (*LAS_SUFFIXES, ".ply", *TEXT_SUFFIXES)
#: ``file_ids`` choices: each file one object, or one group of the objects of ``object_column``.
FILE_ID_MODES = ("object", "group")
#: Default memory the writer stays near (bytes).
INGEST_MEMORY = 256 << 20


class _Las:
    """A :class:`LasSource` with the :class:`PointSource` face."""

    def __init__(self, source: LasSource) -> None:
        self.source, self.path, self.crs = source, source.path, source.crs

    @property
    def count(self) -> int:
        return self.source.count

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        # The header's extent, widened by one scale step: headers round their mins and maxs.
        return self.source.mins - self.source.scale, self.source.maxs + self.source.scale

    def chunks(self, rows: int) -> Iterator[tuple[np.ndarray, dict[str, np.ndarray]]]:
        return read_las_chunks(self.source, rows)


def point_files(paths: Sequence[str | Path], *, recursive: bool = False) -> list[Path]:
    """The point files ``paths`` name (folders: their point files, sorted by name)."""
    return input_files(paths, POINT_SUFFIXES, "point", recursive=recursive)


def open_point_file(
    path: str | Path,
    *,
    columns: Sequence[str] | None = None,
    positions: Sequence[str] | None = None,
    delimiter: str | None = None,
    dtypes: dict[str, str] | None = None,
) -> PointSource:
    """A reader for one point file, chosen by its suffix; its header is read now."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix in LAS_SUFFIXES:
        return _Las(open_las(path))
    if suffix == ".ply":
        return PlySource(path)
    if suffix in TEXT_SUFFIXES:
        return TextSource(path, columns=columns, positions=positions, delimiter=delimiter, dtypes=dtypes)
    raise InputError(f"{path.name}: not a point file; use one of {', '.join(POINT_SUFFIXES)}")


#: Most chunks the files' extent may span (the writer's own limit on the grid).
_MAX_CELLS = 2.0**40


def _union_bounds(sources: list[PointSource], chunk_shape: Any) -> tuple[np.ndarray, np.ndarray]:
    """The union of the files' extents; an extent that is not finite or that spans more
    chunks than the writer allows (counted in float64, so no overflow) names its file."""
    extents = [s.bounds() for s in sources]
    dims = {len(lo) for lo, _ in extents}
    if len(dims) != 1:
        raise InputError(f"the files have different numbers of axes {sorted(dims)}; ingest them apart")
    try:
        step = np.broadcast_to(np.asarray(chunk_shape, np.float64), (dims.pop(),))
    except (TypeError, ValueError):
        step = None  # the writer explains a bad chunk_shape
    union = np.min([e[0] for e in extents], axis=0), np.max([e[1] for e in extents], axis=0)
    named = [(str(s.path), e) for s, e in zip(sources, extents)] + [("the files together", union)]
    for name, (lo, hi) in named:
        if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi)) and np.all(lo <= hi)):
            raise InputError(f"{name}: the extent {lo.tolist()} to {hi.tolist()} is not finite with lo <= hi")
        if step is not None and np.all(step > 0) and np.prod(np.floor((hi - lo) / step) + 1) > _MAX_CELLS:
            raise InputError(
                f"{name}: the extent {lo.tolist()} to {hi.tolist()} spans more than 2**40 chunks of "
                f"{step.tolist()}; check the positions, or choose a larger chunk_shape"
            )
    return union


def _las_extra(sources: list[PointSource]) -> dict[str, Any]:
    """``las_header`` of the first LAS file, when every file is LAS (its scale and offset
    make LAS export give back the same integers)."""
    las = [s.source for s in sources if isinstance(s, _Las)]
    if not las or len(las) != len(sources):
        return {}
    return {"las_header": las_header_record(las[0])}


def ingest_points(
    target: Any,
    paths: Sequence[str | Path],
    *,
    chunk_shape: Any,
    bounds: Any = None,
    file_ids: str | None = None,
    object_column: str | None = None,
    columns: Sequence[str] | None = None,
    positions: Sequence[str] | None = None,
    delimiter: str | None = None,
    dtypes: dict[str, str] | None = None,
    crs: Any = None,
    chunk_rows: int = 1 << 19,
    memory_limit: int | None = INGEST_MEMORY,
    progress: bool = True,
    **options: Any,
) -> Dataset:
    """Stream point files into a new store (one point cloud) and return it opened.

    Parameters
    ----------
    target
        Where to write, as for :func:`zarr_vectors.write_points`.
    paths
        Files or folders: ``.las``, ``.laz``, ``.ply``, ``.csv``, ``.xyz``, ``.txt``. Every
        file must give the same attributes (names and kinds).
    chunk_shape, bounds
        The chunk grid; ``bounds`` default to the union of the files' extents (LAS: the
        header's; others: one pass over the file).
    file_ids
        ``"object"``: file ``i`` (in the order given) is object ``i``; ``"group"``: file
        ``i`` is group ``i`` (named by the file's name) of the objects in ``object_column``.
    object_column
        An attribute holding each point's object id (e.g. a CSV column or a LAS dimension).
    columns, positions, delimiter, dtypes
        Text files: column names, the position columns, the delimiter (default ``,`` for
        ``.csv``, whitespace otherwise) and column dtypes (see :class:`TextSource`).
    crs
        The store's CRS; default the first LAS file's (read with pyproj, extra ``geo``).
    chunk_rows
        Points read and appended at a time.
    memory_limit, progress, options
        Passed to :func:`zarr_vectors.create` (``compression``, ``overwrite``,
        ``storage_options``, ``bin_shape``, ...).

    Raises
    ------
    InputError
        An unreadable or malformed file (a header whose counts do not fit the file, a row
        of the wrong width, an id that fits neither int64 nor uint64, a position that is
        not finite: each names the file, and the line and column where it has them), an
        extent too wide for ``chunk_shape``, files that differ in attributes, an unknown
        ``file_ids``, or ``file_ids="group"`` without ``object_column``.
    """
    from zarr_vectors.dataset import open as open_store
    from zarr_vectors.streaming import create

    if file_ids is not None and file_ids not in FILE_ID_MODES:
        raise InputError(choice_message("file_ids", file_ids, list(FILE_ID_MODES)))
    if file_ids == "group" and object_column is None:
        raise InputError("file_ids='group' groups the objects of object_column; give object_column=")
    if file_ids == "object" and object_column is not None:
        raise InputError("give file_ids='object' or object_column=, not both (each sets the object ids)")
    if crs is not None:
        parse_crs(crs)  # a bad crs= fails now, not after the stream
    check_target(
        target, overwrite=bool(options.get("overwrite")), storage_options=options.get("storage_options")
    )
    files = [Path(p) for p in paths]
    sources = [
        open_point_file(f, columns=columns, positions=positions, delimiter=delimiter, dtypes=dtypes)
        for f in files
    ]
    lo, hi = (
        _union_bounds(sources, chunk_shape) if bounds is None else (np.asarray(b, np.float64) for b in bounds)
    )
    if crs is None:
        crs = next((s.crs for s in sources if s.crs is not None), None)
    groups: dict[int, np.ndarray] = {}
    names: list[str] = []
    tables: dict[str, Any] = {"groups": groups, "group_names": names} if file_ids == "group" else {}
    writer = create(
        target,
        "points",
        chunk_shape=chunk_shape,
        bounds=(lo, hi),
        crs=crs,
        root_extra=_las_extra(sources) | {"source_files": [f.name for f in files]},
        memory_limit=memory_limit,
        progress=progress,
        **tables,
        **options,
    )
    with writer:
        plain = file_ids is None and object_column is None
        if not (plain and _sorted_las(writer, sources, chunk_rows, memory_limit, progress)):
            _stream(writer, sources, chunk_rows, file_ids, object_column, groups, names, progress)
    return open_store(target, storage_options=options.get("storage_options"))


def _sorted_las(
    writer: Any, sources: list[PointSource], block_rows: int, memory_limit: int | None, progress: bool
) -> bool:
    """Give ``writer`` the records of uncompressed LAS files of one layout sorted in place by
    cell (see :mod:`zarr_vectors.io.las_sort`), when it spills; False when it did not (the
    files are to be streamed)."""
    las = [s.source for s in sources if isinstance(s, _Las)]
    if len(las) != len(sources) or not sortable(las) or memory_limit is None:
        return False
    if not isinstance(writer, PointStream) or writer.spill_dir is None:
        return False
    records = sort_las(
        las,
        writer.layout.grid,
        writer.layout.bounds,
        writer.spill_dir,
        workers=writer.workers,
        block_rows=block_rows,
        memory_limit=memory_limit,
        progress=progress,
    )
    if records is None:
        return False
    writer.adopt(records)
    return True


def _stream(
    writer: Any,
    sources: list[PointSource],
    chunk_rows: int,
    file_ids: str | None,
    object_column: str | None,
    groups: dict[int, np.ndarray],
    names: list[str],
    progress: bool,
) -> None:
    """Append every file's blocks; with ``file_ids="group"`` fill ``groups`` and ``names``
    (the writer reads them at close, after the last file)."""
    from tqdm.auto import tqdm

    counts = [s.count for s in sources]
    total = sum(c for c in counts if c is not None) if None not in counts else None
    with tqdm(total=total, unit="pt", desc="ingesting", disable=not progress, unit_scale=True) as bar:
        for i, source in enumerate(sources):
            seen: list[np.ndarray] = []
            blocks = prefetched(source.chunks(chunk_rows))
            with contextlib.closing(blocks):
                for pos, attrs in blocks:
                    ids = _object_ids(source, attrs, i, len(pos), file_ids, object_column)
                    if file_ids == "group" and ids is not None:
                        seen.append(np.unique(ids))
                    try:
                        writer.append(pos, attributes=attrs, object_ids=ids)
                    except InputError as exc:  # e.g. other attributes than the first file's
                        raise InputError(f"{source.path}: {exc}") from exc
                    bar.update(len(pos))
            if file_ids == "group":
                groups[i] = np.unique(np.concatenate(seen)) if seen else np.zeros(0, np.int64)
                names.append(source.path.name)


def _object_ids(
    source: PointSource,
    attrs: dict[str, np.ndarray],
    index: int,
    n: int,
    file_ids: str | None,
    object_column: str | None,
) -> np.ndarray | None:
    if file_ids == "object":
        return np.full(n, index, np.int64)
    if object_column is None:
        return None
    if object_column not in attrs:
        raise InputError(f"{source.path}: no column {object_column!r} for object ids; it has {sorted(attrs)}")
    ids = attrs.pop(object_column)
    if ids.dtype.kind not in "iu":
        raise InputError(f"{source.path}: object column {object_column!r} holds {ids.dtype}, not integers")
    return ids
