#!/usr/bin/env python
"""One measured task of the polylines benchmark, run in a fresh process.

``bench_lines.py`` starts this file with OUR venv's python (``--impl ours``) or with the
REFERENCE venv's python (``--impl reference``). Both packages import as ``zarr_vectors``,
so the adapter checks which one it got before doing anything. The file is self-contained
(it imports nothing from the benchmarks directory) because children run with ``python -I``.

Tasks (``--task``):
  gen      import the library, generate the walks, report peak RSS (baseline for ``write``)
  write    import, generate, time the write call only, report peak RSS
  query    time the box queries (1 % and 10 %), object reads (one id, 100 ids) and a full
           read, then check every result against numpy brute force
  io       files opened and bytes read by ONE 1 % box query (audit hook + /proc/self/io)
  profile  cProfile of the write, the 1 % box queries and the 100-id object reads (text)

The last line of stdout is a JSON object with the results.
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import time
import warnings
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # -I leaves this folder off sys.path
from _harness import answer, digest, load_json, peak_rss_mib, rchar  # noqa: E402

del sys.path[0]  # nothing else is imported from the benchmarks folder

warnings.simplefilter("ignore")

REFERENCE_VERSION = "0.9.2"
CHUNK = 100.0
LO, HI = 0.0, 1000.0
NDIM = 3
MIN_LEN, MAX_LEN = 50, 200
STEP_SIGMA = 10.0


def generate(n_lines: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``n_lines`` random walks of 50-200 vertices, step sigma 10, kept inside [0, 1000]^3.

    Each walk starts at a uniform point; steps are N(0, 10) per axis; a walk that would leave
    the volume is reflected back at the wall (so it does not stick to it). Returns float32
    positions (V, 3) and int64 CSR offsets (L + 1,).
    """
    rng = np.random.default_rng(seed)
    lengths = rng.integers(MIN_LEN, MAX_LEN + 1, size=n_lines)
    offsets = np.zeros(n_lines + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    starts = rng.uniform(LO, HI, size=(n_lines, NDIM))
    steps = rng.normal(0.0, STEP_SIGMA, size=(int(offsets[-1]), NDIM))
    first = offsets[:-1]
    steps[first] = starts
    walk = np.cumsum(steps, axis=0)
    walk -= np.repeat(walk[first] - starts, lengths, axis=0)  # restart the sum at every line
    span = HI - LO
    folded = np.mod(walk - LO, 2.0 * span)
    pos = (LO + span - np.abs(folded - span)).astype(np.float32)
    np.clip(pos, np.float32(LO), np.float32(HI), out=pos)
    return pos, offsets


def as_list(pos: np.ndarray, offsets: np.ndarray) -> list[np.ndarray]:
    return [pos[offsets[i] : offsets[i + 1]] for i in range(len(offsets) - 1)]


# --------------------------------------------------------------------------- adapters
#
# Every read returns (positions (N, 3), piece_offsets (P + 1,), piece_object_ids (P,) or None).


class Ours:
    name = "ours"

    def __init__(self, source: str | None = None) -> None:
        if source:
            sys.path.insert(0, source)  # snapshot of our package taken by bench_lines.py
        import zarr_vectors as zv

        if getattr(zv, "__version__", None) == REFERENCE_VERSION:
            raise SystemExit(f"--impl ours imported the reference package ({zv.__file__})")
        if source and not os.path.realpath(zv.__file__).startswith(os.path.realpath(source) + os.sep):
            raise SystemExit(f"--ours-source {source} given but imported {zv.__file__}")
        self.zv = zv

    def prepare(self, pos: np.ndarray, offsets: np.ndarray) -> Any:
        return (pos, offsets)

    def write(self, path: str, data: Any, variant: str, subcells: int) -> None:
        self.zv.write_lines(
            path,
            data,
            chunk_shape=CHUNK,
            kind="polyline",
            bounds=([LO] * NDIM, [HI] * NDIM),
            compression=variant,
        )

    def open(self, path: str) -> Any:
        return self.zv.open(path)

    @staticmethod
    def _unpack(r: Any, piece_ids: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        pos = np.asarray(r.positions).reshape(-1, NDIM)
        offs = np.asarray(r.line_offsets, dtype=np.int64)
        ids = None
        if piece_ids and r.object_ids is not None:
            oid = np.asarray(r.object_ids, dtype=np.int64)
            lens = np.diff(offs)
            starts = offs[:-1]
            ids = oid[starts] if len(starts) else np.zeros(0, np.int64)
            if not np.array_equal(oid, np.repeat(ids, lens)):
                ids = np.full(len(starts), -2, np.int64)  # a piece mixes objects: flag it
        return pos, offs, ids

    def query(self, ds: Any, lo: list[float], hi: list[float]) -> Any:
        return ds.query(bbox=(lo, hi))

    def query_noids(self, ds: Any, lo: list[float], hi: list[float]) -> Any:
        return ds.query(bbox=(lo, hi), object_ids=False)

    def objects(self, ds: Any, ids: list[int]) -> Any:
        return ds.objects(ids)

    def cells_only(self, ds: Any, lo: list[float], hi: list[float]) -> int:
        """Fetch and decode (decompress, unframe) the cells a box query reads — vertex,
        fragment-index and object-id cells of the touched chunks, and the link cells anchored
        there that join touched chunks — and nothing else: the floor a box query is
        compared with (no decoding of rows, no assembly)."""
        from zarr_vectors.engine.read.links import link_keys, link_plan
        from zarr_vectors.engine.read.plan import plan_box

        level = ds.level(0)
        plan = plan_box(level, np.asarray(lo, float), np.asarray(hi, float))
        chunks = np.concatenate([plan.full, plan.partial])
        arrays = [a for a in (level.vertices, level.fragments, level.fragment_object_ids) if a is not None]
        keys = [k for a in arrays for k in a.keys(chunks)]
        links = link_plan(level, chunks)
        keys += link_keys(level, links)
        raws = level.backend.get_many(keys)
        cells = [(a, c) for a in arrays for c in chunks] + [(a, c) for a, anchors in links for c in anchors]
        return sum(len(a.payload(raw, c)) for (a, c), raw in zip(cells, raws))

    def read_all(self, ds: Any) -> Any:
        return ds.read()

    def unpack(self, r: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        return self._unpack(r)

    def unpack_objects(self, r: Any, ids: list[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        return self._unpack(r)


class Reference:
    """Reference zarr-vectors 0.9.2 through its public api.

    Write: ``create(path, Schema(kind="polyline", Layout(cell_size=100, subcells=S)))`` +
    ``Dataset.add_polylines(list_of_arrays)`` (zstd on every array). Object id = list index.
    Reads: ``open(path).select(bbox=... | objects=... | nothing).read()``; a polyline bbox
    read returns every whole polyline with a fragment in a chunk the box touches.
    """

    name = "reference"

    def __init__(self) -> None:
        import zarr_vectors as zv

        if getattr(zv, "__version__", None) != REFERENCE_VERSION:
            raise SystemExit(
                f"--impl reference imported zarr_vectors {getattr(zv, '__version__', '?')} from {zv.__file__}"
            )
        self.zv = zv

    def prepare(self, pos: np.ndarray, offsets: np.ndarray) -> Any:
        return as_list(pos, offsets)  # the api takes a list of (n_i, D) arrays

    def write(self, path: str, data: Any, variant: str, subcells: int) -> None:
        if variant != "zstd":
            raise SystemExit("the reference's public api always writes zstd; variant must be zstd")
        zv = self.zv
        schema = zv.Schema(
            ndim=NDIM,
            bounds=([LO] * NDIM, [HI] * NDIM),
            kind="polyline",
            position_dtype="float32",
            layout=zv.Layout(cell_size=(CHUNK,) * NDIM, subcells=subcells),
        )
        ds = zv.create(path, schema=schema)
        ds.add_polylines(data)

    def open(self, path: str) -> Any:
        return self.zv.open(path)

    def query(self, ds: Any, lo: list[float], hi: list[float]) -> Any:
        return ds.select(bbox=(lo, hi)).read()

    query_noids = None

    def objects(self, ds: Any, ids: list[int]) -> Any:
        return ds.select(objects=ids).read()

    def read_all(self, ds: Any) -> Any:
        return ds.select().read()

    def unpack(self, r: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        pos = np.asarray(r.positions)
        pos = pos.reshape(-1, NDIM)
        offs = np.zeros(len(r.parts) + 1, dtype=np.int64)
        for k, part in enumerate(r.parts):
            offs[k + 1] = part.stop
        ids = None if r.part_objects is None else np.asarray(r.part_objects, dtype=np.int64)
        return pos, offs, ids

    def unpack_objects(self, r: Any, ids: list[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        return self.unpack(r)


_OURS_SOURCE: str | None = None


def adapter(name: str) -> Any:
    return Ours(_OURS_SOURCE) if name == "ours" else Reference()


# --------------------------------------------------------------------------- brute force


class Truth:
    """The input walks and brute-force answers for boxes and ids."""

    def __init__(self, pos: np.ndarray, offsets: np.ndarray) -> None:
        self.pos = pos
        self.offsets = offsets
        self.lengths = np.diff(offsets)
        self.line_of = np.repeat(np.arange(len(self.lengths), dtype=np.int64), self.lengths)
        self.is_first = np.zeros(len(pos), dtype=bool)
        self.is_first[offsets[:-1]] = True

    def inside(self, lo: list[float], hi: list[float]) -> np.ndarray:
        return np.all(
            (self.pos >= np.asarray(lo, np.float32)) & (self.pos <= np.asarray(hi, np.float32)), axis=1
        )

    def runs(self, mask: np.ndarray) -> list[tuple[int, bytes]]:
        """Maximal runs of consecutive in-box vertices of each line: (object id, positions bytes)."""
        prev = np.r_[False, mask[:-1]]
        start = mask & (self.is_first | ~prev)
        idx = np.flatnonzero(mask)
        run_starts = np.flatnonzero(start[idx])
        bounds = np.r_[run_starts, len(idx)]
        out = []
        for a, b in zip(bounds[:-1], bounds[1:]):
            i0 = idx[a]
            out.append((int(self.line_of[i0]), self.pos[i0 : i0 + (b - a)].tobytes()))
        return out

    def line(self, oid: int) -> np.ndarray:
        return self.pos[self.offsets[oid] : self.offsets[oid + 1]]


def sorted_rows(pos: np.ndarray, oid: np.ndarray | None) -> np.ndarray:
    """Rows (oid, x, y, z) as float64, sorted lexicographically: a canonical vertex multiset."""
    cols = [pos[:, i].astype(np.float64) for i in range(NDIM)]
    if oid is not None:
        cols.insert(0, oid.astype(np.float64))
    arr = np.stack(cols, axis=1) if cols else np.zeros((0, 0))
    if len(arr) == 0:
        return arr
    order = np.lexsort(tuple(arr[:, i] for i in reversed(range(arr.shape[1]))))
    return arr[order]


def check_box_ours(
    truth: Truth, mask: np.ndarray, got: tuple[np.ndarray, np.ndarray, np.ndarray | None], with_ids: bool
) -> dict[str, Any]:
    """Exact check: vertex multiset (with object ids) and every piece against brute-force runs."""
    pos, offs, pids = got
    exp_pos = truth.pos[mask]
    out: dict[str, Any] = {"expected_rows": int(mask.sum()), "got_rows": int(len(pos))}
    exp_oid = truth.line_of[mask] if with_ids else None
    got_oid = None
    if with_ids:
        if pids is None:
            out["error"] = "no object ids"
            out["vertices_ok"] = out["pieces_ok"] = False
            out["ok"] = False
            return out
        got_oid = np.repeat(pids, np.diff(offs))
    out["vertices_ok"] = bool(
        len(pos) == len(exp_pos) and np.array_equal(sorted_rows(pos, got_oid), sorted_rows(exp_pos, exp_oid))
    )
    expected = truth.runs(mask)
    out["expected_pieces"] = len(expected)
    out["got_pieces"] = int(len(offs) - 1)
    if with_ids:
        got_pieces = [(int(pids[k]), pos[offs[k] : offs[k + 1]].tobytes()) for k in range(len(offs) - 1)]
        ce, cg = collections.Counter(expected), collections.Counter(got_pieces)
        missing, extra = ce - cg, cg - ce
        out["pieces_ok"] = not missing and not extra
        if not out["pieces_ok"]:
            out["pieces_missing"] = sum(missing.values())
            out["pieces_extra"] = sum(extra.values())
            rev = collections.Counter(
                (o, np.frombuffer(b, np.float32).reshape(-1, NDIM)[::-1].tobytes())
                for o, b in extra.elements()
            )
            out["extra_that_are_reversed_runs"] = sum((rev & missing).values())
    else:
        # without ids: compare the pieces as position sequences only
        exp_b = collections.Counter(b for _, b in expected)
        got_b = collections.Counter(pos[offs[k] : offs[k + 1]].tobytes() for k in range(len(offs) - 1))
        out["pieces_ok"] = exp_b == got_b
    out["ok"] = bool(out["vertices_ok"] and out["pieces_ok"])
    return out


def describe_box_reference(
    truth: Truth,
    mask: np.ndarray,
    lo: list[float],
    hi: list[float],
    got: tuple[np.ndarray, np.ndarray, np.ndarray | None],
) -> dict[str, Any]:
    """What the reference's bbox read returned (whole polylines), against brute force. No verdict."""
    pos, offs, pids = got
    out: dict[str, Any] = {
        "expected_rows": int(mask.sum()),
        "got_rows": int(len(pos)),
        "expected_pieces": len(truth.runs(mask)),
        "got_lines": int(len(offs) - 1),
        "lines_with_vertex_inside": int(len(np.unique(truth.line_of[mask]))),
    }
    if len(pos):
        inb = np.all((pos >= np.asarray(lo, np.float32)) & (pos <= np.asarray(hi, np.float32)), axis=1)
        got_oid = None if pids is None else np.repeat(pids, np.diff(offs))
        exp_oid = None if pids is None else truth.line_of[mask]
        out["rows_after_client_filter"] = int(inb.sum())
        out["client_filter_equals_brute_force"] = bool(
            np.array_equal(
                sorted_rows(pos[inb], None if got_oid is None else got_oid[inb]),
                sorted_rows(truth.pos[mask], exp_oid),
            )
        )
    else:
        out["rows_after_client_filter"] = 0
        out["client_filter_equals_brute_force"] = bool(mask.sum() == 0)
    out["exact"] = False  # whole lines, never the cut pieces
    return out


def check_lines(
    truth: Truth, ids: list[int], got: tuple[np.ndarray, np.ndarray, np.ndarray | None], ordered: bool
) -> dict[str, Any]:
    """Whole lines ``ids`` compared exactly with the input (order of ``ids`` when ``ordered``)."""
    pos, offs, pids = got
    n = len(offs) - 1
    out: dict[str, Any] = {"expected_lines": len(ids), "got_lines": int(n)}
    if n != len(ids):
        out["ok"] = False
        return out
    if pids is None:
        got_ids = list(ids)  # no ids returned: assume the order given
    else:
        got_ids = [int(v) for v in pids]
    if ordered and got_ids != list(ids):
        if sorted(got_ids) != sorted(ids):
            out["ok"] = False
            out["ids_differ"] = True
            return out
        out["order_differs"] = True
    if sorted(got_ids) != sorted(ids):
        out["ok"] = False
        out["ids_differ"] = True
        return out
    bad = 0
    for k, oid in enumerate(got_ids):
        if not np.array_equal(pos[offs[k] : offs[k + 1]], truth.line(oid)):
            bad += 1
    out["lines_differing"] = bad
    out["ok"] = bad == 0 and not out.get("order_differs", False)
    return out


# --------------------------------------------------------------------------- tasks


def task_gen(args: argparse.Namespace) -> dict[str, Any]:
    impl = adapter(args.impl)  # same imports as the write process
    pos, offsets = generate(args.n, args.seed)
    data = impl.prepare(pos, offsets)
    del data
    return {"peak_rss_mib": peak_rss_mib(), "digest": digest(pos, offsets), "vertices": int(len(pos))}


def task_write(args: argparse.Namespace) -> dict[str, Any]:
    impl = adapter(args.impl)
    pos, offsets = generate(args.n, args.seed)
    data = impl.prepare(pos, offsets)
    c0 = os.times()
    t0 = time.perf_counter()
    impl.write(args.store, data, args.variant, args.subcells)
    t1 = time.perf_counter()
    c1 = os.times()
    # CPU time of this process (all threads) during the write: steadier than wall time when
    # the file system is busy (creating ~10-16 k files right after deleting as many is slow)
    return {
        "write_s": t1 - t0,
        "write_cpu_s": (c1.user - c0.user) + (c1.system - c0.system),
        "write_sys_s": c1.system - c0.system,
        "peak_rss_mib": peak_rss_mib(),
        "digest": digest(pos, offsets),
        "vertices": int(len(pos)),
    }


def _median(v: list[float]) -> float | None:
    return float(np.median(v)) if v else None


def task_query(args: argparse.Namespace) -> dict[str, Any]:
    impl = adapter(args.impl)
    pos, offsets = generate(args.n, args.seed)
    truth = Truth(pos, offsets)
    plan = load_json(args.boxes)
    out: dict[str, Any] = {}
    ours = impl.name == "ours"

    for label, blist in plan["boxes"].items():
        times, noid_times, cells_times, details, bad, noid_bad = [], [], [], [], 0, 0
        for lo, hi in blist:
            ds = impl.open(args.store)
            t0 = time.perf_counter()
            r = impl.query(ds, lo, hi)
            t1 = time.perf_counter()
            times.append(t1 - t0)
            mask = truth.inside(lo, hi)
            got = impl.unpack(r)
            if ours:
                res = check_box_ours(truth, mask, got, with_ids=True)
                bad += 0 if res["ok"] else 1
                # the same box without the row -> object mapping
                ds = impl.open(args.store)
                t0 = time.perf_counter()
                r2 = impl.query_noids(ds, lo, hi)
                t1 = time.perf_counter()
                noid_times.append(t1 - t0)
                res2 = check_box_ours(truth, mask, Ours._unpack(r2, piece_ids=False), with_ids=False)
                noid_bad += 0 if res2["ok"] else 1
                if not res2["ok"]:
                    res["no_ids_check"] = res2
                ds = impl.open(args.store)
                t0 = time.perf_counter()
                impl.cells_only(ds, lo, hi)
                cells_times.append(time.perf_counter() - t0)
            else:
                res = describe_box_reference(truth, mask, lo, hi, got)
            details.append(res)
        entry: dict[str, Any] = {"times_s": times, "details": details}
        if ours:
            entry["mismatches"] = bad
            entry["noids_times_s"] = noid_times
            entry["noids_mismatches"] = noid_bad
            entry["cells_only_times_s"] = cells_times
        out[label] = entry

    for label, id_lists in plan["objects"].items():
        times, details, bad = [], [], 0
        for ids in id_lists:
            ds = impl.open(args.store)
            t0 = time.perf_counter()
            r = impl.objects(ds, ids)
            t1 = time.perf_counter()
            times.append(t1 - t0)
            res = check_lines(truth, ids, impl.unpack_objects(r, ids), ordered=True)
            bad += 0 if res["ok"] else 1
            details.append(res)
        out[label] = {"times_s": times, "mismatches": bad, "details": [d for d in details if not d["ok"]][:3]}

    ds = impl.open(args.store)
    t0 = time.perf_counter()
    r = impl.read_all(ds)
    t1 = time.perf_counter()
    got = impl.unpack(r)
    all_ids = list(range(len(offsets) - 1))
    if got[2] is not None:
        # any order of lines is fine for a full read: compare in object-id order
        got = _reorder(got, np.argsort(got[2], kind="stable"))
    res = check_lines(truth, all_ids, got, ordered=True)
    out["full"] = {
        "time_s": t1 - t0,
        "rows": int(len(got[0])),
        "mismatches": 0 if res["ok"] else 1,
        "details": [] if res["ok"] else [res],
    }
    out["peak_rss_mib"] = peak_rss_mib()
    return out


def _reorder(
    got: tuple[np.ndarray, np.ndarray, np.ndarray | None], order: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Pieces permuted by ``order`` (so a full read can be compared in object-id order)."""
    pos, offs, pids = got
    lens = np.diff(offs)[order]
    new_offs = np.zeros(len(order) + 1, np.int64)
    np.cumsum(lens, out=new_offs[1:])
    if len(order):
        rows = np.concatenate([np.arange(offs[k], offs[k + 1]) for k in order])
    else:
        rows = np.zeros(0, np.int64)
    return pos[rows], new_offs, None if pids is None else pids[order]


def task_io(args: argparse.Namespace) -> dict[str, Any]:
    """Files opened and bytes read by one box query (and by ``open``).

    An audit hook sees every ``open`` event (builtins.open, io.open, os.open, open_code) from
    any thread; store files are split into metadata (zarr.json) and cell files; bytes are
    the sizes of the files opened. ``rchar`` from /proc/self/io is the cross-check.
    """
    impl = adapter(args.impl)
    plan = load_json(args.boxes)
    lo, hi = plan["boxes"][args.io_label][args.io_index]
    store = os.path.realpath(args.store)
    phase = {"name": "setup"}
    events: list[tuple[str, str]] = []

    def hook(event: str, eargs: tuple) -> None:
        if event == "open" and not isinstance(eargs[0], int):
            events.append((phase["name"], os.fsdecode(eargs[0])))

    ds = impl.open(args.store)
    impl.query(ds, lo, hi)  # warm lazy imports
    del ds
    sys.addaudithook(hook)
    phase["name"] = "open"
    r0 = rchar()
    ds = impl.open(args.store)
    r1 = rchar()
    phase["name"] = "query"
    r = impl.query(ds, lo, hi)
    r2 = rchar()
    phase["name"] = "done"
    rows = int(len(np.asarray(r.positions)))

    def summarise(name: str, rchar: int | None) -> dict[str, Any]:
        meta = cells = 0
        meta_bytes = cell_bytes = 0
        arrays: dict[str, int] = {}
        for ph, path in events:
            if ph != name:
                continue
            full = os.path.realpath(path)
            if not full.startswith(store + os.sep):
                continue
            rel = os.path.relpath(full, store)
            try:
                size = os.path.getsize(full)
            except OSError:
                size = 0
            if os.path.basename(rel) in ("zarr.json", ".zarray", ".zgroup", ".zattrs", ".zmetadata"):
                meta += 1
                meta_bytes += size
            else:
                cells += 1
                cell_bytes += size
                parts = rel.split(os.sep)
                key = os.sep.join(parts[: parts.index("c")]) if "c" in parts else os.path.dirname(rel)
                arrays[key] = arrays.get(key, 0) + 1
        return {
            "metadata_files": meta,
            "metadata_bytes": meta_bytes,
            "cell_files": cells,
            "cell_bytes": cell_bytes,
            "store_file_bytes": meta_bytes + cell_bytes,
            "rchar_bytes": rchar,
            "cell_files_by_array": arrays,
        }

    return {
        "box": [lo, hi],
        "rows": rows,
        "open": summarise("open", None if r0 is None or r1 is None else r1 - r0),
        "query": summarise("query", None if r1 is None or r2 is None else r2 - r1),
    }


def task_profile(args: argparse.Namespace) -> dict[str, Any]:
    import cProfile
    import io
    import pstats

    impl = adapter(args.impl)
    pos, offsets = generate(args.n, args.seed)
    data = impl.prepare(pos, offsets)

    def top(prof: cProfile.Profile, key: str) -> str:
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).strip_dirs().sort_stats(key).print_stats(args.top)
        text = buf.getvalue()
        idx = text.find("   ncalls")
        return text[idx:] if idx >= 0 else text

    out: dict[str, Any] = {}
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    impl.write(args.store, data, args.variant, args.subcells)
    prof.disable()
    out["write_wall_s_under_profiler"] = time.perf_counter() - t0
    out["write_tottime"] = top(prof, "tottime")
    out["write_cumtime"] = top(prof, "cumulative")

    boxes = load_json(args.boxes)["boxes"][args.io_label]
    prof = cProfile.Profile()
    total = 0.0
    for lo, hi in boxes:
        ds = impl.open(args.store)
        t0 = time.perf_counter()
        prof.enable()
        impl.query(ds, lo, hi)
        prof.disable()
        total += time.perf_counter() - t0
    out["query_boxes"] = len(boxes)
    out["query_wall_s_under_profiler"] = total
    out["query_tottime"] = top(prof, "tottime")
    out["query_cumtime"] = top(prof, "cumulative")

    id_lists = load_json(args.boxes)["objects"]["obj100"]
    prof = cProfile.Profile()
    total = 0.0
    for ids in id_lists:
        ds = impl.open(args.store)
        t0 = time.perf_counter()
        prof.enable()
        impl.objects(ds, ids)
        prof.disable()
        total += time.perf_counter() - t0
    out["objects_reads"] = len(id_lists)
    out["objects_wall_s_under_profiler"] = total
    out["objects_tottime"] = top(prof, "tottime")
    out["objects_cumtime"] = top(prof, "cumulative")
    return out


TASKS = {"gen": task_gen, "write": task_write, "query": task_query, "io": task_io, "profile": task_profile}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--impl", choices=("ours", "reference"), required=True)
    p.add_argument("--task", choices=sorted(TASKS), required=True)
    p.add_argument("--variant", default="zstd", help="compression variant: none | zstd")
    p.add_argument("--n", type=int, required=True, help="number of polylines")
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--subcells", type=int, default=4, help="reference Layout(subcells=...)")
    p.add_argument("--store", default=None)
    p.add_argument("--boxes", default=None, help="JSON plan {boxes: {label: [[lo, hi]..]}, objects: ...}")
    p.add_argument("--io-label", default="q1")
    p.add_argument("--io-index", type=int, default=0)
    p.add_argument("--top", type=int, default=10)
    p.add_argument("--ours-source", default=None)
    args = p.parse_args()
    global _OURS_SOURCE
    _OURS_SOURCE = args.ours_source
    result = TASKS[args.task](args)
    result.update({"impl": args.impl, "task": args.task, "variant": args.variant, "python": sys.executable})
    return answer(result)


if __name__ == "__main__":
    sys.exit(main())
