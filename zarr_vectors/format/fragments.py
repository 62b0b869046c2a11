"""Fragment index v1 (``ZVFG``): the payload of ``vertex_fragments`` and ``link_fragments`` cells.

A fragment is either a *range* of rows ``[start, start + count)`` of the parallel
cell, or an *explicit* list of row indices. Layout (little-endian)::

    header        <IHHII  magic 0x5A564647, version 1, flags 0, F, R
    range bitmap  ceil(F / 8) bytes, zero padded to a multiple of 8 (absent when F == 0)
    range table   R x (int64 start, int64 count), in fragment order
    explicit CSR  uint32 offsets[E + 1], int64 indices[offsets[E]]   (E = F - R; absent when F == 0)

Bit ``f`` of the bitmap (LSB first within byte ``f // 8``) is set iff fragment ``f``
is a range. The r-th range-table row belongs to the r-th set bit.
"""

from __future__ import annotations

import functools
import struct
from dataclasses import dataclass

import numpy as np

from zarr_vectors.errors import DecodeError

__all__ = [
    "FragmentIndex",
    "encode_fragments",
    "encode_range_batch",
    "decode_fragments",
    "decode_range_table",
    "ranges_to_rows",
    "MAGIC",
    "HEADER",
    "range_tables",
    "ranges_outside",
]

MAGIC = 0x5A564647
VERSION = 1
HEADER = struct.Struct("<IHHII")
_RANGE = np.dtype([("start", "<i8"), ("count", "<i8")])


@dataclass(frozen=True, eq=False)
class FragmentIndex:
    """A decoded fragment index.

    Invariants: ``is_range`` has length F; ``ranges`` has one (start, count) row per
    set entry of ``is_range``, in fragment order; ``explicit_offsets`` has
    ``F - R + 1`` non-decreasing entries starting at 0 (or is empty when F == 0);
    ``explicit_indices`` has ``explicit_offsets[-1]`` entries.
    """

    is_range: np.ndarray
    ranges: np.ndarray
    explicit_offsets: np.ndarray
    explicit_indices: np.ndarray

    @classmethod
    def from_ranges(cls, starts: np.ndarray, counts: np.ndarray) -> FragmentIndex:
        """All-range index: fragment f covers ``[starts[f], starts[f] + counts[f])``."""
        starts = np.asarray(starts, dtype=np.int64)
        counts = np.asarray(counts, dtype=np.int64)
        f = len(starts)
        return cls(
            is_range=np.ones(f, dtype=bool),
            ranges=np.stack([starts, counts], axis=1).reshape(f, 2),
            explicit_offsets=np.zeros(1 if f else 0, dtype=np.int64),
            explicit_indices=np.zeros(0, dtype=np.int64),
        )

    @classmethod
    def from_explicit(cls, lists: list[np.ndarray]) -> FragmentIndex:
        """All-explicit index: fragment f lists the rows ``lists[f]``."""
        f = len(lists)
        sizes = np.array([len(x) for x in lists], dtype=np.int64)
        offsets = np.zeros(f + 1, dtype=np.int64)
        np.cumsum(sizes, out=offsets[1:])
        indices = np.concatenate(lists).astype(np.int64) if f else np.zeros(0, np.int64)
        return cls(
            is_range=np.zeros(f, dtype=bool),
            ranges=np.zeros((0, 2), dtype=np.int64),
            explicit_offsets=offsets if f else np.zeros(0, np.int64),
            explicit_indices=indices,
        )

    @property
    def num_fragments(self) -> int:
        return len(self.is_range)

    @property
    def all_ranges(self) -> bool:
        return bool(self.is_range.all())

    def rows(self, fragment: int) -> np.ndarray:
        """Row indices of one fragment, in stored order."""
        if not 0 <= fragment < self.num_fragments:
            raise IndexError(f"fragment {fragment} out of range [0, {self.num_fragments})")
        before = int(np.count_nonzero(self.is_range[:fragment]))
        if self.is_range[fragment]:
            start, count = self.ranges[before]
            return np.arange(start, start + count, dtype=np.int64)
        slot = fragment - before
        lo, hi = self.explicit_offsets[slot], self.explicit_offsets[slot + 1]
        return self.explicit_indices[lo:hi]

    def rows_of(self, fragments: np.ndarray) -> np.ndarray:
        """Concatenated row indices of several fragments (vectorised for range fragments)."""
        fragments = np.asarray(fragments, dtype=np.int64)
        if self.all_ranges:
            starts = self.ranges[fragments, 0]
            counts = self.ranges[fragments, 1]
            return ranges_to_rows(starts, counts)
        return np.concatenate([self.rows(int(f)) for f in fragments] or [np.zeros(0, np.int64)])


