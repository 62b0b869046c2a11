"""Links: the spec's worked examples, path grammar, Lehmer codes, row codecs and placement."""

from __future__ import annotations

import itertools
import math
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from zarr_vectors.errors import DecodeError, FormatError, InputError
from zarr_vectors.format.links import (
    apply_order,
    build_rows,
    canonical_order,
    check_indices,
    cross_level_anchor,
    decode_flat_rows,
    decode_ragged,
    encode_flat_rows,
    encode_ragged,
    format_delta,
    format_offsets,
    is_intra,
    lehmer_decode,
    lehmer_encode,
    links_has_perm,
    parse_delta,
    parse_offsets,
    place_links,
    restore_input_order,
    segment_order,
    smallest_index_dtype,
    split_rows,
    undo_order,
    uses_flat_cells,
)


def cells_of(chunks, vertices, **policy):
    """{(segment, chunk): rows as lists} of a placement."""
    placed = place_links(np.array(chunks), np.array(vertices), **policy)
    return {(c.segment, c.chunk): c.rows.tolist() for c in placed.cells()}


UNDIRECTED = dict(directed=False, store="canonical")
DIRECTED = dict(directed=True, store="canonical")

# ---------------------------------------------------------------- spec §10.6.9 worked examples


def test_example_intra_edge():
    got = cells_of([[(4, 2, 7), (4, 2, 7)]], [[5, 2]], **UNDIRECTED)
    assert got == {("0.0.0", (4, 2, 7)): [[5, 2]]}
    assert encode_flat_rows(np.array([[5, 2]]), "uint8") == bytes([5, 2])


def test_example_edge_across_plus_z():
    got = cells_of([[(4, 2, 7), (4, 2, 8)]], [[5, 2]], **UNDIRECTED)
    assert got == {("0.0.+1", (4, 2, 7)): [[0, 5, 2]]}
    # Given the other way round it lands in the same cell, with perm 1 to recover the order.
    assert cells_of([[(4, 2, 8), (4, 2, 7)]], [[2, 5]], **UNDIRECTED) == {("0.0.+1", (4, 2, 7)): [[1, 5, 2]]}


def test_example_directed_edge_minus_x():
    got = cells_of([[(4, 2, 7), (3, 2, 7)]], [[5, 2]], **DIRECTED)
    assert got == {("-1.0.0", (4, 2, 7)): [[5, 2]]}


def test_example_intra_triangle():
    got = cells_of([[(4, 2, 7)] * 3], [[5, 3, 7]], **UNDIRECTED)
    assert got == {("0.0.0_0.0.0", (4, 2, 7)): [[5, 3, 7]]}


def test_example_triangle_over_two_seams():
    got = cells_of([[(4, 2, 7), (4, 2, 8), (4, 3, 7)]], [[5, 3, 7]], **UNDIRECTED)
    assert got == {("0.0.+1_0.+1.0", (4, 2, 7)): [[0, 5, 3, 7]]}


def test_example_parent_reference_self():
    anchors = cross_level_anchor(np.array([[4, 2, 7]]), [1, 1, 1], [2, 2, 2])
    placed = place_links(np.array([[(4, 2, 7)]]), np.array([[9]]), delta=+1, anchors=anchors, **UNDIRECTED)
    assert [(c.segment, c.chunk, c.has_perm, c.rows.tolist()) for c in placed.cells()] == [
        ("self", (4, 2, 7), False, [[9]])
    ]
    assert not links_has_perm(np.zeros((0, 3)), delta=1, directed=False, store="canonical")
    assert not uses_flat_cells(np.zeros((0, 3)), 1)  # cross-level arrays are ragged
    assert uses_flat_cells(np.zeros((0, 3)), 0)  # links/0/self would be flat intra


def test_cross_level_anchor_digest_example():
    # root chunk 100, level-1 chunk 200: source 3 -> target 2 is +1; source 1 -> target 1 is +1.
    anchor = cross_level_anchor(np.array([[3], [1], [-1]]), [1], [2])
    assert anchor.ravel().tolist() == [1, 0, -1]  # floors toward -inf
    placed = place_links(
        np.array([[(3,), (2,)], [(1,), (1,)]]),
        np.array([[0, 4], [1, 6]]),
        delta=1,
        anchors=anchor[:2],
        **UNDIRECTED,
    )
    assert placed.offsets.reshape(-1).tolist() == [1, 1]
    assert placed.vertices.tolist() == [[0, 4], [1, 6]] and not placed.has_perm.any()


