"""SWC neuron morphology files: read, write, ingest many into one store, export one object.

An SWC line is ``id type x y z radius parent`` (``parent = -1`` for a root); ``#``
starts a comment. Ids need not be contiguous or sorted; parents are resolved by id.
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from zarr_vectors.engine import shape_vector
from zarr_vectors.errors import InputError

if TYPE_CHECKING:
    from zarr_vectors.dataset import Dataset

__all__ = ["Swc", "read_swc", "write_swc", "swc_samples", "ingest_swc", "export_swc"]


@dataclass(frozen=True, eq=False)
class Swc:
    """One SWC file: positions (N, 3), parents (N,) as row indices (-1 for roots), radius, type, ids."""

    positions: np.ndarray
    parents: np.ndarray
    radius: np.ndarray
    type: np.ndarray
    ids: np.ndarray


def _whole(text: str) -> int:
    """An integer field: exact when written as an integer (ids never pass through float64),
    else a float with no fraction such as ``2.0``."""
    try:
        return int(text)
    except ValueError:
        value = float(text)
        if not value.is_integer():
            raise ValueError(f"{text!r} is not a whole number") from None
        return int(value)


def read_swc(path: str | Path) -> Swc:
    """Parse an SWC file: samples in file order, parents resolved by id to row indices.

    Parameters
    ----------
    path
        The ``.swc`` file.

    Returns
    -------
    Swc
        ``positions`` float64 (N, 3), ``parents`` int64 row indices (-1 for roots),
        ``radius`` float32, ``type`` int16 and the file's sample ``ids`` int64. The file is
        parsed as a whole by numpy's C text reader; one it does not take (a malformed line,
        ``2.0`` as an integer, non-ASCII bytes) is parsed a line at a time, with the same result.

    Raises
    ------
    InputError
        Anything malformed, naming the file and line: a sample without 7 fields, text
        where a number belongs, a type outside int16, a NaN or infinite coordinate or
        radius, a repeated id, a parent that is not in the file or a sample that is its own
        parent; or a file with no samples.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from zarr_vectors.io.swc import read_swc
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = pathlib.Path(folder) / "cell.swc"
    ...     _ = path.write_text("# a soma and a branch\\n1 1 0 0 0 2.0 -1\\n7 3 1 0 0 0.5 1\\n9 3 2 1 0 0.5 7\\n")
    ...     swc = read_swc(path)
    >>> swc.ids.tolist(), swc.parents.tolist(), swc.radius.tolist()
    ([1, 7, 9], [-1, 0, 1], [2.0, 0.5, 0.5])
    """
    path = Path(path)
    raw = path.read_bytes()
    fast = _fast_fields(raw)
    if fast is None:  # anything the fast path does not take: the per-line parse and its errors
        table, linenos = _parse_lines(path)
        if not len(table):
            raise InputError(f"{path}: no SWC samples found")
        ids, kind, numbers, parent_ids = (
            table[:, 0].astype(np.int64),
            table[:, 1].astype(np.int64),
            table[:, 2:6].astype(np.float64),
            table[:, 6].astype(np.int64),
        )
    else:
        ids, kind, numbers, parent_ids = fast
        linenos = None
        if not len(ids):
            raise InputError(f"{path}: no SWC samples found")
    return _checked(path, ids, kind, numbers, parent_ids, linenos)


def _parse_lines(path: Path) -> tuple[np.ndarray, list[int]]:
    """The reference parse, a line at a time: ``(table (N, 7) of Python numbers, line
    numbers)``; raises the per-line errors of :func:`read_swc`."""
    rows = []
    linenos = []
    with open(path, encoding="utf-8", errors="replace") as fh:
        for lineno, line in enumerate(fh, start=1):
            text = line.split("#", 1)[0].strip()
            if not text:
                continue
            parts = text.split()
            if len(parts) < 7:
                raise InputError(
                    f"{path}:{lineno}: an SWC sample needs 7 fields (id type x y z radius parent), got {len(parts)}"
                )
            try:
                rows.append((int(parts[0]), _whole(parts[1]), *map(float, parts[2:6]), _whole(parts[6])))
            except (ValueError, OverflowError) as exc:
                raise InputError(f"{path}:{lineno}: cannot parse {text[:200]!r} ({exc})") from exc
            if not all(-(2**63) <= v < 2**63 for v in (rows[-1][0], rows[-1][6])):
                raise InputError(f"{path}:{lineno}: the sample id or parent id does not fit int64")
            if not -(2**15) <= rows[-1][1] < 2**15:
                raise InputError(_TYPE_RANGE.format(where=f"{path}:{lineno}", value=rows[-1][1]))
            linenos.append(lineno)
    return np.array(rows, dtype=object).reshape(-1, 7), linenos


#: Bytes after which the per-line parse takes the file: a NUL, ``\x1c``-``\x1f`` (whitespace
#: to Python's ``str.split``) and non-ASCII (decoded as UTF-8 there).
_ODD = np.zeros(256, bool)
_ODD[0x1C:0x20] = True
_ODD[0x80:] = True
_ODD[0] = True
_TYPE_RANGE = "{where}: the sample type {value} does not fit int16 (SWC types are small integers)"
_FIELDS = np.dtype(
    [("id", "i8"), ("type", "i8"), ("x", "f8"), ("y", "f8"), ("z", "f8"), ("radius", "f8"), ("parent", "i8")]
)


def _fast_fields(raw: bytes) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """``(ids, types, x y z radius (N, 4), parent ids)`` of the samples of a whole file, parsed
    by numpy's C text reader (``np.loadtxt``: no Python loop per line), or None when the file
    needs the per-line parse: anything that reader refuses (a line with fewer than 7 fields,
    ``2.0`` as an integer, text, an id outside int64, a lone carriage return) and bytes it
    may split or decode otherwise than Python (:data:`_ODD`). Comments (``#`` to the end of
    the line) and blank lines are skipped; fields after the seventh ignored, as in the
    per-line parse."""
    if _ODD[np.frombuffer(raw, np.uint8)].any():
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "input contained no data": no samples
            table = np.loadtxt(
                io.BytesIO(raw), dtype=_FIELDS, comments="#", usecols=range(7), ndmin=1, encoding="ascii"
            )
    except (ValueError, OverflowError):
        return None
    numbers = np.stack([table[k] for k in ("x", "y", "z", "radius")], axis=1)
    return table["id"], table["type"], numbers, table["parent"]


def _checked(
    path: Path,
    ids: np.ndarray,
    kind: np.ndarray,
    numbers: np.ndarray,
    parent_ids: np.ndarray,
    linenos: list[int] | None,
) -> Swc:
    """The :class:`Swc` of parsed fields, once checked (finite numbers, distinct ids, parents
    in the file and not the sample itself); ``linenos`` (None: found again by the per-line
    parse when a message needs them) name the line of each sample in errors."""

    def line(i: int) -> int:
        return (linenos if linenos is not None else _parse_lines(path)[1])[i]

    odd = np.flatnonzero((kind < -(2**15)) | (kind >= 2**15))
    if len(odd):
        i = int(odd[0])
        raise InputError(_TYPE_RANGE.format(where=f"{path}:{line(i)}", value=int(kind[i])))
    bad = np.flatnonzero(~np.isfinite(numbers).all(axis=1))
    if len(bad):
        i = int(bad[0])
        raise InputError(
            f"{path}:{line(i)}: sample {int(ids[i])} has a NaN or infinite coordinate or "
            f"radius ({numbers[i].tolist()}); {len(bad)} such samples in this file: fix them"
        )
    order = np.argsort(ids)
    if np.any(np.diff(ids[order]) == 0):
        dup = ids[order][np.flatnonzero(np.diff(ids[order]) == 0)[0]]
        raise InputError(f"{path}: sample id {int(dup)} appears twice")
    where = np.searchsorted(ids[order], parent_ids)
    where = np.minimum(where, len(ids) - 1)
    found = ids[order][where] == parent_ids
    missing = np.flatnonzero((parent_ids >= 0) & ~found)
    if len(missing):
        i = int(missing[0])
        raise InputError(
            f"{path}:{line(i)}: sample {int(ids[i])} names parent {int(parent_ids[i])}, "
            "which is not in the file"
        )
    own = np.flatnonzero(parent_ids == ids)
    if len(own):
        i = int(own[0])
        raise InputError(f"{path}:{line(i)}: sample {int(ids[i])} is its own parent; a root has parent -1")
    parents = np.where(parent_ids < 0, -1, order[where])
    return Swc(
        positions=numbers[:, :3].copy(),
        parents=parents.astype(np.int64),
        radius=numbers[:, 3].astype(np.float32),
        type=kind.astype(np.int16),
        ids=ids,
    )


def write_swc(
    path: str | Path,
    positions: np.ndarray,
    parents: np.ndarray,
    radius: np.ndarray | None = None,
    type: np.ndarray | None = None,
) -> None:  # noqa: A002
    """Write an SWC file with samples numbered 1..N in depth-first order (parents first).

    Parameters
    ----------
    path
        The file to write (replaced if it exists).
    positions
        (N, 3) coordinates; floats are written so that they read back exactly.
    parents
        (N,) parent row of every row, -1 for a root.
    radius
        (N,) radii; default 1.
    type
        (N,) SWC structure types (1 soma, 2 axon, 3 dendrite, ...); default 0.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from zarr_vectors.io.swc import write_swc
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = pathlib.Path(folder) / "tree.swc"
    ...     write_swc(path, [[1.0, 1.0, 0.0], [0.0, 0.0, 0.0]], parents=[1, -1], radius=[0.5, 2.0])
    ...     print(path.read_text(), end="")
    # written by zarr_vectors
    # id type x y z radius parent
    1 0 0.0 0.0 0.0 2.0 -1
    2 0 1.0 1.0 0.0 0.5 1
    """
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(SWC_HEADER)
        fh.write(swc_samples(positions, parents, radius, type))


#: The comment lines that start every SWC file :func:`write_swc` writes.
SWC_HEADER = "# written by zarr_vectors\n# id type x y z radius parent\n"


def swc_samples(
    positions: np.ndarray,
    parents: np.ndarray,
    radius: np.ndarray | None = None,
    type: np.ndarray | None = None,  # noqa: A002
    first: int = 1,
) -> str:
    """The sample lines :func:`write_swc` writes for these rows, numbered from ``first`` in
    depth-first order, tree after tree (so the trees of rows written in several calls, each
    numbered on from the last, are numbered as one call would number them).

    Parameters
    ----------
    positions
        (N, 3) sample positions (more columns are ignored).
    parents
        (N,) row index of each sample's parent, -1 for a root.
    radius, type
        Per-sample radius (default 1) and SWC type (default 0).
    first
        The number of the first sample written.

    Examples
    --------
    >>> import numpy as np
    >>> from zarr_vectors.io.swc import swc_samples
    >>> print(swc_samples(np.array([[0, 0, 0], [1, 0, 0]]), np.array([-1, 0]), first=5), end="")
    5 0 0.0 0.0 0.0 1.0 -1
    6 0 1.0 0.0 0.0 1.0 5
    """
    from zarr_vectors.kinds.skeletons import depth_first_order, tree_roots

    n = len(positions)
    parents = np.asarray(parents, np.int64)
    order = depth_first_order(parents, tree_roots(parents))
    new_id = np.empty(n, np.int64)
    new_id[order] = np.arange(first, first + n)
    radius = np.ones(n) if radius is None else np.asarray(radius)
    type = np.zeros(n, np.int64) if type is None else np.asarray(type)  # noqa: A001
    lines = []
    for v in order.tolist():
        p = -1 if parents[v] < 0 else int(new_id[parents[v]])
        x, y, z = (float(c) for c in positions[v][:3])
        lines.append(f"{new_id[v]} {int(type[v])} {x!r} {y!r} {z!r} {float(radius[v])!r} {p}\n")
    return "".join(lines)


def ingest_swc(
    target: Any,
    files: Sequence[str | Path],
    *,
    chunk_shape: Any,
    progress: bool = True,
    overwrite: bool = False,
    object_ids: Any = None,
    ids_from_names: bool = True,
    **kwargs: Any,
) -> Dataset:
    """Write many SWC files into one skeleton store, one object per file.

    Keeps ``radius`` and ``type`` per vertex, and per object the sample count
    (``n_samples``) and the file's name (``name``). Every file is parsed before anything
    is written, so a bad file leaves no store.

    Parameters
    ----------
    target
        Where to write, as in :func:`zarr_vectors.write_points`.
    files
        The SWC files.
    chunk_shape
        Edge length of a spatial chunk: one number or one per axis.
    progress
        Show a progress bar on stderr while the files are parsed.
    overwrite
        Replace an existing store.
    object_ids
        One id per file. Default: when every file name is an integer
        (``720575940621039145.swc``, as neuPrint, navis and cloud-volume save segments)
        and ``ids_from_names``, that integer (uint64); else ``i``, the file's place in
        ``files``.
    ids_from_names
        Take the ids from integer file names (see ``object_ids``).
    **kwargs
        Other keywords of :func:`zarr_vectors.write_skeleton` (``bounds``, ``compression``, ...).

    Returns
    -------
    Dataset
        The new skeleton store, opened for reading.

    Raises
    ------
    InputError
        No files, a malformed file (see :func:`read_swc`), ids that are not one per file
        or repeat, a malformed ``chunk_shape``.
    StoreExistsError
        ``target`` holds data and ``overwrite`` is false.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from zarr_vectors.io.swc import ingest_swc
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     folder = pathlib.Path(folder)
    ...     _ = (folder / "720575940621039145.swc").write_text("1 1 0 0 0 2 -1\\n2 3 1 0 0 1 1\\n3 3 2 1 0 1 2\\n")
    ...     _ = (folder / "17.swc").write_text("1 1 5 5 5 1 -1\\n2 3 6 5 5 1 1\\n")
    ...     ds = ingest_swc("memory://doc-ingest-swc", sorted(folder.glob("*.swc")), chunk_shape=4, progress=False)
    >>> ds.object_ids().tolist(), ds.object_attributes("n_samples").tolist()
    ([17, 720575940621039145], [2, 3])
    >>> ds.objects([720575940621039145]).parents.tolist()
    [-1, 0, 1]
    """
    from zarr_vectors.api import write_skeleton
    from zarr_vectors.engine import file_ids

    shape_vector(chunk_shape, 3, "chunk_shape")  # options first: parsing thousands of files takes a while
    paths = [Path(f) for f in files]
    if not paths:
        raise InputError("no SWC files given")
    ids = file_ids(paths, object_ids, ids_from_names, "ids_from_names=False (CLI: --sequential-ids)")
    order = np.argsort(ids, kind="stable")  # objects in ascending id: per-object rows follow
    paths, ids = [paths[i] for i in order], ids[order]
    from tqdm.auto import tqdm

    with tqdm(paths, desc="reading SWC", unit="file", disable=not progress) as bar:  # closed on error too
        parsed = [read_swc(f) for f in bar]
    sizes = np.array([len(s.positions) for s in parsed])
    base = np.cumsum(sizes) - sizes
    parents = np.concatenate([np.where(s.parents >= 0, s.parents + b, -1) for s, b in zip(parsed, base)])
    return write_skeleton(
        target,
        np.concatenate([s.positions for s in parsed]),
        parents,
        chunk_shape=chunk_shape,
        object_ids=np.repeat(ids, sizes),
        attributes={
            "radius": np.concatenate([s.radius for s in parsed]),
            "type": np.concatenate([s.type for s in parsed]),
        },
        object_attributes={"n_samples": sizes.astype(np.int64), "name": [f.name for f in paths]},
        overwrite=overwrite,
        **kwargs,
    )


def export_swc(ds: Dataset, object_id: int, path: str | Path) -> int:
    """Write one skeleton object of ``ds`` to an SWC file, with its ``radius`` and ``type``
    attributes when the store has them.

    Parameters
    ----------
    ds
        A skeleton store.
    object_id
        The object to write (the user's id, see :meth:`Dataset.object_ids`).
    path
        The file to write.

    Returns
    -------
    int
        The number of samples written.

    Raises
    ------
    InputError
        ``ds`` holds no skeletons, or the object has no vertices.
    UnknownIdError
        The store has no object ``object_id`` (a ``KeyError``).

    Examples
    --------
    >>> import tempfile, pathlib, zarr_vectors as zv
    >>> from zarr_vectors.io.swc import export_swc
    >>> ds = zv.write_skeleton(
    ...     "memory://doc-export-swc", [[0, 0, 0], [1, 0, 0], [5, 5, 5]], [-1, 0, -1],
    ...     chunk_shape=2, object_ids=[4, 4, 9], attributes={"radius": [2.0, 1.0, 1.0]},
    ... )
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = pathlib.Path(folder) / "4.swc"
    ...     print(export_swc(ds, 4, path))
    ...     print(path.read_text(), end="")
    2
    # written by zarr_vectors
    # id type x y z radius parent
    1 0 0.0 0.0 0.0 2.0 -1
    2 0 1.0 0.0 0.0 1.0 1
    """
    if "skeleton" not in ds.geometry_types:
        raise InputError(
            f"the store holds {list(ds.geometry_types)}, not skeletons; SWC export needs a skeleton"
        )
    res = ds.objects([object_id])
    if len(res) == 0:
        raise InputError(f"object {object_id} has no vertices in this store")
    assert res.parents is not None
    radius = res.attributes.get("radius")
    kind = res.attributes.get("type")
    write_swc(path, res.positions, res.parents, radius, kind)
    return len(res)
