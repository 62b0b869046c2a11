"""Zarr v3's ``sharding_indexed`` codec as pure functions: its JSON, shard blobs and indexes.

A sharded array's outer chunks (its ``chunk_grid``) are *shards*: one stored object each, at
the key an unsharded chunk would have (``c/i/j/k`` in shard coordinates). A shard holds the
encoded inner chunks (``configuration.chunk_shape``, encoded by ``configuration.codecs``, which
are exactly the codecs the array would have unsharded) back to back, and an *index*: for every
inner chunk of the shard, in C order, a little-endian ``uint64`` offset and byte count
(``2**64 - 1`` for both: the chunk is empty), followed by the index's ``crc32c`` when
``index_codecs`` end with it. The index sits at the end of the blob (``index_location``
``"end"``, the default) or at its start; offsets count from the start of the blob either way.

Every Zarr Vectors per-chunk array has inner chunks ``[1] * rank`` (one inner chunk per spatial
chunk), so a shard of ``chunks_per_shard`` cells groups that many neighbouring cells.

Nothing here does I/O. Parsing checks the index's length, checksum, that every range lies
inside the blob and that no two ranges share bytes, raising
:class:`~zarr_vectors.errors.CorruptShardError` naming array and shard.
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import google_crc32c
import numpy as np

from zarr_vectors.errors import CorruptShardError, FormatError, InputError

__all__ = [
    "EMPTY",
    "APPEND_BUDGET",
    "append_rewrite",
    "TARGET_SHARD_BYTES",
    "auto_chunks_per_shard",
    "sharded_doc",
    "unsharded_doc",
    "INDEX_CODECS",
    "ShardLayout",
    "coalesce",
    "decode_index",
    "decode_shard",
    "encode_index",
    "encode_shard",
    "inner_codecs",
    "parse_sharding",
    "sharding_codec",
]

#: Offset and byte count of an empty inner chunk in a shard index.
EMPTY = (1 << 64) - 1
#: The index codecs zarr-python writes by default: little-endian bytes, then crc32c.
INDEX_CODECS: tuple[dict[str, Any], ...] = (
    {"name": "bytes", "configuration": {"endian": "little"}},
    {"name": "crc32c"},
)
_U32 = struct.Struct("<I")


@dataclass(frozen=True)
class ShardLayout:
    """How one array groups its inner chunks into shards.

    Invariant: ``shard_shape[i]`` is a positive multiple of ``inner_shape[i]`` on every axis.
    """

    shard_shape: tuple[int, ...]
    inner_shape: tuple[int, ...]
    codecs: tuple[dict[str, Any], ...]
    index_location: Literal["start", "end"] = "end"
    checksum: bool = True

    @property
    def chunks_per_shard(self) -> tuple[int, ...]:
        return tuple(s // c for s, c in zip(self.shard_shape, self.inner_shape))

    @property
    def n_inner(self) -> int:
        """Inner chunks per shard (entries of the index)."""
        return math.prod(self.chunks_per_shard)

    @property
    def index_nbytes(self) -> int:
        return 16 * self.n_inner + 4 * self.checksum

    def locate(self, chunks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Shard coordinates (K, R) and inner position (K,) (C order within the shard) of the
        inner chunk coordinates ``chunks`` (K, R), all non-negative."""
        chunks = np.asarray(chunks, np.int64).reshape(-1, len(self.shard_shape))
        per = self.chunks_per_shard
        cps = np.asarray(per, np.int64)
        strides = np.array([math.prod(per[i + 1 :]) for i in range(len(per))], np.int64)
        return chunks // cps, (chunks % cps) @ strides

    def codec_json(self) -> dict[str, Any]:
        """The ``sharding_indexed`` entry of the array's ``codecs`` list."""
        return sharding_codec(self.inner_shape, self.codecs, self.index_location, self.checksum)


def sharding_codec(
    inner_shape: Sequence[int],
    codecs: Sequence[dict[str, Any]],
    index_location: Literal["start", "end"] = "end",
    checksum: bool = True,
) -> dict[str, Any]:
    """The ``sharding_indexed`` codec JSON wrapping ``codecs`` around inner chunks ``inner_shape``."""
    index = [dict(c) for c in (INDEX_CODECS if checksum else INDEX_CODECS[:1])]
    return {
        "name": "sharding_indexed",
        "configuration": {
            "chunk_shape": [int(c) for c in inner_shape],
            "codecs": [dict(c) for c in codecs],
            "index_codecs": index,
            "index_location": index_location,
        },
    }


