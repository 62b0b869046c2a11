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
from collections.abc import Iterator, Sequence

from zarr_vectors.engine import VectorStore
from zarr_vectors.errors import StoreError
from zarr_vectors.storage import Arena, Backend, Wrapping, placeholder_root, rebuild_session

__all__ = ["one_commit"]


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
        _DocumentsDeletedLast(backend),
        hidden=lambda key: False,
        first={"zarr.json": placeholder_root()},
        wait=store.wait,
    ) as overlay:
        overlay.set_many([("zarr.json", current)])
        with store.staged(overlay, store.root):
            yield
    store.replace_root(store.root)


class _DocumentsDeletedLast(Wrapping):
    """``inner`` with each batch of deletes ordered chunk keys first, then ``zarr.json``
    documents, deepest first. The writes of one block can drop a whole array (an edit that
    empties a coarse level's cross-chunk links); Icechunk removes an array node with its
    document, after which a delete of one of its chunks fails."""

    def __init__(self, inner: Backend) -> None:
        self.inner = inner
        self.description = inner.description

    def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        return self.inner.get_many(keys)

    def get_ranges(self, ranges: Sequence[tuple[str, int, int | None]]) -> list[bytes | None]:
        return self.inner.get_ranges(ranges)

    def get_many_into(self, keys: Sequence[str], scratch: Arena) -> list[bytes | memoryview | None]:
        return self.inner.get_many_into(keys, scratch)

    def set_many(self, items: Sequence[tuple[str, bytes]]) -> None:
        self.inner.set_many(items)

    def delete_many(self, keys: Sequence[str]) -> None:
        docs = sorted((k for k in keys if k.rsplit("/", 1)[-1] == "zarr.json"), key=lambda k: -k.count("/"))
        self.inner.delete_many([k for k in keys if k.rsplit("/", 1)[-1] != "zarr.json"])
        if docs:
            self.inner.delete_many(docs)

    def delete_prefix(self, prefix: str) -> None:
        self.inner.delete_prefix(prefix)

    def refresh(self) -> None:
        self.inner.refresh()
