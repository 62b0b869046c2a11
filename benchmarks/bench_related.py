"""related() latency on a synapse member: one segment's synapses through the relationship
index, against a where=-filtered full read of the same member (ours only; the reference has no
collections).

    .venv/bin/python benchmarks/bench_related.py                 # 10^7 synapses, 10^5 segments
    .venv/bin/python benchmarks/bench_related.py --n 1000000 --segments 10000 --lookups 50

Every answer is checked against numpy; exit status 1 on a mismatch. Also timed: an append
of ``--edit`` synapses through the collection (the index updated bucket by bucket) against a
full rebuild of both indexes. The load average is printed with the figures.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import zarr_vectors as zv


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=10_000_000, help="synapse points")
    parser.add_argument("--segments", type=int, default=100_000, help="distinct segment ids")
    parser.add_argument("--lookups", type=int, default=30, help="related() calls timed (one segment each)")
    parser.add_argument("--full-reads", type=int, default=2, help="where=-filtered full reads timed")
    parser.add_argument("--edit", type=int, default=1000, help="synapses appended through the collection")
    parser.add_argument("--no-rebuild", action="store_true", help="skip timing a full rebuild of the indexes")
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(dir=args.workdir))
    try:
        rng = np.random.default_rng(0)
        seg = np.uint64(2**64 - 1) - rng.choice(2**40, args.segments, replace=False).astype(np.uint64)
        # Heavy-tailed: some neurons get many synapses, as in real connectomes.
        weights = rng.pareto(1.5, args.segments) + 1
        post = seg[rng.choice(args.segments, args.n, p=weights / weights.sum())]
        pre = seg[rng.integers(0, args.segments, args.n)]
        pos = rng.uniform(0, 10_000, (args.n, 3)).astype("float32")

        print(f"load average at start: {os.getloadavg()[0]:.2f}")
        t0 = time.perf_counter()
        coll = zv.create_collection(work / "c.zarr", id_spaces=["segments"])
        coll.add_member(
            "synapses",
            "points",
            pos,
            attributes={"pre_segment": pre, "post_segment": post},
            relationships={"pre_segment": "segments", "post_segment": "segments"},
        )
        print(f"write + 2 indexes: {time.perf_counter() - t0:.1f} s for {args.n:,} points")

        coll = zv.open(work / "c.zarr", "r+")
        edit: list[float] = []
        alone: list[float] = []
        # A proofreading-like edit: new synapses between a few segments.
        few = seg[rng.integers(0, args.segments, 10)]
        bad = 0
        for through in (True,) if args.no_rebuild else (True, False):
            more = rng.uniform(0, 10_000, (args.edit, 3)).astype("float32")
            mpost, mpre = few[rng.integers(0, 10, (2, args.edit))]
            t = time.perf_counter()
            if through:
                coll.append("synapses", more, attributes={"pre_segment": mpre, "post_segment": mpost})
            else:
                coll.member("synapses").append(more, attributes={"pre_segment": mpre, "post_segment": mpost})
            (edit if through else alone).append(time.perf_counter() - t)
            pos, post = np.concatenate([pos, more]), np.concatenate([post, mpost])
            if through:  # the updated index answers exactly
                res = coll.related([int(few[0])], "post_segment", attributes=False)
                bad += int(len(res) != int((post == few[0]).sum()))
        if args.no_rebuild:
            print(f"append {args.edit} synapses on 10 segments through the collection (edit + 2 index updates): "
                  f"{edit[0]:.2f} s")  # fmt: skip
        else:
            t = time.perf_counter()
            coll.build_index("synapses")  # the member was edited alone: the index is stale
            rebuild = time.perf_counter() - t
            print(
                f"append {args.edit} synapses on 10 segments through the collection (edit + 2 index updates): "
                f"{edit[0]:.2f} s; the same append to the member alone (no index update): {alone[0]:.2f} s; "
                f"full rebuild of the 2 indexes: {rebuild:.1f} s"
            )
        coll = zv.open(work / "c.zarr")
        picks = seg[rng.integers(0, args.segments, args.lookups)]
        for label, attributes in (("rows with attributes", None), ("positions only, index alone", False)):
            times, sizes = [], []
            for s in picks:
                t = time.perf_counter()
                res = coll.related([int(s)], "post_segment", attributes=attributes)
                times.append(time.perf_counter() - t)
                sizes.append(len(res))
                truth = post == s
                bad += int(
                    sorted(map(tuple, res.positions.tolist())) != sorted(map(tuple, pos[truth].tolist()))
                )
            print(
                f"related(one segment), {label}: median {statistics.median(times) * 1e3:.1f} ms, "
                f"max {max(times) * 1e3:.1f} ms, answers {min(sizes)}..{max(sizes)} rows "
                f"(median {statistics.median(sizes):.0f})"
            )
        full = []
        member = coll.member("synapses")
        for s in picks[: args.full_reads]:
            t = time.perf_counter()
            res = member.read(where=f"post_segment == {int(s)}")
            full.append(time.perf_counter() - t)
            bad += int(len(res) != int((post == s).sum()))
        print(
            f"where=-filtered full read: median {statistics.median(full) * 1e3:.0f} ms "
            f"({statistics.median(full) / statistics.median(times):.0f}x the index-alone related)"
        )
        print(f"load average at end: {os.getloadavg()[0]:.2f}")
        if bad:
            print(f"MISMATCH: {bad} answers differ from numpy", file=sys.stderr)
        return 1 if bad else 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
