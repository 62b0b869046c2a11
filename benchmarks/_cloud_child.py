#!/usr/bin/env python
"""One measured task of the cloud benchmark (``bench_cloud.py``), run in a fresh process.

Started with OUR venv's python (``--impl ours`` / ``ours-sharded``) or the REFERENCE venv's
(``--impl reference``), always with ``-I`` from a neutral folder; both packages import as
``zarr_vectors``, so the adapter checks which one it got. Every request goes to the S3
server through the latency proxy (``--endpoint``); the proxy's request log is read through
its control path (``tests/_latency.py``: ``remote_mark`` / ``remote_traffic``), outside the
clock.

Tasks: ``write`` (generate, then time the write alone) and ``query`` (open, then per box one
warm-up query checked against numpy brute force and ``--reps`` timed ones, each with the
requests, waves and bytes it caused). The last line of stdout is a JSON object.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import statistics
import sys
import time
import warnings
from typing import Any

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests"))
from _latency import remote_mark, remote_traffic  # noqa: E402

del sys.path[0]
warnings.simplefilter("ignore")

REFERENCE_VERSION = "0.9.2"
ATTR = "intensity"
CHUNK, BIN, LO, HI, NDIM = 100.0, 25.0, 0.0, 1000.0, 3
SIDE = 215.4  # a cube of 1 % of [0, 1000]^3
RADIUS, CENTRE = 499.0, 500.0
SETTLE_S = 0.05  # the proxy records a request just after answering it


def generate_points(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """bench_peers' data: float32 uniform in [0, 1000)^3 and one float32 attribute."""
    rng = np.random.default_rng(seed)
    pos = rng.random((n, NDIM), dtype=np.float32) * np.float32(HI - LO) + np.float32(LO)
    return pos, rng.random(n, dtype=np.float32)


def generate_mesh(subdivisions: int) -> tuple[np.ndarray, np.ndarray]:
    """``trimesh.creation.icosphere(subdivisions)`` scaled by 499, offset by 500, as float32."""
    import trimesh

    m = trimesh.creation.icosphere(subdivisions=subdivisions)
    verts = (np.asarray(m.vertices, np.float64) * RADIUS + CENTRE).astype(np.float32)
    return verts, np.ascontiguousarray(np.asarray(m.faces, np.int64))


def boxes(
    kind: str, seed: int, count: int, verts: np.ndarray | None
) -> list[tuple[list[float], list[float]]]:
    """1 % cubes: uniform in the volume (points), or centred on random vertices (mesh: the
    sphere is a shell, most of the volume is empty); float32-exact corners."""
    rng = np.random.default_rng(seed + 1)
    out = []
    for _ in range(count):
        if kind == "mesh":
            assert verts is not None
            lo = np.clip(verts[rng.integers(len(verts))].astype(np.float64) - SIDE / 2, LO, HI - SIDE)
        else:
            lo = rng.uniform(LO, HI - SIDE, NDIM)
        lo32 = lo.astype(np.float32)
        out.append((lo32.tolist(), (lo32 + np.float32(SIDE)).tolist()))
    return out


def _takes_shards(zv: Any) -> bool:
    return "shards" in inspect.signature(zv.write_points).parameters


class Ours:
    def __init__(self, sharded: bool) -> None:
        sys.path[:0] = [REPO, os.path.join(REPO, "codecs")]
        import zarr_vectors as zv

        if getattr(zv, "__version__", None) == REFERENCE_VERSION or not os.path.realpath(
            zv.__file__
        ).startswith(os.path.realpath(REPO) + os.sep):
            raise SystemExit(f"ours imported {zv.__file__}, not the checkout {REPO}")
        self.zv = zv
        # zstd: what the reference's public API stores every array with (ours defaults to none);
        # "ours" one object per cell (shards=None), "ours-sharded" shards="auto" (the S3 default)
        sharding = {"shards": "auto" if sharded else None} if _takes_shards(zv) else {}
        self.extra: dict[str, Any] = {"compression": "zstd"} | sharding

    def write_points(self, url: str, opts: dict[str, Any], pos: np.ndarray, attr: np.ndarray) -> None:
        self.zv.write_points(
            url,
            pos,
            chunk_shape=(CHUNK,) * NDIM,
            bin_shape=(BIN,) * NDIM,
            bounds=([LO] * NDIM, [HI] * NDIM),
            attributes={ATTR: attr},
            storage_options=opts,
            **self.extra,
        )

    def write_mesh(self, url: str, opts: dict[str, Any], verts: np.ndarray, faces: np.ndarray) -> None:
        import inspect

        if "shards" in self.extra and "shards" not in inspect.signature(self.zv.write_mesh).parameters:
            raise SystemExit("ours-sharded: write_mesh has no shards= (write_points has)")
        self.zv.write_mesh(
            url,
            verts,
            faces,
            chunk_shape=CHUNK,
            bounds=([LO] * NDIM, [HI] * NDIM),
            storage_options=opts,
            **self.extra,
        )

    def open(self, url: str, opts: dict[str, Any]) -> Any:
        ds = self.zv.open(url, storage_options=opts)
        ds.level(0)  # metadata read at open, as the reference does
        return ds

    def query(self, ds: Any, lo: list[float], hi: list[float]) -> Any:
        return ds.query(bbox=(lo, hi))


