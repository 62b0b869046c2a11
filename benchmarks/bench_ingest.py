"""SWC folder ingest, one worker against two (issue 32): ``ingest_swc_files`` on ``N`` files
(default 2000; the issue's target is 10,000), one checkpoint, so the parse is what differs.

Run: ``python benchmarks/bench_ingest.py [N]``; prints wall seconds per worker count and the
ratio. The machine's other load changes the figures: run it on an idle machine.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from zarr_vectors.io.swc import write_swc
from zarr_vectors.io.swc_folder import ingest_swc_files


def main(n: int) -> None:
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "swc"
        folder.mkdir()
        for k in range(n):
            m = int(rng.integers(200, 400))
            pos = rng.uniform(0, 1000, 3) + np.cumsum(rng.normal(0, 2, (m, 3)), axis=0)
            write_swc(folder / f"{10**15 + k}.swc", pos.clip(0, 1999), np.arange(-1, m - 1))
        files = sorted(folder.glob("*.swc"))
        times = {}
        for workers in (1, 2):
            start = time.perf_counter()
            ingest_swc_files(
                Path(tmp) / f"w{workers}.zarr",
                files,
                workers=workers,
                checkpoint=n,
                chunk_shape=250.0,
                bounds=([0.0] * 3, [2000.0] * 3),
            )
            times[workers] = time.perf_counter() - start
            print(f"{n} SWC files, workers={workers}: {times[workers]:.2f} s")
        print(f"speed-up 2 vs 1 worker: {times[1] / times[2]:.2f}x")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000)
