"""Keys and bytes, knowing nothing of Zarr Vectors, behind one face: other packages import
from ``zarr_vectors.storage`` only. Modules: ``protocol`` (the Backend protocol, storage
options, shared helpers), ``local``, ``zarr_store``, ``http_store`` and ``http`` (the backends
and bounded HTTP requests), ``wrappers`` (views over a backend), ``resolve`` (a target to its
backend), ``shards``, ``commit`` and ``writelock`` (staged writes, one writer at a time),
``inventory``, ``scratch`` and ``threads``.

Where a store's bytes live: resolve a path, URL or zarr Store to a backend.

A backend moves whole keys (``"0/vertices/c/1/2/3"``, ``"zarr.json"``) in batches:
``get_many`` and ``set_many`` take every key one step needs at once. Every backend
offers the whole :class:`Backend` protocol (listing, sizes, deletes, its capabilities),
so no caller needs to know which class it holds. ``get_ranges`` reads byte ranges of keys
(:data:`ByteRange`: a prefix, a suffix, a span or the whole object), which the shard layer
(``shards``) uses to read sharded arrays; on zarr Stores its requests
are in flight together, at most zarr's ``async.concurrency`` at once.

* :class:`LocalBackend` reads and writes files of a local directory directly.
  On local disk this is about ten times faster than going through zarr-python's
  ``LocalStore`` one key at a time (each key there costs a thread hop), and the
  files are the same. It refuses files that are not regular files inside the store
  (``local``).
* :class:`ZarrStoreBackend` serves any zarr v3 ``Store`` (memory, zip, fsspec
  S3/GCS, obstore): a batch becomes one ``asyncio.gather`` on zarr's event loop
  (:func:`run_sync` is the one bridge from synchronous code to it), so object-storage
  requests are in flight together. Every request has a time limit
  (:data:`DEFAULT_TIMEOUT`, or the ``zv_timeout`` storage option) and a failed one
  raises :class:`~zarr_vectors.errors.StoreError` naming the store and the key.
* :class:`ConsistentBackend` wraps the backend of an opened dataset: after every
  batch it reads the root ``zarr.json`` again and raises
  :class:`~zarr_vectors.errors.StoreChangedError` when a writer replaced the store.

Writes go through :func:`write_session` (``commit``): the store is
built in a local staging folder, then swapped in (local directories, zip files) or
committed key by key behind a root marking it incomplete (other stores).

Storage options read by this library (removed before the rest go to fsspec):
``zv_timeout`` (seconds per request, ``None`` for no limit; default 30),
``zv_follow_symlinks`` (local stores: read symbolic links that lead out of the store),
``zv_max_object_bytes`` (HTTP stores: the longest answer read; default 1 GiB) and
``zv_wait`` (writes to a local store: seconds to wait for another writer's lock; default 0).
"""

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
from zarr_vectors.storage.protocol import (
    GENERATION_KEY,
    Backend,
    StorageOptions,
    check_complete,
    dump_json,
    new_generation,
)
from zarr_vectors.storage.resolve import check_not_v2, local_path, open_backend, remote_backend
from zarr_vectors.storage.scratch import Arena, arena
from zarr_vectors.storage.shards import ShardReader
from zarr_vectors.storage.threads import check_workers, default_workers, map_cells, map_ordered
from zarr_vectors.storage.wrappers import ConsistentBackend, Wrapping
from zarr_vectors.storage.writelock import check_wait, writing

__all__ = [
    "Arena",
    "Backend",
    "ConsistentBackend",
    "GENERATION_KEY",
    "LocalBackend",
    "ShardReader",
    "StorageOptions",
    "Wrapping",
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
    "map_ordered",
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
