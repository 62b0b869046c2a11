"""The chunk pipeline: round trips for every codec list, byte-equal to zarr-python, bounded
decoding, and every failure of any codec a DecodeError."""

from __future__ import annotations

import bz2
import gzip
import lzma
import struct
import tracemalloc
import zlib

import numcodecs
import numpy as np
import pytest
import zarr
from hypothesis import given, settings
from hypothesis import strategies as st

from zarr_vectors.engine.chunks import compressors
from zarr_vectors.engine.chunks.compressors import zstd_read_into
from zarr_vectors.engine.chunks.pipeline import (
    CHECKSUM_CODEC,
    Pipeline,
    UnsupportedPipeline,
    compression_names,
    compression_of,
    compressor_json,
)
from zarr_vectors.errors import DecodeError, InputError
from zarr_vectors.storage.scratch import arena

# Every compression= name, and numcodecs' own spellings of zarr's three.
COMPRESSIONS = [*compression_names(), "numcodecs.zstd", "numcodecs.gzip", "numcodecs.blosc"]
BOUNDED = [c for c in COMPRESSIONS if c not in ("none", "blosc-bitshuffle")]
# zarr-python warns whenever it builds a numcodecs.* codec (not in the Zarr v3 spec).
NUMCODECS_WARNING = "ignore:Numcodecs codecs are not in the Zarr version 3 specification"


def _pipe(compression: str, checksums: bool = False, serializer: str = "vlen-bytes") -> Pipeline:
    codecs = compressor_json(compression) + ([dict(CHECKSUM_CODEC)] if checksums else [])
    return Pipeline.from_codecs([{"name": serializer}, *codecs])


@pytest.mark.parametrize("compression", COMPRESSIONS)
@settings(max_examples=30, deadline=None)
@given(checksums=st.booleans(), items=st.lists(st.binary(max_size=300), max_size=8))
def test_round_trip_of_items_and_single_payloads(compression, checksums, items):
    pipe = _pipe(compression, checksums)
    assert [bytes(v) for v in pipe.decode_items(pipe.encode_items(items))] == items
    payload = b"".join(items)
    assert bytes(pipe.decode(pipe.encode(payload))) == payload


@pytest.mark.parametrize("compression", COMPRESSIONS)
@settings(max_examples=40, deadline=None)
@given(checksums=st.booleans(), payload=st.binary(max_size=400), data=st.data())
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


def test_the_compression_names_are_zarrs_and_numcodecs_compressors():
    assert compression_names() == (
        "none",
        "zstd",
        "gzip",
        "blosc",
        "blosc-bitshuffle",
        "bz2",
        "lz4",
        "lzma",
        "zlib",
    )
    assert compressor_json("lz4") == [{"name": "numcodecs.lz4", "configuration": {"acceleration": 1}}]
    assert compressor_json("LZ4") == compressor_json("numcodecs.lz4")
    assert compressor_json("zlib", level=9) == [{"name": "numcodecs.zlib", "configuration": {"level": 9}}]
    assert compressor_json("lzma", level=2)[0]["configuration"]["preset"] == 2
    assert compressor_json("numcodecs.zstd") == [
        {"name": "numcodecs.zstd", "configuration": {"level": 5, "checksum": False}}
    ]


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_compression_of_gives_back_the_name_and_level(compression):
    codecs = [{"name": "vlen-bytes"}, *compressor_json(compression), dict(CHECKSUM_CODEC)]
    name, level = compression_of(codecs)
    assert name == compression
    assert compressor_json(name, level=level) == compressor_json(compression)


