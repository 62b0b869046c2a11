#!/usr/bin/env python
"""Points benchmark: this project's zarr_vectors against the reference zarr-vectors 0.9.2.

Run from the repository root with the project's venv::

    .venv/bin/python benchmarks/bench_points.py            # full protocol (1 M points, 3 runs)
    .venv/bin/python benchmarks/bench_points.py --quick    # smoke run (100 k points, 1 run)

Every measurement happens in a fresh child process (``benchmarks/_points_child.py``): our
package under this interpreter, the reference under the reference venv's interpreter (found
or created with ../shared/tools/reference-venv.sh, or given with --reference-python). Both
implementations are measured in the same run, on the same data, boxes and chunking.

Output: one JSON object per compression variant on stdout (figures for both sides and the
ratios ours/reference; below 1 means ours is faster or smaller), then a summary table.
See benchmarks/README.md for what each figure means.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any

import _harness
import numpy as np
from _harness import REFERENCE_VERSION, ChildError, fmt, median, ratio, store_stats, warm_cache

HERE = _harness.HERE
REPO = _harness.REPO
#: Compression variants the reference side of the benchmark can write.
REFERENCE_VARIANTS = ("none", "zstd")

EXTENT = 1000.0
BOX_SIDES = {"q1": 215.4, "q10": 464.2}  # cubes covering 1 % and 10 % of [0, 1000]^3

CHILD = _harness.TaskChild(HERE / "_points_child.py")
run_child = CHILD.run
log = _harness.make_log("bench_points")


def make_boxes(count: int, seed: int) -> dict[str, list[list[list[float]]]]:
    """Cube boxes placed uniformly inside the volume; corners are float32-exact."""
    rng = np.random.default_rng(seed)
    out: dict[str, list[list[list[float]]]] = {}
    for label, side in BOX_SIDES.items():
        lo = rng.uniform(0.0, EXTENT - side, size=(count, 3)).astype(np.float32)
        hi = (lo + np.float32(side)).astype(np.float32)
        out[label] = [[[float(v) for v in lo[i]], [float(v) for v in hi[i]]] for i in range(count)]
    return out


def snapshot_ours(work: str) -> dict[str, Any]:
    """Copy our package's working tree so every child of this run imports the same code."""
    CHILD.snapshot(work, {"zarr_vectors": REPO / "zarr_vectors"})
    return _harness.describe_source(snapshot=True)


# --------------------------------------------------------------------------- measuring


def measure(
    args: argparse.Namespace, pythons: dict[str, str], work: str, boxes_file: str
) -> dict[tuple[str, str], dict[str, Any]]:
    """All runs. Returns raw per-(variant, impl) records."""
    raw: dict[tuple[str, str], dict[str, Any]] = {}
    for variant in args.variants:
        for impl in pythons:
            raw[(variant, impl)] = {"runs": [], "error": None, "io": None, "store": None}

    common = {"n": args.n, "seed": args.seed}
    for run in range(args.runs):
        order = list(pythons) if run % 2 == 0 else list(reversed(list(pythons)))
        for variant in args.variants:
            for impl in order:
                rec = raw[(variant, impl)]
                if rec["error"]:
                    continue
                if impl == "reference" and variant not in REFERENCE_VARIANTS:
                    rec["error"] = f"the reference benchmark has no variant {variant!r}"
                    continue
                py = pythons[impl]
                store = os.path.join(work, f"store-{impl}-{variant}.zarr")
                try:
                    log(f"run {run + 1}/{args.runs} {impl:9s} {variant:4s}: generate only")
                    gen = run_child(py, impl, "gen", cwd=work, variant=variant, **common)
                    if os.path.exists(store):
                        shutil.rmtree(store)
                    log(f"run {run + 1}/{args.runs} {impl:9s} {variant:4s}: write")
                    wr = run_child(py, impl, "write", cwd=work, variant=variant, store=store, **common)
                    stats = store_stats(store)
                    warm_cache(store)
                    log(
                        f"run {run + 1}/{args.runs} {impl:9s} {variant:4s}: queries "
                        f"({wr['write_s']:.3f} s write)"
                    )
                    qr = run_child(
                        py, impl, "query", cwd=work, variant=variant, store=store, boxes=boxes_file, **common
                    )
                    if rec["io"] is None:
                        rec["io"] = run_child(
                            py,
                            impl,
                            "io",
                            cwd=work,
                            variant=variant,
                            store=store,
                            boxes=boxes_file,
                            io_label="q1",
                            io_index=args.io_box,
                            **common,
                        )
                except ChildError as exc:
                    log(f"FAILED: {exc}")
                    rec["error"] = str(exc)
                    continue
                rec["store"] = stats
                rec["runs"].append({"gen": gen, "write": wr, "query": qr, "store": stats})
    return raw


