"""The README's and quickstart's Python blocks, the examples and the demo all run."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import zarr_vectors as zv

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"```python\n(.*?)```", re.S)


@pytest.mark.parametrize("doc", ["README.md", "docs/quickstart.md"])
def test_python_blocks_run(doc, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    blocks = BLOCK.findall((ROOT / doc).read_text())
    assert blocks, f"{doc} has no python block"
    for code in blocks:
        exec(compile(code, doc, "exec"), {"__name__": "__doc__"})


@pytest.mark.parametrize("script", sorted(p.name for p in (ROOT / "examples").glob("*.py")))
def test_examples_run(script, tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / script), str(tmp_path / "store.zarr")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr


def test_demo_runs_as_a_module(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "zarr_vectors.demo", str(tmp_path / "demo.zarr"), "--points", "20000"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "numpy brute force" in proc.stdout
    assert zv.open(tmp_path / "demo.zarr").vertex_count() == 20000


def test_masked_object_attributes_read_back_absent(tmp_path):
    values = np.ma.masked_array(np.array([1, 2, 3], np.int16), mask=[False, True, False])
    ds = zv.write_points(tmp_path / "s.zarr", np.zeros((3, 2)), chunk_shape=1, object_ids=[0, 1, 2],
                         object_attributes={"v": values}, bounds=([0, 0], [1, 1]))
    assert ds.object_attributes("v").tolist() == [1, np.iinfo(np.int16).min, 3]
