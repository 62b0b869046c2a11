"""Encode and decode whole Zarr chunks for the codec lists this library writes.

A :class:`Pipeline` is built from an array's ``codecs`` JSON. It handles the
``vlen-bytes`` and ``bytes`` serialisers followed by the bytes-to-bytes codecs
``zstd``, ``gzip``, ``blosc`` and ``crc32c``, producing exactly the bytes
zarr-python produces. Codec lists it cannot handle (sharding, ...) raise
:class:`UnsupportedPipeline` so the caller can say which codec is missing.

Decoding is bounded and thread-safe:

* every stage's output is at most ``Pipeline.max_size`` bytes (the reader derives
  it from the array's metadata, see ``_arrays.py``): the zstd frame's declared
  content size, the gzip stream's output and the blosc header's ``nbytes`` are
  checked before anything that size is allocated;
* a blosc buffer's ``cbytes`` must equal its length (a truncated buffer is
  refused instead of decoding to bytes it did not hold);
* every failure of a codec is a :class:`DecodeError`;
* zstd decompression contexts are per thread; the other codecs keep no state.
"""

from __future__ import annotations

import struct
import threading
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, Protocol

import google_crc32c
import numcodecs
import numcodecs.blosc
import numpy as np
import zstandard

from zarr_vectors.errors import DecodeError, InputError, choice_message

__all__ = ["DEFAULT_MAX_DECODED", "Pipeline", "UnsupportedPipeline", "compressor_json", "CHECKSUM_CODEC"]

_VLEN_HEAD = struct.Struct("<II")
_U32 = struct.Struct("<I")
_BLOSC_HEAD = struct.Struct("<BBBBIII")

#: Decoded-size ceiling of a pipeline whose caller gives no bound of its own. The readers
#: always give one derived from the array's metadata (see ``zarr_vectors.engine.arrays``).
DEFAULT_MAX_DECODED = 1 << 31
#: The codec entry that ``checksums=True`` appends to every array's codec list.
CHECKSUM_CODEC: dict[str, Any] = {"name": "crc32c"}

_local = threading.local()


def _zstd_context() -> zstandard.ZstdDecompressor:
    """This thread's zstd decompressor (a context must never be used by two threads at once)."""
    dctx = getattr(_local, "zstd", None)
    if dctx is None:
        dctx = _local.zstd = zstandard.ZstdDecompressor()
    return dctx


def _too_big(name: str, size: int, bound: int) -> DecodeError:
    return DecodeError(
        f"{name} data claims {size} decoded bytes, more than the {bound} this array's metadata allows"
    )


class _BytesCodec(Protocol):
    codec_id: str

    def encode(self, data: Any) -> Any: ...

    def decode(self, data: Any, bound: int) -> Any: ...


@dataclass(frozen=True)
class _Zstd:
    """One zstd frame (numcodecs' encoder, as zarr-python writes it)."""

    level: int = 0
    checksum: bool = False
    codec_id = "zstd"

    def encode(self, data: Any) -> Any:
        return numcodecs.Zstd(level=self.level, checksum=self.checksum).encode(data)

    def decode(self, data: Any, bound: int) -> bytes:
        try:
            size = zstandard.frame_content_size(data)
        except zstandard.ZstdError as exc:
            raise DecodeError(f"zstd: the data does not start with a zstd frame header ({exc})") from exc
        if size > bound:
            raise _too_big("zstd", size, bound)
        dctx = _zstd_context()
        try:
            if size >= 0:
                return dctx.decompress(data, allow_extra_data=False)
            # No declared size: try growing output limits, never past the bound.
            cap = min(bound, max(1 << 16, 8 * len(data)))
            while True:
                try:
                    return dctx.decompress(data, max_output_size=cap, allow_extra_data=False)
                except zstandard.ZstdError as exc:
                    if cap >= bound or "full frame" not in str(exc):
                        raise
                    cap = min(bound, 4 * cap)
        except zstandard.ZstdError as exc:
            raise DecodeError(f"zstd decompression failed (or needs more than {bound} bytes): {exc}") from exc


@dataclass(frozen=True)
class _Gzip:
    """gzip members (RFC 1952), decoded with zlib under an output limit."""

    level: int = 5
    codec_id = "gzip"

    def encode(self, data: Any) -> Any:
        return numcodecs.GZip(level=self.level).encode(data)

    def decode(self, data: Any, bound: int) -> bytes:
        parts: list[bytes] = []
        total, rest = 0, memoryview(data).cast("B")
        try:
            while True:
                member = zlib.decompressobj(16 + zlib.MAX_WBITS)
                out = member.decompress(rest, bound - total + 1)
                total += len(out)
                if total > bound:
                    raise DecodeError(
                        f"gzip data decodes to more than the {bound} bytes this array's metadata allows"
                    )
                if not member.eof:
                    raise DecodeError("gzip stream is truncated")
                parts.append(out)
                rest = memoryview(member.unused_data).cast("B")
                if not any(rest):  # the gzip module also ignores zero padding after the last member
                    break
        except zlib.error as exc:
            raise DecodeError(f"gzip decompression failed: {exc}") from exc
        return parts[0] if len(parts) == 1 else b"".join(parts)


_BLOSC_SHUFFLE = {"noshuffle": 0, "shuffle": 1, "bitshuffle": 2}


