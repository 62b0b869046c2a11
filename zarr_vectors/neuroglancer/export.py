"""Static Neuroglancer precomputed files: the paths the server answers, written to a folder."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from zarr_vectors.errors import StoreExistsError
from zarr_vectors.neuroglancer.server import open_sources, state_url, viewer_state

__all__ = ["export_neuroglancer"]


def export_neuroglancer(
    stores: Any,
    outdir: str | Path,
    *,
    base_url: str | None = None,
    overwrite: bool = False,
    storage_options: dict[str, Any] | None = None,
    mesh_format: str = "multilod",
) -> dict[str, int]:
    """Write every source path of ``stores`` under ``outdir/<layer>/`` (unsharded precomputed
    files, hostable by any static web server), plus ``state.json``: a viewer state whose
    sources live under ``base_url`` (default ``http://127.0.0.1:8000``, what
    ``python -m http.server -d OUTDIR`` serves). Mesh stores are written as multi-resolution
    Draco meshes (``mesh_format="multilod"``), whose fragments Neuroglancer reads with HTTP
    range requests (the host must answer them), or as legacy meshes (``"legacy"``).

    Returns ``{layer: files written}``.

    Raises
    ------
    StoreExistsError
        ``outdir`` exists and is not empty, without ``overwrite``.
    """
    out = Path(outdir)
    if out.exists() and any(out.iterdir()) and not overwrite:
        raise StoreExistsError(f"{out} exists and is not empty; choose another folder or pass overwrite=True")
    sources = open_sources(stores, storage_options, mesh_format)
    counts: dict[str, int] = {}
    made: set[Path] = set()
    for src in sources:
        n = 0
        for rel in src.paths():
            body, _ = src.get(rel)
            file = out / src.name / rel
            if file.parent not in made:
                file.parent.mkdir(parents=True, exist_ok=True)
                made.add(file.parent)
            file.write_bytes(body)
            n += 1
        counts[src.name] = n
    base = (base_url or "http://127.0.0.1:8000").rstrip("/")
    state = viewer_state(sources, base)
    (out / "state.json").write_text(json.dumps(state, indent=1))
    (out / "viewer_url.txt").write_text(state_url("https://neuroglancer-demo.appspot.com/", state) + "\n")
    return counts
