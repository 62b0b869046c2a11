"""The Draco package: cell blobs (every vertex, every face, bounded error), the zarr and numcodecs codecs.

No ``__init__.py`` here on purpose: with one, pytest would import this folder as a package
named ``codecs``, which is the standard library's.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import struct
import subprocess
import sys
import warnings
from collections import Counter
from pathlib import Path

import DracoPy
import numcodecs
import numpy as np
import pytest
import zarr
import zarr.registry
import zarr_vectors_draco
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from zarr.codecs import VLenBytesCodec
from zarr.core.dtype import VariableLengthBytes
from zarr_vectors_draco import (
    CODEC_UNAVAILABLE_MESSAGE,
    Draco,
    DracoCodec,
    DracoCodecError,
    DracoDecodeError,
    DracoInputError,
    DracoUnavailableError,
    decode_cell,
    encode_cell,
    quantization_bound,
    require_draco_codec,
)

import zarr_vectors as zv
from tests._builders import icosphere
from zarr_vectors import _draco
from zarr_vectors.errors import CorruptCellError, DecodeError, FormatError, InputError, ZarrVectorsError
from zarr_vectors.format.shards import inner_codecs

NO_FACES = np.zeros((0, 3), dtype=np.int64)
SEQUENTIAL, EDGEBREAKER = 0, 1


# ---------------------------------------------------------------- helpers (brute force, no library code)


def face_multiset(faces) -> Counter:
    """Faces as a multiset of cyclic triples: each face keyed by its smallest rotation."""
    out: Counter = Counter()
    for a, b, c in np.asarray(faces, dtype=np.int64).tolist():
        out[min((a, b, c), (b, c, a), (c, a, b))] += 1
    return out


def method(blob: bytes) -> int:
    """Draco header byte 8: 0 sequential, 1 edgebreaker (mesh) or kd-tree (point cloud)."""
    return blob[8]


def roundtrip(positions, faces, bits: int = 11, level: int = 7) -> tuple[bytes, np.ndarray]:
    """Encode, decode and assert the full contract of encode_cell; returns (blob, order)."""
    positions = np.asarray(positions)
    faces = np.asarray(faces, dtype=np.int64).reshape(-1, 3)
    blob, order = encode_cell(positions, faces, quantization_bits=bits, compression_level=level)
    points, decoded_faces = decode_cell(blob)
    n = len(positions)
    assert isinstance(blob, bytes) and blob[:5] == b"DRACO"
    assert order.dtype == np.int64 and sorted(order.tolist()) == list(range(n))
    assert points.dtype == np.float32 and points.shape == (n, 3)
    assert decoded_faces.dtype == np.int64 and decoded_faces.shape == (len(faces), 3)
    error = np.abs(points.astype(np.float64) - positions.astype(np.float64)[order]).max()
    assert error <= quantization_bound(positions, bits)
    assert face_multiset(order[decoded_faces]) == face_multiset(faces)
    return blob, order


def sphere(subdivisions: int = 2, scale: float = 100.0) -> tuple[np.ndarray, np.ndarray]:
    return icosphere(subdivisions, scale)


def shuffled(positions: np.ndarray, faces: np.ndarray, rng: np.random.Generator):
    """The same mesh with its vertices renumbered randomly."""
    perm = rng.permutation(len(positions))
    inverse = np.argsort(perm)
    return positions[perm], inverse[faces]


def chunk_cells(positions: np.ndarray, faces: np.ndarray, chunk: float):
    """(positions, intra faces) of every chunk, vertices assigned by floor(p / chunk)."""
    keys = np.unique(np.floor(positions / chunk), axis=0, return_inverse=True)[1].reshape(-1)
    fk = keys[faces]
    intra = (fk[:, 0] == fk[:, 1]) & (fk[:, 1] == fk[:, 2])
    for k in range(keys.max() + 1):
        members = np.flatnonzero(keys == k)
        local = np.full(len(positions), -1)
        local[members] = np.arange(len(members))
        yield positions[members], local[faces[intra & (fk[:, 0] == k)]]


# ---------------------------------------------------------------- encode_cell / decode_cell


def test_closed_mesh_uses_edgebreaker_and_keeps_every_vertex(rng):
    positions, faces = shuffled(*sphere(3), rng)
    blob, _ = roundtrip(positions, faces)
    assert method(blob) == EDGEBREAKER
    assert len(blob) < 0.2 * (12 * len(positions) + 6 * len(faces))


@pytest.mark.parametrize("isolated", [1, 2, 3, 17])
def test_vertices_used_by_no_face_are_kept(rng, isolated):
    positions, faces = sphere(2)
    extra = rng.uniform(-100, 100, (isolated, 3))
    cell = np.concatenate([positions, extra])
    cell, faces = shuffled(cell, faces, rng)
    blob, _ = roundtrip(cell, faces)
    assert method(blob) == EDGEBREAKER


def test_duplicate_positions_stay_separate_vertices(rng):
    positions, faces = sphere(2)
    # A seam: faces around vertex 0 rewired to a copy of it, plus copies of isolated points.
    copy = np.concatenate([positions, positions[:1], positions[5:6], positions[5:6]])
    faces = faces.copy()
    around = np.flatnonzero((faces == 0).any(axis=1))[:2]
    faces[around] = np.where(faces[around] == 0, len(positions), faces[around])
    blob, _ = roundtrip(copy, faces)
    assert method(blob) == EDGEBREAKER


def test_many_copies_of_one_position_round_trip():
    positions, faces = sphere(1)
    many = np.concatenate([positions, np.repeat(positions[:1], 200, axis=0)])  # > 125 copies
    roundtrip(many, faces)


@pytest.mark.parametrize(
    "name, faces",
    [
        ("bowtie", [[0, 1, 2], [0, 3, 4]]),
        ("edge shared by three faces", [[0, 1, 2], [1, 0, 3], [0, 1, 4]]),
        ("face twice", [[0, 1, 2], [0, 1, 2]]),
        ("face twice, rotated", [[0, 1, 2], [1, 2, 0]]),
        ("both windings", [[0, 1, 2], [0, 2, 1]]),
        ("inconsistent winding", [[0, 1, 2], [1, 2, 3]]),
        ("isolated beside a bowtie", [[0, 1, 2], [0, 3, 4]]),
    ],
)
def test_non_manifold_faces_round_trip(name, faces):
    positions = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [-1, 0, 0], [0, -1, 0], [5, 5, 5]], dtype=float)
    roundtrip(positions, faces)


def test_faces_with_a_repeated_vertex_fall_back_to_sequential():
    positions, faces = sphere(1)
    faces = np.concatenate([faces, [[0, 0, 1], [2, 2, 2]]])
    blob, order = roundtrip(positions, faces)
    assert method(blob) == SEQUENTIAL
    assert np.array_equal(order, np.arange(len(positions)))


def test_level_zero_keeps_input_order():
    positions, faces = sphere(1)
    blob, order = roundtrip(positions, faces, level=0)
    assert method(blob) == SEQUENTIAL and np.array_equal(order, np.arange(len(positions)))


def test_zero_faces_is_an_order_keeping_point_cloud(rng):
    points = rng.uniform(0, 10, (50, 3))
    points[10:20] = points[0]  # duplicates survive
    blob, order = roundtrip(points, NO_FACES)
    assert np.array_equal(order, np.arange(50))
    decoded, faces = decode_cell(blob)
    assert faces.shape == (0, 3)


def test_one_vertex():
    blob, order = roundtrip([[3.0, -4.0, 5.0]], NO_FACES)
    points, _ = decode_cell(blob)
    assert order.tolist() == [0] and points.tolist() == [[3.0, -4.0, 5.0]]


def test_chunked_sphere_cells_are_small_and_exact():
    positions, faces = sphere(5, scale=499.0)  # 10,242 vertices in 56 chunks
    positions = positions + 500.0
    draco = raw = 0
    for cell_positions, cell_faces in chunk_cells(positions, faces, 250.0):
        blob, _ = roundtrip(cell_positions, cell_faces)
        assert method(blob) == EDGEBREAKER
        draco += len(blob)
        raw += 12 * len(cell_positions) + 6 * len(cell_faces)
    assert draco <= 0.15 * raw  # 10.5 % when measured; 5.5 % at the benchmark's scale


def test_decoding_a_plain_draco_mesh_from_another_writer():
    positions, faces = sphere(1)
    blob = bytes(
        DracoPy.encode(
            positions.astype(np.float32),
            faces=faces.astype(np.uint32),
            create_metadata=True,
            generic_attributes={"label": np.ones((len(positions), 1), np.uint8)},
        )
    )
    points, decoded_faces = decode_cell(blob)
    assert points.shape == positions.shape and decoded_faces.shape == faces.shape


# ---------------------------------------------------------------- properties


@st.composite
def meshes(draw):
    n = draw(st.integers(1, 40))
    pool = draw(st.integers(1, n))  # positions drawn from a pool, so duplicates are common
    coords = draw(st.lists(st.floats(-1e3, 1e3, width=32), min_size=3 * pool, max_size=3 * pool))
    offset = draw(st.floats(-1e4, 1e4, width=32))
    table = np.asarray(coords, dtype=np.float64).reshape(pool, 3) + offset
    picks = draw(st.lists(st.integers(0, pool - 1), min_size=n, max_size=n))
    positions = table[picks]
    if n < 3:
        return positions, NO_FACES
    triple = st.lists(st.integers(0, n - 1), min_size=3, max_size=3, unique=True)
    faces = draw(st.lists(triple, max_size=60))
    return positions, np.asarray(faces, dtype=np.int64).reshape(-1, 3)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(meshes(), st.integers(4, 16))
def test_property_every_vertex_and_face_round_trips(mesh, bits):
    roundtrip(*mesh, bits=bits)


@pytest.mark.slow
@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.tuples(*[st.floats(-1e5, 1e5, width=32)] * 3), min_size=1, max_size=60),
    st.integers(1, 24),
)
def test_property_quantization_bound_holds(points, bits):
    positions = np.asarray(points, dtype=np.float64)
    blob, order = encode_cell(positions, NO_FACES, quantization_bits=bits)
    decoded, _ = decode_cell(blob)
    error = np.abs(decoded.astype(np.float64) - positions[order]).max()
    assert error <= quantization_bound(positions, bits)


def test_quantization_bound_is_half_a_step_and_tight(rng):
    positions = rng.uniform(0, 100, (2000, 3))
    positions[0], positions[1] = 0.0, 100.0
    step = 100.0 / (2**11 - 1)
    bound = quantization_bound(positions, 11)
    assert step / 2 < bound < step / 2 * 1.005  # + 8 float32 ulps of 100
    blob, order = encode_cell(positions, NO_FACES)
    error = np.abs(decode_cell(blob)[0] - positions[order]).max()
    assert 0.95 * bound < error <= bound
    assert quantization_bound(np.ones((4, 3)), 11) < 1 / (2**11 - 1)  # extent 0 -> unit range
    assert quantization_bound(np.zeros((0, 3)), 11) == 0.0


def test_flat_cell_thin_axis_error_follows_the_largest_extent(rng):
    """One step for all axes: a 250 x 250 x 10 cell's z error exceeds half a z-extent step
    (what a per-axis bound would promise) but stays within quantization_bound."""
    positions = rng.uniform(0, 1, (3000, 3)) * [250.0, 250.0, 10.0]
    blob, order = encode_cell(positions, NO_FACES, quantization_bits=11)
    z_error = np.abs(decode_cell(blob)[0][:, 2] - positions[order, 2]).max()
    assert 10.0 / (2**11 - 1) / 2 < z_error <= quantization_bound(positions, 11)


# ---------------------------------------------------------------- errors


def test_empty_and_garbage_input_raise_decode_error():
    with pytest.raises(DracoDecodeError, match="holds no bytes"):
        decode_cell(b"")
    with pytest.raises(DracoDecodeError, match="not a Draco blob"):
        decode_cell(b"hello, not draco")
    with pytest.raises(DracoDecodeError, match="is bytes, got str"):
        decode_cell("DRACO")  # type: ignore[arg-type]
    with pytest.raises(DracoDecodeError, match="bitstream version 9.9"):
        decode_cell(b"DRACO\x09\x09\x01\x01\x00\x00" + bytes(20))


def test_every_truncation_raises_decode_error():
    positions, faces = sphere(1)
    for blob in (encode_cell(positions, faces)[0], encode_cell(positions, NO_FACES)[0]):
        for length in range(len(blob)):
            with pytest.raises(DracoDecodeError):
                decode_cell(blob[:length])


def test_a_huge_point_count_is_refused_before_draco_allocates():
    blob, _ = encode_cell(np.arange(30.0).reshape(10, 3), NO_FACES)
    corrupt = blob[:11] + struct.pack("<i", 0x2C0000A2) + blob[15:]  # once crashed DracoPy
    with pytest.raises(DracoDecodeError, match=r"claims 738197666 points; a cell holds at most 16777216"):
        decode_cell(corrupt)


def test_corrupted_blobs_decode_or_raise_decode_error():
    """Seeded byte corruption: DracoDecodeError or some output, never another exception or a
    crash; the library's bridge raises its DecodeError with the same message for each."""
    positions, faces = sphere(2)
    blobs = [
        encode_cell(positions, faces)[0],
        encode_cell(positions, NO_FACES)[0],
        encode_cell(np.concatenate([positions, positions[:4] + 0.5]), faces[::2])[0],
    ]
    rng = np.random.default_rng(2024)
    outcomes = Counter()
    for trial in range(600):
        corrupt = np.frombuffer(blobs[trial % 3], dtype=np.uint8).copy()
        spots = rng.integers(5, len(corrupt), size=rng.integers(1, 12))
        corrupt[spots] = rng.integers(0, 256, size=len(spots))
        try:
            decode_cell(corrupt.tobytes())
            outcomes["decoded"] += 1
        except DracoDecodeError as exc:
            assert len(str(exc)) > 20 and "Traceback" not in str(exc)
            with pytest.raises(DecodeError) as library:
                _draco.decode_cell(corrupt.tobytes())
            assert type(library.value) is DecodeError and str(library.value) == str(exc)
            outcomes["DecodeError"] += 1
    assert outcomes["DecodeError"] > 0


