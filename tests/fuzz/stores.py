"""The small base stores the fuzzer corrupts: one builder per kind, and what each operation reads.

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


def _sphere(center: np.ndarray, radius: float) -> tuple[np.ndarray, np.ndarray]:
    """A closed UV sphere: 6 rings x 10 segments."""
    rings, segs = 6, 10
    th = np.linspace(0, np.pi, rings + 1)[1:-1]
    ph = np.linspace(0, 2 * np.pi, segs, endpoint=False)
    body = np.stack(
        [
            np.outer(np.sin(th), np.cos(ph)),
            np.outer(np.sin(th), np.sin(ph)),
            np.repeat(np.cos(th)[:, None], segs, 1),
        ],
        axis=-1,
    ).reshape(-1, 3)
    verts = np.vstack([[0, 0, 1], body, [0, 0, -1]]) * radius + center
    faces = []
    for s in range(segs):
        t = (s + 1) % segs
        faces.append([0, 1 + s, 1 + t])
        for r in range(rings - 2):
            a, b = 1 + r * segs + s, 1 + r * segs + t
            faces += [[a, a + segs, b], [b, a + segs, b + segs]]
        last = 1 + (rings - 2) * segs
        faces.append([last + s, len(verts) - 1, last + t])
    return verts, np.asarray(faces)


def _points(path: Path, comp: str) -> None:
    import zarr_vectors as zv

    rng = np.random.default_rng(1)
    n = 200
    zv.write_points(
        path,
        rng.uniform(10, 290, (n, 3)).astype(np.float32),
        chunk_shape=150,
        bin_shape=50,
        object_ids=rng.integers(0, 10, n),
        object_attributes={"w": rng.random(10), "name": np.array(list("abcdefghij"))},
        attributes={
            "a": rng.random(n).astype(np.float32),
            "rgb": rng.integers(0, 255, (n, 3)).astype(np.uint8),
        },
        groups=[[0, 1], [2, 3, 4]],
        group_attributes={"s": np.array([1.0, 2.0])},
        **options(comp),
    )


def _walks(rng: np.random.Generator, n: int, m: int, step: float) -> list[np.ndarray]:
    return [np.clip(np.cumsum(rng.normal(0, step, (m, 3)), axis=0) + 150, 1, 299) for _ in range(n)]


def _lines(path: Path, comp: str) -> None:
    import zarr_vectors as zv

    rng = np.random.default_rng(2)
    zv.write_lines(
        path,
        _walks(rng, 6, 20, 30),
        chunk_shape=150,
        attributes={"t": rng.random(120).astype(np.float32)},
        object_attributes={"k": np.arange(6.0)},
        **options(comp),
    )


def _tree(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    pos = rng.uniform(0, 300, (150, 3)).astype(np.float32)
    parents = np.array([-1] + [int(rng.integers(max(0, i - 5), i)) for i in range(1, 150)])
    return pos, parents


def _skeleton(path: Path, comp: str) -> None:
    import zarr_vectors as zv

    pos, parents = _tree(np.random.default_rng(3))
    zv.write_skeleton(path, pos, parents, chunk_shape=150, **options(comp))


def _graph(path: Path, comp: str) -> None:
    import zarr_vectors as zv

    rng = np.random.default_rng(4)
    pos = rng.uniform(0, 300, (150, 3)).astype(np.float32)
    edges = np.stack([np.arange(150), (np.arange(150) * 7 + 3) % 150], axis=1)
    zv.write_graph(
        path,
        pos,
        edges,
        chunk_shape=150,
        edge_attributes={"w": rng.random(150).astype(np.float32)},
        object_ids=np.arange(150) % 3,
        **options(comp),
    )


def _meshes(path: Path, comp: str, encoding: str) -> None:
    import zarr_vectors as zv

    pair = [_sphere(np.array([100.0, 100, 100]), 60), _sphere(np.array([200.0, 180, 190]), 70)]
    zv.write_meshes(path, pair, chunk_shape=150, encoding=encoding, **options(comp))


def _polygons(path: Path, comp: str) -> None:
    import shapely

    import zarr_vectors as zv

    shapes = [
        shapely.Polygon([(10, 10), (90, 10), (90, 80), (10, 80)], [[(30, 30), (50, 30), (50, 50)]]),
        shapely.box(60, 60, 170, 140),
        shapely.MultiPolygon([shapely.box(120, 10, 140, 30), shapely.box(150, 150, 190, 190)]),
        shapely.Polygon([(5, 150), (100, 190), (40, 120)]),
        shapely.box(105, 95, 115, 190),
    ]
    zv.write_geometries(
        path, shapes, chunk_shape=50, object_attributes={"v": np.arange(5.0)}, **options(comp)
    )


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

    zv.write_lines(path, _walks(np.random.default_rng(6), 5, 25, 20), chunk_shape=100, **options(comp))
    zv.open(path, mode="r+").build_pyramid([2])


BOX3 = ([60.0] * 3, [200.0] * 3)
KINDS: dict[str, KindSpec] = {
    "points": KindSpec(_points, BOX3, [0, 3, 7]),
    "lines": KindSpec(_lines, BOX3, [0, 2, 5]),
    "skeleton": KindSpec(_skeleton, BOX3, [0]),
    "graph": KindSpec(_graph, BOX3, [0, 2]),
    "mesh": KindSpec(lambda p, c: _meshes(p, c, "raw"), BOX3, [0, 1]),
    "draco": KindSpec(lambda p, c: _meshes(p, c, "draco"), BOX3, [1]),
    "polygons": KindSpec(_polygons, ([40.0, 40.0], [150.0, 150.0]), [0, 2, 4]),
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
