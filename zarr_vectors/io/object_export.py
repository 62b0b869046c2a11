"""Objects written to files a batch at a time, in memory bounded by the batch size.

:func:`export_objects` reads whole objects ``batch`` at a time (:meth:`Dataset.objects`) and
writes each batch before it reads the next, so memory holds one batch of objects (plus one
id per object), not the result. Which objects:

- ``ids``: those objects, as ``Dataset.objects(ids)`` returns them;
- ``bbox`` (lines, graphs, skeletons and shapes): every whole object with a vertex inside
  the box, as ``Dataset.query(bbox, whole_objects=True)`` returns them (candidates come
  from the object index, then each batch keeps the objects with a vertex inside);
- neither: every object of the level.

Whole levels, and boxes ``cut`` to their rows, are read in spatial order (objects by the
first chunk their extent starts in), so that a batch decodes a compact run of chunks: memory
holds the cells one batch touches, which an order spread over space (ascending ids, say)
would make most of the level. ``ids`` and whole objects of a box keep the order of the
whole result.

The files are those :func:`~zarr_vectors.io.export.export_result` writes for the same
result (:data:`OBJECT_STREAM_FORMATS`): byte for byte for ``.csv``, ``.swc``, ``.geojson``
and ``.geojsonl`` (GeoJSON features come in ascending id order either way), and for
``.ply`` and ``.obj`` but for the order of faces and edges, which come batch by batch
where a whole read lists them by chunk. ``.gpkg`` and ``.fgb`` get the same features,
appended a batch at a time, the layer's geometry type declared generic. A whole level
written this way lists its objects (or features) in that spatial order, where
``Dataset.read()`` lists rows in storage order and its GeoJSON features by id: the same
rows, edges, faces and features, in another order.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, cast

import numpy as np

from zarr_vectors.errors import InputError
from zarr_vectors.io.export import (
    csv_header,
    ply_element,
    text_rows,
    write_csv_rows,
    xyz,
)
from zarr_vectors.result import Result
from zarr_vectors.tables import attribute_columns, edges_of, parent_rows, vertex_table

if TYPE_CHECKING:
    from zarr_vectors.dataset import Dataset

__all__ = ["OBJECT_STREAM_FORMATS", "OBJECT_BATCH", "object_batches", "export_objects"]

#: Extensions :func:`export_objects` writes batch by batch.
OBJECT_STREAM_FORMATS = (".csv", ".ply", ".obj", ".swc", ".geojson", ".geojsonl", ".gpkg", ".fgb")
#: Objects read per batch.
OBJECT_BATCH = 4096
#: Text feature formats: objects in ascending id order whatever order they were asked in.
_BY_ID = (".geojson", ".geojsonl")
#: OGR formats, appended to a batch at a time (:class:`~zarr_vectors.io.vector_export.VectorAppender`).
_OGR = (".gpkg", ".fgb")


def _selected_ids(ds: Dataset, ids: Any, level: int, bbox: Any, sort: bool, cut: bool = False) -> np.ndarray:
    """The user ids to read, in the order they are written (see the module documentation)."""
    from zarr_vectors.dataset import object_extents
    from zarr_vectors.engine import parse_box

    lv = ds.level(level)
    if ids is not None:
        if bbox is not None:
            raise InputError("give ids= or bbox=, not both")
        wanted = np.asarray(ids).reshape(-1)
        oids = lv.object_id_map.to_oids(wanted)  # unknown ids raise here, before any file
        _, first = np.unique(oids, return_index=True)
        oids = np.unique(oids) if sort else oids[np.sort(first)]
        return np.asarray(lv.object_id_map.to_user(oids))
    if bbox is None:
        oids, o_lo, _ = object_extents(lv)
        return np.asarray(lv.object_id_map.to_user(_spatial(lv, oids, o_lo)))
    if not (ds._is_linked or (cut and ds._is_mesh)):
        raise InputError(
            "a box is exported object by object for lines, graphs, skeletons and shapes (and, cut to "
            f"the box, meshes); this store holds {', '.join(ds.geometry_types)}: query it instead"
        )
    lo, hi = parse_box(bbox, ds.ndim, ds.axes)
    oids, o_lo, o_hi = object_extents(lv)
    near = np.all((o_hi >= lo) & (o_lo <= hi), axis=1)
    chosen = _spatial(lv, oids[near], o_lo[near]) if cut and not sort else np.sort(oids[near])
    return np.asarray(lv.object_id_map.to_user(chosen))


def _spatial(level: Any, oids: np.ndarray, lo: np.ndarray) -> np.ndarray:
    """``oids`` ordered by the first chunk (in linear chunk order) their extent ``lo`` starts
    in, ties by id, so that a batch of them reads a compact run of chunks rather than cells
    spread over the whole level (``Dataset.objects`` decodes whole cells)."""
    cells = np.floor(lo / np.asarray(level.grid.chunk_shape, np.float64)).astype(np.int64)
    return oids[np.lexsort((oids, *cells.T[::-1]))]


def object_batches(
    ds: Dataset,
    ids: np.ndarray,
    *,
    level: int = 0,
    attributes: Sequence[str] | bool | None = None,
    batch: int = OBJECT_BATCH,
    bbox: Any = None,
    cut: bool = False,
) -> Iterator[Result]:
    """``ds.objects`` of ``ids``, ``batch`` ids at a time; with ``bbox``, each batch keeps
    only the objects with a vertex inside the (inclusive) box, or with ``cut`` only the rows
    inside it (with the edges, faces and line pieces among them: :meth:`Result.subset`)."""
    from zarr_vectors.engine import parse_box

    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise InputError(f"batch must be a positive integer, got {batch!r}")
    box = None if bbox is None else parse_box(bbox, ds.ndim, ds.axes)
    for start in range(0, len(ids), batch):
        res = ds.objects(cast(Any, ids[start : start + batch]), level=level, attributes=attributes)
        if box is not None and len(res):
            assert res.object_ids is not None  # an object read has them
            inside = np.all((res.positions >= box[0]) & (res.positions <= box[1]), axis=1)
            keep = inside if cut else np.isin(res.object_ids, np.unique(res.object_ids[inside]))
            if not keep.all():
                res = res.subset(keep)
        yield res


# -- writers: each gets the batches in order, then close() -------------------------------


class _Counts:
    """Rows and line pieces written so far: the offsets of the next batch's indices."""

    def __init__(self) -> None:
        self.rows = 0
        self.lines = 0

    def advance(self, res: Result) -> None:
        self.rows += len(res)
        if res.line_offsets is not None:
            self.lines += len(res.line_offsets) - 1


