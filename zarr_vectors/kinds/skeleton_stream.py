"""Skeletons written batch by batch in bounded memory: :class:`SkeletonStream`.

The store is the one :func:`~zarr_vectors.kinds.skeletons.write_skeleton` writes from the
concatenated batches (each batch's parent indices shifted to that numbering). Whether a
vertex continues its fragment, and whether its parent edge is explicit, inside one chunk
or across chunks, is decided from its own batch (a parent lies in its child's batch), so
each batch is keyed as it comes; fragments, rows and links are built at ``close`` a group
of whole cells at a time.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from zarr_vectors.engine import (
    OBJECT_ID_META,
    GroupCells,
    LinkedStream,
    Partition,
    StoreBuilder,
    SweepContext,
    cell_indices,
    cells_of,
    fragment_owner_payloads,
    fragment_payloads,
    row_payloads,
)
from zarr_vectors.errors import InputError
from zarr_vectors.format.grid import Grid
from zarr_vectors.format.links import encode_ragged, parse_offsets, place_links
from zarr_vectors.kinds.graphs import intra_payloads, vertex_locals
from zarr_vectors.kinds.skeletons import check_parents, continues, runs_partition, tree_roots

__all__ = ["SkeletonStream"]

_CONT, _INTRA = np.uint8(1), np.uint8(2)  # flags: continues its fragment; explicit parent in its chunk


def _links_meta(ctx: SweepContext) -> dict[str, Any]:
    return {"zv_array": "links", "dtype": ctx.index_dtype.name, "link_width": 2, "level_delta": 0}


class SkeletonStream(LinkedStream):
    """Trees given in batches: ``append(positions, parents, attributes=, object_ids=)`` as for
    :func:`zarr_vectors.write_skeleton`, with each batch's parents indexing its own rows.

    Without ``object_ids`` each tree is an object, numbered in root order across batches.
    """

    geometry_type: ClassVar[str] = "skeleton"
    links_convention: ClassVar[str] = "implicit_sequential_with_branches"
    kind_name: ClassVar[str] = "skeletons"
    #: Endpoint order of a cross-chunk record: (child, parent), or (parent, child) for lines.
    child_first: ClassVar[bool] = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._roots = 0
        self._intra = 0

    def append(
        self,
        positions: Any,
        parents: Any,
        *,
        attributes: Mapping[str, Any] | None = None,
        object_ids: Any = None,
        **unknown: Any,
    ) -> None:
        """Add whole trees: ``parents[i]`` is vertex i's parent row in this batch, -1 for a root."""
        self._per_batch(unknown, ("attributes", "object_ids"))
        self._require_open()
        pos = self._positions(positions)
        n = len(pos)
        par = check_parents(parents, n)
        roots = tree_roots(par)
        ids = self._given_ids(object_ids, n)
        if ids is None:
            ids = self._roots + np.searchsorted(np.flatnonzero(par < 0), roots).astype(np.int64)
        mixed = np.flatnonzero((par >= 0) & (ids[np.maximum(par, 0)] != ids))
        if len(mixed):
            v = int(mixed[0])
            raise InputError(
                f"vertex {v} (object {int(ids[v])}) of this batch has parent {int(par[v])} "
                f"in object {int(ids[par[v]])}"
            )
        columns = self._attributes(attributes, n)
        self._queue({"positions": pos, "ids": ids, "parents": par, **columns})
        self._roots += int(np.count_nonzero(par < 0))

    def _columns(
        self, batch: dict[str, np.ndarray], cell: np.ndarray, vertex: np.ndarray
    ) -> tuple[dict[str, np.ndarray], tuple[np.ndarray, ...] | None]:
        par = batch["parents"]
        has = par >= 0
        pcell = cell[np.maximum(par, 0)]
        cont = continues(par, batch["ids"], cell)
        explicit = has & ~cont
        flags = np.where(cont, _CONT, 0).astype(np.uint8) | np.where(
            explicit & (pcell == cell), _INTRA, 0
        ).astype(np.uint8)
        cross = np.flatnonzero(explicit & (pcell != cell))
        parent = np.where(has, vertex[np.maximum(par, 0)], -1)
        ends = [cross, par[cross]] if self.child_first else [par[cross], cross]
        child_parent = np.stack(ends, axis=1)
        links = (
            vertex[cross],
            vertex[child_parent],
            cell[child_parent],
            np.minimum(cell[cross], pcell[cross]),
        )
        return {"parent": parent, "flags": flags}, links

    def _metas(self, ctx: SweepContext) -> dict[str, tuple[Any, ...]]:
        d = ctx.grid.ndim
        out: dict[str, tuple[Any, ...]] = {
            "vertices": (
                {"zv_array": "vertices", "dtype": ctx.position_dtype.name, "encoding": "raw"},
                "data",
            ),
            "vertex_fragments": (
                {"zv_array": "vertex_fragments", "encoding": "fragment_index_v1"},
                "fragments",
            ),
            f"links/0/{'.'.join(['0'] * d)}": (
                {**_links_meta(ctx), "offsets": [[0] * d], "has_perm": False},
                "links",
            ),
            "link_fragments": ({"zv_array": "link_fragments", "encoding": "fragment_index_v1"}, "fragments"),
            "fragment_attributes/object_id": (dict(OBJECT_ID_META), "data"),
        }
        for spec in ctx.specs:
            out[f"vertex_attributes/{spec.name}"] = (spec.meta(), "data")
        return out

    def _runs(
        self, lin: np.ndarray, oids: np.ndarray, vertex: np.ndarray, cont: np.ndarray, grid: Grid
    ) -> Partition:
        """A group's rows by (cell, object, vertex number), in fragments (:func:`runs_partition`)."""
        return runs_partition(lin, oids, vertex, cont, grid)

    def _segment_meta(self, ctx: SweepContext, segment: str, has_perm: bool) -> dict[str, Any]:
        """The metadata of ``links/0/<segment>``."""
        return {
            **_links_meta(ctx),
            "offsets": parse_offsets(segment, 2, ctx.grid.ndim).tolist(),
            "has_perm": has_perm,
        }

    def _encode(self, rows: dict[str, np.ndarray], ctx: SweepContext, lo: int, hi: int) -> GroupCells:
        grid = ctx.grid
        pos, vertex = rows["positions"], rows["vertex"]
        oids = ctx.oids(rows["ids"])
        lin = cell_indices(pos, grid)
        part = self._runs(lin, oids, vertex, (rows["flags"] & _CONT).astype(bool), grid)
        cells = part.cells
        arrays: dict[str, tuple[np.ndarray, list[bytes]]] = {
            "vertices": (cells, list(row_payloads(pos, part))),
            "vertex_fragments": (cells, fragment_payloads(part)),
        }
        for i, spec in enumerate(ctx.specs):
            arrays[f"vertex_attributes/{spec.name}"] = (cells, list(row_payloads(rows[f"a{i}"], part)))
        assert part.frag_object is not None
        if ctx.num_objects > 1:
            owners = fragment_owner_payloads(part.frag_cell, part.frag_local, part.frag_object, len(cells))
            arrays["fragment_attributes/object_id"] = (cells, owners)
        cell, local, frag = vertex_locals(part)
        by_vertex = np.argsort(vertex, kind="stable")
        child = np.flatnonzero(rows["flags"] & _INTRA)
        if len(child):
            child = child[np.argsort(vertex[child], kind="stable")]
            parent = by_vertex[np.searchsorted(vertex[by_vertex], rows["parent"][child])]
            at, link_rows, link_frags, _ = intra_payloads(
                part, cell, local, frag, np.stack([child, parent], axis=1), ctx.index_dtype
            )
            arrays[f"links/0/{'.'.join(['0'] * grid.ndim)}"] = (cells[at], link_rows)
            arrays["link_fragments"] = (cells[at], link_frags)
            self._intra += len(child)
        first = part.order[part.row_offsets[part.frag_cell] + part.frag_start]
        linear = lin[part.order[part.row_offsets[:-1]]]
        fragments = (part.frag_object, vertex[first], linear[part.frag_cell], part.frag_local)
        return GroupCells(arrays, fragments, vertex[by_vertex], lin[by_vertex], local[by_vertex])

    def _cross(
        self, record: np.ndarray, cell: np.ndarray, local: np.ndarray, ctx: SweepContext, lo: int, hi: int
    ) -> dict[str, tuple[dict[str, Any], str, np.ndarray, list[bytes]]]:
        grid = ctx.grid
        d = grid.ndim
        chunks = cells_of(cell.reshape(-1), grid).reshape(-1, 2, d) + grid.origin
        placed = place_links(chunks, local, directed=False, store="canonical")
        out: dict[str, tuple[dict[str, Any], str, list[np.ndarray], list[bytes]]] = {}
        for lc in placed.cells():
            meta = self._segment_meta(ctx, lc.segment, lc.has_perm)
            _, _, cells, payloads = out.setdefault(f"links/0/{lc.segment}", (meta, "links", [], []))
            cells.append(np.asarray(lc.chunk) - grid.origin)
            payloads.append(encode_ragged([lc.rows], ctx.index_dtype))
        return {k: (m, kind, np.asarray(c).reshape(-1, d), p) for k, (m, kind, c, p) in out.items()}

    def _link_groups(self, builder: StoreBuilder, ctx: SweepContext) -> list[str]:
        total = self._intra + self._links.count
        if not total:
            return []
        builder.group("0/links")
        builder.group(
            "0/links/0",
            {
                "zv_array": "links_family",
                "level_delta": 0,
                "link_width": 2,
                "sid_ndim": ctx.grid.ndim,
                "directed": False,
                "store": "canonical",
                "num_links": total,
                "num_physical_records": total,
            },
        )
        return ["links", "link_fragments"] if self._intra else ["links"]
