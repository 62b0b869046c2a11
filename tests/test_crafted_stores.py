"""Crafted and corrupted stores: every read fails with a library error naming what is wrong
and where, before allocating what the bad bytes claim; nothing comes back silently partial.

Each store is written with the library, then bytes or files are altered. The stores are
written one file per cell (``shards=None``) so that a cell's bytes can be edited as a file;
cells crafted inside shards are in ``tests/shards/``.
"""

from __future__ import annotations

import json
import re
import shutil
import struct
import time
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import trimesh

import zarr_vectors as zv
from tests._builders import icosphere
from zarr_vectors.engine.chunks.pipeline import Pipeline
from zarr_vectors.errors import CorruptCellError, FormatError
from zarr_vectors.format.fragments import HEADER, MAGIC, FragmentIndex, encode_fragments
from zarr_vectors.validation import validate

BOX = ([0, 0, 0], [60, 60, 60])  # cuts chunks of 25: whole and partial ones


# ------------------------------------------------------------------ helpers


def _doc(store: Path, node: str) -> dict[str, Any]:
    return json.loads((store / node / "zarr.json").read_text())


def _edit(store: Path, node: str, fn) -> None:
    doc = _doc(store, node)
    fn(doc)
    (store / node / "zarr.json").write_text(json.dumps(doc))


def _cells(store: Path, node: str) -> list[Path]:
    return sorted(p for p in (store / node / "c").rglob("*") if p.is_file())


def _pipe(store: Path, node: str) -> Pipeline:
    codecs = [c for c in _doc(store, node)["codecs"] if c["name"] != "draco"]
    return Pipeline.from_codecs(codecs)


def _set_payload(store: Path, node: str, cell: Path, payload: bytes) -> None:
    cell.write_bytes(_pipe(store, node).encode(payload))


def _points(tmp_path: Path, name: str = "p.zarr", **kw: Any) -> Path:
    rng = np.random.default_rng(3)
    pts = rng.uniform(0, 100, (3000, 3)).astype(np.float32)
    kw.setdefault("object_ids", np.arange(len(pts)) % 40)
    kw.setdefault("attributes", {"a": np.arange(len(pts), dtype=np.float32)})
    path = tmp_path / name
    zv.write_points(path, pts, chunk_shape=25, bin_shape=12.5, **{"shards": None, **kw})
    return path


def _lines(tmp_path: Path, **kw: Any) -> Path:
    rng = np.random.default_rng(5)
    lines = [np.cumsum(rng.normal(0, 4, (60, 3)), axis=0) + 50 for _ in range(30)]
    path = tmp_path / "l.zarr"
    zv.write_lines(path, lines, chunk_shape=25, **{"shards": None, **kw})
    return path


def _mesh(tmp_path: Path, **kw: Any) -> Path:
    path = tmp_path / "m.zarr"
    zv.write_mesh(path, *icosphere(3, 499, 500), chunk_shape=250, **{"shards": None, **kw})
    return path


def _zstd_frame_claiming(size: int, body: bytes = b"\0" * 64) -> bytes:
    """A zstd frame whose header declares ``size`` bytes of content (one raw block follows)."""
    descriptor = 0xC0  # 8-byte frame content size, window descriptor present, no checksum
    block = struct.pack("<I", 1 | (len(body) << 3))[:3] + body  # last block, raw
    return struct.pack("<IBB", 0xFD2FB528, descriptor, 0x58) + struct.pack("<Q", size) + block


def _fails_fast(fn, error: type[Exception], match: str, seconds: float = 10.0) -> None:
    start = time.perf_counter()
    with pytest.raises(error, match=match):
        fn()
    assert time.perf_counter() - start < seconds


# ------------------------------------------------------------------ decoders bounded by metadata


