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
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from zarr_vectors.engine.pipeline import (
    DEFAULT_MAX_DECODED,
    DRACO,
    Pipeline,
    UnsupportedPipeline,
    geometry_codec,
)
from zarr_vectors.errors import CorruptCellError, DecodeError, FormatError
from zarr_vectors.format.grid import cell_key

__all__ = ["CellArray", "TableArray", "LinkArray", "BOUND_SLACK", "FRAGMENT_BYTES", "DRACO_BYTES"]

#: Bytes every decoded-size bound allows on top of its per-row part (headers, framing).
BOUND_SLACK = 1 << 20
#: Bytes per fragment a fragment-index cell may take: a 16-byte range row, its bitmap bit,
#: and room for explicit row lists (a row may sit in several shared fragments).
FRAGMENT_BYTES = 64
#: Bytes per vertex a Draco blob may take (it compresses 12 bytes of position and about
#: two faces per vertex; the order-preserving coder is about ten times larger than edgebreaker).
DRACO_BYTES = 256
#: Largest element count of one row (``row_shape`` product) an attribute may declare.
MAX_ROW_WIDTH = 1 << 20
#: Chunk coordinates, cell counts and linear cell indices must stay below this (int64-safe).
MAX_CELLS = 1 << 62


def _pipeline(path: str, doc: dict[str, Any]) -> Pipeline:
    try:
        return Pipeline.from_codecs(doc.get("codecs") or [])
    except UnsupportedPipeline as exc:
        codecs = doc.get("codecs")
        listed = isinstance(codecs, list) and all(isinstance(c, dict) for c in codecs)
        names = [c.get("name") for c in codecs] if listed else codecs
        raise FormatError(
            f"array {path!r} uses codecs {names}, which this library cannot decode yet ({exc})"
        ) from exc
    except ImportError as exc:
        raise FormatError(f"array {path!r}: {exc}") from exc


def _ints(value: Any, what: str, *, minimum: int) -> tuple[int, ...]:
    """``value`` as a tuple of ints >= ``minimum`` (JSON booleans and floats refused)."""
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise FormatError(f"{what} must be a list of integers, got {value!r}")
    if any(v < minimum or v >= MAX_CELLS for v in value):
        raise FormatError(f"{what} must hold integers in [{minimum}, 2**62), got {value}")
    return tuple(value)


def _chunk_shape(path: str, doc: dict[str, Any], ndim: int) -> tuple[int, ...]:
    grid = doc.get("chunk_grid")
    conf = grid.get("configuration") if isinstance(grid, dict) else None
    if not isinstance(conf, dict) or (isinstance(grid, dict) and grid.get("name", "regular") != "regular"):
        raise FormatError(
            f"array {path!r}: chunk_grid must be a regular grid with a configuration, got {grid!r}"
        )
    shape = _ints(conf.get("chunk_shape"), f"array {path!r}: chunk_shape", minimum=1)
    if len(shape) != ndim:
        raise FormatError(
            f"array {path!r}: chunk_shape {list(shape)} has {len(shape)} dimensions, shape has {ndim}"
        )
    return shape


def _numeric_dtype(name: Any, what: str) -> np.dtype:
    try:
        dtype = np.dtype(name).newbyteorder("<")
    except TypeError as exc:
        raise FormatError(f"{what} has an unknown dtype {name!r}") from exc
    if dtype.kind not in "biuf" or dtype.itemsize == 0:
        raise FormatError(f"{what} has dtype {name!r}; cell data must be a numeric type")
    return dtype