# ---------------------------------------------------------------- bytes observed from the reference 0.9.2


TRI = ([[(4, 3, 7), (4, 2, 7), (4, 2, 8)]], [[7, 5, 3]])


@pytest.mark.parametrize(
    "policy, expected",
    [
        (UNDIRECTED, {("0.0.+1_0.+1.0", (4, 2, 7)): [[3, 5, 3, 7]]}),
        (DIRECTED, {("0.-1.0_0.-1.+1", (4, 3, 7)): [[7, 5, 3]]}),
        (
            dict(directed=False, store="duplicate"),
            {
                ("0.+1.-1_0.0.-1", (4, 2, 8)): [[4, 3, 7, 5]],
                ("0.+1.0_0.0.+1", (4, 2, 7)): [[2, 5, 7, 3]],
                ("0.-1.0_0.-1.+1", (4, 3, 7)): [[0, 7, 5, 3]],
            },
        ),
    ],
)
def test_triangle_placement_matches_reference(policy, expected):
    assert cells_of(*TRI, **policy) == expected
    if policy["store"] == "duplicate":
        assert cells_of(*TRI, directed=True, store="duplicate") == expected


def test_shared_chunk_ties_match_reference():
    chunks = [[(0, 0, 1), (0, 0, 0), (0, 0, 0)], [(0, 0, 0)] * 3, [(0, 0, 0), (0, 0, 1), (0, 0, 0)]]
    verts = [[1, 9, 4], [9, 4, 2], [3, 1, 2]]
    assert cells_of(chunks, verts, **UNDIRECTED) == {
        ("0.0.0_0.0.+1", (0, 0, 0)): [[5, 4, 9, 1], [4, 2, 3, 1]],
        ("0.0.0_0.0.0", (0, 0, 0)): [[9, 4, 2]],
    }
    # duplicate: the copy's lead is the smallest vertex of that chunk; the rest keep input order.
    assert cells_of(chunks, verts, directed=False, store="duplicate") == {
        ("0.0.+1_0.0.0", (0, 0, 0)): [[4, 4, 1, 9]],
        ("0.0.-1_0.0.-1", (0, 0, 1)): [[0, 1, 9, 4], [2, 1, 3, 2]],
        ("0.0.0_0.0.+1", (0, 0, 0)): [[4, 2, 3, 1]],
        ("0.0.0_0.0.0", (0, 0, 0)): [[9, 4, 2]],
    }


def test_reference_ragged_bytes():
    # One group of one uint8 row [perm 1, v5, v2], as the reference writes links/0/0.0.+1.
    blob = bytes.fromhex("01000000000000000000000000000000010502")
    rows, groups = decode_ragged(blob, 3, "uint8")
    assert rows.tolist() == [[1, 5, 2]] and groups.tolist() == [0, 1]
    assert encode_ragged([np.array([[1, 5, 2]])], "uint8") == blob


# ---------------------------------------------------------------- path grammar


@pytest.mark.parametrize("value, text", [(0, "0"), (1, "+1"), (-2, "-2"), (12, "+12"), (-100, "-100")])
def test_delta_round_trip(value, text):
    assert format_delta(value) == text
    assert parse_delta(text) == value


@pytest.mark.parametrize("text", ["+0", "-0", "1", "+01", "00", "", " +1", "+1 ", "+", "1_0", "+١", "+1.0"])
def test_parse_delta_is_strict(text):
    with pytest.raises(DecodeError, match="not a link delta"):
        parse_delta(text)


def test_format_offsets():
    assert format_offsets(np.array([[0, 0, 1], [0, 1, 0]])) == "0.0.+1_0.+1.0"
    assert format_offsets(np.array([[-1, 0, 0]])) == "-1.0.0"
    assert format_offsets(np.zeros((0, 3), int)) == "self"
    assert format_offsets(np.array([[0, 0]])) == "0.0"


