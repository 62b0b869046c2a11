"""Local stores holding what a store should not: links out of it, devices, FIFOs.

Reads refuse a key that is not a regular file inside the store (``StoreError`` naming
the store and the key) unless ``zv_follow_symlinks`` is given; devices and FIFOs are
always refused and never block. Writes never follow a link out of the store. Reads
that could block or run out of memory before the fix run in a subprocess with limits.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import zarr_vectors as zv
from zarr_vectors.errors import StoreError
from zarr_vectors.storage.local import LocalBackend

PTS = np.random.default_rng(11).uniform(0, 100, (400, 3)).astype(np.float32)


def make_store(path: Path) -> Path:
    zv.write_points(path, PTS, chunk_shape=50)
    return path


def first_cell(store: Path) -> Path:
    return sorted(p for p in (store / "0" / "vertices" / "c").rglob("*") if p.is_file())[0]


def key_of(store: Path, path: Path) -> str:
    return path.relative_to(store).as_posix()


def sorted_rows(a: np.ndarray) -> np.ndarray:
    return a[np.lexsort(a.T)]


def test_cell_linked_to_a_file_outside_is_refused_unless_asked(tmp_path: Path) -> None:
    store = make_store(tmp_path / "s.zarr")
    cell = first_cell(store)
    secret = tmp_path / "secret.bin"
    shutil.move(cell, secret)  # the cell's own bytes, now outside the store
    cell.symlink_to(secret)
    with pytest.raises(StoreError, match=r"is a symbolic link to .*secret\.bin, outside the store") as info:
        zv.open(store).read()
    assert info.value.store == str(store) and info.value.key == key_of(store, cell)
    assert "zv_follow_symlinks" in str(info.value)
    # opting in reads through the link
    ds = zv.open(store, storage_options={"zv_follow_symlinks": True})
    assert np.array_equal(sorted_rows(ds.read().positions), sorted_rows(PTS))


def test_links_inside_the_store_are_read(tmp_path: Path) -> None:
    store = make_store(tmp_path / "s.zarr")
    cells = sorted(p for p in (store / "0" / "vertices" / "c").rglob("*") if p.is_file())
    spare = store / "spare"
    spare.mkdir()
    shutil.move(cells[0], spare / "cell")
    cells[0].symlink_to(os.path.relpath(spare / "cell", cells[0].parent))  # a relative file link
    column = cells[-1].parent
    assert column != cells[0].parent
    shutil.move(column, spare / "column")
    column.symlink_to(spare / "column")  # an absolute directory link
    assert np.array_equal(sorted_rows(zv.open(store).read().positions), sorted_rows(PTS))


def test_directory_linked_outside_is_refused(tmp_path: Path) -> None:
    store = make_store(tmp_path / "s.zarr")
    column = first_cell(store).parent
    outside = tmp_path / "elsewhere"
    shutil.move(column, outside)
    column.symlink_to(outside)
    with pytest.raises(
        StoreError, match=r"directory '0/vertices/c/.*' is a symbolic link to .*elsewhere, outside"
    ):
        zv.open(store).read()
    ds = zv.open(store, storage_options={"zv_follow_symlinks": True})
    assert np.array_equal(sorted_rows(ds.read().positions), sorted_rows(PTS))


_READER = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
import zarr_vectors as zv
try:
    zv.open(sys.argv[1], storage_options={"zv_follow_symlinks": sys.argv[2] == "follow"}).read()
except zv.StoreError as exc:
    print("StoreError", exc.key, "|", exc)
    sys.exit(3)
print("read without error")
"""


def run_reader(store: Path, follow: bool) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _READER, str(store), "follow" if follow else "no"],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("follow", [False, True])
def test_cell_linked_to_dev_zero_is_refused(tmp_path: Path, follow: bool) -> None:
    store = make_store(tmp_path / "s.zarr")
    cell = first_cell(store)
    cell.unlink()
    cell.symlink_to("/dev/zero")
    proc = run_reader(store, follow)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert key_of(store, cell) in proc.stdout
    assert ("is a character device, not a regular file" if follow else "outside the store") in proc.stdout


