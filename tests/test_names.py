"""Attribute, group-attribute and axis names are checked before anything is written, and
every name a writer accepts is listed and readable afterwards."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import zarr_vectors as zv
from zarr_vectors.engine.write.inputs import MAX_NAME_BYTES, check_name
from zarr_vectors.errors import InputError

N = 40
POS = np.random.default_rng(3).uniform(0, 100, (N, 3))
OIDS = np.arange(N) % 4


def _write(path: Path, kind: str, name: object) -> zv.Dataset:
    """A small store with one name of ``kind`` (and an ordinary one of every other kind)."""
    values = np.arange(N, dtype=np.int32)
    if kind == "edge attribute":
        edges = np.column_stack([np.arange(N - 1), np.arange(1, N)])
        return zv.write_graph(path, POS, edges, chunk_shape=25, edge_attributes={name: np.arange(N - 1.0)})
    if kind == "axis":
        return zv.write_points(path, POS, chunk_shape=25, axes=["x", name, "z"])
    kwargs = {
        "attribute": {"attributes": {name: values}},
        "object attribute": {"object_attributes": {name: np.arange(4.0)}},
        "group attribute": {"groups": [[0, 1], [2]], "group_attributes": {name: np.array([7, 8])}},
    }[kind]
    return zv.write_points(path, POS, chunk_shape=25, object_ids=OIDS, **kwargs)  # type: ignore[arg-type]


KINDS = ["attribute", "object attribute", "group attribute", "edge attribute"]
REFUSED = [
    ("a.json", "ending in '.json'"),
    ("zarr.json", "metadata under 'zarr.json'"),
    ("c", "chunks under 'c'"),
    ("x" * 300, "300 bytes long"),
    ("a b", "contains ' '"),
    ("caf\u00e9", "contains '\u00e9'"),
    ("bad/name", "contains '/'"),
    ("..", "starts with '.'"),
    (".hidden", "starts with '.'"),
    ("-x", "starts with '-'"),
    ("a.", "ends in '.'"),
    ("NUL", "device name on Windows"),
    ("com1.txt", "device name on Windows"),
    ("", "it is empty"),
    (5, "not a string but int"),
]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name, why", REFUSED, ids=[str(n)[:12] for n, _ in REFUSED])
def test_bad_names_are_refused_before_anything_is_written(tmp_path, kind, name, why):
    with pytest.raises(InputError) as info:
        _write(tmp_path / "s.zarr", kind, name)
    text = str(info.value)
    assert text.startswith(f"{kind} name ")
    assert repr(name)[:20] in text and why in text and "is not allowed" in text
    assert f"use 1 to {MAX_NAME_BYTES} ASCII letters, digits" in text  # what is allowed
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name, why", [("a b", "contains ' '"), ("x" * 129, "129 bytes"), ("", "empty")])
def test_bad_axis_names_are_refused(tmp_path, name, why):
    with pytest.raises(InputError, match=f"axis name .* is not allowed: .*{why}"):
        _write(tmp_path / "s.zarr", "axis", name)
    assert list(tmp_path.iterdir()) == []


def test_axis_names_are_metadata_only(tmp_path):
    """'c' is a fine axis name (a channel): axes are not paths."""
    ds = _write(tmp_path / "s.zarr", "axis", "c")
    assert zv.open(tmp_path / "s.zarr").axes == ("x", "c", "z") == ds.axes


@pytest.mark.parametrize("kind", KINDS)
def test_names_equal_but_for_case_are_refused(tmp_path, kind):
    values = np.arange(N, dtype=np.int32)
    kwargs = {
        "attribute": {"attributes": {"Radius": values, "radius": values}},
        "object attribute": {
            "object_ids": OIDS,
            "object_attributes": {"Radius": np.zeros(4), "radius": np.zeros(4)},
        },
        "group attribute": {
            "object_ids": OIDS,
            "groups": [[0]],
            "group_attributes": {"Radius": [1], "radius": [2]},
        },
    }.get(kind)
    with pytest.raises(InputError, match="'Radius' and 'radius' differ only in case"):
        if kind == "edge attribute":
            edges = np.array([[0, 1]])
            zv.write_graph(
                tmp_path / "s.zarr",
                POS,
                edges,
                chunk_shape=25,
                edge_attributes={"Radius": [1.0], "radius": [2.0]},
            )
        else:
            zv.write_points(tmp_path / "s.zarr", POS, chunk_shape=25, **kwargs)  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []


def test_the_longest_name_round_trips(tmp_path):
    name = "n" * MAX_NAME_BYTES
    ds = _write(tmp_path / "s.zarr", "object attribute", name)
    assert ds.object_attribute_names() == [name]
    np.testing.assert_array_equal(zv.open(tmp_path / "s.zarr").object_attributes(name), np.arange(4.0))


ALPHABET = st.from_regex(rf"\A[A-Za-z0-9_][A-Za-z0-9_.\-]{{0,{MAX_NAME_BYTES - 1}}}\Z")


def _accepted(name: str) -> bool:
    try:
        check_name(name, "attribute")
    except InputError:
        return False
    return True


def _round_trip(name: str) -> None:
    """Write ``name`` as a vertex, object and group attribute; each is listed and reads back."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "s.zarr"
        vertex = np.arange(N, dtype=np.int32) * 3
        zv.write_points(
            path,
            POS,
            chunk_shape=25,
            object_ids=OIDS,
            attributes={name: vertex},
            object_attributes={name: np.arange(4.0) + 0.5},
            groups=[[0, 3], [1]],
            group_attributes={name: np.array([5, 6], np.int16)},
        )
        ds = zv.open(path)
        assert ds.attribute_names() == [name] and ds.object_attribute_names() == [name]
        got = ds.read()
        np.testing.assert_array_equal(
            got.attributes[name][np.lexsort(got.positions.T[::-1])], vertex[np.lexsort(POS.T[::-1])]
        )
        np.testing.assert_array_equal(ds.object_attributes(name), np.arange(4.0) + 0.5)
        np.testing.assert_array_equal(ds.group_attributes(name), [5, 6])


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ALPHABET.filter(_accepted))
def test_every_accepted_name_is_listed_and_reads_back(name):
    _round_trip(name)


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.text(max_size=20), ALPHABET, st.sampled_from(["c", "zarr.json", "x.json", "aux", "a."])))
def test_any_text_is_refused_up_front_or_round_trips(name):
    with tempfile.TemporaryDirectory() as tmp:
        try:
            zv.write_points(Path(tmp) / "s.zarr", POS, chunk_shape=25, attributes={name: np.zeros(N)})
        except InputError as exc:
            assert "is not allowed" in str(exc) and list(Path(tmp).iterdir()) == []
            return
    _round_trip(name)


