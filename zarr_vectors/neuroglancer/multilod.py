"""Multi-resolution meshes (``neuroglancer_multilod_draco``): one object's octree of Draco
fragments, built from its mesh at each level of detail. Pure numpy and DracoPy, no I/O.

Written from the precomputed format's specification. Invariants of what :func:`encode_object`
returns (a manifest, the ``{id}.index`` file, and the fragment data, the ``{id}`` file):

* LOD ``k``'s octree nodes are boxes of ``chunk_shape * 2**k`` from ``grid_origin``; a node's
  fragment holds the triangles whose centroid lies in it, after every triangle was cut on the
  planes of that grid (LOD 0) or of the grid of half that size (LOD > 0: no triangle crosses
  the 2x2x2 split of its node, as the specification asks). Every fragment vertex thus lies in
  its node's box.
* Positions are quantised per node: ``x = round((v - node_lo) / node_size * (2**bits - 1))``
  per axis, Draco-encoded as integer-valued positions whose Draco quantisation is the identity
  (range ``2**bits - 1``, origin 0, ``bits`` bits), so the integers the decoder reads without
  de-quantising are ``x``.
* Nodes are listed in Z-curve order (x the lowest bit) in each LOD; a LOD lists the parent of
  every node of the LOD below it, with an empty fragment where its own mesh has nothing there
  (Neuroglancer reaches finer nodes only through their parents), and lists, as an empty node,
  every eighth of a coarser node that holds coarse triangles but no finer ones (an empty node
  stands for its box, so a view that asks for the finer LOD there does not draw the coarse
  triangles over the finer mesh). Vertex offsets are zero.
* An object without triangles has one empty node, at LOD 0's grid position 0 (and its
  parents), so its manifest still describes an octree.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from zarr_vectors.errors import FormatError, InputError

__all__ = [
    "QUANTIZATION_BITS",
    "assemble",
    "clip_to_grid",
    "encode_object",
    "lod_pieces",
    "morton",
    "multilod_info",
    "node_fragments",
]

#: Bits per quantised vertex coordinate (the format allows 10 or 16).
QUANTIZATION_BITS = 16
#: Draco compression level of the fragments (0 fastest .. 10 smallest).
COMPRESSION_LEVEL = 5
#: Vertices closer than this fraction of a cell to a grid plane are taken as on it.
EPS = 1e-9


def multilod_info(nm_per_unit: np.ndarray, bits: int = QUANTIZATION_BITS) -> dict[str, Any]:
    """The mesh source's ``info``: stored model coordinates are the store's units, the
    transform scales them to nanometres."""
    if bits not in (10, 16):
        raise InputError(f"vertex_quantization_bits must be 10 or 16, not {bits}")
    s = [float(f"{v:.12g}") for v in nm_per_unit]  # 1e-6 / 1e-9 is 999.9999999999999
    return {
        "@type": "neuroglancer_multilod_draco",
        "vertex_quantization_bits": bits,
        "transform": [s[0], 0, 0, 0, 0, s[1], 0, 0, 0, 0, s[2], 0],
        "lod_scale_multiplier": 1.0,
    }


def _spread(v: np.ndarray) -> np.ndarray:
    """The bits of ``v`` (< 2**21) moved to every third bit."""
    x = v.astype(np.uint64) & np.uint64(0x1FFFFF)
    for shift, mask in ((32, 0x1F00000000FFFF), (16, 0x1F0000FF0000FF), (8, 0x100F00F00F00F00F)):
        x = (x | (x << np.uint64(shift))) & np.uint64(mask)
    x = (x | (x << np.uint64(4))) & np.uint64(0x10C30C30C30C30C3)
    return (x | (x << np.uint64(2))) & np.uint64(0x1249249249249249)


def morton(positions: np.ndarray) -> np.ndarray:
    """Z-curve codes (uint64) of (n, 3) non-negative grid positions below 2**21, x lowest."""
    p = np.asarray(positions).reshape(-1, 3)
    if len(p) and (p.min() < 0 or p.max() >= 1 << 21):
        raise InputError("octree positions must lie in [0, 2**21)")
    return _spread(p[:, 0]) | (_spread(p[:, 1]) << np.uint64(1)) | (_spread(p[:, 2]) << np.uint64(2))


def _split(tri: np.ndarray, axis: int, plane: np.ndarray, tol: float) -> np.ndarray:
    """Triangles ``tri`` (T, 3, 3), each crossing its ``plane`` on ``axis``, cut into the
    pieces below and above it (winding kept; a polygon of four corners becomes two)."""
    n = len(tri)
    d = tri[:, :, axis] - plane[:, None]
    d[np.abs(d) <= tol] = 0.0
    nxt = [1, 2, 0]
    d1 = d[:, nxt]
    strict = d * d1 < 0  # edge j runs from corner j to corner j + 1 across the plane
    t = np.where(strict, d / np.where(strict, d - d1, 1.0), 0.0)
    cut = tri + (tri[:, nxt] - tri) * t[..., None]
    cut[:, :, axis] = plane[:, None]
    candidates = np.stack([tri, cut], axis=2).reshape(n, 6, 3)  # corner j, then edge j's cut
    out = []
    for keep in (d <= 0, d >= 0):
        mask = np.stack([keep, strict], axis=2).reshape(n, 6)
        order = np.argsort(~mask, axis=1, kind="stable")
        poly = np.take_along_axis(candidates, order[..., None], axis=1)
        count = mask.sum(axis=1)
        fan = np.stack([poly[:, [0, 1, 2]], poly[:, [0, 2, 3]]], axis=1)
        out.append(fan[np.stack([count >= 3, count >= 4], axis=1)])
    return np.concatenate(out)


def clip_to_grid(tri: np.ndarray, origin: np.ndarray, spacing: np.ndarray) -> np.ndarray:
    """Triangles (T, 3, 3) cut on every plane ``origin + m * spacing`` they cross, so that
    each piece lies in one grid cell (pieces of one triangle keep its winding)."""
    tri = np.asarray(tri, np.float64).reshape(-1, 3, 3)
    for a in range(3):
        while len(tri):
            rel = (tri[:, :, a] - origin[a]) / spacing[a]
            lo = np.floor(rel.min(axis=1) + EPS)
            hi = np.ceil(rel.max(axis=1) - EPS) - 1
            cross = hi > lo
            if not cross.any():
                break
            plane = origin[a] + (lo[cross] + 1) * spacing[a]
            pieces = _split(tri[cross], a, plane, 0.5 * EPS * float(spacing[a]))
            tri = np.concatenate([tri[~cross], pieces])
    return tri


def _draco(q: np.ndarray, bits: int) -> bytes:
    """One fragment: quantised triangles (m, 3, 3) as a Draco mesh of shared vertices
    (triangles that quantise to a point or a line are dropped)."""
    import DracoPy

    c = q.reshape(-1, 3)
    keys, inverse = np.unique((c[:, 0] << 32) | (c[:, 1] << 16) | c[:, 2], return_inverse=True)
    verts = np.stack([keys >> 32, (keys >> 16) & 0xFFFF, keys & 0xFFFF], axis=1)
    faces = inverse.reshape(-1, 3)
    faces = faces[(faces[:, 0] != faces[:, 1]) & (faces[:, 1] != faces[:, 2]) & (faces[:, 0] != faces[:, 2])]
    if not len(faces):
        return b""
    top = float((1 << bits) - 1)
    try:
        return bytes(
            DracoPy.encode(
                verts.astype(np.float64),
                faces.astype(np.uint32),
                quantization_bits=bits,
                quantization_range=top,
                quantization_origin=[0.0, 0.0, 0.0],
                compression_level=COMPRESSION_LEVEL,
            )
        )
    except DracoPy.EncodingFailedException as exc:
        raise FormatError(f"Draco could not encode a mesh fragment: {exc}") from exc


def _quantise(unit: np.ndarray, bits: int, split: bool) -> np.ndarray:
    """Integer coordinates of triangles (T, 3, 3) given in node units ([0, 1] per axis).
    With ``split`` (LOD > 0), a triangle on one side of a node's mid-plane (corners on the
    plane included) stays on that side of the decoder's split value ``2**(bits - 1)`` after
    rounding."""
    top = (1 << bits) - 1
    q = np.clip(np.rint(unit * top), 0, top)
    if split:
        half = float(1 << (bits - 1))
        upper = np.all(unit >= 0.5 - EPS, axis=1, keepdims=True)
        lower = np.all(unit <= 0.5 + EPS, axis=1, keepdims=True)
        q = np.where(upper, np.maximum(q, half), np.where(lower, np.minimum(q, half), q))
    return q.astype(np.int64)


def lod_pieces(
    tri: np.ndarray, origin: np.ndarray, chunk: np.ndarray, lod: int, bits: int = QUANTIZATION_BITS
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(node positions (m, 3), quantised triangles (m, 3, 3), octants)`` of one LOD's
    triangles (T, 3, 3) in stored model units: the triangles cut on the LOD's grid (module
    docstring), each piece with the node it lies in (unsorted). The octants are the LOD
    ``lod - 1`` positions of the node eighths holding pieces (none at LOD 0)."""
    node = chunk * 2.0**lod
    tri = clip_to_grid(tri, origin, node if lod == 0 else node / 2)
    none = np.zeros((0, 3), np.int64)
    if not len(tri):
        return none, np.zeros((0, 3, 3), np.int64), none
    centroid = tri.mean(axis=1) - origin
    octants = np.unique(np.floor(centroid / (node / 2)).astype(np.int64), axis=0) if lod else none
    cells = np.floor(centroid / node).astype(np.int64)
    if cells.min() < 0:
        raise InputError("a mesh vertex lies below the octree's grid origin")
    q = _quantise((tri - (origin + cells * node)[:, None, :]) / node, bits, lod > 0)
    return cells, q, octants


