"""Point files in and out (LAS/LAZ, PLY, CSV/XYZ) and piecewise exports, compared exactly."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

import zarr_vectors as zv
from zarr_vectors.errors import InputError
from zarr_vectors.io.export import _csv_rows_numpy, csv_rows, export_result
from zarr_vectors.io.plytext import TYPE_ROWS
from zarr_vectors.io.pointfiles import ingest_points
from zarr_vectors.io.stream_export import chunk_boxes, export_points, iter_pieces

laspy = pytest.importorskip("laspy")


def mem(tmp_path: Path, name: str) -> str:
    """A memory:// store unique to the test (the tests' disk is slow with many small files)."""
    return f"memory://{tmp_path.name}/{name}.zarr"


def make_las(path: Path, n: int, seed: int = 0, *, fmt: int = 3, crs: str | None = None) -> None:
    """A LAS/LAZ file of ``n`` random points with every standard dimension set and one
    extra-bytes dimension (``range``, float32) plus a 3-element one (``normal``)."""
    rng = np.random.default_rng(seed)
    header = laspy.LasHeader(point_format=fmt, version="1.4" if fmt >= 6 else "1.2")
    header.scales = np.array([0.01, 0.01, 0.001])
    header.offsets = np.array([400000.0, 5000000.0, -10.0])
    header.add_extra_dim(laspy.ExtraBytesParams(name="range", type=np.float32))
    header.add_extra_dim(laspy.ExtraBytesParams(name="normal", type="3i2"))
    if crs is not None:
        import pyproj

        header.add_crs(pyproj.CRS(crs))
    rec = laspy.ScaleAwarePointRecord.zeros(n, header=header)
    rec.x = rng.uniform(400000, 400300, n)
    rec.y = rng.uniform(5000000, 5000200, n)
    rec.z = rng.uniform(-5, 40, n)
    for name in rec.point_format.dimension_names:
        if name in ("X", "Y", "Z", "range", "normal"):
            continue
        kind = np.asarray(rec[name]).dtype
        if kind.kind == "f":
            rec[name] = rng.uniform(0, 1e5, n)
        else:
            bits = next(d.num_bits for d in rec.point_format.dimensions if d.name == name)
            top = min(2**bits, np.iinfo(kind).max + 1)
            rec[name] = rng.integers(np.iinfo(kind).min if kind.kind == "i" else 0, top, n).astype(kind)
    rec["range"] = rng.uniform(0, 100, n).astype(np.float32)
    rec["normal"] = rng.integers(-1000, 1000, (n, 3)).astype(np.int16)
    with laspy.open(path, mode="w", header=header) as w:
        w.write_points(rec)


def las_table(path: Path) -> tuple[list[str], np.ndarray]:
    """Every dimension's raw values as float64 columns (X, Y, Z as the stored integers), rows sorted."""
    las = laspy.read(path)
    names = list(las.point_format.dimension_names)
    cols = []
    for name in names:
        values = np.asarray(las[name] if name not in ("X", "Y", "Z") else las.points.array[name])
        if name in [e.name for e in las.point_format.extra_dimensions]:
            values = las.points.array[name]
        cols.append(np.asarray(values, np.float64).reshape(len(las.points), -1))
    table = np.hstack(cols)
    return names, table[np.lexsort(table.T[::-1])]


@pytest.mark.parametrize("suffix", [".las", ".laz"])
def test_las_round_trip_keeps_every_dimension_exactly(tmp_path, suffix):
    src = tmp_path / f"in{suffix}"
    make_las(src, 3000)
    ds = ingest_points(mem(tmp_path, "s"), [src], chunk_shape=50, progress=False)
    las = laspy.read(src)
    assert ds.vertex_count() == 3000
    assert set(ds.attribute_names()) == set(las.point_format.dimension_names) - {"X", "Y", "Z"}
    assert ds.level(0).vertex_attributes["classification"].dtype == np.uint8
    # positions are float64 X * scale + offset, the value laspy gives
    res = ds.read()
    assert res.positions.dtype == np.float64
    want = np.column_stack([las.x, las.y, las.z])
    assert np.array_equal(res.positions[np.lexsort(res.positions.T[::-1])], want[np.lexsort(want.T[::-1])])
    back = tmp_path / f"back{suffix}"
    assert export_points(ds, back, progress=False) == 3000
    header = laspy.read(back).header
    assert header.point_format.id == 3 and np.array_equal(header.scales, las.header.scales)
    assert np.array_equal(header.offsets, las.header.offsets)
    names_in, table_in = las_table(src)
    names_out, table_out = las_table(back)
    assert names_in == names_out
    assert np.array_equal(table_in, table_out)


