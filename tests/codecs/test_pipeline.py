"""The chunk pipeline: round trips for every codec list, byte-equal to zarr-python, bounded
decoding, and every failure of any codec a DecodeError."""

from __future__ import annotations

import gzip
import struct

import numpy as np
import pytest
import zarr
from hypothesis import given, settings
from hypothesis import strategies as st

from zarr_vectors.engine.pipeline import CHECKSUM_CODEC, Pipeline, compressor_json
from zarr_vectors.errors import DecodeError

COMPRESSIONS = ["none", "zstd", "gzip", "blosc", "blosc-bitshuffle"]


def _pipe(compression: str, checksums: bool = False, serializer: str = "vlen-bytes") -> Pipeline:
    codecs = compressor_json(compression) + ([dict(CHECKSUM_CODEC)] if checksums else [])
    return Pipeline.from_codecs([{"name": serializer}, *codecs])


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(COMPRESSIONS), st.booleans(), st.lists(st.binary(max_size=300), max_size=8))
def test_round_trip_of_items_and_single_payloads(compression, checksums, items):
    pipe = _pipe(compression, checksums)
    assert [bytes(v) for v in pipe.decode_items(pipe.encode_items(items))] == items
    payload = b"".join(items)
    assert bytes(pipe.decode(pipe.encode(payload))) == payload


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(COMPRESSIONS), st.booleans(), st.binary(max_size=400), st.data())
def test_any_damage_is_a_decode_error_or_bytes_within_the_bound(compression, checksums, payload, data):
    pipe = _pipe(compression, checksums).bounded(1000)
    raw = bytearray(pipe.encode(payload))
    how = data.draw(st.sampled_from(["flip", "truncate", "extend", "garbage"]))
    if how == "flip" and raw:
        i = data.draw(st.integers(0, len(raw) - 1))
        raw[i] ^= data.draw(st.integers(1, 255))
    elif how == "truncate":
        raw = raw[: data.draw(st.integers(0, max(len(raw) - 1, 0)))]
    elif how == "extend":
        raw += data.draw(st.binary(min_size=1, max_size=20))
    else:
        raw = bytearray(data.draw(st.binary(max_size=200)))
    try:
        out = pipe.decode(bytes(raw))
    except DecodeError:
        return
    assert len(out) <= 1000
    if checksums:  # the crc32c codec lets no damaged byte through
        assert bytes(out) == payload


@pytest.mark.parametrize("compression", ["zstd", "gzip", "blosc"])
def test_output_larger_than_the_bound_is_refused(compression):
    pipe = _pipe(compression, serializer="bytes")
    raw = pipe.encode(bytes(100_000))
    assert len(bytes(pipe.bounded(100_000).decode(raw))) == 100_000
    with pytest.raises(DecodeError, match="99999"):
        pipe.bounded(99_999).decode(raw)


def test_zstd_frame_without_content_size_decodes_within_the_bound():
    import zstandard

    raw = zstandard.ZstdCompressor(write_content_size=False).compress(bytes(300_000))
    pipe = _pipe("zstd", serializer="bytes")
    assert len(pipe.bounded(300_000).decode(raw)) == 300_000
    with pytest.raises(DecodeError, match="zstd decompression failed"):
        pipe.bounded(299_999).decode(raw)


def test_gzip_members_and_zero_padding_read_like_the_gzip_module():
    data = gzip.compress(b"abc") + gzip.compress(b"def") + bytes(8)
    assert gzip.decompress(data) == b"abcdef"
    assert bytes(_pipe("gzip", serializer="bytes").decode(data)) == b"abcdef"
    with pytest.raises(DecodeError, match="gzip"):
        _pipe("gzip", serializer="bytes").decode(gzip.compress(b"abc") + b"junk")


def test_vlen_item_count_beyond_the_bytes_is_refused_without_looping():
    pipe = _pipe("none")
    with pytest.raises(DecodeError, match="claims 4294967295 items but its 12 bytes hold at most 2"):
        pipe.decode_items(struct.pack("<III", 2**32 - 1, 0, 0))
    with pytest.raises(DecodeError, match="claims 4294967295 items"):
        pipe.decode_items_at(struct.pack("<III", 2**32 - 1, 0, 0), [0])


@pytest.mark.parametrize("compression", ["none", "zstd", "gzip"])
def test_checksum_codec_writes_the_bytes_zarr_python_writes(tmp_path, compression):
    from zarr.core.dtype import VariableLengthBytes

    codecs = compressor_json(compression) + [dict(CHECKSUM_CODEC)]
    arr = zarr.create_array(
        str(tmp_path / "a"),
        shape=(2,),
        chunks=(1,),
        dtype=VariableLengthBytes(),
        fill_value=b"",
        compressors=codecs,
    )
    value = np.empty(1, object)
    value[0] = b"some payload bytes" * 20
    arr[0:1] = value
    written = (tmp_path / "a/c/0").read_bytes()
    pipe = Pipeline.from_codecs([{"name": "vlen-bytes"}, *codecs])
    assert pipe.encode(value[0]) == written
    assert bytes(pipe.decode(written)) == value[0]
    flipped = bytearray(written)
    flipped[3] ^= 4
    with pytest.raises(DecodeError, match="crc32c checksum mismatch"):
        pipe.decode(bytes(flipped))
