"""The bytes-to-bytes codecs of a chunk pipeline, resolved through zarr's and numcodecs' registries.

An entry of an array's ``codecs`` list resolves by its name:

* zarr's own ``zstd``, ``gzip`` and ``blosc`` become the numcodecs codec zarr-python runs for
  them (configuration translated), and ``crc32c`` is implemented here;
* a ``numcodecs.<id>`` name that zarr's registry knows as a bytes-to-bytes codec
  (``numcodecs.lz4``, ``numcodecs.zlib``, ``numcodecs.bz2``, ``numcodecs.lzma``, the checksums,
  ...) becomes ``numcodecs.get_codec({"id": <id>, **configuration})``, as in zarr-python;
* anything else raises :class:`UnsupportedPipeline`.

Encoding is the numcodecs codec's, so the bytes equal zarr-python's. Decoding is bounded: no
codec allocates more than the stage's bound, checked before the output exists, where the
codec's bytes allow it:

====================  ==================================================================
zstd                  the frame header's content size; a frame without one is decoded
                      under growing output limits (this thread's decompression context)
gzip, zlib            zlib's streaming decoder, output limited to the bound
bz2                   :class:`bz2.BZ2Decompressor` with ``max_length``
lzma                  :class:`lzma.LZMADecompressor` with ``max_length``, and a 256 MiB
                      ``memlimit`` on the dictionary a crafted header may ask for
blosc                 the header's ``nbytes``; ``cbytes`` must equal the buffer length
lz4                   numcodecs' 4-byte little-endian size prefix
checksums, shuffle    output no longer than the input, which is already in memory
other numcodecs ids   (registered by third parties) decoded, then checked: not bounded
====================  ==================================================================

Every failure of a codec is a :class:`DecodeError` whose message starts with the codec's id.
"""

from __future__ import annotations

import bz2
import lzma
import struct
import threading
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, Protocol

import google_crc32c
import numcodecs
import numcodecs.blosc
import numcodecs.registry
import numpy as np
import zstandard
from zarr.abc.codec import BytesBytesCodec
from zarr.registry import get_codec_class

from zarr_vectors.errors import DecodeError, InputError, choice_message
from zarr_vectors.storage import Arena

__all__ = [
    "BytesCodec",
    "NUMCODECS_PREFIX",
    "UnsupportedPipeline",
    "bytes_codec",
    "compression_names",
    "compression_of",
    "compressor_json",
    "readable_codecs",
    "too_big",
    "zstd_read_into",
    "zstd_size",
    "zstd_small",
]

#: Prefix of the numcodecs codecs in zarr's registry (``numcodecs.lz4``).
NUMCODECS_PREFIX = "numcodecs."
#: Bytes-to-bytes codecs of numcodecs that are no compressor on their own: checksums (the
#: ``checksums=`` option adds zarr's ``crc32c``) and the byte shuffle (a filter before one).
NOT_COMPRESSORS = frozenset({"shuffle", "crc32", "crc32c", "adler32", "fletcher32", "jenkins_lookup3"})
#: Memory an lzma stream may ask for its dictionary (``xz -9`` needs 65 MiB).
LZMA_MEMLIMIT = 256 << 20
#: The configuration key that holds a codec's level, by numcodecs id.
_LEVEL_KEYS = {
    "zstd": "level",
    "gzip": "level",
    "zlib": "level",
    "bz2": "level",
    "lzma": "preset",
    "blosc": "clevel",
}
_DEFAULT_LEVEL = 5
_BLOSC_HEAD = struct.Struct("<BBBBIII")
_BLOSC_SHUFFLE = {"noshuffle": 0, "shuffle": 1, "bitshuffle": 2}
_U32 = struct.Struct("<I")
_CODEC_ERRORS = (
    RuntimeError,
    ValueError,
    TypeError,
    IndexError,
    OSError,
    EOFError,
    zlib.error,
    lzma.LZMAError,
)

_local = threading.local()


class UnsupportedPipeline(Exception):
    """A codec list (or one of its codecs) this library cannot encode or decode."""


