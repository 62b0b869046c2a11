"""Decoders of the format bounded by the bytes they read: counts, lengths and offsets from a
header are checked before anything is allocated, and range ends never overflow."""

from __future__ import annotations

import json
import struct
import time

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import zarr_vectors as zv
from zarr_vectors.errors import DecodeError, FormatError, InputError
from zarr_vectors.format.fragments import (
    HEADER,
    MAGIC,
    FragmentIndex,
    decode_fragments,
    decode_range_table,
    encode_fragments,
    range_tables,
    ranges_outside,
)
from zarr_vectors.format.grid import Grid, bins_per_chunk
from zarr_vectors.format.manifests import (
    ManifestBlock,
    decode_manifest,
    decode_manifests_batch,
    encode_manifest,
)
from zarr_vectors.format.metadata import LevelMeta, RootMeta
from zarr_vectors.format.zarr_json import MAX_JSON_DEPTH, _depth, load_json

I64 = np.iinfo(np.int64).max


@pytest.mark.parametrize("f", [2**32 - 1, 2**31, 10**9])
def test_fragment_header_claiming_billions_is_refused_without_allocating(f):
    buf = HEADER.pack(MAGIC, 1, 0, f, f) + bytes(64)
    start = time.perf_counter()
    assert decode_range_table(buf, f) is None
    assert range_tables([buf]) is None
    with pytest.raises(DecodeError, match=rf"F={f}, R={f} needs at least \d+ bytes, got 80"):
        decode_fragments(buf, 10)
    assert time.perf_counter() - start < 1.0


@given(st.integers(0, 2**63 - 1), st.integers(0, 2**63 - 1), st.integers(0, 2**63 - 1))
def test_ranges_outside_matches_exact_integer_arithmetic(start, count, n):
    assert bool(ranges_outside(np.array([start]), np.array([count]), n)[0]) == (start + count > n)


def test_range_end_overflowing_int64_is_refused():
    index = encode_fragments(FragmentIndex.from_ranges(np.array([2**62, 1]), np.array([2**62, 1])))
    with pytest.raises(DecodeError, match="reaches past the cell's 10 rows"):
        decode_fragments(index, 10)
    with pytest.raises(DecodeError, match="overflows a 64-bit row index"):
        decode_fragments(index)
    ok = encode_fragments(FragmentIndex.from_ranges(np.array([I64 - 5]), np.array([5])))
    assert decode_fragments(ok).ranges.tolist() == [[I64 - 5, 5]]


def _range_block(chunk: tuple[int, ...], start: int, count: int) -> bytes:
    return (
        struct.pack("<I", 1)
        + struct.pack(f"<{len(chunk)}q", *chunk)
        + b"\x01"
        + struct.pack("<qq", start, count)
    )


@pytest.mark.parametrize("start, count", [(0, 2**33), (2**62, 2**62), (5, 96), (-1, 2)])
def test_manifest_range_block_past_the_chunk_limit_is_refused_before_expanding(start, count):
    buf = _range_block((0, 0, 0), start, count)
    start_time = time.perf_counter()
    with pytest.raises(DecodeError, match="a chunk holds at most 100|negative"):
        decode_manifest(buf, 3, max_fragments=100)
    with pytest.raises(DecodeError, match="a chunk holds at most 100"):
        decode_manifests_batch([buf], 3, max_fragments=100)
    assert time.perf_counter() - start_time < 1.0


def test_manifest_naming_more_fragments_than_the_level_holds_is_refused():
    blocks = [ManifestBlock((c, 0, 0), np.arange(60)) for c in range(3)]  # 180 fragments in 3 chunks
    buf = encode_manifest(blocks)
    pos, _, frag = decode_manifests_batch([buf, buf], 3, max_fragments=60, max_per_object=180)
    assert len(frag) == 360 and np.array_equal(np.bincount(pos), [180, 180])
    with pytest.raises(
        DecodeError, match="manifest of entry 1 names 120 fragments or more; the level holds at most 100"
    ):
        decode_manifests_batch([encode_manifest(blocks[:1]), buf], 3, max_fragments=60, max_per_object=100)
    assert decode_manifest(buf, 3, max_fragments=60) == blocks