@pytest.mark.parametrize(
    "positions, faces, kwargs, message",
    [
        (np.zeros((0, 3)), NO_FACES, {}, "1 to 16777216 vertices, got 0"),
        (np.zeros((4, 2)), NO_FACES, {}, r"shape \(N, 3\), got \(4, 2\)"),
        (np.array([[0.0, np.nan, 0.0]]), NO_FACES, {}, "must be finite"),
        (np.array([[0.0, 0.0, 1e39]]), NO_FACES, {}, "must be finite"),
        (np.array([[-3e38, 0, 0], [3e38, 0, 0]]), NO_FACES, {}, "overflows float32"),
        (np.zeros((3, 3)), [[0, 1, 3]], {}, r"face indices must lie in \[0, 3\)"),
        (np.zeros((3, 3)), [[0, 1]], {}, r"faces must have shape \(F, 3\)"),
        (np.zeros((3, 3)), [[0.0, 1.0, 2.0]], {}, "integer vertex indices"),
        (
            np.zeros((3, 3)),
            NO_FACES,
            {"quantization_bits": 0},
            "quantization_bits must be an integer from 1 to 30",
        ),
        (
            np.zeros((3, 3)),
            NO_FACES,
            {"compression_level": 11},
            "compression_level must be an integer from 0 to 10",
        ),
        (np.zeros((3, 3)), NO_FACES, {"quantization_bits": True}, "got True"),
    ],
)
def test_unusable_input_raises_input_error(positions, faces, kwargs, message):
    with pytest.raises(DracoInputError, match=message):
        encode_cell(positions, np.asarray(faces), **kwargs)


