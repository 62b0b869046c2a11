"""Property tests: whatever is broken, validate() reports and never raises."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zarr_vectors.validation import validate

from .conftest import payload, set_payload

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 300) | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)
SETTINGS = settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _copy(src: Path) -> Path:
    dst = Path(tempfile.mkdtemp(prefix="zv-fuzz-")) / "s.zarr"
    shutil.copytree(src, dst)
    return dst


@pytest.mark.slow
@SETTINGS
@given(data=st.data())
def test_any_attribute_value_is_reported_not_raised(pristine, data):
    src = pristine(data.draw(st.sampled_from(["points", "points_geo", "graph", "skeleton"])))
    store = _copy(src)
    try:
        docs = sorted(store.rglob("zarr.json"))
        target = data.draw(st.sampled_from(docs))
        doc = json.loads(target.read_text())
        block = doc["attributes"]
        for name in ("zarr_vectors", "zarr_vectors_level"):
            block = block.get(name, block)
        keys = sorted(block) or ["x"]
        block[data.draw(st.sampled_from(keys))] = data.draw(JSON)
        target.write_text(json.dumps(doc))
        report = validate(store)
        assert isinstance(report.ok, bool)
        str(report), report.to_json()
    finally:
        shutil.rmtree(store.parent)


@pytest.mark.slow
@SETTINGS
@given(data=st.data())
def test_any_cell_bytes_are_reported_not_raised(pristine, data):
    src = pristine(data.draw(st.sampled_from(["points", "lines", "graph", "mesh"])))
    store = _copy(src)
    try:
        files = sorted(
            p for p in store.rglob("*") if p.is_file() and p.name != "zarr.json" and "/c/" in p.as_posix()
        )
        cell = data.draw(st.sampled_from(files))
        original = cell.read_bytes()
        new = data.draw(st.binary(max_size=64))
        if data.draw(st.booleans()) and len(original) >= 8 and original[:4] == b"\x01\x00\x00\x00":
            set_payload(cell, new)  # well-framed vlen cell, arbitrary payload
            changed = new != payload_of(original)
        else:
            cell.write_bytes(new)
            changed = new != original
        report = validate(store)
        # New values of the right length in a value array (coordinates, attributes) can be a
        # valid store: nothing but a checksum could tell. Every other change is damage.
        values = "/vertices/" in cell.as_posix() or "_attributes/" in cell.as_posix()
        same_size = len(cell.read_bytes()) == len(original)
        if changed and not (values and same_size and "/fragment_attributes/" not in cell.as_posix()):
            assert not report.ok, (cell, new)
    finally:
        shutil.rmtree(store.parent)


def payload_of(raw: bytes) -> bytes:
    return raw[8:]


def test_payload_helper_matches(pristine):
    cell = sorted((pristine("points") / "0/vertices/c").rglob("*"))[-1]
    assert payload(cell) == payload_of(cell.read_bytes())
