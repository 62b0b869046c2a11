"""Sharded stores cross between this library and the reference 0.9.2.

The reference must read our sharded points, lines and meshes with the answers it gives for the
same data written unsharded (and, for points, the brute-force answer), and our *default* stores
(sharded, DECISIONS item 10) of every raw kind the same way; we read the reference's own sharded
store (``write_points(..., shard_shape=...)``) exactly.
"""

from __future__ import annotations

import json
import subprocess
import textwrap

import numpy as np
import pytest

import zarr_vectors as zv
from tests._builders import icosphere, random_tree
from tests.conftest import brute_force_box, sorted_rows
from zarr_vectors.format.shards import parse_sharding

pytestmark = pytest.mark.interop

BOX = (np.array([120.0, 60.0, 150.0]), np.array([560.0, 640.0, 700.0]))


def _same(a: dict, b: dict) -> None:
    assert sorted(a) == sorted(b)
    for key in a:
        assert np.array_equal(a[key], b[key]), key


def test_reference_reads_our_sharded_points(tmp_path, rng, reference):
    pos = rng.uniform(0, 1000, (4000, 3)).astype(np.float32)
    attrs = {"intensity": rng.random(4000).astype(np.float32)}
    ids = rng.integers(0, 30, 4000)
    kw = dict(
        chunk_shape=200.0, bin_shape=50.0, bounds=([0.0] * 3, [1000.0] * 3), attributes=attrs, object_ids=ids
    )
    plain, sharded = tmp_path / "plain.zarr", tmp_path / "sharded.zarr"
    zv.write_points(plain, pos, shards=None, **kw)
    zv.write_points(sharded, pos, shards=(2, 3, 4), **kw)
    assert reference.info(sharded)["valid"]
    full = reference.read_points(tmp_path, sharded)
    _same(full, reference.read_points(tmp_path, plain))
    assert np.array_equal(sorted_rows(full["positions"]), sorted_rows(pos))
    box = reference.read_points(tmp_path, sharded, BOX)
    _same(box, reference.read_points(tmp_path, plain, BOX))
    mask = brute_force_box(pos, *BOX)
    assert np.array_equal(
        sorted_rows(box["positions"], box["attr__intensity"]),
        sorted_rows(pos[mask], attrs["intensity"][mask]),
    )


def test_reference_reads_our_sharded_lines_and_mesh(tmp_path, rng, reference):
    walks = [
        np.clip(np.cumsum(rng.normal(0, 30, (int(rng.integers(5, 40)), 3)), axis=0) + 500, 0, 999).astype(
            np.float32
        )
        for _ in range(40)
    ]
    kw = dict(chunk_shape=100.0, bounds=([0.0] * 3, [999.0] * 3))
    zv.write_lines(tmp_path / "lp.zarr", walks, shards=None, **kw)
    zv.write_lines(tmp_path / "ls.zarr", walks, shards=2, **kw)
    got = reference.read_lines(tmp_path, tmp_path / "ls.zarr", objects=True)
    _same(got, reference.read_lines(tmp_path, tmp_path / "lp.zarr", objects=True))
    o, oid = got["line_offsets"], got["object_ids"]
    for i, k in enumerate(oid.tolist()):
        assert np.array_equal(got["positions"][o[i] : o[i + 1]], walks[k])
    v, f = icosphere(3, 499.0, 500.0, np.float32)
    zv.write_mesh(tmp_path / "mp.zarr", v, f, chunk_shape=250.0, shards=None)
    zv.write_mesh(tmp_path / "ms.zarr", v, f, chunk_shape=250.0, shards=(2, 2, 1))
    for bbox in (None, BOX):
        got = reference.read_mesh(tmp_path, tmp_path / "ms.zarr", bbox)
        _same(got, reference.read_mesh(tmp_path, tmp_path / "mp.zarr", bbox))
        assert len(got["positions"]) > 0


def _raw_kinds(rng) -> dict:
    """``{kind: (writer, how the reference reads it)}`` over one data set per raw kind."""
    pos = rng.uniform(0, 1000, (3000, 3)).astype(np.float32)
    attrs = {"intensity": rng.random(3000).astype(np.float32)}
    walks = [np.clip(np.cumsum(rng.normal(0, 30, (25, 3)), axis=0) + 500, 0, 999) for _ in range(30)]
    gpos = rng.uniform(0, 1000, (400, 3))
    edges = rng.integers(0, 400, (900, 2))
    edges = edges[edges[:, 0] != edges[:, 1]]
    tpos, parents = random_tree(rng, 300, span=1000.0)
    v, f = icosphere(3, 499.0, 500.0, np.float32)
    box = {"chunk_shape": 200.0, "bounds": ([0.0] * 3, [1000.0] * 3)}
    return {
        "points": (lambda p, **k: zv.write_points(p, pos, attributes=attrs, **box, **k), "read_points"),
        "lines": (lambda p, **k: zv.write_lines(p, walks, **box, **k), "read_lines"),
        "graph": (lambda p, **k: zv.write_graph(p, gpos, edges, **box, **k), "read_graph"),
        "skeleton": (
            lambda p, **k: zv.write_skeleton(p, tpos, parents, chunk_shape=200.0, **k),
            "read_graph",
        ),
        "mesh": (lambda p, **k: zv.write_mesh(p, v, f, chunk_shape=250.0, **k), "read_mesh"),
    }


@pytest.mark.parametrize("kind", ["points", "lines", "graph", "skeleton", "mesh"])
def test_reference_reads_our_default_stores_of_every_raw_kind(tmp_path, rng, reference, kind):
    write, read = _raw_kinds(rng)[kind]
    default, plain = tmp_path / "default.zarr", tmp_path / "plain.zarr"
    write(default)
    write(plain, shards=None)
    doc = json.loads((default / "0/vertices/zarr.json").read_text())
    assert parse_sharding("0/vertices", doc) is not None  # the default layout is sharded
    assert reference.info(default)["valid"]
    for bbox in [None] if kind == "lines" else [None, BOX]:
        args = () if bbox is None else (bbox,)
        got = getattr(reference, read)(tmp_path, default, *args)
        _same(got, getattr(reference, read)(tmp_path, plain, *args))
        assert len(got["positions"]) > 0


def test_we_read_the_references_sharded_points(tmp_path, reference):
    script = textwrap.dedent(
        f"""
        import numpy as np
        from zarr_vectors.types.points import write_points
        p = np.random.default_rng(7).uniform(0, 400, (3000, 3)).astype(np.float32)
        np.save({str(tmp_path / "p.npy")!r}, p)
        write_points({str(tmp_path / "ref.zv")!r}, p, chunk_shape=(100.0,) * 3, bin_shape=(50.0,) * 3,
                     bounds=([0.0] * 3, [400.0] * 3), shard_shape=(2, 2, 2))
        """
    )
    proc = subprocess.run([reference.python, "-I", "-c", script], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "ref.zv/0/vertices/zarr.json").read_text().count("sharding_indexed") == 1
    pos = np.load(tmp_path / "p.npy")
    ds = zv.open(tmp_path / "ref.zv")
    assert np.array_equal(sorted_rows(ds.query().positions), sorted_rows(pos))
    lo, hi = np.array([50.0, 120.0, 10.0]), np.array([330.0, 260.0, 390.0])
    assert np.array_equal(
        sorted_rows(ds.query(bbox=(lo, hi)).positions), sorted_rows(pos[brute_force_box(pos, lo, hi)])
    )
    assert zv.validate(tmp_path / "ref.zv").ok
