"""The library's exception hierarchy, and the two helpers that raise from it.

Every error the library raises on purpose derives from :class:`ZarrVectorsError`,
which is also a :class:`ValueError`, so ``except ValueError`` keeps working for
callers that do not care about the finer classes. A lookup of something the store
does not hold (a level, an attribute, an object or group id) is also a
:class:`KeyError`, and a store path that does not exist also a
:class:`FileNotFoundError`, so the builtin a caller expects catches them too.

* :func:`check_choice` refuses a value that is not one of a fixed set, with one
  wording everywhere (``choice_message`` gives the same text for a report).
* :func:`decoding` is the context in which a cell's bytes are decoded: a decoder's
  failure leaves it as a :class:`CorruptCellError` naming the array and chunk.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Sequence
from types import TracebackType
from typing import Any, Literal, TypeVar

__all__ = [
    "ZarrVectorsError",
    "FormatError",
    "CorruptCellError",
    "DecodeError",
    "CorruptShardError",
    "IncompleteStoreError",
    "ZarrV2StoreError",
    "PrecomputedFormatError",
    "InputError",
    "StoreExistsError",
    "StoreNotFoundError",
    "ReadOnlyError",
    "StoreError",
    "StoreChangedError",
    "UnknownIdError",
    "LevelNotFoundError",
    "AttributeNotFoundError",
    "ZarrVectorsWarning",
    "GeometryRepairedWarning",
    "IdTableWarning",
    "UnknownCapabilityWarning",
    "TextIdsWarning",
    "PropertiesSkippedWarning",
    "CoordinatesRoundedWarning",
    "StaleLevelWarning",
    "check_choice",
    "choice_message",
    "decoding",
    "DECODE_FAILURES",
    "failure_reason",
]

T = TypeVar("T")


class ZarrVectorsError(ValueError):
    """Base class of every error raised by ``zarr_vectors``."""


# -- the store's bytes ------------------------------------------------------------------
class FormatError(ZarrVectorsError):
    """A store, node or metadata block does not follow the Zarr Vectors 0.9 format."""


class CorruptCellError(FormatError):
    """The bytes of one cell cannot be decoded.

    ``array`` is the node path of the array (``"0/vertices"``), ``chunk`` the absolute
    chunk key (``"2.1.0"``) or the non-spatial cell index of the bad cell, and
    ``reason`` what the decoder found.
    """

    def __init__(self, array: str, chunk: str, reason: str) -> None:
        self.array = array
        self.chunk = chunk
        self.reason = reason
        super().__init__(f"corrupt cell in array {array!r}, chunk {chunk}: {reason}")

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.array, self.chunk, self.reason)


class DecodeError(FormatError):
    """Raised by the pure decoders in :mod:`zarr_vectors.format`.

    The decoders do not know which array or chunk their bytes came from; the reading
    layer decodes inside :func:`decoding`, which re-raises this as
    :class:`CorruptCellError` with that context.
    """


class CorruptShardError(CorruptCellError):
    """The index of one shard (a ``sharding_indexed`` object holding many cells) is damaged:
    wrong length or checksum, or a range outside the object. ``chunk`` is the shard's key
    relative to the array (``"c/0/1/0"``); every cell of that shard is unreadable."""

    def __init__(self, array: str, chunk: str, reason: str) -> None:
        super().__init__(array, chunk, reason)
        self.args = (
            f"corrupt shard {chunk} in array {array!r}: {reason}; the cells it holds cannot be read "
            "(restore the object, or rewrite the store)",
        )

    def __str__(self) -> str:
        return str(self.args[0])


class IncompleteStoreError(FormatError):
    """The store's root says a write replacing it has not finished: the writer was
    interrupted, or is still running."""

    def __init__(self, store: str) -> None:
        self.store = store
        super().__init__(
            f"store {store} is incomplete: a write was interrupted (or is still running); "
            "rewrite it or restore it"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.store,)


class ZarrV2StoreError(FormatError):
    """The target is a Zarr v2 store, which the format does not allow."""


# -- the caller's arguments and the store as a whole ------------------------------------
class PrecomputedFormatError(FormatError):
    """Neuroglancer precomputed data being read (an ``info`` file, a skeleton, a mesh
    manifest or fragment, a shard or minishard index) does not follow its specification;
    the message names the file or key."""


class InputError(ZarrVectorsError):
    """Data or an argument handed to a writer, a query or a reader is unusable (shape,
    dtype, values, a name not among the allowed ones)."""


class StoreExistsError(ZarrVectorsError):
    """The write target already holds data and ``overwrite`` was not given."""


class StoreNotFoundError(ZarrVectorsError, FileNotFoundError):
    """No store at the path given (also a :class:`FileNotFoundError`); ``path`` is that path."""

    def __init__(self, path: str) -> None:
        self.path = path
        super().__init__(f"no store at {path!r}: the path does not exist; check the path")
        self.filename = path

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.path,)

    def __str__(self) -> str:  # OSError would prefix an errno when it has one
        return str(self.args[0])


class ReadOnlyError(ZarrVectorsError):
    """A modifying call was made on a dataset opened with ``mode="r"``, or on a store
    that cannot be written (a zip file opened for reading, an ``http(s)://`` URL)."""


class StoreError(ZarrVectorsError):
    """Reading, writing, listing or deleting a key of a store failed: an I/O fault, a
    request that timed out, a store that cannot delete, or a local file the library
    refuses to follow (a symbolic link out of the store, a FIFO, a device).

    ``store`` describes the store (path or URL) and ``key`` the key (``"0/vertices/c/1/2"``).
    """

    def __init__(self, store: str, key: str, reason: str) -> None:
        self.store = store
        self.key = key
        self.reason = reason
        super().__init__(f"store {store}, key {key!r}: {reason}" if key else f"store {store}: {reason}")

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.store, self.key, self.reason)


