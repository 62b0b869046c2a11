"""Small stores whose object and group ids are already dense (``0 .. B-1``), one per writer.

Their bytes must not change when the library learns sparse ids (DECISIONS 8): the golden
digests in ``tests/fixtures/dense_ids_golden.json`` were recorded from the code before that
change. Regenerate them only for an intended format change::

    .venv/bin/python -m tests._dense_stores tests/fixtures/dense_ids_golden.json
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import numpy as np

from zarr_vectors.storage.protocol import GENERATION_KEY


def _swc(path: Path, n: int, offset: float) -> None:
    lines = [
        f"{i + 1} 3 {offset + i} {offset + 2 * i} {offset - i} {1 + i / 10} {i if i else -1}"
        for i in range(n)
    ]
    path.write_text("\n".join(lines) + "\n")


def write_dense_stores(root: Path) -> list[Path]:
    """Write every store into ``root``; return their paths. One file per cell (``shards=None``):
    the layout the digests were recorded in, before stores were sharded by default."""
    import shapely

    import zarr_vectors as zv
    from zarr_vectors.io.meshes import ingest_meshes
    from zarr_vectors.io.swc import ingest_swc

    rng = np.random.default_rng(7)
    out = []
    pts = rng.uniform(0, 100, (400, 3)).astype(np.float32)
    oids = rng.integers(0, 12, 400)
    oids[:12] = np.arange(12)  # every id 0..11 present
    zv.write_points(
        root / "points.zarr",
        pts,
        chunk_shape=50,
        bin_shape=25,
        object_ids=oids,
        attributes={"w": np.arange(400, dtype=np.float32)},
        object_attributes={
            "size": np.arange(12) * 2.0,
            "label": [f"o{i}" for i in range(12)],
            "short": np.arange(5, dtype=np.int32),
        },
        groups=[[0, 1, 2], [5], [3, 11]],
        group_attributes={"g": np.array([1.5, 2.5, 3.5])},
        shards=None,
    )
    out.append(root / "points.zarr")
    zv.write_points(
        root / "points_grow.zarr",
        pts,
        chunk_shape=50,
        object_ids=oids,
        object_attributes={"score": np.arange(20, dtype=np.float64)},
        groups={0: [1, 2], 1: [15], 2: []},
        shards=None,
    )
    out.append(root / "points_grow.zarr")
    zv.write_points(root / "points_plain.zarr", pts, chunk_shape=50, shards=None)
    out.append(root / "points_plain.zarr")
    zv.write_points(
        root / "points_pyr.zarr",
        pts,
        chunk_shape=50,
        object_ids=oids,
        object_attributes={"size": np.arange(12) * 1.0},
        shards=None,
    )
    zv.open(root / "points_pyr.zarr", mode="r+").build_pyramid([2])
    out.append(root / "points_pyr.zarr")
    lines = [rng.uniform(0, 60, (k, 2)).cumsum(axis=0) / k for k in (5, 9, 3, 14)]
    zv.write_lines(
        root / "lines.zarr",
        lines,
        chunk_shape=8,
        object_attributes={"len": np.array([5, 9, 3, 14])},
        groups=[[0, 3], [1, 2]],
        group_names=["a", "b"],
        shards=None,
    )
    out.append(root / "lines.zarr")
    gpos = rng.uniform(0, 50, (60, 3))
    edges = np.stack([np.arange(59), np.arange(1, 60)], axis=1)
    zv.write_graph(
        root / "graph.zarr",
        gpos,
        edges,
        chunk_shape=25,
        object_ids=np.repeat(np.arange(3), 20),
        object_attributes={"k": np.arange(3)},
        shards=None,
    )
    out.append(root / "graph.zarr")
    par = np.r_[-1, np.arange(29), -1, np.arange(30, 49)]
    spos = np.cumsum(rng.normal(0, 4, (50, 3)), axis=0)
    zv.write_skeleton(root / "skeleton.zarr", spos, par, chunk_shape=10, shards=None)
    out.append(root / "skeleton.zarr")
    zv.write_skeleton(
        root / "skeleton_ids.zarr",
        spos,
        par,
        chunk_shape=10,
        object_ids=np.repeat([1, 0], [30, 20]),
        object_attributes={"r": np.array([0.5, 1.5])},
        shards=None,
    )
    zv.open(root / "skeleton_ids.zarr", mode="r+").build_pyramid([2])
    out.append(root / "skeleton_ids.zarr")
    import trimesh

    meshes = [
        trimesh.creation.icosphere(subdivisions=2, radius=r).apply_translation([3 * r, 0, 0]) for r in (1, 2)
    ]
    zv.write_meshes(
        root / "meshes.zarr",
        meshes,
        chunk_shape=3,
        object_attributes={"r": np.array([1.0, 2.0])},
        shards=None,
    )
    out.append(root / "meshes.zarr")
    square = shapely.Polygon([(0, 0), (4, 0), (4, 4), (0, 4)], [[(1, 1), (2, 1), (2, 2), (1, 1)]])
    zv.write_geometries(
        root / "shapes.zarr",
        [square, shapely.LineString([(5, 5), (7, 9)]), shapely.Point(1, 8)],
        chunk_shape=3,
        object_attributes={"v": np.array([1, 2, 3])},
        shards=None,
    )
    out.append(root / "shapes.zarr")
    zv.write_geometries(
        root / "mpoints.zarr",
        [shapely.MultiPoint([(0, 0), (1, 2)]), shapely.Point(3, 3)],
        chunk_shape=2,
        shards=None,
    )
    out.append(root / "mpoints.zarr")
    swc_dir = root / "swc"
    swc_dir.mkdir()
    _swc(swc_dir / "alpha.swc", 20, 0.0)
    _swc(swc_dir / "beta.swc", 15, 30.0)
    ingest_swc(root / "swc.zarr", sorted(swc_dir.iterdir()), chunk_shape=10, progress=False, shards=None)
    out.append(root / "swc.zarr")
    mesh_dir = root / "meshfiles"
    mesh_dir.mkdir()
    for name, m in zip(("cell_a.ply", "cell_b.ply"), meshes):
        m.export(mesh_dir / name)
    ingest_meshes(
        root / "meshfiles.zarr", sorted(mesh_dir.iterdir()), chunk_shape=4.0, progress=False, shards=None
    )
    out.append(root / "meshfiles.zarr")
    return out


def digests(stores: list[Path]) -> dict[str, str]:
    """sha256 of every file of every store, keyed ``store/relative/path``; a root ``zarr.json``
    is hashed without its write generation (a new random token on every write)."""
    out = {}
    for store in stores:
        for f in sorted(p for p in store.rglob("*") if p.is_file()):
            data = f.read_bytes()
            if f == store / "zarr.json":
                doc = json.loads(data)
                doc["attributes"].pop(GENERATION_KEY, None)
                data = json.dumps(doc, indent=2, allow_nan=False).encode()
            out[f"{store.name}/{f.relative_to(store).as_posix()}"] = hashlib.sha256(data).hexdigest()[:16]
    return out


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        result = digests(write_dense_stores(Path(tmp)))
    Path(sys.argv[1]).write_text(json.dumps(result, indent=0, sort_keys=True) + "\n")
    print(f"{len(result)} files")
