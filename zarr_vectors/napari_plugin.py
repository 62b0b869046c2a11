"""napari: results as layer data, and a reader plugin (npe2) that opens stores.

Layer data follow napari's conventions, so they need no napari to build: coordinates in
napari's axis order, the reverse of the store's (``x, y, z`` -> ``z, y, x``, as an image of
the same volume is indexed); a result becomes

* ``points``: every vertex, with the vertex attributes (``name_0 ..`` for several values
  per vertex) and ``object_id`` as features, when it has neither edges nor faces;
* ``shapes`` of ``shape_type="path"``, one per line or line piece, for lines;
* ``vectors`` (one per edge: its start and the step to its end) plus ``points`` for graphs
  and skeletons;
* ``surface`` ``(vertices, faces)`` for meshes.

The reader accepts a folder or ``.zip`` holding a Zarr Vectors store and reads the finest
level whose vertex count fits :data:`MAX_VERTICES` (``ZV_NAPARI_MAX_VERTICES`` in the
environment sets another budget).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from zarr_vectors.dataset import open as open_store
from zarr_vectors.result import Result
from zarr_vectors.tables import attribute_columns, axis_names, edges_of

__all__ = ["MAX_VERTICES", "layer_data", "napari_get_reader", "read_store"]

#: Vertices the reader loads at most (it picks the finest level that fits).
MAX_VERTICES = 2_000_000

LayerData = tuple[Any, dict[str, Any], str]


def _features(result: Result) -> dict[str, np.ndarray]:
    cols = {} if result.object_ids is None else {"object_id": np.asarray(result.object_ids)}
    return cols | attribute_columns(result.attributes, len(result))


def layer_data(result: Result, name: str = "zarr-vectors") -> list[LayerData]:
    """napari layer data ``(data, keyword arguments, layer type)`` for ``result`` (see the
    module docstring); coordinates reversed into napari's axis order."""
    pos = np.ascontiguousarray(np.asarray(result.positions)[:, ::-1])
    axes = axis_names(result)[::-1]
    meta = {"axes": axes}
    if result.faces is not None:
        faces = np.asarray(result.faces, np.int64).reshape(-1, 3)
        return [((pos, faces), {"name": name, "metadata": meta}, "surface")]
    if result.line_offsets is not None:
        o = np.asarray(result.line_offsets)
        paths = [pos[o[i] : o[i + 1]] for i in range(len(o) - 1) if o[i + 1] - o[i] >= 2]
        return [(paths, {"name": name, "shape_type": "path", "edge_width": 1, "metadata": meta}, "shapes")]
    edges = edges_of(result)
    points = (pos, {"name": name, "features": _features(result), "size": 2, "metadata": meta}, "points")
    if edges is None:
        return [points]
    vectors = np.stack([pos[edges[:, 0]], pos[edges[:, 1]] - pos[edges[:, 0]]], axis=1)
    edge_layer = (vectors, {"name": f"{name} edges", "edge_width": 1, "metadata": meta}, "vectors")
    return [edge_layer, points]


def _is_store(path: Path) -> bool:
    if path.suffix.lower() == ".zip" and path.is_file():
        return True
    try:
        doc = json.loads((path / "zarr.json").read_text())
    except (OSError, ValueError):
        return False
    return isinstance(doc, dict) and "zarr_vectors" in (doc.get("attributes") or {})


def read_store(path: str | os.PathLike[str], max_vertices: int | None = None) -> list[LayerData]:
    """Layer data of the finest level of the store at ``path`` with at most ``max_vertices``
    vertices (default: :data:`MAX_VERTICES`, or ``ZV_NAPARI_MAX_VERTICES``)."""
    budget = (
        max_vertices
        if max_vertices is not None
        else int(os.environ.get("ZV_NAPARI_MAX_VERTICES", MAX_VERTICES))
    )
    ds = open_store(path)
    level = ds.level_for(max_vertices=budget)
    res = ds.read(level=level)
    layers = layer_data(res, name=Path(path).name)
    for _, kwargs, _ in layers:
        kwargs["metadata"]["level"] = level
    return layers


def napari_get_reader(path: str | list[str]) -> Callable[[Any], list[LayerData]] | None:
    """The npe2 reader hook: :func:`read_store` when ``path`` is a Zarr Vectors store (a
    folder whose ``zarr.json`` has ``zarr_vectors`` attributes, or a ``.zip``), else None."""
    if isinstance(path, list):
        if len(path) != 1:
            return None
        path = path[0]
    if not _is_store(Path(path)):
        return None

    def reader(p: Any) -> list[LayerData]:
        return read_store(p[0] if isinstance(p, list) else p)

    return reader