class StoreChangedError(StoreError):
    """Another writer replaced the store (its root ``zarr.json``) while a dataset opened
    before that write was reading it. Open the store again to read the new version."""

    def __init__(self, store: str) -> None:
        super().__init__(store, "zarr.json", "the store changed while it was being read; open it again")

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.store,)


# -- lookups of what the store does not hold (also KeyError) ------------------------------
class _Lookup(ZarrVectorsError, KeyError):
    """Shared by the lookup errors: a KeyError whose text is the message, unquoted."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class UnknownIdError(_Lookup):
    """An object or group id that the level does not hold (also a :class:`KeyError`)."""


class LevelNotFoundError(_Lookup):
    """A level the store does not have (also a :class:`KeyError`); ``level`` is the one
    asked for and ``levels`` those the store has."""

    def __init__(self, level: int, levels: Sequence[int]) -> None:
        self.level = level
        self.levels = list(levels)
        super().__init__(f"level {level} does not exist; this store has levels {self.levels}")

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.level, self.levels)


class AttributeNotFoundError(_Lookup):
    """Attributes a level does not hold (also a :class:`KeyError`): ``kind`` is
    ``"vertex"``, ``"object"`` or ``"group"``, ``names`` the unknown names, ``level``
    the level and ``available`` the names it has."""

    def __init__(self, kind: str, names: Sequence[str], level: int, available: Iterable[str]) -> None:
        self.kind = kind
        self.names = list(names)
        self.level = level
        self.available = sorted(available)
        what = f"attribute {self.names[0]!r}" if len(self.names) == 1 else f"attributes {self.names}"
        has = f"{kind} attributes {self.available}" if self.available else f"no {kind} attributes"
        super().__init__(f"unknown {kind} {what}; level {level} has {has}")

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.kind, self.names, self.level, self.available)


class ZarrVectorsWarning(UserWarning):
    """Base class of every warning issued by ``zarr_vectors``: ``warnings.filterwarnings(
    "ignore", category=ZarrVectorsWarning)`` silences the library's warnings and no others."""


class GeometryRepairedWarning(ZarrVectorsWarning):
    """``repair=True`` replaced invalid polygons by ``shapely.make_valid`` output."""


class IdTableWarning(ZarrVectorsWarning):
    """An ``object_id`` / ``group_id`` table that cannot be an id map is read as an ordinary attribute."""


class UnknownCapabilityWarning(ZarrVectorsWarning):
    """A store declares a capability token this library does not know."""


class TextIdsWarning(ZarrVectorsWarning):
    """A uint64 column held values above 2**63 - 1 and was written as decimal text."""


class PropertiesSkippedWarning(ZarrVectorsWarning):
    """Some feature properties were not stored (not numeric) or were renamed."""


