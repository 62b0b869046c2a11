"""Opened arrays of a level: parsed ``zarr.json`` plus decoding of their cells."""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from ._pipeline import Pipeline, UnsupportedPipeline
from .errors import CorruptCellError, DecodeError, FormatError
from .format.grid import cell_key

__all__ = ["CellArray", "TableArray"]


def _pipeline(path: str, doc: dict[str, Any]) -> Pipeline:
    try:
        return Pipeline.from_codecs(doc.get("codecs") or [])
    except UnsupportedPipeline as exc:
        names = [c.get("name") for c in doc.get("codecs") or []]
        raise FormatError(f"array {path!r} uses codecs {names}, which this library cannot decode yet") from exc
    except ImportError as exc:
        raise FormatError(f"array {path!r}: {exc}") from exc


@dataclass(eq=False)
class CellArray:
    """A per-chunk vlen array over the level's chunk grid (``vertices``, attributes, ...)."""

    path: str
    doc: dict[str, Any]
    pipeline: Pipeline = field(init=False)

    def __post_init__(self) -> None:
        if self.doc.get("node_type") != "array":
            raise FormatError(f"{self.path!r} should be an array but its zarr.json says {self.doc.get('node_type')!r}")
        self.pipeline = _pipeline(self.path, self.doc)

    @property
    def attrs(self) -> dict[str, Any]:
        return self.doc.get("attributes") or {}

    @cached_property
    def origin(self) -> np.ndarray:
        shape = self.doc.get("shape") or []
        return np.asarray(self.attrs.get("chunk_grid_origin") or [0] * len(shape), dtype=np.int64)

    @cached_property
    def nonempty(self) -> np.ndarray:
        """(M, D) absolute chunk coordinates listed in ``nonempty_chunks``."""
        keys = self.attrs.get("nonempty_chunks")
        nd = len(self.doc.get("shape") or [])
        if keys is None:
            raise FormatError(f"array {self.path!r} has no nonempty_chunks attribute")
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
            flat = np.fromstring(text.replace(".", " ").replace("|", " "), dtype=np.int64, sep=" ")
        if len(flat) != nd * len(keys):
            raise FormatError(f"array {self.path!r}: nonempty_chunks entries must have {nd} coordinates each")
        return flat.reshape(-1, nd)

    @cached_property
    def dtype(self) -> np.dtype:
        name = self.attrs.get("dtype")
        try:
            return np.dtype(name).newbyteorder("<")
        except TypeError as exc:
            raise FormatError(f"array {self.path!r} has an unknown dtype attribute {name!r}") from exc

    @cached_property
    def row_width(self) -> int:
        shape = self.attrs.get("row_shape") or []
        return int(np.prod(shape, dtype=np.int64)) if shape else 1

    def key(self, chunk: Sequence[int] | np.ndarray) -> str:
        return f"{self.path}/{cell_key(np.asarray(chunk) - self.origin)}"

    def keys(self, chunks: np.ndarray) -> list[str]:
        """Store keys of the cells of ``chunks`` (K, D)."""
        prefix = f"{self.path}/c/"
        return [prefix + "/".join(map(str, cell)) for cell in (np.asarray(chunks) - self.origin).tolist()]

    def payload(self, raw: bytes | None, chunk: Sequence[int]) -> memoryview:
        """Decoded cell payload (empty when the cell is missing)."""
        if raw is None:
            return memoryview(b"")
        try:
            return self.pipeline.decode(raw)
        except DecodeError as exc:
            raise CorruptCellError(self.path, ".".join(map(str, chunk)), str(exc)) from exc

    @cached_property
    def draco(self) -> bool:
        """Cells are Draco blobs (``encoding: "draco"``, the draco codec first in the list)."""
        codecs = self.doc.get("codecs") or []
        return bool(codecs) and codecs[0].get("name") == "draco"

    def mesh_rows(self, raw: bytes | None, chunk: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """A Draco cell's (N, 3) float32 positions and (F, 3) int64 intra-chunk faces."""
        from ._draco import decode_cell

        data = self.payload(raw, chunk)
        if len(data) == 0:
            return np.zeros((0, 3), np.float32), np.zeros((0, 3), np.int64)
        try:
            return decode_cell(bytes(data))
        except DecodeError as exc:
            raise CorruptCellError(self.path, ".".join(map(str, chunk)), str(exc)) from exc

    def rows(self, raw: bytes | None, chunk: Sequence[int], width: int | None = None) -> np.ndarray:
        """Cell as (n, width) rows of ``dtype``; checks the byte length is whole rows."""
        width = self.row_width if width is None else width
        data = self.payload(raw, chunk)
        stride = self.dtype.itemsize * width
        if len(data) % stride:
            raise CorruptCellError(
                self.path, ".".join(map(str, chunk)),
                f"{len(data)} bytes is not a whole number of {stride}-byte rows",
            )  # fmt: skip
        return np.frombuffer(data, dtype=self.dtype).reshape(-1, width)


@dataclass(eq=False)
class TableArray:
    """A non-spatial 1-D array: vlen (manifests, groups) or dense (object / group attributes)."""

    path: str
    doc: dict[str, Any]

    @cached_property
    def pipeline(self) -> Pipeline:
        return _pipeline(self.path, self.doc)

    @property
    def attrs(self) -> dict[str, Any]:
        return self.doc.get("attributes") or {}

    @property
    def length(self) -> int:
        return int((self.doc.get("shape") or [0])[0])

    @property
    def chunk(self) -> int:
        return int(self.doc["chunk_grid"]["configuration"]["chunk_shape"][0])

    def chunk_keys(self, chunks: Sequence[int]) -> list[str]:
        tail = "/0" * (len(self.doc.get("shape") or [0]) - 1)
        return [f"{self.path}/c/{c}{tail}" for c in chunks]

    def vlen_items(self, raw: bytes | None, c: int) -> list[memoryview]:
        """Elements of vlen chunk ``c`` that lie inside the array (all empty when the chunk is missing)."""
        n = max(0, min(self.chunk, self.length - c * self.chunk))
        if raw is None:
            return [memoryview(b"")] * n
        try:
            items = self.pipeline.decode_items(raw, limit=n)
        except DecodeError as exc:
            raise CorruptCellError(self.path, str(c), str(exc)) from exc
        if len(items) != n:
            raise CorruptCellError(self.path, str(c), f"holds {len(items)} elements, expected {n}")
        return items

    def vlen_items_at(self, raw: bytes | None, c: int, wanted: Sequence[int]) -> dict[int, memoryview]:
        """Elements ``wanted`` (indices within chunk ``c``) of a vlen chunk; empty when it is missing."""
        if raw is None:
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
                    raise CorruptCellError(self.path, str(c), f"an element is not UTF-8 ({exc.reason})") from exc
            return np.array(values, dtype=str) if values else np.zeros(self.length, dtype="<U1")
        dtype = np.dtype(self.doc["data_type"]).newbyteorder("<")
        shape = tuple(int(s) for s in self.doc["shape"])
        chunk_shape = tuple(int(s) for s in self.doc["chunk_grid"]["configuration"]["chunk_shape"])
        fill = self.doc.get("fill_value")
        fill = np.nan if fill == "NaN" else fill
        out = np.full(shape, fill, dtype=dtype)
        for c, raw in enumerate(raws):
            if raw is None:
                continue
            try:
                data = self.pipeline.decode(raw)
            except DecodeError as exc:
                raise CorruptCellError(self.path, str(c), str(exc)) from exc
            n = int(np.prod(chunk_shape))
            if len(data) != n * dtype.itemsize:
                raise CorruptCellError(self.path, str(c), f"{len(data)} bytes, expected {n * dtype.itemsize}")
            block = np.frombuffer(data, dtype=dtype).reshape(chunk_shape)
            start = c * chunk_shape[0]
            part = out[start : start + chunk_shape[0]]
            part[...] = block[: len(part)]
        return out


@dataclass(eq=False)
class LinkArray(CellArray):
    """One ``links/<delta>/<offsets>`` array: its segment, row layout and cell decoding."""

    segment: str = ""
    link_width: int = 2
    delta: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        from .format.links import parse_offsets

        d = len(self.doc.get("shape") or [])
        try:
            self.offsets = parse_offsets(self.segment, self.link_width, d)
        except DecodeError as exc:
            raise FormatError(f"{self.path!r}: {exc}") from exc
        self.has_perm = bool(self.attrs.get("has_perm", False))
        self.intra = self.delta == 0 and not np.any(self.offsets)
        if self.attrs.get("dtype") is None:
            raise FormatError(f"links array {self.path!r} has no dtype attribute")

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
        from .format.links import decode_flat_rows, decode_ragged

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
            raise CorruptCellError(self.path, where, f"record {r} names vertex {vertices[r, k]}; indices must be >= 0")
        if perm is not None:
            limit = math.factorial(vertices.shape[1])
            bad = np.flatnonzero((perm < 0) | (perm >= limit))
            if len(bad):
                r = int(bad[0])
                raise CorruptCellError(
                    self.path, where, f"perm_idx {perm[r]} of record {r} is outside [0, {limit}) for {vertices.shape[1]} endpoints"
                )
        return vertices, perm