def _index_checksum(path: str, index_codecs: Any) -> bool:
    """Whether ``index_codecs`` (bytes little-endian, then optionally crc32c) end with a checksum."""
    names = [c.get("name") if isinstance(c, dict) else c for c in index_codecs or []]
    first = index_codecs[0] if names else None
    endian = ((first.get("configuration") or {}).get("endian", "little")) if isinstance(first, dict) else None
    if names in (["bytes"], ["bytes", "crc32c"]) and endian == "little":
        return names == ["bytes", "crc32c"]
    raise FormatError(
        f"array {path!r}: shard index_codecs {names} are not supported (bytes little-endian, optionally "
        "then crc32c, as zarr-python writes them); rewrite the store with zarr_vectors.reshard"
    )


def parse_sharding(path: str, doc: Mapping[str, Any]) -> ShardLayout | None:
    """The shard layout of an array document (None when its first codec is not
    ``sharding_indexed``); a malformed configuration raises FormatError naming ``path``."""
    codecs = doc.get("codecs")
    if not isinstance(codecs, list) or not codecs or not isinstance(codecs[0], dict):
        return None
    if codecs[0].get("name") != "sharding_indexed":
        return None
    conf = codecs[0].get("configuration")
    grid = doc.get("chunk_grid")
    outer = ((grid.get("configuration") or {}).get("chunk_shape")) if isinstance(grid, dict) else None
    inner = conf.get("chunk_shape") if isinstance(conf, dict) else None
    ok = (
        isinstance(conf, dict)
        and isinstance(outer, list)
        and isinstance(inner, list)
        and len(outer) == len(inner) > 0
        and all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in [*outer, *inner])
        and all(o % i == 0 for o, i in zip(outer, inner))
        and math.prod(o // i for o, i in zip(outer, inner)) <= 1 << 24
    )
    if not ok:
        raise FormatError(
            f"array {path!r}: the sharding_indexed codec needs positive inner chunk_shape dividing the "
            f"shard shape (chunk_grid) on every axis, at most 2**24 inner chunks per shard; got inner "
            f"{inner!r}, shards {outer!r}"
        )
    assert isinstance(conf, dict) and isinstance(outer, list) and isinstance(inner, list)
    location = conf.get("index_location", "end")
    if location not in ("start", "end"):
        raise FormatError(f"array {path!r}: shard index_location must be 'start' or 'end', got {location!r}")
    inner_codecs = conf.get("codecs")
    if not isinstance(inner_codecs, list) or not all(isinstance(c, dict) for c in inner_codecs):
        raise FormatError(f"array {path!r}: the sharding codec's codecs must be a list of objects")
    checksum = _index_checksum(path, conf.get("index_codecs", list(INDEX_CODECS)))
    return ShardLayout(tuple(outer), tuple(inner), tuple(inner_codecs), location, checksum)


def encode_index(offsets: np.ndarray, nbytes: np.ndarray, checksum: bool = True) -> bytes:
    """Index bytes of ``offsets`` and ``nbytes`` (uint64, ``EMPTY`` for empty chunks)."""
    table = np.stack([np.asarray(offsets, "<u8"), np.asarray(nbytes, "<u8")], axis=1).tobytes()
    return table + _U32.pack(google_crc32c.value(table)) if checksum else table


def encode_shard(layout: ShardLayout, chunks: Mapping[int, bytes]) -> bytes:
    """A shard blob of encoded inner chunks ``{inner position: bytes}`` (positions in
    ``0 .. n_inner - 1``), stored in increasing position; absent positions are empty."""
    n = layout.n_inner
    order = sorted(chunks)
    if order and not (0 <= order[0] and order[-1] < n):
        raise InputError(f"inner chunk positions must lie in 0..{n - 1}, got {order[0]}..{order[-1]}")
    offsets = np.full(n, EMPTY, np.uint64)
    nbytes = np.full(n, EMPTY, np.uint64)
    sizes = np.array([len(chunks[p]) for p in order], np.uint64)
    base = layout.index_nbytes if layout.index_location == "start" else 0
    if order:
        offsets[order] = base + np.r_[0, np.cumsum(sizes)[:-1]].astype(np.uint64)
    nbytes[order] = sizes
    index = encode_index(offsets, nbytes, layout.checksum)
    pieces = [chunks[p] for p in order]  # any bytes-like: join copies each once, and only once
    return b"".join([index, *pieces] if layout.index_location == "start" else [*pieces, index])


