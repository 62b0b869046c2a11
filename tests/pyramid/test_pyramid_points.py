"""Point pyramids: metavertices against numpy, exact box queries at every level, metadata,
cross-level links, level choice by budget, failures and rebuilds."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

import zarr_vectors as zv
from tests._io import count_io
from tests.conftest import brute_force_box, sorted_rows
from zarr_vectors.engine.chunks.arrays import CellArray
from zarr_vectors.errors import InputError, ReadOnlyError
from zarr_vectors.format.links import decode_ragged
from zarr_vectors.format.shards import inner_codecs
from zarr_vectors.pyramid import Sparsity, estimate_counts

BOUNDS = ([0.0, 0.0, 0.0], [400.0, 400.0, 400.0])


def _cloud(rng, n=6000, objects=True):
    pos = rng.uniform(0, 400, (n, 3)).astype(np.float32)
    pos[:50] = np.float32(200.0)  # points exactly on chunk and bin edges
    pos[50:100, 0] = np.float32(100.0)
    data = {
        "positions": pos,
        "attributes": {
            "v": rng.random(n).astype(np.float32),
            "label": rng.integers(0, 4, n).astype(np.uint8),
        },
    }
    if objects:
        data["object_ids"] = rng.integers(0, 30, n)
        data["object_attributes"] = {"w": rng.random(30)}
        data["groups"] = [[0, 1, 2], [5, 6]]
    return data


def _store(tmp_path, rng, name="p.zarr", objects=True, build=True, **kwargs):
    data = _cloud(rng, objects=objects)
    zv.write_points(tmp_path / name, chunk_shape=50, bin_shape=25, bounds=BOUNDS, **data)
    if build:
        zv.open(tmp_path / name, mode="r+").build_pyramid(**({"factors": [2, 2]} | kwargs))
    return zv.open(tmp_path / name), data


def _expected_level1(data, bin_edge=50.0):
    """Brute force: one (object, bin) group per metavertex, mean position, attribute means/modes."""
    pos = data["positions"].astype(np.float64)
    key = np.floor(pos / bin_edge).astype(np.int64)
    oid = data.get("object_ids", np.zeros(len(pos), np.int64))
    table = np.column_stack([key, oid])
    uniq, inv = np.unique(table, axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    counts = np.bincount(inv)
    mean = np.stack([np.bincount(inv, pos[:, a]) / counts for a in range(3)], axis=1)
    v = np.bincount(inv, data["attributes"]["v"].astype(np.float64)) / counts
    label = np.array(
        [np.bincount(data["attributes"]["label"][inv == g], minlength=4).argmax() for g in range(len(uniq))]
    )
    return mean.astype(np.float32), uniq[:, 3], v.astype(np.float32), label.astype(np.uint8)


@pytest.mark.slow
def test_level1_metavertices_are_object_bin_means(tmp_path, rng):
    ds, data = _store(tmp_path, rng)
    mean, oid, v, label = _expected_level1(data)
    got = ds.read(level=1)
    assert len(got) == ds.vertex_count(1) == len(mean)
    want = sorted_rows(oid, mean, v, label)
    have = sorted_rows(got.object_ids, got.positions, got.attributes["v"], got.attributes["label"])
    np.testing.assert_allclose(have, want, rtol=0, atol=1e-4)


@pytest.mark.slow
def test_without_objects_one_representative_per_bin(tmp_path, rng):
    ds, data = _store(tmp_path, rng, objects=False, point_strategy="metavertex")
    occupied = np.unique(np.floor(data["positions"] / 100.0).astype(np.int64), axis=0)
    got = ds.read(level=2)
    assert len(got) == len(occupied)
    assert np.array_equal(np.unique(np.floor(got.positions / 100.0).astype(np.int64), axis=0), occupied)
    assert got.object_ids is None


@pytest.mark.slow
def test_box_queries_are_exact_at_every_level(tmp_path, rng):
    ds, _ = _store(tmp_path, rng)
    boxes = [(rng.uniform(0, 300, 3), None) for _ in range(6)]
    boxes = [(lo, lo + rng.uniform(10, 250, 3)) for lo, _ in boxes]
    boxes += [
        ([100.0, 100.0, 100.0], [200.0, 200.0, 200.0]),
        ([0, 0, 0], [400, 400, 400]),
        ([200, 200, 200], [200, 200, 200]),
    ]
    for k in ds.levels:
        full = ds.read(level=k)
        for lo, hi in boxes:
            got = ds.query((lo, hi), level=k)
            m = brute_force_box(full.positions, lo, hi)
            assert np.array_equal(
                sorted_rows(got.object_ids, got.positions, got.attributes["v"]),
                sorted_rows(full.object_ids[m], full.positions[m], full.attributes["v"][m]),
            )


@pytest.mark.slow
def test_objects_keep_their_ids_and_tables(tmp_path, rng):
    ds, data = _store(tmp_path, rng)
    for k in ds.levels:
        assert ds.num_objects(k) == 30
        np.testing.assert_array_equal(ds.object_attributes("w", level=k), data["object_attributes"]["w"])
        assert [g.tolist() for g in ds.groups(level=k)] == data["groups"]
        one = ds.objects([7], level=k)
        assert np.all(one.object_ids == 7) and len(one) > 0
    coarse = ds.objects([7], level=1).positions
    fine = data["positions"][data["object_ids"] == 7]
    assert np.array_equal(np.unique(np.floor(coarse / 50), axis=0), np.unique(np.floor(fine / 50), axis=0))


@pytest.mark.slow
def test_metadata(tmp_path, rng):
    ds, _ = _store(tmp_path, rng)
    root = json.loads((tmp_path / "p.zarr" / "zarr.json").read_text())["attributes"]
    datasets = root["multiscales"][0]["datasets"]
    assert [d["path"] for d in datasets] == ["0", "1", "2"]
    assert datasets[2]["coordinateTransformations"] == [
        {"type": "scale", "scale": [4.0, 4.0, 4.0]},
        {"type": "translation", "translation": [50.0, 50.0, 50.0]},
    ]
    block = root["zarr_vectors"]
    assert {"fragment_index", "preserved_object_ids", "multiscale_links"} <= set(block["format_capabilities"])
    assert (block["cross_level_storage"], block["cross_level_depth"]) == ("implicit", 1)
    lv = json.loads((tmp_path / "p.zarr" / "2" / "zarr.json").read_text())["attributes"]["zarr_vectors_level"]
    assert lv["chunk_shape"] == [200.0, 200.0, 200.0] and lv["parent_level"] == 1
    assert lv["coarsening_method"] == "per_object" and lv["preserves_object_ids"] is True
    assert lv["inherited_num_objects"] == 30 and lv["object_sparsity"] == 1.0
    assert "bin_shape" not in lv and "bin_ratio" not in lv
    assert lv["vertex_count"] == ds.vertex_count(2) == len(ds.read(level=2))
    assert lv["attribute_reductions"] == {"v": "mean", "label": "mode"}
    l0 = json.loads((tmp_path / "p.zarr" / "0" / "zarr.json").read_text())["attributes"]["zarr_vectors_level"]
    assert "links" in l0["arrays_present"]
    np.testing.assert_array_equal(ds.level(2).grid.bin_shape, [100.0] * 3)


def _parent_records(store, level, ds):
    """Every (fine row position, coarse row position) pair of ``level/links/+1``."""
    fine, coarse = ds.read(level=level), ds.read(level=level + 1)
    lvf, lvc = ds.level(level), ds.level(level + 1)

    def row_base(lv):
        counts = [
            len(lv.vertices.rows(lv.backend.get_many([lv.vertices.key(c)])[0], c, 3))
            for c in lv.vertices.nonempty
        ]
        return {
            tuple(c): b for c, b in zip(lv.vertices.nonempty.tolist(), np.cumsum([0] + counts)[:-1].tolist())
        }

    fb, cb = row_base(lvf), row_base(lvc)
    seg = f"{level}/links/+1/0.0.0"
    doc = json.loads(ds._backend.get_many([f"{seg}/zarr.json"])[0])  # the backend reads shards too
    meta, arr = doc["attributes"], CellArray(seg, doc)
    pairs = []
    for key in meta["nonempty_chunks"]:
        chunk = tuple(int(c) for c in key.split("."))
        raw = ds._backend.get_many([f"{seg}/c/" + "/".join(str(c) for c in chunk)])[0]
        rows = decode_ragged(arr.payload(raw, chunk), 2, meta["dtype"])[0].astype(np.int64)
        anchor = tuple(c * lvf.grid.chunk_shape[0] // lvc.grid.chunk_shape[0] for c in chunk)
        pairs.append(
            np.stack([rows[:, 0] + fb[chunk], rows[:, 1] + cb[tuple(int(a) for a in anchor)]], axis=1)
        )
    return fine, coarse, np.concatenate(pairs), meta


@pytest.mark.slow
def test_plus_one_links_give_each_fine_vertex_its_metavertex(tmp_path, rng):
    ds, _ = _store(tmp_path, rng)
    fine, coarse, pairs, meta = _parent_records(tmp_path / "p.zarr", 0, ds)
    assert (
        meta["dtype"] == "uint8" and meta["level_delta"] == 1 and meta["link_width"] == 2
    )  # < 256 rows per chunk
    assert len(pairs) == len(fine) and np.array_equal(np.sort(pairs[:, 0]), np.arange(len(fine)))
    g = pairs[:, 1]
    counts = np.bincount(g, minlength=len(coarse))
    assert counts.min() >= 1
    mean = np.stack(
        [np.bincount(g, fine.positions[pairs[:, 0], a].astype(np.float64)) / counts for a in range(3)], 1
    )
    np.testing.assert_allclose(mean, coarse.positions, atol=1e-3)
    assert np.array_equal(fine.object_ids[pairs[:, 0]], coarse.object_ids[g])


@pytest.mark.slow
def test_cross_level_modes(tmp_path, rng):
    _store(tmp_path, rng, name="e.zarr", cross_level="explicit", factors=[2])
    _store(tmp_path, rng, name="n.zarr", cross_level="none", factors=[2])
    assert (tmp_path / "e.zarr/0/links/+1").is_dir() and (tmp_path / "e.zarr/1/links/-1").is_dir()
    down = json.loads((tmp_path / "e.zarr/1/links/-1/zarr.json").read_text())["attributes"]
    up = json.loads((tmp_path / "e.zarr/0/links/+1/zarr.json").read_text())["attributes"]
    assert down["num_links"] == up["num_links"] == 6000 and down["level_delta"] == -1
    assert not (tmp_path / "n.zarr/0/links").exists()
    block = json.loads((tmp_path / "n.zarr/zarr.json").read_text())["attributes"]["zarr_vectors"]
    assert block["cross_level_storage"] == "none" and "multiscale_links" not in block["format_capabilities"]


def test_reductions_can_be_chosen(tmp_path, rng):
    ds, data = _store(tmp_path, rng, objects=False, factors=[2], reductions={"v": "max", "label": "sum"})
    got = ds.read(level=1)
    key = np.floor(data["positions"] / 50.0).astype(np.int64)
    uniq, inv = np.unique(key, axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    vmax = np.full(len(uniq), -np.inf)
    np.maximum.at(vmax, inv, data["attributes"]["v"])
    lsum = np.bincount(inv, data["attributes"]["label"]).astype(np.uint64)
    assert got.attributes["label"].dtype == np.uint64
    order = np.lexsort(np.floor(got.positions / 50.0).T[::-1])
    np.testing.assert_array_equal(got.attributes["v"][order], vmax.astype(np.float32))
    np.testing.assert_array_equal(got.attributes["label"][order], lsum)
    with pytest.raises(
        InputError,
        match=r"^the reduction of attribute 'v' must be one of 'mean', 'mode', 'sum', 'min', 'max', 'first'; "
        "got 'median'$",
    ):
        zv.open(tmp_path / "p.zarr", mode="r+").build_pyramid([2], reductions={"v": "median"}, overwrite=True)
    with pytest.raises(
        InputError,
        match=r"reductions name 'vv', which level 0 does not have; its attributes are \['label', 'v'\]",
    ):
        zv.open(tmp_path / "p.zarr", mode="r+").build_pyramid([2], reductions={"vv": "max"}, overwrite=True)
    assert zv.open(tmp_path / "p.zarr").levels == [0, 1]  # refused rebuilds keep the old level


def test_level_for_and_max_vertices_read_no_vertex_data(tmp_path, rng):
    ds, _ = _store(tmp_path, rng, factors=[2, 2, 2])
    counts = [ds.vertex_count(k) for k in ds.levels]
    io = count_io(ds, ds.levels)
    assert ds.level_for(max_vertices=counts[0]) == 0
    assert ds.level_for(max_vertices=counts[1]) == 1
    assert ds.level_for(max_vertices=counts[2] - 1) == 3
    assert ds.level_for(max_vertices=0) == 3  # nothing fits: the coarsest
    box = ([0, 0, 0], [199.0, 199.0, 199.0])  # an eighth of the volume
    estimates = estimate_counts(ds, box)
    actual = [len(ds.query(box, level=k)) for k in ds.levels]
    np.testing.assert_allclose([estimates[k] for k in ds.levels], actual, rtol=0.1)
    assert ds.level_for(max_vertices=counts[0] // 5, bbox=box) == 0
    assert ds.level_for(max_vertices=700, bbox=box) == 1  # estimates: 739 at level 0, 608 at level 1
    assert io.cells_read()  # the counter sees the reads of this dataset
    io.clear()
    assert (
        ds.level_for(resolution=60) == 1
        and ds.level_for(resolution=10) == 0
        and ds.level_for(resolution=1e9) == 3
    )
    assert not io.cells_read(), "level choice must read metadata only"
    res = ds.query(box, max_vertices=700)
    assert res.origin.level == 1
    assert np.array_equal(sorted_rows(res.positions), sorted_rows(ds.query(box, level=1).positions))
    with pytest.raises(InputError, match="not both"):
        ds.query(box, level=1, max_vertices=10)
    with pytest.raises(InputError, match="exactly one"):
        ds.level_for()


@pytest.mark.slow
def test_read_only_and_existing_levels(tmp_path, rng):
    ds, _ = _store(tmp_path, rng, factors=[2])
    with pytest.raises(ReadOnlyError, match="mode='r\\+'"):
        ds.build_pyramid([2])
    rw = zv.open(tmp_path / "p.zarr", mode="r+")
    with pytest.raises(InputError, match="overwrite=True"):
        rw.build_pyramid([2])
    rw.build_pyramid([4], cross_level="none", overwrite=True)
    again = zv.open(tmp_path / "p.zarr")
    assert again.levels == [0, 1]
    np.testing.assert_array_equal(again.level(1).grid.bin_shape, [100.0] * 3)
    assert not (tmp_path / "p.zarr/0/links").exists() and not (tmp_path / "p.zarr/2").exists()
    l0 = json.loads((tmp_path / "p.zarr/0/zarr.json").read_text())["attributes"]["zarr_vectors_level"]
    assert "links" not in l0["arrays_present"]


@pytest.mark.slow
def test_failed_build_leaves_the_store_as_it_was(tmp_path, rng, monkeypatch):
    """A build is all or nothing: a failure at level 2 leaves no level 1 and no file changed."""
    _store(tmp_path, rng, build=False)
    from zarr_vectors.pyramid import build

    real = build.coarsen_points
    calls = []

    def failing(src, plan, *args, **kwargs):
        calls.append(plan.index)
        if plan.index == 2:
            raise RuntimeError("disk full")
        return real(src, plan, *args, **kwargs)

    monkeypatch.setattr(build, "coarsen_points", failing)
    store = tmp_path / "p.zarr"
    before = {p.relative_to(store): p.read_bytes() for p in store.rglob("*") if p.is_file()}
    ds = zv.open(store, mode="r+")
    with pytest.raises(RuntimeError, match="disk full"):
        ds.build_pyramid([2, 2])
    assert calls == [1, 2]
    assert {p.relative_to(store): p.read_bytes() for p in store.rglob("*") if p.is_file()} == before
    assert sorted(os.listdir(tmp_path)) == ["p.zarr"]  # no staging folder left
    for again in (ds, zv.open(store)):
        assert again.levels == [0] and len(again.read(level=0)) == 6000
    monkeypatch.undo()
    assert ds.build_pyramid([2]) == [1]  # the dataset is usable for a new build
    assert zv.open(store).levels == [0, 1]


@pytest.mark.slow
def test_plans_chunk_scales_and_factors(tmp_path, rng):
    ds, _ = _store(tmp_path, rng, factors=[(2, 2, 1), 1.5], chunk_scale="auto")
    lv1, lv2 = ds.level(1), ds.level(2)
    np.testing.assert_array_equal(lv1.grid.bin_shape, [50, 50, 25])
    np.testing.assert_array_equal(lv1.grid.chunk_shape, [100, 100, 50])
    np.testing.assert_array_equal(lv2.grid.bin_shape, [75, 75, 37.5])
    np.testing.assert_array_equal(lv2.grid.chunk_shape, [300, 300, 150])
    full = ds.read(level=2)
    got = ds.query(([30, 30, 30], [290, 310, 150]), level=2)
    assert len(got) == brute_force_box(full.positions, [30, 30, 30], [290, 310, 150]).sum()
    fixed, _ = _store(tmp_path, rng, name="k.zarr", factors=[2], chunk_scale=None)
    np.testing.assert_array_equal(fixed.level(1).grid.chunk_shape, [50, 50, 50])
    rw = zv.open(tmp_path / "k.zarr", mode="r+")
    for bad, match in (([0.5], "factors\\[0\\]"), ([1], "> 1 on at least one"), ("2", "non-empty list")):
        with pytest.raises(InputError, match=match):
            rw.build_pyramid(bad, overwrite=True)
    with pytest.raises(InputError, match="whole multiple of its bin shape"):
        rw.build_pyramid([3], chunk_scale=[1], overwrite=True)


@pytest.mark.slow
def test_object_sparsity(tmp_path, rng):
    ds, _ = _store(tmp_path, rng, factors=[2, 2], object_sparsity=[0.5, Sparsity(0.5, by="size")])
    present1 = np.unique(ds.read(level=1).object_ids)
    present2 = np.unique(ds.read(level=2).object_ids)
    assert len(present1) == 15 and len(present2) == 8 and set(present2) <= set(present1)
    sizes = np.bincount(ds.read(level=1).object_ids, minlength=30)[present1]  # sizes at the source level
    assert set(present2) == set(present1[np.argsort(-sizes, kind="stable")[:8]])
    lv = json.loads((tmp_path / "p.zarr/2/zarr.json").read_text())["attributes"]["zarr_vectors_level"]
    assert lv["object_sparsity"] == 8 / 15 and lv["object_sparsity_strategy"] == "size"
    assert lv["preserves_object_ids"] and lv["inherited_num_objects"] == 30
    dropped = int(np.setdiff1d(np.arange(30), present1)[0])
    assert len(ds.objects([dropped], level=1)) == 0 and ds.num_objects(1) == 30
    same, _ = _store(tmp_path, rng, name="s2.zarr", factors=[2], object_sparsity=Sparsity(0.5, seed=0))
    assert np.array_equal(np.unique(same.read(level=1).object_ids), present1)
    by_w, d2 = _store(
        tmp_path,
        rng,
        name="s3.zarr",
        factors=[2],
        object_sparsity=Sparsity(0.2, by="attribute", attribute="w"),
    )
    assert set(np.unique(by_w.read(level=1).object_ids)) == set(np.argsort(-d2["object_attributes"]["w"])[:6])
    with pytest.raises(InputError, match="needs objects"):
        _store(tmp_path, rng, name="s4.zarr", objects=False, factors=[2], object_sparsity=0.5)
    with pytest.raises(InputError, match="in \\(0, 1\\]"):
        Sparsity(0.0)


@pytest.mark.slow
def test_compression_follows_level0(tmp_path, rng):
    data = _cloud(rng, n=2000)
    zv.write_points(
        tmp_path / "z.zarr", chunk_shape=50, bin_shape=25, bounds=BOUNDS, compression="zstd", **data
    )
    zv.open(tmp_path / "z.zarr", mode="r+").build_pyramid([2])
    doc = json.loads((tmp_path / "z.zarr/1/vertices/zarr.json").read_text())
    assert [c["name"] for c in inner_codecs(doc)] == ["vlen-bytes", "zstd"]
    ds = zv.open(tmp_path / "z.zarr")
    assert len(ds.read(level=1)) == ds.vertex_count(1)
