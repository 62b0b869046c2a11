"""KeyBatch: named sections of one get_many, answered by name."""

from __future__ import annotations

from zarr_vectors.engine.read.keys import KeyBatch


def test_sections_come_back_by_name_in_the_order_added() -> None:
    batch = KeyBatch()
    batch.add("vertices", ["v/0", "v/1"])
    batch.add("empty", [])
    batch.add("fragments", ["f/0", "f/1", "f/2"])
    assert batch.keys == ["v/0", "v/1", "f/0", "f/1", "f/2"]
    answers = [f"<{k}>" for k in batch.keys]  # what get_many(batch.keys) gives, key by key
    assert batch.take(answers, "vertices") == ["<v/0>", "<v/1>"]
    assert batch.take(answers, "fragments") == ["<f/0>", "<f/1>", "<f/2>"]
    assert batch.take(answers, "empty") == [] and batch.take(answers, "never added") == []
    assert "fragments" in batch and "never added" not in batch


def test_a_section_is_a_copy_of_the_answers() -> None:
    batch = KeyBatch()
    batch.add("a", ["x", "y"])
    answers: list[bytes | None] = [b"1", None]
    part = batch.take(answers, "a")
    part[0] = b"changed"
    assert answers == [b"1", None]
