"""Element transforms shared by the zarr and numcodecs codecs: raw vertex rows <-> blob.

Raw rows are the spec's raw ``vertices`` cell layout for a Draco level: float32
little-endian, ``N x 3``, C order. An empty element stays empty in both directions (it is
the fill value of a ``variable_length_bytes`` array: no cell).
"""

from __future__ import annotations

import numpy as np

from .cell import decode_cell, encode_cell
from .errors import DracoInputError

__all__ = ["ROW_BYTES", "blob_to_rows", "rows_to_blob"]

ROW_BYTES = 12  # three float32 coordinates
_ROW_DTYPE = np.dtype("<f4")


def rows_to_blob(
    rows: bytes | bytearray | memoryview, quantization_bits: int, compression_level: int
) -> bytes:
    """Draco point cloud of raw float32 rows (row order kept); ``b""`` for no rows."""
    view = memoryview(rows).cast("B")
    if len(view) == 0:
        return b""
    if len(view) % ROW_BYTES:
        raise DracoInputError(
            f"a Draco vertices element is whole float32 (x, y, z) rows of {ROW_BYTES} bytes, "
            f"got {len(view)} bytes"
        )
    positions = np.frombuffer(view, dtype=_ROW_DTYPE).reshape(-1, 3)
    blob, _ = encode_cell(
        positions,
        np.zeros((0, 3), np.int64),
        quantization_bits=quantization_bits,
        compression_level=compression_level,
    )
    return blob


def blob_to_rows(blob: bytes | bytearray | memoryview) -> bytes:
    """Raw float32 rows, in decoded order, of a Draco cell blob; ``b""`` for an empty element."""
    if len(memoryview(blob).cast("B")) == 0:
        return b""
    positions, _ = decode_cell(blob)
    return positions.astype(_ROW_DTYPE, copy=False).tobytes()