class BytesCodec(Protocol):
    """One bytes-to-bytes stage: ``decode`` returns at most ``bound`` bytes (refused before
    they are allocated where the codec's bytes tell their size: see the module docstring)."""

    @property
    def codec_id(self) -> str: ...

    def encode(self, data: Any) -> Any: ...

    def decode(self, data: Any, bound: int) -> Any: ...


def too_big(name: str, size: int, bound: int) -> DecodeError:
    return DecodeError(
        f"{name} data claims {size} decoded bytes, more than the {bound} this array's metadata allows"
    )


def _zstd_context() -> zstandard.ZstdDecompressor:
    """This thread's zstd decompressor (a context must never be used by two threads at once)."""
    dctx = getattr(_local, "zstd", None)
    if dctx is None:
        dctx = _local.zstd = zstandard.ZstdDecompressor()
    return dctx


def _zstd(codec: Any, data: Any, bound: int) -> bytes:
    try:
        size = zstandard.frame_content_size(data)
    except zstandard.ZstdError as exc:
        raise DecodeError(f"zstd: the data does not start with a zstd frame header ({exc})") from exc
    if size > bound:
        raise too_big("zstd", size, bound)
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


def zstd_size(data: Any) -> int:
    """The decoded size a zstd frame declares (-1: not declared)."""
    try:
        return int(zstandard.frame_content_size(data))
    except zstandard.ZstdError as exc:
        raise DecodeError(f"zstd: the data does not start with a zstd frame header ({exc})") from exc


def _zstd_frame_end(data: Any) -> int:
    """Where the zstd frame at the start of ``data`` ends, from its header, block headers and
    checksum flag (the frame's blocks are not decoded)."""
    view = memoryview(data).cast("B")
    try:
        pos = zstandard.frame_header_size(data)
        checksum = zstandard.get_frame_parameters(data).has_checksum
    except zstandard.ZstdError as exc:
        raise DecodeError(f"zstd: the data does not start with a zstd frame header ({exc})") from exc
    while True:
        if pos + 3 > len(view):
            raise DecodeError("zstd: the frame is truncated in its blocks")
        head = view[pos] | view[pos + 1] << 8 | view[pos + 2] << 16
        kind = (head >> 1) & 3
        if kind == 3:
            raise DecodeError("zstd: a block of the reserved type")
        pos += 3 + (1 if kind == 1 else head >> 3)  # an RLE block stores one byte
        if head & 1:  # the last block
            return pos + (4 if checksum else 0)


def _one_frame(data: Any) -> None:
    """Refuse ``data`` unless it is exactly one zstd frame (as ``allow_extra_data=False`` does)."""
    end = _zstd_frame_end(data)
    if end != len(data):
        raise DecodeError(f"zstd: the frame takes {end} bytes but the data has {len(data)}")


#: Decoded size (bytes) below which :func:`zstd_read_into` decompresses a frame in one call and
#: copies it out: a stream reader costs some microseconds per frame, a copy per byte (measured
#: in benchmarks/RESULTS-peers.txt, run R1).
ZSTD_ONE_CALL_BYTES = 1 << 18


def zstd_small(data: Any, size: int) -> memoryview | None:
    """The whole decoded zstd frame ``data``, which must decode to ``size`` bytes, in one
    ``decompress`` call (which refuses data after the frame); None when ``size`` is not below
    :data:`ZSTD_ONE_CALL_BYTES` (read it with :func:`zstd_read_into`). Framing errors are
    worded as by :func:`_one_frame`."""
    if size >= ZSTD_ONE_CALL_BYTES:
        return None
    try:
        # max_output_size: a frame without a content size in its header (streamed writers)
        # decodes into at most ``size`` bytes instead of being refused.
        whole = memoryview(_zstd_context().decompress(data, max_output_size=size, allow_extra_data=False))
    except zstandard.ZstdError as exc:
        _one_frame(data)  # bad framing: says where the frame ends
        raise DecodeError(f"zstd decompression failed: {exc}") from exc
    if len(whole) != size:
        raise DecodeError(f"zstd: the frame holds {len(whole)} bytes, not the {size} its parts take")
    return whole


