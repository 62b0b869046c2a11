"""A Neuroglancer precomputed annotation layer, read through the storage layer.

:class:`AnnotationSource` opens a folder whose ``info`` is ``neuroglancer_annotations_v1`` (or
one holding ``ann/info``, the layout ``export neuroglancer`` writes per layer) and reads
annotations by id from the ``by_id`` index, sharded or not; the id list comes from that index
(sharded), a listing of a local folder, or the caller. :func:`open_layer` opens whichever
kind of layer a source holds.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from zarr_vectors.errors import InputError, PrecomputedFormatError
from zarr_vectors.neuroglancer.annotation_read import (
    ANNOTATION_TYPE,
    AnnotationInfo,
    decode_single_annotations,
    parse_annotation_info,
)
from zarr_vectors.neuroglancer.precomputed_read import parse_json
from zarr_vectors.neuroglancer.precomputed_source import LayerFiles, PrecomputedSource, ShardedIndex, u64_name
from zarr_vectors.neuroglancer.sharded_read import decode_data

__all__ = ["AnnotationSource", "Annotations", "open_layer"]

#: A batch of annotations: geometry (n, points, rank), properties, per relationship (counts, ids).
Annotations = tuple[np.ndarray, dict[str, np.ndarray], list[tuple[np.ndarray, np.ndarray]]]


class AnnotationSource(LayerFiles):
    """One annotation layer (module docstring)."""

    kind = "annotations"

    def __init__(self, url: Any, storage_options: dict[str, Any] | None = None, info: Any = None) -> None:
        super().__init__(url, storage_options)
        if info is None:
            self.prefix = "ann/"
            info = self._json("ann/info")
            if info is None:
                raise InputError(
                    f"no Neuroglancer precomputed annotations at {self.url} (no info, no ann/info)"
                )
        self.info: AnnotationInfo = parse_annotation_info(info, self.where("info"))
        folder = self.info.by_id + "/"
        spec = self.info.by_id_sharding
        self.sharded = None if spec is None else ShardedIndex(self, spec, folder)

    def segment_ids(self) -> np.ndarray:
        """Every annotation id (sorted uint64) of the ``by_id`` index: its shards when sharded,
        else a listing of a local folder; :class:`InputError` for a remote unsharded one."""
        if self.sharded is not None:
            return self.sharded.all_keys()
        if self.backend.local_dir is None:
            raise InputError(
                f"{self.url} is an unsharded remote annotation layer, which has no index of its ids; give the "
                "annotation ids (ids=, or --ids)"
            )
        names = self.backend.list_dir(self.prefix + self.info.by_id)
        found = [u64_name(n.removesuffix(".gz")) for n in names]
        return np.unique(np.array([i for i in found if i is not None], np.uint64))

    def read(self, ids: np.ndarray) -> tuple[Annotations, list[int]]:
        """The annotations ``ids`` decoded together, and the ids the index does not hold."""
        ids = np.asarray(ids, np.uint64)
        folder = self.info.by_id + "/"
        if self.sharded is None:
            bodies = self.get_many([f"{folder}{i}" for i in ids.tolist()])
        else:
            places = self.sharded.locate(ids)
            fetched = iter(self.get_ranges([p for p in places if p is not None]))
            bodies = []
            for place in places:
                body = None if place is None else next(fetched)
                if place is not None:
                    where = self.where(f"{place[0]} at {place[1]}")
                    if body is None or len(body) != place[2]:
                        raise PrecomputedFormatError(f"{where}: the entry lies past the end of the shard")
                    body = decode_data(body, self.sharded.spec, where)
                bodies.append(body)
        missing = [int(i) for i, b in zip(ids.tolist(), bodies) if b is None]
        present = [b for b in bodies if b is not None]
        where = self.where(folder.rstrip("/"))
        return decode_single_annotations(present, self.info, where), missing


def open_layer(url: Any, kind: str | None, storage_options: dict[str, Any] | None) -> Any:
    """The :class:`AnnotationSource` or :class:`PrecomputedSource` of ``url``: annotations
    when its ``info`` (or ``ann/info``) is an annotation info or ``kind="annotations"``."""
    if kind == "annotations":
        return _annotations(url, storage_options, required=True)
    if kind is None:
        found = _annotations(url, storage_options, required=False)
        if found is not None:
            return found
    return PrecomputedSource(url, kind, storage_options)


def _annotations(url: Any, storage_options: dict[str, Any] | None, required: bool) -> AnnotationSource | None:
    probe = LayerFiles(url, storage_options)
    root, ann = probe.backend.get_many(["info", "ann/info"])
    where = f"{str(url).rstrip('/')}/info"
    info = None if root is None else parse_json(root, where)
    if info is not None and info.get("@type") == ANNOTATION_TYPE:
        return AnnotationSource(url, storage_options, info)
    if ann is not None and (required or info is None):
        return AnnotationSource(url, storage_options)
    if required:
        raise InputError(
            f"no Neuroglancer precomputed annotations at {url} (its info is not {ANNOTATION_TYPE!r})"
        )
    return None
