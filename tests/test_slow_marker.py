"""The collection rule of ``tests/conftest.py``: tests of the slow kinds carry ``slow`` and
``-m "not slow"`` leaves them out (the rule runs before ``-m`` deselects)."""

from __future__ import annotations

import pytest

from tests.conftest import is_slow


def test_every_test_of_a_slow_kind_is_marked_and_deselected(request: pytest.FixtureRequest) -> None:
    items = request.session.items
    assert request.node in items
    slow_kind = [item for item in items if is_slow(item)]
    assert all(item.get_closest_marker("slow") is not None for item in slow_kind)
    if "not slow" in (request.config.option.markexpr or ""):
        assert not slow_kind and all(item.get_closest_marker("slow") is None for item in items)
    elif len(items) > 1000:  # a whole-suite run: the interop, S3, reference and fuzz tests are there
        names = {item.nodeid for item in slow_kind}
        assert any("/interop/" in n for n in names) and any("/fuzz/" in n for n in names)
        assert any(item.get_closest_marker("s3") for item in slow_kind)
        assert any("reference" in item.fixturenames for item in slow_kind if "/interop/" not in item.nodeid)
