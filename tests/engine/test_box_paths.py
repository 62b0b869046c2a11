"""The box query's fast path: cells decoded and filtered apart (any number of threads), tested
only on the axes the box cuts them, copied once; answers equal brute force, in chunk order."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import zarr_vectors as zv
from tests.conftest import brute_force_box, sorted_rows
from zarr_vectors.engine.read.plan import float32_bounds, inside_box
from zarr_vectors.errors import CorruptCellError
from zarr_vectors.storage.scratch import arena
from zarr_vectors.storage.threads import map_cells


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    rng = np.random.default_rng(21)
    pts = rng.uniform(0, 400, (60_000, 3)).astype(np.float32)
    # Rows exactly on chunk faces and on the boxes' faces below.
    pts[:300] = np.round(pts[:300] / 100) * 100
    pts[300:600, 0] = 150.0
    pts[600:900, 1] = np.float32(np.nextafter(np.float32(250.0), np.float32(0)))
    rgb = rng.integers(0, 255, (len(pts), 3)).astype(np.uint8)
    w = rng.random(len(pts)).astype(np.float64)
    path = tmp_path_factory.mktemp("box") / "s.zarr"
    zv.write_points(path, pts, chunk_shape=100, bounds=([0] * 3, [400] * 3), attributes={"rgb": rgb, "w": w})
    return path, pts, rgb, w


BOXES = [
    ([0, 0, 0], [400, 400, 400]),  # everything: every chunk wholly covered
    ([100, 100, 100], [300, 300, 300]),  # chunk-aligned: faces of chunks on the box
    ([150, 0, 0], [250, 250, 400]),  # cuts chunks on x and y only
    ([12.5, 33.3, 71.1], [12.5, 390.0, 71.1]),  # zero-width on two axes
    ([99.99, 99.99, 99.99], [100.01, 100.01, 100.01]),  # a corner shared by eight chunks
    ([-50, -50, -50], [-1, -1, -1]),  # outside the data
]


@pytest.mark.parametrize("box", BOXES)
@pytest.mark.parametrize("workers", [1, 2, 5])
def test_box_answers_equal_brute_force_whatever_the_workers(store, box, workers):
    path, pts, rgb, w = store
    res = zv.open(path).query(bbox=box, workers=workers)
    mask = brute_force_box(pts, *box)
    assert len(res) == int(mask.sum())
    assert np.array_equal(
        sorted_rows(res.positions, res.attributes["rgb"], res.attributes["w"]),
        sorted_rows(pts[mask], rgb[mask], w[mask]),
    )
    assert res.positions.dtype == np.float32 and res.attributes["rgb"].dtype == np.uint8


@pytest.mark.parametrize("box", BOXES)
def test_partly_covered_cells_tested_together_or_one_by_one_give_the_same_rows(store, box, monkeypatch):
    """Both tests of the straight-decoding path (every row on every side in one pass, or each
    large cell on the sides that cut it) keep exactly brute force's rows, in the same order."""
    from zarr_vectors.engine.read import points

    path, pts, rgb, w = store
    ds = zv.open(path)
    answers = []
    for rows in (0, 1 << 40):  # 0: every cell tested alone; 2**40: all cells in one pass
        monkeypatch.setattr(points, "CELL_TEST_ROWS", rows)
        answers.append(ds.query(bbox=box, workers=2))
    mask = brute_force_box(pts, *box)
    for res in answers:
        assert np.array_equal(
            sorted_rows(res.positions, res.attributes["w"]), sorted_rows(pts[mask], w[mask])
        )
    assert np.array_equal(answers[0].positions, answers[1].positions)
    assert np.array_equal(answers[0].attributes["rgb"], answers[1].attributes["rgb"])


def test_rows_come_in_the_same_order_for_any_workers(store):
    path, *_ = store
    ds = zv.open(path)
    one = ds.query(bbox=BOXES[2], workers=1)
    for k in (2, 3):
        other = ds.query(bbox=BOXES[2], workers=k)
        assert np.array_equal(one.positions, other.positions)
        assert np.array_equal(one.attributes["w"], other.attributes["w"])


def test_inside_box_skips_only_sides_the_cell_lies_within():
    pos = np.array([[0.5, 5.0], [1.5, 5.0], [0.99, 9.0]], np.float32)
    lo, hi = np.array([0.0, 4.0]), np.array([1.0, 10.0])
    assert inside_box(pos, lo, hi).tolist() == [True, False, True]
    # The cell [0, 2) x [0, 10): x is cut at 1.0, y at 4.0 (its top side lies at the box's 10).
    cell_lo, cell_hi = np.array([0.0, 0.0]), np.array([2.0, 10.0])
    assert inside_box(pos, lo, hi, cell_lo, cell_hi).tolist() == [True, False, True]
    # A cell wholly inside the box on x: nothing is tested (rows are trusted to lie in their cell).
    assert inside_box(pos[:, :1], lo[:1], hi[:1], np.array([0.2]), np.array([0.8])).all()


def test_map_cells_keeps_order_raises_and_nests():
    assert map_cells(lambda i: i * i, 10, 3) == [i * i for i in range(10)]
    assert map_cells(lambda i: map_cells(lambda j: i + j, 3, 2), 4, 2) == [
        [i, i + 1, i + 2] for i in range(4)
    ]

    def boom(i: int) -> int:
        if i == 7:
            raise ValueError("cell 7")
        return i

    with pytest.raises(ValueError, match="cell 7"):
        map_cells(boom, 9, 2)
    with pytest.raises(zv.InputError, match="workers must be a positive integer"):
        map_cells(boom, 3, 0)


