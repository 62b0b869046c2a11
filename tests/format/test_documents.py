"""The format's one parser on hand-built documents: each class of problem it reports comes back
as one finding with the document's path, the validator rule it breaks, its severity and a
message naming the field. Documents start from what the library's own builders write (no
finding at all) and are broken one field at a time."""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from zarr_vectors.errors import FormatError
from zarr_vectors.format.documents import array_kind, parse_cell_array, parse_nonempty, parse_table
from zarr_vectors.format.findings import ERROR, NONCONFORMING, UNSUPPORTED, WARNING, Finding, raise_for
from zarr_vectors.format.groups import (
    LinksFamily,
    ObjectIndexDoc,
    check_object_index,
    parse_link_attribute_family,
    parse_link_layout,
    parse_links_family,
    parse_object_index,
)
from zarr_vectors.format.metadata import (
    Axis,
    LevelMeta,
    RootMeta,
    check_arrays_present,
    parse_level,
    parse_root,
)
from zarr_vectors.format.zarr_json import dense_array_doc, vlen_array_doc

Edit = Callable[[dict[str, Any]], Any]


def _one(found: list[Finding], path: str, code: str, severity: str, message: str) -> Finding:
    """The single finding, checked field by field."""
    assert len(found) == 1, found
    f = found[0]
    assert (f.path, f.code, f.severity) == (path, code, severity), f
    assert re.search(message, f.message), f.message
    return f


# ------------------------------------------------------------------ root


def _root_attrs() -> dict[str, Any]:
    meta = RootMeta(
        chunk_shape=(10.0, 10.0),
        bounds=((0.0, 0.0), (100.0, 100.0)),
        axes=(Axis("x"), Axis("y")),
        level_bin_shapes=((5.0, 5.0),),
        base_bin_shape=(5.0, 5.0),
    )
    return meta.to_attributes()


def _zv(**change: Any) -> Edit:
    return lambda a: a["zarr_vectors"].update(change)


def _drop(key: str) -> Edit:
    return lambda a: a["zarr_vectors"].pop(key)


def _ms(fn: Edit) -> Edit:
    return lambda a: fn(a["multiscales"][0])


def _ds(fn: Edit) -> Edit:
    return lambda a: fn(a["multiscales"][0]["datasets"][0])


