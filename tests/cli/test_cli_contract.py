"""The command's contract, run as a process: every error one line with exit status 2, options
and the target checked before any input is read, CLI option names in messages, a closed
stdout ends quietly, subfolders are read or named, every per-file error names the file, and
every install hint names the extra and both ways to get it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import trimesh

import zarr_vectors as zv
from tests.cli.test_cli_process import _one_error_line, _points_store
from tests.cli.test_cli_query import _run
from zarr_vectors._extras import install_hint
from zarr_vectors.errors import InputError, ZarrVectorsError

GOOD_SWC = "1 1 0 0 0 1 -1\n2 3 10 0 0 1 1\n3 3 20 5 0 1 2\n"


def _swc_folder(folder: Path, n: int = 3) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for k in range(n):
        path = folder / f"n{k}.swc"
        path.write_text(GOOD_SWC.replace(" 0 0 1", f" {k} 0 1"))
        paths.append(path)
    return paths


# ------------------------------------------------------------------ one line, exit 2, for every error


@pytest.mark.slow
@pytest.mark.parametrize(
    "args, fragment",
    [
        (["ingest", "swc", "a.swc"], "the following arguments are required: -o/--output, --chunk-size"),
        (
            ["ingest", "swc", "a.swc", "-o", "x.zarr", "--chunk-size", "-5"],
            "argument --chunk-size: '-5' is not a positive",
        ),
        (
            ["ingest", "swc", "a.swc", "-o", "x.zarr", "--chunk-size", "nan"],
            "argument --chunk-size: 'nan' is not a positive",
        ),
        (
            ["ingest", "psd", "a.swc", "-o", "x.zarr", "--chunk-size", "5"],
            "argument format: invalid choice: 'psd'",
        ),
        (
            ["pyramid", "s.zarr", "--factors", "2", "--face-fraction", "1.5"],
            "'1.5' is not a fraction in (0, 1]",
        ),
        (["pyramid", "s.zarr", "--factors", "2", "--tolerance", "-1"], "'-1' is not a number >= 0"),
        (["render", "s.zarr", "-o", "a.png", "--dpi", "0"], "argument --dpi: '0' is not a positive number"),
        (["nonsense"], "invalid choice: 'nonsense'"),
    ],
)
def test_bad_options_are_one_line_and_exit_2(tmp_path, args, fragment):
    proc = _run(*args, cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    line = proc.stderr.strip()
    assert "\n" not in line and "usage:" not in line and fragment in line, proc.stderr
    assert line.startswith("zarr-vectors") and ": error: " in line and line.endswith("--help)")


@pytest.mark.slow
def test_render_to_an_unknown_image_type_is_one_line_before_reading(tmp_path):
    _points_store(tmp_path / "cells.zarr")
    (tmp_path / "cells.zarr" / "0" / "vertices" / "zarr.json").unlink()  # reading would fail: it never starts
    proc = _run("render", "cells.zarr", "-o", "x.jpgg", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    line = _one_error_line(proc.stderr, "render")
    assert "cannot draw to 'x.jpgg': it has extension .jpgg" in line and ".png" in line and ".svg" in line
    assert not (tmp_path / "x.jpgg").exists()


@pytest.mark.slow
def test_unknown_names_print_without_quotes(tmp_path):
    _points_store(tmp_path / "cells.zarr")
    proc = _run("query", "cells.zarr", "--attributes", "nope", "--count", cwd=tmp_path)
    assert proc.returncode == 2
    line = _one_error_line(proc.stderr, "query")
    assert line.startswith("zarr-vectors query: error: unknown vertex attribute 'nope'; level 0 has ")
    assert not line.endswith("'")


@pytest.mark.slow
def test_box_with_lo_above_hi_is_one_line(tmp_path):
    _points_store(tmp_path / "cells.zarr")
    proc = _run("query", "cells.zarr", "--bbox", "0,300,0,400,100,400", "--count", cwd=tmp_path)
    assert proc.returncode == 2
    assert "bbox has lo > hi on axis 1 (y): 300 > 100" in _one_error_line(proc.stderr, "query")


# ------------------------------------------------------------------ a closed stdout


@pytest.mark.slow
@pytest.mark.parametrize(
    "args", [["info", "cells.zarr"], ["info", "cells.zarr", "--json"], ["query", "cells.zarr", "--count"]]
)
def test_closed_stdout_ends_quietly(tmp_path, args):
    """`zarr-vectors info ... | head`: the reader is gone before the command writes."""
    _points_store(tmp_path / "cells.zarr")
    proc = subprocess.Popen(
        [sys.executable, "-m", "zarr_vectors", *args],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    proc.stdout.close()  # type: ignore[union-attr]
    err = proc.stderr.read().decode()  # type: ignore[union-attr]
    assert proc.wait(timeout=300) == 141
    assert err == ""


# ------------------------------------------------------------------ ingest: options and target first


@pytest.mark.slow
def test_existing_target_is_refused_before_any_input_is_read(tmp_path):
    _swc_folder(tmp_path / "swc")
    (tmp_path / "swc" / "broken.swc").write_text("1 1 x 0 0 1 -1\n")  # reading it would fail
    _points_store(tmp_path / "out.zarr")
    before = sorted(p.relative_to(tmp_path).as_posix() for p in (tmp_path / "out.zarr").rglob("*"))
    proc = _run("ingest", "swc", "swc", "-o", "out.zarr", "--chunk-size", "10", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    line = _one_error_line(proc.stderr, "ingest")
    assert line == "zarr-vectors ingest: error: out.zarr already exists; add --overwrite to replace it"
    assert "overwrite=True" not in proc.stderr
    assert sorted(p.relative_to(tmp_path).as_posix() for p in (tmp_path / "out.zarr").rglob("*")) == before


@pytest.mark.s3
def test_existing_remote_target_is_refused_before_any_input_is_read(tmp_path):
    import os

    from tests.storage.s3server import DUMMY_AWS_ENV, start_s3_server

    (tmp_path / "broken.swc").write_text("1 1 x 0 0 1 -1\n")  # reading it would fail
    server = start_s3_server()
    try:
        url = f"{server.url_prefix}/taken.zarr"
        env = {**os.environ, **DUMMY_AWS_ENV}
        options = json.dumps(server.storage_options)
        proc = _run(
            "ingest",
            "swc",
            "broken.swc",
            "-o",
            url,
            "--chunk-size",
            "10",
            "--storage-options",
            options,
            "--no-progress",
            cwd=tmp_path,
            env=env,
        )
        assert "broken.swc" in _one_error_line(proc.stderr, "ingest")  # empty target: the input is read
        zv.write_points(url, np.zeros((3, 3)), chunk_shape=1, storage_options=server.storage_options)
        proc = _run(
            "ingest",
            "swc",
            "broken.swc",
            "-o",
            url,
            "--chunk-size",
            "10",
            "--storage-options",
            options,
            cwd=tmp_path,
            env=env,
        )
        assert proc.returncode == 2
        assert _one_error_line(proc.stderr, "ingest").endswith(
            f"{url} already exists; add --overwrite to replace it"
        )
        assert zv.open(url, storage_options=server.storage_options).vertex_count() == 3
    finally:
        server.stop()


@pytest.mark.slow
def test_bad_chunk_size_is_refused_before_any_input_is_read(tmp_path):
    (tmp_path / "broken.swc").write_text("1 1 x 0 0 1 -1\n")
    proc = _run("ingest", "swc", "broken.swc", "-o", "x.zarr", "--chunk-size", "-5", cwd=tmp_path)
    assert proc.returncode == 2
    assert "--chunk-size" in proc.stderr and "broken.swc" not in proc.stderr
    assert not (tmp_path / "x.zarr").exists()


def test_ingest_api_checks_chunk_shape_before_reading(tmp_path):
    from zarr_vectors.io.meshes import ingest_meshes
    from zarr_vectors.io.swc import ingest_swc

    (tmp_path / "broken.swc").write_text("1 1 x 0 0 1 -1\n")
    (tmp_path / "broken.ply").write_text("not a mesh")
    with pytest.raises(InputError, match="chunk_shape must be positive"):
        ingest_swc(tmp_path / "a.zarr", [tmp_path / "broken.swc"], chunk_shape=-1, progress=False)
    with pytest.raises(InputError, match="chunk_shape must be positive"):
        ingest_meshes(tmp_path / "a.zarr", [tmp_path / "broken.ply"], chunk_shape=0, progress=False)


@pytest.mark.slow
def test_overwrite_replaces_an_existing_target(tmp_path):
    _swc_folder(tmp_path / "swc")
    _points_store(tmp_path / "out.zarr")
    proc = _run(
        "ingest",
        "swc",
        "swc",
        "-o",
        "out.zarr",
        "--chunk-size",
        "10",
        "--overwrite",
        "--no-progress",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert zv.open(tmp_path / "out.zarr").geometry_types == ("skeleton",)


# ------------------------------------------------------------------ subfolders


def _check_subfolders(tmp_path: Path, ingest) -> None:
    """``ingest(*args) -> (exit code, stderr)`` run in ``tmp_path``: without --recursive the
    subfolders holding SWC files are named and skipped; with it every file is read, in order."""
    top = _swc_folder(tmp_path / "swc", 2)
    deep = _swc_folder(tmp_path / "swc" / "b" / "deeper", 1) + _swc_folder(tmp_path / "swc" / "a", 2)
    (tmp_path / "swc" / "empty").mkdir()
    code, err = ingest("ingest", "swc", "swc", "-o", "flat.zarr", "--chunk-size", "10", "--no-progress")
    assert code == 0, err
    assert (
        err.strip()
        == "note: skipped 2 subfolder(s) with SWC files: swc/a, swc/b (add --recursive to read them)"
    )
    assert zv.open(tmp_path / "flat.zarr").num_objects() == len(top)
    args = ("ingest", "swc", "swc", "-o", "all.zarr", "--chunk-size", "10", "--recursive", "--no-progress")
    code, err = ingest(*args)
    assert code == 0, err
    assert err == ""
    names = zv.open(tmp_path / "all.zarr").object_attributes("name").tolist()
    order = sorted(top + deep, key=lambda p: p.relative_to(tmp_path / "swc").as_posix())
    assert names == [p.name for p in order] and len(names) == 5  # by relative path: a/, b/deeper/, then files


@pytest.mark.slow
def test_subfolders_are_named_when_skipped_and_read_with_recursive(tmp_path):
    def ingest(*args):
        proc = _run(*args, cwd=tmp_path)
        return proc.returncode, proc.stderr

    _check_subfolders(tmp_path, ingest)


def test_subfolders_are_named_when_skipped_and_read_with_recursive_in_process(tmp_path, monkeypatch, capsys):
    from zarr_vectors.cli import main

    monkeypatch.chdir(tmp_path)

    def ingest(*args):
        capsys.readouterr()
        code = main(list(args))
        return code, capsys.readouterr().err

    _check_subfolders(tmp_path, ingest)


@pytest.mark.slow
def test_a_folder_with_files_only_below_says_to_recurse(tmp_path):
    _swc_folder(tmp_path / "swc" / "inner", 1)
    proc = _run("ingest", "swc", "swc", "-o", "x.zarr", "--chunk-size", "10", cwd=tmp_path)
    assert proc.returncode == 2
    assert "add --recursive" in _one_error_line(proc.stderr, "ingest").split("error: ", 1)[1]


# ------------------------------------------------------------------ per-file errors name the file


@pytest.mark.slow
def test_nan_in_one_of_many_swc_files_names_the_file_and_line(tmp_path):
    paths = _swc_folder(tmp_path / "swc", 4)
    paths[2].write_text(GOOD_SWC + "4 3 nan 1 1 1 3\n")
    proc = _run("ingest", "swc", "swc", "-o", "x.zarr", "--chunk-size", "10", "--no-progress", cwd=tmp_path)
    assert proc.returncode == 2
    line = _one_error_line(proc.stderr, "ingest")
    assert "swc/n2.swc:4: sample 4 has a NaN or infinite coordinate or radius" in line
    assert not (tmp_path / "x.zarr").exists()


@pytest.mark.parametrize(
    "text, message",
    [
        ("1 1 0 0 0 inf -1\n", "bad.swc:1: sample 1 has a NaN or infinite coordinate or radius"),
        ("1 1 0 0 0 1 -1\n2 1 0 0 0 1 2\n", "bad.swc:2: sample 2 is its own parent"),
        ("1 1 0 0 0 1 -1\n2 1 0 0 0 1 9\n", "bad.swc:2: sample 2 names parent 9"),
    ],
)
def test_swc_errors_name_file_and_line(tmp_path, text, message):
    from zarr_vectors.io.swc import read_swc

    (tmp_path / "bad.swc").write_text(text)
    with pytest.raises(InputError, match=message):
        read_swc(tmp_path / "bad.swc")


@pytest.mark.slow
def test_mesh_with_nan_names_the_file(tmp_path):
    folder = tmp_path / "meshes"
    folder.mkdir()
    trimesh.creation.icosphere(1).export(folder / "a.ply")
    v = trimesh.creation.box().vertices.copy()
    v[2, 1] = np.nan
    (folder / "b.obj").write_text("".join(f"v {x} {y} {z}\n" for x, y, z in v) + "f 1 2 3\nf 3 4 5\n")
    proc = _run(
        "ingest", "mesh", "meshes", "-o", "m.zarr", "--chunk-size", "1", "--no-progress", cwd=tmp_path
    )
    assert proc.returncode == 2
    assert "meshes/b.obj: the mesh has NaN or infinite vertex coordinates" in _one_error_line(
        proc.stderr, "ingest"
    )


@pytest.mark.slow
def test_geojson_errors_name_the_file_and_feature(tmp_path):
    from zarr_vectors.io.geojson import ingest_vector

    def feature(coords):
        return {
            "type": "Feature",
            "properties": {},
            "geometry": {"type": "LineString", "coordinates": coords},
        }

    doc = {
        "type": "FeatureCollection",
        "features": [feature([[0, 0], [1, 1]]), feature([[0, 0], [float("nan"), 1]])],
    }
    (tmp_path / "nan.geojson").write_text(json.dumps(doc))
    proc = _run("ingest", "geojson", "nan.geojson", "-o", "g.zarr", "--chunk-size", "1", cwd=tmp_path)
    assert proc.returncode == 2
    assert "nan.geojson: feature 1 has NaN or infinite coordinates" in _one_error_line(proc.stderr, "ingest")
    doc["features"][1]["geometry"] = None
    (tmp_path / "none.geojson").write_text(json.dumps(doc))
    with pytest.raises(InputError, match="none.geojson: feature 1 has no geometry"):
        ingest_vector(tmp_path / "g.zarr", tmp_path / "none.geojson", chunk_shape=1)
    bowtie = feature([[0, 0], [1, 1]])
    bowtie["geometry"] = {"type": "Polygon", "coordinates": [[[0, 0], [2, 2], [2, 0], [0, 2], [0, 0]]]}
    doc["features"][1] = bowtie
    (tmp_path / "bowtie.geojson").write_text(json.dumps(doc))
    with pytest.raises(InputError, match=r"^\S*bowtie.geojson: .*1"):  # the writer's refusal, with the file
        ingest_vector(tmp_path / "g.zarr", tmp_path / "bowtie.geojson", chunk_shape=1)
    assert not (tmp_path / "g.zarr").exists()


@pytest.mark.slow
def test_tractogram_with_nan_names_the_file_and_streamline(tmp_path):
    nib = pytest.importorskip("nibabel")
    from nibabel.streamlines import Tractogram

    lines = [
        np.array([[0, 0, 0], [1, 1, 1]], np.float32),
        np.array([[2, 2, 2], [np.nan, 3, 3], [4, 4, 4]], np.float32),
    ]
    nib.streamlines.save(Tractogram(lines, affine_to_rasmm=np.eye(4)), str(tmp_path / "t.tck"))
    proc = _run("ingest", "tck", "t.tck", "-o", "t.zarr", "--chunk-size", "2", cwd=tmp_path)
    assert proc.returncode == 2
    assert "t.tck: streamline 1 has NaN or infinite coordinates (point 1)" in _one_error_line(
        proc.stderr, "ingest"
    )


# ------------------------------------------------------------------ install hints


def _both_ways(text: str, extra: str | None) -> bool:
    if extra is None:
        return "pip install zarrvec," in text and "pip install -e . from a checkout" in text
    return (
        f"pip install 'zarrvec[{extra}]'" in text and f'pip install -e ".[{extra}]" from a checkout' in text
    )


@pytest.mark.parametrize("extra", ["plot", "geo", "tractography", "pyramid", "s3", None])
def test_install_hint_names_the_extra_and_both_ways(extra):
    assert _both_ways(install_hint(extra), extra)


def _blocked(monkeypatch, *modules: str) -> None:
    """Make ``modules`` unimportable in this process (``import`` raises ImportError)."""
    for m in modules:
        monkeypatch.setitem(sys.modules, m, None)


def test_every_hint_site_uses_the_wording(monkeypatch, tmp_path):
    from zarr_vectors import _draco, geo, plot
    from zarr_vectors.io import geojson, tractography
    from zarr_vectors.pyramid import meshes

    cases = [
        (lambda: plot._require_matplotlib(), ["matplotlib"], "plot"),
        (lambda: geo.parse_crs("EPSG:4326").to_pyproj(), ["pyproj"], "geo"),
        (lambda: geojson.read_vector_file(tmp_path / "x.gpkg"), ["pyogrio"], "geo"),
        (lambda: tractography._require("nibabel"), ["nibabel"], "tractography"),
        (lambda: meshes._simplifier(), ["fast_simplification"], "pyramid"),
        (lambda: _draco.require_codec(), ["zarr_vectors_draco"], None),
    ]
    for call, modules, extra in cases:
        with monkeypatch.context() as m:
            _blocked(m, *modules)
            with pytest.raises((ZarrVectorsError, ImportError)) as info:
                call()
        assert _both_ways(str(info.value), extra), (extra, str(info.value))


@pytest.mark.slow
def test_render_without_matplotlib_is_one_line_with_the_hint(tmp_path):
    _points_store(tmp_path / "cells.zarr")
    code = (
        "import sys; sys.modules['matplotlib'] = None\n"
        "from zarr_vectors.cli import main\n"
        "sys.exit(main(['render', 'cells.zarr', '-o', 'view.png']))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    line = _one_error_line(proc.stderr, "render")
    assert "drawing needs matplotlib" in line and _both_ways(line, "plot")


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["swc", "mesh"])
def test_an_error_while_reading_starts_its_own_line_after_the_progress_bar(tmp_path, kind):
    folder = tmp_path / "in"
    if kind == "swc":
        _swc_folder(folder, 2)
        (folder / "z.swc").write_text("1 1 x 0 0 1 -1\n")
    else:
        folder.mkdir()
        trimesh.creation.icosphere(1).export(folder / "a.ply")
        (folder / "z.ply").write_text("not a mesh")
    proc = _run("ingest", kind, "in", "-o", "x.zarr", "--chunk-size", "10", cwd=tmp_path)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert lines[-1].startswith("zarr-vectors ingest: error: in/z.") and "Traceback" not in proc.stderr