@pytest.mark.parametrize(
    ("compression", "level", "message"),
    [
        (
            "snappy",
            None,
            "compression must be one of 'none', 'zstd', 'gzip', 'blosc', 'blosc-bitshuffle', 'bz2', 'lz4', "
            "'lzma', 'zlib'; got 'snappy'",
        ),
        ("crc32c", None, "compression must be one of .*; got 'crc32c'"),  # a checksum: checksums=True adds it
        ("numcodecs.shuffle", None, "compression must be one of .*; got 'numcodecs.shuffle'"),
        ("numcodecs.delta", None, "compression must be one of .*; got 'numcodecs.delta'"),  # array-to-array
        (3, None, "compression must be one of .*; got 3"),
        ("lz4", 3, "compression 'lz4' takes no level"),
        ("bz2", 12, "compression 'bz2' with level 12: compresslevel must be between 1 and 9"),
        ("zstd", "9", "compression level must be an integer, got '9'"),
    ],
)
def test_unknown_compression_or_level_is_an_input_error(compression, level, message):
    with pytest.raises(InputError, match=f"^{message}"):
        compressor_json(compression, level=level)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"name": "snappy"}, "codec 'snappy' is not a bytes-to-bytes codec zarr knows \\(readable: zstd, "),
        ({"name": "numcodecs.delta"}, "codec 'numcodecs.delta' is not a bytes-to-bytes codec zarr knows"),
        (
            {"name": "numcodecs.lz4", "configuration": {"speed": 3}},
            "codec 'numcodecs.lz4' with configuration",
        ),
        ({"name": 7}, "codec name 7 is not a string"),
    ],
)
def test_a_codec_neither_registry_knows_is_unsupported(spec, message):
    with pytest.raises(UnsupportedPipeline, match=message):
        Pipeline.from_codecs([{"name": "vlen-bytes"}, spec])


@pytest.mark.parametrize("compression", BOUNDED)
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


# Codec lists zarr-python writes with numcodecs' codecs (as zarr.json names them).
ZARR_WRITTEN = [
    [{"name": "numcodecs.lz4", "configuration": {"acceleration": 3}}],
    [{"name": "numcodecs.zlib", "configuration": {"level": 9}}],
    [{"name": "numcodecs.bz2", "configuration": {"level": 2}}],
    [{"name": "numcodecs.lzma", "configuration": {"format": 1, "check": 10, "preset": 1, "filters": None}}],
    [{"name": "numcodecs.lzma", "configuration": {"format": 2, "check": -1, "preset": 4, "filters": None}}],
    [
        {
            "name": "numcodecs.blosc",
            "configuration": {"cname": "lz4", "clevel": 7, "shuffle": 2, "blocksize": 0},
        }
    ],
    [
        {"name": "numcodecs.gzip", "configuration": {"level": 1}},
        {"name": "numcodecs.crc32", "configuration": {}},
    ],
    [
        {"name": "numcodecs.shuffle", "configuration": {"elementsize": 1}},
        {"name": "numcodecs.zstd", "configuration": {}},
    ],
    [
        {"name": "numcodecs.adler32", "configuration": {}},
        {"name": "numcodecs.fletcher32", "configuration": {}},
    ],
    [
        {"name": "numcodecs.jenkins_lookup3", "configuration": {}},
        {"name": "numcodecs.crc32c", "configuration": {}},
        {"name": "crc32c"},
    ],
    [
        {"name": "zstd", "configuration": {"level": 3, "checksum": True}},
        {"name": "numcodecs.lz4", "configuration": {}},
    ],
]


@pytest.mark.filterwarnings(NUMCODECS_WARNING)
@pytest.mark.parametrize("codecs", ZARR_WRITTEN, ids=lambda c: "+".join(x["name"] for x in c))
def test_cells_zarr_python_writes_with_any_registered_codec_read_and_write_byte_for_byte(tmp_path, codecs):
    from zarr.core.dtype import VariableLengthBytes

    arr = zarr.create_array(
        str(tmp_path / "a"),
        shape=(2,),
        chunks=(1,),
        dtype=VariableLengthBytes(),
        fill_value=b"",
        compressors=codecs,
    )
    value = np.empty(1, object)
    value[0] = bytes(range(256)) * 7 + b"tail"
    arr[0:1] = value
    written = (tmp_path / "a/c/0").read_bytes()
    pipe = Pipeline.from_codecs([{"name": "vlen-bytes"}, *codecs])
    assert bytes(pipe.decode(written)) == value[0]
    assert pipe.encode(value[0]) == written


