#!/usr/bin/env python
"""Writing point clouds of 10 M - 300 M points: streaming, one-shot, workers, append, reference.

Every measurement runs in a fresh child process (this same file, ``--child``), so its peak RSS
(``ru_maxrss`` read at the end of the child) is that of one job. The data are float32 points
uniform in [0, 1000)^3 with one float32 attribute, drawn in batches of 1 M rows from
``numpy.random.default_rng(seed + i)``: the writer children and the checker regenerate them batch
by batch, so nothing holds all the points except the one-shot writer (which must).

Measured (``--compression zstd`` by default; chunk 100 -> 1,000 chunks, bins 25):

1. streaming: ``zv.create(path, "points", ..., memory_limit=1 GiB)`` fed 1 M rows per
   ``append``; wall time of the writer (batch generation excluded) and peak RSS, per N;
2. one-shot: ``zv.write_points`` on the same data held in memory; ratio streaming / one-shot;
3. workers: ``zv.create(..., workers=1|2)`` with ``memory_limit=None`` (the code path of
   ``write_points``, which runs on the streaming writer) and with ``memory_limit=1 GiB`` (spilled);
4. append: ``zv.open(path, "r+").append(...)`` of 1 % more points to the streamed store, placed
   in a 1 % cube (``local``: 27 of the 1,000 chunks) and spread everywhere (``uniform``: every
   chunk is read back and rewritten); time and ratio to the write times;
5. reference 0.9.2 (``create`` + ``Dataset.add_points``, zstd) against our one-shot write at
   the same N, in its own venv (``ZV_REFERENCE_PYTHON`` or ``--reference-python``).

Each of our stores is checked after it is written (and again after the append): its vertex
count, and a few sampled boxes whose query results must equal numpy brute force over the
regenerated points (same rows, positions and attribute values after sorting).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import _harness
import numpy as np
from _harness import REFERENCE_VERSION

REPO = _harness.REPO
BATCH = 1_000_000
EXTENT = 1000.0
CHUNK = 100.0
BIN = 25.0
ATTR = "intensity"
APPEND_SEED_OFFSET = 1_000_000  # batches of appended points: rng(seed + 1_000_000 + i)
#: A "local" append puts its points in the cube [0, LOCAL_SIDE)^3: 1 % of the volume, 27 of the
#: 1,000 chunks (a new block of a pipeline, a new survey tile); "uniform" spreads them everywhere.
LOCAL_SIDE = 215.4
GIB = 1 << 30
#: bytes on disk per point, with margin: 12 (positions) + 4 (attribute), a store plus its spill
DISK_BYTES_PER_POINT = 40


def log(msg: str) -> None:
    sys.stderr.write(f"[bench_scale] {msg}\n")
    sys.stderr.flush()


# --------------------------------------------------------------------------- data


def batch(seed: int, i: int, rows: int) -> tuple[np.ndarray, np.ndarray]:
    """Batch ``i``: ``rows`` float32 points uniform in [0, 1000)^3 and a float32 attribute."""
    rng = np.random.default_rng(seed + i)
    pos = rng.random((rows, 3), dtype=np.float32) * np.float32(EXTENT)
    return pos, rng.random(rows, dtype=np.float32)


def batches(n: int, seed: int) -> list[tuple[int, int]]:
    """(index, rows) of the batches that make ``n`` points."""
    return [(i, min(BATCH, n - i * BATCH)) for i in range((n + BATCH - 1) // BATCH)]


def in_memory(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """All ``n`` points at once, filled batch by batch (no second copy)."""
    pos = np.empty((n, 3), np.float32)
    attr = np.empty(n, np.float32)
    for i, rows in batches(n, seed):
        pos[i * BATCH : i * BATCH + rows], attr[i * BATCH : i * BATCH + rows] = batch(seed, i, rows)
    return pos, attr


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


def cpu_s() -> float:
    """User + system CPU seconds of this process (all threads)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


