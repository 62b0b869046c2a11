"""The sharded uint64 index writer (zarr_vectors.neuroglancer.sharded), read back with the
reader of tests/_ng_decode.py (written from Neuroglancer's sharded.md alone)."""

from __future__ import annotations

import gzip
import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests import _ng_decode as dec
from zarr_vectors.errors import InputError
from zarr_vectors.neuroglancer.sharded import (
    ShardingSpec,
    choose_sharding,
    compressed_morton,
    encode_shards,
    murmurhash3_x86_128_low64,
)

# MurmurHash3_x86_128(seed 0) of 8 little-endian bytes, low 64 bits, as the mmh3 package gives them
KNOWN = {
    0: 5148371408780832321,
    1: 16770674756601302682,
    1000: 18166190685042036079,
    2**32: 13524640716595723620,
    2**63: 11063714688786943912,
    2**64 - 1: 6291360166951214362,
    123456789012345: 11188472092825156211,
}


def test_murmurhash_known_values() -> None:
    keys = np.array(list(KNOWN), np.uint64)
    assert murmurhash3_x86_128_low64(keys).tolist() == list(KNOWN.values())
    assert [dec.murmur_low64(k) for k in KNOWN] == list(KNOWN.values())


def test_murmurhash_matches_mmh3() -> None:
    mmh3 = pytest.importorskip("mmh3")
    rng = np.random.default_rng(3)
    edge = np.array([0, 1, 2**64 - 1], np.uint64)
    keys = np.concatenate([rng.integers(0, 2**64 - 1, 2000, np.uint64, endpoint=True), edge])
    want = [mmh3.hash128(int(k).to_bytes(8, "little"), 0, False) & (2**64 - 1) for k in keys.tolist()]
    assert murmurhash3_x86_128_low64(keys).tolist() == want
    assert [dec.murmur_low64(int(k)) for k in keys[:200].tolist()] == want[:200]


@given(st.lists(st.integers(0, 2**64 - 1), max_size=40))
def test_vectorised_hash_equals_the_scalar_reference(keys: list[int]) -> None:
    assert murmurhash3_x86_128_low64(np.array(keys, np.uint64)).tolist() == [
        dec.murmur_low64(k) for k in keys
    ]


