"""Edits of Draco mesh stores: refused, the store left as it was, and why (issue 31)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import zarr_vectors as zv
from zarr_vectors.errors import InputError

pytest.importorskip("DracoPy")

B = ([0.0, 0.0, 0.0], [8.0, 8.0, 8.0])
REFUSED = (
    "this mesh store is Draco-encoded: Draco quantizes each chunk over the box of its vertices, "
    "so an edit cannot give the positions a write of the final meshes would (those are not "
    "stored); write the meshes again with zarr_vectors.write_meshes, or keep a raw copy and edit that"
)


def _sheet(offset: float, n: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """An n x n sheet of vertices in one 4-unit chunk, two triangles per square."""
    u, v = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    pts = np.stack([u.ravel(), v.ravel(), np.full(n * n, 0.37)], axis=1) * 0.61 + offset
    i = (u[:-1, :-1] * n + v[:-1, :-1]).ravel()
    faces = np.concatenate([np.stack([i, i + n, i + 1], 1), np.stack([i + 1, i + n, i + n + 1], 1)])
    return pts, faces


def _digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _store(tmp_path: Path) -> Path:
    target = tmp_path / "d.zarr"
    meshes = [_sheet(0.2), _sheet(2.1), _sheet(4.3)]
    zv.write_meshes(target, meshes, object_ids=[5, 7, 9], encoding="draco", chunk_shape=4, bounds=B)
    return target


EDITS: dict[str, Any] = {
    "delete": lambda ds: ds.delete([7]),
    "replace": lambda ds: ds.replace([7], [_sheet(1.0)], object_ids=[7]),
    "append": lambda ds: ds.append([_sheet(5.0)], object_ids=[11]),
}


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_draco_edit_refused_store_unchanged(tmp_path: Path, edit: str) -> None:
    target = _store(tmp_path)
    before = _digest(target)
    ds = zv.open(target, mode="r+")
    with pytest.raises(InputError) as info:
        EDITS[edit](ds)
    assert str(info.value) == REFUSED
    assert _digest(target) == before
    again = zv.open(target)
    assert sorted(int(i) for i in again.object_ids()) == [5, 7, 9]


def test_draco_cell_requantizes_when_an_object_goes() -> None:
    """The reason for the refusal: deleting ``b`` shrinks the cell's box, so a one-shot write of
    ``a`` alone decodes ``a``'s vertices elsewhere than the joint cell did; an edit holds only
    the joint cell's decoded rows, not the positions the one-shot write quantizes."""
    from zarr_vectors._draco import decode_cell, encode_cell

    a, b = _sheet(0.2), _sheet(2.1)
    pts = np.concatenate([a[0], b[0]]).astype(np.float32)
    faces = np.concatenate([a[1], b[1] + len(a[0])])

    def decoded(p: np.ndarray, f: np.ndarray) -> np.ndarray:
        blob, order = encode_cell(p, f, quantization_bits=6, compression_level=7)
        rows, _ = decode_cell(blob)
        out = np.empty_like(rows)
        out[order] = rows
        return out

    joint = decoded(pts, faces)[: len(a[0])]
    alone = decoded(a[0].astype(np.float32), a[1])
    step_joint = float((pts.max(axis=0) - pts.min(axis=0)).max()) / 63
    assert np.abs(joint - a[0]).max() <= step_joint  # both are within their own quantization
    assert not np.array_equal(joint, alone)
