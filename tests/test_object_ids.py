"""Object ids as users have them (DECISIONS 8): sparse int64 / uint64 ids, dense OIDs on disk."""

from __future__ import annotations

import json
from pathlib import Path

from tests._dense_stores import digests, write_dense_stores

GOLDEN = Path(__file__).parent / "fixtures" / "dense_ids_golden.json"


def test_dense_id_stores_are_byte_identical_to_the_recorded_ones(tmp_path):
    """Stores whose ids are already 0..B-1 store no id map: every file matches the digests
    recorded from the writers before sparse ids existed."""
    want = json.loads(GOLDEN.read_text())
    got = digests(write_dense_stores(tmp_path))
    assert sorted(got) == sorted(want)
    changed = [k for k in want if got[k] != want[k]]
    assert not changed, changed[:20]
