#!/usr/bin/env python
"""Chunk size against box-query cost: where ``chunk_shape="auto"`` should aim.

Run from the repository root with the project's venv::

    .venv/bin/python benchmarks/bench_chunk_shape.py                 # points 1 M and 10 M, lines, meshes
    .venv/bin/python benchmarks/bench_chunk_shape.py --quick         # 200 k points, 2 rounds

For each data set (points uniform in [0, 1000]^3 or a mixture of 20 Gaussians clipped to it,
one float32 attribute; random-walk polylines; an icosphere mesh) the script writes one store
per chunk edge of a sweep, the edges that put 4 k to 256 k vertices (``--targets``) in each
non-empty chunk on average (``autochunk.auto_chunk_edge`` with that target), plus the store
``chunk_shape="auto"`` writes (the AUTO_VERTICES_PER_CHUNK edge, as a store of its own). Each
store is written with the default layout, opened once, and queried with the same boxes: cubes
covering 1 % and 10 % of the volume, placed uniformly for uniform data and centred on random
vertices (shifted inside the volume) otherwise. Rounds alternate the order of the stores
(forwards, backwards); a round times every box of every store once, in wall and CPU time. A
box's figure is its median over the rounds; a set's is the sum over its boxes, also per kept
row (the same rows for every store of a data set, checked). Each line of output is a JSON
object, with the range of the load average over the rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import zarr_vectors as zv  # noqa: E402
from zarr_vectors.engine.write.autochunk import auto_chunk_edge  # noqa: E402

EXTENT = 1000.0
SIDES = {"q1": 215.4, "q10": 464.2}  # cubes covering 1 % and 10 % of [0, 1000]^3
TARGETS = (4096, 8192, 16384, 32768, 65536, 131072, 262144)


def log(msg: str) -> None:
    sys.stderr.write(f"[bench_chunk_shape] {msg}\n")
    sys.stderr.flush()


def uniform_points(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).uniform(0, EXTENT, (n, 3)).astype(np.float32)


def clustered_points(n: int, seed: int) -> np.ndarray:
    """A mixture of 20 Gaussians (sigma 10 to 80, random weights) clipped to [0, 1000]^3."""
    rng = np.random.default_rng(seed)
    k = 20
    centres = rng.uniform(100, 900, (k, 3))
    sigma = rng.uniform(10, 80, k)
    label = rng.choice(k, n, p=rng.dirichlet(np.ones(k)))
    out = centres[label] + rng.standard_normal((n, 3)) * sigma[label, None]
    return np.clip(out, 0, EXTENT).astype(np.float32)


def random_walks(count: int, seed: int) -> list[np.ndarray]:
    """``count`` random walks of 50 to 200 vertices (step sigma 10) clipped to [0, 1000]^3."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(50, 201, count)
    starts = rng.uniform(0, EXTENT, (count, 3))
    return [
        np.clip(s + np.cumsum(rng.normal(0, 10, (m, 3)), axis=0), 0, EXTENT).astype(np.float32)
        for s, m in zip(starts, lengths)
    ]


def boxes(vertices: np.ndarray, count: int, seed: int, centred: bool) -> dict[str, list[Any]]:
    """``count`` cubes per size: uniform inside the volume, or centred on random vertices."""
    rng = np.random.default_rng(seed)
    out: dict[str, list[Any]] = {}
    for label, side in SIDES.items():
        if centred:
            centre = vertices[rng.integers(0, len(vertices), count)].astype(np.float64)
            lo = np.clip(centre - side / 2, 0, EXTENT - side)
        else:
            lo = rng.uniform(0, EXTENT - side, (count, 3))
        out[label] = [(lo[i], lo[i] + side) for i in range(count)]
    return out


def time_boxes(ds: Any, box_list: list[Any]) -> tuple[np.ndarray, np.ndarray, int]:
    """Wall and CPU seconds of each box (this process, all threads), and the rows kept."""
    wall = np.empty(len(box_list))
    cpu = np.empty(len(box_list))
    rows = 0
    for i, (lo, hi) in enumerate(box_list):
        t0, c0 = time.perf_counter(), time.process_time()
        rows += len(ds.query(bbox=(lo, hi)).positions)
        wall[i], cpu[i] = time.perf_counter() - t0, time.process_time() - c0
    return wall, cpu, rows


