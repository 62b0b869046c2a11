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
- Install hints name the extra and both ways to get it (:func:`zarr_vectors._extras.install_hint`)."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path
from typing import Any, NoReturn

from zarr_vectors.cli.arguments import (
    add_storage_options,
    bbox_arg,
    object_id,
    polygon_arg,
    positive_number,
    storage_options_arg,
)
from zarr_vectors.cli.collection import add_collection_parser
from zarr_vectors.cli.examples import EXAMPLES
from zarr_vectors.cli.ingest import input_files, one_input, run_ingest
from zarr_vectors.cli.query import add_query_parser, add_render_parser
from zarr_vectors.errors import StoreExistsError, ZarrVectorsError

__all__ = [
    "EXIT_BROKEN_PIPE",
    "build_parser",
    "cmd_demo",
    "cmd_export",
    "cmd_export_neuroglancer",
    "cmd_info",
    "cmd_ingest",
    "cmd_pyramid",
    "cmd_reshard",
    "cmd_serve",
    "cmd_validate",
    "info_dict",
    "main",
    "shards_value",
]


#: Exit status after stdout's reader went away (128 + SIGPIPE, what a shell reports for ``yes | head``).
EXIT_BROKEN_PIPE = 141


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
    options = storage_options_arg(args.storage_options)
    if args.format == "points":
        from zarr_vectors.cli.points import ingest_points_command

        return ingest_points_command(args, options, _refuse_existing, input_files, bbox_arg)
    source = one_input(args) if args.format not in ("swc", "mesh") else None
    if args.crs is not None:
        from zarr_vectors.geo import parse_crs

        parse_crs(args.crs)
    if (args.resume or args.checkpoint is not None or args.workers != 1) and args.format not in (
        "swc",
        "mesh",
    ):
        raise ZarrVectorsError("--workers, --checkpoint and --resume go with ingest swc and ingest mesh")
    if args.resume and args.overwrite:
        raise ZarrVectorsError("--resume continues the output; it cannot be combined with --overwrite")
    if not args.overwrite and not args.resume:
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

        ds = open_store(args.store, storage_options=storage_options_arg(args.storage_options))
        polygon = None if args.polygon is None else polygon_arg(args.polygon)
        return export_points_command(args, ds, bbox_arg(args.bbox) if args.bbox else None, polygon)

    if args.format == "mesh":
        from zarr_vectors.io.meshes import export_mesh

        ds = open_store(args.store, storage_options=storage_options_arg(args.storage_options))
        bbox = bbox_arg(args.bbox) if args.bbox else None
        objects = args.object
        nv, nf = export_mesh(ds, args.output, bbox=bbox, objects=objects)
        print(f"wrote {nv} vertices, {nf} faces to {args.output}")
        return 0
    from zarr_vectors.io.swc import export_swc

    if args.object is None or len(args.object) != 1:
        raise ZarrVectorsError("export swc needs exactly one --object ID (an SWC file holds one skeleton)")
    (oid,) = args.object
    n = export_swc(
        open_store(args.store, storage_options=storage_options_arg(args.storage_options)), oid, args.output
    )
    print(f"wrote object {oid} ({n} samples) to {args.output}")
    return 0


def info_dict(target: str, storage_options: dict[str, Any] | None = None) -> dict[str, Any]:
    from zarr_vectors.dataset import open as open_store
    from zarr_vectors.engine import chunk_fill_warning
    from zarr_vectors.storage import inventory

    ds = open_store(target, storage_options=storage_options)
    arrays, total = inventory(target, storage_options=storage_options)
    lo, hi = ds.bounds
    chunks = {k: len(ds.level(k).vertices.nonempty) for k in ds.levels}
    warning = chunk_fill_warning(ds.vertex_count(0), chunks[0]) if 0 in chunks else None
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
                "nonempty_chunks": chunks[k],
                "vertices_per_chunk": round(ds.vertex_count(k) / chunks[k], 1) if chunks[k] else 0.0,
                "attributes": ds.attribute_names(k),
                "object_attributes": ds.object_attribute_names(k),
            }
            for k in ds.levels
        ],
        "crs": ds.crs,
        "arrays": [a.to_dict() for a in arrays],
        "bytes_on_disk": total,
        "warnings": [f"level 0: {warning}"] if warning else [],
    }


