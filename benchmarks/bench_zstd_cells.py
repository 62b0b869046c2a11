"""The 1 % box of ``bench_peers.py`` (1 M points, zstd, chunk 100, bins 25, sharded), with the
zstd cells decoded by a stream reader (``ZSTD_ONE_CALL_BYTES = 0``, main before run R1) or in
one ``decompress`` call (the default), alternating in one process so that both see the same
load: median milliseconds per box over ``--reps`` rounds of the three boxes. Every answer is
checked against numpy brute force once per mode.

Usage: ``PYTHONPATH=. python benchmarks/bench_zstd_cells.py [--points 1M] [--reps 300]``
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import bench_peers as bp  # noqa: E402

import zarr_vectors as zv  # noqa: E402
from zarr_vectors.engine.chunks import compressors  # noqa: E402

MODES = {"stream": 0, "one call": compressors.ZSTD_ONE_CALL_BYTES}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--points", default="1M")
    p.add_argument("--reps", type=int, default=300)
    args = p.parse_args()
    n = bp.parse_n(args.points)
    pos, attr = bp.generate(n, 0)
    boxes = [(lo, hi) for name, lo, hi in bp.boxes(0, 3) if name == "q1"]
    with tempfile.TemporaryDirectory(prefix="bench-zstd-cells-") as work:
        path = str(Path(work) / "ours")
        bp.write_ours(path, pos, attr, "zstd")
        ds = zv.open(path)
        for mode, limit in MODES.items():  # answers equal to brute force in both modes
            compressors.ZSTD_ONE_CALL_BYTES = limit
            for lo, hi in boxes:
                r = ds.query(bbox=(lo.tolist(), hi.tolist()))
                keep = np.all((pos >= lo) & (pos <= hi), axis=1)
                got = bp.canonical(np.asarray(r.positions), np.asarray(r.attributes[bp.ATTR]))
                if not np.array_equal(got, bp.canonical(pos[keep], attr[keep])):
                    raise SystemExit(f"{mode}: a box's answer differs from brute force")
        times: dict[str, list[float]] = {mode: [] for mode in MODES}
        for _ in range(args.reps):
            for mode, limit in MODES.items():
                compressors.ZSTD_ONE_CALL_BYTES = limit
                t = time.perf_counter()
                for lo, hi in boxes:
                    ds.query(bbox=(lo.tolist(), hi.tolist()))
                times[mode].append((time.perf_counter() - t) / len(boxes) * 1e3)
    for mode, ms in times.items():
        print(f"{args.points} zstd 1 % box, {mode}: median {statistics.median(ms):.3f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