ROOT_CASES: dict[str, tuple[Edit, str, str, str]] = {
    "no block": (lambda a: a.pop("zarr_vectors"), "structure.zv-block", ERROR, "not a Zarr Vectors store"),
    "no version": (_drop("zv_version"), "metadata.version", ERROR, r"zv_version is missing$"),
    "pre-0.5 name": (
        lambda a: a["zarr_vectors"].update(format_version=a["zarr_vectors"].pop("zv_version")),
        "metadata.version",
        NONCONFORMING,
        "format_version is the pre-0.5 name",
    ),
    "version text": (_zv(zv_version="nine"), "metadata.version", ERROR, "'nine' is not of the form X.Y.Z"),
    "old version": (_zv(zv_version="0.8.1"), "metadata.version", ERROR, "0.8.1; .*pre-0.9 stores"),
    "chunk_shape": (_zv(chunk_shape=[10, -1]), "metadata.root", ERROR, "chunk_shape must be positive"),
    "bounds rank": (_zv(bounds=[[0, 0], [100]]), "metadata.root", ERROR, r"bounds\[1\] must have 2 entries"),
    "bounds order": (_zv(bounds=[[9, 0], [1, 100]]), "metadata.root", ERROR, "min corner"),
    "base bins": (_zv(base_bin_shape=[3.0, 5.0]), "metadata.root", ERROR, "must divide chunk_shape"),
    "caps type": (
        _zv(format_capabilities="fragment_index"),
        "metadata.capabilities",
        ERROR,
        "must be a list of strings",
    ),
    "retired cap": (
        _zv(format_capabilities=["fragment_index", "partitioned_cross_chunk_links"]),
        "metadata.capabilities",
        ERROR,
        "pre-0.9 capability 'partitioned_cross_chunk_links'",
    ),
    "unknown cap": (
        _zv(format_capabilities=["fragment_index", "future"]),
        "metadata.capabilities",
        WARNING,
        "unknown capability token 'future'",
    ),
    "no fragment_index": (
        _zv(format_capabilities=[]),
        "metadata.capabilities",
        WARNING,
        "lacks 'fragment_index'",
    ),
    "geometry types": (_zv(geometry_types=[]), "metadata.geometry-types", ERROR, "must be a list of strings"),
    "custom geometry": (
        _zv(geometry_types=["hexahedra"]),
        "metadata.geometry-types",
        WARNING,
        "^geometry type 'hexahedra' is custom and unknown to this library: geometry rules are not checked for it$",
    ),
    "enum": (
        _zv(links_convention="zigzag"),
        "metadata.enum",
        ERROR,
        "links_convention must be one of 'explicit', .*; got 'zigzag'",
    ),
    "reduction type": (
        _zv(reduction_factor="8"),
        "metadata.root",
        ERROR,
        "reduction_factor must be an integer",
    ),
    "reduction 1": (
        _zv(reduction_factor=1),
        "metadata.root",
        NONCONFORMING,
        "reduction_factor must be .* >= 2",
    ),
    "depth": (
        _zv(cross_level_depth=-2),
        "metadata.root",
        ERROR,
        "cross_level_depth must be an integer >= -1",
    ),
    "unknown key": (_zv(novel=1), "metadata.unknown-key", WARNING, "unknown key zarr_vectors.novel"),
    "no multiscales": (lambda a: a.pop("multiscales"), "metadata.multiscales", ERROR, "no multiscales list"),
    "multiscales type": (
        lambda a: a.update(multiscales={}),
        "metadata.multiscales",
        ERROR,
        "must be a list holding one object",
    ),
    "format tag": (
        _ms(lambda m: m.update(metadata={})),
        "metadata.multiscales",
        NONCONFORMING,
        "metadata.format must be 'zarr_vectors'",
    ),
    "space axes": (
        _ms(lambda m: m["axes"].append({"name": "z"})),
        "metadata.multiscales",
        ERROR,
        "declare 3 space axes but chunk_shape has 2",
    ),
    "axis objects": (
        _ms(lambda m: m["axes"][1].pop("name")),
        "metadata.multiscales",
        NONCONFORMING,
        r"axes must be a list of \{name, type\} objects",
    ),
    "no datasets": (
        _ms(lambda m: m.pop("datasets")),
        "metadata.multiscales",
        NONCONFORMING,
        "datasets must list one",
    ),
    "empty datasets": (
        _ms(lambda m: m.update(datasets=[])),
        "metadata.multiscales",
        ERROR,
        "datasets is empty",
    ),
    "transforms": (
        _ds(lambda d: d.update(coordinateTransformations="scale")),
        "metadata.multiscales",
        ERROR,
        "coordinateTransformations must be a list of objects",
    ),
    "no scale": (
        _ds(lambda d: d["coordinateTransformations"].pop(0)),
        "metadata.multiscales",
        NONCONFORMING,
        "no numeric scale transform",
    ),
    "translation values": (
        _ds(lambda d: d["coordinateTransformations"][1].update(translation=[2.5, float("inf")])),
        "metadata.multiscales",
        ERROR,
        r"datasets\[0\] translation must hold finite numbers",
    ),
    "translation rank": (
        _ds(lambda d: d["coordinateTransformations"][1].update(translation=[2.5])),
        "metadata.multiscales",
        ERROR,
        "translation has 1 entries for 2 space axes",
    ),
    "scale ratio": (
        _ds(lambda d: d["coordinateTransformations"][0].update(scale=[3.0, 3.0])),
        "pyramid.bin-shape",
        NONCONFORMING,
        r"scale \[3.0, 3.0\] should be bin_shape / base_bin_shape",
    ),
}


def test_a_root_written_by_the_library_has_no_finding():
    meta, found = parse_root(_root_attrs())
    assert found == []
    assert meta is not None and meta.level_bin_shapes == ((5.0, 5.0),)


@pytest.mark.parametrize("case", sorted(ROOT_CASES))
def test_each_root_problem_is_one_finding(case):
    edit, code, severity, message = ROOT_CASES[case]
    attrs = _root_attrs()
    edit(attrs)
    meta, found = parse_root(attrs)
    _one(found, "zarr.json", code, severity, message)
    if case in ("no block", "chunk_shape"):
        assert meta is None
    else:  # the best reading of the rest, for the validator to go on with
        assert meta is not None and meta.chunk_shape == (10.0, 10.0)


