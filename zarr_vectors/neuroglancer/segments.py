"""The object side of a store's Neuroglancer sources: skeletons, meshes and segment
properties, each read by object id on demand.

:class:`SegmentSource` is the base of :class:`~zarr_vectors.neuroglancer.source.StoreSource`;
it needs only the opened dataset, the store's levels and its units. Neuroglancer's segment ids
are uint64: an int64 store id below zero is asked for as its two's-complement value.
"""

from __future__ import annotations

from functools import _lru_cache_wrapper
from typing import Any

import numpy as np

from zarr_vectors.dataset import Dataset
from zarr_vectors.errors import InputError, UnknownIdError
from zarr_vectors.neuroglancer.encode import (
    encode_mesh_fragment,
    encode_skeleton,
    ng_dtype,
    segment_properties_info,
)
from zarr_vectors.neuroglancer.multilod import encode_object, multilod_info

__all__ = ["NotFound", "SegmentSource"]


class NotFound(LookupError):
    """No such source path (the server answers 404)."""


class SegmentSource:
    """Skeleton, mesh and segment-property sources of one opened store.

    Subclasses set every attribute below before serving; ``_multilod`` caches
    :meth:`_multilod_uncached`."""

    ds: Dataset
    name: str
    mesh_format: str
    #: the store's levels that are current (not stale), finest first
    levels: list[int]
    has_objects: bool
    #: metres per store unit, per axis
    metres: np.ndarray
    _levels: dict[int, Any]
    _multilod: _lru_cache_wrapper[tuple[bytes, bytes]]

    def _level(self, k: int) -> Any:
        """Level ``k`` of the store (looked up once)."""
        found = self._levels.get(k)
        if found is None:
            found = self._levels[k] = self.ds.level(k)
        return found

    def _user_id(self, segment: int) -> int:
        """The store's object id for Neuroglancer's uint64 ``segment`` (int64 ids wrap); a
        segment that is no object of level 0 (an id kept as given without rows) is not found."""
        if not self.has_objects:
            raise NotFound(f"{self.name} has no objects")
        lv = self._level(0)
        user = segment - (1 << 64) if lv.object_id_map.dtype == np.int64 and segment >= 1 << 63 else segment
        oids, found = lv.object_id_map.lookup([user])
        if not (found[0] and lv.are_objects(oids)[0]):
            raise NotFound(f"{self.name}: no object {segment}")
        return user

    def _object(self, segment: int, attributes: bool | list[str] = False) -> Any:
        try:
            return self.ds.objects([self._user_id(segment)], attributes=attributes)
        except UnknownIdError as exc:
            raise NotFound(f"{self.name}: no object {segment}") from exc

    def _to_nm(self, positions: np.ndarray) -> np.ndarray:
        return np.asarray(positions, np.float64) * (self.metres / 1e-9)

    def skeleton_attributes(self) -> list[tuple[str, str, int]]:
        """``(name, Neuroglancer type, components)`` of each numeric vertex attribute."""
        lv = self._level(0)
        out = []
        for name in sorted(lv.vertex_attributes):
            arr = lv.vertex_attributes[name]
            if np.dtype(arr.dtype).kind in "iuf":
                comps = int(np.prod(arr.attrs.get("row_shape") or [1]))
                out.append((name, ng_dtype(arr.dtype), comps))
        return out

    def skeleton_info(self) -> dict[str, Any]:
        """Skeleton ``info``: positions are stored in nanometres (no transform needed)."""
        attrs = [{"id": n, "data_type": t, "num_components": c} for n, t, c in self.skeleton_attributes()]
        info: dict[str, Any] = {
            "@type": "neuroglancer_skeletons",
            "transform": [1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0],
            "vertex_attributes": attrs,
        }
        if self.has_objects:
            info["segment_properties"] = "../props"
        return info

    def skeleton(self, segment: int) -> bytes:
        """One object's skeleton: vertices in nanometres, ``(parent, child)`` edges, attributes."""
        names = [n for n, _, _ in self.skeleton_attributes()]
        res = self._object(segment, names)
        edges = res.edges if res.edges is not None else np.zeros((0, 2), np.int64)
        values = [(res.attributes[n].reshape(len(res), -1), t) for n, t, _ in self.skeleton_attributes()]
        return encode_skeleton(self._to_nm(self._xyz(res.positions)), edges, values)

    def _xyz(self, positions: np.ndarray) -> np.ndarray:
        if positions.shape[1] != 3:
            raise InputError(
                f"{self.name}: skeletons and meshes need 3 axes, the store has {positions.shape[1]}"
            )
        return positions

    def mesh_info(self) -> dict[str, Any]:
        if self.mesh_format == "legacy":
            info: dict[str, Any] = {"@type": "neuroglancer_legacy_mesh"}
        else:
            info = multilod_info(self.metres / 1e-9)
        if self.has_objects:
            info["segment_properties"] = "../props"
        return info

    def mesh_fragment(self, segment: int) -> bytes:
        """One object's whole mesh (level 0) as a legacy fragment, in nanometres."""
        res = self._object(segment)
        faces = res.faces if res.faces is not None else np.zeros((0, 3), np.int64)
        return encode_mesh_fragment(self._to_nm(self._xyz(res.positions)), faces)

    def mesh_grid(self) -> tuple[np.ndarray, np.ndarray]:
        """``(chunk_shape, grid_origin)`` of every object's octree: LOD 0 nodes are level 0's
        chunks (the grid starts at the lower corner of its first chunk)."""
        grid = self._level(0).grid
        return np.asarray(grid.chunk_shape, np.float64), grid.origin * grid.chunk_shape

    def _multilod_uncached(self, segment: int) -> tuple[bytes, bytes]:
        """One object's manifest and fragment data: LOD ``i`` is store level ``levels[i]``
        (finest first, up to the first level without the object); its scale is the mean
        edge length of the object's triangles there (never below the finer LOD's)."""
        lods: list[tuple[np.ndarray, np.ndarray]] = []
        scales: list[float] = []
        for k in self.levels:
            try:
                res = self.ds.objects([self._user_id(segment)], level=k, attributes=False)
            except UnknownIdError as exc:
                if not lods:
                    raise NotFound(f"{self.name}: no object {segment}") from exc
                break
            faces = res.faces if res.faces is not None else np.zeros((0, 3), np.int64)
            pos = self._xyz(np.asarray(res.positions, np.float64))
            tri = pos[faces]
            edges = np.linalg.norm(tri - tri[:, [1, 2, 0]], axis=2)
            scale = float(edges.mean()) if len(faces) else float(self._level(k).grid.bin_shape.max())
            scales.append(max([scale, *scales]))
            lods.append((pos, faces))
        chunk, origin = self.mesh_grid()
        return encode_object(lods, chunk, origin, scales)

    def mesh_index(self, segment: int) -> bytes:
        """One object's multi-resolution manifest (``{id}.index``)."""
        return self._multilod(segment)[0]

    def mesh_data(self, segment: int) -> bytes:
        """One object's multi-resolution fragment data (``{id}``): Draco fragments in manifest order."""
        return self._multilod(segment)[1]

    def props_info(self) -> dict[str, Any]:
        """Segment properties: the object attributes of level 0, one row per object id."""
        if not self.has_objects:
            raise NotFound(f"{self.name} has no objects")
        columns = {n: np.asarray(self.ds.object_attributes(n)) for n in self.ds.object_attribute_names()}
        return segment_properties_info(self.ds.object_ids(), columns)
