"""LAS/LAZ export of stores that did not come from LAS: LAS 1.2 (point formats 0-3) whenever
the attributes fit, else 1.4; object ids kept as a uint64 extra-bytes dimension. Read back
with laspy."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import zarr_vectors as zv
from zarr_vectors.io.las import plain_format
from zarr_vectors.io.stream_export import export_points

laspy = pytest.importorskip("laspy")
RNG = np.random.default_rng(11)


def _mem(tmp_path: Path, name: str) -> str:
    return f"memory://{tmp_path.name}/{name}.zarr"


def _points(n: int, side: int) -> np.ndarray:
    """``n`` distinct integer points in ``[0, side)^3`` (exact on LAS's millimetre grid)."""
    idx = RNG.choice(side**3, n, replace=False)
    return np.column_stack(np.unravel_index(idx, (side,) * 3)).astype(np.float64)


def _by_position(las: object, pts: np.ndarray) -> np.ndarray:
    """For each point of ``pts`` (on the millimetre grid) its row in the LAS file."""
    xyz = np.column_stack([las.x, las.y, las.z])  # type: ignore[attr-defined]
    key = np.rint(xyz * 1000).astype(np.int64)
    want = np.rint(pts * 1000).astype(np.int64)
    order = np.lexsort(key.T[::-1])
    at = np.searchsorted(
        key[order].view([("", np.int64)] * 3).ravel(), want.view([("", np.int64)] * 3).ravel()
    )
    rows = order[at]
    assert np.array_equal(key[rows], want)
    return rows


@pytest.mark.parametrize("suffix", [".las", ".laz"])
def test_points_with_objects_become_las_1_2_with_object_ids(tmp_path: Path, suffix: str) -> None:
    pts = _points(400, 50)
    ids = RNG.integers(1, 9, 400) * 1_000_000_007  # past 32 bits
    cls = RNG.integers(0, 31, 400).astype(np.uint8)
    ds = zv.write_points(
        _mem(tmp_path, "p"), pts, chunk_shape=20, object_ids=ids, attributes={"classification": cls}
    )
    assert export_points(ds, tmp_path / f"p{suffix}", progress=False) == 400
    las = laspy.read(tmp_path / f"p{suffix}")
    assert str(las.header.version) == "1.2" and las.point_format.id == 0
    assert las["object_id"].dtype == np.uint64
    rows = _by_position(las, pts)
    assert las["object_id"][rows].tolist() == ids.tolist()
    assert np.asarray(las.classification)[rows].tolist() == cls.tolist()


def test_colour_and_time_pick_formats_1_to_3(tmp_path: Path) -> None:
    pts = _points(50, 10)
    rgb = {c: RNG.integers(0, 65535, 50).astype(np.uint16) for c in ("red", "green", "blue")}
    gps = {"gps_time": RNG.uniform(0, 1e5, 50)}
    for attrs, fmt in ((gps, 1), (rgb, 2), (rgb | gps, 3)):
        ds = zv.write_points(_mem(tmp_path, f"c{fmt}"), pts, chunk_shape=5, attributes=attrs)
        export_points(ds, tmp_path / f"c{fmt}.las", progress=False)
        las = laspy.read(tmp_path / f"c{fmt}.las")
        assert (str(las.header.version), las.point_format.id) == ("1.2", fmt)
        rows = _by_position(las, pts)
        for name, values in attrs.items():
            assert np.array_equal(np.asarray(las[name])[rows], values)


def test_values_las_1_2_cannot_hold_make_las_1_4(tmp_path: Path) -> None:
    pts = _points(30, 10)
    cls = np.full(30, 40, np.uint8)  # 1.2's classification has 5 bits
    ds = zv.write_points(_mem(tmp_path, "w"), pts, chunk_shape=5, attributes={"classification": cls})
    export_points(ds, tmp_path / "w.las", progress=False)
    las = laspy.read(tmp_path / "w.las")
    assert (str(las.header.version), las.point_format.id) == ("1.4", 6)
    assert np.asarray(las.classification).tolist() == [40] * 30
    angle = {"scan_angle": np.full(30, 1000, np.int16)}  # a dimension only formats 6-10 have
    ds = zv.write_points(_mem(tmp_path, "a"), pts, chunk_shape=5, attributes=angle)
    export_points(ds, tmp_path / "a.las", progress=False)
    assert str(laspy.read(tmp_path / "a.las").header.version) == "1.4"


def test_an_attribute_named_object_id_keeps_its_name(tmp_path: Path) -> None:
    pts = _points(20, 10)
    own = np.arange(20, dtype=np.int32)
    ds = zv.write_points(
        _mem(tmp_path, "n"), pts, chunk_shape=5, object_ids=np.full(20, 7), attributes={"object_id": own}
    )
    export_points(ds, tmp_path / "n.las", progress=False)
    las = laspy.read(tmp_path / "n.las")
    rows = _by_position(las, pts)
    assert las["object_id"][rows].tolist() == own.tolist()
    assert las["object_id_"].tolist() == [7] * 20


def test_plain_format_rules() -> None:
    assert plain_format([]) == (0, "1.2")
    assert plain_format(["classification"]) == (6, "1.4")  # values unknown: 1.4 holds any
    assert plain_format(["classification"], {"classification": (0, 31)}) == (0, "1.2")
    assert plain_format(["return_number"], {"return_number": (0, 8)}) == (6, "1.4")
    assert plain_format(["red", "green", "blue", "nir"]) == (8, "1.4")
    assert plain_format(["intensity"], count=2**32) == (6, "1.4")
