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
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from zarr_vectors.engine.chunks.arrays import LinkArray
from zarr_vectors.engine.level import Level
from zarr_vectors.engine.read.fetch import Cells, fetch_cells, fetch_objects, row_owners
from zarr_vectors.engine.read.plan import attribute_names, plan_box
from zarr_vectors.engine.read.points import build_result
from zarr_vectors.errors import CorruptCellError, FormatError
from zarr_vectors.format.fragments import FragmentIndex, ranges_to_rows
from zarr_vectors.format.kinds import read_family
from zarr_vectors.format.links import restore_input_order
from zarr_vectors.result import Result

__all__ = [
    "LinkCells",
    "LinkPlan",
    "LinkRecords",
    "ObjectFetch",
    "fetch_linked_objects",
    "box_edges",
    "is_lines",
    "link_edges",
    "link_keys",
    "link_plan",
    "plan_endpoint_chunks",
    "query_lines_box",
    "objects_with_edges",
    "implicit_edges",
    "chain_order",
]


class LinkCells(NamedTuple):
    """The cells of one link array a read needs: ``anchors`` (A, D) are their chunks."""

    array: LinkArray
    anchors: np.ndarray


#: The link cells a read needs, array by array, in the order their keys are fetched.
LinkPlan = list[LinkCells]


class LinkRecords(NamedTuple):
    """One decoded link cell: its ``array`` and anchor ``chunk`` (``anchor``: its index in the
    plan's anchors), its records as chunk-local ``vertices`` (M, W), the ``perm`` that restores
    their input order (None: already in it), and ``which``, the fetched-chunk position of the
    chunk of each endpoint (W,)."""

    array: LinkArray
    chunk: np.ndarray
    anchor: int
    vertices: np.ndarray
    perm: np.ndarray | None
    which: np.ndarray


@dataclass(frozen=True, eq=False)
class ObjectFetch:
    """Whole objects fetched with the link cells of their chunks (one batch): the ``cells``,
    the objects' concatenated ``rows`` and their ``owners``, the link ``plan`` and its ``raws``
    (laid out as :func:`link_keys` lists them)."""

    cells: Cells
    rows: np.ndarray
    owners: np.ndarray
    plan: LinkPlan
    raws: list[bytes | None]


def _chunk_ids(level: Level, chunks: np.ndarray) -> np.ndarray:
    """Linear grid index of each absolute chunk row (K, D); -1 for chunks outside the grid."""
    cell = np.asarray(chunks, np.int64).reshape(-1, level.grid.ndim) - level.grid.origin
    shape = np.asarray(level.grid.shape, np.int64)
    inside = np.all((cell >= 0) & (cell < shape), axis=1)
    strides = np.r_[np.cumprod(shape[::-1])[:-1][::-1], 1]
    return np.where(inside, cell @ strides, -1)


def link_plan(level: Level, chunks: np.ndarray, any_end: bool = False) -> LinkPlan:
    """For each link array, the listed anchors of cells whose records can join touched chunks
    only (``any_end``: that can reach a touched chunk at all).

    Work is proportional to the touched chunks: candidate anchors are the touched chunks
    (or, with ``any_end``, the chunks one offset away from them), kept when listed.
    """
    touched = np.unique(_chunk_ids(level, chunks))

    def member(ids: np.ndarray, pool: np.ndarray) -> np.ndarray:
        at = np.minimum(np.searchsorted(pool, ids), max(len(pool) - 1, 0))
        return (ids >= 0) & (pool[at] == ids) if len(pool) else np.zeros(len(ids), bool)

    out = []
    for arr in level.links.values():
        if not len(arr.nonempty):
            continue
        offsets = np.asarray(arr.offsets).reshape(-1, chunks.shape[1])
        if any_end:
            cand = np.unique(np.concatenate([chunks] + [chunks - o for o in offsets]), axis=0)
        else:
            cand = chunks
        if not len(cand):
            continue
        cand_ids = _chunk_ids(level, cand)
        ends = np.array([member(_chunk_ids(level, cand + o), touched) for o in offsets]).reshape(
            -1, len(cand)
        )
        reach: np.ndarray | np.bool_  # numpy's stubs allow a scalar from all(axis=0)
        if any_end:
            reach = member(cand_ids, touched) | ends.any(axis=0)
        else:
            reach = ends.all(axis=0)  # the anchors themselves are touched
        ok = reach & member(cand_ids, arr.listed_ids(level.grid))
        if ok.any():
            out.append(LinkCells(arr, cand[ok]))
    return out