def test_unusable_bounds_read_as_unknown_and_geozarr_drift_is_nonconforming():
    attrs = _root_attrs()
    attrs["zarr_vectors"]["bounds"] = "everywhere"
    meta, _ = parse_root(attrs)
    assert meta is not None and np.isnan(meta.bounds).all()
    attrs = _root_attrs()
    attrs["proj:code"] = "EPSG:4326"  # no crs in the block: every GeoZarr key disagrees
    _, found = parse_root(attrs)
    assert found and all(
        (f.path, f.code, f.severity) == ("zarr.json", "metadata.geozarr", NONCONFORMING) for f in found
    )
    assert any("proj:code is 'EPSG:4326' but zarr_vectors.crs has None" in f.message for f in found)


def test_the_reader_raises_the_blocking_findings_and_warns_about_unknown_tokens():
    attrs = _root_attrs()
    attrs["zarr_vectors"].update(chunk_shape=[10, 0], links_convention="zigzag", novel=1)
    with pytest.raises(
        FormatError, match=r"^zarr_vectors.chunk_shape must be positive .*\(and 1 more problem: "
    ) as info:
        RootMeta.from_attributes(attrs)
    assert [f.code for f in info.value.problems] == [
        "metadata.root",
        "metadata.enum",
    ]  # the warning is not one
    attrs = _root_attrs()
    attrs["zarr_vectors"]["format_capabilities"] = ["fragment_index", "future"]
    with pytest.warns(UserWarning, match="future"):
        assert RootMeta.from_attributes(attrs).format_capabilities == ("fragment_index", "future")


# ------------------------------------------------------------------ level


def _level_block() -> dict[str, Any]:
    return LevelMeta(level=0, vertex_count=5, arrays_present=("vertices",)).to_json()


LEVEL_CASES: dict[str, tuple[Edit, str, str, str]] = {
    "index": (
        lambda b: b.update(level=1),
        "metadata.level",
        NONCONFORMING,
        "level is 1 but the group is level 0",
    ),
    "no count": (lambda b: b.pop("vertex_count"), "metadata.level", ERROR, "vertex_count is missing"),
    "count": (
        lambda b: b.update(vertex_count=-1),
        "metadata.level",
        ERROR,
        "vertex_count must be an integer >= 0",
    ),
    "present type": (
        lambda b: b.update(arrays_present="vertices"),
        "metadata.arrays-present",
        ERROR,
        "arrays_present must be a list of array family names",
    ),
    "present name": (
        lambda b: b["arrays_present"].append("vertex_attribute"),
        "metadata.arrays-present",
        NONCONFORMING,
        "'vertex_attribute', which is not a family name",
    ),
    "parent": (
        lambda b: b.update(parent_level="0"),
        "metadata.level",
        ERROR,
        "parent_level must be an integer",
    ),
    "chunk rank": (
        lambda b: b.update(chunk_shape=[10.0]),
        "metadata.level",
        ERROR,
        r"^level 0: chunk_shape \[10.0\] has 1 entries for 2 space axes$",
    ),
    "sparsity type": (
        lambda b: b.update(object_sparsity="all"),
        "metadata.level",
        ERROR,
        "object_sparsity must be a list of numbers",
    ),
    "sparsity range": (
        lambda b: b.update(object_sparsity=2.0),
        "metadata.level",
        NONCONFORMING,
        r"object_sparsity must be in \(0, 1\]",
    ),
    "coarsening": (
        lambda b: b.update(coarsening_method="magic"),
        "metadata.level",
        WARNING,
        "coarsening_method must be one of .*; got 'magic'",
    ),
    "flag": (
        lambda b: b.update(fragments_tile="yes"),
        "metadata.level",
        ERROR,
        "fragments_tile must be true or false",
    ),
    "forbidden": (
        lambda b: b.update(bin_shape=[5.0, 5.0]),
        "metadata.level",
        NONCONFORMING,
        "must not hold 'bin_shape'",
    ),
    "unknown key": (lambda b: b.update(novel=1), "metadata.unknown-key", WARNING, "zarr_vectors_level.novel"),
}


def test_a_level_block_written_by_the_library_has_no_finding():
    meta, found = parse_level(_level_block(), 0, 2)
    assert found == [] and meta == LevelMeta(level=0, vertex_count=5, arrays_present=("vertices",))
    meta, found = parse_level(None, 3)
    _one(
        found, "3/zarr.json", "metadata.level", ERROR, "^level 3: the level group has no 'zarr_vectors_level'"
    )
    assert meta is None


@pytest.mark.parametrize("case", sorted(LEVEL_CASES))
def test_each_level_problem_is_one_finding(case):
    edit, code, severity, message = LEVEL_CASES[case]
    block = _level_block()
    edit(block)
    meta, found = parse_level(block, 0, 2)
    _one(found, "0/zarr.json", code, severity, message)
    assert meta is not None


