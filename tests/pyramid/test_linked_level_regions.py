"""Region-wise level updates of meshes, skeletons, graphs and lines after edits.

After seeded random appends, replaces and deletes (``pyramid="update"``, the default), every
level answers like a full build of the final data: objects by id, box queries on several
boxes, and the cross-level parents (each fine vertex's coarse parent, compared as position
pairs, in both directions with ``cross_level="explicit"``). Files are not compared: the
level-0 edit puts a rebuilt cell's rows in final object order, which for graph edges can
differ from a one-shot write's order inside one cross-chunk link cell (the answers do not).
The update is counted region-wise (:data:`zarr_vectors.pyramid.CROSS_LEVEL_UPDATES`), and the
cell files away from the edited object keep their bytes at every level.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import zarr_vectors as zv
from tests.pyramid.test_linked_level_update import MAKERS, _args, _assert_same_levels, _write
from zarr_vectors.engine import LinkArray, VectorStore
from zarr_vectors.pyramid import CROSS_LEVEL_UPDATES, full_rebuild_reason


def _parents(url: str, k: int, delta: str) -> np.ndarray:
    """Every record of ``k/links/<delta>`` as (position here, position in the other level),
    rows sorted: the cross-level links as a reader sees them."""
    store = VectorStore.open(url)
    here, other = store.level(k), store.level(k + int(delta))
    path = f"{k}/links/{delta}"
    out = []
    for seg in store.backend.list_dir(path):
        raw = store.backend.get_many([f"{path}/{seg}/zarr.json"])[0]
        if raw is None:
            continue
        arr, _ = LinkArray.parse(
            f"{path}/{seg}", json.loads(raw), segment=seg, link_width=2, delta=int(delta), ndim=3
        )
        assert arr is not None
        off = np.asarray(arr.offsets, np.int64).reshape(3)
        for chunk in arr.nonempty:
            recs, _ = arr.records(store.backend.get_many([arr.key(chunk)])[0], chunk)
            ratio_h = np.rint(here.grid.chunk_shape / np.asarray(store.root.chunk_shape)).astype(np.int64)
            ratio_o = np.rint(other.grid.chunk_shape / np.asarray(store.root.chunk_shape)).astype(np.int64)
            target = (chunk * ratio_h) // ratio_o + off
            a = here.vertices.rows(store.backend.get_many([here.vertices.key(chunk)])[0], chunk, 3)
            b = other.vertices.rows(store.backend.get_many([other.vertices.key(target)])[0], target, 3)
            out.append(np.concatenate([a[recs[:, 0]], b[recs[:, 1]]], axis=1))
    rows = np.concatenate(out) if out else np.zeros((0, 6))
    return rows[np.lexsort(rows.T[::-1])]


def _edit(kind: str, ds: zv.Dataset, objs: dict[int, Any], what: str, rng: np.random.Generator) -> None:
    make = MAKERS[kind]
    if what == "append":
        new_id = int(max(objs) + 1 + rng.integers(0, 3))
        obj = make(rng)
        data, kw = _args(kind, obj)
        n = len(obj[0]) if kind == "graph" else len(obj)
        ds.append(*data, object_ids=[new_id] if kind in ("mesh", "lines") else np.full(n, new_id), **kw)
        objs[new_id] = obj
    elif what == "replace":
        old = int(rng.choice(sorted(objs)))
        obj = make(rng)
        data, kw = _args(kind, obj)
        ds.replace([old], *data, **kw)
        objs[old] = obj
    else:
        old = int(rng.choice(sorted(objs)))
        ds.delete([old])
        del objs[old]


def _check(kind: str, seed: int, steps: list[str], cross_level: str, shards: Any = None) -> None:
    rng = np.random.default_rng(seed)
    make = MAKERS[kind]
    objs = {int(i): make(rng) for i in rng.choice(np.arange(1, 40), 5, replace=False)}
    base = f"memory://linked-regions-{kind}-{cross_level}-{len(steps)}-{shards}-{os.getpid()}"
    ds = _write(kind, f"{base}/edited", objs, cross_level=cross_level, shards=shards)
    before = dict(CROSS_LEVEL_UPDATES)
    for what in steps:
        _edit(kind, ds, objs, what, rng)
    assert CROSS_LEVEL_UPDATES["regional"] - before["regional"] == len(steps)
    assert CROSS_LEVEL_UPDATES["rebuilt"] == before["rebuilt"]
    want = _write(kind, f"{base}/one", objs, cross_level=cross_level, shards=shards)
    _assert_same_levels(ds, want, sorted(objs))
    for k in (0, 1):
        got, exp = _parents(f"{base}/edited", k, "+1"), _parents(f"{base}/one", k, "+1")
        assert len(got) == ds.vertex_count(k) and np.array_equal(got, exp), k
        if cross_level == "explicit":
            got, exp = _parents(f"{base}/edited", k + 1, "-1"), _parents(f"{base}/one", k + 1, "-1")
            assert len(got) and np.array_equal(got, exp), k


def test_skeleton_edits_update_levels_region_by_region() -> None:
    """In the writers' default shards: the edits rewrite the shards holding a rebuilt cell."""
    _check("skeleton", 3, ["replace", "delete"], "implicit", shards="default")