def zstd_read_into(data: Any, parts: Sequence[memoryview]) -> None:
    """Decompress the zstd frame ``data`` into ``parts``, one after the other; it must fill
    them exactly, and be the whole of ``data``."""
    whole = zstd_small(data, sum(len(part) for part in parts))
    if whole is not None:
        at = 0
        for part in parts:
            part[:] = whole[at : at + len(part)]
            at += len(part)
        return
    _one_frame(data)
    try:
        reader = _zstd_context().stream_reader(data, read_across_frames=True)
        got = 0
        for part in parts:
            done = 0
            while done < len(part):
                n = reader.readinto(part[done:])
                if n == 0:
                    break
                done += n
            got += done
            if done < len(part):
                raise DecodeError(f"zstd: the frame ends after {got} bytes, short of the size it declares")
        extra = reader.read(1)
    except zstandard.ZstdError as exc:
        raise DecodeError(f"zstd decompression failed: {exc}") from exc
    if extra:
        raise DecodeError(f"zstd: more bytes come out of the frame than the {got} it declares")


def _zstd_into(codec: Any, data: Any, bound: int, scratch: Arena) -> memoryview:
    """:func:`_zstd` decompressed into a slice of ``scratch`` (the frame must declare its size)."""
    try:
        size = zstandard.frame_content_size(data)
    except zstandard.ZstdError as exc:
        raise DecodeError(f"zstd: the data does not start with a zstd frame header ({exc})") from exc
    if size < 0:
        return memoryview(_zstd(codec, data, bound))
    if size > bound:
        raise too_big("zstd", size, bound)
    _one_frame(data)
    out = scratch.take(size)
    got = 0
    try:
        # Across frames, so that bytes after the frame are read (and refused) below.
        reader = _zstd_context().stream_reader(data, read_across_frames=True)
        while got < size:
            n = reader.readinto(out[got:])
            if n == 0:
                break
            got += n
        extra = reader.read(1)
    except zstandard.ZstdError as exc:
        raise DecodeError(f"zstd decompression failed: {exc}") from exc
    if got != size or extra:
        raise DecodeError(
            f"zstd: the frame declares {size} bytes but {'more follow' if extra else f'only {got} came out'}"
        )
    return out


def _streams(
    name: str, new: Callable[[], Any], data: Any, bound: int, padding: bool, multi: bool = True
) -> bytes:
    """Concatenated streams (gzip members, bz2 or xz streams; one only unless ``multi``)
    decoded under ``bound``; zero bytes after the last one are ignored when ``padding`` (as
    the gzip module does)."""
    parts: list[bytes] = []
    total, rest = 0, memoryview(data).cast("B")
    while True:
        dec = new()
        out = dec.decompress(rest, bound - total + 1)
        total += len(out)
        if total > bound:
            raise DecodeError(
                f"{name} data decodes to more than the {bound} bytes this array's metadata allows"
            )
        if not dec.eof:
            raise DecodeError(f"{name} stream is truncated")
        parts.append(out)
        rest = memoryview(dec.unused_data).cast("B")
        if not rest or (padding and not any(rest)):
            break
        if not multi:
            raise DecodeError(f"{name} stream is followed by {len(rest)} bytes that belong to no stream")
    return parts[0] if len(parts) == 1 else b"".join(parts)


def _gzip(codec: Any, data: Any, bound: int) -> bytes:
    try:
        return _streams("gzip", lambda: zlib.decompressobj(16 + zlib.MAX_WBITS), data, bound, True)
    except zlib.error as exc:
        raise DecodeError(f"gzip decompression failed: {exc}") from exc


def _zlib(codec: Any, data: Any, bound: int) -> bytes:
    try:
        return _streams("zlib", zlib.decompressobj, data, bound, False, multi=False)
    except zlib.error as exc:
        raise DecodeError(f"zlib decompression failed: {exc}") from exc


