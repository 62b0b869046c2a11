"""zarr_vectors.dask on a real two-process LocalCluster: stores written from Dask data answer
like the one-shot writer's, to local disk and to a moto S3 server; to_dask reads every row once."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")

import dask  # noqa: E402
import dask.array as da  # noqa: E402
import dask.dataframe as dd  # noqa: E402
import pandas as pd  # noqa: E402

import zarr_vectors as zv  # noqa: E402
from tests.conftest import brute_force_box, sorted_rows  # noqa: E402
from tests.storage.s3server import DUMMY_AWS_ENV, start_s3_server  # noqa: E402
from zarr_vectors import dask as zd  # noqa: E402
from zarr_vectors.errors import IncompleteStoreError, InputError, StoreExistsError  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.s3, pytest.mark.cluster]

N = 30_000
CHUNK, BIN = 25.0, 12.5
BOXES = [([10, 20, 30], [60, 70, 80]), ([0, 0, 0], [25, 25, 25]), ([50, 50, 50], [50, 100, 100])]


@pytest.fixture(scope="module")
def s3() -> Iterator[tuple[str, dict[str, Any]]]:
    with pytest.MonkeyPatch.context() as mp:
        for name, value in DUMMY_AWS_ENV.items():
            mp.setenv(name, value)
        server = start_s3_server("zv-dask-tests")
        try:
            yield server.url_prefix, server.storage_options
        finally:
            server.stop()


@pytest.fixture(scope="module")
def client(s3: Any) -> Iterator[Any]:
    """Two worker processes (started after the S3 environment is set, which they inherit)."""
    with (
        distributed.LocalCluster(
            n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None, host="127.0.0.1"
        ) as cluster,
        distributed.Client(cluster) as c,
    ):
        yield c


@pytest.fixture(scope="module")
def points() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    pos = rng.uniform(0, 100, (N, 3))
    pos[: N // 10] = np.round(pos[: N // 10] / 12.5) * 12.5  # rows on chunk and bin faces
    return {
        "pos": pos,
        "intensity": rng.random(N).astype(np.float32),
        "label": rng.integers(-5, 5, N).astype(np.int16),
        "ids": (rng.integers(1, 40, N).astype(np.uint64) << np.uint64(40)) + np.uint64(2**63),
    }


def frame(p: dict[str, np.ndarray], partitions: int = 6) -> Any:
    df = pd.DataFrame(
        {
            "x": p["pos"][:, 0],
            "y": p["pos"][:, 1],
            "z": p["pos"][:, 2],
            "intensity": p["intensity"],
            "object_id": p["ids"],
            "label": p["label"],
        }
    )
    return dd.from_pandas(df, npartitions=partitions)


def rows(res: Any) -> np.ndarray:
    cols = [res.positions] + [res.attributes[k] for k in sorted(res.attributes)]
    if res.object_ids is not None:
        cols.append(res.object_ids)
    return sorted_rows(*cols)


def assert_same_store(
    got: zv.Dataset, ref: zv.Dataset, ids: np.ndarray | None, target: Any, options: Any = None
) -> None:
    """Every query answers alike; metadata, dtypes and the object ids agree; the store validates."""
    assert got.root.bounds == ref.root.bounds and got.root.chunk_shape == ref.root.chunk_shape
    assert got.axes == ref.axes and got.vertex_count() == ref.vertex_count()
    assert got.attribute_names() == ref.attribute_names()
    a, b = got.query(), ref.query()
    assert a.positions.dtype == b.positions.dtype
    assert {k: v.dtype for k, v in a.attributes.items()} == {k: v.dtype for k, v in b.attributes.items()}
    np.testing.assert_array_equal(rows(a), rows(b))
    for lo, hi in BOXES:
        box = (lo[: got.ndim], hi[: got.ndim])
        np.testing.assert_array_equal(rows(got.query(bbox=box)), rows(ref.query(bbox=box)))
    if ids is not None:
        np.testing.assert_array_equal(got.object_ids(), ref.object_ids())
        for some in (ids[:1], ids[5:8]):
            np.testing.assert_array_equal(rows(got.objects(some)), rows(ref.objects(some)))
    report = zv.validate(target, storage_options=options)
    assert report.ok, report


def one_shot(target: Any, p: dict[str, np.ndarray], **kwargs: Any) -> zv.Dataset:
    return zv.write_points(
        target,
        p["pos"],
        attributes={"intensity": p["intensity"], "label": p["label"]},
        object_ids=p["ids"],
        chunk_shape=CHUNK,
        bin_shape=BIN,
        **kwargs,
    )


def test_frame_to_local_disk_answers_like_the_one_shot_writer(client, points, tmp_path):
    got = zd.write_points(tmp_path / "dask.zarr", frame(points), chunk_shape=CHUNK, bin_shape=BIN)
    ref = one_shot(tmp_path / "ref.zarr", points)
    assert_same_store(got, ref, np.unique(points["ids"]), tmp_path / "dask.zarr")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dask.zarr", "ref.zarr"]  # no staging left


def test_frame_with_compression_and_checksums_and_a_zip_target(client, points, tmp_path):
    got = zd.write_points(
        tmp_path / "dask.zip", frame(points, 3), chunk_shape=CHUNK, compression="zstd", checksums=True
    )
    ref = one_shot(tmp_path / "ref.zarr", points, compression="zstd", checksums=True)
    assert got.query().positions.shape == (N, 3)
    np.testing.assert_array_equal(rows(got.query()), rows(ref.query()))
    assert zv.validate(tmp_path / "dask.zip").ok


def test_array_to_local_disk_answers_like_the_one_shot_writer(client, points, tmp_path):
    pos = points["pos"].astype(np.float32)
    arr = da.from_array(pos, chunks=(7_000, 3))
    bounds = ([-10, -10, -10], [110, 110, 110])
    got = zd.write_points(tmp_path / "a.zarr", arr, chunk_shape=CHUNK, bounds=bounds)
    ref = zv.write_points(tmp_path / "r.zarr", pos, chunk_shape=CHUNK, bounds=bounds)
    assert got.query().positions.dtype == np.float32
    assert_same_store(got, ref, None, tmp_path / "a.zarr")


def test_frame_to_s3_answers_like_the_one_shot_writer_and_replaces_a_store(client, points, s3):
    prefix, options = s3
    target = f"{prefix}/{uuid.uuid4().hex}.zarr"
    zv.write_points(target, [[0.0, 0.0, 0.0], [500.0, 1.0, 1.0]], chunk_shape=1, storage_options=options)
    with pytest.raises(StoreExistsError, match="pass overwrite=True"):
        zd.write_points(target, frame(points), chunk_shape=CHUNK, storage_options=options)
    got = zd.write_points(
        target, frame(points), chunk_shape=CHUNK, bin_shape=BIN, overwrite=True, storage_options=options
    )
    ref = one_shot(f"{prefix}/{uuid.uuid4().hex}.zarr", points, storage_options=options)
    assert_same_store(got, ref, np.unique(points["ids"]), target, options)
    # the old store's chunks (chunk_shape 1, up to x = 500) are gone
    assert all(
        not k.startswith("0/vertices/5")
        for k in zv.open(target, storage_options=options)._backend.list_keys()
    )


def test_bad_rows_are_refused_before_anything_is_written(client, points, s3, tmp_path):
    prefix, options = s3
    target = f"{prefix}/{uuid.uuid4().hex}.zarr"
    old = zv.write_points(target, [[1.0, 1.0, 1.0]], chunk_shape=1, storage_options=options)
    outside = ([0, 0, 0], [50, 100, 100])
    with pytest.raises(InputError, match=r"positions lie outside the store's bounds .* write a new store"):
        zd.write_points(
            target, frame(points), chunk_shape=CHUNK, bounds=outside, overwrite=True, storage_options=options
        )
    assert zv.open(target, storage_options=options).query().positions.tolist() == [[1.0, 1.0, 1.0]]
    assert old.vertex_count() == 1
    bad = points | {"pos": points["pos"].copy()}
    bad["pos"][123, 1] = np.nan
    with pytest.raises(InputError, match=r"NaN or infinite values"):
        zd.write_points(tmp_path / "nan.zarr", frame(bad), chunk_shape=CHUNK)
    assert not (tmp_path / "nan.zarr").exists()


def test_a_failing_task_leaves_an_s3_store_that_readers_refuse(client, points, s3):
    prefix, options = s3
    target = f"{prefix}/{uuid.uuid4().hex}.zarr"
    # A partition whose values do not fit the dtype its meta promises fails inside a task,
    # after the placeholder root is written.
    df = frame(points)
    df = df.map_partitions(lambda part: part.assign(label=part["label"].astype("int64") * 0 + 2**40), meta=df)
    with pytest.raises(InputError, match=r"attribute 'label' is int16 in this store"):
        zd.write_points(target, df, chunk_shape=CHUNK, storage_options=options)
    with pytest.raises(IncompleteStoreError):
        zv.open(target, storage_options=options)


def test_missing_and_unusable_columns_are_refused(client, points, tmp_path):
    df = frame(points)
    with pytest.raises(InputError, match=r"no position column 'z' .* columns=\[\.\.\.\]"):
        zd.write_points(
            tmp_path / "a.zarr",
            df.drop(columns="z").assign(w=1.0),
            chunk_shape=CHUNK,
            columns=["x", "y", "z"],
        )
    with pytest.raises(InputError, match=r"column 'name' has dtype .* numeric vertex attribute"):
        zd.write_points(tmp_path / "a.zarr", df.assign(name="a"), chunk_shape=CHUNK)
    with pytest.raises(InputError, match=r"object id column 'object_id' has dtype float64"):
        zd.write_points(tmp_path / "a.zarr", df.assign(object_id=1.5), chunk_shape=CHUNK)
    with pytest.raises(InputError, match=r"Dask DataFrame or a Dask array, got ndarray"):
        zd.write_points(tmp_path / "a.zarr", points["pos"], chunk_shape=CHUNK)
    with pytest.raises(InputError, match=r"unknown compression|compression"):
        zd.write_points(tmp_path / "a.zarr", df, chunk_shape=CHUNK, compression="nope")
    assert not (tmp_path / "a.zarr").exists()


def test_columns_name_the_axes_and_memory_targets_gather_on_the_client(client, points):
    p = points["pos"][:5000]
    df = dd.from_pandas(pd.DataFrame({"px": p[:, 0], "py": p[:, 1], "t": np.arange(5000)}), npartitions=3)
    got = zd.write_points("memory://dask-gather", df, chunk_shape=10, columns=["px", "py"])
    assert got.axes == ("px", "py")
    ref = zv.write_points(
        "memory://dask-gather-ref",
        p[:, :2],
        chunk_shape=10,
        attributes={"t": np.arange(5000)},
        axes=["px", "py"],
    )
    assert_same_store(got, ref, None, "memory://dask-gather")


def test_to_dask_of_a_box_and_of_the_level_is_brute_force(client, points, tmp_path):
    ds = one_shot(tmp_path / "ref.zarr", points)
    whole = zd.to_dask(ds)
    assert whole.npartitions == len(ds.level(0).vertices.nonempty)
    assert list(whole.columns) == ["x", "y", "z", "intensity", "label", "object_id"]
    out = whole.compute()
    want = sorted_rows(points["pos"], points["intensity"], points["label"], points["ids"])
    got = sorted_rows(out[["x", "y", "z"]].to_numpy(), out["intensity"], out["label"], out["object_id"])
    np.testing.assert_array_equal(got, want)
    assert out["object_id"].dtype == np.uint64 and out["label"].dtype == np.int16
    for lo, hi in BOXES:
        part = zd.to_dask(str(tmp_path / "ref.zarr"), (lo, hi)).compute()
        m = brute_force_box(points["pos"], lo, hi)
        np.testing.assert_array_equal(
            sorted_rows(part[["x", "y", "z"]].to_numpy(), part["object_id"]),
            sorted_rows(points["pos"][m], points["ids"][m]),
        )
    empty = zd.to_dask(ds, ([200, 200, 200], [300, 300, 300])).compute()
    assert len(empty) == 0 and list(empty.columns) == list(whole.columns)


def test_to_dask_reads_from_s3_on_the_workers(client, points, s3):
    prefix, options = s3
    target = f"{prefix}/{uuid.uuid4().hex}.zarr"
    zd.write_points(target, frame(points), chunk_shape=CHUNK, storage_options=options)
    lo, hi = BOXES[0]
    out = zd.to_dask(target, (lo, hi), storage_options=options).compute()
    m = brute_force_box(points["pos"], lo, hi)
    np.testing.assert_array_equal(
        sorted_rows(out[["x", "y", "z"]].to_numpy(), out["intensity"]),
        sorted_rows(points["pos"][m], points["intensity"][m]),
    )


def test_lines_meshes_and_skeletons_computed_on_the_cluster(client, tmp_path):
    rng = np.random.default_rng(3)
    lines = [rng.uniform(0, 50, (k, 3)) for k in (2, 5, 9)]
    got = zd.write_lines(
        tmp_path / "l.zarr", [dask.delayed(np.asarray)(line) for line in lines], chunk_shape=10
    )
    ref = zv.write_lines(tmp_path / "lr.zarr", lines, chunk_shape=10)
    for i in range(3):
        np.testing.assert_array_equal(got.objects([i]).positions, ref.objects([i]).positions)
    import dask.bag as db

    tet = (
        np.array([[0, 0, 0], [5, 0, 0], [0, 5, 0], [0, 0, 5.0]]),
        np.array([[0, 1, 2], [0, 1, 3], [1, 2, 3]]),
    )
    moved = (tet[0] + 20, tet[1])
    got = zd.write_meshes(tmp_path / "m.zarr", db.from_sequence([tet, moved], npartitions=2), chunk_shape=10)
    np.testing.assert_array_equal(np.sort(got.objects([1]).positions, axis=0), np.sort(moved[0], axis=0))
    trees = [
        (rng.uniform(0, 30, (4, 3)), np.array([-1, 0, 1, 1])),
        (rng.uniform(0, 30, (3, 3)), np.array([-1, 0, 0])),
    ]
    got = zd.write_skeletons(tmp_path / "s.zarr", [dask.delayed(t) for t in trees], chunk_shape=10)
    res = got.objects([1])
    np.testing.assert_array_equal(np.sort(res.positions, axis=0), np.sort(trees[1][0], axis=0))
    assert sorted(res.parents.tolist()) == [-1, 0, 0]


def _sharded(path: Any, array: str = "0/vertices") -> bool:
    doc = json.loads(Path(path, array, "zarr.json").read_text())
    return bool(doc["codecs"][0]["name"] == "sharding_indexed")


def test_sharded_by_default_and_one_file_per_cell_on_request(client, points, tmp_path):
    """DECISIONS item 10: the Dask writer shards every per-chunk array by default, each task
    writing whole shards; ``shards=None`` keeps one file per cell; both answer alike."""
    got = zd.write_points(tmp_path / "dask.zarr", frame(points), chunk_shape=CHUNK, bin_shape=BIN)
    ref = one_shot(tmp_path / "ref.zarr", points, shards=None)
    for array in ("0/vertices", "0/vertex_fragments", "0/vertex_attributes/intensity"):
        assert _sharded(tmp_path / "dask.zarr", array), array
    doc = json.loads((tmp_path / "dask.zarr" / "0" / "vertices" / "zarr.json").read_text())
    files = [f for f in (tmp_path / "dask.zarr" / "0" / "vertices" / "c").rglob("*") if f.is_file()]
    assert len(files) < len(doc["attributes"]["nonempty_chunks"])  # shards hold several cells
    assert_same_store(got, ref, np.unique(points["ids"]), tmp_path / "dask.zarr")
    plain = zd.write_points(
        tmp_path / "plain.zarr", frame(points), chunk_shape=CHUNK, bin_shape=BIN, shards=None
    )
    assert not _sharded(tmp_path / "plain.zarr")
    assert_same_store(plain, ref, np.unique(points["ids"]), tmp_path / "plain.zarr")
    explicit = zd.write_points(
        "memory://dask-shards", frame(points, 3), chunk_shape=CHUNK, bin_shape=BIN, shards=2
    )
    assert_same_store(explicit, ref, np.unique(points["ids"]), "memory://dask-shards")
