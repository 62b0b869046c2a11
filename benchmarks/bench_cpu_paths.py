"""CPU paths without the disk: writes to a zarr MemoryStore and box queries, for points,
lines and a mesh, in fresh processes for each source tree given, alternating between them.

Compares two versions of the package on a machine whose file creation is slow or noisy
(writes to disk there measure the file system, not the code). Run from the repository:

    python benchmarks/bench_cpu_paths.py                 # this checkout
    python benchmarks/bench_cpu_paths.py --tree /path/to/other/checkout --rounds 3

Each figure is the median over ``--repeat`` calls in one process, then over rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

CHILD = r"""
import json, time, numpy as np, zarr, zarr_vectors as zv
def med(f, n):
    ts = []
    for _ in range(n):
        t = time.perf_counter(); f(); ts.append(time.perf_counter() - t)
    return sorted(ts)[len(ts) // 2]
n = int(__import__("sys").argv[1])
rng = np.random.default_rng(0)
pts = rng.uniform(0, 1000, (1_000_000, 3)).astype("float32")
att = {"intensity": np.ones(len(pts), "float32")}
lines = [np.cumsum(rng.normal(0, 10, (int(k), 3)), axis=0) % 1000 for k in rng.integers(50, 200, 1000)]
import trimesh
m = trimesh.creation.icosphere(subdivisions=6)
verts, faces = np.asarray(m.vertices) * 450 + 500, np.asarray(m.faces)
out = {}
box = ([200, 200, 200], [400, 400, 400])
for name, write in {
    "points": lambda s: zv.write_points(s, pts, chunk_shape=100, bin_shape=25, attributes=att),
    "lines": lambda s: zv.write_lines(s, lines, chunk_shape=100, compression="zstd"),
    "mesh": lambda s: zv.write_mesh(s, verts, faces, chunk_shape=100),
}.items():
    out[name + " write (s)"] = med(lambda: write(zarr.storage.MemoryStore()), n)
    store = zarr.storage.MemoryStore(); write(store); ds = zv.open(store); ds.query(bbox=box)
    out[name + " 8 % box (ms)"] = 1000 * med(lambda: ds.query(bbox=box), 4 * n)
print(json.dumps(out))
"""


def run(tree: Path, repeat: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": f"{tree}{os.pathsep}{tree / 'codecs'}"}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(repeat)], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", action="append", type=Path, default=[], help="another checkout to compare")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    trees = [*args.tree, Path(__file__).resolve().parents[1]]
    results: dict[Path, list[dict[str, float]]] = {t: [] for t in trees}
    for _ in range(args.rounds):
        for tree in trees:
            results[tree].append(run(tree, args.repeat))
    keys = list(results[trees[0]][0])
    print(f"{'figure':24s}" + "".join(f"{t.name:>16s}" for t in trees))
    for k in keys:
        print(f"{k:24s}" + "".join(f"{statistics.median(r[k] for r in results[t]):16.3f}" for t in trees))


if __name__ == "__main__":
    main()
