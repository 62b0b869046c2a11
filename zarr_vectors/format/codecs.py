"""Codec names the format gives a meaning of its own.

A geometry codec leads the codec list of a ``vertices`` array whose cells are geometry
blobs the library decodes itself (Draco: vertices and intra-chunk faces in one blob),
instead of plain vlen bytes. Every other codec is a bytes-to-bytes step zarr or numcodecs
resolves by name.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DRACO", "GEOMETRY_CODECS", "geometry_codec"]

#: Name of the Draco mesh codec (package ``zarr_vectors_draco``).
DRACO = "draco"
#: The geometry codecs this library reads.
GEOMETRY_CODECS = (DRACO,)


def geometry_codec(codecs: Any) -> str | None:
    """The geometry codec that leads the ``codecs`` list of a ``zarr.json``, or None: the one
    test of whether an array's cells are blobs the library decodes itself."""
    first = codecs[0] if isinstance(codecs, (list, tuple)) and codecs else None
    name = first.get("name") if isinstance(first, dict) else None
    return name if isinstance(name, str) and name in GEOMETRY_CODECS else None