def test_las_crs_goes_to_the_store_and_back(tmp_path):
    pytest.importorskip("pyproj")
    src = tmp_path / "utm.las"
    make_las(src, 500, fmt=6, crs="EPSG:32633")
    ds = ingest_points(mem(tmp_path, "s"), [src], chunk_shape=100, progress=False)
    assert ds.crs.code == "EPSG:32633"
    export_points(ds, tmp_path / "back.las", progress=False)
    assert laspy.read(tmp_path / "back.las").header.parse_crs().to_epsg() == 32633


def test_several_files_become_objects_or_groups(tmp_path):
    make_las(tmp_path / "a.las", 400, seed=1)
    make_las(tmp_path / "b.las", 600, seed=2)
    files = [tmp_path / "a.las", tmp_path / "b.las"]
    ds = ingest_points(mem(tmp_path, "o"), files, chunk_shape=100, file_ids="object", progress=False)
    assert ds.object_ids().tolist() == [0, 1]
    assert len(ds.objects([1])) == 600
    assert ds.root.extra["source_files"] == ["a.las", "b.las"]
    ds = ingest_points(
        mem(tmp_path, "g"),
        files,
        chunk_shape=100,
        file_ids="group",
        object_column="point_source_id",
        progress=False,
    )
    assert ds.group_names() == ["a.las", "b.las"]
    a_ids = np.unique(laspy.read(files[0]).point_source_id)
    assert np.array_equal(np.sort(ds.groups()[0]), a_ids)
    assert "point_source_id" not in ds.attribute_names()


def test_file_id_options_are_checked_before_reading(tmp_path):
    target = tmp_path / "x.zarr"
    with pytest.raises(InputError, match="file_ids must be one of"):
        ingest_points(target, [tmp_path / "none.las"], chunk_shape=1, file_ids="file")
    with pytest.raises(InputError, match="give object_column="):
        ingest_points(target, [tmp_path / "none.las"], chunk_shape=1, file_ids="group")
    assert not target.exists()


def _ply(path: Path, table: np.ndarray, fmt: str) -> None:
    types = {"f4": "float", "f8": "double", "u1": "uchar", "i2": "short", "u2": "ushort"}
    head = ["ply", f"format {fmt} 1.0", f"element vertex {len(table)}"]
    head += [f"property {types[table.dtype[n].str[1:]]} {n}" for n in table.dtype.names]
    head += ["element face 0", "property list uchar int vertex_indices", "end_header"]
    with open(path, "wb") as fh:
        fh.write(("\n".join(head) + "\n").encode())
        if fmt == "ascii":
            np.savetxt(fh, np.column_stack([table[n] for n in table.dtype.names]), fmt="%.9g")
        else:
            order = ">" if fmt.endswith("big_endian") else "<"
            fh.write(table.astype(table.dtype.newbyteorder(order)).tobytes())


@pytest.mark.parametrize("fmt", ["binary_little_endian", "binary_big_endian", "ascii"])
def test_ply_point_cloud_in(tmp_path, fmt):
    rng = np.random.default_rng(3)
    table = np.zeros(2000, [("x", "f4"), ("y", "f4"), ("z", "f4"), ("red", "u1"), ("t", "i2")])
    for ax in "xyz":
        table[ax] = rng.uniform(-50, 50, 2000)
    table["red"], table["t"] = rng.integers(0, 256, 2000), rng.integers(-300, 300, 2000)
    _ply(tmp_path / "c.ply", table, fmt)
    ds = ingest_points(
        mem(tmp_path, "s"), [tmp_path / "c.ply"], chunk_shape=25, chunk_rows=700, progress=False
    )
    res = ds.read()
    assert res.positions.dtype == np.float32 and res.attributes["t"].dtype == np.int16
    order = np.lexsort(res.positions.T[::-1])
    want = np.column_stack([table["x"], table["y"], table["z"]])
    worder = np.lexsort(want.T[::-1])
    assert np.array_equal(res.positions[order], want[worder])
    assert np.array_equal(res.attributes["red"][order], table["red"][worder])