def test_arrays_present_against_the_nodes_of_the_level():
    meta = LevelMeta(
        level=2, vertex_count=5, arrays_present=("vertices", "vertex_attributes", "link_fragments")
    )
    assert check_arrays_present(meta, 2, {"vertices", "vertex_attributes", "link_fragments"}) == []
    found = check_arrays_present(meta, 2, {"vertices"})
    assert [(f.path, f.code, f.severity) for f in found] == [
        ("2/zarr.json", "metadata.arrays-present", ERROR),
        ("2/zarr.json", "metadata.arrays-present", WARNING),
    ]
    assert (
        "declares 'vertex_attributes' in arrays_present but 2/vertex_attributes/zarr.json" in found[0].message
    )
    assert "lists 'link_fragments' but level 2 has no such node" in found[1].message


# ------------------------------------------------------------------ per-chunk arrays

ATTR = "0/vertex_attributes/a"


def _cell_doc(path: str = ATTR) -> dict[str, Any]:
    kind = array_kind(path)
    attrs: dict[str, Any] = {"nonempty_chunks": ["0.0"]}
    if kind == "vertex_attribute":
        attrs.update(zv_array="attribute", name="a", dtype="float32", row_shape=[])
    elif kind == "vertices":
        attrs.update(zv_array="vertices", dtype="float32", encoding="raw")
    elif kind == "vertex_fragments":
        attrs.update(zv_array="vertex_fragments", encoding="fragment_index_v1")
    elif kind == "links":
        attrs.update(
            zv_array="links", dtype="uint8", offsets=[[1, 0]], has_perm=True, link_width=2, level_delta=0
        )
    return vlen_array_doc((4, 4), (1, 1), [{"name": "zstd", "configuration": {"level": 0}}], attrs)


def _at(key: str, value: Any) -> Edit:
    return lambda d: d.update({key: value})


def _attr(key: str, value: Any) -> Edit:
    return lambda d: d["attributes"].update({key: value})


CELL_CASES: dict[str, tuple[str, Edit, str, str, str]] = {
    "node type": (ATTR, _at("node_type", "group"), "structure.node-type", ERROR, "should be an array"),
    "zv_array": (
        ATTR,
        _attr("zv_array", "vertices"),
        "metadata.zv-array",
        NONCONFORMING,
        "expected 'attribute'",
    ),
    "shape": (ATTR, _at("shape", [4, "x"]), "metadata.array", ERROR, "shape must be a list of integers"),
    "rank": (ATTR, _at("shape", [4, 4, 4]), "metadata.array", ERROR, "has 3 dimensions but the store has 2"),
    "grid size": (
        ATTR,
        _at("shape", [2**31, 2**31]),
        "metadata.grid",
        ERROR,
        r"a grid of \[2147483648, 2147483648\] cells is too large .*int64",
    ),
    "data_type": (
        ATTR,
        _at("data_type", "uint8"),
        "metadata.array",
        NONCONFORMING,
        "are variable_length_bytes",
    ),
    "grid name": (
        ATTR,
        lambda d: d["chunk_grid"].update(name="rectilinear"),
        "metadata.array",
        ERROR,
        "chunk_grid must be a regular grid",
    ),
    "chunks": (
        ATTR,
        lambda d: d["chunk_grid"]["configuration"].update(chunk_shape=[2, 1]),
        "metadata.array",
        ERROR,
        r"chunks are \(2, 1\); a per-chunk array has chunk_shape \[1, 1\]",
    ),
    "key encoding": (
        ATTR,
        lambda d: d["chunk_key_encoding"]["configuration"].update(separator="."),
        "metadata.array",
        ERROR,
        "chunk_key_encoding is .*c/i/j/k",
    ),
    "codecs": (
        ATTR,
        _at("codecs", "zstd"),
        "metadata.array",
        ERROR,
        "codecs must be a list of codec objects",
    ),
    "serializer": (
        ATTR,
        _at("codecs", [{"name": "bytes", "configuration": {}}]),
        "metadata.array",
        ERROR,
        r"\['bytes'\] does not serialise with vlen-bytes",
    ),
    "origin type": (
        ATTR,
        _attr("chunk_grid_origin", [0.5, 0]),
        "metadata.grid",
        ERROR,
        "chunk_grid_origin must be a list of integers",
    ),
    "origin range": (
        ATTR,
        _attr("chunk_grid_origin", [2**62 - 2, 0]),
        "metadata.grid",
        ERROR,
        r"chunk_grid_origin must be 2 integers whose grid stays within \+-2\*\*62",
    ),
    "no dtype": (
        ATTR,
        lambda d: d["attributes"].pop("dtype"),
        "metadata.dtype",
        ERROR,
        "has no dtype attribute",
    ),
    "unknown dtype": (ATTR, _attr("dtype", "float33"), "metadata.dtype", ERROR, "an unknown dtype 'float33'"),
    "object dtype": (
        ATTR,
        _attr("dtype", "object"),
        "metadata.dtype",
        ERROR,
        "'0/vertex_attributes/a' has dtype 'object'; cell data must be a numeric type",
    ),
    "float links": (
        "0/links/0/+1.0",
        _attr("dtype", "float32"),
        "metadata.dtype",
        ERROR,
        "links array '0/links/0/\\+1.0' has dtype 'float32'; link rows are integers",
    ),
    "row shape": (
        ATTR,
        _attr("row_shape", [0]),
        "metadata.attribute",
        ERROR,
        r"row_shape must hold integers in \[1",
    ),
    "row width": (ATTR, _attr("row_shape", [2**21]), "metadata.attribute", ERROR, "2097152 values per row"),
    "name": (
        ATTR,
        _attr("name", "b"),
        "metadata.attribute",
        NONCONFORMING,
        "name is 'b' but the array is 'a'",
    ),
    "encoding": (
        "0/vertices",
        _attr("encoding", "lz4-points"),
        "metadata.encoding",
        ERROR,
        "encoding 'lz4-points', which this library cannot read",
    ),
    "draco blob without codec": (
        "0/vertices",
        _attr("encoding", "draco"),
        "metadata.encoding",
        ERROR,
        "does not start with the draco codec",
    ),
    "draco codec without encoding": (
        "0/vertices",
        lambda d: d["codecs"].insert(0, {"name": "draco", "configuration": {}}),
        "metadata.encoding",
        NONCONFORMING,
        "starts with the draco codec but encoding is not 'draco'",
    ),
    "fragment encoding": (
        "0/vertex_fragments",
        lambda d: d["attributes"].pop("encoding"),
        "metadata.encoding",
        ERROR,
        "encoding is None; fragment indices are 'fragment_index_v1'",
    ),
}


