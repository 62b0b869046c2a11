#!/usr/bin/env python
"""Point files in and out: LAS ingest against laspy + ``write_points``, the exact round trip,
and ``zarr-vectors query -o all.csv`` of a whole store.

Run from the repository root with the project's venv (extras ``las`` and ``csv``)::

    .venv/bin/python benchmarks/bench_files.py                  # 10 M points
    .venv/bin/python benchmarks/bench_files.py --points 2000000 --folder /tmp/bench

Data: a LAS 1.2 file of point format 3 (every standard dimension set; scale 0.001, x and y
uniform over 1 km, z over 100 m, 16 classes), written in a child process. Each step runs
in a fresh child process, whose peak RSS (``ru_maxrss`` from ``os.wait4``) and wall time
are reported:

* ``two_step``: ``laspy.read`` of the file, then ``write_points`` of float64 positions and
  every dimension as an attribute (what a user would write without ``ingest_points``).
* ``ingest``: ``ingest_points`` of the same file (``memory_limit`` 256 MiB; an uncompressed
  LAS is sorted by chunk in place, see ``zarr_vectors/io/las_sort.py``).

The two ingests run ``--repeat`` times each, alternating; the median wall time, the largest
peak and every run's time are reported.
* ``export_las``: ``export_points`` of the ingested store back to LAS; then (not timed)
  ``round_trip_exact``: every dimension of both files compared exactly (rows sorted; the
  store reorders points by chunk).
* ``query_csv``: ``zarr-vectors query STORE -o all.csv`` of a store like the issue's
  (float32 x, y, z, uint16 intensity, uint8 classification; chunk 50 over 1 km x 1 km x
  100 m), the command run as a process.

Output: one JSON document on stdout. Chunk edge 100 (m) for the LAS stores.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

MAKE_LAS = r"""
import sys, numpy as np, laspy
path, n = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(0)
h = laspy.LasHeader(point_format=3, version="1.2")
h.scales = np.array([0.001, 0.001, 0.001]); h.offsets = np.array([500000.0, 4000000.0, 0.0])
with laspy.open(path, mode="w", header=h) as w:
    for s in range(0, n, 1_000_000):
        m = min(1_000_000, n - s)
        p = laspy.ScaleAwarePointRecord.zeros(m, header=h)
        p.x = rng.uniform(500000, 501000, m); p.y = rng.uniform(4000000, 4001000, m)
        p.z = rng.uniform(0, 100, m)
        p.intensity = rng.integers(0, 65535, m); p.classification = rng.integers(0, 16, m)
        p.return_number = rng.integers(1, 4, m); p.number_of_returns = np.full(m, 3)
        p.scan_angle_rank = rng.integers(-90, 90, m); p.user_data = rng.integers(0, 255, m)
        p.point_source_id = rng.integers(0, 500, m); p.gps_time = np.sort(rng.uniform(0, 1e5, m))
        p.red = rng.integers(0, 65535, m); p.green = rng.integers(0, 65535, m)
        p.blue = rng.integers(0, 65535, m)
        w.write_points(p)
"""

TWO_STEP = r"""
import sys, numpy as np, laspy, zarr_vectors as zv
las = laspy.read(sys.argv[1])
pos = np.column_stack([las.x, las.y, las.z])
attrs = {n: np.asarray(las[n]) for n in las.point_format.dimension_names if n not in ("X", "Y", "Z")}
del las
zv.write_points(sys.argv[2], pos, attributes=attrs, chunk_shape=100.0)
"""

INGEST = r"""
import sys
from zarr_vectors.io.pointfiles import ingest_points
ingest_points(sys.argv[2], [sys.argv[1]], chunk_shape=100.0, progress=False)
"""

EXPORT_LAS = r"""
import sys, zarr_vectors as zv
from zarr_vectors.io.stream_export import export_points
export_points(zv.open(sys.argv[1]), sys.argv[2], progress=False)
"""

SAME_LAS = r"""
import sys, numpy as np, laspy
def table(path):
    las = laspy.read(path)
    names = list(las.point_format.dimension_names)
    cols = [np.asarray(las.points.array[n] if n in ("X", "Y", "Z") else las[n]) for n in names]
    order = np.lexsort(cols[::-1])
    return names, [c[order] for c in cols]
