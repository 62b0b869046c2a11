"""A collection as one Neuroglancer view: one segmentation layer per id space (meshes and
skeletons of every member), annotation layers whose relationships are the members'
``zv:relationships`` attributes; decoded with the spec-derived readers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import zarr_vectors as zv
from tests import _ng_decode as dec
from zarr_vectors.neuroglancer import export_neuroglancer
from zarr_vectors.neuroglancer.annotation_read import decode_single_annotations, parse_annotation_info
from zarr_vectors.neuroglancer.annotation_source import AnnotationSource
from zarr_vectors.neuroglancer.collection_view import (
    RelatedAnnotations,
    collection_of,
    single_annotation_bodies,
)
from zarr_vectors.neuroglancer.encode import AnnotationLayout, Property, encode_one_annotation
from zarr_vectors.neuroglancer.precomputed_read import decode_skeleton, parse_sharding, parse_skeleton_info
from zarr_vectors.neuroglancer.precomputed_source import ShardedIndex
from zarr_vectors.neuroglancer.sharded_read import decode_data

TOP = np.uint64(2**64 - 1)
SEGMENTS = np.array([2**64 - 1, 2**64 - 2, 2**63 + 5, 42], np.uint64)


@pytest.fixture(scope="module")
def coll_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import trimesh

    rng = np.random.default_rng(3)
    path = tmp_path_factory.mktemp("ngc") / "connectome.zarr"
    coll = zv.create_collection(path, id_spaces={"segments": {"description": "neurons"}})
    n = 300
    pre = SEGMENTS[rng.integers(0, 4, n)]
    post = SEGMENTS[rng.integers(0, 3, n)]  # segment 42 is never post-synaptic
    coll.add_member(
        "synapses",
        "points",
        rng.uniform(0, 1000, (n, 3)),
        chunk_shape=250,
        attributes={"pre_segment": pre, "post_segment": post, "weight": rng.random(n).astype("f4")},
        relationships={"pre_segment": "segments", "post_segment": "segments"},
    )
    sphere = trimesh.creation.icosphere(subdivisions=1)
    coll.add_member(
        "meshes",
        "meshes",
        [(sphere.vertices * 80 + c, sphere.faces) for c in (200, 500, 800)],
        chunk_shape=250,
        object_ids=SEGMENTS[:3],
        object_attributes={"cell_type": ["basket", "pyramidal", "basket"]},
        id_space="segments",
    )
    t = np.linspace(0, 1, 20)
    line = np.stack([100 + 800 * t, 400 + 100 * t, 500 + 0 * t], 1)
    coll.add_member(
        "skeletons",
        "skeleton",
        np.concatenate([line, line + 60]),
        np.concatenate([np.arange(-1, 19), np.r_[-1, np.arange(20, 39)]]),
        chunk_shape=250,
        object_ids=np.repeat(SEGMENTS[[0, 3]], 20),
        id_space="segments",
    )
    coll.add_member(  # one soma point per segment: its segment properties join the segments layer
        "somas",
        "points",
        np.array([[200.0, 200, 200], [500, 500, 500], [800, 800, 800], [100, 400, 500]]),
        chunk_shape=250,
        object_ids=SEGMENTS,
        object_attributes={"soma_um": np.array([4.0, 5.0, 6.0, 7.0], "f4")},
        id_space="segments",
    )
    return path


def _fetch(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def _state(viewer_url: str) -> dict[str, Any]:
    return json.loads(urllib.parse.unquote(viewer_url.split("#!", 1)[1]))


def _synapses(coll_path: Path) -> Any:
    return zv.open(coll_path).member("synapses").query(None)


@pytest.fixture(scope="module")
def exported(coll_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ngc-out") / "ng"
    counts = export_neuroglancer(coll_path, out)
    assert set(counts) == {"synapses", "meshes", "skeletons", "somas"}
    return out


def test_collection_of_tells_collections_from_stores(coll_path: Path, tmp_path: Path) -> None:
    assert collection_of(coll_path) is not None
    assert collection_of([str(coll_path)]) is not None
    assert collection_of(coll_path / "synapses") is None  # a member alone is a store
    assert collection_of([coll_path / "synapses", coll_path / "meshes"]) is None
    coll = zv.open(coll_path)
    assert collection_of(coll) is coll


def _layer(root: Path) -> tuple[dict[str, Any], np.ndarray, np.ndarray, dict[str, Any], list[Any]]:
    """An exported annotation layer read as the viewer reads it: ``(info, ids of every spatial
    cell sorted, by_id geometry (n, 3), by_id properties, by_id relationships)``, the last
    three in the order of the ids."""
    info_doc = json.loads((root / "info").read_text())
    seen = [np.zeros(0, np.uint64)]
    for level in info_doc["spatial"]:
        for cell in np.ndindex(*level["grid_shape"]):
            file = root / level["key"] / "_".join(map(str, cell))
            seen.append(dec.annotation_list(info_doc, file.read_bytes())[2])
    ids = np.sort(np.concatenate(seen))
    info = parse_annotation_info(info_doc, "info")
    bodies = [(root / "by_id" / str(i)).read_bytes() for i in ids.tolist()]
    geom, props, related = decode_single_annotations(bodies, info, "by_id")
    return info_doc, ids, geom[:, 0, :], props, related


def _by_position(rows: Any, geom: np.ndarray) -> np.ndarray:
    """For each annotation, the row of ``rows`` at its position (positions are distinct)."""
    order = np.argsort(rows.positions[:, 0])
    at = order[np.searchsorted(rows.positions[order, 0].astype("f4"), geom[:, 0].astype("f4"))]
    assert np.allclose(rows.positions[at], geom, rtol=1e-6)
    return at


def test_each_synapse_once_with_its_stored_relationship_ids(coll_path: Path, exported: Path) -> None:
    rows = _synapses(coll_path)
    info_doc, ids, geom, props, related = _layer(exported / "synapses" / "ann")
    assert [r["id"] for r in info_doc["relationships"]] == ["pre_segment", "post_segment"]
    assert [p["id"] for p in info_doc["properties"]] == ["weight"]
    assert len(ids) == len(rows) and len(np.unique(ids)) == len(ids)  # each synapse once
    at = _by_position(rows, geom)
    assert np.array_equal(np.sort(at), np.arange(len(rows)))
    assert np.array_equal(props["weight"][:, 0], rows.attributes["weight"][at])
    for (counts, values), name in zip(related, ["pre_segment", "post_segment"]):
        assert (counts == 1).all()
        assert np.array_equal(values, rows.attributes[name][at].astype(np.uint64))  # exact, near 2**64
    assert (related[0][1] == TOP).any()


@pytest.mark.parametrize("rel", ["pre_segment", "post_segment"])
def test_by_relationship_lists_exactly_the_synapses_naming_the_segment(
    coll_path: Path, exported: Path, rel: str
) -> None:
    rows = _synapses(coll_path)
    values = rows.attributes[rel].astype(np.uint64)
    info_doc, ids, geom, _, related = _layer(exported / "synapses" / "ann")
    named = related[["pre_segment", "post_segment"].index(rel)][1]  # each annotation's id, by_id
    folder = exported / "synapses" / "ann" / f"rel_{rel}"
    assert sorted(int(f.name) for f in folder.iterdir()) == sorted(np.unique(values).tolist())
    for segment in SEGMENTS.tolist():
        file = folder / str(segment)
        want = int((values == np.uint64(segment)).sum())
        if not want:
            assert not file.exists()
            continue
        got_geom, _, got = dec.annotation_list(info_doc, file.read_bytes())
        assert np.array_equal(got, ids[named == np.uint64(segment)]) and len(got) == want, segment
        assert np.allclose(got_geom.reshape(len(got), 3), geom[named == np.uint64(segment)], rtol=1e-6)
        assert (values[_by_position(rows, got_geom.reshape(len(got), 3))] == np.uint64(segment)).all()


def test_a_point_member_in_the_id_space_relates_by_its_object_ids(coll_path: Path, exported: Path) -> None:
    root = exported / "somas" / "ann"
    info_doc, ids, geom, _, ((counts, related),) = _layer(root)
    assert [r["id"] for r in info_doc["relationships"]] == ["object"]
    rows = zv.open(coll_path).member("somas").query(None)
    at = _by_position(rows, geom)
    assert len(ids) == 4 and (counts == 1).all()
    assert np.array_equal(related, rows.object_ids[at].astype(np.uint64))
    for annotation, segment in zip(ids.tolist(), related.tolist()):
        assert dec.annotation_list(info_doc, (root / "rel_object" / str(segment)).read_bytes())[
            2
        ].tolist() == [annotation]
    props = json.loads((exported / "somas" / "props" / "info").read_text())
    assert props["inline"]["ids"] == [str(s) for s in sorted(SEGMENTS.tolist())]


def _sharded_entries(layer: AnnotationSource, key: str, spec: Any, keys: np.ndarray) -> list[bytes | None]:
    index = ShardedIndex(layer, parse_sharding(spec, key), f"{key}/")
    places = index.locate(keys)
    found = iter(layer.get_ranges([p for p in places if p is not None]))
    return [None if p is None else decode_data(next(found) or b"", index.spec, key) for p in places]


def test_sharded_export_holds_the_same_annotations(coll_path: Path, exported: Path, tmp_path: Path) -> None:
    export_neuroglancer(coll_path, tmp_path / "ng", sharding=True)
    _, ids, _, flat_props, flat_related = _layer(exported / "synapses" / "ann")
    layer = AnnotationSource(tmp_path / "ng" / "synapses")
    assert layer.sharded is not None
    assert np.array_equal(layer.segment_ids(), ids)
    (_, props, related), missing = layer.read(ids)
    assert not missing and np.array_equal(props["weight"], flat_props["weight"])
    for (counts, values), (flat_counts, flat_values) in zip(related, flat_related):
        assert np.array_equal(counts, flat_counts) and np.array_equal(values, flat_values)
    info_doc = json.loads((tmp_path / "ng" / "synapses" / "ann" / "info").read_text())
    for rel in info_doc["relationships"]:
        flat = exported / "synapses" / "ann" / rel["key"]
        bodies = _sharded_entries(layer, rel["key"], rel["sharding"], SEGMENTS)
        for segment, body in zip(SEGMENTS.tolist(), bodies):
            file = flat / str(segment)
            assert body == (file.read_bytes() if file.exists() else None), (rel["key"], segment)
    found = []
    for level in info_doc["spatial"]:
        index = ShardedIndex(layer, parse_sharding(level["sharding"], level["key"]), f"{level['key']}/")
        keys = index.all_keys()
        found += [
            dec.annotation_list(info_doc, b or b"")[2]
            for b in _sharded_entries(layer, level["key"], level["sharding"], keys)
        ]
    assert np.array_equal(np.sort(np.concatenate(found)), ids)


def test_meshes_and_skeletons_share_segment_ids(exported: Path) -> None:
    info = parse_skeleton_info(
        json.loads((exported / "skeletons" / "skeletons" / "info").read_text()), "info"
    )
    for segment in SEGMENTS[[0, 3]].tolist():
        pos, edges, _ = decode_skeleton(
            (exported / "skeletons" / "skeletons" / str(segment)).read_bytes(), info, "s"
        )
        assert len(pos) == 20 and len(edges) == 19
    for segment in SEGMENTS[:3].tolist():
        assert (exported / "meshes" / "mesh" / f"{segment}.index").is_file()
    props = json.loads((exported / "meshes" / "props" / "info").read_text())
    assert props["inline"]["ids"] == [str(s) for s in sorted(SEGMENTS[:3].tolist())]


def test_state_has_one_segmentation_layer_with_both_sources(exported: Path) -> None:
    state = json.loads((exported / "state.json").read_text())
    by_name = {layer["name"]: layer for layer in state["layers"]}
    assert [layer["type"] for layer in state["layers"]] == ["segmentation", "annotation", "annotation"]
    seg = by_name["segments"]
    assert seg["source"] == [
        "precomputed://http://127.0.0.1:8000/meshes/mesh",
        "precomputed://http://127.0.0.1:8000/skeletons/skeletons",
        "precomputed://http://127.0.0.1:8000/somas/props",
    ]
    assert seg["segments"] == [str(s) for s in sorted(SEGMENTS.tolist())]
    ann = by_name["synapses"]
    assert ann["source"] == "precomputed://http://127.0.0.1:8000/synapses/ann"
    assert ann["linkedSegmentationLayer"] == {"pre_segment": "segments", "post_segment": "segments"}
    assert ann["filterBySegmentation"] == ["post_segment", "pre_segment"]
    assert by_name["somas"]["linkedSegmentationLayer"] == {"object": "segments"}


def test_serve_gives_the_exported_bytes_and_state(coll_path: Path, exported: Path) -> None:
    with zv.serve(zv.open(coll_path), client=False) as server:
        state = _state(server.viewer_url)
        assert [layer["name"] for layer in state["layers"]] == ["segments", "synapses", "somas"]
        assert state["layers"][0]["source"][0] == f"precomputed://{server.url}/zv/meshes/mesh"
        files = sorted(p for p in exported.rglob("*") if p.is_file() and p.parent != exported)
        assert len(files) > 300
        for file in files:
            rel = file.relative_to(exported).as_posix()
            status, body = _fetch(f"{server.url}/zv/{rel}")
            assert status == 200 and body == file.read_bytes(), rel
        assert _fetch(f"{server.url}/zv/synapses/ann/by_id/{2**40}")[0] == 404
        assert _fetch(f"{server.url}/zv/synapses/ann/rel_weight/1")[0] == 404
        assert _fetch(f"{server.url}/zv/synapses/ann/spatial0/9_9_9")[0] == 404
        empty = _fetch(f"{server.url}/zv/synapses/ann/rel_post_segment/42")
        assert empty == (200, np.zeros(1, "<u8").tobytes())


def test_bulk_by_id_bodies_equal_one_annotation_encoded_at_a_time() -> None:
    rng = np.random.default_rng(1)
    layout = AnnotationLayout(3, 1, (Property("w", "float32", "w"), Property("k", "uint8", "k")), ("a", "b"))
    geom = rng.uniform(0, 9, (5, 3))
    props = {"w": rng.random(5).astype("f4"), "k": rng.integers(0, 9, 5).astype("u1")}
    related = [SEGMENTS[rng.integers(0, 4, 5)], SEGMENTS[rng.integers(0, 4, 5)]]
    bodies = single_annotation_bodies(layout, geom, props, related)
    for i, body in enumerate(bodies):
        one = encode_one_annotation(
            layout, geom[i], {k: v[i] for k, v in props.items()}, [r[i] for r in related]
        )
        assert body == one, i
    assert single_annotation_bodies(layout, geom[:0], {k: v[:0] for k, v in props.items()}, []) == []


def test_a_relationship_that_is_not_an_integer_attribute_is_refused(coll_path: Path) -> None:
    ds = zv.open(coll_path).member("synapses")
    with pytest.raises(zv.InputError, match="'weight' is not a one-id-per-row integer"):
        RelatedAnnotations(ds, "synapses", {"weight": "segments"})
    with pytest.raises(zv.InputError, match="'gone' is not a vertex attribute of the member"):
        RelatedAnnotations(ds, "synapses", {"gone": "segments"})


def _env() -> dict[str, str]:
    root = Path(zv.__file__).resolve().parents[1]
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), str(root / "codecs")])}


@pytest.mark.slow
def test_cli_serve_and_export_a_collection(coll_path: Path, exported: Path, tmp_path: Path) -> None:
    cmd = [
        sys.executable,
        "-m",
        "zarr_vectors",
        "export",
        "neuroglancer",
        str(coll_path),
        str(tmp_path / "ng"),
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, env=_env(), timeout=120)
    assert out.returncode == 0, out.stderr
    for name in ("state.json", "synapses/ann/info", "synapses/ann/rel_pre_segment/18446744073709551615"):
        assert (tmp_path / "ng" / name).read_bytes() == (exported / name).read_bytes(), name
    proc = subprocess.Popen(
        [sys.executable, "-m", "zarr_vectors", "serve", str(coll_path), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        base = url.split("/v/", 1)[0]
        assert [layer["name"] for layer in _state(url)["layers"]] == ["segments", "synapses", "somas"]
        rel = "synapses/ann/rel_post_segment/18446744073709551615"
        assert _fetch(f"{base}/zv/{rel}") == (200, (exported / rel).read_bytes())
    finally:
        proc.terminate()
        proc.wait(timeout=10)


LAYER_STATUS = """typeof viewer === 'undefined' ? '[]' : JSON.stringify(viewer.layerManager.managedLayers.map(m => ({
  name: m.name,
  ready: !!m.isReady(),
  sources: m.layer ? m.layer.dataSources.map(d => d.loadState === undefined ? 'loading'
    : (d.loadState.error !== undefined ? 'error: ' + d.loadState.error.message : 'ok')) : ['no layer'],
})))"""


async def _drive_collection(server: Any, ws_url: str, out: dict[str, Any]) -> None:
    """Load the served state in 3-D until both layers are ready and the server is idle for
    1.5 s (one reload when the client drops a layer while restoring, as seen headless)."""
    import asyncio
    import time

    from tests import _cdp

    session, ws, page = await _cdp.open_page(ws_url)
    try:
        await page.send(
            "Emulation.setDeviceMetricsOverride", width=1000, height=700, deviceScaleFactor=1, mobile=False
        )
        layers = len(_state(server.viewer_url)["layers"])
        for _attempt in range(2):
            await page.send("Page.navigate", url="about:blank")
            await page.send("Page.navigate", url=server.viewer_url)
            await asyncio.sleep(2.0)
            deadline = time.monotonic() + 60
            status: list[dict[str, Any]] = []
            while time.monotonic() < deadline:
                status = json.loads(await page.evaluate(LAYER_STATUS) or "[]")
                last = server.requests[-1].done if server.requests else 0.0
                ready = len(status) == layers and all(
                    layer["ready"] and all(s != "loading" for s in layer["sources"]) for layer in status
                )
                if ready and time.perf_counter() - last > 1.5:
                    break
                await asyncio.sleep(0.5)
            if len(status) == layers:
                break
        out["status"] = status
        await asyncio.sleep(1.0)
        out["png"] = await page.screenshot()
        out["errors"] = page.console_errors()
    finally:
        page.reader.cancel()
        await ws.close()
        await session.close()


@pytest.mark.slow
@pytest.mark.browser
def test_served_collection_loads_in_chromium(coll_path: Path) -> None:
    import asyncio
    import io

    from tests import _cdp

    if _cdp.chromium() is None:
        pytest.skip("needs Debian's chromium (.ci/run installs it)")
    pytest.importorskip("aiohttp")
    from PIL import Image

    server = zv.serve(coll_path, layout="3d")
    browser = _cdp.Browser(1000, 700)
    out: dict[str, Any] = {}
    try:
        asyncio.run(asyncio.wait_for(_drive_collection(server, browser.ws_url, out), 150))
    finally:
        browser.close()
        server.close()
    assert [layer["name"] for layer in out["status"]] == ["segments", "synapses", "somas"], out["status"]
    assert all(s == "ok" for layer in out["status"] for s in layer["sources"]), out["status"]
    assert [len(layer["sources"]) for layer in out["status"]] == [3, 1, 1]
    assert not out["errors"], out["errors"]
    paths = [(r.path, r.status) for r in server.requests if "/zv/" in r.path]
    # a segment a member does not hold is a 404 there (the viewer shows nothing, logs no error)
    missing = {f"/zv/meshes/mesh/{SEGMENTS[3]}.index"} | {
        f"/zv/skeletons/skeletons/{s}" for s in SEGMENTS[[1, 2]].tolist()
    }
    failed = {p for p, status in paths if status >= 400 and status != 499}
    assert failed <= missing, failed
    assert {p for p, status in paths if status == 200} >= {
        f"/zv/meshes/mesh/{SEGMENTS[0]}.index",
        f"/zv/skeletons/skeletons/{SEGMENTS[0]}",
        f"/zv/skeletons/skeletons/{SEGMENTS[3]}",
    }
    asked = {p.split("/ann/", 1)[1] for p, status in paths if "/synapses/ann/rel_" in p and status == 200}
    # selected segments' synapses come from the by_relationship indexes, both relationships
    assert asked == {f"rel_{r}/{s}" for r in ("pre_segment", "post_segment") for s in SEGMENTS.tolist()}
    img = np.asarray(Image.open(io.BytesIO(out["png"])).convert("RGB")).astype(int)
    background = np.median(img.reshape(-1, 3), axis=0)
    assert float(np.mean(np.abs(img - background).sum(axis=2) > 40)) > 0.005  # a frame was drawn


def test_a_relationship_request_reads_only_the_chunks_of_its_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``rel_post_segment/{segment}`` goes through the relationship index: the vertex chunks
    read are exactly those holding the segment's synapses (not every chunk of the member), and
    the body equals the one a scan of every chunk gives."""
    from zarr_vectors.neuroglancer.collection_view import collection_view
    from zarr_vectors.neuroglancer.source import StoreSource
    from zarr_vectors.storage.local import LocalBackend

    rng = np.random.default_rng(5)
    n = 2000
    pos = rng.uniform(0, 1000, (n, 3))
    post = SEGMENTS[rng.integers(1, 4, n)]
    corner = np.all(pos < 200, axis=1)
    post[corner] = SEGMENTS[0]  # segment 0: the synapses of one corner only
    coll = zv.create_collection(tmp_path / "c.zarr", id_spaces=["segments"])
    coll.add_member("synapses", "points", pos, chunk_shape=125, shards=None,
                    attributes={"post_segment": post}, relationships={"post_segment": "segments"})  # fmt: skip
    read: list[str] = []
    for method in ("get_many", "get_many_into"):
        original = getattr(LocalBackend, method)

        def counting(self: Any, keys: Any, *args: Any, _original: Any = original) -> Any:
            read.extend(str(k) for k in keys)
            return _original(self, keys, *args)

        monkeypatch.setattr(LocalBackend, method, counting)
    original_ranges = LocalBackend.get_ranges

    def ranges(self: Any, asked: Any) -> Any:
        read.extend(str(k) for k, _, _ in asked)
        return original_ranges(self, asked)

    monkeypatch.setattr(LocalBackend, "get_ranges", ranges)
    coll = zv.open(tmp_path / "c.zarr")
    (src,) = collection_view(coll).sources
    assert isinstance(src, RelatedAnnotations)
    assert not [k for k in read if "/c/" in k]  # opening the view reads no chunk of the member
    body, _ = src.get(f"ann/rel_post_segment/{SEGMENTS[0]}")
    chunks_read = {k for k in read if k.startswith("0/vertices/c/")}
    holding = {
        "0/vertices/c/" + "/".join(map(str, c))
        for c in np.unique(pos[corner] // 125, axis=0).astype(int).tolist()
    }
    listed = len(coll.member("synapses").level(0).vertices.nonempty)
    assert chunks_read == holding and 0 < len(holding) < listed // 20, (len(chunks_read), listed)
    info_doc = json.loads(src.get("ann/info")[0])
    geom, _, ids = dec.annotation_list(info_doc, body)
    assert len(ids) == int(corner.sum()) and np.array_equal(ids, np.sort(ids))
    want = np.sort(pos[corner].astype("f4").view([("", "f4")] * 3).reshape(-1))
    assert np.array_equal(np.sort(geom.astype("f4").view([("", "f4")] * 3).reshape(-1)), want)
    fresh = collection_view(coll).sources[0]
    read.clear()
    limits = fresh.limits()  # counted chunk by chunk, reading no attribute
    assert read and not [k for k in read if k.startswith("0/vertex_attributes/")]
    assert limits == StoreSource(coll.member("synapses"), "synapses").limits() and limits[0] > 1
    scan = RelatedAnnotations(coll.member("synapses"), "synapses", {"post_segment": "segments"})
    assert scan.get(f"ann/rel_post_segment/{SEGMENTS[0]}")[0] == body  # every chunk scanned: same bytes
    for segment in SEGMENTS[1:2].tolist():
        assert scan.get(f"ann/rel_post_segment/{segment}")[0] == src.get(f"ann/rel_post_segment/{segment}")[0]
