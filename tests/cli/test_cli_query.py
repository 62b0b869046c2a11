"""``zarr-vectors query`` / ``info`` / ``render`` run as processes, and the Result exporters.

Every file the command writes is parsed back here and compared exactly with the result
the library returns for the same selection.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import zarr_vectors as zv
from zarr_vectors.cli import build_parser, main
from zarr_vectors.errors import InputError
from zarr_vectors.io.export import export_result, read_npz
from zarr_vectors.io.swc import read_swc
from zarr_vectors.result import Result

PLY_DTYPES = {
    "char": "i1",
    "uchar": "u1",
    "short": "<i2",
    "ushort": "<u2",
    "int": "<i4",
    "uint": "<u4",
    "float": "<f4",
    "double": "<f8",
}


def _run(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "zarr_vectors", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


def read_ply(path: Path) -> dict[str, np.ndarray]:
    """A small binary little-endian PLY reader: element name -> structured array."""
    raw = path.read_bytes()
    head, body = raw.split(b"end_header\n", 1)
    elements: list[tuple[str, int, list[tuple[str, str]]]] = []
    for line in head.decode("ascii").splitlines():
        words = line.split()
        if words[0] == "format":
            assert words[1] == "binary_little_endian"
        elif words[0] == "element":
            elements.append((words[1], int(words[2]), []))
        elif words[0] == "property" and words[1] == "list":
            assert words[2:4] == ["uchar", "int"]
            elements[-1][2].append(("n", "u1"))
            elements[-1][2].append((words[4], ("<i4", 3)))  # type: ignore[arg-type]
        elif words[0] == "property":
            elements[-1][2].append((words[2], PLY_DTYPES[words[1]]))
    out, at = {}, 0
    for name, count, props in elements:
        dt = np.dtype(props)
        out[name] = np.frombuffer(body, dt, count, at)
        at += dt.itemsize * count
    assert at == len(body), "PLY body has bytes after the last element"
    return out


def read_csv(path: Path) -> tuple[list[str], list[list[str]]]:
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    return rows[0], rows[1:]


def column(header: list[str], rows: list[list[str]], name: str, dtype: np.dtype) -> np.ndarray:
    i = header.index(name)
    return np.array([r[i] for r in rows], dtype=np.float64 if dtype.kind == "f" else np.int64).astype(dtype)


# -- stores ----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def stores(tmp_path_factory) -> dict[str, Path]:
    rng = np.random.default_rng(7)
    root = tmp_path_factory.mktemp("cli_query")
    n = 3000
    zv.write_points(
        root / "pts.zarr",
        rng.uniform(-100, 100, (n, 3)).astype(np.float32),
        chunk_shape=50,
        attributes={
            "size": rng.random(n).astype(np.float32),
            "rgb": rng.integers(0, 255, (n, 3)).astype(np.uint8),
        },
        object_ids=rng.integers(0, 40, n),
    )
    lines = [np.cumsum(rng.normal(0, 6, (60, 3)), axis=0) + 50 for _ in range(8)]
    zv.write_lines(
        root / "lines.zarr", lines, chunk_shape=20, attributes={"fa": rng.random(480).astype(np.float32)}
    )
    parents = np.array([-1, 0, 1, 2, 1, 4, -1, 6, 7, 7])
    zv.write_skeleton(
        root / "skel.zarr",
        rng.uniform(0, 100, (10, 3)),
        parents,
        chunk_shape=40,
        object_ids=np.repeat([0, 1], [6, 4]),
        attributes={"radius": rng.random(10).astype(np.float32)},
    )
    pos2 = rng.uniform(0, 10, (50, 2))
    edges = rng.integers(0, 50, (80, 2))
    edges = edges[edges[:, 0] != edges[:, 1]]
    zv.write_graph(
        root / "graph.zarr",
        pos2,
        edges,
        chunk_shape=3,
        edge_attributes={"w": rng.random(len(edges)).astype(np.float32)},
    )
    return {"root": root, **{p.stem: p for p in root.glob("*.zarr")}}


def test_every_subcommand_has_examples_in_its_help():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert {"ingest", "export", "info", "query", "render", "demo"} <= set(sub.choices)
    for name, p in sub.choices.items():
        assert "examples:" in (p.epilog or ""), f"'zarr-vectors {name} --help' has no examples"
        assert f"zarr-vectors {name}" in p.epilog


@pytest.mark.slow
def test_query_box_to_csv_equals_the_library_result(stores):
    box = ([-40, -30, -60], [55, 45, 20])
    out = _run(
        "query", str(stores["pts"]), "--bbox", "-40,-30,-60,55,45,20", "-o", "box.csv", cwd=stores["root"]
    )
    assert out.returncode == 0, out.stderr
    res = zv.open(stores["pts"]).query(box)
    assert f"wrote {len(res):,} vertices" in out.stdout
    header, rows = read_csv(stores["root"] / "box.csv")
    assert header == [
        "x",
        "y",
        "z",
        "object_id",
        *(
            ["size", "rgb_0", "rgb_1", "rgb_2"]
            if list(res.attributes)[0] == "size"
            else ["rgb_0", "rgb_1", "rgb_2", "size"]
        ),
    ]
    assert len(rows) == len(res) > 100
    got = np.column_stack([column(header, rows, a, np.dtype(np.float32)) for a in "xyz"])
    np.testing.assert_array_equal(got, res.positions)  # bit for bit
    np.testing.assert_array_equal(column(header, rows, "object_id", np.dtype(np.int64)), res.object_ids)
    np.testing.assert_array_equal(column(header, rows, "size", np.dtype(np.float32)), res.attributes["size"])
    rgb = np.column_stack([column(header, rows, f"rgb_{c}", np.dtype(np.uint8)) for c in range(3)])
    np.testing.assert_array_equal(rgb, res.attributes["rgb"])


@pytest.mark.slow
def test_query_count_and_attribute_selection(stores):
    ds = zv.open(stores["pts"])
    res = ds.query(([0, 0, 0], [100, 100, 100]))
    out = _run("query", str(stores["pts"]), "--bbox", "0 0 0 100 100 100", "--count", cwd=stores["root"])
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"{len(res):,} vertices, {len(np.unique(res.object_ids))} objects"
    out = _run(
        "query",
        str(stores["pts"]),
        "--bbox=-100,-100,-100,0,0,0",
        "--attributes",
        "size",
        "-o",
        "s.npz",
        cwd=stores["root"],
    )
    assert out.returncode == 0, out.stderr
    back = read_npz(stores["root"] / "s.npz")
    ref = ds.query(([-100] * 3, [0] * 3), attributes=["size"])
    assert list(back.attributes) == ["size"]
    np.testing.assert_array_equal(back.positions, ref.positions)
    np.testing.assert_array_equal(back.attributes["size"], ref.attributes["size"])


@pytest.mark.slow
def test_query_objects_of_lines_to_npz_keeps_every_array(stores):
    out = _run("query", str(stores["lines"]), "--objects", "5", "2", "-o", "two.npz", cwd=stores["root"])
    assert out.returncode == 0, out.stderr
    ref = zv.open(stores["lines"]).objects([5, 2])
    back = read_npz(stores["root"] / "two.npz")
    for name in ("positions", "object_ids", "edges", "line_offsets"):
        np.testing.assert_array_equal(getattr(back, name), getattr(ref, name), err_msg=name)
        assert getattr(back, name).dtype == getattr(ref, name).dtype
    np.testing.assert_array_equal(back.attributes["fa"], ref.attributes["fa"])
    assert back.axes == ("x", "y", "z") and back.parents is None and back.faces is None


@pytest.mark.slow
def test_query_skeleton_object_to_swc(stores):
    out = _run("query", str(stores["skel"]), "--objects", "0", "-o", "n0.swc", cwd=stores["root"])
    assert out.returncode == 0, out.stderr
    ref = zv.open(stores["skel"]).objects([0])
    swc = read_swc(stores["root"] / "n0.swc")

    def edges(pos, parents):
        return sorted((tuple(pos[p]), tuple(pos[c])) for c, p in enumerate(parents) if p >= 0)

    assert len(swc.ids) == len(ref) == 6
    assert edges(swc.positions, swc.parents) == edges(ref.positions, ref.parents)
    assert sorted(swc.radius.tolist()) == sorted(ref.attributes["radius"].tolist())


@pytest.mark.slow
def test_query_graph_box_to_ply_with_edge_attributes(stores):
    out = _run("query", str(stores["graph"]), "--bbox", "2,2,8,9", "-o", "g.ply", cwd=stores["root"])
    assert out.returncode == 0, out.stderr
    ref = zv.open(stores["graph"]).query(([2, 2], [8, 9]))
    ply = read_ply(stores["root"] / "g.ply")
    v, e = ply["vertex"], ply["edge"]
    assert v.dtype.names == ("x", "y", "object_id")
    np.testing.assert_array_equal(np.column_stack([v["x"], v["y"]]), ref.positions)
    np.testing.assert_array_equal(np.column_stack([e["vertex1"], e["vertex2"]]), ref.edges)
    np.testing.assert_array_equal(e["w"], ref.edge_attributes["w"])
    assert len(ref.edges) > 0


@pytest.mark.slow
def test_query_line_box_pieces_to_obj(stores):
    box = ([40, 40, 40], [70, 70, 70])
    out = _run(
        "query", str(stores["lines"]), "--bbox", "40,40,40,70,70,70", "-o", "p.obj", cwd=stores["root"]
    )
    assert out.returncode == 0, out.stderr
    ref = zv.open(stores["lines"]).query(box)
    text = (stores["root"] / "p.obj").read_text().splitlines()
    v = np.array([[float(t) for t in ln.split()[1:]] for ln in text if ln.startswith("v ")])
    np.testing.assert_array_equal(v, ref.positions)
    pieces = [[int(t) - 1 for t in ln.split()[1:]] for ln in text if ln[:2] in ("l ", "p ")]
    o = ref.line_offsets
    assert pieces == [list(range(o[i], o[i + 1])) for i in range(len(o) - 1)]


@pytest.mark.slow
def test_query_errors_exit_2_with_one_line(stores, monkeypatch, capsys):
    cases = [
        (["--bbox", "0,0,0,1,1", "--count"], "has 5 numbers"),
        (["--bbox", "a,b,c,d,e,f", "--count"], "--bbox 'a,b,c,d,e,f'"),
        (["--count", "-o", "x.csv"], "give -o OUTPUT"),
        ([], "give -o OUTPUT"),
        (["-o", "x.xyz"], "cannot tell the output format from 'x.xyz'"),
        (["-o", "x.swc"], "SWC holds trees"),
        (["--storage-options", "{bad", "--count"], "--storage-options is not valid JSON"),
        (["--storage-options", "[1]", "--count"], "must be a JSON object"),
        (["--objects", "1", "--whole-objects", "--count"], "--whole-objects goes with --bbox"),
        (["--attributes", "nope", "--count"], "nope"),
    ]
    out = _run("query", str(stores["pts"]), *cases[0][0], cwd=stores["root"])  # once as a process
    assert (
        out.returncode == 2
        and out.stderr.startswith("zarr-vectors query: error:")
        and cases[0][1] in out.stderr
    )
    monkeypatch.chdir(stores["root"])
    for extra, message in cases[1:]:
        capsys.readouterr()
        assert main(["query", str(stores["pts"]), *extra]) == 2, extra
        err = capsys.readouterr().err
        assert err.startswith("zarr-vectors query: error:") and message in err, (extra, err)


def _geo_store(tmp_path: Path) -> Path:
    pts = np.random.default_rng(1).uniform(0, 1000, (500, 2))
    zv.write_points(tmp_path / "geo.zarr", pts, chunk_shape=250, crs="EPSG:32633")
    return tmp_path / "geo.zarr"


def _check_info(store: Path, json_out: str, text_out: str) -> None:
    """``info --json`` counts every file of the store; the text form names the CRS and arrays."""
    doc = json.loads(json_out)
    on_disk = {
        str(p.relative_to(store)).replace(os.sep, "/"): p.stat().st_size
        for p in store.rglob("*")
        if p.is_file()
    }
    assert doc["bytes_on_disk"] == sum(on_disk.values())
    assert doc["crs"] == zv.open(store).crs is not None
    vertices = next(a for a in doc["arrays"] if a["path"] == "0/vertices")
    cells = {k: s for k, s in on_disk.items() if k.startswith("0/vertices/")}
    assert vertices["stored_chunks"] == len(cells) - 1 == 16
    assert vertices["bytes"] == sum(cells.values())
    assert "CRS " in text_out and "32633" in text_out
    assert "0/vertices" in text_out and "on disk:" in text_out


@pytest.mark.slow
def test_info_lists_arrays_sizes_and_crs(stores, tmp_path):
    store = _geo_store(tmp_path)
    out = _run("info", "geo.zarr", "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    text = _run("info", "geo.zarr", cwd=tmp_path)
    assert text.returncode == 0, text.stderr
    _check_info(store, out.stdout, text.stdout)


def test_info_in_process_lists_arrays_sizes_and_crs(tmp_path, capsys):
    store = _geo_store(tmp_path)
    assert main(["info", str(store), "--json"]) == 0
    json_out = capsys.readouterr().out
    assert main(["info", str(store)]) == 0
    _check_info(store, json_out, capsys.readouterr().out)


def test_python_dash_m_zarr_vectors_is_the_command(monkeypatch, capsys):
    import runpy

    monkeypatch.setattr(sys, "argv", ["zarr-vectors", "--help"])
    monkeypatch.delitem(sys.modules, "zarr_vectors.__main__", raising=False)
    with pytest.raises(SystemExit) as exit_:
        runpy.run_module("zarr_vectors", run_name="__main__")
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: zarr-vectors") and all(c in out for c in ("query", "info", "ingest"))


@pytest.mark.slow
def test_file_url_with_storage_options_and_render(stores):
    url = "file://" + str(stores["pts"])
    out = _run(
        "query", url, "--storage-options", "{}", "--bbox", "0,0,0,50,50,50", "--count", cwd=stores["root"]
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"{len(zv.open(stores['pts']).query(([0] * 3, [50] * 3))):,} vertices")
    pytest.importorskip("matplotlib")
    out = _run(
        "render",
        url,
        "--bbox",
        "0,0,0,50,50,50",
        "--color-by",
        "size",
        "--size",
        "300x200",
        "-o",
        "view.png",
        cwd=stores["root"],
    )
    assert out.returncode == 0, out.stderr
    from matplotlib.image import imread

    img = imread(stores["root"] / "view.png")
    assert img.shape[:2] == (200, 300)
    assert len(np.unique(img.reshape(-1, img.shape[2]), axis=0)) > 20  # something was drawn


@pytest.mark.s3
def test_query_reads_s3_urls_with_storage_options(tmp_path, capsys):
    from storage.s3server import DUMMY_AWS_ENV, start_s3_server

    env = {**os.environ, **DUMMY_AWS_ENV}
    with pytest.MonkeyPatch.context() as mp:
        for k, v in DUMMY_AWS_ENV.items():
            mp.setenv(k, v)
        server = start_s3_server("zv-cli-tests")
        try:
            url = f"{server.url_prefix}/pts.zarr"
            pts = np.random.default_rng(2).uniform(0, 10, (200, 3)).astype(np.float32)
            ds = zv.write_points(url, pts, chunk_shape=5, storage_options=server.storage_options)
            opts = json.dumps(server.storage_options)
            out = _run(
                "query",
                url,
                "--storage-options",
                opts,
                "--bbox",
                "0,0,0,5,5,5",
                "-o",
                "s3.npz",
                cwd=tmp_path,
                env=env,
            )
            assert out.returncode == 0, out.stderr
            np.testing.assert_array_equal(
                read_npz(tmp_path / "s3.npz").positions, ds.query(([0] * 3, [5] * 3)).positions
            )
            assert main(["info", url, "--storage-options", opts, "--json"]) == 0
            doc = json.loads(capsys.readouterr().out)
            assert doc["levels"][0]["vertices"] == 200 and doc["bytes_on_disk"] > 200 * 12
        finally:
            server.stop()


# -- exporters, in process -------------------------------------------------------------------------
FLOATS = st.sampled_from([np.float32, np.float64, np.float16])


@st.composite
def results(draw) -> Result:
    n = draw(st.integers(0, 30))
    d = draw(st.integers(1, 3))
    pos = draw(hnp.arrays(draw(FLOATS), (n, d), elements={"allow_nan": False, "allow_infinity": False}))
    attrs = {
        "a": draw(hnp.arrays(draw(FLOATS), (n,))),
        "i": draw(
            hnp.arrays(
                draw(st.sampled_from([np.int8, np.uint16, np.int32, np.int64])),
                (n,),
                elements={"min_value": 0, "max_value": 100},
            )
        ),
        "m": draw(hnp.arrays(np.uint8, (n, 2))),
    }
    ids = draw(hnp.arrays(np.int64, (n,), elements=st.integers(0, 2**31 - 1)))
    return Result(positions=pos, attributes=attrs, object_ids=ids, axes=tuple("xyz"[:d]))


@settings(max_examples=40, deadline=None)
@given(res=results())
def test_csv_ply_npz_round_trip_exactly(res, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("rt")
    for ext in (".csv", ".ply", ".npz"):
        assert export_result(res, tmp / f"r{ext}") == ext
    back = read_npz(tmp / "r.npz")
    np.testing.assert_array_equal(back.positions, res.positions)
    assert back.positions.dtype == res.positions.dtype
    for k, v in res.attributes.items():
        np.testing.assert_array_equal(back.attributes[k], v)
    header, rows = read_csv(tmp / "r.csv")
    assert header == [*res.axes, "object_id", "a", "i", "m_0", "m_1"]
    for j, name in enumerate(res.axes):
        np.testing.assert_array_equal(column(header, rows, name, res.positions.dtype), res.positions[:, j])
    np.testing.assert_array_equal(column(header, rows, "a", res.attributes["a"].dtype), res.attributes["a"])
    np.testing.assert_array_equal(column(header, rows, "i", res.attributes["i"].dtype), res.attributes["i"])
    v = read_ply(tmp / "r.ply")["vertex"]
    for j, name in enumerate(res.axes):
        np.testing.assert_array_equal(v[name].astype(res.positions.dtype), res.positions[:, j])
    np.testing.assert_array_equal(v["object_id"], res.object_ids)
    np.testing.assert_array_equal(np.column_stack([v["m_0"], v["m_1"]]), res.attributes["m"])
    np.testing.assert_array_equal(v["a"].astype(res.attributes["a"].dtype), res.attributes["a"])


def _mesh() -> Result:
    import trimesh

    m = trimesh.creation.icosphere(1)
    return Result(
        positions=np.asarray(m.vertices, np.float32),
        faces=np.asarray(m.faces, np.int64),
        attributes={"h": np.asarray(m.vertices[:, 2], np.float32)},
        axes=("x", "y", "z"),
    )


def test_mesh_exports_faces_to_ply_obj_and_npz(tmp_path):
    import trimesh

    res = _mesh()
    for ext in (".ply", ".obj", ".npz"):
        export_result(res, tmp_path / f"m{ext}")
    ply = read_ply(tmp_path / "m.ply")
    assert (ply["face"]["n"] == 3).all() and "edge" not in ply
    np.testing.assert_array_equal(ply["face"]["vertex_indices"], res.faces)
    np.testing.assert_array_equal(ply["vertex"]["h"], res.attributes["h"])
    for ext in (".ply", ".obj"):  # an independent reader agrees
        m = trimesh.load(tmp_path / f"m{ext}", process=False)
        np.testing.assert_array_equal(np.asarray(m.vertices, np.float32), res.positions)
        np.testing.assert_array_equal(m.faces, res.faces)
    np.testing.assert_array_equal(read_npz(tmp_path / "m.npz").faces, res.faces)


def test_obj_of_graphs_and_skeletons_has_one_line_per_edge(tmp_path):
    # A skeleton has no ``edges``, only ``parents``: OBJ must still write its (parent, child) pairs.
    pos = np.arange(15, dtype=np.float64).reshape(5, 3)
    graph = Result(pos, edges=np.array([[0, 1], [1, 2], [3, 4]]), axes=("x", "y", "z"))
    skeleton = Result(pos, parents=np.array([-1, 0, 1, 1, -1]), axes=("x", "y", "z"))
    for name, res, want in (
        ("g", graph, [[1, 2], [2, 3], [4, 5]]),
        ("s", skeleton, [[1, 2], [2, 3], [2, 4]]),
    ):
        export_result(res, tmp_path / f"{name}.obj")
        text = (tmp_path / f"{name}.obj").read_text().splitlines()
        assert [[float(t) for t in ln.split()[1:]] for ln in text if ln.startswith("v ")] == pos.tolist()
        assert [[int(t) for t in ln.split()[1:]] for ln in text if ln.startswith("l ")] == want


def test_two_dimensional_obj_is_padded_and_swc_of_lines_is_chains(tmp_path):
    res = Result(
        positions=np.array([[0, 0], [1, 0], [1, 1], [5, 5]], np.float64),
        line_offsets=np.array([0, 3, 4]),
        axes=("x", "y"),
    )
    export_result(res, tmp_path / "l.obj")
    lines = (tmp_path / "l.obj").read_text().splitlines()
    assert lines[1:] == ["v 0.0 0.0 0.0", "v 1.0 0.0 0.0", "v 1.0 1.0 0.0", "v 5.0 5.0 0.0", "l 1 2 3", "p 4"]
    export_result(res, tmp_path / "l.swc")
    swc = read_swc(tmp_path / "l.swc")
    np.testing.assert_array_equal(swc.positions[:, :2], res.positions)
    assert swc.parents.tolist() == [-1, 0, 1, -1]


@pytest.mark.parametrize(
    "res, name, message",
    [
        (Result(positions=np.zeros((2, 4))), "r.obj", "OBJ holds 3-D coordinates and this result has 4 axes"),
        (Result(positions=np.zeros((2, 3))), "r.swc", "SWC holds trees"),
        (Result(positions=np.zeros((1, 3)), object_ids=np.array([2**40])), "r.ply", "outside 32-bit range"),
        (
            Result(positions=np.zeros((1, 2)), attributes={"x": np.zeros(1)}, axes=("x", "y")),
            "r.csv",
            "occur twice",
        ),
        (Result(positions=np.zeros((1, 2)), attributes={"a b": np.zeros(1)}), "r.ply", "contain spaces"),
        (Result(positions=np.zeros((1, 2))), "r.las", "cannot tell the output format from 'r.las'"),
    ],
)
def test_export_errors(tmp_path, res, name, message):
    with pytest.raises(InputError, match=message):
        export_result(res, tmp_path / name)
    assert not (tmp_path / name).exists()


def test_geojson_dispatch(tmp_path):
    res = Result(positions=np.array([[1.0, 2.0], [3.0, 4.0]]), object_ids=np.array([0, 1]), axes=("x", "y"))
    import importlib.util

    if importlib.util.find_spec("zarr_vectors.io.geojson") is None:
        with pytest.raises(InputError, match="GeoJSON export is not available yet"):
            export_result(res, tmp_path / "r.geojson")
        return
    export_result(res, tmp_path / "r.geojson")
    doc = json.loads((tmp_path / "r.geojson").read_text())
    assert doc["type"] == "FeatureCollection" and len(doc["features"]) == 2


@pytest.mark.slow
def test_render_picks_the_level_that_fits_max_vertices(tmp_path):
    pytest.importorskip("matplotlib")
    rng = np.random.default_rng(6)
    zv.write_points(tmp_path / "p.zarr", rng.uniform(0, 8, (30_000, 2)), chunk_shape=4, bin_shape=1)
    zv.open(tmp_path / "p.zarr", mode="r+").build_pyramid([2, 2])
    one = zv.open(tmp_path / "p.zarr").vertex_count(1)
    out = _run("render", "p.zarr", "-o", "a.png", "--max-vertices", str(one), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"drew {one:,} vertices (level 1) to a.png"
    full = _run("render", "p.zarr", "-o", "b.png", cwd=tmp_path)  # 30,000 fit the default budget
    assert full.stdout.strip() == "drew 30,000 vertices to b.png"
