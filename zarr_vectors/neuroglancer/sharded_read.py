"""Neuroglancer's sharded uint64 layout (``neuroglancer_uint64_sharded_v1``), read: no I/O.

The inverse of :mod:`~zarr_vectors.neuroglancer.sharded` (whose hash and key arithmetic it
reuses), written from the specification (``sharded.md``). A lookup of key ``k`` reads

1. the shard index of shard ``shard_of(k)``: ``16 * 2**minishard_bits`` bytes at the start
   of its file, per minishard ``(start, end)`` of its minishard index, relative to the end
   of the shard index (:func:`decode_shard_index`);
2. that minishard index (gzip or raw): ``[3, n]`` uint64le of delta-coded keys, data
   offsets (each relative to the end of the entry before, the first to the end of the shard
   index) and sizes (:func:`decode_minishard_index`, which returns absolute offsets);
3. the entry's bytes, gzip or raw (:func:`decode_data`).

Every decoder raises :class:`~zarr_vectors.errors.PrecomputedFormatError` naming the file.
"""

from __future__ import annotations

import gzip
import zlib

import numpy as np

from zarr_vectors.errors import PrecomputedFormatError
from zarr_vectors.neuroglancer.sharded import ShardingSpec, hash_keys, shard_name

__all__ = [
    "decode_data",
    "decode_minishard_index",
    "decode_shard_index",
    "index_size",
    "locate_keys",
    "shard_names",
]


def index_size(spec: ShardingSpec) -> int:
    """Bytes of a shard index: 16 per minishard."""
    return 16 << spec.minishard_bits


def shard_names(spec: ShardingSpec) -> list[str]:
    """Every shard file name the spec allows, shard 0 first."""
    return [shard_name(s, spec) for s in range(1 << spec.shard_bits)]


def locate_keys(keys: np.ndarray, spec: ShardingSpec) -> tuple[np.ndarray, np.ndarray]:
    """``(shard, minishard)`` numbers (int64) of each uint64 key."""
    h = hash_keys(np.asarray(keys, np.uint64), spec)
    minishard = h & np.uint64((1 << spec.minishard_bits) - 1)
    shard = (h >> np.uint64(spec.minishard_bits)) & np.uint64((1 << spec.shard_bits) - 1)
    return shard.astype(np.int64), minishard.astype(np.int64)


def _gunzip(raw: bytes, where: str, what: str) -> bytes:
    try:
        return gzip.decompress(raw)
    except (OSError, EOFError, zlib.error) as exc:
        raise PrecomputedFormatError(f"{where}: {what} is not valid gzip ({exc})") from exc


def decode_shard_index(buf: bytes, spec: ShardingSpec, where: str) -> np.ndarray:
    """``(2**minishard_bits, 2)`` int64 absolute ``[start, end)`` byte ranges of each
    minishard index in the shard file (empty ranges: empty minishards)."""
    size = index_size(spec)
    if len(buf) != size:
        raise PrecomputedFormatError(
            f"{where}: shard index of {len(buf)} bytes, {size} expected (2**{spec.minishard_bits} minishards)"
        )
    table = np.frombuffer(buf, "<u8").reshape(-1, 2)
    if np.any(table[:, 0] > table[:, 1]) or (len(table) and int(table.max()) >= 1 << 62):
        bad = int(np.flatnonzero((table[:, 0] > table[:, 1]) | (table[:, 1] >= np.uint64(1 << 62)))[0])
        raise PrecomputedFormatError(
            f"{where}: minishard {bad} index range {table[bad].tolist()} ends before it starts or is out of range"
        )
    return table.astype(np.int64) + size


def decode_minishard_index(
    buf: bytes, spec: ShardingSpec, where: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(keys uint64, start offsets int64, sizes int64)`` of a minishard index's entries;
    offsets are absolute in the shard file and the entries' data must lie after the shard
    index."""
    raw = _gunzip(buf, where, "a minishard index") if spec.minishard_index_encoding == "gzip" else buf
    if len(raw) % 24:
        raise PrecomputedFormatError(
            f"{where}: minishard index of {len(raw)} bytes is not [3, n] uint64 (a multiple of 24)"
        )
    table = np.frombuffer(raw, "<u8").reshape(3, -1)
    keys = np.cumsum(table[0], dtype=np.uint64)  # uint64 wraps, as the delta code allows
    if len(raw) and (int(table[1:].max()) >= 1 << 48):
        raise PrecomputedFormatError(f"{where}: a minishard entry's offset or size is out of range")
    gaps = table[1].astype(np.int64)
    sizes = table[2].astype(np.int64)
    ends = index_size(spec) + np.cumsum(gaps + sizes)
    return keys, ends - sizes, sizes


def decode_data(raw: bytes, spec: ShardingSpec, where: str) -> bytes:
    """An entry's bytes as stored (``data_encoding`` undone)."""
    return _gunzip(raw, where, "an entry") if spec.data_encoding == "gzip" else raw
