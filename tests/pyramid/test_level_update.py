"""``update_levels``: after seeded random appends, replaces and deletes, each followed by an update
of the coarse levels, the store is file for file what a one-shot write of the final data plus a
full ``build_pyramid`` with the same settings writes (the root's write generation aside); and
the update leaves the files of cells outside the edit's footprint untouched."""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import zarr_vectors as zv
from zarr_vectors.engine import append_points
from zarr_vectors.engine.write.append import Footprint
from zarr_vectors.engine.write.point_edit import delete_points, replace_points
from zarr_vectors.errors import InputError
from zarr_vectors.pyramid.sparsity import Sparsity
from zarr_vectors.pyramid.update import full_rebuild_reason, update_levels
from zarr_vectors.storage import GENERATION_KEY

BOUNDS = ([0.0, 0.0, 0.0], [100.0, 100.0, 100.0])


@dataclass
class Data:
    pts: np.ndarray
    w: np.ndarray
    ids: np.ndarray | None
    size: dict[int, float]


def _write(path: Path | str, d: Data, shards: Any) -> zv.Dataset:
    extra: dict[str, Any] = {}
    if d.ids is not None:
        extra = {"object_ids": d.ids, "object_attributes": {"size": dict(d.size)}}
    return zv.write_points(
        path,
        d.pts,
        chunk_shape=25,
        bin_shape=12.5,
        bounds=BOUNDS,
        attributes={"w": d.w},
        compression="zstd",
        shards=shards,
        **extra,
    )


