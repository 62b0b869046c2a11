#!/usr/bin/env python
"""Peak RSS of streaming meshes and skeletons with ``memory_limit=1 GiB`` at growing totals.

Run from the repository root with the project's venv::

    .venv/bin/python benchmarks/bench_stream_rss.py                       # 10^7 and 10^8 faces
    .venv/bin/python benchmarks/bench_stream_rss.py --kind skeletons --sizes 10000000,50000000

Each size is a fresh child process: it makes its batches on the fly (icospheres of 2,562
vertices and 5,120 faces scaled 20-60 in [0, 1000)^3, 50 a batch; or trees of 2,000 nodes, 100
a batch), streams them with ``create(..., memory_limit=1 GiB, workers=W)`` (chunk 100, zstd,
default shards) and reports wall seconds and peak RSS: its own (``ru_maxrss``) and that of its
largest worker process (``RUSAGE_CHILDREN``: the largest of the reaped children). Target of
issue 31: at most 1.5 GiB at 10^8 faces and 5 x 10^7 nodes, and not growing with the total.
The store is then opened and its vertex count checked against the input's.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_kinds_scale import EXTENT, icosphere4, trees  # noqa: E402

GIB = 1 << 30


def child(kind: str, total: int, workers: int, workdir: str | None) -> dict[str, float]:
    import zarr_vectors as zv

    grid = dict(chunk_shape=100.0, bounds=([0] * 3, [EXTENT] * 3), compression="zstd")
    work = tempfile.mkdtemp(prefix="zv-rss-", dir=workdir)
    path = os.path.join(work, "store")
    rng = np.random.default_rng(0)
    vertices = 0
    t0 = time.perf_counter()
    try:
        with zv.create(path, kind, memory_limit=GIB, workers=workers, **grid) as w:
            if kind == "meshes":
                v, f = icosphere4()
                count = total // len(f)
                for a in range(0, count, 50):
                    n = min(50, count - a)
                    r = rng.uniform(20, 60, n)
                    batch = [
                        ((v * r[i] + rng.uniform(r[i], EXTENT - r[i], 3)).astype(np.float32), f)
                        for i in range(n)
                    ]
                    w.append(batch, object_ids=np.arange(a, a + n))
                    vertices += n * len(v)
            else:
                for a in range(0, total // 2000, 100):
                    pos, par = trees(min(100, total // 2000 - a), seed=a)
                    w.append(pos, par, object_ids=np.repeat(np.arange(a, a + len(pos) // 2000), 2000))
                    vertices += len(pos)
        wall = time.perf_counter() - t0
        stored = zv.open(path).vertex_count()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return {"wall_s": wall, "rss_mib": own, "worker_rss_mib": kids, "ok": float(stored == vertices)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kind", default="meshes", choices=["meshes", "skeletons"])
    p.add_argument("--sizes", default="10000000,100000000", help="faces (meshes) or nodes (skeletons)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--workdir")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(json.dumps(child(args.kind, int(args.child), args.workers, args.workdir)))
        return 0
    bad = 0
    for size in map(int, args.sizes.split(",")):
        load = os.getloadavg()[0]
        cmd = [
            sys.executable,
            __file__,
            "--kind",
            args.kind,
            "--workers",
            str(args.workers),
            "--child",
            str(size),
        ]
        cmd += ["--workdir", args.workdir] if args.workdir else []
        out = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
        bad += out["ok"] != 1.0
        unit = "faces" if args.kind == "meshes" else "nodes"
        print(
            f"{args.kind} {size:,} {unit}, workers={args.workers}, memory_limit=1 GiB: {out['wall_s']:.1f} s, "
            f"peak RSS {out['rss_mib']:.0f} MiB (largest worker {out['worker_rss_mib']:.0f} MiB), "
            f"vertex count {'right' if out['ok'] == 1.0 else 'WRONG'}; load before {load:.1f}",
            flush=True,
        )
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
