#!/usr/bin/env python
"""Linked kinds at scale: ``workers=`` of the streaming writers (meshes raw and Draco, skeletons).

Run from the repository root with the project's venv::

    .venv/bin/python benchmarks/bench_kinds_scale.py                 # 10^6 faces / nodes, 2 runs
    .venv/bin/python benchmarks/bench_kinds_scale.py --quick         # 10^5, 1 run, no reference
    .venv/bin/python benchmarks/bench_kinds_scale.py --reference-python PATH   # reference venv python

Every write is a fresh child process of this script (``--child``): it makes the data (seeded,
not timed), streams it through ``zarr_vectors.create(target, kind, workers=W)`` in batches,
and reports wall and CPU seconds, peak RSS and the load average (``os.getloadavg``) before and
after. Runs alternate workers=1 and workers=2 (and the reference), so both see the same
machine; the ratio is of the medians. Each store is then checked against brute force: a few
sampled boxes (every vertex inside, as a sorted set of rows) and sampled objects (raw:
vertices and triangles exact; Draco: counts exact, each vertex within the quantization bound).

Figures are only meaningful on a quiet machine: with the kernel's autogroup scheduling
(``/proc/sys/kernel/sched_autogroup_enabled``), a busy machine splits its cores between
sessions, so a session's share does not grow with its workers.

Data: meshes are icospheres of 2,562 vertices and 5,120 faces, scaled 20-60 and placed
uniformly in [0, 1000)^3 (200 of them: 1.02 M faces); skeletons are trees of 2,000 nodes
(a chain with a branch every 25 nodes, random-walk positions), 500 of them (10^6 nodes).
Chunk 100, zstd, default shards. ``--targets disk,memory``: each kind is written to a local
folder and to a ``memory://`` store (no file system: what the encoding alone scales to). The reference (zarr-vectors 0.9.2) writes the same meshes joined into one
(``Dataset.add_mesh``, zstd), as in bench_meshes.py.
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
from typing import Any

import _harness
import numpy as np

HERE = _harness.HERE
REPO = HERE.parent
CHUNK, EXTENT, BITS = 100.0, 1000.0, 11
MESH_FACES = 5120
log = _harness.make_log("bench_kinds_scale")


# --------------------------------------------------------------------------- data (child side)


def icosphere4() -> tuple[np.ndarray, np.ndarray]:
    """A unit icosphere of 2,562 vertices and 5,120 faces (4 subdivisions), vectorised."""
    return icosphere(4)


def icosphere(times: int) -> tuple[np.ndarray, np.ndarray]:
    """A unit icosahedron subdivided ``times`` times (3: 642 vertices and 1,280 faces)."""
    t = (1 + 5**0.5) / 2
    v = np.array(
        [[-1, t, 0], [1, t, 0], [-1, -t, 0], [1, -t, 0], [0, -1, t], [0, 1, t], [0, -1, -t], [0, 1, -t]]
        + [[t, 0, -1], [t, 0, 1], [-t, 0, -1], [-t, 0, 1]],
        float,
    )
    f = np.array(
        [[0, 11, 5], [0, 5, 1], [0, 1, 7], [0, 7, 10], [0, 10, 11], [1, 5, 9], [5, 11, 4], [11, 10, 2]]
        + [[10, 7, 6], [7, 1, 8], [3, 9, 4], [3, 4, 2], [3, 2, 6], [3, 6, 8], [3, 8, 9], [4, 9, 5]]
        + [[2, 4, 11], [6, 2, 10], [8, 6, 7], [9, 8, 1]]
    )
    for _ in range(times):
        edges = np.sort(np.concatenate([f[:, [0, 1]], f[:, [1, 2]], f[:, [2, 0]]]), axis=1)
        uniq, inv = np.unique(edges, axis=0, return_inverse=True)
        mid = len(v) + inv.reshape(3, -1).T  # midpoints of (01, 12, 20) per face
        v = np.concatenate([v, (v[uniq[:, 0]] + v[uniq[:, 1]]) / 2])
        a, b, c = f.T
        ab, bc, ca = mid.T
        f = np.concatenate([np.stack(x, 1) for x in ([a, ab, ca], [b, bc, ab], [c, ca, bc], [ab, bc, ca])])
    return v / np.linalg.norm(v, axis=1, keepdims=True), f


def meshes(count: int, seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    v, f = icosphere4()
    out = []
    for _ in range(count):
        r = rng.uniform(20, 60)
        out.append(((v * r + rng.uniform(r, EXTENT - r, 3)).astype(np.float32), f))
    return out


def trees(count: int, size: int = 2000, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``count`` trees of ``size`` nodes: positions (count * size, 3) float32 and parents."""
    rng = np.random.default_rng(seed)
    par = np.tile(np.arange(-1, size - 1), count)
    at = np.arange(25, size, 25)
    par.reshape(count, size)[:, at] = rng.integers(0, at, (count, len(at)))
    par = np.where(par >= 0, par + np.repeat(np.arange(count) * size, size), -1)
    start = rng.uniform(100, EXTENT - 100, (count, 1, 3))
    walk = start + np.cumsum(rng.normal(0, 2, (count, size, 3)), axis=1)
    return np.clip(walk.reshape(-1, 3), 0, EXTENT - 1e-3).astype(np.float32), par


