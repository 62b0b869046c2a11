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

__all__ = [
    "attribute_columns",
    "axis_names",
    "edges_of",
    "line_index",
    "parent_rows",
    "result_columns",
    "to_arrow",
    "to_pandas",
    "vertex_columns",
    "vertex_table",
]


def axis_names(result: Result, unnamed: str = "xyz") -> list[str]:
    """The result's axis names; when it has none, ``x, y, z`` then ``axis3 ..``
    (``unnamed="xyz"``, as files name them) or ``axis_0 ..`` (``unnamed="axis_"``)."""
    d = result.positions.shape[1]
    if len(result.axes) == d:
        return list(result.axes)
    if unnamed == "axis_":
        return [f"axis_{i}" for i in range(d)]
    return [("x", "y", "z")[i] if i < 3 else f"axis{i}" for i in range(d)]


def line_index(result: Result) -> np.ndarray | None:
    """The line piece of each row (None for a result without ``line_offsets``)."""
    if result.line_offsets is None:
        return None
    return np.repeat(np.arange(len(result.line_offsets) - 1), np.diff(result.line_offsets))


def parent_rows(result: Result) -> np.ndarray | None:
    """Parent row per row (-1 for a root): a skeleton's ``parents``, or chains along each line
    piece; None when the result has neither."""
    if result.parents is not None:
        return np.asarray(result.parents, np.int64)
    if result.line_offsets is None:
        return None
    parents = np.arange(-1, len(result) - 1, dtype=np.int64)
    parents[np.asarray(result.line_offsets[:-1], np.int64)] = -1
    return parents


def edges_of(result: Result) -> np.ndarray | None:
    """Edges of the result as (E, 2) row indices: ``result.edges``, else the ``(parent, child)``
    pairs of a skeleton's ``parents`` or of consecutive rows of each line piece.

    Parameters
    ----------
    result
        Any result.

    Returns
    -------
    numpy.ndarray or None
        (E, 2) int64, or None when the result has no connectivity (points, meshes).

    Examples
    --------
    >>> import numpy as np, zarr_vectors as zv
    >>> from zarr_vectors.tables import edges_of
    >>> lines = zv.Result(np.zeros((5, 2)), line_offsets=np.array([0, 3, 5]))
    >>> edges_of(lines).tolist()
    [[0, 1], [1, 2], [3, 4]]
    >>> print(edges_of(zv.Result(np.zeros((2, 2)))))
    None
    """
    if result.edges is not None:
        return np.asarray(result.edges, np.int64).reshape(-1, 2)
    parents = parent_rows(result)
    if parents is None:
        return None
    child = np.flatnonzero(parents >= 0)
    return np.column_stack([parents[child], child])


def vertex_columns(result: Result, unnamed: str = "axis_", hint: str = "") -> dict[str, np.ndarray]:
    """The result's vertex table as ordered ``{column name: (N,) array}`` (see the module);
    ``unnamed`` as in :func:`axis_names`. A column name that would occur twice is an
    :class:`~zarr_vectors.errors.InputError` ending with ``hint``."""
    cols: dict[str, np.ndarray] = {
        name: np.ascontiguousarray(result.positions[:, i])
        for i, name in enumerate(axis_names(result, unnamed))
    }
    if result.object_ids is not None:
        cols["object_id"] = np.asarray(result.object_ids)
    for name, extra in (("line", line_index(result)), ("parent", result.parents)):
        if extra is not None:
            cols[name] = np.asarray(extra)
    for col, values in attribute_columns(result.attributes, len(result)).items():
        if col in cols:
            raise InputError(
                f"an attribute would make a column {col!r}, which the table already has (an axis, "
                f"object_id, line or parent): column names may not occur twice; {hint}"
            )
        cols[col] = values
    return cols


def result_columns(result: Result) -> dict[str, np.ndarray]:
    """The result's vertex table as ordered ``{column name: (N,) array}`` (see the module)."""
    return vertex_columns(result, "axis_", "read it under another name or leave it out with attributes=")


def vertex_table(result: Result) -> list[tuple[str, np.ndarray]]:
    """``(name, column)`` per column of a file export (CSV, PLY): as :func:`result_columns`,
    with axes named ``x, y, z`` when the result has no names."""
    return list(vertex_columns(result, "xyz", "rename the attribute or export to .npz").items())


def attribute_columns(attributes: Mapping[str, np.ndarray], n: int) -> dict[str, np.ndarray]:
    """One (n,) column per attribute value: ``name`` for a one-value attribute, ``name_0 ..``
    for an attribute of several values per row."""
    cols: dict[str, np.ndarray] = {}
    for name, values in attributes.items():
        values = np.asarray(values)
        flat = values.reshape(n, int(np.prod(values.shape[1:], dtype=np.int64)))
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
