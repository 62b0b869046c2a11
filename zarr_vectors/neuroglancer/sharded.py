"""Neuroglancer's sharded uint64 layout (``neuroglancer_uint64_sharded_v1``), written.

A sharded index stores many ``(uint64 key, bytes)`` entries in ``2**shard_bits`` files named
``{shard:0Nx}.shard``. Each key is hashed (``identity`` or ``murmurhash3_x86_128`` of
``key >> preshift_bits``); the hash's low ``minishard_bits`` pick the minishard, the next
``shard_bits`` the shard. A shard file is

* the shard index: per minishard, ``(start, end)`` uint64le offsets of its minishard index,
  relative to the end of the shard index (``16 * 2**minishard_bits`` bytes);
* the entries' data, grouped by minishard, keys ascending within a minishard;
* the minishard indexes, each ``[3, n]`` uint64le: delta-coded keys, data offsets (delta from
  the end of the previous entry, the first relative to the end of the shard index), sizes.

Index and data may each be gzipped (``minishard_index_encoding`` / ``data_encoding``).
:func:`encode_shards` builds the files; :func:`choose_sharding` picks parameters for an index
of a given size; :func:`compressed_morton` gives the key of a spatial-index cell.
"""

from __future__ import annotations

import gzip
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from zarr_vectors.errors import InputError

__all__ = [
    "HASHES",
    "ShardingSpec",
    "choose_sharding",
    "compressed_morton",
    "encode_shards",
    "hash_keys",
    "murmurhash3_x86_128_low64",
    "shard_name",
]

#: Hash functions of the sharding spec.
HASHES = ("identity", "murmurhash3_x86_128")
ENCODINGS = ("raw", "gzip")
#: Target shard file size (bytes) and minishard index size (entries) of :func:`choose_sharding`.
SHARD_TARGET = 32 << 20
MINISHARD_TARGET = 256  # 256 entries: a 6 KiB minishard index


@dataclass(frozen=True)
class ShardingSpec:
    """The ``sharding`` member of an info file."""

    preshift_bits: int = 0
    hash: str = "murmurhash3_x86_128"
    minishard_bits: int = 0
    shard_bits: int = 0
    minishard_index_encoding: str = "raw"
    data_encoding: str = "raw"

    def __post_init__(self) -> None:
        if self.hash not in HASHES:
            raise InputError(f"sharding hash must be one of {', '.join(HASHES)}, not {self.hash!r}")
        for name in ("minishard_index_encoding", "data_encoding"):
            if getattr(self, name) not in ENCODINGS:
                raise InputError(f"sharding {name} must be raw or gzip, not {getattr(self, name)!r}")
        bits = (self.preshift_bits, self.minishard_bits, self.shard_bits)
        if min(bits) < 0 or self.preshift_bits > 64 or self.minishard_bits + self.shard_bits > 64:
            raise InputError(f"sharding bits out of range: preshift, minishard, shard = {bits}")

    def to_json(self) -> dict[str, Any]:
        return {
            "@type": "neuroglancer_uint64_sharded_v1",
            "preshift_bits": self.preshift_bits,
            "hash": self.hash,
            "minishard_bits": self.minishard_bits,
            "shard_bits": self.shard_bits,
            "minishard_index_encoding": self.minishard_index_encoding,
            "data_encoding": self.data_encoding,
        }


def _rotl32(a: np.ndarray, r: int) -> np.ndarray:
    return (a << np.uint32(r)) | (a >> np.uint32(32 - r))


def _fmix32(h: np.ndarray) -> np.ndarray:
    h = h ^ (h >> np.uint32(16))
    h = h * np.uint32(0x85EBCA6B)
    h = h ^ (h >> np.uint32(13))
    h = h * np.uint32(0xC2B2AE35)
    return h ^ (h >> np.uint32(16))