@given(
    st.lists(
        st.lists(st.tuples(st.integers(-3, 3), st.integers(0, 40), st.integers(1, 5)), max_size=4), max_size=6
    )
)
def test_batch_and_single_decoders_agree_under_a_limit(objects):
    items = [
        encode_manifest([ManifestBlock((c, 0), np.arange(s, s + n)) for c, s, n in blocks])
        for blocks in objects
    ]
    limit = 42
    singles = []
    for i, buf in enumerate(items):
        try:
            singles.append(
                [(i, b.chunk, int(f)) for b in decode_manifest(buf, 2, limit) for f in b.fragments]
            )
        except DecodeError:
            singles.append(None)
    if any(s is None for s in singles):
        with pytest.raises(DecodeError):
            decode_manifests_batch(items, 2, limit)
        return
    pos, chunks, frag = decode_manifests_batch(items, 2, limit)
    got = sorted(zip(pos.tolist(), map(tuple, chunks.tolist()), frag.tolist()))
    assert got == sorted(x for s in singles for x in s)


def test_json_nesting_is_bounded_and_measured_outside_strings():
    with pytest.raises(FormatError, match=f"x: zarr.json nests deeper than {MAX_JSON_DEPTH} levels"):
        load_json(b"[" * 200_000 + b"]" * 200_000, "x")
    deep_in_string = json.dumps({"a": "[" * 1000, "b": [[1]] * 100}).encode()
    assert load_json(deep_in_string, "x")["a"] == "[" * 1000


