"""Object sparsity: which objects a coarse level keeps.

A level keeps ``round(keep * present)`` of the objects present in its source level
(at least one), chosen at random (with a seed), by size (vertex count), by length
(sum of edge lengths, linked geometry), or by an object attribute. Dropped objects
keep their ids: their manifests at the coarse level are empty.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from zarr_vectors.engine import Level, table_values
from zarr_vectors.errors import InputError, check_choice

__all__ = ["attribute_scores", "STRATEGIES", "Sparsity", "select_objects", "sparsity_per_level"]

STRATEGIES = ("random", "size", "length", "attribute")


@dataclass(frozen=True)
class Sparsity:
    """Keep the fraction ``keep`` in (0, 1] of the source level's objects.

    ``by``: ``"random"`` (reproducible with ``seed``), ``"size"`` (most vertices),
    ``"length"`` (longest; lines, skeletons, graphs) or ``"attribute"`` (largest values of
    the object attribute ``attribute``); ``largest=False`` keeps the smallest instead.
    """

    keep: float
    by: str = "random"
    attribute: str | None = None
    seed: int = 0
    largest: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.keep, (int, float)) or not 0 < float(self.keep) <= 1:
            raise InputError(
                f"object sparsity keep must be in (0, 1] (the fraction of objects kept), got {self.keep!r}"
            )
        check_choice("object sparsity strategy", self.by, STRATEGIES)
        if (self.by == "attribute") != (self.attribute is not None):
            raise InputError(
                "object sparsity by='attribute' needs attribute=<object attribute name> (and only it does)"
            )

    def metadata(self) -> dict[str, Any]:
        """Extra ``zarr_vectors_level`` keys recording how objects were chosen."""
        out: dict[str, Any] = {"object_sparsity_strategy": self.by}
        if self.by == "random":
            out["object_sparsity_seed"] = int(self.seed)
        if self.attribute is not None:
            out["object_sparsity_attribute"] = self.attribute
        if self.by != "random":
            out["object_sparsity_largest"] = bool(self.largest)
        return out


def _one(value: Any, where: str) -> Sparsity | None:
    if value is None or isinstance(value, Sparsity):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return None if float(value) == 1.0 else Sparsity(float(value))
    raise InputError(f"{where} must be None, a fraction in (0, 1] or a Sparsity, got {value!r}")


def sparsity_per_level(value: Any, n_levels: int) -> list[Sparsity | None]:
    """One setting per new level from one setting or a list of them."""
    if isinstance(value, Sequence) and not isinstance(value, str):
        if len(value) != n_levels:
            raise InputError(f"object_sparsity has {len(value)} entries but {n_levels} levels are built")
        return [_one(v, f"object_sparsity[{i}]") for i, v in enumerate(value)]
    one = _one(value, "object_sparsity")
    return [one] * n_levels


def select_objects(present: np.ndarray, spec: Sparsity, scores: np.ndarray | None = None) -> np.ndarray:
    """Sorted ids kept out of ``present`` (sorted unique ids); ``scores`` align with ``present``
    (needed for every strategy but ``random``). Ties go to the smaller id."""
    present = np.asarray(present, np.int64)
    n_keep = max(1, int(round(spec.keep * len(present)))) if len(present) else 0
    if n_keep >= len(present):
        return present
    if spec.by == "random":
        rng = np.random.default_rng(spec.seed)
        return np.sort(rng.choice(present, n_keep, replace=False))
    if scores is None or len(scores) != len(present):
        raise InputError(f"object sparsity by {spec.by!r} needs one score per present object")
    s = np.asarray(scores, np.float64)
    s = np.where(np.isnan(s), -np.inf if spec.largest else np.inf, s)
    order = np.lexsort((present, -s if spec.largest else s))
    return np.sort(present[order[:n_keep]])


def attribute_scores(src: Level, spec: Sparsity, present: np.ndarray) -> np.ndarray:
    """Score of each object ``present`` for sparsity by attribute: the numeric (B,) object
    attribute ``spec.attribute`` of ``src``."""
    name = spec.attribute
    if name not in src.object_attributes:
        raise InputError(
            f"object sparsity by attribute {name!r}: level {src.index} has object attributes "
            f"{sorted(src.object_attributes)}"
        )
    values = table_values(src, src.object_attributes[str(name)])
    if values.ndim != 1 or values.dtype.kind not in "iuf":
        raise InputError(
            f"object sparsity by attribute {name!r} needs a numeric (B,) attribute, got {values.dtype} {values.shape}"
        )
    return values[present].astype(np.float64)
