"""Every ``compression=`` name on every kind of store: exact round trips, the codec named in each
array's ``zarr.json``, pyramids that keep it, and the errors for unknown codecs (argument or store)."""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import shapely
import trimesh

import zarr_vectors as zv
from tests.conftest import sorted_rows
from zarr_vectors.engine.chunks.pipeline import CHECKSUM_CODEC, compression_names, compressor_json
from zarr_vectors.errors import CorruptCellError, FormatError, InputError
from zarr_vectors.format.shards import inner_codecs
from zarr_vectors.validation import validate

COMPRESSIONS = compression_names()
KINDS = ["points", "lines", "graph", "skeleton", "mesh", "geometries"]


def _lines(seed: int = 4) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [np.cumsum(rng.normal(0, 6, (int(rng.integers(5, 40)), 3)), axis=0) + 100 for _ in range(12)]


def _tree(n: int = 200) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(6)
    parents = np.array([-1] + [int(rng.integers(max(0, i - 8), i)) for i in range(1, n)])
    pos = np.zeros((n, 3))
    for i in range(1, n):
        pos[i] = pos[parents[i]] + rng.normal(0, 12, 3)
    return (pos + 300).astype(np.float32), parents


def _sphere() -> tuple[np.ndarray, np.ndarray]:
    m = trimesh.creation.icosphere(subdivisions=2)
    return m.vertices * 99 + 100, m.faces.astype(np.int64)


def _polygons() -> list[Any]:
    return [shapely.Point(1, 2).buffer(1.5, quad_segs=4), shapely.box(3, 3, 7, 5), shapely.box(-4, 0, -1, 9)]


def _write(kind: str, path: Path, compression: str, **kw: Any) -> zv.Dataset:
    """A small store of ``kind``; the data is the same for every compression."""
    if kind == "points":
        rng = np.random.default_rng(2)
        pos = rng.uniform(0, 100, (1500, 3)).astype(np.float32)
        return zv.write_points(
            path,
            pos,
            chunk_shape=25,
            attributes={"a": np.arange(1500, dtype=np.float32)},
            object_ids=np.arange(1500) % 13,
            compression=compression,
            **kw,
        )
    if kind == "lines":
        return zv.write_lines(path, _lines(), chunk_shape=20, compression=compression, **kw)
    if kind == "graph":
        rng = np.random.default_rng(8)
        pos = rng.uniform(0, 100, (300, 3))
        edges = rng.integers(0, 300, (600, 2))
        return zv.write_graph(
            path, pos, edges[edges[:, 0] != edges[:, 1]], chunk_shape=30, compression=compression
        )
    if kind == "skeleton":
        pos, parents = _tree()
        return zv.write_skeleton(path, pos, parents, chunk_shape=40, compression=compression, **kw)
    if kind == "mesh":
        v, f = _sphere()
        return zv.write_mesh(path, v, f, chunk_shape=60, compression=compression, **kw)
    return zv.write_geometries(path, _polygons(), chunk_shape=2.5, compression=compression)


def _everything(ds: zv.Dataset) -> Any:
    """The whole store: an object read of lines (in order along each line), else a query of
    the whole space."""
    if ds.geometry_types[0] in ("polyline", "streamline"):
        return ds.objects(np.arange(ds.num_objects()))
    return ds.query()


def _expect_input(kind: str, got: Any) -> None:
    """The read equals the data written, exactly (compared as sets where order is free)."""
    if kind == "points":
        rng = np.random.default_rng(2)
        pos = rng.uniform(0, 100, (1500, 3)).astype(np.float32)
        want = sorted_rows(pos, np.arange(1500, dtype=np.float32), np.arange(1500) % 13)
        assert np.array_equal(sorted_rows(got.positions, got.attributes["a"], got.object_ids), want)
    elif kind == "lines":
        assert [line.tolist() for line in got.lines] == [line.tolist() for line in _lines()]
    elif kind == "skeleton":
        pos, parents = _tree()
        assert np.array_equal(sorted_rows(got.positions), sorted_rows(pos))
        by_row = {tuple(p): i for i, p in enumerate(pos.tolist())}
        back = np.array([by_row[tuple(p)] for p in got.positions.tolist()])
        assert np.array_equal(np.where(got.parents >= 0, back[got.parents], -1), parents[back])
    elif kind == "mesh":
        v, f = _sphere()
        tri = {tuple(sorted(map(tuple, t))) for t in v[f].tolist()}
        assert {tuple(sorted(map(tuple, t))) for t in got.positions[got.faces].tolist()} == tri
    elif kind == "geometries":
        assert np.array_equal(sorted_rows(got.positions), sorted_rows(shapely.get_coordinates(_polygons())))


