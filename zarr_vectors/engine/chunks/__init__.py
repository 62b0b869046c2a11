"""Cells and tables as Zarr arrays: array handles (``arrays``), compressors and the codec pipeline."""

__all__: list[str] = []