def plan_endpoint_chunks(plan: LinkPlan) -> np.ndarray:
    """Every chunk an endpoint of a planned link cell can lie in (unique rows)."""
    parts = [
        anchors + off for arr, anchors in plan for off in [np.zeros_like(arr.offsets[0])] + list(arr.offsets)
    ]
    return np.unique(np.concatenate(parts), axis=0) if parts else np.zeros((0, 0), np.int64)


def implicit_edges(cells: Cells, indexes: dict[int, FragmentIndex]) -> np.ndarray:
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


def link_keys(level: Level, plan: LinkPlan) -> list[str]:
    """Keys of the planned link cells, then of the parallel ``link_attributes`` cells, name by name."""
    keys = [key for arr, anchors in plan for key in arr.keys(anchors)]
    for segments in level.link_attributes.values():
        for arr, anchors in plan:
            if arr.segment in segments:
                keys += segments[arr.segment].keys(anchors)
    return keys


def link_edges(
    level: Level, cells: Cells, plan: LinkPlan, raws: list[bytes | None]
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """(E, 2) edges from link records in concatenated-row numbering (input endpoint order),
    and their ``link_attributes`` rows (raws laid out as :func:`link_keys` lists them).

    Cells are decoded one by one; bounds checks, endpoint order and row numbering are
    done once over all records.
    """
    fetched = _chunk_ids(level, cells.chunks)
    where = np.argsort(fetched)
    counts = np.diff(cells.offsets)
    # Under store="duplicate" a record has one copy per distinct endpoint chunk; keep the
    # copy anchored at the smallest of them (always fetched when any copy is useful).
    duplicate = level.links_family.get("store") == "duplicate"
    parts, sizes, keeps, pos = [], [], [], 0
    for arr, anchors in plan:
        ends = np.stack([anchors] + [anchors + o for o in arr.offsets], axis=1)  # (A, W, D)
        smallest = np.ones(len(anchors), bool)
        if duplicate:
            for k in range(1, ends.shape[1]):
                smallest &= _lex_le(ends[:, 0], ends[:, k])
        which = where[
            np.searchsorted(fetched, _chunk_ids(level, ends.reshape(-1, ends.shape[2])), sorter=where)
        ]
        which = which.reshape(len(anchors), -1)
        for a, chunk in enumerate(anchors):
            vertices, perm = arr.records(raws[pos], chunk)
            pos += 1
            sizes.append(len(vertices))
            keeps.append(bool(smallest[a]))
            if len(vertices) and smallest[a]:
                parts.append(LinkRecords(arr, chunk, a, vertices, perm, which[a]))
    _check_record_total(level, plan, sizes)
    edges = _records_to_edges(cells, counts, parts)
    attrs = {}
    for name, segments in level.link_attributes.items():
        values, k = [], 0
        for arr, anchors in plan:
            attr = segments.get(arr.segment)
            for chunk in anchors:
                n = sizes[k]
                k += 1
                if attr is None:
                    raise FormatError(
                        f"link attribute {name!r} has no array for links segment {arr.segment!r}"
                    )
                v = attr.rows(raws[pos], chunk)
                pos += 1
                if len(v) != n:
                    raise CorruptCellError(
                        attr.path, ".".join(map(str, chunk)), f"{len(v)} rows but the link cell has {n}"
                    )
                if keeps[k - 1]:
                    values.append(v)
        first = next(iter(segments.values()))
        flat = np.concatenate(values) if values else np.zeros((0, first.row_width), first.dtype)
        attrs[name] = flat.reshape((-1, *(first.attrs.get("row_shape") or [])))
    return edges, attrs


def _check_record_total(level: Level, plan: LinkPlan, sizes: list[int]) -> None:
    """When ``plan`` holds every listed link cell of the level, their records must add up to the
    family's ``num_physical_records`` (a cell left out of a listing would drop edges silently)."""
    expected = level.links_family.get("num_physical_records")
    if not isinstance(expected, int) or isinstance(expected, bool):
        return
    if sum(len(anchors) for _, anchors in plan) != sum(len(arr.nonempty) for arr in level.links.values()):
        return
    if sum(sizes) != expected:
        raise FormatError(
            f"the link cells of level {level.index} hold {sum(sizes)} records but links/0 says "
            f"num_physical_records is {expected}: a links listing (nonempty_chunks) or cell is corrupt"
        )


def _lex_le(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise lexicographic ``a <= b`` of (N, D) integer arrays."""
    diff = a - b
    nz = diff != 0
    first = np.argmax(nz, axis=1)
    return ~nz.any(axis=1) | (diff[np.arange(len(a)), first] < 0)


def _records_to_edges(cells: Cells, counts: np.ndarray, parts: list[LinkRecords]) -> np.ndarray:
    """Stack decoded link cells into (E, W) concatenated-row records in input endpoint order."""
    if not parts:
        return np.zeros((0, 2), np.int64)
    vertices = np.concatenate([p.vertices for p in parts])
    which = np.concatenate([np.broadcast_to(p.which, p.vertices.shape) for p in parts])
    bad = vertices >= counts[which]
    if bad.any():
        r, k = np.argwhere(bad)[0]
        cell_of = np.repeat(np.arange(len(parts)), [len(p.vertices) for p in parts])
        part = parts[cell_of[r]]
        local = r - sum(len(p.vertices) for p in parts[: cell_of[r]])
        raise CorruptCellError(
            part.array.path,
            ".".join(map(str, part.chunk)),
            f"record {local} names vertex {vertices[r, k]} of chunk "
            f"{'.'.join(map(str, cells.chunks[which[r, k]]))}, which has {counts[which[r, k]]}",
        )
    rows = vertices + cells.offsets[which]
    if any(p.perm is not None for p in parts):
        perm = np.concatenate(
            [np.zeros(len(p.vertices), np.int64) if p.perm is None else p.perm for p in parts]
        )
        rows = restore_input_order(rows, perm)
    return rows


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


def _half_plan(level: Level, chunks: np.ndarray, links: LinkPlan) -> LinkPlan:
    """Under ``implicit_sequential_with_branches``: the link cells not in ``links`` with an
    endpoint chunk (anchor included) among the touched chunks, i.e. those joining a touched
    chunk to one outside. A record there can give a touched row a parent outside, which
    overrides the row's implicit parent (stores may keep a branch inside a fragment, as the
    reference does, and file the record at either chunk)."""
    if level.root.links_convention != "implicit_sequential_with_branches":
        return []
    planned = {arr.path: set(map(tuple, anchors.tolist())) for arr, anchors in links}
    out = []
    for arr, anchors in link_plan(level, chunks, any_end=True):
        seen = planned.get(arr.path, set())
        keep = np.array([tuple(a) not in seen for a in anchors.tolist()], bool)
        if keep.any():
            out.append(LinkCells(arr, anchors[keep]))
    return out


def _rows_with_outside_parent(
    level: Level, cells: Cells, plan: LinkPlan, raws: list[bytes | None]
) -> np.ndarray:
    """Fetched rows (concatenated numbering) that a record of ``plan`` names as the child of
    a parent in a chunk that was not fetched."""
    fetched = _chunk_ids(level, cells.chunks)
    where = np.argsort(fetched)
    counts = np.diff(cells.offsets)
    child = 1 if level.links_family.get("directed", False) else 0
    out, pos = [], 0
    for arr, anchors in plan:
        for chunk in anchors:
            vertices, perm = arr.records(raws[pos], chunk)
            pos += 1
            if not len(vertices):
                continue
            ends = _chunk_ids(level, np.stack([chunk] + [chunk + o for o in arr.offsets]))
            both = np.stack(
                [vertices, np.broadcast_to(ends, vertices.shape)], axis=2
            )  # (M, W, [local, chunk])
            if perm is not None:
                both = restore_input_order(both, perm)
            local, chunk_id = both[:, child, 0], both[:, child, 1]
            at = np.minimum(np.searchsorted(fetched, chunk_id, sorter=where), len(fetched) - 1)
            hit = (chunk_id >= 0) & (fetched[where[at]] == chunk_id)
            w, local = where[at[hit]], local[hit]
            if np.any(local >= counts[w]):
                r = int(np.argmax(local >= counts[w]))
                raise CorruptCellError(
                    arr.path,
                    ".".join(map(str, chunk)),
                    f"a record names vertex {int(local[r])} of a chunk with {int(counts[w[r]])}",
                )
            out.append(cells.offsets[w] + local)
    return np.concatenate(out) if out else np.zeros(0, np.int64)


def box_edges(
    level: Level,
    cells: Cells,
    links: LinkPlan,
    raws: list[bytes | None],
    outside: np.ndarray | None = None,
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Every edge among the fetched rows: implicit sequential ones (when the convention has
    them) and those of the fetched link cells.

    Under ``implicit_sequential_with_branches`` link records of an undirected family are
    ``(child, parent)`` (the reference's form) and those of a directed family
    ``(parent, child)`` (the spec's §14.3 form); both are returned as ``(parent, child)``
    like the implicit edges, and an explicit parent overrides the implicit one (stores
    that keep several branches in one fragment rely on that), also when that parent lies
    outside the fetched rows (``outside``: such children). Edge attributes are returned
    for explicit-edge geometry only.
    """
    linked, attrs = link_edges(level, cells, links, raws)
    if not _implicit(level):
        return linked, attrs
    implicit = implicit_edges(cells, {i: cells.fragment_index(level, i) for i in range(len(cells.chunks))})
    if level.root.links_convention == "implicit_sequential_with_branches":
        if not level.links_family.get("directed", False):
            linked = linked[:, ::-1]
        overridden = linked[:, 1] if outside is None else np.concatenate([linked[:, 1], outside])
        implicit = implicit[~np.isin(implicit[:, 1], overridden)]
    return np.concatenate([implicit, linked]), {}


def _select(
    level: Level,
    cells: Cells,
    rows: np.ndarray,
    linked: tuple[np.ndarray, dict[str, np.ndarray]],
    owners: np.ndarray | None,
    lines: bool,
) -> Result:
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
    parents = None
    if level.root.links_convention == "implicit_sequential_with_branches":
        parents = np.full(len(rows), -1, np.int64)
        parents[edges[:, 1]] = edges[:, 0]
    return build_result(
        level,
        cells,
        rows,
        owners=owners,
        edges=edges,
        edge_attributes=edge_attrs,
        line_offsets=line_offsets,
        parents=parents,
    )


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
    names = attribute_names(level, attributes)
    # whole_objects only needs the owners of the rows inside: no attributes, no link cells
    links = [] if whole_objects else link_plan(level, chunks)
    half = [] if whole_objects else _half_plan(level, chunks, links)
    extra = link_keys(level, links)
    half_keys = [key for arr, anchors in half for key in arr.keys(anchors)]
    with_ids = level.manifests is not None if with_object_ids is None else with_object_ids
    cells, raws = fetch_cells(
        level,
        chunks,
        [] if whole_objects else names,
        np.arange(len(chunks)),
        extra + half_keys,
        owners=with_ids or whole_objects,
    )
    inside = np.all((cells.positions >= lo) & (cells.positions <= hi), axis=1)
    owners = row_owners(level, cells) if (with_ids or whole_objects) else None
    if whole_objects:
        assert owners is not None
        ids = np.unique(owners[inside][owners[inside] >= 0])
        return objects_with_edges(level, ids, attributes)
    rows = np.flatnonzero(inside)
    outside = _rows_with_outside_parent(level, cells, half, raws[len(extra) :]) if half else None
    return _select(
        level,
        cells,
        rows,
        box_edges(level, cells, links, raws[: len(extra)], outside),
        None if owners is None else owners[rows],
        is_lines(level),
    )


def is_lines(level: Level) -> bool:
    """Whether ``level`` holds line-like kinds (one chain per object, read as line pieces)."""
    return read_family(level.root.geometry_types).line_like


def fetch_linked_objects(
    level: Level, ids: np.ndarray, names: list[str], with_links: bool = True
) -> ObjectFetch:
    """Objects ``ids`` as :func:`~zarr_vectors.engine.read.points.fetch_objects` returns them, with
    the link cells of their chunks fetched in the same batch (``with_links``)."""
    plan: LinkPlan = []

    def extra_keys(chunks: np.ndarray) -> list[str]:
        if not with_links:
            return []
        plan.extend(link_plan(level, chunks))
        return link_keys(level, plan)

    cells, rows, owners, raws = fetch_objects(level, ids, names, extra_keys)
    return ObjectFetch(cells, rows, owners, plan, raws)


def objects_with_edges(
    level: Level, ids: np.ndarray, attributes: Sequence[str] | bool | None = None
) -> Result:
    """Whole objects with every edge among their vertices; lines come back in order, one per object.

    A line's manifest lists its segments in walking order, so its vertices in manifest order
    are the line itself and no link cell needs reading; other kinds fetch the link cells of
    the objects' chunks in the same batch as the vertices.
    """
    ids = np.atleast_1d(np.asarray(ids, dtype=np.int64))
    names = attribute_names(level, attributes)
    if is_lines(level):
        cells, rows, owners, _ = fetch_objects(level, ids, names)
        starts = (
            np.flatnonzero(np.r_[True, owners[1:] != owners[:-1]]) if len(owners) else np.zeros(0, np.int64)
        )
        follows = np.flatnonzero(owners[1:] == owners[:-1])
        return build_result(
            level,
            cells,
            rows,
            owners=owners,
            edges=np.stack([follows, follows + 1], axis=1),
            line_offsets=np.append(starts, len(owners)).astype(np.int64),
        )
    got = fetch_linked_objects(level, ids, names)
    edges = box_edges(level, got.cells, got.plan, got.raws)
    return _select(level, got.cells, got.rows, edges, got.owners, lines=False)
