"""Cell-by-cell writes to sharded arrays, for the region-wise level update.

:class:`ShardWriteBack` lets code that writes and deletes the cells of per-chunk arrays one
key at a time (``<array>/c/i/j/k``, as an unsharded store holds them) work on a sharded
store: the cell writes and deletes of sharded arrays are held, and :meth:`ShardWriteBack.flush`
rewrites whole only the shards they fall in, each with its other cells read back unchanged
(a shard left without a cell is deleted). Reads, listings and every other key pass through a
:class:`~zarr_vectors.storage.ShardReader`, so the cells read are the inner chunks.

Invariant: after :meth:`~ShardWriteBack.flush`, every shard is byte for byte what
:func:`~zarr_vectors.format.shards.encode_shard` writes for its final cells (as a builder
writing those cells whole does); reads flush first, so they never see a held write missing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from zarr_vectors.format.shards import ShardLayout, encode_shard
from zarr_vectors.storage import Arena, Backend, ShardReader, Wrapping

__all__ = ["ShardWriteBack"]


class ShardWriteBack(Wrapping):
    """A backend over ``inner`` (shard objects) that takes cell keys of sharded arrays and
    writes their shards at :meth:`flush`; implements the Backend protocol."""

    def __init__(self, inner: Backend) -> None:
        self.reader = ShardReader(inner)
        self.inner = self.reader
        self.description = inner.description
        #: Held cells by shard key: ``{inner position: encoded cell, or None for deleted}``.
        self._held: dict[str, dict[int, bytes | None]] = {}
        self._layouts: dict[str, tuple[str, ShardLayout]] = {}  # shard key -> (array, layout)

    # -- what is a cell of a sharded array ----------------------------------------------
    def _locate(self, key: str) -> tuple[str, int] | None:
        """``(shard key, inner position)`` of a cell key of a sharded array, else None."""
        if "/c/" not in key or key.endswith("zarr.json"):
            return None
        path = key[: key.rfind("/c/")]
        if path not in self.reader.layouts:  # learn the array's layout from its document
            self.reader.get_many([f"{path}/zarr.json"])
        found = self.reader.sharded(key)
        if found is None:
            return None
        path, layout, cell = found
        shard, inner = layout.locate(np.asarray(cell, np.int64))
        skey = f"{path}/c/" + "/".join(str(int(s)) for s in shard[0])
        self._layouts[skey] = (path, layout)
        return skey, int(inner[0])

    # -- writes ---------------------------------------------------------------------------
    def set_many(self, items: Sequence[tuple[str, bytes]]) -> None:
        rest: list[tuple[str, bytes]] = []
        for key, data in items:
            where = self._locate(key)
            if where is None:
                rest.append((key, data))
            else:
                self._held.setdefault(where[0], {})[where[1]] = bytes(data)
        if rest:
            self.reader.set_many(rest)

    def delete_many(self, keys: Sequence[str]) -> None:
        rest: list[str] = []
        for key in keys:
            where = self._locate(key)
            if where is None:
                rest.append(key)
            else:
                self._held.setdefault(where[0], {})[where[1]] = None
        if rest:
            self.reader.delete_many(rest)

    def delete_prefix(self, prefix: str) -> None:
        for skey in [k for k in self._held if k.startswith(prefix)]:
            del self._held[skey]
        self.reader.delete_prefix(prefix)

    def flush(self) -> None:
        """Write every shard holding a held cell: its old cells, less the deleted ones, with the
        written ones; delete the shards left empty."""
        if not self._held:
            return
        held, self._held = self._held, {}
        by_array: dict[str, list[str]] = {}
        for skey in held:
            by_array.setdefault(self._layouts[skey][0], []).append(skey)
        writes: list[tuple[str, bytes]] = []
        gone: list[str] = []
        for path, skeys in by_array.items():
            rel = [s[len(path) + 1 :] for s in skeys]
            listed = self.reader.shard_cells(path, rel)
            asks = [(s, f"{path}/{c}") for s, r in zip(skeys, rel) for c in listed[r]]
            old = self.reader.get_many([c for _, c in asks]) if asks else []
            members: dict[str, dict[int, bytes]] = {s: {} for s in skeys}
            for (skey, ckey), raw in zip(asks, old):
                if raw is not None:
                    members[skey][self._position(ckey)] = raw
            for skey in skeys:
                for pos, data in held[skey].items():
                    if data is None:
                        members[skey].pop(pos, None)
                    else:
                        members[skey][pos] = data
                if members[skey]:
                    writes.append((skey, encode_shard(self._layouts[skey][1], members[skey])))
                else:
                    gone.append(skey)
        if writes:
            self.reader.set_many(writes)
        if gone:
            self.reader.delete_many(gone)

    def _position(self, ckey: str) -> int:
        found = self.reader.sharded(ckey)
        assert found is not None
        _, layout, cell = found
        return int(layout.locate(np.asarray(cell, np.int64))[1][0])

    # -- reads (held writes flushed first) ------------------------------------------------
    def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        self.flush()
        return self.reader.get_many(keys)

    def get_many_into(self, keys: Sequence[str], scratch: Arena) -> list[bytes | memoryview | None]:
        self.flush()
        return self.reader.get_many_into(keys, scratch)

    def get_ranges(self, ranges: Sequence[Any]) -> list[bytes | None]:
        self.flush()
        return self.reader.get_ranges(ranges)

    def list_dir(self, prefix: str) -> list[str]:
        self.flush()
        return self.reader.list_dir(prefix)

    def list_keys(self, prefix: str = "") -> list[str]:
        self.flush()
        return self.reader.list_keys(prefix)

    def __getattr__(self, name: str) -> Any:
        if name in ("inner", "reader"):
            raise AttributeError(name)
        return getattr(self.reader, name)
