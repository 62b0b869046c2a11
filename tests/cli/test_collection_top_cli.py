"""``zarr-vectors info`` and ``query`` on a collection, run as processes and compared with the
Python API (``Collection.describe``, ``Collection.query``, ``Collection.objects``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import zarr_vectors as zv
from zarr_vectors.cli.main import info_dict
from zarr_vectors.io.export import read_npz


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "zarr_vectors", *args], cwd=cwd, capture_output=True, text=True, timeout=300
    )


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A collection ``c.zarr``: ``cells`` (5 objects with a ``cell_type``) in ``segments``, and
    ``syn`` (60 points, ``post`` naming cells, weight ``w``); and a plain store ``p.zarr``."""
    here = tmp_path_factory.mktemp("coll-cli")
    rng = np.random.default_rng(7)
    coll = zv.create_collection(here / "c.zarr", id_spaces=["segments"])
    types = np.array(["basket", "pyramidal", "basket", "pyramidal", "chandelier"])
    coll.add_member(
        "cells", "points", rng.uniform(0, 10, (5, 3)), chunk_shape=5, object_ids=np.arange(5) + 2**40,
        object_attributes={"cell_type": types}, id_space="segments",
    )  # fmt: skip
    post = (rng.integers(0, 5, 60) + 2**40).astype(np.uint64)
    coll.add_member(
        "syn", "points", rng.uniform(0, 10, (60, 3)), chunk_shape=4,
        attributes={"post": post, "w": rng.uniform(0, 1, 60)}, relationships={"post": "segments"},
    )  # fmt: skip
    zv.write_points(here / "p.zarr", rng.uniform(0, 10, (20, 3)), chunk_shape=5)
    return here


def test_info_on_a_collection_matches_describe(folder: Path) -> None:
    got = _run("info", "c.zarr", "--json", cwd=folder)
    assert got.returncode == 0, got.stderr
    want = zv.open(folder / "c.zarr").describe()
    assert json.loads(got.stdout) == want
    assert [m["objects"] for m in want["members"]] == [5, 0]
    assert want["members"][1]["relationships"]["post"]["index"]["state"] == "current"
    text = _run("info", "c.zarr", cwd=folder)
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[0] == "c.zarr: collection 'c.zarr', id spaces segments"
    assert "cells: point_cloud, role -, object ids in segments, 5 vertices, 5 objects" in lines[1]
    assert lines[-1].strip() == "post -> segments: index current, 60 rows in 1 buckets"


def test_info_on_a_plain_store_is_unchanged(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    got = _run("info", "p.zarr", "--json", cwd=folder)
    assert got.returncode == 0, got.stderr
    monkeypatch.chdir(folder)
    assert json.loads(got.stdout) == info_dict("p.zarr")


def test_query_counts_and_files_per_member(folder: Path) -> None:
    coll = zv.open(folder / "c.zarr")
    box = ((0, 0, 0), (6, 6, 6))
    counts = _run("query", "c.zarr", "--bbox", "0,0,0,6,6,6", "--count", cwd=folder)
    assert counts.returncode == 0, counts.stderr
    want = coll.query(box)
    assert counts.stdout.splitlines() == [
        f"cells: {len(want['cells']):,} vertices, {len(np.unique(want['cells'].object_ids)):,} objects",
        f"syn: {len(want['syn']):,} vertices",
    ]
    where = "post.cell_type == 'basket' and w > 0.3"
    out = _run("query", "c.zarr", "--member", "syn", "--where", where, "-o", "out.npz", cwd=folder)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().startswith("wrote syn: ")
    res = read_npz(folder / "out.syn.npz")
    (expect,) = coll.query(None, members=["syn"], where=where).values()
    assert len(expect) > 0 and len(expect) < 60
    np.testing.assert_array_equal(res.positions, expect.positions)
    np.testing.assert_array_equal(res.attributes["post"], expect.attributes["post"])
    assert not (folder / "out.cells.npz").exists()
    # the join by hand: basket cells are objects 0 and 2
    syn = coll.member("syn").query(None)
    keep = np.isin(syn.attributes["post"], np.array([2**40, 2**40 + 2], np.uint64)) & (
        syn.attributes["w"] > 0.3
    )
    assert sorted(map(tuple, res.positions.tolist())) == sorted(map(tuple, syn.positions[keep].tolist()))


def test_query_objects_per_member_with_a_name_pattern(folder: Path) -> None:
    got = _run(
        "query", "c.zarr", "--objects", str(2**40 + 1), str(2**40 + 4), "-o", "o-{member}.csv", cwd=folder
    )
    assert got.returncode == 0, got.stderr
    assert (folder / "o-cells.csv").is_file() and not (folder / "o-syn.csv").exists()  # syn: no id space
    want = zv.open(folder / "c.zarr").objects([2**40 + 1, 2**40 + 4])["cells"]
    rows = (folder / "o-cells.csv").read_text().splitlines()
    assert len(rows) == 1 + len(want) == 3


def test_query_errors_name_the_problem(folder: Path) -> None:
    unknown = _run("query", "c.zarr", "--member", "nope", "--count", cwd=folder)
    assert unknown.returncode == 2
    assert unknown.stderr.strip() == (
        "zarr-vectors query: error: no member 'nope' in the collection (members: ['cells', 'syn'])"
    )
    bad = _run("query", "c.zarr", "--member", "syn", "--where", "post.size > 3", "--count", cwd=folder)
    assert bad.returncode == 2
    assert (
        "member 'syn': where: no member of id space 'segments' has the object attribute 'size'" in bad.stderr
    )
    other = _run("query", "c.zarr", "--where", "post.cell_type == 'basket'", "--count", cwd=folder)
    assert other.returncode == 2 and "member 'cells': where: 'post'" in other.stderr
    polygon = _run("query", "c.zarr", "--polygon", "POLYGON ((0 0, 5 0, 5 5, 0 0))", "--count", cwd=folder)
    assert polygon.returncode == 2 and "--polygon and --predicate read a store" in polygon.stderr
    store = _run("query", "p.zarr", "--member", "syn", "--count", cwd=folder)
    assert store.returncode == 2
    assert "--member goes with a collection; p.zarr is not one" in store.stderr
    plain = _run("query", "p.zarr", "--bbox", "0,0,0,5,5,5", "--count", cwd=folder)
    want = zv.open(folder / "p.zarr").query(((0, 0, 0), (5, 5, 5)))
    assert plain.returncode == 0 and plain.stdout.strip() == f"{len(want):,} vertices"
