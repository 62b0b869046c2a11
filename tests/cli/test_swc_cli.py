"""SWC read/write and the ``zarr-vectors`` command, run as a process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import zarr_vectors as zv
from zarr_vectors.errors import InputError
from zarr_vectors.io.swc import read_swc

SWC = """# a small neuron
1 1 100.0 100.0 100.0 5.0 -1
2 3 110.0 100.0 100.0 1.5 1
3 3 120.0 105.0 100.0 1.2 2
5 3 130.0 110.0 160.0 1.0 3
7 2 100.0 90.0 100.0 0.8 1
8 2 100.0 80.0 95.0 0.7 7
"""


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "zarr_vectors", *args], cwd=cwd, capture_output=True, text=True, timeout=300
    )


def _neurons(folder: Path, rng, n: int = 3) -> list[Path]:
    folder.mkdir()
    paths = []
    for k in range(n):
        lines = [SWC]
        for i in range(20):  # a long branch leaving the first chunk
            lines.append(
                f"{100 + i} 3 {140.0 + 30 * i + k} {110.0 + rng.normal():.3f} 100.0 0.5 {99 + i if i else 5}\n"
            )
        path = folder / f"n{k}.swc"
        path.write_text("".join(lines))
        paths.append(path)
    return paths


def test_read_swc_resolves_parent_ids(tmp_path):
    (tmp_path / "n.swc").write_text(SWC)
    swc = read_swc(tmp_path / "n.swc")
    assert swc.ids.tolist() == [1, 2, 3, 5, 7, 8]
    assert swc.parents.tolist() == [-1, 0, 1, 2, 0, 4]
    assert swc.radius.tolist() == pytest.approx([5, 1.5, 1.2, 1, 0.8, 0.7])


@pytest.mark.parametrize(
    "text, message",
    [
        ("1 1 0 0 0 1\n", "needs 7 fields"),
        ("1 1 0 0 0 1 9\n", "parent 9, which is not in the file"),
        ("1 1 0 0 0 1 -1\n1 1 0 0 0 1 -1\n", "appears twice"),
        ("1 1 x 0 0 1 -1\n", "cannot parse"),
        ("# empty\n", "no SWC samples"),
    ],
)
def test_bad_swc_files(tmp_path, text, message):
    path = tmp_path / "bad.swc"
    path.write_text(text)
    with pytest.raises(InputError, match=message):
        read_swc(path)


@pytest.mark.slow
def test_cli_ingest_info_export_round_trip(tmp_path, rng):
    files = _neurons(tmp_path / "swc", rng)
    proc = _run("ingest", "swc", str(tmp_path / "swc"), "-o", "n.zarr", "--chunk-size", "100", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "wrote 3 skeletons" in proc.stdout
    info = _run("info", "n.zarr", "--json", cwd=tmp_path)
    assert info.returncode == 0, info.stderr
    doc = json.loads(info.stdout)
    assert doc["geometry_types"] == ["skeleton"] and doc["levels"][0]["objects"] == 3
    assert sorted(doc["levels"][0]["attributes"]) == ["radius", "type"]
    names = zv.open(tmp_path / "n.zarr").object_attributes("name").tolist()
    assert names == sorted(f.name for f in files)
    out = _run("export", "swc", "n.zarr", "--object", "1", "-o", "back.swc", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    orig, back = read_swc(files[1]), read_swc(tmp_path / "back.swc")

    def edges(s):
        return sorted(
            (tuple(s.positions[s.parents[i]]), tuple(s.positions[i]))
            for i in range(len(s.ids))
            if s.parents[i] >= 0
        )

    assert edges(back) == edges(orig)
    lookup = {
        tuple(p): (r, t) for p, r, t in zip(orig.positions.tolist(), orig.radius.tolist(), orig.type.tolist())
    }
    assert all(
        lookup[tuple(p)] == (r, t)
        for p, r, t in zip(back.positions.tolist(), back.radius.tolist(), back.type.tolist())
    )


@pytest.mark.slow
def test_cli_errors_are_one_line_and_exit_2(tmp_path):
    (tmp_path / "bad.swc").write_text("1 1 0 0 0 1 7\n")
    proc = _run("ingest", "swc", "bad.swc", "-o", "x.zarr", "--chunk-size", "10", cwd=tmp_path)
    assert proc.returncode == 2
    assert "error:" in proc.stderr and "parent 7" in proc.stderr
    assert not (tmp_path / "x.zarr").exists()
    missing = _run("info", "nope.zarr", cwd=tmp_path)
    assert missing.returncode == 2 and "no store" in missing.stderr
    helptext = _run("ingest", "--help", cwd=tmp_path)
    assert "examples:" in helptext.stdout


def test_ingest_api_keeps_every_file(tmp_path, rng):
    from zarr_vectors.io.swc import ingest_swc

    files = _neurons(tmp_path / "swc", rng, n=2)
    ds = ingest_swc(tmp_path / "n.zarr", files, chunk_shape=100, progress=False)
    assert ds.num_objects() == 2
    assert ds.object_attributes("n_samples").tolist() == [26, 26]
    assert len(ds.objects([0])) == 26
    assert isinstance(ds, zv.Dataset)
