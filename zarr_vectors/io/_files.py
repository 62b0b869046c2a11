"""Expanding the paths a user names into the input files of one format."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from ..errors import InputError

__all__ = ["input_files"]


def input_files(paths: Iterable[str | Path], suffixes: tuple[str, ...], what: str) -> list[Path]:
    """Files named by ``paths``; a folder contributes its files with one of ``suffixes``
    (case-insensitive), sorted by name. A missing path or an empty result is an InputError."""
    paths = list(paths)
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            files += sorted(q for q in p.iterdir() if q.suffix.lower() in suffixes)
        elif p.exists():
            files.append(p)
        else:
            raise InputError(f"{p} does not exist")
    if not files:
        raise InputError(f"no {what} files ({', '.join(suffixes)}) found in {[str(p) for p in paths]}")
    return files
