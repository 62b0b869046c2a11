"""One conformance suite for every backend of the Backend protocol.

Each backend starts empty and is driven only through the protocol: put then get,
absent keys, recursive listing under a prefix, key sizes, deleting a prefix and keys,
its capabilities, and refusals (read-only backends, a zip file that cannot delete).
Backends: a local directory, a zarr MemoryStore, a ``memory://`` URL, an opened zarr
ZipStore, S3 (moto on 127.0.0.1), the in-memory staging area, the overlay of a
rebuild (over a base whose hidden keys must not show) and the consistency wrapper.
"""

from __future__ import annotations

import re
import uuid
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import zarr

import zarr_vectors
from zarr_vectors.errors import ReadOnlyError, StoreChangedError, StoreError
from zarr_vectors.storage.commit import MemoryStage, Overlay
from zarr_vectors.storage.local import LocalBackend
from zarr_vectors.storage.protocol import Backend, run_sync
from zarr_vectors.storage.resolve import open_backend
from zarr_vectors.storage.wrappers import ConsistentBackend
from zarr_vectors.storage.zarr_store import ZarrStoreBackend

from .conftest import kind_param

#: key -> bytes written by every test; "a/bc" shares a string prefix with folder "a/b".
DATA = {
    "zarr.json": b'{"zarr_format": 3}',
    "a/b/c/0": b"x" * 10,
    "a/b/c/1": b"",
    "a/b/zarr.json": b"{}",
    "a/bc": b"yy",
    "a/x": b"zzz",
    "z": b"q" * 70_000,
}
KINDS = ["local", "memory_store", "memory_url", "zip_store", "s3_url", "stage", "overlay", "consistent"]


@pytest.fixture(params=[kind_param(k) for k in KINDS])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    kind = request.param
    made: Backend
    if kind == "local":
        made = LocalBackend(tmp_path / "s.zarr")
    elif kind == "memory_store":
        made = ZarrStoreBackend(zarr.storage.MemoryStore(), "memory")
    elif kind == "memory_url":
        made = open_backend(f"memory://{uuid.uuid4().hex}", read_only=False)
    elif kind == "zip_store":
        store = run_sync(zarr.storage.ZipStore.open(tmp_path / "s.zip", mode="w"))
        made = ZarrStoreBackend(store, "zip")
    elif kind == "s3_url":
        prefix, options = request.getfixturevalue("s3_server")
        made = open_backend(f"{prefix}/{uuid.uuid4().hex}.zarr", read_only=False, storage_options=options)
    elif kind == "stage":
        made = MemoryStage()
    elif kind == "overlay":
        base = MemoryStage()
        base.set_many([("old/0", b"gone"), ("old/1/x", b"gone")])  # the levels a rebuild replaces
        made = Overlay(base, MemoryStage(), lambda key: key == "old" or key.startswith("old/"))
    else:
        made = ConsistentBackend(LocalBackend(tmp_path / "c.zarr"), None)
    yield made
    if kind == "zip_store":
        made.store.close()


def test_starts_empty_and_reads_absent_keys_as_none(backend: Backend) -> None:
    assert backend.is_empty()
    assert backend.get_many(["zarr.json", "a/b", "old/0", "nope/x"]) == [None] * 4
    assert backend.get_many([]) == []
    assert backend.list_keys() == [] and backend.key_sizes() == {} and backend.list_dir("") == []


@pytest.mark.filterwarnings("ignore:Duplicate name")  # a zip file appends the replaced key
def test_put_then_get(backend: Backend) -> None:
    backend.set_many(list(DATA.items()))
    assert not backend.is_empty()
    keys = sorted(DATA)
    assert backend.get_many(keys) == [DATA[k] for k in keys]
    # folders, keys below a key, and unknown keys are absent
    assert backend.get_many(["a", "a/b", "a/b/c", "z/0", "a/b/c/2"]) == [None] * 5
    backend.set_many([("a/x", b"new")])  # replacing a key
    assert backend.get_many(["a/x", "a/bc"]) == [b"new", b"yy"]


@pytest.mark.filterwarnings("ignore:Duplicate name")
def test_byte_ranges(backend: Backend) -> None:
    backend.set_many(list(DATA.items()))
    z = DATA["z"][:100] + b"0123456789"
    backend.set_many([("r/z", z)])
    ranges = [
        ("r/z", 0, None),  # whole
        ("r/z", 100, 4),  # inside
        ("r/z", -3, None),  # suffix
        ("r/z", 105, None),  # from an offset
        ("r/z", 108, 50),  # cut at the end
        ("r/z", -500, None),  # suffix longer than the object
        ("a/b/c/1", 0, None),  # empty object
        ("missing", -16, None),  # absent
        ("a/b", 0, 4),  # a folder is absent
    ]
    assert backend.get_ranges(ranges) == [z, b"0123", b"789", b"56789", b"89", z, b"", None, None]
    assert backend.get_ranges([]) == []


