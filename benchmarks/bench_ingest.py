"""Ingest targets of issue 32, each figure with the load average (the machine is shared):

* ``meshes``: ``N`` multi-resolution Draco meshes in a sharded precomputed layer on local
  disk (written by our ``export_neuroglancer``), ingested by ``ingest_neuroglancer`` at
  ``memory_limit=1 GiB`` against cloud-volume's own download of the same meshes
  (``cv.mesh.get``, LOD 0) followed by ``write_meshes`` on the same grid; each side runs in
  its own child process, back to back. A child's peak RSS is what the child reports itself:
  its own ``VmHWM`` and the largest ``ru_maxrss`` of its worker processes. (Not ``wait4``'s
  ``ru_maxrss`` of the child: a child started by ``subprocess`` borrows the parent's memory
  until its ``exec``, so that figure is at least the bench parent's own peak, which holds
  the N meshes and ran the export; a child printing one line reports 1.5 GiB after a parent
  that once held 1.5 GiB.) The layer is built once per N and kept under ``--cache DIR``
  (default ``/tmp/zvb-ingest``): the export of 10,000 meshes takes 5-8 minutes.
* ``swc``: ``N`` SWC files, ``ingest_swc_files`` with one worker then two, one checkpoint.

Run: ``python benchmarks/bench_ingest.py {meshes,swc,all} [N] [--cache DIR]`` (default 2000;
the issue's targets are 10,000, and the times here scale linearly with N).
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

CHUNK = 2000.0
EXTENT = 40000.0


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load {one:.1f} {five:.1f} {fifteen:.1f}"


def _peak_rss_mib() -> float:
    """This process's peak RSS (``VmHWM``) or its waited-for children's, the larger, in MiB."""
    with open("/proc/self/status") as fh:
        own = next(int(line.split()[1]) for line in fh if line.startswith("VmHWM"))
    return max(own, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024


def _child(mode: str, layer: str, dst: str, ids_file: str) -> None:
    """One side of the mesh comparison (run as a child process)."""
    import zarr_vectors as zv
    from zarr_vectors.io.neuroglancer import ingest_neuroglancer

    grid = {"chunk_shape": CHUNK, "bounds": ([0.0] * 3, [EXTENT] * 3)}
    start = time.perf_counter()
    if mode == "ours":
        ingest_neuroglancer(layer, dst, progress=False, memory_limit=1 << 30, **grid)
    else:
        from cloudvolume import CloudVolume

        ids = np.load(ids_file)
        scale = {"key": "1", "resolution": [1, 1, 1], "voxel_offset": [0, 0, 0], "size": [40000] * 3,
                 "chunk_sizes": [[64] * 3], "encoding": "raw"}  # fmt: skip
        info = {
            "type": "segmentation",
            "data_type": "uint64",
            "num_channels": 1,
            "mesh": "mesh",
            "scales": [scale],
        }
        cv = CloudVolume(f"precomputed://file://{layer}", info=info, progress=False)
        got = cv.mesh.get(ids.tolist(), lod=0)
        meshes = [(got[int(i)].vertices, got[int(i)].faces) for i in ids.tolist()]
        zv.write_meshes(dst, meshes, object_ids=ids, **grid)
    print(f"{time.perf_counter() - start:.3f} {_peak_rss_mib():.1f}")


def _run_child(mode: str, layer: Path, dst: Path, ids_file: Path) -> tuple[float, float]:
    """``(seconds, peak RSS MiB)`` of one child, as the child measured them."""
    proc = subprocess.Popen(
        [sys.executable, __file__, "child", mode, str(layer), str(dst), str(ids_file)],
        stdout=subprocess.PIPE,
        text=True,
    )
    out = proc.stdout.read() if proc.stdout else ""
    if proc.wait():
        raise RuntimeError(f"{mode} child failed ({proc.returncode})")
    secs, rss = out.strip().splitlines()[-1].split()
    return float(secs), float(rss)


def _layer(n: int, cache: Path) -> Path:
    """The folder of a sharded multilod layer of ``n`` icospheres (``ng/cells``, ``ids.npy``),
    made once and kept in ``cache``."""
    import trimesh

    import zarr_vectors as zv
    from zarr_vectors.neuroglancer import export_neuroglancer

    root = cache / f"meshes-{n}"
    if (root / "ids.npy").exists():
        return root
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    rng = np.random.default_rng(0)
    sphere = trimesh.creation.icosphere(subdivisions=3)
    ids = np.sort(rng.choice(2**62, n, replace=False).astype(np.uint64) + np.uint64(2**63))
    items = [
        ((sphere.vertices * rng.uniform(200, 600) + rng.uniform(1000, EXTENT - 1000, 3)).astype(np.float32),
         sphere.faces)
        for _ in range(n)
    ]  # fmt: skip
    start = time.perf_counter()
    zv.write_meshes(root / "cells.zarr", items, object_ids=ids, chunk_shape=CHUNK)
    export_neuroglancer(root / "cells.zarr", root / "ng", mesh_format="multilod", sharding=True)
    print(
        f"setup: {n} meshes of {len(sphere.faces)} triangles exported in {time.perf_counter() - start:.1f} s"
    )
    np.save(root / "ids.npy", ids)  # last: marks the layer complete
    return root


def meshes(n: int, cache: Path) -> None:
    root = _layer(n, cache)
    with tempfile.TemporaryDirectory() as tmp:
        secs = {}
        for mode in ("ours", "cloudvolume"):
            before = _load()
            secs[mode], rss = _run_child(
                mode, root / "ng" / "cells", Path(tmp) / f"{mode}.zarr", root / "ids.npy"
            )
            print(
                f"{n} multilod Draco meshes, {mode}: {secs[mode]:.2f} s, peak RSS {rss:.0f} MiB "
                f"({before}; after: {_load()})"
            )
        print(
            f"ours vs cloud-volume download + write_meshes: {secs['cloudvolume'] / secs['ours']:.2f}x faster"
        )


def swc(n: int) -> None:
    from zarr_vectors.io.swc import write_swc
    from zarr_vectors.io.swc_folder import ingest_swc_files

    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "swc"
        folder.mkdir()
        for k in range(n):
            m = int(rng.integers(200, 400))
            pos = rng.uniform(0, 1000, 3) + np.cumsum(rng.normal(0, 2, (m, 3)), axis=0)
            write_swc(folder / f"{10**15 + k}.swc", pos.clip(0, 1999), np.arange(-1, m - 1))
        files = sorted(folder.glob("*.swc"))
        times = {}
        for workers in (1, 2):
            before = _load()
            start = time.perf_counter()
            ingest_swc_files(
                Path(tmp) / f"w{workers}.zarr",
                files,
                workers=workers,
                checkpoint=n,
                chunk_shape=250.0,
                bounds=([0.0] * 3, [2000.0] * 3),
            )
            times[workers] = time.perf_counter() - start
            print(f"{n} SWC files, workers={workers}: {times[workers]:.2f} s ({before}; after: {_load()})")
        print(f"speed-up 2 vs 1 worker: {times[1] / times[2]:.2f}x")


if __name__ == "__main__":
    if sys.argv[1:2] == ["child"]:
        _child(*sys.argv[2:6])
    else:
        args = sys.argv[1:]
        cache = Path("/tmp/zvb-ingest")
        if "--cache" in args:
            at = args.index("--cache")
            cache = Path(args[at + 1])
            del args[at : at + 2]
        what = args[0] if args else "all"
        count = int(args[1]) if len(args) > 1 else 2000
        if what in ("meshes", "all"):
            meshes(count, cache)
        if what in ("swc", "all"):
            swc(count)