@pytest.mark.parametrize(
    "name, width, ndim, expected",
    [
        ("0.0.+1", 2, 3, [[0, 0, 1]]),
        ("0.0.+1_0.+1.0", 3, 3, [[0, 0, 1], [0, 1, 0]]),
        ("-1.+20", 2, 2, [[-1, 20]]),
        ("self", 1, 3, np.zeros((0, 3))),
        ("0_0_0", 4, 1, [[0], [0], [0]]),
    ],
)
def test_parse_offsets_accepts(name, width, ndim, expected):
    got = parse_offsets(name, width, ndim)
    assert got.dtype == np.int64 and got.shape == (width - 1, ndim)
    assert np.array_equal(got, np.asarray(expected))
    assert format_offsets(got) == name


@pytest.mark.parametrize(
    "name, width, ndim, message",
    [
        ("0.0.+1", 3, 3, "has 1 offsets; link_width 3 needs 2"),
        ("0.0.+1_0.0.0", 2, 3, "has 2 offsets; link_width 2 needs 1"),
        ("0.+1", 2, 3, "has 2 components, sid_ndim is 3"),
        ("0.0.+1_0.+1", 3, 3, "offset 2 has 2 components"),
        ("self", 2, 3, "only valid for link_width 1"),
        ("0.0.0", 1, 3, "must use the name 'self'"),
        ("", 1, 3, "must use the name 'self'"),
        ("0.0.1", 2, 3, "component '1'"),
        ("0.0.+0", 2, 3, "component '\\+0'"),
        ("0.-0.0", 2, 3, "component '-0'"),
        ("0.0.", 2, 3, "component ''"),
        ("0..0", 2, 3, "component ''"),
        ("SELF", 2, 1, "component 'SELF'"),
        ("0.0.0", 0, 3, "must be at least 1"),
    ],
)
def test_parse_offsets_rejects(name, width, ndim, message):
    with pytest.raises(DecodeError, match=message):
        parse_offsets(name, width, ndim)


@given(
    hnp.arrays(
        np.int64,
        hnp.array_shapes(min_dims=2, max_dims=2, min_side=0, max_side=4),
        elements=st.integers(-300, 300),
    )
)
def test_offsets_round_trip(offsets):
    if offsets.shape[1] == 0:
        return
    name = format_offsets(offsets)
    assert np.array_equal(parse_offsets(name, offsets.shape[0] + 1, offsets.shape[1]), offsets)
    assert is_intra(offsets) == (offsets.size == 0 or not offsets.any())


def test_segment_enumeration_order_puts_intra_last():
    names = ["0.0.0", "0.0.-1", "+1.0.0", "0.0.+1", "-1.0.0"]
    assert segment_order(names) == ["+1.0.0", "-1.0.0", "0.0.+1", "0.0.-1", "0.0.0"]


def test_is_intra():
    assert is_intra(np.zeros((0, 3))) and is_intra(np.zeros((2, 3)))
    assert not is_intra(np.array([[0, 0, 1]]))


@pytest.mark.parametrize(
    "offsets, delta, directed, store, expected",
    [
        ([[0, 0, 0]], 0, False, "canonical", False),
        ([[0, 0, 0]], 0, True, "duplicate", False),
        (np.zeros((0, 3)), 0, False, "duplicate", False),
        ([[0, 0, 1]], 0, False, "canonical", True),
        ([[0, 0, 1]], 0, True, "canonical", False),
        ([[0, 0, 1]], 0, False, "duplicate", True),
        ([[0, 0, 1]], 0, True, "duplicate", True),
        ([[0, 0, 1]], 1, False, "canonical", False),
        ([[0, 0, 1]], -1, True, "duplicate", False),
    ],
)
def test_links_has_perm(offsets, delta, directed, store, expected):
    assert links_has_perm(np.asarray(offsets), delta=delta, directed=directed, store=store) is expected


def test_links_has_perm_rejects_unknown_store():
    with pytest.raises(FormatError, match="store policy"):
        links_has_perm(np.array([[0, 0, 1]]), delta=0, directed=False, store="both")


# ---------------------------------------------------------------- Lehmer codes


def test_lehmer_known_values():
    assert lehmer_encode(np.array([[0, 1, 2]])).tolist() == [0]
    assert lehmer_encode(np.array([[2, 1, 0]])).tolist() == [5]
    assert lehmer_encode(np.array([[1, 0]])).tolist() == [1]
    assert lehmer_encode(np.array([[0]])).tolist() == [0]
    # All 3! permutations in lexicographic order get codes 0..5.
    perms = np.array(list(itertools.permutations(range(3))))
    assert lehmer_encode(perms).tolist() == list(range(6))
    assert lehmer_decode(np.arange(6), 3).tolist() == perms.tolist()


