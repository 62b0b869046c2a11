"""What ``overwrite=True`` may replace (DECISIONS.md item 9), and the leftovers of killed writes.

A target is replaced only when it is absent, empty or a Zarr store; anything else is
refused with an error naming it, and nothing is deleted. The current, home and root
directories (and folders holding them) are never replaced. Staging folders of killed
writers are reported by ``validate`` and removed by the next write to the same target.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr

import zarr_vectors as zv
from zarr_vectors.storage.commit import find_leftovers, protected_reason
from zarr_vectors.storage.resolve import open_backend

from .conftest import kind_param

PTS = np.random.default_rng(3).uniform(0, 100, (300, 3)).astype(np.float32)


def tree(path: Path) -> dict[str, bytes | None]:
    return {
        p.relative_to(path).as_posix(): (p.read_bytes() if p.is_file() else None) for p in path.rglob("*")
    }


def same_points(ds: zv.Dataset, pts: np.ndarray) -> bool:
    got = ds.read().positions
    return got.shape == pts.shape and np.array_equal(got[np.lexsort(got.T)], pts[np.lexsort(pts.T)])


# -- local targets ---------------------------------------------------------------------------
def test_directory_with_other_files_is_refused_and_kept(tmp_path: Path) -> None:
    d = tmp_path / "d"
    d.mkdir()
    (d / "thesis.tex").write_text("\\documentclass{book} years of work")
    (d / "figs").mkdir()
    (d / "figs" / "a.png").write_bytes(b"\x89PNG")
    before = tree(d)
    with pytest.raises(
        zv.StoreExistsError,
        match=r"refusing to overwrite '.*/d': it is not a Zarr store.*nothing was deleted",
    ):
        zv.write_points(d, PTS, chunk_shape=10, overwrite=True)
    assert tree(d) == before
    assert sorted(os.listdir(tmp_path)) == ["d"]  # no staging folder left beside it


@pytest.mark.slow
def test_cli_overwrite_refuses_a_folder_that_is_not_a_store(tmp_path: Path) -> None:
    swc = tmp_path / "n.swc"
    swc.write_text("1 1 0 0 0 1 -1\n2 3 10 0 0 1 1\n3 3 20 5 0 1 2\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / "thesis.tex").write_text("keep me")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "zarr_vectors",
            "ingest",
            "swc",
            str(swc),
            "-o",
            str(out),
            "--chunk-size",
            "50",
            "--overwrite",
            "--no-progress",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode != 0
    assert "not a Zarr store" in proc.stderr and str(out) in proc.stderr
    assert os.listdir(out) == ["thesis.tex"] and (out / "thesis.tex").read_text() == "keep me"
    # and a real store there is replaced
    (out / "thesis.tex").unlink()
    zv.write_points(out, PTS, chunk_shape=50)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "zarr_vectors",
            "ingest",
            "swc",
            str(swc),
            "-o",
            str(out),
            "--chunk-size",
            "50",
            "--overwrite",
            "--no-progress",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert zv.open(out).vertex_count() == 3


@pytest.mark.parametrize("holds_store", [True, False])
def test_current_directory_is_never_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, holds_store: bool
) -> None:
    here = tmp_path / "here"
    if holds_store:
        zv.write_points(here, PTS, chunk_shape=50)
    else:
        here.mkdir()
    before = tree(here)
    monkeypatch.chdir(here)
    for target in (".", str(here), "./"):
        with pytest.raises(zv.StoreExistsError, match="it is the current directory, which is never replaced"):
            zv.write_points(target, PTS + 1, chunk_shape=50, overwrite=True)
    assert tree(here) == before and os.getcwd() == str(here)
    assert sorted(os.listdir(tmp_path)) == ["here"]
    if holds_store:
        assert same_points(zv.open("."), PTS)


def test_home_and_folders_holding_it_or_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home" / "me"
    zv.write_points(home, PTS, chunk_shape=50)  # a store (zarr.json at its root), still never replaced
    monkeypatch.setenv("HOME", str(home))
    with pytest.raises(zv.StoreExistsError, match="it is the home directory"):
        zv.write_points(home, PTS, chunk_shape=50, overwrite=True)
    with pytest.raises(zv.StoreExistsError, match="it is a folder holding the home directory"):
        zv.write_points(tmp_path / "home", PTS, chunk_shape=50, overwrite=True)
    work = tmp_path / "w" / "deep"
    work.mkdir(parents=True)
    (tmp_path / "w" / "zarr.json").write_text("{}")
    monkeypatch.chdir(work)
    with pytest.raises(zv.StoreExistsError, match="a folder holding the current directory"):
        zv.write_points("..", PTS, chunk_shape=50, overwrite=True)
    assert same_points(zv.open(home), PTS) and work.is_dir()


def test_protected_reason() -> None:
    assert protected_reason("/") == "a filesystem root"
    assert protected_reason(os.getcwd()) == "the current directory"
    assert protected_reason(os.path.expanduser("~")) in ("the home directory", "the current directory")
    assert protected_reason(os.path.join(os.getcwd(), "surely-not-here.zarr")) is None


def test_files_at_the_target(tmp_path: Path) -> None:
    note = tmp_path / "note.zarr"
    note.write_text("not a store")
    with pytest.raises(zv.StoreExistsError, match="already exists"):
        zv.write_points(note, PTS, chunk_shape=50)
    with pytest.raises(zv.StoreExistsError, match="not a Zarr store"):
        zv.write_points(note, PTS, chunk_shape=50, overwrite=True)
    assert note.read_text() == "not a store"
    empty = tmp_path / "empty.zarr"
    empty.write_bytes(b"")
    assert same_points(zv.write_points(empty, PTS, chunk_shape=50), PTS)  # an empty file is replaced
    other_zip = tmp_path / "photos.zip"
    with zipfile.ZipFile(other_zip, "w") as zf:
        zf.writestr("a.jpg", b"jpeg")
    before = other_zip.read_bytes()
    with pytest.raises(zv.StoreExistsError, match="not a Zarr store"):
        zv.write_points(other_zip, PTS, chunk_shape=50, overwrite=True)
    assert other_zip.read_bytes() == before
    store_zip = tmp_path / "s.zip"
    zv.write_points(store_zip, PTS, chunk_shape=50)
    assert same_points(zv.write_points(store_zip, PTS + 1, chunk_shape=50, overwrite=True), PTS + 1)


def test_symlinked_target_is_written_where_it_points(tmp_path: Path) -> None:
    real = tmp_path / "disk" / "s.zarr"
    zv.write_points(real, PTS, chunk_shape=50)
    link = tmp_path / "s.zarr"
    link.symlink_to(real)
    zv.write_points(link, PTS + 2, chunk_shape=50, overwrite=True)
    assert link.is_symlink() and same_points(zv.open(real), PTS + 2)
    assert sorted(os.listdir(tmp_path / "disk")) == ["s.zarr"]


# -- in-place targets ------------------------------------------------------------------------
@pytest.mark.parametrize("kind", [kind_param("memory_store"), kind_param("s3_url")])
def test_in_place_target_that_is_not_a_store_is_refused(make_target: Any, kind: str) -> None:
    t = make_target(kind)
    backend = open_backend(t.target, read_only=False, storage_options=t.storage_options)
    backend.set_many([("notes.txt", b"mine"), ("data/x.bin", b"\x00\x01")])
    with pytest.raises(zv.StoreExistsError, match="not a Zarr store .*nothing was deleted"):
        t.write(PTS, overwrite=True)
    assert sorted(backend.list_keys()) == ["data/x.bin", "notes.txt"]
    assert backend.get_many(["notes.txt"]) == [b"mine"]


def test_in_place_zarr_v2_store_can_be_overwritten() -> None:
    store = zarr.storage.MemoryStore()
    zarr.create_group(store, zarr_format=2)
    assert same_points(zv.write_points(store, PTS, chunk_shape=50, overwrite=True), PTS)


# -- leftovers of killed writes ---------------------------------------------------------------
def _fake_stage(parent: Path, name: str, mb: int = 1) -> Path:
    stage = parent / name
    (stage / "0" / "vertices" / "c").mkdir(parents=True)
    (stage / "0" / "vertices" / "c" / "0").write_bytes(b"\x00" * (mb << 20))
    return stage


def test_leftovers_are_reported_and_removed_by_the_next_write(tmp_path: Path) -> None:
    store = tmp_path / "s.zarr"
    zv.write_points(store, PTS, chunk_shape=50)
    dead = [
        _fake_stage(tmp_path, ".s.zarr.zv-tmp-0123456789ab"),
        _fake_stage(tmp_path, ".s.zarr.zv-old-89abcdef"),
    ]
    (tmp_path / ".s.zarr.zv-tmp-00000000beef").write_bytes(b"PK half a zip")  # a killed zip write
    dead.append(tmp_path / ".s.zarr.zv-tmp-00000000beef")
    kept = [
        _fake_stage(tmp_path, ".t.zarr.zv-tmp-0123456789ab"),  # another target's
        _fake_stage(tmp_path, ".s.zarr.zv-tmp-notourname"),  # not our name pattern
        _fake_stage(tmp_path, "s.zarr.zv-tmp-0123456789ab"),  # not hidden: not ours
    ]
    live = _fake_stage(tmp_path, ".s.zarr.zv-tmp-aaaaaaaaaaaa")  # a writer still running holds its lock
    fd = os.open(live, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    try:
        assert sorted(find_leftovers(store)) == sorted(dead)
        report = zv.validate(store)
        assert report.ok
        warned = sorted(w.path for w in report.warnings if w.rule == "structure.leftovers")
        assert warned == sorted(f"../{p.name}" for p in dead)
        assert all("was left by a write that was killed" in w.message for w in report.warnings)

        zv.write_points(store, PTS + 1, chunk_shape=50, overwrite=True)
        assert not any(p.exists() for p in dead)
        assert all(p.exists() for p in kept) and live.exists()
        assert same_points(zv.open(store), PTS + 1)
        # a write to another target leaves this target's leftovers alone
        again = _fake_stage(tmp_path, ".s.zarr.zv-tmp-bbbbbbbbbbbb")
        zv.write_points(tmp_path / "u.zarr", PTS, chunk_shape=50)
        assert again.exists()
    finally:
        os.close(fd)
    assert [w.rule for w in zv.validate(store).warnings].count(
        "structure.leftovers"
    ) == 2  # live one is dead now
