#!/usr/bin/env python
"""Attribute filters (``where=``) against the same box queries without them, and polygon
``intersects`` against geopandas on a parcel layer.

Points: N float32 points uniform in [0, 1000)^3 (chunk 100, bins 25) with two float32
attributes, ``confidence`` uniform in [0, 1) and ``size``; 1 % boxes (side 215.4) placed
uniformly. For each box: the plain query (all attributes) and the same query with
``where={"confidence": (">", 0.8)}``, interleaved, one warm-up then ``--reps`` timed each
(median per box, then the median over boxes). Every filtered answer is checked against numpy
brute force. Parcels: a grid of ``--parcels`` jittered quads with a large surrounding
parcel; ``predicate="intersects"`` for several regions checked against geopandas
``intersects`` (same ids), timed against geopandas on the in-memory frame.

Usage::

    python benchmarks/bench_where.py                 # 10 M points, 5,000 parcels
    python benchmarks/bench_where.py --points 1000000 --boxes 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

import zarr_vectors as zv


def _points(work: Path, n: int, seed: int) -> tuple[zv.Dataset, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    pos = rng.random((n, 3), dtype=np.float32) * np.float32(1000)
    conf = rng.random(n, dtype=np.float32)
    size = rng.random(n, dtype=np.float32) * 10
    zv.write_points(
        work / "pts.zarr",
        pos,
        chunk_shape=100,
        bin_shape=25,
        bounds=([0] * 3, [1000] * 3),
        attributes={"confidence": conf, "size": size},
        compression="zstd",
    )
    return zv.open(work / "pts.zarr"), pos, conf


def bench_where(ds: zv.Dataset, pos: np.ndarray, conf: np.ndarray, boxes: int, reps: int, seed: int) -> dict:
    rng = np.random.default_rng(seed + 1)
    plain, filtered, checked = [], [], 0
    where = {"confidence": (">", 0.8)}
    for _ in range(boxes):
        lo = rng.uniform(0, 1000 - 215.4, 3).astype(np.float32)
        hi = lo + np.float32(215.4)
        got = ds.query(bbox=(lo, hi), where=where)
        keep = np.all((pos >= lo) & (pos <= hi), axis=1) & (conf > 0.8)
        if len(got) != keep.sum() or not np.array_equal(
            np.sort(got.positions.view("V12").ravel()), np.sort(pos[keep].view("V12").ravel())
        ):
            raise SystemExit("where: an answer differs from brute force")
        checked += 1
        ds.query(bbox=(lo, hi))
        a, b = [], []
        for _ in range(reps):
            t = time.perf_counter()
            ds.query(bbox=(lo, hi))
            a.append(time.perf_counter() - t)
            t = time.perf_counter()
            ds.query(bbox=(lo, hi), where=where)
            b.append(time.perf_counter() - t)
        plain.append(statistics.median(a))
        filtered.append(statistics.median(b))
    p, f = statistics.median(plain) * 1e3, statistics.median(filtered) * 1e3
    return {
        "workload": "where 1% box",
        "plain_ms": p,
        "where_ms": f,
        "ratio": f / p,
        "boxes_checked": checked,
    }


def bench_intersects(work: Path, parcels: int, seed: int) -> dict:
    import geopandas as gpd
    import shapely

    rng = np.random.default_rng(seed + 2)
    side = int(np.ceil(np.sqrt(parcels)))
    xs = np.linspace(0, 1000, side + 1)
    polys = []
    for i in range(side):
        for j in range(side):
            if len(polys) == parcels - 1:
                break
            quad = np.array([(xs[i], xs[j]), (xs[i + 1], xs[j]), (xs[i + 1], xs[j + 1]), (xs[i], xs[j + 1])])
            polys.append(shapely.Polygon(quad + rng.uniform(-1, 1, (4, 2))).buffer(-0.5))
    polys.append(shapely.Polygon([(1100, 0), (3000, 0), (3000, 2000), (1100, 2000)]))
    ds = zv.write_geometries(work / "parcels.zarr", polys, chunk_shape=50)
    frame = gpd.GeoDataFrame(geometry=polys)
    regions = [
        shapely.Point(2000, 900).buffer(10),
        shapely.LineString([(5, 5), (995, 700)]).buffer(0.3),
        shapely.Polygon([(100, 100), (600, 120), (350, 800)]),
        shapely.box(990, 300, 1200, 420),
    ]
    ours, theirs, equal = [], [], 0
    for roi in regions:
        t = time.perf_counter()
        got = np.unique(ds.query(polygon=roi, predicate="intersects").object_ids)
        ours.append(time.perf_counter() - t)
        t = time.perf_counter()
        want = np.flatnonzero(frame.intersects(roi).to_numpy())
        theirs.append(time.perf_counter() - t)
        equal += int(np.array_equal(got, want))
    return {
        "workload": f"intersects, {parcels} parcels",
        "regions": len(regions),
        "equal_to_geopandas": equal,
        "ours_ms": [round(x * 1e3, 1) for x in ours],
        "geopandas_in_memory_ms": [round(x * 1e3, 1) for x in theirs],
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--points", type=int, default=10_000_000)
    p.add_argument("--boxes", type=int, default=5)
    p.add_argument("--reps", type=int, default=7)
    p.add_argument("--parcels", type=int, default=5000)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-where-") as tmp:
        work = Path(tmp)
        ds, pos, conf = _points(work, args.points, args.seed)
        print(json.dumps(bench_where(ds, pos, conf, args.boxes, args.reps, args.seed)), flush=True)
        print(json.dumps(bench_intersects(work, args.parcels, args.seed)), flush=True)


if __name__ == "__main__":
    main()