def summarise(rec: dict[str, Any]) -> dict[str, Any]:
    if not rec["runs"]:
        return {"error": rec["error"] or "no runs"}
    runs = rec["runs"]
    out: dict[str, Any] = {}
    out["write_s"] = median([r["write"]["write_s"] for r in runs])
    out["write_s_runs"] = [r["write"]["write_s"] for r in runs]
    out["peak_rss_gen_write_mib"] = median([r["write"]["peak_rss_mib"] for r in runs])
    out["peak_rss_gen_only_mib"] = median([r["gen"]["peak_rss_mib"] for r in runs])
    out["peak_rss_added_by_write_mib"] = median(
        [r["write"]["peak_rss_mib"] - r["gen"]["peak_rss_mib"] for r in runs]
    )
    out.update(rec["store"])
    for label in BOX_SIDES:
        per_run = [statistics.median(r["query"][label]["times_s"]) for r in runs]
        out[f"{label}_median_ms"] = median(per_run) * 1e3
        out[f"{label}_median_ms_runs"] = [t * 1e3 for t in per_run]
        out[f"{label}_mean_rows"] = statistics.mean(runs[0]["query"][label]["counts"])
        out[f"{label}_mismatches"] = sum(r["query"][label]["mismatches"] for r in runs)
        details = [d for r in runs for d in r["query"][label]["mismatch_details"]]
        if details:
            out[f"{label}_mismatch_examples"] = details[:2]
    out["full_read_s"] = median([r["query"]["full"]["time_s"] for r in runs])
    out["full_read_mismatches"] = sum(r["query"]["full"]["mismatches"] for r in runs)
    out["query_process_peak_rss_mib"] = median([r["query"]["peak_rss_mib"] for r in runs])
    out["data_digest"] = runs[0]["write"]["digest"]
    if rec["io"]:
        q = rec["io"]["query"]
        out["io_q1"] = {
            "box": rec["io"]["box"],
            "rows": rec["io"]["rows"],
            "cell_files": q["cell_files"],
            "metadata_files": q["metadata_files"],
            "files": q["cell_files"] + q["metadata_files"],
            "cell_bytes": q["cell_bytes"],
            "metadata_bytes": q["metadata_bytes"],
            "store_file_bytes": q["store_file_bytes"],
            "rchar_bytes": q["rchar_bytes"],
            "cell_files_by_array": q["cell_files_by_array"],
            "open_files": rec["io"]["open"]["metadata_files"] + rec["io"]["open"]["cell_files"],
            "open_bytes": rec["io"]["open"]["store_file_bytes"],
        }
    if rec["error"]:
        out["error_after_some_runs"] = rec["error"]
    return out


RATIO_KEYS = [
    "write_s",
    "peak_rss_gen_write_mib",
    "peak_rss_added_by_write_mib",
    "store_bytes",
    "store_files",
    "q1_median_ms",
    "q10_median_ms",
    "full_read_s",
]
IO_RATIO_KEYS = ["files", "cell_files", "store_file_bytes", "rchar_bytes"]


def ratios(ours: dict[str, Any], ref: dict[str, Any]) -> dict[str, Any]:
    out = {k: ratio(ours.get(k), ref.get(k)) for k in RATIO_KEYS}
    if "io_q1" in ours and "io_q1" in ref:
        for k in IO_RATIO_KEYS:
            out[f"io_q1_{k}"] = ratio(ours["io_q1"].get(k), ref["io_q1"].get(k))
    return out


# --------------------------------------------------------------------------- report


