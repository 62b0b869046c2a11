"""Pristine stores written by this library, and helpers to break copies of them on disk."""

from __future__ import annotations

import json
import shutil
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import zarr_vectors as zv
from tests._builders import graph_store, lines_store, mesh_store, points_store, skeleton_store

RNG_SEED = 2024


def _points_geo(path: Path, **kw: Any) -> None:
    """2-D longitude/latitude points in EPSG:4326: the root declares GeoZarr proj:/spatial:."""
    rng = np.random.default_rng(RNG_SEED)
    pos = np.column_stack([rng.uniform(5.9, 10.5, 120), rng.uniform(45.8, 47.8, 120)])
    zv.write_points(
        path,
        pos,
        chunk_shape=1.0,
        crs="EPSG:4326",
        axes=["lon", "lat"],
        object_ids=rng.integers(0, 4, 120),
        **kw,
    )


#: One file per cell (``shards=None``): the tests break cells of copies as files.
_CELL_FILES: dict[str, Callable[..., Any]] = {
    "points": lambda p, **kw: points_store(p, seed=RNG_SEED, bounds=([5.0] * 3, [295.0] * 3), **kw),
    "points_plain": lambda p, **kw: points_store(
        p, seed=RNG_SEED, objects=False, bounds=([5.0] * 3, [295.0] * 3), **kw
    ),
    "points_small": lambda p, **kw: points_store(
        p, seed=RNG_SEED, n=60, bounds=([5.0] * 3, [295.0] * 3), **kw
    ),
    "points_geo": _points_geo,
    "lines": lambda p, **kw: lines_store(p, seed=RNG_SEED, **kw),
    "graph": lambda p, **kw: graph_store(p, seed=RNG_SEED, **kw),
    "skeleton": lambda p, **kw: skeleton_store(p, seed=RNG_SEED, **kw),
    "mesh": mesh_store,
    "draco": lambda p, **kw: mesh_store(p, encoding="draco", **kw),
}
WRITERS: dict[str, Callable[[Path], Any]] = {
    **{k: (lambda p, w=w: w(p, shards=None)) for k, w in _CELL_FILES.items()},
    # The default layout (sharded), as users get it.
    **{f"{k}_sharded": (lambda p, w=w: w(p)) for k, w in _CELL_FILES.items()},
}


@pytest.fixture(scope="session")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """``pristine(kind)``: path of a store of that kind, written once per session."""
    base = tmp_path_factory.mktemp("pristine")
    made: dict[str, Path] = {}

    def get(kind: str) -> Path:
        if kind not in made:
            if kind == "draco":
                pytest.importorskip("zarr_vectors_draco")
            path = base / f"{kind}.zarr"
            WRITERS[kind](path)
            made[kind] = path
        return made[kind]

    return get


@pytest.fixture
def copy_of(pristine: Callable[[str], Path], tmp_path: Path) -> Callable[[str], Path]:
    """``copy_of(kind)``: a private copy of a pristine store, free to break."""

    def get(kind: str) -> Path:
        dst = tmp_path / f"{kind}.zarr"
        shutil.copytree(pristine(kind), dst)
        return dst

    return get


# ------------------------------------------------------------------ editing helpers


def edit_json(store: Path, node: str, fn: Callable[[dict[str, Any]], Any]) -> None:
    """Apply ``fn`` to the parsed ``<node>/zarr.json`` (node ``""`` is the root) and write it back."""
    path = store / node / "zarr.json" if node else store / "zarr.json"
    doc = json.loads(path.read_text())
    fn(doc)
    path.write_text(json.dumps(doc))


def attrs(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["attributes"]


def cells(store: Path, array: str) -> list[Path]:
    """Stored cell files of an array, sorted."""
    return sorted(p for p in (store / array / "c").rglob("*") if p.is_file())


def payload(cell: Path) -> bytes:
    """The payload of an uncompressed single-item vlen cell (our writer's default)."""
    raw = cell.read_bytes()
    count, length = struct.unpack_from("<II", raw)
    assert count == 1 and len(raw) == 8 + length
    return raw[8:]


def set_payload(cell: Path, data: bytes) -> None:
    cell.write_bytes(struct.pack("<II", 1, len(data)) + data)


def items(cell: Path) -> list[bytes]:
    """Items of an uncompressed multi-item vlen chunk (manifests, groups)."""
    raw = cell.read_bytes()
    (n,) = struct.unpack_from("<I", raw)
    out, pos = [], 4
    for _ in range(n):
        (length,) = struct.unpack_from("<I", raw, pos)
        out.append(raw[pos + 4 : pos + 4 + length])
        pos += 4 + length
    return out


def set_items(cell: Path, values: list[bytes]) -> None:
    cell.write_bytes(struct.pack("<I", len(values)) + b"".join(struct.pack("<I", len(v)) + v for v in values))


def chunk_of(store: Path, array: str, cell: Path) -> tuple[int, ...]:
    """Absolute chunk of a cell file (cell index plus the array's chunk_grid_origin)."""
    rel = cell.relative_to(store / array / "c").parts
    doc = json.loads((store / array / "zarr.json").read_text())
    origin = doc["attributes"].get("chunk_grid_origin", [0] * len(rel))
    return tuple(int(r) + o for r, o in zip(rel, origin))


def add_level(store: Path, source: Path, **meta: Any) -> None:
    """Copy ``source``'s level 0 in as level 1 of ``store`` (same grid), with level-1 bins
    twice the root's, and update the metadata to describe a two-level pyramid."""
    shutil.copytree(source / "0", store / "1")
    block = {"level": 1, "parent_level": 0, "coarsening_method": "manual", **meta}
    edit_json(store, "1", lambda d: attrs(d)["zarr_vectors_level"].update(block))

    def root(doc: dict[str, Any]) -> None:
        ms = attrs(doc)["multiscales"][0]
        base = ms["datasets"][0]["coordinateTransformations"][1]["translation"]
        ms["datasets"].append(
            {
                "path": "1",
                "coordinateTransformations": [
                    {"type": "scale", "scale": [2.0] * len(base)},
                    {"type": "translation", "translation": [2 * b for b in base]},
                ],
            }
        )

    edit_json(store, "", root)
