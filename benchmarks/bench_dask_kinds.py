#!/usr/bin/env python
"""Write time of meshes and skeletons through ``zarr_vectors.dask`` on a Dask LocalCluster of
1 and of 2 worker processes, against the in-memory writers (``workers=1``) in the same run.

Run from the repository root::

    .venv/bin/python benchmarks/bench_dask_kinds.py                 # 2,000 meshes, 2,000 trees
    .venv/bin/python benchmarks/bench_dask_kinds.py --objects 500

Meshes are ribbons of 2 x 200 vertices and 398 faces along random walks; skeletons are the
same walks with a branch every 25 vertices. They are made in memory and given as Dask bags
of ``--partitions`` partitions. Cluster start-up is not timed. Every Dask store is checked
file for file against the in-memory writer's. Output: one line per writer and the speed-up
of 2 workers over 1, with the machine's load average.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np


def walks(n: int, size: int = 200) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    start = rng.uniform(100, 900, (n, 1, 3))
    return list(np.clip(start + np.cumsum(rng.normal(0, 3, (n, size, 3)), axis=1), 0, 1000))


def ribbon(walk: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    vertices = np.stack([walk, np.clip(walk + [2.0, 1.0, 0.0], 0, 1000)], axis=1).reshape(-1, 3)
    k = np.arange(len(walk) - 1)
    faces = np.concatenate(
        [np.stack([2 * k, 2 * k + 1, 2 * k + 2], 1), np.stack([2 * k + 1, 2 * k + 3, 2 * k + 2], 1)]
    )
    return vertices, faces


def tree(walk: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    parents = np.arange(-1, len(walk) - 1)
    parents[25::25] = np.arange(25, len(walk), 25) // 2
    return walk, parents


def files(path: Path) -> dict[str, bytes]:
    from tests._streams import stored_files

    return stored_files(path)


def timed(fn: Any) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--objects", type=int, default=2000)
    parser.add_argument("--partitions", type=int, default=16)
    parser.add_argument("--dir", default=None)
    args = parser.parse_args()

    import dask.bag as db
    import distributed

    import zarr_vectors as zv
    import zarr_vectors.dask as zd

    ws = walks(args.objects)
    meshes, trees = [ribbon(w) for w in ws], [tree(w) for w in ws]
    sizes = np.array([len(p) for p, _ in trees])
    starts = np.cumsum(np.concatenate([[0], sizes[:-1]]))
    flat_parents = np.concatenate([np.where(q < 0, -1, q + s) for (_, q), s in zip(trees, starts)])
    grid = {"chunk_shape": 100, "bounds": ([0] * 3, [1000] * 3), "compression": "zstd"}
    root = Path(args.dir or tempfile.mkdtemp(prefix="zv-bench-dask-kinds-"))
    print(
        f"{args.objects} meshes ({sum(len(f) for _, f in meshes)} faces) and skeletons "
        f"({int(sizes.sum())} nodes); {args.partitions} partitions; load {os.getloadavg()[0]:.2f}"
    )
    refs = {
        "meshes": timed(lambda: zv.write_meshes(root / "ref-m", meshes, workers=1, **grid)),
        "skeletons": timed(
            lambda: zv.write_skeleton(
                root / "ref-s",
                np.concatenate(ws),
                flat_parents,
                object_ids=np.repeat(np.arange(len(ws)), sizes),
                workers=1,
                **grid,
            )
        ),
    }
    for kind, t in refs.items():
        print(f"in-memory writer, 1 process   {kind:9s} {t:7.2f} s")
    got: dict[tuple[str, int], float] = {}
    for n in (1, 2):
        with (
            distributed.LocalCluster(
                n_workers=n, processes=True, threads_per_worker=1, dashboard_address=None
            ) as cluster,
            distributed.Client(cluster),
        ):
            for kind, items, write in (
                ("meshes", meshes, zd.write_meshes),
                ("skeletons", trees, zd.write_skeletons),
            ):
                out = root / f"dask{n}-{kind}"
                bag = db.from_sequence(items, npartitions=args.partitions)
                got[kind, n] = timed(lambda write=write, out=out, bag=bag: write(out, bag, **grid))
                ref = root / ("ref-m" if kind == "meshes" else "ref-s")
                assert files(out) == files(ref), f"{kind}: the Dask store differs from the in-memory one"
                print(
                    f"zarr_vectors.dask, {n} worker(s) {kind:9s} {got[kind, n]:7.2f} s  "
                    f"(load {os.getloadavg()[0]:.2f})"
                )
    for kind in refs:
        print(f"{kind}: 2 workers / 1 worker speed-up {got[kind, 1] / got[kind, 2]:.2f}x")
    if args.dir is None:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
