"""Fragment index v1: bytes built by hand from the spec, round trips, and corrupt input."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from zarr_vectors.errors import DecodeError
from zarr_vectors.format.fragments import (
    FragmentIndex,
    decode_fragments,
    decode_range_table,
    encode_fragments,
    encode_range_batch,
    ranges_to_rows,
)

HEAD = "<IHHII"
MAGIC = 0x5A564647


def test_magic_bytes_spell_zvfg_on_disk():
    assert encode_fragments(FragmentIndex.from_ranges([], []))[:4] == b"GFVZ"


def test_empty_index_is_the_16_byte_header():
    assert encode_fragments(FragmentIndex.from_ranges([], [])) == struct.pack(HEAD, MAGIC, 1, 0, 0, 0)


def test_two_range_fragments_worked_example_is_60_bytes():
    # Spec digest 3.3: header 16 + bitmap 8 + two ranges 32 + one uint32 offset = 60.
    expected = (
        struct.pack(HEAD, MAGIC, 1, 0, 2, 2)
        + bytes([0b11, 0, 0, 0, 0, 0, 0, 0])
        + struct.pack("<qqqq", 0, 3, 3, 4)
        + struct.pack("<I", 0)
    )
    got = encode_fragments(FragmentIndex.from_ranges([0, 3], [3, 4]))
    assert len(got) == 60
    assert got == expected


def test_mixed_range_and_explicit_layout():
    # Fragments: 0 explicit [5, 1], 1 range (0, 2), 2 explicit [], 3 range (2, 1).
    idx = FragmentIndex(
        is_range=np.array([False, True, False, True]),
        ranges=np.array([[0, 2], [2, 1]]),
        explicit_offsets=np.array([0, 2, 2]),
        explicit_indices=np.array([5, 1]),
    )
    expected = (
        struct.pack(HEAD, MAGIC, 1, 0, 4, 2)
        + bytes([0b1010, 0, 0, 0, 0, 0, 0, 0])
        + struct.pack("<qqqq", 0, 2, 2, 1)
        + struct.pack("<III", 0, 2, 2)
        + struct.pack("<qq", 5, 1)
    )
    raw = encode_fragments(idx)
    assert raw == expected
    back = decode_fragments(raw, n_rows=6)
    assert back.rows(0).tolist() == [5, 1]
    assert back.rows(1).tolist() == [0, 1]
    assert back.rows(2).tolist() == []
    assert back.rows(3).tolist() == [2]


def test_nine_fragments_use_two_bitmap_bytes_padded_to_eight():
    raw = encode_fragments(FragmentIndex.from_ranges(np.arange(9), np.ones(9)))
    assert raw[16:24] == bytes([0xFF, 0x01, 0, 0, 0, 0, 0, 0])
    assert len(raw) == 16 + 8 + 9 * 16 + 4


@given(st.lists(st.integers(0, 50), max_size=70))
def test_range_round_trip_and_batch_encoder_agree(counts):
    counts = np.asarray(counts, np.int64)
    starts = np.cumsum(counts) - counts
    idx = FragmentIndex.from_ranges(starts, counts)
    raw = encode_fragments(idx)
    back = decode_fragments(raw, n_rows=int(counts.sum()))
    assert np.array_equal(back.ranges, idx.ranges)
    assert back.all_ranges
    if len(counts):
        assert encode_range_batch(starts[None], counts[None]) == [raw]
        assert np.array_equal(decode_range_table(raw, len(counts)), idx.ranges)


@given(st.lists(st.lists(st.integers(0, 30), max_size=6), max_size=12))
def test_explicit_round_trip(lists):
    idx = FragmentIndex.from_explicit([np.asarray(x, np.int64) for x in lists])
    back = decode_fragments(encode_fragments(idx), n_rows=31)
    assert [back.rows(f).tolist() for f in range(back.num_fragments)] == lists


@given(st.lists(st.tuples(st.integers(0, 100), st.integers(0, 20)), max_size=20))
def test_ranges_to_rows_matches_python(pairs):
    starts = np.array([p[0] for p in pairs], np.int64)
    counts = np.array([p[1] for p in pairs], np.int64)
    expected = [s + i for s, c in pairs for i in range(c)]
    assert ranges_to_rows(starts, counts).tolist() == expected


GOOD = encode_fragments(FragmentIndex.from_ranges([0, 3], [3, 4]))


@pytest.mark.parametrize(
    "raw, message",
    [
        (GOOD[:10], "shorter than its 16-byte header"),
        (b"XXXX" + GOOD[4:], "magic"),
        (GOOD[:4] + struct.pack("<H", 2) + GOOD[6:], "version 2"),
        (GOOD[:6] + struct.pack("<H", 1) + GOOD[8:], "flags"),
        (struct.pack(HEAD, MAGIC, 1, 0, 1, 2) + GOOD[16:], "range fragments but only 1"),
        (GOOD[:-2], "needs at least|should be"),
        (GOOD + b"\0", "should be"),
        (GOOD[:16] + bytes([0b01]) + GOOD[17:], "set bits"),
    ],
)
def test_corrupt_indices_raise_decode_errors(raw, message):
    with pytest.raises(DecodeError, match=message):
        decode_fragments(raw)


def test_ranges_past_the_cell_are_rejected():
    with pytest.raises(DecodeError, match="past the cell's 5 rows"):
        decode_fragments(GOOD, n_rows=5)
    assert decode_range_table(GOOD[:-1], 2) is None
