"""``zv.validate`` on a collection: the node, each member (findings under its name) and each
relationship index (counts, columns, order, hash, freshness)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import zarr_vectors as zv
from zarr_vectors.collection import index as rel_index


@pytest.fixture
def coll_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(rel_index, "BUCKET_ROWS", 8)
    rng = np.random.default_rng(1)
    coll = zv.create_collection(tmp_path / "c.zarr", id_spaces=["segments"])
    positions = rng.uniform(0, 20, (60, 3))
    post = rng.integers(0, 40, 60).astype(np.uint64)
    coll.add_member(
        "syn",
        "points",
        positions,
        chunk_shape=10,
        shards=None,
        attributes={"post": post},
        relationships={"post": "segments"},
    )
    held = np.unique(post)  # every post value is a cell: no dangling ids
    coll.add_member("cells", "points", rng.uniform(0, 20, (len(held), 3)), chunk_shape=10, object_ids=held,
                    id_space="segments")  # fmt: skip
    return tmp_path / "c.zarr"


def _buckets(path: Path) -> list[Path]:
    root = path / "syn" / "zv_relationships" / "post"
    return sorted((p for p in root.iterdir() if p.name.isdigit()), key=lambda p: int(p.name))


def test_a_written_collection_is_valid(coll_path: Path) -> None:
    report = zv.validate(coll_path)
    assert report.ok and report.problems == [] and report.warnings == [], str(report)
    assert "collection, 2 members" in report.target and report.cells_checked > 0


def test_a_damaged_index_is_reported(coll_path: Path) -> None:
    first, second = _buckets(coll_path)[:2]
    (first / "positions" / "0.0").write_bytes(b"\0" * 24)  # one row where more are counted
    values = np.frombuffer((second / "values" / "0").read_bytes(), "<u8")[::-1].copy()
    if len(np.unique(values)) > 1:
        (second / "values" / "0").write_bytes(values.tobytes())  # unsorted
    report = zv.validate(coll_path)
    assert not report.ok
    messages = [(p.rule, p.path, p.message) for p in report.problems]
    assert ("collection.index", f"syn/zv_relationships/post/{first.name}/positions") in [
        m[:2] for m in messages
    ]
    assert any(m[0] == "collection.index" and "not sorted" in m[2] for m in messages) == (
        len(np.unique(values)) > 1
    )
    # Level 2 does not read the buckets.
    assert zv.validate(coll_path, level=2).ok


def test_a_bucket_in_the_wrong_place_and_stale_indexes(coll_path: Path) -> None:
    a, b = _buckets(coll_path)[:2]
    (a / "values" / "0").write_bytes(
        (b / "values" / "0").read_bytes()[: len((a / "values" / "0").read_bytes())]
    )
    report = zv.validate(coll_path)
    assert any("hash to another bucket" in p.message for p in report.problems), str(report)
    ds = zv.open(coll_path / "syn", "r+")
    ds.append([[1.0, 1, 1]], attributes={"post": np.array([3], np.uint64)})
    stale = zv.validate(coll_path)
    assert [w.rule for w in stale.warnings] == ["collection.index-stale"] and stale.ok


def test_node_and_member_problems_carry_the_member_name(coll_path: Path) -> None:
    doc = json.loads((coll_path / "zarr.json").read_text())
    doc["attributes"]["ome"]["nodes"][1]["attributes"]["zv:idSpace"] = "axons"
    (coll_path / "zarr.json").write_text(json.dumps(doc))
    cell = next((coll_path / "syn" / "0" / "vertices" / "c").rglob("*"))
    while cell.is_dir():
        cell = next(cell.iterdir())
    cell.write_bytes(cell.read_bytes()[:-3])
    report = zv.validate(coll_path)
    rules = {(p.rule, p.path.split("/")[0]) for p in report.problems}
    assert ("collection.node", "cells") in rules
    assert ("cells.decode", "syn") in rules, str(report)


def test_a_missing_member_and_a_missing_index(coll_path: Path) -> None:
    """A member path with no store is an error; a relationship without its index a warning."""
    import shutil

    shutil.rmtree(coll_path / "syn" / "zv_relationships")
    report = zv.validate(coll_path)
    assert [(w.rule, w.path) for w in report.warnings] == [("collection.index-missing", "syn")], str(report)
    assert report.ok
    shutil.rmtree(coll_path / "cells")
    report = zv.validate(coll_path)
    assert ("collection.member", "cells") in {(p.rule, p.path) for p in report.problems}, str(report)
    assert "no store at ./cells" in str(report)
    assert not report.ok


def test_dangling_relationship_ids_are_reported(coll_path: Path) -> None:
    """Values no member of the id space holds: counted (rows, distinct ids) with the smallest
    few as examples, by bucket, against a brute-force count; a warning only."""
    coll = zv.open(coll_path, "r+")
    post = coll.member("syn").query(None).attributes["post"]
    cells = coll.member("cells").object_ids()
    gone = cells[[0, 3, 7]]
    coll.delete("cells", gone.tolist())
    report = zv.validate(coll_path)
    assert report.ok and report.problems == [], str(report)
    (w,) = report.warnings
    missing = post[np.isin(post, gone)]
    assert (w.rule, w.path) == ("collection.dangling", "syn/zv_relationships/post")
    assert w.message == (
        f"{len(missing)} rows name 3 ids that no member of id space 'segments' holds as an object id "
        f"(e.g. {', '.join(map(str, np.sort(gone).tolist()))})"
    )
    assert zv.validate(coll_path, level=2).warnings == []  # read with the index, at level 3
    # a second member of the space holding them clears the warning
    coll.add_member("more", "points", np.zeros((3, 3)), chunk_shape=10, object_ids=gone, id_space="segments")
    assert zv.validate(coll_path).warnings == []


def test_dangling_examples_are_the_smallest_few(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Many dangling ids over many buckets: the example list is the 5 smallest, the counts
    exact; ids of another space do not count."""
    monkeypatch.setattr(rel_index, "BUCKET_ROWS", 8)
    coll = zv.create_collection(tmp_path / "d.zarr", id_spaces=["segments", "other"])
    post = np.arange(200, dtype=np.uint64) * np.uint64(2**55)  # large ids, spread over the hash
    coll.add_member("syn", "points", np.random.default_rng(2).uniform(0, 9, (200, 3)), chunk_shape=5,
                    attributes={"post": post}, relationships={"post": "segments"})  # fmt: skip
    coll.add_member("cells", "points", np.zeros((100, 3)), chunk_shape=5, object_ids=post[::2],
                    id_space="segments")  # fmt: skip
    coll.add_member("others", "points", np.zeros((100, 3)), chunk_shape=5, object_ids=post[1::2],
                    id_space="other")  # fmt: skip
    assert coll.describe()["members"][0]["relationships"]["post"]["index"]["buckets"] == 32
    (w,) = zv.validate(tmp_path / "d.zarr").warnings
    assert w.rule == "collection.dangling"
    odd = np.sort(post[1::2])
    assert (
        w.message.startswith("100 rows name 100 ids")
        and f"(e.g. {', '.join(map(str, odd[:5].tolist()))})" in w.message
    )


def test_every_collection_rule_is_exercised_here() -> None:
    """The rules of a collection are broken in this file (tests/validate/test_broken_stores.py
    covers the rules of a store)."""
    import inspect
    import sys

    source = inspect.getsource(sys.modules[__name__])
    rules = {r for r in zv.validation.RULES if r.startswith("collection.")}
    assert rules and all(f'"{r}"' in source for r in rules)
