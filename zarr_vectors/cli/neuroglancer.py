"""Neuroglancer parts of the ``zarr-vectors`` command: ``serve`` and ``export neuroglancer``
(:mod:`zarr_vectors.neuroglancer`). ``cli.py`` parses the storage options and hands them on."""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path
from typing import Any

from zarr_vectors.errors import ZarrVectorsError

__all__ = [
    "add_mesh_format_option",
    "add_overview_option",
    "add_serve_options",
    "add_sharding_option",
    "export_command",
    "serve_command",
]


def export_command(args: argparse.Namespace, storage_options: dict[str, Any] | None) -> int:
    """``export neuroglancer STORE OUTDIR``: static precomputed files."""
    from zarr_vectors.neuroglancer.export import export_neuroglancer

    outdir = args.outdir or args.output
    if outdir is None:
        raise ZarrVectorsError(
            "export neuroglancer needs OUTDIR: zarr-vectors export neuroglancer STORE OUTDIR"
        )
    counts = export_neuroglancer(
        args.store,
        outdir,
        base_url=args.base_url,
        overwrite=args.overwrite,
        storage_options=storage_options,
        mesh_format=args.mesh_format,
        sharding=getattr(args, "sharding", "auto"),
        overview=getattr(args, "overview", "auto"),
    )
    for name, n in counts.items():
        folder = Path(outdir) / name.removesuffix(" overview")
        folder = folder / "overview" if name.endswith(" overview") else folder
        print(f"wrote {n} files of layer {name} to {folder}")
    print(f"viewer state: {Path(outdir) / 'state.json'}")
    return 0


def serve_command(args: argparse.Namespace, storage_options: dict[str, Any] | None) -> int:
    """``serve STORE...``: print the viewer URL first, then serve until interrupted."""
    from zarr_vectors.neuroglancer.server import serve

    cors = list(args.cors or [])
    if "*" in cors:
        print(
            "zarr-vectors serve: warning: --cors '*' lets every web page open in your browser read "
            "the served stores",
            file=sys.stderr,
            flush=True,
        )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the line above says it once
        server = serve(
            args.stores,
            args.port,
            args.open,
            layout=args.layout,
            storage_options=storage_options,
            mesh_format=args.mesh_format,
            cors=cors,
            overview=getattr(args, "overview", "auto"),
        )
    print(server.viewer_url, flush=True)
    print(f"serving {', '.join(s.name for s in server.sources)} at {server.url} (Ctrl-C stops)", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        return 0
    finally:
        server.close()


def add_serve_options(sub: Any, fmt: Any) -> argparse.ArgumentParser:
    """The ``serve`` subcommand's parser, without the storage options (``cli.py`` adds them)."""
    p: argparse.ArgumentParser = sub.add_parser(
        "serve",
        help="view stores in a local Neuroglancer",
        epilog="examples:\n  zarr-vectors serve cells.zarr\n  zarr-vectors serve synapses.zarr neurons.zarr "
        "--port 8080 --open\n  zarr-vectors serve connectome.zarr   # a collection",
        formatter_class=fmt,
    )
    p.add_argument(
        "stores",
        nargs="+",
        help="stores to show (paths or URLs), one layer each; or one collection, shown as one view "
        "(a segmentation layer per id space, annotation layers linked to it)",
    )
    p.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default 0: any free port)")
    p.add_argument("--open", action="store_true", help="open the viewer URL in the web browser")
    p.add_argument("--layout", default="4panel", help="Neuroglancer layout: 4panel, 3d, xy, ...")
    p.add_argument(
        "--cors",
        action="append",
        metavar="ORIGIN",
        help="let the web pages of ORIGIN (https://host[:port]; repeatable) read the sources, "
        "e.g. another Neuroglancer; '*' lets every page read them (default: none; the bundled "
        "viewer needs none)",
    )
    add_mesh_format_option(p)
    add_overview_option(p)
    return p


def add_overview_option(p: argparse.ArgumentParser) -> None:
    """``--overview`` / ``--no-overview``: the overview layer of mesh and skeleton stores."""
    group = p.add_mutually_exclusive_group()
    group.add_argument(
        "--overview",
        dest="overview",
        action="store_const",
        const=True,
        default="auto",
        help="neuroglancer: an overview layer of all objects of mesh and skeleton stores, from their "
        "coarse levels (default: when a store has coarse levels and over 500 objects)",
    )
    group.add_argument(
        "--no-overview",
        dest="overview",
        action="store_const",
        const=False,
        help="neuroglancer: no overview layer",
    )


def add_mesh_format_option(p: argparse.ArgumentParser, prefix: str = "") -> None:
    """``--mesh-format``: how mesh stores are served or exported (``prefix`` starts the help)."""
    p.add_argument(
        "--mesh-format",
        choices=["multilod", "legacy"],
        default="multilod",
        help=f"{prefix}mesh stores: multi-resolution Draco meshes, one level of detail per store level "
        "(multilod, the default), or single-resolution legacy meshes from level 0 (legacy)",
    )


def add_sharding_option(p: argparse.ArgumentParser) -> None:
    """``--sharded`` / ``--unsharded``: how ``export neuroglancer`` writes annotation layers;
    and ``--overview`` / ``--no-overview`` (:func:`add_overview_option`), export's other
    Neuroglancer-only choice (``cli/main.py`` calls this one function for both)."""
    group = p.add_mutually_exclusive_group()
    group.add_argument(
        "--sharded",
        dest="sharding",
        action="store_const",
        const=True,
        default="auto",
        help="neuroglancer: write annotation indexes, skeletons and meshes as shard files "
        "(default: when a layer has over 10000 annotations or objects)",
    )
    group.add_argument(
        "--unsharded",
        dest="sharding",
        action="store_const",
        const=False,
        help="neuroglancer: one file per annotation, object, spatial cell, skeleton and mesh",
    )
    add_overview_option(p)
