#!/usr/bin/env python
"""Drive the REFERENCE implementation (PyPI ``zarr-vectors`` 0.9.2) for interop tests.

Run this only with the reference venv's interpreter, never with the project's::

    .cache/reference-venv/bin/python tests/interop/reference_driver.py CMD ...

Commands
--------
write-points IN.npz STORE [--writer api|write_points] [--compression auto|none|zstd|blosc]
    Write a point-cloud store from the arrays in IN.npz (see ``_load_points_npz``).
    Prints a JSON summary (the layout actually used) on stdout. Missing ``bounds``: the
    data's min/max. Missing ``chunk_shape``: the api default (one chunk per axis over
    the bounds). Missing ``bin_shape``: the api default (4 bins per axis). Positions keep
    their npz dtype. Object attributes are stored row for row as given.
read-points STORE OUT.npz [--bbox lo0,lo1,..:hi0,hi1,..] [--level L] [--via auto|plain|objects] [--ids a,b,..]
    Full read, or inclusive bbox read, saved as npz (see cmd_read_points for the read path).
info STORE [--validate-level N]
    JSON report of what the reference sees, and whether its validator accepts the store
    (``valid``/``errors``/``warnings`` from ``Dataset.validate(level=N)``, default 3).

write-lines IN.npz STORE --kind polyline|streamline|line [--compression ...]
    Write polylines/streamlines (``Dataset.add_polylines``) or two-vertex lines
    (``Dataset.add_lines``) from IN.npz (see ``_load_lines_npz``): ``positions`` (V,D) with
    ``offsets`` (L+1,) CSR of lines into positions, or for kind=line ``segments`` (M,2,D)
    instead; optional ``chunk_shape``, ``bin_shape`` (uniform ratio only), ``bounds``,
    ``attr__<name>`` per vertex (rows of positions, or 2M rows in segment order),
    ``oattr__<name>`` indexed by object id, ``object_ids`` (one per line, distinct,
    >= 0; default 0..L-1), ``groups_flat`` + ``groups_offsets`` (CSR of object ids).
    The reference numbers objects by position in the list it is given, so a line with
    id k is passed at list index k; for polylines unused ids become empty polylines
    (empty manifests), for kind=line the ids must be a permutation of 0..L-1. Lines
    take no groups in the api, so they are added with ``building.write_groupings``.
write-graph IN.npz STORE [--compression ...]
    Write a graph (``Dataset.add_graph``), or a skeleton with ``tree`` set
    (``add_graph(tree=True)``: edges are (child, parent) rows of one rooted tree per
    object). IN.npz: ``positions`` (V,D), ``edges`` (E,2); optional ``directed`` (the
    reference cannot express it: every family is written ``directed=false``; the flag is
    only echoed), ``tree``, ``object_ids`` (per vertex), ``attr__*`` (per vertex),
    ``eattr__*`` (per edge, become link attributes), ``oattr__*``, ``chunk_shape``,
    ``bin_shape``, ``bounds``.
read-lines STORE OUT.npz [--bbox lo:hi] [--objects all] [--level L]
    ``select(...).read()`` of a polyline/streamline/line level. Saves ``positions``,
    ``line_offsets`` (CSR of the returned parts into positions), ``object_ids`` (one per
    returned line), ``attr__*``, ``oattr__*`` and, when present, ``groups_flat`` +
    ``groups_offsets``. ``--objects all`` adds ``objects=<every present id>`` to the
    selection. Line stores return no ids; the driver then labels each returned line
    from the objects' own vertices (``building.read_object_vertices``).
read-graph STORE OUT.npz [--bbox lo:hi] [--level L]
    ``select(...).read()`` of a graph/skeleton level. Saves ``positions``, ``edges``
    (E,2) into positions, ``attr__*`` (only what the reference returns: a bbox read
    gives none), ``object_ids`` per returned vertex (derived as for lines, from
    ``building.read_object_vertices``; -1 where a position is ambiguous), ``oattr__*``.
write-mesh IN.npz STORE [--compression ...]
    Write a raw mesh (``Dataset.add_mesh``). IN.npz: ``positions`` (V,D), ``faces``
    (F,L) vertex indices; optional ``object_ids`` (per vertex; every face inside one
    object), ``attr__*`` (per vertex), ``oattr__*``, ``chunk_shape``, ``bin_shape``,
    ``bounds``. The reference stores every face (intra- and cross-chunk) in one
    undirected canonical family with ``perm_idx`` restoring the winding.
read-mesh STORE OUT.npz [--bbox lo:hi] [--objects all] [--level L]
    ``select(...).read()`` of a mesh level. Saves ``positions``, ``faces`` (F,L) into
    positions, ``object_ids`` per returned vertex (derived as for graphs), ``oattr__*``
    and ``attr__*``: the reference's mesh reader returns no attributes, so the driver
    reads every chunk's stored rows and attribute rows (``building.read_chunk_vertices``,
    ``building.read_chunk_attributes``) and matches them to the returned vertices by
    position. A bbox read keeps the vertices inside (inclusive) and the faces whose
    every vertex is inside. ``--objects all`` also saves each present object's vertices
    as listed by its manifest (``building.read_object_vertices``): ``object_list``
    (ids), ``object_positions`` and ``object_offsets`` (CSR over ``object_list``). The
    reference cannot select a mesh by object (``select(objects=...)`` raises for meshes).

build-pyramid STORE --factors F1,F2,.. [--cross-level none|implicit|explicit]
    The reference's ``Dataset.build_pyramid``, one coarsen factor per new level; prints the
    report and each level's vertex count, chunk and bin shape.
read-objects STORE OUT.npz [--level L] [--dtype float32]
    Every present object's vertices at level L as its manifest lists them
    (``building.read_object_vertices``), for any kind: ``object_list``, ``object_offsets``
    (CSR over it), ``object_positions``.

read-links STORE OUT.npz [--level L] [--dtype float32]
    Every stored link record of the level's ``links/0`` family, as the ``building`` surface
    returns it (``building.read_link_arrays``: input endpoint order restored from
    ``perm_idx``), with each endpoint resolved to its stored position
    (``building.read_chunk_vertices``): ``link_positions`` (E, L, D); ``lattr__<name>`` per
    link attribute (``building.read_link_attributes``, row i belongs to record i). Prints
    the family policy (``building.link_family_policy``: ``link_width``, ``directed``,
    ``store``) and ``Level.attribute_names("link")``. For skeletons this is only the
    explicit (branch) records; implicit parents are not links.

Exit status: 0 ok, 2 bad input/usage, 1 the reference raised (set REFERENCE_DRIVER_DEBUG=1
for the traceback), 3 wrong interpreter.

API surface used
----------------
Everything goes through ``zarr_vectors`` (the data-oriented api: ``create``, ``open``,
``Schema``, ``Layout``, ``Dataset.add_points``, ``select().read()``, ``Level.objects``,
``Level.attribute_names``, ``Dataset.validate``) and ``zarr_vectors.building``, which the
reference declares to be its supported surface for lower-level store construction.
``building`` is needed because the api has no reader for object / group attribute tables,
no reader for group membership lists and no writer for group attributes.

Two places leave that surface (unavoidable, both flagged where they occur):
* a ``bin_shape`` whose chunk/bin ratio differs between axes cannot be expressed through
  ``Layout(subcells=int)``; such an input (and any write with ``--writer write_points``)
  goes through ``zarr_vectors.types.points.write_points`` (a module the reference marks
  "undecided", not internal);
* if ``zarr_vectors.open`` refuses a store, ``info`` falls back to
  ``zarr_vectors.validation.validate`` (also "undecided") so it can still report errors.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import traceback
import warnings
from pathlib import Path
from typing import Any

import numpy as np

warnings.simplefilter("ignore")

try:
    import zarr_vectors as zv
    from zarr_vectors import building
except ImportError as exc:  # pragma: no cover - wrong interpreter
    sys.stderr.write(
        "reference_driver: cannot import the reference zarr_vectors; run this script with "
        f".cache/reference-venv/bin/python ({exc})\n"
    )
    sys.exit(3)
if getattr(zv, "__version__", None) != "0.9.2" and not os.environ.get("REFERENCE_DRIVER_ANY_VERSION"):
    # Our own package also imports as ``zarr_vectors``; refuse to drive anything else.
    sys.stderr.write(
        f"reference_driver: imported zarr_vectors {getattr(zv, '__version__', '?')} from "
        f"{getattr(zv, '__file__', '?')}, not the reference 0.9.2; use "
        ".cache/reference-venv/bin/python\n"
    )
    sys.exit(3)


class DriverError(Exception):
    """A usage or input problem, reported without a traceback."""


# --------------------------------------------------------------------------- helpers


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        seq = sorted(value) if isinstance(value, (set, frozenset)) else value
        return [_jsonable(v) for v in seq]
    if isinstance(value, np.ndarray):
        return _jsonable(value.tolist())
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return repr(value)


def _parse_bbox(text: str) -> tuple[list[float], list[float]]:
    try:
        lo_s, hi_s = text.split(":")
        lo = [float(v) for v in lo_s.split(",")]
        hi = [float(v) for v in hi_s.split(",")]
    except ValueError as exc:
        raise DriverError(f"bad --bbox {text!r}; expected lo0,lo1,..:hi0,hi1,..") from exc
    if len(lo) != len(hi):
        raise DriverError(f"bad --bbox {text!r}: corners have different lengths")
    return lo, hi


def _csr_to_groups(flat: np.ndarray, offsets: np.ndarray) -> dict[int, list[int]]:
    offsets = np.asarray(offsets, dtype=np.int64)
    flat = np.asarray(flat, dtype=np.int64)
    if offsets.ndim != 1 or len(offsets) < 1 or offsets[0] != 0 or offsets[-1] != len(flat):
        raise DriverError("groups_offsets must be 1-D, start at 0 and end at len(groups_flat)")
    return {g: flat[offsets[g] : offsets[g + 1]].tolist() for g in range(len(offsets) - 1)}


def _groups_to_csr(rows: list[Any]) -> tuple[np.ndarray, np.ndarray]:
    lists = [np.asarray(list(r), dtype=np.int64) for r in rows]
    offsets = np.zeros(len(lists) + 1, dtype=np.int64)
    if lists:
        offsets[1:] = np.cumsum([len(r) for r in lists])
        flat = np.concatenate(lists) if offsets[-1] else np.zeros(0, np.int64)
    else:
        flat = np.zeros(0, np.int64)
    return flat, offsets


# --------------------------------------------------------------------------- write


def _load_points_npz(path: str) -> dict[str, Any]:
    """positions (N,D); optional chunk_shape, bin_shape, bounds (2,D), attr__*, object_ids,
    oattr__* (indexed by object id), groups_flat + groups_offsets (CSR), gattr__*."""
    with np.load(path, allow_pickle=False) as z:
        data = {k: z[k] for k in z.files}
    if "positions" not in data:
        raise DriverError(f"{path}: no 'positions' array")
    pos = data["positions"]
    if pos.ndim != 2 or pos.shape[1] < 1:
        raise DriverError(f"{path}: positions must be (N, D), got {pos.shape}")
    out: dict[str, Any] = {"positions": pos}
    d = pos.shape[1]
    for key in ("chunk_shape", "bin_shape"):
        if key in data:
            v = np.asarray(data[key], dtype=np.float64).reshape(-1)
            if v.shape != (d,):
                raise DriverError(f"{path}: {key} must have {d} entries, got {v.shape}")
            out[key] = [float(x) for x in v]
    if "bounds" in data:
        b = np.asarray(data["bounds"], dtype=np.float64)
        if b.shape != (2, d):
            raise DriverError(f"{path}: bounds must be (2, {d}), got {b.shape}")
        out["bounds"] = ([float(x) for x in b[0]], [float(x) for x in b[1]])
    out["attributes"] = {k[len("attr__") :]: v for k, v in data.items() if k.startswith("attr__")}
    out["object_attributes"] = {k[len("oattr__") :]: v for k, v in data.items() if k.startswith("oattr__")}
    out["group_attributes"] = {k[len("gattr__") :]: v for k, v in data.items() if k.startswith("gattr__")}
    out["object_ids"] = np.asarray(data["object_ids"], np.int64) if "object_ids" in data else None
    if ("groups_flat" in data) != ("groups_offsets" in data):
        raise DriverError(f"{path}: groups need both groups_flat and groups_offsets")
    out["groups"] = (
        _csr_to_groups(data["groups_flat"], data["groups_offsets"]) if "groups_flat" in data else None
    )
    if out["group_attributes"] and out["groups"] is None:
        raise DriverError(f"{path}: gattr__* given without groups")
    for name, arr in out["attributes"].items():
        if arr.shape[0] != pos.shape[0]:
            raise DriverError(f"{path}: attr__{name} has {arr.shape[0]} rows, expected {len(pos)}")
    return out


def _compression_arg(text: str) -> Any:
    return {"auto": "auto", "none": None}.get(text, text)


def cmd_write_points(args: argparse.Namespace) -> int:
    spec = _load_points_npz(args.input)
    pos = spec["positions"]
    store = args.store
    if Path(store).exists():
        raise DriverError(f"{store} already exists")

    bounds = spec.get("bounds")
    if bounds is None:
        bounds = (pos.min(axis=0).astype(float).tolist(), pos.max(axis=0).astype(float).tolist())
    chunk = spec.get("chunk_shape")
    binshape = spec.get("bin_shape")
    compression = _compression_arg(args.compression)

    subcells: Any = "auto"
    uniform = True
    if binshape is not None:
        base = chunk if chunk is not None else None
        if base is None:
            raise DriverError("bin_shape given without chunk_shape")
        ratios = [c / b for c, b in zip(base, binshape)]
        if any(abs(r - round(r)) > 1e-9 or round(r) < 1 for r in ratios):
            raise DriverError(f"chunk_shape/bin_shape must be integers, got {ratios}")
        ints = {int(round(r)) for r in ratios}
        if len(ints) == 1:
            subcells = ints.pop()
        else:
            uniform = False

    common = dict(
        attributes=spec["attributes"] or None,
        object_ids=spec["object_ids"],
        object_attributes=spec["object_attributes"] or None,
        groups=spec["groups"],
    )
    position_dtype = str(pos.dtype) if pos.dtype.kind in "fiu" else "float32"

    if uniform and args.writer == "api":
        layout = zv.Layout(
            cell_size=tuple(chunk) if chunk is not None else None,
            subcells=subcells,
            compression=compression,
        )
        schema = zv.Schema(
            ndim=pos.shape[1],
            bounds=bounds,
            kind="point_cloud",
            position_dtype=position_dtype,
            layout=layout,
        )
        ds = zv.create(store, schema=schema)
        report = ds.add_points(pos, **common)
        level_group = ds.level(0).store
        route = "zarr_vectors.create + Dataset.add_points"
    else:
        # Needed for per-axis bin ratios (not expressible through the api's Layout) and
        # for --writer write_points (the only route whose compressor= is honoured).
        from zarr_vectors.types.points import write_points

        report = write_points(
            store,
            pos,
            chunk_shape=tuple(chunk) if chunk is not None else None,
            bin_shape=tuple(binshape) if binshape is not None else None,
            bounds=bounds,
            vertex_attributes=common["attributes"],
            object_ids=common["object_ids"],
            object_attributes=common["object_attributes"],
            groups=common["groups"],
            group_attributes={k: np.asarray(v) for k, v in spec["group_attributes"].items()} or None,
            dtype=position_dtype,
            compressor=None if compression == "auto" else compression,
        )
        spec["group_attributes"] = {}
        ds = zv.open(store, mode="r+")
        level_group = ds.level(0).store
        route = "zarr_vectors.types.points.write_points" + ("" if uniform else " (non-uniform bin ratio)")

    for name, values in spec["group_attributes"].items():
        building.create_groupings_attributes_array(
            level_group,
            name,
            dtype=str(values.dtype),
            num_channels=1 if values.ndim == 1 else int(values.shape[1]),
        )
        building.write_groupings_attributes(level_group, name, np.asarray(values))

    ds = zv.open(store)
    print(
        json.dumps(
            _jsonable(
                {
                    "store": store,
                    "route": route,
                    "report": report,
                    "bounds": bounds,
                    "chunk_shape": ds.level(0).scale,
                    "bin_shape": ds.level(0).resolution,
                    "compression": args.compression,
                    "vertex_count": ds.level(0).vertex_count,
                }
            )
        )
    )
    return 0


# --------------------------------------------------------------------------- read


def cmd_read_points(args: argparse.Namespace) -> int:
    ds = zv.open(args.store)
    level = ds.level(args.level)
    kw: dict[str, Any] = {"level": args.level}
    if args.bbox:
        lo, hi = _parse_bbox(args.bbox)
        if len(lo) != ds.ndim:
            raise DriverError(f"--bbox has {len(lo)} axes, store has {ds.ndim}")
        kw["bbox"] = (lo, hi)
    has_objects = level.objects.slots > 0
    via = "objects" if args.ids else args.via
    if via == "auto":
        via = "objects" if has_objects else "plain"
    if via == "objects":
        if not has_objects:
            raise DriverError("--via objects: this level has no object index")
        # The object path is the one that returns per-vertex object_ids.  It is also the
        # only correct bbox path on stores written with object ids: the reference's plain
        # bbox read maps bins to fragment slots, which is wrong when fragments are
        # per-object (reference 0.9.2 bug; see docs/notes/reference-bytes-points.md).
        if args.ids:
            ids = [int(i) for i in args.ids.split(",")]
            route = f"select(objects={ids}" + (", bbox" if args.bbox else "") + ").read()"
        else:
            ids = [int(i) for i in level.objects.ids()]
            route = "select(objects=<all present ids>" + (", bbox" if args.bbox else "") + ").read()"
        result = ds.select(objects=ids, **kw).read()
    else:
        result = ds.select(**kw).read()
        route = "select(" + ("bbox" if args.bbox else "") + ").read()"
    if result.errors:
        raise DriverError(f"reference reported read errors: {result.errors}")

    out: dict[str, np.ndarray] = {"positions": np.asarray(result.positions)}
    for name in result.attributes.names():
        out[f"attr__{name}"] = np.asarray(result.attributes[name])
    lg = level.store
    if len(out["positions"]) == 0:
        # An empty read comes back without attribute columns; keep the keys present.
        for name in level.attribute_names("vertex"):
            if f"attr__{name}" not in out:
                dt, ncols = building.attribute_layout(lg, name)
                out[f"attr__{name}"] = np.zeros((0,) if ncols == 1 else (0, ncols), dtype=dt)
    if result.object_ids is not None:
        out["object_ids"] = np.asarray(result.object_ids, dtype=np.int64)
    elif via == "objects" and len(out["positions"]) == 0:
        out["object_ids"] = np.zeros(0, dtype=np.int64)

    for name in level.attribute_names("object"):
        out[f"oattr__{name}"] = np.asarray(building.read_object_attributes(lg, name))
    try:
        has_groups = "groups" in set(lg.children()) if hasattr(lg, "children") else True
    except Exception:
        has_groups = True
    if has_groups:
        try:
            rows = building.read_all_groupings(lg)
        except Exception:
            rows = None
        if rows is not None and len(rows):
            out["groups_flat"], out["groups_offsets"] = _groups_to_csr(list(rows))
    for name in level.attribute_names("group"):
        out[f"gattr__{name}"] = np.asarray(building.read_groupings_attributes(lg, name))

    np.savez(args.output, **out)
    print(
        json.dumps(
            {
                "rows": int(len(out["positions"])),
                "route": route,
                "keys": sorted(out),
                "truncated": bool(result.truncated),
            }
        )
    )
    return 0


# --------------------------------------------------------------------------- lines / graphs


def _read_npz(path: str) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def _layout_from(data: dict[str, np.ndarray], d: int, path: str) -> dict[str, Any]:
    """chunk_shape / bin_shape / bounds of an input npz, checked against D."""
    out: dict[str, Any] = {}
    for key in ("chunk_shape", "bin_shape"):
        if key in data:
            v = np.asarray(data[key], dtype=np.float64).reshape(-1)
            if v.shape != (d,):
                raise DriverError(f"{path}: {key} must have {d} entries, got {v.shape}")
            out[key] = [float(x) for x in v]
    if "bounds" in data:
        b = np.asarray(data["bounds"], dtype=np.float64)
        if b.shape != (2, d):
            raise DriverError(f"{path}: bounds must be (2, {d}), got {b.shape}")
        out["bounds"] = ([float(x) for x in b[0]], [float(x) for x in b[1]])
    return out


def _prefixed(data: dict[str, np.ndarray], prefix: str) -> dict[str, np.ndarray]:
    return {k[len(prefix) :]: v for k, v in data.items() if k.startswith(prefix)}


def _schema_for(kind: str, pos: np.ndarray, lay: dict[str, Any], compression: Any) -> Any:
    """A ``zv.Schema`` for the public writers; the bin ratio must be one integer."""
    bounds = lay.get("bounds")
    if bounds is None:
        bounds = (pos.min(axis=0).astype(float).tolist(), pos.max(axis=0).astype(float).tolist())
    chunk = lay.get("chunk_shape")
    subcells: Any = "auto"
    if "bin_shape" in lay:
        if chunk is None:
            raise DriverError("bin_shape given without chunk_shape")
        ratios = [c / b for c, b in zip(chunk, lay["bin_shape"])]
        if any(abs(r - round(r)) > 1e-9 or round(r) < 1 for r in ratios):
            raise DriverError(f"chunk_shape/bin_shape must be integers, got {ratios}")
        if len({int(round(r)) for r in ratios}) != 1:
            raise DriverError(
                f"the public api takes one bin ratio for every axis (Layout.subcells); got {ratios}"
            )
        subcells = int(round(ratios[0]))
    layout = zv.Layout(
        cell_size=tuple(chunk) if chunk is not None else None, subcells=subcells, compression=compression
    )
    dtype = str(pos.dtype) if pos.dtype.kind in "fiu" else "float32"
    return zv.Schema(ndim=pos.shape[1], bounds=bounds, kind=kind, position_dtype=dtype, layout=layout), bounds


def _summary(store: str, route: str, report: Any, bounds: Any, extra: dict[str, Any]) -> None:
    ds = zv.open(store)
    lv = ds.level(0)
    print(
        json.dumps(
            _jsonable(
                {
                    "store": store,
                    "route": route,
                    "report": report,
                    "bounds": bounds,
                    "geometry_types": ds.kinds,
                    "chunk_shape": lv.scale,
                    "bin_shape": lv.resolution,
                    "vertex_count": lv.vertex_count,
                    **extra,
                }
            )
        )
    )


def _load_lines_npz(path: str, kind: str) -> dict[str, Any]:
    data = _read_npz(path)
    if kind == "line" and "segments" in data:
        seg = np.asarray(data["segments"])
        if seg.ndim != 3 or seg.shape[1] != 2:
            raise DriverError(f"{path}: segments must be (M, 2, D), got {seg.shape}")
        pos = seg.reshape(-1, seg.shape[2])
        offsets = np.arange(0, len(pos) + 1, 2, dtype=np.int64)
    else:
        if "positions" not in data or "offsets" not in data:
            raise DriverError(
                f"{path}: need 'positions' and 'offsets'" + (" (or 'segments')" if kind == "line" else "")
            )
        pos = np.asarray(data["positions"])
        offsets = np.asarray(data["offsets"], dtype=np.int64).reshape(-1)
    if pos.ndim != 2 or pos.shape[1] < 1:
        raise DriverError(f"{path}: positions must be (V, D), got {pos.shape}")
    if len(offsets) < 1 or offsets[0] != 0 or offsets[-1] != len(pos) or np.any(np.diff(offsets) < 0):
        raise DriverError(f"{path}: offsets must start at 0, not decrease and end at V")
    lengths = np.diff(offsets)
    if kind == "line" and np.any(lengths != 2):
        raise DriverError(f"{path}: kind=line needs every line to have exactly 2 vertices")
    n = len(lengths)
    if "object_ids" in data:
        oids = np.asarray(data["object_ids"], dtype=np.int64).reshape(-1)
        if oids.shape != (n,):
            raise DriverError(f"{path}: object_ids must have one entry per line ({n})")
        if np.any(oids < 0) or len(np.unique(oids)) != n:
            raise DriverError(f"{path}: object_ids must be distinct and >= 0")
    else:
        oids = np.arange(n, dtype=np.int64)
    attrs = _prefixed(data, "attr__")
    for name, arr in attrs.items():
        if arr.shape[0] != len(pos):
            raise DriverError(f"{path}: attr__{name} has {arr.shape[0]} rows, expected {len(pos)}")
    if ("groups_flat" in data) != ("groups_offsets" in data):
        raise DriverError(f"{path}: groups need both groups_flat and groups_offsets")
    return {
        "positions": pos,
        "offsets": offsets,
        "object_ids": oids,
        "attributes": attrs,
        "object_attributes": _prefixed(data, "oattr__"),
        "groups": (
            _csr_to_groups(data["groups_flat"], data["groups_offsets"]) if "groups_flat" in data else None
        ),
        "layout": _layout_from(data, pos.shape[1], path),
    }


def cmd_write_lines(args: argparse.Namespace) -> int:
    kind = args.kind
    spec = _load_lines_npz(args.input, kind)
    if Path(args.store).exists():
        raise DriverError(f"{args.store} already exists")
    pos, offsets, oids = spec["positions"], spec["offsets"], spec["object_ids"]
    schema, bounds = _schema_for(kind, pos, spec["layout"], _compression_arg(args.compression))
    ds = zv.create(args.store, schema=schema)
    # The reference's object id of a line is its index in the list it is handed.
    n_slots = int(oids.max()) + 1 if len(oids) else 0
    where = np.full(n_slots, -1, dtype=np.int64)
    where[oids] = np.arange(len(oids))
    oattrs = spec["object_attributes"] or None
    if kind == "line":
        if n_slots != len(oids):
            raise DriverError(
                "kind=line: object_ids must be a permutation of 0..L-1 "
                "(the reference cannot leave an id unused in a line store)"
            )
        seg = pos.reshape(-1, 2, pos.shape[1])[where]
        vattrs = {k: v.reshape(-1, 2, *v.shape[1:])[where] for k, v in spec["attributes"].items()}
        report = ds.add_lines(seg, attributes=vattrs or None, object_attributes=oattrs)
        route = "zarr_vectors.create + Dataset.add_lines"
        if spec["groups"]:
            lg = ds.level(0).store
            building.create_groupings_array(lg)
            building.write_groupings(lg, spec["groups"])
            route += " + building.write_groupings"
    else:
        empty = np.zeros((0, pos.shape[1]), dtype=pos.dtype)
        polylines = [pos[offsets[i] : offsets[i + 1]] if i >= 0 else empty for i in where]
        vattrs = {}
        for name, arr in spec["attributes"].items():
            blank = np.zeros((0, *arr.shape[1:]), dtype=arr.dtype)
            vattrs[name] = [arr[offsets[i] : offsets[i + 1]] if i >= 0 else blank for i in where]
        report = ds.add_polylines(
            polylines,
            attributes=vattrs or None,
            object_attributes=oattrs,
            groups=spec["groups"],
            streamlines=(kind == "streamline"),
        )
        route = "zarr_vectors.create + Dataset.add_polylines" + (
            "(streamlines=True)" if kind == "streamline" else ""
        )
    _summary(
        args.store,
        route,
        report,
        bounds,
        {"kind": kind, "lines": int(len(oids)), "object_id_slots": n_slots, "compression": args.compression},
    )
    return 0


def cmd_write_graph(args: argparse.Namespace) -> int:
    data = _read_npz(args.input)
    if "positions" not in data or "edges" not in data:
        raise DriverError(f"{args.input}: need 'positions' and 'edges'")
    if Path(args.store).exists():
        raise DriverError(f"{args.store} already exists")
    pos = np.asarray(data["positions"])
    edges = np.asarray(data["edges"], dtype=np.int64)
    if pos.ndim != 2 or edges.ndim != 2 or edges.shape[1] != 2:
        raise DriverError("positions must be (V, D) and edges (E, 2)")
    if len(edges) and (edges.min() < 0 or edges.max() >= len(pos)):
        raise DriverError("edges index outside positions")
    tree = bool(np.asarray(data.get("tree", False)).reshape(-1)[0]) if "tree" in data else False
    directed = bool(np.asarray(data["directed"]).reshape(-1)[0]) if "directed" in data else False
    oids = np.asarray(data["object_ids"], dtype=np.int64) if "object_ids" in data else None
    if oids is not None and oids.shape != (len(pos),):
        raise DriverError("object_ids must have one entry per vertex")
    attrs = _prefixed(data, "attr__")
    for name, arr in attrs.items():
        if arr.shape[0] != len(pos):
            raise DriverError(f"attr__{name} has {arr.shape[0]} rows, expected {len(pos)}")
    eattrs = _prefixed(data, "eattr__")
    for name, arr in eattrs.items():
        if arr.shape[0] != len(edges):
            raise DriverError(f"eattr__{name} has {arr.shape[0]} rows, expected {len(edges)}")
    kind = "skeleton" if tree else "graph"
    schema, bounds = _schema_for(
        kind, pos, _layout_from(data, pos.shape[1], args.input), _compression_arg(args.compression)
    )
    ds = zv.create(args.store, schema=schema)
    report = ds.add_graph(
        pos,
        edges,
        attributes=attrs or None,
        edge_attributes=eattrs or None,
        object_attributes=_prefixed(data, "oattr__") or None,
        object_ids=oids,
        tree=tree,
    )
    _summary(
        args.store,
        f"zarr_vectors.create + Dataset.add_graph(tree={tree})",
        report,
        bounds,
        {
            "kind": kind,
            "directed_requested": directed,
            "directed_written": False,
            "compression": args.compression,
        },
    )
    return 0


def _row_keys(rows: np.ndarray) -> list[bytes]:
    rows = np.ascontiguousarray(rows)
    return [r.tobytes() for r in rows]


def _ids_by_position(level: Any, ids: list[int], dtype: Any, ndim: int) -> dict[bytes, int]:
    """Position row (bytes) -> object id, from each object's stored vertices; -1 when
    the same position belongs to two objects."""
    table: dict[bytes, int] = {}
    lg = level.store
    for oid in ids:
        frags = building.read_object_vertices(lg, int(oid), dtype=dtype, ndim=ndim)
        if not frags:
            continue
        for key in _row_keys(np.concatenate([np.asarray(f, dtype=dtype) for f in frags])):
            prev = table.get(key)
            table[key] = oid if prev is None or prev == oid else -1
    return table


def _extras(level: Any, out: dict[str, np.ndarray]) -> None:
    """Object attribute tables and group lists of the level (not query-scoped)."""
    lg = level.store
    for name in level.attribute_names("object"):
        out[f"oattr__{name}"] = np.asarray(building.read_object_attributes(lg, name))
    try:
        rows = building.read_all_groupings(lg)
    except Exception:
        rows = None
    if rows is not None and len(rows):
        out["groups_flat"], out["groups_offsets"] = _groups_to_csr(list(rows))


def _selection(ds: Any, args: argparse.Namespace) -> dict[str, Any]:
    kw: dict[str, Any] = {"level": args.level}
    if args.bbox:
        lo, hi = _parse_bbox(args.bbox)
        if len(lo) != ds.ndim:
            raise DriverError(f"--bbox has {len(lo)} axes, store has {ds.ndim}")
        kw["bbox"] = (lo, hi)
    return kw


def cmd_read_lines(args: argparse.Namespace) -> int:
    ds = zv.open(args.store)
    level = ds.level(args.level)
    if level.kind not in ("polyline", "streamline", "line"):
        raise DriverError(f"level {args.level} is a {level.kind!r} level, not lines")
    kw = _selection(ds, args)
    all_ids = [int(i) for i in level.objects.ids()]
    if args.objects == "all":
        kw["objects"] = all_ids
    result = ds.select(**kw).read()
    if result.errors:
        raise DriverError(f"reference reported read errors: {result.errors}")
    positions = np.asarray(result.positions)
    offsets = np.zeros(len(result.parts) + 1, dtype=np.int64)
    for k, part in enumerate(result.parts):
        if part.start != offsets[k]:
            raise DriverError("reference parts are not contiguous")
        offsets[k + 1] = part.stop
    out: dict[str, np.ndarray] = {"positions": positions, "line_offsets": offsets}
    for name in result.attributes.names():
        out[f"attr__{name}"] = np.asarray(result.attributes[name])
    if result.part_objects is not None:
        out["object_ids"] = np.asarray(result.part_objects, dtype=np.int64)
        ids_route = "ReadResult.part_objects"
    elif len(offsets) == 1:
        out["object_ids"] = np.zeros(0, dtype=np.int64)
        ids_route = "empty"
    else:
        # read_lines returns no ids: label each returned line by its first vertex.
        table = _ids_by_position(level, all_ids, positions.dtype, positions.shape[1])
        firsts = _row_keys(positions[offsets[:-1]])
        out["object_ids"] = np.asarray([table.get(k, -1) for k in firsts], dtype=np.int64)
        ids_route = "derived from building.read_object_vertices"
    _extras(level, out)
    np.savez(args.output, **out)
    print(
        json.dumps(
            {
                "lines": int(len(offsets) - 1),
                "rows": int(len(positions)),
                "kind": level.kind,
                "route": "select(" + ", ".join(k for k in ("bbox", "objects") if k in kw) + ").read()",
                "object_ids_from": ids_route,
                "attributes_read": bool(result.attributes_read),
                "keys": sorted(out),
                "truncated": bool(result.truncated),
            }
        )
    )
    return 0


def cmd_read_graph(args: argparse.Namespace) -> int:
    ds = zv.open(args.store)
    level = ds.level(args.level)
    if level.kind not in ("graph", "skeleton"):
        raise DriverError(f"level {args.level} is a {level.kind!r} level, not a graph")
    kw = _selection(ds, args)
    result = ds.select(**kw).read()
    if result.errors:
        raise DriverError(f"reference reported read errors: {result.errors}")
    positions = np.asarray(result.positions)
    edges = (
        np.asarray(result.edges, dtype=np.int64).reshape(-1, 2)
        if result.edges is not None
        else np.zeros((0, 2), np.int64)
    )
    out: dict[str, np.ndarray] = {"positions": positions, "edges": edges}
    for name in result.attributes.names():
        out[f"attr__{name}"] = np.asarray(result.attributes[name])
    ids = [int(i) for i in level.objects.ids()] if level.objects.slots > 0 else []
    if ids and len(positions):
        table = _ids_by_position(level, ids, positions.dtype, positions.shape[1])
        out["object_ids"] = np.asarray([table.get(k, -1) for k in _row_keys(positions)], dtype=np.int64)
    else:
        out["object_ids"] = np.zeros(len(positions), dtype=np.int64) - (0 if ids else 1)
    _extras(level, out)
    np.savez(args.output, **out)
    print(
        json.dumps(
            {
                "rows": int(len(positions)),
                "edges": int(len(edges)),
                "kind": level.kind,
                "route": "select(" + ("bbox" if "bbox" in kw else "") + ").read()",
                "attributes_read": bool(result.attributes_read),
                "object_ids_from": "derived from building.read_object_vertices",
                "keys": sorted(out),
            }
        )
    )
    return 0


# --------------------------------------------------------------------------- meshes


def cmd_write_mesh(args: argparse.Namespace) -> int:
    data = _read_npz(args.input)
    if "positions" not in data or "faces" not in data:
        raise DriverError(f"{args.input}: need 'positions' and 'faces'")
    if Path(args.store).exists():
        raise DriverError(f"{args.store} already exists")
    pos = np.asarray(data["positions"])
    faces = np.asarray(data["faces"], dtype=np.int64)
    if pos.ndim != 2 or faces.ndim != 2 or faces.shape[1] < 3:
        raise DriverError(f"positions must be (V, D) and faces (F, L>=3); got {pos.shape}, {faces.shape}")
    if len(faces) and (faces.min() < 0 or faces.max() >= len(pos)):
        raise DriverError("faces index outside positions")
    oids = np.asarray(data["object_ids"], dtype=np.int64) if "object_ids" in data else None
    if oids is not None and oids.shape != (len(pos),):
        raise DriverError("object_ids must have one entry per vertex")
    attrs = _prefixed(data, "attr__")
    for name, arr in attrs.items():
        if arr.shape[0] != len(pos):
            raise DriverError(f"attr__{name} has {arr.shape[0]} rows, expected {len(pos)}")
    schema, bounds = _schema_for(
        "mesh", pos, _layout_from(data, pos.shape[1], args.input), _compression_arg(args.compression)
    )
    ds = zv.create(args.store, schema=schema)
    report = ds.add_mesh(
        pos,
        faces,
        attributes=attrs or None,
        object_attributes=_prefixed(data, "oattr__") or None,
        object_ids=oids,
    )
    _summary(
        args.store,
        "zarr_vectors.create + Dataset.add_mesh",
        report,
        bounds,
        {"kind": "mesh", "faces": int(len(faces)), "compression": args.compression},
    )
    return 0


def _attributes_by_position(level: Any, positions: np.ndarray) -> dict[str, np.ndarray]:
    """Vertex attributes of ``positions`` rows, looked up by position in every chunk's stored
    rows (``building.read_chunk_vertices`` / ``read_chunk_attributes``). The reference's
    mesh reader returns no attributes, so this is the only way to get them."""
    names = list(level.attribute_names("vertex"))
    if not names:
        return {}
    lg = level.store
    chunks = building.list_chunk_keys(lg)
    cells = [".".join(str(c) for c in cc) for cc in chunks]
    plan = [(building.VERTICES, cells), (building.VERTEX_FRAGMENTS, cells)]
    plan += [(f"{building.VERTEX_ATTRIBUTES}/{name}", cells) for name in names]
    layouts = {name: building.attribute_layout(lg, name) for name in names}
    with lg.batched_reads(plan):  # one gather instead of a round trip per cell
        stored = [
            building.read_chunk_vertices(lg, cc, dtype=positions.dtype, ndim=positions.shape[1])
            for cc in chunks
        ]
        columns = {
            name: [building.read_chunk_attributes(lg, name, cc, dtype=dt, ncols=ncols) for cc in chunks]
            for name, (dt, ncols) in layouts.items()
        }
    stored_rows = [
        np.concatenate(f) if f else np.zeros((0, positions.shape[1]), positions.dtype) for f in stored
    ]
    keys = _row_keys(np.concatenate(stored_rows)) if stored_rows else []
    wanted = _row_keys(positions)
    out: dict[str, np.ndarray] = {}
    for name in names:
        dt = layouts[name][0]
        cols = [np.concatenate(frags) for frags in columns[name] if frags]
        values = np.concatenate(cols) if cols else np.zeros((0,), dt)
        if len(values) != len(keys):
            raise DriverError(f"attribute {name!r}: {len(values)} stored rows, {len(keys)} vertices")
        table: dict[bytes, Any] = {}
        for key, value in zip(keys, values):
            prev = table.setdefault(key, value)
            if not np.array_equal(prev, value):
                raise DriverError(f"attribute {name!r}: one position stored with two values")
        try:
            out[name] = np.asarray([table[k] for k in wanted], dtype=dt).reshape(
                (len(wanted),) + values.shape[1:]
            )
        except KeyError as exc:
            raise DriverError(f"attribute {name!r}: a returned vertex is in no chunk") from exc
    return out


def cmd_read_mesh(args: argparse.Namespace) -> int:
    ds = zv.open(args.store)
    level = ds.level(args.level)
    if level.kind != "mesh":
        raise DriverError(f"level {args.level} is a {level.kind!r} level, not a mesh")
    kw = _selection(ds, args)
    result = ds.select(**kw).read()
    if result.errors:
        raise DriverError(f"reference reported read errors: {result.errors}")
    positions = np.asarray(result.positions)
    faces = np.asarray(result.faces, dtype=np.int64) if result.faces is not None else None
    if faces is None:
        faces = np.zeros((0, 3), np.int64)
    out: dict[str, np.ndarray] = {"positions": positions, "faces": faces}
    for name, values in _attributes_by_position(level, positions).items():
        out[f"attr__{name}"] = values
    ids = [int(i) for i in level.objects.ids()] if level.objects.slots > 0 else []
    if ids and len(positions):
        table = _ids_by_position(level, ids, positions.dtype, positions.shape[1])
        out["object_ids"] = np.asarray([table.get(k, -1) for k in _row_keys(positions)], dtype=np.int64)
    else:
        out["object_ids"] = np.zeros(len(positions), dtype=np.int64) - (0 if ids else 1)
    if args.objects == "all":
        frags = [
            building.read_object_vertices(level.store, oid, dtype=positions.dtype, ndim=ds.ndim)
            for oid in ids
        ]
        rows = [np.concatenate(f) if f else np.zeros((0, ds.ndim), positions.dtype) for f in frags]
        out["object_list"] = np.asarray(ids, dtype=np.int64)
        out["object_offsets"] = np.concatenate([[0], np.cumsum([len(r) for r in rows])]).astype(np.int64)
        out["object_positions"] = np.concatenate(rows) if rows else np.zeros((0, ds.ndim), positions.dtype)
    _extras(level, out)
    np.savez(args.output, **out)
    print(
        json.dumps(
            {
                "rows": int(len(positions)),
                "faces": int(len(faces)),
                "kind": level.kind,
                "route": "select(" + ("bbox" if "bbox" in kw else "") + ").read()",
                "attributes_from": "building.read_chunk_attributes, matched by position",
                "object_ids_from": "derived from building.read_object_vertices",
                "keys": sorted(out),
            }
        )
    )
    return 0


# --------------------------------------------------------------------------- info


def _validation(target: Any, vlevel: int) -> dict[str, Any]:
    res = target(vlevel)
    return {
        "valid": bool(res.ok),
        "validate_level": vlevel,
        "errors": list(res.errors),
        "warnings": list(res.warnings),
    }


def cmd_info(args: argparse.Namespace) -> int:
    if "://" not in args.store and not Path(args.store).exists():
        raise DriverError(f"{args.store} does not exist")
    info: dict[str, Any] = {"store": args.store, "reference_version": zv.__version__}
    try:
        ds = zv.open(args.store)
    except Exception as exc:  # the reference refuses the store outright
        info["open_error"] = f"{type(exc).__name__}: {exc}"
        try:
            # Unavoidable fallback: the api validator needs an open Dataset.
            from zarr_vectors.validation import validate

            info.update(_validation(lambda n: validate(args.store, level=n), args.validate_level))
        except Exception as vexc:
            info.update({"valid": False, "errors": [f"{type(vexc).__name__}: {vexc}"]})
        print(json.dumps(_jsonable(info), indent=1))
        return 0

    def safe(fn: Any) -> Any:
        try:
            return fn()
        except Exception as exc:
            return {"error": f"{type(exc).__name__}: {exc}"}

    info.update(
        {
            "format_version": safe(lambda: ".".join(map(str, ds.format_version))),
            "ndim": safe(lambda: ds.ndim),
            "bounds": safe(lambda: [list(map(float, c)) for c in ds.bounds]),
            "axes": safe(lambda: ds.axes),
            "geometry_types": safe(lambda: ds.kinds),
            "capabilities": safe(lambda: ds.capabilities),
            "levels": [],
        }
    )
    for idx in safe(lambda: ds.levels) or []:
        lv = ds.level(idx)
        info["levels"].append(
            {
                "level": idx,
                "kind": safe(lambda: lv.kind),
                "vertex_count": safe(lambda: lv.vertex_count),
                "chunk_shape": safe(lambda: lv.scale),
                "bin_shape": safe(lambda: lv.resolution),
                "num_object_slots": safe(lambda: lv.objects.slots),
                "num_objects_present": safe(lambda: lv.objects.count),
                "groups": safe(lambda: list(lv.groups.names())),
                "vertex_attributes": safe(lambda: lv.attribute_names("vertex")),
                "fragment_attributes": safe(lambda: lv.attribute_names("fragment")),
                "object_attributes": safe(lambda: lv.attribute_names("object")),
                "group_attributes": safe(lambda: lv.attribute_names("group")),
                "link_attributes": safe(lambda: lv.attribute_names("link")),
            }
        )
    try:
        info.update(_validation(lambda n: ds.validate(level=n), args.validate_level))
    except Exception as exc:
        info.update({"valid": False, "errors": [f"validator raised {type(exc).__name__}: {exc}"]})
    print(json.dumps(_jsonable(info), indent=1))
    return 0


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="reference_driver.py", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)

    w = sub.add_parser("write-points", help="write a point cloud from an npz")
    w.add_argument("input")
    w.add_argument("store")
    w.add_argument(
        "--writer",
        choices=("api", "write_points"),
        default="api",
        help="api: zarr_vectors.create + Dataset.add_points (default); write_points: "
        "zarr_vectors.types.points.write_points",
    )
    w.add_argument(
        "--compression",
        default="auto",
        help="auto|none|zstd|blosc. With --writer api it goes to Layout.compression, "
        "but 0.9.2 stamps zstd on every array whatever it says; with --writer "
        "write_points it is compressor= (auto = its default, none) and applies "
        "to the per-chunk arrays only",
    )
    w.set_defaults(func=cmd_write_points)

    r = sub.add_parser("read-points", help="read a point cloud into an npz")
    r.add_argument("store")
    r.add_argument("output")
    r.add_argument("--bbox", default=None, help="lo0,lo1,..:hi0,hi1,.. (inclusive)")
    r.add_argument("--level", type=int, default=0)
    r.add_argument(
        "--via",
        choices=("auto", "plain", "objects"),
        default="auto",
        help="auto: object-path read when the level has objects (gives object_ids), "
        "else plain select().read()",
    )
    r.add_argument("--ids", default=None, help="id0,id1,..: read these objects only (implies --via objects)")
    r.set_defaults(func=cmd_read_points)

    wl = sub.add_parser("write-lines", help="write polylines/streamlines/lines from an npz")
    wl.add_argument("input")
    wl.add_argument("store")
    wl.add_argument("--kind", choices=("polyline", "streamline", "line"), required=True)
    wl.add_argument("--compression", default="auto", help="Layout.compression (see write-points)")
    wl.set_defaults(func=cmd_write_lines)

    wg = sub.add_parser("write-graph", help="write a graph or skeleton from an npz")
    wg.add_argument("input")
    wg.add_argument("store")
    wg.add_argument("--compression", default="auto", help="Layout.compression (see write-points)")
    wg.set_defaults(func=cmd_write_graph)

    rl = sub.add_parser("read-lines", help="read a polyline/streamline/line level into an npz")
    rl.add_argument("store")
    rl.add_argument("output")
    rl.add_argument("--bbox", default=None, help="lo0,lo1,..:hi0,hi1,.. (inclusive)")
    rl.add_argument(
        "--objects",
        choices=("all",),
        default=None,
        help="all: add objects=<every present id> to the selection",
    )
    rl.add_argument("--level", type=int, default=0)
    rl.set_defaults(func=cmd_read_lines)

    rg = sub.add_parser("read-graph", help="read a graph/skeleton level into an npz")
    rg.add_argument("store")
    rg.add_argument("output")
    rg.add_argument("--bbox", default=None, help="lo0,lo1,..:hi0,hi1,.. (inclusive)")
    rg.add_argument("--level", type=int, default=0)
    rg.set_defaults(func=cmd_read_graph)

    wm = sub.add_parser("write-mesh", help="write a mesh from an npz")
    wm.add_argument("input")
    wm.add_argument("store")
    wm.add_argument("--compression", default="auto", help="Layout.compression (see write-points)")
    wm.set_defaults(func=cmd_write_mesh)

    rm = sub.add_parser("read-mesh", help="read a mesh level into an npz")
    rm.add_argument("store")
    rm.add_argument("output")
    rm.add_argument("--bbox", default=None, help="lo0,lo1,..:hi0,hi1,.. (inclusive)")
    rm.add_argument(
        "--objects",
        choices=("all",),
        default=None,
        help="all: also save every present object's vertices (building.read_object_vertices)",
    )
    rm.add_argument("--level", type=int, default=0)
    rm.set_defaults(func=cmd_read_mesh)

    i = sub.add_parser("info", help="print a JSON report on a store")
    i.add_argument("store")
    i.add_argument("--validate-level", type=int, default=3, help="reference conformance level 1-5")
    i.set_defaults(func=cmd_info)

    _add_pyramid_commands(sub)
    _add_link_commands(sub)

    argv = list(sys.argv[1:] if argv is None else argv)
    # "--bbox -5,0:.." would be taken for an option; glue the value on.
    for k in range(len(argv) - 1):
        if argv[k] == "--bbox":
            argv[k : k + 2] = [f"--bbox={argv[k + 1]}"]
            break
    args = p.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except DriverError as exc:
        sys.stderr.write(f"reference_driver {args.cmd}: {exc}\n")
        return 2
    except Exception as exc:
        sys.stderr.write(f"reference_driver {args.cmd}: {type(exc).__name__}: {exc}\n")
        if os.environ.get("REFERENCE_DRIVER_DEBUG"):
            traceback.print_exc(file=sys.stderr)
        return 1


# --------------------------------------------------------------------------- pyramids


def cmd_build_pyramid(args: argparse.Namespace) -> int:
    """``Dataset.build_pyramid`` with a coarsen factor per level and no object dropping."""
    factors = [float(f) for f in args.factors.split(",") if f]
    if not factors:
        raise DriverError("--factors needs at least one number")
    ds = zv.open(args.store, mode="r+")
    report = ds.build_pyramid(factors=[(f, 1.0) for f in factors], cross_level_storage=args.cross_level)
    ds = zv.open(args.store)
    print(
        json.dumps(
            _jsonable(
                {
                    "report": report,
                    "levels": [
                        {
                            "level": k,
                            "vertex_count": ds.level(k).vertex_count,
                            "chunk_shape": ds.level(k).scale,
                            "bin_shape": ds.level(k).resolution,
                        }
                        for k in ds.levels
                    ],
                }
            )
        )
    )
    return 0


def _add_pyramid_commands(sub: Any) -> None:
    """build-pyramid STORE --factors F1,F2,.. [--cross-level none|implicit|explicit];
    read-objects STORE OUT.npz [--level L] [--dtype float32]"""
    bp = sub.add_parser("build-pyramid", help="add coarser levels with the reference's build_pyramid")
    bp.add_argument("store")
    bp.add_argument("--factors", required=True, help="coarsen factor per new level, e.g. 2,2")
    bp.add_argument(
        "--cross-level",
        default="explicit",
        choices=("none", "implicit", "explicit"),
        help="cross_level_storage (the reference's default is explicit)",
    )
    bp.set_defaults(func=cmd_build_pyramid)
    ro = sub.add_parser("read-objects", help="every present object's vertices at a level (its manifest)")
    ro.add_argument("store")
    ro.add_argument("output")
    ro.add_argument("--level", type=int, default=0)
    ro.add_argument("--dtype", default="float32", help="the stored position dtype")
    ro.set_defaults(func=cmd_read_objects)


def cmd_read_objects(args: argparse.Namespace) -> int:
    """Each present object's vertices, from its manifest (``building.read_object_vertices``),
    for any geometry kind: ``object_list`` (ids), ``object_offsets`` (CSR over it) and
    ``object_positions``. Unlike ``select(objects=...)`` it works for graphs and meshes too."""
    ds = zv.open(args.store)
    level = ds.level(args.level)
    ids = [int(i) for i in level.objects.ids()] if level.objects.slots > 0 else []
    dtype = np.dtype(args.dtype)
    rows = []
    for oid in ids:
        frags = building.read_object_vertices(level.store, oid, dtype=dtype, ndim=ds.ndim)
        rows.append(np.concatenate(frags) if frags else np.zeros((0, ds.ndim), dtype))
    out = {
        "object_list": np.asarray(ids, dtype=np.int64),
        "object_offsets": np.concatenate([[0], np.cumsum([len(r) for r in rows])]).astype(np.int64),
        "object_positions": np.concatenate(rows) if rows else np.zeros((0, ds.ndim), dtype),
    }
    np.savez(args.output, **out)
    print(
        json.dumps(
            {
                "objects": len(ids),
                "rows": int(out["object_offsets"][-1]),
                "kind": level.kind,
                "route": "building.read_object_vertices per present object",
            }
        )
    )
    return 0


# --------------------------------------------------------------------------- link records


def _add_link_commands(sub: Any) -> None:
    """read-links STORE OUT.npz [--level L] [--dtype float32]"""
    rk = sub.add_parser(
        "read-links",
        help="every link record of a level with its endpoint positions "
        "and link attributes (the building surface)",
    )
    rk.add_argument("store")
    rk.add_argument("output")
    rk.add_argument("--level", type=int, default=0)
    rk.add_argument("--dtype", default="float32", help="the stored position dtype")
    rk.set_defaults(func=cmd_read_links)


def cmd_read_links(args: argparse.Namespace) -> int:
    """``building.read_link_arrays`` records resolved to positions, and the link attributes
    in the same (shared) enumeration order. The data api returns no link attributes and
    no link direction, so this is the only way to see them."""
    ds = zv.open(args.store)
    level = ds.level(args.level)
    lg = level.store
    dtype = np.dtype(args.dtype)
    ndim = ds.ndim
    policy = building.link_family_policy(lg, 0)
    chunks, vi = building.read_link_arrays(lg, delta=0)
    width = int(vi.shape[1]) if vi.ndim == 2 and vi.shape[0] else (policy[0] if policy else 2)
    rows: dict[tuple[int, ...], np.ndarray] = {}
    link_positions = np.zeros((len(vi), width, ndim), dtype=dtype)
    for r in range(len(vi)):
        for k in range(width):
            cc = tuple(int(c) for c in chunks[r, k])
            if cc not in rows:
                frags = building.read_chunk_vertices(lg, cc, dtype=dtype, ndim=ndim)
                rows[cc] = np.concatenate(frags) if frags else np.zeros((0, ndim), dtype)
            local = int(vi[r, k])
            if not 0 <= local < len(rows[cc]):
                raise DriverError(f"link record {r} endpoint {k}: row {local} outside chunk {cc}")
            link_positions[r, k] = rows[cc][local]
    out: dict[str, np.ndarray] = {"link_positions": link_positions}
    names = list(level.attribute_names("link"))
    for name in names:
        values = np.asarray(building.read_link_attributes(lg, name, delta=0))
        if len(values) != len(vi):
            raise DriverError(f"link attribute {name!r}: {len(values)} rows for {len(vi)} records")
        out[f"lattr__{name}"] = values
    np.savez(args.output, **out)
    print(
        json.dumps(
            _jsonable(
                {
                    "records": int(len(vi)),
                    "kind": level.kind,
                    "link_attributes": names,
                    "policy": None
                    if policy is None
                    else {"link_width": policy[0], "directed": policy[2], "store": policy[3]},
                    "route": "building.read_link_arrays + read_chunk_vertices + read_link_attributes",
                }
            )
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
