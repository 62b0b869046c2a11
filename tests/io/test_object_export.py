"""Object-by-object exports (:mod:`zarr_vectors.io.object_export`): the same files as the
whole-result exports, with a bounded number of objects read per batch."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import zarr_vectors as zv
from zarr_vectors.errors import InputError
from zarr_vectors.io.export import export_result
from zarr_vectors.io.object_export import OBJECT_STREAM_FORMATS, export_objects

BATCH = 7  # objects per batch: every store below needs several


def _lines(path: Path) -> zv.Dataset:
    rng = np.random.default_rng(5)
    lines = [np.cumsum(rng.normal(0, 3, (int(rng.integers(2, 9)), 3)), axis=0) + 50 for _ in range(40)]
    return zv.write_lines(
        path,
        lines,
        chunk_shape=10,
        object_ids=rng.permutation(1000)[:40],
        attributes={"t": [rng.uniform(0, 1, len(v)).astype(np.float32) for v in lines]},
        object_attributes={"rank": np.arange(40)},
    )


def _skeletons(path: Path) -> zv.Dataset:
    rng = np.random.default_rng(6)
    pos, parents, ids = [], [], []
    for k in range(25):
        n = int(rng.integers(1, 12))
        par = np.array([-1] + [int(rng.integers(0, i)) for i in range(1, n)])
        parents.append(np.where(par >= 0, par + sum(len(p) for p in pos), -1))
        pos.append(rng.uniform(0, 60, (n, 3)))
        ids.append(np.full(n, 3 * k + 1))
    return zv.write_skeleton(
        path,
        np.concatenate(pos),
        np.concatenate(parents),
        chunk_shape=15,
        object_ids=np.concatenate(ids),
        attributes={"radius": rng.uniform(0.5, 2, sum(map(len, pos))).astype(np.float32)},
    )


def _meshes(path: Path) -> zv.Dataset:
    import trimesh

    rng = np.random.default_rng(7)
    meshes = []
    for _ in range(15):
        m = trimesh.creation.icosphere(1, radius=float(rng.uniform(1, 4)))
        meshes.append((np.asarray(m.vertices) + rng.uniform(5, 45, 3), np.asarray(m.faces)))
    return zv.write_meshes(path, meshes, chunk_shape=10, object_ids=np.arange(15) * 10 + 3)


def _shapes(path: Path) -> zv.Dataset:
    import shapely

    rng = np.random.default_rng(8)
    geoms = []
    for i in range(30):
        x, y = rng.uniform(0, 90, 2)
        geoms.append(
            shapely.box(x, y, x + rng.uniform(1, 9), y + rng.uniform(1, 9))
            if i % 3
            else shapely.LineString(rng.uniform(0, 99, (4, 2)))
        )
    return zv.write_geometries(
        path,
        geoms,
        chunk_shape=20,
        crs="EPSG:32633",
        object_attributes={"v": rng.uniform(0, 1, 30), "n": np.arange(30, dtype=np.uint64)},
    )


STORES = {"lines": _lines, "skeletons": _skeletons, "meshes": _meshes, "shapes": _shapes}


def _formats(kind: str) -> list[str]:
    out = [".csv", ".ply", ".obj", ".geojson", ".geojsonl"]
    if kind in ("lines", "skeletons"):
        out.append(".swc")
    if kind == "meshes":  # GeoJSON holds no meshes (to_shapely refuses them)
        out = out[:3]
    if kind == "shapes":
        out.remove(".obj")  # 2-D: OBJ pads z, fine, but one 2-D OBJ case is enough below
    return out


@pytest.fixture(scope="module", params=sorted(STORES))
def store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, zv.Dataset]:
    kind = request.param
    return kind, STORES[kind](tmp_path_factory.mktemp(kind) / "s.zarr")


def _same_file(tmp_path: Path, ds: zv.Dataset, suffix: str, whole: zv.Result, **kw: object) -> None:
    expected, streamed = tmp_path / f"whole{suffix}", tmp_path / f"streamed{suffix}"
    export_result(whole, expected)
    export_objects(ds, streamed, batch=BATCH, progress=False, **kw)  # type: ignore[arg-type]
    linked = whole.faces is not None or whole.edges is not None or whole.parents is not None
    if linked and suffix in (".ply", ".obj"):
        _same_but_link_order(streamed.read_bytes(), expected.read_bytes(), suffix)
    else:
        assert streamed.read_bytes() == expected.read_bytes()


_PLY = {"char": "i1", "uchar": "u1", "short": "<i2", "ushort": "<u2", "int": "<i4", "uint": "<u4"}
_PLY |= {"float": "<f4", "double": "<f8"}


def _ply_blocks(data: bytes) -> tuple[bytes, list[np.ndarray]]:
    """The header and each element's records (faces as triangles: 1 + 3 * 4 bytes)."""
    end = data.index(b"end_header\n") + len(b"end_header\n")
    elements: list[tuple[int, list[tuple[str, str]]]] = []
    for line in data[:end].decode().splitlines():
        words = line.split()
        if words[0] == "element":
            elements.append((int(words[2]), []))
        elif words[0] == "property" and words[1] == "list":
            elements[-1][1].extend([("n", "u1"), ("v", "<i4", 3)])  # type: ignore[list-item]
        elif words[0] == "property":
            elements[-1][1].append((words[2], _PLY[words[1]]))
    blocks, at = [], end
    for count, fields in elements:
        dt = np.dtype(fields)
        blocks.append(np.frombuffer(data, dt, count, at))
        at += count * dt.itemsize
    assert at == len(data)
    return data[:end], blocks