def _peak(fn) -> int:
    """Peak traced allocation (bytes) while ``fn`` runs; ``fn`` must raise DecodeError."""
    tracemalloc.start()
    try:
        with pytest.raises(DecodeError) as info:
            fn()
        return tracemalloc.get_traced_memory()[1], str(info.value)
    finally:
        tracemalloc.stop()


def _alone_claiming_dictionary(size: int) -> bytes:
    """An .lzma (FORMAT_ALONE) stream whose header asks for a ``size``-byte dictionary."""
    good = lzma.compress(b"abc" * 100, format=lzma.FORMAT_ALONE)
    return good[:1] + struct.pack("<I", size) + good[5:]


BOMB = bytes(64 << 20)  # 64 MiB of zeros: each codec packs it into well under a megabyte


@pytest.mark.parametrize(
    ("codecs", "crafted", "message"),
    [
        (
            compressor_json("lz4"),
            lambda: struct.pack("<I", 0x7FFFFFFF) + bytes(40),
            "lz4 data claims 2147483647 decoded bytes, more than the 1000000",
        ),
        (
            compressor_json("zlib"),
            lambda: zlib.compress(BOMB, 9),
            "zlib data decodes to more than the 1000000 bytes",
        ),
        (
            compressor_json("bz2"),
            lambda: bz2.compress(BOMB, 9),
            "bz2 data decodes to more than the 1000000 bytes",
        ),
        (
            compressor_json("lzma"),
            lambda: lzma.compress(BOMB, format=lzma.FORMAT_XZ, preset=1),  # a 1 MiB dictionary
            "lzma data decodes to more than the 1000000 bytes",
        ),
        (
            [{"name": "numcodecs.lzma", "configuration": {"format": 2}}],
            lambda: _alone_claiming_dictionary(0xFFFFFFFF),
            "lzma decompression failed: Memory usage limit",
        ),
        (
            [{"name": "numcodecs.blosc"}],
            lambda: numcodecs.Blosc(cname="zstd", clevel=9).encode(BOMB),
            "blosc data claims 67108864 decoded bytes",
        ),
        (
            [{"name": "numcodecs.gzip"}],
            lambda: gzip.compress(BOMB, 9),
            "gzip data decodes to more than the 1000000 bytes",
        ),
    ],
    ids=["lz4-prefix", "zlib-bomb", "bz2-bomb", "xz-bomb", "lzma-dictionary", "blosc-header", "gzip-bomb"],
)
def test_crafted_cells_fail_before_allocating_what_they_claim(codecs, crafted, message):
    pipe = Pipeline.from_codecs([{"name": "bytes"}, *codecs]).bounded(1_000_000)
    data = crafted()
    assert len(data) < 1_000_000
    peak, text = _peak(lambda: pipe.decode(data))
    assert message in text
    assert peak < 5_000_000  # the bound, a copy and the decoder's state; never what the cell claims


@pytest.mark.parametrize(
    ("compression", "make", "streams"),
    [
        ("zlib", lambda b: zlib.compress(b), False),
        ("bz2", lambda b: bz2.compress(b), True),
        ("lzma", lambda b: lzma.compress(b), True),
    ],
)
def test_concatenated_streams_and_trailing_bytes_read_like_the_codec(compression, make, streams):
    pipe = _pipe(compression, serializer="bytes")
    two = make(b"abc") + make(b"def")
    if streams:  # bz2 and xz decoders read concatenated streams; so does the pipeline
        assert bytes(pipe.decode(two)) == numcodecs.get_codec({"id": compression}).decode(two) == b"abcdef"
    else:  # one zlib stream per chunk: whatever follows it is damage
        with pytest.raises(DecodeError, match="zlib stream is followed by 11 bytes"):
            pipe.decode(two)
    with pytest.raises(DecodeError, match=f"{compression} (stream is truncated|decompression failed)"):
        pipe.decode(make(b"abc" * 1000)[:-7])


