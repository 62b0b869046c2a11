#!/usr/bin/env python
"""Box queries on points: ours against TileDB, Parquet (pyarrow) and DuckDB, and the floor.

The same float32 points (uniform in [0, 1000)^3, one float32 attribute ``intensity``, drawn
from ``numpy.random.default_rng(seed)``) go to every system in the same run:

* ``ours``: ``zv.write_points(chunk_shape=100, bin_shape=25, bounds=[0, 1000]^3)`` (1,000
  non-empty chunks), queried with ``Dataset.query(bbox=...)``; in the default layout (sharded),
  or one file per cell with ``ZV_BENCH_SHARDS=none`` in the environment (the ``floor`` reads
  either layout, the one ours was written in); with ``ZV_BENCH_CHUNK=auto``, the chunk shape
  is the writer's default (``chunk_shape="auto"``, no bins) and the floor reads that grid;
* ``tiledb``: a sparse array, Hilbert cell order, float32 dimensions x, y, z on [0, 1000]
  with tile extent 100, data-tile capacity N / 1,000 (one of our chunks' points), duplicates
  allowed; the compression filter on the coordinates and the attribute; queried with
  ``multi_index[lo:hi, ...]`` (inclusive, like ours);
* ``parquet``: one file, rows sorted by our chunk (C order of the 10^3 grid), one row group
  per chunk, column statistics on, no dictionary encoding; queried with
  ``fragment.to_table(filter=...)`` (pyarrow prunes row groups by their statistics, then
  filters rows);
* ``duckdb``: the same Parquet file through ``read_parquet`` with ``WHERE x >= .. AND x <= ..``
  on all three axes (object cache on, so the footer is parsed once);
* ``floor``: for each chunk of our store that the box intersects, read the vertex and
  ``intensity`` cells with the fewest bytes and calls and decode them (zstd via ``zstandard``,
  single-threaded, then the vlen-bytes frame), nothing else: no metadata, no filtering, no
  concatenation (the same definition as in earlier runs, so ratios to it stay comparable). In
  our default (sharded) layout every shard file is opened and its index decoded before the
  clock starts, so a cell is one look-up and one ``pread`` of exactly its bytes; one file per
  cell, a cell is its file read whole. Our query cannot do less work than this.

Compression ``zstd`` is level 5 everywhere (our default level); ``none`` is no compression.

Protocol: each write runs in a fresh process (data generated and the system's modules
imported before the clock starts). Then the parent reads every file of the store once (warm
page cache), and after the writes it flushes them to disk (``os.sync``) so that their
write-back does not slow the first system queried. Each query job runs in a fresh process
per (system, N, compression): open the store once (not timed), then for each
box one warm-up query and 7 timed ones (median), then the median over the boxes; the full
read is one warm-up and ``--full-reps`` timed reads (median). Every answer (the warm-up's)
is checked against numpy brute force ``lo <= p <= hi``: same row count and identical rows
after sorting; the floor's rows, filtered by the box, must equal brute force too.

Usage::

    python benchmarks/bench_peers.py                       # 1M and 10M, zstd and none
    python benchmarks/bench_peers.py --points 1M --compression zstd --boxes 3
    python benchmarks/bench_peers.py --points 10M --compression zstd --profile

The peers are optional benchmark dependencies (``pip install -e '.[bench]'``); a peer that
does not import is skipped with a message. Exit status 1 if any answer disagreed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _harness
import numpy as np
from _harness import fmt

REPO = _harness.REPO
EXTENT = 1000.0
CHUNK = 100.0
BIN = 25.0
ATTR = "intensity"
ZSTD_LEVEL = 5
SIDES = {"q1": 215.4, "q10": 464.2}
PEERS = ("tiledb", "parquet", "duckdb")
#: A shard index's offset (and size) for an empty inner chunk.
EMPTY_ENTRY = (1 << 64) - 1
SYSTEMS = ("ours", "ours-1t", "floor", *PEERS)  # ours-1t: our query with workers=1


log = _harness.make_log()


def generate(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    pos = rng.random((n, 3), dtype=np.float32) * np.float32(EXTENT)
    attr = rng.random(n, dtype=np.float32)
    return pos, attr


def boxes(seed: int, count: int) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """``count`` cubes per size, placed uniformly inside the volume; float32-exact corners."""
    rng = np.random.default_rng(seed + 1)
    out = []
    for name, side in SIDES.items():
        for _ in range(count):
            lo = rng.uniform(0, EXTENT - side, 3)
            out.append((name, lo.astype(np.float32), (lo + side).astype(np.float32)))
    return out


def canonical(pos: np.ndarray, attr: np.ndarray) -> np.ndarray:
    rows = np.concatenate(
        [np.asarray(pos, np.float32).reshape(-1, 3), np.asarray(attr, np.float32).reshape(-1, 1)], axis=1
    )
    order = np.lexsort(rows.T[::-1])
    return rows[order]


def store_path(work: str, system: str, n: int, comp: str) -> str:
    name = (
        "parquet" if system in ("parquet", "duckdb") else "ours" if system in ("floor", "ours-1t") else system
    )
    suffix = ".parquet" if name == "parquet" else ""
    return os.path.join(work, f"{name}-{n}-{comp}{suffix}")


# --------------------------------------------------------------------------- writers


def write_ours(path: str, pos: np.ndarray, attr: np.ndarray, comp: str) -> None:
    import zarr_vectors as zv

    auto = os.environ.get("ZV_BENCH_CHUNK") == "auto"
    zv.write_points(
        path,
        pos,
        chunk_shape="auto" if auto else (CHUNK,) * 3,
        bin_shape=None if auto else (BIN,) * 3,
        bounds=([0.0] * 3, [EXTENT] * 3),
        attributes={ATTR: attr},
        compression=comp,
        shards=None if os.environ.get("ZV_BENCH_SHARDS", "default") == "none" else "default",
    )


def write_tiledb(path: str, pos: np.ndarray, attr: np.ndarray, comp: str) -> None:
    import tiledb

    def filters() -> Any:
        return tiledb.FilterList([tiledb.ZstdFilter(level=ZSTD_LEVEL)] if comp == "zstd" else [])

    dims = [
        tiledb.Dim(name=a, domain=(0.0, EXTENT), tile=CHUNK, dtype=np.float32, filters=filters())
        for a in "xyz"
    ]
    schema = tiledb.ArraySchema(
        domain=tiledb.Domain(*dims),
        sparse=True,
        cell_order="hilbert",
        capacity=max(1, len(pos) // 1000),
        allows_duplicates=True,
        attrs=[tiledb.Attr(name=ATTR, dtype=np.float32, filters=filters())],
    )
    tiledb.Array.create(path, schema)
    with tiledb.open(path, "w") as arr:
        arr[pos[:, 0], pos[:, 1], pos[:, 2]] = {ATTR: attr}


def chunk_keys(pos: np.ndarray) -> np.ndarray:
    """Our chunk of each point as one C-order integer of the 10^3 grid."""
    idx = np.minimum((pos // np.float32(CHUNK)).astype(np.int64), int(EXTENT // CHUNK) - 1)
    side = int(EXTENT // CHUNK)
    return (idx[:, 0] * side + idx[:, 1]) * side + idx[:, 2]


def write_parquet(path: str, pos: np.ndarray, attr: np.ndarray, comp: str) -> None:
    """Rows sorted by chunk, one row group per chunk (the sort is part of the timed write)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    key = chunk_keys(pos)
    order = np.argsort(key, kind="stable")
    counts = np.bincount(key, minlength=int(EXTENT // CHUNK) ** 3)
    ends = np.cumsum(counts)
    table = pa.table(
        {"x": pos[order, 0], "y": pos[order, 1], "z": pos[order, 2], ATTR: attr[order]},
    )
    kw: dict[str, Any] = {"compression": "zstd", "compression_level": ZSTD_LEVEL} if comp == "zstd" else {}
    with pq.ParquetWriter(path, table.schema, use_dictionary=False, **({"compression": "none"} | kw)) as w:
        start = 0
        for end in ends[counts > 0]:
            w.write_table(table.slice(start, end - start), row_group_size=int(end - start))
            start = int(end)


WRITERS = {"ours": write_ours, "tiledb": write_tiledb, "parquet": write_parquet}


# --------------------------------------------------------------------------- readers


class Ours:
    def __init__(self, path: str) -> None:
        import zarr_vectors as zv

        if not os.path.realpath(zv.__file__).startswith(str(REPO) + os.sep):
            raise SystemExit(f"ours imported {zv.__file__}, not the checkout {REPO}")
        self.ds = zv.open(path)

    def query(self, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        r = self.ds.query(bbox=(lo.tolist(), hi.tolist()))
        return np.asarray(r.positions), np.asarray(r.attributes[ATTR])

    def read_all(self) -> tuple[np.ndarray, np.ndarray]:
        r = self.ds.read()
        return np.asarray(r.positions), np.asarray(r.attributes[ATTR])


class OursOneThread(Ours):
    """Our query on one thread (``workers=1``), to compare with the single-threaded floor."""

    def query(self, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        r = self.ds.query(bbox=(lo.tolist(), hi.tolist()), workers=1)
        return np.asarray(r.positions), np.asarray(r.attributes[ATTR])

    def read_all(self) -> tuple[np.ndarray, np.ndarray]:
        r = self.ds.query(workers=1)
        return np.asarray(r.positions), np.asarray(r.attributes[ATTR])


class Floor:
    """For each cell a box intersects: read the vertex and attribute cells with the fewest
    bytes and calls and decode them (no filtering, no concatenation: see :meth:`finish`).

    One file per cell: open, read and close each cell file. Sharded (our default): every shard
    file is opened and every shard index read and decoded when the floor is set up (not
    timed), so a query is, per cell, a look-up in the cached index and one ``pread`` of
    exactly the cell's bytes from the already-open shard file."""

    def __init__(self, path: str) -> None:
        import zstandard

        meta = json.loads(Path(path, "0", "vertices", "zarr.json").read_text())
        codecs = meta["codecs"]
        self.sharded = codecs[0]["name"] == "sharding_indexed"
        inner = codecs[0]["configuration"]["codecs"] if self.sharded else codecs
        names = [c["name"] for c in inner]
        if names not in (["vlen-bytes"], ["vlen-bytes", "zstd"]):
            raise SystemExit(f"floor: unexpected codecs {names} in {path}")
        self.zstd = names[-1] == "zstd"
        self.dctx = zstandard.ZstdDecompressor()
        self.grid = np.array(meta["shape"])
        root = json.loads(Path(path, "zarr.json").read_text())["attributes"]["zarr_vectors"]
        self.chunk = np.array(root["chunk_shape"], dtype=np.float64)
        self.origin = np.array(root["bounds"][0], dtype=np.float64)
        self.dirs = [f"{path}/0/vertices/c", f"{path}/0/vertex_attributes/{ATTR}/c"]
        self.fds: list[int] = []
        if self.sharded:
            conf = codecs[0]["configuration"]
            if conf.get("index_location", "end") != "end" or conf["chunk_shape"] != [1, 1, 1]:
                raise SystemExit("floor: expected one cell per inner chunk and the index at the end")
            self.per = np.array(meta["chunk_grid"]["configuration"]["chunk_shape"])
            self.n_inner = int(np.prod(self.per))
            self.index_bytes = 16 * self.n_inner + 4 * (len(conf["index_codecs"]) > 1)
            self.shards = [self._open_shards(d) for d in self.dirs]

    def _open_shards(self, folder: str) -> dict[tuple[int, ...], tuple[int, np.ndarray]]:
        """Every shard of an array: its open descriptor and its index as (n_inner, 2) uint64."""
        out = {}
        for dirpath, _, files in os.walk(folder):
            for name in files:
                full = os.path.join(dirpath, name)
                key = tuple(int(p) for p in os.path.relpath(full, folder).split(os.sep))
                fd = os.open(full, os.O_RDONLY)
                self.fds.append(fd)
                size = os.fstat(fd).st_size
                raw = os.pread(fd, self.index_bytes, size - self.index_bytes)
                out[key] = (fd, np.frombuffer(raw[: 16 * self.n_inner], "<u8").reshape(-1, 2))
        return out

    @staticmethod
    def read(path: str) -> bytes | None:
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            return None  # an empty chunk has no file
        try:
            return os.read(fd, os.fstat(fd).st_size)
        finally:
            os.close(fd)

    def read_cell(self, array: int, cell: tuple[int, int, int]) -> bytes | None:
        if not self.sharded:
            return self.read(f"{self.dirs[array]}/{cell[0]}/{cell[1]}/{cell[2]}")
        shard = (cell[0] // self.per[0], cell[1] // self.per[1], cell[2] // self.per[2])
        found = self.shards[array].get(shard)
        if found is None:
            return None
        fd, index = found
        within = ((cell[0] % self.per[0]) * self.per[1] + cell[1] % self.per[1]) * self.per[2] + cell[
            2
        ] % self.per[2]
        offset, nbytes = index[within]
        if offset == EMPTY_ENTRY:
            return None
        return os.pread(fd, int(nbytes), int(offset))

    def decode(self, raw: bytes, width: int) -> np.ndarray:
        data = self.dctx.decompress(raw) if self.zstd else raw
        items, length = np.frombuffer(data, "<u4", 2)
        if items != 1 or length != len(data) - 8:
            raise SystemExit("floor: a cell is not one vlen-bytes item")
        return np.frombuffer(data, "<f4", offset=8).reshape(-1, width)

    def cells(self, lo: np.ndarray, hi: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        first = np.clip(np.floor((lo - self.origin) / self.chunk).astype(int), 0, self.grid - 1)
        last = np.clip(np.floor((hi - self.origin) / self.chunk).astype(int), 0, self.grid - 1)
        out = []
        for i in range(first[0], last[0] + 1):
            for j in range(first[1], last[1] + 1):
                for k in range(first[2], last[2] + 1):
                    raw = self.read_cell(0, (i, j, k))
                    if raw is not None:
                        araw = self.read_cell(1, (i, j, k))
                        out.append((self.decode(raw, 3), self.decode(araw, 1)))  # type: ignore[arg-type]
        return out

    def query(self, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self.cells(lo, hi)  # type: ignore[return-value]  # unfiltered: see finish()

    @staticmethod
    def finish(cells: Any, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Concatenate and filter the cells (outside the clock) so the floor can be checked."""
        pos = np.concatenate([c[0] for c in cells]) if cells else np.zeros((0, 3), np.float32)
        attr = np.concatenate([c[1][:, 0] for c in cells]) if cells else np.zeros(0, np.float32)
        keep = np.all((pos >= lo) & (pos <= hi), axis=1)
        return pos[keep], attr[keep]

    def read_all(self) -> tuple[np.ndarray, np.ndarray]:
        return self.cells(np.zeros(3), np.full(3, EXTENT))  # type: ignore[return-value]


class TileDB:
    def __init__(self, path: str) -> None:
        import tiledb

        self.arr = tiledb.open(path, "r")

    def _unpack(self, d: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        return np.stack([d["x"], d["y"], d["z"]], axis=1), d[ATTR]

    def query(self, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        lo, hi = lo.tolist(), hi.tolist()
        return self._unpack(self.arr.multi_index[lo[0] : hi[0], lo[1] : hi[1], lo[2] : hi[2]])

    def read_all(self) -> tuple[np.ndarray, np.ndarray]:
        return self._unpack(self.arr[:])


class Parquet:
    def __init__(self, path: str) -> None:
        import pyarrow.compute as pc
        import pyarrow.dataset as pads

        self.pc = pc
        self.frag = next(iter(pads.dataset(path, format="parquet").get_fragments()))
        self.frag.ensure_complete_metadata()  # row-group statistics parsed once, at open

    @staticmethod
    def _unpack(t: Any) -> tuple[np.ndarray, np.ndarray]:
        cols = [t.column(c).to_numpy() for c in ("x", "y", "z")]
        return np.stack(cols, axis=1), t.column(ATTR).to_numpy()

    def query(self, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        f = self.pc.field
        expr = None
        for a, lo_a, hi_a in zip("xyz", lo.tolist(), hi.tolist(), strict=True):
            term = (f(a) >= lo_a) & (f(a) <= hi_a)
            expr = term if expr is None else expr & term
        return self._unpack(self.frag.to_table(filter=expr))

    def read_all(self) -> tuple[np.ndarray, np.ndarray]:
        return self._unpack(self.frag.to_table())


class DuckDB:
    def __init__(self, path: str) -> None:
        import duckdb

        self.con = duckdb.connect()
        for setting in ("enable_object_cache", "parquet_metadata_cache"):
            try:
                self.con.execute(f"SET {setting} = true")
            except duckdb.Error:
                pass
        self.con.execute(f"CREATE VIEW pts AS SELECT * FROM read_parquet('{path}')")

    def _run(self, sql: str) -> tuple[np.ndarray, np.ndarray]:
        d = self.con.execute(sql).fetchnumpy()
        return np.stack([np.asarray(d[a]) for a in "xyz"], axis=1), np.asarray(d[ATTR])

    def query(self, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        terms = [
            f"{a} >= {float(lo_a)!r}::FLOAT AND {a} <= {float(hi_a)!r}::FLOAT"
            for a, lo_a, hi_a in zip("xyz", lo.tolist(), hi.tolist(), strict=True)
        ]
        return self._run(f"SELECT x, y, z, {ATTR} FROM pts WHERE " + " AND ".join(terms))

    def read_all(self) -> tuple[np.ndarray, np.ndarray]:
        return self._run(f"SELECT x, y, z, {ATTR} FROM pts")


READERS = {
    "ours": Ours,
    "ours-1t": OursOneThread,
    "floor": Floor,
    "tiledb": TileDB,
    "parquet": Parquet,
    "duckdb": DuckDB,
}


# --------------------------------------------------------------------------- child tasks


def timed(fn: Any, reps: int) -> tuple[Any, float]:
    """One warm-up call (its result is returned for checking), then the median of ``reps``."""
    result = fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return result, statistics.median(times)


#: The modules each writer imports, loaded before its clock starts (an import is paid once per
#: process, not per write; ``zarr_vectors`` takes about a second, most of it zarr's).
WRITER_MODULES = {"ours": ("zarr_vectors",), "tiledb": ("tiledb",), "parquet": ("pyarrow", "pyarrow.parquet")}


def task_write(job: dict[str, Any]) -> dict[str, Any]:
    pos, attr = generate(job["n"], job["seed"])
    for module in WRITER_MODULES[job["system"]]:
        __import__(module)
    t0 = time.perf_counter()
    WRITERS[job["system"]](job["path"], pos, attr, job["comp"])
    return {"write_s": time.perf_counter() - t0}


def task_query(job: dict[str, Any]) -> dict[str, Any]:
    system = job["system"]
    pos, attr = generate(job["n"], job["seed"])
    reader = READERS[system](job["path"])
    out: dict[str, Any] = {"mismatches": 0, "rows": {}}
    per: dict[str, list[float]] = {k: [] for k in SIDES}
    for name, lo, hi in boxes(job["seed"], job["boxes"]):
        result, t = timed(lambda lo=lo, hi=hi: reader.query(lo, hi), job["reps"])
        per[name].append(t * 1e3)
        if system == "floor":
            result = Floor.finish(result, lo, hi)
        keep = np.all((pos >= lo) & (pos <= hi), axis=1)
        got = canonical(*result)
        want = canonical(pos[keep], attr[keep])
        out["rows"].setdefault(name, []).append(int(keep.sum()))
        if got.shape != want.shape or not np.array_equal(got, want):
            out["mismatches"] += 1
            log(f"  MISMATCH {system} {name} box {lo}-{hi}: {len(got)} rows, brute force {len(want)}")
    for name, values in per.items():
        out[f"{name}_ms"] = statistics.median(values)
        out[f"{name}_ms_per_box"] = [round(v, 3) for v in values]
    result, t = timed(reader.read_all, job["full_reps"])
    out["full_ms"] = t * 1e3
    if system == "floor":
        result = Floor.finish(result, np.zeros(3), np.full(3, EXTENT))
    if not np.array_equal(canonical(*result), canonical(pos, attr)):
        out["mismatches"] += 1
        log(f"  MISMATCH {system} full read: {len(result[0])} rows of {len(pos)}")
    return out


def task_profile(job: dict[str, Any]) -> dict[str, Any]:
    """cProfile of our 1 % box queries (after one warm-up each), top entries as text."""
    import cProfile
    import io
    import pstats

    reader = Ours(job["path"])
    sel = [(lo, hi) for name, lo, hi in boxes(job["seed"], job["boxes"]) if name == "q1"]
    for lo, hi in sel:
        reader.query(lo, hi)
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(job["reps"]):
        for lo, hi in sel:
            reader.query(lo, hi)
    prof.disable()
    calls = job["reps"] * len(sel)
    text = []
    for key in ("cumulative", "tottime"):
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats(key).print_stats(25)
        text.append(f"--- our 1 % box, {calls} queries, sorted by {key} (divide by {calls} per query)\n")
        text.append(buf.getvalue())
    return {"calls": calls, "text": "".join(text)}


def child_main(job: dict[str, Any]) -> None:
    task = {"write": task_write, "query": task_query, "profile": task_profile}[job["task"]]
    print(json.dumps(task(job)))


# --------------------------------------------------------------------------- parent


def run_child(job: dict[str, Any]) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=f"{REPO}{os.pathsep}{REPO / 'codecs'}")
    what = f"{job['task']} {job['system']}"
    out, err = _harness.run_job(
        sys.executable, __file__, job, isolated=False, what=what, env=env, cwd=REPO, tail=40
    )
    if err.strip():
        log(err.rstrip())
    return out


def store_bytes(path: str) -> tuple[int, int, int]:
    """(file bytes, allocated bytes, files) of a file or directory; reads every file once."""
    paths = [Path(path)] if os.path.isfile(path) else [p for p in Path(path).rglob("*") if p.is_file()]
    size = alloc = 0
    for p in paths:
        st = p.stat()
        size += st.st_size
        alloc += st.st_blocks * 512
        with open(p, "rb") as fh:  # warm the page cache
            while fh.read(1 << 22):
                pass
    return size, alloc, len(paths)


def parse_n(text: str) -> int:
    text = text.strip().upper()
    scale = {"K": 1_000, "M": 1_000_000, "G": 1_000_000_000}.get(text[-1:], 1)
    return int(float(text.rstrip("KMG")) * scale)


def available(systems: list[str]) -> list[str]:
    mods = {"tiledb": "tiledb", "parquet": "pyarrow.parquet", "duckdb": "duckdb", "floor": "zstandard"}
    ok = []
    for s in systems:
        try:
            if s in mods:
                __import__(mods[s])
            ok.append(s)
        except ImportError:
            log(f"skipping {s}: {mods[s]} does not import (pip install -e '.[bench]')")
    return ok


def table(rows: list[dict[str, Any]]) -> str:
    head = (
        f"{'system':8} {'N':>6} {'comp':5} {'write s':>8} {'size MB':>8} {'files':>6} "
        f"{'1% ms':>8} {'10% ms':>8} {'full ms':>9} {'floor1 ms':>9} {'floor10 ms':>10} "
        f"{'/floor 1%':>9} {'/floor 10%':>10} {'ours/this 1%':>12} {'ours/this 10%':>13} {'ok':>3}"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r['system']:8} {r['n_label']:>6} {r['comp']:5} {fmt(r.get('write_s'), '8.2f')} "
            f"{fmt(r.get('size_mb'), '8.1f')} {fmt(r.get('files'), '6d')} "
            f"{fmt(r.get('q1_ms'), '8.2f')} {fmt(r.get('q10_ms'), '8.2f')} {fmt(r.get('full_ms'), '9.1f')} "
            f"{fmt(r.get('floor_q1_ms'), '9.2f')} {fmt(r.get('floor_q10_ms'), '10.2f')} "
            f"{fmt(r.get('over_floor_q1'), '9.2f')} {fmt(r.get('over_floor_q10'), '10.2f')} "
            f"{fmt(r.get('ours_over_this_q1'), '12.2f')} {fmt(r.get('ours_over_this_q10'), '13.2f')} "
            f"{'yes' if r.get('mismatches') == 0 else 'NO':>3}"
        )
    return "\n".join(lines)


def summary(rows: list[dict[str, Any]]) -> str:
    """Per (N, comp): ours / floor and best peer / ours, for each figure."""
    out = []
    keys = sorted({(r["n"], r["comp"]) for r in rows})
    for n, comp in keys:
        group = {r["system"]: r for r in rows if (r["n"], r["comp"]) == (n, comp)}
        ours = group.get("ours")
        if ours is None:
            continue
        parts = [f"N={ours['n_label']} {comp}:"]
        if "floor" in group:
            parts.append(
                f"ours/floor 1% {ours['q1_ms'] / group['floor']['q1_ms']:.2f}x, "
                f"10% {ours['q10_ms'] / group['floor']['q10_ms']:.2f}x;"
            )
        for fig, label in (("q1_ms", "1%"), ("q10_ms", "10%"), ("full_ms", "full"), ("write_s", "write")):
            peers = [(group[p][fig], p) for p in PEERS if p in group and group[p].get(fig) is not None]
            if peers and ours.get(fig):
                best, who = min(peers)
                parts.append(f"best-peer/ours {label} {best / ours[fig]:.2f} ({who});")
        sizes = [(group[p]["size_mb"], p) for p in ("tiledb", "parquet") if p in group]
        if sizes:
            best, who = min(sizes)
            parts.append(f"smallest peer/ours size {best / ours['size_mb']:.2f} ({who})")
        out.append(" ".join(parts))
    return "\n".join(out)


def bench(args: argparse.Namespace, work: str, systems: list[str]) -> tuple[list[dict[str, Any]], int]:
    rows: list[dict[str, Any]] = []
    bad = 0
    for label in args.points.split(","):
        n = parse_n(label)
        need = 4 * 16 * n * 1.3  # ours, tiledb, parquet of one compression, with slack
        free = shutil.disk_usage(work).free
        if need > free:
            log(f"skipping N={label}: needs ~{need / 2**30:.1f} GiB, {free / 2**30:.1f} GiB free")
            continue
        for comp in args.compression.split(","):
            base = {"n": n, "seed": args.seed, "comp": comp}
            written: dict[str, dict[str, Any]] = {}
            to_write = ["ours"] + [s for s in ("tiledb", "parquet") if s in systems]
            if "duckdb" in systems and "parquet" not in systems:
                to_write.append("parquet")
            for system in to_write:
                path = store_path(work, system, n, comp)
                log(f"N={label} {comp}: write {system}")
                res = run_child(base | {"task": "write", "system": system, "path": path})
                size, alloc, files = store_bytes(path)
                written[system] = res | {"size_mb": size / 1e6, "alloc_mb": alloc / 1e6, "files": files}
            os.sync()  # no write-back of the stores just written competes with the first queries
            for system in systems:
                path = store_path(work, system, n, comp)
                log(f"N={label} {comp}: query {system}")
                reps = {"task": "query", "boxes": args.boxes, "reps": args.reps, "full_reps": args.full_reps}
                res = run_child(base | reps | {"system": system, "path": path})
                store = written[
                    "ours" if system in ("floor", "ours-1t") else "parquet" if system == "duckdb" else system
                ]
                row = {"system": system, "n_label": label, **base, **res}
                row["size_mb"], row["alloc_mb"], row["files"] = (
                    store["size_mb"],
                    store["alloc_mb"],
                    store["files"],
                )
                row["write_s"] = store["write_s"] if system in WRITERS else None
                bad += res["mismatches"]
                rows.append(row)
                log(f"  {json.dumps(row)}")  # each row as it comes: a long run stopped early keeps them
            if args.profile:
                log(f"N={label} {comp}: profile ours")
                prof = run_child(
                    base
                    | {
                        "task": "profile",
                        "system": "ours",
                        "boxes": args.boxes,
                        "reps": args.reps,
                        "path": store_path(work, "ours", n, comp),
                    }
                )
                print(prof["text"])
            for system in to_write:
                path = store_path(work, system, n, comp)
                if not args.keep:
                    shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)
    for r in rows:
        group = {g["system"]: g for g in rows if (g["n"], g["comp"]) == (r["n"], r["comp"])}
        if "floor" in group:
            r["floor_q1_ms"], r["floor_q10_ms"] = group["floor"]["q1_ms"], group["floor"]["q10_ms"]
            r["over_floor_q1"] = r["q1_ms"] / r["floor_q1_ms"]
            r["over_floor_q10"] = r["q10_ms"] / r["floor_q10_ms"]
        if "ours" in group:
            r["ours_over_this_q1"] = group["ours"]["q1_ms"] / r["q1_ms"]
            r["ours_over_this_q10"] = group["ours"]["q10_ms"] / r["q10_ms"]
    return rows, bad


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--points", default="1M,10M", help="comma-separated N (1M, 10M, 100M)")
    p.add_argument("--compression", default="zstd,none")
    p.add_argument("--systems", default=",".join(SYSTEMS))
    p.add_argument("--boxes", type=int, default=5, help="boxes per size (1 %% and 10 %%)")
    p.add_argument("--reps", type=int, default=7, help="timed repetitions per box, after 1 warm-up")
    p.add_argument("--full-reps", type=int, default=3, help="timed full reads, after 1 warm-up")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--profile", action="store_true", help="cProfile of our 1 %% boxes per (N, comp)")
    p.add_argument("--workdir")
    p.add_argument("--keep", action="store_true")
    p.add_argument("--json-out")
    args = p.parse_args()
    if args.child:
        child_main(json.loads(args.child))
        return 0
    systems = available(args.systems.split(","))
    if "ours" not in systems:
        systems.insert(0, "ours")
    work = args.workdir or tempfile.mkdtemp(prefix="bench-peers-")
    os.makedirs(work, exist_ok=True)
    rows, bad = bench(args, work, systems)
    versions = {}
    for mod in ("numpy", "tiledb", "pyarrow", "duckdb", "zstandard", "zarr"):
        try:
            versions[mod] = __import__(mod).__version__
        except ImportError:
            versions[mod] = None
    print(json.dumps({"versions": versions, "cpus": os.cpu_count(), "load": os.getloadavg()}))
    for r in rows:
        print(json.dumps(r))
    print()
    print(table(rows))
    print()
    print(summary(rows))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({"versions": versions, "rows": rows}, indent=1))
    if not args.keep and not args.workdir:
        shutil.rmtree(work, ignore_errors=True)
    if bad:
        log(f"{bad} answers disagreed with brute force")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
