"""The overview layer (``zarr_vectors.neuroglancer.overview``): one multi-resolution mesh of
every object of a store from its coarse levels, decoded with the spec-derived readers of
``precomputed_read``; the skeleton overview as line annotations; serve and export wiring."""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import zarr_vectors as zv
from zarr_vectors.errors import InputError
from zarr_vectors.neuroglancer import export_neuroglancer, serve
from zarr_vectors.neuroglancer.annotation_read import decode_single_annotations, parse_annotation_info
from zarr_vectors.neuroglancer.overview import (
    OVERVIEW_SEGMENT,
    LineOverview,
    MeshOverview,
    overview_of,
)
from zarr_vectors.neuroglancer.precomputed_read import (
    decode_multilod_fragments,
    decode_multilod_manifest,
    parse_mesh_info,
)
from zarr_vectors.neuroglancer.source import NotFound, StoreSource

N_MESHES = 40


def _icosphere(times: int) -> tuple[np.ndarray, np.ndarray]:
    import trimesh

    m = trimesh.creation.icosphere(subdivisions=times)
    return np.asarray(m.vertices), np.asarray(m.faces)


@pytest.fixture(scope="module")
def mesh_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("fast_simplification")
    v, f = _icosphere(2)
    rng = np.random.default_rng(11)
    path = tmp_path_factory.mktemp("ov") / "cells.zarr"
    meshes = [((v * rng.uniform(10, 30) + rng.uniform(40, 960, 3)).astype("f4"), f) for _ in range(N_MESHES)]
    zv.write_meshes(path, meshes, chunk_shape=125, object_ids=np.arange(100, 100 + N_MESHES))
    zv.open(path, mode="r+").build_pyramid([2, 2])
    return path


def _decoded(ov: MeshOverview) -> list[tuple[np.ndarray, np.ndarray]]:
    """Every LOD's ``(positions in nm, faces)`` through the spec readers."""
    manifest_bytes, data = ov.encoded()
    manifest = decode_multilod_manifest(manifest_bytes, "1.index")
    info = parse_mesh_info(json.loads(ov.get("info")[0]), "info")
    out = []
    for lod in range(manifest.num_lods):
        start, length = manifest.lod_range(lod)
        out.append(decode_multilod_fragments(manifest, data[start : start + length], lod, info, "1"))
    return out


def _nearest(points: np.ndarray, among: np.ndarray) -> np.ndarray:
    """Distance from each of ``points`` to the nearest of ``among`` (brute force, in blocks)."""
    out = [
        np.sqrt(((p[:, None, :] - among[None, :, :]) ** 2).sum(axis=2).min(axis=1))
        for p in np.array_split(points, max(1, len(points) // 256))
    ]
    return np.concatenate(out)


def _area(pos: np.ndarray, faces: np.ndarray) -> float:
    tri = pos[faces]
    return float(np.linalg.norm(np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0]), axis=1).sum() / 2)


def test_overview_lods_are_the_coarse_levels_of_every_object(mesh_store: Path) -> None:
    """LOD i holds store level i + 1: every vertex of every object there is a decoded vertex
    within the quantisation bound, the surface area is the level's (cutting on the node grid
    keeps it), and the fragments' nodes cover the level's bounds."""
    ds = zv.open(mesh_store)
    src = StoreSource(ds, "cells")
    ov = overview_of(src, True)
    assert isinstance(ov, MeshOverview) and ov.levels == [1, 2]
    manifest = decode_multilod_manifest(ov.encoded()[0], "1.index")
    assert manifest.num_lods == 2
    # per-object meshes and the overview share one frame: nm per store unit and the grid origin
    assert json.loads(ov.get("info")[0])["transform"] == src.mesh_info()["transform"]
    assert np.allclose(manifest.chunk_shape, ds.level(1).grid.chunk_shape)
    assert np.all(manifest.lod_scales[1:] >= manifest.lod_scales[:-1])
    for lod, (pos, faces) in enumerate(_decoded(ov)):
        k = lod + 1
        level = ds.read(level=k, attributes=False)
        node = manifest.chunk_shape * 2.0**lod
        bound = float(np.linalg.norm(node / (2**16 - 1) / 2)) * 1.001 + 1e-3  # half a step per axis
        dist = _nearest(np.asarray(level.positions, np.float64), pos)
        assert dist.max() <= bound, (k, dist.max(), bound)
        # every object with geometry at level k appears (all its vertices matched)
        found = np.unique(level.object_ids[dist <= bound])
        assert np.array_equal(found, ds.object_ids(level=k)) and len(found) == N_MESHES
        full = _area(np.asarray(level.positions, np.float64), np.asarray(level.faces))
        assert abs(_area(pos, faces) - full) <= 1e-3 * full
        # every non-empty node's box holds its vertices; together they cover the level's bounds
        lo = manifest.grid_origin + manifest.positions[lod][manifest.sizes[lod] > 0].min(axis=0) * node
        hi = manifest.grid_origin + (manifest.positions[lod][manifest.sizes[lod] > 0].max(axis=0) + 1) * node
        assert np.all(lo <= level.positions.min(axis=0)) and np.all(hi >= level.positions.max(axis=0))


