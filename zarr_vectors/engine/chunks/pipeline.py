"""Encode and decode whole Zarr chunks for the codec lists this library reads and writes.

A :class:`Pipeline` is built from an array's ``codecs`` JSON: an optional geometry codec
(``draco``: the library decodes its blobs itself, so the pipeline yields the blob), the
``vlen-bytes`` or ``bytes`` serialiser, then any bytes-to-bytes codecs zarr's and numcodecs'
registries know (see :mod:`zarr_vectors.engine.chunks.compressors`), producing exactly the bytes
zarr-python produces. Codec lists it cannot handle (sharding, ...) raise
:class:`UnsupportedPipeline` so the caller can say which codec is missing.

Decoding is bounded and thread-safe: every stage's output is at most ``Pipeline.max_size``
bytes (the reader derives it from the array's metadata, see ``engine/arrays.py``), checked
before anything that size is allocated where the codec's bytes say it (the table in
:mod:`~zarr_vectors.engine.chunks.compressors`); every failure of a codec is a :class:`DecodeError`.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any, Literal

import numpy as np

from zarr_vectors.engine.chunks.compressors import (
    BytesCodec,
    UnsupportedPipeline,
    bytes_codec,
    compression_names,
    compression_of,
    compressor_json,
    too_big,
    zstd_read_into,
    zstd_size,
    zstd_small,
)
from zarr_vectors.errors import DecodeError
from zarr_vectors.format.codecs import DRACO, geometry_codec
from zarr_vectors.storage import Arena

__all__ = [
    "CHECKSUM_CODEC",
    "DEFAULT_MAX_DECODED",
    "DRACO",
    "Pipeline",
    "UnsupportedPipeline",
    "compression_names",
    "compression_of",
    "compressor_json",
    "draco_codec",
    "geometry_codec",
]

_VLEN_HEAD = struct.Struct("<II")
_U32 = struct.Struct("<I")

#: Decoded-size ceiling of a pipeline whose caller gives no bound of its own. The readers
#: always give one derived from the array's metadata (see ``zarr_vectors.engine.chunks.arrays``).
DEFAULT_MAX_DECODED = 1 << 31
#: The codec entry that ``checksums=True`` appends to every array's codec list.
CHECKSUM_CODEC: dict[str, Any] = {"name": "crc32c"}


def _require_draco() -> None:
    from zarr_vectors._draco import require_codec

    require_codec()


#: For each geometry codec (see :mod:`zarr_vectors.format.codecs`), a check that raises
#: ImportError when it is unavailable.
GEOMETRY_CODEC_CHECKS: dict[str, Callable[[], None]] = {DRACO: _require_draco}


def draco_codec(quantization_bits: int, compression_level: int) -> dict[str, Any]:
    """The ``draco`` entry of a Draco ``vertices`` array's codec list."""
    conf = {"quantization_bits": int(quantization_bits), "compression_level": int(compression_level)}
    return {"name": DRACO, "configuration": conf}


def _check_count(count: int, size: int) -> None:
    """A vlen chunk of ``size`` bytes holds at most ``(size - 4) // 4`` items (4 bytes of length each)."""
    if count > (size - 4) // 4:
        raise DecodeError(
            f"vlen-bytes chunk claims {count} items but its {size} bytes hold at most {(size - 4) // 4}"
        )


