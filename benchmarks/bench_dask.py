#!/usr/bin/env python
"""Write time of N points: one-shot ``zarr_vectors.write_points`` against
``zarr_vectors.dask.write_points`` on a Dask LocalCluster of 1 and of 2 worker processes.

Run from the repository root::

    .venv/bin/python benchmarks/bench_dask.py                 # 10 M points
    .venv/bin/python benchmarks/bench_dask.py --points 5000000

The points (float32 x, y, z, a float32 attribute and uint64 object ids) are made once in
memory; the Dask writers get them as a Dask DataFrame of ``--partitions`` partitions
(scattered to the cluster first, so the figures are the write, not the transfer of the
input). Every store is written to a fresh folder in ``--dir`` (default: a temporary one).
Cluster start-up is not timed. Output: one line per writer and the speed-ups.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

import zarr_vectors as zv


def make_points(n: int) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    pos = rng.uniform(0, 1000, (n, 3)).astype(np.float32)
    return pd.DataFrame(
        {
            "x": pos[:, 0],
            "y": pos[:, 1],
            "z": pos[:, 2],
            "intensity": rng.random(n, dtype=np.float32),
            "object_id": rng.integers(0, 10_000, n).astype(np.uint64) << np.uint64(20),
        }
    )


def one_shot(df: pd.DataFrame, target: Path, chunk: float) -> float:
    start = time.perf_counter()
    zv.write_points(
        target,
        df[["x", "y", "z"]].to_numpy(),
        chunk_shape=chunk,
        attributes={"intensity": df["intensity"].to_numpy()},
        object_ids=df["object_id"].to_numpy(),
    )
    return time.perf_counter() - start


def on_cluster(df: pd.DataFrame, target: Path, chunk: float, workers: int, partitions: int) -> float:
    import dask.dataframe as dd
    from distributed import Client, LocalCluster, wait

    from zarr_vectors import dask as zd

    with (
        LocalCluster(
            n_workers=workers, processes=True, threads_per_worker=1, dashboard_address=None, host="127.0.0.1"
        ) as cluster,
        Client(cluster) as client,
    ):
        ddf = dd.from_pandas(df, npartitions=partitions).persist()
        wait(ddf)
        client.run(lambda: None)
        start = time.perf_counter()
        zd.write_points(target, ddf, chunk_shape=chunk)
        return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--points", type=int, default=10_000_000)
    parser.add_argument("--chunk", type=float, default=100.0, help="chunk edge (the cube is 1000 wide)")
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="bench-dask-", dir=args.dir))
    try:
        df = make_points(args.points)
        print(f"{args.points:,} points, chunk {args.chunk:g} ({int(1000 / args.chunk) ** 3} chunks)")
        t0 = one_shot(df, base / "one-shot.zarr", args.chunk)
        print(f"one-shot write_points          {t0:8.2f} s")
        times = {}
        for workers in (1, 2):
            times[workers] = on_cluster(
                df, base / f"dask-{workers}.zarr", args.chunk, workers, args.partitions
            )
            print(f"dask, {workers} worker process(es)    {times[workers]:8.2f} s")
        print(f"speed-up 2 vs 1 workers        {times[1] / times[2]:8.2f} x")
        print(f"speed-up 2 workers vs one-shot {t0 / times[2]:8.2f} x")
        ref, got = zv.open(base / "one-shot.zarr"), zv.open(base / "dask-2.zarr")
        assert ref.vertex_count() == got.vertex_count() == args.points
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
