"""Small deterministic inputs and stores of every kind, for tests that need "a store of kind X".

Inputs (pure numpy, no I/O): :func:`icosphere`, :func:`uv_sphere`, :func:`random_walks`,
:func:`clipped_walks`, :func:`random_tree`, :func:`ring_edges`, :func:`polygons`.

Stores: one ``<kind>_store(path, *, seed, ..., **writer_kwargs)`` per kind (points, lines,
graph, skeleton, mesh and meshes raw or Draco, polygons), each writing the same bytes for the
same arguments; :data:`STORES` maps a kind name to a one-argument builder with the defaults.
Writer keywords given by the caller (``compression=``, ``object_ids=``, ...) are passed through
and override the defaults.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import zarr_vectors as zv

# ------------------------------------------------------------------ inputs


def icosphere(
    subdivisions: int = 3, scale: float = 1.0, offset: Any = 0.0, dtype: Any = np.float64
) -> tuple[np.ndarray, np.ndarray]:
    """trimesh's icosphere of radius ``scale`` around ``offset``: ``(vertices, faces int64)``."""
    import trimesh

    m = trimesh.creation.icosphere(subdivisions=subdivisions)
    return (np.asarray(m.vertices) * scale + offset).astype(dtype), np.asarray(m.faces, dtype=np.int64)


def uv_sphere(
    center: Any = 150.0, radius: float = 120.0, rings: int = 10, segments: int = 16
) -> tuple[np.ndarray, np.ndarray]:
    """A closed UV sphere with poles: ``rings - 1`` latitude circles of ``segments`` vertices,
    outward winding. Needs no trimesh."""
    th = np.linspace(0, np.pi, rings + 1)[1:-1]
    ph = np.linspace(0, 2 * np.pi, segments, endpoint=False)
    body = np.stack(
        [
            np.outer(np.sin(th), np.cos(ph)),
            np.outer(np.sin(th), np.sin(ph)),
            np.repeat(np.cos(th)[:, None], segments, 1),
        ],
        axis=-1,
    ).reshape(-1, 3)
    verts = np.vstack([[0, 0, 1], body, [0, 0, -1]]) * radius + np.asarray(center)
    s = np.arange(segments)
    t = (s + 1) % segments
    south = len(verts) - 1
    last = 1 + (rings - 2) * segments
    per_segment = [np.stack([np.zeros_like(s), 1 + s, 1 + t], axis=1)[:, None]]
    for r in range(rings - 2):
        a, b = 1 + r * segments + s, 1 + r * segments + t
        quad = np.stack([np.stack([a, a + segments, b], 1), np.stack([b, a + segments, b + segments], 1)], 1)
        per_segment.append(quad)
    per_segment.append(np.stack([last + s, np.full_like(s, south), last + t], axis=1)[:, None])
    faces = np.concatenate(per_segment, axis=1).reshape(-1, 3)  # segment-major, pole to pole
    return verts, faces


def random_walks(
    rng: np.random.Generator,
    n: int,
    d: int = 3,
    lengths: tuple[int, int] = (2, 120),
    step: float = 15.0,
    start: tuple[float, float] = (100.0, 900.0),
) -> list[np.ndarray]:
    """``n`` Gaussian random walks of ``rng.integers(*lengths)`` vertices each, every one
    starting at a uniform point of ``[start[0], start[1])**d`` (float64, unclipped)."""
    return [
        np.cumsum(rng.normal(0, step, (int(rng.integers(*lengths)), d)), axis=0) + rng.uniform(*start, d)
        for _ in range(n)
    ]


def clipped_walks(
    rng: np.random.Generator, n: int, m: int, step: float, centre: float = 150.0, clip: tuple = (1, 299)
) -> list[np.ndarray]:
    """``n`` 3-D random walks of ``m`` vertices from ``centre``, clipped into ``clip``."""
    return [np.clip(np.cumsum(rng.normal(0, step, (m, 3)), axis=0) + centre, *clip) for _ in range(n)]


def random_tree(
    rng: np.random.Generator, n: int = 150, span: float = 300.0, reach: int = 5
) -> tuple[np.ndarray, np.ndarray]:
    """``(positions float32 uniform in [0, span), parents)``: vertex 0 is the root and every
    other vertex's parent is one of the ``reach`` vertices before it."""
    pos = rng.uniform(0, span, (n, 3)).astype(np.float32)
    parents = np.array([-1] + [int(rng.integers(max(0, i - reach), i)) for i in range(1, n)])
    return pos, parents


def ring_edges(n: int, stride: int = 7, shift: int = 3) -> np.ndarray:
    """``n`` directed edges ``i -> (stride * i + shift) % n``: every vertex has one out-edge."""
    return np.stack([np.arange(n), (np.arange(n) * stride + shift) % n], axis=1)