# ---------------------------------------------------------------- the zarr codec


def element(value):
    """zarr returns a scalar selection of a bytes array as (nested) 0-d object arrays."""
    while isinstance(value, np.ndarray):
        value = value[()]
    return bytes(value)


def draco_array(path: Path, **codec):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", zarr.errors.UnstableSpecificationWarning)
        return zarr.create_array(
            zarr.storage.LocalStore(path),
            name="0/vertices",
            shape=(2, 2, 1),
            chunks=(1, 1, 1),
            dtype=VariableLengthBytes(),
            filters=[DracoCodec(**codec)],
            serializer=VLenBytesCodec(),
            compressors=None,
        )


def test_zarr_array_metadata_names_the_codec(tmp_path):
    draco_array(tmp_path, quantization_bits=14)
    doc = json.loads((tmp_path / "0/vertices/zarr.json").read_text())
    assert doc["data_type"] == "variable_length_bytes"
    assert inner_codecs(doc)[0] == {
        "name": "draco",
        "configuration": {"quantization_bits": 14, "compression_level": 7},
    }
    assert inner_codecs(doc)[1]["name"] == "vlen-bytes"


def test_zarr_writes_raw_rows_as_a_point_cloud_and_reads_them_back(tmp_path, rng):
    array = draco_array(tmp_path)
    rows = rng.uniform(-50, 50, (37, 3)).astype("<f4")
    array[0, 1, 0] = rows.tobytes()
    stored = (tmp_path / "0/vertices/c/0/1/0").read_bytes()
    count, length = struct.unpack_from("<II", stored)
    assert count == 1 and stored[8:13] == b"DRACO" and len(stored) == 8 + length  # vlen framing of one blob
    reopened = zarr.open_array(zarr.storage.LocalStore(tmp_path), path="0/vertices")
    back = np.frombuffer(element(reopened[0, 1, 0]), dtype="<f4").reshape(-1, 3)
    assert back.shape == rows.shape
    assert np.abs(back - rows).max() <= quantization_bound(rows, 11)
    assert element(reopened[1, 1, 0]) == b""  # missing cell: the fill value


