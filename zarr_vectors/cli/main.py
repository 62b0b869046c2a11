"""The ``zarr-vectors`` command: ingest, export, info, query, render, pyramid, validate, demo.

Run ``zarr-vectors SUBCOMMAND --help`` for examples.

The contract, for every subcommand:

- Success: exit status 0 (``validate``: 1 when the store has problems).
- Every error, a bad option as much as a failed read or write, is one line on stderr,
  ``zarr-vectors SUBCOMMAND: error: ...``, saying what went wrong, where (the file, store
  or option, by its command-line name) and what to do, and exit status 2; no traceback.
- Options are checked, and ``ingest`` refuses an existing target without ``--overwrite``,
  before any input is read.
- When the reader of stdout goes away (``zarr-vectors info ... | head``), the command stops
  quietly with exit status 141 (128 + SIGPIPE), as Unix tools killed by SIGPIPE do.
- Install hints name the extra and both ways to get it (:func:`zarr_vectors._extras.install_hint`).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

from zarr_vectors._extras import needs
from zarr_vectors.cli.arguments import object_id, positive_number
from zarr_vectors.cli.ingest import input_files, one_input, run_ingest
from zarr_vectors.errors import StoreExistsError, ZarrVectorsError

#: Exit status after stdout's reader went away (128 + SIGPIPE, what a shell reports for ``yes | head``).
EXIT_BROKEN_PIPE = 141

EXAMPLES = {
    "ingest": "examples:\n  zarr-vectors ingest swc neurons/ -o neurons.zarr --chunk-size 200\n"
    "  zarr-vectors ingest points tiles/*.laz -o city.zarr --chunk-size 50 --file-ids object\n"
    "  zarr-vectors ingest points scan.csv -o scan.zarr --chunk-size 10 --position-columns X,Y,Z\n"
    "  zarr-vectors ingest mesh cells/ -o cells.zarr --chunk-size 1000 --draco\n"
    "  zarr-vectors ingest swc a.swc b.swc -o two.zarr --chunk-size 50 --overwrite\n"
    "  zarr-vectors ingest mesh scans/ -o scans.zarr --chunk-size 500 --recursive\n"
    "  zarr-vectors ingest trx tracts.trx -o tracts.zarr --chunk-size 20\n"
    "  zarr-vectors ingest geojson countries.geojson -o countries.zarr --chunk-size 10\n"
    "  zarr-vectors ingest vector parcels.gpkg -o parcels.zarr --chunk-size 500 --repair",
    "export": "examples:\n  zarr-vectors export swc neurons.zarr --object 3 -o neuron3.swc\n"
    "  zarr-vectors export points city.zarr --bbox 0,0,0,500,500,100 -o part.laz\n"
    "  zarr-vectors export mesh cells.zarr --object 2 -o cell2.glb\n"
    "  zarr-vectors export mesh cells.zarr --object 2 -o cell2.ply\n"
    "  zarr-vectors export mesh cells.zarr --bbox 0,0,0,500,500,500 -o part.obj\n"
    "  zarr-vectors export swc s3://bucket/neurons.zarr --object 3 -o neuron3.swc \\\n"
    "      --storage-options '{\"anon\": true}'\n"
    "  zarr-vectors export neuroglancer cells.zarr cells-ng/",
    "info": "examples:\n  zarr-vectors info neurons.zarr\n  zarr-vectors info s3://bucket/cells.zarr --json\n"
    "  zarr-vectors info s3://bucket/cells.zarr --storage-options '{\"anon\": true}'",
    "query": "examples:\n  zarr-vectors query cells.zarr --bbox 0,0,0,100,100,100 -o box.csv\n"
    "  zarr-vectors query cells.zarr --bbox -50,-50,0,50,50,20 --count\n"
    "  zarr-vectors query neurons.zarr --objects 3 7 -o two.swc\n"
    "  zarr-vectors query tracts.zarr --bbox 0,0,0,40,40,40 --whole-objects -o tracts.ply\n"
    "  zarr-vectors query synapses.zarr --bbox 0,0,0,500,500,500 --where 'confidence > 0.8' --count\n"
    "  zarr-vectors query parcels.zarr --polygon district.geojson --predicate intersects -o hit.geojson\n"
    "  zarr-vectors query s3://bucket/cells.zarr --level 1 --attributes size -o level1.npz \\\n"
    "      --storage-options '{\"anon\": true}'\n"
    "formats by extension: .csv .ply .obj .npz .swc .geojson .las .laz .glb .gltf .stl (see docs/cli.md)",
    "render": "examples:\n  zarr-vectors render cells.zarr --bbox 0,0,0,200,200,200 -o view.png\n"
    "  zarr-vectors render cells.zarr --color-by intensity --view xy -o top.png\n"
    "  zarr-vectors render neurons.zarr --objects 3 7 --color-by object -o two.svg --size 1600x1200\n"
    + needs("render", "matplotlib", "plot"),
    "demo": "examples:\n  zarr-vectors demo\n  zarr-vectors demo /tmp/demo.zarr\n"
    "  zarr-vectors demo /tmp/small.zarr --points 20000",
    "reshard": "examples:\n  zarr-vectors reshard cells.zarr s3://bucket/cells.zarr --shards auto\n"
    "  zarr-vectors reshard cells.zarr packed.zarr --shards 4,4,8\n"
    "  zarr-vectors reshard s3://bucket/cells.zarr local.zarr --shards none --overwrite\n"
    "shards: auto (about 64 MB each), none (one object per cell), N or N,N,N chunks per shard",
    "validate": "examples:\n  zarr-vectors validate cells.zarr\n  zarr-vectors validate cells.zarr --level 2\n"
    "  zarr-vectors validate s3://bucket/cells.zarr --json --storage-options '{\"anon\": true}'\n"
    "levels: 1 structure, 2 metadata, 3 consistency of every cell, 4 geometry, 5 multi-resolution\n"
    "exit status: 0 valid, 1 problems found, 2 the store could not be read",
}


def _storage_options(text: str | None) -> dict[str, Any] | None:
    """``--storage-options`` JSON (an object), passed to fsspec for URLs."""
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ZarrVectorsError(
            f"--storage-options is not valid JSON ({exc}); give an object such as '{{\"anon\": true}}'"
        ) from exc
    if not isinstance(value, dict):
        raise ZarrVectorsError(f"--storage-options must be a JSON object, got {type(value).__name__}")
    return value


def _add_storage_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--storage-options",
        metavar="JSON",
        help="options for the URL's filesystem, as a JSON object (e.g. credentials, endpoint)",
    )


def _refuse_existing(output: str, storage_options: dict[str, Any] | None) -> None:
    """Without ``--overwrite``, an output that already holds something is refused before any
    input is read (the writer checks again when it starts)."""
    from zarr_vectors.storage import open_backend

    text = output[len("file://") :] if output.startswith("file://") else output
    if "://" in text:
        taken = not open_backend(text, read_only=True, storage_options=storage_options).is_empty()
    else:
        path = Path(text)
        taken = path.exists() and not (path.is_dir() and not any(path.iterdir()))
    if taken:
        raise ZarrVectorsError(f"{output} already exists; add --overwrite to replace it")


def cmd_ingest(args: argparse.Namespace) -> int:
    """Options, then the target, then the input files are checked before anything is read."""
    options = _storage_options(args.storage_options)
    if args.format == "points":
        from zarr_vectors.cli.points import ingest_points_command

        return ingest_points_command(args, options, _refuse_existing, input_files, _bbox)
    source = one_input(args) if args.format not in ("swc", "mesh") else None
    if args.crs is not None:
        from zarr_vectors.geo import parse_crs

        parse_crs(args.crs)
    if not args.overwrite:
        _refuse_existing(args.output, options)
    if args.format == "mesh":
        from zarr_vectors.io.meshes import MESH_SUFFIXES

        inputs: Any = input_files(args, MESH_SUFFIXES, "mesh")
    else:
        inputs = input_files(args, (".swc",), "SWC") if args.format == "swc" else source
    try:
        return run_ingest(args, inputs, options)
    except StoreExistsError as exc:  # the target appeared while the inputs were read
        if args.overwrite:
            raise
        raise ZarrVectorsError(f"{args.output} already exists; add --overwrite to replace it") from exc


def cmd_export(args: argparse.Namespace) -> int:
    from zarr_vectors.dataset import open as open_store

    if args.format != "points" and (args.polygon is not None or args.where):
        raise ZarrVectorsError(f"--polygon and --where go with export points, not export {args.format}")
    if args.format == "neuroglancer":
        return cmd_export_neuroglancer(args)
    if args.output is None or args.outdir is not None:
        raise ZarrVectorsError(
            f"export {args.format} writes the file given by -o OUTPUT (OUTDIR is for neuroglancer)"
        )
    if args.format == "points":
        from zarr_vectors.cli.points import export_points_command

        ds = open_store(args.store, storage_options=_storage_options(args.storage_options))
        polygon = None if args.polygon is None else _polygon(args.polygon)
        return export_points_command(args, ds, _bbox(args.bbox) if args.bbox else None, polygon)

    if args.format == "mesh":
        from zarr_vectors.io.meshes import export_mesh

        ds = open_store(args.store, storage_options=_storage_options(args.storage_options))
        bbox = _bbox(args.bbox) if args.bbox else None
        objects = args.object
        nv, nf = export_mesh(ds, args.output, bbox=bbox, objects=objects)
        print(f"wrote {nv} vertices, {nf} faces to {args.output}")
        return 0
    from zarr_vectors.io.swc import export_swc

    if args.object is None or len(args.object) != 1:
        raise ZarrVectorsError("export swc needs exactly one --object ID (an SWC file holds one skeleton)")
    (oid,) = args.object
    n = export_swc(
        open_store(args.store, storage_options=_storage_options(args.storage_options)), oid, args.output
    )
    print(f"wrote object {oid} ({n} samples) to {args.output}")
    return 0


def info_dict(target: str, storage_options: dict[str, Any] | None = None) -> dict[str, Any]:
    from zarr_vectors.dataset import open as open_store
    from zarr_vectors.storage import inventory

    ds = open_store(target, storage_options=storage_options)
    arrays, total = inventory(target, storage_options=storage_options)
    lo, hi = ds.bounds
    return {
        "store": target,
        "geometry_types": list(ds.geometry_types),
        "axes": list(ds.axes),
        "bounds": [lo.tolist(), hi.tolist()],
        "chunk_shape": ds.chunk_shape.tolist(),
        "levels": [
            {
                "level": k,
                "vertices": ds.vertex_count(k),
                "objects": ds.num_objects(k),
                "attributes": ds.attribute_names(k),
                "object_attributes": ds.object_attribute_names(k),
            }
            for k in ds.levels
        ],
        "crs": ds.crs,
        "arrays": [a.to_dict() for a in arrays],
        "bytes_on_disk": total,
    }


def _size(n: int) -> str:
    """Bytes in decimal units: ``999 B``, ``1.5 kB``, ``2.0 GB``."""
    if n < 1000:
        return f"{n} B"
    power = min(int(math.log10(n) // 3), 4)
    return f"{n / 1000**power:,.1f} {('kB', 'MB', 'GB', 'TB')[power - 1]}"


def cmd_info(args: argparse.Namespace) -> int:
    info = info_dict(args.store, _storage_options(args.storage_options))
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    print(f"{info['store']}: {', '.join(info['geometry_types'])}; axes {', '.join(info['axes'])}")
    print(f"  bounds {info['bounds'][0]} .. {info['bounds'][1]}, chunk {info['chunk_shape']}")
    print(f"  CRS {json.dumps(info['crs']) if info['crs'] is not None else '-'}")
    for lv in info["levels"]:
        print(
            f"  level {lv['level']}: {lv['vertices']:,} vertices, {lv['objects']:,} objects, "
            f"attributes {lv['attributes'] or '-'}, object attributes {lv['object_attributes'] or '-'}"
        )
        for a in info["arrays"]:
            if a["path"].split("/", 1)[0] == str(lv["level"]):
                unit = "shards" if a.get("sharded") else "chunks"
                print(
                    f"    {a['path']:<36} {a['data_type']:<21} {a['stored_chunks']:>7,} {unit:<6} {_size(a['bytes']):>10}"
                )
    print(f"  on disk: {_size(info['bytes_on_disk'])} in {len(info['arrays'])} arrays")
    return 0


def _bbox(text: str) -> tuple[list[float], list[float]]:
    """``--bbox`` text: lo then hi coordinates, separated by commas or spaces."""
    try:
        values = [float(v) for v in text.replace(",", " ").split()]
    except ValueError as exc:
        raise ZarrVectorsError(f"--bbox {text!r}: {exc}; give lo then hi, e.g. 0,0,0,100,100,100") from exc
    if not values or len(values) % 2:
        raise ZarrVectorsError(
            f"--bbox {text!r} has {len(values)} numbers; give lo then hi (2 x axes numbers), "
            "e.g. 0,0,0,100,100,100"
        )
    return values[: len(values) // 2], values[len(values) // 2 :]


#: Vertices ``render`` draws at most by default: it picks the pyramid level that fits.
RENDER_MAX_VERTICES = 2_000_000


def _select(args: argparse.Namespace, max_vertices: int | None = None) -> Any:
    """The Result that ``--bbox`` / ``--objects`` / ``--level`` / ``--attributes`` select
    (``max_vertices``: instead of ``--level``, the finest level that fits)."""
    from zarr_vectors.dataset import open as open_store

    ds = open_store(args.store, storage_options=_storage_options(args.storage_options))
    attributes = False if args.no_attributes else (args.attributes.split(",") if args.attributes else None)
    if args.objects is not None:
        if args.whole_objects:
            raise ZarrVectorsError("--whole-objects goes with --bbox; --objects already reads whole objects")
        if args.where or args.polygon:
            raise ZarrVectorsError(
                "--where and --polygon go with --bbox or a whole read; --objects reads whole objects"
            )
        return ds.objects(args.objects, level=args.level, attributes=attributes)
    bbox = None if args.bbox is None else _bbox(args.bbox)
    if args.polygon is None and args.predicate != "contains":
        raise ZarrVectorsError("--predicate goes with --polygon")
    return ds.query(
        bbox,
        level=args.level,
        max_vertices=max_vertices,
        attributes=attributes,
        whole_objects=args.whole_objects,
        where=args.where,
        polygon=None if args.polygon is None else _polygon(args.polygon),
        polygon_axes=None if args.polygon is None or ds.ndim == 2 else (0, 1),
        predicate=args.predicate,
    )


def _polygon(text: str) -> Any:
    """The polygon of ``--polygon``: the union of a vector file's polygons, or WKT."""
    import shapely

    from zarr_vectors.io.geojson import read_vector_file

    if Path(text).is_file():
        table = read_vector_file(text)
        shapes = [g for g in table.geometries if g.geom_type in ("Polygon", "MultiPolygon")]
        if not shapes:
            raise ZarrVectorsError(f"--polygon {text}: the file holds no polygons")
        return shapely.union_all(shapes)
    try:
        shape = shapely.from_wkt(text)
    except shapely.errors.GEOSException as exc:
        raise ZarrVectorsError(
            f"--polygon {text!r} is neither a file nor WKT ({exc}); e.g. 'POLYGON ((0 0, 10 0, 5 8, 0 0))'"
        ) from exc
    if shape.geom_type not in ("Polygon", "MultiPolygon"):
        raise ZarrVectorsError(f"--polygon {text!r} is a {shape.geom_type}; give a Polygon or MultiPolygon")
    return shape