def polygons() -> list[Any]:
    """Five shapely shapes in [0, 200)**2: a polygon with a hole, boxes, a multipolygon, a
    triangle; some overlap."""
    import shapely

    return [
        shapely.Polygon([(10, 10), (90, 10), (90, 80), (10, 80)], [[(30, 30), (50, 30), (50, 50)]]),
        shapely.box(60, 60, 170, 140),
        shapely.MultiPolygon([shapely.box(120, 10, 140, 30), shapely.box(150, 150, 190, 190)]),
        shapely.Polygon([(5, 150), (100, 190), (40, 120)]),
        shapely.box(105, 95, 115, 190),
    ]


# ------------------------------------------------------------------ stores


def points_store(
    path: Path, *, seed: int = 2024, n: int = 200, objects: bool = True, names: bool = False, **kwargs: Any
) -> Path:
    """``n`` float32 points in [10, 290)**3 with attributes ``a`` (float32) and ``rgb`` (uint8 x 3);
    with ``objects``: ids 0-9, object attribute ``w`` (and ``name`` with ``names``), two groups
    with attribute ``s``. Chunks 150, bins 50."""
    rng = np.random.default_rng(seed)
    pos = rng.uniform(10, 290, (n, 3)).astype(np.float32)
    extra: dict[str, Any] = {}
    if objects:
        oids = rng.integers(0, 10, n)
        table: dict[str, Any] = {"w": rng.random(10)}
        if names:
            table["name"] = np.array(list("abcdefghij"))
        extra = dict(
            object_ids=oids,
            object_attributes=table,
            groups=[[0, 1], [2, 3, 4]],
            group_attributes={"s": np.array([1.0, 2.0])},
        )
    attributes = {
        "a": rng.random(n).astype(np.float32),
        "rgb": rng.integers(0, 255, (n, 3)).astype(np.uint8),
    }
    zv.write_points(
        path, pos, **{"chunk_shape": 150, "bin_shape": 50, "attributes": attributes, **extra, **kwargs}
    )
    return path


def lines_store(
    path: Path, *, seed: int = 2024, n: int = 6, m: int = 20, step: float = 30.0, **kwargs: Any
) -> Path:
    """``n`` polylines of ``m`` vertices (:func:`clipped_walks`) with vertex attribute ``t``; chunks 150."""
    rng = np.random.default_rng(seed)
    lines = clipped_walks(rng, n, m, step)
    t = rng.random(n * m).astype(np.float32)
    zv.write_lines(path, lines, **{"chunk_shape": 150, "attributes": {"t": t}, **kwargs})
    return path


def graph_store(path: Path, *, seed: int = 2024, n: int = 150, **kwargs: Any) -> Path:
    """``n`` float32 vertices in [0, 300)**3, :func:`ring_edges`, edge attribute ``w``; chunks 150."""
    rng = np.random.default_rng(seed)
    pos = rng.uniform(0, 300, (n, 3)).astype(np.float32)
    w = rng.random(n).astype(np.float32)
    zv.write_graph(path, pos, ring_edges(n), **{"chunk_shape": 150, "edge_attributes": {"w": w}, **kwargs})
    return path


def skeleton_store(path: Path, *, seed: int = 2024, n: int = 150, **kwargs: Any) -> Path:
    """One :func:`random_tree` of ``n`` vertices; chunks 150."""
    pos, parents = random_tree(np.random.default_rng(seed), n)
    zv.write_skeleton(path, pos, parents, **{"chunk_shape": 150, **kwargs})
    return path


def mesh_store(path: Path, *, encoding: str = "raw", **kwargs: Any) -> Path:
    """One :func:`uv_sphere` (radius 120 around (150, 150, 150), 10 x 16) as one mesh; chunks 150."""
    verts, faces = uv_sphere()
    zv.write_mesh(path, verts, faces, **{"chunk_shape": 150, "encoding": encoding, **kwargs})
    return path


def meshes_store(path: Path, *, encoding: str = "raw", **kwargs: Any) -> Path:
    """Two small UV spheres (6 x 10) as objects 0 and 1; chunks 150."""
    pair = [
        uv_sphere(np.array([100.0, 100, 100]), 60, 6, 10),
        uv_sphere(np.array([200.0, 180, 190]), 70, 6, 10),
    ]
    zv.write_meshes(path, pair, **{"chunk_shape": 150, "encoding": encoding, **kwargs})
    return path


def polygons_store(path: Path, **kwargs: Any) -> Path:
    """The five :func:`polygons` with object attribute ``v``; chunks 50."""
    zv.write_geometries(
        path, polygons(), **{"chunk_shape": 50, "object_attributes": {"v": np.arange(5.0)}, **kwargs}
    )
    return path


#: kind -> builder with its defaults (``path -> path``).
STORES: dict[str, Callable[[Path], Path]] = {
    "points": points_store,
    "lines": lines_store,
    "graph": graph_store,
    "skeleton": skeleton_store,
    "mesh": mesh_store,
    "draco": lambda p: mesh_store(p, encoding="draco"),
    "meshes": meshes_store,
    "polygons": polygons_store,
}
