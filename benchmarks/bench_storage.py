"""Cost of the storage safety layer on local disk: writes, full reads and small box queries.

Each measurement runs in a fresh child process that imports ``zarr_vectors`` from the
source folder given (default: this checkout), so two versions can be compared side by
side (``--compare /path/to/other/checkout``). Printed: the median over ``--runs`` of

* ``write``: ``write_points`` of N float32 points with one attribute (staged, swapped in);
* ``open+read``: open the store and read every point;
* ``boxes``: K box queries of 1 % of the volume on one opened dataset (each batch of
  cell reads is followed by one read of the root ``zarr.json``, the consistency check);
* ``overwrite``: ``write_points(..., overwrite=True)`` over the existing store.

    .venv/bin/python benchmarks/bench_storage.py --n 1000000 --runs 3 --compare /tmp/old-checkout
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r"""
import json, sys, time
import numpy as np
import zarr_vectors as zv

path, n, k = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = np.random.default_rng(0)
pos = rng.uniform(0, 1000, (n, 3)).astype(np.float32)
att = {"intensity": rng.random(n).astype(np.float32)}
out = {}
t = time.perf_counter(); zv.write_points(path, pos, chunk_shape=100, attributes=att); out["write"] = time.perf_counter() - t
t = time.perf_counter(); ds = zv.open(path); res = ds.read(); out["open+read"] = time.perf_counter() - t
assert len(res) == n
lo = rng.uniform(0, 785, (k, 3))
t = time.perf_counter()
rows = sum(len(ds.query((b, b + 215.4), object_ids=False)) for b in lo)
out["boxes"] = time.perf_counter() - t
t = time.perf_counter(); zv.write_points(path, pos, chunk_shape=100, attributes=att, overwrite=True); out["overwrite"] = time.perf_counter() - t
out["rows"] = rows
print(json.dumps(out))
"""


def measure(source: Path, n: int, k: int, runs: int) -> dict[str, float]:
    results = []
    for _ in range(runs):
        with tempfile.TemporaryDirectory(prefix="zv-bench-storage-") as tmp:
            env = {**os.environ, "PYTHONPATH": str(source)}
            proc = subprocess.run(
                [sys.executable, "-c", CHILD, f"{tmp}/s.zarr", str(n), str(k)],
                env=env,
                capture_output=True,
                text=True,
                check=True,
                cwd=tmp,
            )
            results.append(json.loads(proc.stdout))
    return {key: statistics.median(r[key] for r in results) for key in results[0]}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=200_000, help="points (default 200,000)")
    parser.add_argument("--boxes", type=int, default=200, help="box queries (default 200)")
    parser.add_argument("--runs", type=int, default=3, help="fresh-process runs per version (default 3)")
    parser.add_argument("--compare", type=Path, help="another checkout to measure the same way")
    args = parser.parse_args()
    here = Path(__file__).resolve().parents[1]
    versions = {"this checkout": here} | ({"compared": args.compare.resolve()} if args.compare else {})
    print(
        f"{args.n:,} points, chunk 100 in [0, 1000)^3, {args.boxes} boxes of 1 %, median of {args.runs} runs"
    )
    print(f"{'version':<16}{'write s':>10}{'open+read s':>13}{'boxes s':>10}{'ms/box':>9}{'overwrite s':>13}")
    rows = None
    for name, source in versions.items():
        m = measure(source, args.n, args.boxes, args.runs)
        if rows is not None and m["rows"] != rows:
            sys.exit(f"{name}: the box queries returned {m['rows']} rows, the first version {rows}")
        rows = m["rows"]
        print(
            f"{name:<16}{m['write']:>10.3f}{m['open+read']:>13.3f}{m['boxes']:>10.3f}"
            f"{1000 * m['boxes'] / args.boxes:>9.2f}{m['overwrite']:>13.3f}"
        )


if __name__ == "__main__":
    main()
