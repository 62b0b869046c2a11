"""Encode and decode whole Zarr chunks for the codec lists this library writes.

A :class:`Pipeline` is built from an array's ``codecs`` JSON. It handles the
``vlen-bytes`` and ``bytes`` serialisers followed by any bytes-to-bytes
compressors numcodecs knows (zstd, gzip, blosc, ...), producing exactly the
bytes zarr-python produces. Codec lists it cannot handle (sharding, Draco, ...)
raise :class:`UnsupportedPipeline` so the caller can fall back to zarr-python.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from collections.abc import Sequence
from typing import Any, Literal

import numcodecs
import numcodecs.zstd
import numpy as np
import zstandard

from .errors import DecodeError

__all__ = ["Pipeline", "UnsupportedPipeline", "compressor_json"]

_VLEN_HEAD = struct.Struct("<II")
_U32 = struct.Struct("<I")
_ZSTD = zstandard.ZstdDecompressor()


def _unzstd(data: Any) -> bytes:
    """One zstd frame, decoded by ``zstandard`` (about twice as fast as numcodecs on small
    cells); frames without a content size fall back to numcodecs."""
    try:
        return _ZSTD.decompress(data)
    except zstandard.ZstdError:
        return numcodecs.zstd.decompress(data)

Compression = Literal["none", "zstd", "gzip", "blosc", "blosc-bitshuffle"]


class UnsupportedPipeline(Exception):
    """The codec list needs zarr-python's own pipeline."""


def compressor_json(compression: str | None, *, level: int | None = None) -> list[dict[str, Any]]:
    """The bytes-to-bytes codec list for a ``compression=`` choice.

    ``"none"`` (the format's default), ``"zstd"``, ``"gzip"``, ``"blosc"``
    (Blosc/Zstd with byte shuffle) or ``"blosc-bitshuffle"``; levels default to 5.
    """
    name = (compression or "none").lower()
    lvl = 5 if level is None else int(level)
    if name == "none":
        return []
    if name == "zstd":
        return [{"name": "zstd", "configuration": {"level": lvl, "checksum": False}}]
    if name == "gzip":
        return [{"name": "gzip", "configuration": {"level": lvl}}]
    if name in ("blosc", "blosc-bitshuffle"):
        shuffle = "bitshuffle" if name == "blosc-bitshuffle" else "shuffle"
        return [
            {
                "name": "blosc",
                "configuration": {
                    "typesize": 1, "cname": "zstd", "clevel": lvl, "shuffle": shuffle, "blocksize": 0,
                },
            }
        ]  # fmt: skip
    raise ValueError(
        f"unknown compression {compression!r}: use 'none', 'zstd', 'gzip', 'blosc' or 'blosc-bitshuffle'"
    )


_BLOSC_SHUFFLE = {"noshuffle": 0, "shuffle": 1, "bitshuffle": 2}


def _numcodec(spec: dict[str, Any]) -> numcodecs.abc.Codec:
    name = spec.get("name")
    conf = spec.get("configuration") or {}
    if name == "zstd":
        return numcodecs.Zstd(level=conf.get("level", 0), checksum=conf.get("checksum", False))
    if name == "gzip":
        return numcodecs.GZip(level=conf.get("level", 5))
    if name == "blosc":
        return numcodecs.Blosc(
            cname=conf.get("cname", "zstd"),
            clevel=conf.get("clevel", 5),
            shuffle=_BLOSC_SHUFFLE.get(conf.get("shuffle", "noshuffle"), 0),
            blocksize=conf.get("blocksize", 0),
        )
    raise UnsupportedPipeline(name)


@dataclass(frozen=True)
class Pipeline:
    """Serialiser kind plus numcodecs compressors, for one array."""

    serializer: Literal["vlen-bytes", "bytes"]
    compressors: tuple[numcodecs.abc.Codec, ...]

    @classmethod
    def from_codecs(cls, codecs: list[dict[str, Any]]) -> Pipeline:
        if not codecs:
            raise UnsupportedPipeline("empty codec list")
        if codecs[0].get("name") == "draco":
            # The draco array codec maps raw rows <-> a Draco blob; the library decodes the
            # blob itself (it needs the faces too), so the pipeline yields the blob.
            from ._draco import require_codec

            require_codec()
            codecs = codecs[1:]
            if not codecs:
                raise UnsupportedPipeline("draco without a serialiser")
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
        return cls(serializer, tuple(_numcodec(c) for c in codecs[1:]))

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
        wanted = count if limit is None else min(limit, count)
        unpack, pos, out = _U32.unpack_from, 4, []
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
            raise DecodeError(f"vlen-bytes item {len(out) - 1} claims {len(out[-1])} bytes or more, past the chunk's end")
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
        need = sorted(set(wanted))
        if need and need[-1] >= count:
            raise DecodeError(f"vlen-bytes chunk holds {count} items; item {need[-1]} was asked for")
        unpack, pos, starts = _U32.unpack_from, 4, []
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

    def _decompress(self, chunk: bytes) -> memoryview:
        data: Any = chunk
        for codec in reversed(self.compressors):
            try:
                data = _unzstd(data) if isinstance(codec, numcodecs.Zstd) else codec.decode(data)
            except (RuntimeError, ValueError, TypeError) as exc:
                raise DecodeError(f"{codec.codec_id} decompression failed: {exc}") from exc
        if isinstance(data, np.ndarray):
            return memoryview(np.ascontiguousarray(data).view(np.uint8).reshape(-1))
        return memoryview(data).cast("B")

    def decode(self, chunk: bytes) -> memoryview:
        """The payload of one stored chunk; raises DecodeError on bad framing."""
        view = self._decompress(chunk)
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
