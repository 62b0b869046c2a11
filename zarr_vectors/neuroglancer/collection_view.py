"""A collection (``docs/collections.md``) as one Neuroglancer view.

* Per id space, ONE segmentation layer whose sources are the meshes and skeletons of every
  member in that space (``{base}/{member}/mesh``, ``{base}/{member}/skeletons``, each served
  by a :class:`~zarr_vectors.neuroglancer.source.StoreSource` with its segment properties)
  and the segment properties of its point members with objects (``{base}/{member}/props``):
  the members' object ids are the layer's segment ids.
* Per point member, an annotation layer (:class:`RelatedAnnotations`) whose relationships are
  the member's ``zv:relationships`` attributes (the related ids are that vertex attribute's
  uint64 values), plus ``object`` (its own object ids) when the member is in an id space;
  each relationship has a ``rel_<name>`` index (Neuroglancer's ``by_relationship``) and is
  linked (``linkedSegmentationLayer``) to the segmentation layer of its id space.
* Mesh and skeleton members in no id space get a segmentation layer each; line and graph
  members a plain annotation layer; members with no Neuroglancer form are skipped.

:class:`RelatedAnnotations` serves its member as a plain point store is served (the spatial
index read cell by cell, annotation ids packing level, chunk and row), with the relationship
lists read through the collection's relationship index: memory and the first view do not grow
with the member beyond what a plain store's annotation layer costs. A static copy
(:meth:`RelatedAnnotations.entries`) reads every chunk.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from zarr_vectors.collection import Collection, StaleIndexError
from zarr_vectors.dataset import Dataset
from zarr_vectors.engine import fetch_cells
from zarr_vectors.errors import FormatError, InputError
from zarr_vectors.neuroglancer.encode import (
    AnnotationLayout,
    encode_annotations,
    encode_one_annotation,
    pack_ids,
    unpack_ids,
)
from zarr_vectors.neuroglancer.sharded import choose_sharding, compressed_morton, encode_shards
from zarr_vectors.neuroglancer.source import NotFound, StoreSource
from zarr_vectors.neuroglancer.spatial import NESTED

__all__ = [
    "CollectionView",
    "RelatedAnnotations",
    "collection_of",
    "collection_state",
    "collection_view",
    "framed_state",
    "single_annotation_bodies",
]

#: Segments listed as visible in the first view, per id space.
MAX_SEGMENTS = 500
#: Member chunks fetched at once for a relationship request.
BATCH = 256
_COLOURS = ("#ff6e4a", "#4ac0ff", "#ffd24a", "#8cff4a", "#e04aff", "#4affc8")
_JSON = "application/json"
#: The source folder a member of an id space adds to the space's layer, by kind (point
#: members: their segment properties).
_FOLDERS = {"mesh": "mesh", "skeletons": "skeletons", "annotations": "props"}
_BINARY = "application/octet-stream"
LOG = logging.getLogger("zarr_vectors.neuroglancer")


def collection_of(stores: Any, storage_options: dict[str, Any] | None = None) -> Collection | None:
    """The collection ``stores`` names: a :class:`Collection`, or one path or URL (alone or
    as a one-item list) whose root is a collection node; None for anything else."""
    if isinstance(stores, Collection):
        return stores
    if isinstance(stores, (list, tuple)) and len(stores) == 1:
        stores = stores[0]
    if isinstance(stores, Collection):
        return stores
    if not isinstance(stores, (str, Path)):
        return None
    try:
        return Collection.open(stores, storage_options=storage_options)
    except (FormatError, FileNotFoundError):
        return None


def single_annotation_bodies(
    layout: AnnotationLayout, geometry: np.ndarray, props: dict[str, np.ndarray], related: list[np.ndarray]
) -> list[bytes]:
    """The ``by_id`` bodies of every row: its record, then per relationship a count of 1 and
    the row's id in ``related[j]`` (one uint64 per row each)."""
    n = len(geometry)
    if not n:
        return []
    packed = encode_annotations(layout, geometry, props, np.zeros(n, np.uint64))
    size = (len(packed) - 8 - 8 * n) // n
    fields: list[tuple[str, Any, Any]] = [("rec", "u1", (size,))]
    for j in range(len(related)):
        fields += [(f"c{j}", "<u4", ()), (f"i{j}", "<u8", ())]
    rows = np.zeros(n, np.dtype(fields))  # packed: no alignment padding
    rows["rec"] = np.frombuffer(packed, np.uint8, n * size, 8).reshape(n, size)
    for j, ids in enumerate(related):
        rows[f"c{j}"] = 1
        rows[f"i{j}"] = np.asarray(ids, np.uint64)
    buf, step = rows.tobytes(), rows.dtype.itemsize
    return [buf[i : i + step] for i in range(0, n * step, step)]