def test_list_keys_recursively_under_a_prefix(backend: Backend) -> None:
    backend.set_many(list(DATA.items()))
    assert sorted(backend.list_keys()) == sorted(DATA)
    assert sorted(backend.list_keys("a")) == ["a/b/c/0", "a/b/c/1", "a/b/zarr.json", "a/bc", "a/x"]
    assert sorted(backend.list_keys("a/b")) == ["a/b/c/0", "a/b/c/1", "a/b/zarr.json"]  # not a/bc
    assert sorted(backend.list_keys("a/b/")) == sorted(backend.list_keys("a/b"))
    assert backend.list_keys("a/b/c/0") == [] and backend.list_keys("missing") == []
    assert backend.list_dir("") == ["a", "z", "zarr.json"]
    assert backend.list_dir("a") == ["b", "bc", "x"]
    assert backend.list_dir("a/b") == ["c", "zarr.json"]


def test_key_sizes(backend: Backend) -> None:
    backend.set_many(list(DATA.items()))
    assert backend.key_sizes() == {k: len(v) for k, v in DATA.items()}
    assert backend.key_sizes("a/b") == {"a/b/c/0": 10, "a/b/c/1": 0, "a/b/zarr.json": 2}
    assert backend.key_sizes("nope") == {}


def test_delete_prefix_and_keys(backend: Backend) -> None:
    backend.set_many(list(DATA.items()))
    if not backend.supports_deletes:
        for delete in (lambda: backend.delete_prefix("a/b"), lambda: backend.delete_many(["z"])):
            with pytest.raises(
                StoreError, match="store zip: cannot delete .*: this store cannot delete keys"
            ):
                delete()
        assert sorted(backend.list_keys()) == sorted(DATA)
        return
    backend.delete_prefix("a/b")
    assert sorted(backend.list_keys()) == ["a/bc", "a/x", "z", "zarr.json"]
    assert backend.get_many(["a/b/c/0", "a/bc"]) == [None, b"yy"]
    backend.delete_prefix("a/x")  # a key is not a prefix: nothing below it
    backend.delete_prefix("missing")
    assert sorted(backend.list_keys()) == ["a/bc", "a/x", "z", "zarr.json"]
    backend.delete_many(["z", "a/x", "never/was"])
    assert sorted(backend.list_keys()) == ["a/bc", "zarr.json"]
    backend.set_many([("a/b/again", b"1")])  # a deleted folder can be written again
    assert backend.get_many(["a/b/again"]) == [b"1"]
    backend.delete_prefix("")
    assert backend.list_keys() == [] and backend.is_empty()
    assert backend.get_many(["zarr.json", "a/bc"]) == [None, None]


def test_capabilities(backend: Backend, tmp_path: Path) -> None:
    kind = type(backend).__name__
    assert isinstance(backend.description, str) and backend.description
    assert backend.read_only is False
    assert backend.supports_deletes is (kind != "ZarrStoreBackend" or backend.description != "zip")
    local = backend.local_dir
    assert local is None or local in (tmp_path / "s.zarr", tmp_path / "c.zarr")
    assert (local is not None) == (kind == "LocalBackend" or isinstance(backend, ConsistentBackend))
    in_memory = kind in ("MemoryStage", "Overlay") or backend.description == "memory"
    in_memory |= backend.description.startswith("memory://")
    assert backend.in_memory is in_memory
    backend.refresh()  # never fails, keeps the keys
    backend.set_many([("k", b"v")])
    backend.refresh()
    assert backend.get_many(["k"]) == [b"v"]


# -- read-only backends ----------------------------------------------------------------


def _read_only_backends(tmp_path: Path) -> dict[str, Callable[[], Backend]]:
    local = tmp_path / "ro.zarr"
    LocalBackend(local).set_many(list(DATA.items()))
    with zipfile.ZipFile(tmp_path / "ro.zip", "w") as zf:
        for key, value in DATA.items():
            zf.writestr(key, value)
    memory = zarr.storage.MemoryStore()
    ZarrStoreBackend(memory).set_many(list(DATA.items()))
    return {
        "local": lambda: LocalBackend(local, read_only=True),
        "zip file": lambda: open_backend(tmp_path / "ro.zip", read_only=True),
        "memory store": lambda: ZarrStoreBackend(memory.with_read_only(True)),
        "consistent": lambda: ConsistentBackend(open_backend(local, read_only=True), DATA["zarr.json"]),
    }


@pytest.mark.parametrize("kind", ["local", "zip file", "memory store", "consistent"])
def test_read_only_backends_read_and_refuse_changes(tmp_path: Path, kind: str) -> None:
    b = _read_only_backends(tmp_path)[kind]()
    assert b.read_only
    assert b.key_sizes() == {k: len(v) for k, v in DATA.items()}
    assert sorted(b.list_keys("a/b")) == ["a/b/c/0", "a/b/c/1", "a/b/zarr.json"]
    assert b.get_many(["a/x", "nope"]) == [b"zzz", None]
    for change in (
        lambda: b.set_many([("a/x", b"new")]),
        lambda: b.delete_many(["a/x"]),
        lambda: b.delete_prefix("a"),
        lambda: b.delete_prefix(""),
    ):
        with pytest.raises(ReadOnlyError, match="is opened read-only"):
            change()
    assert b.key_sizes() == {k: len(v) for k, v in DATA.items()}
    assert b.get_many(["a/x"]) == [b"zzz"]