@pytest.mark.parametrize("where", ["cell", "root"])
def test_fifo_is_refused_without_blocking(tmp_path: Path, where: str) -> None:
    store = make_store(tmp_path / "s.zarr")
    path = first_cell(store) if where == "cell" else store / "zarr.json"
    path.unlink()
    os.mkfifo(path)
    try:
        proc = run_reader(store, True)
    except subprocess.TimeoutExpired:
        pytest.fail("reading a FIFO blocked")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert (
        f"StoreError {key_of(store, path)} |" in proc.stdout
        and "is a FIFO, not a regular file" in proc.stdout
    )


def test_read_is_bounded_by_the_size_fstat_reports(tmp_path: Path) -> None:
    root = tmp_path / "r"
    root.mkdir()
    (root / "k").symlink_to("/proc/self/status")  # a regular file of size 0 that reads as text
    assert os.stat(root / "k").st_size == 0
    assert LocalBackend(root, follow_symlinks=True).get_many(["k"]) == [b""]


def test_writes_never_follow_links_out(tmp_path: Path) -> None:
    root = tmp_path / "r"
    root.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f").write_bytes(b"precious")
    (root / "a").symlink_to(outside)
    (root / "k").symlink_to(outside / "f")
    backend = LocalBackend(root)
    with pytest.raises(
        StoreError, match=r"key 'a/new'.*directory 'a' is a symbolic link to .*outside, outside the store"
    ):
        backend.set_many([("a/new", b"x")])
    backend.set_many([("k", b"new bytes")])  # the link is replaced, its target untouched
    assert not (root / "k").is_symlink() and (root / "k").read_bytes() == b"new bytes"
    assert sorted(os.listdir(outside)) == ["f"] and (outside / "f").read_bytes() == b"precious"
    inside = root / "real"
    inside.mkdir()
    (root / "alias").symlink_to(inside)  # a link that stays inside may be written through
    backend.set_many([("alias/x", b"1")])
    assert (inside / "x").read_bytes() == b"1"


def test_existing_files_are_replaced_not_written_through(tmp_path: Path) -> None:
    """A file hard-linked into another folder keeps its bytes when the key is rewritten."""
    root = tmp_path / "r"
    backend = LocalBackend(root)
    backend.set_many([("d/k", b"old")])
    os.link(root / "d" / "k", tmp_path / "twin")
    backend.set_many([("d/k", b"new")])
    assert (root / "d" / "k").read_bytes() == b"new" and (tmp_path / "twin").read_bytes() == b"old"
    assert os.listdir(root / "d") == ["k"]


def _tree(path: Path) -> dict[str, bytes | None]:
    return {
        p.relative_to(path).as_posix(): (p.read_bytes() if p.is_file() else None) for p in path.rglob("*")
    }


def test_pyramid_rebuild_never_writes_into_a_linked_level_folder(tmp_path: Path) -> None:
    store = make_store(tmp_path / "s.zarr")
    zv.open(store, mode="r+").build_pyramid([2])
    outside = tmp_path / "outside-level"
    shutil.move(store / "1", outside)
    (store / "1").symlink_to(outside)
    before = _tree(outside)
    ds = zv.open(store, mode="r+")
    assert ds.build_pyramid([2, 2], overwrite=True) == [1, 2]
    assert _tree(outside) == before  # not one file written, changed or removed there
    assert not (store / "1").is_symlink() and (store / "1").is_dir()
    report = zv.validate(store)
    assert report.ok, report
    again = zv.open(store)
    assert again.levels == [0, 1, 2]
    assert np.array_equal(sorted_rows(again.read().positions), sorted_rows(PTS))
    assert json.loads((store / "zarr.json").read_text())["attributes"]["zarr_vectors_generation"]