def test_zarr_reads_a_library_mesh_cell_as_its_vertex_rows(tmp_path, rng):
    draco_array(tmp_path)
    positions, faces = shuffled(*sphere(2), rng)
    positions = np.concatenate([positions, [[7.0, 7.0, 7.0]]])  # one vertex used by no face
    blob, order = encode_cell(positions, faces)
    cell = tmp_path / "0/vertices/c/1/0/0"
    cell.parent.mkdir(parents=True, exist_ok=True)
    cell.write_bytes(struct.pack("<II", 1, len(blob)) + blob)  # what the library's writer stores
    array = zarr.open_array(zarr.storage.LocalStore(tmp_path), path="0/vertices")
    rows = np.frombuffer(element(array[1, 0, 0]), dtype="<f4").reshape(-1, 3)
    assert np.array_equal(rows, decode_cell(blob)[0])
    assert np.abs(rows - positions[order]).max() <= quantization_bound(positions, 11)


def test_zarr_refuses_rows_that_are_not_whole_vertices(tmp_path):
    array = draco_array(tmp_path)
    with pytest.raises(DracoInputError, match="rows of 12 bytes, got 8 bytes"):
        array[0, 0, 0] = bytes(8)


def test_zarr_surfaces_a_corrupt_cell_as_decode_error(tmp_path):
    draco_array(tmp_path)
    cell = tmp_path / "0/vertices/c/0/0/0"
    cell.parent.mkdir(parents=True, exist_ok=True)
    cell.write_bytes(struct.pack("<II", 1, 9) + b"DRACOjunk")
    with pytest.raises(DracoDecodeError):
        zarr.open_array(zarr.storage.LocalStore(tmp_path), path="0/vertices")[0, 0, 0]