def _counts(res: Any) -> str:
    parts = [f"{len(res):,} vertices"]
    if res.object_ids is not None:
        parts.append(f"{len(np.unique(res.object_ids)):,} objects")
    for name in ("edges", "faces"):
        if getattr(res, name, None) is not None:
            parts.append(f"{len(getattr(res, name)):,} {name}")
    return ", ".join(parts)


def cmd_query(args: argparse.Namespace) -> int:
    if (args.output is None) == (not args.count):
        raise ZarrVectorsError("give -o OUTPUT (a .csv, .ply, .obj, .npz, .swc or .geojson file) or --count")
    if args.output is not None:  # piece by piece or object batch by batch when it can (cli/objects.py)
        from zarr_vectors.cli.objects import note_whole, stream_query
        from zarr_vectors.dataset import open as open_store

        ds = open_store(args.store, storage_options=_storage_options(args.storage_options))
        polygon = None if args.polygon is None else _polygon(args.polygon)
        done = stream_query(args, ds, None if args.bbox is None else _bbox(args.bbox), polygon)
        if done is not None:
            return done
        note_whole(args, ds)
    res = _select(args)
    if args.count:
        print(_counts(res))
        return 0
    from zarr_vectors.io.export import export_result

    export_result(res, args.output)
    print(f"wrote {_counts(res)} to {args.output}")
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
    print(f"drew {_counts(res)}{level} to {args.output}")
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
    _add_storage_options(p)


