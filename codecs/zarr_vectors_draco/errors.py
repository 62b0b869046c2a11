"""The codec package's exceptions: one base class, and a subclass per case a caller handles apart.

Every error the package raises on purpose is a :class:`DracoCodecError`, which is also a
:class:`ValueError` (the type zarr-python and numcodecs callers expect from a codec). The
package imports nothing from the ``zarr_vectors`` library; the library translates these into
its own hierarchy in one place (``zarr_vectors._draco``).
"""

from __future__ import annotations

__all__ = ["DracoCodecError", "DracoDecodeError", "DracoInputError", "DracoUnavailableError"]


class DracoCodecError(ValueError):
    """Base class of every error raised by ``zarr_vectors_draco``.

    Raised as itself only when Draco does not give back what it was given to encode (a bug in
    Draco or in this package, not in the caller's data).
    """


class DracoDecodeError(DracoCodecError):
    """Bytes that are not a decodable cell blob: empty, not Draco, truncated, corrupt, or
    claiming more points or faces than the caller allows."""


class DracoInputError(DracoCodecError):
    """Positions, faces, settings or codec elements handed to an encoder are unusable."""


class DracoUnavailableError(DracoCodecError):
    """DracoPy does not import, or zarr-python resolves no codec named ``draco``."""