def test_csv_and_xyz_in_with_column_mapping(tmp_path):
    (tmp_path / "a.csv").write_text("X,Y,Z,class,w\n1.5,2,3,4,0.25\n-1,0.5,7,2,1e-3\n")
    ds = ingest_points(mem(tmp_path, "a"), [tmp_path / "a.csv"], chunk_shape=4, progress=False)
    res = ds.read().sorted()
    assert ds.attribute_names() == ["class", "w"] or sorted(ds.attribute_names()) == ["class", "w"]
    assert res.attributes["class"].dtype == np.int64 and res.attributes["w"].dtype == np.float64
    (tmp_path / "b.xyz").write_text("1 2 3 9\n4 5 6 8\n")
    ds = ingest_points(
        mem(tmp_path, "b"),
        [tmp_path / "b.xyz"],
        chunk_shape=4,
        columns=["e", "n", "h", "label"],
        positions=["e", "n", "h"],
        dtypes={"label": "uint8"},
        progress=False,
    )
    res = ds.read()
    assert sorted(res.positions[:, 0].tolist()) == [1.0, 4.0]
    assert res.attributes["label"].dtype == np.uint8
    rows = TYPE_ROWS + 10  # the first TYPE_ROWS rows fix the column's type
    (tmp_path / "c.csv").write_text("x,y,k\n" + "".join(f"{i},{i},{i}\n" for i in range(rows)) + "1,1,2.5\n")
    match = (
        f"line {rows + 2}, column 'k': '2.5' is not an integer.*held integers.*dtypes=\\{{'k': 'float64'\\}}"
    )
    with pytest.raises(InputError, match=match):
        ingest_points(mem(tmp_path, "c"), [tmp_path / "c.csv"], chunk_shape=4, chunk_rows=5, progress=False)


def test_csv_floats_read_back_bit_exact_with_either_formatter():
    rng = np.random.default_rng(4)
    f8 = np.concatenate(
        [rng.standard_normal(500) * 10.0 ** rng.integers(-300, 300, 500), [0.0, -0.0, 5e-324]]
    )
    f4 = (rng.standard_normal(503) * 10.0 ** rng.integers(-30, 30, 503)).astype(np.float32)
    ints = rng.integers(-(2**63), 2**63 - 1, 503)
    flags = rng.integers(0, 2, 503).astype(bool)
    for text in (csv_rows([f8, f4, ints, flags]), _csv_rows_numpy([f8, f4, ints, flags.view(np.uint8)])):
        rows = [line.split(",") for line in text.decode().splitlines()]
        assert np.array_equal(np.array([r[0] for r in rows], np.float64), f8)
        assert np.array_equal(np.array([r[1] for r in rows], np.float32), f4)
        assert np.array_equal(np.array([int(r[2]) for r in rows]), ints)
        assert [int(r[3]) for r in rows] == flags.astype(int).tolist()


def test_pieces_hold_each_point_once_in_query_order(tmp_path):
    rng = np.random.default_rng(5)
    grid = rng.integers(0, 9, (4000, 3)).astype(np.float64) * 2.5  # many points on chunk faces
    ds = zv.write_points(
        mem(tmp_path, "p"), grid, chunk_shape=5, attributes={"i": np.arange(4000)}, bounds=([0] * 3, [20] * 3)
    )
    boxes = chunk_boxes(ds, rows=300)
    assert len(boxes) > 5 and sum(b.chunks for b in boxes) == len(ds.level(0).vertices.nonempty)
    pieces = list(iter_pieces(ds, rows=300))
    assert len(pieces) == len(boxes)
    joined = np.concatenate([p.attributes["i"] for p in pieces])
    assert np.array_equal(joined, ds.query().attributes["i"])
    box = ([2.5, 0, 5], [12.5, 17.5, 15])
    part = np.concatenate([p.attributes["i"] for p in iter_pieces(ds, box, rows=300)])
    assert np.array_equal(part, ds.query(box).attributes["i"])


