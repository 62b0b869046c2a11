"""Rows of a relationship index and the hash buckets holding them (``docs/format-collections.md``).

An index entry is one level-0 row of the member: its relationship value (uint64), its object
id (when the member has object ids), its position and its other vertex attributes. Entries
live in ``2**bits`` buckets chosen by the top ``bits`` bits of a 64-bit mix of the value; a
bucket is a group of single-chunk Zarr arrays, one per column, sorted in the canonical order
(value, object id, then every column's bytes), so that a bucket's files depend only on the
set of its entries. No per-row Python loop here.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from zarr_vectors.errors import FormatError
from zarr_vectors.format.zarr_json import dense_array_doc, group_doc
from zarr_vectors.storage import Backend, dump_json

__all__ = [
    "Column",
    "Rows",
    "bucket_of",
    "bucket_items",
    "canonical_order",
    "chunk_key",
    "read_buckets",
    "columns_of",
]

_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


@dataclass(frozen=True)
class Column:
    """One stored column: its array name in a bucket, dtype (little-endian str) and row shape."""

    name: str
    dtype: str
    row_shape: tuple[int, ...]

    def json(self) -> dict[str, Any]:
        return {"name": self.name, "dtype": self.dtype, "row_shape": list(self.row_shape)}

    @classmethod
    def parse(cls, doc: dict[str, Any]) -> Column:
        return cls(str(doc["name"]), str(doc["dtype"]), tuple(int(x) for x in doc["row_shape"]))


@dataclass
class Rows:
    """Index entries by column: ``values`` (uint64) first, then ``object_ids`` (uint64, when the
    member has them), ``positions`` and ``attr.<name>`` columns. Every column has len(self) rows."""

    columns: dict[str, np.ndarray]

    def __len__(self) -> int:
        return len(self.columns["values"])

    def take(self, index: np.ndarray | slice) -> Rows:
        return Rows({k: v[index] for k, v in self.columns.items()})

    @property
    def nbytes(self) -> int:
        return sum(v.nbytes for v in self.columns.values())

    @staticmethod
    def concat(parts: Sequence[Rows], columns: Sequence[Column]) -> Rows:
        if not parts:
            return Rows({c.name: np.zeros((0, *c.row_shape), c.dtype) for c in columns})
        return Rows({c.name: np.concatenate([p.columns[c.name] for p in parts]) for c in columns})


def columns_of(rows: Rows) -> list[Column]:
    """The stored columns of ``rows`` (little-endian dtypes), in their order."""
    return [Column(k, v.dtype.newbyteorder("<").str, tuple(v.shape[1:])) for k, v in rows.columns.items()]


def mix(values: np.ndarray) -> np.ndarray:
    """The splitmix64 finaliser of uint64 ``values`` (wrapping arithmetic): spreads clustered ids."""
    z = np.asarray(values, np.uint64).copy()
    z ^= z >> np.uint64(30)
    z *= _MIX1
    z ^= z >> np.uint64(27)
    z *= _MIX2
    z ^= z >> np.uint64(31)
    return z


def bucket_of(values: np.ndarray, bits: int) -> np.ndarray:
    """The bucket (top ``bits`` bits of the mix) of each uint64 value, as int64."""
    if bits == 0:
        return np.zeros(len(values), np.int64)
    return (mix(values) >> np.uint64(64 - bits)).astype(np.int64)


def _key_views(column: np.ndarray) -> list[np.ndarray]:
    """Sort keys of a column: each component's bytes as an unsigned integer (a total order on
    bytes, so that equal keys mean byte-identical rows)."""
    flat = np.ascontiguousarray(column).reshape(len(column), -1)
    if flat.dtype.kind in "US":
        return [flat[:, i] for i in range(flat.shape[1])]
    size = flat.dtype.itemsize
    as_uint = flat.view(f"<u{size}") if size in (1, 2, 4, 8) else flat.view(np.uint8)
    return [as_uint[:, i] for i in range(as_uint.shape[1])]


def _full_order(rows: Rows, buckets: np.ndarray) -> np.ndarray:
    keys: list[np.ndarray] = []
    for column in reversed(list(rows.columns.values())):
        keys += list(reversed(_key_views(column)))
    keys.append(buckets)
    return np.lexsort(keys)


def canonical_order(rows: Rows, buckets: np.ndarray) -> np.ndarray:
    """Order of ``rows`` by bucket, value, then a 64-bit hash of each row's bytes: canonical,
    the sorted columns depend only on the set of rows (rows tying on all three are
    byte-identical; when two neighbours tie yet differ, a hash collision, or a column holds
    text, the rows are sorted on every column's bytes instead)."""
    views = [v for column in rows.columns.values() for v in _key_views(column)]
    if any(v.dtype.kind not in "ub" for v in views):  # text columns: the full sort
        return _full_order(rows, buckets)
    h = np.zeros(len(rows), np.uint64)
    for v in views:
        h = mix(h ^ v.astype(np.uint64))
    values = rows.columns["values"]
    order = np.lexsort((h, values, buckets))
    sv, sh = values[order], h[order]
    tie = np.flatnonzero((sv[1:] == sv[:-1]) & (sh[1:] == sh[:-1]))
    if len(tie) and any(np.any(v[order[tie]] != v[order[tie + 1]]) for v in views):
        return _full_order(rows, buckets)
    return order


def chunk_key(array: str, ndim: int) -> str:
    """The key of the one chunk of a bucket column (``v2`` chunk keys: no ``c/`` folder)."""
    return f"{array}/{'.'.join(['0'] * ndim)}"


def bucket_items(path: str, rows: Rows) -> list[tuple[str, bytes]]:
    """``zarr.json`` documents and chunk files of one bucket group at ``path`` (``rows`` sorted,
    non-empty): one single-chunk array per column."""
    items = [(f"{path}/zarr.json", dump_json(group_doc({})))]
    for name, values in rows.columns.items():
        dtype = values.dtype.newbyteorder("<")
        doc = dense_array_doc(values.shape, values.shape, dtype, 0, [], {})
        doc["chunk_key_encoding"] = {"name": "v2", "configuration": {"separator": "."}}
        items.append((f"{path}/{name}/zarr.json", dump_json(doc)))
        items.append(
            (chunk_key(f"{path}/{name}", values.ndim), np.ascontiguousarray(values, dtype).tobytes())
        )
    return items


def bucket_keys(path: str, columns: Sequence[Column]) -> list[str]:
    """Every key of a bucket group (to delete an emptied bucket)."""
    keys = [f"{path}/zarr.json"]
    for c in columns:
        keys += [f"{path}/{c.name}/zarr.json", chunk_key(f"{path}/{c.name}", 1 + len(c.row_shape))]
    return keys


def read_buckets(
    backend: Backend,
    root: str,
    buckets: np.ndarray,
    columns: Sequence[Column],
    counts: np.ndarray | None = None,
) -> list[Rows | None]:
    """Columns ``columns`` of buckets ``buckets`` (None for an absent, i.e. empty, bucket);
    with ``counts`` a bucket absent but counted, or of another length, is a FormatError."""
    keys = [chunk_key(f"{root}/{int(b)}/{c.name}", 1 + len(c.row_shape)) for b in buckets for c in columns]
    raws = backend.get_many(keys) if keys else []
    out: list[Rows | None] = []
    for i, b in enumerate(buckets):
        mine = raws[i * len(columns) : (i + 1) * len(columns)]
        expected = None if counts is None else int(counts[int(b)])
        if all(r is None for r in mine) and not expected:
            out.append(None)
            continue
        if any(r is None for r in mine):
            raise FormatError(f"{root}/{int(b)}: a column of this relationship-index bucket is missing")
        cols = {}
        for c, raw in zip(columns, mine, strict=True):
            flat = np.frombuffer(bytes(raw), c.dtype)  # type: ignore[arg-type]
            width = int(np.prod(c.row_shape)) if c.row_shape else 1
            if len(flat) % width:
                raise FormatError(f"{root}/{int(b)}/{c.name}: {len(flat)} values is no whole number of rows")
            cols[c.name] = flat.reshape(-1, *c.row_shape)
        lengths = {len(v) for v in cols.values()}
        if len(lengths) != 1 or (expected is not None and lengths != {expected}):
            raise FormatError(
                f"{root}/{int(b)}: bucket columns hold {sorted(lengths)} rows, the index counts {expected}"
            )
        out.append(Rows(cols))
    return out


def load_json(raw: bytes | None) -> dict[str, Any] | None:
    return None if raw is None else json.loads(raw)
