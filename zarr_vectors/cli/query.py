"""``zarr-vectors query`` and ``render``: a box, objects or a polygon of a store, into a file,
counts or an image."""

from __future__ import annotations

import argparse
import os
from typing import Any

import numpy as np

from zarr_vectors.cli.arguments import (
    add_storage_options,
    bbox_arg,
    object_id,
    polygon_arg,
    positive_number,
    storage_options_arg,
)
from zarr_vectors.cli.examples import EXAMPLES
from zarr_vectors.errors import ZarrVectorsError

__all__ = [
    "RENDER_MAX_VERTICES",
    "add_query_parser",
    "add_render_parser",
    "cmd_query",
    "cmd_render",
    "collection_query",
    "counts_text",
    "member_output",
]


#: Vertices ``render`` draws at most by default: it picks the pyramid level that fits.
RENDER_MAX_VERTICES = 2_000_000


def _select(args: argparse.Namespace, max_vertices: int | None = None) -> Any:
    """The Result that ``--bbox`` / ``--objects`` / ``--level`` / ``--attributes`` select
    (``max_vertices``: instead of ``--level``, the finest level that fits)."""
    from zarr_vectors.dataset import open as open_store

    ds = open_store(args.store, storage_options=storage_options_arg(args.storage_options))
    attributes = False if args.no_attributes else (args.attributes.split(",") if args.attributes else None)
    if args.objects is not None:
        if args.whole_objects:
            raise ZarrVectorsError("--whole-objects goes with --bbox; --objects already reads whole objects")
        if args.where or args.polygon:
            raise ZarrVectorsError(
                "--where and --polygon go with --bbox or a whole read; --objects reads whole objects"
            )
        return ds.objects(args.objects, level=args.level, attributes=attributes)
    bbox = None if args.bbox is None else bbox_arg(args.bbox)
    if args.polygon is None and args.predicate != "contains":
        raise ZarrVectorsError("--predicate goes with --polygon")
    return ds.query(
        bbox,
        level=args.level,
        max_vertices=max_vertices,
        attributes=attributes,
        whole_objects=args.whole_objects,
        where=args.where,
        polygon=None if args.polygon is None else polygon_arg(args.polygon),
        polygon_axes=None if args.polygon is None or ds.ndim == 2 else (0, 1),
        predicate=args.predicate,
    )


def counts_text(res: Any) -> str:
    """``1,234 vertices, 5 objects[, 6 edges][, 7 faces]`` of a Result."""
    parts = [f"{len(res):,} vertices"]
    if res.object_ids is not None:
        parts.append(f"{len(np.unique(res.object_ids)):,} objects")
    for name in ("edges", "faces"):
        if getattr(res, name, None) is not None:
            parts.append(f"{len(getattr(res, name)):,} {name}")
    return ", ".join(parts)


def cmd_query(args: argparse.Namespace) -> int:
    from zarr_vectors.cli.collection import collection_at

    coll = collection_at(args.store, storage_options_arg(args.storage_options))
    if coll is not None:  # one Result per member
        return collection_query(coll, args)
    if args.member:
        raise ZarrVectorsError(f"--member goes with a collection; {args.store} is not one")
    if (args.output is None) == (not args.count):
        raise ZarrVectorsError("give -o OUTPUT (a .csv, .ply, .obj, .npz, .swc or .geojson file) or --count")
    if args.output is not None:  # piece by piece or object batch by batch when it can (cli/objects.py)
        from zarr_vectors.cli.objects import note_whole, stream_query
        from zarr_vectors.dataset import open as open_store

        ds = open_store(args.store, storage_options=storage_options_arg(args.storage_options))
        polygon = None if args.polygon is None else polygon_arg(args.polygon)
        done = stream_query(args, ds, None if args.bbox is None else bbox_arg(args.bbox), polygon)
        if done is not None:
            return done
        note_whole(args, ds)
    res = _select(args)
    if args.count:
        print(counts_text(res))
        return 0
    from zarr_vectors.io.export import export_result

    export_result(res, args.output)
    print(f"wrote {counts_text(res)} to {args.output}")
    return 0


def member_output(output: str, member: str) -> str:
    """The file of ``member`` for ``query COLLECTION -o output``: ``{member}`` in ``output``
    replaced by the name, else the name put before the extension (``syn.csv`` ->
    ``syn.synapses.csv``)."""
    if "{member}" in output:
        return output.replace("{member}", member)
    root, ext = os.path.splitext(output)
    return f"{root}.{member}{ext}"


def collection_query(coll: Any, args: argparse.Namespace) -> int:
    """``zarr-vectors query COLLECTION``: :meth:`Collection.query` (or ``objects`` with
    ``--objects``) of the ``--member`` members, one count line or one file per member."""
    if (args.output is None) == (not args.count):
        raise ZarrVectorsError("give -o OUTPUT (one file per member: see --help) or --count")
    if args.polygon is not None or args.predicate != "contains":
        raise ZarrVectorsError(
            "--polygon and --predicate read a store, not a collection: query the member's store"
        )
    if args.output is not None and "{member}" not in args.output and not os.path.splitext(args.output)[1]:
        raise ZarrVectorsError(f"-o {args.output}: give a file name with an extension (.csv, .npz, ...)")
    attributes = False if args.no_attributes else (args.attributes.split(",") if args.attributes else None)
    members = args.member or None
    if args.objects is not None:
        if args.whole_objects or args.where:
            raise ZarrVectorsError(
                "--whole-objects and --where go with --bbox; --objects reads whole objects"
            )
        results = coll.objects(args.objects, members=members, level=args.level, attributes=attributes)
    else:
        results = coll.query(
            None if args.bbox is None else bbox_arg(args.bbox),
            members=members,
            level=args.level,
            where=None if not args.where else " and ".join(args.where),
            attributes=attributes,
            whole_objects=args.whole_objects,
        )
    from zarr_vectors.io.export import export_result

    for name, res in results.items():
        if args.count:
            print(f"{name}: {counts_text(res)}")
            continue
        path = member_output(args.output, name)
        try:
            export_result(res, path)
        except ZarrVectorsError as exc:
            raise ZarrVectorsError(f"member {name}: {exc}") from exc
        print(f"wrote {name}: {counts_text(res)} to {path}")
    return 0