@pytest.mark.slow
@pytest.mark.parametrize("suffix", [".csv", ".ply"])
def test_piecewise_export_equals_the_one_shot_file(tmp_path, suffix):
    rng = np.random.default_rng(6)
    pts = rng.uniform(0, 100, (3000, 3)).astype(np.float32)
    ds = zv.write_points(
        mem(tmp_path, "p"),
        pts,
        chunk_shape=25,
        attributes={"v": rng.standard_normal((3000, 2)), "cls": rng.integers(0, 9, 3000).astype(np.uint8)},
        object_ids=rng.integers(0, 50, 3000),
    )
    # everything: the same bytes (rows in the one-shot query's order)
    n = export_points(ds, tmp_path / f"a{suffix}", rows=300, progress=False)
    export_result(ds.query(), tmp_path / f"b{suffix}")
    a, b = (tmp_path / f"a{suffix}").read_bytes(), (tmp_path / f"b{suffix}").read_bytes()
    assert n == 3000
    if suffix == ".ply":  # the piecewise file pads its vertex count to a fixed width
        a = a.replace(f"element vertex {n}".ljust(35).encode(), f"element vertex {n}".encode(), 1)
    assert a == b
    # a box: the same rows (a box query puts wholly covered chunks first)
    box = ([10, 5, 0], [70, 90, 60])
    n = export_points(ds, tmp_path / f"c{suffix}", bbox=box, rows=300, progress=False)
    export_result(ds.query(box), tmp_path / f"d{suffix}")
    c, d = (tmp_path / f"c{suffix}").read_bytes(), (tmp_path / f"d{suffix}").read_bytes()
    assert n == len(ds.query(box)) > 0
    if suffix == ".csv":
        assert sorted(c.splitlines()) == sorted(d.splitlines())
    else:
        hc, bc = c.split(b"end_header\n", 1)
        hd, bd = d.split(b"end_header\n", 1)
        assert hc.replace(f"element vertex {n}".ljust(35).encode(), f"element vertex {n}".encode()) == hd
        size = len(bd) // n
        rows = sorted(bc[k : k + size] for k in range(0, len(bc), size))
        assert rows == sorted(bd[k : k + size] for k in range(0, len(bd), size))
    assert not list(tmp_path.glob(".*zv-part*"))


def test_export_of_nothing_writes_a_header(tmp_path):
    ds = zv.write_points(mem(tmp_path, "p"), [[0.0, 0.0], [1.0, 1.0]], chunk_shape=1)
    assert export_points(ds, tmp_path / "e.csv", bbox=([5, 5], [6, 6]), progress=False) == 0
    assert (tmp_path / "e.csv").read_text() == "x,y\n"
    assert export_points(ds, tmp_path / "e.ply", bbox=([5, 5], [6, 6]), progress=False) == 0
    head = (tmp_path / "e.ply").read_bytes()
    assert b"element vertex 0 " in head and head.endswith(b"end_header\n")


def test_export_refuses_other_kinds_and_formats(tmp_path):
    ds = zv.write_lines(mem(tmp_path, "l"), [[[0, 0], [1, 1]]], chunk_shape=4)
    with pytest.raises(InputError, match="piecewise export reads point clouds"):
        export_points(ds, tmp_path / "l.csv", progress=False)
    pts = zv.write_points(mem(tmp_path, "p"), [[0.0, 0.0]], chunk_shape=1)
    with pytest.raises(InputError, match="use one of .csv, .ply, .obj, .npz, .las, .laz"):
        export_points(pts, tmp_path / "p.swc", progress=False)
    with pytest.raises(InputError, match="LAS holds 3-D points"):
        export_points(pts, tmp_path / "p.las", progress=False)


def test_store_without_las_header_exports_las_on_a_millimetre_grid(tmp_path):
    pts = np.array([[1.25, 2.5, 3.0], [10.001, 20.002, 30.003]])
    ds = zv.write_points(
        mem(tmp_path, "p"),
        pts,
        chunk_shape=5,
        attributes={"classification": np.array([2, 6], np.uint8), "score": np.array([0.5, 1.5])},
    )
    export_points(ds, tmp_path / "p.las", progress=False)
    las = laspy.read(tmp_path / "p.las")
    assert las.point_format.id == 0 and str(las.header.version) == "1.2"  # classification 2 and 6 fit 1.2
    assert las.header.scales.tolist() == [0.001] * 3
    order = np.argsort(las.x)
    assert np.allclose(np.column_stack([las.x, las.y, las.z])[order], pts, atol=5e-4, rtol=0)
    assert np.asarray(las.classification)[order].tolist() == [2, 6]
    assert las["score"][order].tolist() == [0.5, 1.5]