def cmd_validate(args: argparse.Namespace) -> int:
    from zarr_vectors.validation import validate

    report = validate(
        args.store,
        level=args.level,
        storage_options=_storage_options(args.storage_options),
        progress=not args.no_progress and not args.json,
    )
    print(report.to_json() if args.json else report)
    return 0 if report.ok else 1


def shards_value(text: str) -> str | int | tuple[int, ...]:
    """A ``--shards`` value: ``auto``, ``none``, or chunks per shard (``8`` or ``4,4,8``)."""
    if text in ("auto", "none"):
        return text
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not auto, none, or chunks per shard (8, or 4,4,8 one per axis)"
        ) from exc
    return values[0] if len(values) == 1 else values


def cmd_reshard(args: argparse.Namespace) -> int:
    from zarr_vectors.engine import reshard

    reshard(
        args.src,
        args.dst,
        shards=args.shards,
        overwrite=args.overwrite,
        progress=False if args.no_progress else None,
        storage_options=_storage_options(args.storage_options),
        dst_storage_options=_storage_options(args.dst_storage_options),
    )
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from zarr_vectors.demo import run

    run(args.store, args.points)
    return 0


def cmd_pyramid(args: argparse.Namespace) -> int:
    from zarr_vectors.cli.pyramid import pyramid_command

    return pyramid_command(args, _storage_options(args.storage_options))