@dataclass(eq=False)
class CellArray:
    """A per-chunk vlen array over the level's chunk grid (``vertices``, attributes, ...).

    ``max_rows`` is the most rows (records, fragments) one cell may hold by the level's
    metadata and ``row_bytes`` the bytes each may take (default: dtype x row width); they
    bound decoding (see the module docstring). Without ``max_rows`` the bound is
    ``DEFAULT_MAX_DECODED``.
    """

    path: str
    doc: dict[str, Any]
    max_rows: int | None = None
    row_bytes: int | None = None
    pipeline: Pipeline = field(init=False)

    def __post_init__(self) -> None:
        if self.doc.get("node_type") != "array":
            raise FormatError(
                f"{self.path!r} should be an array but its zarr.json says {self.doc.get('node_type')!r}"
            )
        if not isinstance(self.attrs, dict):
            raise FormatError(f"array {self.path!r}: attributes must be an object")
        self.shape = _ints(self.doc.get("shape"), f"array {self.path!r}: shape", minimum=0)
        if math.prod(self.shape) >= MAX_CELLS:
            raise FormatError(
                f"array {self.path!r}: a grid of {list(self.shape)} cells is too large to index"
            )
        if _chunk_shape(self.path, self.doc, len(self.shape)) != (1,) * len(self.shape):
            raise FormatError(f"array {self.path!r}: a per-chunk array has chunk_shape [1, ..., 1]")
        self.pipeline = _pipeline(self.path, self.doc).bounded(self.max_bytes)

    @property
    def attrs(self) -> dict[str, Any]:
        return self.doc.get("attributes") or {}

    @property
    def max_bytes(self) -> int:
        """Most bytes one decoded cell may hold (see the module docstring)."""
        if self.max_rows is None:
            return DEFAULT_MAX_DECODED
        per_row = self.row_bytes if self.row_bytes is not None else self.dtype.itemsize * self.row_width
        return min(BOUND_SLACK + int(self.max_rows) * per_row, DEFAULT_MAX_DECODED)

    @cached_property
    def origin(self) -> np.ndarray:
        value = self.attrs.get("chunk_grid_origin")
        if value is None:
            return np.zeros(len(self.shape), np.int64)
        if not isinstance(value, list) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in value
        ):
            raise FormatError(
                f"array {self.path!r}: chunk_grid_origin must be a list of integers, got {value!r}"
            )
        if len(value) != len(self.shape) or any(abs(v) >= MAX_CELLS for v in value):
            raise FormatError(
                f"array {self.path!r}: chunk_grid_origin {value} must have {len(self.shape)} integers below 2**62"
            )
        return np.asarray(value, dtype=np.int64)

    @cached_property
    def nonempty(self) -> np.ndarray:
        """(M, D) absolute chunk coordinates listed in ``nonempty_chunks``, each inside the grid."""
        keys = self.attrs.get("nonempty_chunks")
        nd = len(self.shape)
        if keys is None:
            raise FormatError(f"array {self.path!r} has no nonempty_chunks attribute")
        if not isinstance(keys, list):
            raise FormatError(f"array {self.path!r}: nonempty_chunks must be a list of strings like '1.0.2'")
        if not keys:
            return np.zeros((0, nd), np.int64)
        try:
            text = "|".join(keys)
        except TypeError:
            text = ""
        if not text or any(c.isspace() for c in set(text)):
            raise FormatError(f"array {self.path!r}: nonempty_chunks entries must be strings like '1.0.2'")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # numpy warns when text stops parsing early
            try:
                flat = np.fromstring(text.replace(".", " ").replace("|", " "), dtype=np.int64, sep=" ")
            except ValueError:  # numpy >= 2.? raises where older ones warned
                flat = np.zeros(0, np.int64)
        if len(flat) != nd * len(keys):
            raise FormatError(
                f"array {self.path!r}: nonempty_chunks entries must be {nd} integers joined by '.', "
                f"like {'.'.join(['0'] * nd)!r}"
            )
        chunks = flat.reshape(-1, nd)
        cell = chunks - self.origin
        outside = np.any((cell < 0) | (cell >= np.asarray(self.shape, np.int64)), axis=1)
        if outside.any():
            i = int(np.argmax(outside))
            raise FormatError(
                f"array {self.path!r}: nonempty_chunks entry {keys[i]!r} lies outside its grid of "
                f"{list(self.shape)} cells from origin {self.origin.tolist()}"
            )
        lin = np.sort(self._linear(chunks))
        twice = np.flatnonzero(lin[1:] == lin[:-1])
        if len(twice):
            raise FormatError(
                f"array {self.path!r}: nonempty_chunks lists a chunk twice (cell index {int(lin[twice[0]])}); "
                "each chunk may be listed once"
            )
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
        return _numeric_dtype(self.attrs.get("dtype"), f"array {self.path!r}")

    @cached_property
    def row_width(self) -> int:
        shape = self.attrs.get("row_shape") or []
        dims = _ints(shape, f"array {self.path!r}: row_shape", minimum=1)
        width = math.prod(dims)
        if width > MAX_ROW_WIDTH:
            raise FormatError(
                f"array {self.path!r}: row_shape {list(dims)} has {width} values per row (at most {MAX_ROW_WIDTH})"
            )
        return width

    def key(self, chunk: Sequence[int] | np.ndarray) -> str:
        return f"{self.path}/{cell_key(np.asarray(chunk) - self.origin)}"

    def keys(self, chunks: np.ndarray) -> list[str]:
        """Store keys of the cells of ``chunks`` (K, D)."""
        prefix = f"{self.path}/c/"
        return [prefix + "/".join(map(str, cell)) for cell in (np.asarray(chunks) - self.origin).tolist()]

    def payload(self, raw: bytes | None, chunk: Sequence[int]) -> memoryview:
        """Decoded cell payload: empty for a cell that is not listed and not stored; a
        listed cell missing from the store is a CorruptCellError."""
        if raw is None:
            if self.is_listed(chunk):
                raise CorruptCellError(
                    self.path,
                    ".".join(map(str, chunk)),
                    "the chunk is listed in nonempty_chunks but its cell is missing from the store",
                )
            return memoryview(b"")
        try:
            return self.pipeline.decode(raw)
        except DecodeError as exc:
            raise CorruptCellError(self.path, ".".join(map(str, chunk)), str(exc)) from exc

    @cached_property
    def draco(self) -> bool:
        """Cells are Draco blobs (``encoding: "draco"``, the draco codec first in the list)."""
        return geometry_codec(self.doc.get("codecs")) == DRACO

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
        try:
            return decode_cell(bytes(data), **limits)
        except DecodeError as exc:
            raise CorruptCellError(self.path, ".".join(map(str, chunk)), str(exc)) from exc

    def rows(self, raw: bytes | None, chunk: Sequence[int], width: int | None = None) -> np.ndarray:
        """Cell as (n, width) rows of ``dtype``; checks the byte length is whole rows."""
        width = self.row_width if width is None else width
        data = self.payload(raw, chunk)
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
    chunk holding more elements than that is a CorruptCellError (None: no limit).
    """

    path: str
    doc: dict[str, Any]
    max_bytes: int = DEFAULT_MAX_DECODED
    max_absent: int | None = None

    def __post_init__(self) -> None:
        if self.doc.get("node_type") != "array":
            raise FormatError(
                f"{self.path!r} should be an array but its zarr.json says {self.doc.get('node_type')!r}"
            )
        self.shape = _ints(self.doc.get("shape"), f"array {self.path!r}: shape", minimum=0)
        if len(self.shape) not in (1, 2):
            raise FormatError(f"table {self.path!r} must be 1-D or 2-D, got shape {list(self.shape)}")
        self.chunk_shape = _chunk_shape(self.path, self.doc, len(self.shape))
        if len(self.shape) == 2 and self.chunk_shape[1] != self.shape[1]:
            raise FormatError(
                f"table {self.path!r}: chunk_shape {list(self.chunk_shape)} must span the {self.shape[1]} columns"
            )
        if not isinstance(self.attrs, dict):
            raise FormatError(f"array {self.path!r}: attributes must be an object")

    @cached_property
    def pipeline(self) -> Pipeline:
        pipe = _pipeline(self.path, self.doc)
        if pipe.serializer == "bytes":
            return pipe.bounded(math.prod(self.chunk_shape) * self.dense_dtype.itemsize)
        return pipe.bounded(self.max_bytes)

    @property
    def attrs(self) -> dict[str, Any]:
        return self.doc.get("attributes") or {}

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
        return _numeric_dtype(self.doc.get("data_type"), f"array {self.path!r}")

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
        try:
            items = self.pipeline.decode_items(raw, limit=n)
        except DecodeError as exc:
            raise CorruptCellError(self.path, str(c), str(exc)) from exc
        if len(items) != n:
            raise CorruptCellError(self.path, str(c), f"holds {len(items)} elements, expected {n}")
        return items

    def vlen_items_at(self, raw: bytes | None, c: int, wanted: Sequence[int]) -> dict[int, memoryview]:
        """Elements ``wanted`` (indices within chunk ``c``) of a vlen chunk; empty when it may be
        and is missing."""
        if raw is None:
            self._absent(c, max(0, min(self.chunk, self.length - c * self.chunk)))
            return {i: memoryview(b"") for i in wanted}
        try:
            return self.pipeline.decode_items_at(raw, wanted)
        except DecodeError as exc:
            raise CorruptCellError(self.path, str(c), str(exc)) from exc

    def dense(self, raws: Sequence[bytes | None]) -> np.ndarray:
        """The whole dense array from its chunks (missing chunks read as the fill value);
        a ``string`` array comes back as a numpy ``str`` array."""
        if self.doc.get("data_type") == "string":
            values: list[str] = []
            for c, raw in enumerate(raws):
                try:
                    values += [bytes(v).decode("utf-8") for v in self.vlen_items(raw, c)]
                except UnicodeDecodeError as exc:
                    raise CorruptCellError(
                        self.path, str(c), f"an element is not UTF-8 ({exc.reason})"
                    ) from exc
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
            try:
                data = self.pipeline.decode(raw)
            except DecodeError as exc:
                raise CorruptCellError(self.path, str(c), str(exc)) from exc
            if len(data) != n * dtype.itemsize:
                raise CorruptCellError(self.path, str(c), f"{len(data)} bytes, expected {n * dtype.itemsize}")
            block = np.frombuffer(data, dtype=dtype).reshape(self.chunk_shape)
            start = c * self.chunk
            part = out[start : start + self.chunk]
            part[...] = block[: len(part)]
        return out


@dataclass(eq=False)
class LinkArray(CellArray):
    """One ``links/<delta>/<offsets>`` array: its segment, row layout and cell decoding."""

    segment: str = ""
    link_width: int = 2
    delta: int = 0

    def __post_init__(self) -> None:
        from zarr_vectors.format.links import parse_offsets

        if self.attrs.get("dtype") is None:
            raise FormatError(f"links array {self.path!r} has no dtype attribute")
        self.has_perm = bool(self.attrs.get("has_perm", False))
        super().__post_init__()
        try:
            self.offsets = parse_offsets(self.segment, self.link_width, len(self.shape))
        except DecodeError as exc:
            raise FormatError(f"{self.path!r}: {exc}") from exc
        self.intra = self.delta == 0 and not np.any(self.offsets)
        if self.dtype.kind not in "iu":
            raise FormatError(f"links array {self.path!r} has dtype {self.dtype}; link rows are integers")

    @property
    def max_bytes(self) -> int:
        """Most bytes one decoded cell may hold: ``max_rows`` records plus a ragged offset each."""
        if self.max_rows is None:
            return DEFAULT_MAX_DECODED
        return BOUND_SLACK + int(self.max_rows) * (self.dtype.itemsize * self.row_width + 8)

    @property
    def row_width(self) -> int:  # type: ignore[override]
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
        try:
            if self.intra:
                rows = decode_flat_rows(data, self.row_width, self.dtype)
            else:
                rows, _ = decode_ragged(data, self.row_width, self.dtype)
        except DecodeError as exc:
            raise CorruptCellError(self.path, ".".join(map(str, chunk)), str(exc)) from exc
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