def test_codec_configuration_round_trips_and_is_validated():
    codec = DracoCodec(quantization_bits=9, compression_level=3)
    assert DracoCodec.from_dict(codec.to_dict()) == codec
    assert DracoCodec.from_dict({"name": "draco"}) == DracoCodec()
    with pytest.raises(DracoInputError, match="no configuration key 'speed'"):
        DracoCodec.from_dict({"name": "draco", "configuration": {"speed": 3}})
    with pytest.raises(DracoInputError, match="quantization_bits must be an integer from 1 to 30, got 31"):
        DracoCodec(quantization_bits=31)


def test_codec_refuses_a_non_bytes_array():
    with pytest.raises(DracoInputError, match="variable_length_bytes"):
        zarr.create_array(zarr.storage.MemoryStore(), shape=(2,), dtype="float32", filters=[DracoCodec()])


# ---------------------------------------------------------------- numcodecs, registration, availability


def test_numcodecs_codec_round_trips_rows(rng):
    codec = numcodecs.get_codec({"id": "draco", "quantization_bits": 12, "compression_level": 5})
    assert isinstance(codec, Draco) and codec.get_config() == {
        "id": "draco",
        "quantization_bits": 12,
        "compression_level": 5,
    }
    rows = rng.uniform(0, 1, (20, 3)).astype("<f4")
    blob = codec.encode(rows)
    assert bytes(blob[:5]) == b"DRACO"
    back = np.frombuffer(codec.decode(blob), dtype="<f4").reshape(-1, 3)
    assert np.abs(back - rows).max() <= quantization_bound(rows, 12)
    out = np.empty(rows.nbytes, dtype=np.uint8)
    codec.decode(blob, out=out)
    assert np.array_equal(out.view("<f4").reshape(-1, 3), back)
    assert codec.encode(b"") == b"" and codec.decode(b"") == b""