class _CsvObjects(_Counts):
    def __init__(self, fh: BinaryIO, folder: Path) -> None:
        super().__init__()
        self.fh = fh
        self.started = False

    def write(self, res: Result) -> None:
        names, cols = csv_header(res)
        if not self.started:
            self.fh.write((",".join(names) + "\n").encode("utf-8"))
            self.started = True
        for i, name in enumerate(names):
            if name == "line" and res.line_offsets is not None:
                cols[i] = cols[i] + self.lines
            elif name == "parent" and res.parents is not None:
                cols[i] = np.where(cols[i] >= 0, cols[i] + self.rows, -1)
        write_csv_rows(self.fh, cols)
        self.advance(res)

    def close(self, empty: Result) -> None:
        if not self.started:
            self.write(empty)


class _Spool:
    """An anonymous temporary file beside the output, copied into it at the end."""

    def __init__(self, folder: Path) -> None:
        self.file = tempfile.TemporaryFile(dir=folder, prefix=".zv-spool-")

    def copy_to(self, fh: BinaryIO) -> None:
        with self.file:
            self.file.seek(0)
            shutil.copyfileobj(self.file, fh, 1 << 22)


class _PlyObjects(_Counts):
    """Vertices and faces (or edges) spooled apart, then joined under a header with the counts."""

    def __init__(self, fh: BinaryIO, folder: Path) -> None:
        super().__init__()
        self.fh = fh
        self.vertices, self.second = _Spool(folder), _Spool(folder)
        self.header: list[str] | None = None
        self.second_header: list[str] = []
        self.second_count = 0

    def write(self, res: Result) -> None:
        cols = [c for c in vertex_table(res) if c[0] not in ("line", "parent")]
        header, body = ply_element("vertex", len(res), cols)
        self.vertices.file.write(body)
        if res.faces is not None:
            faces = np.asarray(res.faces, np.int64).reshape(-1, 3)
            table = np.empty(len(faces), dtype=[("n", "u1"), ("v", "<i4", (3,))])
            table["n"], table["v"] = 3, faces + self.rows
            self.second.file.write(table.tobytes())
            self.second_count += len(faces)
            second = ["element face {}", "property list uchar int vertex_indices"]
        elif (edges := edges_of(res)) is not None:
            ecols = [("vertex1", edges[:, 0] + self.rows), ("vertex2", edges[:, 1] + self.rows)]
            for name, values in res.edge_attributes.items():
                ecols += attribute_columns({name: values}, len(values)).items()
            h, b = ply_element("edge", len(edges), ecols)
            self.second.file.write(b)
            self.second_count += len(edges)
            second = ["element edge {}", *h[1:]]
        else:
            second = []
        if self.header is None:
            self.header, self.second_header = header[1:], second
        self.advance(res)

    def close(self, empty: Result) -> None:
        if self.header is None:
            self.write(empty)
        assert self.header is not None
        lines = ["ply", "format binary_little_endian 1.0", "comment written by zarr_vectors"]
        lines += [f"element vertex {self.rows}", *self.header]
        if self.second_header:
            lines += [self.second_header[0].format(self.second_count), *self.second_header[1:]]
        self.fh.write(("\n".join([*lines, "end_header"]) + "\n").encode("ascii"))
        self.vertices.copy_to(self.fh)
        self.second.copy_to(self.fh)


