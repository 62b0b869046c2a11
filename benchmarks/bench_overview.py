#!/usr/bin/env python
"""The overview layer against Neuroglancer's own per-object meshes: the first view of many
meshes in headless Chromium (issue 34's targets).

Run from the repository root with the project's venv (needs ``chromium``, the
``neuroglancer`` and ``pyramid`` extras)::

    .venv/bin/python benchmarks/bench_overview.py              # 10,000 meshes, 12.8 M faces
    .venv/bin/python benchmarks/bench_overview.py --n 2000     # smaller

Store: N icospheres of 3 subdivisions (1,280 faces each), radius 10..25, in [0, 2000]^3,
chunk 250, a pyramid of factors 2, 2, 2 (written once into ``--workdir``, reused).

1. Overview (``zarr-vectors serve``, the overview on by default): the overview is built once
   (seconds given), then Chromium opens the served viewer URL (3-D layout, whole store in
   view, 1000x700). Figures: seconds from navigation to the first frame showing geometry
   (a screenshot of the panel's centre, polled), requests and bytes of the source URLs seen
   by the browser (its workers too) until it has been idle 2 s, and the objects that the
   overview's coarsest LOD holds (each object is drawn at some level when that LOD is).
2. Baseline, same run: the store exported with ``sharding=True`` and no overview
   (per-object multi-resolution meshes in shards), served by a static host with byte
   ranges, every object listed in the state: requests, bytes, seconds to a drawn frame and
   to the first full view (the last source answer before 2 s of idleness).

Targets: overview at most 2 s to a drawn frame and 10 MB; baseline at least 10x worse.
Output: one JSON object on stdout (with the load average).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_kinds_scale import icosphere  # noqa: E402

import zarr_vectors as zv  # noqa: E402
from zarr_vectors.neuroglancer import export_neuroglancer  # noqa: E402
from zarr_vectors.neuroglancer.precomputed_read import decode_multilod_manifest  # noqa: E402


def build(path: Path, n: int) -> float:
    """Seconds to write and pyramid the store (0 when it was there)."""
    if (path / "zarr.json").is_file():
        return 0.0
    t0 = time.perf_counter()
    v, f = icosphere(3)
    rng = np.random.default_rng(0)
    r = rng.uniform(10, 25, n)
    centres = rng.uniform(30, 1970, (n, 3))
    zv.write_meshes(path, [((v * r[i] + centres[i]).astype("f4"), f) for i in range(n)], chunk_shape=250)
    zv.open(path, mode="r+").build_pyramid([2, 2, 2])
    return time.perf_counter() - t0


async def _view(url: str, prefix: str, timeout: float) -> dict[str, Any]:
    from tests import _cdp
    from tests.neuroglancer._first_view import first_view

    browser = _cdp.Browser(1000, 700)
    try:
        session, ws, page = await _cdp.open_page(browser.ws_url)
        try:
            out = await first_view(page, url, prefix, timeout=timeout)
            out["console_errors"] = page.console_errors()[:5]
        finally:
            page.reader.cancel()
            await ws.close()
            await session.close()
    finally:
        browser.close()
    out.pop("png")
    out["MB"] = out.pop("bytes") / 1e6
    return out


def overview(path: Path) -> dict[str, Any]:
    from tests.neuroglancer._first_view import plain_url

    server = zv.serve(path, layout="3d")
    try:
        ov = server.overviews[server.sources[0].name]
        t0 = time.perf_counter()
        manifest, data = ov.encoded()
        built = time.perf_counter() - t0
        out = asyncio.run(_view(plain_url(server.viewer_url), server.url + "/zv/", 120))
    finally:
        server.close()
    m = decode_multilod_manifest(manifest, "1.index")
    ds = zv.open(path)
    coarsest = ov.levels[-1]
    out.update(
        build_seconds=built,
        overview_MB=(len(manifest) + len(data)) / 1e6,
        lods=[
            {"store_level": k, "nodes": len(p), "MB": int(s.sum()) / 1e6}
            for k, p, s in zip(ov.levels, m.positions, m.sizes)
        ],
        objects_in_coarsest_lod=len(ds.object_ids(level=coarsest)),
        objects=len(ds.object_ids()),
    )
    return out


def baseline(path: Path, workdir: Path, timeout: float) -> dict[str, Any]:
    from tests._latency import StaticServer
    from tests.neuroglancer._first_view import plain_url

    out_dir = workdir / "export"
    shutil.rmtree(out_dir, ignore_errors=True)
    t0 = time.perf_counter()
    export_neuroglancer(path, out_dir, sharding=True, overview=False)
    exported = time.perf_counter() - t0
    static = StaticServer(out_dir, listings=False, cors=True)
    viewer = zv.serve(path, layout="3d", overview=False)  # the bundled client only
    try:
        state = json.loads((out_dir / "state.json").read_text().replace("http://127.0.0.1:8000", static.url))
        ids = zv.open(path).object_ids()
        state["layers"][0]["segments"] = [str(i) for i in ids.tolist()]  # every object, not 500
        url = plain_url(viewer.viewer_url, state)
        out = asyncio.run(_view(url, static.url, timeout))
    finally:
        static.stop()
        viewer.close()
    out["export_seconds"] = exported
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/zv-bench-overview"))
    ap.add_argument("--baseline-timeout", type=float, default=300)
    ap.add_argument("--no-baseline", action="store_true", help="the overview part only")
    args = ap.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    path = args.workdir / f"meshes{args.n}.zarr"
    built = build(path, args.n)
    result: dict[str, Any] = {"meshes": args.n, "faces_level0": args.n * 1280, "store_build_seconds": built}
    result["load_before"] = os.getloadavg()
    result["overview"] = overview(path)
    result["load_between"] = os.getloadavg()
    print(json.dumps(result, indent=1), file=sys.stderr, flush=True)  # the overview part, early
    if args.no_baseline:
        return 0
    result["baseline_sharded_per_object"] = baseline(path, args.workdir, args.baseline_timeout)
    result["load_after"] = os.getloadavg()
    o, b = result["overview"], result["baseline_sharded_per_object"]
    result["ratios_baseline_over_overview"] = {
        "MB": b["MB"] / max(o["MB"], 1e-9),
        "requests": b["requests"] / max(o["requests"], 1),
        "seconds_to_idle": b["seconds_to_idle"] / max(o["seconds_to_idle"], 1e-9),
    }
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