def test_truncated_ply_is_refused(tmp_path):
    head = b"ply\nformat binary_little_endian 1.0\nelement vertex 10\nproperty float x\nproperty float y\nend_header\n"
    (tmp_path / "t.ply").write_bytes(head + struct.pack("<4f", 1, 2, 3, 4))
    with pytest.raises(InputError, match="shorter than its 10 vertices"):
        ingest_points(mem(tmp_path, "t"), [tmp_path / "t.ply"], chunk_shape=1, progress=False)


def test_ingest_checks_target_crs_and_files_up_front(tmp_path):
    (tmp_path / "a.csv").write_text("x,y,k\n1,2,3\n")
    (tmp_path / "b.csv").write_text("x,y,other\n1,2,3\n")
    taken = tmp_path / "taken.zarr"
    zv.write_points(taken, [[0.0, 0.0]], chunk_shape=1)
    with pytest.raises(zv.StoreExistsError):
        ingest_points(taken, [tmp_path / "missing.csv"], chunk_shape=1, progress=False)
    with pytest.raises(InputError, match="EPSG:999999"):
        ingest_points(tmp_path / "c.zarr", [tmp_path / "a.csv"], chunk_shape=1, crs="EPSG:999999")
    files = [tmp_path / "a.csv", tmp_path / "b.csv"]
    with pytest.raises(
        InputError, match=r"b\.csv: this batch has attributes \['other'\] but the first batch had \['k'\]"
    ):
        ingest_points(mem(tmp_path, "d"), files, chunk_shape=1, progress=False)


def test_las_whose_integers_would_not_survive_is_refused(tmp_path):
    header = laspy.LasHeader(point_format=0, version="1.2")
    header.scales = np.array([1e-12, 0.01, 0.01])
    header.offsets = np.array([1e6, 0.0, 0.0])  # |offset| / scale = 1e18: float64 cannot hold X
    rec = laspy.ScaleAwarePointRecord.zeros(100, header=header)
    rec.X = np.random.default_rng(8).integers(-(2**30), 2**30, 100)
    with laspy.open(tmp_path / "odd.las", mode="w", header=header) as w:
        w.write_points(rec)
    with pytest.raises(InputError, match="the X integers do not survive X \\* scale \\+ offset in float64"):
        ingest_points(mem(tmp_path, "odd"), [tmp_path / "odd.las"], chunk_shape=1e-3, progress=False)


def test_piecewise_obj_and_npz_hold_the_query(tmp_path):
    from zarr_vectors.io.export import read_npz

    rng = np.random.default_rng(9)
    pts = rng.uniform(0, 40, (2000, 2))
    ds = zv.write_points(
        mem(tmp_path, "p"),
        pts,
        chunk_shape=10,
        attributes={"rgb": rng.integers(0, 255, (2000, 3)).astype(np.uint8)},
        object_ids=rng.integers(0, 9, 2000).astype(np.uint64) + np.uint64(2**63),
    )
    want = ds.query()
    export_points(ds, tmp_path / "a.npz", rows=200, progress=False)
    back = read_npz(tmp_path / "a.npz")
    assert back.axes == ("x", "y") and back.positions.dtype == want.positions.dtype
    assert np.array_equal(back.positions, want.positions)
    assert np.array_equal(back.object_ids, want.object_ids) and back.object_ids.dtype == np.uint64
    assert np.array_equal(back.attributes["rgb"], want.attributes["rgb"])
    export_points(ds, tmp_path / "a.obj", rows=200, progress=False)
    lines = (tmp_path / "a.obj").read_text().splitlines()
    assert lines[0].startswith("#") and len(lines) == 2001
    v = np.array([line.split()[1:] for line in lines[1:]], np.float64)
    assert np.array_equal(v[:, :2], want.positions) and not v[:, 2].any()
