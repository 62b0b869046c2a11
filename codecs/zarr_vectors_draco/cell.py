"""One chunk's vertices and faces as one Draco blob, and back.

:func:`encode_cell` always returns a blob that :func:`decode_cell` turns into *every* input
vertex (none dropped, none duplicated) and *every* input face exactly once with its winding,
plus ``order``, the input index behind each decoded row. It tries Draco's edgebreaker coder
first (small blobs; the cell is extended as :mod:`._roles` describes so that nothing is lost),
and falls back to Draco's order-preserving sequential coder (about ten times larger) when
the edgebreaker result does not decode to exactly the input. Every returned blob has been
decoded and compared with the input before it is returned.

Positions are quantized over the cell's bounding box: see :func:`quantization_bound`.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np

from . import _roles
from ._availability import CODEC_UNAVAILABLE_MESSAGE
from ._header import MAX_CELL_FACES, MAX_CELL_VERTICES, check_blob
from .errors import DracoCodecError, DracoDecodeError, DracoInputError, DracoUnavailableError

__all__ = [
    "DEFAULT_COMPRESSION_LEVEL",
    "DEFAULT_QUANTIZATION_BITS",
    "check_settings",
    "decode_cell",
    "encode_cell",
    "quantization_bound",
]

DEFAULT_QUANTIZATION_BITS = 11
DEFAULT_COMPRESSION_LEVEL = 7
_PROBE_ATTRIBUTE_ID = 91  # carries input indices in the throw-away probe blob only
_ULP_SLACK = 8  # float32 ulps of the largest coordinate added to the half quantization step

_dracopy_module: ModuleType | None = None


def _dracopy() -> ModuleType:
    """DracoPy, imported on first use so that the codec classes register without it."""
    global _dracopy_module
    if _dracopy_module is None:
        try:
            import DracoPy
        except ImportError as exc:
            raise DracoUnavailableError(CODEC_UNAVAILABLE_MESSAGE) from exc
        _dracopy_module = DracoPy
    return _dracopy_module


def check_settings(quantization_bits: Any, compression_level: Any) -> tuple[int, int]:
    """Validated ``(quantization_bits, compression_level)``: ints in 1..30 and 0..10."""
    for name, value, lo, hi in (
        ("quantization_bits", quantization_bits, 1, 30),
        ("compression_level", compression_level, 0, 10),
    ):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not lo <= value <= hi:
            raise DracoInputError(f"{name} must be an integer from {lo} to {hi}, got {value!r}")
    return int(quantization_bits), int(compression_level)


def quantization_bound(positions: np.ndarray, quantization_bits: int) -> float:
    """Largest absolute per-axis error of a decoded position, for this cell's positions.

    Draco quantizes every axis with one step ``s = R / (2**bits - 1)``, where ``R`` is the
    largest extent of the cell's float32 bounding box (1 when all positions coincide), and
    rounds to the nearest step, so the error is ``s / 2`` plus float32 rounding. The bound
    returned is ``s / 2 + 8 * ulp(M)``, with ``ulp`` the float32 spacing at ``M``, the
    largest absolute coordinate or ``R``; the slack covers the float32 arithmetic in Draco
    and the ulp moves of :func:`._roles.separate_duplicates`. An empty cell gives 0.
    """
    bits, _ = check_settings(quantization_bits, DEFAULT_COMPRESSION_LEVEL)
    pts = np.asarray(positions, dtype=np.float32).reshape(-1, 3)
    if len(pts) == 0:
        return 0.0
    lo, hi = pts.min(axis=0), pts.max(axis=0)
    extent = float(np.max(hi - lo))
    if extent == 0.0:
        extent = 1.0
    largest = np.float32(max(float(np.abs(pts).max()), extent))
    return extent / (2**bits - 1) / 2 + _ULP_SLACK * float(np.spacing(largest))


def _positions(positions: Any) -> np.ndarray:
    pts = np.asarray(positions)
    if pts.ndim != 2 or pts.shape[1] != 3:
        raise DracoInputError(f"positions must have shape (N, 3), got {pts.shape}")
    if pts.dtype.kind not in "fiu":
        raise DracoInputError(f"positions must be numeric, got dtype {pts.dtype}")
    if not 1 <= len(pts) <= MAX_CELL_VERTICES:
        raise DracoInputError(
            f"a Draco cell holds 1 to {MAX_CELL_VERTICES} vertices, got {len(pts)}; "
            "an empty cell is not stored, and a larger one needs smaller chunks"
        )
    with np.errstate(over="ignore", invalid="ignore"):
        pts32 = pts.astype(np.float32)
        extent = pts32.max(axis=0) - pts32.min(axis=0)
    if not np.isfinite(pts32).all():
        raise DracoInputError("positions must be finite in float32 (no NaN, no infinity, |x| < 3.4e38)")
    if not np.isfinite(extent).all():
        raise DracoInputError("the positions' bounding box overflows float32; Draco cannot quantize it")
    return np.ascontiguousarray(pts32)


def _faces(faces: Any, n: int) -> np.ndarray:
    f = np.asarray(faces)
    if f.size == 0:
        return np.zeros((0, 3), dtype=np.int64)
    if f.ndim != 2 or f.shape[1] != 3:
        raise DracoInputError(f"faces must have shape (F, 3), got {f.shape}")
    if f.dtype.kind not in "iu":
        raise DracoInputError(f"faces must hold integer vertex indices, got dtype {f.dtype}")
    if len(f) > MAX_CELL_FACES:
        raise DracoInputError(f"a Draco cell holds at most {MAX_CELL_FACES} faces, got {len(f)}")
    f = f.astype(np.int64)
    if f.min() < 0 or f.max() >= n:
        raise DracoInputError(f"face indices must lie in [0, {n}) for {n} vertices, got {f.min()}..{f.max()}")
    return f


def _encode(
    points: np.ndarray,
    faces: np.ndarray | None,
    bits: int,
    level: int,
    *,
    preserve: bool,
    attributes: dict[int, np.ndarray] | None = None,
) -> bytes:
    dracopy = _dracopy()
    return bytes(
        dracopy.encode(
            points,
            faces=None if faces is None else faces.astype(np.uint32),
            quantization_bits=bits,
            compression_level=level,
            preserve_order=preserve,
            generic_attributes=attributes or None,
        )
    )


def _decode_raw(
    blob: bytes | bytearray | memoryview, max_points: int = MAX_CELL_VERTICES, max_faces: int = MAX_CELL_FACES
) -> tuple[np.ndarray, np.ndarray, dict[int, np.ndarray]]:
    """DracoPy's view of a checked blob: points, faces and generic attributes by unique id."""
    header = check_blob(blob, max_points, max_faces)
    dracopy = _dracopy()
    try:
        geometry = dracopy.decode(bytes(blob))
        is_mesh = hasattr(geometry, "faces")
        points = np.asarray(geometry.points)
        faces = np.asarray(geometry.faces) if is_mesh else np.zeros((0, 3), dtype=np.int64)
        generic = int(dracopy.AttributeType.GENERIC)
        attributes = {
            int(a["unique_id"]): np.asarray(a["data"])
            for a in geometry.attributes
            if a["attribute_type"] == generic
        }
    # DracoPy's own wrapper code can trip over values a corrupt blob decodes to (an overflowing
    # quantization setting, a bad metadata name), hence the arithmetic and lookup errors.
    except (
        dracopy.FileTypeException,
        ValueError,
        ArithmeticError,
        LookupError,
        RuntimeError,
        MemoryError,
    ) as exc:
        raise DracoDecodeError(
            f"Draco could not decode the blob ({exc}); the cell is corrupt or truncated"
        ) from exc
    if header.is_mesh != is_mesh:
        raise DracoDecodeError("the Draco blob decodes to a different geometry type than its header declares")
    return _checked(points, faces, attributes)


