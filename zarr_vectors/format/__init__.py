"""The Zarr Vectors 0.9 on-disk format as pure functions: bytes and JSON to numpy and dataclasses.

Nothing in this package performs I/O; its only dependencies are the standard
library and numpy.
"""