def node_fragments(
    cells: np.ndarray, q: np.ndarray, bits: int = QUANTIZATION_BITS
) -> tuple[np.ndarray, list[bytes]]:
    """``(node positions in Z-curve order, their Draco fragments)`` of quantised pieces
    (:func:`lod_pieces`, possibly of several batches concatenated); nodes whose pieces all
    quantise to points or lines are left out."""
    if not len(cells):
        return np.zeros((0, 3), np.int64), []
    codes = morton(cells)
    order = np.argsort(codes, kind="stable")
    codes, cells, q = codes[order], cells[order], q[order]
    starts = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]])
    ends = np.r_[starts[1:], len(codes)]
    blobs = [_draco(q[s:e].astype(np.int64), bits) for s, e in zip(starts, ends)]
    keep = np.array([len(b) > 0 for b in blobs], bool)
    return cells[starts][keep], [b for b, k in zip(blobs, keep) if k]


def _lod_fragments(
    tri: np.ndarray, origin: np.ndarray, chunk: np.ndarray, lod: int, bits: int
) -> tuple[np.ndarray, list[bytes], np.ndarray]:
    """``(node positions (n, 3) in Z-curve order, their Draco fragments, octants)`` of one
    LOD's triangles (T, 3, 3) in stored model units; empty fragments are left out."""
    cells, q, octants = lod_pieces(tri, origin, chunk, lod, bits)
    nodes, blobs = node_fragments(cells, q, bits)
    return nodes, blobs, octants


