"""LAS and LAZ point clouds in and out through laspy (extra ``las``).

Reading: a file is read ``chunk_rows`` points at a time (``laspy.open(...).chunk_iterator``).
Positions are float64 ``X * scale + offset`` (the formula laspy uses); every other dimension,
standard or extra bytes, becomes a vertex attribute of its on-disk type (bit fields such as
``classification`` or ``return_number`` as ``uint8``; extra bytes as their raw, unscaled
values). The invariant that makes the round trip exact: ``round((x - offset) / scale)`` gives
back ``X`` for every point. :func:`read_las_chunks` proves it from the header (when
``|offset| / scale < 2**48``, as in any survey file) or else checks it point by point, and
refuses a file where it fails.

The header's scale, offset, point format, version and extra-bytes descriptions are kept in the
store's root block as ``las_header`` (see :func:`las_header_record`), so :class:`LasWriter`
writes the same integers back. Other stores are written as LAS 1.2 (point formats 0-3, which
every reader takes) whenever their attributes fit, else LAS 1.4 (:func:`plain_format`); object
ids go into an extra-bytes dimension ``object_id`` (uint64).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from zarr_vectors._extras import needs
from zarr_vectors.errors import InputError

__all__ = [
    "LAS_SUFFIXES",
    "LasSource",
    "LasWriter",
    "las_columns",
    "laspy_module",
    "las_header_record",
    "las_positions",
    "narrow_fields",
    "open_las",
    "plain_format",
    "read_las_chunks",
]

LAS_SUFFIXES = (".las", ".laz")
_XYZ = ("X", "Y", "Z")
#: Bit fields of point formats 0-3 narrower than in formats 6-10: name -> largest value.
_NARROW = {"classification": 31, "return_number": 7, "number_of_returns": 7}
#: Standard dimensions only LAS 1.4's point formats (6-10) have.
_ONLY_14 = frozenset({"overlap", "scanner_channel", "scan_angle", "nir", "classification_flags"})
#: The extra-bytes dimension holding object ids.
OBJECT_ID = "object_id"


def narrow_fields(names: Any) -> list[str]:
    """The attributes of ``names`` whose values decide whether LAS 1.2 can hold them."""
    return [n for n in _NARROW if n in set(names)]


def plain_format(
    names: Any, ranges: Mapping[str, tuple[float, float]] | None = None, count: int = 0
) -> tuple[int, str]:
    """``(point format, version)`` for points without a ``las_header`` record: LAS 1.2's
    format 0-3 (1 with ``gps_time``, 2 with ``red``/``green``/``blue``, 3 with both) unless an
    attribute needs 1.4: one only formats 6-10 have, a bit field (:func:`narrow_fields`)
    whose ``ranges`` entry (min, max) is missing or out of its 1.2 width, or over 2**32 - 1
    points; then format 6 (7 with colour, 8 with colour and ``nir``)."""
    names = set(names)
    ranges = ranges or {}
    rgb = {"red", "green", "blue"} <= names
    narrow_ok = all(
        n in ranges and ranges[n][0] >= 0 and ranges[n][1] <= top for n, top in _NARROW.items() if n in names
    )
    if not names & _ONLY_14 and narrow_ok and count < 2**32:
        return int("gps_time" in names) + 2 * int(rgb), "1.2"
    return (8 if rgb and "nir" in names else 7 if rgb else 6), "1.4"


def laspy_module() -> Any:
    """The ``laspy`` module, or :class:`InputError` saying which extra brings it."""
    return _laspy()


def _laspy() -> Any:
    try:
        import laspy
    except ImportError as exc:
        raise InputError(needs("LAS/LAZ files", "laspy", "las")) from exc
    return laspy


@dataclass(frozen=True)
class LasSource:
    """What a LAS file's header says: count, bounds, scale and offset, dimensions, CRS."""

    path: Path
    count: int
    mins: np.ndarray
    maxs: np.ndarray
    scale: np.ndarray
    offset: np.ndarray
    point_format: int
    version: str
    dimensions: tuple[str, ...]
    extra: tuple[dict[str, Any], ...]
    crs: Any
    #: Where the point records start, each record's size in bytes, and whether they are
    #: LAZ-compressed (uncompressed records can be read in place: :mod:`las_sort`).
    data_offset: int = 0
    record_size: int = 0
    compressed: bool = True


