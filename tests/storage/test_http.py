"""Stores read over plain HTTP from a static web server on 127.0.0.1 (tests/_latency.py).

Each store is written locally, served by :class:`StaticServer` (single ranges, directory
pages on or off), and opened by ``http://`` URL: every answer must equal the local store's
and numpy brute force. HTTP stores are read-only, and a listing the server cannot give is a
StoreError saying what needs it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import fsspec
import numpy as np
import pytest

import zarr_vectors as zv
from tests._builders import icosphere, random_walks
from tests._latency import LatencyProxy, StaticServer
from tests.conftest import brute_force_box, sorted_rows
from tests.kinds.test_lines import _brute_pieces
from zarr_vectors.storage.protocol import CONCURRENCY

N_POINTS = 3000


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, object]]]:
    """Three stores (points with ids and an attribute, lines, a mesh) in one folder, and their inputs."""
    root = tmp_path_factory.mktemp("www")
    rng = np.random.default_rng(7)
    pos = rng.uniform(0, 1000, (N_POINTS, 3)).astype(np.float32)
    ids = rng.integers(0, 40, N_POINTS) * 3 + 5  # sparse ids
    inten = rng.random(N_POINTS).astype(np.float32)
    # one file per cell: the request counts below are those of cells (shards: test_sharded_s3.py)
    zv.write_points(
        root / "p.zarr", pos, chunk_shape=200, object_ids=ids, attributes={"i": inten}, shards=None
    )
    zv.write_points(root / "bare.zarr", pos, chunk_shape=250)
    lines = random_walks(rng, 40)
    zv.write_lines(root / "l.zarr", lines, chunk_shape=120)
    v, f = icosphere(3, 499.0, 500.0)
    zv.write_mesh(root / "m.zarr", v, f, chunk_shape=250)
    yield root, {"pos": pos, "ids": ids, "inten": inten, "lines": lines, "v": v, "f": f}


@pytest.fixture(scope="module")
def server(served: tuple[Path, dict[str, object]]) -> Iterator[StaticServer]:
    with StaticServer(served[0], listings=True) as srv:
        yield srv


@pytest.fixture(scope="module")
def bare_server(served: tuple[Path, dict[str, object]]) -> Iterator[StaticServer]:
    """The same folder without directory pages: like a bucket's public website."""
    with StaticServer(served[0], listings=False) as srv:
        yield srv


def _boxes(seed: int, n: int = 6) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        lo = rng.uniform(0, 800, 3)
        out.append((lo, lo + rng.uniform(80, 500, 3)))
    return out


def test_static_server_answers_single_ranges(served, server):
    root = served[0]
    data = (root / "p.zarr" / "zarr.json").read_bytes()
    fs = fsspec.filesystem("http")
    url = f"{server.url}/p.zarr/zarr.json"
    assert fs.cat_file(url) == data
    assert fs.cat_file(url, start=10, end=60) == data[10:60]
    assert fs.cat_file(url, start=len(data) - 7) == data[-7:]
    assert fs.info(url)["size"] == len(data)
    with pytest.raises(FileNotFoundError):
        fs.cat_file(f"{server.url}/p.zarr/nothing")


@pytest.mark.slow  # over a second
def test_points_with_ids_equal_local_and_brute_force(served, server):
    root, inputs = served
    pos, ids, inten = inputs["pos"], inputs["ids"], inputs["inten"]
    remote = zv.open(f"{server.url}/p.zarr")
    local = zv.open(root / "p.zarr")
    assert remote.geometry_types == local.geometry_types
    for lo, hi in _boxes(1):
        got, ref = remote.query((lo, hi)), local.query((lo, hi))
        inside = brute_force_box(pos, lo, hi)
        assert np.array_equal(sorted_rows(got.positions), sorted_rows(ref.positions))
        assert np.array_equal(
            sorted_rows(got.positions, got.object_ids, got.attributes["i"]),
            sorted_rows(pos[inside], ids[inside], inten[inside]),
        )
    whole = remote.objects([8, 11])
    assert np.array_equal(sorted_rows(whole.positions), sorted_rows(pos[np.isin(ids, [8, 11])]))
    assert len(remote.read()) == N_POINTS


def test_lines_equal_local_and_brute_force(served, server):
    root, inputs = served
    lines = inputs["lines"]
    remote, local = zv.open(f"{server.url}/l.zarr"), zv.open(root / "l.zarr")
    for lo, hi in _boxes(2):
        got, ref = remote.query((lo, hi)), local.query((lo, hi))
        assert np.array_equal(got.positions, ref.positions) and np.array_equal(got.edges, ref.edges)
        assert sorted(tuple(map(tuple, p)) for p in got.lines) == sorted(_brute_pieces(lines, lo, hi))
    res = remote.objects([3])
    assert np.array_equal(res.lines[0], lines[3])


