"""napari layer data and the npe2 reader contract (no napari, no display needed)."""

from __future__ import annotations

import numpy as np
import pytest

import zarr_vectors as zv
from zarr_vectors.napari_plugin import layer_data, napari_get_reader, read_store


def test_points_reverse_axes_and_carry_features():
    pts = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    res = zv.Result(
        pts,
        {"rgb": np.array([[1, 2, 3], [4, 5, 6]], np.uint8), "w": np.array([0.5, 0.25])},
        object_ids=np.array([7, 2**40], np.uint64),
        axes=("x", "y", "z"),
    )
    ((data, kwargs, kind),) = layer_data(res, name="cells")
    assert kind == "points" and kwargs["name"] == "cells" and kwargs["metadata"]["axes"] == ["z", "y", "x"]
    assert np.array_equal(data, pts[:, ::-1])
    assert list(kwargs["features"]) == ["object_id", "rgb_0", "rgb_1", "rgb_2", "w"]
    assert kwargs["features"]["object_id"].tolist() == [7, 2**40]


def test_lines_are_paths_graphs_vectors_meshes_surfaces():
    lines = [np.array([[0, 0], [1, 0], [2, 1]], float), np.array([[5, 5], [6, 6]], float)]
    ((paths, kw, kind),) = layer_data(zv.write_lines("memory://napari-lines", lines, chunk_shape=4).read())
    assert kind == "shapes" and kw["shape_type"] == "path"
    assert [p.tolist() for p in paths] == [line[:, ::-1].tolist() for line in lines]
    skel = zv.write_skeleton(
        "memory://napari-skel", np.array([[0, 0, 0], [1, 0, 0], [1, 2, 0.0]]), [-1, 0, 1], chunk_shape=4
    ).read()
    (vectors, _, vkind), (_, _, pkind) = layer_data(skel)
    assert (vkind, pkind) == ("vectors", "points") and vectors.shape == (2, 2, 3)
    pos = np.asarray(skel.positions)[:, ::-1]
    ends = vectors[:, 0] + vectors[:, 1]
    pairs = {(tuple(a), tuple(b)) for a, b in zip(vectors[:, 0].tolist(), ends.tolist())}
    assert pairs == {(tuple(pos[i].tolist()), tuple(pos[j].tolist())) for i, j in skel.edges.tolist()}
    mesh = zv.write_mesh(
        "memory://napari-mesh", [[0, 0, 0], [1, 0, 0], [0, 1, 0]], [[0, 1, 2]], chunk_shape=2
    ).read()
    (((verts, faces), _, skind),) = layer_data(mesh)
    assert skind == "surface" and faces.tolist() == [[0, 1, 2]]
    assert np.array_equal(verts, np.asarray(mesh.positions)[:, ::-1])


def test_reader_opens_stores_only_and_fits_the_budget(tmp_path, monkeypatch):
    rng = np.random.default_rng(1)
    zv.write_points(tmp_path / "c.zarr", rng.uniform(0, 8, (20_000, 3)), chunk_shape=4, bin_shape=1)
    zv.open(tmp_path / "c.zarr", mode="r+").build_pyramid([2, 2])
    (tmp_path / "plain").mkdir()
    assert napari_get_reader(str(tmp_path / "plain")) is None
    assert napari_get_reader([str(tmp_path / "c.zarr"), str(tmp_path / "plain")]) is None
    reader = napari_get_reader(str(tmp_path / "c.zarr"))
    ((data, kwargs, _),) = reader([str(tmp_path / "c.zarr")])
    assert len(data) == 20_000 and kwargs["metadata"]["level"] == 0
    monkeypatch.setenv("ZV_NAPARI_MAX_VERTICES", "3000")
    ((small, kwargs, _),) = read_store(tmp_path / "c.zarr")
    assert (
        kwargs["metadata"]["level"] == 1
        and len(small) == zv.open(tmp_path / "c.zarr").vertex_count(1) <= 3000
    )


def test_the_npe2_manifest_names_the_reader():
    npe2 = pytest.importorskip("npe2")
    manifest = npe2.PluginManifest.from_distribution("zarrvec")
    (reader,) = manifest.contributions.readers
    (command,) = [c for c in manifest.contributions.commands if c.id == reader.command]
    assert (
        reader.accepts_directories and command.python_name == "zarr_vectors.napari_plugin:napari_get_reader"
    )
    module, _, func = command.python_name.partition(":")
    import importlib

    assert getattr(importlib.import_module(module), func) is napari_get_reader
