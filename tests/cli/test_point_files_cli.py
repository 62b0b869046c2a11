"""``ingest points``, ``export points`` and ``query -o`` of point clouds run as processes, and
the memory of a piecewise export measured in a child process."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import zarr_vectors as zv
from tests.io.test_point_files import las_table, make_las

laspy = pytest.importorskip("laspy")

pytestmark = pytest.mark.slow


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "zarr_vectors", *args], cwd=cwd, capture_output=True, text=True, timeout=300
    )


def test_ingest_points_then_export_and_query(tmp_path):
    make_las(tmp_path / "a.laz", 2000, seed=1)
    make_las(tmp_path / "b.laz", 1000, seed=2)
    out = _run(
        "ingest", "points", "a.laz", "b.laz", "-o", "s.zarr", "--chunk-size", "100", "--file-ids", "object",
        "--no-progress", cwd=tmp_path,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "wrote 3,000 points from 2 file(s)" in out.stdout
    ds = zv.open(tmp_path / "s.zarr")
    assert ds.object_ids().tolist() == [0, 1]
    out = _run("export", "points", "s.zarr", "-o", "all.las", "--no-progress", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "wrote 3,000 points to all.las"
    _, a = las_table(tmp_path / "a.laz")
    _, b = las_table(tmp_path / "b.laz")
    names, got = las_table(tmp_path / "all.las")
    assert names[-1] == "object_id"  # the store's object ids (one per input file), as extra bytes
    both = np.vstack([np.column_stack([a, np.zeros(len(a))]), np.column_stack([b, np.ones(len(b))])])
    assert np.array_equal(both[np.lexsort(both.T[::-1])], got)
    box = "400050,5000050,-10,400200,5000150,50"
    out = _run("query", "s.zarr", "--bbox", box, "-o", "box.csv", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    res = ds.query(([400050, 5000050, -10], [400200, 5000150, 50]))
    assert f"wrote {len(res):,} vertices to box.csv" in out.stdout
    lines = (tmp_path / "box.csv").read_text().splitlines()
    assert lines[0].split(",")[:4] == ["x", "y", "z", "object_id"]
    xs = np.array([line.split(",")[0] for line in lines[1:]], np.float64)
    assert np.array_equal(np.sort(xs), np.sort(res.positions[:, 0]))


def test_ingest_points_errors_are_one_line(tmp_path):
    (tmp_path / "p.csv").write_text("x,y\n1,2\n")
    out = _run(
        "ingest", "points", "p.csv", "-o", "s.zarr", "--chunk-size", "1", "--file-ids", "group", cwd=tmp_path
    )
    assert out.returncode == 2
    assert out.stderr.startswith(
        "zarr-vectors ingest: error: --file-ids group groups the objects of --object-column"
    )
    out = _run(
        "ingest", "points", "p.csv", "-o", "s.zarr", "--chunk-size", "1", "--dtype", "x:int", cwd=tmp_path
    )
    assert out.returncode == 2 and "--dtype takes NAME=TYPE" in out.stderr
    assert not (tmp_path / "s.zarr").exists()


def test_mesh_ingest_of_stl_builds_a_pyramid(tmp_path):
    import trimesh

    trimesh.creation.icosphere(subdivisions=4).export(tmp_path / "s.stl")
    out = _run("ingest", "mesh", "s.stl", "-o", "m.zarr", "--chunk-size", "1", "--no-progress", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert zv.open(tmp_path / "m.zarr").vertex_count() == 2562
    out = _run("pyramid", "m.zarr", "--factors", "2", "--no-progress", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    ds = zv.open(tmp_path / "m.zarr")
    assert 0 < ds.vertex_count(1) < ds.vertex_count(0)


CHILD = textwrap.dedent(
    """
    import resource, sys
    import numpy as np
    import zarr_vectors as zv
    from zarr_vectors.io.stream_export import export_points
    ds = zv.open(sys.argv[1])
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    export_points(ds, sys.argv[2], rows=1 << 18, progress=False)
    print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) // 1024)
    """
)


def test_csv_export_memory_does_not_grow_with_the_result(tmp_path):
    """Peak memory above the opened store, exporting 0.5 M and 4 M points: the difference stays
    far below what holding the larger result (4 M x 15 bytes, plus its text) would take."""
    rng = np.random.default_rng(7)
    grown = []
    for n in (500_000, 4_000_000):
        store = tmp_path / f"p{n}.zarr"
        with zv.create(store, "points", chunk_shape=10, bounds=([0] * 3, [100] * 3)) as w:
            for _ in range(n // 500_000):
                w.append(
                    rng.uniform(0, 100, (500_000, 3)).astype(np.float32),
                    attributes={
                        "intensity": rng.integers(0, 2**16, 500_000).astype(np.uint16),
                        "classification": rng.integers(0, 20, 500_000).astype(np.uint8),
                    },
                )
        (tmp_path / "child.py").write_text(CHILD)
        out = subprocess.run(
            [sys.executable, str(tmp_path / "child.py"), str(store), str(tmp_path / f"{n}.csv")],
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert out.returncode == 0, out.stderr
        grown.append(int(out.stdout.strip()))
        assert sum(1 for _ in open(tmp_path / f"{n}.csv")) == n + 1
    assert grown[1] - grown[0] < 60, grown  # MB; 3.5 M more points hold 52 MB as arrays, ~150 MB as text