def _same_but_link_order(got: bytes, want: bytes, suffix: str) -> None:
    """Identical but for the order of faces and edges (a read lists them by chunk, a batched
    export batch by batch): vertices the same, in the same order."""
    if suffix == ".obj":
        a, b = got.decode().splitlines(), want.decode().splitlines()
        assert [t for t in a if t[:2] not in ("f ", "l ")] == [t for t in b if t[:2] not in ("f ", "l ")]
        assert sorted(t for t in a if t[:2] in ("f ", "l ")) == sorted(t for t in b if t[:2] in ("f ", "l "))
        return
    (h1, b1), (h2, b2) = _ply_blocks(got), _ply_blocks(want)
    assert h1 == h2 and b1[0].tobytes() == b2[0].tobytes()
    for x, y in zip(b1[1:], b2[1:]):
        assert sorted(r.tobytes() for r in x) == sorted(r.tobytes() for r in y)


def test_objects_byte_identical(store: tuple[str, zv.Dataset], tmp_path: Path) -> None:
    kind, ds = store
    ids = ds.object_ids()
    pick = np.concatenate([ids[::-3], ids[1:5]])  # an order of their own, with repeats
    for suffix in _formats(kind):
        _same_file(tmp_path, ds, suffix, ds.objects(pick), ids=pick)


def test_whole_level_is_every_object_in_spatial_order(store: tuple[str, zv.Dataset], tmp_path: Path) -> None:
    from zarr_vectors.io.object_export import _selected_ids

    kind, ds = store
    order = _selected_ids(ds, None, 0, None, sort=False)
    assert sorted(order.tolist()) == ds.object_ids().tolist()
    for suffix in _formats(kind):
        if suffix in (".geojson", ".geojsonl"):  # features sorted by id within each batch
            continue
        _same_file(tmp_path, ds, suffix, ds.objects(order))


def test_whole_level_has_the_rows_of_a_read(store: tuple[str, zv.Dataset], tmp_path: Path) -> None:
    """In id order rather than storage order: the same CSV rows, and the same GeoJSON."""
    _, ds = store
    export_result(ds.read(), tmp_path / "read.csv")
    export_objects(ds, tmp_path / "streamed.csv", batch=BATCH, progress=False)
    read = (tmp_path / "read.csv").read_text().splitlines()
    streamed = (tmp_path / "streamed.csv").read_text().splitlines()
    assert read[0] == streamed[0]
    names = read[0].split(",")
    drop = [i for i, n in enumerate(names) if n in ("line", "parent")]  # row numbers: order-dependent
    key = [",".join(v for i, v in enumerate(r.split(",")) if i not in drop) for r in read[1:]]
    key2 = [",".join(v for i, v in enumerate(r.split(",")) if i not in drop) for r in streamed[1:]]
    assert sorted(key) == sorted(key2)
    if ds.level(0).root.geometry_types == ("mesh",) or "mesh" in ds.geometry_types:
        return
    export_result(ds.read(), tmp_path / "read.geojson")
    export_objects(ds, tmp_path / "streamed.geojson", batch=BATCH, progress=False)
    read, streamed = (json.loads((tmp_path / f"{n}.geojson").read_text()) for n in ("read", "streamed"))
    streamed["features"].sort(key=lambda f: f["id"])  # spatial order: the same features by id
    assert read == streamed