def _size(n: int) -> str:
    """Bytes in decimal units: ``999 B``, ``1.5 kB``, ``2.0 GB``."""
    if n < 1000:
        return f"{n} B"
    power = min(int(math.log10(n) // 3), 4)
    return f"{n / 1000**power:,.1f} {('kB', 'MB', 'GB', 'TB')[power - 1]}"


def cmd_info(args: argparse.Namespace) -> int:
    from zarr_vectors.cli.collection import collection_at, collection_info

    coll = collection_at(args.store, storage_options_arg(args.storage_options))
    if coll is not None:  # members, id spaces, relationships, index states
        return collection_info(coll, args.store, args.json)
    info = info_dict(args.store, storage_options_arg(args.storage_options))
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
        print(
            f"    {lv['vertices_per_chunk']:,.0f} vertices per chunk "
            f"(mean over {lv['nonempty_chunks']:,} non-empty chunks)"
        )
        for a in info["arrays"]:
            if a["path"].split("/", 1)[0] == str(lv["level"]):
                unit = "shards" if a.get("sharded") else "chunks"
                print(
                    f"    {a['path']:<36} {a['data_type']:<21} {a['stored_chunks']:>7,} {unit:<6} {_size(a['bytes']):>10}"
                )
    print(f"  on disk: {_size(info['bytes_on_disk'])} in {len(info['arrays'])} arrays")
    for warning in info["warnings"]:
        print(f"warning: {warning}", file=sys.stderr)
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    from zarr_vectors.validation import validate

    report = validate(
        args.store,
        level=args.level,
        storage_options=storage_options_arg(args.storage_options),
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
        storage_options=storage_options_arg(args.storage_options),
        dst_storage_options=storage_options_arg(args.dst_storage_options),
    )
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from zarr_vectors.demo import run

    run(args.store, args.points)
    return 0


def cmd_pyramid(args: argparse.Namespace) -> int:
    from zarr_vectors.cli.pyramid import pyramid_command

    return pyramid_command(args, storage_options_arg(args.storage_options))


def _add_pyramid_parser(sub: Any, fmt: Any) -> None:
    from zarr_vectors.cli.pyramid import add_pyramid_options

    p = add_pyramid_options(sub, fmt)
    add_storage_options(p)
    p.set_defaults(func=cmd_pyramid)


class _Parser(argparse.ArgumentParser):
    """argparse with the command's error contract: one line on stderr, exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _add_ingest_parser(sub: Any, fmt: Any) -> None:
    p = sub.add_parser(
        "ingest", help="write files into a new store", epilog=EXAMPLES["ingest"], formatter_class=fmt
    )
    p.add_argument(
        "format",
        choices=["swc", "trk", "tck", "trx", "mesh", "geojson", "vector", "points"],
        help="input file format (neuroglancer: precomputed skeletons or meshes, see "
        "'zarr-vectors ingest neuroglancer --help'; mesh: PLY, OBJ, STL, GLB/GLTF, OFF through trimesh; vector: "
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
    p.add_argument("--workers", type=int, default=1, help="swc/mesh: processes reading the files (default 1)")
    p.add_argument(
        "--checkpoint",
        type=int,
        metavar="N",
        help="swc/mesh: commit every N files (first a write, then appends; needs --bounds when several)",
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="swc/mesh: continue an interrupted checkpointed ingest into the existing output (same files and options)",
    )
    add_storage_options(p)
    from zarr_vectors.cli.points import add_ingest_options

    add_ingest_options(p)
    p.set_defaults(func=cmd_ingest)


def _add_export_parser(sub: Any, fmt: Any) -> None:
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
    from zarr_vectors.cli.points import add_export_options

    add_mesh_format_option(p, "neuroglancer: ")
    add_sharding_option(p)
    add_storage_options(p)
    add_export_options(p)
    p.set_defaults(func=cmd_export)


def _add_info_parser(sub: Any, fmt: Any) -> None:
    p = sub.add_parser(
        "info", help="describe a store or a collection", epilog=EXAMPLES["info"], formatter_class=fmt
    )
    p.add_argument("store", help="store or collection (path or URL)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    add_storage_options(p)
    p.set_defaults(func=cmd_info)


def _add_validate_parser(sub: Any, fmt: Any) -> None:
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
    add_storage_options(p)
    p.set_defaults(func=cmd_validate)


def _add_reshard_parser(sub: Any, fmt: Any) -> None:
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
    add_storage_options(p)
    p.add_argument("--dst-storage-options", metavar="JSON", help="options for DST's filesystem (JSON object)")
    p.set_defaults(func=cmd_reshard)


def _add_demo_parser(sub: Any, fmt: Any) -> None:
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


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="zarr-vectors", description="Zarr Vectors stores: ingest, inspect, export.")
    sub = parser.add_subparsers(dest="command", required=True)
    fmt = argparse.RawDescriptionHelpFormatter

    _add_ingest_parser(sub, fmt)
    _add_export_parser(sub, fmt)
    _add_info_parser(sub, fmt)
    add_query_parser(sub, fmt)
    add_render_parser(sub, fmt)
    _add_validate_parser(sub, fmt)
    _add_reshard_parser(sub, fmt)
    _add_pyramid_parser(sub, fmt)
    _add_demo_parser(sub, fmt)
    _add_serve_parser(sub, fmt)
    add_collection_parser(sub, fmt)
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
    argv = _glue_bbox(sys.argv[1:] if argv is None else list(argv))
    from zarr_vectors.cli.ingest_neuroglancer import parse_neuroglancer_ingest

    args = parse_neuroglancer_ingest(argv, _Parser) or build_parser().parse_args(argv)
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

    return export_command(args, storage_options_arg(args.storage_options))


def cmd_serve(args: argparse.Namespace) -> int:
    from zarr_vectors.cli.neuroglancer import serve_command

    return serve_command(args, storage_options_arg(args.storage_options))


def _add_serve_parser(sub: Any, fmt: Any) -> None:
    from zarr_vectors.cli.neuroglancer import add_serve_options

    p = add_serve_options(sub, fmt)
    add_storage_options(p)
    p.set_defaults(func=cmd_serve)


if __name__ == "__main__":
    raise SystemExit(main())
