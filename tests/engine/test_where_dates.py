"""``where=`` on date-time object attributes (int64 counts of a ``time_unit``, read as
datetime64): every form of date against brute force, in the API and on the command line."""

from __future__ import annotations

import datetime
from pathlib import Path

import numpy as np
import pytest
import shapely

import zarr_vectors as zv
from zarr_vectors.engine.read.where import Condition, parse_where
from zarr_vectors.errors import InputError

N_OBJECTS = 60


@pytest.fixture(scope="module")
def parcels(tmp_path_factory: pytest.TempPathFactory) -> tuple[zv.Dataset, np.ndarray, np.ndarray, Path]:
    """Boxes with a ``when`` (datetime64[ms], some absent) and a numeric ``area``."""
    rng = np.random.default_rng(11)
    base = np.datetime64("2024-01-01T00:00:00.000", "ms")
    when = base + rng.integers(-400, 400, N_OBJECTS).astype("timedelta64[D]")
    when = when + rng.integers(0, 86_400_000, N_OBJECTS).astype("timedelta64[ms]")
    when[[3, 17]] = np.array("NaT", when.dtype)
    when[5] = np.datetime64("2024-01-01T00:00:00.000")  # exactly on a bound below
    geoms = [shapely.box(x, y, x + 1, y + 1) for x, y in rng.uniform(0, 50, (N_OBJECTS, 2))]
    path = tmp_path_factory.mktemp("dates") / "p.zarr"
    ds = zv.write_geometries(
        path,
        geoms,
        chunk_shape=10,
        object_attributes={"when": when, "area": np.ones(N_OBJECTS)},
    )
    return ds, ds.object_ids(), when, path


def _ids_where(ds: zv.Dataset, where: object) -> list[int]:
    res = ds.read(where=where)
    return [] if res.object_ids is None else sorted(set(res.object_ids.tolist()))


def _brute(ids: np.ndarray, keep: np.ndarray) -> list[int]:
    return sorted(ids[keep].tolist())


@pytest.mark.parametrize(
    "bound",
    [
        "2024-01-01",
        np.datetime64("2024-01-01"),
        np.datetime64("2024-01-01T00:00:00.000000", "us"),
        datetime.datetime(2024, 1, 1),
        datetime.date(2024, 1, 1),
    ],
    ids=["iso", "datetime64-D", "datetime64-us", "datetime", "date"],
)
@pytest.mark.parametrize("op", ["<", "<=", ">", ">=", "==", "!="])
def test_every_form_of_date_equals_brute_force(
    parcels: tuple[zv.Dataset, np.ndarray, np.ndarray, Path], bound: object, op: str
) -> None:
    ds, ids, when, path = parcels
    stamp = np.datetime64("2024-01-01T00:00:00.000", "ms")
    import operator

    fn = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}
    fn |= {"==": operator.eq, "!=": operator.ne}
    want = _brute(ids, np.asarray(fn[op](when, stamp), bool))
    assert _ids_where(ds, {"when": (op, bound)}) == want
    assert _ids_where(ds, [("when", op, bound)]) == want
    if op != "!=":
        assert 5 in want or op in ("<", ">")  # the object exactly on the bound


def test_text_form_and_flipped_sides(parcels: tuple[zv.Dataset, np.ndarray, np.ndarray, Path]) -> None:
    ds, ids, when, path = parcels
    lo, hi = np.datetime64("2023-06-01T12:30", "ms"), np.datetime64("2024-03-05T08:00:00.250", "ms")
    want = _brute(ids, (when >= lo) & (when < hi))
    assert _ids_where(ds, "when >= 2023-06-01T12:30 and when < 2024-03-05T08:00:00.250") == want
    assert _ids_where(ds, "2023-06-01T12:30 <= when and 2024-03-05T08:00:00.250 > when") == want
    assert _ids_where(ds, {"when": ("between", ("2023-06-01T12:30", hi))}) == _brute(
        ids, (when >= lo) & (when <= hi)
    )
    days = when[[0, 1, 2]]
    assert _ids_where(ds, {"when": ("in", list(days))}) == _brute(ids, np.isin(when, days))
    assert _ids_where(ds, {"when": ("not in", list(days))}) == _brute(ids, ~np.isin(when, days))


def test_parsed_dates_keep_their_unit() -> None:
    assert parse_where("day >= 2024-01-31") == [Condition("day", ">=", np.datetime64("2024-01-31"))]
    (cond,) = parse_where("t < 2024-01-31T12:00:00.125")
    assert cond.value.dtype == np.dtype("datetime64[ms]")
    assert parse_where("area > 2024")[0].value == 2024  # a number stays a number


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ("when > 5", "holds date-times"),
        ({"area": (">", "2024-01-01")}, "holds numbers (float64), not date-times"),
        ({"when": (">", "tomorrow")}, "needs a number or a date, got 'tomorrow'"),
        ({"when": ("in", ["2024-01-01", 3])}, "mixes dates and numbers"),
        ({"when": (">", datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC))}, "time zone"),
        ({"when": ("between", ("2024-01-01", 5))}, "holds date-times"),
    ],
)
def test_dates_against_numbers_are_refused(
    parcels: tuple[zv.Dataset, np.ndarray, np.ndarray, Path], where: object, message: str
) -> None:
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parcels[0].read(where=where)


def test_cli_where_with_dates(
    parcels: tuple[zv.Dataset, np.ndarray, np.ndarray, Path], tmp_path: Path
) -> None:
    import json

    from zarr_vectors.cli import main

    ds, ids, when, path = parcels
    out = tmp_path / "o.geojson"
    assert main(["query", str(path), "--where", "when < 2024-02-01", "-o", str(out), "--no-progress"]) == 0
    got = sorted(f["id"] for f in json.loads(out.read_text())["features"])
    assert got == _brute(ids, when < np.datetime64("2024-02-01"))