@pytest.mark.slow  # six edits and two full builds per kind: 2-6 s each
@pytest.mark.parametrize("cross_level", ["implicit", "explicit"])  # explicit: sharded too
@pytest.mark.parametrize("kind", sorted(MAKERS))
def test_random_edits_match_a_full_build_level_by_level(kind: str, cross_level: str) -> None:
    seed = sorted(MAKERS).index(kind) + (10 if cross_level == "explicit" else 0)
    steps = ["replace", "append", "delete", "append", "delete", "replace"]
    _check(kind, seed, steps, cross_level, shards="default" if cross_level == "explicit" else None)


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_cells_away_from_the_edit_keep_their_bytes(tmp_path: Path) -> None:
    """Two clusters of skeletons far apart; replacing one of cluster A rewrites no cell file of
    cluster B at any level (chunk indices of B: >= 6 at level 0, >= 3 at 1, >= 1 at 2)."""
    rng = np.random.default_rng(4)
    bounds = ([0.0, 0, 0], [200.0, 200, 200])

    def chain(lo: float) -> np.ndarray:
        start = rng.uniform(lo + 5, lo + 30, 3)
        return np.clip(start + np.cumsum(rng.normal(0, 2, (20, 3)), axis=0), lo, lo + 39).astype(np.float32)

    objs = {1: chain(0), 2: chain(0), 3: chain(155), 4: chain(155)}
    pos = np.concatenate([objs[i] for i in sorted(objs)])
    parents = np.concatenate([np.r_[-1, np.arange(19) + 20 * j] for j in range(4)])
    oids = np.repeat(sorted(objs), 20)
    url = tmp_path / "s.zarr"
    zv.write_skeleton(url, pos, parents, object_ids=oids, chunk_shape=25, bounds=bounds, shards=None)
    ds = zv.open(url, mode="r+")
    ds.build_pyramid([2, 2])
    assert full_rebuild_reason(VectorStore.open(url)) is None
    old = _files(url)
    before = CROSS_LEVEL_UPDATES["regional"]
    ds.replace([1], chain(0), np.r_[-1, np.arange(19)])
    assert CROSS_LEVEL_UPDATES["regional"] == before + 1
    new = _files(url)
    far = {0: 6, 1: 3, 2: 1}
    kept = changed = 0
    for key, raw in old.items():
        parts = key.split("/")
        if "c" not in parts or parts[1] in ("object_index", "object_attributes"):
            continue
        cell = [int(v) for v in parts[parts.index("c") + 1 :]]
        if all(v >= far[int(parts[0])] for v in cell):
            assert new.get(key) == raw, key
            kept += 1
        elif new.get(key) != raw:
            changed += 1
    assert kept >= 9 and changed >= 3  # vertices, fragments, owners at every level at least


def test_sparsity_falls_back_to_a_rebuild_and_says_why() -> None:
    rng = np.random.default_rng(8)
    objs = {i: MAKERS["lines"](rng) for i in (1, 2, 3, 4)}
    url = f"memory://linked-regions-sparse-{os.getpid()}"
    ids = sorted(objs)
    zv.write_lines(
        url,
        [objs[i] for i in ids],
        object_ids=ids,
        chunk_shape=25,
        bounds=([0.0] * 3, [100.0] * 3),
        shards=None,
    )
    ds = zv.open(url, mode="r+")
    ds.build_pyramid([2], object_sparsity=0.5)
    assert "object sparsity" in str(full_rebuild_reason(VectorStore.open(url)))
    before = dict(CROSS_LEVEL_UPDATES)
    ds.delete([2])
    assert CROSS_LEVEL_UPDATES["rebuilt"] == before["rebuilt"] + 1
    assert CROSS_LEVEL_UPDATES["regional"] == before["regional"]
    assert ds.stale_levels() == [] and 2 not in ds.object_ids(0).tolist()
