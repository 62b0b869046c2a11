"""Level 3, object manifests read without trusting their counts.

:func:`walk_manifests` parses the block headers of many manifests at once (one pass per
block depth, vectorised over the manifests still open) and never expands a fragment range:
a mode-1 block claiming 2**33 fragments costs what any other block costs. Each bad manifest
is set aside with the reason; the others go on. :func:`check_refs` then checks every block
against the fragment count of its chunk, expanding only the explicit lists (which the
bytes themselves bound).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["Blocks", "walk_manifests", "check_refs"]

Chunk = tuple[int, ...]


@dataclass(eq=False)
class Blocks:
    """Every block of the manifests that parsed: ``entry`` (position in the list given),
    ``chunk`` (B, ndim) absolute, ``mode``, ``first`` (mode 0/1: first fragment; mode 2: byte
    offset of the list in ``buf``) and ``count`` (fragments named)."""

    entry: np.ndarray
    chunk: np.ndarray
    mode: np.ndarray
    first: np.ndarray
    count: np.ndarray
    buf: np.ndarray


def _gather(buf: np.ndarray, at: np.ndarray, dtype: str) -> np.ndarray:
    size = np.dtype(dtype).itemsize
    return buf[at[:, None] + np.arange(size)].copy().view(dtype).ravel()


def walk_manifests(items: list[bytes | memoryview], ndim: int) -> tuple[Blocks, dict[int, str]]:
    """Blocks of every manifest in ``items`` and ``{entry: why it is malformed}``."""
    lengths = np.fromiter((len(it) for it in items), np.int64, len(items))
    starts = np.zeros(len(items) + 1, np.int64)
    np.cumsum(lengths, out=starts[1:])
    buf = np.frombuffer(b"".join(bytes(it) for it in items), np.uint8)
    end = starts[1:]
    bad: dict[int, str] = {
        int(i): f"is {int(lengths[i])} bytes, shorter than its 4-byte block count"
        for i in np.flatnonzero(lengths < 4)
    }
    ok = np.flatnonzero(lengths >= 4)
    left = np.zeros(len(items), np.int64)
    left[ok] = _gather(buf, starts[ok], "<u4")
    cur = starts[:-1] + 4
    head = 8 * ndim + 1
    found: list[tuple[np.ndarray, ...]] = []
    active = ok[left[ok] > 0]
    while len(active):
        p, e = cur[active], end[active]
        inside = p + head <= e
        mode = np.full(len(active), 255, np.uint8)
        mode[inside] = buf[p[inside] + 8 * ndim]
        body = p + head
        m1, m2 = mode == 1, mode == 2
        fixed = inside & (mode <= 2) & (body + np.where(m2, 4, np.where(m1, 16, 8)) <= e)
        count = np.ones(len(active), np.int64)
        count[fixed & m1] = _gather(buf, body[fixed & m1] + 8, "<i8")
        count[fixed & m2] = _gather(buf, body[fixed & m2], "<u4")
        size = np.where(m2, 4 + 8 * count, np.where(m1, 16, 8))
        good = fixed & (count >= 0) & (size <= e - body)
        for k in np.flatnonzero(~good).tolist():
            bad[int(active[k])] = (
                f"is truncated inside a block header ({head} bytes)"
                if not inside[k]
                else f"has a block of unknown mode {int(mode[k])} (0, 1 or 2 expected)"
                if mode[k] > 2
                else "is truncated inside a block"
                if not fixed[k]
                else f"has a block naming {int(count[k])} fragments, more than its bytes hold or negative"
            )
        active, p, body, mode, count, size = (
            active[good],
            p[good],
            body[good],
            mode[good],
            count[good],
            size[good],
        )
        first = body + 4
        simple = mode != 2
        first[simple] = _gather(buf, body[simple], "<i8")
        chunk = np.stack([_gather(buf, p + 8 * a, "<i8") for a in range(ndim)], axis=1).reshape(-1, ndim)
        found.append((active, chunk, mode.astype(np.int64), first, count))
        cur[active] = body + size
        left[active] -= 1
        active = active[left[active] > 0]
    for i in np.flatnonzero(cur != end).tolist():
        if i not in bad and lengths[i] >= 4:
            bad[i] = (
                f"has {int(end[i] - cur[i])} bytes after its {int(_gather(buf, starts[i : i + 1], '<u4')[0])} blocks"
            )
    parts: list[Sequence[np.ndarray]] = (
        list(zip(*found))
        if found
        else [[np.zeros(0, np.int64)], [np.zeros((0, ndim), np.int64)], *[[np.zeros(0, np.int64)]] * 3]
    )
    entry, chunk, mode, first, count = (np.concatenate(p) for p in parts)
    keep = ~np.isin(entry, np.fromiter(bad, np.int64, len(bad)))
    return Blocks(entry[keep], chunk[keep], mode[keep], first[keep], count[keep], buf), bad


def check_refs(blocks: Blocks, frag_counts: dict[Chunk, int]) -> list[tuple[int, str]]:
    """``(entry, what is wrong)`` for blocks naming a chunk without fragments or fragments
    past its count. Ranges are compared by their ends; explicit lists are read."""
    f_of = np.fromiter(
        (frag_counts.get(c, -1) for c in map(tuple, blocks.chunk.tolist())), np.int64, len(blocks.mode)
    )
    problems: list[tuple[int, str]] = []
    for i in np.flatnonzero(f_of < 0)[:50].tolist():
        c = ".".join(map(str, blocks.chunk[i].tolist()))
        problems.append((int(blocks.entry[i]), f"names chunk {c}, which has no vertex_fragments cell"))
    has = f_of >= 0
    simple = has & (blocks.mode != 2)
    first, count = blocks.first, blocks.count
    wrong = simple & ((first < 0) | (first > f_of - count))
    m2 = np.flatnonzero(has & (blocks.mode == 2))
    if len(m2):
        n = count[m2]
        rep = np.repeat(np.arange(len(m2)), n)
        slot = np.arange(len(rep)) - np.repeat(np.cumsum(n) - n, n)
        values = _gather(blocks.buf, first[m2][rep] + 8 * slot, "<i8")
        out_of = (values < 0) | (values >= f_of[m2][rep])
        wrong[m2[np.unique(rep[out_of])]] = True
    for i in np.flatnonzero(wrong)[:50].tolist():
        c = ".".join(map(str, blocks.chunk[i].tolist()))
        what = (
            f"fragment {int(first[i])}"
            if blocks.mode[i] == 0
            else (
                f"fragments {int(first[i])} .. {int(first[i])} + {int(count[i])}"
                if blocks.mode[i] == 1
                else "a listed fragment"
            )
        )
        problems.append(
            (int(blocks.entry[i]), f"names {what} of chunk {c}, which has {int(f_of[i])} fragments")
        )
    return problems