def _nesting(value: object) -> int:
    if isinstance(value, list):
        return 1 + max((_nesting(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((_nesting(v) for v in value.values()), default=0)
    return 0


JSON_VALUES = st.recursive(
    st.none() | st.integers() | st.text(alphabet='[]{}"\\ab', max_size=6),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(alphabet='[{"\\x', max_size=3), inner, max_size=3)
    ),
    max_leaves=30,
)


@given(JSON_VALUES, st.integers(0, 70))
def test_depth_equals_the_parsed_nesting(value, wrap):
    for _ in range(wrap):
        value = [value]
    raw = json.dumps([value, "[" * 70]).encode()
    depth = _depth(raw)
    assert depth in (0, _nesting(json.loads(raw)))
    if raw.count(b"[") + raw.count(b"{") > MAX_JSON_DEPTH:
        assert depth == _nesting(json.loads(raw))


@pytest.mark.parametrize(
    "raw, match",
    [
        (b'{"a": "\xff"}', r"n: zarr.json is not UTF-8 text"),
        (b'{"a": 1', r"n: zarr.json is not valid JSON"),
        (b'{"a": ' + b"1" * 5000 + b"}", r"n: zarr.json cannot be read"),
    ],
)
def test_unreadable_json_is_a_format_error_naming_the_node(raw, match):
    with pytest.raises(FormatError, match=match):
        load_json(raw, "n")


def _root(**zv) -> dict:
    block = {"zv_version": "0.9.0", "chunk_shape": [1.0, 1.0], "bounds": [[0, 0], [1, 1]]} | zv
    ms = [{"axes": [{"name": "x"}, {"name": "y"}], "datasets": [{"path": "0"}]}]
    return {"zarr_vectors": block, "multiscales": ms}


def test_root_without_multiscales_is_a_format_error():
    attrs = _root()
    del attrs["multiscales"]
    with pytest.raises(FormatError, match="no multiscales list"):
        RootMeta.from_attributes(attrs)


def test_empty_geometry_types_is_a_format_error():
    with pytest.raises(FormatError, match="geometry_types must be a list of strings"):
        RootMeta.from_attributes(_root(geometry_types=[]))


@pytest.mark.parametrize(
    "change, match",
    [
        ({"chunk_shape": [float("inf"), 1.0]}, "chunk_shape must hold finite numbers"),
        ({"chunk_shape": [1.0, -2.0]}, "chunk_shape must be positive"),
        ({"chunk_shape": []}, "one entry per space axis"),
        ({"bounds": [[0, float("nan")], [1, 1]]}, r"bounds\[0\] must hold finite numbers"),
        ({"bounds": [[2, 0], [1, 1]]}, "min corner"),
        ({"base_bin_shape": [0.0, 1.0]}, "base_bin_shape must be positive"),
        ({"reduction_factor": "8"}, "reduction_factor must be an integer"),
        ({"cross_level_depth": -2}, "cross_level_depth must be an integer >= -1"),
    ],
)
def test_root_metadata_values_are_checked_before_use(change, match):
    with pytest.raises(FormatError, match=match):
        RootMeta.from_attributes(_root(**change))


def test_cross_level_depth_minus_one_means_every_level_pair():
    """The format gives -1 the meaning 'all adjacent level pairs': a valid value, read as is."""
    assert RootMeta.from_attributes(_root(cross_level_depth=-1)).cross_level_depth == -1


def test_multiscales_translation_must_be_positive_and_long_enough():
    ms = [
        {
            "axes": [{"name": "x"}, {"name": "y"}],
            "datasets": [{"coordinateTransformations": [{"type": "translation", "translation": [0.5]}]}],
        }
    ]
    with pytest.raises(FormatError, match=r"datasets\[0\] translation has 1 entries for 2 space axes"):
        RootMeta.from_attributes(_root() | {"multiscales": ms})
    ms[0]["datasets"][0]["coordinateTransformations"][0]["translation"] = [0.5, float("inf")]
    with pytest.raises(FormatError, match="must hold finite numbers"):
        RootMeta.from_attributes(_root() | {"multiscales": ms})


@pytest.mark.parametrize(
    "block, match",
    [
        ({"vertex_count": -1}, "vertex_count must be an integer >= 0"),
        ({"vertex_count": 1.5}, "vertex_count must be an integer"),
        ({"arrays_present": "vertices"}, "arrays_present must be a list"),
        ({"chunk_shape": [1.0, float("inf")]}, "chunk_shape must hold finite numbers"),
        ({"object_sparsity": "all"}, "object_sparsity must be a list of numbers"),
        ({"parent_level": "0"}, "parent_level must be an integer"),
    ],
)
def test_level_metadata_values_are_checked_before_use(block, match):
    with pytest.raises(FormatError, match=match):
        LevelMeta.from_json({"level": 0, "vertex_count": 3} | block, "level 0")


def test_cell_counts_are_python_ints_that_never_wrap():
    grid = Grid(np.ones(3), np.ones(3), np.zeros(3, np.int64), np.array([2**21, 2**21, 2**22], np.int64))
    assert int(np.prod(grid.shape)) == 0  # what int64 arithmetic gives
    assert grid.n_cells == 2**64


@pytest.mark.parametrize("bins", [[1e-300, 1.0], [0.0, 1.0], [float("nan"), 1.0]])
def test_absurd_bin_shapes_are_refused(bins):
    with pytest.raises(ValueError, match="whole multiple of bin_shape"):
        bins_per_chunk(np.array([1.0, 1.0]), np.array(bins))


@pytest.mark.parametrize(
    ("hi", "chunk", "match"),
    [
        # 2**32 x 2**32 cells: 2**64, which int64 arithmetic (np.prod) wraps to 0
        ([2.0**32 - 1, 2.0**32 - 1], [1.0, 1.0], r"the chunk grid \[4294967296, 4294967296\] is too large"),
        (
            [2.0**21 - 1, 2.0**21 - 1, 2.0**22 - 1],
            [1.0, 1.0, 1.0],
            r"\[2097152, 2097152, 4194304\] is too large",
        ),
        # chunk coordinates past int64: the cast to int64 would wrap or give INT64_MIN
        ([1e19, 1.0], [1.0, 1.0], r"reach chunk ±1e\+19, past the 2.31e\+18 chunks"),
        ([1e5, 1e5], [1e-300, 1.0], r"reach chunk ±1e\+305"),
    ],
)
def test_grids_too_large_for_int64_are_refused_before_anything_is_built(tmp_path, hi, chunk, match):
    """The 'grid too large' guard counts cells in Python ints (issue 28, item 9)."""
    lo = [0.0] * len(hi)
    with pytest.raises(InputError, match=match):
        zv.write_points(tmp_path / "s.zarr", np.array([lo, hi]), chunk_shape=chunk, bounds=(lo, hi))
    assert not (tmp_path / "s.zarr").exists()


def test_grid_coordinates_past_int64_are_an_input_error():
    with pytest.raises(InputError, match="choose a larger chunk_shape or smaller bounds"):
        Grid.from_bounds(np.array([[-1e300, 0.0], [1e300, 1.0]]), np.array([1.0, 1.0]))
    with pytest.raises(InputError, match="reach chunk ±nan"):
        Grid.from_bounds(np.array([[0.0, 0.0], [np.nan, 1.0]]), np.array([1.0, 1.0]))