(na, a), (nb, b) = table(sys.argv[1]), table(sys.argv[2])
print(int(na == nb and all(np.array_equal(x, y) for x, y in zip(a, b))))
"""

MAKE_STORE = r"""
import sys, numpy as np, zarr_vectors as zv
n = int(sys.argv[2]); rng = np.random.default_rng(1)
with zv.create(sys.argv[1], "points", chunk_shape=[50, 50, 100], bounds=([0, 0, 0], [1000, 1000, 100])) as w:
    for s in range(0, n, 1_000_000):
        m = min(1_000_000, n - s)
        pos = rng.uniform(0, 1, (m, 3)) * np.array([1000, 1000, 100])
        w.append(pos.astype(np.float32), attributes={
            "intensity": rng.integers(0, 65535, m).astype(np.uint16),
            "classification": rng.integers(0, 16, m).astype(np.uint8)})
"""


def child(argv: list[str]) -> dict[str, float]:
    """Run a child process; its wall time and peak RSS (MB), or its error."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), str(REPO / "codecs")]))
    t = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - t
    out, err = proc.stdout.read().decode(), proc.stderr.read().decode()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"{argv[:3]} failed:\n{err}")
    return {"seconds": round(seconds, 2), "peak_mb": round(usage.ru_maxrss / 1024, 1), "stdout": out.strip()}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--points", type=int, default=10_000_000)
    parser.add_argument("--folder", type=Path, help="where the files go (default: a temporary folder)")
    parser.add_argument(
        "--repeat", type=int, default=3, help="runs of each ingest, alternating (medians reported)"
    )
    args = parser.parse_args()
    folder = args.folder or Path(tempfile.mkdtemp(prefix="zv-bench-files-"))
    folder.mkdir(parents=True, exist_ok=True)
    py = sys.executable
    las = folder / "pc.las"
    out: dict[str, object] = {"points": args.points}
    child([py, "-c", MAKE_LAS, str(las), str(args.points)])
    out["las_mb"] = round(las.stat().st_size / 1e6, 1)
    runs: dict[str, list[dict[str, float]]] = {"two_step": [], "ingest": []}
    for _ in range(args.repeat):  # alternating, so drift in the machine hits both alike
        for name, script in (("two_step", TWO_STEP), ("ingest", INGEST)):
            store = folder / f"{name}.zarr"
            shutil.rmtree(store, ignore_errors=True)
            subprocess.run(["sync"], check=False)
            runs[name].append(child([py, "-c", script, str(las), str(store)]))
    for name, got in runs.items():
        out[name] = {
            "seconds": statistics.median(r["seconds"] for r in got),
            "peak_mb": max(r["peak_mb"] for r in got),
            "runs": [r["seconds"] for r in got],
        }
    two, ours = out["two_step"], out["ingest"]
    out["ingest_speedup"] = round(two["seconds"] / ours["seconds"], 2)  # type: ignore[index]
    out["export_las"] = child([py, "-c", EXPORT_LAS, str(folder / "ingest.zarr"), str(folder / "back.las")])
    same = child([py, "-c", SAME_LAS, str(las), str(folder / "back.las")])
    out["round_trip_exact"] = same["stdout"] == "1"
    store = folder / "pc10m.zarr"
    shutil.rmtree(store, ignore_errors=True)
    child([py, "-c", MAKE_STORE, str(store), str(args.points)])
    csv = folder / "all.csv"
    q = child([py, "-m", "zarr_vectors", "query", str(store), "-o", str(csv), "--no-progress"])
    out["query_csv"] = q | {"csv_mb": round(csv.stat().st_size / 1e6, 1)}
    print(json.dumps(out, indent=2))
    if args.folder is None:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
