"""Level 2, per-chunk arrays: the ``zarr.json`` of every array over a level's chunk grid
(vertices, fragments, attributes, links, link attributes), turned into :class:`CellArray`
descriptions the cell checks of level 3 read through."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from zarr.registry import get_codec_class

from zarr_vectors.engine.pipeline import DRACO, Pipeline, UnsupportedPipeline, geometry_codec
from zarr_vectors.errors import DecodeError
from zarr_vectors.format.links import links_has_perm, parse_delta, parse_offsets
from zarr_vectors.validate._report import Collector, short
from zarr_vectors.validate._store import StoreView
from zarr_vectors.validate.metadata import RootInfo

__all__ = ["CellArray", "LevelModel", "check_cell_arrays"]

VLEN = ("variable_length_bytes", "bytes")
#: Largest grid coordinate or cell count accepted: arithmetic on larger ones leaves int64.
LIMIT = 2**62
ZV_ARRAY = {
    "vertices": "vertices",
    "vertex_fragments": "vertex_fragments",
    "link_fragments": "link_fragments",
    "vertex_attribute": "attribute",
    "fragment_attribute": "fragment_attribute",
    "links": "links",
    "link_attribute": "link_attribute",
}


@dataclass(eq=False)
class CellArray:
    """A per-chunk array as level 3 reads it.

    ``pipeline`` is None when its cells cannot be decoded here (a warning says why);
    ``nonempty`` holds the absolute chunks of ``nonempty_chunks`` (None when unusable);
    ``width`` is the number of ``dtype`` values per row.
    """

    path: str
    kind: str
    attrs: dict[str, Any]
    shape: np.ndarray
    origin: np.ndarray
    pipeline: Pipeline | None = None
    dtype: np.dtype | None = None
    width: int = 1
    nonempty: set[tuple[int, ...]] | None = None
    draco: bool = False
    delta: int = 0
    link_width: int = 0
    offsets: np.ndarray | None = None
    has_perm: bool = False
    intra: bool = False
    segment: str = ""
    parallel: str = ""

    def chunk_of(self, cell_key: str) -> tuple[int, ...] | None:
        """Absolute chunk of a stored key ``c/i/j/k`` (None when malformed)."""
        parts = cell_key.split("/")[1:]
        try:
            cell = np.asarray([int(p) for p in parts], np.int64)
        except (ValueError, OverflowError):
            return None
        if len(cell) != len(self.shape):
            return None
        return tuple((cell + self.origin).tolist())

    def key(self, chunk: tuple[int, ...]) -> str:
        return f"{self.path}/c/" + "/".join(str(c - o) for c, o in zip(chunk, self.origin.tolist()))


@dataclass(eq=False)
class LevelModel:
    """The arrays of one level that passed their level-2 checks well enough to be read."""

    index: int
    meta: dict[str, Any]
    chunk_shape: np.ndarray
    vertices: CellArray | None = None
    fragments: CellArray | None = None
    link_fragments: CellArray | None = None
    vertex_attrs: list[CellArray] = field(default_factory=list)
    fragment_attrs: list[CellArray] = field(default_factory=list)
    links: list[CellArray] = field(default_factory=list)
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


def _pipeline(path: str, codecs: Any, out: Collector) -> tuple[Pipeline | None, bool]:
    """The decoding pipeline of a vlen array, and whether it starts with the draco codec."""
    if not isinstance(codecs, list) or not all(isinstance(c, dict) for c in codecs):
        out.error("metadata.array", path, f"codecs must be a list of codec objects, got {short(codecs)}")
        return None, False
    draco = geometry_codec(codecs) == DRACO
    body = codecs[1:] if draco else codecs  # the vlen framing is checked even without the package
    names = [c.get("name") for c in codecs]
    if unknown := unknown_codecs(codecs):
        out.error(
            "metadata.codecs",
            path,
            f"codec {short(unknown[0])} is not one zarr knows, so no reader can decode these cells",
        )
        return None, draco
    try:
        pipe = Pipeline.from_codecs(body)
    except (UnsupportedPipeline, ImportError, ValueError) as exc:
        out.warn(
            "metadata.codecs",
            path,
            f"cells are not checked: this validator cannot decode the codec list {names} ({exc})",
        )
        return None, draco
    if pipe.serializer != "vlen-bytes":
        out.error("metadata.array", path, f"codec list {names} does not serialise with vlen-bytes")
        return None, draco
    return pipe, draco


def _dtype(path: str, attrs: dict[str, Any], kinds: str, out: Collector) -> np.dtype | None:
    name = attrs.get("dtype")
    try:
        dt = np.dtype(name) if isinstance(name, str) else None
    except TypeError:
        dt = None
    if dt is None or dt.kind not in kinds or dt.itemsize == 0:
        need = "an integer type" if kinds == "iu" else "a numeric type"
        out.error("metadata.dtype", path, f"dtype attribute {name!r} is not {need}")
        return None
    return dt.newbyteorder("<")


def _row_width(path: str, attrs: dict[str, Any], out: Collector) -> int:
    shape = attrs.get("row_shape", [])
    if not isinstance(shape, list) or not all(
        isinstance(s, int) and not isinstance(s, bool) and s > 0 for s in shape
    ):
        out.error("metadata.attribute", path, f"row_shape must be a list of positive integers, got {shape!r}")
        return 1
    return int(np.prod(shape, dtype=np.int64)) if shape else 1


def _ints(values: Any, n: int, low: int) -> bool:
    """``n`` integers from ``low`` to :data:`LIMIT` (bool is no integer here)."""
    return (
        isinstance(values, list)
        and len(values) == n
        and all(isinstance(v, int) and not isinstance(v, bool) and low <= v <= LIMIT for v in values)
    )


def _grid_attrs(
    path: str, doc: dict[str, Any], nd: int, out: Collector
) -> tuple[np.ndarray, np.ndarray] | None:
    shape = doc.get("shape")
    if not _ints(shape, nd, 0):
        out.error(
            "metadata.array",
            path,
            f"shape {short(shape)} is not a chunk grid of {nd} axes (integers 0 .. 2**62)",
        )
        return None
    if math.prod(shape) > LIMIT:
        out.error(
            "metadata.grid",
            path,
            f"the chunk grid {shape} has {math.prod(shape):.3g} cells, more than int64 "
            "indexes can number; readers cannot address it",
        )
        return None
    if doc.get("data_type") not in VLEN:
        out.error(
            "metadata.array",
            path,
            f"data_type is {doc.get('data_type')!r}; per-chunk arrays are variable_length_bytes",
        )
    grid = (doc.get("chunk_grid") or {}).get("configuration", {}).get("chunk_shape")
    if (doc.get("chunk_grid") or {}).get("name") != "regular":
        out.error(
            "metadata.array", path, f"chunk_grid is {doc.get('chunk_grid')!r}; cell arrays use a regular grid"
        )
    codecs = doc.get("codecs") or []
    sharded = bool(codecs) and isinstance(codecs[0], dict) and codecs[0].get("name") == "sharding_indexed"
    inner = (codecs[0].get("configuration") or {}).get("chunk_shape") if sharded else grid
    if inner != [1] * nd:
        out.error(
            "metadata.array",
            path,
            f"chunks are {inner!r}; one Zarr chunk must be one spatial chunk ({[1] * nd})",
        )
    enc = doc.get("chunk_key_encoding") or {}
    if enc.get("name") != "default" or (enc.get("configuration") or {}).get("separator", "/") != "/":
        out.error(
            "metadata.array", path, f"chunk_key_encoding is {enc!r}; cells live at c/i/j/k (default, '/')"
        )
    attrs = doc.get("attributes") or {}
    origin = attrs.get("chunk_grid_origin", [0] * nd)
    if not _ints(origin, nd, -LIMIT) or any(o + s > LIMIT for o, s in zip(origin, shape)):
        out.error(
            "metadata.grid",
            path,
            f"chunk_grid_origin must be {nd} integers whose grid stays within +-2**62, got {short(origin)}",
        )
        return None
    return np.asarray(shape, np.int64), np.asarray(origin, np.int64)


def _nonempty(arr: CellArray, out: Collector) -> set[tuple[int, ...]] | None:
    keys = arr.attrs.get("nonempty_chunks")
    nd = len(arr.shape)
    if not isinstance(keys, list):
        out.error(
            "metadata.grid",
            arr.path,
            "nonempty_chunks is missing; it must list the occupied chunks as dot keys",
        )
        return None
    chunks: set[tuple[int, ...]] = set()
    lo, hi = arr.origin.tolist(), (arr.origin + arr.shape - 1).tolist()
    for k in keys:
        try:
            c = tuple(int(p) for p in k.split(".")) if isinstance(k, str) else ()
        except ValueError:
            c = ()
        if len(c) != nd:
            out.error(
                "metadata.grid",
                arr.path,
                f"nonempty_chunks entry {short(k)} is not a dot key of {nd} integers",
            )
            continue
        if any(not a <= x <= b for a, x, b in zip(lo, c, hi)):
            out.error(
                "metadata.grid",
                arr.path,
                f"nonempty_chunks names chunk {short(k)}, outside the grid {lo}..{hi}",
            )
            continue
        if c in chunks:
            out.error("metadata.grid", arr.path, f"nonempty_chunks lists chunk {k} more than once")
            continue
        chunks.add(c)
    if len(chunks) != len(keys):
        return chunks if chunks else None
    return chunks


def _cell_array(view: StoreView, path: str, kind: str, root: RootInfo, out: Collector) -> CellArray | None:
    doc = view.docs.get(path)
    if not view.is_array(path):
        return None
    attrs = view.attrs(path)
    if attrs.get("zv_array") != ZV_ARRAY[kind]:
        out.error(
            "metadata.zv-array", path, f"zv_array is {attrs.get('zv_array')!r}, expected {ZV_ARRAY[kind]!r}"
        )
    grid = _grid_attrs(path, doc, root.sid_ndim, out)
    if grid is None:
        return None
    arr = CellArray(path, kind, attrs, grid[0], grid[1])
    arr.pipeline, arr.draco = _pipeline(path, doc.get("codecs"), out)
    arr.nonempty = _nonempty(arr, out)
    return arr


def _vertices(arr: CellArray, root: RootInfo, out: Collector) -> None:
    arr.dtype = _dtype(arr.path, arr.attrs, "iuf", out)
    arr.width = root.sid_ndim
    enc = arr.attrs.get("encoding", "raw")
    if enc not in ("raw", "draco"):
        out.error(
            "metadata.encoding",
            arr.path,
            f"encoding {enc!r} is unknown (raw or draco); its bytes cannot be read",
        )
        arr.pipeline = None
    elif (enc == "draco") != arr.draco:
        what = (
            "encoding is 'draco' but the codec list does not start with the draco codec"
            if enc == "draco"
            else "the codec list starts with the draco codec but encoding is not 'draco'"
        )
        out.error("metadata.encoding", arr.path, what)
    arr.draco = enc == "draco"


def _fragments(arr: CellArray, out: Collector) -> None:
    enc = arr.attrs.get("encoding")
    if enc != "fragment_index_v1":
        out.error(
            "metadata.encoding", arr.path, f"encoding is {enc!r}; fragment indices are 'fragment_index_v1'"
        )
        arr.pipeline = None


def _family(view: StoreView, path: str, delta: int, root: RootInfo, out: Collector) -> dict[str, Any] | None:
    a = view.attrs(path)
    ok = True
    if a.get("zv_array") != "links_family":
        out.error("metadata.zv-array", path, f"zv_array is {a.get('zv_array')!r}, expected 'links_family'")
    width = a.get("link_width")
    if not isinstance(width, int) or isinstance(width, bool) or width < 1:
        out.error("metadata.links", path, f"link_width must be an integer >= 1, got {width!r}")
        ok = False
    if a.get("sid_ndim", root.sid_ndim) != root.sid_ndim:
        out.error(
            "metadata.links",
            path,
            f"sid_ndim is {a.get('sid_ndim')!r} but the store has {root.sid_ndim} space axes",
        )
    if not isinstance(a.get("directed", False), bool):
        out.error("metadata.links", path, f"directed must be true or false, got {a.get('directed')!r}")
        ok = False
    if a.get("store", "canonical") not in ("canonical", "duplicate"):
        out.error("metadata.links", path, f"store is {a.get('store')!r}; expected 'canonical' or 'duplicate'")
        ok = False
    if a.get("level_delta", delta) != delta:
        out.error(
            "metadata.links",
            path,
            f"level_delta is {a.get('level_delta')!r} but the folder names delta {delta}",
        )
    for key in ("num_links", "num_physical_records"):
        v = a.get(key)
        if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
            out.error("metadata.links", path, f"{key} must be an integer >= 0, got {v!r}")
    return a if ok else None


def _link_array(
    arr: CellArray, fam: dict[str, Any], delta: int, segment: str, nd: int, out: Collector
) -> bool:
    width = fam["link_width"]
    try:
        offsets = parse_offsets(segment, width, nd)
    except DecodeError as exc:
        out.error("metadata.links", arr.path, str(exc))
        return False
    arr.dtype = _dtype(arr.path, arr.attrs, "iu", out)
    arr.delta, arr.link_width, arr.offsets, arr.segment = delta, width, offsets, segment
    arr.intra = delta == 0 and not offsets.any()
    want = links_has_perm(
        offsets, delta=delta, directed=fam.get("directed", False), store=fam.get("store", "canonical")
    )
    arr.has_perm = bool(arr.attrs.get("has_perm", want))
    if arr.attrs.get("has_perm", want) != want:
        out.error(
            "metadata.links",
            arr.path,
            f"has_perm is {arr.attrs.get('has_perm')!r} but the family policy "
            f"(delta {delta}, directed {fam.get('directed', False)}, store {fam.get('store', 'canonical')!r}) "
            f"gives {want}",
        )
    if "offsets" in arr.attrs and arr.attrs["offsets"] != offsets.tolist():
        out.error(
            "metadata.links",
            arr.path,
            f"offsets attribute {arr.attrs['offsets']!r} disagrees with the "
            f"array name {segment!r} ({offsets.tolist()})",
        )
    for key, value in (("link_width", width), ("level_delta", delta)):
        if arr.attrs.get(key, value) != value:
            out.error(
                "metadata.links", arr.path, f"{key} is {arr.attrs.get(key)!r} but its family says {value}"
            )
    arr.width = width + int(arr.has_perm)
    return arr.dtype is not None


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
        fam = _family(view, path, delta, root, out)
        if fam is None:
            continue
        model.families[delta] = fam
        for seg in view.children(path):
            arr = _cell_array(view, f"{path}/{seg}", "links", root, out)
            if arr is not None and _link_array(arr, fam, delta, seg, root.sid_ndim, out):
                model.links.append(arr)


def _link_attributes(view: StoreView, model: LevelModel, root: RootInfo, out: Collector) -> None:
    base = f"{model.index}/link_attributes"
    links = {a.path: a for a in model.links}
    for name in view.children(base):
        for dname in view.children(f"{base}/{name}"):
            dpath = f"{base}/{name}/{dname}"
            fa = view.attrs(dpath)
            if fa.get("zv_array") != "link_attribute_family":
                out.error(
                    "metadata.zv-array",
                    dpath,
                    f"zv_array is {fa.get('zv_array')!r}, expected 'link_attribute_family'",
                )
            if fa.get("name", name) != name:
                out.error(
                    "metadata.link-attributes",
                    dpath,
                    f"name is {fa.get('name')!r} but the folder is {name!r}",
                )
            for seg in view.children(dpath):
                arr = _cell_array(view, f"{dpath}/{seg}", "link_attribute", root, out)
                if arr is None:
                    continue
                parallel = f"{model.index}/links/{dname}/{seg}"
                if parallel not in links:
                    out.error(
                        "metadata.link-attributes",
                        arr.path,
                        f"there is no links array {parallel} for it to mirror",
                    )
                    continue
                if "offsets" in arr.attrs and arr.attrs["offsets"] != links[parallel].offsets.tolist():
                    out.error(
                        "metadata.link-attributes",
                        arr.path,
                        f"offsets {arr.attrs['offsets']!r} differ from those of {parallel}",
                    )
                arr.parallel = parallel
                arr.dtype = _dtype(arr.path, arr.attrs, "biuf", out)
                arr.width = _row_width(arr.path, arr.attrs, out)
                if arr.dtype is not None:
                    model.link_attrs.append(arr)


def _attributes(
    view: StoreView, model: LevelModel, family: str, kind: str, root: RootInfo, out: Collector
) -> list[CellArray]:
    found = []
    for name in view.children(f"{model.index}/{family}"):
        arr = _cell_array(view, f"{model.index}/{family}/{name}", kind, root, out)
        if arr is None:
            continue
        if arr.attrs.get("name", name) != name:
            out.error(
                "metadata.attribute", arr.path, f"name is {arr.attrs.get('name')!r} but the array is {name!r}"
            )
        arr.dtype = _dtype(arr.path, arr.attrs, "biuf", out)
        arr.width = _row_width(arr.path, arr.attrs, out)
        if arr.dtype is not None:
            found.append(arr)
    return found


def _same_grid(model: LevelModel, out: Collector) -> None:
    ref = model.vertices
    if ref is None:
        return
    for arr in model.cell_arrays()[1:]:
        if not np.array_equal(arr.shape, ref.shape) or not np.array_equal(arr.origin, ref.origin):
            out.error(
                "metadata.grid",
                arr.path,
                f"grid shape {arr.shape.tolist()} / origin {arr.origin.tolist()} differs "
                f"from vertices ({ref.shape.tolist()} / {ref.origin.tolist()})",
            )


def check_cell_arrays(
    view: StoreView, lv: int, meta: dict[str, Any], root: RootInfo, out: Collector
) -> LevelModel:
    """Check the per-chunk arrays of level ``lv`` and describe the readable ones."""
    cs = meta.get("chunk_shape")
    model = LevelModel(lv, meta, root.chunk_shape if cs is None else np.asarray(cs, np.float64))
    p = str(lv)
    model.vertices = _cell_array(view, f"{p}/vertices", "vertices", root, out)
    if model.vertices is not None:
        _vertices(model.vertices, root, out)
        if model.vertices.dtype is None:
            model.vertices.pipeline = None
    model.fragments = _cell_array(view, f"{p}/vertex_fragments", "vertex_fragments", root, out)
    if model.fragments is not None:
        _fragments(model.fragments, out)
    model.link_fragments = _cell_array(view, f"{p}/link_fragments", "link_fragments", root, out)
    if model.link_fragments is not None:
        _fragments(model.link_fragments, out)
    model.vertex_attrs = _attributes(view, model, "vertex_attributes", "vertex_attribute", root, out)
    model.fragment_attrs = _attributes(view, model, "fragment_attributes", "fragment_attribute", root, out)
    _links(view, model, root, out)
    _link_attributes(view, model, root, out)
    _same_grid(model, out)
    return model
