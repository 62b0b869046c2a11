"""``zarr-vectors`` run as a process: demo, pyramid with its progress bar, validate, every
subcommand's help, and failed file or store access as one line on stderr with exit status 2."""

from __future__ import annotations

import argparse
import json
import socket
from pathlib import Path

import numpy as np
import pytest

import zarr_vectors as zv
from tests.cli.test_cli_query import _run
from zarr_vectors.cli import build_parser

pytestmark = pytest.mark.slow  # the CLI run as a process


def _subcommands() -> list[str]:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sorted(sub.choices)


def _one_error_line(stderr: str, command: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith(f"zarr-vectors {command}: error: "), stderr
    assert "Traceback" not in stderr
    return lines[0]


def _points_store(path: Path) -> None:
    rng = np.random.default_rng(5)
    pos = rng.uniform(0, 400, (3_000, 3)).astype(np.float32)
    zv.write_points(path, pos, chunk_shape=100, bin_shape=25, object_ids=rng.integers(0, 30, len(pos)))


# ------------------------------------------------------------------ demo


def test_demo_writes_a_store_that_opens(tmp_path):
    proc = _run("demo", "demo.zarr", "--points", "3000", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "demo.zarr" / "zarr.json").is_file()
    ds = zv.open(tmp_path / "demo.zarr")
    assert ds.vertex_count() == 3000
    assert ds.num_objects() == 12  # one neuron per 250 points
    assert "numpy brute force over all points" in proc.stdout
    assert zv.validate(tmp_path / "demo.zarr").ok


def test_demo_refuses_a_point_count_below_one(tmp_path):
    proc = _run("demo", "demo.zarr", "--points", "0", cwd=tmp_path)
    assert proc.returncode == 2
    assert "--points: '0' is not a whole number of points >= 1" in proc.stderr
    assert not (tmp_path / "demo.zarr").exists()


# ------------------------------------------------------------------ pyramid


def test_pyramid_shows_a_progress_bar(tmp_path):
    _points_store(tmp_path / "cells.zarr")
    proc = _run("pyramid", "cells.zarr", "--factors", "2", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "level 1:" in proc.stderr and "100%" in proc.stderr and "chunk" in proc.stderr, proc.stderr
    assert proc.stdout.splitlines()[0].startswith("level 0: 3000 vertices")
    ds = zv.open(tmp_path / "cells.zarr")
    assert ds.levels == [0, 1] and 0 < ds.vertex_count(1) <= 3000


def test_pyramid_without_progress_is_quiet(tmp_path):
    _points_store(tmp_path / "cells.zarr")
    proc = _run("pyramid", "cells.zarr", "--factors", "2", "--no-progress", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "100%" not in proc.stderr


# ------------------------------------------------------------------ validate


def test_validate_good_and_broken_store(tmp_path):
    store = tmp_path / "geo.zarr"
    rng = np.random.default_rng(1)
    lonlat = np.column_stack([rng.uniform(5, 10, 500), rng.uniform(45, 48, 500)])
    zv.write_points(store, lonlat, chunk_shape=1.0, crs="EPSG:4326")
    good = _run("validate", "geo.zarr", cwd=tmp_path)
    assert good.returncode == 0, good.stdout + good.stderr
    assert good.stdout.startswith("geo.zarr: valid (")

    root = json.loads((store / "zarr.json").read_text())
    root["attributes"]["proj:code"] = "EPSG:3857"  # GeoZarr now disagrees with zarr_vectors.crs
    (store / "zarr.json").write_text(json.dumps(root))
    bad = _run("validate", "geo.zarr", cwd=tmp_path)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "geo.zarr: INVALID: 1 problem" in bad.stdout
    line = next(ln for ln in bad.stdout.splitlines() if "[metadata.geozarr]" in ln)
    assert "L2 zarr.json: proj:code is 'EPSG:3857' but zarr_vectors.crs has 'EPSG:4326'" in line


# ------------------------------------------------------------------ help


@pytest.mark.parametrize("command", _subcommands())
def test_every_subcommand_help_has_examples(command, tmp_path):
    proc = _run(command, "--help", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"usage: zarr-vectors {command}")
    after = proc.stdout.split("\nexamples:\n", 1)
    assert len(after) == 2, proc.stdout
    assert after[1].splitlines()[0].startswith(f"  zarr-vectors {command}")


def test_help_lists_every_subcommand(tmp_path):
    proc = _run("--help", cwd=tmp_path)
    assert proc.returncode == 0
    assert all(name in proc.stdout for name in _subcommands())
    expected = {"demo", "info", "ingest", "export", "pyramid", "query", "render", "validate"}
    assert expected <= set(_subcommands())


# ------------------------------------------------------------------ OSError: one line, exit 2


MISSING = {
    "info": ["info", "missing.zarr"],
    "validate": ["validate", "missing.zarr"],
    "query": ["query", "missing.zarr", "--count"],
    "pyramid": ["pyramid", "missing.zarr", "--factors", "2"],
    "export": ["export", "mesh", "missing.zarr", "--object", "0", "-o", "out.ply"],
}


@pytest.mark.parametrize("command", sorted(MISSING))
def test_missing_store_is_one_line(command, tmp_path):
    proc = _run(*MISSING[command], cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    line = _one_error_line(proc.stderr, command)
    assert "missing.zarr" in line and "check the path" in line


def test_output_under_a_file_is_one_line(tmp_path):
    _points_store(tmp_path / "cells.zarr")
    (tmp_path / "notes.txt").write_text("a file, not a folder\n")
    proc = _run("query", "cells.zarr", "-o", "notes.txt/box.csv", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    line = _one_error_line(proc.stderr, "query")
    assert "notes.txt/box.csv" in line and "Not a directory" in line


def test_demo_into_a_file_is_one_line(tmp_path):
    (tmp_path / "notes.txt").write_text("a file, not a folder\n")
    proc = _run("demo", "notes.txt/demo.zarr", "--points", "10", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "notes.txt" in _one_error_line(proc.stderr, "demo")


def test_unreachable_remote_store_is_one_line(tmp_path):
    with socket.socket() as sock:  # bound but not listening: connections are refused
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/cells.zarr"
        proc = _run("info", url, cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    line = _one_error_line(proc.stderr, "info")
    assert url in line and "check the path or URL" in line