def test_geojson_properties_get_allowed_names(tmp_path):
    """Properties whose names cannot be attribute names are stored under close allowed ones, and said."""
    import json
    import warnings

    from zarr_vectors.io.geojson import PropertiesSkippedWarning, ingest_vector

    props = {"c": 1, "a.json": 2, "Name": 3, "name": 4, "CON": 5, "ok": 6}
    doc = {
        "type": "FeatureCollection",
        "features": [
            {"type": "Feature", "properties": props, "geometry": {"type": "Point", "coordinates": [0, 0]}},
            {"type": "Feature", "properties": props, "geometry": {"type": "Point", "coordinates": [1, 1]}},
        ],
    }
    (tmp_path / "p.geojson").write_text(json.dumps(doc))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ds = ingest_vector(tmp_path / "p.zarr", tmp_path / "p.geojson", chunk_shape=1)
    (w,) = [w for w in caught if issubclass(w.category, PropertiesSkippedWarning)]
    for old, new in [("c", "c_"), ("a.json", "a.json_"), ("name", "name_"), ("CON", "CON_")]:
        assert f"{old!r} stored as {new!r}" in str(w.message)
    names = ["CON_", "Name", "a.json_", "c_", "geom_type", "name_", "ok"]
    assert (
        sorted(zv.open(tmp_path / "p.zarr").object_attribute_names())
        == names
        == sorted(ds.object_attribute_names())
    )
    assert zv.open(tmp_path / "p.zarr").object_attributes("name_").tolist() == [4, 4]