class RssPoll:
    """Peak anonymous and file-backed RSS, sampled from /proc/self/status every 0.1 s.

    ``ru_maxrss`` counts pages of memory-mapped files too (the spill runs are read through
    ``np.load(mmap_mode="r")``); those are page cache the kernel can drop, so the anonymous
    part is the memory the job really needs."""

    def __init__(self) -> None:
        self.peak = {"RssAnon": 0, "RssFile": 0}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        with open("/proc/self/status") as f:
            for line in f:
                key = line.split(":", 1)[0]
                if key in self.peak:
                    self.peak[key] = max(self.peak[key], int(line.split()[1]))

    def _loop(self) -> None:
        while not self._stop.wait(0.1):
            self._sample()

    def stop(self) -> dict[str, float]:
        self._stop.set()
        self._thread.join()
        self._sample()
        return {
            "peak_anon_mib": self.peak["RssAnon"] / 1024.0,
            "peak_file_mib": self.peak["RssFile"] / 1024.0,
        }


# --------------------------------------------------------------------------- child tasks


def import_ours(source: str) -> Any:
    sys.path[:0] = [source, os.path.join(source, "codecs")]
    import zarr_vectors as zv

    if getattr(zv, "__version__", None) == REFERENCE_VERSION:
        raise SystemExit(f"ours imported the reference package ({zv.__file__})")
    return zv


def store_keywords(job: dict[str, Any]) -> dict[str, Any]:
    return {
        "chunk_shape": (CHUNK,) * 3,
        "bin_shape": (BIN,) * 3,
        "bounds": ([0.0] * 3, [EXTENT] * 3),
        "compression": job["compression"],
    }


def task_stream(zv: Any, job: dict[str, Any]) -> dict[str, Any]:
    """``zv.create`` fed batch by batch; generation time is measured apart and subtracted."""
    rss0 = peak_rss_mib()
    cpu0 = cpu_s()
    gen_s = 0.0
    t0 = time.perf_counter()
    w = zv.create(
        job["path"],
        "points",
        memory_limit=job["memory_limit"],
        workers=job.get("workers"),
        progress=False,
        **store_keywords(job),
    )
    for i, rows in batches(job["n"], job["seed"]):
        g = time.perf_counter()
        pos, attr = batch(job["seed"], i, rows)
        gen_s += time.perf_counter() - g
        w.append(pos, attributes={ATTR: attr})
    t_close = time.perf_counter()
    w.close()
    t1 = time.perf_counter()
    return {
        "write_s": t1 - t0 - gen_s,
        "close_s": t1 - t_close,
        "gen_s": gen_s,
        "cpu_s": cpu_s() - cpu0,
        "rss_after_import_mib": rss0,
        "peak_rss_mib": peak_rss_mib(),
    }


def task_oneshot(zv: Any, job: dict[str, Any]) -> dict[str, Any]:
    pos, attr = in_memory(job["n"], job["seed"])
    rss_data = peak_rss_mib()
    cpu0 = cpu_s()
    t0 = time.perf_counter()
    zv.write_points(job["path"], pos, attributes={ATTR: attr}, **store_keywords(job))
    t1 = time.perf_counter()
    return {
        "write_s": t1 - t0,
        "cpu_s": cpu_s() - cpu0,
        "rss_data_mib": rss_data,
        "peak_rss_mib": peak_rss_mib(),
    }


def appended(pos: np.ndarray, region: str) -> np.ndarray:
    """Appended points placed in their region (``pos`` uniform in the whole cube)."""
    return pos * np.float32(LOCAL_SIDE / EXTENT) if region == "local" else pos


def task_append(zv: Any, job: dict[str, Any]) -> dict[str, Any]:
    pos, attr = in_memory(job["n_append"], job["seed"] + APPEND_SEED_OFFSET)
    pos = appended(pos, job.get("append_region", "uniform"))
    rss_data = peak_rss_mib()
    t0 = time.perf_counter()
    ds = zv.open(job["path"], "r+")
    ds.append(pos, attributes={ATTR: attr}, progress=False)
    t1 = time.perf_counter()
    return {"append_s": t1 - t0, "rss_data_mib": rss_data, "peak_rss_mib": peak_rss_mib()}