def _add_pyramid_parser(sub: Any, fmt: Any) -> None:
    from zarr_vectors.cli.pyramid import add_pyramid_options

    p = add_pyramid_options(sub, fmt)
    _add_storage_options(p)
    p.set_defaults(func=cmd_pyramid)


class _Parser(argparse.ArgumentParser):
    """argparse with the command's error contract: one line on stderr, exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="zarr-vectors", description="Zarr Vectors stores: ingest, inspect, export.")
    sub = parser.add_subparsers(dest="command", required=True)
    fmt = argparse.RawDescriptionHelpFormatter

    p = sub.add_parser(
        "ingest", help="write files into a new store", epilog=EXAMPLES["ingest"], formatter_class=fmt
    )
    p.add_argument(
        "format",
        choices=["swc", "trk", "tck", "trx", "mesh", "geojson", "vector", "points"],
        help="input file format (mesh: PLY, OBJ, STL, GLB/GLTF, OFF through trimesh; vector: "
        "any file GDAL reads, e.g. GeoPackage, Shapefile, FlatGeobuf, through pyogrio; points: "
        "LAS/LAZ (extra 'las'), PLY point clouds, CSV/XYZ/TXT, several files into one store)",
    )
    p.add_argument("inputs", nargs="+", help="files, or folders whose files of that format are read")
    p.add_argument("-o", "--output", required=True, help="store to write (path or URL)")
    p.add_argument(
        "--chunk-size", type=positive_number, required=True, help="chunk edge length, in the files' units"
    )
    p.add_argument(
        "--recursive",
        action="store_true",
        help="swc/mesh: also read the files in subfolders of "
        "the folders given (otherwise they are skipped, with a note)",
    )
    p.add_argument(
        "--draco", action="store_true", help="meshes: Draco-encode each chunk (11-bit quantization)"
    )
    p.add_argument(
        "--crs", help="geojson/vector/points: the CRS (EPSG:xxxx, WKT2 or PROJJSON), overriding the file's"
    )
    p.add_argument("--layer", help="vector: the layer to read (default: the first)")
    p.add_argument(
        "--repair",
        action="store_true",
        help="geojson/vector: repair invalid polygons with "
        "shapely.make_valid (reported) instead of refusing them",
    )
    p.add_argument("--overwrite", action="store_true", help="replace an existing store")
    p.add_argument(
        "--sequential-ids",
        action="store_true",
        help="swc/mesh: number objects 0, 1, ... in file order. By default, when every file "
        "name is an integer (720575940621039145.swc, as neuPrint, navis and cloud-volume "
        "save segments), those integers are the object ids",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    _add_storage_options(p)
    from zarr_vectors.cli.points import add_export_options, add_ingest_options

    add_ingest_options(p)
    p.set_defaults(func=cmd_ingest)

    p = sub.add_parser(
        "export", help="write objects of a store to a file", epilog=EXAMPLES["export"], formatter_class=fmt
    )
    p.add_argument(
        "format",
        choices=["swc", "mesh", "points", "neuroglancer"],
        help="swc: one skeleton; mesh: a box or an object of a mesh "
        "store, format from the output's suffix (.ply .obj .stl .glb .gltf .off); points: a box "
        "or all of a point cloud, written piece by piece (.csv .ply .obj .npz .las .laz); neuroglancer: "
        "the store as static precomputed sources in the folder OUTDIR",
    )
    p.add_argument("store")
    p.add_argument("outdir", nargs="?", help="neuroglancer: the folder to write")
    p.add_argument(
        "--object",
        type=object_id,
        action="append",
        metavar="ID",
        help="object id to export, any int64 or uint64 id such as a segment id (mesh: repeat "
        "for several objects in one file; swc: one)",
    )
    p.add_argument(
        "--bbox", help="mesh, points: export what is inside this box (lo then hi, comma-separated)"
    )
    p.add_argument("-o", "--output", help="the file to write (swc, mesh, points)")
    p.add_argument("--base-url", help="neuroglancer: where OUTDIR will be served, for state.json")
    p.add_argument("--overwrite", action="store_true", help="neuroglancer: write into a non-empty OUTDIR")
    from zarr_vectors.cli.neuroglancer import add_mesh_format_option, add_sharding_option

    add_mesh_format_option(p, "neuroglancer: ")
    add_sharding_option(p)
    _add_storage_options(p)
    add_export_options(p)
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("info", help="describe a store", epilog=EXAMPLES["info"], formatter_class=fmt)
    p.add_argument("store")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    _add_storage_options(p)
    p.set_defaults(func=cmd_info)

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
    p.set_defaults(func=cmd_query)

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

    p = sub.add_parser(
        "validate",
        help="check a store against the format; exit 1 when it has problems",
        epilog=EXAMPLES["validate"],
        formatter_class=fmt,
    )
    p.add_argument("store", help="store to check (path or URL)")
    p.add_argument(
        "--level",
        type=int,
        default=5,
        choices=range(1, 6),
        metavar="N",
        help="check depth 1-5 (default 5, everything)",
    )
    p.add_argument("--json", action="store_true", help="machine-readable report")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    _add_storage_options(p)
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser(
        "reshard",
        help="copy a store with its cells grouped into shards anew (or one object per cell)",
        epilog=EXAMPLES["reshard"],
        formatter_class=fmt,
    )
    p.add_argument("src", help="store to copy (path or URL)")
    p.add_argument("dst", help="where to write the copy (path or URL)")
    p.add_argument(
        "--shards",
        type=shards_value,
        default="auto",
        help="auto (default), none, N or N,N,N chunks per shard",
    )
    p.add_argument("--overwrite", action="store_true", help="replace an existing store at DST")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    _add_storage_options(p)
    p.add_argument("--dst-storage-options", metavar="JSON", help="options for DST's filesystem (JSON object)")
    p.set_defaults(func=cmd_reshard)

    _add_pyramid_parser(sub, fmt)

    from zarr_vectors.demo import DEFAULT_POINTS, positive_int

    p = sub.add_parser(
        "demo", help="write and query a demo store", epilog=EXAMPLES["demo"], formatter_class=fmt
    )
    p.add_argument("store", nargs="?", default="demo-store.zarr", help="where to write (a local directory)")
    p.add_argument(
        "--points",
        type=positive_int,
        default=DEFAULT_POINTS,
        metavar="N",
        help=f"number of synapse points to write (default {DEFAULT_POINTS:,})",
    )
    p.set_defaults(func=cmd_demo)
    _add_serve_parser(sub, fmt)
    return parser


def _glue_bbox(argv: list[str]) -> list[str]:
    """``--bbox -5,0,...`` as ``--bbox=-5,0,...``: argparse would take a value starting with '-' for an option."""
    out: list[str] = []
    for arg in argv:
        if out and out[-1] == "--bbox":
            out[-1] = f"--bbox={arg}"
        else:
            out.append(arg)
    return out


def _os_error_line(exc: OSError, args: argparse.Namespace) -> str:
    """One line for a failed file or store access: what failed, on which path, and what to check."""
    text = " ".join(str(exc).split())  # remote errors can span lines
    target = exc.filename or getattr(args, "store", None) or getattr(args, "output", None)
    if target is not None and str(target) not in text:
        text = f"{target}: {text}" if text else f"{target}: {type(exc).__name__}"
    elif not text:
        text = type(exc).__name__
    if isinstance(exc, PermissionError):
        hint = "check the permissions of the path, or the credentials of the URL (--storage-options)"
    elif isinstance(exc, FileNotFoundError):
        hint = "check the path or URL"
    elif isinstance(exc, (NotADirectoryError, IsADirectoryError, FileExistsError)):
        hint = "a file stands where a folder is needed, or the other way round: check the path"
    else:
        hint = "check the path or URL, the disk or the network, then try again"
    return f"{text} ({hint})"


def _stdout_gone() -> bool:
    """Whether stdout is a pipe whose reader has gone (poll reports an error on it); where
    that cannot be told (no poll, no file descriptor), a broken pipe is taken to be stdout's."""
    import select

    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
    except (AttributeError, OSError, ValueError):
        return True
    return any(event & (select.POLLERR | select.POLLHUP) for _, event in poller.poll(0))


