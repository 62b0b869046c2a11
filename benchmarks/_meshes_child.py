#!/usr/bin/env python
"""One measured task of the mesh benchmark, run in a fresh process.

``bench_meshes.py`` starts this file with OUR venv's python (``--impl ours``) or with the
REFERENCE venv's python (``--impl reference``). Both packages import as ``zarr_vectors``,
so the adapter checks which one it got first. Children run with ``python -I``; the few
generic helpers shared with the polylines child (peak RSS, digest, rchar) are imported
from ``_lines_child.py`` by path.

Tasks (``--task``):
  gen      import the library, make the icosphere, report peak RSS (baseline for ``write``)
  write    the same, then time the write call only (wall and CPU), report peak RSS
  query    time the 1 % box queries (open excluded), ours also with ``faces="touching"``,
           then one full read; afterwards compare every result with numpy brute force
  io       files opened and bytes read by ONE 1 % box query (audit hook + /proc/self/io)
  profile  cProfile of our write and of the 1 % box queries (text)

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
CHUNK = 100.0
LO, HI = 0.0, 1000.0
NDIM = 3
RADIUS, CENTRE = 499.0, 500.0
BITS, LEVEL = 11, 7
FALLBACK_BOUND = 1e-3 * CHUNK  # used only if zarr_vectors_draco has no quantization_bound


def generate(subdivisions: int) -> tuple[np.ndarray, np.ndarray]:
    """``trimesh.creation.icosphere(subdivisions)`` scaled by 499 and offset by 500.

    The unit sphere is scaled in float64 and then rounded to float32 (what both libraries
    store); faces are int64. Every vertex lies in [1, 999]^3.
    """
    import trimesh

    m = trimesh.creation.icosphere(subdivisions=subdivisions)
    verts = (np.asarray(m.vertices, dtype=np.float64) * RADIUS + CENTRE).astype(np.float32)
    return verts, np.ascontiguousarray(np.asarray(m.faces, dtype=np.int64))


def split_variant(variant: str) -> tuple[str, str]:
    """``"raw-none"`` -> ``("raw", "none")``: encoding and compression of the other arrays."""
    enc, _, comp = variant.partition("-")
    if enc not in ("raw", "draco") or comp not in ("none", "zstd"):
        raise SystemExit(f"unknown variant {variant!r} (raw|draco)-(none|zstd)")
    return enc, comp


# --------------------------------------------------------------------------- adapters
#
# query() and read_all() return (positions (N, 3) float32, faces (F, 3) int64).


class Ours:
    name = "ours"

    def __init__(self, source: str | None = None) -> None:
        if source:
            sys.path.insert(0, source)  # snapshot of our packages taken by bench_meshes.py
        import zarr_vectors as zv

        if getattr(zv, "__version__", None) == REFERENCE_VERSION:
            raise SystemExit(f"--impl ours imported the reference package ({zv.__file__})")
        if source and not os.path.realpath(zv.__file__).startswith(os.path.realpath(source) + os.sep):
            raise SystemExit(f"--ours-source {source} given but imported {zv.__file__}")
        self.zv = zv
        self.source = source

    def check_draco_source(self) -> None:
        """The Draco codec package must come from the same snapshot as the library."""
        import zarr_vectors_draco as zd

        inside = os.path.realpath(zd.__file__).startswith(os.path.realpath(self.source or "") + os.sep)
        if self.source and not inside:
            raise SystemExit(f"--ours-source {self.source} given but imported {zd.__file__}")

    def write(self, path: str, verts: np.ndarray, faces: np.ndarray, variant: str) -> None:
        enc, comp = split_variant(variant)
        if enc == "draco":
            self.check_draco_source()
        self.zv.write_mesh(
            path,
            verts,
            faces,
            chunk_shape=CHUNK,
            encoding=enc,
            quantization_bits=BITS,
            compression_level=LEVEL,
            bounds=([LO] * NDIM, [HI] * NDIM),
            compression=comp,
        )

    def open(self, path: str) -> Any:
        return self.zv.open(path)

    def query(self, ds: Any, lo: list[float], hi: list[float]) -> Any:
        return ds.query(bbox=(lo, hi))

    def query_touching(self, ds: Any, lo: list[float], hi: list[float]) -> Any:
        return ds.query(bbox=(lo, hi), faces="touching")

    def read_all(self, ds: Any) -> Any:
        return ds.read()

    @staticmethod
    def unpack(r: Any) -> tuple[np.ndarray, np.ndarray]:
        return (np.asarray(r.positions).reshape(-1, NDIM), np.asarray(r.faces, dtype=np.int64).reshape(-1, 3))


class Reference:
    """Reference zarr-vectors 0.9.2.

    raw-zstd: public api ``create(Schema(kind="mesh", Layout(cell_size=100)))`` +
    ``Dataset.add_mesh`` (zstd on every array). raw-none / draco-none: the lower-level
    ``zarr_vectors.types.meshes.write_mesh(..., encoding=..., compressor=None)``.
    Reads: public ``open(path).select(bbox=...).read()``; its Draco stores are write-only.
    """

    name = "reference"

    def __init__(self) -> None:
        import zarr_vectors as zv

        if getattr(zv, "__version__", None) != REFERENCE_VERSION:
            raise SystemExit(
                f"--impl reference imported zarr_vectors {getattr(zv, '__version__', '?')} from {zv.__file__}"
            )
        self.zv = zv

    def write(self, path: str, verts: np.ndarray, faces: np.ndarray, variant: str) -> None:
        enc, comp = split_variant(variant)
        zv = self.zv
        if enc == "raw" and comp == "zstd":
            schema = zv.Schema(
                ndim=NDIM,
                bounds=([LO] * NDIM, [HI] * NDIM),
                kind="mesh",
                position_dtype="float32",
                layout=zv.Layout(cell_size=(CHUNK,) * NDIM),
            )
            zv.create(path, schema=schema).add_mesh(verts, faces)
            return
        if comp != "none":
            raise SystemExit(f"reference variant {variant!r}: use raw-zstd, raw-none or draco-none")
        from zarr_vectors.types.meshes import write_mesh

        extra = {"draco_quantization_bits": BITS} if enc == "draco" else {}
        write_mesh(
            path,
            verts,
            faces,
            chunk_shape=(CHUNK,) * NDIM,
            bounds=([LO] * NDIM, [HI] * NDIM),
            encoding=enc,
            dtype="float32",
            compressor=None,
            **extra,
        )

    def open(self, path: str) -> Any:
        return self.zv.open(path)

    def query(self, ds: Any, lo: list[float], hi: list[float]) -> Any:
        return ds.select(bbox=(lo, hi)).read()

    query_touching = None

    def read_all(self, ds: Any) -> Any:
        return ds.select().read()

    @staticmethod
    def unpack(r: Any) -> tuple[np.ndarray, np.ndarray]:
        faces = np.zeros((0, 3), np.int64) if r.faces is None else np.asarray(r.faces, np.int64)
        return np.asarray(r.positions).reshape(-1, NDIM), faces.reshape(-1, 3)


_OURS_SOURCE: str | None = None


def adapter(name: str) -> Any:
    return Ours(_OURS_SOURCE) if name == "ours" else Reference()


# --------------------------------------------------------------------------- brute force


def _void_rows(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a, dtype=np.float32)
    return a.view(np.dtype((np.void, a.dtype.itemsize * NDIM))).ravel()


def canonical_faces(faces: np.ndarray) -> np.ndarray:
    """Triangles rotated to start at their smallest index (winding kept), rows sorted."""
    f = np.asarray(faces, np.int64).reshape(-1, 3)
    if len(f) == 0:
        return f
    start = np.argmin(f, axis=1)
    rot = f[np.arange(len(f))[:, None], (start[:, None] + np.arange(3)) % 3]
    return rot[np.lexsort((rot[:, 2], rot[:, 1], rot[:, 0]))]


class Truth:
    """The input mesh, vertex lookup by position, and per-vertex Draco error bounds."""

    def __init__(self, verts: np.ndarray, faces: np.ndarray, draco: bool) -> None:
        self.verts = verts
        self.faces = faces
        keys = _void_rows(verts)
        self.order = np.argsort(keys, kind="stable")
        self.sorted_keys = keys[self.order]
        if np.any(self.sorted_keys[1:] == self.sorted_keys[:-1]):
            raise SystemExit("input vertices are not distinct; the exact vertex match needs them to be")
        self.bound = self._bounds() if draco else None
        self.decoded: np.ndarray | None = None  # Draco: decoded position of every input vertex

    def _bounds(self) -> np.ndarray:
        """Per input vertex: ``quantization_bound`` of the input vertices of its chunk."""
        try:
            from zarr_vectors_draco import quantization_bound
        except ImportError:
            return np.full(len(self.verts), FALLBACK_BOUND)
        cell = np.clip(np.floor(self.verts / CHUNK).astype(np.int64), 0, int((HI - LO) / CHUNK) - 1)
        flat = np.ravel_multi_index(cell.T, (int((HI - LO) / CHUNK),) * NDIM)
        uniq, inv = np.unique(flat, return_inverse=True)
        per_cell = np.array([quantization_bound(self.verts[inv == k], BITS) for k in range(len(uniq))])
        return per_cell[inv]

    def match_exact(self, pos: np.ndarray) -> np.ndarray:
        """Input index of every row of ``pos`` (bit-identical position), -1 when none."""
        q = _void_rows(pos)
        i = np.searchsorted(self.sorted_keys, q)
        i = np.minimum(i, len(self.sorted_keys) - 1)
        return np.where(self.sorted_keys[i] == q, self.order[i], -1)

    def match_within_bound(self, pos: np.ndarray) -> tuple[np.ndarray, float]:
        """Input index of every decoded row: the nearest input vertex, accepted when every
        axis is within that vertex's bound (-1 otherwise); also max |error| / bound."""
        assert self.bound is not None
        g = 2.0 * float(self.bound.max())  # cell >= bound: the match lies in a neighbouring cell
        n_axis = int(np.ceil((HI - LO) / g)) + 4

        def key(c: np.ndarray) -> np.ndarray:
            c = c + 2
            return (c[:, 0] * n_axis + c[:, 1]) * n_axis + c[:, 2]

        vkey = key(np.floor((self.verts.astype(np.float64) - LO) / g).astype(np.int64))
        vorder = np.argsort(vkey, kind="stable")
        vsorted = vkey[vorder]
        qcell = np.floor((pos.astype(np.float64) - LO) / g).astype(np.int64)
        best = np.full(len(pos), -1, np.int64)
        best_d = np.full(len(pos), np.inf)
        offsets = np.stack(np.meshgrid(*[np.arange(-1, 2)] * NDIM, indexing="ij"), -1).reshape(-1, NDIM)
        for off in offsets:
            k = key(qcell + off)
            a, b = np.searchsorted(vsorted, k, "left"), np.searchsorted(vsorted, k, "right")
            for j in range(int((b - a).max()) if len(k) else 0):
                has = a + j < b
                cand = vorder[np.minimum(a + j, len(vorder) - 1)]
                d = np.where(has, np.linalg.norm(self.verts[cand].astype(np.float64) - pos, axis=1), np.inf)
                better = d < best_d
                best[better], best_d[better] = cand[better], d[better]
        ok = best >= 0
        err = np.zeros(len(pos))
        err[ok] = np.abs(pos[ok].astype(np.float64) - self.verts[best[ok]]).max(axis=1) / self.bound[best[ok]]
        best[ok & (err > 1.0)] = -1
        return best, float(err.max()) if len(err) else 0.0

    def positions(self) -> np.ndarray:
        """What a correct store returns for each input vertex (decoded positions for Draco)."""
        return self.verts if self.decoded is None else self.decoded

    def inside(self, lo: list[float], hi: list[float], pos: np.ndarray | None = None) -> np.ndarray:
        p = self.positions() if pos is None else pos
        return np.all((p >= np.asarray(lo, np.float32)) & (p <= np.asarray(hi, np.float32)), axis=1)