def _bz2(codec: Any, data: Any, bound: int) -> bytes:
    try:
        return _streams("bz2", bz2.BZ2Decompressor, data, bound, False)
    except DecodeError:
        raise
    except (OSError, ValueError, EOFError) as exc:
        raise DecodeError(f"bz2 decompression failed: {exc}") from exc


def _lzma(codec: Any, data: Any, bound: int) -> bytes:
    fmt, filters = codec.format, codec.filters
    if fmt == lzma.FORMAT_RAW:

        def new() -> lzma.LZMADecompressor:
            return lzma.LZMADecompressor(fmt, filters=filters)
    else:

        def new() -> lzma.LZMADecompressor:
            return lzma.LZMADecompressor(fmt, memlimit=LZMA_MEMLIMIT)

    try:
        return _streams("lzma", new, data, bound, fmt == lzma.FORMAT_XZ)
    except DecodeError:
        raise
    except (lzma.LZMAError, ValueError, EOFError) as exc:
        raise DecodeError(f"lzma decompression failed: {exc}") from exc


def _blosc(codec: Any, data: Any, bound: int) -> bytes:
    view = memoryview(data).cast("B")
    if len(view) < _BLOSC_HEAD.size:
        raise DecodeError(
            f"blosc buffer is {len(view)} bytes, shorter than its {_BLOSC_HEAD.size}-byte header"
        )
    _, _, _, _, nbytes, _, cbytes = _BLOSC_HEAD.unpack_from(view)
    if cbytes != len(view):
        raise DecodeError(
            f"blosc header says the buffer is {cbytes} bytes but it holds {len(view)} (truncated or padded)"
        )
    if nbytes > bound:
        raise too_big("blosc", nbytes, bound)
    try:
        return numcodecs.blosc.decompress(view)
    except (RuntimeError, ValueError) as exc:
        raise DecodeError(f"blosc decompression failed: {exc}") from exc


def _lz4(codec: Any, data: Any, bound: int) -> Any:
    view = memoryview(data).cast("B")
    if len(view) < 4:
        raise DecodeError(f"lz4 buffer is {len(view)} bytes, shorter than its 4-byte size prefix")
    (size,) = _U32.unpack_from(view)
    if size > bound:
        raise too_big("lz4", size, bound)
    return _plain(codec, view, bound)


def _plain(codec: Any, data: Any, bound: int) -> Any:
    """numcodecs' own decoder, its output checked against ``bound`` once it exists."""
    try:
        out = codec.decode(data)
    except _CODEC_ERRORS as exc:
        raise DecodeError(f"{codec.codec_id} decompression failed: {exc}") from exc
    if memoryview(out).nbytes > bound:
        raise too_big(codec.codec_id, memoryview(out).nbytes, bound)
    return out


#: Bounded decoders by numcodecs id; any other codec decodes through :func:`_plain`.
_DECODERS: dict[str, Callable[[Any, Any, int], Any]] = {
    "zstd": _zstd,
    "gzip": _gzip,
    "zlib": _zlib,
    "bz2": _bz2,
    "lzma": _lzma,
    "blosc": _blosc,
    "lz4": _lz4,
}


@dataclass(frozen=True)
class _Numcodec:
    """A numcodecs codec: its encoder, and the bounded decoder of its id."""

    codec_id: str
    codec: Any

    def encode(self, data: Any) -> Any:
        return self.codec.encode(data)

    def decode(self, data: Any, bound: int) -> Any:
        return _DECODERS.get(self.codec_id, _plain)(self.codec, data, bound)

    def decode_into(self, data: Any, bound: int, scratch: Arena) -> Any:
        """:meth:`decode`, into a slice of ``scratch`` where the codec allows (zstd)."""
        if self.codec_id == "zstd":
            return _zstd_into(self.codec, data, bound, scratch)
        return self.decode(data, bound)


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


def _zarr_zstd(conf: dict[str, Any]) -> dict[str, Any]:
    return {"id": "zstd", "level": conf.get("level", 0), "checksum": conf.get("checksum", False)}


def _zarr_gzip(conf: dict[str, Any]) -> dict[str, Any]:
    return {"id": "gzip", "level": conf.get("level", 5)}


