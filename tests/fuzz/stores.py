"""The small base stores the fuzzer corrupts: one builder per kind (from ``tests/_builders.py``),
and what each operation reads.

Every builder is deterministic (fixed seeds), so a case id names the same bytes in every
session. :data:`KINDS` maps a kind to its builder and to the arguments the operations use
(box, object ids, levels); :func:`build` writes one base store per kind and compression.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

# tests/ is on sys.path here (pytest's rootdir conftest, the fuzz child, benchmarks/fuzz_stores.py)
from _builders import (
    clipped_walks,
    graph_store,
    lines_store,
    meshes_store,
    points_store,
    polygons_store,
    skeleton_store,
)

#: Codec choices of the base stores; ``-crc`` adds ``checksums=True`` (the crc32c codec), with
#: which a flipped payload bit must be an error rather than a different answer.
COMPRESSIONS = ("none", "zstd", "gzip", "blosc", "none-crc", "zstd-crc")


def options(comp: str) -> dict[str, Any]:
    """Writer keywords of a compression choice: ``"zstd-crc"`` -> zstd with checksums."""
    name, _, crc = comp.partition("-")
    return {"compression": name, "checksums": crc == "crc"}


@dataclass(frozen=True)
class KindSpec:
    """How to build a kind and what to ask of it: a box query, an object read, all ``levels``."""

    build: Callable[[Path, str], None]
    box: tuple[list[float], list[float]]
    ids: list[int]
    levels: tuple[int, ...] = (0,)


def _points(path: Path, comp: str) -> None:
    points_store(path, seed=1, names=True, **options(comp))


def _lines(path: Path, comp: str) -> None:
    lines_store(path, seed=2, object_attributes={"k": np.arange(6.0)}, **options(comp))


def _skeleton(path: Path, comp: str) -> None:
    skeleton_store(path, seed=3, **options(comp))


def _graph(path: Path, comp: str) -> None:
    graph_store(path, seed=4, object_ids=np.arange(150) % 3, **options(comp))


def _points_pyramid(path: Path, comp: str) -> None:
    import zarr_vectors as zv

    rng = np.random.default_rng(5)
    zv.write_points(
        path,
        rng.uniform(10, 290, (300, 3)).astype(np.float32),
        chunk_shape=100,
        bin_shape=50,
        object_ids=rng.integers(0, 6, 300),
        attributes={"a": rng.random(300).astype(np.float32)},
        **options(comp),
    )
    zv.open(path, mode="r+").build_pyramid([2])


def _lines_pyramid(path: Path, comp: str) -> None:
    import zarr_vectors as zv

    walks = clipped_walks(np.random.default_rng(6), 5, 25, 20)
    zv.write_lines(path, walks, chunk_shape=100, **options(comp))
    zv.open(path, mode="r+").build_pyramid([2])


BOX3 = ([60.0] * 3, [200.0] * 3)
KINDS: dict[str, KindSpec] = {
    "points": KindSpec(_points, BOX3, [0, 3, 7]),
    "lines": KindSpec(_lines, BOX3, [0, 2, 5]),
    "skeleton": KindSpec(_skeleton, BOX3, [0]),
    "graph": KindSpec(_graph, BOX3, [0, 2]),
    "mesh": KindSpec(lambda p, c: meshes_store(p, encoding="raw", **options(c)), BOX3, [0, 1]),
    "draco": KindSpec(lambda p, c: meshes_store(p, encoding="draco", **options(c)), BOX3, [1]),
    "polygons": KindSpec(
        lambda p, c: polygons_store(p, **options(c)), ([40.0, 40.0], [150.0, 150.0]), [0, 2, 4]
    ),
    "points_pyramid": KindSpec(_points_pyramid, BOX3, [1, 4], (0, 1)),
    "lines_pyramid": KindSpec(_lines_pyramid, BOX3, [0, 3], (0, 1)),
}


def base_name(kind: str, comp: str) -> str:
    return f"{kind}-{comp}"


def build(root: Path, kinds: Any = None, comps: Any = None) -> dict[str, str]:
    """Write one base store per kind and compression under ``root``; returns name -> path.

    Stores already present (a complete earlier build) are kept."""
    out = {}
    for kind in kinds or KINDS:
        for comp in comps or COMPRESSIONS:
            name = base_name(kind, comp)
            path = root / f"{name}.zarr"
            done = root / f"{name}.done"
            if not done.exists():
                if path.exists():
                    shutil.rmtree(path)
                KINDS[kind].build(path, comp)
                done.touch()
            out[name] = str(path)
    return out
