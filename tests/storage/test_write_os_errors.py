"""An OS error while writing a local store (a full disk, a file-size limit) is a StoreError
naming the store and the key, and the old store is kept.

The fault is real: a child process runs with a file-size limit (``RLIMIT_FSIZE``), so the
system refuses its large writes with EFBIG, the way a full disk refuses them with ENOSPC.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import zarr_vectors as zv

ROOT = Path(__file__).resolve().parents[2]
resource = pytest.importorskip("resource")

_CHILD = r"""
import resource, signal, sys
import numpy as np
import zarr_vectors as zv
from zarr_vectors.errors import StoreError

path = sys.argv[1]
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails with EFBIG instead of killing us
resource.setrlimit(resource.RLIMIT_FSIZE, (64 << 10, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
big = np.random.default_rng(1).uniform(0, 100, (100_000, 3))
for name, write in [
    ("overwrite", lambda: zv.write_points(path, big, chunk_shape=200, overwrite=True)),
    ("append", lambda: zv.open(path, "r+").append(big)),
]:
    try:
        write()
        print(name, "returned")
    except StoreError as exc:
        print(name, type(exc).__name__, exc.store, exc.key, exc.reason, sep="|")
"""


@pytest.mark.slow
def test_a_write_over_the_file_size_limit_is_a_store_error(tmp_path: Path) -> None:
    path = tmp_path / "cells.zarr"
    zv.write_points(
        path, np.random.default_rng(0).uniform(0, 100, (50, 3)), chunk_shape=200, bounds=([0] * 3, [100] * 3)
    )
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert len(lines) == 2, out.stdout
    for line, name in zip(lines, ("overwrite", "append")):
        what, kind, store, key, reason = line.split("|")
        assert (what, kind) == (name, "StoreError")
        assert store.startswith(f"{path} (staged in {tmp_path}/.cells.zarr.zv-tmp-")
        assert key == "0/vertices/c/0/0/0"
        assert reason == "cannot be written: File too large (EFBIG)"
    assert zv.open(path).vertex_count() == 50 and zv.validate(path).ok  # the old store, intact
