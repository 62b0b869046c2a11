"""A :class:`~zarr_vectors.result.Result` as columns: for pandas DataFrames and Arrow tables.

One row per vertex, in the result's order. Columns: one per axis (named by the axes, or
``axis_0 ..`` when the result has none), ``object_id`` when the result has object ids,
``line`` (the line piece of each row) for lines, ``parent`` (the parent row, -1 for none)
for skeletons, then the vertex attributes: a one-value attribute keeps its name, an
``(N, C)`` one becomes ``name_0 .. name_{C-1}``. Edges and faces have no place in a vertex
table and are left out. Columns are numpy arrays; positions and multi-value attributes
are copied per column, everything else is shared with the result.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from zarr_vectors._extras import needs
from zarr_vectors.errors import InputError, ZarrVectorsError

if TYPE_CHECKING:
    from zarr_vectors.result import Result

__all__ = ["attribute_columns", "result_columns", "to_arrow", "to_pandas"]


def result_columns(result: Result) -> dict[str, np.ndarray]:
    """The result's vertex table as ordered ``{column name: (N,) array}`` (see the module)."""
    n, d = result.positions.shape
    axes = list(result.axes) if len(result.axes) == d else [f"axis_{i}" for i in range(d)]
    cols: dict[str, np.ndarray] = {
        name: np.ascontiguousarray(result.positions[:, i]) for i, name in enumerate(axes)
    }
    if result.object_ids is not None:
        cols["object_id"] = np.asarray(result.object_ids)
    if result.line_offsets is not None:
        cols["line"] = np.repeat(np.arange(len(result.line_offsets) - 1), np.diff(result.line_offsets))
    if result.parents is not None:
        cols["parent"] = np.asarray(result.parents)
    for col, values in attribute_columns(result.attributes, n).items():
        if col in cols:
            raise InputError(
                f"an attribute would make a column {col!r}, which the table already has (an axis, "
                "object_id, line or parent); read it under another name or leave it out with attributes="
            )
        cols[col] = values
    return cols


def attribute_columns(attributes: Mapping[str, np.ndarray], n: int) -> dict[str, np.ndarray]:
    """One (n,) column per attribute value: ``name`` for a one-value attribute, ``name_0 ..``
    for an attribute of several values per row."""
    cols: dict[str, np.ndarray] = {}
    for name, values in attributes.items():
        flat = np.asarray(values).reshape(n, -1)
        if flat.shape[1] == 1 and np.ndim(values) == 1:
            cols[name] = flat[:, 0]
        else:
            cols.update({f"{name}_{j}": np.ascontiguousarray(flat[:, j]) for j in range(flat.shape[1])})
    return cols


def to_pandas(result: Result) -> Any:
    """The vertex table as a ``pandas.DataFrame`` (see the module for its columns)."""
    try:
        import pandas as pd
    except ImportError as exc:
        raise ZarrVectorsError(needs("Result.to_pandas", "pandas", "dataframe")) from exc
    return pd.DataFrame(result_columns(result), copy=False)


def to_arrow(result: Result) -> Any:
    """The vertex table as a ``pyarrow.Table``; the CRS and axes are kept in its schema metadata
    when the result came from a store."""
    try:
        import pyarrow as pa
    except ImportError as exc:
        raise ZarrVectorsError(needs("Result.to_arrow", "pyarrow", "dataframe")) from exc
    table = pa.table(result_columns(result))
    meta = {"zarr_vectors.axes": ",".join(result.axes)}
    origin = getattr(result, "origin", None)
    crs = getattr(getattr(origin, "dataset", None), "crs", None) if origin is not None else None
    if crs is not None:
        meta["zarr_vectors.crs"] = str(crs)
    return table.replace_schema_metadata(meta)
