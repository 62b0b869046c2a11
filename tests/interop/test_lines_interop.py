"""Polyline and streamline stores cross between this library and the reference 0.9.2."""

from __future__ import annotations

import numpy as np
import pytest

import zarr_vectors as zv
from tests._builders import random_walks

pytestmark = pytest.mark.interop


def _walks(rng, n=40):
    return [w.astype(np.float32) for w in random_walks(rng, n, lengths=(5, 90), step=12, start=(150, 850))]


def _as_dict(lines):
    return {i: np.asarray(x) for i, x in enumerate(lines)}


@pytest.mark.parametrize("kind", ["polyline", "streamline"])
def test_reference_reads_our_lines(tmp_path, rng, reference, kind):
    """Per-vertex attributes (one and three channels) and per-line object attributes (one
    and two channels) of our lines, as the reference returns them: ``select(objects=all)``
    gives every line whole, in order, with its vertex attributes and its id; the object
    tables come from ``building.read_object_attributes``; a ``select(bbox=)`` read returns
    (documented reference behaviour) every whole line with a vertex in a chunk the box
    touches, with its vertex attributes. All compared exactly, per object."""
    lines = _walks(rng)
    speed = [rng.random(len(x)).astype(np.float32) for x in lines]
    rgb = [rng.integers(0, 256, (len(x), 3)).astype(np.uint8) for x in lines]
    weight = rng.random(len(lines))
    label = rng.integers(-1000, 1000, (len(lines), 2)).astype(np.int32)
    store = tmp_path / "ours.zarr"
    zv.write_lines(
        store,
        lines,
        chunk_shape=100,
        kind=kind,
        attributes={"speed": np.concatenate(speed), "rgb": np.concatenate(rgb)},
        object_attributes={"weight": weight, "label": label},
    )
    info = reference.info(store)
    assert info["valid"], info
    assert info["levels"][0]["kind"] == kind
    assert sorted(info["levels"][0]["vertex_attributes"]) == ["rgb", "speed"]
    assert sorted(info["levels"][0]["object_attributes"]) == ["label", "weight"]
    got = reference.read_lines(tmp_path, store, objects=True)
    o, ids = got["line_offsets"], got["object_ids"]
    assert sorted(ids.tolist()) == list(range(len(lines)))
    assert got["attr__speed"].dtype == np.float32 and got["attr__rgb"].dtype == np.uint8
    for i, oid in enumerate(ids.tolist()):
        assert np.array_equal(got["positions"][o[i] : o[i + 1]], lines[oid])
        assert np.array_equal(got["attr__speed"][o[i] : o[i + 1]], speed[oid])
        assert np.array_equal(got["attr__rgb"][o[i] : o[i + 1]], rgb[oid])
    assert got["oattr__weight"].dtype == weight.dtype and got["oattr__label"].dtype == label.dtype
    for oid in range(len(lines)):
        assert got["oattr__weight"][oid] == weight[oid]
        assert np.array_equal(got["oattr__label"][oid], label[oid])

    lo, hi = np.array([300.0, 300.0, 300.0]), np.array([600.0, 650.0, 700.0])
    box = reference.read_level(tmp_path, store, "lines", 0, (lo, hi))
    clo, chi = np.floor(lo / 100), np.floor(hi / 100)
    cell = [np.floor(x / 100) for x in lines]
    touching = [i for i, c in enumerate(cell) if np.any(np.all((c >= clo) & (c <= chi), axis=1))]
    o, ids = box["line_offsets"], box["object_ids"]
    assert sorted(ids.tolist()) == touching
    for i, oid in enumerate(ids.tolist()):
        assert np.array_equal(box["positions"][o[i] : o[i + 1]], lines[oid])
        assert np.array_equal(box["attr__speed"][o[i] : o[i + 1]], speed[oid])
        assert np.array_equal(box["attr__rgb"][o[i] : o[i + 1]], rgb[oid])


@pytest.mark.parametrize("kind", ["polyline", "streamline"])
def test_we_read_reference_lines(tmp_path, rng, reference, kind):
    lines = _walks(rng)
    flat = np.concatenate(lines)
    offsets = np.cumsum([0] + [len(x) for x in lines])
    speed = rng.random(len(flat)).astype(np.float32)
    store = tmp_path / "ref.zv"
    reference.write_lines(
        tmp_path,
        store,
        kind=kind,
        positions=flat,
        offsets=offsets,
        chunk_shape=np.full(3, 100.0),
        attr__speed=speed,
    )
    ds = zv.open(store)
    assert kind in ds.geometry_types
    res = ds.objects(list(range(len(lines))))
    for i, line in enumerate(res.lines):
        assert np.array_equal(line, lines[i])
        a, b = res.line_offsets[i], res.line_offsets[i + 1]
        assert np.array_equal(res.attributes["speed"][a:b], speed[offsets[i] : offsets[i + 1]])
    full = ds.read()
    assert len(full) == len(flat)
    lo, hi = np.array([300.0, 300.0, 300.0]), np.array([600.0, 650.0, 700.0])
    box = ds.query(bbox=(lo, hi))
    inside = np.all((flat >= lo) & (flat <= hi), axis=1)
    assert sorted(map(tuple, box.positions.tolist())) == sorted(map(tuple, flat[inside].tolist()))


def test_box_pieces_on_reference_lines_match_brute_force(tmp_path, rng, reference):
    """The reference 0.9.2 writes some continuation records with wrong vertex rows; pieces
    must still follow the lines (the reader checks records against the manifests' order)."""
    lines = _walks(rng, n=80)
    flat = np.concatenate(lines)
    offsets = np.cumsum([0] + [len(x) for x in lines])
    store = tmp_path / "ref.zv"
    reference.write_lines(tmp_path, store, positions=flat, offsets=offsets, chunk_shape=np.full(3, 100.0))
    ds = zv.open(store)
    for _ in range(5):
        lo = rng.uniform(100, 600, 3)
        hi = lo + 300
        box = ds.query(bbox=(lo, hi))
        want = []
        for line in lines:
            inside = np.all((line >= lo) & (line <= hi), axis=1)
            runs = np.split(np.arange(len(line)), np.flatnonzero(np.diff(inside.astype(int))) + 1)
            want += [tuple(map(tuple, line[r].tolist())) for r in runs if inside[r[0]]]
        got = [tuple(map(tuple, p.tolist())) for p in box.lines]
        assert sorted(got) == sorted(want)


def test_straight_segments_both_ways(tmp_path, rng, reference):
    seg = rng.uniform(100, 900, (150, 2, 3)).astype(np.float32)
    ours = tmp_path / "ours.zarr"
    zv.write_lines(ours, seg, chunk_shape=100, kind="line")
    got = reference.read_lines(tmp_path, ours, objects=True)
    o, ids = got["line_offsets"], got["object_ids"]
    assert sorted(ids.tolist()) == list(range(len(seg)))
    for i, oid in enumerate(ids.tolist()):
        assert np.array_equal(got["positions"][o[i] : o[i + 1]], seg[oid])
    ref = tmp_path / "ref.zv"
    reference.write_lines(
        tmp_path,
        ref,
        kind="line",
        segments=seg,
        positions=seg.reshape(-1, 3),
        offsets=np.arange(len(seg) + 1) * 2,
        chunk_shape=np.full(3, 100.0),
    )
    ds = zv.open(ref)
    res = ds.objects(list(range(len(seg))))
    assert np.array_equal(np.stack(res.lines), seg)
