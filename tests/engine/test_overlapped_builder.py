"""``OverlappedBuilder``: batches written in a thread of their own, the root last, errors not lost;
``shard_blob``: ``encode_shard``'s bytes."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np
import pytest

from zarr_vectors.engine.write.cellpool import OverlappedBuilder, shard_blob
from zarr_vectors.errors import InputError, StoreError
from zarr_vectors.format.shards import ShardLayout, encode_shard


class _Backend:
    """Records every ``set_many`` call: (thread name, keys); fails on call ``fail_at``."""

    def __init__(self, fail_at: int | None = None) -> None:
        self.calls: list[tuple[str, list[str]]] = []
        self.fail_at = fail_at

    def set_many(self, items: Sequence[tuple[str, bytes]]) -> None:
        if len(self.calls) == self.fail_at:
            raise StoreError("test store", items[0][0], "cannot be written: disk full")
        self.calls.append((threading.current_thread().name, [k for k, _ in items]))


def test_batches_go_out_in_another_thread_and_the_root_last() -> None:
    backend = _Backend()
    builder = OverlappedBuilder(backend, flush_bytes=10)  # type: ignore[arg-type]
    try:
        for i in range(5):
            builder.put_object(f"a/c/{i}", b"x" * 10)  # each one a batch
        builder.group("a", {})
        builder.commit({})
    finally:
        builder.close()
    keys = [k for _, ks in backend.calls for k in ks]
    assert keys[:5] == [f"a/c/{i}" for i in range(5)]
    assert keys[-1] == "zarr.json" and keys.count("zarr.json") == 1
    assert {t for t, _ in backend.calls[:5]} == {"zv-flush_0"}
    assert all(t == threading.current_thread().name for t, _ in backend.calls[5:])


def test_a_failed_background_write_is_raised_by_the_next_flush_or_commit() -> None:
    backend = _Backend(fail_at=1)
    builder = OverlappedBuilder(backend, flush_bytes=10)  # type: ignore[arg-type]
    try:
        builder.put_object("a/c/0", b"x" * 10)
        builder.put_object("a/c/1", b"x" * 10)  # written in the background: fails
        with pytest.raises(StoreError, match="disk full"):
            builder.commit({})
    finally:
        builder.close()
    assert [k for _, ks in backend.calls for k in ks] == ["a/c/0"]  # no metadata after the failure


@pytest.mark.parametrize("location", ["start", "end"])
@pytest.mark.parametrize("checksum", [True, False])
def test_shard_blob_is_encode_shard(location: str, checksum: bool) -> None:
    rng = np.random.default_rng(len(location) + checksum)
    layout = ShardLayout((2, 3, 2), (1, 1, 1), (), location, checksum)  # type: ignore[arg-type]
    for _ in range(30):
        present = rng.choice(12, int(rng.integers(0, 13)), replace=False).tolist()
        chunks = {int(p): rng.bytes(int(rng.integers(0, 40))) for p in present}
        assert shard_blob(layout, chunks) == encode_shard(layout, chunks)
    with pytest.raises(InputError, match="inner chunk positions must lie in 0..11"):
        shard_blob(layout, {12: b"x"})
