"""Checkpointed and resumed ``ingest_neuroglancer``: commits are a first write then
``Dataset.append``s; a run interrupted between checkpoints (raised in-process, or the process
killed with SIGKILL) and resumed ends query-identical to an uninterrupted run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import zarr_vectors as zv
from zarr_vectors.errors import InputError
from zarr_vectors.io.neuroglancer import ingest_neuroglancer
from zarr_vectors.neuroglancer import export_neuroglancer
from zarr_vectors.neuroglancer.precomputed_source import PrecomputedSource

#: Ids in ascending order (the source's order), some near 2**53 and 2**64.
IDS = [3, 9, 15, 21, 2**53 + 1, 2**53 + 3, 2**60, 2**63 + 5, 2**64 - 3, 2**64 - 1]
CHUNK = 100.0
BOUNDS = ([0.0, 0.0, 0.0], [600.0, 600.0, 600.0])
GRID = {"chunk_shape": CHUNK, "bounds": BOUNDS}


@pytest.fixture(scope="module")
def layer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An unsharded precomputed skeleton layer of ``IDS`` (our own export)."""
    d = tmp_path_factory.mktemp("ngresume")
    rng = np.random.default_rng(5)
    pos, par, ids, n = [], [], [], 0
    for k, sid in enumerate(IDS):
        m = 6 + k
        p = (rng.uniform(50, 550, 3) + rng.normal(0, 20, (m, 3))).clip(1, 599).astype(np.float32)
        q = np.arange(-1, m - 1)
        pos.append(p)
        par.append(np.where(q >= 0, q + n, -1))
        ids.append(np.full(m, sid, np.uint64))
        n += m
    store = d / "neuron.zarr"
    zv.write_skeleton(
        store,
        np.concatenate(pos),
        np.concatenate(par),
        chunk_shape=CHUNK,
        object_ids=np.concatenate(ids),
        attributes={"radius": rng.random(n).astype("f4")},
        object_attributes={"label": {sid: f"cell {k}" for k, sid in enumerate(IDS)}},
    )
    export_neuroglancer(store, d / "ng")
    return d / "ng" / "neuron"


def _same(a: zv.Dataset, b: zv.Dataset) -> None:
    """Query-identical: ids, object attributes (values), every object's rows, and a box
    query's rows."""
    assert a.object_ids().tolist() == b.object_ids().tolist() == IDS
    for sid in IDS:
        x, y = a.objects([sid], attributes=True), b.objects([sid], attributes=True)
        assert np.array_equal(x.positions, y.positions) and np.array_equal(x.edges, y.edges)
        assert np.array_equal(x.attributes["radius"], y.attributes["radius"])
    assert a.object_attribute_names() == b.object_attribute_names() == ["label"]
    for name in a.object_attribute_names():
        assert a.object_attributes(name).tolist() == b.object_attributes(name).tolist(), name
    box = ([100, 100, 100], [400, 400, 400])
    qa, qb = a.query(box), b.query(box)
    assert np.array_equal(np.sort(qa.positions, axis=0), np.sort(qb.positions, axis=0))


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_checkpoints_equal_one_write(layer: Path, tmp_path: Path) -> None:
    one = ingest_neuroglancer(layer, tmp_path / "one.zarr", progress=False, **GRID)
    many = ingest_neuroglancer(layer, tmp_path / "many.zarr", progress=False, checkpoint=3, **GRID)
    _same(one, many)


class Boom(RuntimeError):
    pass