def _checked(
    points: np.ndarray, faces: np.ndarray, attributes: dict[int, np.ndarray]
) -> tuple[np.ndarray, np.ndarray, dict[int, np.ndarray]]:
    """Decoded arrays with their shapes, value ranges and attribute lengths checked."""
    if points.ndim != 2 or points.shape[1] != 3 or points.dtype.kind != "f":
        raise DracoDecodeError(
            f"the Draco blob decodes to positions of shape {points.shape}, not (N, 3); it is corrupt"
        )
    if not np.isfinite(points).all():
        raise DracoDecodeError("the Draco blob decodes to non-finite positions; the cell is corrupt")
    if faces.size and (faces.ndim != 2 or faces.shape[1] != 3):
        raise DracoDecodeError(
            f"the Draco blob decodes to faces of shape {faces.shape}, not (F, 3); it is corrupt"
        )
    faces = faces.reshape(-1, 3).astype(np.int64)
    if len(faces) and (faces.min() < 0 or faces.max() >= len(points)):
        raise DracoDecodeError("a face of the Draco blob points past its vertices; the cell is corrupt")
    columns = {}
    for unique_id, data in attributes.items():
        if data.shape[:1] != (len(points),) or data.dtype.kind != "u":
            if unique_id == _roles.ROLE_ATTRIBUTE_ID:
                raise DracoDecodeError(
                    f"the blob's vertex-role attribute has shape {data.shape}, not ({len(points)}, 1)"
                )
            continue
        columns[unique_id] = data.reshape(len(points), -1)[:, 0]
    return points.astype(np.float32, copy=False), faces, columns