PERMS = st.integers(1, 5).flatmap(
    lambda n: st.lists(st.permutations(range(n)), max_size=20).map(lambda p: (n, p))
)


@given(PERMS)
def test_lehmer_round_trip(case):
    width, perms = case
    perms = np.array(perms, dtype=np.int64).reshape(-1, width)
    codes = lehmer_encode(perms)
    assert codes.shape == (len(perms),)
    assert np.all((codes >= 0) & (codes < math.factorial(width)))
    assert np.array_equal(lehmer_decode(codes, width), perms)


def test_lehmer_decode_rejects_out_of_range_codes():
    with pytest.raises(DecodeError, match="perm_idx 6 of record 1 is outside \\[0, 6\\)"):
        lehmer_decode(np.array([0, 6]), 3)
    with pytest.raises(DecodeError, match="perm_idx -1"):
        lehmer_decode(np.array([-1]), 2)


def test_lehmer_encode_rejects_non_permutations():
    with pytest.raises(InputError, match="row 1 .* is not a permutation"):
        lehmer_encode(np.array([[0, 1], [1, 1]]))


@given(st.integers(1, 5), st.integers(0, 30), st.integers(0, 2**32 - 1))
def test_order_helpers_round_trip(width, m, seed):
    rng = np.random.default_rng(seed)
    chunks = rng.integers(-1, 2, size=(m, width, 2))
    verts = rng.integers(0, 4, size=(m, width))
    sigma = canonical_order(chunks, verts)
    stored = apply_order(verts, sigma)
    stored_chunks = apply_order(chunks, sigma)
    keys = np.concatenate([stored_chunks, stored[..., None]], axis=2).tolist()
    assert all(row == sorted(row) for row in keys)
    assert np.array_equal(undo_order(stored, sigma), verts)
    assert np.array_equal(undo_order(stored_chunks, sigma), chunks)
    assert np.array_equal(restore_input_order(stored, lehmer_encode(sigma)), verts)


# ---------------------------------------------------------------- row codecs


def test_flat_rows_round_trip_and_layout():
    rows = np.array([[5, 2], [300, 1]])
    raw = encode_flat_rows(rows, "uint16")
    assert raw == struct.pack("<4H", 5, 2, 300, 1)
    back = decode_flat_rows(raw, 2, "uint16")
    assert back.dtype == np.uint16 and back.tolist() == rows.tolist()
    assert decode_flat_rows(b"", 3, "int64").shape == (0, 3)


def test_flat_rows_reject_partial_row():
    message = "7 bytes, not a whole number of 2-column uint16 rows \\(4 bytes each\\)"
    with pytest.raises(DecodeError, match=message):
        decode_flat_rows(b"\0" * 7, 2, "uint16")


def test_encoders_refuse_values_that_do_not_fit():
    with pytest.raises(InputError, match="do not fit dtype uint8"):
        encode_flat_rows(np.array([[256, 0]]), "uint8")
    with pytest.raises(InputError, match="do not fit dtype uint16"):
        encode_ragged([np.array([[-1, 0]])], "uint16")
    with pytest.raises(FormatError, match="integer dtype"):
        encode_flat_rows(np.array([[1, 2]]), "float32")


def test_ragged_layout_against_hand_built_blob():
    groups = [np.array([[0, 5, 2], [1, 7, 7]]), np.zeros((0, 3), int), np.array([[4, 1, 9]])]
    expected = (
        struct.pack("<q", 3)
        + struct.pack("<3q", 0, 12, 12)
        + struct.pack("<6H", 0, 5, 2, 1, 7, 7)
        + struct.pack("<3H", 4, 1, 9)
    )
    assert encode_ragged(groups, "uint16") == expected
    rows, bounds = decode_ragged(expected, 3, "uint16")
    assert rows.tolist() == [[0, 5, 2], [1, 7, 7], [4, 1, 9]]
    assert bounds.tolist() == [0, 2, 2, 3]


def test_ragged_header_is_int64_for_int64_rows_too():
    raw = encode_ragged([np.array([[-3, 2**40]])], "int64")
    assert raw == struct.pack("<qq", 1, 0) + struct.pack("<qq", -3, 2**40)


