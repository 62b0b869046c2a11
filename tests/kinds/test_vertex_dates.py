"""Date-time vertex attributes: stored as int64 counts with a ``time_unit`` attribute (as
object attributes are), read back as datetime64 by queries, object reads, batches, tables
and filters; kept through streaming writes, appends, pyramids and exports."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import zarr_vectors as zv
from tests.conftest import brute_force_box, sorted_rows
from zarr_vectors.errors import InputError
from zarr_vectors.io.export import export_result

N = 3000


def _times(rng: np.random.Generator, n: int, unit: str = "ms", absent: int = 97) -> np.ndarray:
    """Instants within about 12 days of 2024-01-01, every ``absent``-th one NaT."""
    span = {"ms": 10**9, "s": 10**6}[unit]
    t = np.datetime64("2024-01-01T00:00:00", unit) + rng.integers(-span, span, n).astype(
        f"timedelta64[{unit}]"
    )
    t[::absent] = np.datetime64("NaT", unit)
    return t


@pytest.fixture(scope="module")
def cloud(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(21)
    pts = rng.uniform(0, 100, (N, 3))
    t = _times(rng, N)
    path = tmp_path_factory.mktemp("vdates") / "p.zarr"
    zv.write_points(
        path, pts, chunk_shape=20, attributes={"t": t, "a": rng.random(N)}, object_ids=np.arange(N) % 40
    )
    return path, pts, t


def _by_position(res: zv.Result) -> np.ndarray:
    order = np.lexsort(res.positions.T[::-1])
    return res.attributes["t"][order]


def test_round_trip_through_query_objects_and_tables(cloud: tuple[Path, np.ndarray, np.ndarray]) -> None:
    path, pts, t = cloud
    ds = zv.open(path)
    meta = json.loads((path / "0" / "vertex_attributes" / "t" / "zarr.json").read_text())
    assert meta["attributes"]["dtype"] == "int64" and meta["attributes"]["time_unit"] == "ms"
    res = ds.read()
    assert res.attributes["t"].dtype == np.dtype("datetime64[ms]")
    assert np.array_equal(_by_position(res), t[np.lexsort(pts.T[::-1])], equal_nan=True)
    obj = ds.objects([7])
    assert np.array_equal(np.sort(obj.attributes["t"]), np.sort(t[np.arange(N) % 40 == 7]), equal_nan=True)
    frame = res.to_pandas()
    assert frame["t"].dtype == np.dtype("datetime64[ms]") and frame["t"].isna().sum() == np.isnat(t).sum()
    batches = list(ds.query_batches(batch_chunks=5))
    assert all(b.attributes["t"].dtype == np.dtype("datetime64[ms]") for b in batches)
    from zarr_vectors.validation import validate

    assert validate(path).ok


@pytest.mark.parametrize(
    "where",
    [
        "t >= 2024-01-05",
        "t < 2023-12-27T06:30:00.5 and a > 0.5",
        [("t", "between", ("2023-12-25", "2024-01-03"))],
    ],
)
def test_where_on_vertex_dates_equals_brute_force(
    cloud: tuple[Path, np.ndarray, np.ndarray], where: object
) -> None:
    path, pts, t = cloud
    ds = zv.open(path)
    a = ds.read().attributes["a"]  # the same rows in store order: compare through positions instead
    del a
    box = ([10, 0, 20], [90, 70, 100])
    res = ds.query(box, where=where)
    full = ds.query(box)
    want = full.positions[_keep(full, where)]
    assert np.array_equal(sorted_rows(res.positions), sorted_rows(want))
    assert len(res) and len(res) < len(full)
    inside = brute_force_box(pts, *box)
    assert len(full) == int(inside.sum())


def _keep(res: zv.Result, where: object) -> np.ndarray:
    t, a = res.attributes["t"], res.attributes["a"]
    if where == "t >= 2024-01-05":
        return t >= np.datetime64("2024-01-05")
    if isinstance(where, str):
        return (t < np.datetime64("2023-12-27T06:30:00.500")) & (a > 0.5)
    return (t >= np.datetime64("2023-12-25")) & (t <= np.datetime64("2024-01-03"))


def test_streaming_writes_and_appends_keep_the_unit(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    pts, t = rng.uniform(0, 100, (400, 3)), _times(rng, 400, "s")
    with zv.create(tmp_path / "c.zarr", "points", chunk_shape=25, bounds=([0] * 3, [100] * 3)) as w:
        w.append(pts[:200], attributes={"t": t[:200]})
        w.append(pts[200:], attributes={"t": t[200:].astype("datetime64[ms]")})  # coarser values fit
    ds = zv.open(tmp_path / "c.zarr", mode="r+")
    assert np.array_equal(np.sort(ds.read().attributes["t"]), np.sort(t), equal_nan=True)
    more = np.array(["2031-05-06T07:08:09"], "datetime64[s]")
    ds.append(np.array([[50.0, 50, 50]]), attributes={"t": more})
    back = zv.open(tmp_path / "c.zarr").read(where="t >= 2031-01-01")
    assert back.attributes["t"].tolist() == more.tolist()
    with pytest.raises(InputError, match="finer than that"):
        zv.open(tmp_path / "c.zarr", mode="r+").append(
            np.array([[1.0, 1, 1]]), attributes={"t": np.array(["2024-01-01T00:00:00.001"], "datetime64[ms]")}
        )
    with pytest.raises(InputError, match="holds date-times"):
        zv.open(tmp_path / "c.zarr", mode="r+").append(
            np.array([[1.0, 1, 1]]), attributes={"t": np.array([5])}
        )


def test_lines_meshes_and_refusals(tmp_path: Path) -> None:
    import trimesh

    days = [np.arange(4).astype("datetime64[D]") + np.timedelta64(k, "D") for k in range(3)]
    lines = [np.column_stack([np.arange(4.0), np.full(4, k), np.zeros(4)]) for k in range(3)]
    ls = zv.write_lines(tmp_path / "l.zarr", lines, chunk_shape=2, attributes={"day": days})
    res = ls.read(where="day >= 1970-01-04")
    assert res.attributes["day"].dtype == np.dtype("datetime64[D]")
    assert sorted(res.attributes["day"].tolist()) == sorted(d for v in days for d in v.tolist() if d.day >= 4)
    m = trimesh.creation.icosphere(1)
    stamp = np.datetime64("2020-02-02T02:02", "m") + np.arange(len(m.vertices)).astype("timedelta64[m]")
    ms = zv.write_mesh(tmp_path / "m.zarr", m.vertices, m.faces, chunk_shape=1, attributes={"s": stamp})
    assert np.array_equal(np.sort(ms.read().attributes["s"]), stamp)
    with pytest.raises(InputError, match="without a unit"):
        zv.write_points(
            tmp_path / "g.zarr", np.zeros((1, 2)), chunk_shape=1, attributes={"t": np.zeros(1, "M8")}
        )
    with pytest.raises(InputError, match="vertex and object attributes only"):
        zv.write_graph(
            tmp_path / "e.zarr",
            np.zeros((2, 2)),
            [[0, 1]],
            chunk_shape=1,
            edge_attributes={"when": np.array(["2024-01-01"], "datetime64[D]")},
        )


def test_pyramids_reduce_dates(tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    pts, t = rng.uniform(0, 100, (2000, 3)), _times(rng, 2000, "s", absent=5000)  # row 0 alone is NaT
    zv.write_points(tmp_path / "p.zarr", pts, chunk_shape=25, attributes={"t": t})
    ds = zv.open(tmp_path / "p.zarr", mode="r+")
    ds.build_pyramid(factors=[2], point_strategy="metavertex", reductions={"t": "mean"})
    coarse = zv.open(tmp_path / "p.zarr").read(level=1).attributes["t"]
    assert coarse.dtype == np.dtype("datetime64[s]") and np.isnat(coarse).sum() == 1  # the group of row 0
    valid = coarse[~np.isnat(coarse)]
    assert len(valid) and valid.min() >= t[1:].min() and valid.max() <= t[1:].max()
    with pytest.raises(InputError, match="sum of date-times"):
        zv.open(tmp_path / "p.zarr", mode="r+").build_pyramid(
            factors=[4], point_strategy="metavertex", reductions={"t": "sum"}, overwrite=True
        )


def test_exports(cloud: tuple[Path, np.ndarray, np.ndarray], tmp_path: Path) -> None:
    path, _, _ = cloud
    res = zv.open(path).objects([3])
    export_result(res, tmp_path / "o.csv")
    header, *rows = (tmp_path / "o.csv").read_text().splitlines()
    col = header.split(",").index("t")
    text = [r.split(",")[col] for r in rows]
    assert text == np.datetime_as_string(res.attributes["t"]).tolist()  # ISO 8601, NaT when absent
    export_result(res, tmp_path / "o.npz")
    from zarr_vectors.io.export import read_npz

    assert np.array_equal(read_npz(tmp_path / "o.npz").attributes["t"], res.attributes["t"], equal_nan=True)
    with pytest.raises(InputError, match="PLY cannot hold"):
        export_result(res, tmp_path / "o.ply")


def test_pyramids_of_lines_meshes_and_skeletons_keep_dates(tmp_path: Path) -> None:
    import trimesh

    rng = np.random.default_rng(9)
    start = np.datetime64("2024-01-01", "s")
    lines = [np.cumsum(rng.normal(0, 3, (30, 3)), axis=0) + 50 for _ in range(20)]
    days = [start + rng.integers(0, 10**6, 30).astype("timedelta64[s]") for _ in lines]
    zv.write_lines(tmp_path / "l.zarr", lines, chunk_shape=10, attributes={"t": days})
    m = trimesh.creation.icosphere(3, radius=20)
    stamps = start + np.arange(len(m.vertices)).astype("timedelta64[s]")
    zv.write_mesh(tmp_path / "m.zarr", m.vertices + 50, m.faces, chunk_shape=10, attributes={"t": stamps})
    pos, par = rng.uniform(0, 100, (200, 3)), np.r_[-1, np.arange(199)]
    zv.write_skeleton(tmp_path / "s.zarr", pos, par, chunk_shape=20, attributes={"t": stamps[:200]})
    every = {"l": np.concatenate(days), "m": stamps, "s": stamps[:200]}
    for name, given in every.items():
        zv.open(tmp_path / f"{name}.zarr", mode="r+").build_pyramid(factors=[2])
        coarse = zv.open(tmp_path / f"{name}.zarr").read(level=1).attributes["t"]
        assert coarse.dtype == np.dtype("datetime64[s]") and len(coarse), name
        assert given.min() <= coarse.min() and coarse.max() <= given.max(), name
