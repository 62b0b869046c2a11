"""argparse value types and options shared by the ``zarr-vectors`` subcommands."""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from zarr_vectors.errors import ZarrVectorsError

__all__ = [
    "add_storage_options",
    "bbox_arg",
    "fraction",
    "non_negative_number",
    "number_type",
    "object_id",
    "polygon_arg",
    "positive_number",
    "storage_options_arg",
]


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


def storage_options_arg(text: str | None) -> dict[str, Any] | None:
    """``--storage-options`` JSON (an object), passed to fsspec for URLs."""
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ZarrVectorsError(
            f"--storage-options is not valid JSON ({exc}); give an object such as '{{\"anon\": true}}'"
        ) from exc
    if not isinstance(value, dict):
        raise ZarrVectorsError(f"--storage-options must be a JSON object, got {type(value).__name__}")
    return value


def add_storage_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--storage-options",
        metavar="JSON",
        help="options for the URL's filesystem, as a JSON object (e.g. credentials, endpoint)",
    )


def bbox_arg(text: str) -> tuple[list[float], list[float]]:
    """``--bbox`` text: lo then hi coordinates, separated by commas or spaces."""
    try:
        values = [float(v) for v in text.replace(",", " ").split()]
    except ValueError as exc:
        raise ZarrVectorsError(f"--bbox {text!r}: {exc}; give lo then hi, e.g. 0,0,0,100,100,100") from exc
    if not values or len(values) % 2:
        raise ZarrVectorsError(
            f"--bbox {text!r} has {len(values)} numbers; give lo then hi (2 x axes numbers), "
            "e.g. 0,0,0,100,100,100"
        )
    return values[: len(values) // 2], values[len(values) // 2 :]


def polygon_arg(text: str) -> Any:
    """The polygon of ``--polygon``: the union of a vector file's polygons, or WKT."""
    import shapely

    from zarr_vectors.io.geojson import read_vector_file

    if Path(text).is_file():
        table = read_vector_file(text)
        shapes = [g for g in table.geometries if g.geom_type in ("Polygon", "MultiPolygon")]
        if not shapes:
            raise ZarrVectorsError(f"--polygon {text}: the file holds no polygons")
        return shapely.union_all(shapes)
    try:
        shape = shapely.from_wkt(text)
    except shapely.errors.GEOSException as exc:
        raise ZarrVectorsError(
            f"--polygon {text!r} is neither a file nor WKT ({exc}); e.g. 'POLYGON ((0 0, 10 0, 5 8, 0 0))'"
        ) from exc
    if shape.geom_type not in ("Polygon", "MultiPolygon"):
        raise ZarrVectorsError(f"--polygon {text!r} is a {shape.geom_type}; give a Polygon or MultiPolygon")
    return shape
