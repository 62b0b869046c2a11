#!/usr/bin/env python
"""Pyramid benchmark: building levels of detail, ours against the reference zarr-vectors 0.9.2.

Run from the repository root with the project's venv::

    .venv/bin/python benchmarks/bench_pyramid.py            # 1 M points, 3 runs, icosphere s7
    .venv/bin/python benchmarks/bench_pyramid.py --quick    # 100 k points, 1 run, icosphere s5

Points (protocol of ../shared/BENCHMARKS.md): 1,000,000 float32 points uniform in
[0, 1000]^3 with one float32 attribute, chunk 100, bins 25; three levels with factor 2.
Each side writes level 0 once; every run copies that store and builds the pyramid in a
fresh child process (ours: ``build_pyramid([2, 2, 2])`` with its defaults; the reference:
``build_pyramid(factors=[(2, 1)] * 3)`` with its defaults). Figures: build time (median),
peak RSS of the build process, store bytes and files before and after (growth ratio), and
coarse-level bbox exactness: at every level, 1 % and 10 % boxes are compared with the
level's full read filtered by numpy (counted, not assumed).

Mesh (ours): ``trimesh.creation.icosphere(7)`` scaled by 499, offset by 500, chunk 100,
one level with factor 2: closed surface, fraction of faces kept, and the Hausdorff
distance between the two levels' vertex sets (an upper bound of the surface distance,
nearest neighbours through a voxel hash), against two level-1 bins.

Output: one JSON object per workload on stdout, then a summary. Exit status 1 when any of
our coarse-level queries was inexact or a mesh target was missed.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _harness
import numpy as np

HERE = _harness.HERE
REPO = _harness.REPO
REF_PYTHON = _harness.DEFAULT_REF_VENV / "bin" / "python"
EXTENT = 1000.0
BOX_SIDES = {"q1": 215.4, "q10": 464.2}


log = _harness.make_log("bench_pyramid")


def store_size(path: Path) -> tuple[int, int]:
    total = files = 0
    for root, _, names in os.walk(path):
        for n in names:
            total += os.path.getsize(os.path.join(root, n))
            files += 1
    return total, files


def boxes(count: int, seed: int) -> list[tuple[str, np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    out = []
    for label, side in BOX_SIDES.items():
        for _ in range(count):
            lo = rng.uniform(0, EXTENT - side, 3)
            out.append((label, lo, lo + side))
    return out


# --------------------------------------------------------------------------- children


def child_ours(task: str, store: str, data: str | None) -> dict[str, Any]:
    import zarr_vectors as zv

    if task == "write":
        with np.load(data) as z:  # type: ignore[arg-type]
            zv.write_points(
                store,
                z["positions"],
                chunk_shape=100,
                bin_shape=25,
                bounds=([0.0] * 3, [EXTENT] * 3),
                attributes={"intensity": z["intensity"]},
            )
        return {}
    if task == "build":
        ds = zv.open(store, mode="r+")
        t = time.perf_counter()
        ds.build_pyramid([2, 2, 2])
        return {
            "build_s": time.perf_counter() - t,
            "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "vertex_counts": [ds.vertex_count(k) for k in ds.levels],
        }
    if task == "check":
        ds = zv.open(store)
        return {
            "levels": [
                _check_level(
                    lambda b, k=k: ds.query(b, level=k, attributes=False).positions,
                    ds.read(level=k, attributes=False).positions,
                )
                for k in ds.levels
            ]
        }
    raise SystemExit(f"unknown task {task}")


def child_reference(task: str, store: str, data: str | None) -> dict[str, Any]:
    import zarr_vectors as zv

    if task == "write":
        with np.load(data) as z:  # type: ignore[arg-type]
            layout = zv.Layout(cell_size=(100.0, 100.0, 100.0), subcells=4)
            schema = zv.Schema(
                ndim=3,
                bounds=([0.0] * 3, [EXTENT] * 3),
                kind="point_cloud",
                position_dtype="float32",
                layout=layout,
            )
            zv.create(store, schema=schema).add_points(
                z["positions"], attributes={"intensity": z["intensity"]}
            )
        return {}
    if task == "build":
        ds = zv.open(store, mode="r+")
        t = time.perf_counter()
        ds.build_pyramid(factors=[(2, 1)] * 3)
        ds = zv.open(store)
        return {
            "build_s": time.perf_counter() - t,
            "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "vertex_counts": [ds.level(k).vertex_count for k in ds.levels],
        }
    if task == "check":
        ds = zv.open(store)

        def read(k: int, bbox: Any = None) -> np.ndarray:
            kw = {"level": k} if bbox is None else {"level": k, "bbox": (list(bbox[0]), list(bbox[1]))}
            return np.asarray(ds.select(**kw).read().positions)

        return {"levels": [_check_level(lambda b, k=k: read(k, b), read(k)) for k in ds.levels]}
    raise SystemExit(f"unknown task {task}")


def _check_level(query: Any, full: np.ndarray) -> dict[str, Any]:
    """Box results of one level against its full read filtered by numpy."""
    out: dict[str, Any] = {"rows": len(full), "boxes": 0, "exact": 0, "expected": 0, "returned": 0}
    for _, lo, hi in boxes(5, 7):
        want = int(np.all((full >= lo) & (full <= hi), axis=1).sum())
        got = query((lo, hi))
        inside = int(np.all((got >= lo) & (got <= hi), axis=1).sum()) if len(got) else 0
        out["boxes"] += 1
        out["expected"] += want
        out["returned"] += len(got)
        out["exact"] += int(len(got) == want == inside)
    return out


# --------------------------------------------------------------------------- parent


def run_child(python: str, side: str, task: str, store: Path, data: Path | None, cwd: str) -> dict[str, Any]:
    # -E -s rather than -I: the child imports _harness from this folder
    args = [python, "-E", "-s", str(Path(__file__).resolve()), "--child", side, task, str(store)]
    if data is not None:
        args.append(str(data))
    try:
        return _harness.run_json(args, what=f"{side} {task}", cwd=cwd, timeout=3600, tail=40)[0]
    except _harness.ChildError as exc:
        raise SystemExit(f"{side} {task} failed:\n{exc.stderr[-4000:] or exc}") from None


def ours_python() -> str:
    return sys.executable


def points_workload(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    n = args.n
    data = work / "points.npz"
    np.savez(
        data,
        positions=rng.uniform(0, EXTENT, (n, 3)).astype(np.float32),
        intensity=rng.random(n).astype(np.float32),
    )
    sides = {"ours": ours_python()}
    if not args.no_reference:
        sides["reference"] = str(args.reference_python)
    result: dict[str, Any] = {"workload": "pyramid-points", "n": n, "factors": [2, 2, 2]}
    for side, python in sides.items():
        base = work / f"{side}-level0.zarr"
        run_child(python, side, "write", base, data, str(work))
        size0 = store_size(base)
        builds, last = [], {}
        for r in range(args.runs):
            store = work / f"{side}-run{r}.zarr"
            shutil.copytree(base, store)
            last = run_child(python, side, "build", store, None, str(work))
            builds.append(last["build_s"])
            if r < args.runs - 1:
                shutil.rmtree(store)
        size1 = store_size(store)
        check = run_child(python, side, "check", store, None, str(work))
        result[side] = {
            "build_s": statistics.median(builds),
            "build_runs_s": builds,
            "rss_mib": last["rss_mib"],
            "vertex_counts": last["vertex_counts"],
            "level0_bytes": size0[0],
            "level0_files": size0[1],
            "pyramid_bytes": size1[0],
            "pyramid_files": size1[1],
            "growth": size1[0] / size0[0],
            "levels": check["levels"],
        }
        log(f"{side}: build {result[side]['build_s']:.2f} s, growth {result[side]['growth']:.2f}x")
    if "reference" in result:
        result["ratio_build"] = result["ours"]["build_s"] / result["reference"]["build_s"]
        result["ratio_growth"] = result["ours"]["growth"] / result["reference"]["growth"]
    return result


def _nearest(a: np.ndarray, b: np.ndarray, cell: float) -> np.ndarray:
    """Distance from every row of ``a`` to its nearest row of ``b`` (voxel hash, exact
    whenever the nearest lies within one voxel; rows farther fall back to brute force)."""
    keys_b = np.floor(b / cell).astype(np.int64)
    lo = keys_b.min(axis=0) - 2
    span = keys_b.max(axis=0) - lo + 3
    lin_b = np.ravel_multi_index(tuple((keys_b - lo).T), tuple(span))
    order = np.argsort(lin_b)
    lin_sorted = lin_b[order]
    ka = np.clip(np.floor(a / cell).astype(np.int64) - lo, 1, span - 2)
    best = np.full(len(a), np.inf)
    for off in np.stack(np.meshgrid(*[[-1, 0, 1]] * 3, indexing="ij"), -1).reshape(-1, 3):
        lin = np.ravel_multi_index(tuple((ka + off).T), tuple(span))
        s, e = np.searchsorted(lin_sorted, lin), np.searchsorted(lin_sorted, lin, "right")
        counts = e - s
        idx = np.repeat(np.arange(len(a)), counts)
        rows = order[np.repeat(s - np.cumsum(counts) + counts, counts) + np.arange(counts.sum())]
        d = np.linalg.norm(a[idx] - b[rows], axis=1)
        np.minimum.at(best, idx, d)
    far = np.flatnonzero(best > cell)
    for i in far:
        best[i] = np.linalg.norm(b - a[i], axis=1).min()
    return best


def mesh_workload(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    import trimesh

    import zarr_vectors as zv

    sphere = trimesh.creation.icosphere(subdivisions=args.subdivisions)
    v = (sphere.vertices * 499 + 500).astype(np.float32)
    store = work / "mesh.zarr"
    zv.write_mesh(store, v, sphere.faces, chunk_shape=100)
    ds = zv.open(store, mode="r+")
    t = time.perf_counter()
    ds.build_pyramid([2])
    build = time.perf_counter() - t
    m0, m1 = ds.objects([0], level=0), ds.objects([0], level=1)
    t0, t1 = m0.to_trimesh(), m1.to_trimesh()
    bin1 = float(np.max(ds.level(1).grid.bin_shape))
    hd = max(
        _nearest(m1.positions.astype(np.float64), m0.positions.astype(np.float64), 5.0).max(),
        _nearest(m0.positions.astype(np.float64), m1.positions.astype(np.float64), 5.0).max(),
    )
    radial = np.abs(np.linalg.norm(m1.positions - 500.0, axis=1) - 499.0).max()
    frac = len(t1.faces) / len(t0.faces)
    out = {
        "workload": "pyramid-mesh",
        "subdivisions": args.subdivisions,
        "build_s": build,
        "faces": [len(t0.faces), len(t1.faces)],
        "face_fraction": frac,
        "watertight_level1": bool(t1.is_watertight),
        "hausdorff_vertex_bound": float(hd),
        "radial_error_max": float(radial),
        "level1_bin": bin1,
        "targets_met": bool(t1.is_watertight and 0.2 <= frac <= 0.3 and hd <= 2 * bin1),
    }
    log(
        f"mesh: {frac:.3f} of faces, watertight {t1.is_watertight}, Hausdorff <= {hd:.2f} (2 bins = {2 * bin1})"
    )
    return out


def main() -> int:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        side, task, store = sys.argv[2], sys.argv[3], sys.argv[4]
        data = sys.argv[5] if len(sys.argv) > 5 else None
        fn = child_ours if side == "ours" else child_reference
        print(json.dumps(fn(task, store, data)))
        return 0
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="100 k points, 1 run, icosphere s5")
    p.add_argument("--n", type=int, default=None)
    p.add_argument("--runs", type=int, default=None)
    p.add_argument("--subdivisions", type=int, default=None)
    p.add_argument("--reference-python", default=str(REF_PYTHON))
    p.add_argument("--no-reference", action="store_true")
    p.add_argument("--workdir", default=None)
    p.add_argument("--keep", action="store_true")
    args = p.parse_args()
    args.n = args.n or (100_000 if args.quick else 1_000_000)
    args.runs = args.runs or (1 if args.quick else 3)
    args.subdivisions = args.subdivisions or (5 if args.quick else 7)
    if not args.no_reference and not Path(args.reference_python).exists():
        raise SystemExit(
            f"no reference interpreter at {args.reference_python} (make it with "
            "../shared/tools/reference-venv.sh, or pass --no-reference)"
        )
    work = Path(args.workdir or tempfile.mkdtemp(prefix="bench-pyramid-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        points = points_workload(args, work)
        print(json.dumps(points))
        mesh = mesh_workload(args, work)
        print(json.dumps(mesh))
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    ours_exact = all(lv["exact"] == lv["boxes"] for lv in points["ours"]["levels"])
    print("\nsummary")
    for side in ("ours", "reference"):
        if side in points:
            s = points[side]
            exact = sum(lv["exact"] for lv in s["levels"])
            total = sum(lv["boxes"] for lv in s["levels"])
            print(
                f"  {side:9s} build {s['build_s']:.2f} s  growth {s['growth']:.2f}x  "
                f"({s['level0_bytes'] / 1e6:.1f} -> {s['pyramid_bytes'] / 1e6:.1f} MB)  exact boxes {exact}/{total}  "
                f"rss {s['rss_mib']:.0f} MiB"
            )
    if "ratio_build" in points:
        print(f"  ours/reference: build {points['ratio_build']:.2f}, growth {points['ratio_growth']:.2f}")
    print(
        f"  mesh: faces kept {mesh['face_fraction']:.3f}, watertight {mesh['watertight_level1']}, "
        f"Hausdorff <= {mesh['hausdorff_vertex_bound']:.2f} vs 2 bins {2 * mesh['level1_bin']:.0f}"
    )
    return 0 if ours_exact and mesh["targets_met"] else 1


if __name__ == "__main__":
    sys.exit(main())