@pytest.mark.parametrize("path", [ATTR, "0/vertices", "0/vertex_fragments", "0/links/0/+1.0"])
def test_cell_arrays_written_by_the_library_have_no_finding(path):
    parsed, found = parse_cell_array(path, _cell_doc(path), 2)
    assert found == []
    assert parsed is not None and parsed.shape == (4, 4) and parsed.origin == (0, 0)


@pytest.mark.parametrize("case", sorted(CELL_CASES))
def test_each_cell_array_problem_is_one_finding(case):
    path, edit, code, severity, message = CELL_CASES[case]
    doc = _cell_doc(path)
    edit(doc)
    parsed, found = parse_cell_array(path, doc, 2)
    _one(found, path, code, severity, message)
    unusable = ("node type", "shape", "rank", "grid size", "origin type", "origin range")
    assert (parsed is None) == (case in unusable)


def test_link_attributes_know_the_links_array_they_mirror():
    path = "3/link_attributes/w/+1/0.0.1"
    doc = _cell_doc(path)
    doc["attributes"].update(zv_array="link_attribute", dtype="float32")
    parsed, found = parse_cell_array(path, doc)
    assert found == [] and parsed is not None and parsed.parallel == "3/links/+1/0.0.1"


NONEMPTY_CASES: dict[str, tuple[Any, str, list[list[int]] | None]] = {
    "missing": (None, "has no nonempty_chunks attribute", None),
    "not a list": ("0.0", "nonempty_chunks must be a list of strings", None),
    "malformed": (["0.0", "x.1"], r"entry 'x.1' is not 2 integers joined by '.'", [[0, 0]]),
    "parts": (["0.0.1", "1"], r"entry '0.0.1' is not 2 integers", []),  # 4 numbers in all, 2 keys
    "outside": (["0.0", "9.0"], r"entry '9.0' lies outside its grid of \[4, 4\] cells", [[0, 0]]),
    "twice": (["1.1", "2.0", "1.1"], "lists chunk 1.1 twice", [[1, 1], [2, 0]]),
}


