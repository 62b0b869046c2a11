#!/usr/bin/env python
"""Stores on S3 behind a fixed delay per request: writes, object counts and 1 % box queries.

A moto S3 server runs in its own process on 127.0.0.1; this process runs the latency proxy
of ``tests/_latency.py`` in front of it (``--delay`` seconds per request, 20 ms by default)
and every client talks to the proxy only. Systems, each in fresh processes (one to write,
one to query), all on the same data in the same run:

* ``ours``: ``write_points`` / ``write_mesh`` with chunk 100 (bins 25 for points) and
  ``compression="zstd"`` (the reference's public API compresses every array with zstd);
* ``ours`` is written with ``shards=None`` (one object per cell) when the writers take ``shards``;
* ``ours-sharded``: the same with ``shards="auto"`` (the default for object storage), when ``write_points`` takes ``shards``
  (otherwise the row is printed as skipped);
* ``reference``: zarr-vectors 0.9.2 through its public API (``create`` + ``add_points`` /
  ``add_mesh``, ``open(...).select(bbox=...).read()``), in a venv made by
  ``shared/tools/reference-venv.sh`` (plus s3fs), or ``--reference-python``.

Data: bench_peers' points (float32 uniform in [0, 1000)^3, one float32 attribute, seed 0) at
each ``--points`` size, and ``trimesh.creation.icosphere(7)`` scaled by 499, offset by 500.
Per system: write time, objects and bytes in the bucket (listed directly, not through the
proxy), and for ``--boxes`` 1 % boxes (cubes of side 215.4; for the mesh centred on random
vertices) one warm-up query checked against numpy brute force, then ``--reps`` timed ones:
median time, requests, sequential waves (maximal runs of overlapping requests; ``depth`` is
the longest chain of requests each waiting for the previous) and bytes per box.

Usage::

    python benchmarks/bench_cloud.py                         # 1M and 10M points, the mesh
    python benchmarks/bench_cloud.py --points 1M --delay 0.02 --boxes 5
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import _harness

REPO = _harness.REPO
CHILD = _harness.HERE / "_cloud_child.py"
BUCKET = "zv-bench-cloud"
SYSTEMS = ("ours", "ours-sharded", "reference")
#: Dummy credentials, no config files or metadata lookups, no proxy for loopback.
AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/zv-bench/credentials",
    "AWS_CONFIG_FILE": "/nonexistent/zv-bench/config",
    "AWS_EC2_METADATA_DISABLED": "true",
    "NO_PROXY": "127.0.0.1,localhost",
    "no_proxy": "127.0.0.1,localhost",
}
MOTO = r"""
import logging, sys
from moto.server import ThreadedMotoServer
logging.getLogger("werkzeug").setLevel(logging.ERROR)
s = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
s.start()
print(s.get_host_and_port()[1], flush=True)
sys.stdin.read()  # until the parent closes stdin (or dies)
s.stop()
"""


log = _harness.make_log()


def parse_count(text: str) -> int:
    text = text.strip().upper()
    scale = {"K": 1_000, "M": 1_000_000}.get(text[-1:], 1)
    return int(float(text[:-1] if scale > 1 else text) * scale)


def reference_python(explicit: str | None) -> str:
    """A python importing zarr-vectors 0.9.2 and s3fs (made with reference-venv.sh if needed)."""
    py = explicit or str(_harness.DEFAULT_REF_VENV / "bin" / "python")
    if not explicit and not Path(py).exists():
        py = _harness.make_reference_venv(tempfile.gettempdir(), log)
    probe = [py, "-I", "-c", "import s3fs"]
    if subprocess.run(probe, capture_output=True, cwd=tempfile.gettempdir()).returncode != 0:
        log(f"installing s3fs into {py}'s venv (the reference reads s3:// through fsspec)")
        subprocess.run([py, "-m", "pip", "install", "-q", "s3fs"], check=True)
    return py


def supports_shards() -> bool:
    sys.path[:0] = [str(REPO), str(REPO / "codecs")]
    import zarr_vectors as zv

    return "shards" in inspect.signature(zv.write_points).parameters


def run_child(python: str, args: list[str], env: dict[str, str], timeout: float) -> dict[str, Any] | str:
    """The child's JSON result, or why there is none (out of time, or its last error line;
    the whole error goes to stderr), so one failing system does not end the run."""
    cmd = [python, "-I", str(CHILD), *args]
    try:
        return _harness.run_json(cmd, what="child", env=env, cwd=tempfile.gettempdir(), timeout=timeout)[0]
    except _harness.ChildError as exc:
        if exc.timed_out:
            return f"over {timeout:g} s"
        log(f"child failed: {' '.join(cmd)}\n{exc.stderr[-4000:]}")
        lines = exc.stderr.strip().splitlines()
        return f"failed: {lines[-1] if lines else exc}"


def bucket_usage(client: Any, prefix: str) -> tuple[int, int]:
    """Objects and bytes under ``prefix`` (listed against the server, not through the proxy)."""
    count = size = 0
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix + "/"):
        for obj in page.get("Contents", []):
            count += 1
            size += obj["Size"]
    return count, size


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--points", default="1M,10M", help="comma-separated sizes (default 1M,10M)")
    ap.add_argument("--mesh", type=int, default=7, help="icosphere subdivisions (0: no mesh; default 7)")
    ap.add_argument("--delay", type=float, default=0.02, help="seconds added to every request (default 0.02)")
    ap.add_argument("--boxes", type=int, default=5, help="1 %% boxes per dataset (default 5)")
    ap.add_argument("--reps", type=int, default=3, help="timed queries per box (default 3)")
    ap.add_argument("--systems", default=",".join(SYSTEMS))
    ap.add_argument(
        "--reference-mesh-boxes",
        type=int,
        default=2,
        help="boxes for the reference's mesh, one timed query each (its mesh boxes take thousands of requests)",
    )
    ap.add_argument("--child-timeout", type=float, default=1800, help="seconds per child (default 1800)")
    ap.add_argument("--reference-python")
    a = ap.parse_args()
    systems = [s for s in a.systems.split(",") if s]
    sharded = supports_shards()
    ref_py = reference_python(a.reference_python) if "reference" in systems else ""
    pythons = {"ours": sys.executable, "ours-sharded": sys.executable, "reference": ref_py}
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)} | AWS_ENV

    sys.path.insert(0, str(REPO / "tests"))
    import boto3
    from _latency import LatencyProxy

    moto = subprocess.Popen(
        [sys.executable, "-c", MOTO], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert moto.stdout is not None
        port = int(moto.stdout.readline())
        upstream = f"http://127.0.0.1:{port}"
        client = boto3.client(
            "s3",
            endpoint_url=upstream,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        client.create_bucket(Bucket=BUCKET)
        with LatencyProxy(upstream, delay=a.delay) as proxy:
            datasets = [("points", parse_count(p)) for p in a.points.split(",") if p]
            if a.mesh:
                datasets.append(("mesh", a.mesh))
            rows = []
            for kind, n in datasets:
                for system in systems:
                    label = f"{kind} {n:,}" if kind == "points" else f"icosphere s{n}"
                    if system == "ours-sharded" and not sharded:
                        rows.append(
                            {"data": label, "system": system, "skipped": "write_points has no shards="}
                        )
                        continue
                    name = f"{system}-{kind}-{n}"
                    common = ["--impl", system, "--kind", kind, "--n", str(n)]
                    common += ["--url", f"s3://{BUCKET}/{name}.zarr", "--endpoint", proxy.url]
                    log(f"{label}: {system} write")
                    w = run_child(pythons[system], [*common, "--task", "write"], env, a.child_timeout)
                    if isinstance(w, str):
                        rows.append({"data": label, "system": system, "skipped": f"write {w}"})
                        continue
                    objects, size = bucket_usage(client, f"{name}.zarr")
                    log(f"{label}: {system} query ({w['write_s']:.1f} s write, {objects} objects)")
                    boxes, reps = a.boxes, a.reps
                    if system == "reference" and kind == "mesh":
                        boxes, reps = min(boxes, a.reference_mesh_boxes), 1
                    q = run_child(
                        pythons[system],
                        [*common, "--task", "query", "--boxes", str(boxes), "--reps", str(reps)],
                        env,
                        a.child_timeout,
                    )
                    if isinstance(q, str):
                        rows.append(
                            {
                                "data": label,
                                "system": system,
                                "skipped": f"queries {q}",
                            }
                        )
                        continue
                    rows.append(
                        {"data": label, "system": system, "objects": objects, "bytes": size, **w, **q}
                    )
                    log(json.dumps(rows[-1]))
    finally:
        if moto.stdin is not None:
            moto.stdin.close()
        moto.wait(timeout=30)
    report(rows, a)


def report(rows: list[dict[str, Any]], a: argparse.Namespace) -> None:
    print(
        f"S3 (moto, own process) behind a {a.delay * 1000:.0f} ms per-request proxy; 1 % boxes: {a.boxes} per "
        f"dataset (reference mesh: {a.reference_mesh_boxes}, one timed query each), median of {a.reps} timed "
        "queries after a checked warm-up; waves = sequential rounds of "
        "overlapping requests, depth = longest chain of requests each after the previous"
    )
    head = (
        f"{'data':<18} {'system':<13} {'write s':>8} {'objects':>8} {'MB':>7} {'open req':>8} {'box ms':>8} "
        f"{'req/box':>7} {'waves':>5} {'max':>3} {'depth':>5} {'KB/box':>7} {'wrong':>5}"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        if "skipped" in r:
            print(f"{r['data']:<18} {r['system']:<13} skipped: {r['skipped']}")
            continue
        b = r["box"]
        print(
            f"{r['data']:<18} {r['system']:<13} {r['write_s']:8.2f} {r['objects']:8.0f} {r['bytes'] / 1e6:7.1f} "
            f"{r['open_traffic']['requests']:8.0f} {b['s'] * 1000:8.1f} {b['requests']:7.0f} {b['waves']:5.0f} "
            f"{r['box_max_waves']:3.0f} {b['depth']:5.0f} {b['bytes_out'] / 1e3:7.1f} {r['mismatches']:5.0f}"
        )
    by = {(r["data"], r["system"]): r for r in rows if "skipped" not in r}
    for data in dict.fromkeys(r["data"] for r in rows):
        ref = by.get((data, "reference"))
        for system in ("ours", "ours-sharded"):
            mine = by.get((data, system))
            if ref and mine:
                print(
                    f"{data}: {system} / reference: box time {mine['box']['s'] / ref['box']['s']:.2f}, "
                    f"requests {mine['box']['requests'] / max(ref['box']['requests'], 1):.2f}, "
                    f"write {mine['write_s'] / ref['write_s']:.2f}, objects {mine['objects'] / ref['objects']:.2f}"
                )
    wrong = sum(r.get("mismatches", 0) for r in rows)
    print(f"answers against brute force: {wrong} wrong")
    if wrong:
        sys.exit(1)


if __name__ == "__main__":
    main()