def test_overview_is_one_request_of_every_object_where_per_object_meshes_take_two_each(
    mesh_store: Path,
) -> None:
    """Served: the state shows the overview layer (segment 1) beside the per-object layer,
    which starts empty; its three paths answer the encoded bytes, a byte range a slice."""
    with serve(mesh_store, client=False, overview=True) as server:
        state = json.loads(urllib.parse.unquote(server.viewer_url.split("#!", 1)[1]))
        layers = {layer["name"]: layer for layer in state["layers"]}
        assert list(layers) == ["cells", "cells overview", "cells overview objects"]
        assert layers["cells overview objects"]["linkedSegmentationLayer"] == {"object": "cells"}
        assert layers["cells"]["segments"] == []
        assert layers["cells overview"]["segments"] == [str(OVERVIEW_SEGMENT)]
        assert layers["cells overview"]["meshRenderScale"] == 100
        assert layers["cells overview"]["source"].endswith("/zv/cells/overview")
        ov = server.overviews["cells"]
        base = f"{server.url}/zv/cells/overview/"
        with urllib.request.urlopen(base + "1.index") as r:
            assert r.read() == ov.encoded()[0]
        req = urllib.request.Request(base + "1", headers={"Range": "bytes=10-99"})
        with urllib.request.urlopen(req) as r:
            assert r.status == 206 and r.read() == ov.encoded()[1][10:100]
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(base + "2.index")
        assert err.value.code == 404


def test_overview_is_off_by_default_for_few_objects_and_refused_without_levels(
    mesh_store: Path, tmp_path: Path
) -> None:
    src = StoreSource(zv.open(mesh_store), "cells")
    assert overview_of(src) is None  # 40 objects: the per-object layer lists them all
    assert overview_of(src, False) is None
    for call in (
        lambda: overview_of(src, "yes"),
        lambda: serve(mesh_store, client=False, overview="yes"),
        lambda: export_neuroglancer(mesh_store, tmp_path / "x", overview="yes"),
    ):
        with pytest.raises(InputError, match="overview must be 'auto', True or False, not 'yes'"):
            call()
    v, f = _icosphere(1)
    flat = zv.write_meshes(tmp_path / "flat.zarr", [(v * 5 + 20, f)], chunk_shape=50)
    with pytest.raises(InputError, match="needs coarse levels; run build_pyramid"):
        overview_of(StoreSource(flat, "flat"), True)
    with pytest.raises(NotFound, match="its one segment is 1"):
        MeshOverview(src.ds, [1], src.metres).get("7")


def test_anchors_name_every_object_once_on_its_coarsest_surface(mesh_store: Path) -> None:
    """The mesh overview's anchors: one point per object, a vertex of that object's coarsest
    overview level, whose ``object`` relationship is the object's id."""
    ds = zv.open(mesh_store)
    ov = overview_of(StoreSource(ds, "cells"), True)
    assert isinstance(ov, MeshOverview)
    info = parse_annotation_info(json.loads(ov.get("anchors/ann/info")[0]), "info")
    assert info.kind.upper() == "POINT" and info.relationships == ("object",)
    ids = []
    for _, _, body in ov.anchors().spatial_entries():
        n = int.from_bytes(body[:8], "little")
        ids.extend(np.frombuffer(body, "<u8", n, 8 + 12 * n).tolist())
    assert len(ids) == len(set(ids)) == N_MESHES
    coarse = ds.read(level=2, attributes=False)
    for aid in ids:
        geom, _, related = decode_single_annotations([ov.get(f"anchors/ann/by_id/{aid}")[0]], info, "by_id")
        (owner,) = related[0][1].tolist()
        mine = coarse.positions[coarse.object_ids == owner]
        assert np.min(np.abs(mine - geom.reshape(1, 3)).max(axis=1)) == 0  # one of its vertices


def test_export_writes_the_overview_and_its_layer(mesh_store: Path, tmp_path: Path) -> None:
    counts = export_neuroglancer(mesh_store, tmp_path / "out", overview=True)
    folder = tmp_path / "out" / "cells" / "overview"
    assert counts["cells overview"] == sum(1 for p in folder.rglob("*") if p.is_file())
    ov = overview_of(StoreSource(zv.open(mesh_store), "cells"), True)
    assert ov is not None
    for rel in ("info", "1.index", "1"):
        assert (folder / rel).read_bytes() == ov.get(rel)[0]
    state = json.loads((tmp_path / "out" / "state.json").read_text())
    assert [layer["name"] for layer in state["layers"]] == [
        "cells",
        "cells overview",
        "cells overview objects",
    ]
    anchors = ov.anchors()
    for rel in anchors.paths():
        assert (folder / "anchors" / rel).read_bytes() == anchors.get(rel)[0]
    assert state["layers"][1]["source"] == "precomputed://http://127.0.0.1:8000/cells/overview"


