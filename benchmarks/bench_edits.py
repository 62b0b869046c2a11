#!/usr/bin/env python
"""Edits of a store of many meshes against writing it: replace, delete, append, level updates.

Run from the repository root with the project's venv::

    .venv/bin/python benchmarks/bench_edits.py               # 10,000 meshes, 2 runs
    .venv/bin/python benchmarks/bench_edits.py --quick       # 1,000 meshes, 1 run

The base store holds ``--meshes`` icospheres of 642 vertices and 1,280 faces (scaled 5-15,
placed uniformly in [0, 1000)^3, ids ``3 i + 7``), streamed with ``create(..., "meshes")``,
chunk 100, zstd, default shards; then a pyramid ``[2, 2]`` is built. Timed, each on a fresh
copy of the base store (copies not timed):

- ``write``: the streamed write of the base store (level 0 only);
- ``pyramid``: ``build_pyramid([2, 2])`` on it (the full build an update is compared with);
- ``replace10``, ``delete10``, ``append1pct``: the edit with ``pyramid="stale"`` (level 0 only);
- ``..._update``: the same edit with ``pyramid="update"`` (the default), the edit and its
  level update in one commit; the level update's cost is the difference from the stale edit.
  The last lines say how many updates were region-wise and how many full rebuilds
  (``zarr_vectors.pyramid.CROSS_LEVEL_UPDATES``).

Targets of issue 31: replace 10 <= 2 % of the write, delete 10 <= 1 %, append 1 % <= 5 %, and
a level update <= 10 % of a full pyramid build. After each edit the store is checked against
brute force on the final data: its object ids, 5 sampled objects (triangles exact) and 5
sampled boxes (every vertex inside, as a sorted set of rows). The reference (zarr-vectors
0.9.2) has no replace or delete, so no figure of its stands beside these.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness  # noqa: E402
from bench_kinds_scale import icosphere  # noqa: E402

import zarr_vectors as zv  # noqa: E402

EXTENT, CHUNK = 1000.0, 100.0
GRID = dict(chunk_shape=CHUNK, bounds=([0] * 3, [EXTENT] * 3), compression="zstd")
log = _harness.make_log("edits")


SPHERE = icosphere(3)


def meshes(count: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    v, f = SPHERE
    out = []
    for _ in range(count):
        r = rng.uniform(5, 15)
        out.append(((v * r + rng.uniform(r, EXTENT - r, 3)).astype(np.float32), f))
    return out


def _rows(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a).reshape(len(a), -1)
    return a[np.lexsort(a.T[::-1])] if len(a) else a


def check(ds: Any, data: dict[int, tuple[np.ndarray, np.ndarray]]) -> int:
    """The store against the final data: ids, 5 objects and 5 boxes; the number wrong."""
    wrong = int(ds.object_ids().tolist() != sorted(data))
    rng = np.random.default_rng(5)
    ids = np.array(sorted(data))
    for oid in rng.choice(ids, 5, replace=False).tolist():
        got = ds.objects([oid])
        v, f = data[oid]
        gp, gf = np.asarray(got.positions, np.float64), np.asarray(got.faces)
        wrong += int(
            not np.array_equal(
                _rows(gp[gf].reshape(len(gf), 9)), _rows(v[f].astype(np.float64).reshape(len(f), 9))
            )
        )
    pos = np.concatenate([data[i][0] for i in ids])
    for _ in range(5):
        lo = rng.uniform(0, EXTENT - 150, 3).astype(np.float32)
        hi = lo + np.float32(150)
        want = pos[np.all((pos >= lo) & (pos <= hi), axis=1)]
        wrong += int(not np.array_equal(_rows(np.asarray(ds.query(bbox=(lo, hi)).positions)), _rows(want)))
    return wrong


def write_base(path: str, data: dict[int, tuple[np.ndarray, np.ndarray]]) -> float:
    ids = sorted(data)
    t0 = time.perf_counter()
    with zv.create(path, "meshes", **GRID) as w:
        for a in range(0, len(ids), 200):
            part = ids[a : a + 200]
            w.append([data[i] for i in part], object_ids=part)
    return time.perf_counter() - t0


def timed(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def one_run(work: Path, count: int) -> tuple[dict[str, float], int]:
    base = {3 * i + 7: m for i, m in enumerate(meshes(count, 0))}
    out: dict[str, float] = {}
    flat = str(work / "flat.zarr")
    out["write"] = write_base(flat, base)
    pyr = str(work / "pyramid.zarr")
    shutil.copytree(flat, pyr)
    out["pyramid"] = timed(lambda: zv.open(pyr, "r+").build_pyramid([2, 2]))
    rng = np.random.default_rng(1)
    ids = np.array(sorted(base))
    chosen = rng.choice(ids, 20, replace=False)
    to_replace, to_delete = chosen[:10].tolist(), chosen[10:].tolist()
    fresh = meshes(10, 2)
    extra_n = max(1, count // 100)
    extra_ids = (ids.max() + 3 * np.arange(1, extra_n + 1)).tolist()
    extra = meshes(extra_n, 3)
    edits: dict[str, tuple[Callable[[Any, str], None], dict[int, Any]]] = {
        "replace10": (
            lambda ds, mode: ds.replace(to_replace, fresh, pyramid=mode),
            {**base, **dict(zip(to_replace, fresh))},
        ),
        "delete10": (
            lambda ds, mode: ds.delete(to_delete, pyramid=mode),
            {k: v for k, v in base.items() if k not in set(to_delete)},
        ),
        "append1pct": (
            lambda ds, mode: ds.append(extra, object_ids=extra_ids, pyramid=mode),
            {**base, **dict(zip(extra_ids, extra))},
        ),
    }
    wrong = 0
    for name, (edit, final) in edits.items():
        for mode in ("stale", "update"):
            copy = str(work / f"{name}-{mode}.zarr")
            shutil.copytree(pyr, copy)
            out[name if mode == "stale" else f"{name}_update"] = timed(
                lambda e=edit, c=copy, m=mode: e(zv.open(c, "r+"), m)
            )
            bad = check(zv.open(copy), final)
            if bad:
                log(f"{name} {mode}: {bad} checks wrong")
            wrong += bad
            shutil.rmtree(copy)
    return out, wrong


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--meshes", type=int, default=10_000)
    p.add_argument("--runs", type=int, default=2)
    p.add_argument("--quick", action="store_true", help="1,000 meshes, 1 run")
    p.add_argument("--workdir", help="where the stores go (default: the temporary folder)")
    args = p.parse_args()
    count, runs = (1_000, 1) if args.quick else (args.meshes, args.runs)
    faces = count * len(SPHERE[1])
    print(
        f"# commit {_harness.git_commit()}, {os.cpu_count()} cores, {count:,} meshes ({faces:,} faces), runs={runs}"
    )
    got: list[dict[str, float]] = []
    wrong = 0
    for r in range(runs):
        work = Path(tempfile.mkdtemp(prefix="zv-edits-", dir=args.workdir))
        try:
            load = os.getloadavg()[0]
            out, bad = one_run(work, count)
            wrong += bad
            got.append(out)
            log(f"run {r} (load {load:.1f}): " + ", ".join(f"{k} {v:.2f} s" for k, v in out.items()))
        finally:
            shutil.rmtree(work, ignore_errors=True)
    med = {k: statistics.median(o[k] for o in got) for k in got[0]}
    rows = [["operation", "median s", "share", "target"]]
    targets = {"replace10": ("write", 0.02), "delete10": ("write", 0.01), "append1pct": ("write", 0.05)}
    for name, (base, limit) in targets.items():
        rows.append([name, f"{med[name]:.3f}", f"{med[name] / med[base]:.1%} of write", f"<= {limit:.0%}"])
        update = med[f"{name}_update"] - med[name]
        rows.append(
            [
                f"  level update after {name}",
                f"{update:.3f}",
                f"{update / med['pyramid']:.1%} of pyramid",
                "<= 10%",
            ]
        )
    rows.append(["write (level 0)", f"{med['write']:.3f}", "", ""])
    rows.append(["pyramid [2, 2]", f"{med['pyramid']:.3f}", "", ""])
    print(_harness.format_rows(rows))
    paths = getattr(zv.pyramid, "CROSS_LEVEL_UPDATES", None)  # absent before region-wise linked updates
    print(f"# level updates of the mesh store: {paths if paths is not None else 'all full rebuilds'}")
    print(f"# checks against brute force: {wrong} wrong; {_harness.load_line()}")
    return 1 if wrong else 0


if __name__ == "__main__":
    raise SystemExit(main())
