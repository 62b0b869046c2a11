"""The one sentence every "the Draco codec is missing" error uses, and the check behind it."""

from __future__ import annotations

from .errors import DracoUnavailableError

__all__ = ["CODEC_UNAVAILABLE_MESSAGE", "require_draco_codec"]

#: Message for a store whose ``vertices`` array names codec ``draco`` when it cannot be used.
CODEC_UNAVAILABLE_MESSAGE = (
    "codec draco is not available: install zarrvec (pip install zarrvec), which provides "
    "the zarr_vectors_draco package and its DracoPy dependency"
)


def require_draco_codec() -> type:
    """The zarr codec class registered under ``draco``, after checking DracoPy imports.

    Raises :class:`~.errors.DracoUnavailableError` with :data:`CODEC_UNAVAILABLE_MESSAGE`
    when zarr resolves no ``draco`` codec or DracoPy cannot be imported.
    """
    import zarr.errors
    import zarr.registry

    unknown: tuple[type[Exception], ...] = (KeyError,)  # zarr 3.1 raises a plain KeyError
    if hasattr(zarr.errors, "UnknownCodecError"):  # zarr 3.4+
        unknown += (zarr.errors.UnknownCodecError,)
    try:
        import DracoPy  # noqa: F401
    except ImportError as exc:
        raise DracoUnavailableError(CODEC_UNAVAILABLE_MESSAGE) from exc
    try:
        return zarr.registry.get_codec_class("draco")
    except unknown as exc:
        raise DracoUnavailableError(CODEC_UNAVAILABLE_MESSAGE) from exc
