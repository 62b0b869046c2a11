"""Static Neuroglancer precomputed files: the paths the server answers, written to a folder."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from zarr_vectors.errors import InputError, StoreExistsError
from zarr_vectors.neuroglancer.collection_view import (
    RelatedAnnotations,
    collection_of,
    collection_state,
    collection_view,
)
from zarr_vectors.neuroglancer.encode import encode_annotations
from zarr_vectors.neuroglancer.overview import OVERVIEW_MODES, LineOverview
from zarr_vectors.neuroglancer.server import open_sources, overviews_of, state_url, viewer_state
from zarr_vectors.neuroglancer.sharded import choose_sharding, compressed_morton, encode_shards
from zarr_vectors.neuroglancer.source import StoreSource

__all__ = ["SHARD_THRESHOLD", "export_neuroglancer"]

#: With ``sharding="auto"``, annotation layers of more annotation ids than this are sharded.
SHARD_THRESHOLD = 10_000


def export_neuroglancer(
    stores: Any,
    outdir: str | Path,
    *,
    base_url: str | None = None,
    overwrite: bool = False,
    storage_options: dict[str, Any] | None = None,
    mesh_format: str = "multilod",
    sharding: str | bool = "auto",
    overview: str | bool = "auto",
) -> dict[str, int]:
    """Write every source path of ``stores`` under ``outdir/<layer>/`` (unsharded precomputed
    files, hostable by any static web server), plus ``state.json``: a viewer state whose
    sources live under ``base_url`` (default ``http://127.0.0.1:8000``, what
    ``python -m http.server -d OUTDIR`` serves). Mesh stores are written as multi-resolution
    Draco meshes (``mesh_format="multilod"``), whose fragments Neuroglancer reads with HTTP
    range requests (the host must answer them), or as legacy meshes (``"legacy"``).

    ``sharding`` decides how annotation layers are written: ``False``, one file per
    annotation id, object and spatial cell; ``True``, each of those indexes (``by_id``,
    ``rel_object``, every ``spatial{i}`` level) as ``neuroglancer_uint64_sharded_v1`` shard
    files (:mod:`~zarr_vectors.neuroglancer.sharded`; the host must answer range requests),
    with the matching ``sharding`` entries in ``ann/info``; ``"auto"`` (the default), sharded
    when the layer has more than :data:`SHARD_THRESHOLD` annotation ids. Skeleton and
    multi-resolution mesh layers follow the same rule (shards keyed by object id, ``auto``
    counting objects); legacy meshes, which have no sharded form, are always unsharded.

    ``overview`` as in :func:`~zarr_vectors.neuroglancer.serve`: mesh and skeleton stores
    also get an overview of all their objects (:mod:`~zarr_vectors.neuroglancer.overview`)
    under ``outdir/<layer>/overview/`` (meshes: one unsharded multi-resolution mesh, segment
    1, and the objects' anchors under ``anchors/``; skeletons: a line annotation layer;
    annotations sharded by the rule above), and its layers in ``state.json``; ``"auto"`` when the store has coarse levels and more than 500 objects.

    A collection (a :class:`~zarr_vectors.Collection`, or one path of one) is written as one
    view (:mod:`~zarr_vectors.neuroglancer.collection_view`): a folder per member (point
    members' annotation layers sharded by the rule above, with their ``rel_<name>``
    indexes), no overviews.

    Returns ``{layer: files written}`` (an overview as ``"<layer> overview"``).

    Raises
    ------
    StoreExistsError
        ``outdir`` exists and is not empty, without ``overwrite``.
    InputError
        ``sharding`` or ``overview`` is not ``"auto"``, ``True`` or ``False``.
    """
    if sharding not in ("auto", True, False):
        raise InputError(f"sharding must be 'auto', True or False, not {sharding!r}")
    if overview not in OVERVIEW_MODES:
        raise InputError(f"overview must be 'auto', True or False, not {overview!r}")
    out = Path(outdir)
    if out.exists() and any(out.iterdir()) and not overwrite:
        raise StoreExistsError(f"{out} exists and is not empty; choose another folder or pass overwrite=True")
    coll = collection_of(stores, storage_options)
    view = None if coll is None else collection_view(coll, mesh_format)
    sources = view.sources if view is not None else open_sources(stores, storage_options, mesh_format)
    counts: dict[str, int] = {}
    made: set[Path] = set()
    for src in sources:
        if isinstance(src, RelatedAnnotations):  # a collection's point member
            counts[src.name] = 0
            flat = sharding is False or (sharding == "auto" and len(src.geometry) <= SHARD_THRESHOLD)
            for rel, body in src.entries() if flat else src.sharded_entries():
                _write(out / src.name / rel, body, made)
                counts[src.name] += 1
            continue
        if src.kind == "annotations":
            counts[src.name] = _write_annotations(src, out / src.name, sharding)
            continue
        if src.kind == "skeletons" or (src.kind == "mesh" and src.mesh_format == "multilod"):
            counts[src.name] = _write_objects(src, out / src.name, sharding)
            continue
        n = 0
        for rel in src.paths():
            _write(out / src.name / rel, src.get(rel)[0], made)
            n += 1
        counts[src.name] = n
    overviews = {} if view is not None else overviews_of(sources, overview)
    for name, ov in overviews.items():
        root = out / name / "overview"
        if isinstance(ov, LineOverview):
            counts[f"{name} overview"] = _write_annotations(ov, root, sharding)
            continue
        for rel in ov.paths():
            _write(root / rel, ov.get(rel)[0], made)
        counts[f"{name} overview"] = 3 + _write_annotations(ov.anchors(), root / "anchors", sharding)
    base = (base_url or "http://127.0.0.1:8000").rstrip("/")
    if view is not None:
        state = collection_state(view, base)
    else:
        state = viewer_state(sources, base, overviews=overviews)
    (out / "state.json").write_text(json.dumps(state, indent=1))
    (out / "viewer_url.txt").write_text(state_url("https://neuroglancer-demo.appspot.com/", state) + "\n")
    return counts


def _write(file: Path, body: bytes, made: set[Path]) -> None:
    if file.parent not in made:
        file.parent.mkdir(parents=True, exist_ok=True)
        made.add(file.parent)
    file.write_bytes(body)


def _write_annotations(src: StoreSource, root: Path, sharding: str | bool) -> int:
    """An annotation layer's files under ``root``: its indexes read whole (``{index: (keys,
    bodies)}``; keys are uint64 ids, or cell names ``x_y_z`` for spatial levels), then written
    one file per key (every cell of every spatial level, empty ones too) or as shards, and
    ``ann/info`` last (its ``limit`` entries are counted while the cells are encoded);
    returns the files written."""
    if sharding is False:
        return _stream_annotations(src, root)
    made: set[Path] = set()
    indexes: dict[str, tuple[Any, list[bytes]]] = {}
    id_chunks: list[np.ndarray] = []
    bodies: list[bytes] = []
    for ids, chunk_bodies in src.by_id_entries():
        id_chunks.append(ids)
        bodies.extend(chunk_bodies)
    if bodies:
        indexes["by_id"] = (np.concatenate(id_chunks), bodies)
    if src.has_objects:
        related = list(src.related_entries())
        indexes["rel_object"] = (np.array([i for i, _ in related], np.uint64), [b for _, b in related])
    for i, cell, body in src.spatial_entries():
        names, values = indexes.setdefault(f"spatial{i}", ([], []))
        names.append("_".join(map(str, cell)))
        values.append(body)
    n = _write_others(src, root, made)
    info = json.loads(src.get("ann/info")[0])
    n_ids = len(indexes["by_id"][1]) if "by_id" in indexes else 0
    if sharding == "auto" and n_ids <= SHARD_THRESHOLD:
        for index, (keys, values) in indexes.items():
            names = keys.tolist() if isinstance(keys, np.ndarray) else keys
            for key, body in zip(names, values):
                _write(root / "ann" / index / str(key), body, made)
            n += len(values)
        n += _write_empty_cells(src, root, info, made)
        _write(root / "ann" / "info", src.get("ann/info")[0], made)
        return n + 1
    specs: dict[str, dict[str, Any]] = {}
    for index, (keys, values) in indexes.items():
        if not isinstance(keys, np.ndarray):  # a spatial level: the cells' Morton codes
            grid = next(level["grid_shape"] for level in info["spatial"] if level["key"] == index)
            cells = np.array([[int(v) for v in k.split("_")] for k in keys], np.int64)
            keys = compressed_morton(cells.reshape(len(values), len(grid)), grid)
        spec = choose_sharding(len(values), sum(len(b) for b in values))
        specs[index] = spec.to_json()
        for name, shard in encode_shards(keys, values, spec).items():
            _write(root / "ann" / index / name, shard, made)
            n += 1
    _write(
        root / "ann" / "info", json.dumps(_sharded_info(info, specs), separators=(",", ":")).encode(), made
    )
    return n + 1


def _write_others(src: StoreSource, root: Path, made: set[Path]) -> int:
    """The paths of an annotation layer outside its indexes and ``ann/info`` (``props/info``)."""
    n = 0
    for rel in src.paths(ids=False):
        if rel != "ann/info" and not rel.startswith("ann/"):
            _write(root / rel, src.get(rel)[0], made)
            n += 1
    return n


def _write_empty_cells(src: StoreSource, root: Path, info: dict[str, Any], made: set[Path]) -> int:
    """An empty annotation list for every cell of every spatial level without a file yet
    (readers such as cloud-volume fetch every cell of the grid; Neuroglancer reads a missing
    cell as empty too); returns the files written."""
    assert src.layout is not None
    empty = encode_annotations(
        src.layout,
        np.zeros((0, src.layout.rank * src.layout.points)),
        {p.id: np.zeros(0) for p in src.layout.properties},
        np.zeros(0, np.uint64),
    )
    n = 0
    for level in info["spatial"]:
        folder = root / "ann" / level["key"]
        for cell in np.ndindex(*level["grid_shape"]):
            file = folder / "_".join(map(str, cell))
            if not file.exists():
                _write(file, empty, made)
                n += 1
    return n


def _stream_annotations(src: StoreSource, root: Path) -> int:
    """An annotation layer unsharded: each file written as soon as it is encoded, every
    empty cell an empty list, ``ann/info`` last."""
    made: set[Path] = set()
    n = 0
    for ids, bodies in src.by_id_entries():
        for i, body in zip(ids.tolist(), bodies):
            _write(root / "ann" / "by_id" / str(i), body, made)
        n += len(bodies)
    if src.has_objects:
        for i, body in src.related_entries():
            _write(root / "ann" / "rel_object" / str(i), body, made)
            n += 1
    for i, cell, body in src.spatial_entries():
        _write(root / "ann" / f"spatial{i}" / "_".join(map(str, cell)), body, made)
        n += 1
    n += _write_others(src, root, made)
    info = src.get("ann/info")[0]
    n += _write_empty_cells(src, root, json.loads(info), made)
    _write(root / "ann" / "info", info, made)
    return n + 1


def _write_objects(src: StoreSource, root: Path, sharding: str | bool) -> int:
    """A skeleton or multi-resolution mesh layer's files: per object one file (skeletons) or
    a manifest and a fragment file (meshes); sharded, shard files keyed by object id (a
    mesh's fragment data right before its manifest) and ``sharding`` in the ``info``."""
    made: set[Path] = set()
    folder = "skeletons" if src.kind == "skeletons" else "mesh"
    rels = list(src.paths())
    objects = [int(rel.split("/")[1].removesuffix(".index")) for rel in rels if _keyed(rel, folder)]
    if sharding is False or (sharding == "auto" and len(objects) <= SHARD_THRESHOLD):
        for rel in rels:
            _write(root / rel, src.get(rel)[0], made)
        return len(rels)
    others = [rel for rel in rels if not rel.startswith(f"{folder}/")]  # props/info
    for rel in others:
        _write(root / rel, src.get(rel)[0], made)
    keys = np.array(objects, np.uint64)
    if folder == "skeletons":
        bodies, prefixes = [src.get(f"skeletons/{i}")[0] for i in objects], None
    else:
        bodies = [src.get(f"mesh/{i}.index")[0] for i in objects]
        prefixes = [src.get(f"mesh/{i}")[0] for i in objects]
    sizes = sum(len(b) for b in bodies) + sum(len(b) for b in prefixes or [])
    spec = choose_sharding(len(bodies), sizes)
    shards = encode_shards(keys, bodies, spec, prefixes=prefixes)
    for name, shard in shards.items():
        _write(root / folder / name, shard, made)
    info = dict(json.loads(src.get(f"{folder}/info")[0]), sharding=spec.to_json())
    _write(root / folder / "info", json.dumps(info, separators=(",", ":")).encode(), made)
    return len(others) + len(shards) + 1


def _keyed(rel: str, folder: str) -> bool:
    """Whether ``rel`` is an object's entry of a sharded ``folder``: ``skeletons/{id}`` or
    ``mesh/{id}.index`` (a mesh's fragment file goes into the shard with its manifest)."""
    head, _, rest = rel.partition("/")
    return head == folder and rest != "info" and (folder != "mesh" or rest.endswith(".index"))


def _sharded_info(info: dict[str, Any], specs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """``ann/info`` with a ``sharding`` entry on every index written sharded (an index with
    no entries at all, written as nothing, reads as empty either way)."""
    empty = choose_sharding(0, 0).to_json()
    info["by_id"]["sharding"] = specs.get("by_id", empty)
    for rel in info["relationships"]:
        rel["sharding"] = specs.get(rel["key"], empty)
    for level in info["spatial"]:
        level["sharding"] = specs.get(level["key"], empty)
    return info
