"""Meshes written batch by batch in bounded memory: :class:`MeshStream`.

The store is the one :func:`~zarr_vectors.kinds.meshes.write_meshes` writes from the
concatenated batches: a mesh's faces are records of three vertices, kept with the chunk
of their vertices when all three share one, else joined at their smallest corner's chunk
through the shared :class:`~zarr_vectors.engine.write.linkjoin.LinkJoin` (the graph
stream's machinery at ``link_width = 3``). Each mesh arrives whole in one batch.

With ``encoding="draco"`` a chunk's vertices and the faces inside it become one Draco blob
when the chunk's group is encoded; the rows Draco decodes to are the ones the cross-chunk
faces of the second sweep name, as in the one-shot writer.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from zarr_vectors.engine import (
    GroupCells,
    SweepContext,
    check_shards,
    draco_codec,
    fragment_owner_payloads,
    partition,
)
from zarr_vectors.errors import InputError, choice_message
from zarr_vectors.kinds.graph_stream import GraphStream
from zarr_vectors.kinds.graphs import vertex_locals
from zarr_vectors.kinds.meshes import ENCODINGS, draco_cells, mesh_ids_of, mesh_pairs, one_mesh

__all__ = ["MeshStream"]


class MeshStream(GraphStream):
    """Meshes given in batches: ``append(meshes, object_ids=)`` as for
    :func:`zarr_vectors.write_meshes` (a list of ``(vertices, faces)`` pairs or mesh objects,
    or one mesh), each with its own id (default: its number across batches)."""

    geometry_type: ClassVar[str] = "mesh"
    links_convention: ClassVar[str] = "explicit"
    kind_name: ClassVar[str] = "meshes"
    width: ClassVar[int] = 3
    create_keywords: ClassVar[tuple[str, ...]] = ("encoding", "quantization_bits", "compression_level")

    def __init__(
        self,
        *args: Any,
        encoding: str = "raw",
        quantization_bits: int = 11,
        compression_level: int = 7,
        **kwargs: Any,
    ) -> None:
        if encoding not in ENCODINGS:
            raise InputError(choice_message("encoding", encoding, ENCODINGS))
        if encoding == "draco" and not 1 <= int(quantization_bits) <= 30:
            raise InputError(f"quantization_bits must be in 1..30, got {quantization_bits}")
        if encoding == "draco" and not 0 <= int(compression_level) <= 10:
            raise InputError(f"compression_level must be in 0..10, got {compression_level}")
        super().__init__(*args, directed=False, **kwargs)
        self.encoding = encoding
        self.draco = (int(quantization_bits), int(compression_level))
        if self.ndim is None:
            self.ndim = 3
            self.shards = check_shards(self.options.shards, 3, self.target)

    def append(self, meshes: Any, *, object_ids: Any = None, **unknown: Any) -> None:  # type: ignore[override]
        """Add whole meshes; ``object_ids`` one distinct id per mesh, new to this writer."""
        self._per_batch(unknown, ("object_ids",))
        self._require_open()
        if one_mesh(meshes):
            meshes = [meshes]
        vertices, faces, counts = mesh_pairs(meshes)
        per_mesh = None if object_ids is None else mesh_ids_of(object_ids, len(counts))
        if per_mesh is not None:
            self._new_items(per_mesh, "mesh", "meshes")
        n = len(vertices)
        given = None if per_mesh is None else np.repeat(per_mesh, counts)
        self._given_ids(given, n)
        if per_mesh is None:
            per_mesh = self._meshes() + np.arange(len(counts), dtype=np.int64)
        pos = self._positions(vertices)
        self._attributes(None, n)
        self._queue({"positions": pos, "ids": np.repeat(per_mesh, counts), "edges": faces})
        self._items.append(per_mesh)
        self._edges += len(faces)

    def _meshes(self) -> int:
        return sum(len(m) for m in self._items)

    def _stored(self) -> int:
        """Draco keeps the faces inside a chunk in its blob: the links hold the others."""
        return self._edges if self.encoding == "raw" else self._links.count

    def _present(self, values: bool) -> list[str]:
        if not self._stored():
            return []
        return ["links"] + (["link_fragments"] if self._intra_count else [])

    def _metas(self, ctx: SweepContext) -> dict[str, tuple[Any, ...]]:
        out = super()._metas(ctx)
        if self.encoding == "draco":
            meta = {"zv_array": "vertices", "dtype": "float32", "encoding": "draco"}
            out["vertices"] = (meta, "data", [draco_codec(*self.draco)])
        return out

    def _encode(self, rows: dict[str, np.ndarray], ctx: SweepContext, lo: int, hi: int) -> GroupCells:
        if self.encoding == "raw":
            return super()._encode(rows, ctx, lo, hi)
        grid = ctx.grid
        by_vertex = np.argsort(rows["vertex"], kind="stable")  # the one-shot writer's input order
        vertex, pos = rows["vertex"][by_vertex], rows["positions"][by_vertex]
        part = partition(pos, grid, ctx.oids(rows["ids"][by_vertex]))
        faces = self._intra.read(lo, hi)
        order = np.argsort(faces["record"], kind="stable") if faces else np.zeros(0, np.int64)
        inside = np.searchsorted(vertex, faces["ends"][order]) if faces else np.zeros((0, 3), np.int64)
        blobs, part, frags = draco_cells(pos, inside, part, np.ones(len(inside), bool), *self.draco)
        cells = part.cells
        arrays: dict[str, tuple[np.ndarray, list[bytes]]] = {
            "vertices": (cells, blobs),
            "vertex_fragments": (cells, frags),
        }
        assert part.frag_object is not None
        if ctx.num_objects > 1:
            owners = fragment_owner_payloads(part.frag_cell, part.frag_local, part.frag_object, len(cells))
            arrays["fragment_attributes/object_id"] = (cells, owners)
        cell, local, _ = vertex_locals(part)  # rows in decoded order
        linear = np.ravel_multi_index(tuple(cells.T), tuple(int(s) for s in grid.shape)).astype(np.int64)
        zero = np.zeros(len(part.frag_cell), np.int64)
        fragments = (part.frag_object, zero, linear[part.frag_cell], part.frag_local)
        return GroupCells(arrays, fragments, vertex, linear[cell], local)
