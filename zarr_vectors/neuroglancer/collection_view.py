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

:class:`RelatedAnnotations` reads its member's level 0 once, whole (the rows are held in
memory), and serves a one-level spatial index. Annotation ids are row numbers of that read.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from zarr_vectors.collection import Collection
from zarr_vectors.dataset import Dataset
from zarr_vectors.errors import FormatError, InputError
from zarr_vectors.neuroglancer.encode import AnnotationLayout, annotation_info, encode_annotations
from zarr_vectors.neuroglancer.sharded import choose_sharding, compressed_morton, encode_shards
from zarr_vectors.neuroglancer.source import NotFound, StoreSource

__all__ = [
    "CELL_TARGET",
    "CollectionView",
    "RelatedAnnotations",
    "collection_of",
    "collection_state",
    "collection_view",
    "framed_state",
    "single_annotation_bodies",
]

#: Mean annotations per spatial-index cell that a point member's one index level aims at.
CELL_TARGET = 2048
#: Segments listed as visible in the first view, per id space.
MAX_SEGMENTS = 500
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
    rows' object ids). Paths: ``ann/info``, ``ann/spatial0/{x}_{y}_{z}`` (every point in
    exactly one cell), ``ann/by_id/{row}``, ``ann/rel_{name}/{segment}`` (the rows whose
    relationship value is ``segment``, in row order).
    """

    def __init__(
        self, ds: Dataset, name: str, relationships: dict[str, str], object_space: str | None = None
    ) -> None:
        super().__init__(ds, name)
        if self.kind != "annotations" or self.layout is None or self.layout.points != 1:
            raise InputError(f"{name}: only point members become annotation layers with relationships")
        if object_space is not None and "object" in relationships:
            raise InputError(f"{name}: a relationship attribute named 'object' clashes with the object ids")
        known = set(ds.level(0).vertex_attributes)
        for attr in relationships:
            if attr not in known:
                raise InputError(f"{name}: relationship {attr!r} is not a vertex attribute of the member")
        props = tuple(p for p in self.layout.properties if p.source not in relationships)
        wanted = [p.source for p in props] + list(relationships)
        res = ds.query(None, attributes=wanted, object_ids=self.has_objects)
        #: relationship name -> (id space, uint64 value per row)
        self.relations: dict[str, tuple[str, np.ndarray]] = {}
        for attr, space in relationships.items():
            values = np.asarray(res.attributes[attr])
            if values.ndim != 1 or values.dtype.kind not in "iu":
                raise InputError(f"{name}: relationship {attr!r} is not a one-id-per-row integer attribute")
            self.relations[attr] = (space, values.astype(np.uint64))
        if object_space is not None and res.object_ids is not None:
            self.relations["object"] = (object_space, np.asarray(res.object_ids).astype(np.uint64))
        self.layout = AnnotationLayout(self.layout.rank, 1, props, tuple(self.relations))
        self.geometry = np.asarray(res.positions, np.float64)
        self.values = {p.id: np.asarray(res.attributes[p.source]) for p in props}
        self._grid()
        self._orders = {r: np.argsort(v, kind="stable") for r, (_, v) in self.relations.items()}

    def _grid(self) -> None:
        """One index level: ``cells`` per axis of equal size over the store's bounds."""
        n, rank = self.geometry.shape
        self.lower = np.asarray(self.ds.bounds[0], np.float64)
        self.upper = np.maximum(np.asarray(self.ds.bounds[1], np.float64), self.lower + 1e-9)
        self.cells = np.full(rank, max(1, int(np.ceil((n / CELL_TARGET) ** (1 / rank)))), np.int64)
        self.size = (self.upper - self.lower) / self.cells
        at = np.clip(np.floor((self.geometry - self.lower) / self.size).astype(np.int64), 0, self.cells - 1)
        lin = np.ravel_multi_index(tuple(at.T), tuple(self.cells.tolist())) if n else np.zeros(0, np.int64)
        self._by_cell = np.argsort(lin, kind="stable")
        self._cell_starts = np.searchsorted(lin[self._by_cell], np.arange(int(np.prod(self.cells)) + 1))

    def annotation_info(self) -> dict[str, Any]:
        assert self.layout is not None
        level = {
            "key": "spatial0",
            "grid_shape": [int(v) for v in self.cells],
            "chunk_size": [float(v) for v in self.size],
            "limit": max(1, int(np.diff(self._cell_starts).max(initial=0))),
        }
        return annotation_info(self.layout, self.dimensions, self.lower, self.upper, [level])

    def _encode(self, rows: np.ndarray) -> bytes:
        assert self.layout is not None
        values = {p: v[rows] for p, v in self.values.items()}
        return encode_annotations(self.layout, self.geometry[rows], values, rows.astype(np.uint64))

    def cell_rows(self, cell: Sequence[int]) -> np.ndarray:
        """The rows in one index cell (ascending); :class:`NotFound` outside the grid."""
        if len(cell) != len(self.cells) or any(not 0 <= c < s for c, s in zip(cell, self.cells.tolist())):
            raise NotFound(f"{self.name}: no index cell {'_'.join(map(str, cell))}")
        lin = int(np.ravel_multi_index(tuple(cell), tuple(self.cells.tolist())))
        return np.sort(self._by_cell[self._cell_starts[lin] : self._cell_starts[lin + 1]])

    def related_rows(self, relationship: str, segment: int) -> np.ndarray:
        """The rows whose ``relationship`` value is ``segment``, ascending."""
        values = self.relations[relationship][1]
        order = self._orders[relationship]
        lo, hi = (
            np.searchsorted(values[order], np.uint64(segment), side="left"),
            np.searchsorted(values[order], np.uint64(segment), side="right"),
        )
        return order[lo:hi]

    def by_ids(self, rows: np.ndarray) -> list[bytes]:
        """The ``by_id`` bodies of ``rows``."""
        assert self.layout is not None
        values = {p: v[rows] for p, v in self.values.items()}
        related = [v[rows] for _, v in self.relations.values()]
        return single_annotation_bodies(self.layout, self.geometry[rows], values, related)

    def get(self, path: str) -> tuple[bytes, str]:
        head, _, rest = path.strip("/").partition("/")
        if head == "props":
            return super().get(path)
        if head != "ann":
            raise NotFound(f"{self.name}: no source path {path!r}")
        if rest == "info":
            return json.dumps(self.annotation_info(), separators=(",", ":")).encode(), _JSON
        match = re.fullmatch(r"spatial0/([0-9]{1,19}(?:_[0-9]{1,19})*)", rest)
        if match:
            return self._encode(self.cell_rows([int(v) for v in match.group(1).split("_")])), _BINARY
        kind, _, key = rest.partition("/")
        if not re.fullmatch(r"[0-9]{1,20}", key) or int(key) >= 1 << 64:
            raise NotFound(f"{self.name}: no annotation path {rest!r}")
        if kind == "by_id":
            if int(key) >= len(self.geometry):
                raise NotFound(f"{self.name}: annotation {key} does not exist")
            return self.by_ids(np.array([int(key)]))[0], _BINARY
        if kind.startswith("rel_") and kind[4:] in self.relations:
            return self._encode(self.related_rows(kind[4:], int(key))), _BINARY
        raise NotFound(f"{self.name}: no annotation path {rest!r}")

    def related_lists(self, relationship: str) -> tuple[np.ndarray, list[bytes]]:
        """Every segment ``relationship`` names (sorted uint64) and its ``rel_`` body."""
        values = self.relations[relationship][1]
        order = self._orders[relationship]
        segments, starts = np.unique(values[order], return_index=True)
        bounds = np.append(starts, len(order))
        return segments, [self._encode(order[bounds[k] : bounds[k + 1]]) for k in range(len(segments))]

    def entries(self) -> Iterator[tuple[str, bytes]]:
        """Every ``(path, body)`` of a static copy (every cell of the grid, every row's
        ``by_id``, every related segment's list), bodies encoded in bulk; ``ann/info`` last."""
        if self.has_objects:
            yield "props/info", self.get("props/info")[0]
        for cell in np.ndindex(*self.cells.tolist()):
            yield "ann/spatial0/" + "_".join(map(str, cell)), self._encode(self.cell_rows(cell))
        rows = np.arange(len(self.geometry))
        yield from ((f"ann/by_id/{i}", body) for i, body in zip(rows.tolist(), self.by_ids(rows)))
        for rel in self.relations:
            segments, bodies = self.related_lists(rel)
            yield from ((f"ann/rel_{rel}/{s}", b) for s, b in zip(segments.tolist(), bodies))
        yield "ann/info", self.get("ann/info")[0]

    def sharded_entries(self) -> Iterator[tuple[str, bytes]]:
        """A static copy with every index (``spatial0``, ``by_id``, each ``rel_``) as
        ``neuroglancer_uint64_sharded_v1`` shard files, and their ``sharding`` in ``ann/info``
        (last); spatial cells keyed by compressed Morton code, empty cells left out."""
        if self.has_objects:
            yield "props/info", self.get("props/info")[0]
        indexes: dict[str, tuple[np.ndarray, list[bytes]]] = {}
        full = np.flatnonzero(np.diff(self._cell_starts))
        cells = np.stack(np.unravel_index(full, tuple(self.cells.tolist())), axis=1)
        bodies = [self._encode(self.cell_rows(c)) for c in cells.tolist()]
        indexes["spatial0"] = (compressed_morton(cells.reshape(len(full), -1), self.cells.tolist()), bodies)
        rows = np.arange(len(self.geometry))
        indexes["by_id"] = (rows.astype(np.uint64), self.by_ids(rows))
        for rel in self.relations:
            indexes[f"rel_{rel}"] = self.related_lists(rel)
        specs = {}
        for key, (keys, values) in indexes.items():
            spec = choose_sharding(len(values), sum(len(v) for v in values))
            specs[key] = spec.to_json()
            for name, shard in encode_shards(keys, values, spec).items():
                yield f"ann/{key}/{name}", shard
        info = self.annotation_info()
        info["by_id"]["sharding"] = specs["by_id"]
        for rel in info["relationships"]:
            rel["sharding"] = specs[rel["key"]]
        info["spatial"][0]["sharding"] = specs["spatial0"]
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
            src: StoreSource = RelatedAnnotations(ds, name, member.relationships, member.id_space)
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
            links = {r: view.spaces[s][0] for r, (s, _) in src.relations.items() if s in view.spaces}
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
