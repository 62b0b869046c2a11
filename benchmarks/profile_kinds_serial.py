"""Serial share of the streamed mesh and skeleton writes (issue 31): what the calling process
does while the pool's workers could run, and the speed-up Amdahl's law then allows.

Run from the repository root with the project's venv::

    .venv/bin/python benchmarks/profile_kinds_serial.py                    # 1,024,000 faces / nodes
    .venv/bin/python benchmarks/profile_kinds_serial.py --n 102400 --runs 1

With ``workers=1`` the sweep's groups run inline (:func:`map_groups` maps in the calling
thread), so timing the two per-group methods (``LinkedStream._make_group`` and
``_make_cross``, wrapped here) gives the parallel part P; everything else in the write (the
appends and their spills, the consumer that assembles shards and writes them, the object
index, the commit) is the serial part S = wall - P. Amdahl: speed-up(N) = 1 / (s + (1-s)/N)
with s = S / wall (the prediction uses it); the same share by CPU time (the calling process's
CPU less the calling thread's CPU inside the methods) is also shown, as it is steadier than wall
time on a loaded machine. With ``workers=2`` the script also reports the wall time and the calling
process's own CPU time (the serial part plus the cost of receiving the workers' results).
Data and store options are those of bench_kinds_scale.py. Median of ``--runs``.
"""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import statistics
import tempfile
import time
from typing import Any

import numpy as np
from bench_kinds_scale import CHUNK, EXTENT, MESH_FACES, meshes, trees

import zarr_vectors as zv
from zarr_vectors.engine.write.linkedstream import LinkedStream

_PARALLEL = [0.0, 0.0]  # wall and CPU seconds inside the per-group methods


def _timed(method: Any) -> Any:
    @functools.wraps(method)
    def run(*args: Any, **kwargs: Any) -> Any:
        t0, c0 = time.perf_counter(), time.thread_time()
        try:
            return method(*args, **kwargs)
        finally:
            _PARALLEL[0] += time.perf_counter() - t0
            _PARALLEL[1] += time.thread_time() - c0

    return run


def _write(kind: str, data: Any, path: str, workers: int) -> tuple[float, float, float, float]:
    """Wall and calling-process CPU seconds, then wall and CPU seconds inside the per-group
    methods (the latter two meaningful with ``workers=1`` only, where they run inline)."""
    grid = dict(chunk_shape=CHUNK, bounds=([0] * 3, [EXTENT] * 3), compression="zstd")
    _PARALLEL[:] = [0.0, 0.0]
    c0, t0 = time.process_time(), time.perf_counter()
    if kind == "skeletons":
        pos, par = data
        per = 100 * 2000
        with zv.create(path, "skeletons", workers=workers, **grid) as w:
            for a in range(0, len(pos), per):
                w.append(pos[a : a + per], np.where(par[a : a + per] >= 0, par[a : a + per] - a, -1))
    else:
        with zv.create(path, "meshes", workers=workers, **grid) as w:
            for a in range(0, len(data), 50):
                w.append(data[a : a + 50], object_ids=np.arange(a, min(a + 50, len(data))) * 3 + 7)
    return time.perf_counter() - t0, time.process_time() - c0, _PARALLEL[0], _PARALLEL[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1_024_000, help="faces (meshes) and nodes (skeletons)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--kinds", default="meshes,skeletons")
    ap.add_argument("--targets", default="disk,memory")
    args = ap.parse_args()
    for name in ("_make_group", "_make_cross"):
        setattr(LinkedStream, name, _timed(getattr(LinkedStream, name)))
    work = tempfile.mkdtemp(prefix="zv-serial-")
    try:
        for kind in args.kinds.split(","):
            data = meshes(args.n // MESH_FACES) if kind == "meshes" else trees(args.n // 2000)
            for target in args.targets.split(","):
                got: dict[int, list[tuple[float, float, float, float]]] = {1: [], 2: []}
                loads = []
                for run in range(args.runs):
                    for workers in (1, 2):
                        path = os.path.join(work, f"{kind}-{workers}-{run}")
                        if target == "memory":
                            path = f"memory://serial-{os.getpid()}-{time.time_ns()}"
                        loads.append(os.getloadavg()[0])
                        got[workers].append(_write(kind, data, path, workers))
                        shutil.rmtree(path, ignore_errors=True)
                med = {w: [statistics.median(x[i] for x in got[w]) for i in range(4)] for w in got}
                wall1, cpu1, par1, parcpu1 = med[1]
                s = (wall1 - par1) / wall1
                s_cpu = (cpu1 - parcpu1) / cpu1
                amdahl = {n: 1 / (s + (1 - s) / n) for n in (2, 4, 8)}
                print(
                    f"# {kind} -> {target}: n={args.n}, median of {args.runs}; workers=1 wall {wall1:.2f} s, "
                    f"per-group methods {par1:.2f} s, serial {wall1 - par1:.2f} s (s = {s:.2f}; "
                    f"by CPU: {cpu1 - parcpu1:.2f} of {cpu1:.2f} s, s = {s_cpu:.2f}); "
                    f"workers=2 wall {med[2][0]:.2f} s, calling-process CPU {med[2][1]:.2f} s; "
                    f"measured 2:1 {wall1 / med[2][0]:.2f}x; Amdahl "
                    + ", ".join(f"{n}: {v:.2f}x" for n, v in amdahl.items())
                    + f"; 1-min load {min(loads):.1f}-{max(loads):.1f}"
                )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