@pytest.mark.parametrize("blob", [b"", b"\x01", b"\0" * 7, struct.pack("<q", 0)])
def test_ragged_empty_forms(blob):
    rows, bounds = decode_ragged(blob, 2, "uint32")
    assert rows.shape == (0, 2) and bounds.tolist() == [0]


@settings(max_examples=60)
@given(
    st.sampled_from(["uint8", "uint16", "uint32", "int64"]),
    st.integers(1, 5),
    st.lists(st.integers(0, 4), max_size=6),
    st.integers(0, 2**32 - 1),
)
def test_ragged_round_trip(dtype, width, sizes, seed):
    rng = np.random.default_rng(seed)
    top = min(np.iinfo(dtype).max, 10**6)
    groups = [rng.integers(0, top, size=(n, width), endpoint=True) for n in sizes]
    raw = encode_ragged(groups, dtype)
    rows, bounds = decode_ragged(raw, width, dtype)
    assert bounds.tolist() == [0, *np.cumsum(sizes).tolist()]
    expected = np.concatenate(groups) if groups else np.zeros((0, width))
    assert np.array_equal(rows, expected.reshape(-1, width))


GOOD = struct.pack("<3q", 2, 0, 4) + struct.pack("<4H", 1, 2, 3, 4)


@pytest.mark.parametrize(
    "blob, message",
    [
        (struct.pack("<q", -1), "K=-1"),
        (struct.pack("<qq", 3, 0), "K=3 row groups; its 16 bytes hold at most 1"),
        (struct.pack("<q", 0) + b"\0\0\0\0", "K=0 but 4 data bytes"),
        (struct.pack("<3q", 2, 4, 4) + GOOD[24:], "group 0 starts at data byte 4, expected 0"),
        (struct.pack("<3q", 2, 0, 12) + GOOD[24:], "group 1 starts at data byte 12, past the 8-byte data"),
        (struct.pack("<4q", 3, 0, 8, 4) + GOOD[24:], "offsets decrease at group 2 \\(8 -> 4\\)"),
        (struct.pack("<3q", 2, 0, 2) + GOOD[24:], "group 1's offset 2 is not a multiple of the 4-byte row"),
        (GOOD + b"\0", "the data section \\(9 bytes\\) is not a multiple of the 4-byte row"),
    ],
)
def test_ragged_corrupt(blob, message):
    with pytest.raises(DecodeError, match=message):
        decode_ragged(blob, 2, "uint16")


def test_ragged_good_reference_case():
    rows, bounds = decode_ragged(GOOD, 2, "uint16")
    assert rows.tolist() == [[1, 2], [3, 4]] and bounds.tolist() == [0, 1, 2]


def test_build_and_split_rows():
    rows = build_rows(np.array([[5, 2]]), np.array([1]))
    assert rows.tolist() == [[1, 5, 2]]
    perm, verts = split_rows(rows, 2, True)
    assert perm.tolist() == [1] and verts.tolist() == [[5, 2]]
    assert split_rows(np.array([[5, 2]]), 2, False)[0] is None
    with pytest.raises(DecodeError, match="needs 3 columns"):
        split_rows(np.array([[5, 2]]), 2, True)


@pytest.mark.parametrize(
    "top, name",
    [
        (-1, "uint8"),
        (0, "uint8"),
        (255, "uint8"),
        (256, "uint16"),
        (65535, "uint16"),
        (65536, "uint32"),
        (2**32 - 1, "uint32"),
        (2**32, "int64"),
    ],
)
def test_smallest_index_dtype(top, name):
    assert smallest_index_dtype(top) == np.dtype(name)


def test_check_indices_reports_first_bad_index():
    check_indices(np.array([[0, 4], [2, 0]]), np.array([3, 5]))
    with pytest.raises(DecodeError, match="record 1, endpoint 0: vertex index 3 is outside \\[0, 3\\)"):
        check_indices(np.array([[0, 4], [3, 9]]), np.array([3, 5]))
    with pytest.raises(DecodeError, match="record 0, endpoint 1: vertex index -1"):
        check_indices(np.array([[0, -1]]), np.array([[3, 5]]))


# ---------------------------------------------------------------- placement properties


def _random_records(seed, m, width, ndim=3):
    rng = np.random.default_rng(seed)
    chunks = rng.integers(-1, 2, size=(m, width, ndim))
    same = rng.random(m) < 0.3  # some records entirely inside one chunk
    chunks[same] = chunks[same][:, :1]
    verts = rng.integers(0, 6, size=(m, width))
    return chunks, verts


