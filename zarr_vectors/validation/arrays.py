"""Level 2, per-chunk arrays: the ``zarr.json`` of every array over a level's chunk grid
(vertices, fragments, attributes, links, link attributes), parsed into the reader's own
:class:`~zarr_vectors.engine.chunks.arrays.CellArray` objects, whose findings are reported. The
cell checks of level 3 read through those objects.

An array whose document has a finding that blocks reading is described (its grid, its
listing) but its cells are not decoded (``pipeline`` is None), as a reader would refuse it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from zarr.registry import get_codec_class

from zarr_vectors.engine import DRACO_BYTES, FRAGMENT_BYTES, CellArray, LinkArray
from zarr_vectors.errors import DecodeError, FormatError
from zarr_vectors.format.findings import UNSUPPORTED, Finding, short
from zarr_vectors.format.grid import bins_per_chunk
from zarr_vectors.format.groups import parse_link_attribute_family, parse_links_family
from zarr_vectors.format.links import parse_delta
from zarr_vectors.format.metadata import MAX_READ_BINS, LevelMeta
from zarr_vectors.format.shards import inner_codecs, parse_sharding
from zarr_vectors.validation._report import Collector
from zarr_vectors.validation._store import StoreView
from zarr_vectors.validation.metadata import RootInfo, report

__all__ = ["CellArray", "LevelModel", "check_cell_arrays", "unknown_codecs"]


@dataclass(eq=False)
class LevelModel:
    """The arrays of one level that passed their level-2 checks well enough to be read.

    ``families`` maps a links family's level delta to its attributes.
    """

    index: int
    meta: LevelMeta | None
    chunk_shape: np.ndarray
    vertices: CellArray | None = None
    fragments: CellArray | None = None
    link_fragments: CellArray | None = None
    vertex_attrs: list[CellArray] = field(default_factory=list)
    fragment_attrs: list[CellArray] = field(default_factory=list)
    links: list[LinkArray] = field(default_factory=list)
    link_attrs: list[CellArray] = field(default_factory=list)
    families: dict[int, dict[str, Any]] = field(default_factory=dict)
    tables: Any = None  # tables.TableModel, filled by tables.check_table_meta

    def cell_arrays(self) -> list[CellArray]:
        """Every per-chunk array, vertices first and link attributes last (the read order)."""
        head = [a for a in (self.vertices, self.fragments) if a is not None]
        tail = [self.link_fragments] if self.link_fragments is not None else []
        return head + self.vertex_attrs + self.fragment_attrs + self.links + tail + self.link_attrs


def unknown_codecs(codecs: list[dict[str, Any]]) -> list[Any]:
    """Names in a codec list that zarr has no codec for: no reader can decode such cells."""
    bad = []
    for c in codecs:
        try:
            get_codec_class(c.get("name"))  # type: ignore[arg-type]
        except (KeyError, TypeError, ValueError):  # zarr >= 3.2 raises UnknownCodecError, a ValueError
            bad.append(c.get("name"))
    return bad


def _report_codecs(path: str, codecs: list[dict[str, Any]], findings: list[Finding], out: Collector) -> bool:
    """Report the findings of one array, a codec zarr does not know taking the place of this
    library's 'cannot decode' warning; whether the cells can be read."""
    unknown = unknown_codecs(codecs)
    if unknown:
        out.error(
            "metadata.codecs",
            path,
            f"codec {short(unknown[0])} is not one zarr knows, so no reader can decode these cells",
        )
        findings = [f for f in findings if not (f.code == "metadata.codecs" and f.severity == UNSUPPORTED)]
    report(findings, out)
    return not unknown and not any(f.blocks_reading for f in findings)


def _cell_array(
    view: StoreView,
    path: str,
    root: RootInfo,
    out: Collector,
    cls: type[CellArray] = CellArray,
    **options: Any,
) -> CellArray | None:
    """The array at ``path`` as the reader parses it (None when it is not an array or unusable)."""
    if not view.is_array(path):
        return None
    arr, findings = cls.parse(path, view.docs[path], ndim=root.sid_ndim, **options)
    codecs = view.docs[path].get("codecs")
    inner = inner_codecs(view.docs[path])
    if inner is not codecs and isinstance(codecs, list) and isinstance(inner, list):
        codecs = codecs + inner  # sharded: the codecs inside sharding_indexed must be known too
    listed = isinstance(codecs, list) and all(isinstance(c, dict) for c in codecs)
    readable = _report_codecs(path, codecs if listed else [], findings, out)
    try:
        parse_sharding(path, view.docs[path])
    except FormatError as exc:  # the reader refuses such a shard layout: no cell of it reads
        out.error("metadata.codecs", path, str(exc))
        readable = False
    if arr is None:
        return None
    if not readable:
        arr.pipeline = None
    report(arr.listing[1], out)
    return arr


def _rows_described(arr: CellArray | None) -> bool:
    """The array's ``dtype`` is usable (its rows can be told apart)."""
    return arr is not None and arr.parsed is not None and arr.parsed.dtype is not None


def _links(view: StoreView, model: LevelModel, root: RootInfo, out: Collector) -> None:
    base = f"{model.index}/links"
    for name in view.children(base):
        path = f"{base}/{name}"
        try:
            delta = parse_delta(name)
        except DecodeError as exc:
            out.error("metadata.links", path, str(exc))
            continue
        if not view.is_group(path):
            continue
        family, findings = parse_links_family(path, view.attrs(path), delta, root.sid_ndim)
        report(findings, out)
        if family is None:
            continue
        model.families[delta] = family.attributes
        for seg in view.children(path):
            arr = _cell_array(
                view,
                f"{path}/{seg}",
                root,
                out,
                LinkArray,
                segment=seg,
                link_width=family.link_width,
                delta=delta,
                family=family,
            )
            if isinstance(arr, LinkArray):
                model.links.append(arr)


