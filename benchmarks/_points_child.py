#!/usr/bin/env python
"""One measured task of the points benchmark, run in a fresh process.

``bench_points.py`` starts this file with OUR venv's python (``--impl ours``) or with the
REFERENCE venv's python (``--impl reference``); both packages import as ``zarr_vectors``,
so the script checks which one it got before doing anything. It is started with a neutral
working directory and no PYTHONPATH, so ``import zarr_vectors`` resolves to the package
installed in the interpreter's own environment.

Tasks (``--task``):
  gen      import the library, generate the data, report peak RSS (baseline for ``write``)
  write    import, generate, time the write call only, report peak RSS
  query    time each box query (dataset opened before the clock starts) and a full read,
           then check every result against numpy brute force
  io       count the files opened and bytes read by ONE box query (audit hook + /proc/self/io)
  profile  cProfile of the write and of the 1 % box queries (text, top entries)

The last line of stdout is a JSON object with the results.
"""

from __future__ import annotations

import argparse
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
ATTR = "intensity"
CHUNK = 100.0
BIN = 25.0
LO, HI = 0.0, 1000.0
NDIM = 3


def generate(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The benchmark data: n float32 points uniform in [0, 1000)^3 and one float32 attribute."""
    rng = np.random.default_rng(seed)
    pos = rng.random((n, NDIM), dtype=np.float32) * np.float32(HI - LO) + np.float32(LO)
    attr = rng.random(n, dtype=np.float32)
    return pos, attr


# --------------------------------------------------------------------------- adapters


class Ours:
    name = "ours"

    def __init__(self, source: str | None = None) -> None:
        if source:
            # a snapshot of our package taken when the benchmark started (see bench_points.py)
            sys.path.insert(0, source)
        import zarr_vectors as zv

        if getattr(zv, "__version__", None) == REFERENCE_VERSION:
            raise SystemExit(f"--impl ours imported the reference package ({zv.__file__})")
        if source and not os.path.realpath(zv.__file__).startswith(os.path.realpath(source) + os.sep):
            raise SystemExit(f"--ours-source {source} given but imported {zv.__file__}")
        self.zv = zv

    def write(self, path: str, pos: np.ndarray, attr: np.ndarray, variant: str) -> None:
        self.zv.write_points(
            path,
            pos,
            chunk_shape=(CHUNK,) * NDIM,
            bin_shape=(BIN,) * NDIM,
            bounds=([LO] * NDIM, [HI] * NDIM),
            attributes={ATTR: attr},
            compression=variant,
        )

    def open(self, path: str) -> Any:
        return self.zv.open(path)

    def query(self, ds: Any, lo: list[float], hi: list[float]) -> tuple[np.ndarray, np.ndarray]:
        r = ds.query(bbox=(lo, hi))
        return np.asarray(r.positions), np.asarray(r.attributes[ATTR])

    def read_all(self, ds: Any) -> tuple[np.ndarray, np.ndarray]:
        r = ds.read()
        return np.asarray(r.positions), np.asarray(r.attributes[ATTR])


class Reference:
    """Reference zarr-vectors 0.9.2.

    variant "zstd": the public api (``create`` + ``Dataset.add_points``), which stores every
    array with zstd whatever ``Layout.compression`` says. variant "none": the lower-level
    ``zarr_vectors.types.points.write_points(..., compressor=None)``, whose per-chunk arrays
    are uncompressed. Reads always go through the public ``open(...).select(bbox=...).read()``.
    """

    name = "reference"

    def __init__(self) -> None:
        import zarr_vectors as zv

        if getattr(zv, "__version__", None) != REFERENCE_VERSION:
            raise SystemExit(
                f"--impl reference imported zarr_vectors {getattr(zv, '__version__', '?')} "
                f"from {zv.__file__}, not the reference {REFERENCE_VERSION}"
            )
        self.zv = zv

    def write(self, path: str, pos: np.ndarray, attr: np.ndarray, variant: str) -> None:
        zv = self.zv
        if variant == "zstd":
            schema = zv.Schema(
                ndim=NDIM,
                bounds=([LO] * NDIM, [HI] * NDIM),
                kind="point_cloud",
                position_dtype="float32",
                layout=zv.Layout(cell_size=(CHUNK,) * NDIM, subcells=int(CHUNK // BIN)),
            )
            ds = zv.create(path, schema=schema)
            ds.add_points(pos, attributes={ATTR: attr})
        elif variant == "none":
            from zarr_vectors.types.points import write_points

            write_points(
                path,
                pos,
                chunk_shape=(CHUNK,) * NDIM,
                bin_shape=(BIN,) * NDIM,
                bounds=([LO] * NDIM, [HI] * NDIM),
                vertex_attributes={ATTR: attr},
                dtype="float32",
                compressor=None,
            )
        else:
            raise SystemExit(f"reference has no variant {variant!r} (use zstd or none)")

    def open(self, path: str) -> Any:
        return self.zv.open(path)

    def query(self, ds: Any, lo: list[float], hi: list[float]) -> tuple[np.ndarray, np.ndarray]:
        r = ds.select(bbox=(lo, hi)).read()
        return self._unpack(r)

    def read_all(self, ds: Any) -> tuple[np.ndarray, np.ndarray]:
        return self._unpack(ds.select().read())

    @staticmethod
    def _unpack(r: Any) -> tuple[np.ndarray, np.ndarray]:
        pos = np.asarray(r.positions)
        if len(pos) == 0:
            return pos.reshape(0, NDIM), np.zeros(0, np.float32)
        return pos, np.asarray(r.attributes[ATTR])


_OURS_SOURCE: str | None = None


def adapter(name: str) -> Any:
    return Ours(_OURS_SOURCE) if name == "ours" else Reference()


# --------------------------------------------------------------------------- checks


def canonical(pos: np.ndarray, attr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    pos = np.asarray(pos, dtype=np.float32).reshape(-1, NDIM)
    attr = np.asarray(attr, dtype=np.float32).reshape(-1)
    if len(pos) == 0:
        return pos, attr
    order = np.lexsort((attr,) + tuple(pos[:, i] for i in reversed(range(NDIM))))
    return pos[order], attr[order]


def check(
    pos: np.ndarray,
    attr: np.ndarray,
    got_pos: np.ndarray,
    got_attr: np.ndarray,
    lo: list[float] | None,
    hi: list[float] | None,
) -> dict[str, Any]:
    """Compare a result with numpy brute force (``lo <= p <= hi`` on every axis)."""
    if lo is None:
        exp_pos, exp_attr = pos, attr
    else:
        mask = np.all((pos >= np.asarray(lo)) & (pos <= np.asarray(hi)), axis=1)
        exp_pos, exp_attr = pos[mask], attr[mask]
    out: dict[str, Any] = {"expected": int(len(exp_pos)), "got": int(len(got_pos))}
    ok = len(exp_pos) == len(got_pos) and len(got_attr) == len(got_pos)
    if ok:
        a_pos, a_attr = canonical(exp_pos, exp_attr)
        b_pos, b_attr = canonical(got_pos, got_attr)
        out["positions_equal"] = bool(np.array_equal(a_pos, b_pos))
        out["attributes_equal"] = bool(np.array_equal(a_attr, b_attr))
        ok = out["positions_equal"] and out["attributes_equal"]
    out["ok"] = bool(ok)
    return out


# --------------------------------------------------------------------------- tasks


def task_gen(args: argparse.Namespace) -> dict[str, Any]:
    adapter(args.impl)  # same imports as the write process
    pos, attr = generate(args.n, args.seed)
    return {"peak_rss_mib": peak_rss_mib(), "digest": digest(pos, attr)}


def task_write(args: argparse.Namespace) -> dict[str, Any]:
    impl = adapter(args.impl)
    pos, attr = generate(args.n, args.seed)
    t0 = time.perf_counter()
    impl.write(args.store, pos, attr, args.variant)
    t1 = time.perf_counter()
    return {"write_s": t1 - t0, "peak_rss_mib": peak_rss_mib(), "digest": digest(pos, attr)}


def task_query(args: argparse.Namespace) -> dict[str, Any]:
    impl = adapter(args.impl)
    pos, attr = generate(args.n, args.seed)
    boxes = load_json(args.boxes)
    out: dict[str, Any] = {}
    for label, blist in boxes.items():
        times, counts, bad, errors = [], [], 0, []
        for lo, hi in blist:
            ds = impl.open(args.store)
            t0 = time.perf_counter()
            got_pos, got_attr = impl.query(ds, lo, hi)
            t1 = time.perf_counter()
            times.append(t1 - t0)
            res = check(pos, attr, got_pos, got_attr, lo, hi)
            counts.append(res["got"])
            if not res["ok"]:
                bad += 1
                errors.append(res)
        out[label] = {"times_s": times, "counts": counts, "mismatches": bad, "mismatch_details": errors[:3]}
    ds = impl.open(args.store)
    t0 = time.perf_counter()
    got_pos, got_attr = impl.read_all(ds)
    t1 = time.perf_counter()
    res = check(pos, attr, got_pos, got_attr, None, None)
    out["full"] = {
        "time_s": t1 - t0,
        "count": res["got"],
        "mismatches": 0 if res["ok"] else 1,
        "mismatch_details": [] if res["ok"] else [res],
    }
    out["peak_rss_mib"] = peak_rss_mib()
    return out


def task_io(args: argparse.Namespace) -> dict[str, Any]:
    """Files opened and bytes read by one box query.

    Every file open in CPython (builtins.open / io.open / os.open / open_code, from any
    thread) raises the ``open`` audit event, so an audit hook sees all of them, including
    opens made inside zarr or fsspec. Bytes are reported two ways: the sizes of the store
    files opened (whole-file reads are what both implementations do on a local store), and
    the process's ``rchar`` from /proc/self/io (bytes returned by read syscalls, all threads).
    """
    impl = adapter(args.impl)
    boxes = load_json(args.boxes)
    lo, hi = boxes[args.io_label][args.io_index]
    store = os.path.realpath(args.store)
    phase = {"name": "setup"}
    events: list[tuple[str, str, str]] = []

    def hook(event: str, eargs: tuple) -> None:
        if event != "open":
            return
        path = eargs[0]
        if isinstance(path, int):
            return
        mode = eargs[1] if len(eargs) > 1 else None
        flags = eargs[2] if len(eargs) > 2 else 0
        writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
            isinstance(flags, int) and flags & (os.O_WRONLY | os.O_RDWR)
        )
        events.append((phase["name"], os.fsdecode(path), "w" if writing else "r"))

    # Warm the imports the query path may pull in lazily, so the counted query does not
    # also count module files (those would show up as "other" anyway).
    ds = impl.open(args.store)
    impl.query(ds, lo, hi)
    del ds

    sys.addaudithook(hook)
    phase["name"] = "open"
    r0 = rchar()
    ds = impl.open(args.store)
    r1 = rchar()
    phase["name"] = "query"
    got_pos, _ = impl.query(ds, lo, hi)
    r2 = rchar()
    phase["name"] = "done"

    def summarise(name: str, rchar: int | None) -> dict[str, Any]:
        meta = cells = other = 0
        meta_bytes = cell_bytes = 0
        arrays: dict[str, int] = {}
        for ph, path, mode in events:
            if ph != name:
                continue
            full = os.path.realpath(path)
            if full.startswith("/proc/"):
                continue  # our own /proc/self/io reads
            if not full.startswith(store + os.sep):
                other += 1
                continue
            rel = os.path.relpath(full, store)
            try:
                size = os.path.getsize(full)
            except OSError:
                size = 0
            base = os.path.basename(rel)
            if base in ("zarr.json", ".zarray", ".zgroup", ".zattrs", ".zmetadata"):
                meta += 1
                meta_bytes += size
            else:
                cells += 1
                cell_bytes += size
                # the array a chunk file belongs to: path up to the "c" chunk-key prefix
                parts = rel.split(os.sep)
                key = os.sep.join(parts[: parts.index("c")]) if "c" in parts else os.path.dirname(rel)
                arrays[key] = arrays.get(key, 0) + 1
        return {
            "metadata_files": meta,
            "metadata_bytes": meta_bytes,
            "cell_files": cells,
            "cell_bytes": cell_bytes,
            "store_file_bytes": meta_bytes + cell_bytes,
            "other_files": other,
            "rchar_bytes": rchar,
            "cell_files_by_array": arrays,
        }

    return {
        "box": [lo, hi],
        "rows": int(len(got_pos)),
        "open": summarise("open", None if r0 is None or r1 is None else r1 - r0),
        "query": summarise("query", None if r1 is None or r2 is None else r2 - r1),
        "method": "sys.addaudithook('open' events, all threads) + /proc/self/io rchar delta",
    }


def task_profile(args: argparse.Namespace) -> dict[str, Any]:
    import cProfile
    import io
    import pstats

    impl = adapter(args.impl)
    pos, attr = generate(args.n, args.seed)

    def top(prof: cProfile.Profile, key: str) -> str:
        buf = io.StringIO()
        st = pstats.Stats(prof, stream=buf)
        st.strip_dirs().sort_stats(key).print_stats(args.top)
        text = buf.getvalue()
        # keep the table only (drop the preamble up to the header line)
        idx = text.find("   ncalls")
        return text[idx:] if idx >= 0 else text

    out: dict[str, Any] = {}
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    impl.write(args.store, pos, attr, args.variant)
    prof.disable()
    out["write_wall_s_under_profiler"] = time.perf_counter() - t0
    out["write_tottime"] = top(prof, "tottime")
    out["write_cumtime"] = top(prof, "cumulative")

    boxes = load_json(args.boxes)[args.io_label]
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
    return out


TASKS = {"gen": task_gen, "write": task_write, "query": task_query, "io": task_io, "profile": task_profile}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--impl", choices=("ours", "reference"), required=True)
    p.add_argument("--task", choices=sorted(TASKS), required=True)
    p.add_argument("--variant", default="none", help="compression variant: none | zstd")
    p.add_argument("--n", type=int, required=True)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--store", default=None)
    p.add_argument("--boxes", default=None, help="JSON file {label: [[lo, hi], ...]}")
    p.add_argument("--io-label", default="q1")
    p.add_argument("--io-index", type=int, default=0)
    p.add_argument("--top", type=int, default=10)
    p.add_argument(
        "--ours-source", default=None, help="directory holding a copy of our zarr_vectors package to import"
    )
    args = p.parse_args()
    global _OURS_SOURCE
    _OURS_SOURCE = args.ours_source
    result = TASKS[args.task](args)
    result.update({"impl": args.impl, "task": args.task, "variant": args.variant, "python": sys.executable})
    return answer(result)


if __name__ == "__main__":
    sys.exit(main())
