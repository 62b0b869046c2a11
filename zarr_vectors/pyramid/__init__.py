"""Levels of detail: coarser copies of a store's level 0, built in place.

* points: one metavertex per (object, coarse bin), or one representative per coarse bin;
* lines, skeletons, graphs: Douglas-Peucker simplified chains, branch points and ends kept;
* polygons and multi-part lines: every path simplified, rings kept closed and valid;
* meshes: quadric edge-collapse decimation per object (``fast-simplification``).

See ``docs/levels.md`` and :meth:`zarr_vectors.Dataset.build_pyramid`.
"""

from __future__ import annotations

from zarr_vectors.pyramid.build import CROSS_LEVEL, build_pyramid, stored_settings
from zarr_vectors.pyramid.estimate import estimate_counts, existing_factors, level_for
from zarr_vectors.pyramid.linked_update import (
    CROSS_LEVEL_UPDATES,
    LinkedUpdate,
    counted,
    linked_rebuild_reason,
)
from zarr_vectors.pyramid.plan import LevelPlan, plan_levels
from zarr_vectors.pyramid.reduce import REDUCTIONS
from zarr_vectors.pyramid.sparsity import STRATEGIES, Sparsity
from zarr_vectors.pyramid.together import one_commit
from zarr_vectors.pyramid.update import Footprint, combine_footprints, full_rebuild_reason, update_levels

__all__ = [
    "CROSS_LEVEL",
    "CROSS_LEVEL_UPDATES",
    "Footprint",
    "LinkedUpdate",
    "REDUCTIONS",
    "STRATEGIES",
    "LevelPlan",
    "Sparsity",
    "build_pyramid",
    "combine_footprints",
    "counted",
    "estimate_counts",
    "existing_factors",
    "full_rebuild_reason",
    "level_for",
    "linked_rebuild_reason",
    "one_commit",
    "plan_levels",
    "stored_settings",
    "update_levels",
]