def compare(
    truth: Truth,
    got: tuple[np.ndarray, np.ndarray],
    want_vertices: np.ndarray,
    want_faces: np.ndarray,
    draco: bool,
) -> dict[str, Any]:
    """A result against the expected input vertex set and input faces (winding-aware)."""
    pos, faces = got
    out: dict[str, Any] = {
        "expected_vertices": int(want_vertices.sum()),
        "got_vertices": int(len(pos)),
        "expected_faces": int(len(want_faces)),
        "got_faces": int(len(faces)),
    }
    if draco:
        idx, worst = truth.match_within_bound(pos)
        out["max_error_over_bound"] = worst
    else:
        idx = truth.match_exact(pos)
    unmatched = int((idx < 0).sum())
    matched = idx[idx >= 0]
    got_mask = np.zeros(len(truth.verts), bool)
    got_mask[matched] = True
    out["unmatched_vertices"] = unmatched
    out["duplicate_vertices"] = int(len(matched) - got_mask.sum())
    out["missing_vertices"] = int((want_vertices & ~got_mask).sum())
    out["extra_vertices"] = int((got_mask & ~want_vertices).sum())
    if draco and truth.decoded is not None and not unmatched:
        out["positions_differ_from_full_read"] = int(np.any(pos != truth.decoded[idx], axis=1).sum())
    vertices_ok = (
        unmatched == 0
        and out["duplicate_vertices"] == 0
        and not out["missing_vertices"]
        and not out["extra_vertices"]
        and not out.get("positions_differ_from_full_read", 0)
    )
    bad_face_index = bool(len(faces)) and (faces.min() < 0 or faces.max() >= len(pos))
    if bad_face_index or unmatched:
        faces_ok = False
        out["faces_not_compared"] = "face index out of range" if bad_face_index else "unmatched vertices"
    else:
        faces_ok = bool(np.array_equal(canonical_faces(idx[faces]), canonical_faces(want_faces)))
        if not faces_ok:
            flipped = canonical_faces(idx[faces][:, ::-1])
            out["faces_flipped"] = int(len(_common(flipped, canonical_faces(want_faces))))
    out["vertices_ok"], out["faces_ok"] = bool(vertices_ok), faces_ok
    out["ok"] = bool(vertices_ok and faces_ok)
    return out


