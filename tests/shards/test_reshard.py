"""zarr_vectors.reshard and ``zarr-vectors reshard``: shard, reshard and unshard a store, exactly."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

import zarr_vectors as zv
from tests.cli.test_cli_query import _run
from tests.conftest import brute_force_box, sorted_rows

ROOT = Path(__file__).resolve().parents[2]


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    rng = np.random.default_rng(9)
    pos = rng.uniform(0, 400, (3000, 3)).astype(np.float32)
    path = tmp_path_factory.mktemp("reshard") / "src.zarr"
    zv.write_points(
        path,
        pos,
        chunk_shape=100,
        bin_shape=50,
        object_ids=rng.integers(0, 12, len(pos)),
        attributes={"a": rng.random(len(pos)).astype(np.float32)},
        shards=None,  # one file per cell: the files resharding must give back
    )
    zv.open(path, mode="r+").build_pyramid([2])
    return path, pos


@pytest.mark.slow  # four stores written and three validated
def test_shard_then_unshard_gives_back_the_same_files(tmp_path, source):
    src, pos = source
    zv.reshard(src, tmp_path / "s.zarr", shards=(2, 1, 3), progress=False)
    zv.reshard(tmp_path / "s.zarr", tmp_path / "t.zarr", shards="auto", progress=False)
    zv.reshard(tmp_path / "t.zarr", tmp_path / "u.zarr", shards=None, progress=False)
    before, after = _files(src), _files(tmp_path / "u.zarr")
    assert sorted(before) == sorted(after)
    assert [k for k in before if before[k] != after[k]] == ["zarr.json"]  # a new write generation
    sharded = _files(tmp_path / "s.zarr")
    assert len(sharded) < len(before) / 3
    doc = json.loads(sharded["1/vertices/zarr.json"])
    assert doc["codecs"][0]["name"] == "sharding_indexed"
    for name in ("s", "t"):
        ds = zv.open(tmp_path / f"{name}.zarr")
        lo, hi = np.array([30.0, 60.0, 90.0]), np.array([250.0, 310.0, 200.0])
        got = ds.query(bbox=(lo, hi))
        assert np.array_equal(sorted_rows(got.positions), sorted_rows(pos[brute_force_box(pos, lo, hi)]))
        assert len(ds.query(level=1)) == len(zv.open(src).query(level=1))
        assert zv.validate(tmp_path / f"{name}.zarr").ok


def test_reshard_refuses_bad_shards_before_writing(tmp_path, source):
    with pytest.raises(zv.InputError, match="shards must be"):
        zv.reshard(source[0], tmp_path / "x.zarr", shards=(1, 2), progress=False)
    assert not (tmp_path / "x.zarr").exists()
    with pytest.raises(zv.StoreExistsError):
        zv.reshard(source[0], source[0], shards=2, progress=False)


@pytest.mark.slow  # the command run as a process
def test_reshard_command(tmp_path, source):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "codecs")])}
    proc = _run("reshard", str(source[0]), "out.zarr", "--shards", "2,2,3", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((tmp_path / "out.zarr/0/vertices/zarr.json").read_text())
    assert doc["chunk_grid"]["configuration"]["chunk_shape"] == [2, 2, 3]
    assert zv.open(tmp_path / "out.zarr").vertex_count() == len(source[1])
    proc = _run(
        "reshard", "out.zarr", "back.zarr", "--shards", "none", "--no-progress", cwd=tmp_path, env=env
    )
    assert proc.returncode == 0, proc.stderr
    assert _files(tmp_path / "back.zarr")["0/vertices/c/0/0/0"] == _files(source[0])["0/vertices/c/0/0/0"]
    proc = _run("reshard", "out.zarr", "bad.zarr", "--shards", "x", cwd=tmp_path, env=env)
    assert proc.returncode == 2 and "--shards: 'x' is not auto, none" in proc.stderr