def _extra_dims(header: Any) -> tuple[dict[str, Any], ...]:
    """Extra-bytes dimensions as JSON records: name, type, element count, scales, offsets."""
    out = []
    for info in header.point_format.extra_dimensions:
        rec: dict[str, Any] = {
            "name": info.name,
            "type": np.dtype(info.dtype).base.str,
            "elements": int(info.num_elements),
            "description": info.description or "",
        }
        for key in ("scales", "offsets"):
            value = getattr(info, key)
            if value is not None:
                rec[key] = np.atleast_1d(value).astype(float).tolist()
        out.append(rec)
    return tuple(out)


def _read_errors(laspy: Any) -> tuple[type[BaseException], ...]:
    """What laspy (and lazrs under it) raise for a file that is not what its header says."""
    errors: tuple[type[BaseException], ...] = (laspy.errors.LaspyException, OSError, ValueError, EOFError)
    try:
        import lazrs  # type: ignore[import-untyped]
    except ImportError:
        return errors
    return (*errors, lazrs.LazrsError)


def _header_errors(laspy: Any) -> tuple[type[BaseException], ...]:
    """What laspy raises for a header whose fields or records are damaged."""
    return (*_read_errors(laspy), struct.error, IndexError, KeyError)


def open_las(path: str | Path) -> LasSource:
    """The header of a LAS/LAZ file (its CRS when the file has one and pyproj is installed).

    The header's point count is checked against the file's size before anything is read:
    uncompressed records take ``record_size`` bytes each from the point data's offset."""
    laspy = _laspy()
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path} does not exist or is not a file")
    _check_records(path)
    try:
        with laspy.open(path) as reader:
            header = reader.header
    except _header_errors(laspy) as exc:
        raise InputError(f"{path}: laspy cannot read it as LAS/LAZ ({_one_line(exc)})") from exc
    crs = None
    try:
        crs = header.parse_crs()
    except ImportError:  # pyproj missing: the CRS cannot be read, the points still can
        crs = None
    except _header_errors(laspy) as exc:
        raise InputError(f"{path}: its CRS records cannot be read ({_one_line(exc)})") from exc
    source = LasSource(
        path=path,
        count=int(header.point_count),
        mins=np.asarray(header.mins, np.float64),
        maxs=np.asarray(header.maxs, np.float64),
        scale=np.asarray(header.scales, np.float64),
        offset=np.asarray(header.offsets, np.float64),
        point_format=int(header.point_format.id),
        version=str(header.version),
        dimensions=tuple(n for n in header.point_format.dimension_names if n not in _XYZ),
        extra=_extra_dims(header),
        crs=crs,
        data_offset=int(header.offset_to_point_data),
        record_size=int(header.point_format.size),
        compressed=bool(header.are_points_compressed),
    )
    _check_size(source, path.stat().st_size)
    if source.compressed and source.count:
        _check_chunks(source, header, path.stat().st_size)
    return source


#: Bytes of a VLR header and of an EVLR header.
_VLR_HEADER, _EVLR_HEADER = 54, 60


def _check_records(path: Path) -> None:
    """The header's VLR and EVLR counts and lengths against the file's size, before laspy
    reads them (it would loop over a count of billions, or allocate an EVLR's claimed length)."""
    size = path.stat().st_size
    with open(path, "rb") as fh:
        head = fh.read(375)
        if len(head) < 227 or head[:4] != b"LASF":
            return  # laspy explains what is wrong
        minor = head[25]
        header_size, data_offset, n_vlrs = struct.unpack_from("<HII", head, 94)
        room = data_offset - header_size
        if not header_size <= data_offset <= size or n_vlrs * _VLR_HEADER > room:
            raise InputError(
                f"{path}: the header's {n_vlrs:,} variable-length records (from byte {header_size:,} "
                f"to the point data at byte {data_offset:,}) do not fit the file of {size:,} bytes"
            )
        if minor < 4 or len(head) < 247:
            return
        first, n_evlrs = struct.unpack_from("<QI", head, 235)
        if n_evlrs == 0:
            return
        if first > size or n_evlrs * _EVLR_HEADER > size - first:
            raise InputError(
                f"{path}: the header's {n_evlrs:,} extended records from byte {first:,} do not fit "
                f"the file of {size:,} bytes"
            )
        at = first
        for _ in range(n_evlrs):  # each record's length, so none claims more than the file has
            fh.seek(at)
            raw = fh.read(_EVLR_HEADER)
            length = struct.unpack_from("<Q", raw, 52)[0] if len(raw) == _EVLR_HEADER else size
            at += _EVLR_HEADER + length
            if at > size:
                raise InputError(f"{path}: an extended record runs past the file's end ({size:,} bytes)")


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:300] or type(exc).__name__


