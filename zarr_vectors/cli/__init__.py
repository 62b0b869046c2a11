"""The ``zarr-vectors`` command: ``main`` builds the parser (``build_parser``) and runs one
subcommand; each group of subcommands lives in its own module (points, objects, ingest,
pyramid, neuroglancer), with the shared argument types in ``arguments``."""

from zarr_vectors.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