def test_map_cells_raises_only_once_no_call_is_running_and_starts_no_more():
    running: list[int] = []
    calls: list[int] = []
    lock = threading.Lock()

    def slow_unless_first(i: int) -> int:
        with lock:
            running.append(i)
            calls.append(i)
        try:
            if i == 0:
                raise ValueError("cell 0")
            time.sleep(0.05)
            return i
        finally:
            with lock:
                running.remove(i)

    with pytest.raises(ValueError, match="cell 0"):
        map_cells(slow_unless_first, 40, 2)
    assert running == []  # the other thread finished its cell before the error came out
    assert len(calls) <= 3  # and started no further cell after it (of 40)


def test_an_arena_a_failed_query_used_is_not_lent_again():
    with pytest.raises(RuntimeError), arena() as failed:
        failed.take(100)
        raise RuntimeError("a cell failed to decode")
    with arena() as a, arena() as b:
        assert failed is not a and failed is not b


@pytest.mark.parametrize("workers", [1, 3])
def test_box_with_object_ids_on_the_fast_path(tmp_path, workers):
    rng = np.random.default_rng(4)
    pts = rng.uniform(0, 300, (30_000, 3)).astype(np.float32)
    ids = rng.integers(0, 500, len(pts)).astype(np.uint64) * np.uint64(2**44) + np.uint64(11)
    ds = zv.write_points(
        tmp_path / "s", pts, chunk_shape=100, bin_shape=50, object_ids=ids, bounds=([0] * 3, [300] * 3)
    )
    for box in [([0, 0, 0], [300, 300, 300]), ([40, 110, 0], [260, 190, 299])]:
        res = ds.query(bbox=box, workers=workers)
        mask = brute_force_box(pts, *box)
        assert res.object_ids.dtype == np.uint64
        assert np.array_equal(
            sorted_rows(res.positions, res.object_ids.astype(np.float64)),
            sorted_rows(pts[mask], ids[mask].astype(np.float64)),
        )


_F32 = st.floats(width=32, allow_nan=False)
_BOUND = st.one_of(
    st.floats(allow_nan=False), _F32.map(float), _F32.map(lambda x: float(np.nextafter(np.float64(x), 0.0)))
)


@given(xs=st.lists(_F32, min_size=1, max_size=20), lo=_BOUND, hi=_BOUND)
def test_float32_bounds_keep_exactly_the_float64_answer(xs, lo, hi):
    x = np.array(xs, np.float32)
    lo32, hi32 = float32_bounds(np.array([lo]), np.array([hi]))
    assert lo32.dtype == hi32.dtype == np.float32
    wide = x.astype(np.float64)
    assert np.array_equal(x >= lo32[0], wide >= lo)
    assert np.array_equal(x <= hi32[0], wide <= hi)


def test_inside_box_on_float32_rows_equals_the_float64_test():
    rng = np.random.default_rng(5)
    pos = rng.uniform(-1, 1, (5000, 2)).astype(np.float32)
    pos[:100] = np.float32(0.1)  # a float32 just above the float64 0.1 bound below
    lo, hi = np.array([0.1, -0.5]), np.array([0.7, np.float64(np.float32(0.3))])
    want = np.all((pos.astype(np.float64) >= lo) & (pos.astype(np.float64) <= hi), axis=1)
    got = inside_box(pos, lo, hi)
    assert got[:100].all() == (np.float64(np.float32(0.1)) >= 0.1)
    assert np.array_equal(got, want)


@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_wholly_covered_cells_decoded_into_the_result_match_the_usual_path(tmp_path, compression):
    rng = np.random.default_rng(5)
    pts = rng.uniform(0, 300, (5_000, 3)).astype(np.float32)
    w = rng.random(len(pts)).astype(np.float32)
    path = tmp_path / "s.zarr"
    ds = zv.write_points(path, pts, chunk_shape=100, attributes={"w": w}, compression=compression)
    box = ([0, 0, 0], [300, 300, 300])
    direct = ds.query(bbox=box)  # every cell wholly covered: decoded into the result
    usual = ds.query(bbox=box, where="w >= 0")  # a filter takes every cell the usual way
    assert np.array_equal(direct.positions, usual.positions)
    assert np.array_equal(direct.attributes["w"], usual.attributes["w"])
    assert np.array_equal(sorted_rows(direct.positions), sorted_rows(pts))

    # The damage below is done to cell files: the same store, one file per cell.
    kw = {"chunk_shape": 100, "attributes": {"w": w}, "compression": compression, "shards": None}
    zv.write_points(path, pts, overwrite=True, **kw)
    cell = path / "0/vertices/c/1/1/1"
    good = cell.read_bytes()
    damaged = {
        "none": (good[:4] + (2).to_bytes(4, "little") + good[8:], "claims|holds|bytes"),
        "zstd": (good + b"\x01junk", "zstd"),
    }[compression]
    cell.write_bytes(damaged[0])
    with pytest.raises(CorruptCellError, match=rf"'0/vertices', chunk 1\.1\.1: .*({damaged[1]})"):
        zv.open(path).query(bbox=box)
    cell.write_bytes(good)
    attr = path / "0/vertex_attributes/w/c/1/1/1"
    zv.write_points(
        tmp_path / "short.zarr",
        pts[:10],
        chunk_shape=1000,
        attributes={"w": w[:10]},
        compression=compression,
        shards=None,
    )
    attr.write_bytes((tmp_path / "short.zarr/0/vertex_attributes/w/c/0/0/0").read_bytes())  # 10 rows
    with pytest.raises(
        CorruptCellError, match=r"'0/vertex_attributes/w', chunk 1\.1\.1: 10 rows but vertices has"
    ):
        zv.open(path).query(bbox=box)