class Reference:
    """zarr-vectors 0.9.2 through its public API: ``create(Schema(...))`` + ``add_points`` /
    ``add_mesh`` (its defaults for an s3:// target), ``open(...).select(bbox=...).read()``."""

    def __init__(self) -> None:
        import zarr_vectors as zv

        if getattr(zv, "__version__", None) != REFERENCE_VERSION:
            raise SystemExit(f"--impl reference imported zarr_vectors from {zv.__file__}")
        self.zv = zv

    def _storage(self, opts: dict[str, Any]) -> Any:
        return self.zv.StorageOptions(backend="fsspec", options=opts)

    def _schema(self, kind: str, **layout: Any) -> Any:
        zv = self.zv
        return zv.Schema(
            ndim=NDIM,
            bounds=([LO] * NDIM, [HI] * NDIM),
            kind=kind,
            position_dtype="float32",
            layout=zv.Layout(cell_size=(CHUNK,) * NDIM, **layout),
        )

    def write_points(self, url: str, opts: dict[str, Any], pos: np.ndarray, attr: np.ndarray) -> None:
        schema = self._schema("point_cloud", subcells=int(CHUNK // BIN))
        self.zv.create(url, schema=schema, storage=self._storage(opts)).add_points(
            pos, attributes={ATTR: attr}
        )

    def write_mesh(self, url: str, opts: dict[str, Any], verts: np.ndarray, faces: np.ndarray) -> None:
        self.zv.create(url, schema=self._schema("mesh"), storage=self._storage(opts)).add_mesh(verts, faces)

    def open(self, url: str, opts: dict[str, Any]) -> Any:
        return self.zv.open(url, storage=self._storage(opts))

    def query(self, ds: Any, lo: list[float], hi: list[float]) -> Any:
        return ds.select(bbox=(lo, hi)).read()


def check(kind: str, r: Any, data: tuple[np.ndarray, np.ndarray], lo: list[float], hi: list[float]) -> bool:
    """The answer against numpy brute force: the same rows (points: positions and attribute;
    mesh: the vertices inside and the number of faces with all three inside)."""
    first, second = data
    got = np.asarray(r.positions, np.float32).reshape(-1, NDIM)
    if kind == "mesh":
        inside = np.all((first >= np.float32(lo)) & (first <= np.float32(hi)), axis=1)
        want = first[inside]
        faces = np.asarray(r.faces).reshape(-1, 3)
        same_faces = len(faces) == int(inside[second].all(axis=1).sum())
        return same_faces and np.array_equal(_sort(got), _sort(want))
    inside = np.all((first >= np.float32(lo)) & (first <= np.float32(hi)), axis=1)
    got_attr = (
        np.asarray(r.attributes[ATTR], np.float32).reshape(-1, 1)
        if len(got)
        else np.zeros((0, 1), np.float32)
    )
    return np.array_equal(
        _sort(np.hstack([got, got_attr])), _sort(np.hstack([first[inside], second[inside].reshape(-1, 1)]))
    )


def _sort(rows: np.ndarray) -> np.ndarray:
    return rows[np.lexsort(rows.T[::-1])] if len(rows) else rows


def traffic_of(proxy: str, mark: int) -> dict[str, Any]:
    time.sleep(SETTLE_S)
    return remote_traffic(proxy, mark)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--impl", choices=("ours", "ours-sharded", "reference"), required=True)
    ap.add_argument("--task", choices=("write", "query"), required=True)
    ap.add_argument("--kind", choices=("points", "mesh"), required=True)
    ap.add_argument("--n", type=int, default=1_000_000, help="points, or the icosphere's subdivisions")
    ap.add_argument("--url", required=True)
    ap.add_argument("--endpoint", required=True, help="the proxy in front of the S3 server")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--boxes", type=int, default=5)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    lib = Reference() if a.impl == "reference" else Ours(a.impl == "ours-sharded")
    opts = {
        "key": "testing",
        "secret": "testing",
        "client_kwargs": {"endpoint_url": a.endpoint, "region_name": "us-east-1"},
    }
    data = generate_mesh(a.n) if a.kind == "mesh" else generate_points(a.n, a.seed)
    out: dict[str, Any] = {"impl": a.impl, "kind": a.kind, "n": a.n}
    if a.task == "write":
        mark = remote_mark(a.endpoint)
        t = time.perf_counter()
        (lib.write_mesh if a.kind == "mesh" else lib.write_points)(a.url, opts, *data)
        out["write_s"] = time.perf_counter() - t
        out["write_traffic"] = traffic_of(a.endpoint, mark)
        print(json.dumps(out))
        return
    mark = remote_mark(a.endpoint)
    t = time.perf_counter()
    ds = lib.open(a.url, opts)
    out["open_s"] = time.perf_counter() - t
    out["open_traffic"] = traffic_of(a.endpoint, mark)
    per_box = []
    waves_seen = []
    mismatches = 0
    for lo, hi in boxes(a.kind, a.seed, a.boxes, data[0] if a.kind == "mesh" else None):
        mismatches += not check(a.kind, lib.query(ds, lo, hi), data, lo, hi)  # warm-up, checked
        times, traffic = [], []
        for _ in range(a.reps):
            mark = remote_mark(a.endpoint)
            t = time.perf_counter()
            lib.query(ds, lo, hi)
            times.append(time.perf_counter() - t)
            traffic.append(traffic_of(a.endpoint, mark))
            waves_seen.append(traffic[-1]["waves"])
        per_box.append(
            {
                "s": statistics.median(times),
                **{
                    k: statistics.median(tr[k] for tr in traffic)
                    for k in ("requests", "waves", "depth", "bytes_out")
                },
            }
        )
    out["box"] = {k: statistics.median(b[k] for b in per_box) for k in per_box[0]}
    out["box_max_waves"] = max(waves_seen)
    out["mismatches"] = mismatches
    print(json.dumps(out))


if __name__ == "__main__":
    main()
