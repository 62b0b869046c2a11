"""Checkpointed and resumed ingests of annotation layers (points and lines written by the
neuroglancer package's ``AnnotationWriter``) and of multi-resolution Draco mesh sources (into
a raw mesh store: a Draco store cannot be appended to, and that is refused by name). A run
interrupted between checkpoints (raised in-process, or the CLI killed with SIGKILL) and
resumed answers like an uninterrupted run."""

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
from zarr_vectors.neuroglancer.annotation_source import AnnotationSource

#: Mesh segment ids, some near 2**53 and 2**64.
MESH_IDS = [5, 11, 2**53 + 1, 2**60, 2**63 + 7, 2**64 - 1]
CHUNK = 100.0
BOUNDS = ([0.0, 0.0, 0.0], [700.0, 300.0, 300.0])
N_ANN = 40


def _annotations(folder: Path, kind: str) -> Path:
    ng = pytest.importorskip("neuroglancer")
    from neuroglancer.write_annotations import AnnotationWriter

    space = ng.CoordinateSpace(names=["x", "y", "z"], units="nm", scales=[4, 4, 40])
    props = [
        ng.AnnotationPropertySpec(id="kind", type="uint8", enum_values=[0, 1], enum_labels=["pre", "post"]),
        ng.AnnotationPropertySpec(id="score", type="float32"),
    ]
    writer = AnnotationWriter(space, kind, relationships=["cell"], properties=props)  # type: ignore[arg-type]
    rng = np.random.default_rng(21 if kind == "point" else 22)
    for k in range(N_ANN):
        a = rng.uniform(0, 100, 3).astype(np.float32)
        row = {"kind": k % 2, "score": float(np.float32(rng.random())), "cell": [2**64 - 2 - k]}
        if kind == "point":
            writer.add_point(a, id=2**64 - 1 - 3 * k, **row)
        else:
            writer.add_line(a, a + rng.uniform(1, 10, 3).astype(np.float32), id=2**63 + k, **row)
    writer.write(folder / kind)
    return folder / kind


