"""Object manifests v1: one vlen-bytes entry of ``object_index/manifests`` per object.

Layout (little-endian, no padding)::

    uint32 B                      number of blocks
    B times:
      int64 chunk_coords[ndim]    absolute chunk coordinates
      uint8 mode
        0: int64 fragment                       a single fragment
        1: int64 start, int64 count             fragments start .. start + count - 1
        2: uint32 n, int64 fragments[n]         an explicit list

An empty manifest (``B == 0``, 4 bytes) is an object id with no data at this level.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from ..errors import DecodeError

__all__ = ["ManifestBlock", "encode_manifest", "decode_manifest", "encode_single_fragment_manifests"]

_U32 = struct.Struct("<I")
_I64 = struct.Struct("<q")


@dataclass(frozen=True, eq=False)
class ManifestBlock:
    """The fragments of one object inside one chunk (``chunk`` is absolute)."""

    chunk: tuple[int, ...]
    fragments: np.ndarray

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, ManifestBlock)
            and self.chunk == other.chunk
            and np.array_equal(self.fragments, other.fragments)
        )


def _encode_block(block: ManifestBlock) -> bytes:
    head = np.asarray(block.chunk, dtype="<i8").tobytes()
    frags = np.asarray(block.fragments, dtype=np.int64)
    if len(frags) == 1:
        return head + b"\x00" + _I64.pack(int(frags[0]))
    if len(frags) > 1 and np.all(np.diff(frags) == 1):
        return head + b"\x01" + _I64.pack(int(frags[0])) + _I64.pack(len(frags))
    return head + b"\x02" + _U32.pack(len(frags)) + frags.astype("<i8").tobytes()


def encode_manifest(blocks: list[ManifestBlock]) -> bytes:
    """Serialise one object's manifest, choosing the smallest mode for each block."""
    return _U32.pack(len(blocks)) + b"".join(_encode_block(b) for b in blocks)


def encode_single_fragment_manifests(
    object_starts: np.ndarray, chunks: np.ndarray, fragments: np.ndarray
) -> list[bytes]:
    """Vectorised encoder for manifests whose every block names one fragment (mode 0).

    Blocks are rows of ``chunks`` (K, ndim) and ``fragments`` (K,), grouped by object:
    object o owns rows ``object_starts[o]:object_starts[o + 1]``.
    """
    ndim = chunks.shape[1]
    rec = np.dtype([("c", "<i8", (ndim,)), ("m", "u1"), ("f", "<i8")])
    table = np.empty(len(fragments), dtype=rec)
    table["c"] = chunks
    table["m"] = 0
    table["f"] = fragments
    raw = table.tobytes()
    size = rec.itemsize
    starts = np.asarray(object_starts, dtype=np.int64)
    counts = np.diff(starts)
    return [
        _U32.pack(int(n)) + raw[int(s) * size : int(s + n) * size] for s, n in zip(starts[:-1], counts)
    ]


def decode_manifest(buf: bytes | memoryview, ndim: int) -> list[ManifestBlock]:
    """Parse one manifest; reject unknown modes, truncation and trailing bytes."""
    buf = memoryview(buf).cast("B")
    if len(buf) < 4:
        raise DecodeError(f"manifest is {len(buf)} bytes, shorter than its 4-byte block count")
    (n_blocks,) = _U32.unpack_from(buf, 0)
    pos = 4
    blocks: list[ManifestBlock] = []
    head = 8 * ndim + 1
    for b in range(n_blocks):
        if pos + head > len(buf):
            raise DecodeError(f"manifest truncated in block {b} of {n_blocks}")
        chunk = tuple(int(c) for c in np.frombuffer(buf, "<i8", ndim, pos))
        mode = buf[pos + 8 * ndim]
        pos += head
        if mode == 0:
            need = 8
        elif mode == 1:
            need = 16
        elif mode == 2:
            if pos + 4 > len(buf):
                raise DecodeError(f"manifest truncated in block {b} of {n_blocks}")
            need = 4 + 8 * _U32.unpack_from(buf, pos)[0]
        else:
            raise DecodeError(f"manifest block {b} has unknown mode {mode} (expected 0, 1 or 2)")
        if pos + need > len(buf):
            raise DecodeError(f"manifest truncated in block {b} of {n_blocks}")
        if mode == 0:
            frags = np.array([_I64.unpack_from(buf, pos)[0]], dtype=np.int64)
        elif mode == 1:
            start, count = struct.unpack_from("<qq", buf, pos)
            if count < 0:
                raise DecodeError(f"manifest block {b} has a negative fragment count {count}")
            frags = np.arange(start, start + count, dtype=np.int64)
        else:
            frags = np.frombuffer(buf, "<i8", (need - 4) // 8, pos + 4).astype(np.int64)
        if len(frags) and frags.min() < 0:
            raise DecodeError(f"manifest block {b} names a negative fragment index")
        pos += need
        blocks.append(ManifestBlock(chunk, frags))
    if pos != len(buf):
        raise DecodeError(f"manifest has {len(buf) - pos} trailing bytes after {n_blocks} blocks")
    return blocks
