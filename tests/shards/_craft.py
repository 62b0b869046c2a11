"""Crafting shard indexes by hand: read, change and write back the index of a stored shard
(index at the end, crc32c recomputed, so only the entries are wrong)."""

from __future__ import annotations

from pathlib import Path

import google_crc32c
import numpy as np

__all__ = ["read_index", "write_index"]


def read_index(shard: Path, n_inner: int) -> tuple[bytes, np.ndarray]:
    """``(data, entries)`` of a shard file with its index at the end: the bytes before the
    index, and the index as an ``(n_inner, 2)`` uint64 array of offset, byte count."""
    raw = shard.read_bytes()
    size = 16 * n_inner + 4
    table = np.frombuffer(raw[-size:-4], "<u8").reshape(n_inner, 2).copy()
    return raw[:-size], table


def write_index(shard: Path, data: bytes, entries: np.ndarray, *, checksum: bool = True) -> None:
    """Write ``data`` then ``entries`` as the index, with a correct crc32c (``checksum``) or a wrong one."""
    table = np.ascontiguousarray(entries, "<u8").tobytes()
    crc = google_crc32c.value(table) ^ (0 if checksum else 1)
    shard.write_bytes(data + table + crc.to_bytes(4, "little"))
