"""validate() on good stores, its report, its error paths, other backends, and the command."""

from __future__ import annotations

import json
import shutil
import zipfile

import numpy as np
import pytest
import shapely
import zarr

import zarr_vectors as zv
from tests.shards._craft import read_index
from zarr_vectors.cli import main
from zarr_vectors.format.shards import parse_sharding
from zarr_vectors.storage.zarr_store import ZarrStoreBackend
from zarr_vectors.validation import MAX_LEVEL, RULES, Problem, Report, validate

from .conftest import attrs, cells, edit_json, payload, set_payload

KINDS = ["points", "points_plain", "points_geo", "lines", "graph", "skeleton", "mesh", "draco"]
KINDS += [f"{k}_sharded" for k in KINDS]


def _stored_cells(files: list, root) -> int:
    """Cells stored in ``files`` (spatial chunk files): one per file of an unsharded array, the
    non-empty index entries of each shard of a sharded one."""
    n = 0
    for f in files:
        parts = f.relative_to(root).parts
        array = root.joinpath(*parts[: parts.index("c")])
        layout = parse_sharding("", json.loads((array / "zarr.json").read_text()))
        if layout is None:
            n += 1
        else:
            n += int(np.sum(read_index(f, layout.n_inner)[1][:, 0] != np.uint64(2**64 - 1)))
    return n


@pytest.mark.parametrize("kind", KINDS)
def test_our_stores_are_valid_without_warnings(kind, pristine):
    report = validate(pristine(kind))
    assert report.ok, str(report)
    assert report.warnings == []
    assert report.level == MAX_LEVEL
    tables = ("object_index", "groups", "object_attributes", "group_attributes")
    spatial = [
        f
        for f in pristine(kind).rglob("*")
        if f.is_file()
        and f.name != "zarr.json"
        and "c" in f.relative_to(pristine(kind)).parts
        and f.relative_to(pristine(kind)).parts[1] not in tables
    ]
    assert report.cells_checked == _stored_cells(spatial, pristine(kind)) > 0
    vertices = json.loads((pristine(kind) / "0/vertices/zarr.json").read_text())
    assert kind.endswith("_sharded") == (parse_sharding("", vertices) is not None)  # the layout asked for


def test_all_kinds_of_lines_are_valid(tmp_path, rng):
    for kind in ("polyline", "streamline", "line"):
        data = (
            rng.uniform(0, 300, (12, 2, 3))
            if kind == "line"
            else [rng.uniform(0, 300, (9, 3)) for _ in range(5)]
        )
        zv.write_lines(tmp_path / kind, data, chunk_shape=100, kind=kind)
        assert validate(tmp_path / kind).ok, kind


def test_georeferenced_stores_are_valid(tmp_path, rng):
    paths = [shapely.Point(8.5, 47.4), shapely.LineString([(8.4, 47.3), (8.6, 47.5), (8.7, 47.4)])]
    ring = shapely.Polygon([(8.5, 47.3), (8.6, 47.3), (8.6, 47.4), (8.5, 47.3)])
    zv.write_geometries(tmp_path / "paths.zarr", paths, chunk_shape=0.1, crs="EPSG:4326")
    zv.write_geometries(tmp_path / "rings.zarr", [*paths, ring], chunk_shape=0.1, crs="EPSG:4326")
    zv.write_points(
        tmp_path / "utm.zarr",
        rng.uniform([5e5, 49e5, 0], [6e5, 50e5, 900], (300, 3)),
        chunk_shape=20_000,
        crs=32633,
    )
    for name in ("paths.zarr", "rings.zarr", "utm.zarr"):
        root = json.loads((tmp_path / name / "zarr.json").read_text())["attributes"]
        assert "proj:code" in root and "spatial:bbox" in root  # the GeoZarr rule has something to check
        report = validate(tmp_path / name)
        assert report.ok, str(report)
        # 'polygon' is a custom geometry type of the format, but one this library knows: no warning.
        assert report.warnings == [], str(report)


def test_every_geozarr_inconsistency_is_reported(copy_of):
    store = copy_of("points_geo")

    def drift(doc):
        a = attrs(doc)
        a["zarr_conventions"] = a["zarr_conventions"][:1]  # spatial: no longer declared
        a["proj:wkt2"] = 'GEOGCRS["WGS 84"]'  # not in zarr_vectors.crs
        a["spatial:bbox"] = [0.0, 0.0, 1.0, 1.0]
        a["spatial:dimensions"] = ["x", "y"]

    edit_json(store, "", drift)
    report = validate(store)
    hit = [p for p in report.problems if p.rule == "metadata.geozarr"]
    assert report.rules_broken() == {"metadata.geozarr"}, str(report)
    assert len(hit) == 4 and all(p.path == "zarr.json" and p.level == 2 for p in hit)
    messages = "\n".join(p.message for p in hit)
    for words in (
        "does not declare spatial:",
        "proj:wkt2 is 'GEOGCRS",
        "spatial:bbox is [0.0, 0.0, 1.0, 1.0]",
        "spatial:dimensions is ['x', 'y'] but the axes are ['lon', 'lat']",
    ):
        assert words in messages
    assert validate(store, level=1).ok