def _check_size(source: LasSource, size: int) -> None:
    """The header's count, offset and scales against the file (before any point is read)."""
    if source.data_offset > size:
        raise InputError(
            f"{source.path}: the header puts the points at byte {source.data_offset:,}, past the "
            f"file's end ({size:,} bytes)"
        )
    if not np.all(np.isfinite(source.scale) & (source.scale != 0) & np.isfinite(source.offset)):
        raise InputError(
            f"{source.path}: the header's scales {source.scale} or offsets {source.offset} are unusable"
        )
    need = source.count * source.record_size
    if not source.compressed and need > size - source.data_offset:
        raise InputError(
            f"{source.path}: the file ends inside its point records (the header says {source.count:,} "
            f"points of {source.record_size} bytes from byte {source.data_offset:,}: {need:,} bytes, "
            f"and the file has {size:,})"
        )


def _check_chunks(source: LasSource, header: Any, size: int) -> None:
    """A LAZ file's count against its chunk table: the chunks must hold the header's points
    (their count is checked against the file's size before lazrs reads the table). Within
    the last chunk an overstated count cannot be told from the header: the decoder notices
    only when the compressed bytes run out."""
    try:
        import lazrs
    except ImportError:
        return
    vlr = next((v for v in header.vlrs if type(v).__name__ == "LasZipVlr"), None)
    if vlr is None:
        raise InputError(f"{source.path}: the points are compressed but the file has no laszip record")
    where = f"{source.path}: the LAZ chunk table"
    with open(source.path, "rb") as fh:
        fh.seek(source.data_offset)
        (table,) = struct.unpack("<q", fh.read(8).ljust(8, b"\xff"))
        if table == -1:
            fh.seek(max(size - 8, 0))
            (table,) = struct.unpack("<q", fh.read(8).ljust(8, b"\xff"))
        if not source.data_offset + 8 <= table <= size - 8:
            raise InputError(f"{where} is said to be at byte {table:,}, outside the point data")
        fh.seek(table)
        _, chunks = struct.unpack("<II", fh.read(8))
        if chunks > table - source.data_offset:  # every chunk takes at least a byte
            raise InputError(f"{where} lists {chunks:,} chunks in {table - source.data_offset:,} bytes")
        try:
            laz = lazrs.LazVlr(vlr.record_data)
            fh.seek(source.data_offset)
            entries = lazrs.read_chunk_table(fh, laz)
        except (lazrs.LazrsError, OSError, ValueError) as exc:
            raise InputError(f"{where} cannot be read ({_one_line(exc)})") from exc
    held = sum(n for n, _ in entries)
    if source.count > held:
        raise InputError(
            f"{source.path}: the header says {source.count:,} points, but the LAZ chunks hold at "
            f"most {held:,} ({len(entries)} chunks)"
        )


def las_header_record(source: LasSource) -> dict[str, Any]:
    """The ``las_header`` block the store keeps (JSON): enough to write the same file layout."""
    return {
        "scale": source.scale.tolist(),
        "offset": source.offset.tolist(),
        "point_format": source.point_format,
        "version": source.version,
        "extra_bytes": [dict(e) for e in source.extra],
    }


#: Below this ``|offset| / scale``, ``rint((X * scale + offset - offset) / scale) == X`` holds
#: for every int32 ``X``: the float64 rounding errors add up to at most
#: ``2**-53 * (4 * 2**31 + |offset| / scale)`` in units of ``X``, far below 1/2.
_EXACT_WITHOUT_CHECK = 2.0**48


