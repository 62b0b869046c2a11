"""The ``zarr-vectors`` command: ingest, export, info, demo.

Run ``zarr-vectors SUBCOMMAND --help`` for examples. Errors print one line and exit 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from .errors import ZarrVectorsError

EXAMPLES = {
    "ingest": "examples:\n  zarr-vectors ingest swc neurons/ -o neurons.zarr --chunk-size 200\n"
              "  zarr-vectors ingest swc a.swc b.swc -o two.zarr --chunk-size 50 --overwrite\n"
              "  zarr-vectors ingest trx tracts.trx -o tracts.zarr --chunk-size 20",
    "export": "examples:\n  zarr-vectors export swc neurons.zarr --object 3 -o neuron3.swc",
    "info": "examples:\n  zarr-vectors info neurons.zarr\n  zarr-vectors info s3://bucket/cells.zarr --json",
}


def _swc_files(paths: list[str]) -> list[Path]:
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            files += sorted(q for q in p.iterdir() if q.suffix.lower() == ".swc")
        elif p.exists():
            files.append(p)
        else:
            raise ZarrVectorsError(f"{p} does not exist")
    if not files:
        raise ZarrVectorsError(f"no .swc files found in {paths}")
    return files


def cmd_ingest(args: argparse.Namespace) -> int:
    if args.format in ("trk", "tck", "trx"):
        from .io.tractography import ingest_tractogram

        if len(args.inputs) != 1:
            raise ZarrVectorsError(f"{args.format} ingestion takes one file, got {len(args.inputs)}")
        ds = ingest_tractogram(args.output, args.inputs[0], chunk_shape=args.chunk_size, overwrite=args.overwrite)
        print(f"wrote {ds.num_objects()} streamlines, {ds.vertex_count()} points to {args.output}")
        return 0
    from .io.swc import ingest_swc

    files = _swc_files(args.inputs)
    ds = ingest_swc(args.output, files, chunk_shape=args.chunk_size, progress=not args.no_progress,
                    overwrite=args.overwrite)  # fmt: skip
    print(f"wrote {ds.num_objects()} skeletons, {ds.vertex_count()} samples to {args.output}")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from .dataset import open as open_store
    from .io.swc import export_swc

    n = export_swc(open_store(args.store), args.object, args.output)
    print(f"wrote object {args.object} ({n} samples) to {args.output}")
    return 0


def info_dict(target: str) -> dict[str, Any]:
    from .dataset import open as open_store

    ds = open_store(target)
    lo, hi = ds.bounds
    return {
        "store": target,
        "geometry_types": list(ds.geometry_types),
        "axes": list(ds.axes),
        "bounds": [lo.tolist(), hi.tolist()],
        "chunk_shape": ds.chunk_shape.tolist(),
        "levels": [
            {"level": k, "vertices": ds.vertex_count(k), "objects": ds.num_objects(k),
             "attributes": ds.attribute_names(k), "object_attributes": ds.object_attribute_names(k)}
            for k in ds.levels
        ],  # fmt: skip
        "crs": ds.crs,
    }


def cmd_info(args: argparse.Namespace) -> int:
    info = info_dict(args.store)
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    print(f"{info['store']}: {', '.join(info['geometry_types'])}; axes {', '.join(info['axes'])}")
    print(f"  bounds {info['bounds'][0]} .. {info['bounds'][1]}, chunk {info['chunk_shape']}")
    for lv in info["levels"]:
        print(f"  level {lv['level']}: {lv['vertices']:,} vertices, {lv['objects']:,} objects, "
              f"attributes {lv['attributes'] or '-'}")  # fmt: skip
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from .demo import main as demo_main

    demo_main([args.store])
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="zarr-vectors", description="Zarr Vectors stores: ingest, inspect, export.")
    sub = parser.add_subparsers(dest="command", required=True)
    fmt = argparse.RawDescriptionHelpFormatter

    p = sub.add_parser("ingest", help="write files into a new store", epilog=EXAMPLES["ingest"], formatter_class=fmt)
    p.add_argument("format", choices=["swc", "trk", "tck", "trx"], help="input file format")
    p.add_argument("inputs", nargs="+", help="files, or folders whose files of that format are read")
    p.add_argument("-o", "--output", required=True, help="store to write (path or URL)")
    p.add_argument("--chunk-size", type=float, required=True, help="chunk edge length, in the files' units")
    p.add_argument("--overwrite", action="store_true", help="replace an existing store")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_ingest)

    p = sub.add_parser("export", help="write objects of a store to a file", epilog=EXAMPLES["export"], formatter_class=fmt)
    p.add_argument("format", choices=["swc"])
    p.add_argument("store")
    p.add_argument("--object", type=int, required=True, help="object id to export")
    p.add_argument("-o", "--output", required=True)
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("info", help="describe a store", epilog=EXAMPLES["info"], formatter_class=fmt)
    p.add_argument("store")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_info)

    p = sub.add_parser("demo", help="write and query a demo store")
    p.add_argument("store", nargs="?", default="demo-store.zarr")
    p.set_defaults(func=cmd_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except (ZarrVectorsError, FileNotFoundError, KeyError) as exc:
        print(f"zarr-vectors {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
