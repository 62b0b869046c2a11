"""The library's door to the Draco codec package (``zarr_vectors_draco``, in ``codecs/``).

Imported lazily: raw stores never need DracoPy. Every failure to find the codec is an
ImportError whose message names the missing codec and how to install it.
"""

from __future__ import annotations

import numpy as np

from zarr_vectors._extras import install_hint

__all__ = ["MISSING", "require_codec", "encode_cell", "decode_cell"]

MISSING = f"codec draco is not available: it ships with zarrvec (package zarr_vectors_draco, with DracoPy); {install_hint(None)}"


def require_codec() -> None:
    """Raise ImportError (with :data:`MISSING`) unless the Draco codec package imports."""
    try:
        import zarr_vectors_draco  # noqa: F401
    except ImportError as exc:
        raise ImportError(f"{MISSING} ({exc})") from exc


def encode_cell(
    positions: np.ndarray, faces: np.ndarray, *, quantization_bits: int, compression_level: int
) -> tuple[bytes, np.ndarray]:
    """Draco blob of one chunk and ``order`` (decoded row i is input vertex ``order[i]``)."""
    require_codec()
    from zarr_vectors_draco import encode_cell as enc

    return enc(positions, faces, quantization_bits=quantization_bits, compression_level=compression_level)


def decode_cell(blob: bytes, **limits: int) -> tuple[np.ndarray, np.ndarray]:
    """(N, 3) float32 positions and (F, 3) int64 faces of a blob (DecodeError when corrupt);
    ``limits`` are ``max_points`` / ``max_faces`` the blob may claim."""
    require_codec()
    from zarr_vectors_draco import decode_cell as dec

    return dec(blob, **limits)