class CoordinatesRoundedWarning(ZarrVectorsWarning):
    """An export rounded coordinates to a coarser grid than they were stored with (LAS)."""


# -- helpers ---------------------------------------------------------------------------
def choice_message(name: str, value: object, choices: Iterable[object]) -> str:
    """``"<name> must be one of 'a', 'b'; got 'c'"``: the one wording for a value outside a set."""
    return f"{name} must be one of {', '.join(map(repr, choices))}; got {value!r}"


def check_choice(
    name: str,
    value: T,
    choices: Iterable[object],
    *,
    error: type[ZarrVectorsError] = InputError,
    hint: str = "",
) -> T:
    """``value`` when it is one of ``choices``, else raise ``error`` (:class:`InputError`
    for arguments, :class:`FormatError` for stored metadata) saying so; ``hint`` is added
    to the message after a semicolon."""
    choices = tuple(choices)
    try:
        ok = bool(value in choices)
    except (TypeError, ValueError):  # an array compared element by element, an odd __eq__
        ok = False
    if not ok:
        raise error(choice_message(name, value, choices) + (f"; {hint}" if hint else ""))
    return value


#: What decoding a cell can raise, besides :class:`DecodeError`, when its bytes are bad: a
#: codec's own errors (zlib.error; gzip's EOFError and BadGzipFile, an OSError; blosc's
#: ValueError), struct.error from short data, and MemoryError when a header claims more
#: bytes than memory holds. Library errors other than DecodeError are not decode failures.
DECODE_FAILURES: tuple[type[BaseException], ...] = (
    DecodeError,
    struct.error,
    zlib.error,
    EOFError,
    OSError,
    ValueError,
    MemoryError,
)


def failure_reason(exc: BaseException) -> str:
    """How a decode failure reads in a message: the library's own text, or the type and
    text of another library's exception."""
    if isinstance(exc, ZarrVectorsError):
        return str(exc)
    if isinstance(exc, UnicodeDecodeError):
        return f"an element is not UTF-8 ({exc.reason})"
    name = type(exc).__name__
    if name == "error":  # struct.error, zlib.error: the module says which
        name = f"{type(exc).__module__}.{name}"
    return f"{name}: {exc}"


class _Decoding:
    __slots__ = ("array", "chunk", "context")

    def __init__(self, array: str, chunk: str | int | Iterable[int], context: str) -> None:
        self.array, self.chunk, self.context = array, chunk, context

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> Literal[False]:
        if exc is None or not isinstance(exc, DECODE_FAILURES) or isinstance(exc, MemoryError):
            return False  # running out of memory is no proof of a bad cell: it stays MemoryError
        if isinstance(exc, ZarrVectorsError) and not isinstance(exc, DecodeError):
            return False  # already the library's (a CorruptCellError with its own place, ...)
        chunk = self.chunk
        if not isinstance(chunk, (str, int)):
            chunk = ".".join(str(int(c)) for c in chunk)
        reason = failure_reason(exc)
        raise CorruptCellError(
            self.array, str(chunk), f"{self.context}: {reason}" if self.context else reason
        ) from exc


def decoding(array: str, chunk: str | int | Iterable[int], context: str = "") -> _Decoding:
    """Context for decoding the cell ``chunk`` (a key ``"2.1.0"``, a table chunk index, or
    chunk coordinates) of ``array`` (``"0/vertices"``): a :data:`DECODE_FAILURES` raised
    inside leaves it as a :class:`CorruptCellError` naming both, ``context`` (``"object 7"``)
    prefixed to the reason; other exceptions (and MemoryError, which the validator alone
    reports as damage) pass through unchanged."""
    return _Decoding(array, chunk, context)


class StaleLevelWarning(ZarrVectorsWarning):
    """A coarser level was read that no longer matches level 0 (points were appended since it
    was built); ``Dataset.build_pyramid(..., overwrite=True)`` rebuilds it."""


class StoreConflictError(ZarrVectorsError):
    """A write lost a race with another writer, and nothing of it was applied: the store's
    writer lock stayed held by another writer past ``wait`` seconds, the store was changed by
    another writer since this write started from it (its root ``zarr.json`` differs), or an
    Icechunk commit found another one on the same branch first. Open the store again (a new
    session) and repeat the write."""
