"""Check a store against the Zarr Vectors 0.9 format: :func:`validate`.

Levels are cumulative (see :data:`RULES` for every rule and its level):

1. structure: Zarr v3 nodes, a ``zarr_vectors`` root, level groups with ``vertices``;
2. metadata: root, multiscales, level blocks and every array's attributes;
3. consistency: the bytes of every cell, and agreement across arrays (row counts,
   ``nonempty_chunks``, fragments, manifests, link endpoints, counts);
4. geometry: conventions and link widths per kind, vertices inside their chunks and the
   bounds, per-bin fragments, skeleton parents, mesh faces;
5. multi-resolution: parent levels, nested chunk and bin shapes, preserved ids,
   cross-level link families.
"""

from __future__ import annotations

import json
from typing import Any

from zarr_vectors.errors import InputError
from zarr_vectors.storage import ShardReader, check_not_v2, open_backend
from zarr_vectors.validation._report import Collector, Problem, Report
from zarr_vectors.validation._store import StoreView
from zarr_vectors.validation.arrays import check_cell_arrays
from zarr_vectors.validation.cells import check_vertex_cells
from zarr_vectors.validation.collection import is_collection_root, validate_collection
from zarr_vectors.validation.geometry import check_geometry
from zarr_vectors.validation.links import LinkContext, check_link_cells
from zarr_vectors.validation.metadata import check_level_block, check_root
from zarr_vectors.validation.pyramid import check_pyramid
from zarr_vectors.validation.rules import LEVEL_NAMES, MAX_LEVEL, RULES
from zarr_vectors.validation.structure import check_structure
from zarr_vectors.validation.tables import check_table_data, check_table_meta

__all__ = ["validate", "Report", "Problem", "RULES", "MAX_LEVEL", "LEVEL_NAMES"]

#: Show a progress bar (when asked for) only past this many cells.
PROGRESS_MIN_CELLS = 500


def validate(
    target: Any,
    level: int = MAX_LEVEL,
    *,
    storage_options: dict[str, Any] | None = None,
    progress: bool = False,
) -> Report:
    """Check the store at ``target`` (path, URL or zarr Store) up to conformance ``level``.

    Every problem found is collected with its path, rule and a plain sentence; the
    store is never modified. Cells are read in batches through the storage backend.
    A broken store gives a :class:`Report` whose ``ok`` is false.

    Parameters
    ----------
    target
        A directory, a ``.zip`` file, a URL or a zarr v3 ``Store``.
    level
        How deep to check, 1 to :data:`MAX_LEVEL` (all): 1 structure, 2 metadata, 3 the
        bytes of every cell and their agreement, 4 geometry, 5 multi-resolution.
    storage_options
        Options for fsspec and the storage layer, as for :func:`zarr_vectors.open`.
    progress
        Show a bar on stderr when many cells are read.

    Returns
    -------
    Report
        ``ok``, ``problems`` and ``warnings`` (each a :class:`Problem` with path, rule and
        message), and ``cells_checked``.

    Raises
    ------
    InputError
        ``level`` is not an integer from 1 to :data:`MAX_LEVEL`.
    ZarrV2StoreError
        ``target`` is a Zarr v2 store (a ``ValueError``).
    StoreNotFoundError
        Nothing is stored at a local ``target`` (a ``FileNotFoundError``).
    StoreError
        An object store or web server cannot be reached, or answers beyond the HTTP limits
        (an endless body, a listing of invented folders). Nothing else raises: a broken
        store (a damaged shard, a cell that is a FIFO or a link out of the store) gives a
        report.

    Examples
    --------
    >>> import tempfile, pathlib, zarr_vectors as zv
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = pathlib.Path(folder) / "cells.zarr"
    ...     # one file per cell (shards=None), so that cutting a file damages one cell
    ...     _ = zv.write_points(path, [[0, 0], [1, 1], [5, 5]], chunk_shape=4, shards=None)
    ...     before = zv.validate(path)
    ...     cell = path / "0" / "vertices" / "c" / "1" / "1"
    ...     _ = cell.write_bytes(cell.read_bytes()[:-3])  # cut a cell short
    ...     after = zv.validate(path)
    >>> before.ok, before.problems
    (True, [])
    >>> after.ok, [problem.rule for problem in after.problems]
    (False, ['cells.decode'])
    """
    if not isinstance(level, int) or not 1 <= level <= MAX_LEVEL:
        raise InputError(f"level must be an integer from 1 to {MAX_LEVEL}, got {level!r}")
    backend = ShardReader(open_backend(target, read_only=True, storage_options=storage_options), lenient=True)
    check_not_v2(backend)
    root = backend.get_many(["zarr.json"])[0]
    doc = _json_or_none(root)
    if is_collection_root(doc):
        assert doc is not None  # a collection root

        def member(path: Any, depth: int) -> Report:
            return validate(path, depth, storage_options=storage_options, progress=progress)

        return validate_collection(target, backend, doc, level, member, storage_options)
    view = StoreView.load(backend)
    out = Collector()
    cells = _run(view, level, out, progress)
    out.finish()
    return Report(
        target=backend.description,
        level=level,
        problems=[p for p in out.problems if p.level <= level],
        warnings=[p for p in out.warnings if p.level <= level],
        cells_checked=cells,
    )


def _json_or_none(raw: Any) -> dict[str, Any] | None:
    """The root document when it is a JSON object, else None (the store checks report it)."""
    if raw is None:
        return None
    try:
        doc = json.loads(bytes(raw))
    except (ValueError, UnicodeDecodeError):
        return None
    return doc if isinstance(doc, dict) else None


def _run(view: StoreView, level: int, out: Collector, progress: bool) -> int:
    """Run the levels in order; returns the number of cells decoded."""
    levels = check_structure(view, out)
    if levels is None or level < 2:
        return 0
    root = check_root(view, levels, out)
    if root is None:
        return 0
    models = {}
    for lv in levels:
        meta = check_level_block(view, lv, root, out)
        models[lv] = check_cell_arrays(view, lv, meta, root, out)
        models[lv].tables = check_table_meta(view, lv, root, out)
    if level < 3:
        return 0
    from tqdm import tqdm

    total = sum(len(view.cells.get(a.path, [])) for m in models.values() for a in m.cell_arrays())
    read = 0
    with tqdm(
        total=total, unit="cell", desc="validating", disable=not progress or total < PROGRESS_MIN_CELLS
    ) as bar:
        passes = {lv: check_vertex_cells(view, root, m, level, out, bar) for lv, m in models.items()}
        ratio = {lv: (m.chunk_shape / root.chunk_shape).round().astype("int64") for lv, m in models.items()}
        ctx = LinkContext({lv: p.rows for lv, p in passes.items()}, ratio, level, root.geometry_types)
        for lv, m in models.items():
            read += passes[lv].cells_read + check_link_cells(view, m, passes[lv], ctx, out, bar)
            check_table_data(m.tables, view, root.sid_ndim, passes[lv].fragments, out)
    if level >= 4:
        check_geometry(root, models, out)
    if level >= 5:
        check_pyramid(root, models, out)
    return read
