"""Simplifying linked geometry: Douglas-Peucker on every unbranched chain at once.

A graph is given by directed edges ``(a, b)`` (``a`` before ``b``: along a line, parent
to child in a tree). A vertex with exactly one incoming and one outgoing edge is *interior*;
every other vertex (line ends, roots, leaves, branch points) is kept. The interior vertices
between two kept ones form a *chain*, which is simplified by Douglas-Peucker: a vertex
is kept when it lies farther than ``tolerance`` from the segment joining the kept
vertices around it, recursively. A cycle of interior vertices keeps its smallest vertex.
A *closed ring* (a chain whose two ends are distinct vertices at the same position, as a
polygon ring stored as a line) keeps at least four vertices, a triangle, whatever the
tolerance: its farthest vertices are added until it has them.

Everything is vectorised over all chains: one pass per recursion depth.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Chains", "Simplified", "chains", "douglas_peucker", "simplify_graph"]


@dataclass(frozen=True, eq=False)
class Chains:
    """Chains as flat vertex lists: chain ``c`` is ``vertices[offsets[c]:offsets[c + 1]]``,
    from one kept vertex to the next (both included)."""

    vertices: np.ndarray
    offsets: np.ndarray


def _pointer_jump(nxt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For an acyclic ``nxt`` (-1 = stop): each vertex's final vertex and its distance to it."""
    n = len(nxt)
    anc = np.where(nxt >= 0, nxt, np.arange(n))
    dist = (nxt >= 0).astype(np.int64)
    for _ in range(int(np.ceil(np.log2(max(n, 2)))) + 1):
        step = anc[anc]
        if np.array_equal(step, anc):
            break
        dist = dist + dist[anc]
        anc = step
    return anc, dist


def _break_cycles(interior: np.ndarray, succ: np.ndarray) -> np.ndarray:
    """``interior`` without the smallest vertex of each cycle made only of interior vertices."""
    n = len(interior)
    rounds = int(np.ceil(np.log2(max(n, 2)))) + 1
    nxt = np.where(interior & interior[np.maximum(succ, 0)] & (succ >= 0), succ, np.arange(n))
    anc = nxt.copy()
    for _ in range(rounds):
        anc = anc[anc]
    on_cycle = interior & (nxt[anc] != anc)  # never reaches a vertex that stops
    if not on_cycle.any():
        return interior
    label = np.where(on_cycle, np.arange(n), n)
    cur = np.where(on_cycle, succ, np.arange(n))
    for _ in range(rounds):
        label = np.minimum(label, label[cur])
        cur = cur[cur]
    return interior & ~(on_cycle & (label == np.arange(n)))


def chains(n: int, edges: np.ndarray) -> tuple[np.ndarray, Chains]:
    """Kept mask (N,) and the chains between kept vertices of the directed graph ``edges``."""
    edges = np.asarray(edges, np.int64).reshape(-1, 2)
    indeg = np.bincount(edges[:, 1], minlength=n)
    outdeg = np.bincount(edges[:, 0], minlength=n)
    succ = np.full(n, -1, np.int64)
    succ[edges[:, 0]] = edges[:, 1]
    interior = _break_cycles((indeg == 1) & (outdeg == 1), succ)
    # Interior vertices: distance to the last interior vertex of their chain.
    nxt = np.where(interior & interior[np.maximum(succ, 0)] & (succ >= 0), succ, -1)
    last, to_last = _pointer_jump(np.where(interior, nxt, -1))
    starts = np.flatnonzero(~interior[edges[:, 0]])  # every edge leaving a kept vertex starts a chain
    first = edges[starts, 1]
    inner = interior[first]
    length = np.where(inner, to_last[first] + 1, 0)
    offsets = np.zeros(len(starts) + 1, np.int64)
    np.cumsum(length + 2, out=offsets[1:])
    flat = np.empty(int(offsets[-1]), np.int64)
    flat[offsets[:-1]] = edges[starts, 0]
    end = np.where(inner, succ[last[first]], first)
    flat[offsets[1:] - 1] = end
    chain_by_last = np.full(n, -1, np.int64)
    chain_by_last[last[first[inner]]] = np.flatnonzero(inner)
    v = np.flatnonzero(interior)
    c = chain_by_last[last[v]]
    flat[offsets[c] + 1 + to_last[first[c]] - to_last[v]] = v
    return ~interior, Chains(flat, offsets)