def murmurhash3_x86_128_low64(keys: np.ndarray, seed: int = 0) -> np.ndarray:
    """MurmurHash3_x86_128 of each key's 8 little-endian bytes; the low 64 bits of the hash
    (its first 8 output bytes read as uint64le), as uint64. Vectorised (uint32 arithmetic
    wraps modulo 2**32, as the hash wants)."""
    x = np.asarray(keys, np.uint64)
    h1 = np.full(x.shape, seed & 0xFFFFFFFF, np.uint32)
    h2, h3, h4 = h1.copy(), h1.copy(), h1.copy()
    # 8 bytes: no full 16-byte block; the tail holds k1 (bytes 0-3) and k2 (bytes 4-7)
    k2 = (x >> np.uint64(32)).astype(np.uint32) * np.uint32(0xAB0E9789)
    h2 ^= _rotl32(k2, 16) * np.uint32(0x38B34AE5)
    k1 = (x & np.uint64(0xFFFFFFFF)).astype(np.uint32) * np.uint32(0x239B961B)
    h1 ^= _rotl32(k1, 15) * np.uint32(0xAB0E9789)
    for h in (h1, h2, h3, h4):
        h ^= np.uint32(8)
    h1 += h2 + h3 + h4
    h2 += h1
    h3 += h1
    h4 += h1
    h1, h2, h3, h4 = _fmix32(h1), _fmix32(h2), _fmix32(h3), _fmix32(h4)
    h1 += h2 + h3 + h4
    h2 += h1
    return h1.astype(np.uint64) | (h2.astype(np.uint64) << np.uint64(32))


def hash_keys(keys: np.ndarray, spec: ShardingSpec) -> np.ndarray:
    """The hashed chunk ids of ``keys`` (uint64): ``hash(key >> preshift_bits)``."""
    x = np.asarray(keys, np.uint64)
    x = x >> np.uint64(spec.preshift_bits) if spec.preshift_bits < 64 else np.zeros_like(x)
    return x if spec.hash == "identity" else murmurhash3_x86_128_low64(x)