def test_zstd_frame_claiming_a_terabyte_is_a_corrupt_cell_not_a_memory_error(tmp_path):
    store = _points(tmp_path, compression="zstd")
    cell = _cells(store, "0/vertices")[0]
    cell.write_bytes(_zstd_frame_claiming(1 << 40))
    ds = zv.open(store)
    for read in (
        lambda: ds.query(([0, 0, 0], [100, 100, 100])),
        ds.read,
        lambda: ds.query(BOX, object_ids=False),
    ):
        _fails_fast(
            read,
            CorruptCellError,
            r"'0/vertices', chunk 0\.0\.0: zstd data claims 1099511627776 decoded bytes",
        )
    report = validate(store)
    assert [p.path for p in report.problems if "1099511627776" in p.message] == ["0/vertices/c/0/0/0"]


def test_gzip_stream_larger_than_the_level_allows_is_refused(tmp_path):
    store = _points(tmp_path, compression="gzip")
    cell = _cells(store, "0/vertices")[0]
    n = 6_000_000  # 72 MB of zero rows in one cell of a 3,000-vertex level
    cell.write_bytes(_gzip(struct.pack("<II", 1, 12 * n) + bytes(12 * n)))
    assert cell.stat().st_size < 200_000
    with pytest.raises(
        CorruptCellError,
        match=r"chunk 0\.0\.0: gzip data decodes to more than the 1084576 bytes this array.s metadata allows",
    ):
        zv.open(store).read()


def _gzip(data: bytes) -> bytes:
    comp = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    return comp.compress(data) + comp.flush()


