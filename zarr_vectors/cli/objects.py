"""The streaming paths of ``query -o`` (see :mod:`zarr_vectors.cli` for the contract).

:func:`stream_query` writes a query piece by piece or batch by batch when it can:

- a point cloud without ``--objects`` / ``--whole-objects`` to ``.csv``, ``.ply``, ``.obj``,
  ``.npz``, ``.las`` or ``.laz``: chunk by chunk
  (:func:`zarr_vectors.cli.points.stream_query`);
- ``--objects``, a whole level of lines, graphs, skeletons, shapes or meshes, or ``--bbox
  --whole-objects`` of lines, graphs, skeletons or shapes, to ``.csv``, ``.ply``, ``.obj``,
  ``.swc``, ``.geojson``, ``.geojsonl``, ``.gpkg`` or ``.fgb``: object batch by object batch
  (:func:`zarr_vectors.io.object_export.export_objects`);
- ``--bbox`` of lines, graphs, skeletons or shapes to a feature format (whose features are
  the objects whole anyway), likewise;
- ``--bbox`` of those kinds or meshes to ``.csv``, ``.ply``, ``.obj`` or ``.swc`` when the
  box is estimated to hold more than :data:`LARGE_LEVEL` vertices: the objects the box meets,
  read whole a batch at a time and cut to the box (the rows of the query, object by object
  rather than chunk by chunk).

Anything else (``--where``, ``--polygon``, a smaller box cut into pieces, other formats)
reads the result whole; :func:`note_whole` says so on stderr when the level is large.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from zarr_vectors.format.kinds import FAMILY, LINKED_FAMILIES

__all__ = ["LARGE_LEVEL", "stream_query", "note_whole"]

#: Vertices above which a box of lines, graphs, skeletons, shapes or meshes is written cut
#: object batch by object batch, and a whole-result ``query -o`` prints a note on stderr.
LARGE_LEVEL = 1 << 24
#: Formats whose records are whole objects (features), whatever the query cut.
FEATURE_FORMATS = (".geojson", ".geojsonl", ".gpkg", ".fgb")


def _attributes(args: argparse.Namespace) -> Any:
    return False if args.no_attributes else (args.attributes.split(",") if args.attributes else None)


def _object_selection(args: argparse.Namespace, ds: Any, box: Any) -> dict[str, Any] | None:
    """``ids`` / ``bbox`` for :func:`export_objects`, or None when the query is not one of
    whole objects (or the level has no object index)."""
    from zarr_vectors.format.kinds import family_of
    from zarr_vectors.io.object_export import OBJECT_STREAM_FORMATS

    suffix = Path(args.output).suffix.lower()
    if suffix not in OBJECT_STREAM_FORMATS:
        return None
    if args.where or args.polygon is not None or getattr(args, "predicate", "contains") != "contains":
        return None
    if ds.level(args.level).manifests is None:
        return None
    family = family_of(ds.geometry_types)
    if args.objects is not None:
        return None if args.whole_objects else {"ids": args.objects}
    if box is None:
        return {} if family not in (None, "points") else None
    linked = family in LINKED_FAMILIES
    if linked and (args.whole_objects or suffix in FEATURE_FORMATS):
        return {"bbox": box}  # whole objects (a feature is its object whole, cut or not)
    if (
        (linked or (family is not None and FAMILY[family].has_faces))
        and not args.whole_objects
        and _large(ds, args.level, box)
    ):
        return {"bbox": box, "cut": True}
    return None


def _large(ds: Any, level: int, box: Any) -> bool:
    """Whether the level's estimated vertices inside ``box`` exceed :data:`LARGE_LEVEL`."""
    from zarr_vectors.engine import parse_box
    from zarr_vectors.pyramid.estimate import estimate_count

    lo, hi = parse_box(box, ds.ndim, ds.axes)
    return estimate_count(ds.level(level), lo, hi) > LARGE_LEVEL


def stream_query(args: argparse.Namespace, ds: Any, box: Any, polygon: Any = None) -> int | None:
    """``query -o`` written piece by piece or batch by batch when it can be (see the module
    documentation); None when the result must be read whole."""
    from zarr_vectors.cli import points as cli_points

    done = cli_points.stream_query(args, ds, box, polygon)
    if done is not None:
        return done
    selection = _object_selection(args, ds, box)
    if selection is None:
        return None
    from zarr_vectors.io.object_export import export_objects

    vertices, objects = export_objects(
        ds,
        args.output,
        level=args.level,
        attributes=_attributes(args),
        progress=not args.no_progress and sys.stderr.isatty(),
        **selection,
    )
    print(f"wrote {vertices:,} vertices, {objects:,} objects to {args.output}")
    return 0


def note_whole(args: argparse.Namespace, ds: Any) -> None:
    """On stderr: the result of this ``query -o`` is read whole, and the level is large."""
    count = ds.vertex_count(args.level)
    if count > LARGE_LEVEL:
        print(
            f"note: {Path(args.output).name} is written from the whole result, held in memory (level "
            f"{args.level} has {count:,} vertices); --objects, --whole-objects or a whole read to .csv, .ply, .gpkg, "
            ".obj, .swc, .geojson or .geojsonl is written in batches",
            file=sys.stderr,
        )
