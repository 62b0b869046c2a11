"""``ingest_neuroglancer``: our own ``export neuroglancer`` read back (skeletons; legacy and
multi-resolution Draco meshes; sharded and unsharded), compared with the source store; data
written by the ``neuroglancer`` package; HTTP sources; refusals; the command as a process."""

from __future__ import annotations

import functools
import gzip
import http.server
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import zarr_vectors as zv
from zarr_vectors.errors import InputError, PrecomputedFormatError
from zarr_vectors.io.neuroglancer import ingest_neuroglancer
from zarr_vectors.neuroglancer import export_neuroglancer

#: Segment ids around 2**53 and 2**64, where a float64 round trip would alter them.
IDS = [7, 2**53 + 1, 2**63 + 5, 2**64 - 1]
CHUNK = 100.0


def _tree(rng: np.random.Generator, n: int, centre: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    pos = (centre + rng.normal(0, 60, (n, 3))).astype(np.float32)
    parents = np.array([-1] + [int(rng.integers(max(0, i - 4), i)) for i in range(1, n)])
    return pos, parents


@pytest.fixture(scope="module")
def skeletons(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("ngsk")
    rng = np.random.default_rng(11)
    pos, par, ids, n = [], [], [], 0
    for k, sid in enumerate(IDS):
        p, q = _tree(rng, 25 + 5 * k, np.array([300.0, 300, 300]))
        pos.append(p)
        par.append(np.where(q >= 0, q + n, -1))
        ids.append(np.full(len(p), sid, np.uint64))
        n += len(p)
    zv.write_skeleton(
        d / "neuron.zarr",
        np.concatenate(pos),
        np.concatenate(par),
        chunk_shape=CHUNK,
        object_ids=np.concatenate(ids),
        attributes={"radius": rng.random(n).astype("f4"), "rgb": rng.integers(0, 255, (n, 3)).astype("u1")},
    )
    return d / "neuron.zarr"


@pytest.fixture(scope="module")
def meshes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Icospheres of radius 30 at chunk centres: no triangle crosses a chunk plane, so the
    multi-resolution export keeps every triangle whole (it cuts triangles on its octree grid)."""
    import trimesh

    d = tmp_path_factory.mktemp("ngmesh")
    m = trimesh.creation.icosphere(subdivisions=2)
    items = [
        ((m.vertices * 30 + [50 + CHUNK * k, 150, 250]).astype(np.float32), m.faces) for k in range(len(IDS))
    ]
    zv.write_meshes(d / "soma.zarr", items, chunk_shape=CHUNK, object_ids=np.array(IDS, np.uint64))
    return d / "soma.zarr"


def _export(store: Path, out: Path, **kwargs: object) -> Path:
    if not out.exists():
        export_neuroglancer(store, out, **kwargs)  # type: ignore[arg-type]
    return out / store.stem


@pytest.mark.parametrize("sharding", [False, True])
def test_skeletons_round_trip_exactly(skeletons: Path, tmp_path: Path, sharding: bool) -> None:
    layer = _export(skeletons, tmp_path / "ng", sharding=sharding)
    assert any(p.suffix == ".shard" for p in (layer / "skeletons").iterdir()) is sharding
    ds = ingest_neuroglancer(layer, f"memory://sk-{sharding}", progress=False, chunk_shape=CHUNK)
    src = zv.open(skeletons)
    assert ds.object_ids().tolist() == src.object_ids().tolist() == sorted(IDS)
    assert ds.axes == src.axes and "skeleton" in ds.geometry_types
    for sid in IDS:
        a = src.objects([sid], attributes=True)
        b = ds.objects([sid], attributes=True)
        assert np.array_equal(a.positions, b.positions) and b.positions.dtype == np.float32
        assert np.array_equal(a.edges, b.edges)
        assert np.array_equal(a.attributes["radius"], b.attributes["radius"])
        assert np.array_equal(a.attributes["rgb"], b.attributes["rgb"]) and b.attributes["rgb"].shape[1] == 3


def _canonical(tri: np.ndarray) -> np.ndarray:
    """Triangles (T, 3, d) of corner coordinates (or (T, 3, 1) of vertex numbers), each
    rotated to start at its lexicographically least corner (winding kept), then sorted:
    equal for equal triangle sets whatever the vertex order."""
    t = np.asarray(tri, np.float64)
    flat = t.reshape(len(t), 3, -1)
    first = np.array([min(range(3), key=lambda j, r=r: tuple(r[j])) for r in flat.tolist()], np.int64)
    rolled = flat[np.arange(len(t))[:, None], (first[:, None] + np.arange(3)) % 3]
    rows = rolled.reshape(len(t), -1)
    return rows[np.lexsort(rows.T[::-1])]


def test_legacy_meshes_round_trip_exactly(meshes: Path, tmp_path: Path) -> None:
    layer = _export(meshes, tmp_path / "ng", mesh_format="legacy", sharding=False)
    ds = ingest_neuroglancer(layer, "memory://legacy", progress=False, chunk_shape=CHUNK)
    src = zv.open(meshes)
    assert ds.object_ids().tolist() == sorted(IDS) and ds.object_ids().dtype == np.uint64
    for sid in IDS:
        a, b = src.objects([sid]), ds.objects([sid])
        assert len(b.positions) == len(a.positions)
        assert np.array_equal(_canonical(a.positions[a.faces]), _canonical(b.positions[b.faces]))


@pytest.mark.parametrize("sharding", [False, True])
def test_multilod_meshes_round_trip_up_to_quantisation(meshes: Path, tmp_path: Path, sharding: bool) -> None:
    """The bound: the exporter stores each vertex as ``rint((v - node_lo) / node * 65535)``
    (16 bits, LOD 0 nodes of one chunk), an error of at most half a step, ``CHUNK / 65535 / 2``
    per axis; the decoder's ``node_lo + node * q / 65535`` is exact in float64 to far below
    that, and the store's float32 adds at most half a unit in the last place of the value.
    The observed error reaches most of the half step, so the bound is not loose."""
    layer = _export(meshes, tmp_path / "ng", mesh_format="multilod", sharding=sharding)
    ds = ingest_neuroglancer(layer, f"memory://multilod-{sharding}", progress=False, chunk_shape=CHUNK)
    src = zv.open(meshes)
    assert ds.object_ids().tolist() == sorted(IDS)
    worst = 0.0
    for sid in IDS:
        a, b = src.objects([sid]), ds.objects([sid])
        pa, pb = np.asarray(a.positions, np.float64), np.asarray(b.positions, np.float64)
        assert len(pb) == len(pa) and len(b.faces) == len(a.faces)  # merged back to shared vertices
        nearest = np.argmin(((pb[:, None, :] - pa[None, :, :]) ** 2).sum(axis=2), axis=1)
        err = np.abs(pb - pa[nearest])
        bound = 0.5 * CHUNK / 65535 + 0.5 * np.spacing(np.abs(pa[nearest]).astype(np.float32)).astype(
            np.float64
        )
        assert np.all(err <= bound), float((err - bound).max())
        worst = max(worst, float((err / (0.5 * CHUNK / 65535)).max()))
        assert len(np.unique(nearest)) == len(pa)  # one ingested vertex per source vertex
        assert np.array_equal(_canonical(nearest[b.faces][..., None]), _canonical(a.faces[..., None]))
    assert worst > 0.5


def test_multilod_cut_meshes_keep_their_area(tmp_path: Path) -> None:
    """A sphere across chunk planes is cut into pieces by the export: the pieces cover the
    same surface (area within the quantisation's effect)."""
    import trimesh

    m = trimesh.creation.icosphere(subdivisions=3)
    zv.write_meshes(
        tmp_path / "s.zarr", [(m.vertices * 140 + 200, m.faces)], chunk_shape=CHUNK, object_ids=[3]
    )
    layer = _export(tmp_path / "s.zarr", tmp_path / "ng", sharding=False)
    ds = ingest_neuroglancer(layer, "memory://cut", progress=False)
    res = ds.objects([3])
    tri = np.asarray(res.positions, np.float64)[res.faces]
    area = 0.5 * np.linalg.norm(np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0]), axis=1).sum()
    assert len(res.faces) > len(m.faces)  # cut on the grid
    assert abs(area - m.area * 140**2) / (m.area * 140**2) < 1e-4


def test_local_gzipped_files_are_read(skeletons: Path, tmp_path: Path) -> None:
    """cloud-volume writes unsharded files to local disk gzipped, as ``{id}.gz``."""
    layer = _export(skeletons, tmp_path / "ng", sharding=False)
    for sid in IDS:
        f = layer / "skeletons" / str(sid)
        f.with_name(f"{sid}.gz").write_bytes(gzip.compress(f.read_bytes()))
        f.unlink()
    ds = ingest_neuroglancer(layer, "memory://gz", progress=False)
    src = zv.open(skeletons)
    assert ds.object_ids().tolist() == sorted(IDS)
    for sid in IDS:
        assert np.array_equal(ds.objects([sid]).positions, src.objects([sid]).positions)
    (layer / "skeletons" / "7.gz").write_bytes(b"not gzip")
    with pytest.raises(PrecomputedFormatError, match=r"skeletons/7.gz: not valid gzip"):
        ingest_neuroglancer(layer, "memory://gz2", progress=False)


def test_ids_select_and_missing_ids_are_refused(skeletons: Path, tmp_path: Path) -> None:
    layer = _export(skeletons, tmp_path / "ng", sharding=True)
    ds = ingest_neuroglancer(layer, "memory://some", ids=[2**64 - 1, "7"], progress=False)
    assert ds.object_ids().tolist() == [7, 2**64 - 1]
    with pytest.raises(InputError, match=r"has no skeleton for segment\(s\) \[8\]$"):
        ingest_neuroglancer(layer, "memory://none", ids=[8, 7], progress=False)
    with pytest.raises(InputError, match=r"segment id -1 is outside uint64"):
        ingest_neuroglancer(layer, "memory://none", ids=[-1], progress=False)
    with pytest.raises(InputError, match=r"segment ids repeat"):
        ingest_neuroglancer(layer, "memory://none", ids=[7, 7], progress=False)
    with pytest.raises(InputError, match=r"holds skeletons, not meshes"):
        ingest_neuroglancer(layer / "skeletons", "memory://none", kind="meshes", progress=False)


def test_broken_sources_name_the_file(skeletons: Path, tmp_path: Path) -> None:
    layer = _export(skeletons, tmp_path / "ng", sharding=False)
    bad = tmp_path / "bad"
    (bad / "skeletons").mkdir(parents=True)
    (bad / "skeletons" / "info").write_bytes((layer / "skeletons" / "info").read_bytes())
    body = (layer / "skeletons" / "7").read_bytes()
    (bad / "skeletons" / "7").write_bytes(body[:-3])
    with pytest.raises(
        PrecomputedFormatError, match=r"bad/skeletons/info: its segment properties .*bad/props do not exist"
    ):
        ingest_neuroglancer(bad, "memory://bad", progress=False)
    with pytest.raises(PrecomputedFormatError, match=r"bad/skeletons/7: \d+ bytes, but \d+ vertices"):
        ingest_neuroglancer(bad, "memory://bad", progress=False, segment_properties=False)
    with pytest.raises(InputError, match=r"no Neuroglancer precomputed skeletons or meshes at .*nothing"):
        (tmp_path / "nothing").mkdir()
        ingest_neuroglancer(tmp_path / "nothing", "memory://bad", progress=False)


@pytest.fixture
def http_root(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A static HTTP server over ``tmp_path`` (range requests: SimpleHTTPRequestHandler
    answers none, so the backend gets whole files and cuts them, which is what it must handle)."""
    handler = functools.partial(_Quiet, directory=str(tmp_path))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", tmp_path
    finally:
        server.shutdown()
        server.server_close()


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


def test_http_sources(skeletons: Path, meshes: Path, http_root: tuple[str, Path]) -> None:
    url, root = http_root
    _export(skeletons, root / "plain", sharding=False)
    _export(meshes, root / "sharded", sharding=True)
    with pytest.raises(InputError, match=r"unsharded remote source.*give the segment ids"):
        ingest_neuroglancer(f"{url}/plain/neuron", "memory://h0", progress=False)
    ds = ingest_neuroglancer(f"{url}/plain/neuron", "memory://h1", ids=IDS[2:], progress=False)
    src = zv.open(skeletons)
    for sid in IDS[2:]:
        assert np.array_equal(ds.objects([sid]).positions, src.objects([sid]).positions)
    ds = ingest_neuroglancer(f"{url}/sharded/soma", "memory://h2", progress=False)  # its index lists them
    local = ingest_neuroglancer(root / "sharded" / "soma", "memory://h3", progress=False)
    assert ds.object_ids().tolist() == local.object_ids().tolist() == sorted(IDS)
    for sid in IDS:
        assert np.array_equal(ds.objects([sid]).positions, local.objects([sid]).positions)


# ------------------------------------------------------------------ the neuroglancer package's writers


def test_neuroglancer_package_skeletons(tmp_path: Path) -> None:
    """Skeletons encoded by ``neuroglancer.skeleton.Skeleton``, with edges given child first
    (so the ingest roots and orients each tree itself)."""
    ng = pytest.importorskip("neuroglancer")
    from neuroglancer.skeleton import Skeleton, SkeletonSource, VertexAttributeInfo

    rng = np.random.default_rng(4)
    space = ng.CoordinateSpace(names=["x", "y", "z"], units="nm", scales=[1, 1, 1])
    source = SkeletonSource(space)
    source.vertex_attributes["radius"] = VertexAttributeInfo(data_type=np.float32, num_components=1)
    folder = tmp_path / "skeletons"
    folder.mkdir()
    info = {
        "@type": "neuroglancer_skeletons",
        "vertex_attributes": [{"id": "radius", "data_type": "float32", "num_components": 1}],
    }
    (folder / "info").write_text(json.dumps(info))
    truth = {}
    for sid in (5, 2**64 - 3):
        pos, parents = _tree(rng, 40, np.array([100.0, 200, 300]))
        edges = np.array([[c, p] for c, p in enumerate(parents.tolist()) if p >= 0], np.uint32)
        radius = rng.random(40).astype(np.float32)
        (folder / str(sid)).write_bytes(Skeleton(pos, edges, {"radius": radius}).encode(source))
        truth[sid] = (pos, edges, radius)
    ds = ingest_neuroglancer(folder, "memory://ngpkg", progress=False)
    assert ds.object_ids().tolist() == [5, 2**64 - 3]
    for sid, (pos, edges, radius) in truth.items():
        res = ds.objects([sid], attributes=True)
        got = {tuple(sorted(map(tuple, res.positions[e].tolist()))) for e in res.edges}
        want = {tuple(sorted(map(tuple, pos[e].astype(np.float64).tolist()))) for e in edges}
        assert got == want
        order = np.lexsort(res.positions.T[::-1])
        ref = np.lexsort(pos.T[::-1])
        assert np.array_equal(res.positions[order], pos[ref])
        assert np.array_equal(res.attributes["radius"][order], radius[ref])


def test_neuroglancer_package_legacy_meshes(tmp_path: Path) -> None:
    """Legacy fragments from the ``neuroglancer`` package's mesh generator (marching cubes of
    a box segment, no simplification): the ingested surface is closed, of genus 0, and spans
    the segment's box."""
    ng = pytest.importorskip("neuroglancer")
    seg = np.zeros((16, 16, 12), np.uint64)
    sid = 2**63 + 3
    seg[4:12, 5:13, 3:9] = sid
    space = ng.CoordinateSpace(names=["x", "y", "z"], units="nm", scales=[4, 4, 40])
    volume = ng.LocalVolume(seg, space, mesh_options={"max_quadrics_error": -1})
    folder = tmp_path / "mesh"
    folder.mkdir()
    (folder / f"{sid}:0").write_text(json.dumps({"fragments": [f"{sid}.frag"]}))
    (folder / f"{sid}.frag").write_bytes(volume.get_object_mesh(sid))
    ds = ingest_neuroglancer(folder, "memory://nglegacy", kind="meshes", progress=False)
    res = ds.objects([sid])
    faces = np.asarray(res.faces)
    edges = np.sort(faces[:, [0, 1, 1, 2, 2, 0]].reshape(-1, 2), axis=1)
    _, uses = np.unique(edges, axis=0, return_counts=True)
    assert np.all(uses == 2)  # closed: every edge joins two triangles
    assert len(res.positions) - len(uses) + len(faces) == 2  # Euler characteristic of a sphere
    # the generator puts the surface through voxel centres, (i + 0.5) * scale, and writes the
    # coordinate space's base unit (metres), not the nanometres of the precomputed spec
    scale = np.array([4, 4, 40]) * 1e-9
    lo, hi = res.positions.min(axis=0), res.positions.max(axis=0)
    assert np.allclose(lo, (np.array([4, 5, 3]) - 0.5) * scale, rtol=1e-6, atol=0)
    assert np.allclose(hi, (np.array([12, 13, 9]) - 0.5) * scale, rtol=1e-6, atol=0)


@pytest.mark.slow
def test_cli_ingest_neuroglancer_as_a_process(skeletons: Path, tmp_path: Path) -> None:
    layer = _export(skeletons, tmp_path / "ng", sharding=True)
    out = tmp_path / "cli.zarr"
    cmd = [sys.executable, "-m", "zarr_vectors", "ingest", "neuroglancer", str(layer), str(out)]
    proc = subprocess.run([*cmd, "--ids", f"7,{2**64 - 1}", "--no-progress"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"wrote 2 skeletons, {zv.open(out).vertex_count()} vertices to {out}"
    assert zv.open(out).object_ids().tolist() == [7, 2**64 - 1]
    again = subprocess.run([*cmd, "--no-progress"], capture_output=True, text=True)
    assert again.returncode == 2
    assert (
        again.stderr.strip()
        == f"zarr-vectors ingest: error: {out} already exists; add --overwrite to replace it"
    )


def test_batches_are_sized_by_the_memory_budget(
    skeletons: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from zarr_vectors.io.neuroglancer import next_batch
    from zarr_vectors.neuroglancer.precomputed_source import PrecomputedSource

    assert next_batch(0.0, 1 << 20, 256) == 8  # sizes unknown: a small first batch
    assert next_batch(300_000.0, 1 << 20, 256) == 3
    assert next_batch(10.0, 1 << 20, 256) == 256
    assert next_batch(float(5 << 20), 1 << 20, 256) == 1  # one object over the budget: one at a time
    asked: list[int] = []
    read = PrecomputedSource.read

    def spy(self: PrecomputedSource, ids: np.ndarray, lod: int = 0, workers: int | None = 1) -> list:
        asked.append(len(ids))
        return read(self, ids, lod, workers)

    monkeypatch.setattr(PrecomputedSource, "read", spy)
    layer = _export(skeletons, tmp_path / "ng", sharding=False)
    ingest_neuroglancer(layer, "memory://b1", progress=False, batch=3)
    assert asked == [3, 1]


def test_segment_properties_become_object_attributes(tmp_path: Path) -> None:
    pos = np.random.default_rng(0).uniform(0, 100, (4, 3)).astype("f4")
    big = 2**64 - 1
    zv.write_skeleton(
        tmp_path / "p.zarr",
        pos,
        [-1, 0, -1, 2],
        chunk_shape=50,
        object_ids=np.array([big, big, 5, 5], np.uint64),
        object_attributes={"name": {big: "big", 5: "five"}, "n": {big: np.int16(-3), 5: np.int16(4)}},
    )
    export_neuroglancer(tmp_path / "p.zarr", tmp_path / "ng", sharding=False)
    ds = ingest_neuroglancer(
        tmp_path / "ng" / "p" / "skeletons", "memory://props", progress=False
    )  # ../props
    assert ds.object_ids().tolist() == [5, big]
    assert ds.object_attributes("name").tolist() == ["five", "big"]
    assert ds.object_attributes("n").tolist() == [4, -3] and ds.object_attributes("n").dtype == np.int16
    plain = ingest_neuroglancer(
        tmp_path / "ng" / "p", "memory://noprops", progress=False, segment_properties=False
    )
    assert plain.object_attribute_names() == []


def test_tags_and_empty_segments(tmp_path: Path) -> None:
    """Every tag is kept (names joined by spaces); a segment whose skeleton is empty is no
    object, so its properties are left out too; a segment without properties gets the fill."""
    folder = tmp_path / "sk"
    folder.mkdir()
    info = {"@type": "neuroglancer_skeletons", "segment_properties": "props"}
    (folder / "info").write_text(json.dumps(info))
    one = (
        np.array([2, 1], "<u4").tobytes()
        + np.arange(6, dtype="<f4").tobytes()
        + np.array([0, 1], "<u4").tobytes()
    )
    (folder / "3").write_bytes(one)
    (folder / "4").write_bytes(np.zeros(2, "<u4").tobytes())  # no vertices
    (folder / "9").write_bytes(one)
    tags = [f"t{k}" for k in range(70)]  # more than 64: none dropped
    props = {
        "@type": "neuroglancer_segment_properties",
        "inline": {
            "ids": ["3", "4"],
            "properties": [
                {"id": "label", "type": "label", "values": ["three", "four"]},
                {"id": "note", "type": "description", "values": ["a b", ""]},
                {"id": "tags", "type": "tags", "tags": tags, "values": [[0, 65, 69], [1]]},
                {"id": "size", "type": "number", "data_type": "uint32", "values": [7, 8]},
            ],
        },
    }
    (folder / "props").mkdir()
    (folder / "props" / "info").write_text(json.dumps(props))
    ds = ingest_neuroglancer(folder, "memory://tags", progress=False)
    assert ds.object_ids().tolist() == [3, 9]
    assert ds.object_attributes("label").tolist() == ["three", ""]
    assert ds.object_attributes("note").tolist() == ["a b", ""]
    assert ds.object_attributes("tags").tolist() == ["t0 t65 t69", ""]
    size = ds.object_attributes("size")
    assert size.dtype == np.uint32 and int(size[0]) == 7


@pytest.mark.slow
def test_s3_sources(skeletons: Path, meshes: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """s3:// through fsspec (a local moto server): a sharded layer lists its own segments,
    an unsharded one is read by the ids given; the stores equal those read from disk."""
    s3fs = pytest.importorskip("s3fs")
    from tests.storage.s3server import DUMMY_AWS_ENV, start_s3_server

    for name, value in DUMMY_AWS_ENV.items():
        monkeypatch.setenv(name, value)
    server = start_s3_server("zv-ingest-tests")
    try:
        options = server.storage_options
        _export(skeletons, tmp_path / "sharded", sharding=True)
        _export(meshes, tmp_path / "plain", sharding=False)
        fs = s3fs.S3FileSystem(**options)
        fs.put(str(tmp_path / "sharded"), "zv-ingest-tests/sharded", recursive=True)
        fs.put(str(tmp_path / "plain"), "zv-ingest-tests/plain", recursive=True)
        sk = ingest_neuroglancer(
            "s3://zv-ingest-tests/sharded/neuron", "memory://s3sk", source_options=options, progress=False
        )
        me = ingest_neuroglancer(
            "s3://zv-ingest-tests/plain/soma",
            "memory://s3me",
            ids=IDS,
            source_options=options,
            progress=False,
        )
    finally:
        server.stop()
    sk_local = ingest_neuroglancer(tmp_path / "sharded" / "neuron", "memory://s3sk-local", progress=False)
    me_local = ingest_neuroglancer(tmp_path / "plain" / "soma", "memory://s3me-local", progress=False)
    assert sk.object_ids().tolist() == me.object_ids().tolist() == sorted(IDS)
    for sid in IDS:
        assert np.array_equal(sk.objects([sid]).positions, sk_local.objects([sid]).positions)
        assert np.array_equal(me.objects([sid]).faces, me_local.objects([sid]).faces)
        assert np.array_equal(me.objects([sid]).positions, me_local.objects([sid]).positions)


# ------------------------------------------------------------------ annotations


def _sorted_rows(*columns: np.ndarray) -> np.ndarray:
    rows = np.column_stack([np.asarray(c, np.float64).reshape(len(c), -1) for c in columns])
    return rows[np.lexsort(rows.T[::-1])]


@pytest.mark.parametrize("sharding", [False, True])
def test_point_annotations_round_trip_exactly(tmp_path: Path, sharding: bool) -> None:
    """A point cloud exported as POINT annotations (properties, and the ``object``
    relationship) comes back as a point cloud: each annotation an object with its annotation
    id, every position and attribute exact, the object ids as the ``object`` attribute."""
    rng = np.random.default_rng(8)
    n = 600
    pts = rng.uniform(0, 1000, (n, 3)).astype("f4")
    oids = rng.choice(np.array(IDS, np.uint64), n)
    zv.write_points(
        tmp_path / "syn.zarr",
        pts,
        chunk_shape=250,
        attributes={"score": rng.random(n).astype("f4"), "kind": rng.integers(0, 5, n).astype("u1")},
        object_ids=oids,
    )
    export_neuroglancer(tmp_path / "syn.zarr", tmp_path / "ng", sharding=sharding)
    ds = ingest_neuroglancer(tmp_path / "ng" / "syn", f"memory://ann-{sharding}", progress=False)
    res, src = ds.read(), zv.open(tmp_path / "syn.zarr").read()
    assert ds.num_objects() == n and len(np.unique(res.object_ids)) == n  # one object per annotation
    assert res.attributes["object"].dtype == np.uint64 and res.attributes["kind"].dtype == np.uint8
    assert np.array_equal(np.sort(res.attributes["object"]), np.sort(src.object_ids))  # ids near 2**64 exact
    a = _sorted_rows(
        src.positions, src.attributes["score"], src.attributes["kind"], src.object_ids.astype(np.float64)
    )
    b = _sorted_rows(
        res.positions,
        res.attributes["score"],
        res.attributes["kind"],
        res.attributes["object"].astype(np.float64),
    )
    assert np.array_equal(a, b)


def test_line_annotations_round_trip(tmp_path: Path) -> None:
    """Lines exported as LINE annotations (one per edge) come back as straight segments."""
    rng = np.random.default_rng(9)
    lines = [np.cumsum(rng.normal(0, 30, (6, 3)), axis=0).astype("f4") + 500 for _ in range(4)]
    zv.write_lines(tmp_path / "tracts.zarr", lines, chunk_shape=200, object_ids=[3, 4, 5, 2**64 - 1])
    export_neuroglancer(tmp_path / "tracts.zarr", tmp_path / "ng", sharding=False)
    ds = ingest_neuroglancer(tmp_path / "ng" / "tracts", "memory://lines", progress=False)
    assert ds.num_objects() == sum(len(v) - 1 for v in lines)
    res = ds.read()
    seg = res.positions[res.edges].reshape(-1, 6) if res.edges is not None else None
    assert seg is not None
    want = np.concatenate([np.concatenate([v[:-1], v[1:]], axis=1) for v in lines])
    owners = np.repeat(np.array([3, 4, 5, 2**64 - 1], np.uint64), [len(v) - 1 for v in lines])
    got_owner = res.attributes["object"][res.edges[:, 0]]
    assert np.array_equal(
        _sorted_rows(seg, got_owner.astype(float)), _sorted_rows(want, owners.astype(float))
    )


def test_neuroglancer_package_annotations(tmp_path: Path) -> None:
    """POINT annotations written by ``neuroglancer.write_annotations.AnnotationWriter``:
    properties of every size (and rgb), two relationships, ids near 2**64."""
    ng = pytest.importorskip("neuroglancer")
    from neuroglancer.write_annotations import AnnotationWriter

    space = ng.CoordinateSpace(names=["x", "y", "z"], units="nm", scales=[4, 4, 40])
    props = [
        ng.AnnotationPropertySpec(id="kind", type="uint8", enum_values=[0, 1], enum_labels=["pre", "post"]),
        ng.AnnotationPropertySpec(id="score", type="float32"),
        ng.AnnotationPropertySpec(id="colour", type="rgb"),
        ng.AnnotationPropertySpec(id="depth", type="int16"),
    ]
    writer = AnnotationWriter(space, "point", relationships=["pre", "post"], properties=props)
    rng = np.random.default_rng(3)
    truth = []
    for k in range(40):
        p = rng.uniform(0, 100, 3).astype(np.float32)
        aid = 2**64 - 1 - k
        pre, post = 2**63 + k, k
        row = {
            "kind": k % 2,
            "score": float(np.float32(rng.random())),
            "colour": (k, 2 * k, 3 * k),
            "depth": -k,
        }
        writer.add_point(p, id=aid, pre=pre, post=[post] if k % 3 else [], **row)
        truth.append((aid, p, row, pre, post if k % 3 else 0))
    writer.write(tmp_path / "syn")
    ds = ingest_neuroglancer(tmp_path / "syn", "memory://ngann", progress=False, chunk_shape=200)
    assert ds.object_ids().tolist() == sorted(t[0] for t in truth)
    res = ds.read()
    at = {int(i): k for k, i in enumerate(res.object_ids.tolist())}
    for aid, p, row, pre, post in truth:
        k = at[aid]
        assert np.array_equal(res.positions[k], (p.astype(np.float64) * [4, 4, 40]).astype(np.float32))  # nm
        assert res.attributes["kind"][k] == row["kind"] and res.attributes["score"][k] == row["score"]
        assert (
            res.attributes["colour"][k].tolist() == list(row["colour"])
            and res.attributes["depth"][k] == row["depth"]
        )
        assert int(res.attributes["pre"][k]) == pre and int(res.attributes["post"][k]) == post