def las_positions(raw: np.ndarray, source: LasSource) -> np.ndarray:
    """float64 ``X * scale + offset`` per axis, proven (see :data:`_EXACT_WITHOUT_CHECK`) or
    checked point by point to invert exactly."""
    pos = np.empty((len(raw), 3), np.float64)
    for ax, name in enumerate(_XYZ):
        ints = raw[name]
        np.multiply(ints, source.scale[ax], out=pos[:, ax])
        pos[:, ax] += source.offset[ax]
        if abs(source.offset[ax]) / source.scale[ax] < _EXACT_WITHOUT_CHECK:
            continue
        back = np.rint((pos[:, ax] - source.offset[ax]) / source.scale[ax])
        if not np.array_equal(back, ints):
            raise InputError(
                f"{source.path}: the {name} integers do not survive X * scale + offset in float64 "
                f"(scale {source.scale[ax]}, offset {source.offset[ax]}); this file cannot be "
                "stored exactly as float positions"
            )
    return pos


def las_columns(
    raw: np.ndarray, point_format: Any, source: LasSource
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Positions and attributes (``source.dimensions``, in order) of the structured point
    records ``raw`` of laspy's ``point_format``."""
    rec = _laspy().PackedPointRecord(raw, point_format)
    fields = raw.dtype.names or ()
    attrs: dict[str, np.ndarray] = {}
    for name in source.dimensions:
        values = raw[name] if name in fields else np.asarray(rec[name])
        attrs[name] = np.ascontiguousarray(values)
    return las_positions(raw, source), attrs


def read_las_chunks(
    source: LasSource, chunk_rows: int = 1 << 20
) -> Iterator[tuple[np.ndarray, dict[str, np.ndarray]]]:
    """``(positions, attributes)`` of ``chunk_rows`` points at a time, in file order; a file
    that ends before the header's count, or whose compressed points do not decode, is an
    :class:`InputError`."""
    laspy = _laspy()
    seen = 0
    try:
        with laspy.open(source.path) as reader:
            for rec in reader.chunk_iterator(chunk_rows):
                seen += len(rec.array)
                yield las_columns(rec.array, rec.point_format, source)
    except _read_errors(laspy) as exc:
        if isinstance(exc, InputError):
            raise
        raise InputError(
            f"{source.path}: the points after the first {seen:,} cannot be read (the header says "
            f"{source.count:,}; truncated or damaged file?): {_one_line(exc)}"
        ) from exc
    if seen != source.count:
        raise InputError(f"{source.path}: {seen:,} points read, but the header says {source.count:,}")


# -- writing -----------------------------------------------------------------------------


def _pick_scale(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Scale 0.001 (coarser where needed to fit int32) and offset ``floor(lo)`` per axis."""
    offset = np.floor(np.where(np.isfinite(lo), lo, 0.0))
    span = np.maximum(np.abs(hi - offset), np.abs(lo - offset))
    scale = np.full(len(lo), 0.001)
    while np.any(span / scale > 2**31 - 2):
        scale = np.where(span / scale > 2**31 - 2, scale * 10, scale)
    return scale, offset


class LasWriter:
    """A LAS/LAZ file written piece by piece; the format from the suffix (``.laz``: compressed).

    With a store's ``las_header`` record the file gets its scale, offset, point format,
    version and extra-bytes dimensions back; otherwise the format :func:`plain_format` picks
    from the attribute names, ``ranges`` and ``count``, scale 0.001 and offset ``floor(lo)``.
    Attributes named as a standard dimension of the format fill it; others become extra
    bytes; with ``object_ids``, an extra-bytes dimension ``object_id`` (uint64; negative
    ids wrap to two's complement, as in Neuroglancer exports) holds each point's object id
    (``object_id_`` when an attribute has the name). Positions off the integer grid are
    rounded to it (``rounded`` counts them).
    """

    def __init__(
        self,
        path: str | Path,
        attributes: Mapping[str, np.dtype],
        *,
        bounds: tuple[np.ndarray, np.ndarray],
        record: Mapping[str, Any] | None = None,
        crs: Any = None,
        ranges: Mapping[str, tuple[float, float]] | None = None,
        count: int = 0,
        object_ids: bool = False,
    ) -> None:
        laspy = _laspy()
        self.path = Path(path)
        if self.path.suffix.lower() not in LAS_SUFFIXES:
            raise InputError(f"{self.path.name}: a LAS file ends in .las or .laz")
        lo, hi = (np.asarray(b, np.float64)[:3] for b in bounds)
        if len(lo) != 3:
            raise InputError(
                f"LAS holds 3-D points and this store has {len(lo)} axes; export to .csv or .ply"
            )
        if record is not None:
            fmt, version = int(record["point_format"]), str(record["version"])
            scale, offset = np.asarray(record["scale"]), np.asarray(record["offset"])
            extra = [dict(e) for e in record.get("extra_bytes", [])]
        else:
            fmt, version = plain_format(attributes, ranges, count)
            scale, offset = _pick_scale(lo, hi)
            extra = []
        header = laspy.LasHeader(point_format=fmt, version=version)
        header.scales, header.offsets = scale, offset
        standard = set(header.point_format.dimension_names)
        known = {e["name"] for e in extra}
        for name, dtype in attributes.items():
            if name not in standard and name not in known:
                extra.append({"name": name, "type": np.dtype(dtype).base.str, "elements": 1})
        self.object_id: str | None = None
        if object_ids:
            taken = standard | {e["name"] for e in extra}
            self.object_id = next(n for n in (OBJECT_ID, OBJECT_ID + "_", OBJECT_ID + "__") if n not in taken)
            extra.append({"name": self.object_id, "type": "<u8", "elements": 1})
        for e in extra:
            header.add_extra_dim(self._extra_params(laspy, e, attributes.get(e["name"])))
        if crs is not None:
            header.add_crs(crs)
        self.header = header
        self.names = [n for n in attributes if n in set(header.point_format.dimension_names)]
        self.scale, self.offset = scale, offset
        self.rounded = 0
        self.count = 0
        self._writer = laspy.open(self.path, mode="w", header=header, do_compress=self._compress())

    def _compress(self) -> bool:
        return self.path.suffix.lower() == ".laz"

    @staticmethod
    def _extra_params(laspy: Any, e: Mapping[str, Any], dtype: np.dtype | None) -> Any:
        base = np.dtype(e["type"])
        kind = base if int(e.get("elements", 1)) == 1 else np.dtype((base, (int(e["elements"]),)))
        if dtype is not None and np.dtype(dtype).kind not in "iuf":
            raise InputError(f"attribute {e['name']!r} has dtype {dtype}, which LAS extra bytes cannot hold")
        return laspy.ExtraBytesParams(
            name=e["name"],
            type=kind,
            description=e.get("description", ""),
            scales=None if "scales" not in e else np.asarray(e["scales"]),
            offsets=None if "offsets" not in e else np.asarray(e["offsets"]),
        )

    def write(
        self, positions: np.ndarray, attributes: Mapping[str, np.ndarray], object_ids: Any = None
    ) -> None:
        """Append points: (N, 3) positions, the attributes named at construction and (when
        made with ``object_ids``) their object ids."""
        laspy = _laspy()
        n = len(positions)
        rec = laspy.ScaleAwarePointRecord.zeros(n, header=self.header)
        raw = rec.array
        for ax, name in enumerate(_XYZ):
            x = np.asarray(positions[:, ax], np.float64)
            ints = np.rint((x - self.offset[ax]) / self.scale[ax])
            if np.any(np.abs(ints) > 2**31 - 1):
                raise InputError(
                    f"{name} values do not fit LAS's 32-bit integers at scale {self.scale[ax]}; "
                    "export a smaller box or to .csv/.ply"
                )
            self.rounded += int(np.count_nonzero(ints * self.scale[ax] + self.offset[ax] != x))
            raw[name] = ints.astype(np.int32)
        fields = set(raw.dtype.names or ())
        for name in self.names:
            values = np.asarray(attributes[name])
            if name in fields:
                raw[name] = values.reshape(raw[name].shape)
            else:
                rec[name] = values
        if self.object_id is not None:
            if object_ids is None:
                raise InputError("this LAS file holds object ids; pass them for every point")
            rec[self.object_id] = np.asarray(object_ids).astype(np.int64, copy=False).view(np.uint64)
        self._writer.write_points(rec)
        self.count += n

    def close(self) -> None:
        self._writer.close()

    def __enter__(self) -> LasWriter:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
