"""The file side of ``zarr-vectors ingest``: which files the inputs name, and the writer each
format runs (points are ``cli/points.py``'s). ``cli/main.py`` checks the options and the target first."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from zarr_vectors.errors import ZarrVectorsError

__all__ = ["input_files", "one_input", "run_ingest"]


def input_files(args: argparse.Namespace, suffixes: tuple[str, ...], what: str) -> list[Path]:
    """The files the inputs name; subfolders left out (no ``--recursive``) are said on stderr."""
    from zarr_vectors.io._files import collect_files

    files, skipped = collect_files(args.inputs, suffixes, what, recursive=args.recursive)
    if skipped:
        print(
            f"note: skipped {len(skipped)} subfolder(s) with {what} files: "
            f"{', '.join(str(q) for q in skipped)} (add --recursive to read them)",
            file=sys.stderr,
        )
    return files


def one_input(args: argparse.Namespace) -> str:
    if len(args.inputs) != 1:
        raise ZarrVectorsError(f"{args.format} ingestion takes one file, got {len(args.inputs)}")
    if args.format == "geojson" and Path(args.inputs[0]).suffix.lower() not in (".geojson", ".json"):
        raise ZarrVectorsError(
            f"{args.inputs[0]} is not a .geojson or .json file; use 'ingest vector' for other formats"
        )
    if (
        args.format != "vector" and not Path(args.inputs[0]).is_file()
    ):  # GDAL also reads folders and /vsi paths
        raise ZarrVectorsError(f"{args.inputs[0]} is not a file (check the path)")
    return str(args.inputs[0])


def run_ingest(args: argparse.Namespace, inputs: Any, options: dict[str, Any] | None) -> int:
    """Write the store of ``ingest FORMAT`` (not points) from the checked ``inputs``; print a summary."""
    common = {"chunk_shape": args.chunk_size, "overwrite": args.overwrite, "storage_options": options}
    if args.format == "mesh" and (args.workers != 1 or args.checkpoint is not None or args.resume):
        return _ingest_files(args, inputs, common)
    if args.format == "mesh":
        from zarr_vectors.io.meshes import ingest_meshes

        ds = ingest_meshes(
            args.output,
            inputs,
            progress=not args.no_progress,
            encoding="draco" if args.draco else "raw",
            ids_from_names=not args.sequential_ids,
            merge_vertices=not args.keep_duplicate_vertices,
            **common,
        )
        from zarr_vectors.engine import file_ids

        for oid, f in zip(file_ids(inputs, None, not args.sequential_ids, "").tolist(), inputs):
            print(f"object {oid}: {f}")
        print(f"wrote {ds.num_objects()} meshes, {ds.vertex_count()} vertices to {args.output}")
        return 0
    if args.format in ("geojson", "vector"):
        return _ingest_vector(args, inputs, common)
    if args.format in ("trk", "tck", "trx"):
        from zarr_vectors.io.tractography import ingest_tractogram

        ds = ingest_tractogram(args.output, inputs, **common)
        print(f"wrote {ds.num_objects()} streamlines, {ds.vertex_count()} points to {args.output}")
        return 0
    if args.workers != 1 or args.checkpoint is not None or args.resume:
        return _ingest_files(args, inputs, common)
    from zarr_vectors.io.swc import ingest_swc

    ds = ingest_swc(
        args.output, inputs, progress=not args.no_progress, ids_from_names=not args.sequential_ids, **common
    )
    print(f"wrote {ds.num_objects()} skeletons, {ds.vertex_count()} samples to {args.output}")
    return 0


def _ingest_files(args: argparse.Namespace, inputs: Any, common: dict[str, Any]) -> int:
    """``ingest swc`` or ``ingest mesh`` with ``--workers``, ``--checkpoint`` or ``--resume``:
    read in parallel, committed in checkpoints (:mod:`zarr_vectors.io.swc_folder`,
    :mod:`zarr_vectors.io.mesh_folder`)."""
    from zarr_vectors.cli.arguments import bbox_arg
    from zarr_vectors.io.ingest_checkpoint import DEFAULT_CHECKPOINT

    if args.format == "mesh" and args.draco:
        raise ZarrVectorsError(
            "--draco cannot go with --workers, --checkpoint or --resume (appends need raw meshes)"
        )
    keywords: dict[str, Any] = {
        "workers": args.workers,
        "checkpoint": DEFAULT_CHECKPOINT if args.checkpoint is None else args.checkpoint,
        "resume": args.resume,
        "bounds": None if args.bounds is None else bbox_arg(args.bounds),
        "progress": not args.no_progress,
        "ids_from_names": not args.sequential_ids,
        **common,
    }
    if args.format == "mesh":
        from zarr_vectors.io.mesh_folder import ingest_mesh_files

        ds = ingest_mesh_files(
            args.output, inputs, merge_vertices=not args.keep_duplicate_vertices, **keywords
        )
        print(f"wrote {ds.num_objects()} meshes, {ds.vertex_count()} vertices to {args.output}")
        return 0
    from zarr_vectors.io.swc_folder import ingest_swc_files

    ds = ingest_swc_files(args.output, inputs, **keywords)
    print(f"wrote {ds.num_objects()} skeletons, {ds.vertex_count()} samples to {args.output}")
    return 0


def _ingest_vector(args: argparse.Namespace, source: str, common: dict[str, Any]) -> int:
    """GeoJSON (built in) or any OGR vector file (extra ``geo``): feature i is object i."""
    import warnings

    from zarr_vectors.io.geojson import ingest_vector

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ds = ingest_vector(args.output, source, crs=args.crs, layer=args.layer, repair=args.repair, **common)
    for w in caught:  # properties left out, polygons repaired: said on stderr, once
        print(f"warning: {w.message}", file=sys.stderr)
    code = getattr(ds.crs, "code", None) or ("-" if ds.crs is None else "custom")
    print(
        f"wrote {ds.num_objects()} features ({', '.join(ds.geometry_types)}), {ds.vertex_count()} vertices, "
        f"CRS {code} to {args.output}"
    )
    return 0
