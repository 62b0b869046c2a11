"""Uncompressed LAS ingest by sorting records in place (``io/las_sort.py``): the store it
writes is the streaming spill's, byte for byte; bad files and bounds fail cleanly."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zarr_vectors.errors import InputError
from zarr_vectors.io import las_sort, pointfiles
from zarr_vectors.io.las import open_las
from zarr_vectors.io.pointfiles import ingest_points

laspy = pytest.importorskip("laspy")
from test_point_files import make_las  # noqa: E402  (after the laspy skip)


def store_bytes(path: Path) -> dict[str, bytes]:
    """Every file of a store; JSON documents without the per-write generation token."""
    out = {}
    for f in sorted(path.rglob("*")):
        if f.is_file():
            data = f.read_bytes()
            if f.name == "zarr.json":
                doc = json.loads(data)
                doc.get("attributes", {}).pop("zarr_vectors_generation", None)
                data = json.dumps(doc, sort_keys=True).encode()
            out[str(f.relative_to(path))] = data
    return out


@pytest.fixture
def spy(monkeypatch):
    """The values ``sort_las`` returned during the test (None: it gave way to the spill)."""
    seen: list[object] = []
    real = las_sort.sort_las

    def recorded(*args, **kwargs):
        got = real(*args, **kwargs)
        seen.append(got)
        return got

    monkeypatch.setattr(pointfiles, "sort_las", recorded)
    return seen


def spill_only(monkeypatch) -> None:
    monkeypatch.setattr(pointfiles, "sortable", lambda sources: False)


@pytest.mark.parametrize(("fmt", "options"), [(3, {}), (8, {"shards": "auto"})])
def test_sorted_ingest_writes_the_spills_store_byte_for_byte(tmp_path, monkeypatch, spy, fmt, options):
    files = [tmp_path / "a.las", tmp_path / "b.las"]
    make_las(files[0], 3000, seed=1, fmt=fmt)
    make_las(files[1], 2000, seed=2, fmt=fmt)
    kw = dict(chunk_shape=60, chunk_rows=1200, progress=False, **options)
    fast = ingest_points(tmp_path / "fast.zarr", files, **kw)
    assert len(spy) == 1 and spy[0] is not None  # the records were sorted in place
    spill_only(monkeypatch)
    slow = ingest_points(tmp_path / "slow.zarr", files, **kw)
    assert len(spy) == 1
    want, got = store_bytes(tmp_path / "slow.zarr"), store_bytes(tmp_path / "fast.zarr")
    assert sorted(got) == sorted(want) and len(want) > (10 if options else 40)
    assert [k for k in want if want[k] != got[k]] == []
    assert fast.vertex_count() == 5000 and slow.vertex_count() == 5000
    # nothing but the inputs and the two stores is left: the sorted file went with its folder
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.las", "b.las", "fast.zarr", "slow.zarr"]


def test_cells_in_tiny_runs_give_way_to_the_spill(tmp_path, monkeypatch, spy):
    src = tmp_path / "a.las"
    make_las(src, 2000, seed=3)
    kw = dict(chunk_shape=40, chunk_rows=60, progress=False)  # under 2 points per block and cell
    ingest_points(tmp_path / "fast.zarr", [src], **kw)
    assert spy == [None]
    spill_only(monkeypatch)
    ingest_points(tmp_path / "slow.zarr", [src], **kw)
    assert store_bytes(tmp_path / "fast.zarr") == store_bytes(tmp_path / "slow.zarr")


def test_points_outside_the_given_bounds_name_the_file_and_write_nothing(tmp_path):
    src = tmp_path / "a.las"
    make_las(src, 500, seed=4)
    bounds = ([400000, 5000000, -5], [400100, 5000200, 40])  # x reaches 400300
    with pytest.raises(InputError, match=r"a\.las: \d+ positions lie outside the store's bounds"):
        ingest_points(tmp_path / "s.zarr", [src], chunk_shape=50, bounds=bounds, progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.las"]


def test_a_file_cut_inside_its_records_is_refused(tmp_path):
    src = tmp_path / "a.las"
    make_las(src, 1000, seed=5)
    info = open_las(src)
    data = src.read_bytes()
    src.write_bytes(data[: info.data_offset + 600 * info.record_size + 7])
    with pytest.raises(
        InputError, match=r"a\.las: the file ends inside its point records \(the header says 1,000"
    ):
        ingest_points(tmp_path / "s.zarr", [src], chunk_shape=50, chunk_rows=256, progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.las"]


def test_sortable_takes_only_uncompressed_files_of_one_layout(tmp_path):
    for name, fmt in (("a.las", 3), ("b.las", 3), ("c.las", 6), ("d.laz", 3)):
        make_las(tmp_path / name, 50, fmt=fmt)
    a, b, c, d = (open_las(tmp_path / n) for n in ("a.las", "b.las", "c.las", "d.laz"))
    assert las_sort.sortable([a, b])
    assert not las_sort.sortable([])
    assert not las_sort.sortable([a, c])  # another point format
    assert not las_sort.sortable([d])  # LAZ: records are compressed
    from dataclasses import replace

    assert not las_sort.sortable([a, replace(b, scale=b.scale * 10)])
    assert not las_sort.sortable([replace(a, count=0)])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(0, 6), max_size=30), min_size=1, max_size=6))
def test_places_match_a_stable_sort_of_all_blocks(blocks):
    arrays = [np.asarray(b, np.int64) for b in blocks]
    tallies = [np.unique(a, return_counts=True) for a in arrays]
    cells, counts, places = las_sort._places([t[0] for t in tallies], [t[1] for t in tallies])
    every = np.concatenate(arrays)
    order = np.argsort(every, kind="stable")  # where each row lands in the sorted file
    landing = np.empty(len(every), np.int64)
    landing[order] = np.arange(len(every))
    want_cells, want_counts = np.unique(every, return_counts=True)
    assert cells.tolist() == want_cells.tolist() and counts.tolist() == want_counts.tolist()
    start = 0
    for a, (ucell, _), first in zip(arrays, tallies, places):
        for c, f in zip(ucell.tolist(), first.tolist()):
            rows = np.flatnonzero(a == c) + start
            assert landing[rows].tolist() == list(range(f, f + len(rows)))
        start += len(a)
