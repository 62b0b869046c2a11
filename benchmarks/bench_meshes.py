#!/usr/bin/env python
"""Mesh benchmark: this project's zarr_vectors against the reference zarr-vectors 0.9.2.

Run from the repository root with the project's venv::

    .venv/bin/python benchmarks/bench_meshes.py            # full protocol (icospheres s6 and s7, 3 runs)
    .venv/bin/python benchmarks/bench_meshes.py --quick    # smoke run (s6 only, 1 run, 4 boxes)

Every measurement happens in a fresh child process (``benchmarks/_meshes_child.py``): ours
under this interpreter (a snapshot of the working tree's ``zarr_vectors`` and
``zarr_vectors_draco``), the reference under the reference venv's interpreter. Same mesh,
boxes and chunking for both, in the same run.

Ours: raw and Draco encodings, each with the other arrays uncompressed or zstd. Reference:
raw uncompressed (``types.meshes.write_mesh(compressor=None)``), raw zstd (public api),
and Draco (write only: 0.9.2 cannot read its Draco stores back). Output: one JSON object
per mesh and variant of ours on stdout, then tables and the issue's targets. See
benchmarks/README.md.
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
RADIUS, CENTRE = 499.0, 500.0
SIDE = 215.4  # a cube covering 1 % of [0, 1000]^3
CHILD = _harness.TaskChild(HERE / "_meshes_child.py")
run_child = CHILD.run
OURS_VARIANTS = ("raw-none", "raw-zstd", "draco-none", "draco-zstd")
REF_VARIANTS = ("raw-none", "raw-zstd", "draco-none")
PACKAGES = {
    "zarr_vectors": REPO / "zarr_vectors",
    "zarr_vectors_draco": REPO / "codecs" / "zarr_vectors_draco",
}
TARGETS = {"raw_write": 0.5, "raw_q1": 0.1, "draco_bytes": 0.2, "draco_q1": 0.2}


log = _harness.make_log("bench_meshes")


def snapshot_ours(work: str) -> dict[str, Any]:
    """Copy our library and its Draco codec package so every child imports the same code."""
    CHILD.snapshot(work, PACKAGES)
    return _harness.describe_source(snapshot=True)


def make_plan(n_boxes: int, seed: int) -> dict[str, Any]:
    """1 % cubes centred on points drawn uniformly on the sphere's surface, shifted (not
    shrunk) to stay inside the volume, so every box cuts the surface. Corners are
    float32-exact so that ``lo <= p <= hi`` means the same on both sides."""
    rng = np.random.default_rng(seed)
    u = rng.normal(size=(n_boxes, 3))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    centre = CENTRE + RADIUS * u
    lo = np.clip(centre - SIDE / 2, 0.0, EXTENT - SIDE).astype(np.float32)
    hi = (lo + np.float32(SIDE)).astype(np.float32)
    assert np.all((centre >= lo) & (centre <= hi)), "a box lost its surface point"
    boxes = [[[float(v) for v in lo[i]], [float(v) for v in hi[i]]] for i in range(n_boxes)]
    return {"boxes": {"q1": boxes}, "surface_points": centre.tolist()}


# --------------------------------------------------------------------------- measuring


Config = tuple[int, str, str]  # (subdivisions, impl, variant)


def configs(args: argparse.Namespace, pythons: dict[str, str]) -> list[tuple[str, str]]:
    out = [("ours", v) for v in args.variants]
    if "reference" in pythons:
        out += [("reference", v) for v in args.ref_variants]
    return out


def measure_one(
    args: argparse.Namespace,
    py: str,
    impl: str,
    variant: str,
    sub: int,
    work: str,
    plan_file: str,
    rec: dict[str, Any],
    tag: str,
) -> None:
    store = os.path.join(work, f"store-s{sub}-{impl}-{variant}.zarr")
    # delete the previous store first and sync, so the file system settles (during the gen
    # child) before the timed write creates as many files again
    if os.path.exists(store):
        shutil.rmtree(store)
    os.sync()
    common = {"variant": variant, "subdivisions": sub}
    log(f"{tag}: generate only")
    gen = run_child(py, impl, "gen", cwd=work, **common)
    log(f"{tag}: write")
    wr = run_child(py, impl, "write", cwd=work, store=store, **common)
    stats = store_stats(store)
    run: dict[str, Any] = {"gen": gen, "write": wr, "store": stats}
    if not (impl == "reference" and variant.startswith("draco")):  # 0.9.2 cannot read these back
        warm_cache(store)
        log(f"{tag}: queries ({wr['write_s']:.3f} s write)")
        run["query"] = run_child(py, impl, "query", cwd=work, store=store, boxes=plan_file, **common)
        if rec["io"] is None:
            rec["io"] = run_child(
                py, impl, "io", cwd=work, store=store, boxes=plan_file, io_index=args.io_box, **common
            )
    rec["runs"].append(run)


def measure(
    args: argparse.Namespace, pythons: dict[str, str], work: str, plan_file: str
) -> dict[Config, dict[str, Any]]:
    cfgs = configs(args, pythons)
    raw: dict[Config, dict[str, Any]] = {
        (s, i, v): {"runs": [], "error": None, "io": None} for s in args.subdivisions for i, v in cfgs
    }
    for run in range(args.runs):
        order = cfgs if run % 2 == 0 else list(reversed(cfgs))
        for sub in args.subdivisions:
            for impl, variant in order:
                rec = raw[(sub, impl, variant)]
                if rec["error"]:
                    continue
                tag = f"run {run + 1}/{args.runs} s{sub} {impl:9s} {variant:10s}"
                try:
                    measure_one(args, pythons[impl], impl, variant, sub, work, plan_file, rec, tag)
                except ChildError as exc:
                    log(f"FAILED: {exc}")
                    rec["error"] = str(exc)
    return raw


def _query_figures(runs: list[dict[str, Any]], impl: str, variant: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    labels = ["q1", "q1_touching"] if impl == "ours" else ["q1"]
    for label in labels:
        per_run = [statistics.median(r["query"][label]["times_s"]) for r in runs]
        out[f"{label}_median_ms"] = med(per_run) * 1e3
        out[f"{label}_median_ms_runs"] = [t * 1e3 for t in per_run]
        det = runs[0]["query"][label]["details"]
        for key in ("expected_vertices", "got_vertices", "expected_faces", "got_faces"):
            out[f"{label}_mean_{key}"] = statistics.mean(d[key] for d in det)
        bad = [d for r in runs for d in r["query"][label]["details"] if not d["ok"]]
        if impl == "ours":
            out[f"{label}_mismatches"] = len(bad)
            if bad:
                out[f"{label}_mismatch_examples"] = bad[:2]
        else:  # described, not judged (like the polylines benchmark)
            out[f"{label}_boxes_equal_to_brute_force"] = sum(d["ok"] for d in det)
            out[f"{label}_boxes"] = len(det)
            if bad:
                out[f"{label}_differences_example"] = bad[:1]
    if variant.startswith("draco"):
        out["q1_vertices_moved_across_box_by_quantization"] = runs[0]["query"]["q1"][
            "vertices_moved_across_box_by_quantization"
        ]
        out["full_read_max_error_over_bound"] = runs[0]["query"]["full"]["detail"].get("max_error_over_bound")
    out["full_read_s"] = med([r["query"]["full"]["time_s"] for r in runs])
    full_bad = [r["query"]["full"]["detail"] for r in runs if r["query"]["full"]["mismatches"]]
    if impl == "ours":
        out["full_read_mismatches"] = len(full_bad)
    else:
        out["full_read_equals_input"] = not full_bad
    if full_bad:
        out["full_read_difference_example"] = full_bad[0]
    out["query_process_peak_rss_mib"] = med([r["query"]["peak_rss_mib"] for r in runs])
    return out


def summarise(rec: dict[str, Any], impl: str, variant: str) -> dict[str, Any]:
    if not rec["runs"]:
        return {"error": rec["error"] or "no runs"}
    runs = rec["runs"]
    out: dict[str, Any] = {
        "write_s": med([r["write"]["write_s"] for r in runs]),
        "write_s_runs": [r["write"]["write_s"] for r in runs],
        "write_cpu_s": med([r["write"]["write_cpu_s"] for r in runs]),
        "write_sys_s": med([r["write"]["write_sys_s"] for r in runs]),
        "vertices": runs[0]["write"]["vertices"],
        "faces": runs[0]["write"]["faces"],
        "peak_rss_gen_write_mib": med([r["write"]["peak_rss_mib"] for r in runs]),
        "peak_rss_gen_only_mib": med([r["gen"]["peak_rss_mib"] for r in runs]),
        "peak_rss_added_by_write_mib": med(
            [r["write"]["peak_rss_mib"] - r["gen"]["peak_rss_mib"] for r in runs]
        ),
        "data_digest": runs[0]["write"]["digest"],
    }
    out.update(runs[-1]["store"])
    if "query" in runs[0]:
        out.update(_query_figures(runs, impl, variant))
    if rec["io"]:
        q = rec["io"]["query"]
        out["io_q1"] = {
            "box": rec["io"]["box"],
            "vertices": rec["io"]["vertices"],
            "faces": rec["io"]["faces"],
            "cell_files": q["cell_files"],
            "metadata_files": q["metadata_files"],
            "files": q["cell_files"] + q["metadata_files"],
            "cell_bytes": q["cell_bytes"],
            "metadata_bytes": q["metadata_bytes"],
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
    "full_read_s",
]


def ratios(ours: dict[str, Any], ref: dict[str, Any]) -> dict[str, Any]:
    out = {k: ratio(ours.get(k), ref.get(k)) for k in RATIO_KEYS}
    if "io_q1" in ours and "io_q1" in ref:
        for k in ("files", "cell_files", "store_file_bytes", "rchar_bytes"):
            out[f"io_q1_{k}"] = ratio(ours["io_q1"].get(k), ref["io_q1"].get(k))
    return out


def ref_raw_for(variant: str) -> str:
    """The reference store an ours variant is compared with: raw, same compression."""
    return "raw-" + variant.split("-")[1]


# --------------------------------------------------------------------------- report


def _io(key: str, scale: float | None = None):
    def get(s: dict[str, Any]) -> Any:
        v = s.get("io_q1", {}).get(key)
        return v if v is None or scale is None else v / scale

    return get


def _checks(s: dict[str, Any]) -> str | None:
    if "q1_mismatches" in s:
        return f"{s['q1_mismatches']}/{s['q1_touching_mismatches']}/{s['full_read_mismatches']}"
    if "q1_boxes" in s:
        full = "eq" if s["full_read_equals_input"] else "DIFF"
        return f"{s['q1_boxes_equal_to_brute_force']}/{s['q1_boxes']} eq, full {full}"
    return None


TABLE_ROWS = [
    ("write (s)", lambda s: s.get("write_s"), ".3f"),
    ("write CPU user+sys (s)", lambda s: s.get("write_cpu_s"), ".3f"),
    ("peak RSS gen+write (MiB)", lambda s: s.get("peak_rss_gen_write_mib"), ".0f"),
    ("RSS added by write (MiB)", lambda s: s.get("peak_rss_added_by_write_mib"), ".0f"),
    ("store (MB)", lambda s: None if s.get("store_bytes") is None else s["store_bytes"] / 1e6, ".3f"),
    ("store files", lambda s: s.get("store_files"), "d"),
    ("bbox 1 % median (ms)", lambda s: s.get("q1_median_ms"), ".1f"),
    ("bbox 1 % faces=touching (ms)", lambda s: s.get("q1_touching_median_ms"), ".1f"),
    ("full read (s)", lambda s: s.get("full_read_s"), ".3f"),
    (
        "1 % box: vertices / faces returned",
        lambda s: (
            None
            if s.get("q1_mean_got_vertices") is None
            else f"{s['q1_mean_got_vertices']:.0f} / {s['q1_mean_got_faces']:.0f}"
        ),
        "s",
    ),
    (
        "1 % box: brute force vertices / faces",
        lambda s: (
            None
            if s.get("q1_mean_expected_vertices") is None
            else f"{s['q1_mean_expected_vertices']:.0f} / {s['q1_mean_expected_faces']:.0f}"
        ),
        "s",
    ),
    ("1 % box: cell files read", _io("cell_files"), "d"),
    ("1 % box: metadata files read", _io("metadata_files"), "d"),
    ("1 % box: cell KB read", _io("cell_bytes", 1e3), ".1f"),
    ("1 % box: metadata KB read", _io("metadata_bytes", 1e3), ".1f"),
    ("checks: ours q1/touching/full bad", _checks, "s"),
]

RATIO_ROWS = [
    ("write", "write_s"),
    ("write CPU", "write_cpu_s"),
    ("peak RSS gen+write", "peak_rss_gen_write_mib"),
    ("store bytes", "store_bytes"),
    ("store files", "store_files"),
    ("bbox 1 %", "q1_median_ms"),
    ("full read", "full_read_s"),
    ("1 % box: files read", "io_q1_files"),
    ("1 % box: store bytes read", "io_q1_store_file_bytes"),
]


def print_tables(sub: int, summ: dict[Config, dict[str, Any]], lines: list[dict[str, Any]]) -> None:
    cols = [(f"{'ours' if i == 'ours' else 'ref'} {v}", s) for (sb, i, v), s in summ.items() if sb == sub]
    rows = [["figure"] + [name for name, _ in cols]]
    for label, get, spec in TABLE_ROWS:
        rows.append([label] + [fmt(get(s) if "error" not in s else None, spec) for _, s in cols])
    errors = [(name, s["error"]) for name, s in cols if "error" in s]
    print(_harness.format_rows(rows))
    for name, err in errors:
        print(f"{name}: FAILED: {err.splitlines()[-1] if err else ''}")
    mine = [ln for ln in lines if ln["subdivisions"] == sub and ln.get("ratio_ours_over_reference")]
    if not mine:
        return
    print(f"\nratios ours / reference (< 1: ours faster or smaller), s{sub}:")
    rows = [["figure"] + [f"{ln['variant']} / ref {ref_raw_for(ln['variant'])}" for ln in mine]]
    for label, key in RATIO_ROWS:
        rows.append([label] + [fmt(ln["ratio_ours_over_reference"].get(key), ".3f") for ln in mine])
    print(_harness.format_rows(rows))


def target_lines(sub: int, summ: dict[Config, dict[str, Any]]) -> list[str]:
    """The issue's targets, each as ``value (target) verdict`` from this run's figures."""

    def get(impl: str, variant: str, key: str) -> Any:
        return summ.get((sub, impl, variant), {}).get(key)

    def verdict(r: float | None, limit: float, extra_ok: bool = True) -> str:
        if r is None:
            return "n/a"
        return "met" if r <= limit and extra_ok else "MISSED"

    out = []
    for comp in ("none", "zstd"):
        raw, draco, ref = f"raw-{comp}", f"draco-{comp}", f"raw-{comp}"
        r = ratio(get("ours", raw, "write_s"), get("reference", ref, "write_s"))
        rc = ratio(get("ours", raw, "write_cpu_s"), get("reference", ref, "write_cpu_s"))
        if r is not None:
            out.append(
                f"s{sub} raw write, ours {raw} / ref {ref}: {fmt(r, '.3f')} wall, "
                f"{fmt(rc, '.3f')} CPU (target <= {TARGETS['raw_write']}): "
                f"{verdict(r, TARGETS['raw_write'])}"
            )
        exact = get("ours", raw, "q1_mismatches") == 0
        r = ratio(get("ours", raw, "q1_median_ms"), get("reference", ref, "q1_median_ms"))
        if r is not None:
            out.append(
                f"s{sub} 1 % bbox, ours {raw} / ref {ref}: {fmt(r, '.3f')} with "
                f"{get('ours', raw, 'q1_mismatches')} mismatching results "
                f"(target <= {TARGETS['raw_q1']}, identical faces): "
                f"{verdict(r, TARGETS['raw_q1'], exact)}"
            )
        exact = get("ours", draco, "q1_mismatches") == 0
        r = ratio(get("ours", draco, "q1_median_ms"), get("reference", ref, "q1_median_ms"))
        if r is not None:
            out.append(
                f"s{sub} 1 % bbox, ours {draco} / ref {ref}: {fmt(r, '.3f')} with "
                f"{get('ours', draco, 'q1_mismatches')} mismatching results "
                f"(target <= {TARGETS['draco_q1']}): "
                f"{verdict(r, TARGETS['draco_q1'], exact)}"
            )
        r = ratio(get("ours", draco, "store_bytes"), get("ours", raw, "store_bytes"))
        if r is not None:
            out.append(
                f"s{sub} store bytes, ours {draco} / ours {raw}: {fmt(r, '.3f')} "
                f"(target <= {TARGETS['draco_bytes']}{', judged on s7' if sub != 7 else ''}): "
                f"{verdict(r, TARGETS['draco_bytes']) if sub == 7 else 'info'}"
            )
        r = ratio(get("ours", draco, "store_bytes"), get("reference", "draco-none", "store_bytes"))
        rw = ratio(get("ours", draco, "write_s"), get("reference", "draco-none", "write_s"))
        if r is not None:
            out.append(
                f"s{sub} Draco vs the reference's Draco (write only there), "
                f"ours {draco} / ref draco-none: store bytes {fmt(r, '.3f')}, write {fmt(rw, '.3f')}"
            )
    return out


# --------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="smoke run: s6 only, 1 run, 4 boxes")
    p.add_argument("--subdivisions", default=None, help="icosphere subdivisions (default 6,7)")
    p.add_argument("--runs", type=int, default=None, help="fresh-process repetitions (default 3)")
    p.add_argument("--boxes", type=int, default=None, help="1 %% boxes (default 10)")
    p.add_argument("--plan-seed", type=int, default=11, help="box placement seed")
    p.add_argument("--io-box", type=int, default=0, help="which box the io count uses")
    p.add_argument(
        "--variants", default=",".join(OURS_VARIANTS), help="ours: (raw|draco)-(none|zstd), comma-separated"
    )
    p.add_argument(
        "--ref-variants", default=",".join(REF_VARIANTS), help="reference: raw-none, raw-zstd, draco-none"
    )
    p.add_argument("--reference-python", default=None)
    p.add_argument("--no-reference", action="store_true")
    p.add_argument("--profile", action="store_true", help="also cProfile our write and 1 %% queries")
    p.add_argument("--profile-top", type=int, default=10)
    p.add_argument("--no-snapshot", action="store_true")
    p.add_argument("--workdir", default=None)
    p.add_argument("--keep", action="store_true")
    p.add_argument("--json-out", default=None)
    args = p.parse_args(argv)
    args.subdivisions = [int(s) for s in (args.subdivisions or ("6" if args.quick else "6,7")).split(",")]
    args.runs = args.runs or (1 if args.quick else 3)
    args.boxes = args.boxes or (4 if args.quick else 10)
    args.variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    args.ref_variants = [v.strip() for v in args.ref_variants.split(",") if v.strip()]
    for v in args.variants:
        if v not in OURS_VARIANTS:
            p.error(f"unknown variant {v!r}; choose from {', '.join(OURS_VARIANTS)}")
    for v in args.ref_variants:
        if v not in REF_VARIANTS:
            p.error(f"unknown reference variant {v!r}; choose from {', '.join(REF_VARIANTS)}")
    return args


def result_lines(
    args: argparse.Namespace, summ: dict[Config, dict[str, Any]], source: dict[str, Any], plan: dict[str, Any]
) -> list[dict[str, Any]]:
    lines = []
    for sub in args.subdivisions:
        for variant in args.variants:
            ours = summ[(sub, "ours", variant)]
            enc, comp = variant.split("-")
            obj: dict[str, Any] = {
                "workload": "mesh",
                "mesh": f"icosphere(subdivisions={sub}) * 499 + 500, float32",
                "subdivisions": sub,
                "variant": variant,
                "vertices": ours.get("vertices"),
                "faces": ours.get("faces"),
                "runs": args.runs,
                "boxes": args.boxes,
                "box_side": SIDE,
                "box_placement": "centred on uniform surface points, shifted inside the volume",
                "chunk": 100,
                "bounds": [[0, 0, 0], [1000, 1000, 1000]],
                "writer": f"zarr_vectors.write_mesh(p, v, f, chunk_shape=100, encoding={enc!r}, "
                f"quantization_bits=11, compression_level=7, compression={comp!r})",
                "reader": "open(p).query(bbox=(lo, hi)) (faces='inside'); also faces='touching'; read()",
                "ours_source": source,
                "ours": ours,
            }
            ref = summ.get((sub, "reference", ref_raw_for(variant)))
            if ref is not None:
                obj["reference_variant"] = ref_raw_for(variant)
                obj["reference"] = ref
                ok = "error" not in ours and "error" not in ref
                obj["ratio_ours_over_reference"] = ratios(ours, ref) if ok else None
                if ok:
                    obj["same_input_data"] = ours.get("data_digest") == ref.get("data_digest")
            ref_d = summ.get((sub, "reference", "draco-none"))
            if enc == "draco" and ref_d is not None and "error" not in ref_d and "error" not in ours:
                obj["reference_draco_write_only"] = ref_d
                obj["ratio_ours_over_reference_draco"] = {
                    k: ratio(ours.get(k), ref_d.get(k))
                    for k in ("write_s", "write_cpu_s", "store_bytes", "store_files")
                }
            raw_ours = summ.get((sub, "ours", f"raw-{comp}"))
            if enc == "draco" and raw_ours is not None:
                obj["store_bytes_over_ours_raw_same_compression"] = ratio(
                    ours.get("store_bytes"), raw_ours.get("store_bytes")
                )
            if sub == args.subdivisions[0] and variant == args.variants[0]:
                obj["plan"] = plan["boxes"]
            lines.append(obj)
    return lines


def run_profiles(
    args: argparse.Namespace, pythons: dict[str, str], work: str, plan_file: str
) -> dict[str, Any]:
    profile: dict[str, Any] = {}
    sub = args.subdivisions[-1]
    for variant in args.variants:
        store = os.path.join(work, f"profile-s{sub}-{variant}.zarr")
        if os.path.exists(store):
            shutil.rmtree(store)
        log(f"profiling ours s{sub} {variant}")
        try:
            profile[variant] = run_child(
                pythons["ours"],
                "ours",
                "profile",
                cwd=work,
                variant=variant,
                subdivisions=sub,
                store=store,
                boxes=plan_file,
                top=args.profile_top,
            )
        except ChildError as exc:
            profile[variant] = {"error": str(exc)}
    return profile


def print_profiles(profile: dict[str, Any], top: int) -> None:
    for variant, prof in profile.items():
        print(f"\n== cProfile, ours {variant} ==")
        if "error" in prof:
            print(prof["error"])
            continue
        print(
            f"-- write ({prof['write_wall_s_under_profiler']:.3f} s under the profiler), "
            f"top {top} by tottime --"
        )
        print(prof["write_tottime"].rstrip())
        print(f"-- write, top {top} by cumulative --")
        print(prof["write_cumtime"].rstrip())
        print(
            f"-- {prof['query_boxes']} x 1 % box ({prof['query_wall_s_under_profiler'] * 1e3:.1f} ms total "
            f"under the profiler), top {top} by tottime --"
        )
        print(prof["query_tottime"].rstrip())
        print(f"-- 1 % box, top {top} by cumulative --")
        print(prof["query_cumtime"].rstrip())


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    work = os.path.realpath(args.workdir or tempfile.mkdtemp(prefix="zv-bench-meshes-"))
    os.makedirs(work, exist_ok=True)
    started = time.time()
    try:
        pythons = {"ours": sys.executable}
        source = _harness.describe_source(False) if args.no_snapshot else snapshot_ours(work)
        source["uncommitted_codec_files"] = _harness.uncommitted("codecs/zarr_vectors_draco")
        ours_ver = _harness.zv_version(sys.executable, work)
        if ours_ver is None or ours_ver == REFERENCE_VERSION:
            raise SystemExit(f"{sys.executable} imports zarr_vectors {ours_ver}; use the project's venv")
        if not args.no_reference:
            pythons["reference"] = _harness.find_reference_python(args.reference_python, work, log)
        log(
            f"ours: zarr_vectors {ours_ver}, commit {source['commit']}, "
            f"{len(source['uncommitted_package_files'])} uncommitted package files, "
            f"{len(source['uncommitted_codec_files'])} uncommitted codec files"
            + (", snapshot copied" if source["snapshot"] else "")
        )
        plan = make_plan(args.boxes, args.plan_seed)
        plan_file = os.path.join(work, "plan.json")
        with open(plan_file, "w") as fh:
            json.dump(plan, fh)

        raw = measure(args, pythons, work, plan_file)
        summ = {c: summarise(rec, c[1], c[2]) for c, rec in raw.items()}
        lines = result_lines(args, summ, source, plan)
        for obj in lines:
            print(json.dumps(obj), flush=True)
        profile = run_profiles(args, pythons, work, plan_file) if args.profile else None

        for sub in args.subdivisions:
            ours0 = summ[(sub, "ours", args.variants[0])]
            print(
                f"\nmesh: icosphere(subdivisions={sub}) * 499 + 500, float32 "
                f"({ours0.get('vertices', 0):,} vertices, {ours0.get('faces', 0):,} faces); chunk 100, "
                f"bounds [0,1000]^3; median of {args.runs} fresh process(es); {args.boxes} boxes of side "
                f"{SIDE} centred on the surface"
            )
            print_tables(sub, summ, lines)
        print(
            "\nchecks: ours = mismatching results against numpy brute force (1 % boxes / touching / "
            "full read; Draco: positions within quantization_bound, boxes exact on the decoded "
            "positions, faces exact); ref = boxes whose result equals brute force (described, not judged)"
        )
        print("\ntargets (issue 4), ratios from this run:")
        for sub in args.subdivisions:
            for line in target_lines(sub, summ):
                print("  " + line)
        total_bad = sum(
            s.get(k, 0) or 0
            for (sb, impl, v), s in summ.items()
            if impl == "ours"
            for k in ("q1_mismatches", "q1_touching_mismatches", "full_read_mismatches")
        )
        failed = [f"s{sb} {impl} {v}" for (sb, impl, v), s in summ.items() if "error" in s]
        print(
            f"ours: commit {source['commit']}"
            + (
                f" + {len(source['uncommitted_package_files'])} uncommitted package files"
                if source["uncommitted_package_files"]
                else ""
            )
            + (
                f" + {len(source['uncommitted_codec_files'])} uncommitted codec files"
                if source["uncommitted_codec_files"]
                else ""
            )
            + (" (snapshot taken at start)" if source["snapshot"] else " (live)")
        )
        print(
            f"our correctness: {total_bad} mismatching results against numpy brute force"
            + (f"; FAILED configurations: {', '.join(failed)}" if failed else "")
        )
        if profile:
            print_profiles(profile, args.profile_top)
        kept = args.keep or args.workdir is not None
        log(f"done in {time.time() - started:.0f} s" + (f"; stores kept in {work}" if kept else ""))
        if args.json_out:
            with open(args.json_out, "w") as fh:
                json.dump({"results": lines, "profile": profile}, fh, indent=1)
        ours_failed = any(impl == "ours" for (_, impl, _), s in summ.items() if "error" in s)
        return 0 if total_bad == 0 and not ours_failed else 1
    finally:
        if not args.keep and args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
