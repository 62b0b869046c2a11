"""Sharded stores: written by every writer, read back exactly like unsharded ones, by us and by
zarr-python, accepted by the validator; reads make few requests per shard."""

from __future__ import annotations

import json
import math
import os
import warnings

import numpy as np
import pytest
import zarr

import zarr_vectors as zv
from tests._io import count_requests
from tests.conftest import brute_force_box, sorted_rows
from zarr_vectors.engine.write.options import check_shards, default_shards
from zarr_vectors.errors import CorruptShardError, InputError
from zarr_vectors.format.shards import APPEND_BUDGET, append_rewrite, auto_chunks_per_shard, parse_sharding

BOUNDS = ([0.0, 0.0, 0.0], [399.0, 399.0, 399.0])


def _files(path) -> int:
    return sum(len(files) for _, _, files in os.walk(path))


@pytest.fixture(scope="module")
def points(tmp_path_factory):
    rng = np.random.default_rng(5)
    n = 20_000
    pos = rng.uniform(0, 399, (n, 3)).astype(np.float32)
    data = {"pos": pos, "a": rng.random(n).astype(np.float32), "ids": rng.integers(0, 40, n)}
    out = tmp_path_factory.mktemp("sharded")
    for name, shards in [("plain", None), ("two", 2), ("mixed", (2, 3, 1)), ("auto", "auto")]:
        zv.write_points(
            out / f"{name}.zarr",
            pos,
            chunk_shape=50,
            bin_shape=25,
            bounds=BOUNDS,
            attributes={"a": data["a"]},
            object_ids=data["ids"],
            shards=shards,
        )
    return out, data


@pytest.mark.parametrize("name", ["two", "mixed", "auto"])
def test_sharded_points_read_like_brute_force(points, name):
    out, data = points
    ds = zv.open(out / f"{name}.zarr")
    pos, a = data["pos"], data["a"]
    rng = np.random.default_rng(0)
    for _ in range(4):
        lo = rng.uniform(0, 300, 3)
        hi = lo + rng.uniform(10, 200, 3)
        got = ds.query(bbox=(lo, hi))
        mask = brute_force_box(pos, lo, hi)
        assert np.array_equal(
            sorted_rows(got.positions, got.attributes["a"]), sorted_rows(pos[mask], a[mask])
        )
    whole = ds.query()
    assert np.array_equal(sorted_rows(whole.positions), sorted_rows(pos))
    objs = ds.objects([3, 17])
    want = np.isin(data["ids"], [3, 17])
    assert np.array_equal(sorted_rows(objs.positions), sorted_rows(pos[want]))
    report = zv.validate(out / f"{name}.zarr")
    assert report.ok and report.cells_checked > 0, str(report)


def test_shards_are_few_objects_holding_the_same_cells(points):
    out, _ = points
    plain, two, auto = (_files(out / f"{n}.zarr") for n in ("plain", "two", "auto"))
    assert two < plain / 5 and auto < plain / 1.9
    auto_doc = json.loads((out / "auto.zarr/0/vertices/zarr.json").read_text())
    cps, shape = auto_doc["chunk_grid"]["configuration"]["chunk_shape"], auto_doc["shape"]
    assert math.prod(cps) >= 2  # "auto" groups cells even on this small 8 x 8 x 8 grid
    assert append_rewrite(shape, cps) <= 1.5 * append_rewrite(shape, [1, 1, 1]) + 1e-12
    doc = json.loads((out / "two.zarr/0/vertices/zarr.json").read_text())
    assert doc["chunk_grid"]["configuration"]["chunk_shape"] == [2, 2, 2]
    layout = parse_sharding("0/vertices", doc)
    assert layout is not None and layout.index_location == "end" and layout.checksum
    assert list(layout.codecs) == json.loads((out / "plain.zarr/0/vertices/zarr.json").read_text())["codecs"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for array in ("vertices", "vertex_fragments", "vertex_attributes/a"):
            mine = zarr.open_array(str(out / "two.zarr/0" / array), mode="r")[:]
            ref = zarr.open_array(str(out / "plain.zarr/0" / array), mode="r")[:]
            assert mine.shape == ref.shape
            assert [bytes(v) for v in mine.ravel()] == [bytes(v) for v in ref.ravel()]


def test_streaming_writes_the_shards_of_the_one_shot_writer(tmp_path, points):
    out, data = points
    path = tmp_path / "stream.zarr"
    with zv.create(path, "points", chunk_shape=50, bin_shape=25, bounds=BOUNDS, shards=2) as w:
        for part in np.array_split(np.arange(len(data["pos"])), 3):
            w.append(data["pos"][part], attributes={"a": data["a"][part]}, object_ids=data["ids"][part])
    for array in ("vertices", "vertex_fragments", "vertex_attributes/a"):
        a, b = _shard_files(path / "0" / array), _shard_files(out / "two.zarr/0" / array)
        assert a == b and len(a) > 1


def _shard_files(folder) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in (folder / "c").rglob("*") if p.is_file()}


