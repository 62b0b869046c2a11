"""A Neuroglancer precomputed skeleton or mesh source, read through the storage layer.

:class:`PrecomputedSource` opens a local folder, ``http(s)://``, ``gs://`` or ``s3://`` URL
(whatever :func:`zarr_vectors.storage.open_backend` opens; the cloud protocols need the
``gcs`` / ``s3`` extras) and finds the layer in it:

* a folder whose ``info`` is a skeleton or mesh info (``neuroglancer_skeletons``,
  ``neuroglancer_multilod_draco``, ``neuroglancer_legacy_mesh``);
* a segmentation volume whose ``info`` names ``"skeletons"`` and/or ``"mesh"`` subfolders;
* a folder without an ``info`` holding ``skeletons/info`` and/or ``mesh/info`` (the layout
  ``zarr-vectors export neuroglancer`` writes per layer);
* with ``kind="meshes"``, a legacy mesh folder without any ``info`` (the spec allows it).

:meth:`~PrecomputedSource.segment_ids` lists the segments from the source's own index: every
shard's minishard indexes when sharded, else a listing of a *local* folder (remote sources
without an index need the ids given). :meth:`~PrecomputedSource.read` fetches a batch of
objects in a few batched requests (all keys of a step in flight together) and decodes them.
"""

from __future__ import annotations

import gzip
import posixpath
import re
import zlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from zarr_vectors.errors import InputError, PrecomputedFormatError, StoreNotFoundError
from zarr_vectors.neuroglancer.precomputed_read import (
    LEGACY_TYPE,
    MULTILOD_TYPE,
    SKELETON_TYPE,
    MeshInfo,
    SkeletonInfo,
    decode_legacy_fragment,
    decode_legacy_manifest,
    decode_multilod_fragments,
    decode_multilod_manifest,
    decode_segment_properties,
    decode_skeleton,
    parse_json,
    parse_mesh_info,
    parse_skeleton_info,
)
from zarr_vectors.neuroglancer.sharded import ShardingSpec
from zarr_vectors.neuroglancer.sharded_read import (
    decode_data,
    decode_minishard_index,
    decode_shard_index,
    index_size,
    locate_keys,
    shard_names,
)
from zarr_vectors.storage import Backend, map_cells, open_backend

__all__ = [
    "COALESCE_GAP",
    "COALESCE_MAX",
    "KINDS",
    "LayerFiles",
    "PrecomputedSource",
    "ShardedIndex",
    "coalesce",
    "u64_name",
]

#: The kinds of source read: skeletons and meshes.
KINDS = ("skeletons", "meshes")
_NO_PROPS = "segment_properties=False, or --no-properties, reads the layer without them"
_DIGITS = re.compile(r"[0-9]{1,20}")
#: An object as read: skeletons ``(positions, edges, attributes)``, meshes ``(positions, faces, {})``.
Decoded = tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]


def u64_name(text: str) -> int | None:
    """The uint64 a base-10 name spells, else None."""
    if not _DIGITS.fullmatch(text):
        return None
    value = int(text)
    return value if value < 1 << 64 else None