class _ObjObjects(_Counts):
    """``v`` lines into the file, ``f`` / ``l`` / ``p`` lines spooled and appended at the end."""

    def __init__(self, fh: BinaryIO, folder: Path) -> None:
        super().__init__()
        self.fh = fh
        self.links = _Spool(folder)
        fh.write(b"# written by zarr_vectors\n")

    def write(self, res: Result) -> None:
        self.fh.write(text_rows(list(xyz(res, "OBJ").T), prefix="v ").encode("utf-8"))
        first = self.rows + 1
        if res.faces is not None:
            faces = np.asarray(res.faces, np.int64).reshape(-1, 3) + first
            text = text_rows(list(faces.T), prefix="f ")
        elif res.line_offsets is not None:
            o = np.asarray(res.line_offsets, np.int64)
            rows = np.arange(first, first + len(res)).astype(str)
            pieces = [rows[o[i] : o[i + 1]] for i in range(len(o) - 1) if o[i + 1] > o[i]]
            text = "".join(f"{'l' if len(p) > 1 else 'p'} {' '.join(p)}\n" for p in pieces)
        elif (edges := edges_of(res)) is not None:
            text = text_rows(list((edges + first).T), prefix="l ")
        else:
            text = ""
        self.links.file.write(text.encode("utf-8"))
        self.advance(res)

    def close(self, empty: Result) -> None:
        if self.rows == 0:
            xyz(empty, "OBJ")  # more than 3 axes: the error, even for an empty result
        self.links.copy_to(self.fh)


class _SwcObjects(_Counts):
    def __init__(self, fh: BinaryIO, folder: Path) -> None:
        from zarr_vectors.io.swc import SWC_HEADER

        super().__init__()
        self.fh = fh
        fh.write(SWC_HEADER.encode("utf-8"))

    def write(self, res: Result) -> None:
        from zarr_vectors.io.swc import swc_samples

        parents = parent_rows(res)
        if parents is None:
            raise InputError(
                "SWC holds trees and this result has no parents or lines; "
                "query a skeleton or line store, or export to .ply, .csv or .npz"
            )
        radius, kind = res.attributes.get("radius"), res.attributes.get("type")
        text = swc_samples(xyz(res, "SWC"), parents, radius, kind, first=self.rows + 1)
        self.fh.write(text.encode("utf-8"))
        self.advance(res)

    def close(self, empty: Result) -> None:
        if self.rows == 0:
            self.write(empty)


