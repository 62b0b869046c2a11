"""The ``pyramid`` subcommand of ``zarr-vectors``: coarser levels of detail, built in place.
``cli.py`` parses the storage options and hands them on."""

from __future__ import annotations

import argparse
from typing import Any

from zarr_vectors.cli.arguments import fraction, non_negative_number
from zarr_vectors.errors import ZarrVectorsError

__all__ = ["PYRAMID_EXAMPLES", "add_pyramid_options", "pyramid_command"]


PYRAMID_EXAMPLES = (
    "examples:\n  zarr-vectors pyramid cells.zarr --factors 2 2 2\n"
    "  zarr-vectors pyramid tracts.zarr --factors 2 2 --tolerance 1.5 --cross-level none\n"
    "  zarr-vectors pyramid nuclei.zarr --factors 2,2,1 2 --keep 0.5 --keep-by size --overwrite\n"
    "  zarr-vectors pyramid cells.zarr --factors 2 --reduce intensity=max --reduce label=mode"
)


def _factor(text: str) -> float | list[float]:
    try:
        values = [float(v) for v in text.split(",")]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number or comma-separated numbers") from exc
    return values[0] if len(values) == 1 else values


def pyramid_command(args: argparse.Namespace, storage_options: dict[str, Any] | None) -> int:
    """``pyramid STORE --factors ...``: build coarser levels in place and list every level."""
    from zarr_vectors.dataset import open as open_store
    from zarr_vectors.pyramid import Sparsity

    reductions = {}
    for item in args.reduce or []:
        name, sep, how = item.partition("=")
        if not sep:
            raise ZarrVectorsError(
                f"--reduce takes NAME=HOW (mean, mode, sum, min, max, first), got {item!r}"
            )
        reductions[name] = how
    sparsity = None
    if args.keep is not None:
        by, _, attribute = args.keep_by.partition(":")
        sparsity = Sparsity(args.keep, by=by, attribute=attribute or None, seed=args.seed)
    scale: Any = {"auto": "auto", "keep": None}.get(args.chunk_scale)
    if scale is None and args.chunk_scale != "keep":
        if not args.chunk_scale.isdigit() or int(args.chunk_scale) < 1:
            raise ZarrVectorsError(
                f"--chunk-scale takes auto, keep or a whole number >= 1, got {args.chunk_scale!r}"
            )
        scale = [int(args.chunk_scale)] * len(args.factors)
    ds = open_store(args.store, mode="r+", storage_options=storage_options)
    new = ds.build_pyramid(
        args.factors,
        chunk_scale=scale,
        reductions=reductions or None,
        cross_level=args.cross_level,
        object_sparsity=sparsity,
        tolerance=args.tolerance,
        face_fraction=args.face_fraction,
        overwrite=args.overwrite,
        progress=not args.no_progress,
        point_strategy=args.point_strategy,
    )
    for k in [0, *new]:
        lv = ds.level(k)
        print(
            f"level {k}: {lv.meta.vertex_count} vertices, chunk {lv.grid.chunk_shape.tolist()}, "
            f"bin {list(ds.root.level_bin_shapes[k])}"
        )
    return 0


def add_pyramid_options(sub: Any, fmt: Any) -> argparse.ArgumentParser:
    """The ``pyramid`` subparser and its options (``cli.py`` adds the storage options)."""
    p = sub.add_parser(
        "pyramid",
        help="add coarser levels of detail to a store",
        epilog=PYRAMID_EXAMPLES,
        formatter_class=fmt,
    )
    p.add_argument("store", help="store to extend in place (path or URL)")
    p.add_argument(
        "--factors",
        nargs="+",
        type=_factor,
        required=True,
        metavar="F",
        help="bin growth per new level: a number, or one per axis as 2,2,1",
    )
    p.add_argument(
        "--cross-level",
        choices=["none", "implicit", "explicit"],
        default="implicit",
        help="links between levels: implicit = links/+1 (default), explicit = also links/-1",
    )
    p.add_argument(
        "--chunk-scale", default="auto", help="auto (chunks grow with the bins), keep, or an integer step"
    )
    p.add_argument(
        "--reduce",
        action="append",
        metavar="NAME=HOW",
        help="point attribute reduction: mean, mode, sum, min, max or first (repeatable; metavertex levels)",
    )
    p.add_argument(
        "--point-strategy",
        choices=["auto", "subsample", "metavertex"],
        default="auto",
        help="point clouds: subsample (levels of real points, nested), metavertex (one reduced point per "
        "coarse bin and object); auto: subsample without objects (default)",
    )
    p.add_argument("--keep", type=fraction, help="fraction of objects each level keeps (object sparsity)")
    p.add_argument(
        "--keep-by", default="random", help="random, size, length or attribute:NAME (default random)"
    )
    p.add_argument("--seed", type=int, default=0, help="seed of --keep-by random")
    p.add_argument(
        "--tolerance", type=non_negative_number, help="lines and skeletons: Douglas-Peucker tolerance"
    )
    p.add_argument("--face-fraction", type=fraction, help="meshes: fraction of faces each level keeps")
    p.add_argument("--overwrite", action="store_true", help="rebuild existing coarse levels")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p
