"""Box reads of linked geometry (polylines, streamlines): vertices, edges and line pieces.

A box query returns exactly the vertices inside the box, the edges whose two
endpoints are both inside, and the lines cut into pieces where they leave the box.
Edges come from two places: consecutive rows of one fragment (the implicit
sequential convention) and link records joining fragments across chunks. A link
joining two vertices inside the box is stored in the cell of one of their chunks,
both of which the box touches, so only link cells anchored in touched chunks whose
other endpoints' chunks are touched too are fetched — in the same batch as the
vertex cells.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ._arrays import LinkArray
from .errors import CorruptCellError, FormatError
from .format.fragments import FragmentIndex, ranges_to_rows
from .format.links import restore_input_order
from .level import Level
from .query import _attribute_names, _Cells, _fetch, _result, _row_owners, fetch_objects, plan_box
from .result import Result

__all__ = ["query_lines_box", "objects_with_edges", "implicit_edges", "chain_order"]


def _link_plan(level: Level, chunks: np.ndarray) -> list[tuple[LinkArray, np.ndarray]]:
    """For each link array, the touched chunks whose cell may join two touched chunks."""
    touched = {tuple(c) for c in chunks.tolist()}
    out = []
    for arr in level.links.values():
        listed = arr.nonempty
        if len(listed) == 0:
            continue
        ok = np.array([tuple(c) in touched for c in listed.tolist()], bool)
        for off in arr.offsets:
            ok &= np.array([tuple(c) in touched for c in (listed + off).tolist()], bool)
        if ok.any():
            out.append((arr, listed[ok]))
    return out


def implicit_edges(cells: _Cells, indexes: dict[int, FragmentIndex]) -> np.ndarray:
    """(E, 2) edges between consecutive rows of every fragment, in concatenated-row numbering."""
    parts = []
    for i, frag in indexes.items():
        base = int(cells.offsets[i])
        counts = frag.ranges[:, 1]
        firsts = ranges_to_rows(frag.ranges[:, 0] + base, np.maximum(counts - 1, 0))
        parts.append(np.stack([firsts, firsts + 1], axis=1))
        for f in np.flatnonzero(~frag.is_range):
            rows = frag.rows(int(f)) + base
            parts.append(np.stack([rows[:-1], rows[1:]], axis=1))
    return np.concatenate(parts).reshape(-1, 2) if parts else np.zeros((0, 2), np.int64)


def _link_keys(level: Level, plan: list[tuple[LinkArray, np.ndarray]]) -> list[str]:
    """Keys of the planned link cells, then of the parallel ``link_attributes`` cells, name by name."""
    keys = [key for arr, anchors in plan for key in arr.keys(anchors)]
    for segments in level.link_attributes.values():
        for arr, anchors in plan:
            if arr.segment in segments:
                keys += segments[arr.segment].keys(anchors)
    return keys


def _link_edges(
    level: Level, cells: _Cells, plan: list[tuple[LinkArray, np.ndarray]], raws: list[bytes | None]
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """(E, 2) edges from link records in concatenated-row numbering (input endpoint order),
    and their ``link_attributes`` rows (raws laid out as :func:`_link_keys` lists them)."""
    index = {tuple(c): i for i, c in enumerate(cells.chunks.tolist())}
    counts = np.diff(cells.offsets)
    # Under store="duplicate" a record has one copy per distinct endpoint chunk; keep the
    # copy anchored at the smallest of them (always fetched when any copy is useful).
    duplicate = level.links_family.get("store") == "duplicate"
    parts, sizes, keeps, pos = [], [], [], 0
    for arr, anchors in plan:
        for chunk in anchors:
            vertices, perm = arr.records(raws[pos], chunk)
            pos += 1
            sizes.append(len(vertices))
            ends = [tuple(chunk)] + [tuple(chunk + o) for o in arr.offsets]
            keep = not duplicate or tuple(chunk) == min(ends)
            keeps.append(keep)
            if len(vertices) == 0 or not keep:
                continue
            which = np.array([index[e] for e in ends], np.int64)
            bad = vertices >= counts[which][None, :]
            if bad.any():
                r, k = np.argwhere(bad)[0]
                raise CorruptCellError(
                    arr.path, ".".join(map(str, chunk)),
                    f"record {r} names vertex {vertices[r, k]} of chunk {'.'.join(map(str, ends[k]))}, "
                    f"which has {counts[which[k]]}",
                )  # fmt: skip
            rows = vertices + cells.offsets[which][None, :]
            if perm is not None:
                rows = restore_input_order(rows, perm)
            parts.append(rows[:, :2])
    edges = np.concatenate(parts).reshape(-1, 2) if parts else np.zeros((0, 2), np.int64)
    attrs = {}
    for name, segments in level.link_attributes.items():
        values, k = [], 0
        for arr, anchors in plan:
            attr = segments.get(arr.segment)
            for chunk in anchors:
                n = sizes[k]
                k += 1
                if attr is None:
                    raise FormatError(f"link attribute {name!r} has no array for links segment {arr.segment!r}")
                v = attr.rows(raws[pos], chunk)
                pos += 1
                if len(v) != n:
                    raise CorruptCellError(attr.path, ".".join(map(str, chunk)), f"{len(v)} rows but the link cell has {n}")
                if keeps[k - 1]:
                    values.append(v)
        first = next(iter(segments.values()))
        flat = np.concatenate(values) if values else np.zeros((0, first.row_width), first.dtype)
        attrs[name] = flat.reshape((-1, *(first.attrs.get("row_shape") or [])))
    return edges, attrs


def chain_order(n: int, edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Order ``n`` vertices joined by path ``edges`` (each vertex at most one successor and one
    predecessor) into chains: returns (order, chain offsets), each chain start to end.

    Vectorised list ranking by pointer jumping: O(n log n).
    """
    prev = np.full(n, -1, np.int64)
    prev[edges[:, 1]] = edges[:, 0]
    anc = np.where(prev >= 0, prev, np.arange(n))
    dist = (prev >= 0).astype(np.int64)
    while True:
        nxt = anc[anc]
        if np.array_equal(nxt, anc):
            break
        dist = dist + np.where(anc != nxt, dist[anc], 0)
        anc = nxt
    order = np.lexsort((dist, anc))
    head = anc[order]
    starts = np.flatnonzero(np.r_[True, head[1:] != head[:-1]]) if n else np.zeros(0, np.int64)
    return order, np.append(starts, n).astype(np.int64)


