#!/usr/bin/env python
"""Write a set of stores with the REFERENCE implementation (PyPI ``zarr-vectors`` 0.9.2).

Run only with the reference venv's interpreter::

    .cache/reference-venv/bin/python -I tests/validate/reference_writer.py OUT_DIR [NAME ...]

Each store is made through the reference's public api (``zv.create`` with a ``Schema``
and ``Layout``, then ``add_points`` / ``add_polylines`` / ``add_lines`` / ``add_graph`` /
``add_mesh``, and ``build_pyramid``). Afterwards the reference's own validator
(``Dataset.validate(level=5)``) is asked about each store. Stdout is one JSON object:
``{name: {"path": ..., "valid": bool, "errors": [...]}}``; a store whose writer raised
gets ``"write_error"`` instead.
"""

from __future__ import annotations

import json
import sys
import traceback
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

warnings.simplefilter("ignore")

try:
    import zarr_vectors as zv
except ImportError as exc:  # pragma: no cover - wrong interpreter
    sys.stderr.write(f"reference_writer: cannot import the reference zarr_vectors ({exc})\n")
    sys.exit(3)
if getattr(zv, "__version__", None) != "0.9.2":
    sys.stderr.write(
        f"reference_writer: zarr_vectors {getattr(zv, '__version__', '?')} is not the reference 0.9.2\n"
    )
    sys.exit(3)

RNG = np.random.default_rng(7)
BOUNDS = ([0.0, 0.0, 0.0], [400.0, 400.0, 400.0])


def _create(path: Path, kind: str, *, pack: bool = False, subcells: int = 2, bounds: Any = BOUNDS) -> Any:
    layout = zv.Layout(cell_size=(100.0, 100.0, 100.0), subcells=subcells, pack=pack)
    schema = zv.Schema(ndim=3, bounds=bounds, kind=kind, layout=layout)
    return zv.create(str(path), schema=schema)


def _walks(n: int) -> list[np.ndarray]:
    out = []
    for _ in range(n):
        steps = RNG.normal(0, 15, (int(RNG.integers(4, 40)), 3))
        out.append(np.clip(np.cumsum(steps, axis=0) + RNG.uniform(120, 280, 3), 1, 399).astype(np.float32))
    return out


def points(path: Path) -> None:
    ds = _create(path, "point_cloud")
    n = 300
    ds.add_points(
        RNG.uniform(0, 400, (n, 3)).astype(np.float32), attributes={"size": RNG.random(n).astype(np.float32)}
    )


def points_objects(path: Path) -> None:
    ds = _create(path, "point_cloud", bounds=([-150.0] * 3, [250.0] * 3))
    n = 300
    ids = RNG.integers(0, 12, n)
    ds.add_points(
        RNG.uniform(-150, 250, (n, 3)).astype(np.float32),
        object_ids=ids,
        attributes={"rgb": RNG.integers(0, 255, (n, 3)).astype(np.uint8)},
        object_attributes={"weight": RNG.random(12)},
        groups={0: [0, 1, 2], 1: [5, 7]},
    )


def points_sharded(path: Path) -> None:
    ds = _create(path, "point_cloud", pack=True)
    ds.add_points(RNG.uniform(0, 400, (200, 3)).astype(np.float32))


def polylines(path: Path) -> None:
    ds = _create(path, "polyline")
    walks = _walks(25)
    ds.add_polylines(walks, attributes={"t": [RNG.random(len(w)).astype(np.float32) for w in walks]})


def streamlines(path: Path) -> None:
    ds = _create(path, "streamline")
    ds.add_polylines(_walks(20), streamlines=True)


def lines(path: Path) -> None:
    ds = _create(path, "line")
    ds.add_lines(RNG.uniform(1, 399, (60, 2, 3)).astype(np.float32))


def graph(path: Path) -> None:
    ds = _create(path, "graph")
    n = 120
    edges = np.stack([RNG.integers(0, n, 200), RNG.integers(0, n, 200)], axis=1)
    ds.add_graph(
        RNG.uniform(0, 400, (n, 3)).astype(np.float32),
        edges,
        edge_attributes={"w": RNG.random(200).astype(np.float32)},
        object_ids=RNG.integers(0, 3, n),
    )


def skeleton(path: Path) -> None:
    ds = _create(path, "skeleton")
    n = 150
    parent = np.array([int(RNG.integers(0, i)) for i in range(1, n)])
    pos = np.cumsum(RNG.normal(0, 20, (n, 3)), axis=0)
    pos = np.clip(pos - pos.min(0) + 20, 1, 399).astype(np.float32)
    edges = np.stack([np.arange(1, n), parent], axis=1)
    ds.add_graph(pos, edges, tree=True)


def mesh(path: Path) -> None:
    ds = _create(path, "mesh")
    # A closed, subdivided octahedron around the centre, crossing several chunks.
    verts = np.array([[1, 0, 0], [-1, 0, 0], [0, 1, 0], [0, -1, 0], [0, 0, 1], [0, 0, -1]], float)
    faces = np.array([[0, 2, 4], [2, 1, 4], [1, 3, 4], [3, 0, 4], [2, 0, 5], [1, 2, 5], [3, 1, 5], [0, 3, 5]])
    for _ in range(2):
        mids: dict[tuple[int, int], int] = {}
        out = []
        vl = list(verts)

        def mid(a: int, b: int) -> int:
            key = (min(a, b), max(a, b))
            if key not in mids:
                m = (vl[a] + vl[b]) / 2
                vl.append(m / np.linalg.norm(m))
                mids[key] = len(vl) - 1
            return mids[key]

        for a, b, c in faces:
            ab, bc, ca = mid(a, b), mid(b, c), mid(c, a)
            out += [[a, ab, ca], [b, bc, ab], [c, ca, bc], [ab, bc, ca]]
        verts, faces = np.array(vl), np.array(out)
    ds.add_mesh((verts * 150 + 200).astype(np.float32), faces)


def pyramid(path: Path) -> None:
    points_objects(path)
    ds = zv.open(str(path), mode="r+")
    ds.build_pyramid(factors=[(2.0, 1.0)])


WRITERS: dict[str, Callable[[Path], None]] = {
    "points": points,
    "points_objects": points_objects,
    "points_sharded": points_sharded,
    "polylines": polylines,
    "streamlines": streamlines,
    "lines": lines,
    "graph": graph,
    "skeleton": skeleton,
    "mesh": mesh,
    "pyramid": pyramid,
}


def main(argv: list[str]) -> int:
    if not argv:
        sys.stderr.write(__doc__ or "")
        return 2
    out_dir = Path(argv[0])
    out_dir.mkdir(parents=True, exist_ok=True)
    names = argv[1:] or list(WRITERS)
    report: dict[str, Any] = {}
    for name in names:
        path = out_dir / f"{name}.zv"
        entry: dict[str, Any] = {"path": str(path)}
        try:
            WRITERS[name](path)
        except Exception as exc:  # the reference refused: report it, keep going
            entry["write_error"] = f"{type(exc).__name__}: {exc}"
            entry["traceback"] = traceback.format_exc()
            report[name] = entry
            continue
        res = zv.open(str(path)).validate(level=5)
        entry.update(valid=bool(res.ok), errors=list(res.errors), warnings=list(res.warnings))
        report[name] = entry
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
