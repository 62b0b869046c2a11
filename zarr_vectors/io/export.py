"""Write a :class:`~zarr_vectors.result.Result` to a file, the format chosen by the file's extension.

=========== ==================================================================================
extension   what is written
=========== ==================================================================================
``.csv``    one row per vertex: coordinates, ``object_id``, ``line`` (line piece) and
            ``parent`` (skeleton parent row) when the result has them, then attributes
            (an ``(N, C)`` attribute becomes columns ``name_0 .. name_{C-1}``). Floats are
            written with enough digits to read back bit for bit.
``.ply``    binary little-endian PLY: vertices with their attributes and ``object_id``,
            faces (``vertex_indices``) and edges (``vertex1``, ``vertex2`` and edge
            attributes) when the result has them.
``.obj``    Wavefront OBJ: ``v`` lines, ``f`` faces, ``l`` lines (one per line piece, or one
            per edge for graphs and skeletons). Attributes are not kept.
``.npz``    every array of the result, exactly (:func:`read_npz` reads it back).
``.swc``    a skeleton result (or lines, as unbranched chains), with ``radius`` and ``type``
            when present.
``.geojson`` see :mod:`zarr_vectors.io.geojson`.
``.geojsonl`` newline-delimited GeoJSON (GeoJSONSeq): the same features, one per line.
``.stl``    a mesh result (it needs faces) through trimesh: positions and faces only.
``.glb``    likewise, binary glTF.
``.gltf``   likewise, glTF with its buffers embedded (one self-contained file).
``.gpkg``   GeoPackage, one feature per object (``.shp``, ``.fgb`` and ``.parquet`` likewise:
            Shapefile, FlatGeobuf, GeoParquet); see :mod:`zarr_vectors.io.vector_export`.
=========== ==================================================================================

Rows are written in the result's order, so row ``i`` of a file is row ``i`` of the result
(OBJ and PLY indices are row indices: 1-based in OBJ, 0-based in PLY). SWC renumbers samples
depth first.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

import numpy as np

from zarr_vectors.errors import InputError
from zarr_vectors.result import Result
from zarr_vectors.tables import (
    attribute_columns,
    axis_names,
    edges_of,
    parent_rows,
    vertex_table,
)

__all__ = ["EXPORT_FORMATS", "edges_of", "export_result", "read_npz"]

#: Max significant digits that make a float of each size read back exactly.
_FLOAT_FORMAT = {2: "%.5g", 4: "%.9g", 8: "%r"}

_PLY_TYPES = {
    "i1": "char",
    "u1": "uchar",
    "i2": "short",
    "u2": "ushort",
    "i4": "int",
    "u4": "uint",
    "f4": "float",
    "f8": "double",
}


def text_rows(columns: list[np.ndarray], prefix: str = "", sep: str = " ") -> str:
    """Rows of text, every float with the digits it needs to read back exactly."""
    if not columns or len(columns[0]) == 0:
        return ""
    fmts = [_FLOAT_FORMAT[c.dtype.itemsize] if c.dtype.kind == "f" else "%d" for c in columns]
    fmt = prefix + sep.join(fmts)
    rows = zip(*(c.tolist() for c in columns))
    return "\n".join(map(fmt.__mod__, rows)) + "\n"


#: Rows formatted at a time by :func:`csv_rows`.
CSV_BLOCK = 1 << 18


def _csv_ready(values: np.ndarray) -> np.ndarray:
    """Booleans as 0/1, float16 as float32 (their text reads back as the same value),
    date-times as ISO 8601 text in their own unit (``NaT`` when absent)."""
    values = np.asarray(values)
    if values.dtype.kind == "M":
        return np.datetime_as_string(values)
    if values.dtype.kind == "b":
        return values.view(np.uint8)
    if values.dtype == np.float16:
        return values.astype(np.float32)
    return values


def csv_rows(columns: list[np.ndarray], sep: str = ",") -> bytes:
    """CSV text of the rows (no header), values separated by ``sep``, vectorised: pyarrow's
    writer when installed, else numpy's string conversion. Every float is written in its
    shortest form that reads back bit for bit as its own dtype (float32 as float32, float64
    as float64); a string column is written as it is (e.g. OBJ's ``v``)."""
    if not columns or len(columns[0]) == 0:
        return b""
    columns = [_csv_ready(c) for c in columns]
    try:
        import pyarrow as pa
        import pyarrow.csv as pacsv
    except ImportError:
        return _csv_rows_numpy(columns, sep)
    table = pa.table({f"c{i}": c for i, c in enumerate(columns)})
    sink = pa.BufferOutputStream()
    options = pacsv.WriteOptions(include_header=False, quoting_style="none", delimiter=sep)
    pacsv.write_csv(table, sink, options)
    return bytes(sink.getvalue())


def _csv_rows_numpy(columns: list[np.ndarray], sep: str = ",") -> bytes:
    """:func:`csv_rows` without pyarrow: ``astype(StringDType)`` per column (shortest
    round-trip text of each dtype), joined with ``np.strings.add``."""
    text = np.dtypes.StringDType()
    line = columns[0].astype(text)
    for c in columns[1:]:
        line = np.strings.add(np.strings.add(line, sep), c.astype(text))
    return ("\n".join(line.tolist()) + "\n").encode("utf-8")


def csv_header(result: Result) -> tuple[list[str], list[np.ndarray]]:
    """The CSV column names and columns of ``result`` (see the module table)."""
    cols = vertex_table(result)
    return [n for n, _ in cols], [np.asarray(c) for _, c in cols]


def write_csv_rows(fh: BinaryIO, columns: list[np.ndarray], block: int = CSV_BLOCK, sep: str = ",") -> None:
    """Write :func:`csv_rows` of ``columns`` to ``fh``, ``block`` rows per text, the blocks
    formatted by the shared threads a few at a time (memory: a few blocks of text)."""
    from zarr_vectors.storage import default_workers, map_cells

    n = len(columns[0]) if columns else 0
    starts = list(range(0, n, block))
    step = 2 * default_workers()
    for first in range(0, len(starts), step):
        group = starts[first : first + step]

        def text(i: int, group: list[int] = group) -> bytes:
            return csv_rows([c[group[i] : group[i] + block] for c in columns], sep)

        fh.writelines(map_cells(text, len(group)))


def write_csv(result: Result, path: Path) -> None:
    names, cols = csv_header(result)
    with open(path, "wb") as fh:
        fh.write((",".join(names) + "\n").encode("utf-8"))
        write_csv_rows(fh, cols)


def ply_column(name: str, values: np.ndarray) -> tuple[str, np.ndarray]:
    """A PLY property type for the column; 64-bit integers are narrowed to 32 bits when they fit."""
    if any(ch.isspace() for ch in name) or not name:
        raise InputError(
            f"PLY property names cannot be empty or contain spaces: {name!r}; rename the attribute"
        )
    values = np.asarray(values)
    if values.dtype.kind == "b":
        values = values.astype(np.uint8)
    elif values.dtype == np.float16:
        values = values.astype(np.float32)
    elif values.dtype.kind in "iu" and values.dtype.itemsize == 8:
        narrow = np.dtype(values.dtype.kind + "4")
        info = np.iinfo(narrow)
        if len(values) and (values.min() < info.min or values.max() > info.max):
            raise InputError(
                f"column {name!r} has values outside 32-bit range, which PLY cannot hold; "
                "export to .npz or .csv instead"
            )
        values = values.astype(narrow)
    code = values.dtype.str.lstrip("<>|=")
    if code not in _PLY_TYPES:
        raise InputError(
            f"column {name!r} has dtype {values.dtype}, which PLY cannot hold; export to .npz instead"
        )
    return _PLY_TYPES[code], values.astype(values.dtype.newbyteorder("<"))


def ply_element(name: str, count: int, cols: list[tuple[str, np.ndarray]]) -> tuple[list[str], bytes]:
    """The header lines and the binary records of a PLY element of ``count`` rows."""
    typed = [(n, *ply_column(n, v)) for n, v in cols]
    header = [f"element {name} {count}"] + [f"property {t} {n}" for n, t, _ in typed]
    table = np.empty(count, dtype=[(n, v.dtype) for n, _, v in typed])
    for n, _, v in typed:
        table[n] = v
    return header, table.tobytes()


def write_ply(result: Result, path: Path) -> None:
    cols = [c for c in vertex_table(result) if c[0] not in ("line", "parent")]
    header, body = ply_element("vertex", len(result), cols)
    faces = getattr(result, "faces", None)
    if faces is not None:
        faces = np.asarray(faces, np.int64).reshape(-1, 3)
        table = np.empty(len(faces), dtype=[("n", "u1"), ("v", "<i4", (3,))])
        table["n"], table["v"] = 3, faces
        header += [f"element face {len(faces)}", "property list uchar int vertex_indices"]
        body += table.tobytes()
    edges = edges_of(result) if faces is None else None
    if edges is not None:
        ecols = [("vertex1", edges[:, 0]), ("vertex2", edges[:, 1])]
        for name, values in result.edge_attributes.items():
            ecols += attribute_columns({name: values}, len(values)).items()
        h, b = ply_element("edge", len(edges), ecols)
        header += h
        body += b
    lines = [
        "ply",
        "format binary_little_endian 1.0",
        "comment written by zarr_vectors",
        *header,
        "end_header",
    ]
    with open(path, "wb") as fh:
        fh.write(("\n".join(lines) + "\n").encode("ascii"))
        fh.write(body)


def xyz(result: Result, fmt: str) -> np.ndarray:
    """(N, 3) positions for a 3-D format: 2-D padded with z = 0, more axes an InputError."""
    return _xyz(result, fmt)


def _xyz(result: Result, fmt: str) -> np.ndarray:
    d = result.positions.shape[1]
    if d > 3:
        raise InputError(
            f"{fmt} holds 3-D coordinates and this result has {d} axes; export to .csv, .ply or .npz"
        )
    if d == 3:
        return result.positions
    return np.column_stack([result.positions, np.zeros((len(result), 3 - d), result.positions.dtype)])


def write_obj(result: Result, path: Path) -> None:
    xyz = _xyz(result, "OBJ")
    faces = getattr(result, "faces", None)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("# written by zarr_vectors\n")
        fh.write(text_rows(list(xyz.T), prefix="v "))
        if faces is not None:
            fh.write(text_rows(list((np.asarray(faces, np.int64).reshape(-1, 3) + 1).T), prefix="f "))
        elif result.line_offsets is not None:
            o = np.asarray(result.line_offsets, np.int64)
            rows = np.arange(1, len(result) + 1).astype(str)
            pieces = [rows[o[i] : o[i + 1]] for i in range(len(o) - 1) if o[i + 1] > o[i]]
            fh.writelines(f"{'l' if len(p) > 1 else 'p'} {' '.join(p)}\n" for p in pieces)
        elif (edges := edges_of(result)) is not None:  # graphs, and skeletons by their parents
            fh.write(text_rows(list((edges + 1).T), prefix="l "))


def write_npz(result: Result, path: Path) -> None:
    arrays: dict[str, np.ndarray] = {"positions": result.positions, "axes": np.array(axis_names(result))}
    for name in ("object_ids", "edges", "line_offsets", "parents"):
        if getattr(result, name) is not None:
            arrays[name] = getattr(result, name)
    if result.faces is not None:
        arrays["faces"] = result.faces
    arrays |= {f"attributes/{k}": v for k, v in result.attributes.items()}
    arrays |= {f"edge_attributes/{k}": v for k, v in result.edge_attributes.items()}
    with open(path, "wb") as fh:
        np.savez(fh, **arrays)  # type: ignore[arg-type]  # no key is "allow_pickle" (the stubs fear one)


def read_npz(path: str | Path) -> Result:
    """A Result from a file :func:`export_result` wrote as ``.npz``: every array as it was.

    Parameters
    ----------
    path
        The ``.npz`` file.

    Returns
    -------
    Result
        Without ``region`` and ``origin``.

    Raises
    ------
    InputError
        The file has no ``positions`` array.

    Examples
    --------
    >>> import tempfile, pathlib, numpy as np, zarr_vectors as zv
    >>> from zarr_vectors.io.export import export_result, read_npz
    >>> res = zv.Result(np.array([[0.5, 1.0], [2.0, 3.0]]), {"t": np.array([7, 8])}, axes=("x", "y"))
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = pathlib.Path(folder) / "rows.npz"
    ...     _ = export_result(res, path)
    ...     back = read_npz(path)
    >>> back.positions.tolist(), back.attributes["t"].tolist(), back.axes
    ([[0.5, 1.0], [2.0, 3.0]], [7, 8], ('x', 'y'))
    """
    with np.load(path, allow_pickle=False) as z:
        data = {k: z[k] for k in z.files}
    if "positions" not in data:
        raise InputError(f"{path} has no 'positions' array: it was not written by zarr_vectors")
    fields = {k: data.get(k) for k in ("object_ids", "edges", "faces", "line_offsets", "parents")}
    return Result(
        positions=data["positions"],
        attributes={k.split("/", 1)[1]: v for k, v in data.items() if k.startswith("attributes/")},
        axes=tuple(str(a) for a in data.get("axes", ())),
        edge_attributes={k.split("/", 1)[1]: v for k, v in data.items() if k.startswith("edge_attributes/")},
        **fields,
    )


def write_swc_file(result: Result, path: Path) -> None:
    from zarr_vectors.io.swc import write_swc

    parents = parent_rows(result)
    if parents is None:
        raise InputError(
            "SWC holds trees and this result has no parents or lines; "
            "query a skeleton or line store, or export to .ply, .csv or .npz"
        )
    radius, kind = result.attributes.get("radius"), result.attributes.get("type")
    write_swc(path, _xyz(result, "SWC"), parents, radius, kind)


def write_geojson(result: Result, path: Path) -> None:
    import importlib
    import importlib.util

    if importlib.util.find_spec("zarr_vectors.io.geojson") is None:
        raise InputError(
            "GeoJSON export is not available yet in this version; export to .csv, .ply, .obj, .npz or .swc"
        )
    importlib.import_module("zarr_vectors.io.geojson").export_geojson(result, path)


def write_geojsonl(result: Result, path: Path) -> None:
    from zarr_vectors.io.geojson import export_geojsonl

    export_geojsonl(result, path)


def write_mesh_file(result: Result, path: Path) -> None:
    """A mesh result as STL, GLB or glTF (through trimesh)."""
    from zarr_vectors.io.meshes import save_trimesh

    if result.faces is None:
        raise InputError(
            f"{path.suffix} holds triangle meshes and this result has no faces; query a mesh store, "
            "or export to .ply, .csv or .npz"
        )
    save_trimesh(result.to_trimesh(), path)


#: Extension (lower case) -> writer.
def write_vector(result: Result, path: Path) -> None:
    from zarr_vectors.io.vector_export import export_vector

    export_vector(result, path)


EXPORT_FORMATS: dict[str, Callable[[Result, Path], None]] = {
    ".csv": write_csv,
    ".ply": write_ply,
    ".obj": write_obj,
    ".npz": write_npz,
    ".swc": write_swc_file,
    ".geojson": write_geojson,
    ".geojsonl": write_geojsonl,
    ".stl": write_mesh_file,
    ".glb": write_mesh_file,
    ".gltf": write_mesh_file,
    ".gpkg": write_vector,
    ".shp": write_vector,
    ".fgb": write_vector,
    ".parquet": write_vector,
}


def export_result(result: Result, path: str | Path) -> str:
    """Write ``result`` to ``path`` in the format its extension names.

    Row ``i`` of the file is row ``i`` of the result; the module documentation lists what
    each format keeps.

    Parameters
    ----------
    result
        Any result (of a query, an object read, or made by hand).
    path
        The file to write; the extension (any case) picks the format: ``.csv``, ``.ply``,
        ``.obj``, ``.npz``, ``.swc``, ``.geojson``, ``.geojsonl``, mesh files (``.stl``, ``.glb``, ``.gltf``)
        or GIS files (``.gpkg``, ``.shp``, ``.fgb``, ``.parquet``: see
        :mod:`zarr_vectors.io.vector_export`).

    Returns
    -------
    str
        The extension, lower case (``".csv"``, ...).

    Raises
    ------
    InputError
        An unknown extension, or data the format cannot hold (more than 3 axes in OBJ or
        SWC, 64-bit values outside 32-bit range in PLY, SWC of a result without parents or
        lines).

    Examples
    --------
    >>> import tempfile, pathlib, zarr_vectors as zv
    >>> from zarr_vectors.io.export import export_result
    >>> lines = [[[0.5, 0.25], [1.5, 0.25], [2.5, 0.25]], [[5.5, 5.5], [6.5, 6.5]]]
    >>> ds = zv.write_lines("memory://doc-export", lines, chunk_shape=4, object_ids=[3, 8])
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = pathlib.Path(folder) / "lines.csv"
    ...     print(export_result(ds.read(), path))
    ...     print(path.read_text(), end="")
    .csv
    x,y,object_id,line
    0.5,0.25,3,0
    1.5,0.25,3,0
    2.5,0.25,3,0
    5.5,5.5,8,1
    6.5,6.5,8,1
    """
    path = Path(path)
    ext = path.suffix.lower()
    if ext not in EXPORT_FORMATS:
        raise InputError(
            f"cannot tell the output format from {path.name!r}; use one of the extensions "
            f"{', '.join(EXPORT_FORMATS)}"
        )
    EXPORT_FORMATS[ext](result, path)
    return ext