@pytest.mark.parametrize("case", sorted(NONEMPTY_CASES))
def test_each_nonempty_chunks_problem_is_a_finding_and_the_rest_is_kept(case):
    value, message, kept = NONEMPTY_CASES[case]
    chunks, found = parse_nonempty(ATTR, value, (4, 4), (0, 0))
    assert found and all((f.path, f.code, f.severity) == (ATTR, "metadata.grid", ERROR) for f in found)
    assert re.search(message, found[0].message), found[0].message
    assert (chunks is None and kept is None) or chunks.reshape(-1, 2).tolist() == kept


def test_nonempty_chunks_are_absolute_and_many_bad_entries_are_summed_up():
    chunks, found = parse_nonempty(ATTR, ["-2.0", "1.3"], (4, 4), (-2, 0))
    assert found == [] and chunks.tolist() == [[-2, 0], [1, 3]]
    _, found = parse_nonempty(ATTR, [f"{9 + i}.0" for i in range(100)], (4, 4), (0, 0))
    assert len(found) == 21 and found[-1].message.endswith(
        "nonempty_chunks has 80 more entries outside the grid"
    )


# ------------------------------------------------------------------ tables

OBJ = "0/object_attributes/w"


def _table_doc(path: str) -> dict[str, Any]:
    kind = array_kind(path)
    if kind == "groups":
        return vlen_array_doc(
            (2,), (2,), [], {"zv_array": "groups", "num_groups": 2, "group_ranges": {"0": [0, 2]}}
        )
    if kind == "manifests":
        return vlen_array_doc((10,), (4,), [], {})
    if kind == "object_ids":
        return dense_array_doc((10,), (4,), np.dtype("int64"), 0, [], {})
    return dense_array_doc(
        (10,),
        (4,),
        np.dtype("float64"),
        np.nan,
        [],
        {"zv_array": "object_attribute", "name": "w", "dtype": "float64"},
    )


TABLE_CASES: dict[str, tuple[str, Edit, str, str, str]] = {
    "vlen values": (
        OBJ,
        lambda d: d.update(
            data_type="variable_length_bytes", attributes={"zv_array": "object_attribute", "name": "w"}
        ),
        "metadata.tables",
        ERROR,
        "is variable-length bytes, not values",
    ),
    "values": (
        OBJ,
        lambda d: d.update(data_type="complex64", attributes={"zv_array": "object_attribute", "name": "w"}),
        "metadata.tables",
        ERROR,
        "'complex64' is not a numeric type",
    ),
    "shape": (OBJ, _at("shape", [[10]]), "metadata.tables", ERROR, "shape must be a list of integers"),
    "columns": (
        OBJ,
        lambda d: d.update(
            shape=[10, 3], chunk_grid={"name": "regular", "configuration": {"chunk_shape": [4, 2]}}
        ),
        "metadata.tables",
        ERROR,
        r"chunk_shape \[4, 2\] must span the 3 columns",
    ),
    "name": (OBJ, _attr("name", "v"), "metadata.tables", NONCONFORMING, "name is 'v' but the array is 'w'"),
    "dtype attribute": (
        OBJ,
        _attr("dtype", "float32"),
        "metadata.tables",
        NONCONFORMING,
        "dtype attribute 'float32' differs from data_type 'float64'",
    ),
    "zv_array": (
        OBJ,
        _attr("zv_array", "attribute"),
        "metadata.zv-array",
        NONCONFORMING,
        "expected 'object_attribute'",
    ),
    "num_groups": (
        "0/groups",
        _attr("num_groups", 5),
        "metadata.tables",
        ERROR,
        "^0/groups has 2 rows but num_groups is 5$",
    ),
    "group_ranges": (
        "0/groups",
        _attr("group_ranges", {"0": [3, 1]}),
        "metadata.tables",
        NONCONFORMING,
        r"group_ranges must map group ids to \[start, stop\]",
    ),
    "dense manifests": (
        "0/object_index/manifests",
        _at("data_type", "uint8"),
        "metadata.object-index",
        ERROR,
        "'uint8' is not variable-length bytes",
    ),
    "float ids": (
        "0/object_index/object_ids",
        _at("data_type", "float64"),
        "metadata.object-index",
        ERROR,
        "'float64' is not an integer type",
    ),
}


@pytest.mark.parametrize("path", [OBJ, "0/groups", "0/object_index/manifests", "0/object_index/object_ids"])
def test_tables_written_by_the_library_have_no_finding(path):
    parsed, found = parse_table(path, _table_doc(path))
    assert found == [] and parsed is not None and parsed.chunk_shape[0] in (2, 4)


