"""Draco for Zarr Vectors: per-chunk mesh blobs, a Zarr v3 ``draco`` codec and its numcodecs twin.

- :func:`encode_cell` / :func:`decode_cell`: one chunk's vertices and faces as one Draco blob
  (every vertex kept, with the decoded order returned), used by the library's mesh writer and
  reader; :func:`quantization_bound` is the position error they guarantee.
- :class:`DracoCodec`: the Zarr v3 array-to-array codec named ``draco``, registered through
  the ``zarr.codecs`` entry point and, on import, with :func:`zarr.registry.register_codec`.
- :class:`Draco`: the numcodecs codec with ``codec_id = "draco"``, registered through the
  ``numcodecs.codecs`` entry point and, on import, with :func:`numcodecs.register_codec`.
- :data:`CODEC_UNAVAILABLE_MESSAGE` and :func:`require_draco_codec` for readers that find the
  codec missing.
- :class:`DracoCodecError` (a :class:`ValueError`) and its subclasses :class:`DracoDecodeError`
  (undecodable blob), :class:`DracoInputError` (unusable encoder input or configuration) and
  :class:`DracoUnavailableError` (DracoPy missing).

The package is standalone: it imports nothing from the ``zarr_vectors`` library. DracoPy is
imported on first encode or decode, so the codecs register even where it is absent (and then
fail with :class:`DracoUnavailableError`).
"""

from __future__ import annotations

import numcodecs
import zarr.registry

from ._availability import CODEC_UNAVAILABLE_MESSAGE, require_draco_codec
from ._header import MAX_CELL_FACES, MAX_CELL_VERTICES
from .cell import (
    DEFAULT_COMPRESSION_LEVEL,
    DEFAULT_QUANTIZATION_BITS,
    decode_cell,
    encode_cell,
    quantization_bound,
)
from .errors import DracoCodecError, DracoDecodeError, DracoInputError, DracoUnavailableError
from .numcodecs_codec import Draco
from .zarr_codec import CODEC_NAME, DracoCodec

__all__ = [
    "CODEC_NAME",
    "CODEC_UNAVAILABLE_MESSAGE",
    "DEFAULT_COMPRESSION_LEVEL",
    "DEFAULT_QUANTIZATION_BITS",
    "MAX_CELL_FACES",
    "MAX_CELL_VERTICES",
    "Draco",
    "DracoCodec",
    "DracoCodecError",
    "DracoDecodeError",
    "DracoInputError",
    "DracoUnavailableError",
    "decode_cell",
    "encode_cell",
    "quantization_bound",
    "require_draco_codec",
]

zarr.registry.register_codec(CODEC_NAME, DracoCodec)
numcodecs.register_codec(Draco)
