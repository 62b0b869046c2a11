"""Link records: the ``links/<delta>/<offsets>`` arrays as pure functions.

A link record joins ``L = link_width`` vertices. It is stored in the cell of its
*source* chunk ``src``; stored endpoint ``k`` is vertex ``vi_k`` local to chunk
``src + o_k`` (``o_0 = 0`` is implicit, the other ``L - 1`` offsets name the
array). When ``has_perm`` holds, a row is ``[perm_idx, vi_0, ..., vi_{L-1}]`` and
``perm_idx`` is the Lehmer code of the permutation ``sigma`` that took the input
endpoint order to the stored one (stored endpoint ``i`` = input endpoint ``sigma[i]``).

Cell payloads (little-endian):

* intra array (``delta == 0`` and every offset zero): flat rows, no header;
* every other array: ``int64 K``, ``int64 off[K]`` (byte offsets of the row groups,
  measured from the start of the data section), then the concatenated rows.
  The header is int64 whatever the row dtype.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from zarr_vectors.errors import DecodeError, FormatError, InputError, check_choice

__all__ = [
    "format_delta",
    "parse_delta",
    "format_offsets",
    "parse_offsets",
    "is_intra",
    "uses_flat_cells",
    "segment_order",
    "links_has_perm",
    "lehmer_encode",
    "lehmer_decode",
    "canonical_order",
    "apply_order",
    "undo_order",
    "restore_input_order",
    "encode_flat_rows",
    "decode_flat_rows",
    "encode_ragged",
    "decode_ragged",
    "build_rows",
    "split_rows",
    "smallest_index_dtype",
    "check_indices",
    "cross_level_anchor",
    "LinkPlacement",
    "LinkCell",
    "place_links",
    "SELF",
]

SELF = "self"
STORE_POLICIES = ("canonical", "duplicate")
# "0", or a sign followed by a number without leading zeros. "+0", "-0", "1", "+01" are
# refused: the spec writes "0", "+N", "-N", and one value must have exactly one name.
_DELTA = re.compile(r"0|[+-][1-9][0-9]*")
_MAX_L = 20  # 20! < 2**63, so every Lehmer code fits an int64


# ---------------------------------------------------------------- path grammar


def format_delta(value: int) -> str:
    """``0`` -> ``"0"``, ``1`` -> ``"+1"``, ``-2`` -> ``"-2"`` (the sign is always written)."""
    value = int(value)
    return "0" if value == 0 else f"{value:+d}"


def parse_delta(text: str) -> int:
    """Inverse of :func:`format_delta`; refuses every other spelling (``"+0"``, ``"1"``, ``"+01"``)."""
    if not isinstance(text, str) or not _DELTA.fullmatch(text):
        raise DecodeError(f"{text!r} is not a link delta: expected '0', '+N' or '-N'")
    return int(text)


def format_offsets(offsets: np.ndarray) -> str:
    """Segment name of ``(L - 1, D)`` offsets: ``"0.0.+1_0.+1.0"``; ``"self"`` iff ``L == 1``."""
    offsets = np.asarray(offsets)
    if offsets.ndim != 2:
        raise InputError(f"offsets must be a (link_width - 1, sid_ndim) array, got shape {offsets.shape}")
    if offsets.shape[0] == 0:
        return SELF
    return "_".join(".".join(format_delta(c) for c in row.tolist()) for row in offsets)


def parse_offsets(name: str, link_width: int, sid_ndim: int) -> np.ndarray:
    """Parse a segment name into ``(link_width - 1, sid_ndim)`` int64 offsets.

    Enforces the three reader rules: ``link_width - 1`` offsets, ``sid_ndim``
    components each, and ``"self"`` used iff ``link_width == 1``.
    """
    if link_width < 1 or sid_ndim < 1:
        raise DecodeError(f"link_width ({link_width}) and sid_ndim ({sid_ndim}) must be at least 1")
    if link_width == 1 or name == SELF:
        if link_width == 1 and name == SELF:
            return np.zeros((0, sid_ndim), dtype=np.int64)
        if link_width == 1:
            raise DecodeError(f"offsets segment {name!r}: link_width 1 must use the name 'self'")
        raise DecodeError(f"offsets segment 'self' is only valid for link_width 1, not {link_width}")
    parts = name.split("_")
    if len(parts) != link_width - 1:
        raise DecodeError(
            f"offsets segment {name!r} has {len(parts)} offsets; "
            f"link_width {link_width} needs {link_width - 1}"
        )
    out = np.empty((link_width - 1, sid_ndim), dtype=np.int64)
    for k, part in enumerate(parts):
        comps = part.split(".")
        if len(comps) != sid_ndim:
            raise DecodeError(
                f"offsets segment {name!r}: offset {k + 1} has {len(comps)} components, "
                f"sid_ndim is {sid_ndim}"
            )
        for d, comp in enumerate(comps):
            if not _DELTA.fullmatch(comp):
                raise DecodeError(f"offsets segment {name!r}: component {comp!r} is not '0', '+N' or '-N'")
            out[k, d] = int(comp)
    return out


def is_intra(offsets: np.ndarray) -> bool:
    """True for the intra segment: no offsets (``self``) or every offset zero."""
    offsets = np.asarray(offsets)
    return offsets.size == 0 or not offsets.any()


def uses_flat_cells(offsets: np.ndarray, delta: int) -> bool:
    """Flat rows (with ``link_fragments``) iff ``delta == 0`` and intra; else the ragged blob."""
    return delta == 0 and is_intra(offsets)


def segment_order(names: Sequence[str]) -> list[str]:
    """Segment names in enumeration order: plain ASCII, so ``+`` and ``-`` sort before ``0``.

    The intra segment therefore comes last (``['+1.0.0', '-1.0.0', '0.0.+1', '0.0.0']``).
    """
    return sorted(names, key=lambda n: n.encode("ascii"))


def links_has_perm(offsets: np.ndarray, *, delta: int, directed: bool, store: str) -> bool:
    """Whether the rows of this array carry a leading ``perm_idx`` column (spec §10.6.5)."""
    check_choice("the links store policy", store, STORE_POLICIES, error=FormatError)
    if is_intra(offsets) or delta != 0:
        return False
    return store == "duplicate" or not directed


# ---------------------------------------------------------------- permutations


def _weights(width: int) -> np.ndarray:
    """Factorial place values ``(L-1)!, ..., 1!, 0!``."""
    return np.array([math.factorial(width - 1 - i) for i in range(width)], dtype=np.int64)


def lehmer_encode(perms: np.ndarray) -> np.ndarray:
    """Lehmer codes of ``(M, L)`` permutations of ``0..L-1``; identity -> 0, all in ``[0, L!)``.

    Digit ``i`` is the number of later entries smaller than ``perms[:, i]``, with weight ``(L-1-i)!``.
    """
    perms = np.asarray(perms, dtype=np.int64)
    if perms.ndim != 2 or not 1 <= perms.shape[1] <= _MAX_L:
        raise InputError(f"permutations must be (M, L) with 1 <= L <= {_MAX_L}, got shape {perms.shape}")
    m, width = perms.shape
    if m and not np.array_equal(np.sort(perms, axis=1), np.broadcast_to(np.arange(width), perms.shape)):
        bad = int(np.flatnonzero(np.any(np.sort(perms, axis=1) != np.arange(width), axis=1))[0])
        raise InputError(f"row {bad} ({perms[bad].tolist()}) is not a permutation of 0..{width - 1}")
    later = np.triu(np.ones((width, width), dtype=bool), 1)  # [i, j]: j > i
    smaller = perms[:, None, :] < perms[:, :, None]  # [m, i, j]: perms[j] < perms[i]
    digits = np.count_nonzero(smaller & later, axis=2)
    return digits.astype(np.int64) @ _weights(width)


def lehmer_decode(codes: np.ndarray, width: int) -> np.ndarray:
    """``(M, L)`` permutations from Lehmer codes; a code outside ``[0, L!)`` is a DecodeError."""
    codes = np.asarray(codes).astype(np.int64, copy=False).reshape(-1)
    if not 1 <= width <= _MAX_L:
        raise InputError(f"link width must be in 1..{_MAX_L}, got {width}")
    limit = math.factorial(width)
    bad = np.flatnonzero((codes < 0) | (codes >= limit))
    if len(bad):
        r = int(bad[0])
        raise DecodeError(
            f"perm_idx {int(codes[r])} of record {r} is outside [0, {limit}) for link_width {width}"
        )
    m = len(codes)
    if width == 2:  # code 0 is the identity, 1 the swap
        return np.stack([codes, 1 - codes], axis=1)
    out = np.empty((m, width), dtype=np.int64)
    free = np.ones((m, width), dtype=bool)
    for i, w in enumerate(_weights(width)):
        digit = (codes // w) % (width - i)
        rank = np.cumsum(free, axis=1) - 1
        pick = np.argmax(free & (rank == digit[:, None]), axis=1)
        out[:, i] = pick
        free[np.arange(m), pick] = False
    return out


def canonical_order(chunks: np.ndarray, vertices: np.ndarray) -> np.ndarray:
    """``sigma`` (M, L): endpoints sorted by (chunk coords..., vertex index), ties kept stable."""
    chunks = np.asarray(chunks)
    vertices = np.asarray(vertices)
    keys = [vertices] + [chunks[..., d] for d in range(chunks.shape[-1] - 1, -1, -1)]
    return np.lexsort(keys, axis=-1).astype(np.int64)


def _expand(sigma: np.ndarray, ndim: int) -> np.ndarray:
    return sigma.reshape(sigma.shape + (1,) * (ndim - 2))


def apply_order(values: np.ndarray, sigma: np.ndarray) -> np.ndarray:
    """Stored order: ``out[:, i] = values[:, sigma[:, i]]`` (values (M, L, ...))."""
    values = np.asarray(values)
    return np.take_along_axis(values, _expand(np.asarray(sigma), values.ndim), axis=1)


def undo_order(stored: np.ndarray, sigma: np.ndarray) -> np.ndarray:
    """Input order: ``out[:, sigma[:, i]] = stored[:, i]`` (inverse of :func:`apply_order`)."""
    stored = np.asarray(stored)
    out = np.empty_like(stored)
    np.put_along_axis(out, _expand(np.asarray(sigma), stored.ndim), stored, axis=1)
    return out


def restore_input_order(stored: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """Undo the storage permutation given the ``perm_idx`` column (values (M, L, ...))."""
    stored = np.asarray(stored)
    return undo_order(stored, lehmer_decode(codes, stored.shape[1]))


# ---------------------------------------------------------------- row codecs


def _int_dtype(dtype: np.dtype | str | type) -> np.dtype:
    dt = np.dtype(dtype)
    if dt.kind not in "iu":
        raise FormatError(f"link rows need an integer dtype, got {dt}")
    return dt.newbyteorder("<")


def _pack(rows: np.ndarray, dt: np.dtype) -> bytes:
    """Rows as little-endian bytes of ``dt``; values that do not fit are an InputError."""
    rows = np.asarray(rows)
    if rows.size:
        info = np.iinfo(dt)
        lo, hi = int(rows.min()), int(rows.max())
        if lo < info.min or hi > info.max:
            raise InputError(f"link row values {lo}..{hi} do not fit dtype {dt.name}")
    return np.ascontiguousarray(rows, dtype=dt).tobytes()


def encode_flat_rows(rows: np.ndarray, dtype: np.dtype | str | type) -> bytes:
    """Flat intra cell: the ``(M, W)`` rows back to back, no header."""
    rows = np.asarray(rows)
    if rows.ndim != 2:
        raise InputError(f"link rows must be (M, W), got shape {rows.shape}")
    return _pack(rows, _int_dtype(dtype))


def _view_rows(buf: memoryview, offset: int, count: int, width: int, dt: np.dtype) -> np.ndarray:
    rows = np.frombuffer(buf, dt, count * width, offset).reshape(count, width)
    return rows.astype(dt.newbyteorder("="), copy=False)


def decode_flat_rows(buf: bytes | memoryview, width: int, dtype: np.dtype | str | type) -> np.ndarray:
    """``(M, width)`` rows of a flat cell; the length must be a whole number of rows."""
    buf = memoryview(buf).cast("B")
    dt = _int_dtype(dtype)
    stride = dt.itemsize * width
    if width < 1 or len(buf) % stride:
        raise DecodeError(
            f"flat link cell is {len(buf)} bytes, not a whole number of "
            f"{width}-column {dt.name} rows ({stride} bytes each)"
        )
    return _view_rows(buf, 0, len(buf) // stride, width, dt)


def encode_ragged(groups: Sequence[np.ndarray], dtype: np.dtype | str | type) -> bytes:
    """Ragged blob: ``int64 K``, ``int64 off[K]`` (byte offsets into the data), then the rows."""
    dt = _int_dtype(dtype)
    arrays = [np.asarray(g) for g in groups]
    if any(a.ndim != 2 for a in arrays):
        raise InputError("each ragged row group must be an (m_k, W) array")
    data = [_pack(a, dt) for a in arrays]
    sizes = np.array([len(d) for d in data], dtype=np.int64)
    offs = np.cumsum(sizes) - sizes
    head = np.concatenate([[len(data)], offs]).astype("<i8")
    return head.tobytes() + b"".join(data)


def decode_ragged(
    buf: bytes | memoryview, width: int, dtype: np.dtype | str | type
) -> tuple[np.ndarray, np.ndarray]:
    """Rows ``(M, width)`` and group boundaries ``(K + 1,)`` in rows of a ragged blob.

    A blob shorter than 8 bytes, or exactly ``K == 0``, holds no records. Offsets must
    start at 0, never decrease, stay inside the data and fall on row boundaries.
    """
    buf = memoryview(buf).cast("B")
    dt = _int_dtype(dtype)
    stride = dt.itemsize * width
    if width < 1:
        raise DecodeError(f"link rows need at least one column, got width {width}")
    if len(buf) < 8:
        # [IMPL] a blob too short for K reads as empty rather than corrupt.
        return np.zeros((0, width), dt.newbyteorder("=")), np.zeros(1, np.int64)
    k = int.from_bytes(buf[:8], "little", signed=True)
    if k == 1 and len(buf) >= 16 and not any(buf[8:16]) and (len(buf) - 16) % stride == 0:
        n = (len(buf) - 16) // stride  # one row group starting at 0: the common case
        return _view_rows(buf, 16, n, width, dt), np.array([0, n], np.int64)
    room = (len(buf) - 8) // 8
    if k < 0 or k > room:
        raise DecodeError(
            f"ragged link blob claims K={k} row groups; its {len(buf)} bytes hold at most {room} offsets"
        )
    start = 8 + 8 * k
    size = len(buf) - start
    if k == 0 and size:
        # The spec leaves this open; K=0 with data following is treated as corruption.
        raise DecodeError(f"ragged link blob has K=0 but {size} data bytes follow the header")
    offs = np.frombuffer(buf, "<i8", k, 8).astype(np.int64)
    bounds = np.append(offs, size)
    if k and offs[0] != 0:
        raise DecodeError(f"ragged link blob: group 0 starts at data byte {int(offs[0])}, expected 0")
    past = np.flatnonzero(offs > size)
    if len(past):
        g = int(past[0])
        raise DecodeError(
            f"ragged link blob: group {g} starts at data byte {int(offs[g])}, "
            f"past the {size}-byte data section"
        )
    if np.any(np.diff(offs) < 0):
        g = int(np.flatnonzero(np.diff(offs) < 0)[0]) + 1
        raise DecodeError(
            f"ragged link blob: group offsets decrease at group {g} ({int(offs[g - 1])} -> {int(offs[g])})"
        )
    uneven = np.flatnonzero(bounds % stride)
    if len(uneven):
        g = int(uneven[0])
        what = f"the data section ({size} bytes)" if g == k else f"group {g}'s offset {int(bounds[g])}"
        raise DecodeError(f"ragged link blob: {what} is not a multiple of the {stride}-byte row")
    return _view_rows(buf, start, size // stride, width, dt), bounds // stride


def build_rows(vertices: np.ndarray, perm: np.ndarray | None) -> np.ndarray:
    """Stored rows: ``vertices`` (M, L), with the ``perm`` codes as column 0 when given."""
    vertices = np.asarray(vertices, dtype=np.int64)
    if perm is None:
        return vertices
    return np.concatenate([np.asarray(perm, np.int64).reshape(-1, 1), vertices], axis=1)


def split_rows(rows: np.ndarray, link_width: int, has_perm: bool) -> tuple[np.ndarray | None, np.ndarray]:
    """``(perm codes or None, vertex columns (M, L))`` of decoded rows; checks the width."""
    rows = np.asarray(rows)
    want = link_width + int(has_perm)
    if rows.ndim != 2 or rows.shape[1] != want:
        raise DecodeError(
            f"link rows have shape {rows.shape}; link_width {link_width} with "
            f"has_perm={has_perm} needs {want} columns"
        )
    return (rows[:, 0], rows[:, 1:]) if has_perm else (None, rows)


def smallest_index_dtype(max_index: int) -> np.dtype:
    """Spec SHOULD: uint8 up to 255, uint16 up to 65535, uint32 up to 2**32-1, else int64.

    Under ``has_perm`` pass ``max(max_vertex_index, L! - 1)`` so ``perm_idx`` fits too.
    """
    for name in ("uint8", "uint16", "uint32"):
        if max_index <= np.iinfo(name).max:
            return np.dtype(name)
    return np.dtype("int64")


def check_indices(vertices: np.ndarray, counts: np.ndarray) -> None:
    """Raise DecodeError at the first ``vertices[r, k]`` outside ``[0, counts[r, k])``.

    ``counts`` is the vertex count of the chunk each endpoint points into,
    broadcastable to ``vertices`` (``(L,)`` for one cell: one count per offset).
    """
    vertices = np.asarray(vertices)
    counts = np.broadcast_to(np.asarray(counts), vertices.shape)
    bad = (vertices < 0) | (vertices >= counts)
    if bad.any():
        r, k = np.unravel_index(int(np.argmax(bad.reshape(-1))), vertices.shape)
        raise DecodeError(
            f"link record {r}, endpoint {k}: vertex index {int(vertices[r, k])} is outside "
            f"[0, {int(counts[r, k])}) of the chunk it points into"
        )


# ---------------------------------------------------------------- placement


def cross_level_anchor(src_chunks: np.ndarray, src_ratio: np.ndarray, dst_ratio: np.ndarray) -> np.ndarray:
    """Anchor of a source chunk in the target level's grid: ``floor(c * r_src / r_dst)``.

    ``r`` is each level's chunk-scale factor against the root; offsets of a cross-level
    record are ``target chunk - anchor``.
    """
    scaled = np.asarray(src_chunks, np.int64) * np.asarray(src_ratio, np.int64)
    return scaled // np.asarray(dst_ratio, np.int64)


@dataclass(frozen=True, eq=False)
class LinkCell:
    """Every stored copy bound for one ``(segment, source chunk)`` cell, in record order."""

    segment: str
    chunk: tuple[int, ...]
    has_perm: bool
    rows: np.ndarray
    records: np.ndarray


@dataclass(frozen=True, eq=False)
class LinkPlacement:
    """P stored copies of M records: copy p is record ``record[p]`` stored at chunk ``source[p]``.

    Invariants: ``vertices[p]`` is in stored order; ``perm[p]`` is its Lehmer code (0 when
    ``not has_perm[p]``); ``offsets[p]`` is ``(L - 1, D)``. Copies are ordered by record,
    then (under ``duplicate``) by the canonical order of their leading chunk.
    """

    record: np.ndarray
    source: np.ndarray
    offsets: np.ndarray
    vertices: np.ndarray
    perm: np.ndarray
    has_perm: np.ndarray

    def rows(self, select: np.ndarray | slice = slice(None)) -> np.ndarray:
        """Stored rows of the selected copies, which must agree on ``has_perm``."""
        flags = np.unique(self.has_perm[select])
        if len(flags) > 1:
            raise InputError("selected link copies mix rows with and without perm_idx")
        with_perm = bool(flags[0]) if len(flags) else False
        return build_rows(self.vertices[select], self.perm[select] if with_perm else None)

    def cells(self) -> list[LinkCell]:
        """Copies grouped by cell, segments in ASCII enumeration order, chunks ascending."""
        p, n_off, d = self.offsets.shape
        if p == 0:
            return []
        useg, seg_of = np.unique(self.offsets.reshape(p, n_off * d), axis=0, return_inverse=True)
        seg_of = seg_of.reshape(-1)
        names = [format_offsets(u.reshape(n_off, d)) for u in useg]
        rank = np.empty(len(names), dtype=np.int64)
        rank[sorted(range(len(names)), key=lambda i: names[i].encode("ascii"))] = np.arange(len(names))
        keys = np.column_stack([rank[seg_of], self.source])
        order = np.lexsort([np.arange(p)] + [keys[:, j] for j in range(keys.shape[1] - 1, -1, -1)])
        keys = keys[order]
        cuts = np.flatnonzero(np.any(keys[1:] != keys[:-1], axis=1)) + 1
        out = []
        for sel in np.split(order, cuts):
            first = int(sel[0])
            chunk = tuple(int(c) for c in self.source[first])
            segment = names[int(seg_of[first])]
            flag = bool(self.has_perm[first])
            out.append(LinkCell(segment, chunk, flag, self.rows(sel), sel.astype(np.int64)))
        return out


def place_links(
    chunks: np.ndarray,
    vertices: np.ndarray,
    *,
    directed: bool,
    store: str,
    delta: int = 0,
    anchors: np.ndarray | None = None,
) -> LinkPlacement:
    """Decide where each of M records is stored (spec §10.6.6-7).

    ``chunks`` (M, L, D) are absolute chunk coords of each input endpoint, ``vertices``
    (M, L) their chunk-local indices. At ``delta == 0``: intra records keep input order
    without perm; otherwise ``canonical`` + undirected sorts by (chunk, vertex),
    ``canonical`` + directed keeps input order, and ``duplicate`` makes one copy per
    distinct chunk, led by that chunk's smallest (vertex, input position) endpoint with
    the rest in input order. At ``delta != 0`` endpoint 0 is the source, order is kept,
    there is one copy, and offsets are taken from ``anchors`` (M, D) (see
    :func:`cross_level_anchor`).
    """
    chunks = np.asarray(chunks, dtype=np.int64)
    vertices = np.asarray(vertices, dtype=np.int64)
    if chunks.ndim != 3 or vertices.shape != chunks.shape[:2] or chunks.shape[1] < 1:
        raise InputError(
            f"need chunks (M, L, D) and vertices (M, L); got {chunks.shape} and {vertices.shape}"
        )
    check_choice("store", store, STORE_POLICIES)
    m, width, _ = chunks.shape
    if delta != 0:
        if anchors is None:
            raise InputError("cross-level links (delta != 0) need the source chunks' anchors")
        offsets = chunks[:, 1:] - np.asarray(anchors, np.int64)[:, None, :]
        zeros = np.zeros(m, np.int64)
        return LinkPlacement(np.arange(m), chunks[:, 0], offsets, vertices, zeros, np.zeros(m, bool))
    intra = np.all(chunks == chunks[:, :1], axis=(1, 2))
    identity = np.broadcast_to(np.arange(width), (m, width))
    if store == "duplicate":
        record, sigma = _duplicate_orders(chunks, vertices, intra)
    else:
        record = np.arange(m)
        sigma = identity
        if not directed:
            sigma = np.where(intra[:, None], identity, canonical_order(chunks, vertices))
    stored_chunks = apply_order(chunks[record], sigma)
    has_perm = ~intra[record] & (store == "duplicate" or not directed)
    perm = np.where(has_perm, lehmer_encode(sigma) if len(sigma) else np.zeros(0, np.int64), 0)
    return LinkPlacement(
        record=record.astype(np.int64),
        source=stored_chunks[:, 0],
        offsets=stored_chunks[:, 1:] - stored_chunks[:, :1],
        vertices=apply_order(vertices[record], sigma),
        perm=perm.astype(np.int64),
        has_perm=has_perm,
    )


def _duplicate_orders(
    chunks: np.ndarray, vertices: np.ndarray, intra: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(record, sigma) of the ``duplicate`` copies: one per distinct chunk of each record."""
    m, width, _ = chunks.shape
    canon = canonical_order(chunks, vertices)
    sorted_chunks = apply_order(chunks, canon)
    leads = np.ones((m, width), dtype=bool)
    leads[:, 1:] = np.any(sorted_chunks[:, 1:] != sorted_chunks[:, :-1], axis=2)
    record, slot = np.nonzero(leads)
    lead = canon[record, slot]
    rest = np.arange(width - 1)[None, :]
    rest = rest + (rest >= lead[:, None])
    sigma = np.concatenate([lead[:, None], rest], axis=1)
    sigma[intra[record]] = np.arange(width)
    return record, sigma