class RelatedAnnotations(StoreSource):
    """A point member as an annotation layer with relationships to id spaces.

    ``relationships`` maps a vertex attribute to its id space (``zv:relationships``);
    ``object_space`` (the member's ``zv:idSpace``) adds the relationship ``object`` (the
    rows' object ids). Served as a plain point store is (:class:`StoreSource`: the same lazily
    read spatial index and packed annotation ids), with ``by_id`` bodies carrying every
    relationship's id, and ``ann/rel_{name}/{segment}`` (the rows whose relationship value is
    ``segment``, ids ascending) found through ``collection``'s relationship index: only the
    chunks holding the answer are read (without a usable index, every chunk is scanned).
    """

    def __init__(
        self,
        ds: Dataset,
        name: str,
        relationships: dict[str, str],
        object_space: str | None = None,
        collection: Collection | None = None,
    ) -> None:
        super().__init__(ds, name)
        if self.kind != "annotations" or self.layout is None or self.layout.points != 1:
            raise InputError(f"{name}: only point members become annotation layers with relationships")
        if object_space is not None and "object" in relationships:
            raise InputError(f"{name}: a relationship attribute named 'object' clashes with the object ids")
        known = self._level(0).vertex_attributes
        for attr in relationships:
            if attr not in known:
                raise InputError(f"{name}: relationship {attr!r} is not a vertex attribute of the member")
            arr = known[attr]
            if np.dtype(arr.dtype).kind not in "iu" or arr.attrs.get("row_shape") not in (None, [], [1]):
                raise InputError(f"{name}: relationship {attr!r} is not a one-id-per-row integer attribute")
        props = tuple(p for p in self.layout.properties if p.source not in relationships)
        #: relationship name -> its id space (``object``: the rows' own object ids)
        self.relations: dict[str, str] = dict(relationships)
        if object_space is not None and self.has_objects:
            self.relations["object"] = object_space
        self.layout = AnnotationLayout(self.layout.rank, 1, props, tuple(self.relations))
        self.collection = collection
        self._values = lru_cache(maxsize=256)(self._values_uncached)

    @property
    def geometry(self) -> np.ndarray:
        """A ``(level-0 rows, 0)`` array holding nothing: the row count, for the exporter's
        choice between flat and sharded files."""
        return np.empty((self.ds.vertex_count(0), 0))

    def limits(self) -> list[int]:
        """As :meth:`StoreSource.limits`; a member of one level is counted chunk by chunk (the
        row count of each listed chunk summed into its index cell), reading no attribute."""
        if self._limits is None and len(self.levels) == 1:
            lv = self._level(0)
            lower, _ = self._corners()
            shift = np.rint(lower / lv.grid.chunk_shape).astype(np.int64)
            listed = np.asarray(lv.vertices.nonempty, np.int64).reshape(-1, lv.grid.ndim)
            cells, per = [np.zeros((0, lv.grid.ndim), np.int64)], [np.zeros(0, np.int64)]
            for start in range(0, len(listed), BATCH):
                part = listed[start : start + BATCH]
                found, _ = fetch_cells(lv, part, [], np.zeros(0, np.int64))
                cells.append((part - shift) // self.group(0))
                per.append(np.diff(found.offsets))
            _, owner = np.unique(np.concatenate(cells), axis=0, return_inverse=True)
            sums = np.bincount(owner.reshape(-1), weights=np.concatenate(per))
            self._limits = [max(1, int(sums.max(initial=0)))]
        return super().limits()

    def _values_uncached(self, k: int, chunk: tuple[int, ...]) -> dict[str, np.ndarray]:
        """Each relationship's uint64 ids of the rows of chunk ``chunk`` of level ``k``, in the
        order :meth:`_cell` gives them (the same box query, the same floor rule)."""
        attrs = [r for r in self.relations if r != "object"]
        geom, _, oids = self._cell(k, chunk)
        out: dict[str, np.ndarray] = {}
        if attrs and len(geom):
            cs = self._level(k).grid.chunk_shape
            c = np.asarray(chunk, np.int64)
            res = self.ds.query(bbox=(c * cs, np.nextafter((c + 1) * cs, -np.inf)), level=k, attributes=attrs)
            keep = np.all(np.floor(res.positions / cs) == c, axis=1)
            out = {a: np.asarray(res.attributes[a])[keep].reshape(-1).astype(np.uint64) for a in attrs}
        else:
            out = {a: np.zeros(0, np.uint64) for a in attrs}
        if "object" in self.relations:
            out["object"] = np.asarray(oids, np.uint64)
        return out

    def _chunk_of(self, annotation_id: int) -> tuple[int, tuple[int, ...], int]:
        """``(level, absolute chunk, row)`` of an annotation id; :class:`NotFound` when the id
        names no shown annotation."""
        k, lin, row = unpack_ids(annotation_id)
        if k not in self.levels:
            raise NotFound(f"annotation {annotation_id}: no level {k}")
        grid = self._level(k).grid
        if lin >= grid.n_cells:
            raise NotFound(f"annotation {annotation_id}: no cell {lin} in level {k}")
        at = np.asarray(np.unravel_index(lin, tuple(int(s) for s in grid.shape))) + grid.origin
        chunk = tuple(int(v) for v in at)
        if row >= len(self._cell(k, chunk)[0]) or not self._shown(k, chunk)[row]:
            raise NotFound(f"annotation {annotation_id} does not exist")
        return k, chunk, row

    def by_id(self, annotation_id: int) -> bytes:
        """One annotation with its id in every relationship."""
        assert self.layout is not None
        k, chunk, row = self._chunk_of(annotation_id)
        geom, props, _ = self._cell(k, chunk)
        values = self._values(k, chunk)
        related = [values[r][row : row + 1] for r in self.relations]
        return encode_one_annotation(self.layout, geom[row], {p: v[row] for p, v in props.items()}, related)

    def by_id_entries(self) -> Iterator[tuple[np.ndarray, list[bytes]]]:
        """Every annotation's ``by_id`` body, a listed chunk at a time (as :meth:`by_id`)."""
        assert self.layout is not None
        for k in self.levels if self.index_mode == NESTED else self.levels[:1]:
            for chunk in self._level(k).vertices.nonempty:
                key = tuple(int(v) for v in chunk)
                geom, props, _ = self._cell(k, key)
                rows = np.flatnonzero(self._shown(k, key))
                if not len(rows):
                    continue
                values = self._values(k, key)
                ids = pack_ids(k, np.full(len(rows), self._lin(k, chunk)), rows)
                related = [values[r][rows] for r in self.relations]
                bodies = single_annotation_bodies(
                    self.layout, geom[rows], {p: v[rows] for p, v in props.items()}, related
                )
                yield ids, bodies

    def _answer_chunks(self, relationship: str, segment: int) -> np.ndarray:
        """Level-0 chunks holding rows whose ``relationship`` is ``segment``, lexicographic:
        from the relationship index's positions when the collection has a current one, else
        every listed chunk."""
        listed = np.asarray(self._level(0).vertices.nonempty, np.int64).reshape(-1, self.layout.rank)  # type: ignore[union-attr]
        if self.collection is not None and relationship != "object":
            try:
                hits = self.collection.related([segment], relationship, member=self.name, attributes=False)
            except (StaleIndexError, InputError) as exc:
                LOG.warning("%s: rel_%s read without its index: %s", self.name, relationship, exc)
            else:
                cs = self._level(0).grid.chunk_shape
                chunks = np.floor(np.asarray(hits.positions, np.float64) / cs).astype(np.int64)
                return np.unique(chunks.reshape(-1, len(cs)), axis=0)
        return listed[np.lexsort(listed.T[::-1])] if len(listed) else listed

    def related_to(self, relationship: str, segment: int) -> bytes:
        """The ``rel_{relationship}/{segment}`` body: level-0 annotations whose relationship
        value is ``segment``, ids ascending (``object``: the plain store's ``rel_object``); the
        chunks of the answer are fetched in one batch, rows in each chunk's stored order (the
        order :meth:`by_id` resolves)."""
        assert self.layout is not None
        if relationship == "object":
            return self.related(segment)
        lv = self._level(0)
        chunks = self._answer_chunks(relationship, segment)
        chunks = chunks[lv.vertices.listed(chunks)] if len(chunks) else chunks
        if not len(chunks):
            return self._encode_parts([], [], [])
        names = [p.source for p in self.layout.properties]
        geoms, props, ids = [], [], []
        for start in range(0, len(chunks), BATCH):  # a scan without an index: bounded batches
            part = chunks[start : start + BATCH]
            cells, _ = fetch_cells(lv, part, [*names, relationship], np.zeros(0, np.int64))
            counts = np.diff(cells.offsets)
            lin = np.ravel_multi_index(tuple((part - lv.grid.origin).T), tuple(int(v) for v in lv.grid.shape))
            rows = np.arange(int(cells.offsets[-1])) - np.repeat(cells.offsets[:-1], counts)
            value = np.asarray(cells.attributes[relationship]).reshape(-1).astype(np.uint64)
            keep = value == np.uint64(segment)
            ids.append(pack_ids(0, np.repeat(lin, counts)[keep], rows[keep]))
            geoms.append(np.asarray(cells.positions)[keep])
            props.append({p.id: np.asarray(cells.attributes[p.source])[keep] for p in self.layout.properties})
        return self._encode_parts(geoms, props, ids)

    def _encode_parts(
        self, geoms: list[np.ndarray], props: list[dict[str, np.ndarray]], ids: list[np.ndarray]
    ) -> bytes:
        assert self.layout is not None
        names = [p.id for p in self.layout.properties]
        if not geoms:
            geoms, props, ids = (
                [np.zeros((0, self.layout.rank))],
                [{n: np.zeros(0) for n in names}],
                [np.zeros(0, np.uint64)],
            )
        all_ids = np.concatenate(ids)
        order = np.argsort(all_ids, kind="stable")
        values = {n: np.concatenate([p[n] for p in props])[order] for n in names}
        return encode_annotations(self.layout, np.concatenate(geoms)[order], values, all_ids[order])

    def get(self, path: str) -> tuple[bytes, str]:
        head, _, rest = path.strip("/").partition("/")
        kind, _, key = rest.partition("/")
        if head == "ann" and kind.startswith("rel_") and kind[4:] in self.relations:
            if not re.fullmatch(r"[0-9]{1,20}", key) or int(key) >= 1 << 64:
                raise NotFound(f"{self.name}: no annotation path {rest!r}")
            return self.related_to(kind[4:], int(key)), _BINARY
        if head == "ann" and kind.startswith("rel_"):
            raise NotFound(f"{self.name}: no annotation path {rest!r}")
        return super().get(path)

    def related_lists(self, relationship: str) -> Iterator[tuple[int, bytes]]:
        """Every segment ``relationship`` names (ascending) and its ``rel_`` body, from one
        pass over level 0 (held whole: a static copy reads everything anyway)."""
        assert self.layout is not None
        listed = np.asarray(self._level(0).vertices.nonempty, np.int64).reshape(-1, self.layout.rank)
        geoms, props, ids, values = [], [], [], []
        for chunk in listed[np.lexsort(listed.T[::-1])].tolist() if len(listed) else []:
            key = tuple(int(v) for v in chunk)
            geom, pr, _ = self._cell(0, key)
            geoms.append(geom)
            props.append(pr)
            ids.append(pack_ids(0, np.full(len(geom), self._lin(0, np.asarray(chunk))), np.arange(len(geom))))
            values.append(self._values(0, key)[relationship])
        if not geoms:
            return
        value = np.concatenate(values)
        order = np.lexsort((np.concatenate(ids), value))
        geom_all = np.concatenate(geoms)[order]
        names = [p.id for p in self.layout.properties]
        props_all = {n: np.concatenate([p[n] for p in props])[order] for n in names}
        ids_all, value = np.concatenate(ids)[order], value[order]
        starts = np.flatnonzero(np.r_[True, value[1:] != value[:-1]])
        for a, b in zip(starts.tolist(), np.r_[starts[1:], len(value)].tolist(), strict=True):
            body = encode_annotations(
                self.layout, geom_all[a:b], {n: v[a:b] for n, v in props_all.items()}, ids_all[a:b]
            )
            yield int(value[a]), body

    def _spatial(self) -> Iterator[tuple[int, tuple[int, ...], bytes]]:
        """Every cell of every spatial index level, empty ones included (a static copy has a
        file for each)."""
        assert self.layout is not None
        seen: set[tuple[int, tuple[int, ...]]] = set()
        for i, cell, body in self.spatial_entries():
            seen.add((i, cell))
            yield i, cell, body
        empty = encode_annotations(
            self.layout,
            np.zeros((0, self.layout.rank)),
            {p.id: np.zeros(0) for p in self.layout.properties},
            np.zeros(0, np.uint64),
        )
        for i, level in enumerate(self.spatial_levels()):
            for cell in np.ndindex(*level["grid_shape"]):
                if (i, cell) not in seen:
                    yield i, tuple(int(v) for v in cell), empty

    def entries(self) -> Iterator[tuple[str, bytes]]:
        """Every ``(path, body)`` of a static copy, the bytes :meth:`get` serves: segment
        properties, every annotation's ``by_id``, every related segment's list, every cell of
        the spatial index; ``ann/info`` last."""
        if self.has_objects:
            yield "props/info", self.get("props/info")[0]
        for ids, bodies in self.by_id_entries():
            yield from ((f"ann/by_id/{i}", body) for i, body in zip(ids.tolist(), bodies))
        for rel in self.relations:
            lists = self.related_entries() if rel == "object" else self.related_lists(rel)
            yield from ((f"ann/rel_{rel}/{s}", b) for s, b in lists)
        for i, cell, body in self._spatial():
            yield f"ann/spatial{i}/" + "_".join(map(str, cell)), body
        yield "ann/info", self.get("ann/info")[0]

    def sharded_entries(self) -> Iterator[tuple[str, bytes]]:
        """A static copy with every index (each ``spatial`` level, ``by_id``, each ``rel_``) as
        ``neuroglancer_uint64_sharded_v1`` shard files, and their ``sharding`` in ``ann/info``
        (last); spatial cells keyed by compressed Morton code, empty cells left out."""
        if self.has_objects:
            yield "props/info", self.get("props/info")[0]
        indexes: dict[str, tuple[np.ndarray, list[bytes]]] = {}
        by_id = list(self.by_id_entries())
        indexes["by_id"] = (
            np.concatenate([i for i, _ in by_id]) if by_id else np.zeros(0, np.uint64),
            [b for _, bodies in by_id for b in bodies],
        )
        for rel in self.relations:
            lists = list(self.related_entries() if rel == "object" else self.related_lists(rel))
            indexes[f"rel_{rel}"] = (np.array([s for s, _ in lists], np.uint64), [b for _, b in lists])
        cells: dict[int, tuple[list[tuple[int, ...]], list[bytes]]] = {}
        for i, cell, body in self.spatial_entries():
            if int.from_bytes(body[:8], "little"):
                cells.setdefault(i, ([], []))[0].append(cell)
                cells[i][1].append(body)
        levels = self.spatial_levels()
        for i, (names, bodies) in cells.items():
            grid = levels[i]["grid_shape"]
            indexes[f"spatial{i}"] = (
                compressed_morton(np.asarray(names).reshape(len(names), -1), grid),
                bodies,
            )
        specs = {}
        for key, (keys, values) in indexes.items():
            spec = choose_sharding(len(values), sum(len(v) for v in values))
            specs[key] = spec.to_json()
            for name, shard in encode_shards(keys, values, spec).items():
                yield f"ann/{key}/{name}", shard
        info = self.annotation_info()
        empty = choose_sharding(0, 0).to_json()
        info["by_id"]["sharding"] = specs["by_id"]
        for rel in info["relationships"]:
            rel["sharding"] = specs[rel["key"]]
        for level in info["spatial"]:
            level["sharding"] = specs.get(level["key"], empty)
        yield "ann/info", json.dumps(info, separators=(",", ":")).encode()

    def paths(self, ids: bool = True) -> Iterator[str]:
        yield from (p for p, _ in self.entries())


@dataclass
class CollectionView:
    """The sources of a collection and how they make layers: ``spaces`` maps an id space to
    ``(layer name, [mesh or skeleton sources])``; ``skipped`` lists members with no form."""

    collection: Collection
    sources: list[StoreSource]
    spaces: dict[str, tuple[str, list[StoreSource]]] = field(default_factory=dict)
    #: member name -> the id space of its object ids
    id_spaces: dict[str, str] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)