def test_a_codec_without_a_bounded_decoder_is_checked_once_decoded(monkeypatch):
    """numcodecs codecs outside the bounded-decoder table (none of numcodecs' own today) run
    numcodecs' decoder; the output is still refused past the bound, naming the codec."""
    from zarr_vectors.engine.chunks import compressors

    monkeypatch.delitem(compressors._DECODERS, "lz4")
    pipe = _pipe("lz4", serializer="bytes")
    raw = pipe.encode(bytes(5000))
    assert bytes(pipe.bounded(5000).decode(raw)) == bytes(5000)
    with pytest.raises(DecodeError, match="^lz4 data claims 5000 decoded bytes, more than the 4999"):
        pipe.bounded(4999).decode(raw)
    with pytest.raises(DecodeError, match="^lz4 decompression failed: LZ4 decompression error"):
        pipe.decode(raw[:-3])


def _maybe_damaged(encoded: bytes, data: st.DataObject) -> bytearray:
    """``encoded`` as it is, or with a byte flipped, cut short or extended (drawn by ``data``)."""
    raw = bytearray(encoded)
    if not raw or not data.draw(st.booleans()):
        return raw
    how = data.draw(st.sampled_from(["flip", "truncate", "extend"]))
    if how == "flip":
        raw[data.draw(st.integers(0, len(raw) - 1))] ^= data.draw(st.integers(1, 255))
    elif how == "truncate":
        raw = raw[: data.draw(st.integers(0, len(raw) - 1))]
    else:
        raw += data.draw(st.binary(min_size=1, max_size=20))
    return raw


@pytest.mark.parametrize("compression", COMPRESSIONS)
@settings(max_examples=30, deadline=None)
@given(checksums=st.booleans(), payload=st.binary(max_size=400), data=st.data())
def test_decoding_into_an_arena_gives_the_bytes_and_errors_of_decoding_alone(
    compression, checksums, payload, data
):
    pipe = _pipe(compression, checksums).bounded(1000)
    raw = _maybe_damaged(pipe.encode(payload), data)  # damaged: both ways must agree on it too
    with arena() as scratch:
        try:
            alone = bytes(pipe.decode(bytes(raw)))
        except DecodeError:
            with pytest.raises(DecodeError):
                pipe.decode(memoryview(bytes(raw)), scratch)
            return
        assert bytes(pipe.decode(memoryview(bytes(raw)), scratch)) == alone


def _checksummed(payload: bytes) -> bytes:
    return __import__("zstandard").ZstdCompressor(level=3, write_checksum=True).compress(payload)


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda f: f + b"\x01junk", "the frame takes"),
        (lambda f: f + f, "the frame takes"),
        (lambda f: f[:-3], "truncated|the frame takes"),
        (lambda f: f + b"\x28\xb5", "the frame takes"),  # part of a second frame's magic
        (lambda f: f + __import__("zstandard").ZstdCompressor().compress(b""), "the frame takes"),
        (lambda f: f + b"\x50\x2a\x4d\x18" + (4).to_bytes(4, "little") + b"abcd", "the frame takes"),
        (lambda f: _checksummed(b"twelve bytes")[:-1], "the frame takes"),  # checksum cut short
        (lambda f: _checksummed(b"twelve bytes")[:-4], "the frame takes"),  # checksum missing
    ],
)
@pytest.mark.parametrize("one_call_bytes", [0, 1 << 18], ids=["stream", "one-call"])
def test_a_damaged_zstd_frame_decoded_into_an_arena_or_an_array_is_a_decode_error(
    damage, message, one_call_bytes, monkeypatch
):
    monkeypatch.setattr(compressors, "ZSTD_ONE_CALL_BYTES", one_call_bytes)  # both decode_to paths
    pipe = _pipe("zstd", serializer="bytes")
    frame = pipe.encode(b"twelve bytes")
    with arena() as scratch:
        assert bytes(pipe.decode(frame, scratch)) == b"twelve bytes"
        with pytest.raises(DecodeError):
            pipe.decode(damage(frame))  # the plain path refuses it too
        with pytest.raises(DecodeError, match=message):
            pipe.decode(damage(frame), scratch)
    vlen = _pipe("zstd")
    cell = vlen.encode(b"twelve bytes")
    assert vlen.payload_size(cell) == 12
    with pytest.raises(DecodeError, match=message):
        vlen.decode_to(damage(cell), memoryview(bytearray(12)))


