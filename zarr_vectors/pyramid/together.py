"""Several writes to one store committed as one: an edit and the level update after it.

:func:`one_commit` opens one :func:`~zarr_vectors.storage.rebuild_session` on the store and,
for the duration of its block, makes the store read and write through that session's
overlay. Each write of the block (an edit of level 0, then :func:`update_levels` or
:func:`build_pyramid`) still runs its own ``rebuild_session``, but on the overlay: the
overlay is not a local folder, so that session commits *into the overlay* key by key (its
placeholder root, its deletes, its keys, its root), and nothing reaches the store. The outer
session commits everything at the end of the block, once:

* local directory: one exchange of the staged folder with the store (under its writer lock);
* other stores: one in-place commit behind a placeholder root (an interruption leaves the
  old store or one refused with :class:`~zarr_vectors.errors.IncompleteStoreError`);
* Icechunk: the writes of one session, so one commit of :mod:`zarr_vectors.icechunk`.

Invariant: a reader, a crash or an exception inside the block sees (leaves) the store as it
was before the block or as after every write of it, never after some of them. Another
writer committing meanwhile makes the block raise
:class:`~zarr_vectors.errors.StoreConflictError` with nothing applied.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

from zarr_vectors.engine import VectorStore
from zarr_vectors.errors import StoreError
from zarr_vectors.storage import placeholder_root, rebuild_session

__all__ = ["committing", "one_commit"]

#: The overlay of the innermost :func:`one_commit` block running in this context (None: none).
_ACTIVE: ContextVar[Any] = ContextVar("zarr_vectors_one_commit", default=None)


def committing(store: VectorStore) -> bool:
    """Whether ``store`` reads and writes through the overlay of a :func:`one_commit` block, so
    that a write inside it may go straight to the overlay (the block commits it, or nothing)."""
    active = _ACTIVE.get()
    return active is not None and store.backend is active


@contextlib.contextmanager
def one_commit(store: VectorStore) -> Iterator[None]:
    """Commit every write the block makes to ``store`` (opened ``mode="r+"``) as one write.

    Inside the block ``store`` reads the writes made so far (its backend is the session's
    overlay); afterwards it reads the committed store. Nothing is committed when the block
    raises."""
    store.require_writable()
    backend = store.backend
    current = backend.get_many(["zarr.json"])[0]
    if current is None:
        raise StoreError(backend.description, "zarr.json", "the store has no root document")
    # The placeholder is what a store committed in place shows while the commit runs; the
    # overlay itself starts from the store's root, which the block's writes replace.
    with rebuild_session(
        backend,
        hidden=lambda key: False,
        first={"zarr.json": placeholder_root()},
        wait=store.wait,
    ) as overlay:
        overlay.set_many([("zarr.json", current)])
        token = _ACTIVE.set(overlay)
        try:
            with store.staged(overlay, store.root):
                yield
        finally:
            _ACTIVE.reset(token)
    store.replace_root(store.root)
