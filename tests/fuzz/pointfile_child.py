"""The child side of the point-file fuzz: read and ingest each case's file under a memory
limit and report each as one JSON line.

Started as ``python pointfile_child.py`` with ``{"cases": [[id, path], ...], "mem": bytes}``
on stdin. For each case it prints ``{"start": id}`` and then ``{"case": id, "read": ...,
"ingest": ...}``: per operation ``{"ok": digest, "rows": n, "header": count}``,
``{"error": type, "msg": text}`` for the library's errors, ``{"raise": type, "msg": text}``
for any other exception, or ``{"memory": true}``. A crash or hang shows as a missing line.
"""

from __future__ import annotations

import hashlib
import json
import resource
import sys
import warnings
from pathlib import Path
from typing import Any

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np


def _emit(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def _digest(pos: np.ndarray, attrs: dict[str, np.ndarray]) -> str:
    h = hashlib.sha256(np.ascontiguousarray(pos, np.float64).tobytes())
    for name in sorted(attrs):
        h.update(name.encode("utf-8", "surrogatepass") + attrs[name].dtype.str.encode())
        h.update(np.ascontiguousarray(attrs[name]).tobytes())
    return h.hexdigest()


def _read(path: Path) -> dict[str, Any]:
    from zarr_vectors.io.pointfiles import open_point_file

    source = open_point_file(path)
    blocks = list(source.chunks(1 << 12))
    pos = np.vstack([b[0] for b in blocks]) if blocks else np.zeros((0, 3))
    attrs = {k: np.concatenate([b[1][k] for b in blocks]) for k in (blocks[0][1] if blocks else {})}
    return {"ok": _digest(pos, attrs), "rows": len(pos), "header": source.count}


def _ingest(path: Path, index: int) -> dict[str, Any]:
    from zarr_vectors.io.pointfiles import ingest_points

    ds = ingest_points(f"memory://fuzz-points/{index}.zarr", [path], chunk_shape=50.0, progress=False)
    return {"ok": "", "rows": int(ds.vertex_count()), "header": None}


def _run(op: Any, *args: Any) -> dict[str, Any]:
    from zarr_vectors.errors import ZarrVectorsError

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return op(*args)
    except MemoryError:
        return {"memory": True}
    except ZarrVectorsError as exc:
        return {"error": type(exc).__name__, "msg": str(exc)[:500]}
    except Exception as exc:  # noqa: BLE001 - the fuzz reports every other exception as a failure
        return {"raise": type(exc).__name__, "msg": str(exc)[:500]}


def main() -> None:
    job = json.loads(sys.stdin.read())
    resource.setrlimit(resource.RLIMIT_AS, (job["mem"], job["mem"]))
    import zarr_vectors.io.pointfiles  # noqa: F401  (imported before the first case's clock)

    for index, (case, path) in enumerate(job["cases"]):
        _emit({"start": case})
        read = _run(_read, Path(path))
        ingest = _run(_ingest, Path(path), index)
        _emit({"case": case, "read": read, "ingest": ingest})


if __name__ == "__main__":
    main()
