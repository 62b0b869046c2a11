"""Draco cell blobs versus raw cells on a chunked icosphere (the codec package's size target).

``trimesh.creation.icosphere(subdivisions=7)`` scaled by 499 and offset by 500 is cut into
chunks of 100: a vertex belongs to chunk ``floor(p / 100)``, a face is intra-chunk when its
three vertices share a chunk. Each chunk is encoded with :func:`zarr_vectors_draco.encode_cell`
(all its vertices, its intra faces) and decoded back; the raw store is 12 bytes per vertex plus
the intra faces as uint16 triples. Faces that cross chunks are stored alike in both stores
(three uint32 chunk-local indices each, as a rough size) and are reported separately.

Run: ``python codecs/benchmarks/icosphere_chunks.py [--subdivisions 7] [--bits 11] [--level 7]``
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import trimesh
from zarr_vectors_draco import decode_cell, encode_cell, quantization_bound


def chunk_cells(subdivisions: int, chunk: float = 100.0):
    """Yield (positions, intra faces) per chunk, plus the count of cross-chunk faces."""
    mesh = trimesh.creation.icosphere(subdivisions=subdivisions)
    vertices = np.asarray(mesh.vertices) * 499.0 + 500.0
    faces = np.asarray(mesh.faces, dtype=np.int64)
    coords = np.floor(vertices / chunk).astype(np.int64)
    keys = np.unique(coords, axis=0, return_inverse=True)[1].reshape(-1)
    face_keys = keys[faces]
    intra = (face_keys[:, 0] == face_keys[:, 1]) & (face_keys[:, 1] == face_keys[:, 2])
    by_chunk = np.argsort(keys, kind="stable")
    bounds = np.searchsorted(keys[by_chunk], np.arange(keys.max() + 2))
    local = np.empty(len(vertices), dtype=np.int64)
    intra_faces = faces[intra]
    intra_chunk = face_keys[intra, 0]
    face_order = np.argsort(intra_chunk, kind="stable")
    face_bounds = np.searchsorted(intra_chunk[face_order], np.arange(keys.max() + 2))
    cells = []
    for k in range(keys.max() + 1):
        members = by_chunk[bounds[k] : bounds[k + 1]]
        local[members] = np.arange(len(members))
        cell_faces = local[intra_faces[face_order[face_bounds[k] : face_bounds[k + 1]]]]
        cells.append((vertices[members], cell_faces))
    return cells, int((~intra).sum()), len(vertices), len(faces)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--subdivisions", type=int, default=7)
    parser.add_argument("--bits", type=int, default=11)
    parser.add_argument("--level", type=int, default=7)
    args = parser.parse_args()
    cells, cross, n_vertices, n_faces = chunk_cells(args.subdivisions)
    draco_bytes = raw_bytes = 0
    encode_s = decode_s = 0.0
    fallbacks = 0
    for positions, faces in cells:
        t0 = time.perf_counter()
        blob, order = encode_cell(positions, faces, quantization_bits=args.bits, compression_level=args.level)
        t1 = time.perf_counter()
        points, decoded_faces = decode_cell(blob)
        t2 = time.perf_counter()
        encode_s, decode_s = encode_s + t1 - t0, decode_s + t2 - t1
        assert np.array_equal(np.sort(order), np.arange(len(positions))), "not a permutation"
        assert np.abs(points - positions[order]).max() <= quantization_bound(positions, args.bits)
        assert len(decoded_faces) == len(faces)
        fallbacks += blob[8] == 0  # method byte: 0 sequential, 1 edgebreaker
        draco_bytes += len(blob)
        raw_bytes += 12 * len(positions) + 6 * len(faces)
    cross_bytes = 12 * cross
    n = len(cells)
    print(
        f"icosphere({args.subdivisions}): {n_vertices} vertices, {n_faces} faces, {n} chunks, "
        f"{cross} cross-chunk faces; bits={args.bits} level={args.level}"
    )
    print(f"draco cells {draco_bytes} B vs raw cells {raw_bytes} B: {draco_bytes / raw_bytes:.1%}")
    print(
        f"with cross-chunk faces ({cross_bytes} B in both): "
        f"{(draco_bytes + cross_bytes) / (raw_bytes + cross_bytes):.1%}"
    )
    print(f"sequential fallbacks: {fallbacks} of {n} chunks")
    print(f"per chunk: encode {encode_s / n * 1e3:.2f} ms, decode {decode_s / n * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