TABLE_ROWS = [
    ("write (s)", lambda s: s.get("write_s"), ".3f", True),
    ("peak RSS gen+write (MiB)", lambda s: s.get("peak_rss_gen_write_mib"), ".0f", True),
    ("peak RSS gen only (MiB)", lambda s: s.get("peak_rss_gen_only_mib"), ".0f", False),
    ("RSS added by write (MiB)", lambda s: s.get("peak_rss_added_by_write_mib"), ".0f", True),
    ("store (MB)", lambda s: None if s.get("store_bytes") is None else s["store_bytes"] / 1e6, ".2f", True),
    ("store files", lambda s: s.get("store_files"), "d", True),
    ("bbox 1 % median (ms)", lambda s: s.get("q1_median_ms"), ".1f", True),
    ("bbox 10 % median (ms)", lambda s: s.get("q10_median_ms"), ".1f", True),
    ("full read (s)", lambda s: s.get("full_read_s"), ".3f", True),
    ("1 % box: cell files read", lambda s: s.get("io_q1", {}).get("cell_files"), "d", True),
    ("1 % box: metadata files read", lambda s: s.get("io_q1", {}).get("metadata_files"), "d", True),
    (
        "1 % box: store bytes read (KB)",
        lambda s: None if "io_q1" not in s else s["io_q1"]["store_file_bytes"] / 1e3,
        ".1f",
        True,
    ),
    (
        "1 % box: rchar (KB)",
        lambda s: None if not s.get("io_q1", {}).get("rchar_bytes") else s["io_q1"]["rchar_bytes"] / 1e3,
        ".1f",
        True,
    ),
    (
        "mismatches 1 % / 10 % / full",
        lambda s: (
            None
            if "q1_mismatches" not in s
            else f"{s['q1_mismatches']}/{s['q10_mismatches']}/{s['full_read_mismatches']}"
        ),
        "s",
        False,
    ),
]


def print_table(results: dict[str, dict[str, Any]], variants: list[str]) -> None:
    header = ["figure"]
    for v in variants:
        header += [f"ours {v}", f"ref {v}", "ratio"]
    rows = [header]
    for label, get, spec, with_ratio in TABLE_ROWS:
        row = [label]
        for v in variants:
            ours = results[v].get("ours", {})
            ref = results[v].get("reference", {})
            a, b = get(ours), get(ref)
            row += [fmt(a, spec), fmt(b, spec)]
            r = ratio(a, b) if with_ratio else None
            row.append(fmt(r, ".2f"))
        rows.append(row)
    print(_harness.format_rows(rows))