class _GeoJsonObjects:
    """A FeatureCollection (``lines=False``) or one feature per line, as
    :func:`~zarr_vectors.io.geojson.export_geojson` / ``export_geojsonl`` write them."""

    def __init__(self, fh: BinaryIO, lines: bool) -> None:
        self.fh, self.lines = fh, lines
        self.count = 0
        if not lines:
            fh.write(b'{"type": "FeatureCollection", "features": [')

    def write(self, res: Result) -> None:
        from zarr_vectors.io.geojson import feature_text, to_feature_collection

        features = to_feature_collection(res)["features"]
        if not features:
            return
        sep = "\n" if self.lines else ", "
        lead = sep if self.count and not self.lines else ""
        tail = "\n" if self.lines else ""
        self.fh.write((lead + feature_text(features, sep) + tail).encode("utf-8"))
        self.count += len(features)

    def close(self, empty: Result) -> None:
        import json

        from zarr_vectors.io.geojson import crs_member

        if self.lines:
            return
        member = crs_member(empty)
        crs = "" if member is None else ', "crs": ' + json.dumps(member)
        self.fh.write(("]" + crs + "}").encode("utf-8"))


def _writer(suffix: str, fh: BinaryIO, folder: Path) -> Any:
    if suffix in _BY_ID:
        return _GeoJsonObjects(fh, lines=suffix == ".geojsonl")
    kinds = {".csv": _CsvObjects, ".ply": _PlyObjects, ".obj": _ObjObjects, ".swc": _SwcObjects}
    return kinds[suffix](fh, folder)


def export_objects(
    ds: Dataset,
    path: str | Path,
    *,
    ids: Any = None,
    bbox: Any = None,
    level: int = 0,
    attributes: Sequence[str] | bool | None = None,
    batch: int = OBJECT_BATCH,
    progress: bool = True,
    cut: bool = False,
) -> tuple[int, int]:
    """Write whole objects of ``ds`` to ``path`` ``batch`` objects at a time (see the module
    documentation for which objects and in what order) and return ``(vertices, objects)``
    written. The format comes from the suffix (:data:`OBJECT_STREAM_FORMATS`); the file is
    written to ``path`` only when complete. With ``bbox`` and ``cut``, the rows inside the box
    of those objects (lines, graphs, skeletons, shapes and meshes): the rows of
    ``Dataset.query(bbox)``, object by object instead of chunk by chunk (GeoJSON and OGR
    features are whole objects either way, as :meth:`Result.to_shapely` makes them).

    Raises
    ------
    InputError
        A suffix that does not stream, ``ids`` and ``bbox`` together, a box of a store that is
        not lines, graphs, skeletons or shapes, or data the format cannot hold.
    UnknownIdError
        An id the level does not hold (before anything is written).
    """
    from tqdm.auto import tqdm

    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in OBJECT_STREAM_FORMATS:
        raise InputError(
            f"cannot write {path.name!r} object by object; use one of {', '.join(OBJECT_STREAM_FORMATS)}, "
            "or read the result whole and export it"
        )
    features = suffix in _BY_ID + _OGR
    cut = cut and not features  # a feature is its whole object, cut or not
    chosen = _selected_ids(ds, ids, level, bbox, sort=features, cut=cut)
    empty = ds.objects(cast(Any, chosen[:0]), level=level, attributes=attributes)
    part = path.with_name(f".{path.stem}.zv-part{path.suffix}")
    try:
        open(part, "wb").close()
    except OSError as exc:  # say the user's path, not the part file's
        raise type(exc)(exc.errno, exc.strerror, str(path)) from exc
    batches = object_batches(ds, chosen, level=level, attributes=attributes, batch=batch, bbox=bbox, cut=cut)
    try:
        with (
            contextlib.ExitStack() as stack,
            tqdm(total=len(chosen), unit="obj", desc=f"writing {path.name}", disable=not progress) as bar,
        ):
            if suffix in _OGR:
                from zarr_vectors.io.vector_export import VectorAppender, text_columns

                out = VectorAppender(part, suffix, path.stem, text_columns(ds, chosen, level))
            else:
                out = _writer(suffix, stack.enter_context(open(part, "wb")), part.parent)
            counts = _drain(batches, out, bar, batch)
            out.close(empty)
        os.replace(part, path)
    finally:
        part.unlink(missing_ok=True)
    return counts


def _drain(batches: Iterator[Result], out: Any, bar: Any, batch: int) -> tuple[int, int]:
    """Write every batch to ``out``; ``(vertices, objects)`` written."""
    vertices = objects = 0
    for res in batches:
        out.write(res)
        vertices += len(res)
        objects += 0 if res.object_ids is None else len(np.unique(res.object_ids))
        bar.update(min(batch, bar.total - bar.n))
    return vertices, objects