def _zarr_blosc(conf: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "blosc",
        "cname": conf.get("cname", "zstd"),
        "clevel": conf.get("clevel", 5),
        "shuffle": _BLOSC_SHUFFLE.get(conf.get("shuffle", "noshuffle"), 0),
        "blocksize": conf.get("blocksize", 0),
    }


#: zarr's own bytes-to-bytes codecs, as the numcodecs configuration zarr-python runs for them.
_ZARR_CODECS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "zstd": _zarr_zstd,
    "gzip": _zarr_gzip,
    "blosc": _zarr_blosc,
}


@cache
def _zarr_bytes_codec(name: str) -> bool:
    """Whether zarr's registry holds ``name`` as a bytes-to-bytes codec."""
    try:
        cls = get_codec_class(name)
    except (KeyError, ValueError):  # zarr >= 3.2 raises UnknownCodecError, a ValueError
        return False
    return isinstance(cls, type) and issubclass(cls, BytesBytesCodec)


def _numcodec(config: dict[str, Any], name: str) -> _Numcodec:
    try:
        return _Numcodec(config["id"], numcodecs.get_codec(dict(config)))
    except (ValueError, TypeError, KeyError) as exc:
        conf = {k: v for k, v in config.items() if k != "id"}
        raise UnsupportedPipeline(f"codec {name!r} with configuration {conf}: {exc}") from exc


def bytes_codec(spec: dict[str, Any]) -> BytesCodec:
    """The codec of one bytes-to-bytes entry of a ``codecs`` list; UnsupportedPipeline when
    neither zarr's registry (as a bytes-to-bytes codec) nor numcodecs knows it."""
    name = spec.get("name")
    conf = spec.get("configuration") or {}
    if not isinstance(name, str):
        raise UnsupportedPipeline(f"codec name {name!r} is not a string")
    if not isinstance(conf, dict):
        raise UnsupportedPipeline(f"{name} with configuration {conf!r}")
    if name == "crc32c":
        return _Crc32c()
    if name in _ZARR_CODECS:
        return _numcodec(_ZARR_CODECS[name](conf), name)
    cid = name.removeprefix(NUMCODECS_PREFIX)
    if (
        name.startswith(NUMCODECS_PREFIX)
        and cid in numcodecs.registry.codec_registry
        and _zarr_bytes_codec(name)
    ):
        return _numcodec({**conf, "id": cid}, name)
    what = (
        "has no numcodecs implementation"
        if _zarr_bytes_codec(name)
        else "is not a bytes-to-bytes codec zarr knows"
    )
    raise UnsupportedPipeline(f"codec {name!r} {what} (readable: {', '.join(readable_codecs())})")


@cache
def readable_codecs() -> tuple[str, ...]:
    """The bytes-to-bytes codec names :func:`bytes_codec` resolves."""
    ids = (
        cid for cid in sorted(numcodecs.registry.codec_registry) if _zarr_bytes_codec(NUMCODECS_PREFIX + cid)
    )
    return (*_ZARR_CODECS, "crc32c", *(NUMCODECS_PREFIX + cid for cid in ids))


@cache
def _numcodecs_compressors() -> tuple[str, ...]:
    """numcodecs ids that zarr registers as bytes-to-bytes codecs and that compress."""
    return tuple(
        sorted(
            cid
            for cid in numcodecs.registry.codec_registry
            if cid not in NOT_COMPRESSORS and _zarr_bytes_codec(NUMCODECS_PREFIX + cid)
        )
    )


def compression_names() -> tuple[str, ...]:
    """The ``compression=`` names: ``none``, zarr's ``zstd``, ``gzip``, ``blosc`` (and
    ``blosc-bitshuffle``), then numcodecs' other compressors (``bz2``, ``lz4``, ``lzma``,
    ``zlib``, ...). ``numcodecs.<id>`` also names any of numcodecs' compressors."""
    zarr_names = ("none", "zstd", "gzip", "blosc", "blosc-bitshuffle")
    return zarr_names + tuple(c for c in _numcodecs_compressors() if c not in _ZARR_CODECS)


