"""Write a small point cloud with attributes, objects and groups; query it three ways.

Run: python examples/points_quickstart.py [STORE]   (default: a temporary directory)
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np

import zarr_vectors as zv


def main(store: Path) -> None:
    rng = np.random.default_rng(42)
    n = 20_000
    positions = rng.uniform(0, 500, (n, 3)).astype(np.float32)  # cell centroids, micrometres
    cell_id = np.arange(n) // 4  # four detections per cell
    ds = zv.write_points(
        store,
        positions,
        chunk_shape=100,  # one spatial chunk per 100 µm cube
        bin_shape=25,  # 4 x 4 x 4 bins per chunk: partial boxes test only the bins they touch
        bounds=([0, 0, 0], [500, 500, 500]),
        attributes={"intensity": rng.gamma(2, 1, n).astype(np.float32)},
        object_ids=cell_id,
        object_attributes={"cell_type": rng.integers(0, 5, n // 4).astype(np.uint8)},
        groups=[np.flatnonzero(np.arange(n // 4) % 2 == g) for g in range(2)],
        units="micrometer",
        overwrite=True,
    )
    print(ds)

    box = ds.query(bbox=([100, 100, 100], [200, 250, 300]))
    print(f"box: {len(box)} points, mean intensity {box.attributes['intensity'].mean():.2f}")
    inside = np.all((positions >= [100, 100, 100]) & (positions <= [200, 250, 300]), axis=1)
    assert len(box) == int(inside.sum())

    cells = ds.objects([10, 11])
    print(f"cells 10 and 11: {len(cells)} points, ids {sorted(set(cells.object_ids.tolist()))}")
    print(f"cell types of cells 0-4: {ds.object_attributes('cell_type', [0, 1, 2, 3, 4]).tolist()}")
    print(f"group 1 holds {len(ds.groups()[1])} cells")


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(Path(sys.argv[1]))
    else:
        with tempfile.TemporaryDirectory() as tmp:
            main(Path(tmp) / "cells.zarr")