# --------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=None, help="number of points (default 1,000,000)")
    p.add_argument(
        "--runs",
        type=int,
        default=None,
        help="fresh-process repetitions per measurement (median is reported; default 3)",
    )
    p.add_argument("--quick", action="store_true", help="smoke run: 100,000 points, 1 run")
    p.add_argument("--boxes", type=int, default=20, help="boxes per size (1 %% and 10 %%)")
    p.add_argument("--seed", type=int, default=20240601, help="data seed")
    p.add_argument("--box-seed", type=int, default=7, help="query box seed")
    p.add_argument("--io-box", type=int, default=0, help="which 1 %% box the io count uses")
    p.add_argument(
        "--variants",
        default="none,zstd",
        help="comma-separated compression variants: any compression= name of ours (none, zstd, "
        "gzip, blosc, lz4, ...); the reference is measured for none and zstd only",
    )
    p.add_argument(
        "--reference-python",
        default=None,
        help="python of a venv holding zarr-vectors 0.9.2 (default: find or make .cache/reference-venv)",
    )
    p.add_argument("--no-reference", action="store_true", help="measure ours only")
    p.add_argument(
        "--profile",
        action="store_true",
        help="also cProfile our write and 1 %% queries in a child (top entries)",
    )
    p.add_argument("--profile-top", type=int, default=10)
    p.add_argument(
        "--no-snapshot",
        action="store_true",
        help="import our installed package live instead of a copy taken at start",
    )
    p.add_argument("--workdir", default=None, help="where stores go (default: a temp dir)")
    p.add_argument("--keep", action="store_true", help="keep the stores afterwards")
    p.add_argument("--json-out", default=None, help="also write all results to this file")
    args = p.parse_args(argv)
    if args.n is None:
        args.n = 100_000 if args.quick else 1_000_000
    if args.runs is None:
        args.runs = 1 if args.quick else 3
    args.variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    work = args.workdir or tempfile.mkdtemp(prefix="zv-bench-points-")
    os.makedirs(work, exist_ok=True)
    work = os.path.realpath(work)
    started = time.time()
    try:
        pythons = {"ours": sys.executable}
        source = _harness.describe_source(False) if args.no_snapshot else snapshot_ours(work)
        ours_ver = _harness.zv_version(sys.executable, work)
        if ours_ver is None or ours_ver == REFERENCE_VERSION:
            raise SystemExit(
                f"{sys.executable} imports zarr_vectors {ours_ver}; run this with the project's venv"
            )
        if not args.no_reference:
            pythons["reference"] = _harness.find_reference_python(args.reference_python, work, log)
        log(
            f"ours: {pythons['ours']} (zarr_vectors {ours_ver}; commit {source['commit']}, "
            f"{len(source['uncommitted_package_files'])} uncommitted package files"
            + (", snapshot copied" if source["snapshot"] else "")
            + ")"
        )
        if "reference" in pythons:
            log(f"reference: {pythons['reference']}")

        boxes = make_boxes(args.boxes, args.box_seed)
        boxes_file = os.path.join(work, "boxes.json")
        with open(boxes_file, "w") as fh:
            json.dump(boxes, fh)

        raw = measure(args, pythons, work, boxes_file)

        results: dict[str, dict[str, Any]] = {}
        lines = []
        for variant in args.variants:
            per = {impl: summarise(raw[(variant, impl)]) for impl in pythons}
            results[variant] = per
            obj: dict[str, Any] = {
                "workload": "points",
                "variant": variant,
                "n_points": args.n,
                "runs": args.runs,
                "boxes_per_size": args.boxes,
                "box_sides": BOX_SIDES,
                "chunk": 100,
                "bin": 25,
                "bounds": [[0, 0, 0], [1000, 1000, 1000]],
                "writers": {
                    "ours": f"zarr_vectors.write_points(compression={variant!r})",
                    "reference": (
                        "zarr_vectors.create + Dataset.add_points (zstd on every array)"
                        if variant == "zstd"
                        else "zarr_vectors.types.points.write_points(compressor=None)"
                    ),
                },
                "ours_source": source,
                "ours": per["ours"],
            }
            if "reference" in per:
                obj["reference"] = per["reference"]
                ok = "error" not in per["ours"] and "error" not in per["reference"]
                obj["ratio_ours_over_reference"] = ratios(per["ours"], per["reference"]) if ok else None
                if ok:
                    c_o = per["ours"].get("data_digest")
                    c_r = per["reference"].get("data_digest")
                    obj["same_input_data"] = c_o == c_r
            lines.append(obj)
            print(json.dumps(obj), flush=True)

        profile = None
        if args.profile:
            profile = {}
            for variant in args.variants:
                store = os.path.join(work, f"profile-ours-{variant}.zarr")
                if os.path.exists(store):
                    shutil.rmtree(store)
                log(f"profiling ours {variant}")
                try:
                    profile[variant] = run_child(
                        pythons["ours"],
                        "ours",
                        "profile",
                        cwd=work,
                        variant=variant,
                        store=store,
                        boxes=boxes_file,
                        io_label="q1",
                        top=args.profile_top,
                        n=args.n,
                        seed=args.seed,
                    )
                except ChildError as exc:
                    profile[variant] = {"error": str(exc)}

        print()
        print(
            f"points: {args.n:,} float32 points + 1 float32 attribute, chunk 100, bins 25; "
            f"median of {args.runs} fresh process(es); {args.boxes} boxes per size; "
            "ratio = ours / reference (< 1: ours faster / smaller)"
        )
        print_table(results, args.variants)
        total_bad = sum(
            results[v]["ours"].get(k, 0) or 0
            for v in args.variants
            for k in ("q1_mismatches", "q10_mismatches", "full_read_mismatches")
        )
        print(
            f"ours: commit {source['commit']}"
            + (
                f" + {len(source['uncommitted_package_files'])} uncommitted package files"
                if source["uncommitted_package_files"]
                else ""
            )
            + (" (snapshot taken at start)" if source["snapshot"] else " (live)")
        )
        print(f"our correctness: {total_bad} mismatching results against numpy brute force")
        if profile:
            for variant, prof in profile.items():
                print(f"\n== cProfile, ours, compression={variant} ==")
                if "error" in prof:
                    print(prof["error"])
                    continue
                print(
                    f"-- write ({prof['write_wall_s_under_profiler']:.3f} s under the profiler), "
                    f"top {args.profile_top} by tottime --"
                )
                print(prof["write_tottime"].rstrip())
                print(f"-- write, top {args.profile_top} by cumulative --")
                print(prof["write_cumtime"].rstrip())
                print(
                    f"-- {prof['query_boxes']} x 1 % box query "
                    f"({prof['query_wall_s_under_profiler'] * 1e3:.1f} ms total under the "
                    f"profiler), top {args.profile_top} by tottime --"
                )
                print(prof["query_tottime"].rstrip())
                print(f"-- 1 % box query, top {args.profile_top} by cumulative --")
                print(prof["query_cumtime"].rstrip())
        kept = args.keep or args.workdir is not None
        log(f"done in {time.time() - started:.0f} s" + (f"; stores kept in {work}" if kept else ""))
        if args.json_out:
            with open(args.json_out, "w") as fh:
                json.dump({"results": lines, "profile": profile}, fh, indent=1)
        return 0 if total_bad == 0 else 1
    finally:
        if not args.keep and args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