@pytest.mark.parametrize("case", sorted(TABLE_CASES))
def test_each_table_problem_is_one_finding(case):
    path, edit, code, severity, message = TABLE_CASES[case]
    doc = _table_doc(path)
    edit(doc)
    _, found = parse_table(path, doc)
    _one(found, path, code, severity, message)


# ------------------------------------------------------------------ group documents

FAM = "0/links/0"


def _family() -> dict[str, Any]:
    return {
        "zv_array": "links_family",
        "level_delta": 0,
        "link_width": 2,
        "sid_ndim": 2,
        "directed": False,
        "store": "canonical",
    }


FAMILY_CASES: dict[str, tuple[Edit, str, str, str]] = {
    "width": (
        lambda a: a.update(link_width=0),
        "metadata.links",
        ERROR,
        "link_width must be an integer from 1 to 20",
    ),
    "directed": (
        lambda a: a.update(directed="yes"),
        "metadata.links",
        ERROR,
        "directed must be true or false",
    ),
    "store": (
        lambda a: a.update(store="mirror"),
        "metadata.links",
        ERROR,
        "store must be one of 'canonical', 'duplicate'",
    ),
    "sid_ndim": (
        lambda a: a.update(sid_ndim=3),
        "metadata.links",
        NONCONFORMING,
        "sid_ndim is 3 but the store has 2",
    ),
    "delta": (
        lambda a: a.update(level_delta=1),
        "metadata.links",
        NONCONFORMING,
        "level_delta is 1 but the folder names delta 0",
    ),
    "count": (
        lambda a: a.update(num_links=-1),
        "metadata.links",
        ERROR,
        "num_links must be a non-negative integer",
    ),
    "zv_array": (lambda a: a.pop("zv_array"), "metadata.zv-array", NONCONFORMING, "expected 'links_family'"),
}


@pytest.mark.parametrize("case", sorted(FAMILY_CASES))
def test_each_links_family_problem_is_one_finding(case):
    edit, code, severity, message = FAMILY_CASES[case]
    attrs = _family()
    assert parse_links_family(FAM, attrs, 0, 2) == (
        LinksFamily(0, 2, False, "canonical", attributes=attrs),
        [],
    )
    edit(attrs)
    family, found = parse_links_family(FAM, attrs, 0, 2)
    _one(found, FAM, code, severity, message)
    assert (family is None) == (severity == ERROR and case != "count")


LINK = "0/links/0/+1.0"
LAYOUT_CASES: dict[str, tuple[Edit, str, str]] = {
    "perm": (
        lambda a: a.update(has_perm=False),
        ERROR,
        "has_perm is False but a undirected canonical family stores perm_idx with",
    ),
    "perm missing": (
        lambda a: a.pop("has_perm"),
        NONCONFORMING,
        "has_perm is missing; the family's policy gives True",
    ),
    "perm type": (lambda a: a.update(has_perm="yes"), ERROR, "has_perm must be true or false"),
    "offsets": (
        lambda a: a.update(offsets=[[0, 1]]),
        NONCONFORMING,
        r"offsets attribute \[\[0, 1\]\] disagrees with the array name",
    ),
    "width": (lambda a: a.update(link_width=3), NONCONFORMING, "link_width is 3 but its family says 2"),
}


@pytest.mark.parametrize("case", sorted(LAYOUT_CASES))
def test_each_link_layout_problem_is_one_finding(case):
    edit, severity, message = LAYOUT_CASES[case]
    family = LinksFamily(0, 2)
    attrs = copy.deepcopy(_cell_doc(LINK)["attributes"])
    layout, found = parse_link_layout(LINK, attrs, "+1.0", 2, 0, 2, family)
    assert (
        found == [] and layout is not None and layout.has_perm and not layout.intra and layout.row_width == 3
    )
    edit(attrs)
    layout, found = parse_link_layout(LINK, attrs, "+1.0", 2, 0, 2, family)
    _one(found, LINK, "metadata.links", severity, message)


def test_a_bad_segment_name_and_a_layout_without_its_family():
    _, found = parse_link_layout("0/links/0/sideways", {}, "sideways", 2, 0, 2, LinksFamily(0, 2))
    _one(found, "0/links/0/sideways", "metadata.links", ERROR, "^'0/links/0/sideways': ")
    layout, found = parse_link_layout(LINK, {}, "+1.0", 2, 0, 2)  # no family: has_perm as declared
    assert found == [] and layout is not None and not layout.has_perm


