#!/usr/bin/env python
"""Polylines benchmark: this project's zarr_vectors against the reference zarr-vectors 0.9.2.

Run from the repository root with the project's venv::

    .venv/bin/python benchmarks/bench_lines.py            # full protocol (10,000 walks, 3 runs)
    .venv/bin/python benchmarks/bench_lines.py --quick    # smoke run (1,000 walks, 1 run)

Every measurement happens in a fresh child process (``benchmarks/_lines_child.py``): ours
under this interpreter (a snapshot of the working tree's package), the reference under the
reference venv's interpreter. Same walks, boxes, ids and chunking for both, in the same run.

Ours is measured with ``compression="zstd"`` and ``"none"``; the reference with its public
api (``create`` + ``Dataset.add_polylines``, zstd on every array). Both ratios use that one
reference. Output: one JSON object per variant of ours on stdout, then a summary table.
See benchmarks/README.md.
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
from _harness import REFERENCE_VERSION, ChildError, fmt, ratio, store_stats, warm_cache
from _harness import median as med

HERE = _harness.HERE
REPO = HERE.parent
EXTENT = 1000.0
BOX_SIDES = {"q1": 215.4, "q10": 464.2}  # cubes covering 1 % and 10 % of [0, 1000]^3
CHILD = _harness.TaskChild(HERE / "_lines_child.py")
run_child = CHILD.run
REF_VARIANT = "zstd"


log = _harness.make_log("bench_lines")


def snapshot_ours(work: str) -> dict[str, Any]:
    """Copy our package so every child of this run imports the same code."""
    CHILD.snapshot(work, {"zarr_vectors": REPO / "zarr_vectors"})
    return _harness.describe_source(snapshot=True)


def make_plan(n_boxes: int, n_single: int, n_hundred: int, n_lines: int, seed: int) -> dict[str, Any]:
    """Query boxes (float32-exact corners, uniform inside the volume) and object id lists."""
    rng = np.random.default_rng(seed)
    boxes: dict[str, list] = {}
    for label, side in BOX_SIDES.items():
        lo = rng.uniform(0.0, EXTENT - side, size=(n_boxes, 3)).astype(np.float32)
        hi = (lo + np.float32(side)).astype(np.float32)
        boxes[label] = [[[float(v) for v in lo[i]], [float(v) for v in hi[i]]] for i in range(n_boxes)]
    k = min(100, n_lines)
    objects = {
        "obj1": [[int(rng.integers(n_lines))] for _ in range(n_single)],
        "obj100": [[int(v) for v in rng.choice(n_lines, size=k, replace=False)] for _ in range(n_hundred)],
    }
    return {"boxes": boxes, "objects": objects}


# --------------------------------------------------------------------------- measuring


def configs(args: argparse.Namespace, pythons: dict[str, str]) -> list[tuple[str, str]]:
    out = [("ours", v) for v in args.variants]
    if "reference" in pythons:
        out.append(("reference", REF_VARIANT))
    return out


def measure(
    args: argparse.Namespace, pythons: dict[str, str], work: str, plan_file: str
) -> dict[tuple[str, str], dict[str, Any]]:
    cfgs = configs(args, pythons)
    raw = {c: {"runs": [], "error": None, "io": None, "store": None} for c in cfgs}
    common = {"n": args.n, "seed": args.seed, "subcells": args.ref_subcells}
    for run in range(args.runs):
        order = cfgs if run % 2 == 0 else list(reversed(cfgs))
        for impl, variant in order:
            rec = raw[(impl, variant)]
            if rec["error"]:
                continue
            py = pythons[impl]
            store = os.path.join(work, f"store-{impl}-{variant}.zarr")
            tag = f"run {run + 1}/{args.runs} {impl:9s} {variant:4s}"
            try:
                # delete the previous store first and sync, so the file system has settled
                # (during the gen child) before the timed write creates as many files again
                if os.path.exists(store):
                    shutil.rmtree(store)
                os.sync()
                log(f"{tag}: generate only")
                gen = run_child(py, impl, "gen", cwd=work, variant=variant, **common)
                log(f"{tag}: write")
                wr = run_child(py, impl, "write", cwd=work, variant=variant, store=store, **common)
                stats = store_stats(store)
                warm_cache(store)
                log(f"{tag}: queries ({wr['write_s']:.3f} s write)")
                qr = run_child(
                    py, impl, "query", cwd=work, variant=variant, store=store, boxes=plan_file, **common
                )
                if rec["io"] is None:
                    rec["io"] = run_child(
                        py,
                        impl,
                        "io",
                        cwd=work,
                        variant=variant,
                        store=store,
                        boxes=plan_file,
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


def summarise(rec: dict[str, Any], impl: str) -> dict[str, Any]:
    if not rec["runs"]:
        return {"error": rec["error"] or "no runs"}
    runs = rec["runs"]
    out: dict[str, Any] = {}
    out["write_s"] = med([r["write"]["write_s"] for r in runs])
    out["write_s_runs"] = [r["write"]["write_s"] for r in runs]
    out["write_cpu_s"] = med([r["write"].get("write_cpu_s") for r in runs])
    out["write_sys_s"] = med([r["write"].get("write_sys_s") for r in runs])
    out["vertices"] = runs[0]["write"]["vertices"]
    out["peak_rss_gen_write_mib"] = med([r["write"]["peak_rss_mib"] for r in runs])
    out["peak_rss_gen_only_mib"] = med([r["gen"]["peak_rss_mib"] for r in runs])
    out["peak_rss_added_by_write_mib"] = med(
        [r["write"]["peak_rss_mib"] - r["gen"]["peak_rss_mib"] for r in runs]
    )
    out.update(rec["store"])
    for label in BOX_SIDES:
        per_run = [statistics.median(r["query"][label]["times_s"]) for r in runs]
        out[f"{label}_median_ms"] = med(per_run) * 1e3
        out[f"{label}_median_ms_runs"] = [t * 1e3 for t in per_run]
        det = runs[0]["query"][label]["details"]
        out[f"{label}_mean_expected_rows"] = statistics.mean(d["expected_rows"] for d in det)
        out[f"{label}_mean_rows_returned"] = statistics.mean(d["got_rows"] for d in det)
        out[f"{label}_mean_expected_pieces"] = statistics.mean(d["expected_pieces"] for d in det)
        if impl == "ours":
            out[f"{label}_mean_pieces_returned"] = statistics.mean(d["got_pieces"] for d in det)
            out[f"{label}_mismatches"] = sum(r["query"][label]["mismatches"] for r in runs)
            bad = [d for r in runs for d in r["query"][label]["details"] if not d["ok"]]
            if bad:
                out[f"{label}_mismatch_examples"] = bad[:2]
            nid = [statistics.median(r["query"][label]["noids_times_s"]) for r in runs]
            out[f"{label}_noids_median_ms"] = med(nid) * 1e3
            out[f"{label}_noids_mismatches"] = sum(r["query"][label]["noids_mismatches"] for r in runs)
            cells = [statistics.median(r["query"][label]["cells_only_times_s"]) for r in runs]
            out[f"{label}_cells_only_median_ms"] = med(cells) * 1e3
            out[f"{label}_over_cells_only"] = out[f"{label}_median_ms"] / out[f"{label}_cells_only_median_ms"]
        else:
            out[f"{label}_mean_lines_returned"] = statistics.mean(d["got_lines"] for d in det)
            out[f"{label}_mean_lines_with_vertex_inside"] = statistics.mean(
                d["lines_with_vertex_inside"] for d in det
            )
            out[f"{label}_rows_returned_over_brute_force"] = sum(d["got_rows"] for d in det) / max(
                1, sum(d["expected_rows"] for d in det)
            )
            out[f"{label}_client_filter_equals_brute_force"] = sum(
                bool(d["client_filter_equals_brute_force"]) for d in det
            )
            out[f"{label}_exact"] = False
    for label in ("obj1", "obj100"):
        per_run = [statistics.median(r["query"][label]["times_s"]) for r in runs]
        out[f"{label}_median_ms"] = med(per_run) * 1e3
        out[f"{label}_median_ms_runs"] = [t * 1e3 for t in per_run]
        out[f"{label}_mismatches"] = sum(r["query"][label]["mismatches"] for r in runs)
        ex = [d for r in runs for d in r["query"][label]["details"]]
        if ex:
            out[f"{label}_mismatch_examples"] = ex[:2]
    out["full_read_s"] = med([r["query"]["full"]["time_s"] for r in runs])
    out["full_read_mismatches"] = sum(r["query"]["full"]["mismatches"] for r in runs)
    if out["full_read_mismatches"]:
        out["full_read_mismatch_examples"] = [d for r in runs for d in r["query"]["full"]["details"]][:2]
    out["query_process_peak_rss_mib"] = med([r["query"]["peak_rss_mib"] for r in runs])
    out["data_digest"] = runs[0]["write"]["digest"]
    if rec["io"]:
        q = rec["io"]["query"]
        out["io_q1"] = {
            "box": rec["io"]["box"],
            "rows": rec["io"]["rows"],
            "cell_files": q["cell_files"],
            "metadata_files": q["metadata_files"],
            "files": q["cell_files"] + q["metadata_files"],
            "store_file_bytes": q["store_file_bytes"],
            "rchar_bytes": q["rchar_bytes"],
            "cell_files_by_array": q["cell_files_by_array"],
        }
    if rec["error"]:
        out["error_after_some_runs"] = rec["error"]
    return out


RATIO_KEYS = [
    "write_s",
    "write_cpu_s",
    "peak_rss_gen_write_mib",
    "peak_rss_added_by_write_mib",
    "store_bytes",
    "store_files",
    "q1_median_ms",
    "q10_median_ms",
    "obj1_median_ms",
    "obj100_median_ms",
    "full_read_s",
]


def ratios(ours: dict[str, Any], ref: dict[str, Any]) -> dict[str, Any]:
    out = {k: ratio(ours.get(k), ref.get(k)) for k in RATIO_KEYS}
    out["q1_noids_vs_ref_q1"] = ratio(ours.get("q1_noids_median_ms"), ref.get("q1_median_ms"))
    out["q10_noids_vs_ref_q10"] = ratio(ours.get("q10_noids_median_ms"), ref.get("q10_median_ms"))
    if "io_q1" in ours and "io_q1" in ref:
        for k in ("files", "cell_files", "store_file_bytes", "rchar_bytes"):
            out[f"io_q1_{k}"] = ratio(ours["io_q1"].get(k), ref["io_q1"].get(k))
    return out


# --------------------------------------------------------------------------- report


def _mb(key: str):
    return lambda s: None if s.get(key) is None else s[key] / 1e6


def _kb_io(key: str):
    return lambda s: None if not s.get("io_q1", {}).get(key) else s["io_q1"][key] / 1e3


def _exact(s: dict[str, Any]) -> str | None:
    if "q1_mismatches" in s:
        return (
            f"{s['q1_mismatches']}/{s['q10_mismatches']}/{s['obj1_mismatches']}/"
            f"{s['obj100_mismatches']}/{s['full_read_mismatches']}"
        )
    if "obj1_mismatches" in s:
        return f"n.a./n.a./{s['obj1_mismatches']}/{s['obj100_mismatches']}/{s['full_read_mismatches']}"
    return None


TABLE_ROWS = [
    ("write (s)", lambda s: s.get("write_s"), ".3f", True),
    ("write CPU user+sys (s)", lambda s: s.get("write_cpu_s"), ".3f", True),
    ("peak RSS gen+write (MiB)", lambda s: s.get("peak_rss_gen_write_mib"), ".0f", True),
    ("RSS added by write (MiB)", lambda s: s.get("peak_rss_added_by_write_mib"), ".0f", True),
    ("store (MB)", _mb("store_bytes"), ".2f", True),
    ("store files", lambda s: s.get("store_files"), "d", True),
    ("bbox 1 % median (ms)", lambda s: s.get("q1_median_ms"), ".1f", True),
    ("bbox 1 %, no object ids (ms)", lambda s: s.get("q1_noids_median_ms"), ".1f", False),
    ("bbox 1 %: its cells alone (ms)", lambda s: s.get("q1_cells_only_median_ms"), ".1f", False),
    ("bbox 1 % / its cells alone", lambda s: s.get("q1_over_cells_only"), ".2f", False),
    ("bbox 10 % median (ms)", lambda s: s.get("q10_median_ms"), ".1f", True),
    ("bbox 10 %, no object ids (ms)", lambda s: s.get("q10_noids_median_ms"), ".1f", False),
    ("1 object by id (ms)", lambda s: s.get("obj1_median_ms"), ".2f", True),
    ("100 objects by id (ms)", lambda s: s.get("obj100_median_ms"), ".1f", True),
    ("full read (s)", lambda s: s.get("full_read_s"), ".3f", True),
    ("1 % box: rows returned (mean)", lambda s: s.get("q1_mean_rows_returned"), ".0f", False),
    ("1 % box: rows in box, brute force", lambda s: s.get("q1_mean_expected_rows"), ".0f", False),
    ("10 % box: rows returned (mean)", lambda s: s.get("q10_mean_rows_returned"), ".0f", False),
    ("10 % box: rows in box, brute force", lambda s: s.get("q10_mean_expected_rows"), ".0f", False),
    ("1 % box: files read (cells+meta)", lambda s: s.get("io_q1", {}).get("files"), "d", True),
    ("1 % box: store bytes read (KB)", _kb_io("store_file_bytes"), ".0f", True),
    ("mismatch q1/q10/obj1/obj100/full", _exact, "s", False),
]


def print_table(cols: list[tuple[str, dict[str, Any]]], ref: dict[str, Any] | None) -> None:
    header = ["figure"] + [name for name, _ in cols]
    if ref is not None:
        header += [f"{name} / ref" for name, _ in cols if name != "ref zstd"]
    rows = [header]
    for label, get, spec, with_ratio in TABLE_ROWS:
        row = [label] + [fmt(get(s), spec) for _, s in cols]
        if ref is not None:
            for name, s in cols:
                if name == "ref zstd":
                    continue
                r = ratio(get(s), get(ref)) if with_ratio else None
                row.append(fmt(r, ".3f" if r is not None and r < 0.1 else ".2f"))
        rows.append(row)
    print(_harness.format_rows(rows))


# --------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=None, help="number of walks (default 10,000)")
    p.add_argument("--runs", type=int, default=None, help="fresh-process repetitions (default 3)")
    p.add_argument("--quick", action="store_true", help="smoke run: 1,000 walks, 1 run, 4 boxes")
    p.add_argument("--boxes", type=int, default=None, help="boxes per size (default 10)")
    p.add_argument("--single-ids", type=int, default=10, help="one-id object reads per run")
    p.add_argument("--hundred-ids", type=int, default=5, help="100-id object reads per run")
    p.add_argument("--seed", type=int, default=20240602, help="data seed")
    p.add_argument("--plan-seed", type=int, default=11, help="boxes and ids seed")
    p.add_argument("--io-box", type=int, default=0, help="which 1 %% box the io count uses")
    p.add_argument("--variants", default="zstd,none", help="our compression variants")
    p.add_argument(
        "--ref-subcells", type=int, default=4, help="reference Layout(subcells=...) (its default, 4)"
    )
    p.add_argument("--reference-python", default=None)
    p.add_argument("--no-reference", action="store_true")
    p.add_argument(
        "--profile",
        action="store_true",
        help="also cProfile our write, 1 %% queries and 100-id reads (each variant)",
    )
    p.add_argument("--profile-top", type=int, default=10)
    p.add_argument("--no-snapshot", action="store_true")
    p.add_argument("--workdir", default=None)
    p.add_argument("--keep", action="store_true")
    p.add_argument("--json-out", default=None)
    args = p.parse_args(argv)
    if args.n is None:
        args.n = 1_000 if args.quick else 10_000
    if args.runs is None:
        args.runs = 1 if args.quick else 3
    if args.boxes is None:
        args.boxes = 4 if args.quick else 10
    args.variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    for v in args.variants:
        if v not in ("none", "zstd"):
            p.error(f"unknown variant {v!r}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    work = os.path.realpath(args.workdir or tempfile.mkdtemp(prefix="zv-bench-lines-"))
    os.makedirs(work, exist_ok=True)
    started = time.time()
    try:
        pythons = {"ours": sys.executable}
        source = _harness.describe_source(False) if args.no_snapshot else snapshot_ours(work)
        ours_ver = _harness.zv_version(sys.executable, work)
        if ours_ver is None or ours_ver == REFERENCE_VERSION:
            raise SystemExit(f"{sys.executable} imports zarr_vectors {ours_ver}; use the project's venv")
        if not args.no_reference:
            pythons["reference"] = _harness.find_reference_python(args.reference_python, work, log)
        log(
            f"ours: zarr_vectors {ours_ver}, commit {source['commit']}, "
            f"{len(source['uncommitted_package_files'])} uncommitted package files"
            + (", snapshot copied" if source["snapshot"] else "")
        )
        if "reference" in pythons:
            log(f"reference: {pythons['reference']}")

        plan = make_plan(args.boxes, args.single_ids, args.hundred_ids, args.n, args.plan_seed)
        plan_file = os.path.join(work, "plan.json")
        with open(plan_file, "w") as fh:
            json.dump(plan, fh)

        raw = measure(args, pythons, work, plan_file)
        summ = {c: summarise(rec, c[0]) for c, rec in raw.items()}
        ref = summ.get(("reference", REF_VARIANT))

        lines = []
        for variant in args.variants:
            ours = summ[("ours", variant)]
            obj: dict[str, Any] = {
                "workload": "polylines",
                "variant": variant,
                "n_lines": args.n,
                "vertices": ours.get("vertices"),
                "runs": args.runs,
                "boxes_per_size": args.boxes,
                "box_sides": BOX_SIDES,
                "chunk": 100,
                "bounds": [[0, 0, 0], [1000, 1000, 1000]],
                "writers": {
                    "ours": f"zarr_vectors.write_lines((positions, offsets), chunk_shape=100, "
                    f"kind='polyline', compression={variant!r})",
                    "reference": "zarr_vectors.create(Schema(kind='polyline', Layout(cell_size=100, "
                    f"subcells={args.ref_subcells}))) + Dataset.add_polylines "
                    "(zstd on every array)",
                },
                "readers": {
                    "ours": "open(p).query(bbox=...) (pieces cut at the box), .objects(ids), .read()",
                    "reference": "open(p).select(bbox=... | objects=...).read() (bbox: whole polylines)",
                },
                "ours_source": source,
                "ours": ours,
            }
            if ref is not None:
                obj["reference"] = ref
                ok = "error" not in ours and "error" not in ref
                obj["ratio_ours_over_reference"] = ratios(ours, ref) if ok else None
                if ok:
                    obj["same_input_data"] = ours.get("data_digest") == ref.get("data_digest")
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
                        boxes=plan_file,
                        io_label="q1",
                        top=args.profile_top,
                        n=args.n,
                        seed=args.seed,
                    )
                except ChildError as exc:
                    profile[variant] = {"error": str(exc)}

        print()
        nv = summ[("ours", args.variants[0])].get("vertices")
        print(
            f"polylines: {args.n:,} random walks ({nv:,} vertices; 50-200 vertices, step sigma 10) "
            f"in [0,1000]^3, chunk 100; median of {args.runs} fresh process(es); {args.boxes} boxes "
            "per size; ratio = ours / reference zstd (< 1: ours faster / smaller)"
        )
        cols = [(f"ours {v}", summ[("ours", v)]) for v in args.variants]
        if ref is not None:
            cols.append(("ref zstd", ref))
        print_table(cols, ref)
        print(
            "ours: pieces cut at the box, exact; reference: whole polylines touching the box's "
            "chunks (not exact; rows counted, not judged)"
        )
        total_bad = sum(
            summ[("ours", v)].get(k, 0) or 0
            for v in args.variants
            for k in (
                "q1_mismatches",
                "q10_mismatches",
                "q1_noids_mismatches",
                "q10_noids_mismatches",
                "obj1_mismatches",
                "obj100_mismatches",
                "full_read_mismatches",
            )
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
        if ref is not None and "error" not in ref:
            for label in BOX_SIDES:
                print(
                    f"reference {label}: returned {ref[f'{label}_rows_returned_over_brute_force']:.1f}x the "
                    f"in-box rows ({ref[f'{label}_mean_lines_returned']:.0f} whole lines vs "
                    f"{ref[f'{label}_mean_lines_with_vertex_inside']:.0f} with a vertex inside); "
                    f"filtered to the box it equals brute force in "
                    f"{ref[f'{label}_client_filter_equals_brute_force']}/{args.boxes} boxes"
                )
            print(
                f"reference object reads: {ref['obj1_mismatches']} + {ref['obj100_mismatches']} "
                f"mismatches, full read {ref['full_read_mismatches']}"
            )
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
                    f"({prof['query_wall_s_under_profiler'] * 1e3:.1f} ms total under the profiler), "
                    f"top {args.profile_top} by tottime --"
                )
                print(prof["query_tottime"].rstrip())
                print(f"-- 1 % box query, top {args.profile_top} by cumulative --")
                print(prof["query_cumtime"].rstrip())
                print(
                    f"-- {prof['objects_reads']} x 100-id object read "
                    f"({prof['objects_wall_s_under_profiler'] * 1e3:.1f} ms total under the "
                    f"profiler), top {args.profile_top} by tottime --"
                )
                print(prof["objects_tottime"].rstrip())
                print(f"-- 100-id object read, top {args.profile_top} by cumulative --")
                print(prof["objects_cumtime"].rstrip())
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