def decode_index(
    raw: bytes | memoryview,
    layout: ShardLayout,
    *,
    shard_size: int | None = None,
    array: str = "",
    shard: str = "",
) -> tuple[np.ndarray, np.ndarray]:
    """``(offsets, nbytes)`` (uint64, n_inner each) of an index; empty chunks have ``EMPTY`` in both.

    Checks the index's length and checksum, that empty is both-or-neither, that no two
    non-empty ranges overlap, and (given the blob's ``shard_size``) that every range lies in
    the blob outside the index.
    """
    view = memoryview(raw).cast("B")
    want = layout.index_nbytes
    if len(view) != want:
        raise CorruptShardError(array, shard, f"the index is {len(view)} bytes, expected {want}")
    table = view[: 16 * layout.n_inner]
    if layout.checksum:
        (stored,) = _U32.unpack_from(view, 16 * layout.n_inner)
        if google_crc32c.value(bytes(table)) != stored:
            raise CorruptShardError(array, shard, "the index's crc32c checksum does not match")
    pairs = np.frombuffer(table, "<u8").reshape(-1, 2)
    offsets, nbytes = pairs[:, 0].astype(np.uint64), pairs[:, 1].astype(np.uint64)
    empty = offsets == EMPTY
    if np.any(empty != (nbytes == EMPTY)):
        k = int(np.flatnonzero(empty != (nbytes == EMPTY))[0])
        raise CorruptShardError(array, shard, f"index entry {k} is half empty (offset or size 2**64-1)")
    lo = np.uint64(want if layout.index_location == "start" else 0)
    limit = None if shard_size is None else shard_size - (0 if layout.index_location == "start" else want)
    used = ~empty
    big = np.uint64(1 << 62)  # past any blob; keeps offset + nbytes below 2**63
    if np.any(offsets[used] < lo) or np.any(nbytes[used] > big) or np.any(offsets[used] > big):
        k = int(np.flatnonzero(used & ((offsets < lo) | (nbytes > big) | (offsets > big)))[0])
        raise CorruptShardError(array, shard, f"index entry {k} points into the index or past any blob")
    if limit is not None:
        ends = offsets[used] + nbytes[used]
        if np.any(ends > np.uint64(max(limit, 0))):
            k = int(np.flatnonzero(used)[int(np.argmax(ends))])
            raise CorruptShardError(
                array, shard, f"index entry {k} runs past the end of the {shard_size}-byte shard's data"
            )
    _check_disjoint(offsets, nbytes, used, array, shard)
    return offsets, nbytes


def _check_disjoint(
    offsets: np.ndarray, nbytes: np.ndarray, used: np.ndarray, array: str, shard: str
) -> None:
    """Raise CorruptShardError when two non-empty entries share bytes (one sort per index:
    shared bytes would read one cell's rows twice, as two cells)."""
    held = np.flatnonzero(used & (nbytes > 0))
    if len(held) < 2:
        return
    if np.all(offsets[held[1:]] >= offsets[held[:-1]] + nbytes[held[:-1]]):
        return  # in index order already (as writers store them): no sort needed
    order = held[np.argsort(offsets[held], kind="stable")]
    starts = offsets[order]
    ends = starts + nbytes[order]  # no overflow: both are at most 2**62 here
    clash = np.flatnonzero(starts[1:] < ends[:-1])
    if len(clash):
        a, b = sorted((int(order[clash[0]]), int(order[clash[0] + 1])))
        raise CorruptShardError(array, shard, f"index entries {a} and {b} share bytes of the shard")


def decode_shard(
    blob: bytes | memoryview, layout: ShardLayout, *, array: str = "", shard: str = ""
) -> dict[int, memoryview]:
    """Every non-empty inner chunk of a whole shard blob, ``{inner position: encoded bytes}``."""
    view = memoryview(blob).cast("B")
    n = layout.index_nbytes
    if len(view) < n:
        raise CorruptShardError(array, shard, f"the shard is {len(view)} bytes, shorter than its index")
    index = view[:n] if layout.index_location == "start" else view[len(view) - n :]
    offsets, nbytes = decode_index(index, layout, shard_size=len(view), array=array, shard=shard)
    used = np.flatnonzero(offsets != EMPTY)
    return {int(p): view[int(offsets[p]) : int(offsets[p] + nbytes[p])] for p in used}


