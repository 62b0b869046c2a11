"""Helpers of the streaming writers' tests: a store's files for byte comparison, and the peak
traced allocation of a streamed write measured in a child process (``tracemalloc`` started
after the imports, so only the writer and its batches count)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from zarr_vectors.storage import GENERATION_KEY


def stored_files(path: Path) -> dict[str, bytes]:
    """Every stored file of a local store; the root's write generation (new at every write) left out."""
    out = {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}
    root = json.loads(out.pop("zarr.json"))
    del root["attributes"][GENERATION_KEY]
    out["zarr.json"] = json.dumps(root, sort_keys=True).encode()
    return out


#: The child: ``count`` batches of 200 neuron-like trees of 200 vertices each (float32
#: positions, int64 parents or edges, float32 radius: 0.94 MiB a batch for skeletons, 1.25 MiB
#: for graphs; for meshes, 200 ribbons of 196 vertices and 338 faces along the same walks,
#: 2.0 MiB), made one at a time and streamed with ``memory_limit``.
_CHILD = textwrap.dedent(
    """
    import sys, tempfile, tracemalloc
    import numpy as np
    import zarr_vectors as zv

    def batches(count, trees=200, size=200):
        rng = np.random.default_rng(0)
        for _ in range(count):
            par = np.tile(np.arange(-1, size - 1), trees)
            for t in range(trees):
                at = np.arange(25, size, 25)
                par[t * size + at] = rng.integers(0, at)
            par = np.where(par >= 0, par + np.repeat(np.arange(trees) * size, size), -1)
            walk = np.cumsum(rng.normal(0, 3, (trees, size, 3)), axis=1) + rng.uniform(100, 900, (trees, 1, 3))
            pos = np.clip(walk.reshape(-1, 3), 0, 1000).astype(np.float32)
            yield pos, par, np.repeat(np.arange(trees), size), rng.random(trees * size).astype(np.float32)

    kind, count, limit = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    grid = dict(chunk_shape=100, bounds=([0] * 3, [1000] * 3))
    with tempfile.TemporaryDirectory() as tmp:
        tracemalloc.start()
        draco = {"encoding": "draco"} if kind == "draco-meshes" else {}
        kind = "meshes" if draco else kind
        with zv.create(tmp + "/s", kind, memory_limit=limit, **grid, **draco) as w:
            for k, (pos, par, tree, radius) in enumerate(batches(count)):
                if kind == "skeletons":
                    w.append(pos, par, attributes={"radius": radius})
                elif kind == "streamlines":  # each tree's walk as one line
                    w.append(list(pos.reshape(200, 200, 3)), attributes={"fa": list(radius.reshape(200, 200))})
                elif kind == "meshes":  # each tree's walk as a ribbon of 196 vertices and 338 triangles
                    i, j = np.meshgrid(np.arange(13), np.arange(13), indexing="ij")
                    quads = (i * 14 + j).ravel()
                    faces = np.concatenate([np.stack([quads, quads + 14, quads + 1], 1),
                                            np.stack([quads + 1, quads + 14, quads + 15], 1)])
                    ribbon = np.repeat(np.arange(14), 14)[:, None]
                    sheets = [(np.clip(pos[t * 200 : t * 200 + 196] + ribbon, 0, 1000), faces)
                              for t in range(200)]
                    w.append(sheets, object_ids=np.arange(200) + 200 * k)
                else:
                    child = np.flatnonzero(par >= 0)
                    w.append(pos, np.stack([par[child], child], 1), attributes={"radius": radius},
                             object_ids=tree + 200 * k, edge_attributes={"length": radius[child]})
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        ds = zv.open(tmp + "/s")
        print(peak, ds.vertex_count(), len(ds.object_ids()))
    """
)


def peak_of(kind: str, count: int, limit: int) -> tuple[int, int, int]:
    """(peak traced bytes, vertices, objects) of streaming ``count`` batches of ``kind``
    (``"skeletons"``, ``"graphs"``, ``"streamlines"``, ``"meshes"`` or ``"draco-meshes"``)."""
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, kind, str(count), str(limit)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    peak, vertices, objects = map(int, out.stdout.split())
    return peak, vertices, objects