def collection_view(coll: Collection, mesh_format: str = "multilod") -> CollectionView:
    """Open every member of ``coll`` as a source (module docstring); :class:`InputError` when
    no member has a Neuroglancer form."""
    view = CollectionView(coll, [])
    for name, member in coll.members.items():
        ds = coll.member(name)
        try:
            plain = StoreSource(ds, name, mesh_format)
            kind = plain.kind
        except InputError as exc:
            LOG.warning("collection view: member %s skipped: %s", name, exc)
            view.skipped.append(name)
            continue
        if kind == "annotations" and plain.layout is not None and plain.layout.points == 1:
            src: StoreSource = RelatedAnnotations(ds, name, member.relationships, member.id_space, coll)
        else:
            src = plain
        view.sources.append(src)
        if member.id_space is not None:
            view.id_spaces[name] = member.id_space
        if member.id_space is not None and (kind != "annotations" or src.has_objects):
            view.spaces.setdefault(member.id_space, (member.id_space, []))[1].append(src)
    taken = {s.name for s in view.sources}
    for space, (layer, members) in list(view.spaces.items()):
        if layer in taken:
            view.spaces[space] = (f"{layer} segments", members)
    if not view.sources:
        raise InputError(f"no member of {coll.target} has a Neuroglancer form")
    return view


