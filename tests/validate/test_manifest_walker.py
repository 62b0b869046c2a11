"""The validator's own manifest walker against the library's manifest codec."""

from __future__ import annotations

import struct

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from zarr_vectors.errors import DecodeError
from zarr_vectors.format.manifests import ManifestBlock, decode_manifest, encode_manifest
from zarr_vectors.validation.manifests import check_refs, walk_manifests

ND = 3
CHUNK = st.tuples(*[st.integers(-5, 5)] * ND)
BLOCK = st.builds(
    lambda c, frags: ManifestBlock(c, np.asarray(frags, np.int64)),
    CHUNK,
    st.one_of(
        st.lists(st.integers(0, 40), min_size=1, max_size=6),  # explicit or single
        st.builds(lambda a, n: list(range(a, a + n)), st.integers(0, 30), st.integers(2, 9)),  # a range
    ),
)
MANIFESTS = st.lists(st.lists(BLOCK, max_size=4), max_size=8)


def _expand(blocks, entry: int) -> list[tuple[tuple[int, ...], list[int]]]:
    """The walker's blocks of one entry as (chunk, fragments), like decode_manifest gives them."""
    out = []
    for i in np.flatnonzero(blocks.entry == entry):
        if blocks.mode[i] == 2:
            n, at = int(blocks.count[i]), int(blocks.first[i])
            frags = np.frombuffer(blocks.buf[at : at + 8 * n].tobytes(), "<i8").tolist()
        else:
            frags = list(range(int(blocks.first[i]), int(blocks.first[i]) + int(blocks.count[i])))
        out.append((tuple(blocks.chunk[i].tolist()), frags))
    return out


@settings(max_examples=60, deadline=None)
@given(MANIFESTS)
def test_walker_reads_what_the_encoder_wrote(manifests):
    items = [encode_manifest(m) for m in manifests]
    blocks, bad = walk_manifests(items, ND)
    assert bad == {}
    for k, item in enumerate(items):
        want = [(b.chunk, b.fragments.tolist()) for b in decode_manifest(item, ND)]
        assert _expand(blocks, k) == want


@settings(max_examples=60, deadline=None)
@given(MANIFESTS, st.integers(0, 45))
def test_refs_past_the_fragment_count_are_found(manifests, f):
    items = [encode_manifest(m) for m in manifests]
    blocks, _ = walk_manifests(items, ND)
    counts = {c: f for m in manifests for c in (b.chunk for b in m)}
    flagged = {e for e, _ in check_refs(blocks, counts)}
    want = {k for k, m in enumerate(manifests) if any(b.fragments.max() >= f for b in m)}
    assert flagged == want


@settings(max_examples=150, deadline=None)
@given(st.lists(st.binary(max_size=80), max_size=6))
def test_walker_agrees_with_the_decoder_on_any_bytes(items):
    """Whatever the bytes, the walker never raises and rejects exactly what the decoder rejects
    (items whose counts the decoder cannot even allocate are skipped: the walker never expands)."""
    _, bad = walk_manifests(items, ND)
    for k, item in enumerate(items):
        try:
            decode_manifest(item, ND)
        except DecodeError:
            assert k in bad, item
        except (MemoryError, ValueError):
            continue
        else:
            assert k not in bad, (item, bad.get(k))


def test_huge_counts_cost_nothing():
    head = struct.pack("<I", 1) + bytes(8 * ND)
    items = [
        head + b"\x01" + struct.pack("<qq", 0, 2**62),  # a range of 2**62 fragments: well formed
        head + b"\x02" + struct.pack("<I", 2**32 - 1) + bytes(16),  # lists 2**32-1, holds 2
        struct.pack("<I", 2**32 - 1) + bytes(8 * ND) + b"\x00" + bytes(8),  # 2**32-1 blocks, holds 1
    ]
    blocks, bad = walk_manifests(items, ND)
    assert sorted(bad) == [1, 2]
    assert "more than its bytes hold" in bad[1] and "truncated" in bad[2]
    ((entry, why),) = check_refs(blocks, {(0,) * ND: 10})
    assert entry == 0 and "which has 10 fragments" in why
