"""Point files that lie or carry 64-bit ids: header counts checked against the file before
anything is allocated, bounded rows, exact integer ids, and every malformed file an
``InputError`` naming the file (issue 28, items 3 and 4), also through the CLI."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import zarr_vectors as zv
from zarr_vectors.errors import InputError
from zarr_vectors.io.pointfiles import ingest_points, open_point_file
from zarr_vectors.io.textrows import MAX_COLUMNS

laspy = pytest.importorskip("laspy")

#: Offset of LAS 1.4's 64-bit "number of point records" in the public header block.
LAS14_COUNT = 247
#: Ids that float64 cannot hold: 2**53 + 1, two segment ids near 7.2e17 one apart, the top of uint64.
IDS = [9007199254740993, 720575940379279361, 720575940379279362, 2**64 - 1]


def _mem(tmp_path: Path, name: str) -> str:
    return f"memory://{tmp_path.name}/{name}.zarr"


def _read_all(path: Path) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    blocks = list(open_point_file(path).chunks(1 << 16))
    pos = np.vstack([b[0] for b in blocks])
    return pos, {k: np.concatenate([b[1][k] for b in blocks]) for k in blocks[0][1]}


def lying_las(path: Path, n: int = 2000, count: int = 2**62) -> Path:
    """A valid LAS 1.4 (point format 6) file of ``n`` points whose header then claims ``count``."""
    header = laspy.LasHeader(point_format=6, version="1.4")
    header.scales = np.array([0.01, 0.01, 0.01])
    rec = laspy.ScaleAwarePointRecord.zeros(n, header=header)
    rec.x, rec.y, rec.z = np.arange(n) * 0.5, np.arange(n) * 0.25, np.zeros(n)
    with laspy.open(path, mode="w", header=header) as w:
        w.write_points(rec)
    data = bytearray(path.read_bytes())
    struct.pack_into("<Q", data, LAS14_COUNT, count)
    path.write_bytes(bytes(data))
    return path


def test_las_header_claiming_2_62_points_is_refused_before_reading(tmp_path):
    path = lying_las(tmp_path / "big.las", n=2300)  # about 70 KB
    assert 60_000 < path.stat().st_size < 80_000
    with pytest.raises(
        InputError,
        match=r"big\.las: the file ends inside its point records \(the header says 4,611,686,018,427,387,904 points of 30 bytes",
    ):
        open_point_file(path)
    with pytest.raises(InputError, match=r"big\.las: the file ends inside"):
        ingest_points(tmp_path / "s.zarr", [path], chunk_shape=100, progress=False)
    assert not (tmp_path / "s.zarr").exists()


def test_laz_header_claiming_2_62_points_gives_input_error_not_lazrs(tmp_path):
    path = lying_las(tmp_path / "big.laz", n=2300)
    with pytest.raises(
        InputError,
        match=r"big\.laz: the header says 4,611,686,018,427,387,904 points, but the LAZ chunks hold at most 50,000",
    ):
        ingest_points(_mem(tmp_path, "s"), [path], chunk_shape=100, progress=False)


@pytest.mark.parametrize("count", [5000, 50_000])
def test_laz_claiming_more_points_within_its_chunk_gives_input_error_not_lazrs(tmp_path, count):
    path = lying_las(tmp_path / "more.laz", n=2300, count=count)
    with pytest.raises(
        InputError,
        match=rf"more\.laz: the points after the first 0 cannot be read \(the header says {count:,}; .*failed to fill",
    ):
        _read_all(path)


def test_laz_whose_first_chunk_is_zeroed_gives_input_error(tmp_path):
    path = lying_las(tmp_path / "cut.laz", n=2300, count=2300)
    start = open_point_file(path).source.data_offset + 8  # past the chunk table's offset
    data = bytearray(path.read_bytes())
    data[start : start + 64] = bytes(64)
    path.write_bytes(bytes(data))
    with pytest.raises(InputError, match=r"cut\.laz: the points after the first 0 cannot be read"):
        _read_all(path)


def test_laz_header_claiming_more_points_than_its_chunks_hold_is_refused(tmp_path):
    path = lying_las(tmp_path / "more.laz", n=500, count=50_001)  # laspy's chunks hold 50,000
    with pytest.raises(
        InputError, match=r"more\.laz: the header says 50,001 points, but the LAZ chunks hold at most 50,000"
    ):
        open_point_file(path)


def test_las_point_data_offset_past_the_end_is_refused(tmp_path):
    path = lying_las(tmp_path / "off.las", n=10, count=10)
    data = bytearray(path.read_bytes())
    struct.pack_into("<I", data, 96, len(data) + 1000)  # offset to point data
    path.write_bytes(bytes(data))
    with pytest.raises(InputError, match=r"off\.las: "):
        open_point_file(path)


def test_csv_line_of_two_million_values_is_refused(tmp_path):
    path = tmp_path / "wide.csv"
    path.write_text(",".join(["1"] * 2_000_001) + "\n")
    with pytest.raises(InputError, match=r"wide\.csv: line 1 is longer than 1,048,576 characters"):
        ingest_points(_mem(tmp_path, "s"), [path], chunk_shape=1, progress=False)
    path.write_text("x,y,z\n1,2,3\n" + ",".join(["1"] * 2_000_001) + "\n")
    with pytest.raises(InputError, match=r"wide\.csv: line 3 is longer"):
        ingest_points(_mem(tmp_path, "t"), [path], chunk_shape=1, progress=False)


def test_csv_row_width_is_bounded(tmp_path):
    path = tmp_path / "w.csv"
    path.write_text(",".join(["1"] * (MAX_COLUMNS + 1)) + "\n")
    with pytest.raises(InputError, match=rf"w\.csv: line 1 has {MAX_COLUMNS + 1:,} columns; at most"):
        open_point_file(path)
    path.write_text("x,y,z\n1,2,3\n" + ",".join(["1"] * 1000) + "\n")
    with pytest.raises(InputError, match=r"w\.csv: line 3 has 1000 values, expected 3 \(x, y, z\)"):
        _read_all(path)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        (b"x,x,z\n1,2,3\n", r"column names must be distinct and not empty; \['x'\]"),
        (b"x,,z\n1,2,3\n", r"column names must be distinct and not empty; \[''\]"),
        (b"x,y,z\n1,2\n", r"line 2 has 2 values, expected 3"),
        (b"x,y,z\n1,2,3\n4,five,6\n", r"line 3, column 'y': 'five' is not a number"),
        (b"x,y,z\n1,2,\xff\n", r"line 2 is not UTF-8 text"),
        (b"x,y,id\n1,2,3\n4,5,7\n", None),
    ],
)
def test_malformed_csv_is_an_input_error_naming_file_and_line(tmp_path, text, match):
    path = tmp_path / "m.csv"
    path.write_bytes(text)
    if match is None:
        assert _read_all(path)[1]["id"].tolist() == [3, 7]
        return
    with pytest.raises(InputError, match=r"m\.csv: " + match):
        _read_all(path)


def test_csv_ids_are_exact_int64_and_uint64(tmp_path):
    path = tmp_path / "ids.csv"
    rows = "".join(f"{i},{i},{v}\n" for i, v in enumerate(IDS[:3]))
    path.write_text("x,y,segment\n" + rows)
    _, attrs = _read_all(path)
    assert attrs["segment"].dtype == np.int64 and attrs["segment"].tolist() == IDS[:3]
    ds = ingest_points(_mem(tmp_path, "a"), [path], chunk_shape=1, object_column="segment", progress=False)
    assert sorted(ds.object_ids().tolist()) == IDS[:3]  # two ids near 7.2e17 stay two objects
    path.write_text("x,y,segment\n" + rows + f"3,3,{IDS[3]}\n")
    _, attrs = _read_all(path)
    assert attrs["segment"].dtype == np.uint64 and attrs["segment"].tolist() == IDS
    ds = ingest_points(_mem(tmp_path, "b"), [path], chunk_shape=1, object_column="segment", progress=False)
    assert sorted(ds.object_ids().tolist()) == IDS


def test_csv_id_past_uint64_is_refused_with_line_and_column(tmp_path):
    path = tmp_path / "ids.csv"
    path.write_text(f"x,y,segment\n0,0,1\n1,1,{2**64}\n")
    with pytest.raises(
        InputError, match=rf"ids\.csv: line 3, column 'segment': the integer '{2**64}' does not fit uint64"
    ):
        ingest_points(_mem(tmp_path, "a"), [path], chunk_shape=1, object_column="segment", progress=False)
    path.write_text(f"x,y,segment\n0,0,-1\n1,1,{2**63}\n")
    with pytest.raises(
        InputError, match=r"line 3, column 'segment'.*does not fit int64, and the column has negative"
    ):
        _read_all(path)


def test_a_later_id_that_does_not_fit_the_column_is_refused(tmp_path):
    from zarr_vectors.io.plytext import TYPE_ROWS

    path = tmp_path / "ids.txt"
    # no header: columns x, y, z, c3; c3 holds ids below int64's top in the first TYPE_ROWS rows
    path.write_text("".join(f"{i} {i} 0 {i}\n" for i in range(TYPE_ROWS)) + f"0 0 0 {2**63}\n")
    with pytest.raises(
        InputError,
        match=rf"ids\.txt: line {TYPE_ROWS + 1}, column 'c3': '{2**63}' does not fit int64.*dtypes=",
    ):
        _read_all(path)
    src = open_point_file(path, dtypes={"c3": "uint64"})
    assert np.concatenate([b[1]["c3"] for b in src.chunks(1 << 20)])[-1] == 2**63


def _ply(path: Path, header: list[str], body: bytes) -> Path:
    path.write_bytes(("\n".join(["ply", *header, "end_header"]) + "\n").encode() + body)
    return path


@pytest.mark.parametrize(
    ("header", "body", "match"),
    [
        (
            ["format ascii 1.0", "element vertex many", "property float x", "property float y"],
            b"",
            "count 'many' is not a count",
        ),
        (["format ascii 1.0", "element vertex", "property float x"], b"", "has too few words"),
        (["format ascii 1.0", "element vertex 1", "property float"], b"", "has too few words"),
        (
            ["format", "element vertex 1", "property float x", "property float y"],
            b"1 2\n",
            "has too few words",
        ),
        (
            ["format ascii 1.0", "element vertex 1", "property float x", "property float x"],
            b"",
            "'x' appears twice",
        ),
        (
            ["format ascii 1.0", "element vertex 1", "property int128 x"],
            b"",
            "unknown PLY property type 'int128'",
        ),
        (
            ["format ascii 1.0", f"element vertex {2**62}", "property float x", "property float y"],
            b"1 2\n",
            "shorter than its 4,611,686,018,427,387,904 vertices",
        ),
        (
            [
                "format binary_little_endian 1.0",
                f"element vertex {2**40}",
                "property float x",
                "property float y",
            ],
            b"\0" * 64,
            "shorter than its",
        ),
        (
            ["format ascii 1.0", "element vertex 2", "property float x", "property float y"],
            b"1 2\n3 four\n",
            "line 8, column 'y': 'four' is not a number",
        ),
        (
            ["format ascii 1.0", "element vertex 2", "property float x", "property uchar y"],
            b"1 2\n3 300\n",
            "line 8, column 'y': '300' does not fit uint8",
        ),
        (
            ["format ascii 1.0", "element vertex 3", "property float x", "property float y"],
            b"1 2\n3 4 5\n6 7\n",
            "line 8 has 3 values, expected 2",
        ),
    ],
)
def test_malformed_ply_is_an_input_error_naming_the_file(tmp_path, header, body, match):
    path = _ply(tmp_path / "m.ply", header, body)
    with pytest.raises(InputError, match=r"m\.ply: .*" + match):
        _read_all(path)


def test_ply_header_without_end_is_refused(tmp_path):
    path = tmp_path / "h.ply"
    path.write_bytes(b"ply\nformat ascii 1.0\n" + b"comment " + b"x" * (2 << 20))
    with pytest.raises(InputError, match=r"h\.ply: the PLY header (is longer than|has no end_header)"):
        open_point_file(path)


def test_ply_integer_properties_are_exact(tmp_path):
    head = [
        "format ascii 1.0",
        "element vertex 4",
        "property float x",
        "property float y",
        "property uint64 id",
    ]
    body = "".join(f"{i} {i} {v}\n" for i, v in enumerate(IDS)).encode()
    _, attrs = _read_all(_ply(tmp_path / "a.ply", head, body))
    assert attrs["id"].dtype == np.uint64 and attrs["id"].tolist() == IDS
    head[0] = "format binary_big_endian 1.0"
    table = np.zeros(4, [("x", ">f4"), ("y", ">f4"), ("id", ">u8")])
    table["id"] = IDS
    _, attrs = _read_all(_ply(tmp_path / "b.ply", head, table.tobytes()))
    assert attrs["id"].tolist() == IDS


def test_las_extra_bytes_ids_are_exact(tmp_path):
    header = laspy.LasHeader(point_format=6, version="1.4")
    header.add_extra_dim(laspy.ExtraBytesParams(name="segment", type=np.uint64))
    rec = laspy.ScaleAwarePointRecord.zeros(4, header=header)
    rec.x = rec.y = rec.z = np.arange(4.0)
    rec["segment"] = np.array(IDS, np.uint64)
    with laspy.open(tmp_path / "a.las", mode="w", header=header) as w:
        w.write_points(rec)
    ds = ingest_points(
        _mem(tmp_path, "a"), [tmp_path / "a.las"], chunk_shape=1, object_column="segment", progress=False
    )
    assert sorted(ds.object_ids().tolist()) == IDS


def test_lone_surrogate_in_a_string_attribute_is_an_input_error(tmp_path):
    names = np.array(["a", "b\udc80"])
    with pytest.raises(InputError, match=r"object attribute 'name': row 1 holds '\\udc80' at character 1"):
        zv.write_points(
            _mem(tmp_path, "a"),
            np.zeros((2, 2)),
            chunk_shape=1,
            object_ids=[0, 1],
            object_attributes={"name": names},
        )
    store = _mem(tmp_path, "b")
    ds = zv.write_points(
        store,
        np.zeros((2, 2)),
        chunk_shape=1,
        object_ids=[0, 1],
        object_attributes={"name": np.array(["a", "b"])},
    )
    with pytest.raises(InputError, match=r"object attribute 'name': row 0 holds '\\ud800'"):
        zv.open(store, "r+").append(
            np.zeros((1, 2)), object_ids=[2], object_attributes={"name": {2: "c\ud800"}}
        )
    assert zv.open(store).vertex_count() == ds.vertex_count() == 2


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "zarr_vectors", "ingest", "points", *args, "--no-progress"],
        cwd=cwd, capture_output=True, text=True, timeout=300,
        env=dict(os.environ, PYTHONPATH=str(Path(zv.__file__).parents[1])),
    )  # fmt: skip


@pytest.mark.slow
def test_cli_answers_every_bad_point_file_with_one_line_and_status_2(tmp_path):
    lying_las(tmp_path / "big.las", n=2300)
    lying_las(tmp_path / "big.laz", n=2300)
    (tmp_path / "wide.csv").write_text(",".join(["1"] * 2_000_001) + "\n")
    (tmp_path / "ids.csv").write_text(f"x,y,id\n0,0,1\n1,1,{2**64}\n")
    (tmp_path / "dup.csv").write_text("x,x\n1,2\n")
    (tmp_path / "bytes.csv").write_bytes(b"x,y\n1,\xfe\n")
    _ply(tmp_path / "bad.ply", ["format ascii 1.0", "element vertex lots", "property float x"], b"")
    _ply(
        tmp_path / "short.ply",
        ["format ascii 1.0", "element vertex 2", "property float x", "property float y"],
        b"1 2\n",
    )
    for name in ("big.las", "big.laz", "wide.csv", "ids.csv", "dup.csv", "bytes.csv", "bad.ply", "short.ply"):
        out = _cli(name, "-o", f"{name}.zarr", "--chunk-size", "10", "--object-column", "id", cwd=tmp_path)
        lines = out.stderr.strip().splitlines()
        assert out.returncode == 2 and len(lines) == 1, (name, out.returncode, out.stderr[-2000:])
        assert lines[0].startswith("zarr-vectors ingest: error: ") and name in lines[0], lines[0]
        assert not (tmp_path / f"{name}.zarr").exists()


@pytest.mark.parametrize(
    ("rows", "match"),
    [
        ("0,0,0\nnan,1,1\n", r"p\.csv: a position is not finite \(\[nan, 1\.0, 1\.0\]\)"),
        (
            "0,0,0\n1e300,1e301,1e302\n",
            r"p\.csv: the extent .* spans more than 2\*\*40 chunks of \[1\.0, 1\.0, 1\.0\]",
        ),
        ("", r"p\.csv: no points found"),
    ],
)
def test_extents_that_cannot_make_a_grid_name_the_file(tmp_path, rows, match):
    (tmp_path / "p.csv").write_text("x,y,z\n" + rows)
    with pytest.raises(InputError, match=match):
        ingest_points(_mem(tmp_path, "s"), [tmp_path / "p.csv"], chunk_shape=1, progress=False)


def test_swc_parent_ids_never_pass_through_floats(tmp_path):
    from zarr_vectors.io.swc import read_swc

    path = tmp_path / "a.swc"
    path.write_text(
        "9007199254740993 1 0 0 0 1 -1\n9007199254740992 3 2 0 0 1 -1\n9007199254740995 3 1 0 0 1 9007199254740993\n"
    )
    swc = read_swc(path)  # parents are row indices: the third sample hangs from the first
    assert swc.ids.tolist() == [9007199254740993, 9007199254740992, 9007199254740995]
    assert swc.parents.tolist() == [-1, -1, 0]
    path.write_text(f"1 1 0 0 0 1 -1\n2 3 1 0 0 1 {2**63}\n")
    with pytest.raises(InputError, match=r"a\.swc:2: the sample id or parent id does not fit int64"):
        read_swc(path)
    path.write_text("1 1 0 0 0 1 -1\n2 3 1 0 0 1 1.5\n")
    with pytest.raises(InputError, match=r"a\.swc:2: cannot parse .*'1\.5' is not a whole number"):
        read_swc(path)


def _patched(path: Path, fmt: str, offset: int, value: int) -> Path:
    data = bytearray(path.read_bytes())
    struct.pack_into(fmt, data, offset, value)
    path.write_bytes(bytes(data))
    return path


@pytest.mark.parametrize("suffix", [".las", ".laz"])
def test_las_record_counts_and_lengths_are_checked_before_laspy_reads_them(tmp_path, suffix):
    path = lying_las(tmp_path / f"v{suffix}", n=50, count=50)
    with pytest.raises(InputError, match=r"the header's 67,108,865 variable-length records .* do not fit"):
        open_point_file(_patched(path, "<I", 100, 2**26 + 1))  # number of VLRs: laspy loops over them
    path = lying_las(tmp_path / f"e{suffix}", n=50, count=50)
    size = path.stat().st_size
    path.write_bytes(path.read_bytes() + bytes(60))  # one EVLR header at the end...
    _patched(path, "<Q", 235, size)
    _patched(path, "<I", 243, 1)
    with pytest.raises(InputError, match=r"an extended record runs past the file's end"):
        open_point_file(_patched(path, "<Q", size + 52, 2**40))  # ...claiming a TiB of data


def test_las_header_extent_with_lo_above_hi_names_the_file(tmp_path):
    path = lying_las(tmp_path / "m.las", n=50, count=50)
    _patched(path, "<d", 179, -1.0)  # max x below min x
    with pytest.raises(InputError, match=r"m\.las: the extent .* is not finite with lo <= hi"):
        ingest_points(_mem(tmp_path, "s"), [path], chunk_shape=1, progress=False)


def test_csv_header_with_y_and_z_but_no_x_takes_the_first_three_columns(tmp_path):
    path = tmp_path / "h.csv"
    path.write_text("a,y,z,w\n1,2,3,4\n")
    pos, attrs = _read_all(path)
    assert pos.tolist() == [[1.0, 2.0, 3.0]] and attrs["w"].tolist() == [4]