def test_corrupt_gzip_cell_names_array_and_chunk(tmp_path):
    store = _points(tmp_path, compression="gzip")
    cell = _cells(store, "0/vertex_attributes/a")[1]
    raw = bytearray(cell.read_bytes())
    raw[len(raw) // 2 :] = bytes(len(raw) - len(raw) // 2)  # zeros over the second half
    cell.write_bytes(bytes(raw))
    with pytest.raises(CorruptCellError, match=r"'0/vertex_attributes/a', chunk 0\.0\.1: gzip"):
        zv.open(store).read()
    cell.write_bytes(bytes(raw[:10]))  # truncated inside the header
    with pytest.raises(CorruptCellError, match=r"'0/vertex_attributes/a', chunk 0\.0\.1: gzip"):
        zv.open(store).read()


def test_truncated_blosc_cell_is_refused_not_decoded_to_other_bytes(tmp_path):
    rng = np.random.default_rng(1)
    pts = rng.uniform(0, 100, (200_000, 3)).astype(np.float32)  # one 2.4 MB cell: several blosc blocks
    store = tmp_path / "b.zarr"
    zv.write_points(store, pts, chunk_shape=1000, compression="blosc", shards=None)
    cell = _cells(store, "0/vertices")[0]
    full = cell.read_bytes()
    cell.write_bytes(full[:-16])
    with pytest.raises(
        CorruptCellError, match=r"chunk 0\.0\.0: blosc header says the buffer is \d+ bytes but it holds"
    ):
        zv.open(store).read()
    claim = bytearray(full)
    claim[4:8] = struct.pack("<I", 0xFFFFFFF0)  # nbytes: 4 GiB
    cell.write_bytes(bytes(claim))
    with pytest.raises(CorruptCellError, match=r"blosc data claims 4294967280 decoded bytes"):
        zv.open(store).read()


@pytest.mark.parametrize("compression", ["zstd", "gzip", "blosc"])
def test_truncated_compressed_cell_is_a_corrupt_cell(tmp_path, compression):
    store = _points(tmp_path, compression=compression)
    cell = _cells(store, "0/vertices")[2]
    cell.write_bytes(cell.read_bytes()[:-5])
    with pytest.raises(CorruptCellError, match=rf"'0/vertices', chunk 0\.0\.2: {compression}"):
        zv.open(store).read()


def test_draco_blob_claiming_more_points_than_the_level_has_is_refused(tmp_path):
    sphere = trimesh.creation.icosphere(subdivisions=5)  # 10,242 vertices in one cell
    store = tmp_path / "d.zarr"
    zv.write_mesh(
        store, sphere.vertices * 499 + 500, sphere.faces, chunk_shape=1000, encoding="draco", shards=None
    )
    assert len(zv.open(store).read()) == 10242
    _edit(store, "0", lambda d: d["attributes"]["zarr_vectors_level"].update(vertex_count=100))
    with pytest.raises(
        CorruptCellError,
        match=r"'0/vertices', chunk 0\.0\.0: the Draco blob claims 10242 points; a cell holds at most 1824",
    ):
        zv.open(store).read()


# ------------------------------------------------------------------ counts in cells checked first


def test_fragment_index_claiming_four_billion_fragments_fails_fast(tmp_path):
    store = _points(tmp_path)
    cell = _cells(store, "0/vertex_fragments")[0]
    _set_payload(
        store, "0/vertex_fragments", cell, HEADER.pack(MAGIC, 1, 0, 2**32 - 1, 2**32 - 1) + bytes(64)
    )
    ds = zv.open(store)
    _fails_fast(
        lambda: ds.objects([0, 1, 2]),
        CorruptCellError,
        r"'0/vertex_fragments', chunk 0\.0\.0: fragment index",
    )
    _fails_fast(
        lambda: ds.query(BOX), CorruptCellError, r"'0/vertex_fragments', chunk 0\.0\.0: fragment index"
    )


def test_range_fragment_whose_end_overflows_int64_is_a_corrupt_cell(tmp_path):
    store = _points(tmp_path, object_ids=None)  # per-bin fragments: 8 ranges per chunk
    cell = _cells(store, "0/vertex_fragments")[0]
    f = 8
    starts = np.full(f, 2**62, np.int64)
    bad = encode_fragments(FragmentIndex.from_ranges(starts, starts))
    _set_payload(store, "0/vertex_fragments", cell, bad)
    # A box query without objects reads no fragment index (its answer does not depend on it);
    # the validator decodes every index and reports this one.
    report = zv.validate(store)
    assert not report.ok
    assert "0/vertex_fragments/c/0/0/0: fragment index: range fragment reaches past" in str(report)


def test_manifest_block_claiming_2_pow_33_fragments_is_refused_before_expanding(tmp_path):
    store = _points(tmp_path)
    pipe = _pipe(store, "0/object_index/manifests")
    items = pipe.decode_items((store / "0/object_index/manifests/c/0").read_bytes())
    crafted = struct.pack("<I", 1) + struct.pack("<3q", 0, 0, 0) + b"\x01" + struct.pack("<qq", 0, 2**33)
    items = [crafted] + [bytes(it) for it in items[1:]]
    (store / "0/object_index/manifests/c/0").write_bytes(pipe.encode_items(items))
    ds = zv.open(store)
    _fails_fast(
        lambda: ds.objects([0]), CorruptCellError, r"object_index/manifests', chunk 0: .*names fragments 0"
    )
    shutil.rmtree(store / "0/fragment_attributes")  # owners of a box's rows now come from the manifests
    _edit(
        store,
        "0",
        lambda d: d["attributes"]["zarr_vectors_level"]["arrays_present"].remove("fragment_attributes"),
    )
    _fails_fast(
        lambda: zv.open(store).query(BOX),
        CorruptCellError,
        r"object_index/manifests', chunk 0: .*a chunk holds at most",
    )
    report = validate(store)
    assert not report.ok


# ------------------------------------------------------------------ metadata validated before use


def test_object_attribute_shape_disagreeing_with_the_object_index_is_a_format_error(tmp_path):
    store = _points(tmp_path, object_attributes={"w": np.arange(40, dtype=np.float64)})
    _edit(store, "0/object_attributes/w", lambda d: d.update(shape=[2**40]))
    _fails_fast(
        lambda: zv.open(store).object_attributes("w"),
        FormatError,
        r"0/object_attributes/w has 1099511627776 rows but the level has 40 object index rows",
    )


def test_chunk_grid_too_large_to_index_is_a_format_error(tmp_path):
    store = _points(tmp_path)
    for node in (
        "0/vertices",
        "0/vertex_fragments",
        "0/vertex_attributes/a",
        "0/fragment_attributes/object_id",
    ):
        _edit(store, node, lambda d: d.update(shape=[2**21, 2**21, 2**22]))
    with pytest.raises(
        FormatError, match=r"'0/vertices': a grid of \[2097152, 2097152, 4194304\] cells is too large"
    ):
        zv.open(store).read()


@pytest.mark.parametrize(
    "chunk_shape, match",
    [
        ("Infinity", r"chunk_shape must hold finite numbers"),
        ("NaN", r"chunk_shape must hold finite numbers"),
        ([25, 25], r"bounds\[0\] must have 2 entries"),
        ([25, 0, 25], r"chunk_shape must be positive"),
        ([25, True, 25], r"chunk_shape must be a list of numbers"),
    ],
)
def test_root_chunk_shape_is_validated(tmp_path, chunk_shape, match):
    store = _points(tmp_path)
    text = (store / "zarr.json").read_text()
    doc = json.loads(text)
    value = [float(chunk_shape)] * 3 if isinstance(chunk_shape, str) else chunk_shape
    doc["attributes"]["zarr_vectors"]["chunk_shape"] = value
    (store / "zarr.json").write_text(json.dumps(doc))  # json writes Infinity / NaN as bare words
    with pytest.raises(FormatError, match=match):
        zv.open(store)


def test_level_chunk_shape_of_the_wrong_rank_is_a_format_error(tmp_path):
    store = _points(tmp_path)
    _edit(store, "0", lambda d: d["attributes"]["zarr_vectors_level"].update(chunk_shape=[25.0, 25.0]))
    with pytest.raises(
        FormatError, match=r"level 0: chunk_shape \[25.0, 25.0\] has 2 entries for 3 space axes"
    ):
        zv.open(store).read()


def test_deeply_nested_zarr_json_is_a_format_error(tmp_path):
    store = _points(tmp_path)
    (store / "0/vertex_attributes/a/zarr.json").write_text("[" * 200_000 + "]" * 200_000)
    with pytest.raises(FormatError, match=r"0/vertex_attributes/a: zarr.json nests deeper than 64 levels"):
        zv.open(store).read()


def test_non_utf8_zarr_json_names_the_node(tmp_path):
    store = _points(tmp_path)
    raw = (store / "0/vertices/zarr.json").read_bytes()
    (store / "0/vertices/zarr.json").write_bytes(raw.replace(b'"vertices"', b'"vert\xffices"', 1))
    with pytest.raises(FormatError, match=r"0/vertices: zarr.json is not UTF-8 text"):
        zv.open(store).read()
    (store / "zarr.json").write_bytes(b"\xfe\xff" + (store / "zarr.json").read_bytes())
    with pytest.raises(FormatError, match=r"\(root\): zarr.json is not"):
        zv.open(store)


@pytest.mark.parametrize("row_shape", [[0], [-1], [2.5], "x"])
def test_unusable_row_shape_is_a_format_error(tmp_path, row_shape):
    store = _points(tmp_path)
    _edit(store, "0/vertex_attributes/a", lambda d: d["attributes"].update(row_shape=row_shape))
    with pytest.raises(FormatError, match=r"'0/vertex_attributes/a': row_shape"):
        zv.open(store).read()


def test_non_numeric_cell_dtype_is_a_format_error(tmp_path):
    store = _points(tmp_path)
    _edit(store, "0/vertex_attributes/a", lambda d: d["attributes"].update(dtype="object"))
    with pytest.raises(
        FormatError, match=r"'0/vertex_attributes/a' has dtype 'object'; cell data must be a numeric"
    ):
        zv.open(store).read()


def test_lines_store_without_vertex_fragments_is_a_format_error(tmp_path):
    store = _lines(tmp_path)
    (store / "0/vertex_fragments/zarr.json").unlink()
    declared = r"declares 'vertex_fragments' in arrays_present but 0/vertex_fragments/zarr.json is missing"
    with pytest.raises(FormatError, match=declared):
        zv.open(store).read()
    with pytest.raises(FormatError, match=declared):
        zv.open(store).objects([0])


def test_nonempty_chunk_outside_the_grid_is_a_format_error(tmp_path):
    store = _points(tmp_path)
    _edit(store, "0/vertices", lambda d: d["attributes"]["nonempty_chunks"].append("9.0.0"))
    with pytest.raises(
        FormatError, match=r"'0/vertices': nonempty_chunks entry '9.0.0' lies outside its grid"
    ):
        zv.open(store).read()


# ------------------------------------------------------------------ nothing silently partial


def test_missing_cross_chunk_face_cell_of_a_mesh_is_a_corrupt_cell(tmp_path):
    store = _mesh(tmp_path)
    ds = zv.open(store)
    full = ds.read()
    cross = [n for n in ds.level(0).links if n != "0.0.0_0.0.0" and len(ds.level(0).links[n].nonempty)][0]
    arr = ds.level(0).links[cross]
    chunk = arr.nonempty[0]
    (store / arr.key(chunk)).unlink()
    key = ".".join(map(str, chunk))
    with pytest.raises(
        CorruptCellError,
        match=rf"'0/links/0/{re.escape(cross)}', chunk {key}: the chunk is listed in nonempty",
    ):
        zv.open(store).read()
    assert len(full.faces) == 1280


def test_missing_vertex_cell_is_a_corrupt_cell(tmp_path):
    store = _points(tmp_path)
    cell = _cells(store, "0/vertices")[5]
    cell.unlink()
    key = ".".join(cell.relative_to(store / "0/vertices/c").parts)  # the grid origin is 0
    with pytest.raises(
        CorruptCellError, match=rf"'0/vertices', chunk {key}: the chunk is listed in nonempty_chunks"
    ):
        zv.open(store).read()


def test_missing_manifest_bucket_of_a_lines_store_is_a_corrupt_cell(tmp_path):
    store = _lines(tmp_path)
    (store / "0/object_index/manifests/c/0").unlink()
    ds = zv.open(store)
    with pytest.raises(CorruptCellError, match=r"'0/object_index/manifests', chunk 0: the chunk is missing"):
        ds.objects([3])
    with pytest.raises(CorruptCellError, match=r"'0/object_index/manifests', chunk 0: the chunk is missing"):
        ds.query(([40, 40, 40], [60, 60, 60]), whole_objects=True)


def test_manifest_buckets_of_empty_objects_may_be_absent(tmp_path):
    """A bucket whose objects are all empty may be left out (writers may skip it): the store
    still reads in full, because num_objects - num_present leaves room for it."""
    rng = np.random.default_rng(2)
    pts = rng.uniform(0, 100, (500, 3))
    ids = 1500 + np.arange(len(pts)) % 10  # ids 0..1023 (bucket 0) have no points
    store = tmp_path / "sparse.zarr"
    # An object attribute with a row per id 0..1509 keeps the id space (objects without
    # vertices), so bucket 0 holds only empty manifests and another writer may leave it out.
    zv.write_points(
        store, pts, chunk_shape=25, object_ids=ids, object_attributes={"n": np.arange(1510)}, shards=None
    )
    (store / "0/object_index/manifests/c/0").unlink()
    ds = zv.open(store)
    res = ds.read()
    assert np.array_equal(np.sort(res.object_ids), np.sort(ids))
    got = ds.objects([1503])
    assert np.array_equal(np.sort(got.positions, axis=0), np.sort(pts[ids == 1503], axis=0))
    assert len(ds.objects([7])) == 0


def test_vertex_attribute_folder_without_zarr_json_is_a_format_error(tmp_path):
    store = _points(tmp_path)
    (store / "0/vertex_attributes/a/zarr.json").unlink()
    with pytest.raises(FormatError, match=r"0/vertex_attributes/a is a folder without a zarr.json"):
        zv.open(store).read()


def test_declared_attribute_family_that_is_gone_is_a_format_error(tmp_path):
    store = _points(tmp_path)
    shutil.rmtree(store / "0/vertex_attributes")
    with pytest.raises(
        FormatError, match=r"declares 'vertex_attributes' in arrays_present but 0/vertex_attributes/zarr"
    ):
        zv.open(store).read()


# ------------------------------------------------------------------ checksums


@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_checksums_catch_a_flipped_bit_anywhere(tmp_path, compression):
    store = _points(
        tmp_path,
        compression=compression,
        checksums=True,
        object_attributes={"w": np.arange(40, dtype=np.float64)},
    )
    for node in (
        "0/vertices",
        "0/vertex_fragments",
        "0/vertex_attributes/a",
        "0/object_index/manifests",
        "0/object_attributes/w",
        "0/fragment_attributes/object_id",
    ):
        assert _doc(store, node)["codecs"][-1] == {"name": "crc32c"}, node
    ds = zv.open(store)
    expected = ds.read()
    cell = _cells(store, "0/vertex_attributes/a")[3]
    good = cell.read_bytes()
    flipped = bytearray(good)
    flipped[len(flipped) // 2] ^= 0x10
    cell.write_bytes(bytes(flipped))
    with pytest.raises(
        CorruptCellError, match=r"'0/vertex_attributes/a', chunk 0\.0\.3: crc32c checksum mismatch"
    ):
        zv.open(store).read()
    report = validate(store)
    assert [p.path for p in report.problems] == ["0/vertex_attributes/a/c/0/0/3"]
    assert "crc32c" in report.problems[0].message
    cell.write_bytes(good)
    table = store / "0/object_attributes/w/c/0"
    raw = bytearray(table.read_bytes())
    raw[0] ^= 1
    table.write_bytes(bytes(raw))
    with pytest.raises(CorruptCellError, match=r"'0/object_attributes/w', chunk 0: crc32c checksum mismatch"):
        zv.open(store).object_attributes("w")
    got = zv.open(store).read()
    assert np.array_equal(got.positions, expected.positions)


def test_zarr_python_reads_checksummed_arrays(tmp_path):
    import zarr

    store = _points(
        tmp_path,
        compression="zstd",
        checksums=True,
        object_attributes={"w": np.arange(40, dtype=np.float64) * 1.5},
    )
    ds = zv.open(store)
    assert np.array_equal(
        zarr.open_array(str(store / "0/object_attributes/w"), mode="r")[:], ds.object_attributes("w")
    )
    verts = zarr.open_array(str(store / "0/vertices"), mode="r")
    level = ds.level(0)
    total = 0
    for chunk in level.vertices.nonempty:
        cell = tuple(int(c) for c in chunk - level.vertices.origin)
        one = verts[tuple(slice(c, c + 1) for c in cell)].ravel()[0]  # zarr 3.4 nests a scalar read
        rows = np.frombuffer(one, np.float32).reshape(-1, 3)
        total += len(rows)
        inside = np.all(np.floor(rows / 25) == chunk, axis=1)
        assert inside.all()
    assert total == ds.vertex_count()


def test_pyramid_levels_keep_the_checksum_choice(tmp_path):
    store = _points(tmp_path, compression="zstd", checksums=True)
    ds = zv.open(store, mode="r+")
    ds.build_pyramid([2])
    assert _doc(store, "1/vertices")["codecs"][-1] == {"name": "crc32c"}
    assert _doc(store, "1/vertices")["codecs"][1]["name"] == "zstd"
    assert len(zv.open(store).read(level=1)) > 0
    plain = _points(tmp_path, name="plain.zarr", compression="zstd")
    zv.open(plain, mode="r+").build_pyramid([2])
    assert all(c["name"] != "crc32c" for c in _doc(plain, "1/vertices")["codecs"])


def test_a_text_table_bomb_is_refused_under_a_bound_from_its_rows(tmp_path):
    """A gzip cell of a string object attribute that inflates to GiBs is refused once it
    passes 1 MiB per row (plus slack), long before the 2 GiB ceiling; long labels still read."""
    import gzip
    import time

    pts = np.arange(30, dtype=np.float32).reshape(10, 3)
    names = np.array(["x" * 300_000] + [f"n{i}" for i in range(1, 10)])
    store = tmp_path / "t.zarr"
    zv.write_points(
        store,
        pts,
        chunk_shape=10,
        object_ids=np.arange(10),
        object_attributes={"name": names},
        compression="gzip",
    )
    assert zv.open(store).object_attributes("name")[0] == "x" * 300_000
    cell = store / "0/object_attributes/name/c/0"
    cell.write_bytes(gzip.compress(bytes(64 << 20), compresslevel=1))
    t0 = time.perf_counter()
    with pytest.raises(CorruptCellError, match=r"decodes to more than the 1\d{7} bytes"):
        zv.open(store).object_attributes("name")
    assert time.perf_counter() - t0 < 5
    assert not zv.validate(store).ok
