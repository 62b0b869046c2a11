"""Level 3 pass B: every ``links/<delta>/<offsets>`` cell with its ``link_fragments`` and
link-attribute cells. Records must decode, name existing chunks and rows, and agree with
the family's counts; level 4 adds skeleton-parent and mesh-face rules."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from zarr_vectors.engine import CellArray, LinkArray
from zarr_vectors.errors import DECODE_FAILURES, failure_reason
from zarr_vectors.format.links import (
    cross_level_anchor,
    decode_flat_rows,
    decode_ragged,
    lehmer_decode,
    undo_order,
)
from zarr_vectors.validation._report import Collector
from zarr_vectors.validation._store import StoreView, batched
from zarr_vectors.validation.arrays import LevelModel
from zarr_vectors.validation.cells import Chunk, LevelCells, decode_cell, read_fragments, stored_chunks

__all__ = ["check_link_cells", "LinkContext"]


@dataclass(eq=False)
class LinkContext:
    """Row counts of every level (for endpoint checks) and each level's chunk-scale factor."""

    rows: dict[int, dict[Chunk, int | None]]
    ratio: dict[int, np.ndarray]
    level: int
    geometry_types: tuple[str, ...]
    children: list[np.ndarray] = field(default_factory=list)  # skeleton: (chunk..., vi) of explicit children


def _records(
    arr: LinkArray, chunk: Chunk, data: memoryview, out: Collector
) -> tuple[np.ndarray, np.ndarray] | None:
    """(endpoint rows (M, L) int64, perm codes (M,) or None-as-empty) of one cell."""
    assert arr.dtype is not None
    try:
        if arr.intra:
            rows = decode_flat_rows(data, arr.width, arr.dtype)
        else:
            rows, _ = decode_ragged(data, arr.width, arr.dtype)
    except DECODE_FAILURES as exc:
        out.error("cells.links", arr.key(chunk), failure_reason(exc))
        return None
    rows = np.asarray(rows, np.int64).reshape(-1, arr.width)
    codes = rows[:, 0] if arr.has_perm else np.zeros(0, np.int64)
    if arr.has_perm:
        try:
            lehmer_decode(codes, arr.link_width)
        except DECODE_FAILURES as exc:
            out.error("cells.links", arr.key(chunk), failure_reason(exc))
            return None
    return rows[:, int(arr.has_perm) :], codes


def _endpoints(
    arr: LinkArray, model: LevelModel, chunk: Chunk, vi: np.ndarray, ctx: LinkContext, out: Collector
) -> None:
    """Each endpoint's chunk must exist at its level and its row index lie inside it."""
    assert arr.offsets is not None
    src = np.asarray(chunk, np.int64)
    target_level = model.index + arr.delta
    rows = ctx.rows.get(target_level)
    if rows is None:
        out.error(
            "consistency.link-index",
            arr.key(chunk),
            f"records point into level {target_level}, which does not exist",
        )
        return
    if arr.delta:
        base = cross_level_anchor(src[None], ctx.ratio[model.index], ctx.ratio[target_level])[0]
    else:
        base = src
    for k in range(arr.link_width):
        if k == 0:
            target, level_rows = chunk, ctx.rows[model.index]
        else:
            target, level_rows = tuple((base + arr.offsets[k - 1]).tolist()), rows
        col = vi[:, k]
        where = f"endpoint {k} (chunk {'.'.join(map(str, target))}, level {model.index if k == 0 else target_level})"
        if target not in level_rows:
            out.error(
                "consistency.link-index",
                arr.key(chunk),
                f"{len(col)} records name {where}, which has no vertices cell",
            )
            continue
        n = level_rows[target]
        bad = (col < 0) if n is None else ((col < 0) | (col >= n))
        if bad.any():
            out.error(
                "consistency.link-index",
                arr.key(chunk),
                f"{int(bad.sum())} records give {where} row "
                f"{int(col[bad][0])}, outside its {n if n is not None else '?'} rows",
            )


def _geometry(
    arr: LinkArray,
    model: LevelModel,
    chunk: Chunk,
    vi: np.ndarray,
    codes: np.ndarray,
    ctx: LinkContext,
    out: Collector,
) -> None:
    assert arr.offsets is not None
    if arr.delta != 0:
        return
    full = np.vstack([np.zeros((1, arr.offsets.shape[1]), np.int64), arr.offsets])
    if "mesh" in ctx.geometry_types:
        bad = np.zeros(len(vi), bool)
        for k in range(arr.link_width):
            for j in range(k + 1, arr.link_width):
                if np.array_equal(full[k], full[j]):
                    bad |= vi[:, k] == vi[:, j]
        if bad.any():
            out.error("geometry.mesh-faces", arr.key(chunk), f"{int(bad.sum())} faces use one vertex twice")
    family = model.families.get(0, {})
    if "skeleton" in ctx.geometry_types and arr.link_width == 2 and not family.get("directed", False):
        ends = np.concatenate(
            [np.broadcast_to(np.asarray(chunk) + full, (len(vi), 2, full.shape[1])), vi[:, :, None]], axis=2
        )
        if len(codes):
            ends = undo_order(ends, lehmer_decode(codes, 2))
        ctx.children.append(ends[:, 0, :])