def _zarr_json(name: str, lvl: int) -> list[dict[str, Any]]:
    if name == "zstd":
        return [{"name": "zstd", "configuration": {"level": lvl, "checksum": False}}]
    if name == "gzip":
        return [{"name": "gzip", "configuration": {"level": lvl}}]
    shuffle = "bitshuffle" if name == "blosc-bitshuffle" else "shuffle"
    conf = {"typesize": 1, "cname": "zstd", "clevel": lvl, "shuffle": shuffle, "blocksize": 0}
    return [{"name": "blosc", "configuration": conf}]


def compressor_json(compression: str | None, *, level: int | None = None) -> list[dict[str, Any]]:
    """The bytes-to-bytes codec list for a ``compression=`` choice (see :func:`compression_names`).

    ``"none"`` (the format's default) is no codec; ``"blosc"`` is Blosc/Zstd with byte shuffle,
    ``"blosc-bitshuffle"`` with bit shuffle; a numcodecs compressor is written as zarr-python
    writes it (``{"name": "numcodecs.lz4", "configuration": {...}}``, numcodecs' defaults).
    ``level`` defaults to 5 for the codecs that have one (lzma's ``preset``); lz4 has none.
    Raises InputError naming the choices for an unknown name.
    """
    name = (compression or "none").lower() if isinstance(compression, str) or compression is None else None
    if level is not None and (not isinstance(level, int | np.integer) or isinstance(level, bool)):
        raise InputError(f"compression level must be an integer, got {level!r}")
    if name == "none":
        return []
    if name in ("zstd", "gzip", "blosc", "blosc-bitshuffle"):
        codecs = _zarr_json(name, _DEFAULT_LEVEL if level is None else int(level))
    else:
        cid = name.removeprefix(NUMCODECS_PREFIX) if name else None
        if cid is None or cid not in _numcodecs_compressors():
            raise InputError(
                choice_message("compression", compression, compression_names())
                + f" (or {NUMCODECS_PREFIX}<id> for numcodecs' own {', '.join(_numcodecs_compressors())})"
            )
        config = numcodecs.get_codec({"id": cid}).get_config()
        key = _LEVEL_KEYS.get(cid)
        if key is not None:
            config[key] = _DEFAULT_LEVEL if level is None else int(level)
        elif level is not None:
            raise InputError(f"compression {compression!r} takes no level (got level={level})")
        config.pop("id")
        codecs = [{"name": NUMCODECS_PREFIX + cid, "configuration": config}]
    try:  # a level the codec refuses fails here, not in the middle of a write
        bytes_codec(codecs[0]).encode(b"\0")
    except (*_CODEC_ERRORS, UnsupportedPipeline) as exc:
        raise InputError(f"compression {compression!r} with level {level}: {exc}") from exc
    return codecs


def compression_of(codecs: list[dict[str, Any]]) -> tuple[str, int | None]:
    """The ``compression=`` name and level that write the first compressor of ``codecs`` (a
    ``zarr.json`` codec list); ``("none", None)`` when it has none. The blosc shuffle is kept;
    other configuration keys (a blosc ``cname``, an lzma filter chain) are not carried over."""
    for spec in codecs:
        name = spec.get("name") if isinstance(spec, dict) else None
        conf = spec.get("configuration") or {} if isinstance(spec, dict) else {}
        if not isinstance(name, str) or not isinstance(conf, dict):
            continue
        cid = name.removeprefix(NUMCODECS_PREFIX)
        if name == "blosc" and conf.get("shuffle") == "bitshuffle":
            found = "blosc-bitshuffle"
        elif name in _ZARR_CODECS:
            found = name
        elif name.startswith(NUMCODECS_PREFIX) and cid in _numcodecs_compressors():
            found = name if cid in _ZARR_CODECS else cid
        else:
            continue
        level = conf.get(_LEVEL_KEYS.get(cid, ""))
        return found, level if isinstance(level, int) and not isinstance(level, bool) else None
    return "none", None