def test_geozarr_keys_without_a_crs_are_reported(copy_of):
    store = copy_of("points_geo")
    edit_json(store, "", lambda d: attrs(d)["zarr_vectors"].pop("crs"))
    report = validate(store)
    assert report.rules_broken() == {"metadata.geozarr"}
    assert any("proj:code is 'EPSG:4326' but zarr_vectors.crs has None" in p.message for p in report.problems)
    # Dropping the GeoZarr attributes too leaves a valid, non-georeferenced store.
    edit_json(
        store,
        "",
        lambda d: [
            attrs(d).pop(k) for k in ("zarr_conventions", "proj:code", "spatial:bbox", "spatial:dimensions")
        ],
    )
    assert validate(store).ok


def test_malformed_bounds_are_one_rule_not_a_crash(copy_of):
    store = copy_of("points_geo")
    edit_json(store, "", lambda d: attrs(d)["zarr_vectors"].update(bounds="everywhere"))
    report = validate(store, level=2)
    assert report.rules_broken() == {"metadata.root"}, str(report)


def test_every_problem_is_collected_not_just_the_first(copy_of):
    store = copy_of("points")
    edit_json(
        store, "", lambda d: attrs(d)["zarr_vectors"].update(links_convention="zigzag", zv_version="0.7.1")
    )
    for cell in cells(store, "0/vertex_attributes/a")[:3]:
        set_payload(cell, payload(cell)[:-4])
    report = validate(store)
    assert {"metadata.enum", "metadata.version", "cells.attribute-rows"} <= report.rules_broken()
    assert sum(p.rule == "cells.attribute-rows" for p in report.problems) == 3
    paths = {p.path for p in report.problems if p.rule == "cells.attribute-rows"}
    assert all(p.startswith("0/vertex_attributes/a/c/") for p in paths) and len(paths) == 3


def test_report_text_and_json(copy_of):
    store = copy_of("points")
    edit_json(store, "0", lambda d: attrs(d)["zarr_vectors_level"].update(vertex_count=7))
    report = validate(store)
    text = str(report)
    assert "INVALID: 1 problem" in text
    assert (
        "0/zarr.json: vertex_count is 7 but the vertices cells hold 200 rows [consistency.vertex-count]"
        in text
    )
    doc = json.loads(report.to_json())
    assert doc["ok"] is False and doc["problems"][0]["rule"] == "consistency.vertex-count"
    assert doc["problems"][0]["level"] == 3 and not bool(report)


def test_warnings_do_not_fail(copy_of):
    store = copy_of("points")
    edit_json(
        store,
        "",
        lambda d: attrs(d)["zarr_vectors"].update(
            future_key=1, format_capabilities=["fragment_index", "x_new"]
        ),
    )
    (store / "0/notes").mkdir()
    (store / "0/notes/zarr.json").write_text(
        json.dumps({"zarr_format": 3, "node_type": "group", "attributes": {}})
    )
    report = validate(store)
    assert report.ok
    assert {w.rule for w in report.warnings} == {
        "metadata.unknown-key",
        "metadata.capabilities",
        "structure.unknown-node",
    }


def test_arrays_present_naming_an_absent_family_warns(copy_of):
    store = copy_of("points")
    edit_json(store, "0", lambda d: attrs(d)["zarr_vectors_level"]["arrays_present"].append("link_fragments"))
    report = validate(store)
    assert report.ok
    assert [(w.rule, w.path) for w in report.warnings] == [("metadata.arrays-present", "0/zarr.json")]


def test_unsupported_codecs_warn_and_skip_cells(copy_of):
    """A codec zarr knows but this library cannot decode cells with is a warning, and those
    cells are skipped; a codec it reads (bz2) that the cells were not written with is damage."""
    store = copy_of("points")
    edit_json(
        store,
        "0/vertex_attributes/a",
        lambda d: d["codecs"].append({"name": "transpose", "configuration": {"order": [0]}}),
    )
    report = validate(store)
    assert report.ok, str(report)
    assert [w.path for w in report.warnings if w.rule == "metadata.codecs"] == ["0/vertex_attributes/a"]
    edit_json(
        store,
        "0/vertex_attributes/a",
        lambda d: d["codecs"].__setitem__(-1, {"name": "numcodecs.bz2", "configuration": {"level": 1}}),
    )
    report = validate(store)
    assert {p.rule for p in report.problems} == {"cells.decode"}
    assert {p.path.rsplit("/c/", 1)[0] for p in report.problems} == {"0/vertex_attributes/a"}


def test_level_one_reads_no_cells(copy_of):
    store = copy_of("points")
    set_payload(cells(store, "0/vertices")[0], b"\x00")
    assert validate(store, level=1).ok and validate(store, level=1).cells_checked == 0
    assert not validate(store, level=3).ok