def _common(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Rows of sorted face array ``a`` that also occur in ``b``."""
    if len(a) == 0 or len(b) == 0:
        return a[:0]
    ka = a.view(np.dtype((np.void, 24))).ravel()
    kb = b.view(np.dtype((np.void, 24))).ravel()
    return a[np.isin(ka, kb)]


def expected_box(
    truth: Truth, lo: list[float], hi: list[float], touching: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Brute force: vertices inside and the faces with all (or, touching, any) vertices inside;
    touching also returns every vertex of those faces."""
    inside = truth.inside(lo, hi)
    hit = inside[truth.faces]
    keep = hit.any(axis=1) if touching else hit.all(axis=1)
    faces = truth.faces[keep]
    verts = inside.copy()
    verts[faces.ravel()] = True
    return verts, faces


# --------------------------------------------------------------------------- tasks


def task_gen(args: argparse.Namespace) -> dict[str, Any]:
    adapter(args.impl)  # same imports as the write process
    verts, faces = generate(args.subdivisions)
    return {
        "peak_rss_mib": peak_rss_mib(),
        "digest": digest(verts, faces),
        "vertices": int(len(verts)),
        "faces": int(len(faces)),
    }


def task_write(args: argparse.Namespace) -> dict[str, Any]:
    impl = adapter(args.impl)
    verts, faces = generate(args.subdivisions)
    c0 = os.times()
    t0 = time.perf_counter()
    impl.write(args.store, verts, faces, args.variant)
    t1 = time.perf_counter()
    c1 = os.times()
    return {
        "write_s": t1 - t0,
        "write_cpu_s": (c1.user - c0.user) + (c1.system - c0.system),
        "write_sys_s": c1.system - c0.system,
        "peak_rss_mib": peak_rss_mib(),
        "digest": digest(verts, faces),
        "vertices": int(len(verts)),
        "faces": int(len(faces)),
    }


def _timed(fn: Any, impl: Any, store: str, boxes: list) -> tuple[list[float], list[Any]]:
    times, results = [], []
    for lo, hi in boxes:
        ds = impl.open(store)
        t0 = time.perf_counter()
        r = fn(ds, lo, hi)
        times.append(time.perf_counter() - t0)
        results.append(impl.unpack(r))
    return times, results


def task_query(args: argparse.Namespace) -> dict[str, Any]:
    impl = adapter(args.impl)
    verts, faces = generate(args.subdivisions)
    draco = split_variant(args.variant)[0] == "draco"
    boxes = load_json(args.boxes)["boxes"]["q1"]
    ours = impl.name == "ours"
    times, results = _timed(impl.query, impl, args.store, boxes)
    if ours:
        t_times, t_results = _timed(impl.query_touching, impl, args.store, boxes)
    ds = impl.open(args.store)
    t0 = time.perf_counter()
    full = impl.unpack(impl.read_all(ds))
    full_s = time.perf_counter() - t0
    peak = peak_rss_mib()  # before the checks, which allocate more than the reads

    truth = Truth(verts, faces, draco)
    everything = np.ones(len(verts), bool)
    full_res = compare(truth, full, everything, faces, draco)
    if draco:
        idx, _ = truth.match_within_bound(full[0])
        decoded = verts.copy()  # vertices the full read lost keep their input positions
        decoded[idx[idx >= 0]] = full[0][idx >= 0]
        truth.decoded = decoded
        moved = [int((truth.inside(lo, hi, verts) != truth.inside(lo, hi)).sum()) for lo, hi in boxes]
    out: dict[str, Any] = {
        "peak_rss_mib": peak,
        "full": {"time_s": full_s, "mismatches": 0 if full_res["ok"] else 1, "detail": full_res},
    }
    entry: dict[str, Any] = {"times_s": times, "details": []}
    for (lo, hi), got in zip(boxes, results):
        want_v, want_f = expected_box(truth, lo, hi, touching=False)
        entry["details"].append(compare(truth, got, want_v, want_f, draco))
    entry["mismatches"] = sum(not d["ok"] for d in entry["details"])
    if draco:
        entry["vertices_moved_across_box_by_quantization"] = moved
    out["q1"] = entry
    if ours:
        t_entry: dict[str, Any] = {"times_s": t_times, "details": []}
        for (lo, hi), got in zip(boxes, t_results):
            want_v, want_f = expected_box(truth, lo, hi, touching=True)
            t_entry["details"].append(compare(truth, got, want_v, want_f, draco))
        t_entry["mismatches"] = sum(not d["ok"] for d in t_entry["details"])
        out["q1_touching"] = t_entry
    return out


def task_io(args: argparse.Namespace) -> dict[str, Any]:
    """Files opened and bytes read by one box query (and by ``open``), as in the lines child:
    an audit hook sees every ``open`` event from any thread; store files are split into
    metadata (zarr.json) and cell files; bytes are the sizes of the files opened."""
    impl = adapter(args.impl)
    lo, hi = load_json(args.boxes)["boxes"]["q1"][args.io_index]
    store = os.path.realpath(args.store)
    phase = {"name": "setup"}
    events: list[tuple[str, str]] = []

    def hook(event: str, eargs: tuple) -> None:
        if event == "open" and not isinstance(eargs[0], int):
            events.append((phase["name"], os.fsdecode(eargs[0])))

    impl.query(impl.open(args.store), lo, hi)  # warm lazy imports
    sys.addaudithook(hook)
    phase["name"] = "open"
    r0 = rchar()
    ds = impl.open(args.store)
    r1 = rchar()
    phase["name"] = "query"
    r = impl.query(ds, lo, hi)
    r2 = rchar()
    phase["name"] = "done"
    pos, faces = impl.unpack(r)

    def count(name: str, rchar: int | None) -> dict[str, Any]:
        meta = cells = meta_bytes = cell_bytes = 0
        arrays: dict[str, int] = {}
        for ph, path in events:
            full = os.path.realpath(path)
            if ph != name or not full.startswith(store + os.sep):
                continue
            rel = os.path.relpath(full, store)
            size = os.path.getsize(full) if os.path.exists(full) else 0
            if os.path.basename(rel) in ("zarr.json", ".zarray", ".zgroup", ".zattrs", ".zmetadata"):
                meta, meta_bytes = meta + 1, meta_bytes + size
                continue
            cells, cell_bytes = cells + 1, cell_bytes + size
            parts = rel.split(os.sep)
            akey = os.sep.join(parts[: parts.index("c")]) if "c" in parts else os.path.dirname(rel)
            arrays[akey] = arrays.get(akey, 0) + 1
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
        "vertices": int(len(pos)),
        "faces": int(len(faces)),
        "open": count("open", None if r0 is None or r1 is None else r1 - r0),
        "query": count("query", None if r1 is None or r2 is None else r2 - r1),
    }


