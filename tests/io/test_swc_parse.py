"""``read_swc``'s whole-file numpy parse equals a plain line-by-line parse on random valid
files (comments, blank lines, tabs, CRLF, extra fields, ``2.0`` integers, large ids), and
malformed files raise the same errors, naming file and line."""

from __future__ import annotations

from pathlib import Path

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from zarr_vectors.errors import InputError
from zarr_vectors.io import swc
from zarr_vectors.io.swc import read_swc


def _reference(text: str) -> tuple[list[int], list[int], list[list[float]], list[float], list[int]]:
    """``(ids, types, positions, radii, parent rows)``: one line at a time, plain Python."""
    ids, types, pos, radius, parent_ids = [], [], [], [], []
    for line in text.splitlines():
        fields = line.split("#")[0].split()
        if not fields:
            continue
        ids.append(int(fields[0]))
        types.append(int(float(fields[1])))
        pos.append([float(v) for v in fields[2:5]])
        radius.append(float(fields[5]))
        parent_ids.append(int(float(fields[6])) if "." in fields[6] else int(fields[6]))
    row = {sid: k for k, sid in enumerate(ids)}
    return ids, types, pos, radius, [row[p] if p >= 0 else -1 for p in parent_ids]


_FLOAT = st.one_of(
    st.floats(-1e6, 1e6, allow_nan=False, width=64).map(repr),
    st.integers(-1000, 1000).map(str),
    st.floats(1e-3, 1e3).map(lambda v: f"{v:.3e}"),
)


@st.composite
def swc_texts(draw: st.DrawFn) -> str:
    n = draw(st.integers(1, 30))
    ids = draw(
        st.lists(st.integers(-(2**63), 2**63 - 1), min_size=n, max_size=n, unique=True).filter(
            lambda v: -1 not in v
        )
    )
    sep = draw(st.sampled_from([" ", "\t", "  ", " \t "]))
    end = draw(st.sampled_from(["\n", "\r\n"]))
    lines = []
    for k, sid in enumerate(ids):
        parent = (
            -1 if k == 0 or draw(st.booleans()) and draw(st.booleans()) else ids[draw(st.integers(0, k - 1))]
        )
        kind = draw(st.integers(-5, 300))
        kind_text = f"{kind}.0" if draw(st.integers(0, 20)) == 0 else str(kind)  # rare: per-line path
        fields = [str(sid), kind_text, draw(_FLOAT), draw(_FLOAT), draw(_FLOAT), draw(_FLOAT), str(parent)]
        fields += draw(st.lists(st.sampled_from(["x", "3", "extra"]), max_size=2))
        line = sep.join(fields)
        if draw(st.integers(0, 4)) == 0:
            line = draw(st.sampled_from([" ", "\t", ""])) + line + " # note 1 2 3"
        lines.append(line)
        if draw(st.integers(0, 6)) == 0:
            lines.append(draw(st.sampled_from(["", "# comment", "   ", "\t# x y z"])))
    tail = end if draw(st.booleans()) else ""
    return end.join(lines) + tail


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=swc_texts())
def test_equals_reference_parse(text: str, tmp_path: Path) -> None:
    path = tmp_path / "cell.swc"
    path.write_bytes(text.encode())
    got = read_swc(path)
    ids, types, pos, radius, parents = _reference(text)
    assert got.ids.dtype == np.int64 and got.ids.tolist() == ids
    assert got.type.dtype == np.int16 and got.type.tolist() == types
    assert got.positions.dtype == np.float64 and got.positions.tolist() == pos
    assert got.radius.dtype == np.float32 and np.array_equal(got.radius, np.array(radius, np.float32))
    assert got.parents.tolist() == parents


def test_plain_files_take_the_numpy_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "a.swc"
    path.write_text("# header\n\n1 1 0 0 0 2 -1 # soma\r\n7\t3 1.5 0 0 0.5 1 extra\n9 3 2 1 0 0.5 7")

    def no(*_: object) -> None:
        raise AssertionError("per-line parse used")

    monkeypatch.setattr(swc, "_parse_lines", no)
    got = read_swc(path)
    assert got.ids.tolist() == [1, 7, 9] and got.parents.tolist() == [-1, 0, 1]
    assert got.positions.tolist() == [[0, 0, 0], [1.5, 0, 0], [2, 1, 0]]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("# c\n1 1 0 0 0 1 -1\n\n2 1 0 0 0 1\n", r"a\.swc:4: an SWC sample needs 7 fields .* got 6"),
        ("1 1 x 0 0 1 -1\n", r"a\.swc:1: cannot parse '1 1 x 0 0 1 -1'"),
        ("1 1.5 0 0 0 1 -1\n", r"a\.swc:1: cannot parse .*'1\.5' is not a whole number"),
        ("99999999999999999999 1 0 0 0 1 -1\n", r"a\.swc:1: the sample id or parent id does not fit int64"),
        ("# c\n\n1 1 0 0 0 1 -1\n2 1 0 nan 0 1 1\n", r"a\.swc:4: sample 2 has a NaN or infinite"),
        ("1 1 0 0 0 1 -1\n# c\n2 1 0 0 0 1 5\n", r"a\.swc:3: sample 2 names parent 5, which is not in"),
        ("# c\n1 1 0 0 0 1 -1\n2 1 0 0 0 1 2\n", r"a\.swc:3: sample 2 is its own parent"),
        ("1 1 0 0 0 1 -1\n1 1 0 0 0 1 -1\n", r"a\.swc: sample id 1 appears twice"),
        ("1 1 0 0 0 1 -1\n2 70000 0 0 0 1 1\n", r"a\.swc:2: the sample type 70000 does not fit int16"),
        ("1 1.0 0 0 0 1 -1\n2 70000.0 0 0 0 1 1\n", r"a\.swc:2: the sample type 70000 does not fit int16"),
        ("# only comments\n\n", r"a\.swc: no SWC samples found"),
        ("", r"a\.swc: no SWC samples found"),
    ],
)
def test_errors_name_file_and_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "a.swc"
    path.write_text(text)
    with pytest.raises(InputError, match=message):
        read_swc(path)


def test_lone_carriage_returns_end_lines(tmp_path: Path) -> None:
    """Python's text files end a line at a lone CR: the per-line parse takes such files."""
    path = tmp_path / "mac.swc"
    path.write_bytes(b"1 1 0 0 0 1 -1\r2 1 1 0 0 1 1\r")
    assert read_swc(path).parents.tolist() == [-1, 0]