def _pixels(text: str) -> tuple[int, int]:
    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError as exc:
        raise ZarrVectorsError(f"--size {text!r}: give WIDTHxHEIGHT in pixels, e.g. 1200x900") from exc
    if w <= 0 or h <= 0:
        raise ZarrVectorsError(f"--size {text!r}: width and height must be positive")
    return w, h


def cmd_render(args: argparse.Namespace) -> int:
    from zarr_vectors.plot import image_format, render

    w, h = _pixels(args.size)
    image_format(args.output)  # before anything is read
    res = _select(args, max_vertices=args.max_vertices if args.level == 0 else None)
    render(
        res,
        args.output,
        size=(w / args.dpi, h / args.dpi),
        dpi=args.dpi,
        view=args.view,
        color_by=args.color_by,
        point_size=args.point_size,
        title=args.title,
    )
    level = "" if res.origin is None or res.origin.level == 0 else f" (level {res.origin.level})"
    print(f"drew {counts_text(res)}{level} to {args.output}")
    return 0


def _add_selection(p: argparse.ArgumentParser) -> None:
    """Arguments shared by ``query`` and ``render``: what to read."""
    p.add_argument("store", help="store to read (path or URL)")
    which = p.add_mutually_exclusive_group()
    which.add_argument(
        "--bbox", help="inclusive box: lo then hi, comma-separated (x0,y0,z0,x1,y1,z1); default: everything"
    )
    which.add_argument(
        "--objects",
        type=object_id,
        nargs="+",
        metavar="ID",
        help="object ids to read whole (any int64 or uint64 id, e.g. a segment id)",
    )
    p.add_argument("--level", type=int, default=0, help="resolution level (default 0, the finest)")
    attrs = p.add_mutually_exclusive_group()
    attrs.add_argument("--attributes", metavar="A,B", help="vertex attributes to read (default: all)")
    attrs.add_argument("--no-attributes", action="store_true", help="read no attributes")
    p.add_argument(
        "--whole-objects",
        action="store_true",
        help="with --bbox: every whole line or object with a vertex inside, instead of the pieces inside",
    )
    p.add_argument(
        "--polygon",
        metavar="FILE|WKT",
        help="keep what lies in this polygon: a WKT string ('POLYGON ((0 0, 10 0, 5 8, 0 0))') or a vector file "
        "(GeoJSON, or any OGR file with the geo extra) whose polygons are joined; tested on the first two axes",
    )
    p.add_argument(
        "--predicate",
        choices=["contains", "intersects"],
        default="contains",
        help="with --polygon: contains keeps the vertices strictly inside; intersects returns every whole "
        "object whose geometry meets the polygon",
    )
    p.add_argument(
        "--where",
        action="append",
        metavar="EXPR",
        help="keep rows whose numeric attributes pass, e.g. 'confidence > 0.8 and type == 3' (a vertex "
        "attribute, else an object attribute); repeat to add conditions",
    )
    add_storage_options(p)


def add_query_parser(sub: Any, fmt: Any) -> None:
    p = sub.add_parser(
        "query",
        help="read a box or objects into a file, or count them",
        epilog=EXAMPLES["query"],
        formatter_class=fmt,
    )
    _add_selection(p)
    p.add_argument("-o", "--output", help="file to write; its extension picks the format")
    p.add_argument("--count", action="store_true", help="print the counts instead of writing a file")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (shown on a terminal)")
    p.add_argument(
        "--member",
        action="append",
        metavar="NAME",
        help="on a collection: a member to read (repeat for several; default every member). A "
        "collection query writes one file per member (-o out.csv -> out.NAME.csv, or put {member} in "
        "the name) or prints one count line per member; --where may filter across a relationship "
        "(\"post_segment.cell_type == 'basket'\")",
    )
    p.set_defaults(func=cmd_query)


def add_render_parser(sub: Any, fmt: Any) -> None:
    p = sub.add_parser(
        "render",
        help="draw a box or objects into an image (extra 'plot')",
        epilog=EXAMPLES["render"],
        formatter_class=fmt,
    )
    _add_selection(p)
    p.add_argument("-o", "--output", required=True, help="image file (.png, .svg, .pdf, ...)")
    p.add_argument("--color-by", metavar="NAME", help="'object', or a vertex or edge attribute name")
    p.add_argument("--view", help="'3d' (default with 3 axes), '2d', or axis names such as xy, xz, 'x,z'")
    p.add_argument("--size", default="1000x800", help="image size in pixels, WIDTHxHEIGHT (default 1000x800)")
    p.add_argument("--dpi", type=positive_number, default=100.0, help="dots per inch (default 100)")
    p.add_argument(
        "--point-size", type=positive_number, help="marker area in points^2 (default: shrinks with the count)"
    )
    p.add_argument("--title", help="title above the drawing")
    p.add_argument(
        "--max-vertices",
        type=int,
        default=RENDER_MAX_VERTICES,
        help="draw the finest level whose estimated count in the box is at most this "
        f"(default {RENDER_MAX_VERTICES:,}; ignored with --level above 0 or --objects)",
    )
    p.set_defaults(func=cmd_render)
