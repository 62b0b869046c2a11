"""Pyramid metadata as pure JSON edits of existing documents.

The root document is edited in place, never rebuilt, so keys this library does not
manage (GeoZarr ``proj:``/``spatial:``, another writer's ``ome`` block, unknown
``zarr_vectors`` keys) survive a pyramid build unchanged.

* a level's bin shape lives only in the NGFF ``multiscales`` transforms
  (``scale = bin / base_bin``, ``translation = bin / 2``, spec §9.3);
* capability tokens are added, never removed, except ``multiscale_links`` and
  ``preserved_object_ids`` when every coarse level is dropped.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import numpy as np

from zarr_vectors.errors import FormatError

__all__ = ["add_arrays_present", "add_level", "drop_coarse_levels", "level_dataset"]


def level_dataset(index: int, bin_shape: Sequence[float], base_bin: Sequence[float]) -> dict[str, Any]:
    """The ``multiscales[0].datasets`` entry of level ``index``."""
    bs = np.asarray(bin_shape, np.float64)
    base = np.asarray(base_bin, np.float64)
    return {
        "path": str(index),
        "coordinateTransformations": [
            {"type": "scale", "scale": (bs / base).tolist()},
            {"type": "translation", "translation": (bs / 2).tolist()},
        ],
    }


def _blocks(attrs: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    block = attrs.get("zarr_vectors")
    ms = attrs.get("multiscales")
    if not isinstance(block, dict) or not isinstance(ms, list) or not ms or not isinstance(ms[0], dict):
        raise FormatError(
            "the root group lacks the zarr_vectors or multiscales block; it cannot take a pyramid"
        )
    return block, ms[0].setdefault("datasets", [])


def add_level(
    attrs: dict[str, Any],
    *,
    index: int,
    bin_shape: Sequence[float],
    capabilities: Sequence[str],
    cross_level_storage: str,
    cross_level_depth: int,
) -> dict[str, Any]:
    """A copy of root ``attrs`` listing level ``index`` (which must be the next one)."""
    out = copy.deepcopy(attrs)
    block, datasets = _blocks(out)
    if len(datasets) != index:
        raise FormatError(
            f"multiscales lists {len(datasets)} levels; level {index} cannot be added after them"
        )
    base = block.get("base_bin_shape") or block["chunk_shape"]
    datasets.append(level_dataset(index, bin_shape, base))
    caps = list(block.get("format_capabilities") or [])
    caps += [c for c in capabilities if c not in caps]
    block["format_capabilities"] = caps
    block["cross_level_storage"] = cross_level_storage
    block["cross_level_depth"] = cross_level_depth
    ome = out.get("ome")
    if isinstance(ome, dict) and isinstance(ome.get("nodes"), list):
        names = {n.get("name") for n in ome["nodes"] if isinstance(n, dict)}
        if str(index) not in names:
            ome["nodes"].append({"type": "zv:level", "name": str(index)})
    return out


def drop_coarse_levels(attrs: dict[str, Any]) -> dict[str, Any]:
    """A copy of root ``attrs`` listing level 0 only, without the pyramid's tokens."""
    out = copy.deepcopy(attrs)
    block, datasets = _blocks(out)
    del datasets[1:]
    block["format_capabilities"] = [
        c
        for c in block.get("format_capabilities") or []
        if c not in ("multiscale_links", "preserved_object_ids")
    ]
    block["cross_level_storage"] = "none"
    block["cross_level_depth"] = 0
    ome = out.get("ome")
    if isinstance(ome, dict) and isinstance(ome.get("nodes"), list):
        ome["nodes"] = [
            n
            for n in ome["nodes"]
            if not (isinstance(n, dict) and n.get("type") == "zv:level" and n.get("name") not in (None, "0"))
        ]
    return out


def add_arrays_present(
    level_doc: dict[str, Any], families: Sequence[str], remove: Sequence[str] = ()
) -> dict[str, Any]:
    """A copy of a level group's ``zarr.json`` with ``families`` listed in ``arrays_present``."""
    out = copy.deepcopy(level_doc)
    block = out.setdefault("attributes", {}).get("zarr_vectors_level")
    if not isinstance(block, dict):
        raise FormatError("the level group has no zarr_vectors_level block")
    present = [p for p in block.get("arrays_present") or [] if p not in remove]
    present += [f for f in families if f not in present]
    block["arrays_present"] = present
    return out
