"""Neuroglancer precomputed sources: what the server sends, decoded with a decoder written from
the specification (tests/_ng_decode.py), against brute-force answers from the store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import zarr_vectors as zv
from tests import _ng_decode as dec
from zarr_vectors.neuroglancer.encode import (
    AnnotationLayout,
    Property,
    encode_annotations,
    encode_one_annotation,
)
from zarr_vectors.neuroglancer.source import NotFound, StoreSource

RNG = np.random.default_rng(7)


def _rows(a: np.ndarray) -> np.ndarray:
    """Rows sorted lexicographically (order-free comparison)."""
    a = np.asarray(a, np.float64).reshape(len(a), -1)
    return a[np.lexsort(a.T[::-1])]


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("ng")
    n = 4000
    pts = RNG.uniform(0, 1000, (n, 3))
    zv.write_points(
        d / "synapses.zarr",
        pts,
        chunk_shape=250,
        bin_shape=125,
        attributes={"score": RNG.random(n).astype("f4"), "kind": RNG.integers(0, 5, n).astype("u1")},
        object_ids=RNG.integers(1, 12, n) * 1000,
        object_attributes={"name": [f"cell{i}" for i in range(1, 12)], "volume": np.arange(1, 12) * 1.5},
    )
    zv.open(d / "synapses.zarr", mode="r+").build_pyramid([2, 2])
    t = np.linspace(0, 1, 40)
    pos = np.stack([200 + 600 * t, 500 + 200 * np.sin(6 * t), 500 + 100 * np.cos(4 * t)], 1)
    zv.write_skeleton(
        d / "neuron.zarr",
        np.concatenate([pos, pos + 50]),
        np.concatenate([np.arange(-1, 39), np.r_[-1, np.arange(40, 79)]]),
        chunk_shape=250,
        attributes={"radius": np.linspace(1, 9, 80).astype("f4")},
        object_ids=np.repeat([7, 8], 40),
        object_attributes={"name": ["seven", "eight"]},
    )
    import trimesh

    m = trimesh.creation.icosphere(subdivisions=2)
    zv.write_meshes(
        d / "soma.zarr",
        [(m.vertices * 120 + 500, m.faces)],
        chunk_shape=100,
        object_ids=[7],
        units="micrometer",
    )
    zv.open(d / "soma.zarr", mode="r+").build_pyramid([2, 2])
    lines = [np.cumsum(RNG.normal(0, 30, (15, 3)), axis=0) + 500 for _ in range(6)]
    zv.write_lines(d / "tracts.zarr", lines, chunk_shape=200, object_ids=np.arange(6) + 1)
    return {
        "points": d / "synapses.zarr",
        "skeleton": d / "neuron.zarr",
        "mesh": d / "soma.zarr",
        "lines": d / "tracts.zarr",
    }


def _get(src: StoreSource, path: str) -> Any:
    body, ctype = src.get(path)
    return json.loads(body) if ctype == "application/json" else body


def _all_cells(src: StoreSource, info: dict[str, Any]) -> list[tuple[int, tuple[int, ...], Any]]:
    out = []
    for i, level in enumerate(info["spatial"]):
        for cell in np.ndindex(*level["grid_shape"]):
            buf = _get(src, f"ann/{level['key']}/" + "_".join(map(str, cell)))
            out.append((i, cell, dec.annotation_list(info, buf)))
    return out


def test_record_layout_orders_properties_by_size_and_pads() -> None:
    props = (Property("a", "uint8", "a"), Property("b", "float32", "b"), Property("c", "int16", "c"))
    layout = AnnotationLayout(3, 1, props, ("object",))
    info = {
        "dimensions": {"x": 0, "y": 0, "z": 0},
        "annotation_type": "POINT",
        "relationships": [{"id": "object"}],
    }
    info["properties"] = [{"id": p.id, "type": p.type} for p in props]
    geom = np.array([[1, 2, 3], [4, 5, 6]], "f4")
    values = {"a": np.array([7, 8], "u1"), "b": np.array([0.5, 1.5], "f4"), "c": np.array([-3, 9], "i2")}
    buf = encode_annotations(layout, geom, values, np.array([11, 12], np.uint64))
    assert len(buf) == 8 + 2 * 20 + 2 * 8  # 12 + 4 + 2 + 1 = 19 bytes, padded to 20
    g, p, ids = dec.annotation_list(info, buf)
    assert g.tolist() == geom.tolist() and ids.tolist() == [11, 12]
    assert p["a"].tolist() == [7, 8] and p["b"].tolist() == [0.5, 1.5] and p["c"].tolist() == [-3, 9]
    one = encode_one_annotation(layout, geom[1], {k: v[1] for k, v in values.items()}, [np.array([5, 6])])
    g1, p1, rel = dec.one_annotation(info, one)
    assert g1.tolist() == [4, 5, 6] and int(p1["c"]) == 9 and rel[0].tolist() == [5, 6]


def test_annotation_info_grid_tiles_the_bounds(stores: dict[str, Path]) -> None:
    ds = zv.open(stores["points"])
    info = _get(StoreSource(ds, "p"), "ann/info")
    lo, hi = np.array(info["lower_bound"]), np.array(info["upper_bound"])
    assert len(info["spatial"]) == len(ds.levels)  # one index level per store level
    for level in info["spatial"]:
        assert np.allclose(np.array(level["grid_shape"]) * level["chunk_size"], hi - lo)
    assert np.all(ds.bounds[0] >= lo) and np.all(ds.bounds[1] < hi)
    assert [p["id"] for p in info["properties"]] == ["kind", "score"]
    assert info["relationships"] == [{"id": "object", "key": "rel_object"}]


def _each_once(cells: list[tuple[int, tuple[int, ...], Any]]) -> np.ndarray:
    """The geometry of each distinct annotation id of ``cells`` (a line may be in several)."""
    geom = np.concatenate([c[2][0] for c in cells])
    _, first = np.unique(np.concatenate([c[2][2] for c in cells]), return_index=True)
    return geom[first]


def _check_spec_index(src: StoreSource, info: dict[str, Any]) -> list[tuple[int, tuple[int, ...], Any]]:
    """The index read as the spec describes it (every cell of every level): each annotation id
    at one level (points: in one cell; lines: in every cell they cross, checked by the line
    tests), each point inside its cell, each level's ``limit`` its largest cell's count, and
    ``by_id`` answering every id with the cell's record."""
    cells = _all_cells(src, info)
    ids = np.concatenate([c[2][2] for c in cells])
    if info["annotation_type"] == "POINT":
        assert len(np.unique(ids)) == len(ids)
    level_of = {}
    for i, _, (_, _, cell_ids) in cells:
        assert len(np.unique(cell_ids)) == len(cell_ids)
        assert all(level_of.setdefault(j, i) == i for j in cell_ids.tolist())
    lo = np.array(info["lower_bound"])
    for i, level in enumerate(info["spatial"]):
        mine = [c for c in cells if c[0] == i]
        assert level["limit"] == max(1, max(len(c[2][2]) for c in mine))
        for _, cell, (g, _, _) in mine if info["annotation_type"] == "POINT" else ():
            start = lo + np.array(cell) * level["chunk_size"]
            assert np.all((g >= start - 1e-3) & (g <= start + level["chunk_size"] + 1e-3))
    for _, _, (g, _, cell_ids) in cells[:: max(1, len(cells) // 20)]:
        for j in range(0, len(cell_ids), max(1, len(cell_ids) // 3)):
            assert (
                dec.one_annotation(info, _get(src, f"ann/by_id/{cell_ids[j]}"))[0].tolist() == g[j].tolist()
            )
    return cells


def test_averaged_levels_index_a_sample_of_the_real_points_each_once(stores: dict[str, Path]) -> None:
    ds = zv.open(stores["points"])  # points with objects: coarse levels are averaged metavertices
    src = StoreSource(ds, "p")
    assert src.index_mode == "sample"
    info = _get(src, "ann/info")
    assert len(info["spatial"]) == len(ds.levels)  # one index level per store level
    cells = _check_spec_index(src, info)
    geom = np.concatenate([c[2][0] for c in cells])
    score = np.concatenate([c[2][1]["score"] for c in cells])
    brute = ds.query(level=0)  # every annotation is a real point, every point one annotation
    expect = np.column_stack([brute.positions.astype("f4"), brute.attributes["score"]])
    assert np.array_equal(_rows(np.column_stack([geom, score])), _rows(expect))
    per_level = np.array([sum(len(c[2][2]) for c in cells if c[0] == i) for i in range(len(ds.levels))])
    shown = np.cumsum(per_level)  # shown at index level i or coarser: about store level k's size
    for i, k in enumerate(reversed(ds.levels[1:])):
        want = ds.vertex_count(k)
        assert 0 < shown[i] and abs(shown[i] - want) <= 4 * np.sqrt(want) + 2, (shown, want)


def test_subsampled_levels_index_each_point_at_its_coarsest_level(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    pts = rng.uniform(0, 100, (3000, 3))
    pts[1] = pts[0]  # a duplicated point stays two annotations
    ds = zv.write_points(
        tmp_path / "cloud.zarr", pts, chunk_shape=25, attributes={"t": rng.random(3000).astype("f4")}
    )
    ds = zv.open(tmp_path / "cloud.zarr", mode="r+")
    ds.build_pyramid([2, 2])
    src = StoreSource(ds, "c")
    assert src.index_mode == "nested"
    info = _get(src, "ann/info")
    cells = _check_spec_index(src, info)
    for i, k in enumerate(reversed(ds.levels)):
        geom = np.concatenate([c[2][0] for c in cells if c[0] == i])
        here = ds.query(level=k).positions.astype("f4")
        if k != ds.levels[-1]:  # this level's points less those of the level above (multisets)
            above = _rows(ds.query(level=ds.levels[ds.levels.index(k) + 1]).positions.astype("f4"))
            mine = _rows(here)
            taken = np.zeros(len(mine), bool)
            for row in above:
                at = np.flatnonzero(np.all(mine == row, axis=1) & ~taken)
                taken[at[0]] = True  # the level above is a subset of this one
            here = mine[~taken]
        assert len(geom) and np.array_equal(_rows(geom), _rows(here))
    everything = np.concatenate([c[2][0] for c in cells])
    assert np.array_equal(_rows(everything), _rows(pts.astype("f4")))


def test_line_pyramids_index_each_level_0_edge_once(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    lines = [np.cumsum(rng.normal(0, 10, (40, 3)), axis=0) + 100 for _ in range(4)]
    ds = zv.write_lines(tmp_path / "l.zarr", lines, chunk_shape=40, object_ids=np.arange(4) + 1)
    zv.open(tmp_path / "l.zarr", mode="r+").build_pyramid([2])
    ds = zv.open(tmp_path / "l.zarr")
    src = StoreSource(ds, "l")
    info = _get(src, "ann/info")
    cells = _check_spec_index(src, info)
    geom = _each_once(cells)
    whole = ds.read()
    e = whole.edges
    expect = np.concatenate([whole.positions[e[:, 0]], whole.positions[e[:, 1]]], axis=1).astype("f4")
    assert np.array_equal(_rows(geom), _rows(expect))
    assert sum(len(c[2][2]) for c in cells if c[0] == 0) > 0  # the coarse level holds a sample
    # each edge is at one level, in every cell of that level its segment meets (closed boxes)
    lo = np.array(info["lower_bound"])
    edge_level: dict[int, int] = {}
    where: dict[int, set[tuple[int, ...]]] = {}
    for i, cell, (g, _, ids) in cells:
        for aid in ids.tolist():
            assert edge_level.setdefault(aid, i) == i
            where.setdefault(aid, set()).add(cell)
    assert len(edge_level) == len(e)
    t = np.linspace(0, 1, 2001)[:, None]
    for aid, i in list(edge_level.items())[::5]:
        g = dec.one_annotation(info, _get(src, f"ann/by_id/{aid}"))[0].astype(np.float64)
        size = np.array(info["spatial"][i]["chunk_size"])
        seg = g[:3] + t * (g[3:] - g[:3])  # the segment, densely sampled
        near = np.unique(np.floor((seg - lo) / size).astype(int), axis=0)
        want = set()
        for cell in {
            tuple(c)
            for c in (near[:, None, :] + np.array(list(np.ndindex(3, 3, 3))) - 1).reshape(-1, 3).tolist()
        }:
            a, b = lo + np.array(cell) * size, lo + (np.array(cell) + 1) * size
            if min(cell) >= 0 and np.any(np.all((seg >= a - 1e-6) & (seg <= b + 1e-6), axis=1)):
                want.add(cell)
        # float32 geometry here, float64 in the store: a cell the segment only touches may differ
        assert where[aid] >= want and len(where[aid] - want) <= 1, (where[aid], want)


def test_an_empty_cell_is_an_empty_list(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    pts = np.concatenate([rng.uniform(0, 9, (3000, 3)), rng.uniform(91, 99, (3000, 3))])
    t = rng.random(6000).astype("f4")
    ds = zv.write_points(tmp_path / "sparse.zarr", pts, chunk_shape=10, attributes={"t": t})
    src = StoreSource(ds, "s")
    info = _get(src, "ann/info")
    assert info["spatial"][0]["chunk_size"] == [10.0] * 3  # full chunks: one chunk per cell
    g, props, ids = dec.annotation_list(info, _get(src, "ann/spatial0/4_4_4"))
    assert len(g) == len(ids) == len(props["t"]) == 0
    assert len(dec.annotation_list(info, _get(src, "ann/spatial0/0_0_0"))[2]) == 3000
    with pytest.raises(NotFound):
        src.get("ann/spatial0/10_0_0")  # outside the grid


def test_sparse_chunks_are_grouped_into_larger_cells(stores: dict[str, Path]) -> None:
    ds = zv.open(stores["points"])
    src = StoreSource(ds, "p")
    info = _get(src, "ann/info")
    finest = info["spatial"][-1]
    assert finest["chunk_size"][0] == 4 * ds.chunk_shape[0]  # 4000 points in 64 chunks: 4x4x4 per cell
    cells = _all_cells(src, info)
    finest = np.concatenate([c[2][2] for c in cells if c[0] == len(info["spatial"]) - 1])
    coarse = sum(len(c[2][2]) for c in cells if c[0] < len(info["spatial"]) - 1)
    assert len(finest) + coarse == ds.vertex_count(0) and 0 < coarse < len(finest)


def test_by_id_and_related_ids_match_the_store(stores: dict[str, Path]) -> None:
    ds = zv.open(stores["points"])
    src = StoreSource(ds, "p")
    info = _get(src, "ann/info")
    last = len(info["spatial"]) - 1  # the finest index level is store level 0
    g, props, ids = dec.annotation_list(info, _get(src, f"ann/spatial{last}/0_0_0"))
    assert 0 < len(ids) < ds.vertex_count(0)  # coarser levels show the rest
    brute = ds.query()
    for j in range(0, len(ids), max(1, len(ids) // 10)):
        g1, p1, (rel,) = dec.one_annotation(info, _get(src, f"ann/by_id/{ids[j]}"))
        assert g1.tolist() == g[j].tolist() and p1["kind"] == props["kind"][j]
        row = np.flatnonzero(np.all(brute.positions.astype("f4") == g1, axis=1))
        assert rel.tolist() == [int(brute.object_ids[row[0]])]
    for oid in (1000, 5000, 11000):
        rg, _, rids = dec.annotation_list(info, _get(src, f"ann/rel_object/{oid}"))
        assert np.array_equal(_rows(rg), _rows(ds.objects([oid]).positions.astype("f4")))
        assert all(dec_level == 0 for dec_level in (rids >> np.uint64(56)).tolist())
    with pytest.raises(NotFound):
        src.get("ann/by_id/99999999999")


def test_lines_become_line_annotations_one_per_edge(stores: dict[str, Path]) -> None:
    ds = zv.open(stores["lines"])
    src = StoreSource(ds, "l")
    info = _get(src, "ann/info")
    assert info["annotation_type"] == "LINE"
    geom = _each_once(_all_cells(src, info))
    whole = ds.read()
    e = whole.edges
    expect = np.concatenate([whole.positions[e[:, 0]], whole.positions[e[:, 1]]], axis=1).astype("f4")
    assert np.array_equal(_rows(geom), _rows(expect))


def test_skeletons_and_segment_properties(stores: dict[str, Path]) -> None:
    ds = zv.open(stores["skeleton"])
    src = StoreSource(ds, "s")
    info = _get(src, "skeletons/info")
    assert info["@type"] == "neuroglancer_skeletons" and info["segment_properties"] == "../props"
    pos, edges, attrs = dec.skeleton(info, _get(src, "skeletons/8"))
    brute = ds.objects([8])
    assert np.array_equal(pos, brute.positions.astype("f4"))  # nanometres: unit-less axes are taken as nm
    assert np.array_equal(edges, brute.edges) and len(edges) == 39
    assert np.array_equal(attrs["radius"][:, 0], brute.attributes["radius"])
    props = _get(src, "props/info")["inline"]
    assert props["ids"] == ["7", "8"]
    assert props["properties"][0] == {"id": "name", "type": "label", "values": ["seven", "eight"]}
    with pytest.raises(NotFound):
        src.get("skeletons/9")


def test_legacy_meshes_are_one_fragment_in_nanometres(stores: dict[str, Path]) -> None:
    ds = zv.open(stores["mesh"])
    src = StoreSource(ds, "m", mesh_format="legacy")
    assert _get(src, "mesh/info")["@type"] == "neuroglancer_legacy_mesh"
    assert _get(src, "mesh/7:0") == {"fragments": ["7:0:1"]}  # no folder: cloud-volume keys by base name
    pos, faces = dec.legacy_fragment(_get(src, "mesh/7:0:1"))
    brute = ds.objects([7])
    assert np.allclose(pos, brute.positions * 1000, rtol=1e-6)  # micrometres -> nanometres
    assert np.array_equal(faces, brute.faces)


def _fetch(url: str) -> tuple[int, bytes, Any]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read(), r.headers
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(), exc.headers


def test_server_answers_sources_on_localhost(stores: dict[str, Path]) -> None:
    with zv.serve([stores["points"], stores["skeleton"]], client=False) as server:
        assert server.url.startswith("http://127.0.0.1:")
        status, body, headers = _fetch(f"{server.url}/zv/synapses/ann/info")
        assert status == 200 and headers["Access-Control-Allow-Origin"] is None  # no CORS unless asked
        info = json.loads(body)
        status, body, _ = _fetch(f"{server.url}/zv/synapses/ann/spatial0/0_0_0")
        assert (
            status == 200 and body == StoreSource(zv.open(stores["points"]), "p").get("ann/spatial0/0_0_0")[0]
        )
        assert 0 < len(dec.annotation_list(info, body)[2]) < zv.open(stores["points"]).vertex_count(0)
        assert _fetch(f"{server.url}/zv/neuron/skeletons/7")[0] == 200
        assert _fetch(f"{server.url}/zv/neuron/skeletons/12")[0] == 404
        assert _fetch(f"{server.url}/zv/nothing/info")[0] == 404
        state = json.loads(__import__("urllib.parse").parse.unquote(server.viewer_url.split("#!", 1)[1]))
        assert [layer["type"] for layer in state["layers"]] == ["annotation", "segmentation", "segmentation"]
        assert state["layers"][0]["linkedSegmentationLayer"] == {"object": "synapses objects"}
        assert state["layers"][1]["source"].endswith("/zv/synapses/props")
        assert state["layers"][2]["segments"] == ["7", "8"]


@pytest.mark.parametrize("kind", ["points", "lines"])
def test_by_id_and_related_entries_equal_the_paths(stores: dict[str, Path], kind: str) -> None:
    src = StoreSource(zv.open(stores[kind]), kind)
    entries = [(int(i), body) for ids, bodies in src.by_id_entries() for i, body in zip(ids, bodies)]
    listed = [int(p.rsplit("/", 1)[1]) for p in src.paths() if p.startswith("ann/by_id/")]
    assert sorted(i for i, _ in entries) == sorted(listed)
    assert not [p for p in src.paths(ids=False) if p.startswith(("ann/by_id/", "ann/rel_object/"))]
    for i, body in entries:
        assert body == src.get(f"ann/by_id/{i}")[0], i
    related = dict(src.related_entries())
    assert sorted(related) == sorted(int(p.rsplit("/", 1)[1]) for p in src.paths() if "/rel_object/" in p)
    assert len(related) == len(zv.open(stores[kind]).object_ids())
    for i, body in related.items():
        assert body == src.get(f"ann/rel_object/{i}")[0], i


@pytest.mark.slow
def test_export_writes_what_the_server_serves(stores: dict[str, Path], tmp_path: Path) -> None:
    from zarr_vectors.neuroglancer import export_neuroglancer

    counts = export_neuroglancer([stores["points"], stores["mesh"]], tmp_path / "out")
    src = StoreSource(zv.open(stores["points"]), "synapses")
    paths = list(src.paths())
    assert counts["synapses"] == len(paths)
    for rel in paths[:: max(1, len(paths) // 50)]:
        assert (tmp_path / "out" / "synapses" / rel).read_bytes() == src.get(rel)[0]
    soma = StoreSource(zv.open(stores["mesh"]), "soma")
    for rel in ("mesh/info", "mesh/7.index", "mesh/7"):
        assert (tmp_path / "out" / "soma" / rel).read_bytes() == soma.get(rel)[0]
    info = json.loads((tmp_path / "out" / "soma" / "mesh" / "info").read_text())
    manifest = dec.multilod_manifest((tmp_path / "out" / "soma" / "mesh" / "7.index").read_bytes())
    lods = dec.multilod_fragments(info, manifest, (tmp_path / "out" / "soma" / "mesh" / "7").read_bytes())
    assert len(lods) == len(zv.open(stores["mesh"]).levels)
    assert json.loads((tmp_path / "out" / "state.json").read_text())["layers"][0]["name"] == "synapses"
    with pytest.raises(zv.StoreExistsError):
        export_neuroglancer(stores["points"], tmp_path / "out")


def _env() -> dict[str, str]:
    root = Path(zv.__file__).resolve().parents[1]
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), str(root / "codecs")])}


@pytest.mark.slow
def test_cli_serve_prints_the_url_first_and_serves(stores: dict[str, Path]) -> None:
    cmd = [sys.executable, "-m", "zarr_vectors", "serve", str(stores["points"]), "--port", "0"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:") and "/v/zv/#!" in url
        base = url.split("/v/", 1)[0]
        status, body, _ = _fetch(f"{base}/zv/synapses/ann/info")
        assert status == 200
        info = json.loads(body)
        status, body, _ = _fetch(f"{base}/zv/synapses/ann/spatial0/0_0_0")
        assert status == 200 and len(dec.annotation_list(info, body)[2]) > 0
        assert _fetch(f"{base}/v/zv/")[0] == 200  # the bundled client
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.mark.slow
def test_cli_export_neuroglancer(stores: dict[str, Path], tmp_path: Path) -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "zarr_vectors",
            "export",
            "neuroglancer",
            str(stores["skeleton"]),
            str(tmp_path / "ng"),
        ],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "ng" / "neuron" / "skeletons" / "8").is_file()


def test_segment_properties_keep_json_valid() -> None:
    from zarr_vectors.neuroglancer.encode import segment_properties_info

    info = segment_properties_info(
        np.array([1, 2]),
        {
            "size": np.array([1.5, np.nan]),
            "seen": np.array(["2024-01-02", "2025-03-04"], "datetime64[D]"),
            "label": np.array(["a", "b"]),
        },
    )
    text = json.dumps(info, allow_nan=False)  # no NaN in the document
    props = {p["id"]: p for p in json.loads(text)["inline"]["properties"]}
    assert props["label"]["type"] == "label" and props["size"]["type"] == "string"
    assert props["seen"]["values"] == ["2024-01-02", "2025-03-04"]


def test_sampled_coarse_cells_are_the_same_kept_or_read_again(
    stores: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    ds = zv.open(stores["points"])
    cold = StoreSource(ds, "p")  # cells asked before the info: each read from level 0
    paths = [p for p in cold.paths(ids=False) if p.startswith("ann/spatial")]
    bodies = [cold.get(p)[0] for p in paths]
    warm = StoreSource(ds, "p")
    warm.limits()  # one pass that keeps the coarse levels
    assert warm._coarse is not None and [warm.get(p)[0] for p in paths] == bodies
    import zarr_vectors.neuroglancer.source as source_module

    monkeypatch.setattr(source_module, "COARSE_KEEP", 10)  # too many to keep: read again
    small = StoreSource(ds, "p")
    assert small.limits() == warm.limits() and small._coarse is None
    assert [small.get(p)[0] for p in paths] == bodies
