#!/usr/bin/env python
"""Cost of the user's object ids: dense ``0 .. B-1`` against sparse ids (DECISIONS 8).

100,000 float32 points in 1,000 objects, written three ways that differ only in the ids:

* ``dense``   ids ``0 .. 999`` (no id table: the store is what it always was);
* ``segment`` uint64 ids near 7.2e17, connectomics segment ids (an ``object_id`` table);
* ``spread``  int64 ids ``5, 5 + 100,000, ... , ~1e8``, the {5, 1e8} shape: few ids, a large top.

For each: the write, one ``objects(all ids)`` read, 1,000 single-object reads
(``objects([id])``) and a full read with ``object_ids``. Every read is checked exactly against
the input. Prints the median of ``--runs`` runs and each time as a ratio to ``dense``; the
target is ``segment`` and ``spread`` at about 1.0.

    .venv/bin/python benchmarks/bench_object_ids.py [--runs 3] [--points 100000] [--objects 1000]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

import zarr_vectors as zv


def id_sets(k: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1)
    segment = np.uint64(720575940621039145) + np.sort(rng.choice(10**9, k, replace=False).astype(np.uint64))
    return {
        "dense": np.arange(k, dtype=np.int64),
        "segment": rng.permutation(segment),
        "spread": rng.permutation(5 + np.arange(k, dtype=np.int64) * 100_000),
    }


def rows_by_object(oid: np.ndarray) -> dict[int, np.ndarray]:
    order = np.argsort(oid, kind="stable")
    cuts = np.flatnonzero(np.diff(oid[order])) + 1
    return {int(oid[g[0]]): g for g in np.split(order, cuts)}


def sorted_rows(a: np.ndarray) -> np.ndarray:
    return a[np.lexsort(a.T[::-1])]


def one_run(root: Path, name: str, pos: np.ndarray, ids: np.ndarray, label: np.ndarray) -> dict[str, float]:
    oid = ids[label]
    store = root / f"{name}.zarr"
    t: dict[str, float] = {}
    t0 = time.perf_counter()
    ds = zv.write_points(
        store,
        pos,
        chunk_shape=100,
        bin_shape=50,
        object_ids=oid,
        attributes={"row": np.arange(len(pos), dtype=np.int64)},
        overwrite=True,
    )
    t["write"] = time.perf_counter() - t0
    want = rows_by_object(oid)
    every = ids.tolist()
    t0 = time.perf_counter()
    batch = ds.objects(every)
    t["objects(all ids)"] = time.perf_counter() - t0
    ok = np.array_equal(np.sort(batch.attributes["row"]), np.arange(len(pos)))
    ok &= np.array_equal(batch.object_ids, oid[batch.attributes["row"]])
    t0 = time.perf_counter()
    singles = [ds.objects([i]) for i in every]
    t["objects([id]) x B"] = time.perf_counter() - t0
    for i, res in zip(every, singles):
        ok &= np.array_equal(np.sort(res.attributes["row"]), want[i])
        ok &= np.array_equal(sorted_rows(res.positions), sorted_rows(pos[want[i]]))
    t0 = time.perf_counter()
    full = ds.read()
    t["read()"] = time.perf_counter() - t0
    ok &= np.array_equal(full.object_ids, oid[full.attributes["row"]])
    ok &= full.object_ids.dtype == (np.int64 if name != "segment" else np.uint64)
    if not ok:
        raise SystemExit(f"{name}: a read disagreed with the input")
    t["store MB"] = sum(f.stat().st_size for f in store.rglob("*") if f.is_file()) / 1e6
    shutil.rmtree(store)
    return t


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--points", type=int, default=100_000)
    p.add_argument("--objects", type=int, default=1_000)
    args = p.parse_args()
    rng = np.random.default_rng(0)
    pos = rng.uniform(0, 1000, (args.points, 3)).astype(np.float32)
    label = rng.integers(0, args.objects, args.points)
    label[: args.objects] = np.arange(args.objects)  # every object has points
    sets = id_sets(args.objects)
    runs: dict[str, list[dict[str, float]]] = {k: [] for k in sets}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.runs):
            for name, ids in sets.items():  # interleaved, so load drifts hit all alike
                runs[name].append(one_run(Path(tmp), name, pos, ids, label))
    med = {k: {m: statistics.median(r[m] for r in rs) for m in rs[0]} for k, rs in runs.items()}
    print(
        f"{args.points:,} points, {args.objects:,} objects, median of {args.runs} runs (seconds; ratio to dense)"
    )
    metrics = list(med["dense"])
    print(f"{'ids':<9}" + "".join(f"{m:>26}" for m in metrics))
    for name, row in med.items():
        cells = [f"{row[m]:>12.3f} ({row[m] / med['dense'][m]:5.2f}x)" for m in metrics]
        print(f"{name:<9}" + "".join(f"{c:>26}" for c in cells))
    print("every read matched the input exactly")


if __name__ == "__main__":
    main()