# --------------------------------------------------------------------------- child


def _usage() -> tuple[float, float]:
    """User and system CPU seconds of this process and of its finished children (the
    writer's worker processes are reaped when its sweep ends)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + kids.ru_utime, me.ru_stime + kids.ru_stime


def _rows(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    a = a.reshape(a.shape[0], int(np.prod(a.shape[1:])))
    return a[np.lexsort(a.T[::-1])] if len(a) else a


def _ours_write(job: dict[str, Any], path: str) -> dict[str, Any]:
    import zarr_vectors as zv

    kind, n, workers = job["kind"], job["n"], job["workers"]
    if job.get("target") == "memory":  # no file system: the encoding's own scaling
        path = f"memory://kinds-scale-{os.getpid()}-{time.time_ns()}"
    grid = dict(chunk_shape=CHUNK, bounds=([0] * 3, [EXTENT] * 3), compression="zstd")
    data: Any = meshes(n // MESH_FACES) if kind != "skeletons" else trees(n // 2000)
    load0 = os.getloadavg()
    (u0, s0), t0 = _usage(), time.perf_counter()
    if kind == "skeletons":
        pos, par = data
        per = 100 * 2000  # batches of 100 trees
        with zv.create(path, "skeletons", workers=workers, **grid) as w:
            for a in range(0, len(pos), per):
                w.append(pos[a : a + per], np.where(par[a : a + per] >= 0, par[a : a + per] - a, -1))
    else:
        extra = {"encoding": "draco", "quantization_bits": BITS} if kind == "meshes-draco" else {}
        with zv.create(path, "meshes", workers=workers, **grid, **extra) as w:
            for a in range(0, len(data), 50):
                w.append(data[a : a + 50], object_ids=np.arange(a, min(a + 50, len(data))) * 3 + 7)
    wall = time.perf_counter() - t0
    u1, s1 = _usage()
    out = {
        "write_s": wall,
        "write_cpu_s": u1 - u0 + s1 - s0,
        "load_before": load0,
        "load_after": os.getloadavg(),
    }
    out["peak_rss_mib"] = _harness.peak_rss_mib()
    out.update(_check(zv.open(path), kind, data))
    return out


def _check(ds: Any, kind: str, data: Any) -> dict[str, Any]:
    """Sampled boxes and objects against brute force; counts of those that differ."""
    rng = np.random.default_rng(1)
    if kind == "skeletons":
        pos = data[0]
        ids = np.repeat(np.arange(len(pos) // 2000), 2000)
    else:
        pos = np.concatenate([v for v, _ in data])
        ids = np.repeat(np.arange(len(data)) * 3 + 7, [len(v) for v, _ in data])
    boxes = bad_boxes = 0
    if kind != "meshes-draco":  # Draco moves vertices within the bound: boxes are checked exactly only raw
        for _ in range(5):
            lo = rng.uniform(0, EXTENT - 150, 3).astype(np.float32)
            hi = lo + np.float32(150)
            want = pos[np.all((pos >= lo) & (pos <= hi), axis=1)]
            got = ds.query(bbox=(lo, hi)).positions
            boxes += 1
            bad_boxes += int(not np.array_equal(_rows(np.asarray(got)), _rows(want)))
    objects = bad_objects = 0
    for oid in rng.choice(np.unique(ids), 5, replace=False).tolist():
        got = ds.objects([oid])
        objects += 1
        mine = pos[ids == oid]
        if kind == "skeletons":
            bad_objects += int(not np.array_equal(_rows(np.asarray(got.positions)), _rows(mine)))
            continue
        v, f = data[(oid - 7) // 3]
        gp, gf = np.asarray(got.positions, np.float64), np.asarray(got.faces)
        if kind == "meshes":
            same = np.array_equal(
                _rows(gp[gf].reshape(len(gf), 9)), _rows(v[f].astype(np.float64).reshape(len(f), 9))
            )
        else:  # counts exact; every decoded vertex near an input vertex (the chunk's quantization bound)
            bound = CHUNK * 3**0.5 / (2**BITS - 1)
            near = np.sqrt(((gp[:, None, :] - v[None, :, :].astype(np.float64)) ** 2).sum(-1)).min(axis=1)
            same = len(gp) == len(v) and len(gf) == len(f) and bool(near.max() <= bound)
        bad_objects += int(not same)
    return {
        "boxes_checked": boxes,
        "boxes_wrong": bad_boxes,
        "objects_checked": objects,
        "objects_wrong": bad_objects,
    }


def _reference_write(job: dict[str, Any], path: str) -> dict[str, Any]:
    import zarr_vectors as zv

    if getattr(zv, "__version__", None) != _harness.REFERENCE_VERSION:
        raise SystemExit(f"reference child imported zarr_vectors {getattr(zv, '__version__', '?')}")
    data = meshes(job["n"] // MESH_FACES)
    starts = np.cumsum([0] + [len(v) for v, _ in data])[:-1]
    verts = np.concatenate([v for v, _ in data])
    faces = np.concatenate([f + s for (_, f), s in zip(data, starts)])
    schema = zv.Schema(
        ndim=3,
        bounds=([0.0] * 3, [EXTENT] * 3),
        kind="mesh",
        position_dtype="float32",
        layout=zv.Layout(cell_size=(CHUNK,) * 3),
    )
    load0 = os.getloadavg()
    (u0, s0), t0 = _usage(), time.perf_counter()
    zv.create(path, schema=schema).add_mesh(verts, faces)
    wall = time.perf_counter() - t0
    u1, s1 = _usage()
    return {
        "write_s": wall,
        "write_cpu_s": u1 - u0 + s1 - s0,
        "load_before": load0,
        "load_after": os.getloadavg(),
        "peak_rss_mib": _harness.peak_rss_mib(),
    }


def child(job: dict[str, Any]) -> None:
    if job.get("ours_source"):
        sys.path[:0] = [job["ours_source"]]
    work = tempfile.mkdtemp(prefix="zv-kinds-scale-", dir=job.get("workdir"))
    try:
        path = os.path.join(work, "store")
        out = _reference_write(job, path) if job["impl"] == "reference" else _ours_write(job, path)
        print(json.dumps(out))
    finally:
        shutil.rmtree(work, ignore_errors=True)


# --------------------------------------------------------------------------- parent


def measure(
    kind: str, target: str, n: int, runs: int, ref: str | None, snap: Any, scratch: str, workdir: str | None
) -> int:
    """Alternating runs of workers=1, workers=2 (and the reference) on one kind and target;
    prints every run and a summary line; returns the checks that failed."""
    plans: list[tuple[str, str, int]] = [("ours", sys.executable, 1), ("ours", sys.executable, 2)]
    if ref and kind == "meshes":
        plans.append(("reference", ref, 0))
    got: dict[str, list[dict[str, Any]]] = {}
    wrong = 0
    for r in range(runs):
        for impl, python, workers in plans:
            job = {
                "impl": impl,
                "kind": kind,
                "n": n,
                "workers": workers,
                "workdir": workdir,
                "target": target,
            }
            job["ours_source"] = snap.ours_source if impl == "ours" else None
            out, _ = _harness.run_job(python, HERE / "bench_kinds_scale.py", job, cwd=scratch, timeout=3600)
            name = f"{impl}-w{workers}" if impl == "ours" else "reference-add_mesh"
            out.update({"kind": kind, "target": target, "impl": name, "run": r, "n": n})
            print(json.dumps(out), flush=True)
            log(f"{kind} {target} {name} run {r}: {out['write_s']:.2f} s, load {out['load_before'][0]:.1f}")
            wrong += out.get("boxes_wrong", 0) + out.get("objects_wrong", 0)
            got.setdefault(name, []).append(out)
    med = {k: statistics.median(o["write_s"] for o in v) for k, v in got.items()}
    cpu = {k: statistics.median(o["write_cpu_s"] for o in v) for k, v in got.items()}
    loads = [o["load_before"][0] for v in got.values() for o in v]
    unit = "faces" if kind.startswith("meshes") else "nodes"
    line = f"{kind} -> {target}: {n:,} {unit}; median write s (cpu s) "
    line += ", ".join(f"{k} {v:.2f} ({cpu[k]:.2f})" for k, v in med.items())
    line += f"; workers 2:1 speed-up {med['ours-w1'] / med['ours-w2']:.2f}x"
    if "reference-add_mesh" in med:
        line += f"; ours-w2 vs reference add_mesh {med['reference-add_mesh'] / med['ours-w2']:.2f}x faster"
        line += f" ({n / med['ours-w2'] / 1e6:.2f} vs {n / med['reference-add_mesh'] / 1e6:.2f} M faces/s)"
    line += f"; 1-min load during the runs {min(loads):.1f}-{max(loads):.1f}"
    print("# " + line, flush=True)
    return wrong


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--quick", action="store_true", help="10^5 faces / nodes, 1 run, no reference")
    p.add_argument("--runs", type=int, default=2)
    p.add_argument("--n", type=int, default=1_024_000, help="faces (meshes) and nodes (skeletons)")
    p.add_argument("--kinds", default="meshes,meshes-draco,skeletons")
    p.add_argument("--targets", default="disk,memory", help="disk (a local folder) and/or memory")
    p.add_argument("--reference-python", help="python of a venv with zarr-vectors 0.9.2")
    p.add_argument("--no-reference", action="store_true")
    p.add_argument("--workdir", help="where the stores go (default: the temporary folder)")
    args = p.parse_args()
    if args.child:
        child(json.loads(args.child))
        return 0
    n, runs = (102_400, 1) if args.quick else (args.n, args.runs)
    scratch = tempfile.mkdtemp(prefix="zv-kinds-scale-src-")
    snap = _harness.TaskChild(HERE / "bench_kinds_scale.py")
    snap.snapshot(
        scratch,
        {"zarr_vectors": REPO / "zarr_vectors", "zarr_vectors_draco": REPO / "codecs" / "zarr_vectors_draco"},
    )
    ref = None
    if not (args.quick or args.no_reference):
        ref = _harness.find_reference_python(args.reference_python, scratch, log)
    print(f"# commit {_harness.git_commit()}, {os.cpu_count()} cores, n={n}, runs={runs}")
    wrong = 0
    for kind in args.kinds.split(","):
        for target in args.targets.split(","):
            wrong += measure(
                kind, target, n, runs, ref if target == "disk" else None, snap, scratch, args.workdir
            )
    shutil.rmtree(scratch, ignore_errors=True)
    print(f"# checks against brute force: {wrong} wrong; {_harness.load_line()}")
    return 1 if wrong else 0


if __name__ == "__main__":
    raise SystemExit(main())
