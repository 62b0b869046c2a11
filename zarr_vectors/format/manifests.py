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

Decoding is bounded by what is read: the block count by the bytes present, and the
fragments a block names by ``max_fragments`` (no chunk holds more; a fragment index
counts them in a ``uint32``), so a crafted mode-1 count never expands to more indices.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from zarr_vectors.errors import DecodeError

__all__ = [
    "ManifestBlock",
    "encode_manifest",
    "encode_manifests_batch",
    "decode_manifest",
    "decode_manifests_batch",
    "MAX_FRAGMENTS",
]

_U32 = struct.Struct("<I")
_I64 = struct.Struct("<q")
#: Fragments one chunk can hold at most: a fragment index stores its count as ``uint32``.
MAX_FRAGMENTS = (1 << 32) - 1


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


def decode_manifest(
    buf: bytes | memoryview, ndim: int, max_fragments: int = MAX_FRAGMENTS
) -> list[ManifestBlock]:
    """Parse one manifest; reject unknown modes, truncation, trailing bytes and blocks naming
    fragments at or past ``max_fragments``."""
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
            if start < 0 or count > max_fragments or start > max_fragments - count:
                raise DecodeError(
                    f"manifest block {b} names fragments {start}..{start + count - 1}; a chunk holds at most {max_fragments}"
                )
            frags = np.arange(start, start + count, dtype=np.int64)
        else:
            frags = np.frombuffer(buf, "<i8", (need - 4) // 8, pos + 4).astype(np.int64)
        if len(frags) and (frags.min() < 0 or frags.max() >= max_fragments):
            raise DecodeError(f"manifest block {b} names a fragment index outside [0, {max_fragments})")
        pos += need
        blocks.append(ManifestBlock(chunk, frags))
    if pos != len(buf):
        raise DecodeError(f"manifest has {len(buf) - pos} trailing bytes after {n_blocks} blocks")
    return blocks


def _scatter(buf: np.ndarray, at: np.ndarray, values: np.ndarray, dtype: str) -> None:
    """Write ``values`` as little-endian ``dtype`` at byte offsets ``at`` (unaligned is fine)."""
    if len(at) == 0:
        return
    raw = np.ascontiguousarray(values, dtype=dtype).view(np.uint8).reshape(len(at), -1)
    buf[at[:, None] + np.arange(raw.shape[1])] = raw


def encode_manifests_batch(
    num_objects: int,
    block_object: np.ndarray,
    block_chunks: np.ndarray,
    block_offsets: np.ndarray,
    fragments: np.ndarray,
) -> list[bytes]:
    """Vectorised :func:`encode_manifest` for many objects.

    Block ``b`` belongs to object ``block_object[b]`` (non-decreasing), lies in chunk
    ``block_chunks[b]`` and names ``fragments[block_offsets[b]:block_offsets[b + 1]]``.
    Each block uses mode 0 (one fragment), 1 (consecutive) or 2 (a list).
    """
    nb = len(block_object)
    ndim = block_chunks.shape[1] if block_chunks.ndim == 2 else 0
    counts = np.diff(block_offsets)
    first = fragments[block_offsets[:-1]] if nb else np.zeros(0, np.int64)
    last = fragments[block_offsets[1:] - 1] if nb else np.zeros(0, np.int64)
    consecutive = np.ones(nb, bool)
    if len(fragments) > 1:
        steps_ok = np.diff(fragments) == 1
        bad = np.cumsum(np.concatenate([[0], ~steps_ok]))  # non-unit steps before each position
        consecutive = (bad[block_offsets[1:] - 1] - bad[block_offsets[:-1]]) == 0
    consecutive &= last - first == counts - 1
    mode = np.where(counts == 1, 0, np.where(consecutive, 1, 2)).astype(np.uint8)
    body = np.where(mode == 0, 8, np.where(mode == 1, 16, 4 + 8 * counts))
    size = 8 * ndim + 1 + body
    per_obj_blocks = np.bincount(block_object, minlength=num_objects)
    per_obj_bytes = 4 + np.bincount(block_object, weights=size, minlength=num_objects).astype(np.int64)
    obj_start = np.zeros(num_objects + 1, np.int64)
    np.cumsum(per_obj_bytes, out=obj_start[1:])
    buf = np.zeros(int(obj_start[-1]), np.uint8)
    _scatter(buf, obj_start[:-1], per_obj_blocks.astype(np.uint32), "<u4")
    # Block b starts after its object's header and the earlier blocks of the same object.
    cum = np.cumsum(size) - size
    obj_first_block = np.searchsorted(block_object, np.arange(num_objects))
    block_start = obj_start[block_object] + 4 + cum - cum[obj_first_block[block_object]] if nb else cum
    for a in range(ndim):
        _scatter(buf, block_start + 8 * a, block_chunks[:, a], "<i8")
    head = block_start + 8 * ndim
    buf[head] = mode
    m0, m1, m2 = mode == 0, mode == 1, mode == 2
    _scatter(buf, head[m0] + 1, first[m0], "<i8")
    _scatter(buf, head[m1] + 1, first[m1], "<i8")
    _scatter(buf, head[m1] + 9, counts[m1], "<i8")
    _scatter(buf, head[m2] + 1, counts[m2].astype(np.uint32), "<u4")
    if m2.any():
        starts, n = block_offsets[:-1][m2], counts[m2]
        from zarr_vectors.format.fragments import ranges_to_rows

        idx = ranges_to_rows(starts, n)
        slot = np.arange(len(idx)) - np.repeat(np.cumsum(n) - n, n)
        _scatter(buf, np.repeat(head[m2] + 5, n) + 8 * slot, fragments[idx], "<i8")
    raw = buf.tobytes()
    return [raw[obj_start[o] : obj_start[o + 1]] for o in range(num_objects)]


def _gather(buf: np.ndarray, at: np.ndarray, dtype: str) -> np.ndarray:
    size = np.dtype(dtype).itemsize
    return buf[at[:, None] + np.arange(size)].copy().view(dtype).ravel()


def decode_manifests_batch(
    items: Sequence[bytes | memoryview],
    ndim: int,
    max_fragments: int = MAX_FRAGMENTS,
    max_per_object: int | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Vectorised :func:`decode_manifest` over many objects, flattened per fragment.

    Returns ``(object_index, chunks, fragment)``: for every fragment named by any
    manifest, the position of its manifest in ``items``, its absolute chunk (K, ndim)
    and its fragment index. Raises DecodeError naming the first bad object, and before
    expanding anything when a block names a fragment at or past ``max_fragments`` or one
    manifest names more than ``max_per_object`` fragments (the level's total).
    """
    lengths = np.fromiter((len(it) for it in items), np.int64, len(items))
    starts = np.zeros(len(items) + 1, np.int64)
    np.cumsum(lengths, out=starts[1:])
    buf = np.frombuffer(b"".join(bytes(it) for it in items), np.uint8)
    short = np.flatnonzero(lengths < 4)
    if len(short):
        raise DecodeError(
            f"manifest of entry {int(short[0])} is {int(lengths[short[0]])} bytes, shorter than 4"
        )
    end = starts[1:]
    remaining = _gather(buf, starts[:-1], "<u4").astype(np.int64) if len(items) else np.zeros(0, np.int64)
    cur = starts[:-1] + 4
    head = 8 * ndim + 1
    objs, chunks, frags = [], [], []
    named = np.zeros(len(items), np.int64)
    active = np.flatnonzero(remaining > 0)
    while len(active):
        p = cur[active]
        over = p + head > end[active]
        if over.any():
            raise DecodeError(f"manifest of entry {int(active[over][0])} is truncated")
        coords = np.stack([_gather(buf, p + 8 * a, "<i8") for a in range(ndim)], axis=1)
        mode = buf[p + 8 * ndim]
        body = p + head
        bad = mode > 2
        if bad.any():
            raise DecodeError(
                f"manifest of entry {int(active[bad][0])} has a block with unknown mode {int(mode[bad][0])}"
            )
        n = np.ones(len(active), np.int64)
        size = np.full(len(active), 8, np.int64)
        m1, m2 = mode == 1, mode == 2
        need = body + np.where(m2, 4, np.where(m1, 16, 8))
        if np.any(need > end[active]):
            raise DecodeError(f"manifest of entry {int(active[need > end[active]][0])} is truncated")
        if m1.any():
            n[m1] = _gather(buf, body[m1] + 8, "<i8")
        if m2.any():
            n[m2] = _gather(buf, body[m2], "<u4").astype(np.int64)
        size[m1] = 16
        size[m2] = 4 + 8 * n[m2]
        if np.any(body + size > end[active]) or np.any(n < 0):
            raise DecodeError(
                f"manifest of entry {int(active[(body + size > end[active]) | (n < 0)][0])} is truncated or has a negative count"
            )
        first = np.zeros(len(active), np.int64)
        simple = ~m2
        first[simple] = _gather(buf, body[simple], "<i8")
        past = simple & ((first < 0) | (n > max_fragments) | (first > max_fragments - n))
        if past.any():
            k = int(np.argmax(past))
            raise DecodeError(
                f"manifest of entry {int(active[k])} names fragments {int(first[k])}.. ({int(n[k])} of them); "
                f"a chunk holds at most {max_fragments}"
            )
        named[active] += n
        if max_per_object is not None and np.any(named[active] > max_per_object):
            k = int(active[np.argmax(named[active] > max_per_object)])
            raise DecodeError(
                f"manifest of entry {k} names {int(named[k])} fragments or more; the level holds at most {max_per_object}"
            )
        # Fragment list of every block: ranges for modes 0/1, explicit for mode 2.
        rep = np.repeat(np.arange(len(active)), n)
        slot = np.arange(len(rep)) - np.repeat(np.cumsum(n) - n, n)
        f = np.where(m2[rep], 0, first[rep] + slot)
        if m2.any():
            sel = m2[rep]
            f[sel] = _gather(buf, body[rep[sel]] + 4 + 8 * slot[sel], "<i8")
        objs.append(active[rep])
        chunks.append(coords[rep])
        frags.append(f)
        cur[active] = body + size
        remaining[active] -= 1
        active = active[remaining[active] > 0]
    trailing = np.flatnonzero(cur != end)
    if len(trailing):
        raise DecodeError(f"manifest of entry {int(trailing[0])} has trailing bytes after its blocks")
    if not objs:
        return np.zeros(0, np.int64), np.zeros((0, ndim), np.int64), np.zeros(0, np.int64)
    frag = np.concatenate(frags)
    if len(frag) and (frag.min() < 0 or frag.max() >= max_fragments):
        raise DecodeError(f"a manifest names a fragment index outside [0, {max_fragments})")
    return np.concatenate(objs), np.concatenate(chunks), frag
