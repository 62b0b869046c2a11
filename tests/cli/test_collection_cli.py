"""``zarr-vectors collection create|add|info|related|reindex`` and ``validate`` on a
collection, run as processes; answers compared with numpy."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

import zarr_vectors as zv


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "zarr_vectors", *args], cwd=cwd, capture_output=True, text=True, timeout=300
    )


def _stores(folder: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(2)
    pos = rng.uniform(0, 10, (80, 3))
    post = (np.uint64(2**64 - 1) - rng.integers(0, 6, 80).astype(np.uint64)).astype(np.uint64)
    oid = np.arange(80, dtype=np.uint64) + np.uint64(2**63)
    zv.write_points(folder / "syn.zarr", pos, chunk_shape=5, object_ids=oid, attributes={"post": post})
    zv.write_points(
        folder / "cells.zarr", rng.uniform(0, 10, (6, 3)), chunk_shape=5, object_ids=np.unique(post)
    )
    return pos, post, oid


def test_collection_commands_end_to_end(tmp_path: Path) -> None:
    pos, post, oid = _stores(tmp_path)
    ok = _run(
        "collection", "create", "c.zarr", "--id-space", "segments", "--id-space", "synapses", cwd=tmp_path
    )
    assert ok.returncode == 0, ok.stderr
    add = _run(
        "collection", "add", "c.zarr", "syn", "--source", "syn.zarr", "--role", "synapses",
        "--id-space", "synapses", "--relationship", "post=segments", cwd=tmp_path,
    )  # fmt: skip
    assert add.returncode == 0, add.stderr
    assert (tmp_path / "syn.zarr").is_dir()  # copied, not moved
    moved = _run("collection", "add", "c.zarr", "cells", "--source", "cells.zarr", "--move",
                 "--id-space", "segments", cwd=tmp_path)  # fmt: skip
    assert moved.returncode == 0, moved.stderr
    assert not (tmp_path / "cells.zarr").exists()

    info = _run("collection", "info", "c.zarr", "--json", cwd=tmp_path)
    assert info.returncode == 0, info.stderr
    described = json.loads(info.stdout)
    assert [m["name"] for m in described["members"]] == ["syn", "cells"]
    syn = described["members"][0]
    assert syn["vertices"] == 80 and syn["relationships"]["post"]["id_space"] == "segments"
    assert syn["relationships"]["post"]["index"] == {"state": "current", "rows": 80, "buckets": 1}

    asked = [int(post[0]), int(post[3]), 5]
    rel = _run("collection", "related", "c.zarr", *map(str, asked), "--relationship", "post", cwd=tmp_path)
    assert rel.returncode == 0, rel.stderr
    rows = list(csv.reader(io.StringIO(rel.stdout)))
    assert rows[0] == ["object_id", "x", "y", "z", "post"]
    got = sorted((int(r[0]), tuple(float(v) for v in r[1:4]), int(r[4])) for r in rows[1:])
    m = np.isin(post, np.array(asked, np.uint64))
    want = sorted(zip(oid[m].tolist(), map(tuple, pos[m].tolist()), post[m].tolist()))
    assert got == want and len(got) > 0

    re = _run("collection", "reindex", "c.zarr", "--memory-limit", "0.001", cwd=tmp_path)
    assert re.returncode == 0 and re.stdout.strip() == "reindexed syn: post", re.stderr
    again = _run("collection", "related", "c.zarr", *map(str, asked), "--relationship", "post", cwd=tmp_path)
    assert again.stdout == rel.stdout

    valid = _run("validate", "c.zarr", "--no-progress", cwd=tmp_path)
    assert valid.returncode == 0, valid.stdout + valid.stderr
    assert "valid" in valid.stdout and "2 members" in valid.stdout


def test_collection_command_errors(tmp_path: Path) -> None:
    _stores(tmp_path)
    assert _run("collection", "create", "c.zarr", "--id-space", "segments", cwd=tmp_path).returncode == 0
    bad = _run(
        "collection", "add", "c.zarr", "syn", "--source", "syn.zarr", "--relationship", "post", cwd=tmp_path
    )
    assert bad.returncode == 2
    assert "--relationship takes ATTRIBUTE=ID_SPACE, got 'post'" in bad.stderr
    unknown = _run(
        "collection",
        "add",
        "c.zarr",
        "syn",
        "--source",
        "syn.zarr",
        "--relationship",
        "post=axons",
        cwd=tmp_path,
    )
    assert unknown.returncode == 2 and "axons" in unknown.stderr and "Traceback" not in unknown.stderr
    store = _run("collection", "info", "syn.zarr", cwd=tmp_path)
    assert store.returncode == 2 and "is a store, not a collection" in store.stderr