def task_profile(args: argparse.Namespace) -> dict[str, Any]:
    import cProfile
    import io
    import pstats

    impl = adapter(args.impl)
    verts, faces = generate(args.subdivisions)

    def top(prof: cProfile.Profile, key: str) -> str:
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).strip_dirs().sort_stats(key).print_stats(args.top)
        text = buf.getvalue()
        return text[text.find("   ncalls") :] if "   ncalls" in text else text

    out: dict[str, Any] = {}
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    impl.write(args.store, verts, faces, args.variant)
    prof.disable()
    out["write_wall_s_under_profiler"] = time.perf_counter() - t0
    out["write_tottime"], out["write_cumtime"] = top(prof, "tottime"), top(prof, "cumulative")
    boxes = load_json(args.boxes)["boxes"]["q1"]
    prof = cProfile.Profile()
    total = 0.0
    for lo, hi in boxes:
        ds = impl.open(args.store)
        t0 = time.perf_counter()
        prof.enable()
        impl.query(ds, lo, hi)
        prof.disable()
        total += time.perf_counter() - t0
    out["query_boxes"], out["query_wall_s_under_profiler"] = len(boxes), total
    out["query_tottime"], out["query_cumtime"] = top(prof, "tottime"), top(prof, "cumulative")
    return out


TASKS = {"gen": task_gen, "write": task_write, "query": task_query, "io": task_io, "profile": task_profile}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--impl", choices=("ours", "reference"), required=True)
    p.add_argument("--task", choices=sorted(TASKS), required=True)
    p.add_argument("--variant", default="raw-none", help="(raw|draco)-(none|zstd)")
    p.add_argument("--subdivisions", type=int, required=True)
    p.add_argument("--store", default=None)
    p.add_argument("--boxes", default=None, help='JSON plan {"boxes": {"q1": [[lo, hi], ...]}}')
    p.add_argument("--io-index", type=int, default=0)
    p.add_argument("--top", type=int, default=10)
    p.add_argument("--ours-source", default=None)
    args = p.parse_args()
    global _OURS_SOURCE
    _OURS_SOURCE = args.ours_source
    result = TASKS[args.task](args)
    result.update(
        {
            "impl": args.impl,
            "task": args.task,
            "variant": args.variant,
            "subdivisions": args.subdivisions,
            "python": sys.executable,
        }
    )
    return answer(result)


if __name__ == "__main__":
    sys.exit(main())
