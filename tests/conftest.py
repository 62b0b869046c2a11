"""Shared fixtures: data generators and the store targets every backend test runs on."""

from __future__ import annotations

import numpy as np
import pytest

from tests._reference import reference  # noqa: F401  (the fixture, for every test folder)


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
