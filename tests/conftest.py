"""Shared fixtures and helpers, and the rule that marks tests ``slow``.

``pytest -m "not slow"`` is the quick loop; plain ``pytest`` (CI) runs everything. Besides the
tests and modules marked ``slow`` by hand (the CLI run as a process, docs builds, kill and race
tests, anything over about a second), :func:`pytest_collection_modifyitems` marks every test
that uses the reference implementation, an S3 server or the GCS emulator, and everything under ``tests/interop``
and ``tests/fuzz``, so new tests of those kinds are slow without anyone remembering.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests._reference import reference  # noqa: F401  (the fixture, for every test folder)

TESTS = Path(__file__).resolve().parent
#: A test that uses one of these fixtures (directly or through another fixture) is slow.
SLOW_FIXTURES = frozenset({"reference", "s3_server", "gcs_server"})
#: A test with one of these marks is slow (``s3``: a moto server; ``interop``: the reference).
SLOW_MARKS = ("s3", "interop")
#: Every test in these folders of ``tests/`` is slow.
SLOW_FOLDERS = frozenset({"interop", "fuzz"})


def is_slow(item: pytest.Item) -> bool:
    """Whether the collection rule marks ``item`` slow (hand-made ``slow`` marks aside)."""
    path = Path(str(item.fspath)).resolve()
    folder = path.relative_to(TESTS).parts[0] if path.is_relative_to(TESTS) else ""
    return (
        folder in SLOW_FOLDERS
        or not SLOW_FIXTURES.isdisjoint(getattr(item, "fixturenames", ()))
        or any(item.get_closest_marker(m) is not None for m in SLOW_MARKS)
    )


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if is_slow(item):
            item.add_marker(pytest.mark.slow)


def brute_force_box(positions: np.ndarray, lo, hi) -> np.ndarray:
    """Boolean mask of rows with lo <= p <= hi on every axis."""
    return np.all((positions >= np.asarray(lo)) & (positions <= np.asarray(hi)), axis=1)


def sorted_rows(*columns: np.ndarray) -> np.ndarray:
    """Rows of the horizontally stacked columns in lexicographic order (for set comparison)."""
    arrays = [np.asarray(c, np.float64) for c in columns]
    table = np.column_stack([a.reshape(len(a), int(np.prod(a.shape[1:], dtype=np.int64))) for a in arrays])
    return table[np.lexsort(table.T[::-1])] if len(table) else table


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(12345)