@pytest.fixture(scope="module")
def uncompressed(tmp_path_factory) -> dict[str, Any]:
    """Each kind written without compression, read back whole: what every codec must give."""
    root = tmp_path_factory.mktemp("none")
    return {kind: _everything(_write(kind, root / f"{kind}.zarr", "none")) for kind in KINDS}


def _same(a: Any, b: Any) -> None:
    for name in ("positions", "object_ids", "edges", "faces", "line_offsets", "parents"):
        x, y = getattr(a, name), getattr(b, name)
        assert (x is None) == (y is None), name
        if x is not None:
            assert np.array_equal(x, y), name
    assert a.attributes.keys() == b.attributes.keys()
    assert all(np.array_equal(a.attributes[k], b.attributes[k]) for k in a.attributes)


@pytest.mark.filterwarnings("ignore:Numcodecs codecs are not in the Zarr version 3 specification")
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_every_compression_round_trips_every_kind(tmp_path, uncompressed, kind, compression):
    ds = _write(kind, tmp_path / "s.zarr", compression)
    got = _everything(zv.open(tmp_path / "s.zarr"))
    _expect_input(kind, got)
    _same(got, uncompressed[kind])
    _same(ds.query(), zv.open(tmp_path / "s.zarr").query())
    docs = [json.loads(p.read_text()) for p in (tmp_path / "s.zarr").rglob("zarr.json")]
    arrays = [d for d in docs if d.get("node_type") == "array"]
    want = compressor_json(compression)
    for doc in arrays:  # every array carries the codec; blosc links use bit shuffle
        tail = inner_codecs(doc)[1:]  # the codecs of a cell, inside shards or not
        assert tail in (want, compressor_json("blosc-bitshuffle") if compression == "blosc" else want)
    assert not validate(tmp_path / "s.zarr").problems


@pytest.mark.parametrize("compression", ["lz4", "blosc", "zlib"])
def test_draco_meshes_take_any_compression_after_the_codec(tmp_path, compression):
    v, f = _sphere()
    zv.write_mesh(tmp_path / "d.zarr", v, f, chunk_shape=60, encoding="draco", compression=compression)
    doc = json.loads((tmp_path / "d.zarr/0/vertices/zarr.json").read_text())
    assert [c["name"] for c in inner_codecs(doc)] == [
        "draco",
        "vlen-bytes",
        *(c["name"] for c in compressor_json(compression)),
    ]
    got = _everything(zv.open(tmp_path / "d.zarr"))
    plain = _everything(zv.write_mesh(tmp_path / "p.zarr", v, f, chunk_shape=60, encoding="draco"))
    _same(got, plain)


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_pyramid_keeps_the_compression_of_level0(tmp_path, compression):
    rng = np.random.default_rng(9)
    pos = rng.uniform(0, 200, (3000, 3)).astype(np.float32)
    kw = {
        "chunk_shape": 50,
        "bin_shape": 25,
        "bounds": ([0] * 3, [200] * 3),
        "object_ids": np.arange(3000) % 17,
    }
    zv.write_points(tmp_path / "p.zarr", pos, compression=compression, **kw)
    zv.write_points(tmp_path / "n.zarr", pos, **kw)
    for name in ("p.zarr", "n.zarr"):
        zv.open(tmp_path / name, mode="r+").build_pyramid([2])
    level0 = inner_codecs(json.loads((tmp_path / "p.zarr/0/vertices/zarr.json").read_text()))
    level1 = inner_codecs(json.loads((tmp_path / "p.zarr/1/vertices/zarr.json").read_text()))
    assert level1 == level0 == [{"name": "vlen-bytes", "configuration": {}}, *compressor_json(compression)]
    ours, plain = zv.open(tmp_path / "p.zarr"), zv.open(tmp_path / "n.zarr")
    _same(ours.read(level=1).sorted(), plain.read(level=1).sorted())


@pytest.mark.parametrize("compression", ["lz4", "blosc"])
def test_pyramid_of_lines_keeps_the_compression(tmp_path, compression):
    lines = [line.astype(np.float32) for line in _lines()]
    store = tmp_path / "l.zarr"
    zv.write_lines(store, lines, chunk_shape=20, compression=compression, checksums=True)
    zv.open(store, mode="r+").build_pyramid([2])
    seen = set()
    for path in store.rglob("zarr.json"):
        doc = json.loads(path.read_text())
        if doc["node_type"] == "array":
            node = path.parent.relative_to(store).as_posix()
            links = node.split("/")[1] == "links"
            want = compressor_json("blosc-bitshuffle" if links and compression == "blosc" else compression)
            assert inner_codecs(doc)[1:] == [*want, CHECKSUM_CODEC], node
            seen.add((node.split("/")[0], links))
    assert seen == {("0", False), ("0", True), ("1", False), ("1", True)}
    ds = zv.open(store)
    assert ds.read(level=1).positions.shape[0] == ds.vertex_count(1)