def ranges_to_rows(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Expand (start, count) pairs into the concatenated row indices, vectorised."""
    counts = np.asarray(counts, dtype=np.int64)
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    keep = counts > 0
    starts, counts = np.asarray(starts, np.int64)[keep], counts[keep]
    ends = np.cumsum(counts)
    out = np.ones(total, dtype=np.int64)
    out[0] = starts[0]
    # At each run boundary jump from the previous run's last row to the next start.
    out[ends[:-1]] = starts[1:] - (starts[:-1] + counts[:-1] - 1)
    return np.cumsum(out)


def decode_range_table(buf: bytes | memoryview, f: int) -> np.ndarray | None:
    """Fast path: the (f, 2) range table when ``buf`` is laid out exactly as an all-range
    index of ``f`` fragments, else None (then :func:`decode_fragments` explains what is wrong).

    Only the layout is checked here; callers check the values (non-negative, in range).
    """
    if f <= 0 or len(buf) != HEADER.size + _bitmap_bytes(f) + 16 * f + 4:
        return None  # checked before the expected prefix (f / 8 bytes) is built
    prefix = _range_prefix(f)
    if bytes(buf[: len(prefix)]) != prefix:
        return None
    if bytes(buf[-4:]) != b"\0\0\0\0":
        return None
    return np.frombuffer(buf, "<i8", 2 * f, len(prefix)).reshape(f, 2)


@functools.lru_cache(maxsize=64)
def _range_prefix(f: int) -> bytes:
    """Header and bitmap of an all-range index of ``f`` fragments."""
    return HEADER.pack(MAGIC, VERSION, 0, f, f) + _all_ones_bitmap(f)


@functools.lru_cache(maxsize=64)
def _all_ones_bitmap(f: int) -> bytes:
    bitmap = np.zeros(_bitmap_bytes(f), dtype=np.uint8)
    packed = np.packbits(np.ones(f, np.uint8), bitorder="little")
    bitmap[: len(packed)] = packed
    return bitmap.tobytes()


def _bitmap_bytes(f: int) -> int:
    return ((f + 7) // 8 + 7) // 8 * 8


def encode_fragments(index: FragmentIndex) -> bytes:
    """Serialise a fragment index to its v1 bytes."""
    f = index.num_fragments
    r = int(np.count_nonzero(index.is_range))
    header = HEADER.pack(MAGIC, VERSION, 0, f, r)
    if f == 0:
        return header
    bitmap = np.zeros(_bitmap_bytes(f), dtype=np.uint8)
    packed = np.packbits(index.is_range.astype(np.uint8), bitorder="little")
    bitmap[: len(packed)] = packed
    table = np.ascontiguousarray(index.ranges, dtype="<i8").reshape(r, 2)
    offsets = np.asarray(index.explicit_offsets, dtype="<u4")
    indices = np.asarray(index.explicit_indices, dtype="<i8")
    return b"".join((header, bitmap.tobytes(), table.tobytes(), offsets.tobytes(), indices.tobytes()))


def decode_fragments(buf: bytes | memoryview, n_rows: int | None = None) -> FragmentIndex:
    """Parse v1 fragment-index bytes; check magic, version, counts and lengths.

    When ``n_rows`` (the row count of the parallel cell) is given, every range and
    explicit index must fall inside ``[0, n_rows)``.
    """
    buf = memoryview(buf).cast("B")
    if len(buf) < HEADER.size:
        raise DecodeError(f"fragment index is {len(buf)} bytes, shorter than its 16-byte header")
    magic, version, flags, f, r = HEADER.unpack_from(buf, 0)
    if magic != MAGIC:
        raise DecodeError(f"fragment index magic is 0x{magic:08X}, expected 0x{MAGIC:08X} ('ZVFG')")
    if version != VERSION:
        raise DecodeError(f"fragment index version {version} is not supported (expected 1)")
    if flags != 0:
        raise DecodeError(f"fragment index flags are {flags}, expected 0")
    if r > f:
        raise DecodeError(f"fragment index claims {r} range fragments but only {f} fragments")
    if f == 0:
        if len(buf) != HEADER.size:
            raise DecodeError(f"empty fragment index has {len(buf) - HEADER.size} trailing bytes")
        return FragmentIndex.from_ranges(np.zeros(0, np.int64), np.zeros(0, np.int64))
    table = decode_range_table(buf, f) if r == f else None
    if table is not None:  # the common all-range layout, checked byte for byte
        ranges = table.astype(np.int64)
        _check_ranges(ranges, n_rows)
        return FragmentIndex(np.ones(f, bool), ranges, np.zeros(1, np.int64), np.zeros(0, np.int64))
    pos = HEADER.size
    nbit = _bitmap_bytes(f)
    table_end = pos + nbit + 16 * r
    e = f - r
    offsets_end = table_end + 4 * (e + 1)
    if len(buf) < offsets_end:
        raise DecodeError(
            f"fragment index with F={f}, R={r} needs at least {offsets_end} bytes, got {len(buf)}"
        )
    bits = np.unpackbits(np.frombuffer(buf, np.uint8, (f + 7) // 8, pos), bitorder="little")[:f]
    is_range = bits.astype(bool)
    if int(is_range.sum()) != r:
        raise DecodeError(f"range bitmap has {int(is_range.sum())} set bits but header says R={r}")
    ranges = np.frombuffer(buf, "<i8", 2 * r, pos + nbit).reshape(r, 2).astype(np.int64)
    offsets = np.frombuffer(buf, "<u4", e + 1, table_end).astype(np.int64)
    if offsets[0] != 0 or (e and np.any(np.diff(offsets) < 0)):
        raise DecodeError("explicit offsets must start at 0 and never decrease")
    t = int(offsets[-1])
    expected = offsets_end + 8 * t
    if len(buf) != expected:
        raise DecodeError(
            f"fragment index should be {expected} bytes for F={f}, R={r}, T={t}, got {len(buf)}"
        )
    indices = np.frombuffer(buf, "<i8", t, offsets_end).astype(np.int64)
    _check_ranges(ranges, n_rows)
    if n_rows is not None:
        if t and (indices.min() < 0 or indices.max() >= n_rows):
            raise DecodeError(f"explicit fragment row index outside the cell's {n_rows} rows")
    return FragmentIndex(is_range, ranges, offsets, indices)


def range_tables(payloads: list[bytes | memoryview]) -> list[np.ndarray] | None:
    """The (F_k, 2) range tables of many all-range fragment indices, or None as soon as one
    payload is laid out otherwise (then decode each with :func:`decode_fragments`).

    Values are not checked here: callers check starts and counts against their cells.
    """
    out = []
    for buf in payloads:
        if len(buf) < HEADER.size:
            return None
        f = HEADER.unpack_from(buf, 0)[3]
        table = decode_range_table(buf, f) if f else None
        if table is None:
            return None
        out.append(table)
    return out


def ranges_outside(starts: np.ndarray, counts: np.ndarray, n_rows: np.ndarray | int) -> np.ndarray:
    """Mask of ranges ``[start, start + count)`` not inside ``[0, n_rows)``, without computing
    ``start + count`` (which overflows int64 for crafted values)."""
    starts, counts = np.asarray(starts, np.int64), np.asarray(counts, np.int64)
    n = np.asarray(n_rows, np.int64)
    return (starts < 0) | (counts < 0) | (counts > n) | (starts > n - counts)


def _check_ranges(ranges: np.ndarray, n_rows: int | None) -> None:
    if len(ranges) and ranges.min() < 0:
        raise DecodeError("range fragment with a negative start or count")
    limit = np.iinfo(np.int64).max if n_rows is None else n_rows
    if len(ranges) and ranges_outside(ranges[:, 0], ranges[:, 1], limit).any():
        if n_rows is None:
            raise DecodeError("range fragment's start + count overflows a 64-bit row index")
        raise DecodeError(f"range fragment reaches past the cell's {n_rows} rows")


def encode_range_batch(starts: np.ndarray, counts: np.ndarray) -> list[bytes]:
    """Encode K all-range fragment indices of F fragments each, sharing one header.

    ``starts`` and ``counts`` are (K, F); row k becomes the bytes of cell k.
    Equal to ``encode_fragments(FragmentIndex.from_ranges(starts[k], counts[k]))``.
    """
    k, f = starts.shape
    if f == 0:
        return [HEADER.pack(MAGIC, VERSION, 0, 0, 0)] * k
    head = _range_prefix(f)
    tail = np.zeros(1, "<u4").tobytes()
    table = np.empty((k, f, 2), dtype="<i8")
    table[:, :, 0] = starts
    table[:, :, 1] = counts
    raw = table.tobytes()
    step = 16 * f
    return [head + raw[i * step : (i + 1) * step] + tail for i in range(k)]