class ShardedIndex:
    """The minishard indexes of one sharded folder (``folder`` of the layer), read on demand
    and kept."""

    def __init__(self, source: LayerFiles, spec: ShardingSpec, folder: str = "") -> None:
        self.source = source
        self.spec = spec
        self.names = [folder + name for name in shard_names(spec)]
        self._shards: dict[int, np.ndarray | None] = {}
        self._minis: dict[tuple[int, int], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

    def _load_shards(self, shards: Sequence[int]) -> None:
        todo = sorted({s for s in shards if s not in self._shards})
        size = index_size(self.spec)
        bodies = self.source.get_ranges([(self.names[s], 0, size) for s in todo])
        for s, body in zip(todo, bodies):
            where = self.source.where(self.names[s])
            self._shards[s] = None if body is None else decode_shard_index(body, self.spec, where)

    def _load_minishards(self, pairs: Sequence[tuple[int, int]]) -> None:
        self._load_shards([s for s, _ in pairs])
        todo: list[tuple[int, int]] = []
        for s, m in sorted(set(pairs)):
            table = self._shards[s]
            if (s, m) in self._minis:
                continue
            if table is None or table[m, 0] == table[m, 1]:
                empty = np.zeros(0, np.int64)
                self._minis[(s, m)] = (np.zeros(0, np.uint64), empty, empty)
            else:
                todo.append((s, m))
        ranges = []
        for s, m in todo:
            lo, hi = (int(v) for v in self._shards[s][m])  # type: ignore[index]
            ranges.append((self.names[s], lo, hi - lo))
        for (s, m), rng, body in zip(todo, ranges, self.source.get_ranges(ranges)):
            where = self.source.where(f"{self.names[s]} (minishard {m})")
            if body is None or len(body) != rng[2]:
                raise PrecomputedFormatError(f"{where}: the minishard index lies past the end of the shard")
            self._minis[(s, m)] = decode_minishard_index(body, self.spec, where)

    def all_keys(self) -> np.ndarray:
        """Every key of every shard (sorted uint64): each shard's index and each non-empty
        minishard index read once."""
        self._load_shards(range(len(self.names)))
        pairs: list[tuple[int, int]] = []
        for s, table in self._shards.items():
            if table is not None:
                pairs.extend((s, int(m)) for m in np.flatnonzero(table[:, 0] != table[:, 1]))
        self._load_minishards(pairs)
        keys = [self._minis[p][0] for p in pairs]
        return np.unique(np.concatenate(keys)) if keys else np.zeros(0, np.uint64)

    def locate(self, keys: np.ndarray) -> list[tuple[str, int, int] | None]:
        """Per key, ``(shard file, start, size)`` of its entry, or None when absent: the
        minishards the keys hash to are read, then all keys looked up at once."""
        keys = np.asarray(keys, np.uint64)
        shard, mini = locate_keys(keys, self.spec)
        pairs = sorted(set(zip(shard.tolist(), mini.tolist())))
        self._load_minishards(pairs)
        tables = [self._minis[p] for p in pairs]
        if not tables or not sum(len(t[0]) for t in tables):
            return [None] * len(keys)
        found = np.concatenate([t[0] for t in tables])
        starts = np.concatenate([t[1] for t in tables])
        sizes = np.concatenate([t[2] for t in tables])
        owner = np.repeat(np.array([p[0] for p in pairs], np.int64), [len(t[0]) for t in tables])
        order = np.argsort(found, kind="stable")
        hit = order[np.minimum(np.searchsorted(found[order], keys), len(found) - 1)]
        ok = (found[hit] == keys) & (owner[hit] == shard)
        return [
            (self.names[int(owner[h])], int(starts[h]), int(sizes[h])) if good else None
            for h, good in zip(hit.tolist(), ok.tolist())
        ]


#: Ranges of one file at most this many bytes apart are read as one request (reading the gap
#: costs less than another round trip to a remote store).
COALESCE_GAP = 256 << 10
#: A coalesced request reads at most this many bytes (unless one range alone is longer).
COALESCE_MAX = 32 << 20


def coalesce(
    ranges: Sequence[tuple[str, int, int | None]],
) -> tuple[list[tuple[str, int, int | None]], list[tuple[int, int, int | None]]]:
    """``(requests, pieces)``: ranges of one file sorted by start and joined while the gap to
    the next is at most :data:`COALESCE_GAP` and the request stays within
    :data:`COALESCE_MAX`; ``pieces[k] = (request, start, end)`` cuts range ``k`` out of its
    request's body (``end`` None: to the end). Open-ended ranges are requested alone."""
    requests: list[tuple[str, int, int | None]] = []
    pieces: list[tuple[int, int, int | None]] = [(0, 0, None)] * len(ranges)
    order = sorted(range(len(ranges)), key=lambda k: (ranges[k][0], ranges[k][1]))
    open_end = -1  # end of the request being grown (-1: none)
    for k in order:
        name, start, length = ranges[k]
        if length is None:
            requests.append((name, start, None))
            pieces[k], open_end = (len(requests) - 1, 0, None), -1
            continue
        last = requests[-1] if requests else None
        if (
            open_end >= 0
            and last is not None
            and last[0] == name
            and start - open_end <= COALESCE_GAP
            and max(open_end, start + length) - last[1] <= COALESCE_MAX
        ):
            open_end = max(open_end, start + length)
            requests[-1] = (name, last[1], open_end - last[1])
        else:
            requests.append((name, start, length))
            open_end = start + length
        base = requests[-1][1]
        pieces[k] = (len(requests) - 1, start - base, start - base + length)
    return requests, pieces


class LayerFiles:
    """The files of one precomputed layer: a backend, the layer's folder in it (``prefix``),
    batched reads, and names for messages."""

    url: str
    backend: Backend
    prefix: str
    storage_options: dict[str, Any] | None

    def where(self, name: str) -> str:
        """How a file of the layer is named in messages: the source URL and the key."""
        return f"{self.url.rstrip('/')}/{self.prefix}{name}"

    def __init__(self, url: Any, storage_options: dict[str, Any] | None = None) -> None:
        self.url = str(url)
        self.prefix = ""
        self.storage_options = storage_options
        try:
            self.backend = open_backend(url, read_only=True, storage_options=storage_options)
        except StoreNotFoundError as exc:
            raise InputError(
                f"no Neuroglancer precomputed source at {self.url}: the path does not exist"
            ) from exc

    def get_many(self, names: Sequence[str]) -> list[bytes | None]:
        """Whole files of the layer (None: absent). In a local folder, a file found only as
        ``{name}.gz`` (what cloud-volume writes to local disk) is read and gunzipped."""
        out = self.backend.get_many([self.prefix + n for n in names])
        if self.backend.local_dir is None:
            return out
        gone = [k for k, body in enumerate(out) if body is None]
        zipped = self.backend.get_many([f"{self.prefix}{names[k]}.gz" for k in gone]) if gone else []
        for k, body in zip(gone, zipped):
            if body is not None:
                try:
                    out[k] = gzip.decompress(body)
                except (OSError, EOFError, zlib.error) as exc:
                    raise PrecomputedFormatError(
                        f"{self.where(names[k])}.gz: not valid gzip ({exc})"
                    ) from exc
        return out

    def get_ranges(self, ranges: Sequence[tuple[str, int, int | None]]) -> list[bytes | None]:
        """Byte ranges of files of the layer; a local ``{name}.gz`` is read whole and cut.
        Ranges of one file that lie near each other are read as one request
        (:func:`coalesce`): the entries of a minishard are contiguous, so a batch of objects
        costs a request per minishard touched, not per object."""
        if not ranges:
            return []
        merged, pieces = coalesce(ranges)
        bodies = self.backend.get_ranges([(self.prefix + n, s, k) for n, s, k in merged])
        out = [
            None if bodies[m] is None else (bodies[m][lo:] if hi is None else bodies[m][lo:hi])  # type: ignore[index]
            for m, lo, hi in pieces
        ]
        gone = [k for k, body in enumerate(out) if body is None]
        if gone and self.backend.local_dir is not None:
            whole = self.get_many([ranges[k][0] for k in gone])
            for k, body in zip(gone, whole):
                _, start, length = ranges[k]
                if body is not None:
                    out[k] = body[start:] if length is None else body[start : start + length]
        return out

    def _json(self, key: str) -> dict[str, Any] | None:
        (body,) = self.backend.get_many([key])
        return None if body is None else parse_json(body, f"{self.url.rstrip('/')}/{key}")


class PrecomputedSource(LayerFiles):
    """One precomputed skeleton or mesh layer (module docstring)."""

    def __init__(self, url: Any, kind: str | None = None, storage_options: dict[str, Any] | None = None):
        if kind is not None and kind not in KINDS:
            raise InputError(f"kind must be one of {', '.join(map(repr, KINDS))} or None, got {kind!r}")
        super().__init__(url, storage_options)
        #: The segment properties folder named by a segmentation volume's info (from the root).
        self._volume_props: str | None = None
        self.kind, info = self._find(kind)
        self.skeleton: SkeletonInfo | None = None
        self.mesh: MeshInfo | None = None
        if self.kind == "skeletons":
            assert info is not None
            self.skeleton = parse_skeleton_info(info, self.where("info"))
            spec = self.skeleton.sharding
        else:
            self.mesh = parse_mesh_info(info, self.where("info"))
            spec = self.mesh.sharding
        self.sharded = None if spec is None else ShardedIndex(self, spec)

    def _find(self, kind: str | None) -> tuple[str, dict[str, Any] | None]:
        """``(kind, info)`` of the layer; sets :attr:`prefix` to its folder."""
        types = {SKELETON_TYPE: "skeletons", MULTILOD_TYPE: "meshes", LEGACY_TYPE: "meshes"}
        info = self._json("info")
        if info is not None and info.get("@type") in types:
            found = types[info["@type"]]
            if kind not in (None, found):
                raise InputError(f"{self.url} holds {found}, not {kind} (its info is {info['@type']!r})")
            return found, info
        folders: dict[str, str] = {}
        if info is not None:  # a segmentation volume naming its mesh and skeleton folders
            props = info.get("segment_properties")
            self._volume_props = props.strip("/") if isinstance(props, str) and props.strip("/") else None
            for name, key in (("skeletons", "skeletons"), ("meshes", "mesh")):
                if isinstance(info.get(key), str) and info[key].strip("/"):
                    folders[name] = info[key].strip("/") + "/"
        else:
            for name, sub in (("skeletons", "skeletons/"), ("meshes", "mesh/")):
                if self.backend.get_many([sub + "info"])[0] is not None:
                    folders[name] = sub
        if kind is None and len(folders) > 1:
            raise InputError(f"{self.url} holds both skeletons and meshes; choose one with kind=")
        if kind is None and folders:
            kind = next(iter(folders))
        if kind in folders:
            self.prefix = folders[kind]
            sub_info = self._json(self.prefix + "info")
            if sub_info is None and kind == "skeletons":
                raise InputError(f"{self.where('info')} is missing: a skeleton source needs its info")
            return kind, sub_info
        if info is None and kind == "meshes":
            return "meshes", None  # a legacy mesh folder without an info
        what = f"@type {info.get('@type')!r}" if info is not None else "no info file"
        raise InputError(
            f"no Neuroglancer precomputed {kind or 'skeletons or meshes'} at {self.url} ({what}); give the "
            "folder holding the skeleton or mesh info, or a segmentation volume naming one"
        )

    # -- segment properties ------------------------------------------------------------
    def properties_url(self) -> str | None:
        """Where the layer's segment properties are (its info's ``segment_properties``, else
        the volume's), resolved against the source: None when it names none."""
        info = self.skeleton if self.skeleton is not None else self.mesh
        rel = info.segment_properties if info is not None else None
        if isinstance(rel, str) and rel.strip("/"):
            rel = self.prefix + rel.strip("/")
        else:
            rel = self._volume_props
        if rel is None:
            return None
        scheme, sep, path = self.url.rstrip("/").rpartition("://")
        return scheme + sep + posixpath.normpath(posixpath.join(path, rel))  # "s3://b/x/../p" -> "s3://b/p"

    def segment_properties(self) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """``(ids, {property: values})`` of the layer's inline segment properties (none when
        it names no properties folder)."""
        url = self.properties_url()
        if url is None:
            return np.zeros(0, np.uint64), {}
        try:
            backend = open_backend(url, read_only=True, storage_options=self.storage_options)
        except StoreNotFoundError as exc:
            raise PrecomputedFormatError(
                f"{self.where('info')}: its segment properties {url} do not exist ({_NO_PROPS})"
            ) from exc
        (body,) = backend.get_many(["info"])
        where = f"{url.rstrip('/')}/info"
        if body is None:
            raise PrecomputedFormatError(f"{where} is missing (named by {self.where('info')}; {_NO_PROPS})")
        return decode_segment_properties(parse_json(body, where), where)

    # -- which segments ------------------------------------------------------------------
    def segment_ids(self) -> np.ndarray:
        """Every segment id of the layer (sorted uint64), from its shard indexes, or by listing
        a local folder; :class:`InputError` for a remote unsharded source (give ids)."""
        if self.sharded is not None:
            return self.sharded.all_keys()
        if self.backend.local_dir is None:
            raise InputError(
                f"{self.url} is an unsharded remote source, which has no index of its segments; give the "
                "segment ids (ids=, or --ids)"
            )
        names = [n.removesuffix(".gz") for n in self.backend.list_dir(self.prefix.rstrip("/"))]
        if self.kind == "skeletons":
            found = [u64_name(n) for n in names]
        elif self.mesh is not None and self.mesh.kind == "multilod":
            found = [u64_name(n[:-6]) for n in names if n.endswith(".index")]
        else:
            found = [u64_name(n[:-2]) for n in names if n.endswith(":0")]
        return np.unique(np.array([i for i in found if i is not None], np.uint64))

    # -- objects -------------------------------------------------------------------------
    def read(self, ids: np.ndarray, lod: int = 0, workers: int | None = 1) -> list[Decoded | None]:
        """The objects ``ids`` (None where the source has none); meshes at LOD ``lod``
        (multi-resolution only; legacy meshes have one); Draco fragments decoded by up to
        ``workers`` threads (None: every core)."""
        ids = np.asarray(ids, np.uint64)
        if self.kind == "skeletons":
            return self._skeletons(ids)
        assert self.mesh is not None
        if self.mesh.kind == "legacy":
            if lod:
                raise InputError(f"{self.url} holds legacy meshes, which have one level of detail; lod={lod}")
            return self._legacy(ids)
        return self._multilod(ids, lod, workers)

    def _entries(self, ids: np.ndarray) -> tuple[list[bytes | None], list[tuple[str, int, int] | None]]:
        """The stored entries of ``ids`` (sharded: decoded per ``data_encoding``; unsharded: the
        file named by the id, with ``suffix``) and, sharded, where each lies."""
        if self.sharded is None:
            suffix = ".index" if self.mesh is not None and self.mesh.kind == "multilod" else ""
            return self.get_many([f"{i}{suffix}" for i in ids.tolist()]), []
        places = self.sharded.locate(ids)
        wanted = [p for p in places if p is not None]
        bodies = iter(self.get_ranges(wanted))
        out: list[bytes | None] = []
        for place in places:
            if place is None:
                out.append(None)
                continue
            body = next(bodies)
            where = self.where(f"{place[0]} at {place[1]}")
            if body is None or len(body) != place[2]:
                raise PrecomputedFormatError(f"{where}: the entry lies past the end of the shard")
            out.append(decode_data(body, self.sharded.spec, where))
        return out, places

    def _skeletons(self, ids: np.ndarray) -> list[Decoded | None]:
        assert self.skeleton is not None
        bodies, _ = self._entries(ids)
        return [
            None if body is None else decode_skeleton(body, self.skeleton, self.where(str(i)))
            for i, body in zip(ids.tolist(), bodies)
        ]

    def _legacy(self, ids: np.ndarray) -> list[Decoded | None]:
        manifests = self.get_many([f"{i}:0" for i in ids.tolist()])
        names = [
            None if body is None else decode_legacy_manifest(body, self.where(f"{i}:0"))
            for i, body in zip(ids.tolist(), manifests)
        ]
        flat = [n for frags in names if frags is not None for n in frags]
        bodies = dict(zip(flat, self.get_many(flat)))
        out: list[Decoded | None] = []
        for i, frags in zip(ids.tolist(), names):
            if frags is None:
                out.append(None)
                continue
            pos, faces, n = [], [], 0
            for name in frags:
                body = bodies[name]
                if body is None:
                    raise PrecomputedFormatError(f"{self.where(f'{i}:0')}: fragment {name!r} is missing")
                p, f = decode_legacy_fragment(body, self.where(name))
                pos.append(p)
                faces.append(f + n)
                n += len(p)
            out.append(_joined(pos, faces))
        return out

    def _multilod(self, ids: np.ndarray, lod: int, workers: int | None) -> list[Decoded | None]:
        assert self.mesh is not None
        bodies, places = self._entries(ids)
        manifests = [
            None if body is None else decode_multilod_manifest(body, self.where(f"{i}.index"))
            for i, body in zip(ids.tolist(), bodies)
        ]
        ranges: list[tuple[str, int, int]] = []
        for k, (i, man) in enumerate(zip(ids.tolist(), manifests)):
            if man is None:
                continue
            if lod >= man.num_lods:
                raise InputError(f"{self.where(f'{i}.index')}: LOD {lod} asked, the mesh has {man.num_lods}")
            start, length = man.lod_range(lod)
            if self.sharded is None:
                ranges.append((str(i), start, length))
            else:  # the fragment data lies right before the manifest in the shard
                name, at, _ = places[k]  # type: ignore[misc]
                first = at - man.data_size
                if first < index_size(self.sharded.spec):
                    raise PrecomputedFormatError(
                        f"{self.where(name)}: the fragments of segment {i} would start before the shard's data"
                    )
                ranges.append((name, first + start, length))
        fetched = iter(self.get_ranges([r for r in ranges if r[2]]))
        datas = [next(fetched) if rng[2] else b"" for rng in ranges]
        present = [(i, m) for i, m in zip(ids.tolist(), manifests) if m is not None]

        def decode(k: int) -> Decoded:
            (i, man), rng, data = present[k], ranges[k], datas[k]
            where = self.where(rng[0])
            if data is None or len(data) != rng[2]:
                raise PrecomputedFormatError(
                    f"{where}: the fragment data of segment {i} is shorter than its manifest says"
                )
            pos, faces = decode_multilod_fragments(man, data, lod, mesh, where)
            return pos, faces, {}

        mesh = self.mesh
        it = iter(map_cells(decode, len(present), workers))
        return [None if man is None else next(it) for man in manifests]


def _joined(pos: list[np.ndarray], faces: list[np.ndarray]) -> Decoded:
    return (
        np.concatenate(pos) if pos else np.zeros((0, 3)),
        np.concatenate(faces) if faces else np.zeros((0, 3), np.int64),
        {},
    )
