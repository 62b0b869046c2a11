"""Overview sources: every object of a store in one Neuroglancer source, built from the
store's coarse levels (levels across objects, :meth:`Dataset.build_pyramid`).

* Mesh stores: :class:`MeshOverview`, one ``neuroglancer_multilod_draco`` source holding a
  single segment, :data:`OVERVIEW_SEGMENT`, whose octree covers the whole store. Its LOD ``i``
  is coarse store level ``levels[i]`` (finest first; level 0 is left to the per-object
  layer); a node's fragment holds the triangles of every object that meet the node
  (:mod:`~zarr_vectors.neuroglancer.multilod`: cut on the node grid, quantised per node).
  The frame is the per-object meshes' one: the same ``transform`` (store units to
  nanometres), stored model coordinates in store units; LOD 0's node is the finest coarse
  level's chunk. Vertex error: at most half a quantisation step, ``node / (2**16 - 1) / 2``
  per axis (plus float32 rounding of the grid), the same bound as the per-object meshes.
* Skeleton stores: :class:`LineOverview`, the store as a ``LINE`` annotation source with a
  spatial index (:mod:`~zarr_vectors.neuroglancer.spatial`: every level-0 edge once, the
  coarse index levels a sample) whose ``object`` relationship names each edge's skeleton.
  Neuroglancer's skeleton source is read one object at a time; an annotation index is read
  by region, coarse levels first, so the viewer draws all skeletons at scale.

Sources here answer ``get(path) -> (body, content type)`` like
:class:`~zarr_vectors.neuroglancer.source.StoreSource`; served and exported under
``{layer}/overview/``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
from zarr.storage import MemoryStore

from zarr_vectors.api import write_points as zv_write_points
from zarr_vectors.dataset import Dataset
from zarr_vectors.errors import InputError
from zarr_vectors.neuroglancer.multilod import (
    QUANTIZATION_BITS,
    assemble,
    lod_pieces,
    multilod_info,
    node_fragments,
)
from zarr_vectors.neuroglancer.source import NotFound, StoreSource

__all__ = [
    "AUTO_OBJECTS",
    "OVERVIEW_MODES",
    "OVERVIEW_RENDER_SCALE",
    "OVERVIEW_SEGMENT",
    "LineOverview",
    "MeshOverview",
    "overview_layers",
    "overview_of",
]

#: The one segment id of a mesh overview source.
OVERVIEW_SEGMENT = 1
#: Triangles cut and quantised at a time while an overview is encoded (bounds memory).
BATCH_FACES = 200_000
#: The mesh overview layer's ``meshRenderScale`` (Neuroglancer's "Resolution (mesh)"): how
#: much coarser than a pixel a drawn LOD may be. 100 keeps the coarsest LOD while the whole
#: store is in view (the first view: one fragment per coarse node) and refines as one zooms
#: in; the viewer's default (10) draws level 1 over the whole store at once.
OVERVIEW_RENDER_SCALE = 100
#: ``overview`` choices of serve and export: ``"auto"`` (coarse levels and more than
#: :data:`AUTO_OBJECTS` objects), always, never.
OVERVIEW_MODES = ("auto", True, False)
#: With ``overview="auto"``, stores of more objects than this get an overview: up to it, the
#: per-object layer's first view lists every object (the viewer state's segment limit).
AUTO_OBJECTS = 500

JSON = "application/json"
BINARY = "application/octet-stream"


def _json(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()


class MeshOverview:
    """The overview of a mesh store (module docstring): ``info``, ``1.index``, ``1``.

    Encoded on first use (the manifest lists every fragment's size, so the whole octree is
    built at once) and kept; thread-safe."""

    def __init__(self, ds: Dataset, levels: list[int], metres: np.ndarray) -> None:
        if not levels:
            raise InputError("an overview needs at least one coarse level (build_pyramid)")
        self.ds = ds
        #: the store levels of LOD 0, 1, ... (finest first)
        self.levels = list(levels)
        self.metres = np.asarray(metres, np.float64)
        grids = [ds.level(k).grid for k in [0, *self.levels]]
        #: LOD 0's node shape: the finest overview level's chunk, in store units
        self.chunk_shape = np.asarray(grids[1].chunk_shape, np.float64)
        #: the octree's lower corner: the lowest of the levels' grid corners
        self.grid_origin = np.min([g.origin * g.chunk_shape for g in grids], axis=0).astype(np.float64)
        self._encoded: tuple[bytes, bytes] | None = None
        self._anchors: StoreSource | None = None
        self._lock = threading.Lock()

    def info(self) -> dict[str, Any]:
        """The source's ``info``: the per-object meshes' transform and quantisation."""
        return multilod_info(self.metres / 1e-9)

    def encoded(self) -> tuple[bytes, bytes]:
        """``(manifest, fragment data)`` of :data:`OVERVIEW_SEGMENT`, built once."""
        with self._lock:
            if self._encoded is None:
                self._encoded = self._encode()
            return self._encoded

    def _encode(self) -> tuple[bytes, bytes]:
        chunk = self.chunk_shape.astype("<f4").astype(np.float64)
        origin = self.grid_origin.astype("<f4").astype(np.float64)
        frags: list[tuple[np.ndarray, list[bytes], np.ndarray]] = []
        scales: list[float] = []
        for i, k in enumerate(self.levels):
            cells, pieces, octants, edge = self._level_pieces(k, i, chunk, origin)
            nodes, blobs = node_fragments(cells, pieces, QUANTIZATION_BITS)
            frags.append((nodes, blobs, octants))
            bin_edge = float(np.max(self.ds.level(k).grid.bin_shape))
            scales.append(max([edge if edge > 0 else bin_edge, *scales]))
        return assemble(frags, chunk, origin, scales)

    def _level_pieces(
        self, k: int, lod: int, chunk: np.ndarray, origin: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
        """Level ``k`` as LOD ``lod``'s pieces (:func:`lod_pieces`), :data:`BATCH_FACES`
        triangles at a time, and the mean edge length of its triangles (0 without any)."""
        res = self.ds.read(level=k, attributes=False)
        pos = np.asarray(res.positions, np.float64)
        if pos.ndim != 2 or pos.shape[1] != 3:
            raise InputError("an overview of meshes needs 3 axes")
        faces = np.zeros((0, 3), np.int64) if res.faces is None else np.asarray(res.faces, np.int64)
        cells, pieces, octants = [], [], []
        total = 0.0
        for start in range(0, len(faces), BATCH_FACES):
            tri = pos[faces[start : start + BATCH_FACES]]
            total += float(np.linalg.norm(tri - tri[:, [1, 2, 0]], axis=2).sum())
            c, q, o = lod_pieces(tri, origin, chunk, lod, QUANTIZATION_BITS)
            cells.append(c.astype(np.int32))
            pieces.append(q.astype(np.uint16))
            octants.append(o)
        if not cells:
            none = np.zeros((0, 3), np.int64)
            return none, np.zeros((0, 3, 3), np.uint16), none, 0.0
        oct_all = np.unique(np.concatenate(octants), axis=0) if lod else np.zeros((0, 3), np.int64)
        edge = total / (3 * len(faces))
        return np.concatenate(cells).astype(np.int64), np.concatenate(pieces), oct_all, edge

    def anchors(self) -> StoreSource:
        """The objects' anchors as a ``POINT`` annotation source (built once): per object
        the vertex of its coarsest overview level nearest its mean there (a point on the
        drawn surface), its ``object`` relationship the object's id. Selecting one in
        Neuroglancer lists the object, linked to the per-object mesh layer."""
        with self._lock:
            if self._anchors is None:
                res = self.ds.read(level=self.levels[-1], attributes=False)
                pos = np.asarray(res.positions, np.float64)
                ids, owner = np.unique(np.asarray(res.object_ids), return_inverse=True)
                mean = (
                    np.stack([np.bincount(owner, pos[:, a], len(ids)) for a in range(3)], axis=1)
                    / np.bincount(owner, minlength=len(ids))[:, None]
                )
                order = np.lexsort((np.linalg.norm(pos - mean[owner], axis=1), owner))
                first = order[np.r_[True, owner[order][1:] != owner[order][:-1]]]
                grid = self.ds.level(0).grid
                # A store of its own (not fsspec's process-wide memory filesystem, whose
                # one dict every instance iterates): freed with this overview.
                points = zv_write_points(
                    MemoryStore(),
                    pos[first],
                    chunk_shape=grid.chunk_shape,
                    object_ids=ids,
                    axes=[{"name": a.name, "unit": a.unit} for a in self.ds.root.axes if a.type == "space"],
                )
                self._anchors = StoreSource(points, "anchors")
            return self._anchors

    def get(self, path: str) -> tuple[bytes, str]:
        """``(body, content type)`` of ``info``, ``1.index``, ``1`` or ``anchors/...``
        (:meth:`anchors`); :class:`NotFound` (the server's 404) for any other path."""
        rest = path.strip("/")
        if rest.startswith("anchors/"):
            return self.anchors().get(rest[8:])
        if rest == "info":
            return _json(self.info()), JSON
        if rest == f"{OVERVIEW_SEGMENT}.index":
            return self.encoded()[0], BINARY
        if rest == str(OVERVIEW_SEGMENT):
            return self.encoded()[1], BINARY
        raise NotFound(f"overview: no path {path[:100]!r} (its one segment is {OVERVIEW_SEGMENT})")

    def paths(self) -> Iterator[str]:
        """The mesh's paths (the anchors' are ``anchors/`` + :meth:`anchors` ``.paths()``)."""
        yield from ("info", f"{OVERVIEW_SEGMENT}.index", str(OVERVIEW_SEGMENT))


class LineOverview(StoreSource):
    """A skeleton store as a ``LINE`` annotation source (module docstring): every edge of
    level 0 once in the spatial index, with its skeleton's id as the ``object`` relationship."""

    @property
    def kind(self) -> str:
        return "annotations"


def overview_of(src: StoreSource, overview: str | bool = "auto") -> MeshOverview | LineOverview | None:
    """The overview source of a served or exported store: a mesh store's
    :class:`MeshOverview`, a skeleton store's :class:`LineOverview`, or None (another kind,
    ``overview=False``, or ``"auto"`` and no coarse level or at most :data:`AUTO_OBJECTS`
    objects).

    Raises
    ------
    InputError
        ``overview`` is not ``"auto"``, True or False, or True for a store that cannot have
        one (not meshes or skeletons, or meshes without a coarse level).
    """
    if overview not in OVERVIEW_MODES:
        raise InputError(f"overview must be 'auto', True or False, not {overview!r}")
    if overview is False or src.kind == "annotations":
        if overview is True:
            raise InputError(f"{src.name}: overviews are for mesh and skeleton stores")
        return None
    coarse = [k for k in src.levels if k > 0]
    if overview == "auto" and (not coarse or len(src.ds.object_ids()) <= AUTO_OBJECTS):
        return None
    if src.kind == "mesh":
        if not coarse:
            if overview is True:
                raise InputError(f"{src.name}: a mesh overview needs coarse levels; run build_pyramid first")
            return None
        return MeshOverview(src.ds, coarse, src.metres)
    return LineOverview(src.ds, src.name)


def overview_layers(
    name: str, source: MeshOverview | LineOverview, url: str, colour: str
) -> list[dict[str, Any]]:
    """The viewer-state layers of an overview served at ``url``: for meshes
    ``"{name} overview"`` (a segmentation layer showing :data:`OVERVIEW_SEGMENT`) and
    ``"{name} overview objects"`` (the anchors); for skeletons ``"{name} overview"``, the
    line annotations. The annotation layers' ``object`` relationship is linked to the
    per-object layer ``name``: selecting an annotation lists its object, which shows that
    object's own geometry there."""
    linked = {"annotationColor": colour, "linkedSegmentationLayer": {"object": name}}
    if isinstance(source, MeshOverview):
        mesh = {
            "type": "segmentation",
            "source": f"precomputed://{url}",
            "segments": [str(OVERVIEW_SEGMENT)],
            "segmentDefaultColor": colour,
            "meshRenderScale": OVERVIEW_RENDER_SCALE,
            "name": f"{name} overview",
        }
        anchors = {"type": "annotation", "source": f"precomputed://{url}/anchors/ann", **linked}
        return [mesh, dict(anchors, name=f"{name} overview objects")]
    return [
        {"type": "annotation", "source": f"precomputed://{url}/ann", **linked, "name": f"{name} overview"}
    ]