def _rows(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Points clustered in a corner of the space (so an edit leaves most cells alone)."""
    centre = rng.uniform(10, 90, 3)
    pts = np.clip(centre + rng.normal(0, 8, (n, 3)), 0, 100).astype(np.float32)
    return pts, rng.random(n).astype(np.float32)


def _files(path: Path) -> dict[str, bytes]:
    out = {}
    for root, _, names in os.walk(path):
        for name in names:
            full = Path(root) / name
            out[str(full.relative_to(path))] = full.read_bytes()
    return out


def _stored(ds: zv.Dataset) -> dict[str, bytes]:
    """Every stored object of a store, by key, as stored (below the reader of shards)."""
    backend = ds._store.backend
    while hasattr(backend, "inner"):
        backend = backend.inner
    keys = sorted(backend.list_keys())
    return dict(zip(keys, backend.get_many(keys)))


def _assert_same_store(a: dict[str, bytes], b: dict[str, bytes]) -> None:
    """Every stored object equal; the roots equal but for their write generation."""
    assert sorted(a) == sorted(b)
    for key in a:
        if key == "zarr.json":
            ra, rb = json.loads(a[key]), json.loads(b[key])
            assert ra["attributes"].pop(GENERATION_KEY) != rb["attributes"].pop(GENERATION_KEY)
            assert ra == rb
        else:
            assert a[key] == b[key], key


def _edit(store: Any, d: Data, rng: np.random.Generator, step: int) -> tuple[Data, Footprint]:
    """One random edit of ``store`` and of ``d`` alike: an append, or (with objects) a replace
    or a delete of a few objects; returns the new data and the edit's footprint."""
    fp: list[Footprint] = []
    what = "append" if d.ids is None else ["append", "replace", "delete"][step % 3]
    held = np.unique(d.ids) if d.ids is not None else None
    if what != "append" and (held is None or len(held) < 4):
        what = "append"
    if what == "append":
        pts, w = _rows(rng, int(rng.integers(5, 40)))
        ids = None if d.ids is None else rng.integers(20, 40, len(pts))
        append_points(store, pts, attributes={"w": w}, object_ids=ids, extend=True, footprint=fp)
        size = dict(d.size)
        new_ids = None if ids is None else np.concatenate([d.ids, ids])  # type: ignore[list-item]
        return Data(np.concatenate([d.pts, pts]), np.concatenate([d.w, w]), new_ids, size), fp[0]
    assert held is not None and d.ids is not None
    gone = rng.choice(held, int(rng.integers(1, 3)), replace=False)
    keep = ~np.isin(d.ids, gone)
    size = {k: v for k, v in d.size.items()}
    if what == "delete":
        delete_points(store, gone, footprint=fp)
        size = {k: v for k, v in size.items() if k not in set(gone.tolist())}
        return Data(d.pts[keep], d.w[keep], d.ids[keep], size), fp[0]
    pts, w = _rows(rng, int(rng.integers(3, 30)))
    ids = gone[rng.integers(0, len(gone), len(pts))]
    replace_points(store, gone, pts, attributes={"w": w}, object_ids=ids, footprint=fp)
    size = {k: v for k, v in size.items() if k not in set(gone.tolist()) - set(ids.tolist())}
    return (
        Data(
            np.concatenate([d.pts[keep], pts]),
            np.concatenate([d.w[keep], w]),
            np.concatenate([d.ids[keep], ids]),
            size,
        ),
        fp[0],
    )


CASES = {
    # name: (objects, build_pyramid keywords, shards, whether updates are region-wise)
    "subsample": (False, {"point_strategy": "subsample"}, None, True),
    "subsample-explicit": (False, {"point_strategy": "subsample", "cross_level": "explicit"}, None, True),
    "metavertex-no-objects": (
        False,
        {"point_strategy": "metavertex", "reductions": {"w": "max"}},
        None,
        True,
    ),
    "objects": (True, {}, None, True),
    "objects-explicit-sum": (True, {"cross_level": "explicit", "reductions": {"w": "sum"}}, None, True),
    "objects-no-links": (True, {"cross_level": "none", "chunk_scale": [1, 2]}, None, True),
    "objects-sharded": (True, {}, "auto", True),
    "objects-sharded-explicit": (True, {"cross_level": "explicit"}, "auto", True),
    "subsample-sharded": (False, {"point_strategy": "subsample"}, "auto", True),
    "objects-sparsity": (True, {"object_sparsity": 0.5}, None, True),
    "objects-sparsity-size": (True, {"object_sparsity": Sparsity(0.6, by="size")}, None, True),
    "objects-sparsity-attribute": (
        True,
        {"object_sparsity": [None, Sparsity(0.5, by="attribute", attribute="size")]},
        None,
        True,
    ),
}


_SLOW = pytest.mark.slow  # a local store is rebuilt in a sibling folder: about a second per edit


@pytest.mark.parametrize(
    ("case", "where"),
    [(c, "memory") for c in sorted(CASES)]
    + [pytest.param(c, "local", marks=_SLOW) for c in ("objects", "subsample", "objects-sharded")],
)
def test_updates_match_full_rebuilds(
    tmp_path: Path, case: str, where: str, caplog: pytest.LogCaptureFixture
) -> None:
    objects, build, shards, regional = CASES[case]
    base: Path | str = tmp_path if where == "local" else f"memory://level-update-{case}-{os.getpid()}"
    rng = np.random.default_rng(sorted(CASES).index(case) + 7)
    pts, w = _rows(rng, 300)
    pts = np.concatenate([pts, rng.uniform(0, 100, (100, 3)).astype(np.float32)])
    w = np.concatenate([w, rng.random(100).astype(np.float32)])
    ids = rng.integers(0, 20, len(pts)) if objects else None
    d = Data(pts, w, ids, {i: float(i) / 2 for i in range(0, 20, 3)} if objects else {})
    _write(f"{base}/edited", d, shards)
    ds = zv.open(f"{base}/edited", mode="r+")
    ds.build_pyramid([2, 2], **build)
    store = ds._store
    region_wise, fallbacks = [], []
    for step in range(3):
        d, fp = _edit(store, d, rng, step)
        assert store.is_stale(1) and store.is_stale(2)
        region_wise.append(full_rebuild_reason(store, fp) is None)
        with caplog.at_level(logging.INFO, logger="zarr_vectors.pyramid.update"):
            caplog.clear()
            update_levels(store, fp)
        fallbacks += [r.getMessage() for r in caplog.records if "rebuilt whole" in r.getMessage()]
        assert not [k for k in store.levels if store.is_stale(k)]
    _write(f"{base}/one", d, shards)
    one = zv.open(f"{base}/one", mode="r+")
    one.build_pyramid([2, 2], **build)
    _assert_same_store(_stored(ds), _stored(one))
    if regional:  # found during an update only: a link dtype the edit changes (a documented fallback)
        assert all(region_wise)
        assert len(fallbacks) < 3 and all("cross-level link dtype" in m for m in fallbacks), fallbacks
        if shards is not None:
            assert not fallbacks
    else:
        assert not any(region_wise)
    for k in (1, 2):
        got, want = ds.read(level=k), one.read(level=k)
        assert np.array_equal(got.positions, want.positions) and len(got) > 0


def test_cells_outside_the_footprint_are_not_rewritten(tmp_path: Path) -> None:
    """A local unsharded store: after an append in one corner, the files of every level-1/2 cell
    outside the cells above the append are the same files (same inode), the others new ones."""
    rng = np.random.default_rng(3)
    pts = rng.uniform(0, 100, (800, 3)).astype(np.float32)
    d = Data(pts, rng.random(800).astype(np.float32), rng.integers(0, 10, 800), {})
    _write(tmp_path / "s", d, None)
    ds = zv.open(tmp_path / "s", mode="r+")
    ds.build_pyramid([2, 2], cross_level="explicit")
    root = tmp_path / "s"
    before = {
        p: (root / p).stat().st_ino for p in _files(root) if p.startswith(("1/vertices/c/", "2/vertices/c/"))
    }
    fp: list[Footprint] = []
    corner = rng.uniform(0, 10, (5, 3)).astype(np.float32)
    store = ds._store
    append_points(
        store,
        corner,
        attributes={"w": np.ones(5, np.float32)},
        object_ids=np.full(5, 3),
        extend=True,
        footprint=fp,
    )
    assert full_rebuild_reason(store, fp[0]) is None
    update_levels(store, fp[0])
    after = {p: (root / p).stat().st_ino for p in before if (root / p).exists()}
    # chunks 25 -> 50 (level 1) -> 100 (level 2): the corner's cell is c/0/0/0 at both levels
    rewritten = {p for p in after if after[p] != before[p]}
    assert rewritten == {"1/vertices/c/0/0/0", "2/vertices/c/0/0/0"}
    assert len(after) == len(before) > 2


def test_an_empty_edit_clears_nothing_and_changes_no_cell(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    d = Data(*_rows(rng, 200), rng.integers(0, 5, 200), {})
    _write(tmp_path / "s", d, None)
    ds = zv.open(tmp_path / "s", mode="r+")
    ds.build_pyramid([2])
    before = _files(tmp_path / "s")
    fp: list[Footprint] = []
    delete_points(ds._store, [], footprint=fp)
    update_levels(ds._store, fp[0])
    after = _files(tmp_path / "s")
    assert sorted(before) == sorted(after)
    assert all(before[k] == after[k] for k in before if k != "zarr.json")


def test_levels_without_recorded_settings_are_refused(tmp_path: Path) -> None:
    rng = np.random.default_rng(6)
    d = Data(*_rows(rng, 100), None, {})
    _write(tmp_path / "s", d, None)
    ds = zv.open(tmp_path / "s", mode="r+")
    ds.build_pyramid([2])
    doc_path = tmp_path / "s" / "1" / "zarr.json"
    doc = json.loads(doc_path.read_text())
    del doc["attributes"]["zarr_vectors_level"]["pyramid_build"]
    doc_path.write_text(json.dumps(doc))
    store = zv.open(tmp_path / "s", mode="r+")._store
    fp: list[Footprint] = []
    append_points(store, d.pts[:3], attributes={"w": d.w[:3]}, footprint=fp)
    with pytest.raises(InputError, match="does not record the settings it was built with"):
        update_levels(store, fp[0])


def _pyramid(base: str, d: Data, **build: Any) -> zv.Dataset:
    _write(f"{base}/edited", d, None)
    ds = zv.open(f"{base}/edited", mode="r+")
    ds.build_pyramid([2, 2], **build)
    return ds


def _compare_with_one_shot(base: str, ds: zv.Dataset, d: Data, **build: Any) -> None:
    _write(f"{base}/one", d, None)
    one = zv.open(f"{base}/one", mode="r+")
    one.build_pyramid([2, 2], **build)
    _assert_same_store(_stored(ds), _stored(one))


def test_a_link_dtype_the_edit_changes_rebuilds_whole() -> None:
    """Links sized uint8 (every coarse cell's source rows fit in 256) become uint16 when an
    append crowds one cell: found during the update, which then rebuilds the levels whole."""
    rng = np.random.default_rng(8)
    d = Data(rng.uniform(0, 100, (150, 3)).astype(np.float32), rng.random(150).astype(np.float32), None, {})
    base = f"memory://level-update-dtype-{os.getpid()}"
    ds = _pyramid(base, d, point_strategy="subsample")
    store = ds._store
    assert (
        json.loads(store.backend.get_many(["0/links/+1/0.0.0/zarr.json"])[0])["attributes"]["dtype"]
        == "uint8"
    )
    pts = rng.uniform(60, 70, (400, 3)).astype(np.float32)
    w = rng.random(400).astype(np.float32)
    fp: list[Footprint] = []
    append_points(store, pts, attributes={"w": w}, footprint=fp)
    assert full_rebuild_reason(store, fp[0]) is None  # known only once the rows are counted
    update_levels(store, fp[0])
    assert (
        json.loads(store.backend.get_many(["0/links/+1/0.0.0/zarr.json"])[0])["attributes"]["dtype"]
        == "uint16"
    )
    d = Data(np.concatenate([d.pts, pts]), np.concatenate([d.w, w]), None, {})
    _compare_with_one_shot(base, ds, d, point_strategy="subsample")


def test_renumbered_ids_and_several_edits_at_once() -> None:
    """Two edits brought up to date by one update (their footprints combined); the second
    renumbers the objects (large sparse ids, remapped; a new id sorts below them all), so the
    levels are rebuilt whole."""
    rng = np.random.default_rng(9)
    pts, w = _rows(rng, 200)
    big = np.uint64(2**40)
    d = Data(pts, w, rng.integers(1, 9, 200).astype(np.uint64) * big, {})
    base = f"memory://level-update-renumber-{os.getpid()}"
    ds = _pyramid(base, d)
    store = ds._store
    fps: list[Footprint] = []
    delete_points(store, [8 * big], footprint=fps)  # the largest: no other id moves
    assert d.ids is not None
    keep = d.ids != 8 * big
    d = Data(d.pts[keep], d.w[keep], d.ids[keep], {})
    more, mw = _rows(rng, 20)
    low = np.full(20, 5, np.uint64)
    append_points(store, more, attributes={"w": mw}, object_ids=low, footprint=fps)
    assert d.ids is not None
    d = Data(np.concatenate([d.pts, more]), np.concatenate([d.w, mw]), np.concatenate([d.ids, low]), {})
    assert full_rebuild_reason(store, fps[0]) is None
    assert "renumbered" in str(full_rebuild_reason(store, fps[1]))
    update_levels(store, fps)
    assert not store.is_stale(1) and not store.is_stale(2)
    _compare_with_one_shot(base, ds, d)


def test_an_update_after_edits_it_was_not_told_of_is_refused_a_partial_answer() -> None:
    """An edit made without a footprint drops level 0's links, so a later update cannot trust
    them and rebuilds whole (still exact)."""
    rng = np.random.default_rng(10)
    pts, w = _rows(rng, 150)
    d = Data(pts, w, None, {})
    base = f"memory://level-update-untold-{os.getpid()}"
    ds = _pyramid(base, d, point_strategy="subsample")
    store = ds._store
    a, aw = _rows(rng, 10)
    append_points(store, a, attributes={"w": aw})
    b, bw = _rows(rng, 10)
    fp: list[Footprint] = []
    append_points(store, b, attributes={"w": bw}, footprint=fp)
    assert "dropped level 0's cross-level links" in str(full_rebuild_reason(store, fp[0]))
    update_levels(store, fp[0])
    d = Data(np.concatenate([d.pts, a, b]), np.concatenate([d.w, aw, bw]), None, {})
    _compare_with_one_shot(base, ds, d, point_strategy="subsample")


@pytest.mark.parametrize("crowded", [1, 2])
def test_a_delete_that_may_narrow_the_link_dtype(crowded: int) -> None:
    """Links uint16 (crowded corners); deleting one crowd leaves the region's cells needing only
    uint8, so every cell's rows are counted: with a second crowd elsewhere the dtype stays
    (region-wise update), without it the levels are rebuilt whole with uint8 links."""
    rng = np.random.default_rng(11)
    spread = rng.uniform(0, 100, (150, 3)).astype(np.float32)
    crowds = [rng.uniform(60, 70, (300, 3)), rng.uniform(10, 20, (300, 3))][:crowded]
    pts = np.concatenate([spread, *crowds]).astype(np.float32)
    ids = np.concatenate([rng.integers(0, 10, 150), *[np.full(300, 20 + i) for i in range(crowded)]])
    d = Data(pts, rng.random(len(pts)).astype(np.float32), ids, {})
    base = f"memory://level-update-narrow-{crowded}-{os.getpid()}"
    ds = _pyramid(base, d)
    store = ds._store
    key = "0/links/+1/0.0.0/zarr.json"
    assert json.loads(store.backend.get_many([key])[0])["attributes"]["dtype"] == "uint16"
    fp: list[Footprint] = []
    delete_points(store, [20], footprint=fp)
    update_levels(store, fp[0])
    want = "uint16" if crowded == 2 else "uint8"
    assert json.loads(store.backend.get_many([key])[0])["attributes"]["dtype"] == want
    keep = ids != 20
    _compare_with_one_shot(base, ds, Data(d.pts[keep], d.w[keep], ids[keep], {}))


@_SLOW  # a local store committed through a sibling folder: about a second (3 s on a loaded machine)
def test_a_sharded_update_rewrites_only_the_shards_above_the_edit(tmp_path: Path) -> None:
    """A local sharded store (``"auto"`` shards, many per level): after an append in one corner,
    the only level-1/2 shard files rewritten are the ones holding the corner's coarse cells;
    every other shard is the same file (same inode)."""
    rng = np.random.default_rng(13)
    n = 600
    pts = rng.uniform(0, 200, (n, 3)).astype(np.float32)
    zv.write_points(
        tmp_path / "s",
        pts,
        chunk_shape=25,
        bounds=([0.0] * 3, [200.0] * 3),
        attributes={"w": rng.random(n).astype(np.float32)},
        object_ids=rng.integers(0, 10, n),
        compression="zstd",
        shards="auto",
    )
    ds = zv.open(tmp_path / "s", mode="r+")
    ds.build_pyramid([2, 2], cross_level="explicit")
    root = tmp_path / "s"
    coarse = ("1/vertices/c/", "2/vertices/c/", "1/links/-1/", "0/links/+1/")
    before = {p: (root / p).stat().st_ino for p in _files(root) if p.startswith(coarse)}
    fp: list[Footprint] = []
    corner = rng.uniform(0, 10, (5, 3)).astype(np.float32)
    store = ds._store
    append_points(
        store,
        corner,
        attributes={"w": np.ones(5, np.float32)},
        object_ids=np.full(5, 3),
        extend=True,
        footprint=fp,
    )
    assert full_rebuild_reason(store, fp[0]) is None
    update_levels(store, fp[0])
    after = {p: (root / p).stat().st_ino for p in _files(root) if p.startswith(coarse)}
    assert sorted(after) == sorted(before)
    rewritten = {p for p in after if after[p] != before[p] and p.startswith(("1/vertices", "2/vertices"))}
    assert rewritten == {"1/vertices/c/0/0/0", "2/vertices/c/0/0/0"}
    assert len([p for p in before if p.startswith("1/vertices/c/")]) > 8
    got = zv.open(root).query(([0.0] * 3, [200.0] * 3), level=1)
    assert len(got.positions) == ds.vertex_count(1) and not ds.stale_levels()
