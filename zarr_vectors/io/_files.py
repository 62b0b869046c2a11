"""Expanding the paths a user names into the input files of one format."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from zarr_vectors.errors import InputError

__all__ = ["input_files", "collect_files"]


def _matching(folder: Path, suffixes: tuple[str, ...], recursive: bool) -> list[Path]:
    found = folder.rglob("*") if recursive else folder.iterdir()
    return sorted(
        (q for q in found if q.suffix.lower() in suffixes and q.is_file()),
        key=lambda q: q.relative_to(folder).as_posix(),
    )


def collect_files(
    paths: Iterable[str | Path], suffixes: tuple[str, ...], what: str, *, recursive: bool = False
) -> tuple[list[Path], list[Path]]:
    """``(files, skipped)``: the files named by ``paths`` and, without ``recursive``, the
    subfolders left out that hold files of the format.

    A folder contributes its files with one of ``suffixes`` (case-insensitive), sorted by
    name, and with ``recursive`` those of its subfolders too, sorted by relative path.
    A missing path or an empty result is an InputError.
    """
    paths = list(paths)
    files: list[Path] = []
    skipped: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            files += _matching(p, suffixes, recursive)
            if not recursive:
                skipped += sorted(q for q in p.iterdir() if q.is_dir() and _matching(q, suffixes, True))
        elif p.exists():
            files.append(p)
        else:
            raise InputError(f"{p} does not exist")
    if not files:
        where = [str(p) for p in paths]
        more = f"; its subfolders {[str(q) for q in skipped]} have some: add --recursive" if skipped else ""
        raise InputError(f"no {what} files ({', '.join(suffixes)}) found in {where}{more}")
    return files, skipped


def input_files(
    paths: Iterable[str | Path], suffixes: tuple[str, ...], what: str, *, recursive: bool = False
) -> list[Path]:
    """The files of :func:`collect_files`."""
    return collect_files(paths, suffixes, what, recursive=recursive)[0]