def test_lines_and_meshes_sharded_answer_as_unsharded(tmp_path):
    rng = np.random.default_rng(3)
    walks = [np.cumsum(rng.normal(0, 8, (int(rng.integers(5, 40)), 3)), axis=0) + 200 for _ in range(40)]
    box = ([150.0] * 3, [260.0] * 3)
    kw = dict(chunk_shape=50, bounds=([-300.0] * 3, [700.0] * 3))
    a = zv.write_lines(tmp_path / "a.zarr", walks, **kw)
    b = zv.write_lines(tmp_path / "b.zarr", walks, shards=(2, 2, 3), **kw)
    ra, rb = a.query(bbox=box), b.query(bbox=box)
    assert np.array_equal(sorted_rows(ra.positions), sorted_rows(rb.positions))
    assert np.array_equal(sorted_rows(a.objects([4]).positions), sorted_rows(b.objects([4]).positions))
    assert zv.validate(tmp_path / "b.zarr").ok
    trimesh = pytest.importorskip("trimesh")
    mesh = trimesh.creation.icosphere(2, radius=100)
    a = zv.write_mesh(tmp_path / "ma.zarr", mesh.vertices + 150, mesh.faces, chunk_shape=40)
    b = zv.write_mesh(tmp_path / "mb.zarr", mesh.vertices + 150, mesh.faces, chunk_shape=40, shards=2)
    box = ([40.0, 40.0, 40.0], [160.0, 260.0, 150.0])
    ra, rb = a.query(bbox=box), b.query(bbox=box)
    assert len(ra) > 0 and len(ra.faces) > 0
    fa = np.sort(ra.positions[ra.faces].reshape(len(ra.faces), -1), axis=0)
    fb = np.sort(rb.positions[rb.faces].reshape(len(rb.faces), -1), axis=0)
    assert np.array_equal(fa, fb)
    assert zv.validate(tmp_path / "mb.zarr").ok


def test_a_box_query_fetches_each_index_once_and_one_range_per_shard(points):
    out, data = points
    ds = zv.open(out / "two.zarr")
    counter = count_requests(ds)
    lo, hi = np.array([10.0, 10.0, 10.0]), np.array([140.0, 90.0, 90.0])  # cells 0..2 x 0..1 x 0..1
    first = ds.query(bbox=(lo, hi))
    mask = brute_force_box(data["pos"], lo, hi)
    assert np.array_equal(sorted_rows(first.positions), sorted_rows(data["pos"][mask]))
    waves = counter.ranges
    indexes = [r for r in waves[0] if r[1] < 0]
    shards = {k for k, _, _ in indexes}
    arrays = {k.rpartition("/c/")[0] for k in shards}
    assert {"0/vertices", "0/vertex_attributes/a"} <= arrays
    assert len(indexes) == len(shards) == 2 * len(arrays)  # shards c/0/0/0 and c/1/0/0 of each array
    assert len(waves[1]) == len(shards)  # one coalesced range per shard
    assert len(waves) == 2  # indexes, then the cells' ranges
    assert counter.gets == [["zarr.json"]]  # then the root check (whole keys, not a range wave)
    counter.clear()
    again = ds.query(bbox=(lo, hi))
    assert len(again) == len(first)
    assert not [r for wave in counter.ranges for r in wave if r[1] < 0]  # indexes cached
    assert len(counter.ranges) == 1 and counter.gets == [["zarr.json"]]  # the cells, the root check


