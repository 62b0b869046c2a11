"""Opened arrays of a level: parsed ``zarr.json`` plus decoding of their cells.

Decoded-size bounds. Every array decodes its cells through a :class:`Pipeline` whose
``max_size`` comes from the level's metadata, so a crafted size field (a zstd frame's
content size, a blosc ``nbytes``) cannot make a read allocate more. With ``V`` the
level's ``vertex_count``, ``B`` its bins per chunk and ``R`` the links family's
``num_physical_records``, a cell of

* ``vertices`` (raw), ``vertex_attributes/*``: at most ``V`` rows of its dtype x row shape;
* ``vertices`` (Draco): ``DRACO_BYTES`` per vertex, ``V`` vertices;
* ``vertex_fragments``, ``fragment_attributes/*``: ``V + B`` fragments (a chunk's fragments
  are its bins or runs of its rows), ``FRAGMENT_BYTES`` each for the index;
* ``links/0/*``, ``link_attributes/*``, ``link_fragments``: ``R`` records (``R + B``
  fragments), plus 8 bytes of ragged-blob offset per record;

decodes to at most ``BOUND_SLACK`` bytes more than that. A dense table chunk decodes to
exactly its chunk's bytes; manifest buckets get a bound from the level's fragments
(``Level``); other vlen tables (groups, strings) ``DEFAULT_MAX_DECODED``.

A cell listed in ``nonempty_chunks`` that is missing from the store is a
:class:`CorruptCellError`, never an empty cell.

The ``zarr.json`` of every array is parsed by :mod:`zarr_vectors.format.documents` (the
validator reads the same parse); this module adds the pipelines and the decoding.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, TypeVar

import numpy as np

from zarr_vectors.engine.chunks.pipeline import (
    DEFAULT_MAX_DECODED,
    DRACO,
    Pipeline,
    UnsupportedPipeline,
    geometry_codec,
)
from zarr_vectors.errors import DECODE_FAILURES, CorruptCellError, FormatError, decoding
from zarr_vectors.format.documents import (
    MAX_CELLS,
    MAX_ROW_WIDTH,
    CellArrayDoc,
    TableDoc,
    parse_cell_array,
    parse_nonempty,
    parse_table,
)
from zarr_vectors.format.findings import UNSUPPORTED, Finding, raise_for
from zarr_vectors.format.grid import cell_key
from zarr_vectors.format.groups import LinkLayout, LinksFamily, parse_link_layout
from zarr_vectors.format.shards import inner_codecs, parse_sharding
from zarr_vectors.storage import Arena

__all__ = [
    "CellArray",
    "TableArray",
    "LinkArray",
    "BOUND_SLACK",
    "FRAGMENT_BYTES",
    "DRACO_BYTES",
    "MAX_CELLS",
    "MAX_ROW_WIDTH",
]

#: Decoded bytes a chunk of a text table (object or group names, labels) may hold per row, on
#: average: text attributes are labels, not documents, so a chunk claiming far more is damage.
TEXT_ROW_BYTES = 1 << 20
#: Bytes every decoded-size bound allows on top of its per-row part (headers, framing).
BOUND_SLACK = 1 << 20
#: Bytes per fragment a fragment-index cell may take: a 16-byte range row, its bitmap bit,
#: and room for explicit row lists (a row may sit in several shared fragments).
FRAGMENT_BYTES = 64
#: Bytes per vertex a Draco blob may take (it compresses 12 bytes of position and about
#: two faces per vertex; the order-preserving coder is about ten times larger than edgebreaker).
DRACO_BYTES = 256

_A = TypeVar("_A", bound="CellArray")
_T = TypeVar("_T", bound="TableArray")


def _pipeline(path: str, doc: dict[str, Any]) -> Pipeline:
    """The pipeline of one cell (inside the ``sharding_indexed`` codec when sharded: the
    backend's shard layer hands out inner chunks, see :mod:`zarr_vectors.storage.shards`)."""
    parse_sharding(path, doc)  # a malformed sharding configuration: FormatError
    try:
        return Pipeline.from_codecs(inner_codecs(doc) or [])
    except UnsupportedPipeline as exc:
        codecs = doc.get("codecs")
        listed = isinstance(codecs, list) and all(isinstance(c, dict) for c in codecs)
        names = [c.get("name") for c in codecs] if listed and codecs is not None else codecs
        raise FormatError(
            f"array {path!r} uses codecs {names}, which this library cannot decode yet ({exc})"
        ) from exc
    except ImportError as exc:
        raise FormatError(f"array {path!r}: {exc}") from exc


def read_dtype(path: str, attrs: dict[str, Any], dtype: np.dtype) -> np.dtype:
    """``datetime64[unit]`` for an array whose ``time_unit`` attribute names a numpy unit (its
    values int64 counts of that unit since 1970-01-01), else ``dtype``."""
    unit = attrs.get("time_unit")
    if unit is None:
        return dtype
    try:
        out = np.dtype(f"datetime64[{unit}]")
    except TypeError as exc:
        raise FormatError(f"array {path!r}: time_unit {unit!r} is not a numpy datetime unit") from exc
    if dtype != np.int64:
        raise FormatError(f"array {path!r}: time_unit is set but the values are {dtype}, not int64")
    return out


@dataclass(eq=False)
class CellArray:
    """A per-chunk vlen array over the level's chunk grid (``vertices``, attributes, ...).

    ``max_rows`` is the most rows (records, fragments) one cell may hold by the level's
    metadata and ``row_bytes`` the bytes each may take (default: dtype x row width); they
    bound decoding (see the module docstring). Without ``max_rows`` the bound is
    ``DEFAULT_MAX_DECODED``.

    The document is parsed by :func:`~zarr_vectors.format.documents.parse_cell_array`
    (``ndim``: the store's space axes, to check the grid's rank; ``parsed``: a parse already
    made); anything that blocks reading raises FormatError. :meth:`parse` builds the array
    without raising and returns the findings instead (``pipeline`` is then None when the
    cells cannot be decoded here).
    """

    path: str
    doc: dict[str, Any]
    max_rows: int | None = None
    row_bytes: int | None = None
    ndim: int | None = field(default=None, kw_only=True)
    parsed: CellArrayDoc | None = field(default=None, kw_only=True, repr=False)
    strict: bool = field(default=True, kw_only=True, repr=False)
    pipeline: Pipeline | None = field(init=False, repr=False)
    findings: list[Finding] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.findings = []
        if self.parsed is None:
            parsed, found = parse_cell_array(self.path, self.doc, self.ndim)
            self._found(found)
            if parsed is None:  # a finding that blocks reading says why
                raise FormatError(f"array {self.path!r} cannot be parsed")
            self.parsed = parsed
        self.shape = self.parsed.shape
        self._layout()
        try:
            self.pipeline = _pipeline(self.path, self.doc).bounded(self.max_bytes)
        except FormatError as exc:
            if self.strict:
                raise
            self.pipeline = None
            self.findings.append(Finding(self.path, "metadata.codecs", str(exc), UNSUPPORTED))

    def _found(self, found: list[Finding]) -> None:
        self.findings += found
        if self.strict:
            raise_for(found)

    def _layout(self) -> None:
        """Hook for arrays whose row layout needs more than their own document."""

    def _usable(self) -> bool:
        return True

    @classmethod
    def parse(
        cls: type[_A],
        path: str,
        doc: dict[str, Any],
        max_rows: int | None = None,
        row_bytes: int | None = None,
        **options: Any,
    ) -> tuple[_A | None, list[Finding]]:
        """The array and every finding about it, without raising for them (None when the
        document is unusable); ``options`` are the keyword-only fields (``ndim``, ...)."""
        parsed, found = parse_cell_array(path, doc, options.pop("ndim", None))
        if parsed is None:
            return None, found
        arr = cls(
            path, doc, max_rows, row_bytes, ndim=len(parsed.shape), parsed=parsed, strict=False, **options
        )
        return (arr if arr._usable() else None), found + arr.findings

    @property
    def attrs(self) -> dict[str, Any]:
        assert self.parsed is not None
        return self.parsed.attributes

    @property
    def max_bytes(self) -> int:
        """Most bytes one decoded cell may hold (see the module docstring)."""
        if self.max_rows is None:
            return DEFAULT_MAX_DECODED
        if self.row_bytes is not None:
            per_row = self.row_bytes
        elif self.parsed is not None and self.parsed.dtype is not None:
            per_row = self.parsed.dtype.itemsize * self.row_width
        else:
            return DEFAULT_MAX_DECODED
        return min(BOUND_SLACK + int(self.max_rows) * per_row, DEFAULT_MAX_DECODED)

    @property
    def decoder(self) -> Pipeline:
        """The pipeline, which an array made by :meth:`parse` may lack."""
        if self.pipeline is None:
            raise FormatError(f"array {self.path!r}: this library cannot decode its cells")
        return self.pipeline

    @cached_property
    def origin(self) -> np.ndarray:
        assert self.parsed is not None
        return np.asarray(self.parsed.origin, dtype=np.int64)

    @cached_property
    def listing(self) -> tuple[np.ndarray | None, list[Finding]]:
        """``nonempty_chunks`` parsed: its usable chunks (None: unusable as a whole) and findings."""
        return parse_nonempty(
            self.path, self.attrs.get("nonempty_chunks"), self.shape, tuple(self.origin.tolist())
        )

    @cached_property
    def nonempty(self) -> np.ndarray:
        """(M, D) absolute chunk coordinates listed in ``nonempty_chunks``, each inside the grid."""
        chunks, found = self.listing
        raise_for(found)
        assert chunks is not None
        return chunks

    @cached_property
    def _listed_sorted(self) -> np.ndarray:
        """Sorted linear cell indices of the listed chunks."""
        return np.sort(self._linear(self.nonempty))

    def _linear(self, chunks: np.ndarray) -> np.ndarray:
        shape = np.asarray(self.shape, np.int64)
        strides = np.r_[np.cumprod(shape[::-1])[:-1][::-1], 1].astype(np.int64)
        return (np.asarray(chunks, np.int64).reshape(-1, len(shape)) - self.origin) @ strides

    def listed(self, chunks: np.ndarray) -> np.ndarray:
        """(K,) whether each absolute chunk of ``chunks`` (K, D) is in ``nonempty_chunks``."""
        chunks = np.asarray(chunks, np.int64).reshape(-1, len(self.shape))
        cell = chunks - self.origin
        inside = np.all((cell >= 0) & (cell < np.asarray(self.shape, np.int64)), axis=1)
        ids = self._listed_sorted
        if not len(ids):
            return np.zeros(len(chunks), bool)
        lin = np.where(inside, self._linear(chunks), -1)
        at = np.minimum(np.searchsorted(ids, lin), len(ids) - 1)
        return inside & (ids[at] == lin)

    def is_listed(self, chunk: Sequence[int] | np.ndarray) -> bool:
        """Whether ``chunk`` (absolute) is one of the array's ``nonempty_chunks``."""
        cell = np.asarray(chunk, np.int64) - self.origin
        if np.any(cell < 0) or np.any(cell >= np.asarray(self.shape, np.int64)):
            return False
        ids = self._listed_sorted
        lin = self._linear(np.asarray(chunk))[0]
        at = int(np.searchsorted(ids, lin))
        return at < len(ids) and int(ids[at]) == int(lin)

    @cached_property
    def dtype(self) -> np.dtype:
        assert self.parsed is not None
        if self.parsed.dtype is None:
            raise FormatError(f"array {self.path!r} has no usable dtype attribute")
        return self.parsed.dtype

    @cached_property
    def read_dtype(self) -> np.dtype:
        """The dtype values read as: ``datetime64`` of the array's ``time_unit`` when it has
        one (its cells hold int64 counts of that unit), else :attr:`dtype`."""
        return read_dtype(self.path, self.attrs, self.dtype)

    def as_read(self, values: np.ndarray) -> np.ndarray:
        """Decoded ``values`` (of :attr:`dtype`) as :attr:`read_dtype` (a view, no copy)."""
        return values if self.read_dtype == values.dtype else values.view(self.read_dtype)

    @property
    def row_width(self) -> int:
        assert self.parsed is not None
        return self.parsed.row_width

    @property
    def width(self) -> int:
        """Values of ``dtype`` per row of a cell."""
        return self.row_width

    @property
    def parallel(self) -> str:
        """For a link attribute array, the path of the links array it mirrors (else ``""``)."""
        assert self.parsed is not None
        return self.parsed.parallel

    def chunk_of(self, key: str) -> tuple[int, ...] | None:
        """Absolute chunk of a stored cell key ``c/i/j/k`` (relative to the array; None when it
        is not a cell of the grid's rank)."""
        parts = key.split("/")
        if len(parts) != len(self.shape) + 1 or parts[0] != "c":
            return None
        try:
            cell = [int(p) for p in parts[1:]]
        except ValueError:
            return None
        if any(abs(c) >= MAX_CELLS for c in cell):
            return None
        return tuple(c + o for c, o in zip(cell, self.origin.tolist()))

    def key(self, chunk: Sequence[int] | np.ndarray) -> str:
        return f"{self.path}/{cell_key(np.asarray(chunk) - self.origin)}"

    def keys(self, chunks: np.ndarray) -> list[str]:
        """Store keys of the cells of ``chunks`` (K, D)."""
        prefix = f"{self.path}/c/"
        return [prefix + "/".join(map(str, cell)) for cell in (np.asarray(chunks) - self.origin).tolist()]

    def payload(
        self, raw: bytes | memoryview | None, chunk: Sequence[int], scratch: Arena | None = None
    ) -> memoryview:
        """Decoded cell payload: empty for a cell that is not listed and not stored; a
        listed cell missing from the store is a CorruptCellError. With ``scratch`` it may be
        a slice of it."""
        if raw is None:
            if self.is_listed(chunk):
                raise CorruptCellError(
                    self.path,
                    ".".join(map(str, chunk)),
                    "the chunk is listed in nonempty_chunks but its cell is missing from the store",
                )
            return memoryview(b"")
        with decoding(self.path, chunk):
            return self.decoder.decode(raw, scratch)

    @cached_property
    def draco(self) -> bool:
        """Cells are Draco blobs (``encoding: "draco"``, the draco codec first in the list)."""
        return geometry_codec(inner_codecs(self.doc)) == DRACO

    def mesh_rows(self, raw: bytes | None, chunk: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """A Draco cell's (N, 3) float32 positions and (F, 3) int64 intra-chunk faces.

        The blob may claim at most ``8 * max_rows + 1024`` points (Draco splits vertices where
        the surface is not a single fan) and ``64 * max_rows + 1024`` faces.
        """
        from zarr_vectors._draco import decode_cell

        data = self.payload(raw, chunk)
        if len(data) == 0:
            return np.zeros((0, 3), np.float32), np.zeros((0, 3), np.int64)
        limits = (
            {}
            if self.max_rows is None
            else {
                "max_points": 8 * int(self.max_rows) + 1024,
                "max_faces": 64 * int(self.max_rows) + 1024,
            }
        )
        return decode_cell(bytes(data), array=self.path, chunk=".".join(map(str, chunk)), **limits)

    def direct_rows(
        self, raw: bytes | memoryview | None, chunk: Sequence[int], width: int | None = None
    ) -> int | None:
        """The number of rows of a stored cell, from its header alone, when :meth:`rows_to` can
        decode it straight into an array (None: decode it with :meth:`rows`)."""
        if raw is None or not self.decoder.direct:
            return None
        with decoding(self.path, chunk):
            size = self.decoder.payload_size(raw)
        if size is None:
            return None
        stride = self.dtype.itemsize * (self.row_width if width is None else width)
        if size % stride:
            raise CorruptCellError(
                self.path,
                ".".join(map(str, chunk)),
                f"{size} bytes is not a whole number of {stride}-byte rows",
            )
        return size // stride

    def direct_rows_many(
        self, raws: Sequence[bytes | memoryview | None], chunks: np.ndarray, width: int | None = None
    ) -> list[int] | None:
        """:meth:`direct_rows` of each cell (``raws[i]`` of ``chunks[i]``), or None when one
        cannot be decoded straight. A bad cell raises as there, naming its chunk."""
        pipe = self.pipeline
        if pipe is None or not pipe.direct or any(raw is None for raw in raws):
            return None
        stride = self.dtype.itemsize * (self.row_width if width is None else width)
        try:
            sizes = [pipe.payload_size(raw) for raw in raws]  # type: ignore[arg-type]
        except DECODE_FAILURES:
            sizes = [self.direct_rows(raw, chunk, width) for raw, chunk in zip(raws, chunks)]  # raises
        if any(size is None for size in sizes):
            return None
        ragged = [i for i, size in enumerate(sizes) if size % stride]  # type: ignore[operator]
        if ragged:
            self.direct_rows(raws[ragged[0]], chunks[ragged[0]], width)  # raises, naming the cell
        return [size // stride for size in sizes]  # type: ignore[operator]

    def rows_to_many(
        self,
        raws: Sequence[bytes | memoryview | None],
        chunks: np.ndarray,
        out: np.ndarray,
        starts: Sequence[int],
    ) -> None:
        """Decode cell ``i`` straight into rows ``starts[i]:starts[i + 1]`` of ``out`` (sizes from
        :meth:`direct_rows_many`); a bad cell raises as :meth:`rows_to` does."""
        if not len(raws):
            return
        flat = out.reshape(len(out), int(np.prod(out.shape[1:], dtype=np.int64))).view(np.uint8)
        decode_to = self.decoder.decode_to
        i = 0
        try:
            for i, raw in enumerate(raws):
                decode_to(raw, flat[starts[i] : starts[i + 1]].reshape(-1).data)  # type: ignore[arg-type]
        except DECODE_FAILURES:
            self.rows_to(raws[i], chunks[i], out[starts[i] : starts[i + 1]])  # type: ignore[arg-type]
            raise

    def rows_to(self, raw: bytes | memoryview, chunk: Sequence[int], out: np.ndarray) -> None:
        """Decode a cell straight into ``out`` (C-contiguous, of :meth:`direct_rows` rows)."""
        with decoding(self.path, chunk):
            self.decoder.decode_to(raw, out.reshape(-1).view(np.uint8).data)

    def rows(
        self,
        raw: bytes | memoryview | None,
        chunk: Sequence[int],
        width: int | None = None,
        scratch: Arena | None = None,
    ) -> np.ndarray:
        """Cell as (n, width) rows of ``dtype``; checks the byte length is whole rows. With
        ``scratch`` the rows may be a view of it (valid until it is reset)."""
        width = self.row_width if width is None else width
        data = self.payload(raw, chunk, scratch)
        stride = self.dtype.itemsize * width
        if len(data) % stride:
            raise CorruptCellError(
                self.path,
                ".".join(map(str, chunk)),
                f"{len(data)} bytes is not a whole number of {stride}-byte rows",
            )
        return np.frombuffer(data, dtype=self.dtype).reshape(-1, width)


@dataclass(eq=False)
class TableArray:
    """A non-spatial array indexed by object or group: vlen (manifests, groups), dense
    (object / group attributes, ``(B,)`` or ``(B, C)``) or ``string``.

    ``max_bytes`` bounds a decoded vlen chunk (a dense chunk decodes to exactly its size);
    ``max_absent`` is how many elements may be the fill value, so that a missing vlen
    chunk holding more elements than that is a CorruptCellError (None: no limit). The
    document is parsed by :func:`~zarr_vectors.format.documents.parse_table`; :meth:`parse`
    returns the findings instead of raising for them.
    """

    path: str
    doc: dict[str, Any]
    max_bytes: int = DEFAULT_MAX_DECODED
    max_absent: int | None = None
    parsed: TableDoc | None = field(default=None, kw_only=True, repr=False)
    strict: bool = field(default=True, kw_only=True, repr=False)
    findings: list[Finding] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.findings = []
        if self.parsed is None:
            parsed, self.findings = parse_table(self.path, self.doc)
            if self.strict:
                raise_for(self.findings)
            if parsed is None:  # a finding that blocks reading says why
                raise FormatError(f"table {self.path!r} cannot be parsed")
            self.parsed = parsed
        self.shape = self.parsed.shape
        self.chunk_shape = self.parsed.chunk_shape

    @classmethod
    def parse(
        cls: type[_T], path: str, doc: dict[str, Any], **options: Any
    ) -> tuple[_T | None, list[Finding]]:
        """The table and every finding about it, without raising (None when unusable)."""
        parsed, found = parse_table(path, doc)
        if parsed is None:
            return None, found
        return cls(path, doc, parsed=parsed, strict=False, **options), found

    @cached_property
    def pipeline(self) -> Pipeline:
        pipe = _pipeline(self.path, self.doc)
        if pipe.serializer == "bytes":
            return pipe.bounded(math.prod(self.chunk_shape) * self.dense_dtype.itemsize)
        if self.doc.get("data_type") == "string":  # text: at most TEXT_ROW_BYTES per row on average
            rows = min(math.prod(self.chunk_shape), math.prod(self.shape))
            return pipe.bounded(min(self.max_bytes, BOUND_SLACK + rows * (4 + TEXT_ROW_BYTES)))
        return pipe.bounded(self.max_bytes)

    @property
    def attrs(self) -> dict[str, Any]:
        assert self.parsed is not None
        return self.parsed.attributes

    @property
    def length(self) -> int:
        return self.shape[0]

    @property
    def chunk(self) -> int:
        return self.chunk_shape[0]

    @property
    def n_chunks(self) -> int:
        return -(-self.length // self.chunk)

    @cached_property
    def dense_dtype(self) -> np.dtype:
        assert self.parsed is not None
        if self.parsed.dtype is None:
            raise FormatError(f"table {self.path!r} has data_type {self.parsed.data_type!r}, not numbers")
        return self.parsed.dtype

    def chunk_keys(self, chunks: Sequence[int]) -> list[str]:
        tail = "/0" * (len(self.shape) - 1)
        return [f"{self.path}/c/{c}{tail}" for c in chunks]

    def _absent(self, c: int, n: int) -> None:
        """A missing vlen chunk ``c`` of ``n`` elements: refused when more than ``max_absent``
        elements may be empty."""
        if self.max_absent is not None and n > self.max_absent:
            raise CorruptCellError(
                self.path,
                str(c),
                f"the chunk is missing from the store, but at most {self.max_absent} of its elements may be empty "
                f"and it holds {n}",
            )

    def vlen_items(self, raw: bytes | None, c: int) -> list[memoryview]:
        """Elements of vlen chunk ``c`` that lie inside the array (all empty when the chunk
        may be and is missing)."""
        n = max(0, min(self.chunk, self.length - c * self.chunk))
        if raw is None:
            self._absent(c, n)
            return [memoryview(b"")] * n
        with decoding(self.path, c):
            items = self.pipeline.decode_items(raw, limit=n)
        if len(items) != n:
            raise CorruptCellError(self.path, str(c), f"holds {len(items)} elements, expected {n}")
        return items

    def vlen_items_at(self, raw: bytes | None, c: int, wanted: Sequence[int]) -> dict[int, memoryview]:
        """Elements ``wanted`` (indices within chunk ``c``) of a vlen chunk; empty when it may be
        and is missing."""
        if raw is None:
            self._absent(c, max(0, min(self.chunk, self.length - c * self.chunk)))
            return {i: memoryview(b"") for i in wanted}
        with decoding(self.path, c):
            return self.pipeline.decode_items_at(raw, wanted)

    def dense(self, raws: Sequence[bytes | None]) -> np.ndarray:
        """The whole dense array from its chunks (missing chunks read as the fill value);
        a ``string`` array comes back as a numpy ``str`` array."""
        if self.doc.get("data_type") == "string":
            values: list[str] = []
            for c, raw in enumerate(raws):
                with decoding(self.path, c):
                    values += [bytes(v).decode("utf-8") for v in self.vlen_items(raw, c)]
            return np.array(values, dtype=str) if values else np.zeros(self.length, dtype="<U1")
        dtype = self.dense_dtype
        fill = self.doc.get("fill_value")
        if isinstance(fill, str):
            fill = {"NaN": np.nan, "Infinity": np.inf, "-Infinity": -np.inf}.get(fill, fill)
        try:
            out = np.full(self.shape, fill, dtype=dtype)
        except (TypeError, ValueError, OverflowError) as exc:
            raise FormatError(
                f"array {self.path!r}: fill_value {self.doc.get('fill_value')!r} does not fit {dtype}"
            ) from exc
        n = math.prod(self.chunk_shape)
        for c, raw in enumerate(raws):
            if raw is None:
                continue
            with decoding(self.path, c):
                data = self.pipeline.decode(raw)
            if len(data) != n * dtype.itemsize:
                raise CorruptCellError(self.path, str(c), f"{len(data)} bytes, expected {n * dtype.itemsize}")
            block = np.frombuffer(data, dtype=dtype).reshape(self.chunk_shape)
            start = c * self.chunk
            part = out[start : start + self.chunk]
            part[...] = block[: len(part)]
        return self._as_times(out)

    def _as_times(self, values: np.ndarray) -> np.ndarray:
        """int64 ``values`` as datetime64 of the table's ``time_unit`` when it has one."""
        dtype = read_dtype(self.path, self.attrs, values.dtype)
        return values if dtype == values.dtype else values.view(dtype)


@dataclass(eq=False)
class LinkArray(CellArray):
    """One ``links/<delta>/<offsets>`` array: its segment, row layout and cell decoding.

    With its ``family`` (the parsed ``links/<delta>`` group), the declared ``has_perm`` is
    checked against the family's policy (see :func:`~zarr_vectors.format.groups.parse_link_layout`).
    """

    segment: str = ""
    link_width: int = 2
    delta: int = 0
    family: LinksFamily | None = field(default=None, kw_only=True)
    layout: LinkLayout | None = field(init=False, default=None, repr=False)

    def _layout(self) -> None:
        layout, found = parse_link_layout(
            self.path, self.attrs, self.segment, self.link_width, self.delta, len(self.shape), self.family
        )
        self._found(found)
        self.layout = layout
        if layout is None:  # only without strict: the array is left out (see _usable)
            self.has_perm, self.intra = False, False
            self.offsets = np.zeros((max(self.link_width - 1, 0), len(self.shape)), np.int64)
            return
        self.offsets, self.has_perm, self.intra = layout.offsets, layout.has_perm, layout.intra

    def _usable(self) -> bool:
        return self.layout is not None and self.parsed is not None and self.parsed.dtype is not None

    @property
    def max_bytes(self) -> int:
        """Most bytes one decoded cell may hold: ``max_rows`` records plus a ragged offset each."""
        if self.max_rows is None or self.parsed is None or self.parsed.dtype is None:
            return DEFAULT_MAX_DECODED
        return BOUND_SLACK + int(self.max_rows) * (self.parsed.dtype.itemsize * self.row_width + 8)

    @property
    def row_width(self) -> int:
        return self.link_width + int(self.has_perm)

    def listed_ids(self, grid: Any) -> np.ndarray:
        """Sorted linear grid indices of the listed (non-empty) cells; cached."""
        ids = getattr(self, "_listed_ids", None)
        if ids is None:
            cell = self.nonempty - grid.origin
            shape = np.asarray(grid.shape, np.int64)
            strides = np.r_[np.cumprod(shape[::-1])[:-1][::-1], 1].astype(np.int64)
            ids = self._listed_ids = np.sort(cell @ strides)
        return ids

    def records(self, raw: bytes | None, chunk: Sequence[int]) -> tuple[np.ndarray, np.ndarray | None]:
        """Stored endpoint rows (M, link_width) of one cell and their perm codes (or None).

        Stored endpoint k lies in chunk ``chunk + offsets[k - 1]`` (k = 0: ``chunk``).
        """
        from zarr_vectors.format.links import decode_flat_rows, decode_ragged

        data = self.payload(raw, chunk)
        with decoding(self.path, chunk):
            if self.intra:
                rows = decode_flat_rows(data, self.row_width, self.dtype)
            else:
                rows, _ = decode_ragged(data, self.row_width, self.dtype)
        rows = np.asarray(rows, dtype=np.int64).reshape(-1, self.row_width)
        vertices, perm = (rows[:, 1:], rows[:, 0]) if self.has_perm else (rows, None)
        where = ".".join(map(str, chunk))
        if (vertices < 0).any():
            r, k = np.argwhere(vertices < 0)[0]
            raise CorruptCellError(
                self.path, where, f"record {r} names vertex {vertices[r, k]}; indices must be >= 0"
            )
        if perm is not None:
            limit = math.factorial(vertices.shape[1])
            bad = np.flatnonzero((perm < 0) | (perm >= limit))
            if len(bad):
                r = int(bad[0])
                raise CorruptCellError(
                    self.path,
                    where,
                    f"perm_idx {perm[r]} of record {r} is outside [0, {limit}) for {vertices.shape[1]} endpoints",
                )
        return vertices, perm
