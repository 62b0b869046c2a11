#!/usr/bin/env python
"""Memory of a pyramid build: peak RSS added by ``build_pyramid([2, 2, 2])`` on polylines.

Run from the repository root with the project's venv::

    .venv/bin/python benchmarks/bench_pyramid_memory.py                 # 10,000 and 40,000 lines
    .venv/bin/python benchmarks/bench_pyramid_memory.py --lines 5000 20000 --cross-level explicit

Data: random-walk polylines of 50-200 float32 vertices (steps N(0, 10) per axis) from
uniform starts, clipped to [0, 1000]^3, chunk 100 (seed 0; ~125 vertices a line). For each
size a child process writes level 0 and exits; a fresh child then opens the store
(``mode="r+"``) and builds three levels, so neither the data generation nor the writer
counts. Reported: ``added_mib`` = the build child's peak RSS (``ru_maxrss``) after the
build minus its peak before it (imports and the opened store), per 1,000 fine vertices
too, the build time and the vertex count of every level. Output: one JSON document on
stdout. The bound to look for: ``added_mib`` about the same at every size (a batch of
objects plus the small coarse level), not growing with the number of fine vertices.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

WRITE = r"""
import sys, numpy as np, zarr_vectors as zv
path, n = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(0)
lens = rng.integers(50, 201, n)
starts = rng.uniform(0, 1000, (n, 3))
off = np.r_[0, np.cumsum(lens)]
pos = np.cumsum(rng.normal(0, 10, (int(lens.sum()), 3)), axis=0)
pos -= np.repeat(pos[off[:-1]] - starts, lens, axis=0)
pos = np.clip(pos, 0, 1000).astype(np.float32)
zv.write_lines(path, (pos, off), chunk_shape=100, bounds=([0] * 3, [1000] * 3))
"""

BUILD = r"""
import json, resource, sys, time, zarr_vectors as zv
path, cross = sys.argv[1], sys.argv[2]
ds = zv.open(path, mode="r+")
ds.level(0)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
t = time.perf_counter()
ds.build_pyramid([2, 2, 2], cross_level=cross)
seconds = time.perf_counter() - t
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
done = zv.open(path)
print(json.dumps({"rss_before_mib": round(before, 1), "rss_peak_mib": round(after, 1),
                  "added_mib": round(after - before, 1), "build_s": round(seconds, 2),
                  "vertex_counts": [done.vertex_count(level=k) for k in done.levels]}))
"""


def _run(code: str, *args: str) -> str:
    cmd = [sys.executable, "-c", code, *args]
    return subprocess.run(cmd, cwd=REPO, check=True, capture_output=True, text=True).stdout


def measure(n: int, workdir: Path, cross_level: str) -> dict:
    """Write ``n`` lines in one child, build the pyramid in another; the build child's figures."""
    path = workdir / f"lines_{n}.zarr"
    shutil.rmtree(path, ignore_errors=True)
    _run(WRITE, str(path), str(n))
    row = json.loads(_run(BUILD, str(path), cross_level).strip().splitlines()[-1])
    fine = row["vertex_counts"][0]
    per_vertex = round(row["added_mib"] * 2**20 / fine, 1)
    row.update(lines=n, fine_vertices=fine, added_bytes_per_fine_vertex=per_vertex)
    shutil.rmtree(path, ignore_errors=True)
    return row


def main() -> None:
    fmt = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=fmt)
    parser.add_argument("--lines", type=int, nargs="+", default=[10_000, 40_000])
    parser.add_argument("--cross-level", default="implicit", choices=["none", "implicit", "explicit"])
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        rows = [measure(n, Path(tmp), args.cross_level) for n in args.lines]
    doc = {"benchmark": "pyramid_memory", "cross_level": args.cross_level, "runs": rows}
    print(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
