"""numcodecs twin of the ``draco`` codec: raw float32 vertex rows <-> Draco point cloud blob."""

from __future__ import annotations

from typing import Any

import numpy as np
from numcodecs.abc import Codec
from numcodecs.compat import ensure_contiguous_ndarray, ndarray_copy

from ._rows import blob_to_rows, rows_to_blob
from .cell import DEFAULT_COMPRESSION_LEVEL, DEFAULT_QUANTIZATION_BITS, check_settings
from .zarr_codec import CODEC_NAME

__all__ = ["Draco"]


class Draco(Codec):
    """Encode a buffer of float32 LE ``(x, y, z)`` rows as a Draco point cloud, and back.

    Decoding also takes a Draco mesh blob written by the library and returns its vertex rows
    in decoded order.
    """

    codec_id = CODEC_NAME

    def __init__(
        self,
        quantization_bits: int = DEFAULT_QUANTIZATION_BITS,
        compression_level: int = DEFAULT_COMPRESSION_LEVEL,
    ) -> None:
        self.quantization_bits, self.compression_level = check_settings(quantization_bits, compression_level)

    def encode(self, buf: Any) -> bytes:
        view = ensure_contiguous_ndarray(buf).view(np.uint8).reshape(-1)
        return rows_to_blob(memoryview(view), self.quantization_bits, self.compression_level)

    def decode(self, buf: Any, out: Any = None) -> Any:
        view = ensure_contiguous_ndarray(buf).view(np.uint8).reshape(-1)
        rows = blob_to_rows(memoryview(view))
        if out is None:
            return rows
        return ndarray_copy(np.frombuffer(rows, dtype=np.uint8), out)
