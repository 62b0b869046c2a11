"""Object manifests v1: hand-built bytes, both encoders, both decoders, corrupt input."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from zarr_vectors.errors import DecodeError
from zarr_vectors.format.manifests import (
    ManifestBlock,
    decode_manifest,
    decode_manifests_batch,
    encode_manifest,
    encode_manifests_batch,
)


def test_empty_manifest_is_four_zero_bytes():
    assert encode_manifest([]) == b"\0\0\0\0"
    assert decode_manifest(b"\0\0\0\0", 3) == []


def test_modes_by_hand():
    blocks = [
        ManifestBlock((2, 1, 0), np.array([3])),  # mode 0
        ManifestBlock((2, 1, 1), np.array([4, 5, 6])),  # mode 1
        ManifestBlock((-1, 0, 7), np.array([9, 2])),  # mode 2
    ]
    expected = (
        struct.pack("<I", 3)
        + struct.pack("<qqqBq", 2, 1, 0, 0, 3)
        + struct.pack("<qqqBqq", 2, 1, 1, 1, 4, 3)
        + struct.pack("<qqqBIqq", -1, 0, 7, 2, 2, 9, 2)
    )
    raw = encode_manifest(blocks)
    assert raw == expected
    assert decode_manifest(raw, 3) == blocks


blocks_st = st.lists(
    st.tuples(
        st.tuples(st.integers(-5, 5), st.integers(-5, 5)),
        st.one_of(
            st.lists(st.integers(0, 40), min_size=1, max_size=6),
            st.builds(lambda a, n: list(range(a, a + n)), st.integers(0, 20), st.integers(1, 6)),
        ),
    ),
    max_size=5,
)


@given(st.lists(blocks_st, min_size=1, max_size=6))
def test_batch_encoder_and_decoder_match_the_single_ones(objects):
    manifests = [[ManifestBlock(c, np.asarray(f, np.int64)) for c, f in obj] for obj in objects]
    singles = [encode_manifest(m) for m in manifests]
    block_object, chunks, offsets, frags = [], [], [0], []
    for o, m in enumerate(manifests):
        for b in m:
            block_object.append(o)
            chunks.append(b.chunk)
            frags.extend(b.fragments.tolist())
            offsets.append(len(frags))
    batch = encode_manifests_batch(
        len(manifests),
        np.asarray(block_object, np.int64),
        np.asarray(chunks, np.int64).reshape(-1, 2),
        np.asarray(offsets, np.int64),
        np.asarray(frags, np.int64),
    )
    assert batch == singles
    assert [decode_manifest(raw, 2) for raw in singles] == manifests
    obj, ch, fr = decode_manifests_batch(singles, 2)
    flat = sorted(
        (o, tuple(c), f)
        for o, m in enumerate(manifests)
        for b in m
        for c, f in [(b.chunk, x) for x in b.fragments.tolist()]
    )
    got = sorted((int(a), tuple(int(v) for v in b), int(c)) for a, b, c in zip(obj, ch, fr))
    assert got == flat


GOOD = encode_manifest([ManifestBlock((1, 2), np.array([4, 9]))])


@pytest.mark.parametrize(
    "raw, message",
    [
        (b"\1\0", "shorter than its 4-byte"),
        (GOOD[:-3], "truncated"),
        (GOOD + b"\0", "trailing"),
        (GOOD[:20] + b"\x07" + GOOD[21:], "unknown mode 7"),
    ],
)
def test_corrupt_manifests(raw, message):
    with pytest.raises(DecodeError, match=message):
        decode_manifest(raw, 2)
    with pytest.raises(DecodeError):
        decode_manifests_batch([raw], 2)
