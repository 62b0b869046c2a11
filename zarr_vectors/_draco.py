"""The library's door to the Draco codec package (``zarr_vectors_draco``, in ``codecs/``).

The codec package is standalone and raises its own errors (``zarr_vectors_draco.errors``,
all ``ValueError``). This module is the one place that turns them into the library's:

=========================  ================================================================
codec error                library error
=========================  ================================================================
``DracoDecodeError``       :class:`CorruptCellError` when the caller names the array and
                           chunk, else :class:`DecodeError`
``DracoInputError``        :class:`InputError`
``DracoUnavailableError``  :class:`FormatError` with :data:`MISSING` (DracoPy missing)
``DracoCodecError``        :class:`FormatError` (Draco did not give an encoded cell back)
=========================  ================================================================

Imported lazily: raw stores never need DracoPy. A codec package that does not import is an
ImportError whose message names the missing codec and how to install it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from zarr_vectors._extras import install_hint
from zarr_vectors.errors import CorruptCellError, DecodeError, FormatError, InputError, ZarrVectorsError

if TYPE_CHECKING:
    from zarr_vectors_draco import DracoCodecError

__all__ = ["MISSING", "require_codec", "encode_cell", "decode_cell"]

MISSING = f"codec draco is not available: it ships with zarrvec (package zarr_vectors_draco, with DracoPy); {install_hint(None)}"


def require_codec() -> None:
    """Raise ImportError (with :data:`MISSING`) unless the Draco codec package imports."""
    try:
        import zarr_vectors_draco  # noqa: F401
    except ImportError as exc:
        raise ImportError(f"{MISSING} ({exc})") from exc


def _library_error(exc: DracoCodecError, array: str | None, chunk: str | None) -> ZarrVectorsError:
    """The library's exception for a codec error (see the module table)."""
    from zarr_vectors_draco import DracoDecodeError, DracoInputError, DracoUnavailableError

    if isinstance(exc, DracoDecodeError):
        if array is not None and chunk is not None:
            return CorruptCellError(array, chunk, str(exc))
        return DecodeError(str(exc))
    if isinstance(exc, DracoInputError):
        return InputError(str(exc))
    if isinstance(exc, DracoUnavailableError):
        return FormatError(f"{MISSING} ({exc.__cause__ or exc})")
    return FormatError(str(exc))


def encode_cell(
    positions: np.ndarray, faces: np.ndarray, *, quantization_bits: int, compression_level: int
) -> tuple[bytes, np.ndarray]:
    """Draco blob of one chunk and ``order`` (decoded row i is input vertex ``order[i]``).

    Raises InputError on unusable positions, faces or settings, FormatError without DracoPy.
    """
    require_codec()
    import zarr_vectors_draco as codec

    try:
        return codec.encode_cell(
            positions, faces, quantization_bits=quantization_bits, compression_level=compression_level
        )
    except codec.DracoCodecError as exc:
        raise _library_error(exc, None, None) from exc


def decode_cell(
    blob: bytes, *, array: str | None = None, chunk: str | None = None, **limits: int
) -> tuple[np.ndarray, np.ndarray]:
    """(N, 3) float32 positions and (F, 3) int64 faces of a blob; ``limits`` are
    ``max_points`` / ``max_faces`` the blob may claim.

    A corrupt blob raises CorruptCellError naming ``array`` and ``chunk`` when both are
    given, else DecodeError; a missing DracoPy raises FormatError.
    """
    require_codec()
    import zarr_vectors_draco as codec

    try:
        return codec.decode_cell(blob, **limits)
    except codec.DracoCodecError as exc:
        raise _library_error(exc, array, chunk) from exc
