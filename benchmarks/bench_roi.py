#!/usr/bin/env python
"""Polygon region-of-interest queries: ``Dataset.query(polygon=...)`` against reading the whole
level and filtering it with ``shapely.contains_xy``.

Run from the repository root with the project's venv::

    .venv/bin/python benchmarks/bench_roi.py            # 1 M points, 5 runs per figure
    .venv/bin/python benchmarks/bench_roi.py --quick    # 100 k points, 2 runs

Data: N float64 2-D points uniform in a 100 km square (metres, EPSG:32633), one float32
attribute, chunks of 5 km with 1.25 km bins. ROIs: star-shaped "districts" with a hole,
covering about 0.5 %, 2 % and 8 % of the square, and a three-part MultiPolygon. For each ROI the
script checks that the query returns exactly the rows ``shapely.contains_xy`` finds on the full
set, then prints the median time of the query, of the full read plus filter, and their ratio.
Exit status 1 if any result differs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import shapely

import zarr_vectors as zv

EXTENT = 100_000.0


def star(cx: float, cy: float, r_out: float, r_in: float, points: int = 40) -> shapely.Polygon:
    """A star-shaped district with a square hole in the middle."""
    a = np.linspace(0, 2 * np.pi, points, endpoint=False)
    r = np.where(np.arange(points) % 2 == 0, r_out, r_in)
    h = r_in * 0.3
    hole = [(cx - h, cy - h), (cx + h, cy - h), (cx + h, cy + h), (cx - h, cy + h)]
    return shapely.Polygon(np.c_[cx + r * np.cos(a), cy + r * np.sin(a)], [hole])


def rois() -> dict[str, shapely.Geometry]:
    out = {
        f"star {pct}": star(42_000.0, 57_000.0, r, r * 0.55)
        for pct, r in (("0.5%", 5_200.0), ("2%", 10_400.0), ("8%", 20_800.0))
    }
    out["3 islands"] = shapely.MultiPolygon(
        [
            star(15_000.0, 15_000.0, 4_000.0, 2_500.0),
            shapely.box(70e3, 20e3, 76e3, 27e3),
            star(80_000.0, 80_000.0, 3_000.0, 2_000.0),
        ]
    )
    return out


def timed(fn, runs: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(runs):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=1_000_000, help="points (default 1,000,000)")
    p.add_argument("--runs", type=int, default=5, help="timed runs per figure; the median is reported")
    p.add_argument("--quick", action="store_true", help="100,000 points, 2 runs")
    p.add_argument("--workdir", help="where to write the store (default: a temporary directory)")
    args = p.parse_args(argv)
    n, runs = (100_000, 2) if args.quick else (args.n, args.runs)
    rng = np.random.default_rng(7)
    pos = rng.uniform(0, EXTENT, (n, 2))
    value = rng.random(n).astype(np.float32)
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        path = Path(tmp) / "roi.zarr"
        t0 = time.perf_counter()
        zv.write_points(
            path,
            pos,
            chunk_shape=5_000,
            bin_shape=1_250,
            attributes={"value": value},
            bounds=([0, 0], [EXTENT, EXTENT]),
            crs="EPSG:32633",
        )
        write_s = time.perf_counter() - t0
        ds = zv.open(path)
        print(f"{n:,} points written in {write_s:.2f} s ({ds.vertex_count():,} stored, 400 chunks of 5 km)")

        def full(poly: shapely.Geometry) -> np.ndarray:
            res = ds.read()
            return res.positions[shapely.contains_xy(poly, res.positions[:, 0], res.positions[:, 1])]

        failures = 0
        rows = []
        for name, poly in rois().items():
            truth = shapely.contains_xy(poly, pos[:, 0], pos[:, 1])
            q_s, res = timed(lambda p=poly: ds.query(polygon=p), runs)
            f_s, filtered = timed(lambda p=poly: full(p), runs)
            same = np.array_equal(
                np.sort(res.positions.view("f8,f8"), axis=0),  # type: ignore[attr-defined]
                np.sort(pos[truth].view("f8,f8"), axis=0),
            )
            same &= np.array_equal(
                np.sort(filtered.view("f8,f8"), axis=0), np.sort(pos[truth].view("f8,f8"), axis=0)
            )
            failures += not same
            rows.append(
                {
                    "roi": name,
                    "area_pct": round(100 * poly.area / EXTENT**2, 2),
                    "hits": int(truth.sum()),
                    "exact": bool(same),
                    "query_s": q_s,
                    "read_filter_s": f_s,
                    "speedup": f_s / q_s,
                }
            )
        print(f"{'roi':<12}{'area':>7}{'hits':>10}{'exact':>7}{'query':>10}{'read+filter':>13}{'speedup':>9}")
        for r in rows:
            print(
                f"{r['roi']:<12}{r['area_pct']:>6}%{r['hits']:>10,}{'yes' if r['exact'] else 'NO':>7}"
                f"{r['query_s'] * 1e3:>8.1f}ms{r['read_filter_s'] * 1e3:>11.1f}ms{r['speedup']:>8.1f}x"
            )
        print(json.dumps({"n": n, "runs": runs, "write_s": write_s, "rois": rows}))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
