"""Seeded corruptions of a store on disk: one function per mutation, ``fn(store, rng) -> str``.

Each function changes a copy of a base store in place and returns one line saying what it
did (the line goes into the findings, so a case can be understood without replaying it).
Targets are drawn from sorted listings with the case's own ``numpy`` generator, so a case
id always names the same change of the same bytes. Every mutation makes the store break
the format in a way its own bytes and metadata can reveal (bit flips of payload bytes are
the exception: only a checksum reveals those).

Payload edits of compressed cells decode and re-encode through the array's codec list with
numcodecs directly (not the library's pipeline), so a crafted header reaches the decoders
behind the compressor.
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numcodecs
import numpy as np

__all__ = ["MUTATIONS", "NotApplicable", "mutate"]

Mutation = Callable[[Path, np.random.Generator], str]
BIG32 = 2**32 - 1
FRAG_MAGIC = 0x5A564647
FRAG_HEADER = struct.Struct("<IHHII")


class NotApplicable(Exception):
    """The store has nothing this mutation can change."""


# ------------------------------------------------------------------ listings


def _files(store: Path, meta: bool) -> list[str]:
    rel = [p.relative_to(store).as_posix() for p in store.rglob("*") if p.is_file()]
    return sorted(r for r in rel if (r.rsplit("/", 1)[-1] == "zarr.json") == meta)


def _pick(rng: np.random.Generator, items: list[Any]) -> Any:
    if not items:
        raise NotApplicable("nothing to pick from")
    return items[int(rng.integers(len(items)))]


def _load(store: Path, node: str) -> dict[str, Any]:
    return json.loads((store / node / "zarr.json").read_text())


def _save(store: Path, node: str, doc: Any) -> None:
    (store / node / "zarr.json").write_text(json.dumps(doc, allow_nan=True))


def _nodes(store: Path) -> dict[str, dict[str, Any]]:
    """Node path (``""`` for the root) -> parsed zarr.json."""
    out = {}
    for rel in _files(store, True):
        node = rel[: -len("zarr.json")].rstrip("/")
        out[node] = json.loads((store / rel).read_text())
    return out


def _cell_owner(store: Path, rel: str) -> str:
    """The array node a chunk key belongs to (``0/vertices`` for ``0/vertices/c/1/0/0``)."""
    parts = rel.split("/")
    for i in range(len(parts) - 1, 0, -1):
        if parts[i] == "c" and (store / "/".join(parts[:i]) / "zarr.json").exists():
            return "/".join(parts[:i])
    raise NotApplicable(f"{rel} is not a chunk of an array")


# ------------------------------------------------------------------ byte-level cell mutations


def _nonempty_cell(store: Path, rng: np.random.Generator) -> tuple[str, bytearray]:
    rel = _pick(rng, [r for r in _files(store, False) if (store / r).stat().st_size])
    return rel, bytearray((store / rel).read_bytes())


def bitflip(store: Path, rng: np.random.Generator) -> str:
    rel, data = _nonempty_cell(store, rng)
    bits = sorted(
        rng.choice(len(data) * 8, size=min(int(rng.integers(1, 4)), len(data) * 8), replace=False).tolist()
    )
    for b in bits:
        data[b // 8] ^= 1 << (b % 8)
    (store / rel).write_bytes(bytes(data))
    return f"flipped bits {bits} of {rel} ({len(data)} bytes)"


def truncate(store: Path, rng: np.random.Generator) -> str:
    rel, data = _nonempty_cell(store, rng)
    n = int(rng.integers(len(data)))
    (store / rel).write_bytes(bytes(data[:n]))
    return f"truncated {rel} from {len(data)} to {n} bytes"


def zero(store: Path, rng: np.random.Generator) -> str:
    rel, data = _nonempty_cell(store, rng)
    (store / rel).write_bytes(bytes(len(data)))
    return f"zeroed the {len(data)} bytes of {rel}"


def delete_cell(store: Path, rng: np.random.Generator) -> str:
    rel = _pick(rng, _files(store, False))
    (store / rel).unlink()
    return f"deleted {rel}"


# ------------------------------------------------------------------ zarr.json mutations


def delete_json(store: Path, rng: np.random.Generator) -> str:
    rel = _pick(rng, _files(store, True))
    (store / rel).unlink()
    return f"deleted {rel}"


def garble_json(store: Path, rng: np.random.Generator) -> str:
    rel = _pick(rng, _files(store, True))
    data = bytearray((store / rel).read_bytes())
    how = int(rng.integers(3))
    if how == 0:
        n = int(rng.integers(len(data)))
        data = data[:n]
        what = f"truncated to {n} bytes"
    elif how == 1:
        at = sorted(rng.choice(len(data), size=min(4, len(data)), replace=False).tolist())
        for i in at:
            data[i] = int(rng.choice(list(b'{}[]":,0x ')))
        what = f"overwrote bytes {at} with JSON punctuation"
    else:
        token = _pick(rng, [b"null", b"[]", b'"zarr"', b"{}", b"1e999", b"[1, 2", b""])
        data = bytearray(token)
        what = f"replaced by {token!r}"
    (store / rel).write_bytes(bytes(data))
    return f"{rel}: {what}"


def nonutf8_json(store: Path, rng: np.random.Generator) -> str:
    rel = _pick(rng, _files(store, True))
    data = (store / rel).read_bytes()
    # Inside a string value when one is found (so only the encoding is wrong), else anywhere.
    quotes = [i for i in range(len(data)) if data[i : i + 1] == b'"']
    at = _pick(rng, quotes) + 1 if quotes and rng.random() < 0.7 else int(rng.integers(len(data) + 1))
    bad = _pick(rng, [b"\xff", b"\xc3(", b"\xed\xa0\x80", b"\xfe\xff", b"\x80\x80"])
    (store / rel).write_bytes(data[:at] + bad + data[at:])
    return f"inserted {bad!r} at byte {at} of {rel}"


def deep_json(store: Path, rng: np.random.Generator) -> str:
    nodes = _nodes(store)
    node = _pick(rng, sorted(nodes))
    depth = int(_pick(rng, [2_000, 100_000]))
    nest = _pick(rng, [("[" * depth, "]" * depth), ('{"a":' * depth, "}" * depth)])
    deep = nest[0] + "0" + nest[1] if nest[0].startswith("{") else nest[0] + nest[1]
    doc = nodes[node]
    where = int(rng.integers(3))
    if where == 0:
        text = deep
        what = "the whole document"
    else:
        block = doc.setdefault("attributes", {})
        if where == 2 and node == "" and isinstance(block.get("zarr_vectors"), dict):
            block["zarr_vectors"]["crs"] = "@DEEP@"
            what = "zarr_vectors.crs"
        else:
            block["deep"] = "@DEEP@"
            what = "attributes.deep"
        text = json.dumps(doc).replace('"@DEEP@"', deep)
    (store / node / "zarr.json").write_text(text)
    return f"{node or '(root)'}/zarr.json: {what} nested {depth} deep"


# ------------------------------------------------------------------ structured metadata edits


def _per_chunk(nodes: dict[str, Any]) -> list[str]:
    return sorted(
        n for n, d in nodes.items() if isinstance((d.get("attributes") or {}).get("nonempty_chunks"), list)
    )


def _tables(nodes: dict[str, Any]) -> list[str]:
    fams = ("object_attributes", "group_attributes", "object_index", "groups")
    return sorted(
        n
        for n, d in nodes.items()
        if d.get("node_type") == "array" and len(d.get("shape") or []) in (1, 2) and any(f in n for f in fams)
    )


def _dtype_swap(name: str, rng: np.random.Generator) -> Any:
    """Another dtype name of a different item size, or something that is no dtype."""
    try:
        size = np.dtype(name).itemsize
    except TypeError:
        size = 0
    sized = [
        t for t in ("int8", "uint16", "float32", "float64", "complex128") if np.dtype(t).itemsize != size
    ]
    return _pick(rng, sized + ["bogus", 7, None, "<U4", "V3", "object"])


def _edit(store: Path, node: str, fn: Callable[[dict[str, Any]], str]) -> str:
    doc = _load(store, node)
    what = fn(doc)
    _save(store, node, doc)
    return f"{node or '(root)'}: {what}"


def json_dtype(store: Path, rng: np.random.Generator) -> str:
    nodes = _nodes(store)
    node = _pick(rng, _per_chunk(nodes) + _tables(nodes))

    def fn(doc: dict[str, Any]) -> str:
        attrs = doc.setdefault("attributes", {})
        if "dtype" in attrs and node in _per_chunk(nodes):
            new = _dtype_swap(attrs["dtype"], rng)
            old, attrs["dtype"] = attrs["dtype"], new
            return f"attributes.dtype {old!r} -> {new!r}"
        if rng.random() < 0.5 or doc.get("data_type") == "variable_length_bytes":
            new = _pick(
                rng,
                ["float32", "int64", "bogus", "string"]
                if doc.get("data_type") == "variable_length_bytes"
                else ["variable_length_bytes", "bogus", 3],
            )
        else:
            new = _dtype_swap(doc.get("data_type"), rng)
        old, doc["data_type"] = doc.get("data_type"), new
        return f"data_type {old!r} -> {new!r}"

    return _edit(store, node, fn)


def json_shape(store: Path, rng: np.random.Generator) -> str:
    nodes = _nodes(store)
    per_chunk, tables = _per_chunk(nodes), _tables(nodes)
    node = _pick(rng, per_chunk + tables)

    def fn(doc: dict[str, Any]) -> str:
        nd = len(doc.get("shape") or [])
        attrs = doc.setdefault("attributes", {})
        choices = ["shape", "chunks"] + (
            ["row_shape"] if node in per_chunk and "vertices" not in node else []
        )
        what = _pick(rng, choices)
        if what == "row_shape":
            new = _pick(rng, [[0], [2**40], [-1], [3, 0], [2, 2**62], "3"])
            old, attrs["row_shape"] = attrs.get("row_shape"), new
            return f"row_shape {old!r} -> {new!r}"
        if what == "shape":
            if node in tables:
                new = _pick(rng, [[2**40], [2**62], [0], [-5], [2**40, 3], [1.5]])
            else:
                new = _pick(
                    rng,
                    [
                        [2**31] * nd,
                        [2**62] * nd,
                        [0] * nd,
                        [1] * (nd + 1),
                        [-1] * nd,
                        [2**40] + [1] * (nd - 1),
                    ],
                )
            old, doc["shape"] = doc.get("shape"), new
            return f"shape {old!r} -> {new!r}"
        grid = doc.setdefault("chunk_grid", {}).setdefault("configuration", {})
        new = _pick(rng, [[0] * nd, [2**40] * nd, [2] * nd, [1] * (nd + 1), [-1] * nd])
        old, grid["chunk_shape"] = grid.get("chunk_shape"), new
        return f"chunk_grid chunk_shape {old!r} -> {new!r}"

    return _edit(store, node, fn)


def json_grid(store: Path, rng: np.random.Generator) -> str:
    """nonempty_chunks and chunk_grid_origin of a per-chunk array out of step with its cells."""
    nodes = _nodes(store)
    node = _pick(rng, _per_chunk(nodes))

    def fn(doc: dict[str, Any]) -> str:
        attrs = doc["attributes"]
        keys = list(attrs["nonempty_chunks"])
        nd = len(doc.get("shape") or [])
        shape = doc.get("shape") or [1] * nd
        origin = attrs.get("chunk_grid_origin") or [0] * nd
        inside = [".".join(str(o + int(i)) for o, i in zip(origin, idx)) for idx in np.ndindex(*shape)]
        absent = [k for k in inside if k not in keys]
        how = _pick(
            rng,
            ["drop", "absent", "huge", "dup", "junk", "origin"]
            if absent
            else ["drop", "huge", "dup", "junk", "origin"],
        )
        if how == "drop" and keys:
            gone = keys.pop(int(rng.integers(len(keys))))
            attrs["nonempty_chunks"] = keys
            return f"nonempty_chunks: dropped {gone} (its cell stays)"
        if how == "absent":
            extra = _pick(rng, absent)
            attrs["nonempty_chunks"] = keys + [extra]
            return f"nonempty_chunks: added {extra}, which has no cell"
        if how == "huge":
            extra = ".".join([str(2**62)] + ["0"] * (nd - 1))
            attrs["nonempty_chunks"] = keys + [extra]
            return f"nonempty_chunks: added {extra}"
        if how == "dup" and keys:
            attrs["nonempty_chunks"] = keys + keys
            return "nonempty_chunks: every entry twice"
        if how == "junk":
            new = _pick(rng, [[1, 2], ["a.b.c"], "0.0.0", [None], ["0.0"], ["0.0.0.0"]])
            attrs["nonempty_chunks"] = new
            return f"nonempty_chunks -> {new!r}"
        new = _pick(rng, [[2**62] * nd, [-(2**62)] + [0] * (nd - 1), [1] + [0] * (nd - 1), [0] * (nd + 1)])
        old, attrs["chunk_grid_origin"] = origin, new
        return f"chunk_grid_origin {old!r} -> {new!r}"

    return _edit(store, node, fn)


def json_root(store: Path, rng: np.random.Generator) -> str:
    nodes = _nodes(store)
    block = (nodes[""].get("attributes") or {}).get("zarr_vectors")
    if not isinstance(block, dict):
        raise NotApplicable("no zarr_vectors block")
    nd = len(block.get("chunk_shape") or [3])
    inf = float("inf")
    edits: list[tuple[str, Any]] = [
        ("chunk_shape", [inf] * nd),
        ("chunk_shape", [float("nan")] * nd),
        ("chunk_shape", [1e-300] * nd),
        ("chunk_shape", [0] * nd),
        ("chunk_shape", [150.0] * (nd - 1)),
        ("chunk_shape", [150.0] * (nd + 1)),
        ("chunk_shape", [2.0**62] * nd),
        ("chunk_shape", "150"),
        ("chunk_shape", [1e-3] * nd),
        ("bounds", [[0.0] * nd, [inf] * nd]),
        ("bounds", [[0.0] * (nd + 1), [1.0] * (nd + 1)]),
        ("base_bin_shape", [0.0] * nd),
        ("base_bin_shape", [inf] * nd),
        ("base_bin_shape", [1e-9] * nd),
        ("base_bin_shape", [50.0] * (nd + 1)),
        ("zv_version", "1.0.0"),
        ("zv_version", "0.8.0"),
        ("zv_version", 9),
        ("geometry_types", []),
        ("geometry_types", 5),
        ("links_convention", "spiral"),
        ("multiscales", None),
        ("translation", [0.0] * nd),
        ("translation", [1e-300] * nd),
        ("translation", [inf] * nd),
        ("datasets", []),
    ]
    key, value = edits[int(rng.integers(len(edits)))]

    def fn(doc: dict[str, Any]) -> str:
        attrs = doc["attributes"]
        if key == "multiscales":
            attrs.pop("multiscales", None)
            return "multiscales removed"
        ms = (attrs.get("multiscales") or [{}])[0]
        if key == "datasets":
            ms["datasets"] = value
            return "multiscales datasets -> []"
        if key == "translation":
            for t in ms["datasets"][-1]["coordinateTransformations"]:
                if t.get("type") == "translation":
                    t["translation"] = value
            return f"multiscales last translation -> {value!r}"
        old, attrs["zarr_vectors"][key] = attrs["zarr_vectors"].get(key), value
        return f"zarr_vectors.{key} {old!r} -> {value!r}"

    return _edit(store, "", fn)


def json_counts(store: Path, rng: np.random.Generator) -> str:
    """Counts and sizes in level, object-index, links and groups metadata."""
    nodes = _nodes(store)
    edits: list[tuple[str, str, Any]] = []
    for node, doc in nodes.items():
        attrs = doc.get("attributes") or {}
        lv = attrs.get("zarr_vectors_level")
        if isinstance(lv, dict):
            nd = len(lv.get("chunk_shape") or nodes[""]["attributes"]["zarr_vectors"]["chunk_shape"])
            edits += [
                (node, "vertex_count", 2**62),
                (node, "vertex_count", -1),
                (node, "vertex_count", 0),
                (node, "level", 7),
                (node, "chunk_shape", [float("inf")] * nd),
                (node, "chunk_shape", [1.0] * (nd + 1)),
            ]
        if attrs.get("zv_array") == "object_index":
            edits += [
                (node, "num_objects", 2**40),
                (node, "num_objects", 0),
                (node, "num_present", 2**40),
                (node, "layout", "vlen_manifests_v9"),
                (node, "sid_ndim", 7),
            ]
        if attrs.get("zv_array") == "links_family":
            edits += [
                (node, "link_width", 2**31),
                (node, "link_width", attrs.get("link_width", 2) + 1),
                (node, "link_width", 0),
                (node, "num_links", 2**62),
                (node, "directed", "yes"),
            ]
        if "has_perm" in attrs:
            edits += [(node, "has_perm", not attrs["has_perm"])]
        if attrs.get("zv_array") == "groups":
            edits += [
                (node, "num_groups", 2**40),
                (node, "group_ranges", {"0": [0, 2**62]}),
                (node, "group_ranges", {"1": [0, 3]}),
            ]
    node, key, value = _pick(rng, sorted(edits, key=repr))

    def fn(doc: dict[str, Any]) -> str:
        attrs = doc["attributes"]
        block = attrs["zarr_vectors_level"] if "zarr_vectors_level" in attrs else attrs
        old, block[key] = block.get(key), value
        return f"{key} {old!r} -> {value!r}"

    return _edit(store, node, fn)


def json_codecs(store: Path, rng: np.random.Generator) -> str:
    nodes = _nodes(store)
    node = _pick(rng, sorted(n for n, d in nodes.items() if d.get("node_type") == "array"))

    def fn(doc: dict[str, Any]) -> str:
        codecs = doc.get("codecs") or []
        how = _pick(rng, ["drop-last", "add-zstd", "gzip", "unknown", "none", "blosc-typesize", "encoding"])
        if how == "drop-last" and len(codecs) > 1:
            gone = codecs.pop()
            return f"codec {gone.get('name')!r} removed"
        if how == "add-zstd":
            codecs.append({"name": "zstd", "configuration": {"level": 3, "checksum": False}})
            return "zstd appended to the codec list"
        if how == "gzip" and len(codecs) > 1:
            codecs[-1] = {"name": "gzip", "configuration": {"level": 5}}
            return "last codec replaced by gzip"
        if how == "unknown":
            codecs.insert(0, {"name": "frobnicate", "configuration": {}})
            return "unknown codec 'frobnicate' put first"
        if how == "blosc-typesize":
            codecs.append(
                {
                    "name": "blosc",
                    "configuration": {
                        "typesize": 2**40,
                        "cname": "nope",
                        "clevel": 99,
                        "shuffle": "sideways",
                        "blocksize": -1,
                    },
                }
            )
            return "blosc with impossible settings appended"
        if how == "encoding" and "encoding" in (doc.get("attributes") or {}):
            old = doc["attributes"]["encoding"]
            doc["attributes"]["encoding"] = "draco" if old == "raw" else "raw"
            return f"attributes.encoding {old!r} -> {doc['attributes']['encoding']!r}"
        doc["codecs"] = None
        return "codecs -> null"

    return _edit(store, node, fn)


# ------------------------------------------------------------------ crafted payloads


def _chain(doc: dict[str, Any]) -> tuple[str, list[Any]] | None:
    """(serialiser name, numcodecs compressors) of an array, or None when not handled here."""
    codecs = doc.get("codecs") or []
    if not codecs or codecs[0].get("name") not in ("vlen-bytes", "vlen-utf8", "bytes"):
        return None
    comps = []
    for c in codecs[1:]:
        conf = c.get("configuration") or {}
        if c["name"] == "zstd":
            comps.append(numcodecs.Zstd(level=conf.get("level", 3)))
        elif c["name"] == "gzip":
            comps.append(numcodecs.GZip(level=conf.get("level", 5)))
        elif c["name"] == "blosc":
            shuffle = {"noshuffle": 0, "shuffle": 1, "bitshuffle": 2}[conf.get("shuffle", "noshuffle")]
            comps.append(
                numcodecs.Blosc(
                    cname=conf.get("cname", "zstd"), clevel=conf.get("clevel", 5), shuffle=shuffle
                )
            )
        else:
            return None
    return codecs[0]["name"], comps


def _decompress(raw: bytes, comps: list[Any]) -> bytes:
    for c in reversed(comps):
        raw = bytes(c.decode(raw))
    return raw


def _compress(raw: bytes, comps: list[Any]) -> bytes:
    for c in comps:
        raw = bytes(c.encode(raw))
    return raw


def _vlen_items(raw: bytes) -> list[bytes]:
    (n,) = struct.unpack_from("<I", raw)
    out, pos = [], 4
    for _ in range(n):
        (size,) = struct.unpack_from("<I", raw, pos)
        out.append(raw[pos + 4 : pos + 4 + size])
        pos += 4 + size
    return out


def _vlen(items: list[bytes]) -> bytes:
    return struct.pack("<I", len(items)) + b"".join(struct.pack("<I", len(i)) + i for i in items)


def _cells_of(store: Path, nodes: dict[str, Any], pred: Callable[[str, dict[str, Any]], bool]) -> list[str]:
    owners = {n for n, d in nodes.items() if d.get("node_type") == "array" and pred(n, d)}
    out = []
    for rel in _files(store, False):
        try:
            if _cell_owner(store, rel) in owners:
                out.append(rel)
        except NotApplicable:
            continue
    return out


def _rewrite_items(store: Path, rel: str, nodes: dict[str, Any], fn: Callable[[list[bytes]], str]) -> str:
    """Decode a vlen cell to its items, let ``fn`` change them, encode it back the same way."""
    chain = _chain(nodes[_cell_owner(store, rel)])
    if chain is None or chain[0] == "bytes":
        raise NotApplicable(f"{rel} is not a vlen cell this fuzzer can re-encode")
    items = _vlen_items(_decompress((store / rel).read_bytes(), chain[1]))
    what = fn(items)
    (store / rel).write_bytes(_compress(_vlen(items), chain[1]))
    return f"{rel}: {what}"


def _frag_count(store: Path, nodes: dict[str, Any], rng: np.random.Generator) -> str:
    rel = _pick(rng, _cells_of(store, nodes, lambda n, d: n.endswith("_fragments") and "attributes" not in n))
    r = _pick(rng, [BIG32, 0, 1])

    def fn(items: list[bytes]) -> str:
        items[0] = FRAG_HEADER.pack(FRAG_MAGIC, 1, 0, BIG32, r) + items[0][FRAG_HEADER.size :]
        return f"fragment index header F={BIG32}, R={r}"

    return _rewrite_items(store, rel, nodes, fn)


def _frag_range(store: Path, nodes: dict[str, Any], rng: np.random.Generator) -> str:
    rel = _pick(rng, _cells_of(store, nodes, lambda n, d: n.endswith("vertex_fragments")))

    def fn(items: list[bytes]) -> str:
        buf = bytearray(items[0])
        _, _, _, f, r = FRAG_HEADER.unpack_from(buf)
        if not r:
            raise NotApplicable("no range fragments")
        table = FRAG_HEADER.size + ((f + 7) // 8 + 7) // 8 * 8
        k, col = int(rng.integers(r)), int(rng.integers(2))
        value = _pick(rng, [2**62, 2**63 - 1, -(2**62)])
        struct.pack_into("<q", buf, table + 16 * k + 8 * col, value)
        items[0] = bytes(buf)
        return f"range {k} {'count' if col else 'start'} -> {value}"

    return _rewrite_items(store, rel, nodes, fn)


def _manifest(store: Path, nodes: dict[str, Any], rng: np.random.Generator) -> str:
    rel = _pick(rng, _cells_of(store, nodes, lambda n, d: n.endswith("object_index/manifests")))
    nd = len(nodes[""]["attributes"]["zarr_vectors"]["chunk_shape"])

    def fn(items: list[bytes]) -> str:
        full = [i for i, it in enumerate(items) if len(it) > 4]
        if not full:
            raise NotApplicable("no non-empty manifest")
        i = _pick(rng, full)
        chunk = items[i][4 : 4 + 8 * nd]
        how = int(rng.integers(4))
        if how == 0:
            items[i] = struct.pack("<I", BIG32) + items[i][4:]
            return f"manifest {i}: block count {BIG32}"
        if how == 1:
            items[i] = struct.pack("<I", 1) + chunk + b"\x01" + struct.pack("<qq", 0, 2**33)
            return f"manifest {i}: one block, fragments 0 .. 2^33"
        if how == 2:
            items[i] = struct.pack("<I", 1) + chunk + b"\x02" + struct.pack("<I", BIG32) + bytes(16)
            return f"manifest {i}: one block listing {BIG32} fragments"
        items[i] = struct.pack("<I", 1) + chunk + b"\x01" + struct.pack("<qq", 2**62, 2**62)
        return f"manifest {i}: one block, fragments from 2^62, 2^62 of them"

    return _rewrite_items(store, rel, nodes, fn)


def _ragged(store: Path, nodes: dict[str, Any], rng: np.random.Generator) -> str:
    def cross(n: str, d: dict[str, Any]) -> bool:
        return "/links/" in n and "link_attributes" not in n and not n.endswith("/links/0/self")

    rel = _pick(rng, _cells_of(store, nodes, cross))

    def fn(items: list[bytes]) -> str:
        buf = bytearray(items[0] if len(items[0]) >= 16 else bytes(16))
        at, value = _pick(rng, [(0, 2**62), (8, 2**62), (0, -1), (8, -(2**62))])
        struct.pack_into("<q", buf, at, value)
        items[0] = bytes(buf)
        return f"ragged link blob: int64 at byte {at} -> {value}"

    return _rewrite_items(store, rel, nodes, fn)


def _vlen_header(store: Path, nodes: dict[str, Any], rng: np.random.Generator) -> str:
    rel = _pick(rng, _cells_of(store, nodes, lambda n, d: (_chain(d) or ("",))[0].startswith("vlen")))
    chain = _chain(nodes[_cell_owner(store, rel)])
    assert chain is not None
    raw = bytearray(_decompress((store / rel).read_bytes(), chain[1]))
    at = _pick(rng, [0, 4] if len(raw) >= 8 else [0])
    struct.pack_into("<I", raw, at, BIG32)
    (store / rel).write_bytes(_compress(bytes(raw), chain[1]))
    return f"{rel}: vlen {'item count' if at == 0 else 'first item length'} -> {BIG32}"


def huge_counts(store: Path, rng: np.random.Generator) -> str:
    nodes = _nodes(store)
    makers = [_frag_count, _frag_range, _manifest, _ragged, _vlen_header]
    order = rng.permutation(len(makers))
    for k in order:
        try:
            return makers[int(k)](store, nodes, rng)
        except NotApplicable:
            continue
    raise NotApplicable("no header to inflate")


_GZIP_MEMBER: list[bytes] = []


def _gzip_bomb(members: int) -> bytes:
    """A multi-member gzip stream of ``members`` x 64 MiB of zeros (about 64 KiB each)."""
    if not _GZIP_MEMBER:
        c = zlib.compressobj(9, zlib.DEFLATED, 31)
        _GZIP_MEMBER.append(c.compress(bytes(64 << 20)) + c.flush())
    return _GZIP_MEMBER[0] * members


def _zstd_frame(size: int) -> bytes:
    """A zstd frame whose header claims ``size`` content bytes, holding one 128 KiB RLE block."""
    header = struct.pack("<IB", 0xFD2FB528, 0xE0) + struct.pack("<Q", size)  # single segment, 8-byte FCS
    block = (1 | (1 << 1) | (128 * 1024) << 3).to_bytes(3, "little") + b"\0"  # last, RLE, 128 KiB of 0
    return header + block


def bomb(store: Path, rng: np.random.Generator) -> str:
    """Decompression bombs: a cell whose compressed form expands (or claims to) far past memory."""
    nodes = _nodes(store)
    rel = _pick(rng, _cells_of(store, nodes, lambda n, d: _chain(d) is not None))
    chain = _chain(nodes[_cell_owner(store, rel)])
    assert chain is not None
    kinds = {type(c).__name__ for c in chain[1]}
    if "Zstd" in kinds:
        size = _pick(rng, [2**40, 2**31])
        (store / rel).write_bytes(_zstd_frame(size))
        return f"{rel}: zstd frame claiming {size} bytes"
    if "Blosc" in kinds:
        nbytes = 2**31 - 1 - int(rng.integers(1024))
        head = struct.pack("<BBBBIII", 2, 1, 0x01, 1, nbytes, 0, 16 + 64)
        (store / rel).write_bytes(head + bytes(64))
        return f"{rel}: blosc header claiming {nbytes} bytes"
    if "GZip" in kinds:
        members = _pick(rng, [8, 40])
        (store / rel).write_bytes(_gzip_bomb(members))
        return f"{rel}: gzip stream of {members * 64} MiB of zeros"
    return _vlen_header(store, nodes, rng)


MUTATIONS: dict[str, Mutation] = {
    "bitflip": bitflip,
    "truncate": truncate,
    "zero": zero,
    "delete_cell": delete_cell,
    "delete_json": delete_json,
    "garble_json": garble_json,
    "nonutf8_json": nonutf8_json,
    "deep_json": deep_json,
    "json_dtype": json_dtype,
    "json_shape": json_shape,
    "json_grid": json_grid,
    "json_root": json_root,
    "json_counts": json_counts,
    "json_codecs": json_codecs,
    "huge_counts": huge_counts,
    "bomb": bomb,
}


def mutate(store: Path, base: str, mutation: str, seed: int) -> str:
    """Apply ``mutation`` with ``seed`` to the copy at ``store`` of base store ``base``;
    returns what was done."""
    rng = np.random.default_rng([seed, zlib.crc32(mutation.encode()), zlib.crc32(base.encode())])
    return MUTATIONS[mutation](store, rng)
