"""The child side of the fuzzer: run cases under a memory limit and report each as one JSON line.

Started as ``python child.py`` by :mod:`fuzz.runner` with one JSON job on stdin::

    {"bases": {name: path}, "cases": [case id, ...], "work": dir, "mem": bytes, "recycle_kib": n}

For each case it prints ``{"start": id}``, then ``{"op": name}`` before each operation, then
``{"case": id, ...}`` with every operation's answer digest or exception. A case whose peak
memory passed ``recycle_kib`` ends the process (``{"recycle": true}``) so the next case's
peak is measured afresh. A crash or hang is seen by the parent from the last line printed.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import resource
import shutil
import sys
import time
import traceback
import warnings
from pathlib import Path
from typing import Any

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from fuzz.mutations import NotApplicable, mutate
from fuzz.stores import KINDS

OPS = ("open", "query", "objects", "read", "validate")
#: KeyError messages the API documents (Dataset.level, objects, attribute names).
DOCUMENTED_KEY_ERRORS = re.compile(
    r"'?(level \d+ does not exist|object id -?\d+ is not in level|unknown vertex attributes)"
)


def parse_case(case: str) -> tuple[str, str, str, int]:
    """``kind/compression/mutation/seed`` -> its four parts."""
    kind, comp, mutation, seed = case.split("/")
    return kind, comp, mutation, int(seed)


def _emit(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def _digest(results: list[Any]) -> str:
    h = hashlib.sha256()
    for res in results:
        parts = [
            (n, getattr(res, n))
            for n in ("positions", "object_ids", "edges", "faces", "line_offsets", "parents")
        ]
        for group in ("attributes", "edge_attributes"):
            parts += [(f"{group}.{k}", v) for k, v in sorted(getattr(res, group).items())]
        for name, value in parts:
            if value is None:
                h.update(f"{name}:None;".encode())
                continue
            arr = np.ascontiguousarray(value)
            h.update(f"{name}:{arr.dtype.str}:{arr.shape};".encode())
            h.update(arr.tobytes() if arr.dtype.kind != "O" else repr(arr.tolist()).encode())
    return h.hexdigest()[:16]


def _where(exc: BaseException) -> str:
    """``file:line`` of the innermost frame inside the package (where it went wrong)."""
    frames = traceback.extract_tb(exc.__traceback__)
    mine = [f for f in frames if "/zarr_vectors/" in f.filename or "/zarr_vectors_draco/" in f.filename]
    frame = (mine or frames or [None])[-1]
    if frame is None:
        return "?"
    name = frame.filename
    cut = max(name.rfind("/zarr_vectors/"), name.rfind("/zarr_vectors_draco/"))
    return f"{name[cut + 1 :] if cut >= 0 else os.path.basename(name)}:{frame.lineno}"


def _attempt(fn: Any) -> dict[str, Any]:
    import zarr_vectors as zv

    t0 = time.perf_counter()
    try:
        out: dict[str, Any] = {"ok": fn()}
    except MemoryError as exc:
        out = {"exc": "MemoryError", "lib": False, "msg": str(exc)[:200], "where": _where(exc)}
    except Exception as exc:  # the fuzzer's job: record whatever escaped, by type
        lib = isinstance(exc, zv.ZarrVectorsError) or (
            isinstance(exc, KeyError) and bool(DOCUMENTED_KEY_ERRORS.match(str(exc)))
        )
        out = {"exc": type(exc).__name__, "lib": lib, "msg": str(exc)[:300], "where": _where(exc)}
        if not lib:
            out["tb"] = "".join(traceback.format_exception(exc, limit=-6))[-3000:]
    out["secs"] = round(time.perf_counter() - t0, 3)
    return out


def run_ops(path: str, kind: str) -> dict[str, dict[str, Any]]:
    """Every operation on the store at ``path``: answer digests or the exceptions raised."""
    import zarr_vectors as zv

    spec = KINDS[kind]
    res: dict[str, dict[str, Any]] = {}
    box: dict[str, Any] = {}

    def do_open() -> str:
        ds = zv.open(path)
        box["ds"] = ds
        lo, hi = ds.bounds
        desc = [
            ds.levels,
            ds.ndim,
            list(ds.axes),
            lo.tolist(),
            hi.tolist(),
            ds.chunk_shape.tolist(),
            ds.bin_shape.tolist(),
            list(ds.geometry_types),
        ]
        return hashlib.sha256(json.dumps(desc).encode()).hexdigest()[:16]

    _emit({"op": "open"})
    res["open"] = _attempt(do_open)
    ds = box.get("ds")
    calls = {
        "query": lambda lv: ds.query(spec.box, level=lv),
        "objects": lambda lv: ds.objects(spec.ids, level=lv),
        "read": lambda lv: ds.read(level=lv),
    }
    for op, call in calls.items():
        if ds is None:
            res[op] = {"skip": "open failed"}
            continue
        _emit({"op": op})
        res[op] = _attempt(lambda: _digest([call(lv) for lv in spec.levels]))

    def do_validate() -> str:
        report = zv.validate(path)
        str(report)
        return "ok" if report.ok else "problems:" + ",".join(sorted(report.rules_broken()))

    _emit({"op": "validate"})
    res["validate"] = _attempt(do_validate)
    return res


def run_case(case: str, job: dict[str, Any]) -> dict[str, Any]:
    kind, comp, mutation, seed = parse_case(case)
    base = f"{kind}-{comp}"
    store = Path(job["work"]) / f"{os.getpid()}-{base}.zarr"
    if store.exists():
        shutil.rmtree(store)
    shutil.copytree(job["bases"][base], store)
    try:
        t0 = time.perf_counter()
        if mutation == "pristine":
            desc = "unchanged"
        else:
            try:
                desc = mutate(store, base, mutation, seed)
            except NotApplicable as exc:
                return {"case": case, "na": str(exc)}
        prep = round(time.perf_counter() - t0, 3)
        return {"case": case, "desc": desc, "prep_secs": prep, "ops": run_ops(str(store), kind)}
    finally:
        shutil.rmtree(store, ignore_errors=True)


def main() -> None:
    job = json.loads(sys.stdin.read())
    warnings.simplefilter("ignore")
    import zarr_vectors  # noqa: F401  (imported before the limit: the import is not what is measured)

    resource.setrlimit(resource.RLIMIT_AS, (job["mem"], job["mem"]))
    for case in job["cases"]:
        _emit({"start": case})
        t0 = time.perf_counter()
        out = run_case(case, job)
        out["secs"] = round(time.perf_counter() - t0, 3)
        out["rss_kib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        _emit(out)
        if out["rss_kib"] > job["recycle_kib"]:
            _emit({"recycle": True})
            return


if __name__ == "__main__":
    main()
