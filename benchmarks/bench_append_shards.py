"""The default (sharded) layout against one file per cell: write, 1 % box, 1 % local append.

For each point count and grid, writes the same uniform point cloud (positions float32 and one
float32 attribute, in the cube [0, 1000)^3) twice to local disk, ``shards="default"`` and
``shards=None``, then per store: the median time of a 1 % box (a cube of side 215.4 at a random
place, the same boxes for both; its first query, then the best of three more), a spatially local append of 1 % more points (in a cube of side
215.4, corner at ``--append-at``), and the bytes the append rewrote: the files that are new or
not the same file (inode, size, mtime) as before, as a share of the store's bytes after.

    python benchmarks/bench_append_shards.py --n 1e6,1e7 --chunk 100,70
    python benchmarks/bench_append_shards.py --n 1e7 --chunk auto    # the default chunk shape
    python benchmarks/bench_append_shards.py --n 1e7 --icechunk      # also an Icechunk repository

With ``--icechunk`` a third store per grid is an Icechunk repository on local disk (default
layout; the write and the append are one commit each, through ``zarr_vectors.icechunk``); its
"rewrote" is the bytes of the repository's files that are new after the append (Icechunk
never rewrites a file), its "files" the repository's files.

Prints one table row per store; ``--json`` writes the figures.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import zarr_vectors as zv  # noqa: E402

EXTENT = 1000.0
SIDE = 215.4  # a cube of 1 % of the volume


def files(root: Path) -> dict[str, tuple[int, int, int]]:
    out = {}
    for folder, _, names in os.walk(root):
        for name in names:
            st = os.stat(os.path.join(folder, name))
            out[os.path.join(folder, name)] = (st.st_ino, st.st_size, st.st_mtime_ns)
    return out


def _write_into(store: object, *, pos: np.ndarray, options: dict) -> None:
    zv.write_points(store, pos, **options)


def one(n: int, chunk: float | str, shards: object, where: np.ndarray, boxes: list, tmp: Path) -> dict:
    rng = np.random.default_rng(1)
    pos = (rng.random((n, 3), np.float32) * EXTENT).astype(np.float32)
    attr = rng.random(n, np.float32)
    icechunk = shards == "icechunk"
    path = tmp / f"s{n}-{chunk}-{shards}.zarr"
    options = {"attributes": {"a": attr}, "chunk_shape": chunk, "bounds": ([0] * 3, [EXTENT] * 3)}
    t0 = time.perf_counter()
    if icechunk:
        import icechunk as ic

        from zarr_vectors import icechunk as zvi

        repo = ic.Repository.create(ic.local_filesystem_storage(str(path)))
        zvi.commit(repo, functools.partial(_write_into, pos=pos, options=options), message="write")
    else:
        zv.write_points(path, pos, shards=shards, **options)
    write_s = time.perf_counter() - t0
    del pos, attr, options
    ds = zv.open(repo.readonly_session(branch="main").store) if icechunk else zv.open(path)
    cold, warm = [], []  # a box's first query (shard indexes not yet cached), then its best of 3
    for lo in boxes:
        reps = []
        for _ in range(4):
            t = time.perf_counter()
            ds.query((lo, lo + SIDE))
            reps.append(time.perf_counter() - t)
        cold.append(reps[0])
        warm.append(min(reps[1:]))
    ds.close()
    before = files(path)
    k = max(1, n // 100)
    add = where + rng.random((k, 3), np.float32) * np.float32(SIDE)
    new = {"attributes": {"a": rng.random(k, np.float32)}, "progress": False}
    t = time.perf_counter()
    if icechunk:
        zvi.append(repo, add.astype(np.float32), message="append", **new)
    else:
        zv.open(path, "r+").append(add.astype(np.float32), **new)
    append_s = time.perf_counter() - t
    after = files(path)
    total = sum(s for _, s, _ in after.values())
    rewritten = sum(s for p, (i, s, m) in after.items() if before.get(p) != (i, s, m))
    count = len(after)
    shutil.rmtree(path)
    return {
        "n": n,
        "chunk": chunk,
        "shards": str(shards),
        "files": count,
        "write_s": write_s,
        "box_ms": 1e3 * float(np.median(warm[1:])),
        "cold_box_ms": 1e3 * float(np.median(cold[1:])),
        "append_s": append_s,
        "rewritten": rewritten / total,
        "store_mb": total / 1e6,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", default="1e6")
    ap.add_argument("--chunk", default="100")
    ap.add_argument("--append-at", default="0,0,0", help="corner of the appended cube")
    ap.add_argument("--boxes", type=int, default=9)
    ap.add_argument("--icechunk", action="store_true", help="also an Icechunk repository per grid")
    ap.add_argument("--json")
    args = ap.parse_args()
    where = np.array([float(v) for v in args.append_at.split(",")], np.float32)
    rng = np.random.default_rng(7)
    boxes = [rng.random(3) * (EXTENT - SIDE) for _ in range(args.boxes)]
    rows = []
    print(
        f"load {os.getloadavg()[0]:.2f}; {'n':>9} {'chunk':>5} {'shards':>8} {'files':>6} {'write s':>8} "
        f"{'1% box ms':>9} {'cold ms':>8} {'append s':>8} {'rewrote':>7}"
    )
    with tempfile.TemporaryDirectory(dir=os.environ.get("ZV_BENCH_TMP")) as tmp:
        for n in [int(float(v)) for v in args.n.split(",")]:
            for chunk in [v if v == "auto" else float(v) for v in args.chunk.split(",")]:
                for shards in ("default", None, *(["icechunk"] if args.icechunk else [])):
                    r = one(n, chunk, shards, where, boxes, Path(tmp))
                    rows.append(r)
                    print(
                        f"{'':>9} {n:>9} {chunk!s:>5} {r['shards']:>8} {r['files']:>6} {r['write_s']:>8.2f} "
                        f"{r['box_ms']:>9.1f} {r['cold_box_ms']:>8.1f} {r['append_s']:>8.2f} "
                        f"{100 * r['rewritten']:>6.1f}%",
                        flush=True,
                    )
    print(f"load after {os.getloadavg()[0]:.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