@settings(max_examples=60, deadline=None)
@given(
    keys=st.sets(st.integers(0, 2**64 - 1), max_size=120),
    preshift=st.integers(0, 8),
    minishard_bits=st.integers(0, 5),
    shard_bits=st.integers(0, 4),
    hash_=st.sampled_from(["identity", "murmurhash3_x86_128"]),
    index_enc=st.sampled_from(["raw", "gzip"]),
    data_enc=st.sampled_from(["raw", "gzip"]),
    small_keys=st.booleans(),
)
def test_every_key_round_trips(
    keys: set[int],
    preshift: int,
    minishard_bits: int,
    shard_bits: int,
    hash_: str,
    index_enc: str,
    data_enc: str,
    small_keys: bool,
) -> None:
    if small_keys:  # dense small ids, like annotation ids of one chunk
        keys = {k % 512 for k in keys}
    spec = ShardingSpec(preshift, hash_, minishard_bits, shard_bits, index_enc, data_enc)
    ordered = sorted(keys)
    values = [k.to_bytes(8, "little") * (k % 5) + bytes([k % 251]) for k in ordered]
    files = encode_shards(np.array(ordered, np.uint64), values, spec)
    assert len(files) <= 1 << shard_bits
    assert all(len(name) == max(1, -(-shard_bits // 4)) + 6 for name in files)
    read = dec.files_reader(files)
    sharding = spec.to_json()
    for k, v in zip(ordered, values):
        assert dec.sharded_get(read, sharding, k) == v
    absent = (max(keys, default=0) + 1) % 2**64
    if absent not in keys:
        assert dec.sharded_get(read, sharding, absent) is None


def test_hand_built_two_minishards() -> None:
    """Keys 1, 2, 5 with identity hash, one minishard bit, no shard bits: minishard 0 holds
    key 2, minishard 1 holds keys 1 and 5; data follow the 32-byte shard index in minishard
    order, then the minishard indexes."""
    spec = ShardingSpec(0, "identity", 1, 0)
    files = encode_shards([5, 2, 1], [b"EEEEE", b"BB", b"A"], spec)
    assert list(files) == ["0.shard"]
    data = b"BB" + b"A" + b"EEEEE"  # minishard 0: key 2; minishard 1: keys 1, 5
    mini0 = struct.pack("<3Q", 2, 0, 2)  # key 2, offset 0, size 2
    mini1 = struct.pack("<6Q", 1, 4, 2, 0, 1, 5)  # keys 1, 1+4; offsets 2, +0; sizes 1, 5
    index = struct.pack("<4Q", 8, 8 + 24, 8 + 24, 8 + 24 + 48)
    assert files["0.shard"] == index + data + mini0 + mini1


def test_gzip_and_shard_names() -> None:
    spec = ShardingSpec(0, "identity", 0, 5, "gzip", "gzip")
    files = encode_shards([3, 40], [b"x" * 100, b"y"], spec)
    assert sorted(files) == ["03.shard", "08.shard"]  # 40 >> 0 & 31 = 8
    body = files["03.shard"]
    start, end = struct.unpack_from("<QQ", body, 0)
    table = np.frombuffer(gzip.decompress(body[16 + start : 16 + end]), "<u8").reshape(3, 1)
    assert table[0, 0] == 3
    assert gzip.decompress(body[16 + int(table[1, 0]) : 16 + int(table[1, 0] + table[2, 0])]) == b"x" * 100


def test_bad_input() -> None:
    with pytest.raises(InputError):
        ShardingSpec(hash="md5")
    with pytest.raises(InputError):
        ShardingSpec(data_encoding="zstd")
    with pytest.raises(InputError):
        encode_shards([1, 1], [b"a", b"b"], ShardingSpec())
    with pytest.raises(InputError):
        encode_shards([1], [], ShardingSpec())
    with pytest.raises(InputError):
        compressed_morton(np.zeros((1, 3)), [2**30, 2**30, 2**30])


@given(st.lists(st.integers(1, 2000), min_size=1, max_size=4), st.data())
def test_compressed_morton_matches_the_spec(shape: list[int], data: st.DataObject) -> None:
    cells = [tuple(data.draw(st.integers(0, s - 1)) for s in shape) for _ in range(5)]
    got = compressed_morton(np.array(cells), shape).tolist()
    assert got == [dec.morton_key(c, shape) for c in cells]


def test_compressed_morton_spec_example() -> None:
    # grid 8 x 4 x 16: x, y, z bits interleave while each axis has bits left
    assert compressed_morton(np.array([[1, 2, 3], [5, 0, 7], [0, 0, 15]]), [8, 4, 16]).tolist() == [
        0b110101,
        0b11100101,
        0b110100100,
    ]


def test_choose_sharding_sizes() -> None:
    small = choose_sharding(100, 10_000)
    assert (small.shard_bits, small.minishard_bits) == (0, 0)
    big = choose_sharding(10_000_000, 400_000_000)
    assert 8 <= 400_000_000 / 2**big.shard_bits / 2**20 <= 64  # shard files of tens of MB
    per_minishard = 10_000_000 / 2 ** (big.shard_bits + big.minishard_bits)
    assert 64 <= per_minishard <= 512  # a minishard index of a few KB
    assert choose_sharding(0, 0).to_json()["@type"] == "neuroglancer_uint64_sharded_v1"


@pytest.fixture(scope="module")
def synapses(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import zarr_vectors as zv

    rng = np.random.default_rng(11)
    path = tmp_path_factory.mktemp("ngs") / "synapses.zarr"
    n = 3000
    zv.write_points(
        path,
        rng.uniform(0, 1000, (n, 3)),
        chunk_shape=250,
        bin_shape=125,
        attributes={"score": rng.random(n).astype("f4")},
        object_ids=rng.integers(1, 9, n) * 1000,
    )
    zv.open(path, mode="r+").build_pyramid([2, 2])
    return path


def test_sharded_export_answers_what_the_server_sends(synapses: Path, tmp_path: Path) -> None:
    import zarr_vectors as zv
    from zarr_vectors.neuroglancer import export_neuroglancer
    from zarr_vectors.neuroglancer.source import StoreSource

    counts = export_neuroglancer(synapses, tmp_path / "out", sharding=True)
    root = tmp_path / "out" / "synapses" / "ann"
    info = json.loads((root / "info").read_text())
    src = StoreSource(zv.open(synapses), "synapses")
    assert {k: v for k, v in info.items() if k not in ("by_id", "relationships", "spatial")} == {
        k: v
        for k, v in json.loads(src.get("ann/info")[0]).items()
        if k not in ("by_id", "relationships", "spatial")
    }
    shardings = {"by_id": info["by_id"]["sharding"], "rel_object": info["relationships"][0]["sharding"]}
    grids = {}
    for level in info["spatial"]:
        shardings[level["key"]] = level["sharding"]
        grids[level["key"]] = level["grid_shape"]
    seen = 0
    for rel in src.paths():
        head, _, rest = rel.partition("/")
        if head != "ann" or rest == "info":
            continue
        index, _, name = rest.partition("/")
        key = (
            dec.morton_key(tuple(int(v) for v in name.split("_")), grids[index])
            if index in grids
            else int(name)
        )
        assert dec.sharded_get(dec.folder_reader(root / index), shardings[index], key) == src.get(rel)[0], rel
        seen += 1
    assert seen > 3000  # every annotation id, object and cell
    files = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    assert all(f == "info" or f.endswith(".shard") for f in files)
    assert counts["synapses"] == len(files) + 1  # and props/info
    assert dec.sharded_get(dec.folder_reader(root / "by_id"), shardings["by_id"], 2**63 + 5) is None


def test_auto_sharding_keeps_small_layers_unsharded(synapses: Path, tmp_path: Path) -> None:
    from zarr_vectors.neuroglancer import export_neuroglancer

    export_neuroglancer(synapses, tmp_path / "out")
    info = json.loads((tmp_path / "out" / "synapses" / "ann" / "info").read_text())
    assert "sharding" not in info["by_id"]
    assert not list((tmp_path / "out" / "synapses" / "ann" / "by_id").glob("*.shard"))
    with pytest.raises(InputError):
        export_neuroglancer(synapses, tmp_path / "other", sharding="yes")


def test_cli_sharded_option(synapses: Path, tmp_path: Path) -> None:
    import zarr_vectors as zv

    root = Path(zv.__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": f"{root}:{root / 'codecs'}"}
    cmd = [
        sys.executable,
        "-m",
        "zarr_vectors",
        "export",
        "neuroglancer",
        str(synapses),
        str(tmp_path / "ng"),
    ]
    out = subprocess.run([*cmd, "--sharded"], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "ng" / "synapses" / "ann" / "by_id" / "0.shard").is_file()
    info = json.loads((tmp_path / "ng" / "synapses" / "ann" / "info").read_text())
    assert info["spatial"][0]["sharding"]["@type"] == "neuroglancer_uint64_sharded_v1"


def test_sharded_skeleton_export(tmp_path: Path) -> None:
    import zarr_vectors as zv
    from zarr_vectors.neuroglancer import export_neuroglancer
    from zarr_vectors.neuroglancer.source import StoreSource

    t = np.linspace(0, 1, 30)
    pos = np.stack([100 + 600 * t, 500 + 200 * np.sin(6 * t), 500 + 0 * t], 1)
    store = tmp_path / "neurons.zarr"
    zv.write_skeleton(
        store,
        np.concatenate([pos, pos + 40, pos + 80]),
        np.concatenate([np.arange(-1, 29), np.r_[-1, np.arange(30, 59)], np.r_[-1, np.arange(60, 89)]]),
        chunk_shape=250,
        attributes={"radius": np.linspace(1, 9, 90).astype("f4")},
        object_ids=np.repeat([7, 2**40, 9], 30),
    )
    counts = export_neuroglancer(store, tmp_path / "out", sharding=True)
    root = tmp_path / "out" / "neurons" / "skeletons"
    info = json.loads((root / "info").read_text())
    src = StoreSource(zv.open(store), "neurons")
    assert {k: v for k, v in info.items() if k != "sharding"} == json.loads(src.get("skeletons/info")[0])
    for segment in (7, 2**40, 9):
        body = dec.sharded_get(dec.folder_reader(root), info["sharding"], segment)
        assert body == src.get(f"skeletons/{segment}")[0]
    assert dec.sharded_get(dec.folder_reader(root), info["sharding"], 8) is None
    assert sorted(p.name for p in root.iterdir()) == ["0.shard", "info"]
    assert counts["neurons"] == 3  # props/info, skeletons/info, one shard
    export_neuroglancer(store, tmp_path / "auto")  # few objects: one file each
    assert (tmp_path / "auto" / "neurons" / "skeletons" / "7").is_file()


@pytest.mark.parametrize("sharding", [False, "auto"])
def test_unsharded_export_writes_every_path(synapses: Path, tmp_path: Path, sharding: bool | str) -> None:
    import zarr_vectors as zv
    from zarr_vectors.neuroglancer import export_neuroglancer
    from zarr_vectors.neuroglancer.source import StoreSource

    counts = export_neuroglancer(synapses, tmp_path / "out", sharding=sharding)
    src = StoreSource(zv.open(synapses), "synapses")
    paths = list(src.paths())
    root = tmp_path / "out" / "synapses"
    assert counts["synapses"] == len(paths) == sum(1 for p in root.rglob("*") if p.is_file())
    for rel in paths:
        assert (root / rel).read_bytes() == src.get(rel)[0], rel


@settings(max_examples=30, deadline=None)
@given(
    keys=st.sets(st.integers(0, 2**64 - 1), min_size=1, max_size=40),
    minishard_bits=st.integers(0, 3),
    shard_bits=st.integers(0, 2),
    data_enc=st.sampled_from(["raw", "gzip"]),
)
def test_prefixes_sit_right_before_their_entry(
    keys: set[int], minishard_bits: int, shard_bits: int, data_enc: str
) -> None:
    """A multi-resolution mesh's fragment data precedes its manifest, outside the index."""
    spec = ShardingSpec(0, "murmurhash3_x86_128", minishard_bits, shard_bits, "gzip", data_enc)
    ordered = sorted(keys)
    manifests = [k.to_bytes(8, "little") for k in ordered]
    prefixes = [bytes([k % 256]) * (k % 7) for k in ordered]
    files = encode_shards(ordered, manifests, spec, prefixes=prefixes)
    read = dec.files_reader(files)
    for k, manifest, prefix in zip(ordered, manifests, prefixes):
        assert dec.sharded_get(read, spec.to_json(), k) == manifest
        found = dec.sharded_locate(read, spec.to_json(), k)
        assert found is not None
        name, start, _ = found
        assert files[name][start - len(prefix) : start] == prefix


def test_sharded_multilod_mesh_export(tmp_path: Path) -> None:
    """Sharded multi-resolution meshes: the manifest is the entry of the object id, its
    fragment data sits right before it (as long as the manifest's fragment sizes add up to)."""
    trimesh = pytest.importorskip("trimesh")
    import zarr_vectors as zv
    from zarr_vectors.neuroglancer import export_neuroglancer
    from zarr_vectors.neuroglancer.source import StoreSource

    m = trimesh.creation.icosphere(subdivisions=3)
    store = tmp_path / "soma.zarr"
    zv.write_meshes(
        store,
        [(m.vertices * 120 + 500, m.faces), (m.vertices * 60 + 200, m.faces)],
        chunk_shape=250,
        object_ids=[7, 12],
    )
    zv.open(store, mode="r+").build_pyramid([2])
    counts = export_neuroglancer(store, tmp_path / "out", sharding=True)
    root = tmp_path / "out" / "soma" / "mesh"
    info = json.loads((root / "info").read_text())
    src = StoreSource(zv.open(store), "soma")
    assert {k: v for k, v in info.items() if k != "sharding"} == json.loads(src.get("mesh/info")[0])
    read = dec.folder_reader(root)
    for segment in (7, 12):
        manifest = dec.sharded_get(read, info["sharding"], segment)
        assert manifest == src.get(f"mesh/{segment}.index")[0]
        found = dec.sharded_locate(read, info["sharding"], segment)
        assert found is not None
        name, start, _ = found
        total = int(sum(int(s.sum()) for s in dec.multilod_manifest(manifest)["sizes"]))
        data = read(name, start - total, start)
        assert data == src.get(f"mesh/{segment}")[0]
        lods = dec.multilod_fragments(info, dec.multilod_manifest(manifest), data)
        assert len(lods) == 2
    assert sorted(p.name for p in root.iterdir()) == ["0.shard", "info"]
    assert counts["soma"] == 3  # props/info, mesh/info, one shard
    export_neuroglancer(store, tmp_path / "legacy", sharding=True, mesh_format="legacy")
    assert (tmp_path / "legacy" / "soma" / "mesh" / "7:0").is_file()  # no sharded legacy form