def _link_attributes(view: StoreView, model: LevelModel, root: RootInfo, out: Collector) -> None:
    base = f"{model.index}/link_attributes"
    links = {a.path: a for a in model.links}
    for name in view.children(base):
        for dname in view.children(f"{base}/{name}"):
            dpath = f"{base}/{name}/{dname}"
            report(parse_link_attribute_family(dpath, view.attrs(dpath), name), out)
            for seg in view.children(dpath):
                arr = _cell_array(view, f"{dpath}/{seg}", root, out)
                if arr is None:
                    continue
                mirrored = links.get(arr.parallel)
                if mirrored is None:
                    out.error(
                        "metadata.link-attributes",
                        arr.path,
                        f"there is no links array {arr.parallel} for it to mirror",
                    )
                    continue
                if "offsets" in arr.attrs and arr.attrs["offsets"] != mirrored.offsets.tolist():
                    out.error(
                        "metadata.link-attributes",
                        arr.path,
                        f"offsets {short(arr.attrs['offsets'])} differ from those of {arr.parallel}",
                    )
                if _rows_described(arr):
                    model.link_attrs.append(arr)


def _attributes(
    view: StoreView, model: LevelModel, family: str, root: RootInfo, out: Collector
) -> list[CellArray]:
    found = []
    for name in view.children(f"{model.index}/{family}"):
        arr = _cell_array(view, f"{model.index}/{family}/{name}", root, out)
        if arr is not None and _rows_described(arr):
            found.append(arr)
    return found


def _same_grid(model: LevelModel, out: Collector) -> None:
    ref = model.vertices
    if ref is None:
        return
    for arr in model.cell_arrays()[1:]:
        if arr.shape != ref.shape or not np.array_equal(arr.origin, ref.origin):
            out.error(
                "metadata.grid",
                arr.path,
                f"grid shape {list(arr.shape)} / origin {arr.origin.tolist()} differs "
                f"from vertices ({list(ref.shape)} / {ref.origin.tolist()})",
            )


def _bound(arr: CellArray | None, max_rows: int | None, row_bytes: int | None = None) -> None:
    """Bound the decoded size of the array's cells as the reader does (see
    :mod:`zarr_vectors.engine.chunks.arrays`): a cell claiming more is a ``cells.decode`` problem."""
    if arr is None or arr.pipeline is None or max_rows is None:
        return
    arr.max_rows, arr.row_bytes = max_rows, row_bytes
    arr.pipeline = arr.pipeline.bounded(arr.max_bytes)


def _bins(model: LevelModel, root: RootInfo) -> int | None:
    """Bins per chunk of the level (None when its bin shape does not tile its chunks)."""
    try:
        bins = bins_per_chunk(model.chunk_shape, root.level_bins.get(model.index, model.chunk_shape))
    except ValueError:
        return None
    n = math.prod(int(b) for b in bins)
    return n if n <= MAX_READ_BINS else None


def _bound_all(model: LevelModel, root: RootInfo) -> None:
    """The reader's decoded-size bounds, from ``vertex_count``, the bins per chunk and the links
    family's ``num_physical_records`` (no bound where one of them is unusable)."""
    count = None if model.meta is None or model.meta.vertex_count < 0 else model.meta.vertex_count
    bins = _bins(model, root)
    per_cell = None if count is None or bins is None else count + bins
    v = model.vertices
    if v is not None and v.parsed is not None and v.parsed.dtype is not None:
        _bound(v, count, DRACO_BYTES if v.draco else v.parsed.dtype.itemsize * root.sid_ndim)
    _bound(model.fragments, per_cell, FRAGMENT_BYTES)
    for arr in model.vertex_attrs:
        _bound(arr, count)
    for arr in model.fragment_attrs:
        _bound(arr, per_cell)
    records = model.families.get(0, {}).get("num_physical_records")
    records = records if isinstance(records, int) and not isinstance(records, bool) and records >= 0 else None
    intra_level = [a for a in model.link_attrs if a.parallel.split("/")[2] == "0"]
    for arr in [*(a for a in model.links if a.delta == 0), *intra_level]:
        _bound(arr, records)
    _bound(model.link_fragments, None if records is None or bins is None else records + bins, FRAGMENT_BYTES)


def check_cell_arrays(
    view: StoreView, lv: int, meta: LevelMeta | None, root: RootInfo, out: Collector
) -> LevelModel:
    """Check the per-chunk arrays of level ``lv`` and describe the readable ones, their cells
    bounded as the reader bounds them."""
    cs = None if meta is None else meta.chunk_shape
    model = LevelModel(lv, meta, root.chunk_shape if cs is None else np.asarray(cs, np.float64))
    p = str(lv)
    model.vertices = _cell_array(view, f"{p}/vertices", root, out)
    if model.vertices is not None and not _rows_described(model.vertices):
        model.vertices.pipeline = None
    model.fragments = _cell_array(view, f"{p}/vertex_fragments", root, out)
    model.link_fragments = _cell_array(view, f"{p}/link_fragments", root, out)
    model.vertex_attrs = _attributes(view, model, "vertex_attributes", root, out)
    model.fragment_attrs = _attributes(view, model, "fragment_attributes", root, out)
    _links(view, model, root, out)
    _link_attributes(view, model, root, out)
    _same_grid(model, out)
    _bound_all(model, root)
    return model
