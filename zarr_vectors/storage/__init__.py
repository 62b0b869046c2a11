"""Keys and bytes, knowing nothing of Zarr Vectors: the Backend protocol and its local, zarr-store
and HTTP backends (``backend``), local files (``local``), shard reads (``shards``), committing a
whole store (``commit``), listing (``inventory``), reusable buffers (``scratch``) and the shared
threads (``threads``)."""

from zarr_vectors.storage.backend import (
    GENERATION_KEY,
    Backend,
    ConsistentBackend,
    StorageOptions,
    check_complete,
    check_not_v2,
    dump_json,
    local_path,
    new_generation,
    open_backend,
    remote_backend,
)
from zarr_vectors.storage.commit import (
    check_in_place_target,
    check_target,
    find_leftovers,
    placeholder_root,
    rebuild_session,
    scratch_folder,
    staging,
    write_session,
)
from zarr_vectors.storage.inventory import inventory
from zarr_vectors.storage.local import LocalBackend
from zarr_vectors.storage.scratch import Arena, arena
from zarr_vectors.storage.shards import ShardReader
from zarr_vectors.storage.threads import check_workers, default_workers, map_cells
from zarr_vectors.storage.writelock import check_wait, writing

__all__ = [
    "Arena",
    "Backend",
    "ConsistentBackend",
    "GENERATION_KEY",
    "LocalBackend",
    "ShardReader",
    "StorageOptions",
    "arena",
    "check_complete",
    "check_in_place_target",
    "check_not_v2",
    "check_target",
    "check_wait",
    "check_workers",
    "default_workers",
    "dump_json",
    "find_leftovers",
    "inventory",
    "local_path",
    "map_cells",
    "new_generation",
    "open_backend",
    "placeholder_root",
    "rebuild_session",
    "remote_backend",
    "scratch_folder",
    "staging",
    "write_session",
    "writing",
]