@pytest.fixture(scope="module")
def points(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _annotations(tmp_path_factory.mktemp("ngann"), "point")


@pytest.fixture(scope="module")
def lines(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _annotations(tmp_path_factory.mktemp("ngann"), "line")


@pytest.fixture(scope="module")
def draco(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A sharded multi-resolution Draco mesh layer (our export) of icospheres."""
    import trimesh

    d = tmp_path_factory.mktemp("ngdraco")
    m = trimesh.creation.icosphere(subdivisions=2)
    items = [((m.vertices * 30 + [50 + CHUNK * k, 150, 150]).astype(np.float32), m.faces) for k in range(6)]
    zv.write_meshes(d / "soma.zarr", items, chunk_shape=CHUNK, object_ids=np.array(MESH_IDS, np.uint64))
    export_neuroglancer(d / "soma.zarr", d / "ng", mesh_format="multilod", sharding=True)
    return d / "ng" / "soma"


def _same(a: zv.Dataset, b: zv.Dataset) -> None:
    """Query-identical: ids (uint64), every object's rows (positions, faces or edges,
    attributes), object attribute tables, a box query."""
    ids = a.object_ids()
    assert ids.dtype == b.object_ids().dtype == np.uint64 and ids.tolist() == b.object_ids().tolist()
    for sid in ids.tolist():
        x, y = a.objects([sid], attributes=True), b.objects([sid], attributes=True)
        assert np.array_equal(x.positions, y.positions)
        for name in ("faces", "edges"):
            assert np.array_equal(getattr(x, name), getattr(y, name)), name
        assert sorted(x.attributes) == sorted(y.attributes)
        for name in x.attributes:
            assert np.array_equal(x.attributes[name], y.attributes[name]), name
    assert a.object_attribute_names() == b.object_attribute_names()
    lo, hi = a.bounds if hasattr(a, "bounds") else BOUNDS
    box = (np.asarray(lo) + (np.asarray(hi) - np.asarray(lo)) / 4, np.asarray(hi))
    qa, qb = a.query(box), b.query(box)
    assert np.array_equal(np.sort(qa.positions, axis=0), np.sort(qb.positions, axis=0))


class Boom(RuntimeError):
    pass


@pytest.mark.slow
@pytest.mark.parametrize("which", ["points", "lines"])
def test_annotations_interrupted_then_resumed(
    which: str, request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    layer = request.getfixturevalue(which)
    grid = {"chunk_shape": 500.0}
    one = ingest_neuroglancer(layer, tmp_path / "one.zarr", progress=False, **grid)
    whole = ingest_neuroglancer(layer, tmp_path / "whole.zarr", progress=False, checkpoint=7, **grid)
    _same(one, whole)
    assert one.num_objects() == N_ANN
    read, calls = AnnotationSource.read, []

    def failing(self: AnnotationSource, *args: object, **kwargs: object) -> object:
        calls.append(1)
        if len(calls) == 3:  # two checkpoints of 7 committed
            raise Boom("interrupted")
        return read(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(AnnotationSource, "read", failing)
    dst = tmp_path / "resumed.zarr"
    with pytest.raises(Boom):
        ingest_neuroglancer(layer, dst, progress=False, checkpoint=7, **grid)
    held = zv.open(dst).object_ids()
    assert len(held) == 14 and held.dtype == np.uint64
    with pytest.raises(InputError, match="resume with the checkpoint size of the first run"):
        ingest_neuroglancer(layer, dst, progress=False, checkpoint=6, resume=True, **grid)
    seen: list[int] = []

    def counting(self: AnnotationSource, ids: np.ndarray, *args: object, **kwargs: object) -> object:
        seen.extend(int(i) for i in ids)
        return read(self, ids, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(AnnotationSource, "read", counting)
    resumed = ingest_neuroglancer(layer, dst, progress=False, checkpoint=7, resume=True, **grid)
    _same(one, resumed)
    assert len(seen) == N_ANN - 14 and set(seen).isdisjoint(held.tolist())  # committed ones not read again


def test_draco_source_resumes_into_a_raw_store(
    draco: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from zarr_vectors.neuroglancer.precomputed_source import PrecomputedSource

    grid = {"chunk_shape": CHUNK, "bounds": BOUNDS}
    one = ingest_neuroglancer(draco, tmp_path / "one.zarr", progress=False, **grid)
    read, calls = PrecomputedSource.read, []

    def failing(self: PrecomputedSource, *args: object, **kwargs: object) -> object:
        calls.append(1)
        if len(calls) == 2:
            raise Boom("interrupted")
        return read(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(PrecomputedSource, "read", failing)
    dst = tmp_path / "resumed.zarr"
    with pytest.raises(Boom):
        ingest_neuroglancer(draco, dst, progress=False, checkpoint=2, **grid)
    assert zv.open(dst).object_ids().tolist() == MESH_IDS[:2]
    monkeypatch.setattr(PrecomputedSource, "read", read)
    _same(one, ingest_neuroglancer(draco, dst, progress=False, checkpoint=2, resume=True, **grid))
    with pytest.raises(InputError, match="a Draco-encoded mesh store cannot be appended to"):
        ingest_neuroglancer(
            draco, tmp_path / "d.zarr", progress=False, checkpoint=2, resume=True, encoding="draco", **grid
        )


def _kill_and_resume(cmd: list[str], dst: Path, whole: zv.Dataset) -> None:
    """SIGKILL the CLI once the store exists (some checkpoints committed), then ``--resume``."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=os.environ.copy())
    deadline = time.monotonic() + 60
    while not (dst / "zarr.json").exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    if proc.returncode == 0:
        pytest.skip("the ingest finished before it could be killed")
    held = zv.open(dst).object_ids()
    assert 0 < len(held) < len(whole.object_ids()) and np.isin(held, whole.object_ids()).all()
    again = subprocess.run([*cmd, "--resume"], capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
    _same(whole, zv.open(dst))


def _cli(src: Path, dst: Path, *extra: str) -> list[str]:
    cmd = [
        sys.executable,
        "-m",
        "zarr_vectors",
        "ingest",
        "neuroglancer",
        str(src),
        str(dst),
        "--no-progress",
    ]
    return [*cmd, "--checkpoint", "1", *extra]


@pytest.mark.slow
@pytest.mark.kill
def test_cli_annotations_killed_and_resumed(points: Path, tmp_path: Path) -> None:
    whole = ingest_neuroglancer(points, tmp_path / "whole.zarr", progress=False, chunk_shape=500.0)
    dst = tmp_path / "cli.zarr"
    _kill_and_resume(_cli(points, dst, "--chunk-size", "500"), dst, whole)


@pytest.mark.slow
@pytest.mark.kill
def test_cli_draco_source_killed_and_resumed(draco: Path, tmp_path: Path) -> None:
    whole = ingest_neuroglancer(
        draco, tmp_path / "whole.zarr", progress=False, chunk_shape=CHUNK, bounds=BOUNDS
    )
    dst = tmp_path / "cli.zarr"
    _kill_and_resume(
        _cli(draco, dst, "--chunk-size", str(CHUNK), "--bounds", "0,0,0,700,300,300"), dst, whole
    )
