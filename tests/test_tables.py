"""Results as pandas DataFrames and Arrow tables, and queries in batches."""

from __future__ import annotations

import numpy as np
import pytest

import zarr_vectors as zv
from tests.conftest import brute_force_box
from zarr_vectors.errors import InputError
from zarr_vectors.tables import result_columns

pd = pytest.importorskip("pandas")
pa = pytest.importorskip("pyarrow")


@pytest.fixture(scope="module")
def cells(tmp_path_factory):
    rng = np.random.default_rng(4)
    n = 12_000
    pts = rng.uniform(0, 300, (n, 3)).astype(np.float32)
    rgb = rng.integers(0, 255, (n, 3)).astype(np.uint8)
    size = rng.random(n)
    ids = rng.choice(np.array([720575940621039145, 3, 2**63 + 1], np.uint64), n)
    ds = zv.write_points(
        tmp_path_factory.mktemp("tables") / "c.zarr",
        pts,
        chunk_shape=50,
        attributes={"rgb": rgb, "size": size},
        object_ids=ids,
        crs="EPSG:32633",
    )
    return ds, pts, rgb, size, ids


def test_dataframe_columns_are_the_rows(cells):
    ds, pts, rgb, size, ids = cells
    box = ([20, 40, 60], [200, 150, 290])
    res = ds.query(bbox=box)
    df = res.to_pandas()
    assert list(df.columns) == ["x", "y", "z", "object_id", "rgb_0", "rgb_1", "rgb_2", "size"]
    assert len(df) == brute_force_box(pts, *box).sum()
    assert np.array_equal(df[["x", "y", "z"]].to_numpy(), res.positions)
    assert df["object_id"].dtype == np.uint64 and np.array_equal(df["object_id"], res.object_ids)
    assert np.array_equal(df[["rgb_0", "rgb_1", "rgb_2"]].to_numpy(), res.attributes["rgb"])
    assert df["rgb_0"].dtype == np.uint8 and np.array_equal(df["size"], res.attributes["size"])


def test_arrow_table_keeps_types_axes_and_crs(cells):
    ds = cells[0]
    res = ds.query(bbox=([0] * 3, [100] * 3))
    table = res.to_arrow()
    assert table.column_names == list(result_columns(res))
    assert table.schema.field("object_id").type == pa.uint64()
    assert table.schema.field("x").type == pa.float32()
    assert np.array_equal(table.column("size").to_numpy(), res.attributes["size"])
    meta = table.schema.metadata
    assert meta[b"zarr_vectors.axes"] == b"x,y,z" and b"32633" in meta[b"zarr_vectors.crs"]


def test_lines_and_skeletons_carry_their_structure():
    lines = [np.array([[0, 0], [1, 0], [2, 1]], float), np.array([[5, 5], [6, 6]], float)]
    res = zv.write_lines("memory://tables-lines", lines, chunk_shape=4).read()
    assert result_columns(res)["line"].tolist() == [0, 0, 0, 1, 1]
    skel = zv.write_skeleton("memory://tables-skel", np.eye(3), [-1, 0, 1], chunk_shape=4).read()
    assert sorted(result_columns(skel)["parent"].tolist()) == [-1, 0, 1]


def test_a_colliding_column_is_refused_with_advice():
    res = zv.Result(np.zeros((2, 2)), {"x": np.ones(2)}, axes=("x", "y"))
    with pytest.raises(InputError, match="column .x., which the table already has.*attributes="):
        res.to_pandas()


@pytest.mark.parametrize("batch_chunks", [1, 5, 1000])
def test_batches_concatenate_to_the_query(cells, batch_chunks):
    ds, pts, rgb, size, ids = cells
    box = ([10, 0, 33], [250, 280, 190])
    whole = ds.query(bbox=box, where="size > 0.25")
    batches = list(ds.query_batches(bbox=box, where="size > 0.25", batch_chunks=batch_chunks))
    assert all(b.origin.dataset is ds for b in batches)
    n_chunks = len(np.unique(np.floor(pts[brute_force_box(pts, *box)] / 50), axis=0))
    per_batch = [len(np.unique(np.floor(b.positions / 50), axis=0)) for b in batches]
    assert max(per_batch) <= batch_chunks and len(batches) >= -(-n_chunks // batch_chunks)
    assert len(batches) <= 2 * -(-n_chunks // batch_chunks) + 2  # wholly and partly covered chunks apart
    for name in ("positions", "object_ids"):
        assert np.array_equal(np.concatenate([getattr(b, name) for b in batches]), getattr(whole, name))
    assert np.array_equal(np.concatenate([b.attributes["rgb"] for b in batches]), whole.attributes["rgb"])


def test_batches_of_an_empty_box_and_bad_sizes(cells):
    ds = cells[0]
    assert list(ds.query_batches(bbox=([-9] * 3, [-1] * 3))) == []
    with pytest.raises(InputError, match="batch_chunks must be a positive integer, got 0"):
        next(ds.query_batches(batch_chunks=0))
