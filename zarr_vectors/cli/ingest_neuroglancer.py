"""``zarr-vectors ingest neuroglancer SRC DST``: Neuroglancer precomputed skeletons, meshes or
point and line annotations into a new store (:func:`zarr_vectors.io.neuroglancer.ingest_neuroglancer`).

The ``ingest`` subcommand reads files named on the command line; this one reads a source
folder or URL, so it has a parser of its own. ``cli/main.py`` hands it the arguments when
they begin ``ingest neuroglancer`` (:func:`parse_neuroglancer_ingest`), and runs the command
it returns under the same error contract as every subcommand.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from zarr_vectors.cli.arguments import add_storage_options, object_id, positive_number, storage_options_arg
from zarr_vectors.errors import ZarrVectorsError

__all__ = ["build_ingest_parser", "ingest_neuroglancer_command", "parse_neuroglancer_ingest"]

EXAMPLES = """examples:
  zarr-vectors ingest neuroglancer exported/neuron neuron.zarr
  zarr-vectors ingest neuroglancer https://host/seg/skeletons sk.zarr --ids 864691135,864691136
  zarr-vectors ingest neuroglancer gs://bucket/seg meshes.zarr --kind meshes --ids 7 --draco

SRC is a skeleton, mesh or annotation folder (holding its info), a segmentation volume naming
them, or a folder holding skeletons/, mesh/ or ann/. Without --ids every segment of the source's index is read
(sharded sources) or of the folder (local unsharded ones); remote unsharded sources need --ids."""


def _ids(text: str) -> list[int]:
    """``--ids`` values: comma-separated uint64 segment ids."""
    out = []
    for part in text.split(","):
        value = object_id(part.strip())
        if value < 0:
            raise argparse.ArgumentTypeError(f"{part.strip()} is not a segment id (0 .. 2**64 - 1)")
        out.append(value)
    return out


def _bounds(text: str) -> tuple[list[float], list[float]]:
    """``--bounds`` values: six comma-separated numbers, lower corner then upper corner."""
    try:
        values = [float(v) for v in text.split(",")]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not six comma-separated numbers") from exc
    if len(values) != 6:
        raise argparse.ArgumentTypeError(f"{text!r} is not six comma-separated numbers")
    return values[:3], values[3:]


def build_ingest_parser(parser_class: type[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """The parser of ``ingest neuroglancer`` (``parser_class`` gives the error contract)."""
    p = parser_class(
        prog="zarr-vectors ingest neuroglancer",
        description="Write Neuroglancer precomputed skeletons, meshes or point and line annotations (sharded or "
        "not) into a new store.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("src", help="source folder or URL (local, http(s)://, gs://, s3://)")
    p.add_argument("dst", help="store to write (path or URL)")
    p.add_argument(
        "--ids", type=_ids, action="append", metavar="ID[,ID...]", help="segment ids to read (repeatable)"
    )
    p.add_argument(
        "--kind", choices=["skeletons", "meshes", "annotations"], help="which layer, when SRC holds several"
    )
    p.add_argument("--lod", type=int, default=0, help="multi-resolution meshes: level of detail (0: finest)")
    p.add_argument(
        "--chunk-size",
        type=positive_number,
        help="chunk edge length in nanometres (default: chosen from the data)",
    )
    p.add_argument("--draco", action="store_true", help="meshes: Draco-encode the store's cells")
    p.add_argument("--compression", choices=["none", "zstd"], default="none", help="compression of the cells")
    p.add_argument(
        "--memory-limit", type=positive_number, default=1024, metavar="MIB", help="memory to stay near (MiB)"
    )
    p.add_argument(
        "--no-properties",
        action="store_true",
        help="leave out the source's segment properties (object attributes)",
    )
    p.add_argument("--overwrite", action="store_true", help="replace an existing store at DST")
    p.add_argument(
        "--checkpoint",
        type=int,
        metavar="N",
        help="commit every N source ids (first a write, then appends); a killed run keeps whole checkpoints",
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="continue an interrupted checkpointed ingest into DST (same SRC, --ids, --checkpoint, grid)",
    )
    p.add_argument(
        "--bounds",
        type=_bounds,
        metavar="X0,Y0,Z0,X1,Y1,Z1",
        help="store bounds in nanometres (needed with several checkpoints, with --chunk-size)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--source-options", metavar="JSON", help="options for SRC's filesystem (JSON object)")
    add_storage_options(p)
    p.set_defaults(func=ingest_neuroglancer_command, command="ingest")
    return p


def parse_neuroglancer_ingest(
    argv: list[str], parser_class: type[argparse.ArgumentParser]
) -> argparse.Namespace | None:
    """The parsed arguments when ``argv`` starts ``ingest neuroglancer``, else None."""
    if argv[:2] != ["ingest", "neuroglancer"]:
        return None
    return build_ingest_parser(parser_class).parse_args(argv[2:])


def ingest_neuroglancer_command(args: argparse.Namespace) -> int:
    """Check the options and the target, then ingest; print a summary."""
    from zarr_vectors.io.neuroglancer import ingest_neuroglancer

    options = storage_options_arg(args.storage_options)
    source_options = _options(args.source_options, "--source-options")
    dst = str(args.dst)
    if args.resume and args.overwrite:
        raise ZarrVectorsError("--resume continues the store at DST; it cannot be combined with --overwrite")
    if args.checkpoint is not None and args.checkpoint < 1:
        raise ZarrVectorsError(f"--checkpoint must be a positive integer, got {args.checkpoint}")
    if (
        not args.overwrite
        and not args.resume
        and "://" not in dst
        and Path(dst).exists()
        and any(Path(dst).iterdir())
    ):
        raise ZarrVectorsError(f"{dst} already exists; add --overwrite to replace it")
    ids = None if args.ids is None else [i for group in args.ids for i in group]
    extra: dict[str, Any] = {"encoding": "draco"} if args.draco else {}
    if args.chunk_size is not None:
        extra["chunk_shape"] = args.chunk_size
    if args.bounds is not None:
        extra["bounds"] = args.bounds
    ds = ingest_neuroglancer(
        args.src,
        dst,
        ids=ids,
        kind=args.kind,
        lod=args.lod,
        memory_limit=int(args.memory_limit * (1 << 20)),
        progress=False if args.no_progress else None,
        source_options=source_options,
        segment_properties=not args.no_properties,
        checkpoint=args.checkpoint,
        resume=args.resume,
        compression=args.compression,
        overwrite=args.overwrite,
        storage_options=options,
        **extra,
    )
    what = (
        "skeletons"
        if "skeleton" in ds.geometry_types
        else "meshes"
        if "mesh" in ds.geometry_types
        else "annotations"
    )
    print(f"wrote {ds.num_objects()} {what}, {ds.vertex_count()} vertices to {dst}")
    return 0


def _options(text: str | None, name: str) -> dict[str, Any] | None:
    try:
        return storage_options_arg(text)
    except ZarrVectorsError as exc:
        raise ZarrVectorsError(str(exc).replace("--storage-options", name)) from exc
