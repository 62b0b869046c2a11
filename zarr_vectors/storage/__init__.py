"""Keys and bytes, knowing nothing of Zarr Vectors: the Backend protocol and its local, zarr-store
and HTTP backends (``backend``), local files (``local``), shard reads (``shards``), committing a
whole store (``commit``), listing (``inventory``), reusable buffers (``scratch``) and the shared
threads (``threads``)."""

__all__: list[str] = []
