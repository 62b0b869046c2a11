"""validate() on good stores, its report, its error paths, other backends, and the command."""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pytest
import zarr

import zarr_vectors as zv
from zarr_vectors.cli import main
from zarr_vectors.validate import MAX_LEVEL, RULES, Problem, Report, validate

from .conftest import attrs, cells, edit_json, payload, set_payload

KINDS = ["points", "points_plain", "lines", "graph", "skeleton", "mesh", "draco"]


@pytest.mark.parametrize("kind", KINDS)
def test_our_stores_are_valid_without_warnings(kind, pristine):
    report = validate(pristine(kind))
    assert report.ok, str(report)
    assert report.warnings == []
    assert report.level == MAX_LEVEL
    tables = ("object_index", "groups", "object_attributes", "group_attributes")
    spatial = [f for f in pristine(kind).rglob("*") if f.is_file() and f.name != "zarr.json" and "c" in f.relative_to(pristine(kind)).parts
               and f.relative_to(pristine(kind)).parts[1] not in tables]  # fmt: skip
    assert report.cells_checked == len(spatial) > 0


def test_all_kinds_of_lines_are_valid(tmp_path, rng):
    for kind in ("polyline", "streamline", "line"):
        data = rng.uniform(0, 300, (12, 2, 3)) if kind == "line" else [rng.uniform(0, 300, (9, 3)) for _ in range(5)]
        zv.write_lines(tmp_path / kind, data, chunk_shape=100, kind=kind)
        assert validate(tmp_path / kind).ok, kind


def test_every_problem_is_collected_not_just_the_first(copy_of):
    store = copy_of("points")
    edit_json(store, "", lambda d: attrs(d)["zarr_vectors"].update(links_convention="zigzag", zv_version="0.7.1"))
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
    assert "0/zarr.json: vertex_count is 7 but the vertices cells hold 200 rows [consistency.vertex-count]" in text
    doc = json.loads(report.to_json())
    assert doc["ok"] is False and doc["problems"][0]["rule"] == "consistency.vertex-count"
    assert doc["problems"][0]["level"] == 3 and not bool(report)


def test_warnings_do_not_fail(copy_of):
    store = copy_of("points")
    edit_json(store, "", lambda d: attrs(d)["zarr_vectors"].update(future_key=1, format_capabilities=["fragment_index", "x_new"]))
    (store / "0/notes").mkdir()
    (store / "0/notes/zarr.json").write_text(json.dumps({"zarr_format": 3, "node_type": "group", "attributes": {}}))
    report = validate(store)
    assert report.ok
    assert {w.rule for w in report.warnings} == {"metadata.unknown-key", "metadata.capabilities", "structure.unknown-node"}


def test_arrays_present_naming_an_absent_family_warns(copy_of):
    store = copy_of("points")
    edit_json(store, "0", lambda d: attrs(d)["zarr_vectors_level"]["arrays_present"].append("link_fragments"))
    report = validate(store)
    assert report.ok
    assert [(w.rule, w.path) for w in report.warnings] == [("metadata.arrays-present", "0/zarr.json")]


def test_unsupported_codecs_warn_and_skip_cells(copy_of):
    store = copy_of("points")
    edit_json(store, "0/vertex_attributes/a", lambda d: d["codecs"].append({"name": "crc32c", "configuration": {}}))
    report = validate(store)
    assert report.ok
    assert [w.path for w in report.warnings if w.rule == "metadata.codecs"] == ["0/vertex_attributes/a"]


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
    for cell in cells(store, "0/vertex_attributes/c"):
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
