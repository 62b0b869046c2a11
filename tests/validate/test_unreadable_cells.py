"""validate() reports cells it cannot read (a damaged shard, a link out of the store, a FIFO)
as problems naming the array and chunk; it never raises for them (issue 28, item 6)."""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path

import numpy as np
import pytest

import zarr_vectors as zv
from tests.shards._craft import read_index, write_index
from zarr_vectors.errors import CorruptShardError

BOUNDS = ([0.0] * 3, [399.0] * 3)


@pytest.fixture(scope="module")
def pos() -> np.ndarray:
    return np.random.default_rng(5).uniform(0, 399, (2000, 3)).astype(np.float32)


def _report(path: Path) -> tuple[zv.Report, list[str]]:
    report = zv.validate(path)  # must not raise
    assert not report.ok
    return report, [str(p) for p in report.problems]


def test_a_shard_entry_past_the_end_is_reported(tmp_path, pos):
    path = tmp_path / "s.zarr"
    zv.write_points(path, pos, chunk_shape=50, bounds=BOUNDS, shards=2)
    shard = path / "0/vertices/c/0/0/0"
    data, entries = read_index(shard, 8)
    entries[7, 1] = 10_000  # the last cell (inner chunk 1.1.1) runs far past the shard
    write_index(shard, data, entries)
    with pytest.raises(CorruptShardError):
        zv.open(path).query()
    report, lines = _report(path)
    hit = [p for p in report.problems if p.path == "0/vertices/c/1/1/1"]
    assert hit and hit[0].rule == "cells.decode", lines
    assert (
        "shard c/0/0/0 in array '0/vertices'" in hit[0].message and "shorter than its index" in hit[0].message
    )


def test_shard_entries_sharing_bytes_are_reported(tmp_path, pos):
    path = tmp_path / "s.zarr"
    zv.write_points(path, pos, chunk_shape=50, bounds=BOUNDS, shards=2)
    shard = path / "0/vertices/c/0/0/0"
    data, entries = read_index(shard, 8)
    entries[1] = entries[0]
    write_index(shard, data, entries)
    report, lines = _report(path)
    hit = [p for p in report.problems if p.path == "0/vertices/c/0/0/0" and p.rule == "cells.decode"]
    assert hit and "index entries 0 and 1 share bytes" in hit[0].message, lines


@pytest.mark.parametrize("shards", [None, "default"])
@pytest.mark.parametrize("how", ["symlink out", "fifo"])
def test_a_cell_that_is_no_file_of_the_store_is_reported(tmp_path, pos, how, shards):
    """One file per cell: the cell's file is reported, once. Sharded (the default): shard
    ``c/0/0/1`` is reported, and so is every cell of it read later, each naming the shard."""
    path = tmp_path / "u.zarr"
    zv.write_points(path, pos, chunk_shape=50, bounds=BOUNDS, attributes={"a": pos[:, 0]}, shards=shards)
    cps = json.loads((path / "0/vertex_attributes/a/zarr.json").read_text())["chunk_grid"]["configuration"]
    cps = cps["chunk_shape"]
    assert (cps == [1, 1, 1]) == (shards is None)
    inside = {  # the cells of shard 0/0/1
        "0/vertex_attributes/a/c/" + "/".join(map(str, c))
        for c in itertools.product(*[range(k * s, k * s + k) for k, s in zip(cps, (0, 0, 1))])
    }
    cell = path / "0/vertex_attributes/a/c/0/0/1"
    cell.unlink()
    if how == "fifo":
        os.mkfifo(cell)
    else:
        outside = tmp_path / "outside"
        outside.write_bytes(b"x" * 64)
        os.symlink(outside, cell)
    report, lines = _report(path)
    hit = [p for p in report.problems if p.rule == "cells.read"]
    assert hit[0].path == "0/vertex_attributes/a/c/0/0/1", lines
    assert shards is not None or len(hit) == 1, lines
    assert {p.path for p in hit} <= inside | {hit[0].path}, lines
    want = "is a FIFO" if how == "fifo" else "symbolic link to"
    assert all(want in p.message and "'0/vertex_attributes/a/c/0/0/1'" in p.message for p in hit), lines


def test_a_fifo_for_a_node_document_is_reported(tmp_path, pos):
    path = tmp_path / "u.zarr"
    zv.write_points(path, pos, chunk_shape=50, bounds=BOUNDS, attributes={"a": pos[:, 0]})
    doc = path / "0/vertex_attributes/a/zarr.json"
    doc.unlink()
    os.mkfifo(doc)
    report, lines = _report(path)
    assert any("0/vertex_attributes/a" in p.path and "is a FIFO" in p.message for p in report.problems), lines
