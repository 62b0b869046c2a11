"""Point-file parts of the ``zarr-vectors`` command: ``ingest points``, ``export points`` and
the piecewise path of ``query -o`` (see :mod:`zarr_vectors.cli` for the contract).

``query -o`` of a point cloud to ``.csv``, ``.ply``, ``.obj``, ``.npz``, ``.las`` or ``.laz`` (without
``--objects`` or ``--whole-objects``) is written piece by piece
(:func:`zarr_vectors.io.stream_export.export_points`), so its memory does not grow with
the result; every other query reads the result whole.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from zarr_vectors.errors import ZarrVectorsError
from zarr_vectors.format.kinds import POINT_CLOUD

__all__ = [
    "add_ingest_options",
    "add_export_options",
    "ingest_points_command",
    "export_points_command",
    "stream_query",
]


def add_ingest_options(p: argparse.ArgumentParser) -> None:
    """Options of ``ingest points`` (and ``--keep-duplicate-vertices`` of ``ingest mesh``)."""
    p.add_argument(
        "--file-ids",
        choices=["object", "group"],
        help="points: file i becomes object i, or group i (named by the file) of the --object-column objects",
    )
    p.add_argument("--object-column", metavar="NAME", help="points: the column or dimension of object ids")
    p.add_argument("--columns", metavar="A,B,..", help="points (text): names of the columns, in order")
    p.add_argument(
        "--position-columns", metavar="X,Y[,Z]", help="points (text): the position columns (default x,y,z)"
    )
    p.add_argument("--delimiter", help="points (text): the delimiter (default , for .csv, else whitespace)")
    p.add_argument(
        "--dtype",
        action="append",
        metavar="NAME=TYPE",
        help="points (text): a column's dtype, e.g. --dtype intensity=uint16 (repeatable)",
    )
    p.add_argument(
        "--bounds", metavar="LO,HI", help="points: the store's bounds (default: the files' extent)"
    )
    p.add_argument("--compression", default="none", help="points: compressor of every array (e.g. zstd)")
    p.add_argument(
        "--keep-duplicate-vertices",
        action="store_true",
        help="mesh: keep repeated vertices as read (by default identical vertices are merged, "
        "so triangle soups such as STL arrive indexed)",
    )


def _names(text: str | None) -> list[str] | None:
    return None if text is None else [t.strip() for t in text.split(",") if t.strip()]


def _dtypes(items: list[str] | None) -> dict[str, str] | None:
    out = {}
    for item in items or []:
        name, sep, kind = item.partition("=")
        if not sep:
            raise ZarrVectorsError(f"--dtype takes NAME=TYPE (e.g. intensity=uint16), got {item!r}")
        try:
            np.dtype(kind)
        except TypeError as exc:
            raise ZarrVectorsError(f"--dtype {item!r}: {kind!r} is not a numpy dtype") from exc
        out[name] = kind
    return out or None


def ingest_points_command(
    args: argparse.Namespace,
    options: dict[str, Any] | None,
    refuse_existing: Callable[[str, dict[str, Any] | None], None],
    input_files: Callable[[argparse.Namespace, tuple[str, ...], str], list[Path]],
    bbox: Callable[[str], tuple[list[float], list[float]]],
) -> int:
    """``ingest points``: options, then the target, then the files, then the stream."""
    from zarr_vectors.io.pointfiles import POINT_SUFFIXES, ingest_points

    dtypes = _dtypes(args.dtype)
    bounds = None if args.bounds is None else bbox(args.bounds)
    if args.file_ids == "group" and args.object_column is None:
        raise ZarrVectorsError("--file-ids group groups the objects of --object-column NAME; give it")
    if not args.overwrite:
        refuse_existing(args.output, options)
    files = input_files(args, POINT_SUFFIXES, "point")
    ds = ingest_points(
        args.output,
        files,
        chunk_shape=args.chunk_size,
        bounds=bounds,
        file_ids=args.file_ids,
        object_column=args.object_column,
        columns=_names(args.columns),
        positions=_names(args.position_columns),
        delimiter=args.delimiter,
        dtypes=dtypes,
        crs=args.crs,
        progress=not args.no_progress,
        compression=args.compression,
        overwrite=args.overwrite,
        storage_options=options,
    )
    crs = getattr(ds.crs, "code", None) or ("-" if ds.crs is None else "custom")
    print(
        f"wrote {ds.vertex_count():,} points from {len(files)} file(s), attributes "
        f"{', '.join(ds.attribute_names()) or '-'}, CRS {crs} to {args.output}"
    )
    return 0


def add_export_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--level", type=int, default=0, help="points: resolution level (default 0)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument(
        "--polygon",
        metavar="FILE|WKT",
        help="points: keep the points strictly inside this polygon (WKT, or a vector file whose polygons are "
        "joined), tested on the first two axes",
    )
    p.add_argument(
        "--where",
        action="append",
        metavar="EXPR",
        help="points: keep rows whose attributes pass, e.g. 'intensity > 0.5'",
    )


def export_points_command(args: argparse.Namespace, ds: Any, box: Any, polygon: Any = None) -> int:
    """``export points``: a box (or everything) of a point cloud to .csv, .ply, .obj, .npz, .las or
    .laz, narrowed by ``--where`` and the ``polygon`` of ``--polygon``."""
    from zarr_vectors.io.stream_export import export_points

    if args.object is not None:
        raise ZarrVectorsError("export points takes --bbox (or nothing, for every point), not --object")
    n = export_points(
        ds,
        args.output,
        bbox=box,
        level=args.level,
        progress=not args.no_progress,
        where=args.where,
        polygon=polygon,
        polygon_axes=None if polygon is None or ds.ndim == 2 else (0, 1),
    )
    print(f"wrote {n:,} points to {args.output}")
    return 0


def stream_query(args: argparse.Namespace, ds: Any, box: Any, polygon: Any = None) -> int | None:
    """``query -o`` written piece by piece when it can be (a point cloud to a streamable
    format, no ``--objects``, ``--whole-objects`` or ``--predicate intersects``); None otherwise."""
    from zarr_vectors.io.stream_export import STREAM_FORMATS, export_points

    if Path(args.output).suffix.lower() not in STREAM_FORMATS or args.objects is not None:
        return None
    if args.whole_objects or any(t != POINT_CLOUD for t in ds.geometry_types):
        return None
    if getattr(args, "predicate", "contains") != "contains":
        return None  # whole objects: read at once
    attributes = False if args.no_attributes else (args.attributes.split(",") if args.attributes else None)
    n = export_points(
        ds,
        args.output,
        bbox=box,
        level=args.level,
        attributes=attributes,
        progress=not args.no_progress and sys.stderr.isatty(),
        where=getattr(args, "where", None),
        polygon=polygon,
        polygon_axes=None if polygon is None or ds.ndim == 2 else (0, 1),
    )
    print(f"wrote {n:,} vertices to {args.output}")
    return 0
