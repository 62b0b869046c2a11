"""Point stores cross between this library and the reference 0.9.2, both ways, exactly."""

from __future__ import annotations

import numpy as np
import pytest

import zarr_vectors as zv
from tests.conftest import brute_force_box, sorted_rows

pytestmark = pytest.mark.interop


def _data(rng, n=3000, d=3, lo=0.0, hi=1000.0, objects=True):
    pos = rng.uniform(lo, hi, (n, d)).astype(np.float32)
    out = {
        "positions": pos,
        "intensity": rng.random(n).astype(np.float32),
        "color": rng.integers(0, 255, (n, 3)).astype(np.uint8),
    }
    if objects:
        out["object_ids"] = rng.integers(0, 50, n)
        out["weight"] = rng.random(50)
        out["centroid"] = rng.random((50, 3)).astype(np.float32)
        out["groups"] = [[0, 1, 2], [10, 11], list(range(20, 50))]
        out["score"] = np.array([1.5, 2.5, 3.5], np.float32)
    return out


def _boxes(rng, d, lo, hi, k=6):
    for _ in range(k):
        a = rng.uniform(lo, hi, d)
        b = a + rng.uniform(0, (hi - lo) / 2, d)
        yield a, b


@pytest.mark.parametrize(
    "case",
    [
        dict(d=3, lo=0.0, hi=1000.0, objects=True, chunk=200.0, bins=50.0),
        dict(d=3, lo=-500.0, hi=499.0, objects=False, chunk=200.0, bins=50.0),
        dict(d=2, lo=0.0, hi=512.0, objects=True, chunk=128.0, bins=32.0),
    ],
    ids=["3d-objects", "3d-negative", "2d-objects"],
)
def test_reference_reads_our_stores(tmp_path, rng, reference, case):
    d, lo, hi = case["d"], case["lo"], case["hi"]
    data = _data(rng, d=d, lo=lo, hi=hi, objects=case["objects"])
    pos = data["positions"]
    kwargs = {}
    if case["objects"]:
        kwargs = dict(
            object_ids=data["object_ids"],
            object_attributes={"weight": data["weight"], "centroid": data["centroid"]},
            groups=data["groups"],
            group_attributes={"score": data["score"]},
        )
    store = tmp_path / "ours.zarr"
    zv.write_points(
        store,
        pos,
        chunk_shape=case["chunk"],
        bin_shape=case["bins"],
        bounds=([lo] * d, [hi] * d),
        attributes={"intensity": data["intensity"], "color": data["color"]},
        **kwargs,
    )
    info = reference.info(store)
    assert info["valid"], info
    full = reference.read_points(tmp_path, store)
    cols = [pos, data["intensity"], data["color"]]
    got = [full["positions"], full["attr__intensity"], full["attr__color"]]
    if case["objects"]:
        cols.append(data["object_ids"])
        got.append(full["object_ids"])
        assert np.array_equal(full["oattr__weight"], data["weight"])
        assert np.array_equal(full["oattr__centroid"], data["centroid"])
        assert np.array_equal(full["gattr__score"], data["score"])
        flat, offs = full["groups_flat"], full["groups_offsets"]
        assert [flat[a:b].tolist() for a, b in zip(offs[:-1], offs[1:])] == data["groups"]
    assert np.array_equal(sorted_rows(*got), sorted_rows(*cols))
    for blo, bhi in _boxes(rng, d, lo, hi, k=4):
        box = reference.read_points(tmp_path, store, (blo, bhi))
        mask = brute_force_box(pos, blo, bhi)
        assert np.array_equal(
            sorted_rows(box["positions"], box["attr__intensity"]),
            sorted_rows(pos[mask], data["intensity"][mask]),
        )


@pytest.mark.parametrize("objects", [True, False], ids=["objects", "plain"])
def test_we_read_reference_stores(tmp_path, rng, reference, objects):
    data = _data(rng, objects=objects)
    pos = data["positions"]
    arrays = dict(
        positions=pos,
        chunk_shape=np.full(3, 100.0),
        bin_shape=np.full(3, 25.0),
        bounds=np.array([[0.0] * 3, [1000.0] * 3]),
        attr__intensity=data["intensity"],
        attr__color=data["color"],
    )
    if objects:
        groups = data["groups"]
        arrays.update(
            object_ids=data["object_ids"],
            oattr__weight=data["weight"],
            oattr__centroid=data["centroid"],
            groups_flat=np.concatenate([np.asarray(g) for g in groups]),
            groups_offsets=np.cumsum([0] + [len(g) for g in groups]),
            gattr__score=data["score"],
        )
    store = tmp_path / "ref.zv"
    reference.write_points(tmp_path, store, **arrays)
    ds = zv.open(store)
    full = ds.read()
    cols = [pos, data["intensity"], data["color"]]
    got = [full.positions, full.attributes["intensity"], full.attributes["color"]]
    if objects:
        cols.append(data["object_ids"])
        got.append(full.object_ids)
    assert np.array_equal(sorted_rows(*got), sorted_rows(*cols))
    for lo, hi in _boxes(rng, 3, 0.0, 1000.0):
        box = ds.query(bbox=(lo, hi))
        mask = brute_force_box(pos, lo, hi)
        expect = [pos[mask], data["intensity"][mask]] + ([data["object_ids"][mask]] if objects else [])
        got = [box.positions, box.attributes["intensity"]] + ([box.object_ids] if objects else [])
        assert np.array_equal(sorted_rows(*got), sorted_rows(*expect))
    if objects:
        one = ds.objects([11])
        assert np.array_equal(sorted_rows(one.positions), sorted_rows(pos[data["object_ids"] == 11]))
        assert np.array_equal(ds.object_attributes("weight"), data["weight"])
        assert np.array_equal(ds.object_attributes("centroid"), data["centroid"])
        assert [g.tolist() for g in ds.groups()] == data["groups"]
        assert np.array_equal(ds.group_attributes("score"), data["score"])
