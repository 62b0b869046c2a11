"""``zarr-vectors info`` (run as a process) reports vertices per non-empty chunk and warns
when a store is far from the range box queries are fastest in."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import zarr_vectors as zv
from zarr_vectors.engine import VERTICES_PER_CHUNK_RANGE, chunk_fill_warning


def _info(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "zarr_vectors", "info", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    root = tmp_path_factory.mktemp("info-chunks")
    pts = np.random.default_rng(0).uniform(0, 1000, (40_000, 3)).astype(np.float32)
    zv.write_points(root / "tiny.zarr", pts, chunk_shape=100)  # 1,000 chunks of about 40
    zv.write_points(root / "auto.zarr", pts)
    zv.write_points(root / "huge.zarr", np.tile(pts, (4, 1)), chunk_shape=2000)  # one chunk of 160,000
    return root


@pytest.mark.slow
def test_info_warns_about_a_store_of_tiny_chunks(stores):
    proc = _info("tiny.zarr", cwd=stores)
    assert proc.returncode == 0, proc.stderr
    assert "40 vertices per chunk (mean over 1,000 non-empty chunks)" in proc.stdout
    low, high = VERTICES_PER_CHUNK_RANGE
    assert (
        f"warning: level 0: 40 vertices per non-empty chunk is far below {low:,} .. {high:,}" in proc.stderr
    )
    data = json.loads(_info("tiny.zarr", "--json", cwd=stores).stdout)
    assert data["levels"][0]["nonempty_chunks"] == 1000
    assert data["levels"][0]["vertices_per_chunk"] == 40.0
    assert len(data["warnings"]) == 1 and "far below" in data["warnings"][0]


@pytest.mark.slow
def test_info_is_quiet_about_an_auto_store_and_warns_above_the_range(stores):
    proc = _info("auto.zarr", cwd=stores)
    assert proc.returncode == 0, proc.stderr
    assert "vertices per chunk (mean over 1 non-empty chunks)" in proc.stdout
    assert "warning" not in proc.stderr
    huge = _info("huge.zarr", cwd=stores)
    assert "160,000 vertices per chunk" in huge.stdout
    assert "160,000 vertices per non-empty chunk is far above" in huge.stderr


def test_warning_thresholds():
    low, high = VERTICES_PER_CHUNK_RANGE
    assert chunk_fill_warning(100 * low, 100) is None
    assert chunk_fill_warning(100 * high, 100) is None
    assert "far below" in (chunk_fill_warning(100 * low - 100, 100) or "")
    assert "far above" in (chunk_fill_warning(100 * high + 100, 100) or "")
    assert chunk_fill_warning(10, 1) is None  # one chunk cannot be fuller
    assert chunk_fill_warning(low - 1, 2) is None  # too few vertices to fill one chunk of the range
