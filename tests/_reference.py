"""The ``reference`` fixture: the reference implementation (zarr-vectors 0.9.2) in a subprocess.

The reference python is found from ``ZV_REFERENCE_PYTHON``, else made (or reused) with
``../shared/tools/reference-venv.sh`` into ``.cache/reference-venv``. When neither works
the tests skip, unless ``ZV_REQUIRE_INTEROP=1`` (CI sets it), in which case they fail.

Both packages import as ``zarr_vectors``, so the reference interpreter always runs isolated
(``-I``) from a folder outside this repository: otherwise it would import this checkout.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
DRIVER = ROOT / "tests" / "interop" / "reference_driver.py"
REFERENCE_VERSION = "0.9.2"


def _neutral_cwd() -> Path:
    """A folder with no ``zarr_vectors`` package in it, to run the reference from."""
    path = ROOT / ".cache" / "reference-cwd"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _imports_reference(python: str) -> bool:
    probe = subprocess.run(
        [python, "-I", "-c", "import zarr_vectors; print(zarr_vectors.__version__)"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=_neutral_cwd(),
    )
    if probe.returncode != 0 or probe.stdout.strip() != REFERENCE_VERSION:
        sys.stderr.write(
            f"{python} does not import zarr-vectors {REFERENCE_VERSION}:\n{probe.stdout}{probe.stderr}"
        )
        return False
    return True


def _find_reference_python() -> str | None:
    env = os.environ.get("ZV_REFERENCE_PYTHON")
    if env:
        return env if _imports_reference(env) else None
    script = ROOT.parent / "shared" / "tools" / "reference-venv.sh"
    if not script.exists():
        return None
    proc = subprocess.run(
        ["bash", str(script), str(ROOT / ".cache" / "reference-venv")],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=_neutral_cwd(),
    )
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        return None
    python = os.path.abspath(_neutral_cwd() / proc.stdout.strip().splitlines()[-1])  # keep the venv symlink
    return python if _imports_reference(python) else None


class Reference:
    """Runs the driver with the reference interpreter."""

    def __init__(self, python: str) -> None:
        self.python = python

    def read_objects(self, tmp: Path, store: Path) -> dict[int, Any]:
        """``{object id: its vertex rows as its manifest lists them}`` (driver ``read-objects``)."""
        out = tmp / f"{store.name}-objects.npz"
        self.run("read-objects", str(store), str(out))
        with np.load(out) as data:
            ids, o, p = data["object_list"], data["object_offsets"], data["object_positions"]
            return {int(oid): p[o[k] : o[k + 1]] for k, oid in enumerate(ids)}

    def run(self, *args: str) -> str:
        proc = subprocess.run(
            [self.python, "-I", str(DRIVER), *args],
            capture_output=True,
            text=True,
            timeout=600,
            cwd=_neutral_cwd(),
        )
        if proc.returncode != 0:
            raise AssertionError(f"reference driver {args[0]} failed ({proc.returncode}):\n{proc.stderr}")
        return proc.stdout

    def write_points(self, tmp: Path, store: Path, **arrays: Any) -> None:
        npz = tmp / f"{store.name}-in.npz"
        np.savez(npz, **arrays)
        self.run("write-points", str(npz), str(store))

    def read_points(
        self, tmp: Path, store: Path, bbox: tuple[Any, Any] | None = None, ids: Any = None
    ) -> dict[str, np.ndarray]:
        """The reference's ``select(...).read()``; ``ids``: ``select(objects=ids)`` only."""
        out = tmp / f"{store.name}-out-{np.random.default_rng().integers(1 << 30)}.npz"
        args = ["read-points", str(store), str(out)]
        if ids is not None:
            args += ["--ids", ",".join(str(int(i)) for i in ids)]
        if bbox is not None:
            lo, hi = bbox
            args += [
                "--bbox",
                ",".join(map(repr, map(float, lo))) + ":" + ",".join(map(repr, map(float, hi))),
            ]
        self.run(*args)
        with np.load(out) as data:
            return {k: data[k] for k in data.files}

    def write_lines(self, tmp: Path, store: Path, kind: str = "polyline", **arrays: Any) -> None:
        npz = tmp / f"{store.name}-in.npz"
        np.savez(npz, **arrays)
        self.run("write-lines", str(npz), str(store), "--kind", kind)

    def read_lines(self, tmp: Path, store: Path, objects: bool = False) -> dict[str, np.ndarray]:
        out = tmp / f"{store.name}-lines-{np.random.default_rng().integers(1 << 30)}.npz"
        self.run("read-lines", str(store), str(out), *(["--objects", "all"] if objects else []))
        with np.load(out) as data:
            return {k: data[k] for k in data.files}

    def write_graph(self, tmp: Path, store: Path, **arrays: Any) -> None:
        npz = tmp / f"{store.name}-in.npz"
        np.savez(npz, **arrays)
        self.run("write-graph", str(npz), str(store))

    def read_graph(
        self, tmp: Path, store: Path, bbox: tuple[Any, Any] | None = None
    ) -> dict[str, np.ndarray]:
        out = tmp / f"{store.name}-graph-{np.random.default_rng().integers(1 << 30)}.npz"
        args = ["read-graph", str(store), str(out)]
        if bbox is not None:
            lo, hi = bbox
            args += [
                "--bbox",
                ",".join(map(repr, map(float, lo))) + ":" + ",".join(map(repr, map(float, hi))),
            ]
        self.run(*args)
        with np.load(out) as data:
            return {k: data[k] for k in data.files}

    def write_mesh(self, tmp: Path, store: Path, **arrays: Any) -> None:
        npz = tmp / f"{store.name}-in.npz"
        np.savez(npz, **arrays)
        self.run("write-mesh", str(npz), str(store))

    def read_mesh(
        self, tmp: Path, store: Path, bbox: tuple[Any, Any] | None = None, objects: bool = False
    ) -> dict[str, np.ndarray]:
        out = tmp / f"{store.name}-mesh-{np.random.default_rng().integers(1 << 30)}.npz"
        args = ["read-mesh", str(store), str(out)]
        if bbox is not None:
            lo, hi = bbox
            args += [
                "--bbox",
                ",".join(map(repr, map(float, lo))) + ":" + ",".join(map(repr, map(float, hi))),
            ]
        if objects:
            args += ["--objects", "all"]
        self.run(*args)
        with np.load(out) as data:
            return {k: data[k] for k in data.files}

    def info(self, store: Path) -> dict[str, Any]:
        return json.loads(self.run("info", str(store)))

    def build_pyramid(
        self, store: Path, factors: list[float], cross_level: str = "explicit"
    ) -> dict[str, Any]:
        """The reference's ``build_pyramid`` on ``store`` (one coarsen factor per new level)."""
        return json.loads(
            self.run(
                "build-pyramid",
                str(store),
                "--factors",
                ",".join(map(str, factors)),
                "--cross-level",
                cross_level,
            )
        )

    def read_level(
        self, tmp: Path, store: Path, kind: str, level: int, bbox: tuple[Any, Any] | None = None, *extra: str
    ) -> dict[str, np.ndarray]:
        """``read-<kind> --level L`` (kind: points, lines, graph, mesh) into arrays."""
        out = tmp / f"{store.name}-{kind}{level}-{np.random.default_rng().integers(1 << 30)}.npz"
        args = [f"read-{kind}", str(store), str(out), "--level", str(level), *extra]
        if bbox is not None:
            lo, hi = bbox
            args += [
                "--bbox",
                ",".join(map(repr, map(float, lo))) + ":" + ",".join(map(repr, map(float, hi))),
            ]
        self.run(*args)
        with np.load(out) as data:
            return {k: data[k] for k in data.files}


@pytest.fixture(scope="session")
def reference() -> Reference:
    # pytest-xdist runs this once per worker: the first to take the lock makes the venv,
    # the others then find it made (a venv half-made by two pips at once would not import).
    lock = _neutral_cwd().parent / "reference-venv.lock"
    with open(lock, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        python = _find_reference_python()
    if python is None:
        if os.environ.get("ZV_REQUIRE_INTEROP") == "1":
            pytest.fail(
                "the reference implementation is required (ZV_REQUIRE_INTEROP=1) but could not be set up"
            )
        pytest.skip("reference implementation not available (set ZV_REFERENCE_PYTHON or provide ../shared)")
    return Reference(python)
