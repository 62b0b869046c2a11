"""The library's exception hierarchy.

Every error the library raises on purpose derives from :class:`ZarrVectorsError`,
which is also a :class:`ValueError`, so ``except ValueError`` keeps working for
callers that do not care about the finer classes.
"""

from __future__ import annotations

__all__ = [
    "ZarrVectorsError",
    "FormatError",
    "CorruptCellError",
    "InputError",
    "StoreExistsError",
    "ReadOnlyError",
    "DecodeError",
    "UnknownIdError",
    "StoreError",
    "StoreChangedError",
    "IncompleteStoreError",
]


class ZarrVectorsError(ValueError):
    """Base class of every error raised by ``zarr_vectors``."""


class FormatError(ZarrVectorsError):
    """A store, node or metadata block does not follow the Zarr Vectors 0.9 format."""


class CorruptCellError(FormatError):
    """The bytes of one cell cannot be decoded.

    ``array`` is the node path of the array (``"0/vertices"``) and ``chunk`` the
    absolute chunk key (``"2.1.0"``) or the non-spatial cell index of the bad cell.
    """

    def __init__(self, array: str, chunk: str, reason: str) -> None:
        self.array = array
        self.chunk = chunk
        self.reason = reason
        super().__init__(f"corrupt cell in array {array!r}, chunk {chunk}: {reason}")


class InputError(ZarrVectorsError):
    """Data handed to a writer or a query is unusable (shape, dtype, values)."""


class StoreExistsError(ZarrVectorsError):
    """The write target already holds data and ``overwrite`` was not given."""


class ReadOnlyError(ZarrVectorsError):
    """A modifying call was made on a dataset opened with ``mode="r"``."""


class DecodeError(FormatError):
    """Raised by the pure decoders in :mod:`zarr_vectors.format`.

    The decoders do not know which array or chunk their bytes came from; the
    reading layer re-raises this as :class:`CorruptCellError` with that context.
    """


class UnknownIdError(ZarrVectorsError, KeyError):
    """An object or group id that the level does not hold (also a :class:`KeyError`)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class StoreError(ZarrVectorsError):
    """Reading, writing or listing one key of a store failed: an I/O fault, a request
    that timed out, or a local file the library refuses to follow (a symbolic link out
    of the store, a FIFO, a device).

    ``store`` describes the store (path or URL) and ``key`` the key (``"0/vertices/c/1/2"``).
    """

    def __init__(self, store: str, key: str, reason: str) -> None:
        self.store = store
        self.key = key
        self.reason = reason
        super().__init__(f"store {store}, key {key!r}: {reason}" if key else f"store {store}: {reason}")


class StoreChangedError(StoreError):
    """Another writer replaced the store (its root ``zarr.json``) while a dataset opened
    before that write was reading it. Open the store again to read the new version."""

    def __init__(self, store: str) -> None:
        super().__init__(store, "zarr.json", "the store changed while it was being read; open it again")


class IncompleteStoreError(FormatError):
    """The store's root says a write replacing it has not finished: the writer was
    interrupted, or is still running."""

    def __init__(self, store: str) -> None:
        self.store = store
        super().__init__(
            f"store {store} is incomplete: a write was interrupted (or is still running); "
            "rewrite it or restore it"
        )
