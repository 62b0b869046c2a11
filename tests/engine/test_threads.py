"""Many threads reading one store at once get exactly the single-threaded answers.

The reads run in a child interpreter: a decoder that is not thread-safe can crash the
process (a shared zstd context once did), which must fail this test, not kill pytest.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.slow  # eight threads over four codecs in a child interpreter

SCRIPT = textwrap.dedent(
    """
    import sys, threading
    import numpy as np, trimesh
    import zarr_vectors as zv

    root = sys.argv[1]
    rng = np.random.default_rng(7)
    pts = rng.uniform(0, 100, (120_000, 3)).astype(np.float32)
    ids = rng.integers(0, 50, len(pts))
    stores = {}
    for comp in ("zstd", "gzip", "blosc"):
        path = f"{root}/{comp}.zarr"
        zv.write_points(path, pts, chunk_shape=50, compression=comp, object_ids=ids,
                        attributes={"a": np.arange(len(pts), dtype=np.float64)})
        stores[comp] = path
    sphere = trimesh.creation.icosphere(subdivisions=5)
    path = f"{root}/draco.zarr"
    zv.write_mesh(path, sphere.vertices * 499 + 500, sphere.faces, chunk_shape=250, encoding="draco",
                  compression="zstd")
    stores["draco"] = path

    BOX = ([10, 20, 5], [80, 70, 90])
    MESH_BOX = ([0, 0, 0], [600, 1000, 1000])

    def answers(ds, mesh):
        if mesh:
            q = ds.query(MESH_BOX)
            r = ds.read()
            return [q.positions, q.faces, r.positions, r.faces]
        q, r, o = ds.query(BOX), ds.read(), ds.objects([3, 17, 41])
        return [q.positions, q.attributes["a"], q.object_ids, r.positions, r.attributes["a"], o.positions]

    def same(a, b):
        return len(a) == len(b) and all(x.dtype == y.dtype and np.array_equal(x, y) for x, y in zip(a, b))

    for name, path in stores.items():
        mesh = name == "draco"
        expected = answers(zv.open(path), mesh)
        shared = zv.open(path)
        failures = []

        def work(own):
            try:
                ds = zv.open(path) if own else shared
                for _ in range(3):
                    if not same(answers(ds, mesh), expected):
                        failures.append("different answer")
            except Exception as exc:  # reported to the parent, which fails the test
                failures.append(repr(exc))

        for own in (False, True):
            threads = [threading.Thread(target=work, args=(own,)) for _ in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        if failures:
            print(name, failures[:3])
            sys.exit(1)
        print(name, "ok")
    """
)


def test_eight_threads_read_zstd_gzip_blosc_and_draco_stores_exactly(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path)], capture_output=True, text=True, timeout=900
    )
    assert proc.returncode == 0, f"child exited with {proc.returncode}\n{proc.stdout}\n{proc.stderr[-3000:]}"
    assert proc.stdout.split() == ["zstd", "ok", "gzip", "ok", "blosc", "ok", "draco", "ok"]
