"""Checks of single JSON values that both the root and the level block parsers make.

Each returns what is wrong with a value (a sentence for a finding) or a plain yes/no; none of
them records findings itself.
"""

from __future__ import annotations

import math
from typing import Any

from zarr_vectors.format.findings import short

__all__ = ["numbers_problem", "is_int"]


def numbers_problem(value: Any, name: str, n: int | None = None, *, positive: bool = False) -> str | None:
    """Why ``value`` is not a list of finite numbers (each > 0 when ``positive``, ``n`` of them
    when given), or None when it is."""
    if not isinstance(value, (list, tuple)) or any(
        type(v) is bool or not isinstance(v, (int, float)) for v in value
    ):
        return f"{name} must be a list of numbers, got {short(value)}"
    if n is not None and len(value) != n:
        return f"{name} must have {n} entries (one per space axis), got {len(value)}"
    if not all(map(math.isfinite, value)):
        return f"{name} must hold finite numbers, got {short(value)}"
    if positive and value and min(value) <= 0:
        return f"{name} must be positive numbers, got {short(value)}"
    return None


def is_int(value: Any) -> bool:
    """Whether ``value`` is a JSON integer (``True`` and ``False`` are not)."""
    return isinstance(value, int) and not isinstance(value, bool)