def _segments(sources: Sequence[StoreSource]) -> list[str]:
    ids = np.unique(np.concatenate([s.ds.object_ids().astype(np.uint64) for s in sources]))
    return [str(i) for i in ids[:MAX_SEGMENTS].tolist()]


def collection_state(view: CollectionView, base: str, layout: str = "4panel") -> dict[str, Any]:
    """A Neuroglancer state of the view: the id-space segmentation layers first, then the
    other members' layers in collection order; centred on the union of the members' bounds."""
    layers: list[dict[str, Any]] = []
    in_space = {id(s) for _, members in view.spaces.values() for s in members if s.kind != "annotations"}
    for i, (space_layer, members) in enumerate(view.spaces.values()):
        urls = [f"precomputed://{base}/{s.name}/{_FOLDERS[s.kind]}" for s in members]
        layers.append(
            {
                "type": "segmentation",
                "name": space_layer,
                "source": urls,
                "segments": _segments(members),
                "segmentDefaultColor": _COLOURS[i % len(_COLOURS)],
            }
        )
    for i, src in enumerate(view.sources, start=len(layers)):
        if id(src) in in_space:
            continue
        colour = _COLOURS[i % len(_COLOURS)]
        url = f"precomputed://{base}/{src.name}"
        if src.kind != "annotations":
            folder = "skeletons" if src.kind == "skeletons" else "mesh"
            segs = _segments([src])
            layers.append(dict(type="segmentation", name=src.name, source=[f"{url}/{folder}"], segments=segs))
            layers[-1]["segmentDefaultColor"] = colour
            continue
        layer: dict[str, Any] = {"type": "annotation", "name": src.name, "source": f"{url}/ann"}
        layer["annotationColor"] = colour
        if isinstance(src, RelatedAnnotations):
            links = {r: view.spaces[s][0] for r, s in src.relations.items() if s in view.spaces}
        elif src.has_objects and view.id_spaces.get(src.name) in view.spaces:  # lines, graphs
            links = {"object": view.spaces[view.id_spaces[src.name]][0]}
        else:
            links = {}
        if links:
            layer["linkedSegmentationLayer"] = links
            layer["filterBySegmentation"] = sorted(links)
        layers.append(layer)
    return framed_state(view.sources, layers, layout)


def framed_state(sources: Sequence[StoreSource], layers: list[dict[str, Any]], layout: str) -> dict[str, Any]:
    """A viewer state of ``layers`` in the first source's dimensions, centred on the union of the
    bounds of the sources of its dimensionality and zoomed to show all of it."""
    first = sources[0]
    same = [s for s in sources if s.ds.ndim == first.ds.ndim]
    lo = np.min([s.ds.bounds[0] for s in same], axis=0)
    hi = np.max([s.ds.bounds[1] for s in same], axis=0)
    extent = float(np.max(hi - lo)) or 1.0
    return {
        "dimensions": first.dimensions,
        "position": [float(v) for v in (lo + hi) / 2],
        "crossSectionScale": extent / 500,
        "projectionScale": extent * 1.6,
        "layers": layers,
        "layout": layout,
    }