@pytest.mark.parametrize("kind", ["lines", "skeletons", "shapes"])
def test_box_whole_objects_byte_identical(kind: str, tmp_path: Path) -> None:
    ds = STORES[kind](tmp_path / "s.zarr")
    lo, hi = ds.bounds
    mid = (lo + hi) / 2
    box = (lo + (mid - lo) * 0.3, mid + (hi - mid) * 0.2)
    whole = ds.query(box, whole_objects=True)
    assert 0 < len(np.unique(whole.object_ids)) < ds.num_objects()
    for suffix in _formats(kind):
        _same_file(tmp_path, ds, suffix, whole, bbox=box)


def test_batches_are_bounded(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    ds = _lines(tmp_path / "s.zarr")
    asked: list[int] = []
    real = zv.Dataset.objects

    def counted(self: zv.Dataset, ids: object, **kw: object) -> zv.Result:
        asked.append(len(np.atleast_1d(np.asarray(ids))))
        return real(self, ids, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(zv.Dataset, "objects", counted)
    vertices, objects = export_objects(ds, tmp_path / "out.csv", batch=BATCH, progress=False)
    assert objects == 40 and vertices == ds.vertex_count()
    reads = [n for n in asked if n]  # the empty template read aside
    assert max(reads) <= BATCH and sum(reads) == 40 and len(reads) == -(-40 // BATCH)


def test_two_d_obj_and_empty(tmp_path: Path) -> None:
    ds = _shapes(tmp_path / "s.zarr")
    ids = ds.object_ids()[:10]
    _same_file(tmp_path, ds, ".obj", ds.objects(ids), ids=ids)
    for suffix in OBJECT_STREAM_FORMATS:
        if suffix in (".swc", ".gpkg", ".fgb"):  # no trees; OGR files: compared parsed below
            continue
        _same_file(tmp_path, ds, suffix, ds.objects(ids[:0]), ids=ids[:0])


def test_refusals(tmp_path: Path) -> None:
    ds = _meshes(tmp_path / "m.zarr")
    with pytest.raises(InputError, match="object by object"):
        export_objects(ds, tmp_path / "x.glb", progress=False)
    with pytest.raises(InputError, match="lines, graphs"):
        export_objects(ds, tmp_path / "x.csv", bbox=([0, 0, 0], [9, 9, 9]), progress=False)
    with pytest.raises(KeyError):
        export_objects(ds, tmp_path / "x.csv", ids=[999999], progress=False)
    with pytest.raises(InputError, match="SWC"):
        export_objects(ds, tmp_path / "x.swc", progress=False)
    assert not list(tmp_path.glob("*.swc")) and not list(tmp_path.glob(".*zv-part*"))


def test_cli_query_streams_whole_objects(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from zarr_vectors.cli import main
    from zarr_vectors.io.object_export import _selected_ids

    ds = _skeletons(tmp_path / "sk.zarr")
    ids = ds.object_ids()
    store = str(tmp_path / "sk.zarr")
    runs = {
        "some.swc": (["--objects", str(ids[4]), str(ids[1])], ds.objects(ids[[4, 1]])),
        "all.csv": ([], ds.objects(_selected_ids(ds, None, 0, None, sort=False))),
        "box.geojson": (
            ["--bbox", "0,0,0,30,30,30", "--whole-objects"],
            ds.query(([0] * 3, [30] * 3), whole_objects=True),
        ),
    }
    for name, (extra, whole) in runs.items():
        assert main(["query", store, *extra, "-o", str(tmp_path / name), "--no-progress"]) == 0
        export_result(whole, tmp_path / f"expected-{name}")
        assert (tmp_path / name).read_bytes() == (tmp_path / f"expected-{name}").read_bytes(), name
        assert f"objects to {tmp_path / name}" in capsys.readouterr().out
    # --where reads the result whole, as before
    assert main(["query", store, "--where", "radius > 1", "-o", str(tmp_path / "w.csv")]) == 0
    export_result(ds.read(where="radius > 1"), tmp_path / "expected-w.csv")
    assert (tmp_path / "w.csv").read_bytes() == (tmp_path / "expected-w.csv").read_bytes()


@pytest.mark.parametrize("suffix", [".gpkg", ".fgb"])
def test_ogr_append_has_the_features_of_a_whole_write(suffix: str, tmp_path: Path) -> None:
    import geopandas as gpd
    import pyogrio

    ds = _shapes(tmp_path / "s.zarr")
    ids = ds.object_ids()[3:]
    export_result(ds.objects(ids), tmp_path / f"whole{suffix}")
    export_objects(ds, tmp_path / f"streamed{suffix}", ids=ids[::-1], batch=BATCH, progress=False)
    whole, streamed = (
        gpd.read_file(tmp_path / f"{name}{suffix}").sort_values("object_id").reset_index(drop=True)
        for name in ("whole", "streamed")
    )
    assert list(streamed.columns) == list(whole.columns) and len(whole) == len(ids)
    for name in whole.columns:
        if name == "geometry":
            assert all(a.equals_exact(b, 0) for a, b in zip(whole.geometry, streamed.geometry))
        else:
            assert whole[name].tolist() == streamed[name].tolist(), name
    assert streamed.crs == whole.crs
    assert pyogrio.list_layers(tmp_path / f"streamed{suffix}")[0][0] == "streamed"


def test_ogr_ids_above_int64_are_text_in_every_batch(tmp_path: Path) -> None:
    import geopandas as gpd
    import shapely

    from zarr_vectors.io.vector_export import TextIdsWarning

    big = np.array([5, 2**63 + 9, 7, 2**64 - 2, 11, 12, 13, 14, 15], np.uint64)
    ds = zv.write_geometries(
        tmp_path / "s.zarr", [shapely.Point(i, i) for i in range(9)], chunk_shape=4, object_ids=big
    )
    with pytest.warns(TextIdsWarning, match="object_id"):
        export_objects(ds, tmp_path / "out.gpkg", batch=2, progress=False)
    back = gpd.read_file(tmp_path / "out.gpkg")
    assert sorted(back["object_id"].tolist()) == sorted(str(v) for v in big.tolist())


def test_cli_notes_a_large_whole_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from zarr_vectors.cli import main
    from zarr_vectors.cli import objects as cli_objects

    ds = _lines(tmp_path / "l.zarr")
    monkeypatch.setattr(cli_objects, "LARGE_LEVEL", 10)
    store = str(tmp_path / "l.zarr")
    assert main(["query", store, "--where", "t > 0.5", "-o", str(tmp_path / "some.csv")]) == 0
    assert "written from the whole result" in capsys.readouterr().err
    assert main(["query", store, "-o", str(tmp_path / "all.csv"), "--no-progress"]) == 0
    assert capsys.readouterr().err == ""  # streamed: no note
    assert ds.vertex_count() > 10


def _pieces(res: zv.Result) -> dict[str, object]:
    """A result as sets of rows, edges, faces, parent links and line pieces, each named by
    positions (so that row order does not count)."""
    keys = [tuple(p) for p in res.positions.tolist()]
    ids = [None] * len(res) if res.object_ids is None else res.object_ids.tolist()
    attrs = list(zip(*(np.asarray(v).tolist() for v in res.attributes.values()))) or [()] * len(res)
    out: dict[str, object] = {"rows": sorted(zip(keys, ids, attrs))}
    if res.edges is not None:
        out["edges"] = sorted((keys[a], keys[b]) for a, b in res.edges.tolist())
    if res.faces is not None:
        out["faces"] = sorted(tuple(sorted(keys[v] for v in f)) for f in res.faces.tolist())
    if res.parents is not None:
        out["parents"] = sorted(
            (keys[c], None if p < 0 else keys[p]) for c, p in enumerate(res.parents.tolist())
        )
    if res.line_offsets is not None:
        o = res.line_offsets.tolist()
        out["lines"] = sorted(tuple(keys[o[i] : o[i + 1]]) for i in range(len(o) - 1))
    return out


@pytest.mark.parametrize("kind", sorted(STORES))
def test_box_cut_to_pieces_equals_the_query(kind: str, tmp_path: Path) -> None:
    from zarr_vectors.io.object_export import _selected_ids, object_batches

    ds = STORES[kind](tmp_path / "s.zarr")
    lo, hi = ds.bounds
    box = (lo + (hi - lo) * 0.25, lo + (hi - lo) * 0.7)
    whole = ds.query(box)
    ids = _selected_ids(ds, None, 0, box, sort=False, cut=True)
    parts = list(object_batches(ds, ids, bbox=box, cut=True, batch=BATCH))
    assert len(parts) > 1 and 0 < len(whole) < ds.vertex_count()
    got: dict[str, list[object]] = {}
    for part in parts:
        for key, values in _pieces(part).items():
            got.setdefault(key, []).extend(values)  # type: ignore[arg-type]
    assert {k: sorted(v, key=repr) for k, v in got.items()} == {
        k: sorted(v, key=repr)  # type: ignore[call-overload]
        for k, v in _pieces(whole).items()
    }
    streamed, expected = tmp_path / "cut.csv", tmp_path / "whole.csv"
    export_objects(ds, streamed, bbox=box, cut=True, batch=BATCH, progress=False)
    export_result(whole, expected)
    a, b = streamed.read_text().splitlines(), expected.read_text().splitlines()
    assert a[0] == b[0]
    names = a[0].split(",")
    drop = [i for i, n in enumerate(names) if n in ("line", "parent")]  # row numbers: order-dependent
    cells = [
        sorted(",".join(v for i, v in enumerate(r.split(",")) if i not in drop) for r in rows[1:])
        for rows in (a, b)
    ]
    assert cells[0] == cells[1]


@pytest.mark.parametrize("kind", ["lines", "skeletons", "shapes"])
def test_box_features_are_whole_objects_byte_identical(kind: str, tmp_path: Path) -> None:
    """GeoJSON features of a box query are its objects whole: streamed exactly, cut or not."""
    ds = STORES[kind](tmp_path / "s.zarr")
    lo, hi = ds.bounds
    box = (lo + (hi - lo) * 0.25, lo + (hi - lo) * 0.7)
    for suffix in (".geojson", ".geojsonl"):
        _same_file(tmp_path, ds, suffix, ds.query(box), bbox=box, cut=True)


def test_cli_streams_a_large_box_cut_to_pieces(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from zarr_vectors.cli import main
    from zarr_vectors.cli import objects as cli_objects

    ds = _lines(tmp_path / "l.zarr")
    store, box = str(tmp_path / "l.zarr"), ([40.0] * 3, [60.0] * 3)
    text = "40,40,40,60,60,60"
    assert main(["query", store, "--bbox", text, "-o", str(tmp_path / "small.csv")]) == 0
    assert "objects to" not in capsys.readouterr().out  # small: read whole, in the query's order
    export_result(ds.query(box), tmp_path / "expected.csv")
    assert (tmp_path / "small.csv").read_bytes() == (tmp_path / "expected.csv").read_bytes()
    monkeypatch.setattr(cli_objects, "LARGE_LEVEL", 10)
    assert main(["query", store, "--bbox", text, "-o", str(tmp_path / "large.csv"), "--no-progress"]) == 0
    assert "objects to" in capsys.readouterr().out
    rows = [
        sorted(",".join(r.split(",")[:4] + r.split(",")[5:]) for r in p.read_text().splitlines()[1:])
        for p in (tmp_path / "large.csv", tmp_path / "expected.csv")
    ]
    assert rows[0] == rows[1]  # x,y,z,object_id,line,t: the same rows but for the line numbers
    assert main(["query", store, "--bbox", text, "-o", str(tmp_path / "f.geojson"), "--no-progress"]) == 0
    export_result(ds.query(box), tmp_path / "expected.geojson")
    assert (tmp_path / "f.geojson").read_bytes() == (tmp_path / "expected.geojson").read_bytes()