@dataclass(frozen=True)
class Pipeline:
    """Serialiser kind plus bytes-to-bytes codecs, for one array.

    ``max_size`` bounds the bytes every decoding stage may produce (see the module docstring).
    ``geometry`` names the geometry codec ahead of the serialiser (:func:`geometry_codec`);
    the cells it decodes are then that codec's blobs.
    """

    serializer: Literal["vlen-bytes", "bytes"]
    compressors: tuple[BytesCodec, ...]
    max_size: int = DEFAULT_MAX_DECODED
    geometry: str | None = None

    @classmethod
    def from_codecs(cls, codecs: list[dict[str, Any]]) -> Pipeline:
        if not isinstance(codecs, list) or not all(isinstance(c, dict) for c in codecs):
            raise UnsupportedPipeline(f"codecs must be a list of objects, got {codecs!r}")
        if not codecs:
            raise UnsupportedPipeline("empty codec list")
        geometry = geometry_codec(codecs)
        if geometry is not None:
            # The geometry codec maps raw rows <-> a blob; the library decodes the blob
            # itself (a Draco blob holds the faces too), so the pipeline yields the blob.
            GEOMETRY_CODEC_CHECKS[geometry]()
            codecs = codecs[1:]
            if not codecs:
                raise UnsupportedPipeline(f"{geometry} without a serialiser")
        first = codecs[0].get("name")
        if first in ("vlen-bytes", "vlen-utf8"):  # one framing: count, then length-prefixed items
            serializer: Literal["vlen-bytes", "bytes"] = "vlen-bytes"
        elif first == "bytes":
            endian = (codecs[0].get("configuration") or {}).get("endian", "little")
            if endian != "little":
                raise UnsupportedPipeline("big-endian bytes codec")
            serializer = "bytes"
        else:
            raise UnsupportedPipeline(str(first))
        return cls(serializer, tuple(bytes_codec(c) for c in codecs[1:]), geometry=geometry)

    def bounded(self, max_size: int) -> Pipeline:
        """This pipeline with decoded output limited to ``max_size`` bytes per stage."""
        return replace(self, max_size=int(max_size))

    def encode(self, payload: bytes | memoryview) -> bytes:
        """Chunk bytes for one vlen element (or one dense chunk's raw bytes)."""
        data: Any = payload
        if self.serializer == "vlen-bytes":
            data = _VLEN_HEAD.pack(1, len(payload)) + bytes(payload)
        return self._compress(data)

    def encode_items(self, items: Sequence[bytes]) -> bytes:
        """Chunk bytes for a vlen chunk of several elements (``b""`` is the fill value)."""
        head = struct.pack("<I", len(items))
        body = b"".join(struct.pack("<I", len(it)) + bytes(it) for it in items)
        return self._compress(head + body)

    def _compress(self, data: Any) -> bytes:
        for codec in self.compressors:
            data = codec.encode(data)
        return bytes(data)

    def decode_items(self, chunk: bytes, limit: int | None = None) -> list[memoryview]:
        """The elements of a vlen chunk (only the first ``limit`` when given: the rest of an
        edge chunk lies outside the array); raises DecodeError on bad framing."""
        view = self._decompress(chunk)
        size = len(view)
        if size < 4:
            raise DecodeError(f"vlen-bytes chunk is {size} bytes, shorter than its item count")
        (count,) = _U32.unpack_from(view, 0)
        _check_count(count, size)
        wanted = count if limit is None else min(limit, count)
        out: list[memoryview] = []
        unpack, pos = _U32.unpack_from, 4
        append = out.append
        try:
            for _ in range(wanted):
                (length,) = unpack(view, pos)
                pos += 4
                append(view[pos : pos + length])
                pos += length
        except struct.error:
            raise DecodeError(f"vlen-bytes chunk truncated at item {len(out)} of {count}") from None
        if pos > size:
            raise DecodeError(
                f"vlen-bytes item {len(out) - 1} claims {len(out[-1])} bytes or more, past the chunk's end"
            )
        if wanted == count and pos != size:
            raise DecodeError(f"vlen-bytes chunk has {size - pos} trailing bytes")
        return out

    def decode_items_at(self, chunk: bytes, wanted: Sequence[int]) -> dict[int, memoryview]:
        """Elements ``wanted`` of a vlen chunk (indices below its item count); the items before
        the last wanted one are walked, not copied, and those after it are not parsed."""
        view = self._decompress(chunk)
        size = len(view)
        if size < 4:
            raise DecodeError(f"vlen-bytes chunk is {size} bytes, shorter than its item count")
        (count,) = _U32.unpack_from(view, 0)
        _check_count(count, size)
        need = sorted(set(wanted))
        if need and need[-1] >= count:
            raise DecodeError(f"vlen-bytes chunk holds {count} items; item {need[-1]} was asked for")
        starts: list[int] = []
        unpack, pos = _U32.unpack_from, 4
        append = starts.append
        try:
            for _ in range(need[-1] + 1 if need else 0):
                append(pos)
                pos += 4 + unpack(view, pos)[0]
        except struct.error:
            raise DecodeError(f"vlen-bytes chunk truncated at item {len(starts) - 1} of {count}") from None
        if pos > size:
            raise DecodeError(f"vlen-bytes item {len(starts) - 1} runs past the chunk's end")
        out = {}
        for i in need:
            p = starts[i]
            out[i] = view[p + 4 : p + 4 + unpack(view, p)[0]]
        return out

    def _decompress(self, chunk: bytes | memoryview, scratch: Arena | None = None) -> memoryview:
        data: Any = chunk
        bound = self.max_size
        # Inner stages hold still-encoded bytes, which may be a little larger than the payload.
        inner = bound + (bound >> 4) + 4096
        last = len(self.compressors) - 1
        for i, codec in enumerate(reversed(self.compressors)):
            into = getattr(codec, "decode_into", None) if scratch is not None and i == last else None
            data = (
                codec.decode(data, bound if i == last else inner)
                if into is None
                else into(data, bound, scratch)
            )
        if isinstance(data, np.ndarray):
            view = np.ascontiguousarray(data).view(np.uint8).reshape(-1).data
        else:
            view = memoryview(data).cast("B")
        if len(view) > bound:
            raise DecodeError(
                f"chunk holds {len(view)} bytes, more than the {bound} this array's metadata allows"
            )
        return view

    @cached_property
    def direct(self) -> bool:
        """Whether :meth:`payload_size` and :meth:`decode_to` apply: a vlen-bytes cell, stored
        plain or in one zstd frame."""
        names = [getattr(c, "codec_id", None) for c in self.compressors]
        return self.serializer == "vlen-bytes" and names in ([], ["zstd"])

    def payload_size(self, chunk: bytes | memoryview) -> int | None:
        """The payload's size in bytes, read from the chunk's header without decoding it
        (None: the zstd frame does not declare its size). Only for :attr:`direct` pipelines."""
        if self.compressors:
            size = zstd_size(chunk)
            if size < 0:
                return None
            if size > self.max_size:  # worded as when the frame is decompressed
                raise too_big("zstd", size, self.max_size)
        else:
            size = len(chunk)
        if size > self.max_size:
            raise DecodeError(
                f"chunk holds {size} bytes, more than the {self.max_size} this array's metadata allows"
            )
        if size < 8:
            raise DecodeError(f"vlen-bytes chunk is {size} bytes, shorter than its 8-byte header")
        return size - 8

    def decode_to(self, chunk: bytes | memoryview, out: memoryview) -> None:
        """Decode the payload of one stored chunk straight into ``out``, which must be exactly
        its :meth:`payload_size`; raises DecodeError on bad framing."""
        whole = None  # the decoded frame, when a small zstd frame is decoded in one call
        head: bytes | bytearray | memoryview
        if self.compressors:
            whole = zstd_small(chunk, 8 + len(out))
            if whole is not None:
                head = whole
            else:
                head = bytearray(8)
                zstd_read_into(chunk, [memoryview(head), out])
        else:
            if len(chunk) != 8 + len(out):
                raise DecodeError(f"vlen-bytes chunk is {len(chunk)} bytes, not the 8 + {len(out)} expected")
            head = chunk
        count, length = _VLEN_HEAD.unpack_from(head, 0)
        if count != 1:
            raise DecodeError(f"vlen-bytes chunk holds {count} items, expected 1")
        if length != len(out):
            raise DecodeError(f"vlen-bytes item claims {length} bytes but {len(out)} follow the header")
        if whole is not None:
            out[:] = whole[8:]
        elif not self.compressors:
            out[:] = chunk[8:]

    def decode(self, chunk: bytes | memoryview, scratch: Arena | None = None) -> memoryview:
        """The payload of one stored chunk; raises DecodeError on bad framing. With ``scratch``
        the payload may be a slice of it (valid until it is reset)."""
        view = self._decompress(chunk, scratch)
        if self.serializer == "bytes":
            return view
        if len(view) < 8:
            raise DecodeError(f"vlen-bytes chunk is {len(view)} bytes, shorter than its 8-byte header")
        count, length = _VLEN_HEAD.unpack_from(view, 0)
        if count != 1:
            raise DecodeError(f"vlen-bytes chunk holds {count} items, expected 1")
        if len(view) != 8 + length:
            raise DecodeError(f"vlen-bytes item claims {length} bytes but {len(view) - 8} follow the header")
        return view[8:]