def test_a_fresh_interpreter_resolves_both_codecs_by_entry_point():
    script = (
        "import sys, zarr.registry, numcodecs\n"
        "cls = zarr.registry.get_codec_class('draco')\n"
        "codec = numcodecs.get_codec({'id': 'draco'})\n"
        "print(cls.__module__, type(codec).__module__, 'zarr_vectors_draco' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-c", script], capture_output=True, text=True, check=True, cwd=Path("/")
    ).stdout.split()
    assert done == ["zarr_vectors_draco.zarr_codec", "zarr_vectors_draco.numcodecs_codec", "True"]


def test_require_draco_codec_and_its_message(monkeypatch):
    assert require_draco_codec() is DracoCodec
    assert CODEC_UNAVAILABLE_MESSAGE.startswith(
        "codec draco is not available: install zarrvec (pip install zarrvec)"
    )

    def unknown(name):
        raise KeyError(name)

    monkeypatch.setattr(zarr.registry, "get_codec_class", unknown)
    with pytest.raises(DracoUnavailableError, match="codec draco is not available"):
        require_draco_codec()


def test_missing_dracopy_is_reported_with_the_message(monkeypatch):
    from zarr_vectors_draco import cell

    blob, _ = encode_cell(np.zeros((1, 3)), NO_FACES)
    monkeypatch.setitem(sys.modules, "DracoPy", None)
    monkeypatch.setattr(cell, "_dracopy_module", None)
    with pytest.raises(DracoUnavailableError, match="codec draco is not available"):
        require_draco_codec()
    with pytest.raises(DracoUnavailableError, match="codec draco is not available"):
        encode_cell(np.zeros((1, 3)), NO_FACES)
    with pytest.raises(DracoUnavailableError, match="codec draco is not available"):
        decode_cell(blob)
    # The library's bridge says the same with its own install hint, as a FormatError.
    for call in (
        lambda: _draco.encode_cell(np.zeros((1, 3)), NO_FACES, quantization_bits=11, compression_level=7),
        lambda: _draco.decode_cell(blob, array="0/vertices", chunk="0.0.0"),
    ):
        with pytest.raises(FormatError) as info:
            call()
        assert type(info.value) is FormatError
        assert str(info.value).startswith(_draco.MISSING) and "DracoPy" in str(info.value)
        assert isinstance(info.value.__cause__, DracoUnavailableError)