def test_mesh_equals_local_and_brute_force(served, server):
    root, inputs = served
    v, f = inputs["v"], inputs["f"]
    remote, local = zv.open(f"{server.url}/m.zarr"), zv.open(root / "m.zarr")
    for lo, hi in _boxes(3):
        got, ref = remote.query((lo, hi)), local.query((lo, hi))
        assert np.array_equal(got.positions, ref.positions) and np.array_equal(got.faces, ref.faces)
        inside = brute_force_box(v, lo, hi)
        assert np.array_equal(sorted_rows(got.positions), sorted_rows(v[inside]))
        assert len(got.faces) == int(inside[f].all(axis=1).sum())
    whole = remote.objects([0])
    assert len(whole.faces) == len(f) and len(whole.positions) == len(v)


def test_no_directory_pages_needed_without_attribute_arrays(served, bare_server):
    pos = served[1]["pos"]
    ds = zv.open(f"{bare_server.url}/bare.zarr")
    for lo, hi in _boxes(4, 3):
        assert np.array_equal(
            sorted_rows(ds.query((lo, hi)).positions), sorted_rows(pos[brute_force_box(pos, lo, hi)])
        )


@pytest.mark.parametrize("name", ["p.zarr", "l.zarr", "m.zarr"])
def test_a_listing_the_server_cannot_give_says_what_needs_it(served, bare_server, name):
    with pytest.raises(zv.StoreError, match="no directory page") as err:
        zv.open(f"{bare_server.url}/{name}").level(0)
    assert "attribute arrays" in str(err.value) and "validate" in str(err.value)
    with pytest.raises(zv.StoreError, match="no directory page"):
        zv.validate(f"{bare_server.url}/bare.zarr")


@pytest.mark.slow  # over a second
def test_validate_over_directory_pages(served, server):
    report = zv.validate(f"{server.url}/p.zarr")
    assert report.ok, report


def test_http_stores_are_read_only(served, server):
    url = f"{server.url}/p.zarr"
    with pytest.raises(zv.ReadOnlyError, match="read-only"):
        zv.write_points(f"{server.url}/new.zarr", served[1]["pos"], chunk_shape=100)
    with pytest.raises(zv.ReadOnlyError, match="read-only"):
        zv.open(url, mode="r+")
    assert not (served[0] / "new.zarr").exists()


def test_missing_store_over_http(server):
    with pytest.raises(zv.FormatError, match="no zarr.json"):
        zv.open(f"{server.url}/absent.zarr")


@pytest.mark.slow  # over a second
def test_box_query_through_the_latency_proxy_takes_two_waves(served, server):
    """Metadata is read on open; a box then needs one wave of cell reads (fewer than
    CONCURRENCY here, so all in flight together) and one read of the root (the check)."""
    pos = served[1]["pos"]
    with LatencyProxy(server.url, delay=0.6) as proxy:  # longer than any stall of the client, even under load
        ds = zv.open(f"{proxy.url}/p.zarr")
        lo, hi = np.array([150.0, 150, 150]), np.array([350.0, 350, 350])  # 2 x 2 x 2 chunks of 200
        ds.query((lo, hi))  # connections opened (each new one is a thread of the proxy)
        with proxy.measure() as window:
            res = ds.query((lo, hi))
        assert len(res) == int(brute_force_box(pos, lo, hi).sum())
        t = window.traffic
        assert t.count - 1 < CONCURRENCY
        assert t.waves == 2, (
            t.summary()
        )  # (depth can exceed it when issuing 50 requests takes longer than the delay)
        assert t.requests[-1].path == "/p.zarr/zarr.json"  # the consistency check, last
        assert all("/c/" in r.path for r in t.requests[:-1])
        assert t.by_method() == {"GET": t.count}
        assert t.bytes_out > 0 and t.bytes_in == 0


def test_backend_lists_through_directory_pages_like_the_local_store(served, server):
    """Every key and folder of a mesh store (names with ``+``, percent-encoded in the pages)."""
    from zarr_vectors.storage.http_store import HttpStoreBackend
    from zarr_vectors.storage.local import LocalBackend
    from zarr_vectors.storage.resolve import open_backend

    root = served[0] / "m.zarr"
    remote = open_backend(f"{server.url}/m.zarr", read_only=True)
    local = LocalBackend(root, read_only=True)
    assert isinstance(remote, HttpStoreBackend) and remote.read_only
    assert sorted(remote.list_keys()) == sorted(local.list_keys())
    assert remote.list_dir("0/links/0") == local.list_dir("0/links/0")
    assert remote.list_dir("0/absent") == []
    assert remote.key_sizes("0/vertices") == local.key_sizes("0/vertices")
    assert remote.get_many(["zarr.json", "nothing"]) == [(root / "zarr.json").read_bytes(), None]
    assert not remote.is_empty()
    with pytest.raises(zv.ReadOnlyError):
        remote.set_many([("x", b"1")])
    with pytest.raises(zv.ReadOnlyError):
        remote.delete_many(["zarr.json"])
