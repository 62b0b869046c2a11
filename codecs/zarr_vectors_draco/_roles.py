"""Vertex roles: how a cell that Draco's mesh coder cannot take as it is gets into one blob.

Draco's edgebreaker coder keeps only vertices that some face uses, merges vertices with equal
positions, and splits a vertex where the surface around it is not a single fan (two patches
touching at a point, an edge shared by three faces). A chunked mesh has all of these: the
vertices used only by faces that cross the chunk are unreferenced inside it, and patches cut
by chunk walls touch at single vertices. The writer therefore hands Draco an *extended* mesh
and records, in one optional generic attribute (unique id :data:`ROLE_ATTRIBUTE_ID`), what
each decoded point is:

====== ===========================================================================
role   meaning
====== ===========================================================================
0      an ordinary vertex
1      a vertex of the cell that no face uses; it sits in a synthetic triangle strip
2      padding that completes a strip of fewer than three vertices; not a vertex
>= 3   a vertex that Draco splits: every decoded copy carries the same role value
====== ===========================================================================

Reading keeps the faces whose three points all have role 0 or >= 3, drops role-2 points, and
merges the copies of each role >= 3 into the first one in decoded order. Exactly equal
positions are also moved apart by one or two float32 ulps per axis before encoding
(:func:`separate_duplicates`), far below the quantization step, so Draco does not merge them.
"""

from __future__ import annotations

import itertools

import numpy as np

from .errors import DracoCodecError, DracoDecodeError

__all__ = [
    "ISOLATED",
    "ORDINARY",
    "PADDING",
    "ROLE_ATTRIBUTE_ID",
    "SPLIT_BASE",
    "resolve_roles",
    "role_dtype",
    "separate_duplicates",
    "strip_faces",
]

#: Draco unique id of the role attribute (DracoPy stores unique ids as int8).
ROLE_ATTRIBUTE_ID = 90
ORDINARY, ISOLATED, PADDING, SPLIT_BASE = 0, 1, 2, 3

# Integer ulp offsets for the 2nd, 3rd, ... copy of one position: every vector of
# {-2..2}^3 but the origin, smallest Chebyshev norm first.
_OFFSETS = np.array(
    sorted(
        (v for v in itertools.product(range(-2, 3), repeat=3) if any(v)),
        key=lambda v: (max(map(abs, v)), v),
    ),
    dtype=np.int8,
)
#: Most ulps by which :func:`separate_duplicates` moves a coordinate.
MAX_NUDGE_ULPS = 2


def role_dtype(max_role: int) -> np.dtype:
    """Smallest unsigned dtype that holds ``max_role``."""
    for dt in (np.uint8, np.uint16, np.uint32):
        if max_role <= np.iinfo(dt).max:
            return np.dtype(dt)
    raise DracoCodecError(
        f"vertex role {max_role} does not fit in 32 bits; the cell has too many split vertices"
    )


def separate_duplicates(points: np.ndarray) -> np.ndarray | None:
    """Float32 rows with exact duplicates moved apart by at most two ulps per axis.

    The first row of each group of equal rows is kept; the k-th other copy moves by the k-th
    offset of a fixed table of 124 integer vectors. Returns ``None`` when a group has more
    than 125 rows or the moved rows still collide (the caller then uses a coder that keeps
    duplicates).
    """
    pts = np.ascontiguousarray(points, dtype=np.float32) + np.float32(0.0)  # -0.0 -> +0.0
    n = len(pts)
    if n < 2 or not _has_duplicate_rows(pts):
        return pts
    _, inverse, counts = np.unique(pts, axis=0, return_inverse=True, return_counts=True)
    if counts.max() > len(_OFFSETS) + 1:
        return None
    inverse = inverse.reshape(-1)
    by_group = np.argsort(inverse, kind="stable")
    starts = np.cumsum(counts) - counts
    rank = np.empty(n, dtype=np.int64)
    rank[by_group] = np.arange(n) - starts[inverse[by_group]]
    moved = rank > 0
    offsets = np.zeros((n, 3), dtype=np.int8)
    offsets[moved] = _OFFSETS[rank[moved] - 1]
    direction = np.where(offsets > 0, np.float32(np.inf), np.float32(-np.inf))
    for step in range(MAX_NUDGE_ULPS):
        pts = np.where(np.abs(offsets) > step, np.nextafter(pts, direction), pts)
    if _has_duplicate_rows(pts) or not np.isfinite(pts).all():
        return None
    return pts


def _has_duplicate_rows(pts: np.ndarray) -> bool:
    ordered = pts[np.lexsort(pts.T[::-1])]
    return bool((ordered[1:] == ordered[:-1]).all(axis=1).any())


def strip_faces(strip: np.ndarray) -> np.ndarray:
    """Consistently wound triangle strip over ``strip`` (at least three distinct indices)."""
    j = np.arange(len(strip) - 2)
    a, b, c = strip[j], strip[j + 1], strip[j + 2]
    odd = (j % 2).astype(bool)
    return np.stack([np.where(odd, b, a), np.where(odd, a, b), c], axis=1)


def resolve_roles(
    points: np.ndarray, faces: np.ndarray, roles: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Apply the role rules to a decoded blob.

    Returns the cell's positions and faces plus ``rows``, the decoded point index behind each
    returned vertex (increasing). Raises DracoDecodeError when the copies of a split vertex do not
    decode to one position.
    """
    n = len(points)
    if roles is None:
        return points, faces, np.arange(n, dtype=np.int64)
    roles = roles.astype(np.int64, copy=False)
    synthetic = (roles == ISOLATED) | (roles == PADDING)
    if len(faces):
        faces = faces[~synthetic[faces].any(axis=1)]
    # Each point's merge key: its role for split copies, a unique negative number otherwise.
    key = np.where(roles >= SPLIT_BASE, roles, -1 - np.arange(n, dtype=np.int64))
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    canonical = first[inverse.reshape(-1)]  # first decoded copy of every point's vertex
    if not np.array_equal(points[canonical], points):
        raise DracoDecodeError(
            "the copies of a split vertex decode to different positions; the blob is corrupt"
        )
    keep = (canonical == np.arange(n)) & (roles != PADDING)
    rows = np.flatnonzero(keep)
    new_index = np.full(n, -1, dtype=np.int64)
    new_index[rows] = np.arange(len(rows))
    faces = new_index[canonical[faces]] if len(faces) else faces.reshape(0, 3)
    if len(faces) and faces.min() < 0:
        raise DracoDecodeError("a face of the Draco blob uses a padding point; the blob is corrupt")
    return points[rows], faces, rows
