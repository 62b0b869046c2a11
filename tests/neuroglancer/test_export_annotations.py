"""Static Neuroglancer exports read back from disk the way third-party readers do: the
annotation spatial index with a reader written from the format's specification (every cell
of every level fetched, as cloud-volume does), legacy meshes with cloud-volume's fragment
lookup."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import zarr_vectors as zv
from tests import _ng_decode as dec
from zarr_vectors.neuroglancer import export_neuroglancer

RNG = np.random.default_rng(21)


def _rows(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a, np.float64).reshape(len(a), -1)
    return a[np.lexsort(a.T[::-1])]


def _read_index(ann: Path) -> tuple[dict[str, Any], list[tuple[int, tuple[int, ...], Any]]]:
    """The info and every cell of every spatial level of an unsharded annotation folder, read
    from the spec: files named ``x_y_z`` under each level's key, every grid cell present."""
    info = json.loads((ann / "info").read_text())
    cells = []
    for i, level in enumerate(info["spatial"]):
        assert "sharding" not in level
        for cell in np.ndindex(*level["grid_shape"]):
            body = (ann / level["key"] / "_".join(map(str, cell))).read_bytes()  # absent: an error
            cells.append((i, cell, dec.annotation_list(info, body)))
    return info, cells


@pytest.mark.parametrize(("sharding", "objects"), [(False, False), ("auto", True)])
def test_unsharded_index_holds_every_point_once(tmp_path: Path, sharding: Any, objects: bool) -> None:
    n = 1500
    pts = np.concatenate([RNG.uniform(0, 40, (n // 2, 3)), RNG.uniform(360, 400, (n - n // 2, 3))])
    extra = {"object_ids": RNG.integers(1, 6, n)} if objects else {}
    zv.write_points(
        tmp_path / "p.zarr", pts, chunk_shape=20, attributes={"t": np.arange(n, dtype="f4")}, **extra
    )
    zv.open(tmp_path / "p.zarr", mode="r+").build_pyramid([2, 2])  # subsampled, or averaged with objects
    export_neuroglancer(tmp_path / "p.zarr", tmp_path / "out", sharding=sharding)
    info, cells = _read_index(tmp_path / "out" / "p" / "ann")
    assert len(info["spatial"]) == 3
    ids = np.concatenate([c[2][2] for c in cells])
    assert len(np.unique(ids)) == len(ids) == n  # each point exactly once
    geom = np.concatenate([c[2][0] for c in cells])
    t = np.concatenate([c[2][1]["t"] for c in cells])
    # every annotation is a real point of the store, with its own attribute value
    assert np.array_equal(
        _rows(np.column_stack([geom, t])), _rows(np.column_stack([pts.astype("f4"), np.arange(n)]))
    )
    assert any(len(c[2][2]) == 0 for c in cells)  # the empty middle has empty cell files
    assert 0 < sum(len(c[2][2]) for c in cells if c[0] < 2) < n // 4  # coarse levels: a sample
    for i, level in enumerate(info["spatial"]):
        counts = [len(c[2][2]) for c in cells if c[0] == i]
        assert level["limit"] == max(1, *counts)  # the limit is the largest cell
    for j in ids[:: len(ids) // 15].tolist():  # by_id files agree with the cells
        g1 = dec.one_annotation(info, (tmp_path / "out" / "p" / "ann" / "by_id" / str(j)).read_bytes())[0]
        assert g1.tolist() == geom[np.flatnonzero(ids == j)[0]].tolist()
    assert len(os.listdir(tmp_path / "out" / "p" / "ann" / "by_id")) == n


def test_legacy_mesh_fragments_read_as_cloud_volume_reads_them(tmp_path: Path) -> None:
    trimesh = pytest.importorskip("trimesh")
    m = trimesh.creation.icosphere(subdivisions=1)
    meshes = [(m.vertices * 10 + 50 * k, m.faces) for k in range(3)]
    zv.write_meshes(tmp_path / "m.zarr", meshes, chunk_shape=40, object_ids=[11, 12, 13])
    export_neuroglancer(tmp_path / "m.zarr", tmp_path / "out", mesh_format="legacy")
    mesh_dir = tmp_path / "out" / "m" / "mesh"
    ds = zv.open(tmp_path / "m.zarr")
    for segid in (11, 12, 13):
        fragments = json.loads((mesh_dir / f"{segid}:0").read_text())["fragments"]
        # cloud-volume keys what it downloads by base name and takes the id from `<id>:0...`
        path_id_map = {frag: segid for frag in fragments}
        for frag in fragments:
            path = os.path.join(str(mesh_dir), frag)
            assert path_id_map[os.path.basename(path)] == segid
            assert int(re.search(r"\b(\d+):0.*?$", frag).group(1)) == segid  # type: ignore[union-attr]
            pos, faces = dec.legacy_fragment(Path(path).read_bytes())
            brute = ds.objects([segid])
            assert np.allclose(pos, brute.positions, rtol=1e-6) and np.array_equal(faces, brute.faces)