def test_package_exports():
    assert set(zarr_vectors_draco.__all__) >= {
        "encode_cell",
        "decode_cell",
        "quantization_bound",
        "DracoCodec",
        "Draco",
        "CODEC_UNAVAILABLE_MESSAGE",
        "require_draco_codec",
        "DracoCodecError",
        "DracoDecodeError",
        "DracoInputError",
        "DracoUnavailableError",
    }


# ---------------------------------------------------------------- a standalone package, and the library's bridge


def test_the_codec_package_imports_nothing_from_the_library():
    """Importing the package, resolving both codecs through the registries and running them
    loads no ``zarr_vectors`` module, in an interpreter where the library is importable."""
    script = (
        "import importlib.util, json, sys\n"
        "def library():\n"
        "    return sorted(m for m in sys.modules if m.split('.')[0] == 'zarr_vectors')\n"
        "import zarr_vectors_draco\n"
        "seen = {'import': library()}\n"
        "import numcodecs.registry, zarr.registry\n"
        "cls = zarr.registry.get_codec_class('draco')\n"
        "codec = numcodecs.registry.get_codec({'id': 'draco'})\n"
        "seen['registries'] = library()\n"
        "codec.decode(codec.encode(bytes(12)))\n"
        "try:\n"
        "    zarr_vectors_draco.decode_cell(b'junk')\n"
        "except zarr_vectors_draco.DracoDecodeError:\n"
        "    pass\n"
        "seen['use'] = library()\n"
        "print(json.dumps([cls.__name__, type(codec).__name__, seen,\n"
        "                  importlib.util.find_spec('zarr_vectors') is not None]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-c", script], capture_output=True, text=True, check=True, cwd=Path("/")
    )
    assert json.loads(done.stdout) == [
        "DracoCodec",
        "Draco",
        {"import": [], "registries": [], "use": []},
        True,
    ]


@pytest.mark.parametrize("cls", [DracoDecodeError, DracoInputError, DracoUnavailableError])
def test_codec_errors_are_value_errors_under_one_base_and_not_the_librarys(cls):
    assert issubclass(cls, DracoCodecError) and issubclass(cls, ValueError)
    assert not issubclass(cls, ZarrVectorsError)
    assert cls.__module__ == "zarr_vectors_draco.errors"


def test_the_bridge_turns_an_undecodable_blob_into_decode_error_or_corrupt_cell_error():
    with pytest.raises(DecodeError) as info:
        _draco.decode_cell(b"hello, not draco")
    assert type(info.value) is DecodeError and isinstance(info.value.__cause__, DracoDecodeError)
    assert str(info.value) == (
        "the cell's 16 bytes are not a Draco blob (they do not start with the 'DRACO' header)"
    )
    with pytest.raises(CorruptCellError) as info:
        _draco.decode_cell(b"hello, not draco", array="0/vertices", chunk="1.2.3")
    assert (info.value.array, info.value.chunk) == ("0/vertices", "1.2.3")
    assert str(info.value) == (
        "corrupt cell in array '0/vertices', chunk 1.2.3: the cell's 16 bytes are not a Draco "
        "blob (they do not start with the 'DRACO' header)"
    )
    blob, _ = encode_cell(np.arange(30.0).reshape(10, 3), NO_FACES)
    with pytest.raises(DecodeError, match="the Draco blob claims 10 points; a cell holds at most 9"):
        _draco.decode_cell(blob, max_points=9)
    assert _draco.decode_cell(blob, max_points=10)[0].shape == (10, 3)