def shard_name(shard: int, spec: ShardingSpec) -> str:
    """``{shard}.shard``: lowercase hex, zero padded to ``ceil(shard_bits / 4)`` digits."""
    digits = -(-spec.shard_bits // 4)
    return f"{shard:0{digits}x}.shard" if digits else f"{shard:x}.shard"


def _bits_mask(bits: int) -> np.uint64:
    return np.uint64((1 << bits) - 1)


def encode_shards(
    keys: Sequence[int] | np.ndarray,
    blobs: Sequence[bytes],
    spec: ShardingSpec,
    prefixes: Sequence[bytes] | None = None,
) -> dict[str, bytes]:
    """The shard files of the entries ``keys[i] -> blobs[i]``: ``{filename: bytes}`` (only
    shards that hold an entry; a missing shard file reads as empty). ``prefixes[i]``, when
    given, is stored unencoded right before entry ``i`` and outside its indexed range (a
    multi-resolution mesh's fragment data before its manifest).

    Raises
    ------
    InputError
        ``keys``, ``blobs`` and ``prefixes`` differ in length, or a key repeats.
    """
    k = np.asarray(keys, np.uint64)
    if len(k) != len(blobs) or (prefixes is not None and len(prefixes) != len(blobs)):
        raise InputError(f"{len(k)} keys but {len(blobs)} values")
    h = hash_keys(k, spec)
    minishard = h & _bits_mask(spec.minishard_bits)
    shard = (h >> np.uint64(spec.minishard_bits)) & _bits_mask(spec.shard_bits)
    order = np.lexsort((k, minishard, shard))
    if len(k) > 1 and np.any(np.diff(np.sort(k)) == 0):
        raise InputError("sharded index keys must be unique")
    data = [gzip.compress(b, mtime=0) for b in blobs] if spec.data_encoding == "gzip" else list(blobs)
    sizes = np.fromiter((len(b) for b in data), np.uint64, len(data))
    gaps = np.zeros(len(data), np.uint64)
    if prefixes is not None:
        gaps = np.fromiter((len(b) for b in prefixes), np.uint64, len(data))
        data = [p + b for p, b in zip(prefixes, data)]
    out: dict[str, bytes] = {}
    bounds = np.flatnonzero(np.diff(shard[order])) + 1
    for rows in np.split(order, bounds) if len(order) else []:
        out[shard_name(int(shard[rows[0]]), spec)] = _one_shard(
            k[rows], minishard[rows], sizes[rows], gaps[rows], [data[i] for i in rows], spec
        )
    return out


def _one_shard(
    keys: np.ndarray,
    minishard: np.ndarray,
    sizes: np.ndarray,
    gaps: np.ndarray,
    data: list[bytes],
    spec: ShardingSpec,
) -> bytes:
    """One shard file of entries sorted by (minishard, key); entry ``i`` is preceded by
    ``gaps[i]`` bytes of unindexed data (its prefix)."""
    n_mini = 1 << spec.minishard_bits
    ends = np.cumsum(sizes + gaps)
    starts = ends - sizes  # offsets relative to the end of the shard index
    bounds = np.flatnonzero(np.diff(minishard)) + 1
    pieces: list[bytes] = []
    table = np.zeros((n_mini, 2), np.uint64)
    at = int(ends[-1]) if len(ends) else 0
    for group in np.split(np.arange(len(keys)), bounds):
        index = np.empty((3, len(group)), np.uint64)
        index[0] = np.diff(keys[group], prepend=np.uint64(0))
        index[1, 0] = starts[group[0]]
        index[1, 1:] = starts[group[1:]] - ends[group[:-1]]  # the prefix between two entries
        index[2] = sizes[group]
        raw = index.astype("<u8").tobytes()
        body = gzip.compress(raw, mtime=0) if spec.minishard_index_encoding == "gzip" else raw
        table[int(minishard[group[0]])] = (at, at + len(body))
        at += len(body)
        pieces.append(body)
    return table.astype("<u8").tobytes() + b"".join(data) + b"".join(pieces)


def choose_sharding(
    n_keys: int,
    total_bytes: int,
    *,
    hash: str = "murmurhash3_x86_128",
    gzip_index: bool = True,
    gzip_data: bool = False,
    shard_bytes: int = SHARD_TARGET,
    minishard_entries: int = MINISHARD_TARGET,
) -> ShardingSpec:
    """Parameters for an index of ``n_keys`` entries of ``total_bytes`` in all: shard files of
    about ``shard_bytes`` (at least one entry each, so a single shard for small indexes) and
    minishards of about ``minishard_entries`` entries (a minishard index of 24 bytes per entry,
    gzipped by default, is what a lookup reads before the data)."""
    n = max(1, int(n_keys))
    shards = max(1, min(n, -(-int(total_bytes) // max(1, shard_bytes))))
    shard_bits = max(0, (shards - 1).bit_length())
    per_shard = -(-n // (1 << shard_bits))
    minishard_bits = max(0, min(32, (-(-per_shard // max(1, minishard_entries)) - 1).bit_length()))
    return ShardingSpec(
        preshift_bits=0,
        hash=hash,
        minishard_bits=minishard_bits,
        shard_bits=shard_bits,
        minishard_index_encoding="gzip" if gzip_index else "raw",
        data_encoding="gzip" if gzip_data else "raw",
    )


def compressed_morton(cells: np.ndarray, grid_shape: Sequence[int]) -> np.ndarray:
    """Compressed Morton codes (uint64) of integer grid cells ``(n, rank)`` in a grid of
    ``grid_shape``: bit ``i`` of each axis whose extent needs more than ``i`` bits, taken
    bit by bit from the lowest, axes in order, packed from the lowest output bit.

    Raises
    ------
    InputError
        The grid needs more than 64 bits.
    """
    c = np.asarray(cells, np.uint64).reshape(-1, len(grid_shape))
    need = [max(0, int(s) - 1).bit_length() for s in grid_shape]
    if sum(need) > 64:
        raise InputError(f"grid {list(grid_shape)} needs {sum(need)} bits, over the 64 of a Morton code")
    out = np.zeros(len(c), np.uint64)
    j = 0
    one = np.uint64(1)
    for bit in range(max(need, default=0)):
        for dim, nb in enumerate(need):
            if bit < nb:
                out |= ((c[:, dim] >> np.uint64(bit)) & one) << np.uint64(j)
                j += 1
    return out