def decode_cell(
    blob: bytes | bytearray | memoryview,
    *,
    max_points: int = MAX_CELL_VERTICES,
    max_faces: int = MAX_CELL_FACES,
) -> tuple[np.ndarray, np.ndarray]:
    """Positions ``(N, 3) float32`` in decoded order and faces ``(F, 3) int64`` of one blob.

    Applies the vertex-role rules of :mod:`._roles` when the blob carries the role attribute.
    Raises :class:`~.errors.DracoDecodeError` on empty, truncated or corrupt input, and
    (before Draco allocates anything) when the blob claims more than ``max_points`` points or
    ``max_faces`` faces; :class:`~.errors.DracoUnavailableError` without DracoPy. Safe to call
    from many threads at once (no shared decoder state).
    """
    if not isinstance(blob, (bytes, bytearray, memoryview)):
        raise DracoDecodeError(f"a Draco cell is bytes, got {type(blob).__name__}")
    points, faces, attributes = _decode_raw(blob, max_points, max_faces)
    roles = attributes.get(_roles.ROLE_ATTRIBUTE_ID)
    points, faces, _ = _roles.resolve_roles(points, faces, roles)
    if len(points) == 0:
        raise DracoDecodeError("the Draco blob holds no vertices; the cell is corrupt")
    return points, faces


def _face_keys(faces: np.ndarray, n: int) -> np.ndarray:
    """Sorted keys of the faces as a multiset of cyclic (winding-kept) vertex triples."""
    best = faces
    for shift in (1, 2):  # smallest of the three rotations, lexicographically
        rot = np.roll(faces, -shift, axis=1)
        less = (rot[:, 0] < best[:, 0]) | (
            (rot[:, 0] == best[:, 0])
            & ((rot[:, 1] < best[:, 1]) | ((rot[:, 1] == best[:, 1]) & (rot[:, 2] < best[:, 2])))
        )
        best = np.where(less[:, None], rot, best)
    if n <= 1 << 21:  # three 21-bit fields in one int64
        return np.sort((best[:, 0] << 42) | (best[:, 1] << 21) | best[:, 2])
    return best[np.lexsort(best.T[::-1])]


def _is_exact(
    decoded: tuple[np.ndarray, np.ndarray],
    positions: np.ndarray,
    faces: np.ndarray,
    order: np.ndarray,
    bound: float,
) -> bool:
    """Whether decoded cell data is every input vertex (via ``order``) and every input face."""
    points, decoded_faces = decoded
    n = len(positions)
    if len(points) != n or len(order) != n or len(decoded_faces) != len(faces):
        return False
    if not np.array_equal(np.sort(order), np.arange(n)):
        return False
    if np.abs(points.astype(np.float64) - positions[order]).max() > bound:
        return False
    return np.array_equal(_face_keys(order[decoded_faces], n), _face_keys(faces, n))