def test_damaged_shard_index_is_named(tmp_path, points):
    out, _ = points
    path = tmp_path / "bad.zarr"
    zv.write_points(path, points[1]["pos"][:2000], chunk_shape=50, bounds=BOUNDS, shards=2)
    shard = path / "0/vertices/c/0/0/0"
    raw = bytearray(shard.read_bytes())
    raw[-6] ^= 0xFF
    shard.write_bytes(bytes(raw))
    with pytest.raises(CorruptShardError, match=r"shard c/0/0/0 in array '0/vertices'.*crc32c"):
        zv.open(path).query()
    report = zv.validate(path)
    assert not report.ok and any("crc32c" in p.message for p in report.problems)


def test_shards_keyword_and_defaults():
    assert check_shards(None, 3) is None and check_shards("none", 3) is None
    assert check_shards(4, 3) == (4, 4, 4) and check_shards([1, 2, 3], 3) == (1, 2, 3)
    assert check_shards("auto", 2) == "auto"
    for bad in [0, (1, 2), "big", 1.5, True]:
        with pytest.raises(InputError, match="shards must be"):
            check_shards(bad, 3)
    # DECISIONS item 10: sharded by default on every backend, local disk included.
    for target in ["s3://bucket/x.zarr", "gs://b/x", "/tmp/x.zarr", "memory://x", "file:///tmp/x.zarr"]:
        assert default_shards(target) == "auto" and check_shards("default", 3, target) == "auto"
    assert default_shards(zarr.storage.MemoryStore()) == "auto"


def test_auto_shards_keep_a_local_append_small():
    # Worked by hand from append_rewrite: on a 10^3 grid a 1 % box touches 3.15 cells a side on
    # average, 3.1 % of the cells unsharded; budget max(3.5 %, 1.5 x 3.1 %) = 4.7 %. Two cells
    # along one axis give 4.15 * 3.15^2 / 1000 = 4.1 %; any third cell passes 4.7 %.
    assert auto_chunks_per_shard((10, 10, 10), 120e3) == (2, 1, 1)
    assert auto_chunks_per_shard((10, 10, 10), 120e3, contiguous=True) == (1, 2, 1)
    assert auto_chunks_per_shard((10, 10, 10), 1e9) == (1, 1, 1)  # a cell over the 64 MB target
    assert auto_chunks_per_shard((50, 50, 50), 1e6) == (4, 4, 4)  # (0.215 + 0.08)^3 = 2.6 %
    assert auto_chunks_per_shard((50, 50, 50), 1e6, contiguous=True) == (1, 8, 8)
    assert auto_chunks_per_shard((50, 50, 50), 16e6) == (2, 2, 1)  # at most 4 cells of 16 MB
    for shape in [(7, 7, 7), (14, 14, 14), (22, 30, 18), (100, 100), (40, 5, 60), (1000,)]:
        for contiguous in (False, True):
            cps = auto_chunks_per_shard(shape, 1e3, contiguous=contiguous)
            budget = max(APPEND_BUDGET, 1.5 * append_rewrite(shape, [1] * len(shape)))
            assert append_rewrite(shape, cps) <= budget and all(1 <= k <= n for k, n in zip(cps, shape))
            assert not contiguous or len(shape) == 1 or cps[0] == 1
            for ax in range(len(shape)):  # as large as the budget allows: no axis can grow
                grown = [*cps[:ax], cps[ax] + 1, *cps[ax + 1 :]]
                assert (
                    grown[ax] > shape[ax] or append_rewrite(shape, grown) > budget or (contiguous and ax == 0)
                )