@pytest.mark.parametrize("level", [0, 6, "3"])
def test_bad_level_is_refused(level, pristine):
    with pytest.raises(ValueError, match="level must be an integer from 1 to 5"):
        validate(pristine("points"), level=level)


def test_missing_target_raises(tmp_path):
    with pytest.raises(FileNotFoundError, match="no store at"):
        validate(tmp_path / "nothing.zarr")


def test_zarr_v2_store_raises(tmp_path):
    zarr.open_group(tmp_path / "v2.zarr", mode="w", zarr_format=2)
    with pytest.raises(zv.ZarrV2StoreError, match="Zarr v2"):
        validate(tmp_path / "v2.zarr")


def test_plain_zarr_group_is_reported(tmp_path):
    zarr.open_group(tmp_path / "plain.zarr", mode="w")
    report = validate(tmp_path / "plain.zarr")
    assert [p.rule for p in report.problems] == ["structure.zv-block"]


def test_empty_directory_is_reported(tmp_path):
    (tmp_path / "empty").mkdir()
    assert [p.rule for p in validate(tmp_path / "empty").problems] == ["structure.root"]


def test_zip_and_memory_stores(tmp_path, pristine):
    zpath = tmp_path / "pts.zip"
    with zipfile.ZipFile(zpath, "w") as zf:
        for f in pristine("points").rglob("*"):
            if f.is_file():
                zf.write(f, f.relative_to(pristine("points")).as_posix())
    assert validate(zpath).ok
    store = zarr.storage.MemoryStore()
    zv.write_points(store, np.random.default_rng(1).uniform(0, 10, (50, 2)), chunk_shape=5)
    report = validate(store)
    assert report.ok and report.cells_checked > 0


def test_many_problems_are_capped(copy_of):
    store = copy_of("points")
    for cell in cells(store, "0/vertex_attributes/rgb"):
        set_payload(cell, b"")
    report = validate(store)
    hits = [p for p in report.problems if p.rule == "cells.attribute-rows"]
    assert len(hits) <= 51
    assert all(isinstance(p, Problem) for p in report.problems)


def test_rule_catalogue_is_consistent():
    assert all(1 <= lv <= MAX_LEVEL and text for lv, text in RULES.values())
    assert isinstance(Report("x", 5), Report) and Report("x", 5).ok


# ------------------------------------------------------------------ the command


def test_cli_valid_store(pristine, capsys):
    assert main(["validate", str(pristine("graph")), "--no-progress"]) == 0
    assert ": valid (" in capsys.readouterr().out


def test_cli_invalid_store_lists_problems(copy_of, capsys):
    store = copy_of("points")
    (store / "0/vertex_fragments/zarr.json").unlink()
    shutil.rmtree(store / "0/vertex_fragments")
    edit_json(store, "0", lambda d: attrs(d)["zarr_vectors_level"].update(vertex_count=1, level=4))
    assert main(["validate", str(store), "--no-progress"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert f"{store}: INVALID: " in lines[0]
    assert "[structure.vertices]" not in "\n".join(lines)
    assert any("[metadata.level]" in ln and ln.strip().startswith("error   L2 0/zarr.json") for ln in lines)
    assert any("[consistency.vertex-count]" in ln for ln in lines)


def test_cli_json_and_level(copy_of, capsys):
    store = copy_of("points")
    edit_json(store, "0", lambda d: attrs(d)["zarr_vectors_level"].update(vertex_count=1))
    assert main(["validate", str(store), "--json", "--level", "2"]) == 0
    assert json.loads(capsys.readouterr().out)["ok"] is True
    assert main(["validate", str(store), "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["problems"][0]["rule"] == "consistency.vertex-count"


def test_cli_unreadable_target_exits_2(tmp_path, capsys):
    assert main(["validate", str(tmp_path / "missing.zarr")]) == 2
    assert "error: no store at" in capsys.readouterr().err
    zarr.open_group(tmp_path / "v2.zarr", mode="w", zarr_format=2)
    assert main(["validate", str(tmp_path / "v2.zarr")]) == 2
    assert "Zarr v2" in capsys.readouterr().err


@pytest.mark.parametrize("where", ["local", "memory"])
def test_dot_names_are_not_keys_on_any_backend(tmp_path, where):
    """A ``.DS_Store`` or a write's ``.zv-part-`` file is no key: not a loose key, not a cell."""
    pos = np.random.default_rng(3).uniform(0, 100, (50, 3))
    target = tmp_path / "s.zarr" if where == "local" else zarr.storage.MemoryStore()
    zv.write_points(target, pos, chunk_shape=50)
    stray = [(".DS_Store", b"x"), ("0/vertices/c/.0.zv-part-0123abcd", b"y"), (".git/HEAD", b"z")]
    if where == "local":
        for key, value in stray:
            (tmp_path / "s.zarr" / key).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / "s.zarr" / key).write_bytes(value)
    else:
        ZarrStoreBackend(target).set_many(stray)
    report = validate(target)
    assert report.ok and report.warnings == [], str(report)