@pytest.mark.parametrize(
    "faces, kwargs, message",
    [
        ([[0, 1, 3]], {}, r"face indices must lie in \[0, 3\) for 3 vertices, got 0\.\.3"),
        (NO_FACES, {"quantization_bits": 0}, "quantization_bits must be an integer from 1 to 30, got 0"),
    ],
)
def test_the_bridge_turns_unusable_encoder_input_into_input_error(faces, kwargs, message):
    settings = {"quantization_bits": 11, "compression_level": 7, **kwargs}
    with pytest.raises(InputError, match=message) as info:
        _draco.encode_cell(np.zeros((3, 3)), np.asarray(faces), **settings)
    assert type(info.value) is InputError and isinstance(info.value.__cause__, DracoInputError)


def test_an_encoder_self_check_failure_is_the_base_class_and_a_format_error_in_the_library(monkeypatch):
    from zarr_vectors_draco import cell

    monkeypatch.setattr(cell, "_is_exact", lambda *args: False)
    message = "Draco did not return the point cloud it was given; please report this cell"
    with pytest.raises(DracoCodecError) as info:
        encode_cell(np.zeros((1, 3)), NO_FACES)
    assert type(info.value) is DracoCodecError and str(info.value) == message
    with pytest.raises(FormatError) as info:
        _draco.encode_cell(np.zeros((1, 3)), NO_FACES, quantization_bits=11, compression_level=7)
    assert type(info.value) is FormatError and str(info.value) == message


def test_reading_a_store_with_a_corrupt_draco_cell_raises_corrupt_cell_error(tmp_path):
    """End to end: the library names the array and the chunk of a cell Draco cannot decode."""
    vertices, faces = icosphere(subdivisions=2, scale=499, offset=500)
    store = tmp_path / "d.zarr"
    zv.write_mesh(store, vertices, faces, chunk_shape=500, encoding="draco", shards=None)  # cell files
    cells = sorted(p for p in (store / "0/vertices/c").rglob("*") if p.is_file())
    cell = cells[len(cells) // 2]
    count, length = struct.unpack_from("<II", cell.read_bytes())  # meshes default to no compressor
    blob = cell.read_bytes()[8 : 8 + length]
    assert count == 1 and blob[:5] == b"DRACO"
    half = blob[: len(blob) // 2]
    cell.write_bytes(struct.pack("<II", 1, len(half)) + half)
    key = ".".join(cell.relative_to(store / "0/vertices/c").parts)
    with pytest.raises(
        CorruptCellError, match=rf"^corrupt cell in array '0/vertices', chunk {key}: "
    ) as info:
        zv.open(store).read()
    assert (info.value.array, info.value.chunk) == ("0/vertices", key)
    assert isinstance(info.value.__cause__, DracoDecodeError)


# ---------------------------------------------------------------- the zarr codec works off the event loop


def test_zarr_runs_the_codec_work_in_a_thread_without_the_event_loop(tmp_path, monkeypatch, rng):
    """zarr awaits the codec on its event loop; _encode_sync / _decode_sync must run where no
    loop is running (a worker thread), so the loop keeps serving other chunks meanwhile."""
    calls = []

    def spy(name):
        real = getattr(DracoCodec, name)

        def run(self, chunk_array, chunk_spec):
            try:
                asyncio.get_running_loop()
                on_loop = True
            except RuntimeError:
                on_loop = False
            calls.append((name, on_loop))
            return real(self, chunk_array, chunk_spec)

        return run

    for name in ("_encode_sync", "_decode_sync"):
        monkeypatch.setattr(DracoCodec, name, spy(name))
    array = draco_array(tmp_path)
    rows = rng.uniform(-50, 50, (37, 3)).astype("<f4")
    array[0, 1, 0] = rows.tobytes()
    back = np.frombuffer(element(array[0, 1, 0]), dtype="<f4").reshape(-1, 3)
    assert np.abs(back - rows).max() <= quantization_bound(rows, 11)
    assert sorted(set(calls)) == [("_decode_sync", False), ("_encode_sync", False)]


def test_the_codec_stays_a_frozen_dataclass():
    codec = DracoCodec(quantization_bits=9)
    with pytest.raises(dataclasses.FrozenInstanceError):
        codec.quantization_bits = 10  # type: ignore[misc]
    assert dataclasses.asdict(codec) == {"quantization_bits": 9, "compression_level": 7}
