"""Stores we write are ordinary Zarr v3: zarr-python opens every node and decodes our cells."""

from __future__ import annotations

import numpy as np
import pytest
import zarr

import zarr_vectors as zv
from zarr_vectors.engine.chunks.pipeline import Pipeline, compression_names, compressor_json
from zarr_vectors.format.grid import parse_chunk_key


def _as_bytes(value) -> bytes:
    while isinstance(value, np.ndarray):
        value = value[()] if value.ndim == 0 else value.reshape(-1)[0]
    return bytes(value)


# zarr-python warns whenever it builds a numcodecs.* codec (lz4, zlib, ...: not in the Zarr v3 spec).
NUMCODECS_WARNING = "ignore:Numcodecs codecs are not in the Zarr version 3 specification"


@pytest.mark.filterwarnings(NUMCODECS_WARNING)
@pytest.mark.parametrize("compression", compression_names())
def test_zarr_python_decodes_every_cell_we_write(tmp_path, rng, compression):
    pos = rng.uniform(-100, 100, (800, 3)).astype(np.float32)
    path = tmp_path / "s.zarr"
    zv.write_points(
        path,
        pos,
        chunk_shape=50,
        bin_shape=25,
        compression=compression,
        attributes={"v": rng.random((800, 2))},
        object_ids=np.arange(800) % 11,
        object_attributes={"w": rng.random(11)},
        groups=[[1, 2], [3]],
    )
    group = zarr.open_group(str(path), mode="r")
    ours = zv.open(path)
    vertices = group["0/vertices"]
    origin = np.asarray(vertices.attrs.get("chunk_grid_origin", [0, 0, 0]))
    seen = 0
    for key in vertices.attrs["nonempty_chunks"]:
        chunk = np.asarray(parse_chunk_key(key))
        cell_key = "0/vertices/c/" + "/".join(map(str, chunk - origin))  # read out of its shard
        ours_raw = bytes(ours.level(0).vertices.payload(ours._backend.get_many([cell_key])[0], chunk))
        # zarr-python hands vlen bytes back as fixed-width numpy bytes, which drop trailing NULs.
        assert _as_bytes(vertices[tuple(chunk - origin)]) == ours_raw.rstrip(b"\0")
        rows = np.frombuffer(ours_raw, np.float32).reshape(-1, 3)
        assert (np.floor(rows / 50).astype(int) == chunk).all()
        seen += len(rows)
    assert seen == len(pos)
    assert np.array_equal(group["0/object_attributes/w"][:], ours.object_attributes("w"))
    manifests = group["0/object_index/manifests"][:]
    assert len(manifests) == 11 and all(len(m) > 4 for m in manifests)
    assert [
        np.frombuffer(_as_bytes(g).ljust(8 * n, b"\0"), "<i8").tolist()
        for g, n in zip(group["0/groups"][:], [2, 1])
    ] == [[1, 2], [3]]


@pytest.mark.filterwarnings(NUMCODECS_WARNING)
@pytest.mark.parametrize("compression", [*compression_names(), "numcodecs.zstd", "numcodecs.blosc"])
def test_our_cell_encoding_equals_zarr_pythons(tmp_path, compression):
    from zarr.core.dtype import VariableLengthBytes

    codecs = compressor_json(compression)
    arr = zarr.create_array(
        str(tmp_path / "a"),
        shape=(2,),
        chunks=(1,),
        dtype=VariableLengthBytes(),
        fill_value=b"",
        compressors=codecs or None,
    )
    value = np.empty(1, object)
    value[0] = b"some payload bytes" * 20
    arr[0:1] = value
    written = (tmp_path / "a/c/0").read_bytes()
    pipe = Pipeline.from_codecs([{"name": "vlen-bytes"}, *codecs])
    assert pipe.encode(value[0]) == written
    assert bytes(pipe.decode(written)) == value[0]
