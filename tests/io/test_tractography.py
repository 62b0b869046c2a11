"""Tractography ingestion: TRK and TCK through nibabel, TRX through trx-python, via API and CLI."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import zarr_vectors as zv
from zarr_vectors.errors import InputError

nib = pytest.importorskip("nibabel")
tmm = pytest.importorskip("trx.trx_file_memmap")


@pytest.fixture
def bundle(rng):
    sl = [
        (np.cumsum(rng.normal(0, 1.5, (int(rng.integers(5, 60)), 3)), axis=0) + 50).astype(np.float32)
        for _ in range(40)
    ]
    fa = [rng.random((len(s), 1)).astype(np.float32) for s in sl]
    w = rng.random((len(sl), 1)).astype(np.float32)
    return sl, fa, w


def _save(kind, path, sl, fa, w):
    from nibabel.streamlines import Tractogram

    if kind == "trk":
        t = Tractogram(sl, data_per_point={"fa": fa}, data_per_streamline={"w": w}, affine_to_rasmm=np.eye(4))
        nib.streamlines.save(
            t,
            str(path),
            header={"dimensions": (100, 100, 100), "voxel_sizes": (1, 1, 1), "voxel_to_rasmm": np.eye(4)},
        )
    elif kind == "tck":
        nib.streamlines.save(Tractogram(sl, affine_to_rasmm=np.eye(4)), str(path))
    else:
        t = Tractogram(sl, data_per_point={"fa": fa}, data_per_streamline={"w": w}, affine_to_rasmm=np.eye(4))
        trx = tmm.TrxFile.from_tractogram(
            t, reference=nib.Nifti1Image(np.zeros((100, 100, 100), np.uint8), np.eye(4))
        )
        trx.groups["left"] = np.array([0, 3, 5], dtype=np.uint32)
        tmm.save(trx, str(path))
        trx.close()


@pytest.mark.parametrize("kind", ["trk", "tck", "trx"])
def test_ingest_keeps_streamlines_and_data(tmp_path, bundle, kind):
    from zarr_vectors.io.tractography import ingest_tractogram

    sl, fa, w = bundle
    src = tmp_path / f"t.{kind}"
    _save(kind, src, sl, fa, w)
    ds = ingest_tractogram(tmp_path / "t.zarr", src, chunk_shape=10)
    assert ds.geometry_types == ("streamline",) and ds.num_objects() == len(sl)
    res = ds.objects(list(range(len(sl))))
    for got, want in zip(res.lines, sl):
        np.testing.assert_allclose(got, want, atol=1e-4)
    if kind != "tck":
        o = res.line_offsets
        np.testing.assert_allclose(res.attributes["fa"][o[7] : o[8]], fa[7][:, 0], atol=1e-6)
        np.testing.assert_allclose(ds.object_attributes("w"), w[:, 0], atol=1e-6)
    if kind == "trx":
        assert ds.group_names() == ["left"] and ds.groups()[0].tolist() == [0, 3, 5]


@pytest.mark.slow
def test_cli_ingests_a_trx_file(tmp_path, bundle):
    _save("trx", tmp_path / "t.trx", *bundle)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "zarr_vectors",
            "ingest",
            "trx",
            "t.trx",
            "-o",
            "t.zarr",
            "--chunk-size",
            "10",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "wrote 40 streamlines" in proc.stdout
    assert zv.open(tmp_path / "t.zarr").num_objects() == 40


def test_unreadable_files(tmp_path):
    from zarr_vectors.io.tractography import read_tractogram

    (tmp_path / "x.trk").write_bytes(b"not a trk file at all")
    with pytest.raises(InputError, match="x.trk: nibabel cannot read it"):
        read_tractogram(tmp_path / "x.trk")
    with pytest.raises(InputError, match="not a tractography file"):
        read_tractogram(tmp_path / "x.vtk")
