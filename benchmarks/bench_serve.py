#!/usr/bin/env python
"""Neuroglancer serving benchmark: the first view of a large point cloud, and one cell.

Run from the repository root with the project's venv (needs ``chromium`` and the
``neuroglancer`` extra for the first part)::

    .venv/bin/python benchmarks/bench_serve.py               # 10 M points, pyramid built
    .venv/bin/python benchmarks/bench_serve.py --n 1000000   # smaller

Store: N float32 points uniform in [0, 1000]^3 with two float32 attributes and no objects,
chunk 50, bins 12.5, a pyramid of factor 2 until the coarsest level holds under 40,000
vertices (written once into ``--workdir``, reused when it is there).

1. First view: headless Chromium (DevTools protocol, ``tests/_cdp.py``) opens the served
   viewer URL (``layout 3d``, the whole store in view, 1000x700). Figures: bytes of the
   source answers (``/zv/``) and of everything (the client's files too), and seconds from
   navigation to the last answer of a source request (waiting until the viewer has asked
   nothing for 2 s). Targets: at most 5 MB of source answers, at most 2 s.
2. One cell: a spatial-index request (cache cleared each time) against the box query of
   the same cell's box (``Dataset.query``; a cell is a block of chunks), medians of ``--reps`` runs, at the centre
   chunk and at the coarsest level. Target: at most 2x the box query.

Output: one JSON object on stdout; exit status 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import urllib.parse
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _harness import median_time  # noqa: E402

import zarr_vectors as zv  # noqa: E402
from zarr_vectors.neuroglancer.source import StoreSource  # noqa: E402


def build(path: Path, n: int) -> None:
    if (path / "zarr.json").is_file():
        return
    rng = np.random.default_rng(0)
    t0 = time.perf_counter()
    pos = rng.uniform(0, 1000, (n, 3)).astype("f4")
    attrs = {"intensity": rng.random(n).astype("f4"), "confidence": rng.random(n).astype("f4")}
    zv.write_points(path, pos, chunk_shape=50, bin_shape=12.5, attributes=attrs, bounds=([0] * 3, [1000] * 3))
    ds = zv.open(path, mode="r+")
    levels = 0
    count = n
    while count > 40_000:
        count //= 8
        levels += 1
    ds.build_pyramid([2] * levels)
    print(f"built {n:,} points and {levels} levels in {time.perf_counter() - t0:.1f} s", file=sys.stderr)


async def _first_view(server: Any, width: int, height: int) -> dict[str, Any]:
    from tests import _cdp

    browser = _cdp.Browser(width, height)
    try:
        session, ws, page = await _cdp.open_page(browser.ws_url)
        try:
            state = json.loads(urllib.parse.unquote(server.viewer_url.split("#!", 1)[1]))
            state["layout"] = "3d"
            url = server.viewer_url.split("#!", 1)[0] + "#!" + urllib.parse.quote(json.dumps(state))
            server.requests.clear()
            start = time.perf_counter()
            await page.send("Page.navigate", url=url)
            deadline = start + 120
            while time.perf_counter() < deadline:
                await asyncio.sleep(0.25)
                sources = [r for r in server.requests if r.path.startswith("/zv/")]
                last = server.requests[-1].done if server.requests else start
                if sources and time.perf_counter() - last > 2.0:
                    break
            errors = page.console_errors()
        finally:
            page.reader.cancel()
            await ws.close()
            await session.close()
    finally:
        browser.close()
    reqs = list(server.requests)
    src = [r for r in reqs if r.path.startswith("/zv/")]
    return {
        "source_requests": len(src),
        "spatial_requests": sum("/spatial" in r.path for r in src),
        "source_bytes": sum(r.size for r in src),
        "all_bytes": sum(r.size for r in reqs),
        "seconds_to_last_source_answer": max(r.done for r in src) - start,
        "seconds_first_source_request_to_last_answer": max(r.done for r in src)
        - min(r.done - r.seconds for r in src),
        "spatial_requests_per_level": {
            lvl: sum(f"/spatial{lvl}/" in r.path for r in src)
            for lvl in range(8)
            if any(f"/spatial{lvl}/" in r.path for r in src)
        },
        "server_seconds": sum(r.seconds for r in src),
        "console_errors": errors,
    }


def one_cell(path: Path, reps: int) -> dict[str, Any]:
    ds = zv.open(path)
    src = StoreSource(ds, "bench")
    info = json.loads(src.get("ann/info")[0])
    out = {}
    for label, i in (("finest", len(info["spatial"]) - 1), ("coarsest", 0)):
        k = src.levels[-1 - i]
        cell = np.asarray(info["spatial"][i]["grid_shape"]) // 2
        size = np.asarray(info["spatial"][i]["chunk_size"])
        lo = np.asarray(info["lower_bound"]) + cell * size  # the cell's box (a block of chunks)
        hi = np.nextafter(lo + size, -np.inf)
        key = f"ann/spatial{i}/" + "_".join(map(str, cell))

        def served(key: str = key) -> None:
            src.clear_cache()
            src.get(key)

        def box(lo: np.ndarray = lo, hi: np.ndarray = hi, k: int = k) -> None:
            ds.query(bbox=(lo, hi), level=k)

        served()
        box()
        t_cell, t_box = median_time(served, reps), median_time(box, reps)
        n = int(np.frombuffer(src.get(key)[0][:8], "<u8")[0])
        out[label] = {
            "level": k,
            "annotations": n,
            "cell_ms": t_cell * 1e3,
            "box_ms": t_box * 1e3,
            "ratio": t_cell / t_box,
        }
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=10_000_000)
    ap.add_argument("--workdir", default=str(ROOT / ".cache" / "bench_serve"))
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--no-browser", action="store_true")
    args = ap.parse_args()
    path = Path(args.workdir) / f"points-{args.n}.zarr"
    path.parent.mkdir(parents=True, exist_ok=True)
    build(path, args.n)
    result: dict[str, Any] = {"n": args.n, "levels": zv.open(path).levels}
    result["one_cell"] = one_cell(path, args.reps)
    if not args.no_browser:
        with zv.serve(path) as server:
            result["first_view"] = asyncio.run(_first_view(server, 1000, 700))
    print(json.dumps(result, indent=1))
    ok = all(v["ratio"] <= 2 for v in result["one_cell"].values())
    if "first_view" in result:
        fv = result["first_view"]
        ok &= (
            fv["source_bytes"] <= 5e6
            and fv["seconds_to_last_source_answer"] <= 2
            and not fv["console_errors"]
        )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