def _check_array(
    view: StoreView, model: LevelModel, arr: LinkArray, ctx: LinkContext, out: Collector, bar: Any
) -> tuple[int, int]:
    """Check one links array; returns (records stored, cells read)."""
    attrs = [a for a in model.link_attrs if a.parallel == arr.path and a.pipeline is not None]
    lf = model.link_fragments if arr.intra and model.link_fragments is not None else None
    if lf is not None and lf.pipeline is None:
        lf = None
    mine = stored_chunks(view, arr, out)
    chunks = set(mine)
    for a in attrs:
        chunks |= stored_chunks(view, a, out)
    total = read = 0
    group = [arr, *([lf] if lf is not None else []), *attrs]
    for batch in batched(sorted(chunks), max(1, 1024 // len(group))):
        keys = [(a, c) for c in batch for a in group]
        raws = dict(zip(((a.path, c) for a, c in keys), view.read([a.key(c) for a, c in keys], out)))
        read += sum(r is not None for r in raws.values())
        bar.update(len(keys))
        for c in batch:
            m = _check_cell(model, arr, lf, attrs, c, raws, ctx, out)
            total += m
    return total, read


def _check_cell(
    model: LevelModel,
    arr: LinkArray,
    lf: CellArray | None,
    attrs: list[CellArray],
    c: Chunk,
    raws: dict[tuple[str, Chunk], Any],
    ctx: LinkContext,
    out: Collector,
) -> int:
    raw = raws[(arr.path, c)]
    found = None
    if raw is not None and arr.pipeline is not None and (data := decode_cell(arr, c, raw, out)) is not None:
        found = _records(arr, c, data, out)
    m = 0 if found is None else len(found[0])
    if found is not None:
        _endpoints(arr, model, c, found[0], ctx, out)
        if ctx.level >= 4:
            _geometry(arr, model, c, found[0], found[1], ctx, out)
    if lf is not None:
        lraw = raws[(lf.path, c)]
        if (lraw is None) != (raw is None):
            out.error(
                "cells.link-fragments",
                lf.key(c),
                f"link_fragments must have a cell exactly where the intra links array {arr.segment} has one",
            )
        elif lraw is not None and (ldata := decode_cell(lf, c, lraw, out)) is not None:
            frag = read_fragments(ldata, m if found is not None else None)
            if isinstance(frag, str):
                out.error("cells.link-fragments", lf.key(c), f"fragment index over the {m} link rows: {frag}")
    for a in attrs:
        araw = raws[(a.path, c)]
        if (araw is None) != (raw is None):
            out.error(
                "cells.link-attribute-rows",
                a.key(c),
                f"link attribute cells must exist exactly where {arr.path} has one",
            )
        elif araw is not None and (adata := decode_cell(a, c, araw, out)) is not None:
            assert a.dtype is not None
            stride = a.dtype.itemsize * a.width
            if len(adata) % stride or (found is not None and len(adata) // stride != m):
                out.error(
                    "cells.link-attribute-rows",
                    a.key(c),
                    f"holds {len(adata)} bytes, not {m} rows of {stride} bytes (one per link record)",
                )
    return m


def _family_counts(model: LevelModel, totals: dict[int, int], out: Collector) -> None:
    for delta, fam in model.families.items():
        path = f"{model.index}/links/{'0' if delta == 0 else f'{delta:+d}'}"
        total = totals.get(delta, 0)
        phys, num = fam.get("num_physical_records"), fam.get("num_links")
        if isinstance(phys, int) and phys != total:
            out.error(
                "consistency.num-links",
                path,
                f"num_physical_records is {phys} but {total} records are stored",
            )
        if isinstance(num, int):
            limit = phys if isinstance(phys, int) else total
            if num > limit or (fam.get("store", "canonical") == "canonical" and num != total):
                out.error(
                    "consistency.num-links",
                    path,
                    f"num_links is {num} but {total} records are stored "
                    f"(store {fam.get('store', 'canonical')!r})",
                )


def check_link_cells(
    view: StoreView, model: LevelModel, cells: LevelCells, ctx: LinkContext, out: Collector, bar: Any
) -> int:
    """Pass B over one level; returns the number of cells read."""
    totals: dict[int, int] = {}
    read = 0
    ctx.children = []
    for arr in model.links:
        n, r = _check_array(view, model, arr, ctx, out, bar)
        totals[arr.delta] = totals.get(arr.delta, 0) + n
        read += r
    _family_counts(model, totals, out)
    lf = model.link_fragments
    intra = [a for a in model.links if a.intra]
    if lf is not None and lf.pipeline is not None:
        covered: set[Chunk] = set()
        for a in intra:
            listed = (a.chunk_of(k) for k in view.cells.get(a.path, []))
            covered |= {c for c in listed if c is not None}
        for c in sorted(stored_chunks(view, lf, out) - covered):
            out.error(
                "cells.link-fragments", lf.key(c), "link_fragments cell has no intra links cell beside it"
            )
    elif intra and any(view.cells.get(a.path) for a in intra):
        out.error(
            "cells.link-fragments",
            f"{model.index}/link_fragments",
            f"the level has intra-chunk link cells ({intra[0].path}) but no link_fragments array",
        )
    if ctx.children:
        kids = np.concatenate(ctx.children)
        uniq, counts = np.unique(kids, axis=0, return_counts=True)
        for row in uniq[counts > 1][:20]:
            out.error(
                "geometry.skeleton-parents",
                f"{model.index}/links/0",
                f"vertex {int(row[-1])} of chunk "
                f"{'.'.join(map(str, row[:-1].tolist()))} has {int(counts[(uniq == row).all(1)][0])} explicit parents",
            )
    return read
