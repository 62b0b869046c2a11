"""Tractography files (TRK and TCK through nibabel, TRX through trx-python) into streamline stores.

Optional: install the ``tractography`` extra. Streamlines are read in world
coordinates (RAS+ millimetres, as nibabel and trx-python return them); per-point
data become vertex attributes, per-streamline data object attributes, and TRX
groups become groups (their names in the ``groups`` array's ``group_names``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from zarr_vectors._extras import needs
from zarr_vectors.engine import positive_numbers
from zarr_vectors.errors import InputError, ZarrVectorsError

if TYPE_CHECKING:
    from zarr_vectors.dataset import Dataset

__all__ = ["Tractogram", "read_tractogram", "ingest_tractogram", "TRACTOGRAPHY_SUFFIXES"]

TRACTOGRAPHY_SUFFIXES = (".trk", ".tck", ".trx")


@dataclass(frozen=True, eq=False)
class Tractogram:
    """Streamlines as flat ``positions`` (V, 3) and ``offsets`` (L + 1,), with their data."""

    positions: np.ndarray
    offsets: np.ndarray
    per_vertex: dict[str, np.ndarray] = field(default_factory=dict)
    per_streamline: dict[str, np.ndarray] = field(default_factory=dict)
    groups: dict[str, np.ndarray] = field(default_factory=dict)


def _flat(seq: Any) -> tuple[np.ndarray, np.ndarray]:
    """Flat data and offsets of a nibabel ArraySequence."""
    lengths = np.fromiter((len(s) for s in seq), np.int64, len(seq))
    offsets = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    data = np.asarray(seq.get_data()) if len(seq) else np.zeros((0, 3), np.float32)
    return data, offsets


def _squeeze(values: np.ndarray) -> np.ndarray:
    return values[:, 0] if values.ndim == 2 and values.shape[1] == 1 else values


def _require(module: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ZarrVectorsError(needs("reading this file", module.split(".")[0], "tractography")) from exc


def _check_finite(path: Path, positions: np.ndarray, offsets: np.ndarray) -> None:
    bad = np.flatnonzero(~np.isfinite(positions).all(axis=1)) if len(positions) else np.zeros(0, np.int64)
    if len(bad):
        line = int(np.searchsorted(offsets, bad[0], "right")) - 1
        raise InputError(
            f"{path}: streamline {line} has NaN or infinite coordinates (point {int(bad[0] - offsets[line])}); "
            f"{len(bad)} such points in the file: fix or drop those streamlines"
        )


def read_tractogram(path: str | Path) -> Tractogram:
    """Read a .trk, .tck or .trx file, with streamlines in world coordinates (RAS+ millimetres).

    Parameters
    ----------
    path
        The file; its extension picks the reader (nibabel for TRK and TCK, trx-python for TRX).

    Returns
    -------
    Tractogram
        ``positions`` (V, 3) and ``offsets`` (L + 1,), per-point data (``per_vertex``),
        per-streamline data (``per_streamline``) and, for TRX, ``groups`` (name -> streamline
        indices).

    Raises
    ------
    InputError
        Not a tractography extension, a path that does not exist, a file the reader cannot
        parse, or NaN or infinite coordinates.
    ZarrVectorsError
        The reader is not installed (extra ``tractography``).

    Examples
    --------
    >>> import tempfile, pathlib, nibabel as nib, numpy as np
    >>> from zarr_vectors.io.tractography import read_tractogram
    >>> lines = [np.array([[0, 0, 0], [1, 1, 1], [2, 2, 2]], "float32"), np.array([[5, 5, 5], [6, 6, 6]], "float32")]
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = pathlib.Path(folder) / "bundle.tck"
    ...     nib.streamlines.save(nib.streamlines.Tractogram(lines, affine_to_rasmm=np.eye(4)), str(path))
    ...     tractogram = read_tractogram(path)
    >>> tractogram.offsets.tolist(), tractogram.positions[3].tolist()
    ([0, 3, 5], [5.0, 5.0, 5.0])
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in TRACTOGRAPHY_SUFFIXES:
        raise InputError(
            f"{path}: not a tractography file (expected one of {', '.join(TRACTOGRAPHY_SUFFIXES)})"
        )
    if not path.exists():
        raise InputError(f"{path} does not exist")
    if suffix == ".trx":
        tmm = _require("trx.trx_file_memmap")
        trx = tmm.load(str(path))
        try:  # copy everything out: the arrays are memory maps that close() unmaps
            positions, offsets = _flat(trx.streamlines)
            _check_finite(path, positions, offsets)
            per_vertex = {k: _squeeze(np.array(_flat(v)[0])) for k, v in trx.data_per_vertex.items()}
            per_sl = {k: _squeeze(np.array(v)) for k, v in trx.data_per_streamline.items()}
            groups = {k: np.array(v, np.int64) for k, v in trx.groups.items()}
            return Tractogram(np.array(positions), offsets, per_vertex, per_sl, groups)
        finally:
            trx.close()
    nib = _require("nibabel")
    errors = _require("nibabel.streamlines.tractogram_file")
    try:
        tfile = nib.streamlines.load(str(path))
    except (OSError, ValueError, EOFError, errors.DataError, errors.HeaderError) as exc:
        raise InputError(f"{path}: nibabel cannot read it ({exc})") from exc
    tg = tfile.tractogram
    positions, offsets = _flat(tg.streamlines)
    _check_finite(path, positions, offsets)
    per_vertex = {k: _squeeze(_flat(v)[0]) for k, v in tg.data_per_point.items()}
    per_sl = {k: _squeeze(np.asarray(v)) for k, v in tg.data_per_streamline.items()}
    return Tractogram(np.array(positions), offsets, per_vertex, per_sl)