def task_reference(job: dict[str, Any]) -> dict[str, Any]:
    import zarr_vectors as ref

    if getattr(ref, "__version__", None) != REFERENCE_VERSION:
        raise SystemExit(f"the reference python imported zarr_vectors {ref.__version__} from {ref.__file__}")
    pos, attr = in_memory(job["n"], job["seed"])
    rss_data = peak_rss_mib()
    schema = ref.Schema(
        ndim=3,
        bounds=([0.0] * 3, [EXTENT] * 3),
        kind="point_cloud",
        position_dtype="float32",
        layout=ref.Layout(cell_size=(CHUNK,) * 3, subcells=int(CHUNK // BIN)),
    )
    t0 = time.perf_counter()
    ds = ref.create(job["path"], schema=schema)
    ds.add_points(pos, attributes={ATTR: attr})
    t1 = time.perf_counter()
    return {"write_s": t1 - t0, "rss_data_mib": rss_data, "peak_rss_mib": peak_rss_mib()}


def sample_boxes(seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Three 1 % cubes (side 215.4), two of side 50, one thin slab; float32-exact corners."""
    rng = np.random.default_rng(seed)
    boxes = []
    for side in (215.4, 215.4, 215.4, 50.0, 50.0):
        lo = rng.uniform(0, EXTENT - side, 3)
        boxes.append((lo, lo + side))
    boxes.append((np.array([0.0, 0.0, 499.0]), np.array([EXTENT, EXTENT, 501.0])))
    return [(lo.astype(np.float32), hi.astype(np.float32)) for lo, hi in boxes]


def canonical(pos: np.ndarray, attr: np.ndarray) -> np.ndarray:
    rows = np.concatenate([pos.astype(np.float32), attr.astype(np.float32)[:, None]], axis=1)
    return rows[np.lexsort(rows.T[::-1])]


def task_check(zv: Any, job: dict[str, Any]) -> dict[str, Any]:
    """Vertex count and sampled boxes against brute force over the regenerated points."""
    ds = zv.open(job["path"])
    n_total = job["n"] + job.get("n_append", 0)
    boxes = sample_boxes(job["seed"] + 7)
    expected: list[list[np.ndarray]] = [[] for _ in boxes]
    sources = [(job["seed"], job["n"])]
    if job.get("n_append"):
        sources.append((job["seed"] + APPEND_SEED_OFFSET, job["n_append"]))
    for seed, n in sources:
        for i, rows in batches(n, seed):
            pos, attr = batch(seed, i, rows)
            if seed != job["seed"]:
                pos = appended(pos, job.get("append_region", "uniform"))
            for k, (lo, hi) in enumerate(boxes):
                m = np.all((pos >= lo) & (pos <= hi), axis=1)
                expected[k].append(canonical(pos[m], attr[m]))
    bad = []
    rows_checked = 0
    t0 = time.perf_counter()
    for k, (lo, hi) in enumerate(boxes):
        r = ds.query(bbox=(lo.tolist(), hi.tolist()))
        got = canonical(np.asarray(r.positions), np.asarray(r.attributes[ATTR]))
        want = canonical(np.concatenate(expected[k])[:, :3], np.concatenate(expected[k])[:, 3])
        rows_checked += len(want)
        if got.shape != want.shape or not np.array_equal(got, want):
            bad.append(f"box {k}: {len(got)} rows, brute force {len(want)}")
    count = int(ds.vertex_count())
    if count != n_total:
        bad.append(f"vertex_count {count}, expected {n_total}")
    return {
        "ok": not bad,
        "problems": bad,
        "boxes": len(boxes),
        "rows_checked": rows_checked,
        "query_s": time.perf_counter() - t0,
    }


def child_main(job: dict[str, Any]) -> None:
    if job["task"] == "reference":
        out = task_reference(job)
    else:
        zv = import_ours(job["source"])
        poll = RssPoll()
        out = {"stream": task_stream, "oneshot": task_oneshot, "append": task_append, "check": task_check}[
            job["task"]
        ](zv, job)
        out.update(poll.stop())
    print(json.dumps(out))


# --------------------------------------------------------------------------- parent


def run_child(python: str, job: dict[str, Any], cwd: str) -> dict[str, Any]:
    return _harness.run_job(python, Path(__file__).resolve(), job, cwd=cwd, tail=40)[0]


def rss(res: dict[str, Any]) -> str:
    """Peak RSS of a child, with its anonymous part (without mapped files) when polled."""
    anon = res.get("peak_anon_mib")
    return f"{res['peak_rss_mib']:.0f}" + ("" if anon is None else f" ({anon:.0f})")


def du_bytes(path: str) -> int:
    total = 0
    for root, _, files in os.walk(path):
        total += sum(os.path.getsize(os.path.join(root, f)) for f in files)
    return total


def parse_count(text: str) -> int:
    text = text.strip().upper().replace("_", "")
    mult = {"K": 10**3, "M": 10**6, "G": 10**9}.get(text[-1:], 1)
    return int(float(text[:-1] if mult > 1 else text) * mult)


def reference_python(explicit: str | None) -> str | None:
    for cand in (
        explicit,
        os.environ.get("ZV_REFERENCE_PYTHON"),
        str(REPO / ".cache/reference-venv/bin/python"),
    ):
        if cand and os.path.exists(cand):
            return cand
    return None


class Bench:
    def __init__(self, args: argparse.Namespace, work: str) -> None:
        self.args, self.work = args, work
        self.rows: list[tuple[str, ...]] = []
        self.results: list[dict[str, Any]] = []
        self.failures: list[str] = []

    def job(self, task: str, name: str, n: int, comp: str, **extra: Any) -> dict[str, Any]:
        return {
            "task": task,
            "path": os.path.join(self.work, name),
            "n": n,
            "seed": self.args.seed,
            "compression": comp,
            "source": str(REPO),
            **extra,
        }

    def ours(self, job: dict[str, Any]) -> dict[str, Any]:
        log(f"{job['task']} {os.path.basename(job['path'])} n={job['n']:,}")
        res = run_child(sys.executable, job, self.work)
        res["label"] = os.path.basename(job["path"])
        self.results.append({"job": {k: v for k, v in job.items() if k != "source"}, **res})
        return res

    def check(self, job: dict[str, Any]) -> str:
        res = self.ours({**job, "task": "check"})
        if not res["ok"]:
            self.failures.append(f"{res['label']}: {'; '.join(res['problems'])}")
            return "WRONG"
        return f"ok ({res['boxes']} boxes, {res['rows_checked']:,} rows)"

    def drop(self, job: dict[str, Any]) -> None:
        if not self.args.keep:
            shutil.rmtree(job["path"], ignore_errors=True)
            os.sync()

    def scale(self, n: int, comp: str) -> dict[str, float]:
        """Streaming write, append and one-shot write at ``n``; returns the times."""
        free = shutil.disk_usage(self.work).free
        if n * DISK_BYTES_PER_POINT > free:
            msg = (
                f"N={n:,}: skipped, needs ~{n * DISK_BYTES_PER_POINT / 1e9:.1f} GB, {free / 1e9:.1f} GB free"
            )
            log(msg)
            self.rows.append((f"{n / 1e6:g}M", comp, msg, "", "", "", ""))
            return {}
        out: dict[str, float] = {}
        sj = self.job("stream", f"stream-{comp}-{n}", n, comp, memory_limit=GIB)
        s = self.ours(sj)
        out["stream"] = s["write_s"]
        size = du_bytes(sj["path"])
        self.rows.append(
            (
                f"{n / 1e6:g}M",
                comp,
                "stream (memory_limit 1 GiB)",
                f"{s['write_s']:.1f}",
                f"{n / s['write_s'] / 1e6:.2f}",
                rss(s),
                f"{self.check(sj)}; store {size / 1e9:.2f} GB; close {s['close_s']:.1f} s",
            )
        )
        n_app = max(1, n // 100)
        if n > self.args.append_max:
            self.drop(sj)
            return out
        for region in self.args.append_region.split(","):
            if region != self.args.append_region.split(",")[0]:  # a fresh copy of the streamed store
                self.drop(sj)
                s = self.ours(sj)
            aj = {**sj, "task": "append", "n_append": n_app, "append_region": region}
            a = self.ours(aj)
            out[f"append_{region}"] = a["append_s"]
            self.rows.append(
                (
                    f"{n / 1e6:g}M",
                    comp,
                    f"append {n_app:,} (1 %), {region}",
                    f"{a['append_s']:.1f}",
                    f"{n_app / a['append_s'] / 1e6:.2f}",
                    rss(a),
                    f"{self.check({**aj, 'task': 'check'})}; {100 * a['append_s'] / s['write_s']:.1f} % of stream write",
                )
            )
        out["append"] = out[f"append_{self.args.append_region.split(',')[0]}"]
        self.drop(sj)
        if n <= self.args.oneshot_max:
            oj = self.job("oneshot", f"oneshot-{comp}-{n}", n, comp)
            o = self.ours(oj)
            out["oneshot"] = o["write_s"]
            self.rows.append(
                (
                    f"{n / 1e6:g}M",
                    comp,
                    "one-shot write_points",
                    f"{o['write_s']:.1f}",
                    f"{n / o['write_s'] / 1e6:.2f}",
                    rss(o),
                    f"{self.check(oj)}; data alone {o['rss_data_mib']:.0f} MiB; "
                    f"stream/one-shot {s['write_s'] / o['write_s']:.2f}x; "
                    f"append = {100 * a['append_s'] / o['write_s']:.1f} % of it",
                )
            )
            self.drop(oj)
        return out

    def workers(self, n: int, comp: str) -> None:
        """``workers=1`` and ``2`` alternated ``--workers-runs`` times; medians (the first run checked)."""
        for mode, limit in (("no limit", None), ("1 GiB", GIB)):
            runs: dict[int, list[dict[str, Any]]] = {1: [], 2: []}
            checks: dict[int, str] = {}
            for rep in range(self.args.workers_runs):
                for k in (1, 2) if rep % 2 == 0 else (2, 1):
                    j = self.job(
                        "stream", f"workers{k}-{comp}-{n}-{limit}", n, comp, memory_limit=limit, workers=k
                    )
                    runs[k].append(self.ours(j))
                    if rep == 0:
                        checks[k] = self.check(j)
                    self.drop(j)
            med = {k: float(np.median([r["write_s"] for r in runs[k]])) for k in runs}
            for k in (1, 2):
                r = runs[k][0]
                walls = ", ".join(f"{x['write_s']:.1f}" for x in runs[k])
                cpu = float(np.median([x.get("cpu_s", np.nan) / x["write_s"] for x in runs[k]]))
                speed = "" if k == 1 else f"; speed-up 2 vs 1 (medians): {med[1] / med[2]:.2f}x"
                self.rows.append(
                    (
                        f"{n / 1e6:g}M",
                        comp,
                        f"create workers={k}, memory_limit {mode}",
                        f"{med[k]:.1f}",
                        f"{n / med[k] / 1e6:.2f}",
                        rss(r),
                        f"{checks[k]}; runs {walls} s; cpu/wall {cpu:.2f}{speed}",
                    )
                )

    def reference(self, n: int, ours_s: float | None) -> None:
        py = reference_python(self.args.reference_python)
        if py is None:
            log("no reference python (set ZV_REFERENCE_PYTHON); reference skipped")
            return
        j = self.job("reference", f"reference-{n}", n, "zstd")
        log(f"reference n={n:,}")
        r = run_child(py, j, self.work)
        self.results.append({"job": {k: v for k, v in j.items() if k != "source"}, **r, "label": "reference"})
        ratio = f"; ours one-shot is {r['write_s'] / ours_s:.2f}x faster" if ours_s else ""
        self.rows.append(
            (
                f"{n / 1e6:g}M",
                "zstd",
                "reference 0.9.2 create + add_points",
                f"{r['write_s']:.1f}",
                f"{n / r['write_s'] / 1e6:.2f}",
                rss(r),
                f"data alone {r['rss_data_mib']:.0f} MiB{ratio}",
            )
        )
        self.drop(j)

    def table(self) -> str:
        head = ("N", "comp", "writer", "time s", "M pts/s", "peak RSS (anon) MiB", "check / notes")
        rows = [head, *self.rows]
        widths = [max(len(r[c]) for r in rows) for c in range(len(head) - 1)]
        lines = []
        for i, r in enumerate(rows):
            cells = [r[c].ljust(widths[c]) if c in (0, 1, 2) else r[c].rjust(widths[c]) for c in range(6)]
            lines.append("  ".join([*cells, r[6]]))
            if i == 0:
                lines.append("  ".join("-" * w for w in widths) + "  " + "-" * 13)
        return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--points", default="10M,100M", help="point counts for the streaming/append/one-shot rows")
    p.add_argument("--oneshot-max", type=parse_count, default=parse_count("100M"), help="largest one-shot N")
    p.add_argument(
        "--append-max", type=parse_count, default=parse_count("100M"), help="largest N appended to"
    )
    p.add_argument(
        "--workers-points", type=parse_count, default=parse_count("10M"), help="N of the workers rows"
    )
    p.add_argument(
        "--reference-points", type=parse_count, default=parse_count("10M"), help="N of the reference row"
    )
    p.add_argument("--compression", default="zstd", help="comma-separated, e.g. zstd,none")
    p.add_argument(
        "--append-region",
        default="local,uniform",
        help="where the appended 1 %% lie: 'local' (a 1 %% cube, 27 of 1,000 chunks), 'uniform' (every chunk)",
    )
    p.add_argument("--reference-python", default=None, help="default: $ZV_REFERENCE_PYTHON")
    p.add_argument("--no-reference", action="store_true")
    p.add_argument("--no-workers", action="store_true")
    p.add_argument("--workers-runs", type=int, default=3, help="alternating repetitions of the workers rows")
    p.add_argument("--quick", action="store_true", help="1 M points everywhere (smoke run)")
    p.add_argument("--seed", type=int, default=20261125)
    p.add_argument("--workdir", default=None, help="where the stores go (default: a temporary folder)")
    p.add_argument("--keep", action="store_true", help="keep the stores")
    p.add_argument("--json-out", default=None)
    args = p.parse_args()
    if args.child:
        child_main(json.loads(args.child))
        return 0
    if args.quick:
        args.points, args.workers_points, args.reference_points = "1M", 10**6, 10**6
    counts = [parse_count(c) for c in args.points.split(",") if c.strip()]
    comps = [c.strip() for c in args.compression.split(",") if c.strip()]
    work = args.workdir or tempfile.mkdtemp(prefix="zv-bench-scale-")
    os.makedirs(work, exist_ok=True)
    bench = Bench(args, work)
    commit = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    started = time.time()
    oneshot_at: dict[tuple[int, str], float] = {}
    for comp in comps:
        for n in counts:
            t = bench.scale(n, comp)
            if "oneshot" in t:
                oneshot_at[(n, comp)] = t["oneshot"]
        if not args.no_workers:
            bench.workers(args.workers_points, comp)
    if not args.no_reference:
        ours_s = oneshot_at.get((args.reference_points, "zstd"))
        if ours_s is None:
            o = bench.ours(
                bench.job("oneshot", f"oneshot-zstd-{args.reference_points}", args.reference_points, "zstd")
            )
            bench.drop(
                bench.job("oneshot", f"oneshot-zstd-{args.reference_points}", args.reference_points, "zstd")
            )
            ours_s = o["write_s"]
        bench.reference(args.reference_points, ours_s)
    print(
        f"scale: float32 points uniform in [0, 1000)^3 + 1 float32 attribute, batches of 1 M "
        f"(rng(seed + i)), chunk 100 (1,000 chunks), bins 25; one fresh process per row; "
        f"{_harness.load_line()}"
    )
    print(bench.table())
    print(f"ours: commit {commit.stdout.strip()}; wall {time.time() - started:.0f} s")
    if bench.failures:
        print("FAILURES:\n  " + "\n  ".join(bench.failures))
    else:
        print("every checked store equals numpy brute force on its sampled boxes and vertex count")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(bench.results, indent=1))
    if not args.keep and not args.workdir:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if bench.failures else 0


if __name__ == "__main__":
    sys.exit(main())