def _extend(pts: np.ndarray, faces: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Points, faces and roles of the extended mesh (:mod:`._roles`), or None if impossible."""
    n = len(pts)
    isolated = np.flatnonzero(np.bincount(faces.ravel(), minlength=n) == 0)
    pad = (3 - len(isolated)) if 0 < len(isolated) < 3 else 0
    extended = _roles.separate_duplicates(np.concatenate([pts, np.repeat(pts[isolated[:1]], pad, axis=0)]))
    if extended is None:
        return None
    strip = np.concatenate([isolated, np.arange(n, n + pad)])
    all_faces = np.concatenate([faces, _roles.strip_faces(strip)]) if len(strip) else faces
    roles = np.zeros(n + pad, dtype=np.int64)
    roles[isolated] = _roles.ISOLATED
    roles[n:] = _roles.PADDING
    return extended, all_faces, roles


def _role_attribute(roles: np.ndarray) -> dict[int, np.ndarray]:
    if not roles.any():
        return {}
    return {_roles.ROLE_ATTRIBUTE_ID: roles.astype(_roles.role_dtype(int(roles.max())))[:, None]}


def _match_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray | None:
    """``perm`` with ``a == b[perm]`` row for row, or None when none or several exist."""
    if a.shape != b.shape:
        return None
    if np.array_equal(a, b):
        return np.arange(len(a), dtype=np.int64)
    ka, kb = np.lexsort(a.T[::-1]), np.lexsort(b.T[::-1])
    sorted_b = b[kb]
    if not np.array_equal(a[ka], sorted_b) or (sorted_b[1:] == sorted_b[:-1]).all(axis=1).any():
        return None
    perm = np.empty(len(a), dtype=np.int64)
    perm[ka] = kb
    return perm


def _edgebreaker(
    pts: np.ndarray, faces: np.ndarray, bits: int, level: int
) -> tuple[bytes, np.ndarray, tuple[np.ndarray, np.ndarray]] | None:
    """The small-blob attempt: a probe blob that carries input indices tells which decoded
    point is which vertex (and which vertices Draco splits); the stored blob drops them."""
    layout = _extend(pts, faces)
    if layout is None:
        return None
    extended, all_faces, roles = layout
    total = len(extended)
    dracopy = _dracopy()
    try:
        probe_attributes = _role_attribute(roles)
        probe_attributes[_PROBE_ATTRIBUTE_ID] = np.arange(total, dtype=np.uint32)[:, None]
        probe = _encode(extended, all_faces, bits, level, preserve=False, attributes=probe_attributes)
        probe_points, _, probe_attrs = _decode_raw(probe)
        source = probe_attrs[_PROBE_ATTRIBUTE_ID].astype(np.int64)
        copies = np.bincount(source, minlength=total)
        if len(copies) != total or copies.min() == 0:
            return None  # Draco dropped a vertex
        split = np.flatnonzero(copies > 1)
        if (roles[split] != _roles.ORDINARY).any():
            return None
        roles[split] = _roles.SPLIT_BASE + np.arange(len(split))
        blob = _encode(extended, all_faces, bits, level, preserve=False, attributes=_role_attribute(roles))
    except dracopy.EncodingFailedException:
        return None
    # Attributes change Draco's point order, so the stored blob's points are matched to the probe's.
    points, faces_out, attrs = _decode_raw(blob)
    perm = _match_rows(points, probe_points)
    if perm is None:
        return None
    cell_points, cell_faces, rows = _roles.resolve_roles(
        points, faces_out, attrs.get(_roles.ROLE_ATTRIBUTE_ID)
    )
    return blob, source[perm][rows], (cell_points, cell_faces)


def encode_cell(
    positions: np.ndarray,
    faces: np.ndarray,
    *,
    quantization_bits: int = DEFAULT_QUANTIZATION_BITS,
    compression_level: int = DEFAULT_COMPRESSION_LEVEL,
) -> tuple[bytes, np.ndarray]:
    """Encode one chunk's vertices and faces (chunk-local indices) as one Draco blob.

    Returns ``(blob, order)``: ``order`` is an int64 permutation of ``range(N)`` and row ``i``
    of ``decode_cell(blob)[0]`` is input vertex ``order[i]``, within
    :func:`quantization_bound`. Each decoded face is an input face mapped through ``order``
    and rotated at most (winding kept); together they are the input faces exactly once each.
    ``faces`` may be empty (a Draco point cloud is written) and vertices may be unused by
    every face. Raises :class:`~.errors.DracoInputError` on unusable input,
    :class:`~.errors.DracoUnavailableError` without DracoPy, and :class:`~.errors.DracoCodecError`
    itself if Draco does not give the cell back.
    """
    bits, level = check_settings(quantization_bits, compression_level)
    pts = _positions(positions)
    tris = _faces(faces, len(pts))
    reference = np.asarray(positions, dtype=np.float64)
    bound = quantization_bound(pts, bits)
    identity = np.arange(len(pts), dtype=np.int64)
    if len(tris) == 0:
        blob = _encode(pts, None, bits, level, preserve=True)
        if not _is_exact(decode_cell(blob), reference, tris, identity, bound):
            raise DracoCodecError(
                "Draco did not return the point cloud it was given; please report this cell"
            )
        return blob, identity
    degenerate = (tris[:, 0] == tris[:, 1]) | (tris[:, 1] == tris[:, 2]) | (tris[:, 2] == tris[:, 0])
    if level > 0 and not degenerate.any():
        attempt = _edgebreaker(pts, tris, bits, level)
        if attempt is not None and _is_exact(attempt[2], reference, tris, attempt[1], bound):
            return attempt[0], attempt[1]
    blob = _encode(pts, tris, bits, level, preserve=True)
    if not _is_exact(decode_cell(blob), reference, tris, identity, bound):
        raise DracoCodecError("Draco did not return the mesh it was given; please report this cell")
    return blob, identity
