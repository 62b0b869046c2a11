"""Reader and validator read the format through one parser: a broken document makes the reader
raise a FormatError whose problem (path, rule, message) is one the validator reports."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

import zarr_vectors as zv
from zarr_vectors.errors import FormatError
from zarr_vectors.validation import validate

from .conftest import attrs, edit_json


def _node(node: str, fn: Callable[[dict], object]) -> Callable[[Path], None]:
    return lambda s: edit_json(s, node, fn)


def _attr(node: str, **change: object) -> Callable[[Path], None]:
    return _node(node, lambda d: attrs(d).update(change))


def _zv(**change: object) -> Callable[[Path], None]:
    return _node("", lambda d: attrs(d)["zarr_vectors"].update(change))


def _level(**change: object) -> Callable[[Path], None]:
    return _node("0", lambda d: attrs(d)["zarr_vectors_level"].update(change))


# case -> (store kind, mutation, the rule of the reader's first problem)
CASES: dict[str, tuple[str, Callable[[Path], None], str]] = {
    "root chunk shape": ("points", _zv(chunk_shape=[150.0, 0.0, 150.0]), "metadata.root"),
    "root convention": ("points", _zv(links_convention="zigzag"), "metadata.enum"),
    "root version": ("points", _zv(zv_version="0.8.0"), "metadata.version"),
    "multiscales": ("points", _node("", lambda d: attrs(d).pop("multiscales")), "metadata.multiscales"),
    "level count": ("points", _level(vertex_count=-1), "metadata.level"),
    "level flag": ("points", _level(fragments_tile="yes"), "metadata.level"),
    "declared family gone": (
        "points",
        lambda s: shutil.rmtree(s / "0/group_attributes"),
        "metadata.arrays-present",
    ),
    "vertices dtype": ("points", _attr("0/vertices", dtype="object"), "metadata.dtype"),
    "vertices encoding": ("points", _attr("0/vertices", encoding="lz4-points"), "metadata.encoding"),
    "fragments encoding": (
        "points",
        _attr("0/vertex_fragments", encoding="fragment_index_v9"),
        "metadata.encoding",
    ),
    "attribute row shape": ("points", _attr("0/vertex_attributes/a", row_shape=[0]), "metadata.attribute"),
    "vertices listing": (
        "points",
        _node("0/vertices", lambda d: attrs(d)["nonempty_chunks"].append("7.7.7")),
        "metadata.grid",
    ),
    "key encoding": (
        "points",
        _node("0/vertices", lambda d: d["chunk_key_encoding"]["configuration"].update(separator=".")),
        "metadata.array",
    ),
    "grid origin": ("points", _attr("0/vertices", chunk_grid_origin=[0.5, 0, 0]), "metadata.grid"),
    "object index layout": (
        "points",
        _attr("0/object_index", layout="vlen_manifests_v9"),
        "metadata.object-index",
    ),
    "num_groups": ("points", _attr("0/groups", num_groups=5), "metadata.tables"),
    "object attribute dtype": (
        "points",
        _node("0/object_attributes/w", lambda d: d.update(data_type="complex64")),
        "metadata.tables",
    ),
    "links direction": ("graph", _attr("0/links/0", directed="yes"), "metadata.links"),
    "links has_perm": ("graph", _attr("0/links/0/+1.0.0", has_perm=False), "metadata.links"),
    "links dtype": ("lines", _attr("0/links/0/+1.0.0", dtype="float32"), "metadata.dtype"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_reader_refuses_with_a_problem_the_validator_reports(case, copy_of):
    kind, mutate, rule = CASES[case]
    store = copy_of(kind)
    mutate(store)
    with pytest.raises(FormatError) as info:
        ds = zv.open(store)
        ds.read()
        ds.objects([0])
    first = info.value.problems[0]
    assert first.code == rule, first
    assert str(info.value).startswith(first.message)
    report = validate(store)
    reported = {(p.path, p.rule, p.message) for p in report.problems}
    assert (first.path, first.code, first.message) in reported, str(report)
    assert all((p.path, p.code, p.message) in reported for p in info.value.problems if p.breaks_format), str(
        report
    )


def test_a_nonconforming_document_is_read_and_reported(copy_of, pristine):
    """A wrong discriminator breaks the format without changing what a read returns: the
    reader answers as for the pristine store, the validator reports the rule."""
    store = copy_of("points")
    _attr("0/vertex_attributes/a", zv_array="vertices")(store)
    got, want = zv.open(store).read(), zv.open(pristine("points")).read()
    assert (got.positions == want.positions).all() and (got.attributes["a"] == want.attributes["a"]).all()
    report = validate(store)
    assert report.rules_broken() == {"metadata.zv-array"}, str(report)
    assert report.problems[0].path == "0/vertex_attributes/a"