def test_every_target_is_sharded_by_default_unless_asked(rng, tmp_path):
    pts = rng.uniform(0, 10, (100, 2))
    for target in ["memory://shards-default", tmp_path / "local.zarr"]:
        ds = zv.write_points(target, pts, chunk_shape=1)
        doc = json.loads(ds._store.backend.get_many(["0/vertices/zarr.json"])[0])
        assert doc["codecs"][0]["name"] == "sharding_indexed", target
    for none in [None, "none"]:
        ds = zv.write_points("memory://shards-none", pts, chunk_shape=1, shards=none, overwrite=True)
        doc = json.loads(ds._store.backend.get_many(["0/vertices/zarr.json"])[0])
        assert doc["codecs"][0]["name"] == "vlen-bytes"


def test_pyramids_build_on_sharded_stores(tmp_path, rng):
    pos = rng.uniform(0, 400, (5000, 3)).astype(np.float32)
    path = tmp_path / "pyr.zarr"
    zv.write_points(path, pos, chunk_shape=50, shards=2, object_ids=rng.integers(0, 9, 5000))
    zv.open(path, mode="r+").build_pyramid([2])
    ds = zv.open(path)
    assert len(ds.query(level=0)) == 5000 and 0 < len(ds.query(level=1)) < 5000
    assert zv.validate(path).ok


@pytest.mark.slow  # two stores, two pyramids of two levels, two validations (several seconds)
def test_pyramids_keep_the_layout_of_level0(tmp_path, rng):
    """Default (sharded) store: every level sharded, each level read back from the one below it
    while the build is staged; an unsharded store keeps one file per cell in every level."""
    pos = rng.uniform(0, 400, (6000, 3)).astype(np.float32)
    for shards in ("default", None):
        path = tmp_path / f"pyr-{shards}.zarr"
        zv.write_points(path, pos, chunk_shape=25, shards=shards, object_ids=rng.integers(0, 9, 6000))
        zv.open(path, mode="r+").build_pyramid([2, 2])
        ds = zv.open(path)
        assert ds.levels == [0, 1, 2]
        for level in ds.levels:
            doc = json.loads((path / f"{level}/vertices/zarr.json").read_text())
            assert (parse_sharding("v", doc) is not None) == (shards == "default"), (shards, level)
        assert len(ds.query(level=0)) == 6000
        assert 0 < len(ds.query(level=2)) < len(ds.query(level=1)) < 6000
        assert zv.validate(path).ok


def _cells(path) -> dict[str, list[bytes]]:
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for array in ("vertices", "vertex_fragments", "vertex_attributes/a", "fragment_attributes/object_id"):
            if (path / "0" / array).is_dir():
                out[array] = [bytes(v) for v in zarr.open_array(str(path / "0" / array), mode="r")[:].ravel()]
    return out


