"""Neuroglancer for Zarr Vectors stores: precomputed sources served on the fly or exported.

See ``docs/neuroglancer.md``. :func:`serve` runs a local viewer; :func:`export_neuroglancer`
writes the same sources as static files.
"""

from __future__ import annotations

from zarr_vectors.neuroglancer.export import export_neuroglancer
from zarr_vectors.neuroglancer.server import Server, serve, viewer_state

__all__ = ["Server", "export_neuroglancer", "serve", "viewer_state"]