def encode_object(
    lods: Sequence[tuple[np.ndarray, np.ndarray]],
    chunk_shape: np.ndarray,
    grid_origin: np.ndarray,
    lod_scales: Sequence[float],
    bits: int = QUANTIZATION_BITS,
) -> tuple[bytes, bytes]:
    """``(manifest, fragment data)`` of one object from its ``(positions, faces)`` at each
    LOD (finest first), in stored model units at or above ``grid_origin``."""
    chunk = np.asarray(chunk_shape, "<f4").astype(np.float64)
    origin = np.asarray(grid_origin, "<f4").astype(np.float64)
    if len(lods) != len(lod_scales) or not len(lods):
        raise InputError("give one LOD scale per level of detail, and at least one level")
    frags = []
    for k, (positions, faces) in enumerate(lods):
        pos = np.asarray(positions, np.float64).reshape(-1, 3)
        frags.append(_lod_fragments(pos[np.asarray(faces, np.int64).reshape(-1, 3)], origin, chunk, k, bits))
    return assemble(frags, chunk, origin, lod_scales)


def assemble(
    frags: Sequence[tuple[np.ndarray, list[bytes], np.ndarray]],
    chunk: np.ndarray,
    origin: np.ndarray,
    lod_scales: Sequence[float],
) -> tuple[bytes, bytes]:
    """``(manifest, fragment data)`` from each LOD's ``(nodes, fragments, octants)`` (finest
    first; :func:`node_fragments` and :func:`lod_pieces`): every LOD lists the parents of the
    nodes below and the empty eighths of the nodes above (module docstring)."""
    if len(frags) != len(lod_scales) or not len(frags):
        raise InputError("give one LOD scale per level of detail, and at least one level")
    per_lod: list[tuple[np.ndarray, list[int]]] = []
    data: list[bytes] = []
    below = np.zeros((0, 3), np.int64)
    for k, (cells, blobs, _) in enumerate(frags):
        above = frags[k + 1][2] if k + 1 < len(frags) else below[:0]
        allnodes = np.unique(np.concatenate([cells, below >> 1, above]), axis=0)
        if not len(allnodes):
            allnodes = np.zeros((1, 3), np.int64)
        order = np.argsort(morton(allnodes), kind="stable")
        allnodes = allnodes[order]
        size = dict(zip(map(tuple, cells.tolist()), blobs))
        ordered = [size.get(tuple(c), b"") for c in allnodes.tolist()]
        per_lod.append((allnodes, [len(b) for b in ordered]))
        data.extend(ordered)
        below = allnodes
    n = len(frags)
    head = [
        np.asarray(chunk, np.float64).astype("<f4").tobytes(),
        np.asarray(origin, np.float64).astype("<f4").tobytes(),
        np.array([n], "<u4").tobytes(),
        np.asarray(lod_scales, "<f4").tobytes(),
        np.zeros((n, 3), "<f4").tobytes(),
        np.array([len(c) for c, _ in per_lod], "<u4").tobytes(),
    ]
    for cells, sizes in per_lod:
        head.append(np.ascontiguousarray(cells.T).astype("<u4").tobytes())
        head.append(np.asarray(sizes, "<u4").tobytes())
    return b"".join(head), b"".join(data)