def coalesce(starts: np.ndarray, ends: np.ndarray, gap: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Merge byte ranges ``[starts, ends)`` of one object that lie at most ``gap`` bytes apart.

    Returns ``(lo, hi, group)``: the merged ranges, in increasing order, and for every input
    range the merged range that holds it. Overlapping inputs are allowed.
    """
    starts = np.asarray(starts, np.int64)
    ends = np.asarray(ends, np.int64)
    if not len(starts):
        empty = np.zeros(0, np.int64)
        return empty, empty, empty
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    reach = np.maximum.accumulate(e)
    new = np.r_[True, s[1:] > reach[:-1] + gap]
    ids = np.cumsum(new) - 1
    lo = s[new]
    hi = np.maximum.reduceat(e, np.flatnonzero(new))
    group = np.empty(len(starts), np.int64)
    group[order] = ids
    return lo, hi, group


def inner_codecs(doc: Mapping[str, Any]) -> Any:
    """The codecs that encode one cell of an array document: those inside its
    ``sharding_indexed`` codec when it is sharded, else its own ``codecs`` (as found, unchecked)."""
    codecs = doc.get("codecs")
    if isinstance(codecs, list) and codecs and isinstance(codecs[0], dict):
        if codecs[0].get("name") == "sharding_indexed":
            conf = codecs[0].get("configuration")
            return conf.get("codecs") if isinstance(conf, dict) else None
    return codecs


#: Bytes an ``"auto"`` shard holds at most: a writer holds a few shards in memory.
TARGET_SHARD_BYTES = 64 << 20
#: Share of a grid's cells in the shards that a 1 % box touches, on average over where the box
#: falls (:func:`append_rewrite`): an append rewrites whole the shards it touches. With the
#: appended rows themselves and the tables it rewrites, a 1 % local append of a uniform point
#: cloud then rewrites 4 to 5 % of the store's bytes (measured: ``docs/storage.md``).
APPEND_BUDGET = 0.035


def append_rewrite(grid_shape: Sequence[int], cps: Sequence[int], volume: float = 0.01) -> float:
    """The share of a full grid's cells in the shards that an axis-aligned box of ``volume`` of
    the grid touches, on average over its position: ``prod((b * n + k) / n)`` over the axes,
    ``b = volume ** (1 / ndim)`` the box's side, ``k`` chunks per shard, ``n`` cells (each
    factor at most 1)."""
    side = volume ** (1.0 / max(len(grid_shape), 1))
    return math.prod(min(1.0, side + int(k) / max(int(n), 1)) for n, k in zip(grid_shape, cps))


def auto_chunks_per_shard(
    grid_shape: Sequence[int], cell_bytes: float, target: int = TARGET_SHARD_BYTES, contiguous: bool = False
) -> tuple[int, ...]:
    """Chunks per shard along each axis: grown one chunk at a time on the shortest axis (the
    earliest of equals) while a
    shard holds at most about ``target`` bytes (an occupied cell taking ``cell_bytes``) and a
    1 % box touches shards of at most :data:`APPEND_BUDGET` of the cells (:func:`append_rewrite`;
    on grids too small for that, at most 1.5 times the share of the cells it touches itself). Never more
    than the grid on any axis.

    ``contiguous``: the first axis has one chunk per shard (of a grid of two axes or more), so
    that a writer going through the cells in C order completes one shard after another, holding
    at most one slab of ``shard[1:]`` trailing rows; otherwise as near a cube as the budget allows.
    """
    shape = [max(1, int(s)) for s in grid_shape]
    caps = list(shape)
    if contiguous and len(shape) > 1:
        caps[0] = 1
    cells = max(1, int(target // max(float(cell_bytes), 1.0)))
    budget = max(APPEND_BUDGET, 1.5 * append_rewrite(shape, [1] * len(shape)))
    cps = [1] * len(shape)
    # Ties go to the earlier axis: a store's folders are one per shard of every axis but the
    # last (``c/i/j/k``), so growing the leading axes first means fewer folders to create.
    order = list(range(len(shape)))
    while True:
        grow = []
        for ax in order:
            bigger = [*cps[:ax], cps[ax] + 1, *cps[ax + 1 :]]
            if cps[ax] < caps[ax] and math.prod(bigger) <= cells and append_rewrite(shape, bigger) <= budget:
                grow.append(ax)
        if not grow:
            return tuple(cps)
        cps[min(grow, key=lambda a: cps[a])] += 1


def sharded_doc(doc: Mapping[str, Any], chunks_per_shard: Sequence[int]) -> dict[str, Any]:
    """An array document with its codecs moved inside ``sharding_indexed`` and its chunk grid
    made of shards of ``chunks_per_shard`` chunks (index at the end, with crc32c). The
    attributes are shared with ``doc``, not copied (they can hold every nonempty chunk's key)."""
    out = {**doc, "chunk_grid": json.loads(json.dumps(doc["chunk_grid"]))}
    conf = out["chunk_grid"]["configuration"]
    inner = [int(c) for c in conf["chunk_shape"]]
    conf["chunk_shape"] = [i * int(k) for i, k in zip(inner, chunks_per_shard)]
    out["codecs"] = [sharding_codec(inner, out["codecs"])]
    return out


def unsharded_doc(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The document of the same array unsharded: chunks are the inner chunks, codecs the inner
    codecs (the document must be sharded, see :func:`parse_sharding`)."""
    layout = parse_sharding("", doc)
    if layout is None:
        raise InputError("the array document is not sharded")
    out = json.loads(json.dumps(doc))
    out["chunk_grid"]["configuration"]["chunk_shape"] = list(layout.inner_shape)
    out["codecs"] = [dict(c) for c in layout.codecs]
    return out