# -- backend-specific guarantees, still through the protocol ------------------------------


def test_local_deletes_never_reach_through_a_link_out_of_the_store(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    (outside / "b").mkdir(parents=True)
    (outside / "b" / "keep").write_bytes(b"1")
    (outside / "keep").write_bytes(b"2")
    b = LocalBackend(tmp_path / "s.zarr")
    b.set_many([("zarr.json", b"{}")])
    (tmp_path / "s.zarr" / "a").symlink_to(outside)
    with pytest.raises(StoreError, match="folder 'a' leads to .*outside the store; refusing to delete"):
        b.delete_prefix("a/b")
    with pytest.raises(StoreError, match="outside the store; refusing to delete"):
        b.delete_many(["a/keep"])
    assert sorted(b.list_keys()) == ["zarr.json"]  # a linked folder is not listed into
    b.delete_prefix("a")  # the link itself goes, never what it points to
    assert not (tmp_path / "s.zarr" / "a").exists()
    assert (outside / "b" / "keep").read_bytes() == b"1" and (outside / "keep").read_bytes() == b"2"


def test_consistent_backend_tracks_its_own_root_and_refresh_accepts_a_new_one(tmp_path: Path) -> None:
    inner = LocalBackend(tmp_path / "s.zarr")
    inner.set_many([("zarr.json", b"v1"), ("k", b"1")])
    b = ConsistentBackend(inner, b"v1")
    b.set_many([("zarr.json", b"v2")])  # its own write: still consistent
    assert b.get_many(["k"]) == [b"1"]
    inner.set_many([("zarr.json", b"v3")])  # another writer
    with pytest.raises(StoreChangedError):
        b.get_many(["k"])
    b.refresh()
    assert b.get_many(["k"]) == [b"1"]
    b.delete_prefix("")
    assert b.get_many(["k"]) == [None]  # the root is gone with the rest: no false alarm


def test_overlay_hides_base_keys_and_deleted_ones() -> None:
    base = MemoryStage()
    base.set_many([("1/a", b"old"), ("0/x", b"kept"), ("0/y", b"kept")])
    o = Overlay(base, MemoryStage(), lambda key: key == "1" or key.startswith("1/"))
    assert sorted(o.list_keys()) == ["0/x", "0/y"] and o.list_dir("") == ["0"]
    o.set_many([("1/b", b"new")])
    o.delete_many(["0/y"])
    assert o.get_many(["1/a", "1/b", "0/x", "0/y"]) == [None, b"new", b"kept", None]
    assert o.key_sizes() == {"0/x": 4, "1/b": 3}
    o.delete_prefix("0")
    assert o.list_keys() == ["1/b"] and o.list_dir("") == ["1"]
    assert base.key_sizes() == {"1/a": 3, "0/x": 4, "0/y": 4}  # nothing reaches the base before commit
    assert o.hides("0/x") and o.hides("1/a") and not o.hides("2/a")


# -- no caller switches on a backend's class; one bridge to async stores -----------------

PACKAGE = Path(zarr_vectors.__file__).parent


@pytest.mark.parametrize(
    "pattern, allowed",
    [
        (r"isinstance\([^)]*Backend", set()),
        (r"getattr\([^)]*backend", set()),
        (r"zarr\.core\.sync|asyncio\.run\(|run_until_complete|new_event_loop", {"storage/protocol.py"}),
    ],
)
def test_no_module_switches_on_backend_classes_or_bridges_async_itself(
    pattern: str, allowed: set[str]
) -> None:
    found = {
        path.relative_to(PACKAGE).as_posix()
        for path in PACKAGE.rglob("*.py")
        if re.search(pattern, path.read_text(encoding="utf-8"))
    }
    assert found <= allowed, found


def test_every_backend_class_has_the_whole_protocol(tmp_path: Path) -> None:
    members = {n for n in dir(Backend) if not n.startswith("_")} | {"description"}
    assert {"get_many", "set_many", "list_dir", "list_keys", "key_sizes", "delete_prefix"} <= members
    local = LocalBackend(tmp_path / "s.zarr")
    for made in (
        local,
        ZarrStoreBackend(zarr.storage.MemoryStore()),
        ConsistentBackend(local, None),
        MemoryStage(),
        Overlay(local, MemoryStage(), lambda key: False),
    ):
        assert sorted(n for n in members if not hasattr(made, n)) == [], type(made).__name__


def test_ranged_reads_cut_a_whole_object_sent_by_a_server_that_ignored_the_range():
    from zarr_vectors.storage.zarr_store import requested_bytes

    whole = bytes(range(100))
    assert requested_bytes(whole, -10, None) == whole[-10:]  # suffix: the index at a shard's end
    assert requested_bytes(whole, 20, 5) == whole[20:25]
    assert requested_bytes(whole[20:25], 20, 5) == whole[20:25]  # a server that honoured it
    assert requested_bytes(whole[-10:], -10, None) == whole[-10:]