def _quiet_stdout() -> None:
    """Point stdout at the null device, so the interpreter's last flush has nowhere to fail."""
    try:
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, sys.stdout.fileno())
        os.close(fd)
    except (OSError, ValueError):  # stdout without a file descriptor: nothing left to flush to
        pass


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(_glue_bbox(sys.argv[1:] if argv is None else list(argv)))
    try:
        code = int(args.func(args))
        sys.stdout.flush()  # output still buffered fails here, not at exit, when the reader is gone
        return code
    except BrokenPipeError as exc:  # `zarr-vectors info ... | head`: stop quietly, as Unix tools do
        if _stdout_gone():
            _quiet_stdout()
            return EXIT_BROKEN_PIPE
        print(f"zarr-vectors {args.command}: error: {_os_error_line(exc, args)}", file=sys.stderr)
        return 2
    except KeyError as exc:  # unknown names and ids; str(KeyError) would add quotes
        print(f"zarr-vectors {args.command}: error: {exc.args[0] if exc.args else exc}", file=sys.stderr)
        return 2
    except ZarrVectorsError as exc:
        print(f"zarr-vectors {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # a missing path, permissions, a remote store's failure
        print(f"zarr-vectors {args.command}: error: {_os_error_line(exc, args)}", file=sys.stderr)
        return 2


def cmd_export_neuroglancer(args: argparse.Namespace) -> int:
    from zarr_vectors.cli.neuroglancer import export_command

    return export_command(args, _storage_options(args.storage_options))


def cmd_serve(args: argparse.Namespace) -> int:
    from zarr_vectors.cli.neuroglancer import serve_command

    return serve_command(args, _storage_options(args.storage_options))


def _add_serve_parser(sub: Any, fmt: Any) -> None:
    from zarr_vectors.cli.neuroglancer import add_serve_options

    p = add_serve_options(sub, fmt)
    _add_storage_options(p)
    p.set_defaults(func=cmd_serve)


if __name__ == "__main__":
    raise SystemExit(main())