@pytest.mark.slow  # four stores written, two appends (about 3 s)
@pytest.mark.parametrize("case", ["one-corner", "new-owner-table"])
def test_append_to_a_sharded_store_rewrites_whole_shards_like_unsharded(tmp_path, rng, case):
    n = 4000
    pos = rng.uniform(0, 399, (n, 3)).astype(np.float32)
    a = rng.random(n).astype(np.float32)
    ids = rng.integers(0, 9, n) if case == "one-corner" else np.zeros(n, np.int64)
    more = rng.uniform(0, 90, (300, 3)).astype(np.float32)  # a corner: some shards untouched
    more_ids = rng.integers(0, 9, 300) if case == "one-corner" else rng.integers(5, 8, 300)
    more_a = rng.random(300).astype(np.float32)
    kw = dict(chunk_shape=50, bin_shape=25, bounds=BOUNDS)
    for name, shards in (("plain", None), ("sharded", (2, 3, 2))):
        path = tmp_path / f"{name}.zarr"
        zv.write_points(path, pos, attributes={"a": a}, object_ids=ids, shards=shards, **kw)
        zv.open(path, mode="r+").append(more, attributes={"a": more_a}, object_ids=more_ids, extend=True)
    plain, sharded = tmp_path / "plain.zarr", tmp_path / "sharded.zarr"
    assert _cells(sharded) == _cells(plain) and "fragment_attributes/object_id" in _cells(plain)
    assert len(list((sharded / "0/vertices/c").rglob("*"))) < len(list((plain / "0/vertices/c").rglob("*")))
    assert zv.validate(sharded).ok
    ds, allpos = zv.open(sharded), np.concatenate([pos, more])
    assert np.array_equal(sorted_rows(ds.query().positions), sorted_rows(allpos))
    assert np.array_equal(
        sorted_rows(ds.objects([6]).positions), sorted_rows(allpos[np.r_[ids, more_ids] == 6])
    )


def test_the_index_cache_is_bounded_and_reads_stay_exact(points, monkeypatch):
    from zarr_vectors.storage import shards
    from zarr_vectors.storage.local import LocalBackend

    out, _ = points
    monkeypatch.setattr(shards, "MAX_INDEX_BYTES", 3 * (2 * 8 * 8 + 64))  # three indexes of 8 cells
    plain = LocalBackend(out / "plain.zarr")
    reader = shards.ShardReader(LocalBackend(out / "two.zarr"))
    reader.get_many(["0/vertices/zarr.json"])
    keys = [k for k in plain.list_keys("0/vertices") if "/c/" in k]
    assert len(keys) > 8
    assert reader.get_many(keys) == plain.get_many(keys)
    assert len(reader._indexes) == 3
    assert reader.get_many(keys[:1]) == plain.get_many(keys[:1])


def test_shards_with_the_index_at_the_start_read_the_same(tmp_path, points):
    import shutil
    from dataclasses import replace

    from zarr_vectors.format.shards import decode_shard, encode_shard

    out, data = points
    path = tmp_path / "start.zarr"
    shutil.copytree(out / "two.zarr", path)
    for array in ("vertices", "vertex_attributes/a"):
        doc_path = path / "0" / array / "zarr.json"
        doc = json.loads(doc_path.read_text())
        layout = parse_sharding(array, doc)
        start = replace(layout, index_location="start")
        for shard in (path / "0" / array / "c").rglob("*"):
            if shard.is_file():
                cells = {p: bytes(v) for p, v in decode_shard(shard.read_bytes(), layout).items()}
                shard.write_bytes(encode_shard(start, cells))
        doc["codecs"] = [start.codec_json()]
        doc_path.write_text(json.dumps(doc))
    ds = zv.open(path)
    lo, hi = np.array([20.0, 70.0, 5.0]), np.array([330.0, 260.0, 390.0])
    got = ds.query(bbox=(lo, hi))
    mask = brute_force_box(data["pos"], lo, hi)
    assert np.array_equal(
        sorted_rows(got.positions, got.attributes["a"]), sorted_rows(data["pos"][mask], data["a"][mask])
    )
    assert zv.validate(path).ok


def test_inventory_counts_shards_as_the_stored_objects(points):
    from zarr_vectors.storage.inventory import inventory

    out, _ = points
    sharded = {a.path: a for a in inventory(out / "two.zarr")[0]}
    plain = {a.path: a for a in inventory(out / "plain.zarr")[0]}
    assert sharded["0/vertices"].sharded and not plain["0/vertices"].sharded
    assert sharded["0/vertices"].stored_chunks == 4 * 4 * 4 and plain["0/vertices"].stored_chunks == 512
    assert not sharded["0/object_index/manifests"].sharded