def run_set(
    name: str,
    write: Any,
    vertices: np.ndarray,
    box_sets: dict[str, list[Any]],
    rounds: int,
    targets: tuple[int, ...] = TARGETS,
) -> None:
    """Write one store per target (and ``auto``), then time every box set over ``rounds``.

    A box's cost is its median over the rounds (wall and CPU apart); a set's cost is the sum
    of its boxes' medians, so one slow round of one box moves it little."""
    work = Path(tempfile.mkdtemp(prefix="zv-chunkbench-", dir=os.environ.get("ZV_BENCH_DIR")))
    try:
        bounds = np.array([vertices.min(0), vertices.max(0)], np.float64)
        stores: dict[str, Any] = {}
        meta: dict[str, dict[str, Any]] = {}
        for label in [*(str(t) for t in targets), "auto"]:
            edge = "auto" if label == "auto" else auto_chunk_edge(vertices, bounds, target=int(label))
            t0 = time.perf_counter()
            ds = write(str(work / label), edge)
            wt = time.perf_counter() - t0
            chunks = len(ds.level(0).vertices.nonempty)
            stores[label] = ds
            meta[label] = {
                "edge": float(ds.chunk_shape[0]),
                "nonempty_chunks": chunks,
                "mean_per_chunk": round(ds.vertex_count() / max(chunks, 1)),
                "write_s": round(wt, 3),
            }
            log(f"{name}: {label} edge {meta[label]['edge']:.4g}, {chunks} chunks, write {wt:.2f} s")
        wall: dict[str, dict[str, list[np.ndarray]]] = {k: {q: [] for q in box_sets} for k in stores}
        cpu: dict[str, dict[str, list[np.ndarray]]] = {k: {q: [] for q in box_sets} for k in stores}
        kept: dict[str, int] = {}
        loads = []
        for r in range(rounds):
            order = list(stores) if r % 2 == 0 else list(reversed(stores))
            for label in order:
                for q, box_list in box_sets.items():
                    w, c, rows = time_boxes(stores[label], box_list)
                    wall[label][q].append(w)
                    cpu[label][q].append(c)
                    if kept.setdefault(q, rows) != rows:
                        raise AssertionError(f"{name} {label} {q}: {rows} rows, others {kept[q]}")
            loads.append(os.getloadavg()[0])
        cost = {
            (clock, k, q): float(np.median(np.stack(src[k][q]), axis=0).sum())
            for clock, src in (("wall", wall), ("cpu", cpu))
            for k in stores
            for q in box_sets
        }
        hand = [k for k in stores if k != "auto"]
        for label in stores:
            rec: dict[str, Any] = {"set": name, "target": label, **meta[label]}
            for q in box_sets:
                for clock in ("wall", "cpu"):
                    m = cost[clock, label, q]
                    best = min(cost[clock, k, q] for k in hand)
                    rec[f"{q}_{clock}_ms_per_box"] = round(m * 1e3 / len(box_sets[q]), 2)
                    rec[f"{q}_{clock}_vs_best"] = round(m / best, 3)
                rec[f"{q}_cpu_ns_per_row"] = round(cost["cpu", label, q] * 1e9 / max(kept[q], 1), 1)
            rec["load"] = [round(min(loads), 2), round(max(loads), 2)]
            print(json.dumps(rec), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="200 k points, 2 rounds, no 10 M")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--boxes", type=int, default=40, help="boxes per size")
    p.add_argument("--only", choices=("points", "lines", "meshes"), default=None)
    p.add_argument("--sizes", type=int, nargs="+", default=None, help="point counts (default 1 M and 10 M)")
    p.add_argument("--kinds", nargs="+", choices=("uniform", "clustered"), default=("uniform", "clustered"))
    p.add_argument(
        "--targets", type=int, nargs="+", default=list(TARGETS), help="hand-picked vertices per chunk"
    )
    args = p.parse_args(argv)
    rounds = 2 if args.quick else args.rounds
    targets = tuple(args.targets)
    log(f"{os.cpu_count()} cores, load {os.getloadavg()}")
    if args.only in (None, "points"):
        sizes = args.sizes or ((200_000,) if args.quick else (1_000_000, 10_000_000))
        for n in sizes:
            for kind, make in (("uniform", uniform_points), ("clustered", clustered_points)):
                if kind not in args.kinds:
                    continue
                pts = make(n, 1)
                attr = np.random.default_rng(2).random(n, dtype=np.float32)
                box_sets = boxes(pts, args.boxes, 7, centred=kind != "uniform")

                def write(target: str, edge: Any, pts: np.ndarray = pts, attr: np.ndarray = attr) -> Any:
                    return zv.write_points(target, pts, chunk_shape=edge, attributes={"a": attr})

                run_set(f"points {kind} {n:,}", write, pts, box_sets, rounds, targets)
                del pts, attr
    if args.only in (None, "lines"):
        walks = random_walks(1000 if args.quick else 10_000, 3)
        verts = np.concatenate(walks)

        def write_lines(target: str, edge: Any) -> Any:
            return zv.write_lines(target, walks, chunk_shape=edge)

        run_set(
            f"lines {len(verts):,} vertices",
            write_lines,
            verts,
            boxes(verts, args.boxes, 7, False),
            rounds,
            targets,
        )
    if args.only in (None, "meshes"):
        import trimesh

        sphere = trimesh.creation.icosphere(subdivisions=5 if args.quick else 7)
        v = (np.asarray(sphere.vertices) * 499 + 500).astype(np.float32)
        f = np.asarray(sphere.faces, np.int64)

        def write_mesh(target: str, edge: Any) -> Any:
            return zv.write_mesh(target, v, f, chunk_shape=edge)

        run_set(f"mesh {len(v):,} vertices", write_mesh, v, boxes(v, args.boxes, 7, True), rounds, targets)
    log(f"done, load {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
