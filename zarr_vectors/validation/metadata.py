"""Level 2, root and level blocks: ``zarr_vectors``, NGFF ``multiscales`` and each level's
``zarr_vectors_level``, parsed by the reader's own parsers (:func:`~zarr_vectors.format.metadata.parse_root`,
:func:`~zarr_vectors.format.metadata_level.parse_level`) and every finding reported."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from zarr_vectors.format.findings import Finding
from zarr_vectors.format.metadata import (
    LevelMeta,
    RootMeta,
    check_arrays_present,
    parse_level,
    parse_root,
)
from zarr_vectors.validation._report import Collector
from zarr_vectors.validation._store import StoreView

__all__ = ["RootInfo", "check_root", "check_level_block", "report"]

ZV = "zarr.json"


def report(findings: Iterable[Finding], out: Collector) -> None:
    """Report parser findings: those that break the format as problems, the others as warnings."""
    for f in findings:
        (out.error if f.breaks_format else out.warn)(f.code, f.path, f.message)


@dataclass
class RootInfo:
    """What later levels need from the root, as numpy arrays: a view of the parsed :class:`RootMeta`
    (``bounds`` is None when the root's are unusable; ``level_bins[k]``: level k's bin shape)."""

    sid_ndim: int
    chunk_shape: np.ndarray
    bounds: np.ndarray | None
    base_bin: np.ndarray
    level_bins: dict[int, np.ndarray] = field(default_factory=dict)
    geometry_types: tuple[str, ...] = ()
    links_convention: str = "implicit_sequential"
    capabilities: tuple[str, ...] = ()
    cross_level_storage: str = "explicit"
    cross_level_depth: int = 1
    levels: dict[int, dict[str, Any]] = field(default_factory=dict)
    meta: RootMeta | None = None

    @classmethod
    def of(cls, meta: RootMeta) -> RootInfo:
        box = np.asarray(meta.bounds, np.float64).reshape(2, -1)
        return cls(
            sid_ndim=meta.sid_ndim,
            chunk_shape=np.asarray(meta.chunk_shape, np.float64),
            bounds=box if box.shape[1] == meta.sid_ndim and np.all(np.isfinite(box)) else None,
            base_bin=np.asarray(meta.effective_bin_shape, np.float64),
            level_bins={k: np.asarray(b, np.float64) for k, b in enumerate(meta.level_bin_shapes)},
            geometry_types=meta.geometry_types,
            links_convention=meta.links_convention,
            capabilities=meta.format_capabilities,
            cross_level_storage=meta.cross_level_storage,
            cross_level_depth=meta.cross_level_depth,
            meta=meta,
        )


def check_root(view: StoreView, levels: list[int], out: Collector) -> RootInfo | None:
    """Check the root blocks; None when the chunk shape is unusable (nothing more can be checked)."""
    attributes = view.attrs("")
    meta, findings = parse_root(attributes)
    report(findings, out)
    if meta is None:
        return None
    _level_paths(attributes.get("multiscales"), levels, out)
    return RootInfo.of(meta)


def _level_paths(ms: Any, levels: list[int], out: Collector) -> None:
    """The multiscales datasets name the store's level groups, in order."""
    entry = ms[0] if isinstance(ms, list) and ms and isinstance(ms[0], dict) else {}
    datasets = entry.get("datasets")
    if not isinstance(datasets, list):
        return  # a finding of the parser
    paths = [d.get("path") if isinstance(d, dict) else None for d in datasets]
    if paths != [str(lv) for lv in levels]:
        out.error(
            "metadata.multiscales",
            ZV,
            f"multiscales datasets name levels {paths} but the store has level groups "
            f"{[str(lv) for lv in levels]}",
        )


def check_level_block(view: StoreView, lv: int, info: RootInfo, out: Collector) -> LevelMeta | None:
    """Check ``<lv>/zarr.json``'s ``zarr_vectors_level`` and its ``arrays_present`` against the
    level's nodes; return the block (None when there is none)."""
    meta, findings = parse_level(view.attrs(str(lv)).get("zarr_vectors_level"), lv, info.sid_ndim)
    report(findings, out)
    if meta is not None:
        report(check_arrays_present(meta, lv, set(view.children(str(lv)))), out)
    return meta