def _segment_distance(p: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Distance of points ``p`` to segments ``a``-``b`` (row by row, any dimension)."""
    ab = b - a
    ap = p - a
    denom = np.einsum("ij,ij->i", ab, ab)
    t = np.clip(np.einsum("ij,ij->i", ap, ab) / np.where(denom > 0, denom, 1), 0, 1)
    t = np.where(denom > 0, t, 0)
    d = ap - t[:, None] * ab
    return np.sqrt(np.einsum("ij,ij->i", d, d))


#: Rows whose distances are computed at once (bounds the temporaries of a large batch).
DISTANCE_ROWS = 262_144


def _distances(pts: np.ndarray, todo: np.ndarray, prev: np.ndarray, nxt: np.ndarray) -> np.ndarray:
    """Distance of ``pts[todo]`` to the segments ``pts[prev[todo]]``-``pts[nxt[todo]]``, slice by slice."""
    d = np.empty(len(todo))
    for a in range(0, len(todo), DISTANCE_ROWS):
        t = todo[a : a + DISTANCE_ROWS]
        d[a : a + DISTANCE_ROWS] = _segment_distance(pts[t], pts[prev[t]], pts[nxt[t]])
    return d


def douglas_peucker(positions: np.ndarray, ch: Chains, tolerance: float) -> np.ndarray:
    """Keep mask over ``ch.vertices``: each chain's ends, plus the Douglas-Peucker points."""
    total = len(ch.vertices)
    keep = np.zeros(total, bool)
    keep[ch.offsets[:-1]] = True
    keep[ch.offsets[1:] - 1] = True
    # A closed chain (a cycle through one kept vertex) also keeps its middle vertex, so it
    # never collapses to a self-loop.
    sizes = np.diff(ch.offsets)
    closed = (ch.vertices[ch.offsets[:-1]] == ch.vertices[np.maximum(ch.offsets[1:] - 1, 0)]) & (sizes > 2)
    keep[ch.offsets[:-1][closed] + (sizes[closed] - 1) // 2] = True
    pts = np.asarray(positions, np.float64)[ch.vertices]
    settled = keep.copy()
    idx = np.arange(total)
    while not settled.all():
        prev = np.maximum.accumulate(np.where(keep, idx, -1))
        nxt = np.minimum.accumulate(np.where(keep, idx, total)[::-1])[::-1]
        todo = np.flatnonzero(~settled)
        d = _distances(pts, todo, prev, nxt)
        seg = prev[todo]
        order = np.lexsort((-d, seg))
        head = np.r_[True, seg[order][1:] != seg[order][:-1]]
        best = order[head]
        split = d[best] > tolerance
        keep[todo[best[split]]] = True
        done_segments = seg[best[~split]]
        settled |= keep
        settled[todo[np.isin(seg, done_segments)]] = True
    _keep_rings_open(keep, pts, ch)
    return keep


#: Vertices a closed ring keeps at least (first, two corners, last = first: a triangle).
RING_MIN = 4


def _keep_rings_open(keep: np.ndarray, pts: np.ndarray, ch: Chains) -> None:
    """Add to ``keep`` (in place) the farthest vertices of closed rings that kept fewer than
    :data:`RING_MIN`, one per ring and round, so a ring never collapses to a segment."""
    first, last = ch.offsets[:-1], ch.offsets[1:] - 1
    sizes = last - first + 1
    ring = (sizes >= RING_MIN) & (ch.vertices[first] != ch.vertices[np.maximum(last, 0)])
    ring[ring] = np.all(pts[first[ring]] == pts[last[ring]], axis=1)
    if not ring.any():
        return
    total = len(keep)
    idx = np.arange(total)
    chain_of = np.repeat(np.arange(len(sizes)), sizes)
    for _ in range(RING_MIN - 2):
        short = ring & (np.add.reduceat(keep.astype(np.int64), first) < RING_MIN)
        todo = np.flatnonzero(~keep & short[chain_of])
        if not len(todo):
            return
        prev = np.maximum.accumulate(np.where(keep, idx, -1))
        nxt = np.minimum.accumulate(np.where(keep, idx, total)[::-1])[::-1]
        d = _segment_distance(pts[todo], pts[prev[todo]], pts[nxt[todo]])
        owner = chain_of[todo]
        order = np.lexsort((-d, owner))
        head = np.r_[True, owner[order][1:] != owner[order][:-1]]
        keep[todo[order[head]]] = True


@dataclass(frozen=True, eq=False)
class Simplified:
    """Result of :func:`simplify_graph` on N vertices.

    ``kept`` (K,) sorted vertex ids kept; ``edges`` (E', 2) new edges between kept vertices
    (ids of the input numbering); ``edge_of`` (E_in,) the new edge each input edge lies on;
    ``parent`` (N,) for each input vertex the kept vertex that stands for it (itself when
    kept, else the kept vertex that starts its piece of chain).
    """

    kept: np.ndarray
    edges: np.ndarray
    edge_of: np.ndarray
    parent: np.ndarray


def simplify_graph(
    positions: np.ndarray, edges: np.ndarray, tolerance: float, edge_of: bool = True
) -> Simplified:
    """Douglas-Peucker on every chain of the directed graph ``edges`` over ``positions``.

    Without ``edge_of`` (no edge attributes to reduce) ``Simplified.edge_of`` is left empty,
    which saves its lookup table (about 50 bytes per vertex)."""
    n = len(positions)
    edges = np.asarray(edges, np.int64).reshape(-1, 2)
    kept_mask, ch = chains(n, edges)
    keep_flat = douglas_peucker(positions, ch, tolerance)
    kept_mask[ch.vertices[keep_flat]] = True
    idx = np.arange(len(ch.vertices))
    chain_of = np.repeat(np.arange(len(ch.offsets) - 1), np.diff(ch.offsets))
    last_kept = np.maximum.accumulate(np.where(keep_flat, idx, -1))
    parent = np.arange(n)
    parent[ch.vertices[~keep_flat]] = ch.vertices[last_kept[~keep_flat]]
    kf = np.flatnonzero(keep_flat)
    same = chain_of[kf[1:]] == chain_of[kf[:-1]]
    new_edges = np.stack([ch.vertices[kf[:-1][same]], ch.vertices[kf[1:][same]]], axis=1).reshape(-1, 2)
    if not edge_of:
        return Simplified(np.flatnonzero(kept_mask), new_edges, np.zeros(0, np.int64), parent)
    # Input edge (a, b) is a pair of consecutive chain slots; it lies on the new edge that
    # starts at the last kept slot before it. Pairs are found by (tail, head) keys.
    edge_at = np.full(len(ch.vertices), -1, np.int64)
    edge_at[kf[:-1][same]] = np.arange(len(new_edges))
    pair = np.flatnonzero(chain_of[1:] == chain_of[:-1]) if len(chain_of) else idx[:0]
    key = ch.vertices[pair] * max(n, 1) + ch.vertices[pair + 1]
    order = np.argsort(key, kind="stable")
    at = np.searchsorted(key[order], edges[:, 0] * max(n, 1) + edges[:, 1])
    at = order[np.minimum(at, max(len(order) - 1, 0))] if len(order) else at
    new_edge_of = edge_at[last_kept[pair[at]]] if len(pair) else np.zeros(len(edges), np.int64)
    return Simplified(np.flatnonzero(kept_mask), new_edges, new_edge_of, parent)