def test_interrupted_then_resumed_equals_uninterrupted(
    layer: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = ingest_neuroglancer(layer, tmp_path / "whole.zarr", progress=False, checkpoint=3, **GRID)
    read, calls = PrecomputedSource.read, []

    def failing(self: PrecomputedSource, *args: object, **kwargs: object) -> object:
        calls.append(1)
        if len(calls) == 3:  # checkpoints of 3 ids are read in one call each: two committed
            raise Boom("interrupted")
        return read(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(PrecomputedSource, "read", failing)
    dst = tmp_path / "resumed.zarr"
    with pytest.raises(Boom):
        ingest_neuroglancer(layer, dst, progress=False, checkpoint=3, **GRID)
    assert zv.open(dst).object_ids().tolist() == IDS[:6]
    monkeypatch.setattr(PrecomputedSource, "read", read)
    seen: list[int] = []

    def counting(self: PrecomputedSource, ids: np.ndarray, *args: object, **kwargs: object) -> object:
        seen.extend(int(i) for i in ids)
        return read(self, ids, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(PrecomputedSource, "read", counting)
    _same(whole, ingest_neuroglancer(layer, dst, progress=False, checkpoint=3, resume=True, **GRID))
    assert seen == IDS[6:]  # the committed checkpoints were not read again


def test_resume_of_a_complete_store_changes_nothing(layer: Path, tmp_path: Path) -> None:
    dst = tmp_path / "done.zarr"
    ingest_neuroglancer(layer, dst, progress=False, checkpoint=4, **GRID)
    before = _files(dst)
    ingest_neuroglancer(layer, dst, progress=False, checkpoint=4, resume=True, **GRID)
    assert _files(dst) == before


def test_refusals(layer: Path, tmp_path: Path) -> None:
    with pytest.raises(InputError, match="needs bounds= and a numeric chunk_shape="):
        ingest_neuroglancer(layer, tmp_path / "a.zarr", progress=False, checkpoint=3, chunk_shape=CHUNK)
    other = tmp_path / "other.zarr"
    zv.write_skeleton(other, np.ones((2, 3)), [-1, 0], object_ids=[4, 4], chunk_shape=CHUNK, bounds=BOUNDS)
    with pytest.raises(InputError, match=r"holds id\(s\) \[4\] that the source does not list"):
        ingest_neuroglancer(layer, other, progress=False, checkpoint=3, resume=True, **GRID)
    with pytest.raises(InputError, match="checkpoint must be a positive integer, got 0"):
        ingest_neuroglancer(layer, tmp_path / "b.zarr", progress=False, checkpoint=0, **GRID)


@pytest.mark.slow
def test_cli_killed_and_resumed(layer: Path, tmp_path: Path) -> None:
    """SIGKILL once the store holds ids (some checkpoints committed), then ``--resume``."""
    whole = ingest_neuroglancer(layer, tmp_path / "whole.zarr", progress=False, checkpoint=1, **GRID)
    dst = tmp_path / "cli.zarr"
    cmd = [
        sys.executable,
        "-m",
        "zarr_vectors",
        "ingest",
        "neuroglancer",
        str(layer),
        str(dst),
        "--no-progress",
    ]
    cmd += ["--checkpoint", "1", "--chunk-size", str(CHUNK), "--bounds", "0,0,0,600,600,600"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=os.environ.copy())
    deadline = time.monotonic() + 60
    while not (dst / "zarr.json").exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    if proc.returncode == 0:
        pytest.skip("the ingest finished before it could be killed")
    held = zv.open(dst).object_ids().tolist()
    assert held == IDS[: len(held)] and 0 < len(held) < len(IDS)
    again = subprocess.run([*cmd, "--resume"], capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
    _same(whole, zv.open(dst))
    refused = subprocess.run(cmd, capture_output=True, text=True)
    assert refused.returncode == 2 and "already exists; add --overwrite" in refused.stderr


@pytest.mark.parametrize("ids", [IDS[:7], IDS[:3] + IDS[4:5]])
def test_appended_id_table_keeps_uint64(layer: Path, tmp_path: Path, ids: list[int]) -> None:
    """The ``object_id`` table of a checkpointed ingest (a first write whose ids were kept
    as given, then appends) is uint64 like a one-shot write's, with the same values."""
    import zarr

    ingest_neuroglancer(layer, tmp_path / "one.zarr", ids=ids, progress=False, **GRID)
    many = ingest_neuroglancer(layer, tmp_path / "many.zarr", ids=ids, progress=False, checkpoint=3, **GRID)
    tables = [
        zarr.open_array(tmp_path / f"{n}.zarr/0/object_attributes/object_id", mode="r")
        for n in ("one", "many")
    ]
    assert tables[0].dtype == tables[1].dtype == np.uint64
    assert tables[0][:].tolist() == tables[1][:].tolist() == ids
    assert many.object_ids().dtype == np.uint64 and many.object_ids().tolist() == ids
