"""Multi-resolution Draco meshes (``neuroglancer_multilod_draco``): manifests and fragments,
decoded with the specification's decoder of tests/_ng_decode.py and DracoPy, against the
store's meshes at each level."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import zarr_vectors as zv
from tests import _ng_decode as dec
from zarr_vectors.neuroglancer.multilod import clip_to_grid
from zarr_vectors.neuroglancer.source import NotFound, StoreSource

pytest.importorskip("fast_simplification")
pytest.importorskip("DracoPy")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import trimesh

    d = tmp_path_factory.mktemp("multilod")
    m = trimesh.creation.icosphere(subdivisions=3)
    small = trimesh.creation.icosphere(subdivisions=2)
    zv.write_meshes(
        d / "cells.zarr",
        [(m.vertices * 120 + 500, m.faces), (small.vertices * 40 + [250, 300, 700], small.faces)],
        chunk_shape=100,
        object_ids=[7, 12],
        units="micrometer",
    )
    zv.open(d / "cells.zarr", mode="r+").build_pyramid([2, 2])
    return d / "cells.zarr"


def _decoded(src: StoreSource, segment: int) -> tuple[dict[str, Any], dict[str, Any], list[Any]]:
    info = json.loads(src.get("mesh/info")[0])
    manifest = dec.multilod_manifest(src.get(f"mesh/{segment}.index")[0])
    return info, manifest, dec.multilod_fragments(info, manifest, src.get(f"mesh/{segment}")[0])


def _soup(frags: list[Any]) -> np.ndarray:
    return np.concatenate([model[faces] for _, _, faces, model in frags])


def _normals(tri: np.ndarray) -> np.ndarray:
    return np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])


def _owner(points: np.ndarray, tri: np.ndarray) -> np.ndarray:
    """For each point, the triangle it lies in (smallest distance to the triangle's plane
    among those whose barycentric coordinates it has all >= -1e-3)."""
    a, e1, e2 = tri[:, 0], tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0]
    n = _normals(tri)
    n = n / np.linalg.norm(n, axis=1, keepdims=True)
    rel = points[:, None, :] - a[None]
    d11, d12, d22 = (e1 * e1).sum(1), (e1 * e2).sum(1), (e2 * e2).sum(1)
    r1, r2 = (rel * e1).sum(2), (rel * e2).sum(2)
    den = d11 * d22 - d12**2
    v = (d22 * r1 - d12 * r2) / den
    w = (d11 * r2 - d12 * r1) / den
    inside = (v >= -1e-3) & (w >= -1e-3) & (v + w <= 1 + 1e-3)
    score = np.abs((rel * n).sum(2)) + np.where(inside, 0.0, np.inf)
    return np.argmin(score, axis=1)


def _check_covers(pieces: np.ndarray, store_tri: np.ndarray, step: float) -> None:
    """The pieces tile the store's triangles: each lies in one of them with its winding, and
    the pieces in a triangle add up to its area."""
    area = np.linalg.norm(_normals(pieces), axis=1) / 2
    owner = _owner(pieces.mean(axis=1), store_tri)
    store_area = np.linalg.norm(_normals(store_tri), axis=1) / 2
    assert np.allclose(np.bincount(owner, area, len(store_tri)), store_area, rtol=1e-3, atol=4 * step**0.5)
    big = area > 1e-3 * store_area.mean()
    assert np.all((_normals(pieces[big]) * _normals(store_tri[owner[big]])).sum(1) > 0)  # winding kept


def _sorted_corners(tri: np.ndarray) -> np.ndarray:
    t = tri.reshape(-1, 3, 3)
    keys = np.lexsort(t.transpose(2, 0, 1)[::-1], axis=1)
    return np.take_along_axis(t, keys[..., None], axis=1).reshape(-1, 9)


def test_lod0_is_the_store_mesh_and_coarser_lods_its_levels(store: Path) -> None:
    ds = zv.open(store)
    src = StoreSource(ds, "cells")
    for segment in (7, 12):
        info, manifest, lods = _decoded(src, segment)
        assert info["@type"] == "neuroglancer_multilod_draco" and info["vertex_quantization_bits"] in (10, 16)
        assert len(lods) == len(ds.levels) == 3
        assert np.all(np.diff(manifest["lod_scales"]) >= 0) and np.all(manifest["lod_scales"] > 0)
        for lod, k in enumerate(ds.levels):
            res = ds.objects([segment], level=k)
            store_tri = (res.positions.astype(np.float64) * 1000)[res.faces]  # micrometres -> nm
            box = manifest["chunk_shape"] * 2.0**lod * 1000
            step = float(box.max()) / ((1 << info["vertex_quantization_bits"]) - 1)
            pieces = _soup(lods[lod])
            _check_covers(pieces, store_tri, step)
            if lod:
                continue
            # LOD 0: a store triangle inside one node is a fragment triangle, within one step
            origin = manifest["grid_origin"] * 1000
            node = np.floor((store_tri - origin) / box)
            whole = store_tri[np.all(node == node[:, :1], axis=(1, 2))]
            assert len(whole) > len(store_tri) // 2
            want, got = _sorted_corners(whole), _sorted_corners(pieces)
            for part in np.array_split(want, max(1, len(want) // 64)):
                diff = np.abs(part[:, None, :] - got[None]).max(axis=2).min(axis=1)
                assert np.all(diff <= step), diff.max()


def test_fragments_are_z_ordered_and_inside_their_nodes(store: Path) -> None:
    src = StoreSource(zv.open(store), "cells")
    info, manifest, lods = _decoded(src, 7)
    half = 1 << (info["vertex_quantization_bits"] - 1)
    transform = np.asarray(info["transform"]).reshape(3, 4)
    for lod, nodes in enumerate(manifest["positions"]):
        keys = dec.zorder(nodes)
        assert all(a < b for a, b in zip(keys[:-1], keys[1:])), f"LOD {lod} is not in Z-curve order"
        if lod:  # every node's parent is listed one LOD up, so Neuroglancer reaches it
            parents = {tuple(p) for p in manifest["positions"][lod].tolist()}
            assert {tuple(p) for p in (manifest["positions"][lod - 1] >> 1).tolist()} <= parents
        box = manifest["chunk_shape"] * 2.0**lod * np.diag(transform[:, :3])
        for node, q, faces, model in lods[lod]:
            lo = manifest["grid_origin"] * np.diag(transform[:, :3]) + node * box
            assert np.all(model >= lo - 1e-6 * box) and np.all(model <= lo + box * (1 + 1e-6))
            if lod:  # no triangle crosses the 2x2x2 split of its node
                corners = q[faces]
                below, above = (corners <= half).all(axis=1), (corners >= half).all(axis=1)
                assert np.all(below | above)
                # and each eighth holding triangles is a node one LOD down (maybe empty)
                eighths = {tuple(v) for v in (2 * node + (~below & above)).tolist()}
                assert eighths <= {tuple(p) for p in manifest["positions"][lod - 1].tolist()}
    assert sum(len(f) for f in lods[0]) > 1  # the sphere spans several chunks


def test_clip_to_grid_cuts_every_crossing_and_keeps_area() -> None:
    tri = np.array(
        [[[0.5, 0.5, 0.2], [3.7, 0.9, 0.4], [1.1, 2.6, 0.3]], [[0, 0, 0], [0.9, 0, 0], [0, 0.9, 0]]]
    )
    pieces = clip_to_grid(tri, np.zeros(3), np.ones(3))
    cell = np.floor(pieces.mean(axis=1))
    assert np.all(pieces >= cell[:, None] - 1e-12) and np.all(pieces <= cell[:, None] + 1 + 1e-12)
    area = np.linalg.norm(_normals(pieces), axis=1).sum()
    assert np.isclose(area, np.linalg.norm(_normals(tri), axis=1).sum())
    assert np.all(_normals(pieces)[:, 2] > 0)  # winding kept
    shapely = pytest.importorskip("shapely")
    big = shapely.Polygon(tri[0, :, :2])  # the cells it meets, and its area in each
    for c in np.unique(cell[cell[:, 0] >= 0], axis=0):
        mine = pieces[np.all(cell == c, axis=1)]
        inside = big.intersection(shapely.box(c[0], c[1], c[0] + 1, c[1] + 1)).area
        if c[0] == 0 and c[1] == 0:
            inside += 0.405  # the small triangle
        assert np.isclose(_normals(mine)[:, 2].sum() / 2, inside)  # areas projected on z
    expect = sum(big.intersects(shapely.box(i, j, i + 1, j + 1)) for i in range(4) for j in range(3))
    assert len(np.unique(cell, axis=0)) == expect


def test_server_answers_fragment_byte_ranges(store: Path) -> None:
    with zv.serve(store, client=False) as server:
        base = f"{server.url}/zv/cells/mesh"
        manifest = dec.multilod_manifest(urllib.request.urlopen(f"{base}/7.index", timeout=10).read())
        whole = urllib.request.urlopen(f"{base}/7", timeout=10).read()
        start = int(manifest["sizes"][0][0])
        size = int(manifest["sizes"][0][1])
        req = urllib.request.Request(f"{base}/7", headers={"Range": f"bytes={start}-{start + size - 1}"})
        with urllib.request.urlopen(req, timeout=10) as r:
            assert (
                r.status == 206
                and r.headers["Content-Range"] == f"bytes {start}-{start + size - 1}/{len(whole)}"
            )
            assert r.read() == whole[start : start + size]
    src = StoreSource(zv.open(store), "cells")
    with pytest.raises(NotFound):
        src.get("mesh/8.index")
    with pytest.raises(NotFound):
        src.get("mesh/7:0")  # the legacy paths are not served with multi-resolution meshes


def test_byte_ranges_and_mesh_formats(store: Path) -> None:
    from zarr_vectors.neuroglancer.server import _byte_range

    assert _byte_range("bytes=2-5", 10) == (2, 6)
    assert _byte_range("bytes=7-", 10) == (7, 10)
    assert _byte_range("bytes=-3", 10) == (7, 10)
    assert _byte_range("bytes=4-100", 10) == (4, 10)
    assert _byte_range("bytes=10-12", 10) is None and _byte_range("bytes=1-2,4-5", 10) is None
    ds = zv.open(store)
    assert (
        json.loads(StoreSource(ds, "c", "legacy").get("mesh/info")[0])["@type"] == "neuroglancer_legacy_mesh"
    )
    with pytest.raises(zv.InputError):
        StoreSource(ds, "c", mesh_format="draco")


def test_an_object_without_triangles_is_one_empty_node() -> None:
    from zarr_vectors.neuroglancer.multilod import encode_object

    empty = (np.zeros((3, 3)), np.zeros((0, 3), np.int64))
    index, data = encode_object([empty, empty], np.full(3, 10.0), np.zeros(3), [1.0, 2.0])
    manifest = dec.multilod_manifest(index)
    assert data == b"" and [p.tolist() for p in manifest["positions"]] == [[[0, 0, 0]], [[0, 0, 0]]]
    assert [s.tolist() for s in manifest["sizes"]] == [[0], [0]]


def test_coarse_triangles_without_finer_ones_get_an_empty_finer_node() -> None:
    from zarr_vectors.neuroglancer.multilod import encode_object

    fine = (np.array([[1.0, 1, 1], [5, 1, 1], [1, 5, 1]]), np.array([[0, 1, 2]]))
    coarse = (np.array([[12.0, 1, 1], [16, 1, 1], [12, 5, 1]]), np.array([[0, 1, 2]]))  # in eighth (1, 0, 0)
    index, data = encode_object([fine, coarse], np.full(3, 10.0), np.zeros(3), [1.0, 2.0])
    manifest = dec.multilod_manifest(index)
    assert manifest["positions"][0].tolist() == [[0, 0, 0], [1, 0, 0]]
    assert manifest["sizes"][0][1] == 0 and manifest["sizes"][0][0] > 0  # (1, 0, 0): empty
    assert manifest["positions"][1].tolist() == [[0, 0, 0]] and manifest["sizes"][1][0] > 0
    info = {"vertex_quantization_bits": 16, "transform": [1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0]}
    lods = dec.multilod_fragments(info, manifest, data)
    assert np.allclose(lods[1][0][3][lods[1][0][2]].reshape(-1, 3).min(axis=0), [12, 1, 1], atol=1e-3)
