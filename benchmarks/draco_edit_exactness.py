#!/usr/bin/env python
"""Can an edit of a Draco mesh cell answer as a one-shot write of the final meshes would?

Run from the repository root with the project's venv (not a timing; results in
``benchmarks/RESULTS-draco-edits.txt``)::

    .venv/bin/python benchmarks/draco_edit_exactness.py --trials 300 --seed 0

Each trial builds one chunk holding two random triangle sheets ``a`` and ``b`` (2-7 x 2-7
vertices), with random ``quantization_bits`` (4-19) and ``compression_level`` (0-10), and
compares decoded vertex positions, each input vertex against itself (never in decoded order):

- ``data box`` (what the writers do today, :func:`zarr_vectors._draco.encode_cell`: Draco
  quantizes over the cell's own bounding box):

  * ``re-encode no-op``: encoding the decoded cell again gives the same positions (what an edit
    that re-encodes a touched cell from its decoded rows needs for the rows it keeps);
  * ``subset = one-shot``: the decoded rows of ``a`` in the joint cell equal those of a cell
    holding ``a`` alone (what a one-shot write gives after ``b`` is deleted);

- ``chunk box`` (DracoPy's ``quantization_origin`` / ``quantization_range`` set to a fixed
  16-unit chunk box that holds both sheets): the same two properties;
- ``lib+chunk``: the library's own encoder (its Edgebreaker attempt, vertex roles, duplicate
  separation) with that fixed box given to every DracoPy call it makes (a shim in this script;
  the library has no such option today; the codec's self-check bound is widened to the fixed
  box's step too, else it refuses the blobs), to see whether the codec's extra steps keep
  exactness.

An edit answers exactly as a one-shot write only where both properties hold in every cell.
"""

from __future__ import annotations

import argparse
import os
import sys
from types import ModuleType
from typing import Any

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def _sheet(rng: np.random.Generator, n: int, off: np.ndarray, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """An n x n sheet of vertices (random heights), two triangles per square."""
    u, v = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    pts = np.stack([u.ravel(), v.ravel(), rng.random(n * n)], axis=1) * scale + off
    i = (u[:-1, :-1] * n + v[:-1, :-1]).ravel()
    faces = np.concatenate([np.stack([i, i + n, i + 1], 1), np.stack([i + 1, i + n, i + n + 1], 1)])
    return pts.astype(np.float32), faces.astype(np.int64)


def _data_box(pts: np.ndarray, faces: np.ndarray, bits: int, level: int) -> np.ndarray:
    """Decoded position of each input vertex, quantized over the cell's own box (the library)."""
    from zarr_vectors._draco import decode_cell, encode_cell

    blob, order = encode_cell(pts, faces, quantization_bits=bits, compression_level=level)
    dec, _ = decode_cell(blob)
    out = np.empty_like(dec)
    out[order] = dec
    return out


def _chunk_box(pts: np.ndarray, faces: np.ndarray, bits: int, level: int, lo: np.ndarray) -> np.ndarray:
    """Decoded position of each input vertex, quantized over the fixed box [lo, lo + 16)."""
    import DracoPy

    blob = DracoPy.encode(
        pts,
        faces=faces.astype(np.uint32),
        quantization_bits=bits,
        compression_level=level,
        quantization_range=16.0,
        quantization_origin=lo,
        preserve_order=True,
    )
    return np.asarray(DracoPy.decode(blob).points, np.float32)


class _FixedBox:
    """DracoPy with every ``encode`` quantizing over the box [lo, lo + 16)."""

    def __init__(self, dracopy: ModuleType, lo: np.ndarray) -> None:
        self._dracopy, self._lo = dracopy, lo

    def __getattr__(self, name: str) -> Any:
        return getattr(self._dracopy, name)

    def encode(self, *args: Any, **kw: Any) -> bytes:
        return bytes(self._dracopy.encode(*args, quantization_range=16.0, quantization_origin=self._lo, **kw))


def _library_chunk_box(
    pts: np.ndarray, faces: np.ndarray, bits: int, level: int, lo: np.ndarray
) -> np.ndarray:
    """The library's encoder with the fixed box [lo, lo + 16) (see :class:`_FixedBox`)."""
    import DracoPy
    from zarr_vectors_draco import cell

    def bound(positions: np.ndarray, quantization_bits: int) -> float:
        # the codec's self-check, with the fixed box's step in place of the data box's
        p = np.asarray(positions, np.float32).reshape(-1, 3)
        largest = np.float32(max(float(np.abs(p).max()) if len(p) else 0.0, 16.0))
        return 16.0 / (2**quantization_bits - 1) / 2 + 8 * float(np.spacing(largest))

    saved = cell._dracopy_module, cell.quantization_bound
    cell._dracopy_module = _FixedBox(DracoPy, lo)  # type: ignore[assignment]
    cell.quantization_bound = bound
    try:
        return _data_box(pts, faces, bits, level)
    finally:
        cell._dracopy_module, cell.quantization_bound = saved


def _decoded(
    box: str, pts: np.ndarray, faces: np.ndarray, bits: int, level: int, lo: np.ndarray
) -> np.ndarray:
    """Decoded position of each input vertex with the ``data`` or the ``chunk`` box."""
    if box == "data":
        return _data_box(pts, faces, bits, level)
    if box == "chunk":
        return _chunk_box(pts, faces, bits, level, lo)
    return _library_chunk_box(pts, faces, bits, level, lo)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    boxes = ("data", "chunk", "lib+chunk")
    counts = {name: [0, 0] for name in boxes}
    drift = 0.0
    for _ in range(args.trials):
        bits, level = int(rng.integers(4, 20)), int(rng.integers(0, 11))
        lo = (rng.integers(0, 50, 3) * 16).astype(np.float32)
        a = _sheet(rng, int(rng.integers(2, 8)), lo + rng.random(3) * 8, float(rng.random() * 1.5 + 0.1))
        b = _sheet(rng, int(rng.integers(2, 8)), lo + rng.random(3) * 8, float(rng.random() * 1.5 + 0.1))
        pts = np.concatenate([a[0], b[0]])
        faces = np.concatenate([a[1], b[1] + len(a[0])])
        for name in boxes:
            once = _decoded(name, pts, faces, bits, level, lo)
            twice = _decoded(name, once, faces, bits, level, lo)
            alone = _decoded(name, a[0], a[1], bits, level, lo)
            counts[name][0] += bool(np.array_equal(once, twice))
            counts[name][1] += bool(np.array_equal(alone, once[: len(a[0])]))
            if name == "data":
                drift = max(drift, float(np.abs(twice.astype(np.float64) - once).max()))
    n = args.trials
    print(f"trials {n}, seed {args.seed}")
    for name in boxes:
        noop, subset = counts[name]
        print(f"{name:9s} box: re-encode no-op {noop}/{n}, subset = one-shot {subset}/{n}")
    print(f"data box: largest move of a vertex on re-encoding {drift:.3g}")


if __name__ == "__main__":
    main()
