"""A store as Neuroglancer precomputed sources: request path -> bytes, read on demand.

One :class:`StoreSource` serves one store under these paths (relative to its root):

* point, line and graph stores: ``ann/info``, ``ann/spatial{i}/{x}_{y}_{z}``,
  ``ann/by_id/{id}``, ``ann/rel_object/{object id}``;
* skeleton stores: ``skeletons/info``, ``skeletons/{object id}``;
* mesh stores: ``mesh/info``, then per object ``mesh/{object id}.index`` (the manifest) and
  ``mesh/{object id}`` (its Draco fragments) as multi-resolution meshes, one LOD per store
  level (:mod:`~zarr_vectors.neuroglancer.multilod`); with ``mesh_format="legacy"``,
  ``mesh/{object id}:0`` and ``mesh/{object id}:0:1`` (level 0, one fragment, named without
  a folder as cloud-volume looks fragments up by their base name);
* stores with objects: ``props/info`` (segment properties).

Spatial index level ``i`` has the grid of store level ``levels[-1 - i]`` (coarsest first); an
index cell is a block of ``group(k)`` chunks per edge of that level (one chunk for lines and
graphs). Every annotation (a real vertex; for lines and graphs an edge of level 0) is in
exactly one index level (points: in one cell; edges: in every cell of that level their
segment meets, as the format asks), the coarse levels holding a sample of them
(:mod:`~zarr_vectors.neuroglancer.spatial`: a subsampled pyramid's own levels, or a hashed
sample of level 0). An id packs (level, chunk, row in the chunk), so
``by_id`` reads one chunk (an edge's chunk is that of its first vertex). Each level's
``limit`` is its largest cell's count, found by one pass over the store
(:meth:`StoreSource.limits`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from functools import lru_cache
from typing import Any

import numpy as np

from zarr_vectors.dataset import Dataset
from zarr_vectors.engine import fetch_cells
from zarr_vectors.errors import InputError, UnknownIdError
from zarr_vectors.format.kinds import family_of
from zarr_vectors.neuroglancer.encode import (
    AnnotationLayout,
    Property,
    annotation_info,
    encode_annotations,
    encode_one_annotation,
    encode_single_annotations,
    ng_dtype,
    pack_ids,
    property_id,
    shuffle_order,
    unpack_ids,
)
from zarr_vectors.neuroglancer.segments import NotFound, SegmentSource
from zarr_vectors.neuroglancer.spatial import (
    NESTED,
    coarser_copies,
    crossed_cells,
    group_by_cell,
    index_mode,
    match_rows,
    sample_levels,
    segments_meet_box,
    thresholds,
)

__all__ = ["MESH_FORMATS", "StoreSource", "UNIT_METRES", "NotFound"]

#: Mesh source formats: multi-resolution Draco (the default) or legacy single-resolution.
MESH_FORMATS = ("multilod", "legacy")

#: Metres per unit of the unit names a store may give its axes.
UNIT_METRES = {
    "angstrom": 1e-10,
    "nanometer": 1e-9,
    "nm": 1e-9,
    "micrometer": 1e-6,
    "micron": 1e-6,
    "um": 1e-6,
    "µm": 1e-6,
    "millimeter": 1e-3,
    "mm": 1e-3,
    "centimeter": 1e-2,
    "cm": 1e-2,
    "meter": 1.0,
    "m": 1.0,
    "kilometer": 1e3,
    "km": 1e3,
}

#: Mean vertices per spatial-index cell that point levels aim at (cells group chunks).
CELL_TARGET = 2048
#: Most coarse-level annotations of a sampled point index kept in memory for cell requests.
COARSE_KEEP = 4_000_000
JSON = "application/json"
BINARY = "application/octet-stream"


class StoreSource(SegmentSource):
    """The precomputed sources of one opened store (see the module docstring for paths)."""

    def __init__(self, ds: Dataset, name: str, mesh_format: str = "multilod") -> None:
        if mesh_format not in MESH_FORMATS:
            raise InputError(f"mesh_format must be one of {', '.join(MESH_FORMATS)}, not {mesh_format!r}")
        self.ds = ds
        self.name = name
        self.mesh_format = mesh_format
        self.family = family_of(ds.geometry_types)
        self._levels: dict[int, Any] = {}
        self.levels = [k for k in ds.levels if k not in set(ds.stale_levels())]
        lv0 = ds.level(0)
        self.has_objects = lv0.manifests is not None
        units = [a.unit for a in ds.root.axes if a.type == "space"]
        #: metres per store unit, per axis (an axis without a known unit is taken as nanometres)
        self.metres = np.array([UNIT_METRES.get((u or "nm").lower(), 1e-9) for u in units])
        self.layout = self._layout() if self.kind == "annotations" else None
        self._cell = lru_cache(maxsize=256)(self._cell_uncached)
        self._multilod = lru_cache(maxsize=32)(self._multilod_uncached)
        self._chunks: dict[int, set[tuple[int, ...]]] = {}
        self._limits: list[int] | None = None
        self._reach: np.ndarray | None = None
        #: a sampled point index's coarse levels, per level ``{cell: (geometry, properties,
        #: ids)}``, kept by :meth:`_sample_limits`
        self._coarse: list[dict[tuple[int, ...], Any]] | None = None
        self.index_mode = (
            index_mode(ds, self.levels, self.layout.points == 1, self.has_objects)
            if self.layout is not None
            else ""
        )
        self._shown = lru_cache(maxsize=256)(self._shown_uncached)

    def _nonempty(self, k: int) -> set[tuple[int, ...]]:
        """The listed chunks of level ``k`` (absolute coordinates), as a set, built once."""
        found = self._chunks.get(k)
        if found is None:
            found = self._chunks[k] = {tuple(int(v) for v in c) for c in self._level(k).vertices.nonempty}
        return found

    def clear_cache(self) -> None:
        """Forget the decoded chunks kept for ``by_id`` and repeated cell requests."""
        self._cell.cache_clear()
        self._multilod.cache_clear()
        self._shown.cache_clear()

    # -- what the store becomes -------------------------------------------------------
    @property
    def kind(self) -> str:
        """``annotations``, ``skeletons`` or ``mesh``."""
        if self.family == "mesh":
            return "mesh"
        if "skeleton" in self.ds.geometry_types:
            return "skeletons"
        if self.family is not None and self.family != "shapes":  # points, lines, graphs
            return "annotations"
        raise InputError(
            f"{self.name}: {'/'.join(self.ds.geometry_types)} stores have no Neuroglancer form here; "
            "serve point, line, graph, skeleton or mesh stores"
        )

    @property
    def dimensions(self) -> dict[str, list[Any]]:
        """Neuroglancer dimensions of the store's axes: ``{name: [metres per unit, "m"]}``."""
        return {a: [float(m), "m"] for a, m in zip(self.ds.axes, self.metres)}

    def _layout(self) -> AnnotationLayout:
        lv = self._level(0)
        taken: set[str] = set()
        props = []
        for name in sorted(lv.vertex_attributes):
            arr = lv.vertex_attributes[name]
            if np.dtype(arr.dtype).kind in "iuf" and not arr.attrs.get("row_shape"):
                props.append(Property(property_id(name, taken), ng_dtype(arr.dtype), name))
        points = 1 if self.family == "points" else 2
        if points == 2:
            props = []  # edges carry no vertex values
        rel = ("object",) if self.has_objects else ()
        return AnnotationLayout(self.ds.ndim, points, tuple(props), rel)

    # -- the spatial index ------------------------------------------------------------
    def group(self, k: int) -> int:
        """Store chunks per index-cell edge at level ``k``: 1 for lines and graphs; for points
        the smallest power of two whose cells hold about :data:`CELL_TARGET` vertices on
        average (fewer, larger requests), at most the grid's largest extent."""
        if self.layout is None or self.layout.points != 1:
            return 1
        lv = self._level(k)
        mean = lv.meta.vertex_count / max(1, len(lv.vertices.nonempty))
        g = 1
        while g**lv.grid.ndim * mean < CELL_TARGET and g < int(lv.grid.shape.max()):
            g *= 2
        return g

    def _corners(self) -> tuple[np.ndarray, np.ndarray]:
        """Lower and upper bound of the index: from the coarsest level's grid origin, a whole
        number of the largest index cell (so every level's cells tile it when they nest)."""
        grid = self._level(self.levels[-1]).grid
        lo = grid.origin * grid.chunk_shape
        hi = lo + grid.shape * grid.chunk_shape
        largest = np.max([self._level(k).grid.chunk_shape * self.group(k) for k in self.levels], axis=0)
        return lo, lo + np.ceil((hi - lo) / largest - 1e-9) * largest

    def spatial_levels(self) -> list[dict[str, Any]]:
        """The info's ``spatial`` entries, coarsest first, one per store level; ``limit`` is the
        largest count of any cell of the level (:meth:`limits`)."""
        lower, upper = self._corners()
        out = []
        for i, (k, limit) in enumerate(zip(reversed(self.levels), self.limits())):
            size = self._level(k).grid.chunk_shape * self.group(k)
            out.append(
                {
                    "key": f"spatial{i}",
                    "grid_shape": [int(v) for v in np.ceil((upper - lower) / size - 1e-9)],
                    "chunk_size": [float(v) for v in size],
                    "limit": int(limit),
                }
            )
        return out

    def limits(self) -> list[int]:
        """Per index level (coarsest first) the most annotations any of its cells holds (at
        least 1): computed once, by a pass over every listed cell unless
        :meth:`spatial_entries` has made one already."""
        assert self.layout is not None
        if self._limits is None and self.layout.points != 1:
            for _ in self.spatial_entries():
                pass
        elif self._limits is None:
            self._limits = self._nested_limits() if self.index_mode == NESTED else self._sample_limits()
        assert self._limits is not None
        return self._limits

    def _nested_limits(self, batch: int = 256) -> list[int]:
        """:meth:`limits` of a nested point index in one pass over every level: a point of
        store level ``k`` counts +1 in its cell of ``k``'s index level and -1 in its cell of
        the next finer one (where, as a point of that level too, it is not shown)."""
        lower, _ = self._corners()
        levels = list(reversed(self.levels))
        counts: list[dict[tuple[int, ...], int]] = [{} for _ in levels]

        def add(i: int, chunks: np.ndarray, sign: int) -> None:
            k = levels[i]
            shift = np.rint(lower / self._level(k).grid.chunk_shape).astype(np.int64)
            keys, n = np.unique((chunks - shift) // self.group(k), axis=0, return_counts=True)
            for key, c in zip(map(tuple, keys.tolist()), n.tolist()):
                counts[i][key] = counts[i].get(key, 0) + sign * c

        for i, k in enumerate(levels):
            lv = self._level(k)
            listed = lv.vertices.nonempty
            for start in range(0, len(listed), batch):
                chunks = listed[start : start + batch]
                cells, _ = fetch_cells(lv, chunks, [], np.zeros(0, np.int64))
                add(i, np.repeat(chunks, np.diff(cells.offsets), axis=0), 1)
                if i + 1 < len(levels):  # its chunk one level finer, by the same floor rule
                    finer = self._level(levels[i + 1]).grid.chunk_shape
                    add(i + 1, np.floor(np.asarray(cells.positions) / finer).astype(np.int64), -1)
        return [max(1, max(c.values(), default=0)) for c in counts]

    def _sample_limits(self, batch: int = 256) -> list[int]:
        """:meth:`limits` of a sampled point index in one pass over level 0 (``batch`` chunks
        at a time), each point counted in the cell of the level its hash gives it. The coarse
        levels' annotations met on the way are kept (when at most :data:`COARSE_KEEP`), so
        their cell requests need not read level 0 again."""
        assert self.layout is not None and self.layout.points == 1
        lower, _ = self._corners()
        levels = list(reversed(self.levels))
        cuts = thresholds([self._level(k).meta.vertex_count for k in levels])
        counts: list[dict[tuple[int, ...], int]] = [{} for _ in levels]
        kept: list[list[Any]] = [[] for _ in levels[:-1]]
        room = COARSE_KEEP
        lv0 = self._level(0)
        names = [p.source for p in self.layout.properties]
        listed = lv0.vertices.nonempty
        for start in range(0, len(listed), batch):
            chunks = listed[start : start + batch]
            cells, _ = fetch_cells(lv0, chunks, names, np.zeros(0, np.int64))
            per = np.diff(cells.offsets)
            geom = np.asarray(cells.positions)
            owner = np.repeat(chunks, per, axis=0)
            at = sample_levels(geom, cuts) if len(levels) > 1 else np.zeros(len(geom), np.int64)
            lin = np.ravel_multi_index(
                tuple((chunks - lv0.grid.origin).T), tuple(int(v) for v in lv0.grid.shape)
            )
            ids = pack_ids(0, np.repeat(lin, per), np.arange(len(geom)) - np.repeat(cells.offsets[:-1], per))
            for i, k in enumerate(levels):
                shift = np.rint(lower / self._level(k).grid.chunk_shape).astype(np.int64)
                mine = at == i
                cell = (np.floor_divide(owner[mine], self._ratio(k, 0)) - shift) // self.group(k)
                keys, n = np.unique(cell, axis=0, return_counts=True)
                for key, c in zip(map(tuple, keys.tolist()), n.tolist()):
                    counts[i][key] = counts[i].get(key, 0) + c
                if i < len(kept) and room >= 0:
                    room -= int(mine.sum())
                    values = {p.id: cells.attributes[p.source][mine] for p in self.layout.properties}
                    kept[i].append((cell, geom[mine], values, ids[mine]))
        if room >= 0:
            self._coarse = [group_by_cell(parts, [p.id for p in self.layout.properties]) for parts in kept]
        return [max(1, max(c.values(), default=0)) for c in counts]

    def spatial_entries(self) -> Iterator[tuple[int, tuple[int, ...], bytes]]:
        """Every cell of the spatial index that may hold annotations, as ``(index level, cell,
        body)``; once exhausted, :meth:`limits` knows each level's largest cell. A sampled
        point index first makes its one pass over level 0 (:meth:`limits`), which keeps the
        coarse levels' annotations, rather than reading level 0 under every coarse cell."""
        if self.layout is not None and self.layout.points == 1 and self.index_mode != NESTED:
            self.limits()
        maxima = [0] * len(self.levels)
        for i, cell in self.index_cells():
            body = self.spatial_cell(i, cell)
            maxima[i] = max(maxima[i], int.from_bytes(body[:8], "little"))
            yield i, cell, body
        self._limits = [max(1, m) for m in maxima]

    def index_cells(self) -> Iterator[tuple[int, tuple[int, ...]]]:
        """``(index level, cell)`` of every cell over a listed chunk of the level it is read
        from (its store level when nested, else level 0); other cells are empty."""
        lower, _ = self._corners()
        for i, k in enumerate(reversed(self.levels)):
            grid = self._level(k).grid
            shift = np.rint(lower / grid.chunk_shape).astype(np.int64)
            if self.layout is not None and self.layout.points != 1:  # every cell an edge crosses
                for cell in self._cells_crossed(k, shift):
                    yield i, tuple(int(v) for v in cell)
                continue
            if self.index_mode == NESTED:
                chunks = self._level(k).vertices.nonempty
            else:  # the level-k chunks over level 0's listed chunks
                chunks = np.floor_divide(self._level(0).vertices.nonempty, self._ratio(k, 0))
            for cell in np.unique((chunks - shift) // self.group(k), axis=0):
                yield i, tuple(int(v) for v in cell)

    def _cells_crossed(self, k: int, shift: np.ndarray) -> np.ndarray:
        """Cells of the index level of store level ``k`` (one level-``k`` chunk each, less
        ``shift``) that level 0's edges meet, boxes as :meth:`spatial_cell` makes them."""
        ratio, cs0 = self._ratio(k, 0), self._level(0).grid.chunk_shape

        def box(cells: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            first = (cells + shift) * ratio
            return first * cs0, (first + ratio) * cs0

        found = [np.zeros((0, len(shift)), np.int64)]
        for chunk in self._level(0).vertices.nonempty:
            geom = self._cell(0, tuple(int(v) for v in chunk))[0]
            found.append(crossed_cells(geom[:, : len(shift)], geom[:, len(shift) :], box))
        cells = np.unique(np.concatenate(found), axis=0)
        lower, upper = self._corners()
        shape = np.ceil((upper - lower) / self._level(k).grid.chunk_shape - 1e-9).astype(np.int64)
        return cells[np.all((cells >= 0) & (cells < shape), axis=1)]

    def _ratio(self, coarse: int, fine: int) -> np.ndarray:
        """Chunks of level ``fine`` per chunk of level ``coarse``, per axis (grids nest)."""
        ratio = self._level(coarse).grid.chunk_shape / self._level(fine).grid.chunk_shape
        return np.maximum(1, np.rint(ratio)).astype(np.int64)

    def annotation_info(self) -> dict[str, Any]:
        assert self.layout is not None
        lower, upper = self._corners()
        return annotation_info(self.layout, self.dimensions, lower, upper, self.spatial_levels())

    def _cell_uncached(
        self, k: int, chunk: tuple[int, ...]
    ) -> tuple[np.ndarray, dict[str, np.ndarray], np.ndarray]:
        """Annotations of absolute chunk ``chunk`` of level ``k`` in stored order:
        ``(geometry (n, points * rank), properties, object id per annotation or empty)``."""
        assert self.layout is not None
        lv = self._level(k)
        c = np.asarray(chunk, np.int64)
        cs = lv.grid.chunk_shape
        rank, pts = self.layout.rank, self.layout.points
        if tuple(chunk) not in self._nonempty(k):  # an empty chunk
            return (
                np.zeros((0, rank * pts)),
                {p.id: np.zeros(0) for p in self.layout.properties},
                np.zeros(0, np.uint64),
            )
        lo = c * cs
        hi = np.nextafter((c + 1) * cs, -np.inf)
        names = [p.source for p in self.layout.properties]
        if pts == 1:
            res = self.ds.query(bbox=(lo, hi), level=k, attributes=names)
            keep = np.all(np.floor(res.positions / cs) == c, axis=1)
            geom = res.positions[keep]
            props = {p.id: res.attributes[p.source][keep] for p in self.layout.properties}
            oids = res.object_ids[keep] if res.object_ids is not None else None
        else:
            res = self.ds.query(bbox=(lo, hi), level=k, attributes=False, whole_objects=True)
            edges = res.edges if res.edges is not None else np.zeros((0, 2), np.int64)
            first = res.positions[edges[:, 0]] if len(edges) else np.zeros((0, rank))
            keep = np.all(np.floor(first / cs) == c, axis=1)
            edges = edges[keep]
            geom = np.concatenate([res.positions[edges[:, 0]], res.positions[edges[:, 1]]], axis=1)
            props = {}
            oids = res.object_ids[edges[:, 0]] if res.object_ids is not None else None
        ids = np.zeros(0, np.uint64) if oids is None else np.asarray(oids).astype(np.uint64)
        return geom, props, ids

    def _lin(self, k: int, chunk: np.ndarray) -> int:
        grid = self._level(k).grid
        return int(np.ravel_multi_index(tuple(chunk - grid.origin), tuple(int(s) for s in grid.shape)))

    def spatial_cell(self, index_level: int, cell: tuple[int, ...]) -> bytes:
        """The encoded annotations of one index cell (a block of ``group`` chunks per edge of
        its store level), in a fixed shuffled order."""
        assert self.layout is not None
        if not 0 <= index_level < len(self.levels):
            raise NotFound(f"no spatial index level {index_level}")
        if len(cell) != self.layout.rank:
            raise NotFound(f"a cell of spatial index level {index_level} has {self.layout.rank} coordinates")
        k = self.levels[-1 - index_level]
        grid = self._level(k).grid
        g = self.group(k)
        lower, upper = self._corners()
        shape = np.ceil((upper - lower) / (grid.chunk_shape * g) - 1e-9)
        if any(not 0 <= int(v) < int(n) for v, n in zip(cell, shape.tolist())):  # Python ints: no overflow
            raise NotFound(f"cell {'_'.join(map(str, cell))} is outside spatial index level {index_level}")
        first = np.asarray(cell, np.int64) * g + np.rint(lower / grid.chunk_shape).astype(np.int64)
        span = np.full(len(first), g, np.int64)
        if self.index_mode == NESTED:
            geom, props, ids = self._block(k, first, span)
            if index_level:  # what the next coarser level shows is not shown again
                keep = ~coarser_copies(geom, self._coarser_positions(k, geom))
                geom, props, ids = geom[keep], {p: v[keep] for p, v in props.items()}, ids[keep]
        else:
            ratio = self._ratio(k, 0)
            if self._coarse is not None and index_level < len(self._coarse):
                geom, props, ids = self._coarse[index_level].get(tuple(cell), self._no_annotations())
            else:
                geom, props, ids = self._level0(first * ratio, span * ratio)
            if len(self.levels) > 1:
                counts = [self._level(j).meta.vertex_count for j in reversed(self.levels)]
                keep = sample_levels(geom, thresholds(counts)) == index_level
                geom, props, ids = geom[keep], {p: v[keep] for p, v in props.items()}, ids[keep]
        order = shuffle_order(len(geom), salt=int(np.sum(first)))
        return encode_annotations(
            self.layout, geom[order], {p: v[order] for p, v in props.items()}, ids[order]
        )

    def _no_annotations(self) -> tuple[np.ndarray, dict[str, np.ndarray], np.ndarray]:
        assert self.layout is not None
        empty = {p.id: np.zeros(0) for p in self.layout.properties}
        return np.zeros((0, self.layout.rank * self.layout.points)), empty, np.zeros(0, np.uint64)

    def _level0(
        self, first: np.ndarray, span: np.ndarray
    ) -> tuple[np.ndarray, dict[str, np.ndarray], np.ndarray]:
        """Level 0's annotations in its chunks ``first .. first + span - 1`` (per axis)."""
        assert self.layout is not None
        if self.layout.points == 1:
            return self._block(0, first, span)
        cs0 = self._level(0).grid.chunk_shape
        return self._edges_meeting(first * cs0, (first + span) * cs0)

    def _edges_meeting(
        self, lo: np.ndarray, hi: np.ndarray
    ) -> tuple[np.ndarray, dict[str, np.ndarray], np.ndarray]:
        """Level 0's edges that meet the box ``[lo, hi]``, wherever their first vertex is
        (the format files an annotation under every cell it crosses), with their ids (the
        chunk of the first vertex and the row there, as :meth:`by_id` reads them)."""
        assert self.layout is not None
        rank = self.layout.rank
        reach = self._edge_reach()  # an edge that meets the box has its vertices this near it
        res = self.ds.query(bbox=(lo - reach, hi + reach), level=0, attributes=False, whole_objects=True)
        edges = res.edges if res.edges is not None else np.zeros((0, 2), np.int64)
        p0, p1 = res.positions[edges[:, 0]], res.positions[edges[:, 1]]
        geom = np.concatenate([p0, p1], axis=1)[segments_meet_box(p0, p1, lo, hi)]
        cs = self._level(0).grid.chunk_shape
        owner = np.floor(geom[:, :rank] / cs).astype(np.int64)
        ids = np.zeros(len(geom), np.uint64)
        found = np.zeros(len(geom), bool)
        for chunk in np.unique(owner, axis=0):
            mine = np.flatnonzero(np.all(owner == chunk, axis=1))
            rows = match_rows(self._cell(0, tuple(int(v) for v in chunk))[0], geom[mine])
            ok = rows >= 0
            ids[mine[ok]] = pack_ids(0, np.full(int(ok.sum()), self._lin(0, chunk)), rows[ok])
            found[mine[ok]] = True
        return geom[found], {}, ids[found]

    def _edge_reach(self) -> np.ndarray:
        """Per axis the longest extent of any level-0 edge (one pass over level 0, once)."""
        if self._reach is None:
            assert self.layout is not None
            rank = self.layout.rank
            reach = np.zeros(rank)
            for chunk in self._level(0).vertices.nonempty:
                geom = self._cell(0, tuple(int(v) for v in chunk))[0]
                if len(geom):
                    reach = np.maximum(reach, np.abs(geom[:, rank:] - geom[:, :rank]).max(axis=0))
            self._reach = reach
        return self._reach

    def _coarser_positions(self, k: int, positions: np.ndarray) -> np.ndarray:
        """The points of the store level above ``k`` in the chunks holding ``positions``."""
        above = self._level(self.levels[self.levels.index(k) + 1])
        chunks = np.unique(np.floor(positions / above.grid.chunk_shape).astype(np.int64), axis=0)
        chunks = chunks[above.vertices.listed(chunks)]
        if not len(chunks):
            return np.zeros((0, positions.shape[1]))
        cells, _ = fetch_cells(above, chunks, [], np.zeros(0, np.int64))
        return np.asarray(cells.positions)

    def _shown_uncached(self, k: int, chunk: tuple[int, ...]) -> np.ndarray:
        """Mask over the rows of chunk ``chunk`` of level ``k`` (as :meth:`_cell` gives them)
        that are annotations: all of level 0's, or (nested) those no coarser level holds;
        none of a coarse level's otherwise."""
        geom = self._cell(k, chunk)[0]
        if self.index_mode != NESTED:
            return np.full(len(geom), k == self.levels[0])
        if k == self.levels[-1] or not len(geom):
            return np.ones(len(geom), bool)
        return ~coarser_copies(geom, self._coarser_positions(k, geom))

    def _block(
        self, k: int, first: np.ndarray, span: np.ndarray
    ) -> tuple[np.ndarray, dict[str, np.ndarray], np.ndarray]:
        """Points of the listed chunks ``first .. first + span - 1`` (per axis) of level ``k``,
        fetched whole in one batch, with the ids :meth:`by_id` resolves (chunk, row in the
        chunk's stored order, as a box query returns them)."""
        assert self.layout is not None
        lv = self._level(k)
        grid = lv.grid
        listed = lv.vertices.nonempty
        sel = listed[np.all((listed >= first) & (listed < first + span), axis=1)] if len(listed) else listed
        if not len(sel):
            empty = {p.id: np.zeros(0) for p in self.layout.properties}
            return np.zeros((0, self.layout.rank)), empty, np.zeros(0, np.uint64)
        cells, _ = fetch_cells(lv, sel, [p.source for p in self.layout.properties], np.zeros(0, np.int64))
        counts = np.diff(cells.offsets)
        lin = np.ravel_multi_index(tuple((sel - grid.origin).T), tuple(int(v) for v in grid.shape))
        rows = np.arange(int(cells.offsets[-1])) - np.repeat(cells.offsets[:-1], counts)
        props = {p.id: cells.attributes[p.source] for p in self.layout.properties}
        return cells.positions, props, pack_ids(k, np.repeat(lin, counts), rows)

    def by_id(self, annotation_id: int) -> bytes:
        """One annotation, with its related object id."""
        assert self.layout is not None
        k, lin, row = unpack_ids(annotation_id)
        if k not in self.levels:
            raise NotFound(f"annotation {annotation_id}: no level {k}")
        grid = self._level(k).grid
        if lin >= grid.n_cells:
            raise NotFound(f"annotation {annotation_id}: no cell {lin} in level {k}")
        chunk = tuple(
            int(v) for v in np.asarray(np.unravel_index(lin, tuple(int(s) for s in grid.shape))) + grid.origin
        )
        geom, props, oids = self._cell(k, chunk)
        if row >= len(geom) or not self._shown(k, chunk)[row]:
            raise NotFound(f"annotation {annotation_id} does not exist")
        related = [oids[row : row + 1]] if self.layout.relationships else []
        return encode_one_annotation(self.layout, geom[row], {p: v[row] for p, v in props.items()}, related)

    def by_id_entries(self) -> Iterator[tuple[np.ndarray, list[bytes]]]:
        """Every annotation's ``by_id`` body, a listed chunk at a time: ``(ids, bodies)``, the
        bytes :meth:`by_id` answers for each id, encoded for the whole chunk at once."""
        assert self.layout is not None
        for k in self.levels if self.index_mode == NESTED else self.levels[:1]:
            for chunk in self._level(k).vertices.nonempty:
                key = tuple(int(v) for v in chunk)
                geom, props, oids = self._cell(k, key)
                rows = np.flatnonzero(self._shown(k, key))
                if not len(rows):
                    continue
                ids = pack_ids(k, np.full(len(rows), self._lin(k, chunk)), rows)
                related = oids[rows] if self.layout.relationships else None
                values = {p: v[rows] for p, v in props.items()}
                yield ids, encode_single_annotations(self.layout, geom[rows], values, related)

    def related_entries(self) -> Iterator[tuple[int, bytes]]:
        """Every object's ``rel_object`` body (the bytes :meth:`related` answers), from one
        pass over level 0's chunks instead of a pass over each object's chunks."""
        assert self.layout is not None
        listed = self._level(0).vertices.nonempty
        geoms, props, oids, ids = [], [], [], []
        for chunk in listed[np.lexsort(listed.T[::-1])] if len(listed) else listed:
            geom, pr, oid = self._cell(0, tuple(int(v) for v in chunk))
            geoms.append(geom)
            props.append(pr)
            oids.append(oid)
            ids.append(pack_ids(0, np.full(len(geom), self._lin(0, chunk)), np.arange(len(geom))))
        names = [p.id for p in self.layout.properties]
        width = self.layout.rank * self.layout.points
        geom_all = np.concatenate(geoms) if geoms else np.zeros((0, width))
        props_all = {n: np.concatenate([p[n] for p in props]) if props else np.zeros(0) for n in names}
        oid_all = np.concatenate(oids) if oids else np.zeros(0, np.uint64)
        ids_all = np.concatenate(ids) if ids else np.zeros(0, np.uint64)
        order = np.argsort(oid_all, kind="stable")  # per object: chunks in order, rows in order
        sorted_oids = oid_all[order]
        for user_id in self.ds.object_ids().tolist():
            segment = _u64(user_id)
            lo, hi = (
                np.searchsorted(sorted_oids, np.uint64(segment), side="left"),
                np.searchsorted(sorted_oids, np.uint64(segment), side="right"),
            )
            rows = order[lo:hi]
            body = encode_annotations(
                self.layout, geom_all[rows], {n: v[rows] for n, v in props_all.items()}, ids_all[rows]
            )
            yield segment, body

    def related(self, object_id: int) -> bytes:
        """Level-0 annotations of one object (the ``object`` relationship index)."""
        assert self.layout is not None
        lv = self._level(0)
        try:
            oid = lv.object_id_map.to_oids([self._user_id(object_id)])
        except UnknownIdError as exc:
            raise NotFound(f"{self.name}: no object {object_id}") from exc
        _, chunks, _ = lv.object_fragments(np.asarray(oid))
        geoms, props, ids = [], [], []
        for chunk in np.unique(chunks, axis=0):
            geom, pr, oids = self._cell(0, tuple(int(v) for v in chunk))
            rows = np.flatnonzero(oids == np.uint64(object_id))
            geoms.append(geom[rows])
            props.append({p: v[rows] for p, v in pr.items()})
            ids.append(pack_ids(0, np.full(len(rows), self._lin(0, chunk)), rows))
        names = [p.id for p in self.layout.properties]
        width = self.layout.rank * self.layout.points
        geom_all = np.concatenate(geoms) if geoms else np.zeros((0, width))
        props_all = {n: np.concatenate([p[n] for p in props]) for n in names} if geoms else {}
        ids_all = np.concatenate(ids) if ids else np.zeros(0, np.uint64)
        if not geoms:
            props_all = {n: np.zeros(0) for n in names}
        return encode_annotations(self.layout, geom_all, props_all, ids_all)

    # -- paths --------------------------------------------------------------------------
    def get(self, path: str) -> tuple[bytes, str]:
        """``(body, content type)`` of a source path; :class:`NotFound` when there is none."""
        head, _, rest = path.strip("/").partition("/")
        if head == "props" and rest == "info":
            return _json(self.props_info()), JSON
        if head == "ann" and self.kind == "annotations":
            return self._get_annotation(rest)
        if head == "skeletons" and self.kind == "skeletons":
            if rest == "info":
                return _json(self.skeleton_info()), JSON
            return self.skeleton(_segment(rest)), BINARY
        if head == "mesh" and self.kind == "mesh":
            if rest == "info":
                return _json(self.mesh_info()), JSON
            if self.mesh_format == "multilod":
                if rest.endswith(".index"):
                    return self.mesh_index(_segment(rest[:-6])), BINARY
                return self.mesh_data(_segment(rest)), BINARY
            if rest.endswith(":0"):
                segment = _segment(rest[:-2])
                self._object(segment, False)  # an unknown object is a 404, not an empty mesh
                return _json({"fragments": [f"{segment}:0:1"]}), JSON
            if rest.endswith(":0:1"):
                return self.mesh_fragment(_segment(rest[:-4])), BINARY
        raise NotFound(f"{self.name}: no source path {path!r}")

    def _get_annotation(self, rest: str) -> tuple[bytes, str]:
        if rest == "info":
            return _json(self.annotation_info()), JSON
        match = re.fullmatch(r"spatial([0-9]{1,9})/([0-9]{1,19}(?:_[0-9]{1,19})*)", rest)
        if match:
            cell = tuple(int(v) for v in match.group(2).split("_"))
            return self.spatial_cell(int(match.group(1)), cell), BINARY
        if rest.startswith("by_id/"):
            return self.by_id(_segment(rest[6:])), BINARY
        if rest.startswith("rel_object/") and self.has_objects:
            return self.related(_segment(rest[11:])), BINARY
        raise NotFound(f"{self.name}: no annotation path {rest!r}")

    def paths(self, ids: bool = True) -> Iterator[str]:
        """Every path a static copy needs (annotation ids and object ids enumerated; without
        the ``ann/by_id/`` and ``ann/rel_object/`` ones when not ``ids``: :meth:`by_id_entries`
        and :meth:`related_entries` give those faster)."""
        if self.has_objects:
            yield "props/info"
        if self.kind == "skeletons":
            yield "skeletons/info"
            yield from (f"skeletons/{_u64(i)}" for i in self.ds.object_ids().tolist())
        elif self.kind == "mesh":
            yield "mesh/info"
            for i in self.ds.object_ids().tolist():
                if self.mesh_format == "multilod":
                    yield f"mesh/{_u64(i)}.index"
                    yield f"mesh/{_u64(i)}"
                else:
                    yield f"mesh/{_u64(i)}:0"
                    yield f"mesh/{_u64(i)}:0:1"
        else:
            yield from self._annotation_paths(ids)

    def _annotation_paths(self, ids: bool = True) -> Iterator[str]:
        yield "ann/info"
        for i, cell in self.index_cells():
            yield f"ann/spatial{i}/" + "_".join(map(str, cell))
        for annotation_ids, _ in self.by_id_entries() if ids else ():
            yield from (f"ann/by_id/{aid}" for aid in annotation_ids.tolist())
        if self.has_objects and ids:
            yield from (f"ann/rel_object/{_u64(i)}" for i in self.ds.object_ids().tolist())


def _json(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()


def _u64(value: int) -> int:
    return value + (1 << 64) if value < 0 else value


def _segment(text: str) -> int:
    """A base-10 uint64 from a path component; :class:`NotFound` for anything else."""
    if not re.fullmatch(r"[0-9]{1,20}", text) or int(text) >= 1 << 64:
        raise NotFound(f"{text[:40]!r} is not a uint64 id (base-10 ASCII digits)")
    return int(text)