def ingest_tractogram(
    target: Any, path: str | Path, *, chunk_shape: Any, overwrite: bool = False, **kwargs: Any
) -> Dataset:
    """Write one tractography file as a ``streamline`` store (streamline i is object i).

    Per-point data become vertex attributes, per-streamline data object attributes, and
    TRX groups become groups (their names in ``group_names``). Axes are in ``millimeter``
    unless ``units`` says otherwise.

    Parameters
    ----------
    target
        Where to write, as in :func:`zarr_vectors.write_points`.
    path
        A .trk, .tck or .trx file (see :func:`read_tractogram`).
    chunk_shape
        Edge length of a spatial chunk, in millimetres: one number or one per axis.
    overwrite
        Replace an existing store.
    **kwargs
        Other keywords of :func:`zarr_vectors.write_lines` (``bounds``, ``units``,
        ``compression``, ...).

    Returns
    -------
    Dataset
        The new store, opened for reading.

    Raises
    ------
    InputError
        A malformed ``chunk_shape``, a file :func:`read_tractogram` refuses, or data that
        cannot be stored as it is (the message names the file).
    StoreExistsError
        ``target`` holds data and ``overwrite`` is false.

    Examples
    --------
    >>> import tempfile, pathlib, nibabel as nib, numpy as np
    >>> from zarr_vectors.io.tractography import ingest_tractogram
    >>> lines = [np.array([[0, 0, 0], [1, 1, 1], [2, 2, 2]], "float32"), np.array([[5, 5, 5], [6, 6, 6]], "float32")]
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = pathlib.Path(folder) / "bundle.tck"
    ...     nib.streamlines.save(nib.streamlines.Tractogram(lines, affine_to_rasmm=np.eye(4)), str(path))
    ...     ds = ingest_tractogram("memory://doc-ingest-tractogram", path, chunk_shape=4)
    >>> ds.geometry_types, ds.num_objects(), ds.objects([1]).positions.tolist()
    (('streamline',), 2, [[5.0, 5.0, 5.0], [6.0, 6.0, 6.0]])
    """
    from zarr_vectors.api import write_lines

    positive_numbers(chunk_shape, "chunk_shape")
    tg = read_tractogram(path)
    names = sorted(tg.groups)
    try:
        return write_lines(
            target,
            (tg.positions, tg.offsets),
            kind="streamline",
            chunk_shape=chunk_shape,
            attributes=tg.per_vertex or None,
            object_attributes=tg.per_streamline or None,
            groups=[tg.groups[n] for n in names] or None,
            group_names=names or None,
            overwrite=overwrite,
            units=kwargs.pop("units", "millimeter"),
            **kwargs,
        )
    except InputError as exc:  # the file's data cannot be stored as it is: say which file
        raise InputError(f"{path}: {exc}") from exc
