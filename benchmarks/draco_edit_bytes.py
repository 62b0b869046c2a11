#!/usr/bin/env python
"""Byte-level companion of ``draco_edit_exactness.py``: when is a re-encoded Draco cell the same blob?

Run from the repository root (not a timing; results in ``benchmarks/RESULTS-draco-edits.txt``)::

    .venv/bin/python benchmarks/draco_edit_bytes.py --trials 50 --seed 2

Each trial encodes one random ring-strip mesh (40 vertices, 40 faces, quantization_bits 11,
compression_level 7) with :func:`zarr_vectors._draco.encode_cell` (data-box quantization, what
the writers do today) and counts:

- ``writer order``: the decoded positions put back in the input vertex order, with the input
  faces, encode to the byte-identical blob (the cell's box is unchanged);
- ``decoded order``: the decoded rows and faces as the blob gives them encode to a blob that
  decodes to the same positions, and whether that blob is byte-identical;
- ``box moved``: a second mesh that widens the box is appended; the decoded first mesh plus the
  raw second mesh against a one-shot cell of both raw meshes (positions per input vertex).
"""

from __future__ import annotations

import argparse

import numpy as np

from zarr_vectors._draco import decode_cell, encode_cell

SETTINGS = {"quantization_bits": 11, "compression_level": 7}


def _ring(rng: np.random.Generator, n: int, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
    """``n`` random vertices in [lo, hi)^3 and the ``n`` faces (i, i+1, i+2) mod n."""
    i = np.arange(n)
    return rng.uniform(lo, hi, (n, 3)).astype(np.float32), np.stack([i, (i + 1) % n, (i + 2) % n], 1)


def _decoded(blob: bytes, order: np.ndarray) -> np.ndarray:
    """The blob's positions in input vertex order."""
    return decode_cell(blob)[0][np.argsort(order)]


def trial(rng: np.random.Generator) -> tuple[bool, bool, bool, bool, float]:
    """(writer-order bytes equal, decoded-order positions equal, its bytes equal,
    box-moved positions equal, box-moved largest move)."""
    x, f = _ring(rng, 40, 0.0, 100.0)
    blob, order = encode_cell(x, f, **SETTINGS)
    kept = _decoded(blob, order)
    same = encode_cell(kept, f, **SETTINGS)[0] == blob
    rows, faces = decode_cell(blob)
    blob2, order2 = encode_cell(rows, faces, **SETTINGS)
    pos2 = np.array_equal(_decoded(blob2, order2), rows)
    y, g = _ring(rng, 30, 20.0, 140.0)
    allf = np.vstack([f, g + 40])
    one = _decoded(*encode_cell(np.vstack([x, y]), allf, **SETTINGS))
    edit = _decoded(*encode_cell(np.vstack([kept, y]), allf, **SETTINGS))
    return same, pos2, blob2 == blob, np.array_equal(one, edit), float(np.abs(one - edit).max())


def main() -> None:
    """Run the trials and print the counts."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=50)
    ap.add_argument("--seed", type=int, default=2)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    rows = [trial(rng) for _ in range(args.trials)]
    n = args.trials
    print(f"seed {args.seed}, {n} trials, bits 11, level 7")
    print(f"writer order, same box: blob byte-equal {sum(r[0] for r in rows)}/{n}")
    print(
        f"decoded order: positions equal {sum(r[1] for r in rows)}/{n}, blob byte-equal {sum(r[2] for r in rows)}/{n}"
    )
    print(
        f"box moved by an append: edit == one-shot positions {sum(r[3] for r in rows)}/{n}, "
        f"largest move {max(r[4] for r in rows):.3g}"
    )


if __name__ == "__main__":
    main()