def test_unknown_compression_is_an_input_error_and_writes_nothing(tmp_path):
    pos = np.zeros((3, 3), np.float32)
    with pytest.raises(
        InputError,
        match=r"compression must be one of 'none', 'zstd', 'gzip', 'blosc', .*'lz4'.*; got 'snappy'",
    ):
        zv.write_points(tmp_path / "s.zarr", pos, chunk_shape=1, compression="snappy")
    assert not (tmp_path / "s.zarr").exists()
    zv.write_points(tmp_path / "s.zarr", pos + 1, chunk_shape=1)
    with pytest.raises(InputError, match="got 'snappy'"):
        zv.write_lines(tmp_path / "s.zarr", [pos], chunk_shape=1, compression="snappy", overwrite=True)
    assert np.array_equal(zv.open(tmp_path / "s.zarr").read().positions, pos + 1)  # untouched


def _points(tmp_path: Path, compression: str) -> Path:
    """A points store of one file per cell: the tests below edit its cells and codecs as files."""
    _write("points", tmp_path / "p.zarr", compression, shards=None)
    return tmp_path / "p.zarr"


def _edit_codecs(store: Path, node: str, codecs: list[dict[str, Any]]) -> None:
    path = store / node / "zarr.json"
    doc = json.loads(path.read_text())
    doc["codecs"] = codecs
    path.write_text(json.dumps(doc))


@pytest.mark.parametrize(
    ("codec", "message"),
    [
        (
            {"name": "numcodecs.snappy", "configuration": {}},
            "codec 'numcodecs.snappy' is not a bytes-to-bytes codec zarr knows",
        ),
        (
            {"name": "numcodecs.delta", "configuration": {"dtype": "<i4"}},
            "codec 'numcodecs.delta' is not a bytes-to-bytes",
        ),
        (
            {"name": "numcodecs.lz4", "configuration": {"speed": 2}},
            "codec 'numcodecs.lz4' with configuration",
        ),
    ],
)
def test_a_store_naming_an_unknown_codec_is_a_format_error_naming_the_array(tmp_path, codec, message):
    store = _points(tmp_path, "none")
    _edit_codecs(store, "0/vertex_attributes/a", [{"name": "vlen-bytes", "configuration": {}}, codec])
    with pytest.raises(FormatError, match=rf"array '0/vertex_attributes/a' uses codecs .*{message}"):
        zv.open(store).read()


def _zlib_bomb(n: int) -> bytes:
    return zlib.compress(struct.pack("<II", 1, n) + bytes(n), 9)


@pytest.mark.parametrize(
    ("compression", "crafted", "message"),
    [
        (
            "lz4",
            lambda: struct.pack("<I", 0xFFFFFFF0) + bytes(32),
            "lz4 data claims 4294967280 decoded bytes",
        ),
        ("zlib", lambda: _zlib_bomb(40_000_000), r"zlib data decodes to more than the \d+ bytes"),
        ("bz2", lambda: __import__("bz2").compress(bytes(40_000_000)), "bz2 data decodes to more than"),
        (
            "lzma",
            lambda: __import__("lzma").compress(bytes(40_000_000), preset=1),
            "lzma data decodes to more than",
        ),
    ],
)
def test_crafted_cell_of_a_new_codec_is_a_corrupt_cell_before_it_is_decoded(
    tmp_path, compression, crafted, message
):
    store = _points(tmp_path, compression)
    cell = sorted(p for p in (store / "0/vertices/c").rglob("*") if p.is_file())[0]
    cell.write_bytes(crafted())
    with pytest.raises(CorruptCellError, match=rf"'0/vertices', chunk \d+\.\d+\.\d+: {message}"):
        zv.open(store).read()
    assert str(cell.relative_to(store)) in {p.path for p in validate(store).problems}


@pytest.mark.parametrize("compression", ["lz4", "zlib", "bz2", "lzma", "blosc"])
def test_truncated_cell_of_each_codec_is_a_corrupt_cell(tmp_path, compression):
    store = _points(tmp_path, compression)
    cell = sorted(p for p in (store / "0/vertices/c").rglob("*") if p.is_file())[2]
    cell.write_bytes(cell.read_bytes()[:-5])
    with pytest.raises(CorruptCellError, match=rf"'0/vertices', chunk \d+\.\d+\.\d+: {compression}"):
        zv.open(store).read()
