"""The Zarr v3 ``draco`` codec: array-to-array, element by element, ahead of ``vlen-bytes``.

An array of ``variable_length_bytes`` whose codecs are
``[{"name": "draco", "configuration": {...}}, {"name": "vlen-bytes"}, ...]`` stores, per
element, the vlen-bytes framing of one Draco blob; reading it through zarr-python yields the
element's raw vertex rows (float32 LE ``N x 3``, decoded order) and writing raw rows stores a
Draco point cloud of them. Faces inside a stored mesh blob are not part of the element zarr
returns; the library reads them with :func:`zarr_vectors_draco.decode_cell`.

Like zarr-python's own compressors, the codec does its CPU work in ``_decode_sync`` /
``_encode_sync`` and the async entry points run those in a worker thread
(:func:`asyncio.to_thread`), so zarr's event loop keeps serving other chunks' I/O meanwhile.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from zarr.abc.codec import ArrayArrayCodec
from zarr.core.common import JSON, parse_named_configuration
from zarr.core.dtype import VariableLengthBytes

from ._rows import blob_to_rows, rows_to_blob
from .cell import DEFAULT_COMPRESSION_LEVEL, DEFAULT_QUANTIZATION_BITS, check_settings
from .errors import DracoInputError

if TYPE_CHECKING:
    from typing import Self

    from zarr.core.array_spec import ArraySpec
    from zarr.core.buffer import NDBuffer

__all__ = ["CODEC_NAME", "DracoCodec"]

CODEC_NAME = "draco"


def _element_bytes(element: Any) -> bytes | bytearray | memoryview:
    """One element as bytes: zarr hands a scalar assignment over as a 0-d object array."""
    while isinstance(element, np.ndarray) and element.shape == () and element.dtype == object:
        element = element[()]
    if isinstance(element, (bytes, bytearray, memoryview)):
        return element
    if isinstance(element, np.ndarray) and element.dtype == np.uint8:
        return element.tobytes()
    raise DracoInputError(f"codec draco encodes bytes elements, got {type(element).__name__}")


@dataclass(frozen=True)
class DracoCodec(ArrayArrayCodec):
    """Maps each bytes element between raw vertex rows (decoded) and a Draco blob (encoded)."""

    is_fixed_size = False

    quantization_bits: int = DEFAULT_QUANTIZATION_BITS
    compression_level: int = DEFAULT_COMPRESSION_LEVEL

    def __init__(
        self,
        *,
        quantization_bits: int = DEFAULT_QUANTIZATION_BITS,
        compression_level: int = DEFAULT_COMPRESSION_LEVEL,
    ) -> None:
        bits, level = check_settings(quantization_bits, compression_level)
        object.__setattr__(self, "quantization_bits", bits)
        object.__setattr__(self, "compression_level", level)

    @classmethod
    def from_dict(cls, data: dict[str, JSON]) -> Self:
        _, configuration = parse_named_configuration(data, CODEC_NAME, require_configuration=False)
        configuration = dict(configuration or {})
        unknown = sorted(set(configuration) - {"quantization_bits", "compression_level"})
        if unknown:
            raise DracoInputError(f"codec draco has no configuration key {unknown[0]!r}")
        return cls(**configuration)  # type: ignore[arg-type]  # JSON values: __init__ checks them

    def to_dict(self) -> dict[str, JSON]:
        return {
            "name": CODEC_NAME,
            "configuration": {
                "quantization_bits": self.quantization_bits,
                "compression_level": self.compression_level,
            },
        }

    def validate(self, *, shape: tuple[int, ...], dtype: Any, chunk_grid: Any) -> None:
        if not isinstance(dtype, VariableLengthBytes):
            raise DracoInputError(
                f"codec draco needs an array of data type variable_length_bytes, got {dtype}"
            )

    def _map(self, chunk_array: NDBuffer, chunk_spec: ArraySpec, func: Any) -> NDBuffer:
        elements = chunk_array.as_numpy_array()
        out = np.empty(elements.shape, dtype=object)
        flat_in, flat_out = elements.reshape(-1), out.reshape(-1)
        for i, element in enumerate(flat_in):
            flat_out[i] = func(_element_bytes(element))
        return chunk_spec.prototype.nd_buffer.from_numpy_array(out)

    def _decode_sync(self, chunk_array: NDBuffer, chunk_spec: ArraySpec) -> NDBuffer:
        """Every blob element of the chunk as its raw vertex rows (CPU bound; no event loop needed)."""
        return self._map(chunk_array, chunk_spec, blob_to_rows)

    def _encode_sync(self, chunk_array: NDBuffer, chunk_spec: ArraySpec) -> NDBuffer | None:
        """Every raw-rows element of the chunk as a Draco point cloud blob (CPU bound)."""
        bits, level = self.quantization_bits, self.compression_level
        return self._map(chunk_array, chunk_spec, lambda rows: rows_to_blob(rows, bits, level))

    async def _decode_single(self, chunk_array: NDBuffer, chunk_spec: ArraySpec) -> NDBuffer:
        return await asyncio.to_thread(self._decode_sync, chunk_array, chunk_spec)

    async def _encode_single(self, chunk_array: NDBuffer, chunk_spec: ArraySpec) -> NDBuffer | None:
        return await asyncio.to_thread(self._encode_sync, chunk_array, chunk_spec)

    def compute_encoded_size(self, input_byte_length: int, chunk_spec: ArraySpec) -> int:
        raise NotImplementedError("codec draco produces variable-size elements")