def _implicit(level: Level) -> bool:
    return level.root.links_convention in ("implicit_sequential", "implicit_sequential_with_branches")


def _edges(
    level: Level, cells: _Cells, links: list[tuple[LinkArray, np.ndarray]], raws: list[bytes | None]
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Every edge among the fetched rows: implicit sequential ones (when the convention has
    them) and those of the fetched link cells.

    Under ``implicit_sequential_with_branches`` link records are ``(child, parent)``:
    they are returned as ``(parent, child)`` like the implicit edges, and an explicit
    parent overrides the implicit one (stores that keep several branches in one
    fragment rely on that). Edge attributes are returned for explicit-edge geometry only.
    """
    linked, attrs = _link_edges(level, cells, links, raws)
    if not _implicit(level):
        return linked, attrs
    implicit = implicit_edges(cells, {i: cells.fragment_index(level, i) for i in range(len(cells.chunks))})
    if level.root.links_convention == "implicit_sequential_with_branches":
        linked = linked[:, ::-1]
        implicit = implicit[~np.isin(implicit[:, 1], linked[:, 1])]
    return np.concatenate([implicit, linked]), {}


def _select(level: Level, cells: _Cells, rows: np.ndarray, linked: tuple[np.ndarray, dict[str, np.ndarray]],
            owners: np.ndarray | None, lines: bool) -> Result:
    """Result of ``rows`` (concatenated-row indices) with the edges among them; lines ordered into pieces."""
    edges, edge_attrs = linked
    remap = np.full(len(cells.positions), -1, np.int64)
    remap[rows] = np.arange(len(rows))
    keep = (remap[edges[:, 0]] >= 0) & (remap[edges[:, 1]] >= 0)
    edges = remap[edges[keep]]
    edge_attrs = {k: v[keep] for k, v in edge_attrs.items()}
    line_offsets = None
    if lines:
        order, line_offsets = chain_order(len(rows), edges)
        rank = np.empty(len(order), np.int64)
        rank[order] = np.arange(len(order))
        rows, edges = rows[order], rank[edges]
        owners = None if owners is None else owners[order]
    result = _result(level, cells, rows, None)
    result.object_ids = owners
    result.edges = edges
    result.edge_attributes = edge_attrs
    result.line_offsets = line_offsets
    if level.root.links_convention == "implicit_sequential_with_branches":
        parents = np.full(len(rows), -1, np.int64)
        parents[edges[:, 1]] = edges[:, 0]
        result.parents = parents
    return result


def query_lines_box(
    level: Level,
    lo: np.ndarray,
    hi: np.ndarray,
    attributes: Sequence[str] | bool | None = None,
    with_object_ids: bool | None = None,
    whole_objects: bool = False,
) -> Result:
    """Vertices of linked geometry inside ``[lo, hi]``, the edges among them, and (for lines) the pieces."""
    box = plan_box(level, lo, hi)
    chunks = np.concatenate([box.full, box.partial])
    names = _attribute_names(level, attributes)
    links = _link_plan(level, chunks)
    extra = _link_keys(level, links)
    cells, raws = _fetch(level, chunks, names, np.arange(len(chunks)), extra)
    inside = np.all((cells.positions >= lo) & (cells.positions <= hi), axis=1)
    with_ids = level.manifests is not None if with_object_ids is None else with_object_ids
    owners = _row_owners(level, cells) if (with_ids or whole_objects) else None
    if whole_objects:
        assert owners is not None
        ids = np.unique(owners[inside][owners[inside] >= 0])
        return objects_with_edges(level, ids, attributes)
    rows = np.flatnonzero(inside)
    return _select(level, cells, rows, _edges(level, cells, links, raws),
                   None if owners is None else owners[rows], _is_lines(level))  # fmt: skip


def _is_lines(level: Level) -> bool:
    return any(g in ("polyline", "streamline", "line") for g in level.root.geometry_types)


def objects_with_edges(level: Level, ids: np.ndarray, attributes: Sequence[str] | bool | None = None) -> Result:
    """Whole objects with every edge among their vertices; lines come back in order, one per object."""
    ids = np.atleast_1d(np.asarray(ids, dtype=np.int64))
    names = _attribute_names(level, attributes)
    plan: list[tuple[LinkArray, np.ndarray]] = []

    def link_keys(chunks: np.ndarray) -> list[str]:
        plan.extend(_link_plan(level, chunks))
        return _link_keys(level, plan)

    cells, rows, owners, raws = fetch_objects(level, ids, names, link_keys)
    edges = _edges(level, cells, plan, raws)
    if not _is_lines(level):
        return _select(level, cells, rows, edges, owners, lines=False)
    # A line comes back in manifest order (its own order), one line per object.
    result = _select(level, cells, rows, edges, owners, lines=False)
    starts = np.flatnonzero(np.r_[True, owners[1:] != owners[:-1]]) if len(owners) else np.zeros(0, np.int64)
    result.line_offsets = np.append(starts, len(owners)).astype(np.int64)
    return result
