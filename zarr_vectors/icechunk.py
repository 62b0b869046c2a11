"""Appends and writes as Icechunk commits: readers see the store before or after, never between.

An Icechunk repository versions a Zarr store; a writable session's ``store`` is a zarr
``Store`` that every writer and :func:`zarr_vectors.open` accept. These helpers run one
write in a session and commit it, turning a lost race into
:class:`~zarr_vectors.errors.StoreConflictError` (the losing write leaves nothing behind).
Needs the optional ``icechunk`` package (``pip install 'zarrvec[icechunk]'``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from zarr_vectors._extras import needs
from zarr_vectors.dataset import Dataset
from zarr_vectors.errors import StoreConflictError

__all__ = ["append", "commit", "delete", "replace"]


def _icechunk() -> Any:
    try:
        import icechunk
    except ImportError as exc:  # pragma: no cover - exercised without the extra
        raise ImportError(needs("zarr_vectors.icechunk", "the icechunk package", "icechunk")) from exc
    return icechunk


def commit(repo: Any, write: Callable[[Any], object], *, branch: str = "main", message: str) -> str:
    """Run ``write(store)`` on a writable session of ``branch`` and commit it; return the
    snapshot id. Another commit to the branch since the session began raises
    :class:`StoreConflictError` and nothing of this write is kept.

    Examples
    --------
    >>> import tempfile, numpy as np, icechunk, zarr_vectors as zv
    >>> from zarr_vectors import icechunk as zvi
    >>> repo = icechunk.Repository.create(icechunk.in_memory_storage())
    >>> pts = np.random.default_rng(0).uniform(0, 10, (100, 2))
    >>> _ = zvi.commit(repo, lambda store: zv.write_points(store, pts, chunk_shape=5, bounds=([0, 0], [10, 10])), message="points")
    >>> zv.open(repo.readonly_session(branch="main").store).vertex_count()
    100
    """
    ice = _icechunk()
    session = repo.writable_session(branch)
    write(session.store)
    try:
        return str(session.commit(message))
    except ice.ConflictError as exc:
        raise StoreConflictError(
            f"another writer committed to branch {branch!r} while this write ran, so nothing of it was "
            f"applied ({exc}); open a new session and run the write again"
        ) from exc


def append(repo: Any, *data: Any, branch: str = "main", message: str | None = None, **keywords: Any) -> str:
    """:meth:`Dataset.append` as one Icechunk commit on ``branch``; returns the snapshot id.

    ``data`` and ``keywords`` are as :meth:`Dataset.append` takes them for the store's kind
    (a point cloud's positions; a skeleton's positions and parents; a list of meshes...).
    Two appenders racing on one branch: the first to commit wins, the other gets
    :class:`StoreConflictError` with nothing applied.

    Examples
    --------
    >>> import numpy as np, icechunk, zarr_vectors as zv
    >>> from zarr_vectors import icechunk as zvi
    >>> repo = icechunk.Repository.create(icechunk.in_memory_storage())
    >>> pts = np.random.default_rng(0).uniform(0, 10, (100, 2))
    >>> _ = zvi.commit(repo, lambda store: zv.write_points(store, pts, chunk_shape=5, bounds=([0, 0], [10, 10])), message="points")
    >>> _ = zvi.append(repo, pts[:10] / 2)
    >>> zv.open(repo.readonly_session(branch="main").store).vertex_count()
    110
    >>> sk = icechunk.Repository.create(icechunk.in_memory_storage())
    >>> _ = zvi.commit(sk, lambda store: zv.write_skeleton(store, [[1.0, 1, 1], [2, 2, 2]], [-1, 0], object_ids=[1, 1], chunk_shape=4, bounds=([0, 0, 0], [8, 8, 8])), message="skeleton")
    >>> _ = zvi.append(sk, [[5.0, 5, 5], [6, 6, 6]], [-1, 0], object_ids=[2, 2])
    >>> zv.open(sk.readonly_session(branch="main").store).object_ids().tolist()
    [1, 2]
    """

    def run(store: Any) -> None:
        Dataset.open(store, mode="r+").append(*data, **keywords)

    return commit(repo, run, branch=branch, message=message or "append")


def replace(
    repo: Any, ids: Any, *data: Any, branch: str = "main", message: str | None = None, **keywords: Any
) -> str:
    """:meth:`Dataset.replace` of the objects ``ids`` as one Icechunk commit on ``branch``;
    returns the snapshot id. A lost race raises :class:`StoreConflictError`, nothing applied.

    Examples
    --------
    >>> import icechunk, zarr_vectors as zv
    >>> from zarr_vectors import icechunk as zvi
    >>> repo = icechunk.Repository.create(icechunk.in_memory_storage())
    >>> meshes = [([[1.0, 1, 1], [2, 1, 1], [1, 2, 1]], [[0, 1, 2]]), ([[5.0, 5, 5], [6, 5, 5], [5, 6, 5]], [[0, 1, 2]])]
    >>> _ = zvi.commit(repo, lambda store: zv.write_meshes(store, meshes, object_ids=[4, 9], chunk_shape=4, bounds=([0, 0, 0], [8, 8, 8])), message="meshes")
    >>> _ = zvi.replace(repo, [9], [([[7.0, 7, 7], [7, 6, 7], [6, 7, 7]], [[0, 1, 2]])])
    >>> float(zv.open(repo.readonly_session(branch="main").store).objects([9]).positions.max())
    7.0
    """

    def run(store: Any) -> None:
        Dataset.open(store, mode="r+").replace(ids, *data, **keywords)

    return commit(repo, run, branch=branch, message=message or "replace")


def delete(repo: Any, ids: Any, *, branch: str = "main", message: str | None = None, **keywords: Any) -> str:
    """:meth:`Dataset.delete` of the objects ``ids`` as one Icechunk commit on ``branch``;
    returns the snapshot id. A lost race raises :class:`StoreConflictError`, nothing applied.

    Examples
    --------
    >>> import numpy as np, icechunk, zarr_vectors as zv
    >>> from zarr_vectors import icechunk as zvi
    >>> repo = icechunk.Repository.create(icechunk.in_memory_storage())
    >>> pts = np.random.default_rng(0).uniform(0, 10, (100, 2))
    >>> _ = zvi.commit(repo, lambda store: zv.write_points(store, pts, object_ids=np.arange(100) % 4, chunk_shape=5, bounds=([0, 0], [10, 10])), message="points")
    >>> _ = zvi.delete(repo, [0, 1])
    >>> zv.open(repo.readonly_session(branch="main").store).object_ids().tolist()
    [2, 3]
    """

    def run(store: Any) -> None:
        Dataset.open(store, mode="r+").delete(ids, **keywords)

    return commit(repo, run, branch=branch, message=message or "delete")
