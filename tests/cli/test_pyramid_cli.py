"""The ``zarr-vectors pyramid`` command."""

from __future__ import annotations

import json

import numpy as np

import zarr_vectors as zv
from zarr_vectors.cli import main


def test_pyramid_command(tmp_path, rng, capsys):
    pos = rng.uniform(0, 100, (3000, 3))
    zv.write_points(
        tmp_path / "c.zarr",
        pos,
        chunk_shape=25,
        bin_shape=12.5,
        bounds=([0] * 3, [100] * 3),
        attributes={"i": rng.random(3000)},
        object_ids=rng.integers(0, 9, 3000),
    )
    store = str(tmp_path / "c.zarr")
    assert (
        main(
            [
                "pyramid",
                store,
                "--factors",
                "2",
                "2,2,1",
                "--reduce",
                "i=max",
                "--keep",
                "0.5",
                "--keep-by",
                "size",
                "--cross-level",
                "explicit",
                "--no-progress",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "level 2: " in out and "chunk [100.0, 100.0, 50.0], bin [50.0, 50.0, 25.0]" in out
    ds = zv.open(store)
    assert ds.levels == [0, 1, 2] and len(np.unique(ds.read(level=1).object_ids)) == 4
    lv = json.loads((tmp_path / "c.zarr/1/zarr.json").read_text())["attributes"]["zarr_vectors_level"]
    assert lv["attribute_reductions"] == {"i": "max"} and lv["object_sparsity_strategy"] == "size"
    assert (tmp_path / "c.zarr/1/links/-1").is_dir()
    assert main(["pyramid", store, "--factors", "2"]) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert (
        main(["pyramid", store, "--factors", "4", "--overwrite", "--chunk-scale", "keep", "--no-progress"])
        == 2
    )
    assert "whole multiple of its bin shape" in capsys.readouterr().err
    assert zv.open(store).levels == [0, 1, 2]  # a refused plan leaves the old pyramid alone
    assert (
        main(["pyramid", store, "--factors", "4", "--overwrite", "--chunk-scale", "2", "--no-progress"]) == 0
    )
    ds = zv.open(store)
    assert ds.levels == [0, 1] and ds.level(1).grid.chunk_shape.tolist() == [50.0] * 3
    assert main(["pyramid", store, "--factors", "2", "--reduce", "i", "--overwrite"]) == 2
    assert "NAME=HOW" in capsys.readouterr().err
    assert main(["pyramid", store, "--factors", "2", "--chunk-scale", "x", "--overwrite"]) == 2
    assert "--chunk-scale takes auto, keep or a whole number >= 1, got 'x'" in capsys.readouterr().err