@pytest.mark.slow
def test_cloud_volume_reads_the_exported_overview(mesh_store: Path, tmp_path: Path) -> None:
    """cloud-volume, a reader this project did not write, reads segment 1 of the exported
    overview: its finest LOD is store level 1 (vertices within the quantisation bound)."""
    pytest.importorskip("cloudvolume")
    from cloudvolume import CloudVolume

    export_neuroglancer(mesh_store, tmp_path / "out", overview=True)
    scale = {
        "key": "1",
        "resolution": [1, 1, 1],
        "voxel_offset": [0, 0, 0],
        "size": [1024] * 3,
        "chunk_sizes": [[64] * 3],
        "encoding": "raw",
    }
    info = {"type": "segmentation", "data_type": "uint64", "num_channels": 1, "mesh": "overview"}
    cv = CloudVolume(f"precomputed://file://{tmp_path}/out/cells", info=dict(info, scales=[scale]))
    mesh = cv.mesh.get(OVERVIEW_SEGMENT, lod=0)
    mesh = mesh[OVERVIEW_SEGMENT] if isinstance(mesh, dict) else mesh
    level = zv.open(mesh_store).read(level=1, attributes=False)
    step = float(np.linalg.norm(np.full(3, 250.0) / (2**16 - 1) / 2)) * 1.001 + 1e-3
    dist = _nearest(np.asarray(level.positions, np.float64), np.asarray(mesh.vertices, np.float64))
    assert dist.max() <= step


def test_skeleton_overview_is_every_edge_once_with_its_skeleton(tmp_path: Path) -> None:
    """The skeleton overview: LINE annotations, each level-0 edge in the spatial index once
    per cell it crosses (once in total per level set), each related to its skeleton's id."""
    rng = np.random.default_rng(2)
    n_obj, per = 12, 30
    t = np.linspace(0, 1, per)
    pos = np.concatenate(
        [rng.uniform(100, 800, 3) + np.stack([150 * t, 80 * np.sin(4 * t), 60 * t], 1) for _ in range(n_obj)]
    )
    parents = np.concatenate([np.r_[-1, np.arange(per - 1) + i * per] for i in range(n_obj)])
    path = tmp_path / "sk.zarr"
    zv.write_skeleton(path, pos, parents, chunk_shape=250, object_ids=np.repeat(np.arange(5, 5 + n_obj), per))
    zv.open(path, mode="r+").build_pyramid([2])
    src = StoreSource(zv.open(path), "sk")
    ov = overview_of(src, True)
    assert isinstance(ov, LineOverview)
    info = parse_annotation_info(json.loads(ov.get("ann/info")[0]), "info")
    assert info.kind.upper() == "LINE" and info.relationships == ("object",)
    seen: dict[int, np.ndarray] = {}
    for i, cell, body in ov.spatial_entries():
        geom, ids = _cell(body, info)
        for aid, g in zip(ids.tolist(), geom):
            assert seen.setdefault(aid, g).tolist() == g.tolist()
    assert len(seen) == n_obj * (per - 1)  # every edge of level 0, across the index levels
    one = next(iter(seen))
    _, _, related = decode_single_annotations([ov.get(f"ann/by_id/{one}")[0]], info, "by_id")
    first = seen[one].reshape(2, 3)[0]
    owner = int(np.argmin(np.linalg.norm(pos - first, axis=1))) // per + 5
    assert related[0][1].tolist() == [owner]
    with serve(path, client=False, overview=True) as server:
        state = json.loads(urllib.parse.unquote(server.viewer_url.split("#!", 1)[1]))
    layer = state["layers"][1]
    assert layer["name"] == "sk overview" and layer["type"] == "annotation"
    assert layer["linkedSegmentationLayer"] == {"object": "sk"} and state["layers"][0]["segments"] == []


def _cell(body: bytes, info: Any) -> tuple[np.ndarray, np.ndarray]:
    """A spatial cell's ``(geometry (n, 6), ids)``: count, the annotations, then the ids."""
    n = int.from_bytes(body[:8], "little")
    geom = np.frombuffer(body, "<f4", 6 * n, 8).reshape(n, 6)
    ids = np.frombuffer(body, "<u8", n, 8 + 24 * n)
    return geom, ids


@pytest.mark.slow
def test_cli_export_overview_flags(
    mesh_store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import argparse

    from zarr_vectors.cli.main import main
    from zarr_vectors.cli.neuroglancer import add_overview_option

    assert main(["export", "neuroglancer", str(mesh_store), str(tmp_path / "on"), "--overview"]) == 0
    assert (tmp_path / "on" / "cells" / "overview" / "1.index").is_file()
    assert f"layer cells overview to {tmp_path / 'on' / 'cells' / 'overview'}" in capsys.readouterr().out
    assert main(["export", "neuroglancer", str(mesh_store), str(tmp_path / "off"), "--no-overview"]) == 0
    assert not (tmp_path / "off" / "cells" / "overview").exists()
    p = argparse.ArgumentParser()
    add_overview_option(p)
    assert [p.parse_args(a).overview for a in ([], ["--overview"], ["--no-overview"])] == [
        "auto",
        True,
        False,
    ]
