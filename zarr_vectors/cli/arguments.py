"""argparse value types shared by the ``zarr-vectors`` subcommands."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

__all__ = ["fraction", "non_negative_number", "number_type", "object_id", "positive_number"]


def object_id(text: str) -> int:
    """An ``--object`` / ``--objects`` value: an integer from -2**63 to 2**64 - 1."""
    try:
        value = int(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer object id") from exc
    if not -(1 << 63) <= value < 1 << 64:
        raise argparse.ArgumentTypeError(f"{text} is outside the 64-bit id range (-2**63 .. 2**64 - 1)")
    return value


def number_type(ok: Callable[[float], bool], expected: str) -> Callable[[str], float]:
    """An argparse type: a number for which ``ok`` holds (NaN never does), else "is not <expected>"."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not ok(value):
            raise argparse.ArgumentTypeError(f"{text!r} is not {expected}")
        return value

    return parse


positive_number = number_type(
    lambda v: math.isfinite(v) and v > 0, "a positive number"
)  # --chunk-size, --dpi
non_negative_number = number_type(lambda v: math.isfinite(v) and v >= 0, "a number >= 0")  # --tolerance
fraction = number_type(lambda v: 0 < v <= 1, "a fraction in (0, 1]")  # --keep, --face-fraction