def _lex_nonnegative(offset):
    nz = offset[offset != 0]
    return len(nz) == 0 or nz[0] > 0


@settings(max_examples=60)
@given(st.integers(1, 4), st.integers(0, 25), st.integers(0, 2**32 - 1))
def test_canonical_undirected_stores_once_and_recovers_order(width, m, seed):
    chunks, verts = _random_records(seed, m, width)
    placed = place_links(chunks, verts, **UNDIRECTED)
    assert placed.record.tolist() == list(range(m))
    for p in range(m):
        offs = placed.offsets[p]
        intra = not np.any(chunks[p] != chunks[p, :1])
        assert placed.has_perm[p] == (not intra)
        assert all(_lex_nonnegative(o) for o in offs)
        if intra:
            assert placed.vertices[p].tolist() == verts[p].tolist() and placed.perm[p] == 0
    stored_chunks = np.concatenate([placed.source[:, None], placed.source[:, None] + placed.offsets], axis=1)
    assert np.array_equal(restore_input_order(placed.vertices, placed.perm), verts)
    assert np.array_equal(restore_input_order(stored_chunks, placed.perm), chunks)


@settings(max_examples=60)
@given(st.integers(1, 4), st.integers(0, 25), st.integers(0, 2**32 - 1))
def test_directed_canonical_keeps_input_order(width, m, seed):
    chunks, verts = _random_records(seed, m, width)
    placed = place_links(chunks, verts, **DIRECTED)
    assert not placed.has_perm.any()
    assert np.array_equal(placed.vertices, verts)
    assert np.array_equal(placed.source, chunks[:, 0])
    assert np.array_equal(placed.offsets, chunks[:, 1:] - chunks[:, :1])
    for cell in placed.cells():
        assert cell.rows.shape[1] == width


@settings(max_examples=60)
@given(st.booleans(), st.integers(1, 4), st.integers(0, 25), st.integers(0, 2**32 - 1))
def test_duplicate_one_copy_per_incident_chunk(directed, width, m, seed):
    chunks, verts = _random_records(seed, m, width)
    placed = place_links(chunks, verts, directed=directed, store="duplicate")
    for r in range(m):
        mine = np.flatnonzero(placed.record == r)
        distinct = {tuple(c) for c in chunks[r].tolist()}
        assert {tuple(placed.source[p]) for p in mine} == distinct
        assert len(mine) == len(distinct)
        for p in mine:
            assert placed.has_perm[p] == (len(distinct) > 1)
            back = restore_input_order(placed.vertices[p : p + 1], placed.perm[p : p + 1])
            assert back[0].tolist() == verts[r].tolist()


def test_cells_group_by_segment_in_ascii_order_then_chunk():
    chunks = np.array(
        [[(0, 0, 0), (0, 0, 0)], [(1, 0, 0), (1, 0, 1)], [(0, 0, 0), (0, 0, 1)], [(0, 0, 0), (1, 0, 0)]]
    )
    verts = np.array([[1, 2], [3, 4], [5, 6], [7, 8]])
    cells = place_links(chunks, verts, **UNDIRECTED).cells()
    assert [(c.segment, c.chunk, c.records.tolist()) for c in cells] == [
        ("+1.0.0", (0, 0, 0), [3]),
        ("0.0.+1", (0, 0, 0), [2]),
        ("0.0.+1", (1, 0, 0), [1]),
        ("0.0.0", (0, 0, 0), [0]),
    ]
    assert [c.has_perm for c in cells] == [True, True, True, False]
    assert cells[3].rows.tolist() == [[1, 2]] and cells[1].rows.tolist() == [[0, 5, 6]]


def test_place_links_rejects_bad_input():
    with pytest.raises(InputError, match="need chunks"):
        place_links(np.zeros((2, 2)), np.zeros((2, 2)), **UNDIRECTED)
    with pytest.raises(InputError, match="store must be"):
        place_links(np.zeros((1, 2, 3)), np.zeros((1, 2)), directed=False, store="both")
    with pytest.raises(InputError, match="anchors"):
        place_links(np.zeros((1, 2, 3)), np.zeros((1, 2)), delta=1, **UNDIRECTED)
    assert place_links(np.zeros((0, 2, 3)), np.zeros((0, 2)), **UNDIRECTED).cells() == []
