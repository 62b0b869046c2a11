"""Read the fixed front of a Draco blob and refuse implausible ones before DracoPy sees them.

DracoPy trusts the element counts written near the start of a blob: a corrupted count makes
it allocate gigabytes, and can crash the interpreter (a point count of 738,197,666 did). :func:`check_blob` parses the header,
skips the optional metadata section and reads the point / face counts of the four layouts
Draco 2.x writes (point cloud sequential or kd-tree, mesh sequential or edgebreaker),
raising :class:`~.errors.DracoDecodeError` when a field is out of range. It does not
validate the compressed body: DracoPy does that, and its failures are turned into
``DracoDecodeError`` by the caller.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from .errors import DracoDecodeError

__all__ = ["MAX_CELL_FACES", "MAX_CELL_VERTICES", "MAX_DECODED_VALUES", "BlobHeader", "check_blob"]

MAGIC = b"DRACO"
#: Largest vertex count a cell blob may hold (writers refuse more, readers reject more).
MAX_CELL_VERTICES = 1 << 24
#: Largest face count a cell blob may hold.
MAX_CELL_FACES = 1 << 25
#: Largest number of attribute values (points x components) a point cloud blob may claim.
MAX_DECODED_VALUES = 1 << 27
_MAX_ATTRIBUTES = 32

_POINT_CLOUD, _MESH = 0, 1
_KIND_NAMES = {_POINT_CLOUD: "point cloud", _MESH: "mesh"}
# Bitstream versions whose count fields sit where check_blob reads them (Draco 1.4+ writes
# 2.3 point clouds and 2.2 meshes; older point cloud bitstreams store the count the same way).
_VERSIONS = {_POINT_CLOUD: {(2, 0), (2, 1), (2, 2), (2, 3)}, _MESH: {(2, 2)}}
_METADATA_FLAG = 0x8000
_HEADER = struct.Struct("<5sBBBBH")
_MAX_METADATA_DEPTH = 16


@dataclass(frozen=True)
class BlobHeader:
    """What the front of a blob claims: geometry kind, method and element counts."""

    is_mesh: bool
    method: int  # 0 sequential; 1 edgebreaker (mesh) or kd-tree (point cloud)
    num_points: int
    num_faces: int  # 0 for point clouds


class _Reader:
    """Bounds-checked little-endian reads over a blob; every overrun is a DracoDecodeError."""

    def __init__(self, data: memoryview) -> None:
        self.data = data
        self.pos = 0

    def take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.data):
            raise DracoDecodeError(
                f"the Draco blob is truncated: {len(self.data)} bytes end inside its header"
            )
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def u8(self) -> int:
        return self.take(1)[0]

    def varint(self) -> int:
        value = shift = 0
        while True:
            byte = self.u8()
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            if shift > 63:
                raise DracoDecodeError("the Draco blob has a malformed variable-length integer in its header")


def _skip_metadata(reader: _Reader, depth: int = 0) -> None:
    """Skip one metadata block: entries (name, value) then named sub-blocks."""
    if depth > _MAX_METADATA_DEPTH:
        raise DracoDecodeError("the Draco blob's metadata nests deeper than any writer produces")
    for _ in range(reader.varint()):
        reader.take(reader.u8())  # entry name
        reader.take(reader.varint())  # entry value
    for _ in range(reader.varint()):
        reader.take(reader.u8())  # sub-metadata name
        _skip_metadata(reader, depth + 1)


def _skip_geometry_metadata(reader: _Reader) -> None:
    for _ in range(reader.varint()):
        reader.varint()  # attribute unique id
        _skip_metadata(reader)
    _skip_metadata(reader)


def _check_point_cloud_attributes(reader: _Reader, method: int, points: int) -> None:
    """Bound ``points x components`` over the attribute descriptors that follow the count.

    A point cloud's descriptors sit right after its point count (a mesh's follow its
    connectivity, out of reach here); a corrupt component count would otherwise make Draco
    allocate ``points x 255`` values.
    """
    decoders = reader.u8()
    if method == 1 and decoders != 1:
        raise DracoDecodeError(
            f"the Draco kd-tree point cloud declares {decoders} attribute decoders; Draco writes 1"
        )
    values = 0
    for _ in range(decoders):
        count = reader.varint()
        if count > _MAX_ATTRIBUTES:
            raise DracoDecodeError(
                f"the Draco blob declares {count} attributes; a cell blob has at most {_MAX_ATTRIBUTES}"
            )
        for _ in range(count):
            _, _, components, _ = reader.take(4)  # type, data type, components, normalized
            reader.varint()  # unique id
            values += components * points
        if method == 0:
            reader.take(count)  # one sequential decoder type per attribute
    if values > MAX_DECODED_VALUES:
        raise DracoDecodeError(
            f"the Draco blob claims {values} attribute values ({points} points); a cell holds at most "
            f"{MAX_DECODED_VALUES}"
        )


def check_blob(
    blob: bytes | bytearray | memoryview, max_points: int = MAX_CELL_VERTICES, max_faces: int = MAX_CELL_FACES
) -> BlobHeader:
    """Parse and sanity-check the header of a Draco 2.x blob.

    Raises DracoDecodeError when the bytes are empty, not Draco, of an unknown version or kind, or
    claim more than ``max_points`` points or ``max_faces`` faces (each at most
    :data:`MAX_CELL_VERTICES` / :data:`MAX_CELL_FACES`; a reader passes smaller limits derived
    from the level's metadata).
    """
    max_points = min(int(max_points), MAX_CELL_VERTICES)
    max_faces = min(int(max_faces), MAX_CELL_FACES)
    view = memoryview(blob).cast("B")
    if len(view) == 0:
        raise DracoDecodeError("the cell holds no bytes, so there is no Draco blob to decode")
    if len(view) < _HEADER.size or bytes(view[:5]) != MAGIC:
        raise DracoDecodeError(
            f"the cell's {len(view)} bytes are not a Draco blob (they do not start with the 'DRACO' header)"
        )
    _, major, minor, kind, method, flags = _HEADER.unpack_from(view, 0)
    if kind not in (_POINT_CLOUD, _MESH) or method not in (0, 1):
        raise DracoDecodeError(
            f"the Draco blob declares geometry type {kind} and method {method}, which Draco never writes"
        )
    if (major, minor) not in _VERSIONS[kind]:
        raise DracoDecodeError(
            f"the Draco {_KIND_NAMES[kind]} blob has bitstream version {major}.{minor}; "
            f"this reader takes {' or '.join(f'{a}.{b}' for a, b in sorted(_VERSIONS[kind]))}"
        )
    reader = _Reader(view)
    reader.pos = _HEADER.size
    if flags & _METADATA_FLAG:
        _skip_geometry_metadata(reader)
    if kind == _POINT_CLOUD:
        (points,) = struct.unpack("<i", reader.take(4))
        faces = 0
        if 0 <= points <= max_points:
            _check_point_cloud_attributes(reader, method, points)
    elif method == 0:
        faces, points = reader.varint(), reader.varint()
    else:
        reader.u8()  # traversal decoder type
        points, faces = reader.varint(), reader.varint()
    if not 0 <= points <= max_points:
        raise DracoDecodeError(f"the Draco blob claims {points} points; a cell holds at most {max_points}")
    if faces > max_faces:
        raise DracoDecodeError(f"the Draco blob claims {faces} faces; a cell holds at most {max_faces}")
    return BlobHeader(kind == _MESH, method, points, faces)