@dataclass(frozen=True)
class _Blosc:
    """A blosc 1 buffer; its 16-byte header is checked before blosc sees it."""

    cname: str = "zstd"
    clevel: int = 5
    shuffle: int = 0
    blocksize: int = 0
    codec_id = "blosc"

    def encode(self, data: Any) -> Any:
        codec = numcodecs.Blosc(
            cname=self.cname, clevel=self.clevel, shuffle=self.shuffle, blocksize=self.blocksize
        )
        return codec.encode(data)

    def decode(self, data: Any, bound: int) -> Any:
        view = memoryview(data).cast("B")
        if len(view) < _BLOSC_HEAD.size:
            raise DecodeError(
                f"blosc buffer is {len(view)} bytes, shorter than its {_BLOSC_HEAD.size}-byte header"
            )
        nbytes, cbytes = _BLOSC_HEAD.unpack_from(view)[4], _BLOSC_HEAD.unpack_from(view)[6]
        if cbytes != len(view):
            raise DecodeError(
                f"blosc header says the buffer is {cbytes} bytes but it holds {len(view)} (truncated or padded)"
            )
        if nbytes > bound:
            raise _too_big("blosc", nbytes, bound)
        try:
            return numcodecs.blosc.decompress(view)
        except (RuntimeError, ValueError) as exc:
            raise DecodeError(f"blosc decompression failed: {exc}") from exc


@dataclass(frozen=True)
class _Crc32c:
    """Zarr's ``crc32c`` codec: a little-endian CRC-32C of the bytes, appended."""

    codec_id = "crc32c"

    def encode(self, data: Any) -> bytes:
        raw = bytes(data)
        return raw + _U32.pack(google_crc32c.value(raw))

    def decode(self, data: Any, bound: int) -> memoryview:
        view = memoryview(data).cast("B")
        if len(view) < 4:
            raise DecodeError(f"crc32c: {len(view)} bytes cannot hold the 4-byte checksum")
        body = view[:-4]
        (stored,) = _U32.unpack_from(view, len(view) - 4)
        computed = google_crc32c.value(np.frombuffer(body, np.uint8))
        if stored != computed:
            raise DecodeError(
                f"crc32c checksum mismatch (stored 0x{stored:08x}, computed 0x{computed:08x}): "
                "the bytes changed after they were written"
            )
        return body


Compression = Literal["none", "zstd", "gzip", "blosc", "blosc-bitshuffle"]


def _check_count(count: int, size: int) -> None:
    """A vlen chunk of ``size`` bytes holds at most ``(size - 4) // 4`` items (4 bytes of length each)."""
    if count > (size - 4) // 4:
        raise DecodeError(
            f"vlen-bytes chunk claims {count} items but its {size} bytes hold at most {(size - 4) // 4}"
        )


class UnsupportedPipeline(Exception):
    """The codec list needs zarr-python's own pipeline."""


#: The ``compression`` names writers take.
COMPRESSIONS = ("none", "zstd", "gzip", "blosc", "blosc-bitshuffle")


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
                    "typesize": 1,
                    "cname": "zstd",
                    "clevel": lvl,
                    "shuffle": shuffle,
                    "blocksize": 0,
                },
            }
        ]
    raise InputError(choice_message("compression", compression, COMPRESSIONS))


def _codec(spec: dict[str, Any]) -> _BytesCodec:
    name = spec.get("name")
    conf = spec.get("configuration") or {}
    if not isinstance(conf, dict):
        raise UnsupportedPipeline(f"{name} with configuration {conf!r}")
    if name == "zstd":
        return _Zstd(level=conf.get("level", 0), checksum=conf.get("checksum", False))
    if name == "gzip":
        return _Gzip(level=conf.get("level", 5))
    if name == "blosc":
        return _Blosc(
            cname=conf.get("cname", "zstd"),
            clevel=conf.get("clevel", 5),
            shuffle=_BLOSC_SHUFFLE.get(conf.get("shuffle", "noshuffle"), 0),
            blocksize=conf.get("blocksize", 0),
        )
    if name == "crc32c":
        return _Crc32c()
    raise UnsupportedPipeline(str(name))


@dataclass(frozen=True)
class Pipeline:
    """Serialiser kind plus bytes-to-bytes codecs, for one array.

    ``max_size`` bounds the bytes every decoding stage may produce (see the module docstring).
    """

    serializer: Literal["vlen-bytes", "bytes"]
    compressors: tuple[_BytesCodec, ...]
    max_size: int = DEFAULT_MAX_DECODED

    @classmethod
    def from_codecs(cls, codecs: list[dict[str, Any]]) -> Pipeline:
        if not isinstance(codecs, list) or not all(isinstance(c, dict) for c in codecs):
            raise UnsupportedPipeline(f"codecs must be a list of objects, got {codecs!r}")
        if not codecs:
            raise UnsupportedPipeline("empty codec list")
        if codecs[0].get("name") == "draco":
            # The draco array codec maps raw rows <-> a Draco blob; the library decodes the
            # blob itself (it needs the faces too), so the pipeline yields the blob.
            from zarr_vectors._draco import require_codec

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
        return cls(serializer, tuple(_codec(c) for c in codecs[1:]))

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
        bound = self.max_size
        # Inner stages hold still-encoded bytes, which may be a little larger than the payload.
        inner = bound + (bound >> 4) + 4096
        last = len(self.compressors) - 1
        for i, codec in enumerate(reversed(self.compressors)):
            data = codec.decode(data, bound if i == last else inner)
        if isinstance(data, np.ndarray):
            view = memoryview(np.ascontiguousarray(data).view(np.uint8).reshape(-1))
        else:
            view = memoryview(data).cast("B")
        if len(view) > bound:
            raise DecodeError(
                f"chunk holds {len(view)} bytes, more than the {bound} this array's metadata allows"
            )
        return view

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