@pytest.mark.parametrize("compression", ["none", "zstd"])
@settings(max_examples=40, deadline=None)
@given(payload=st.binary(max_size=400), data=st.data())
def test_decoding_straight_into_an_array_agrees_with_decoding(compression, payload, data):
    pipe = _pipe(compression).bounded(1000)
    stream = data.draw(st.booleans())  # zstd frames read by a stream reader or in one call
    limit = 0 if stream else compressors.ZSTD_ONE_CALL_BYTES
    assert pipe.direct
    raw = _maybe_damaged(pipe.encode(payload), data)
    try:
        want = bytes(pipe.decode(bytes(raw)))
    except DecodeError:
        want = None
    try:
        size = pipe.payload_size(bytes(raw))
        if size is None:
            return  # no declared size: such a cell is decoded the usual way
        out = bytearray(size)
        saved, compressors.ZSTD_ONE_CALL_BYTES = compressors.ZSTD_ONE_CALL_BYTES, limit
        try:
            pipe.decode_to(bytes(raw), memoryview(out))
        finally:
            compressors.ZSTD_ONE_CALL_BYTES = saved
        got = bytes(out)
    except DecodeError:
        got = None
    assert got == want


def test_only_plain_and_zstd_vlen_pipelines_decode_straight_into_arrays():
    assert _pipe("none").direct and _pipe("zstd").direct
    assert not _pipe("zstd", checksums=True).direct
    assert not _pipe("gzip").direct and not _pipe("zstd", serializer="bytes").direct


@pytest.mark.parametrize(
    ("one_call_bytes", "sizes", "message"),
    [
        (0, (4, 4), "the frame ends after 6 bytes, short of the size"),
        (0, (4, 1), "more bytes come out of the frame than the 5"),
        (1 << 18, (4, 4), "the frame holds 6 bytes, not the 8 its parts take"),
        (1 << 18, (4, 1), "the frame holds 6 bytes, not the 5 its parts take"),
    ],
)
def test_a_zstd_frame_must_fill_its_parts_exactly(one_call_bytes, sizes, message, monkeypatch):
    monkeypatch.setattr(compressors, "ZSTD_ONE_CALL_BYTES", one_call_bytes)  # stream or one call
    frame = __import__("zstandard").ZstdCompressor().compress(b"abcdef")
    parts = [memoryview(bytearray(4)), memoryview(bytearray(2))]
    zstd_read_into(frame, parts)
    assert [bytes(p) for p in parts] == [b"abcd", b"ef"]
    with pytest.raises(DecodeError, match=message):
        zstd_read_into(frame, [memoryview(bytearray(n)) for n in sizes])


@pytest.mark.parametrize("one_call_bytes", [0, 1 << 18])
def test_a_zstd_frame_without_a_content_size_fills_its_parts(one_call_bytes, monkeypatch):
    monkeypatch.setattr(compressors, "ZSTD_ONE_CALL_BYTES", one_call_bytes)  # stream or one call
    frame = __import__("zstandard").ZstdCompressor(write_content_size=False).compress(b"abcdef")
    parts = [memoryview(bytearray(4)), memoryview(bytearray(2))]
    zstd_read_into(frame, parts)
    assert [bytes(p) for p in parts] == [b"abcd", b"ef"]
    with pytest.raises(DecodeError):
        zstd_read_into(frame, [memoryview(bytearray(4)), memoryview(bytearray(1))])