def test_link_attribute_family_problems():
    path = "0/link_attributes/w/0"
    assert parse_link_attribute_family(path, {"zv_array": "link_attribute_family", "name": "w"}, "w") == []
    found = parse_link_attribute_family(path, {"zv_array": "link_attribute_family", "name": "v"}, "w")
    _one(found, path, "metadata.link-attributes", NONCONFORMING, "name is 'v' but the folder is 'w'")
    found = parse_link_attribute_family(path, {"name": "w"}, "w")
    _one(found, path, "metadata.zv-array", NONCONFORMING, "expected 'link_attribute_family'")


OI = "0/object_index"


def _index() -> dict[str, Any]:
    return {
        "zv_array": "object_index",
        "layout": "vlen_manifests_v1",
        "num_objects": 10,
        "num_present": 7,
        "sid_ndim": 2,
    }


INDEX_CASES: dict[str, tuple[Edit, str, str]] = {
    "layout": (
        lambda a: a.update(layout="dense_manifests_v9"),
        ERROR,
        "has layout 'dense_manifests_v9'; this library reads",
    ),
    "count": (lambda a: a.update(num_objects="10"), ERROR, "num_objects must be a non-negative integer"),
    "missing": (lambda a: a.pop("num_present"), NONCONFORMING, "num_present is missing"),
    "present": (lambda a: a.update(num_present=11), NONCONFORMING, "num_present 11 exceeds num_objects 10"),
    "sid_ndim": (lambda a: a.update(sid_ndim=3), NONCONFORMING, "sid_ndim is 3 but the store has 2"),
}


@pytest.mark.parametrize("case", sorted(INDEX_CASES))
def test_each_object_index_problem_is_one_finding(case):
    edit, severity, message = INDEX_CASES[case]
    attrs = _index()
    assert parse_object_index(OI, attrs, 2)[1] == []
    edit(attrs)
    index, found = parse_object_index(OI, attrs, 2)
    _one(found, OI, "metadata.object-index", severity, message)
    assert (index is None) == (case == "layout")


def test_the_object_index_against_its_arrays():
    manifests, _ = parse_table(f"{OI}/manifests", _table_doc(f"{OI}/manifests"))
    ids, _ = parse_table(f"{OI}/object_ids", _table_doc(f"{OI}/object_ids"))
    v1, v2 = ObjectIndexDoc("vlen_manifests_v1", 10), ObjectIndexDoc("vlen_manifests_v2", 10)
    assert check_object_index(OI, v1, manifests, None) == [] == check_object_index(OI, v2, manifests, ids)
    _one(
        check_object_index(OI, v1, None, None),
        OI,
        "metadata.object-index",
        ERROR,
        "has no usable manifests array",
    )
    _one(
        check_object_index(OI, v2, manifests, None),
        OI,
        "metadata.object-index",
        ERROR,
        "v2 but no usable object_ids",
    )
    fewer = ObjectIndexDoc("vlen_manifests_v1", 9)
    _one(
        check_object_index(OI, fewer, manifests, None),
        f"{OI}/manifests",
        "metadata.object-index",
        ERROR,
        "has 10 rows but 0/object_index says num_objects is 9",
    )
    _one(
        check_object_index(OI, ObjectIndexDoc("vlen_manifests_v2", 9), manifests, ids),
        f"{OI}/manifests",
        "metadata.object-index",
        NONCONFORMING,
        "num_objects is 9",
    )
    short_ids = dense_array_doc((8,), (4,), np.dtype("int64"), 0, [], {})
    _one(
        check_object_index(OI, v2, manifests, parse_table(f"{OI}/object_ids", short_ids)[0]),
        f"{OI}/object_ids",
        "metadata.object-index",
        ERROR,
        "has 8 rows but the manifests have 10",
    )


# ------------------------------------------------------------------ the reader's policy


def test_raise_for_names_the_first_blocking_finding_and_carries_them_all():
    found = [
        Finding("a", "metadata.root", "just a warning", WARNING),
        Finding("b", "metadata.array", "first", ERROR),
        Finding("c", "metadata.codecs", "cannot decode", UNSUPPORTED),
        Finding("d", "metadata.zv-array", "wrong tag", NONCONFORMING),
    ]
    raise_for(found[::3])  # a warning and a nonconforming finding do not stop a reader
    with pytest.raises(FormatError, match=r"^first \(and 1 more problem: cannot decode\)$") as info:
        raise_for(found)
    assert info.value.problems == (found[1], found[2])
    many = [Finding("p", "metadata.root", f"m{i}") for i in range(6)]
    with pytest.raises(FormatError, match=r"^m0 \(and 5 more problems: m1; m2; m3; \.\.\.\)$"):
        raise_for(many)
