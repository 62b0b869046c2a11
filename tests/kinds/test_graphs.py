"""Graphs with explicit edges: edges come back exactly (direction too), in boxes and by object."""

from __future__ import annotations

import numpy as np
import pytest

import zarr_vectors as zv
from zarr_vectors.errors import InputError


def _edge_set(positions, edges):
    return sorted((tuple(positions[a]), tuple(positions[b])) for a, b in edges)


def _graph(rng, n=500, e=1200, d=3):
    pos = rng.uniform(0, 600, (n, d)).round(3)
    edges = rng.integers(0, n, (e, 2))
    local = rng.random(e) < 0.5  # half the edges between near vertices, most of them inside one chunk
    edges[local, 1] = np.clip(edges[local, 0] + rng.integers(-3, 4, local.sum()), 0, n - 1)
    order = np.argsort(pos[:, 0])  # make index neighbours spatial neighbours
    return pos[order], edges


@pytest.mark.slow
@pytest.mark.parametrize("directed", [False, True])
@pytest.mark.parametrize("d", [2, 3])
def test_edges_round_trip_with_their_direction(tmp_path, rng, directed, d):
    pos, edges = _graph(rng, d=d)
    oid = (pos[:, 0] // 150).astype(int)
    ds = zv.write_graph(
        tmp_path / "g.zarr",
        pos,
        edges,
        chunk_shape=100,
        directed=directed,
        object_ids=oid,
        attributes={"w": np.arange(len(pos), dtype=np.float32)},
    )
    assert ds.geometry_types == ("graph",)
    full = ds.query()
    assert sorted(map(tuple, full.positions)) == sorted(map(tuple, pos))
    assert _edge_set(full.positions, full.edges) == _edge_set(pos, edges)
    assert np.array_equal(full.positions, pos[full.attributes["w"].astype(int)])
    for _ in range(5):
        lo = rng.uniform(0, 400, d)
        hi = lo + rng.uniform(50, 300, d)
        box = ds.query(bbox=(lo, hi))
        inside = np.all((pos >= lo) & (pos <= hi), axis=1)
        assert sorted(map(tuple, box.positions)) == sorted(map(tuple, pos[inside]))
        keep = inside[edges[:, 0]] & inside[edges[:, 1]]
        assert _edge_set(box.positions, box.edges) == _edge_set(pos, edges[keep])
        assert np.array_equal(box.object_ids, oid[box.attributes["w"].astype(int)])
    objs = ds.objects([1, 3])
    sel = np.isin(oid, [1, 3])
    assert sorted(map(tuple, objs.positions)) == sorted(map(tuple, pos[sel]))
    keep = sel[edges[:, 0]] & sel[edges[:, 1]]
    assert _edge_set(objs.positions, objs.edges) == _edge_set(pos, edges[keep])


def test_graph_files_follow_the_spec_layout(tmp_path):
    pos = np.array([[10.0, 10, 10], [20, 10, 10], [10, 10, 150], [150, 150, 10]])
    edges = np.array([[1, 0], [2, 0], [0, 3]])  # intra, across +z, diagonal
    ds = zv.write_graph(tmp_path / "g.zarr", pos, edges, chunk_shape=100, bounds=([0] * 3, [200] * 3))
    names = sorted(p.name for p in (tmp_path / "g.zarr/0/links/0").iterdir() if p.is_dir())
    assert names == ["+1.+1.0", "0.0.+1", "0.0.0"]
    lv = ds.level(0)
    assert lv.links["0.0.+1"].has_perm and not lv.links["0.0.0"].has_perm
    assert (tmp_path / "g.zarr/0/link_fragments/c/0/0/0").exists()
    assert _edge_set(ds.query().positions, ds.query().edges) == _edge_set(pos, edges)


def test_bad_edges_are_refused(tmp_path):
    pos = np.zeros((3, 3))
    with pytest.raises(InputError, match=r"edge 1 \[0, 3\] names a vertex outside \[0, 3\)"):
        zv.write_graph(tmp_path / "g.zarr", pos, [[0, 1], [0, 3]], chunk_shape=1)
    with pytest.raises(InputError, match=r"\(E, 2\) integer"):
        zv.write_graph(tmp_path / "g.zarr", pos, [[0.5, 1.0]], chunk_shape=1)
    assert not (tmp_path / "g.zarr").exists()


def _graph_store(tmp_path):
    pos = np.array([[10.0, 10, 10], [20, 10, 10], [30, 10, 10], [10, 10, 150]])
    edges = np.array([[0, 1], [1, 2], [2, 3]])
    path = tmp_path / "g.zarr"  # one file per cell: the tests below rewrite cell files
    zv.write_graph(path, pos, edges, chunk_shape=100, bounds=([0] * 3, [200] * 3), shards=None)
    return path


def _rewrite(cell, fn):
    from zarr_vectors.engine.chunks.pipeline import Pipeline

    pipe = Pipeline.from_codecs([{"name": "vlen-bytes"}])
    cell.write_bytes(pipe.encode(fn(bytes(pipe.decode(cell.read_bytes())))))


def test_corrupt_intra_link_cell_wrong_row_width(tmp_path):
    path = _graph_store(tmp_path)
    _rewrite(path / "0/links/0/0.0.0/c/0/0/0", lambda b: b + b"\x01")
    with pytest.raises(zv.CorruptCellError, match="whole") as info:
        zv.open(path).query()
    assert info.value.array == "0/links/0/0.0.0" and info.value.chunk == "0.0.0"


def test_link_index_out_of_range_names_array_and_chunk(tmp_path):
    path = _graph_store(tmp_path)
    _rewrite(path / "0/links/0/0.0.0/c/0/0/0", lambda b: bytes([9]) + b[1:])
    with pytest.raises(zv.CorruptCellError, match="names vertex 9 of chunk 0.0.0, which has 3") as info:
        zv.open(path).query()
    assert info.value.array == "0/links/0/0.0.0"


def test_corrupt_ragged_link_cell(tmp_path):
    path = _graph_store(tmp_path)
    _rewrite(path / "0/links/0/0.0.+1/c/0/0/0", lambda b: b[:8] + (999).to_bytes(8, "little") + b[16:])
    with pytest.raises(zv.CorruptCellError) as info:
        zv.open(path).query()
    assert info.value.array == "0/links/0/0.0.+1" and info.value.chunk == "0.0.0"


def test_negative_link_index_names_array_and_chunk(tmp_path):
    """A signed link cell (the reference writes int64) with a negative index is corrupt, not an edge."""
    import json

    path = _graph_store(tmp_path)
    meta = path / "0/links/0/0.0.0/zarr.json"
    doc = json.loads(meta.read_text())
    doc["attributes"]["dtype"] = "int8"
    meta.write_text(json.dumps(doc))
    _rewrite(path / "0/links/0/0.0.0/c/0/0/0", lambda b: b[:1] + bytes([0xFF]) + b[2:])
    with pytest.raises(zv.CorruptCellError, match="record 0 names vertex -1") as info:
        zv.open(path).query()
    assert info.value.array == "0/links/0/0.0.0" and info.value.chunk == "0.0.0"


def test_perm_idx_out_of_range_names_array_and_chunk(tmp_path):
    path = _graph_store(tmp_path)
    _rewrite(path / "0/links/0/0.0.+1/c/0/0/0", lambda b: b[:16] + bytes([7]) + b[17:])
    with pytest.raises(zv.CorruptCellError, match=r"perm_idx 7 of record 0 is outside \[0, 2\)") as info:
        zv.open(path).query()
    assert info.value.array == "0/links/0/0.0.+1" and info.value.chunk == "0.0.0"


@pytest.mark.parametrize("name", ["0.0", "0.0.x", "0.0.+1_0.0.0", "self", "0.+01.0"])
def test_offsets_names_that_break_the_grammar(tmp_path, name):
    path = _graph_store(tmp_path)
    (path / "0/links/0/0.0.+1").rename(path / f"0/links/0/{name}")
    with pytest.raises(zv.FormatError, match="0/links/0/"):
        zv.open(path).query()


@pytest.mark.slow
def test_edge_attributes_follow_their_edges(tmp_path, rng):
    pos, edges = _graph(rng, n=300, e=800)
    edges = np.unique(edges, axis=0)[:700]  # distinct edges, so each one's values are known
    weight = rng.random(len(edges)).astype(np.float32)
    rgb = rng.integers(0, 255, (len(edges), 3)).astype(np.uint8)
    ds = zv.write_graph(
        tmp_path / "g.zarr", pos, edges, chunk_shape=100, edge_attributes={"w": weight, "rgb": rgb}
    )
    want = {
        (tuple(pos[a]), tuple(pos[b])): (w, tuple(c))
        for (a, b), w, c in zip(edges.tolist(), weight.tolist(), rgb.tolist())
    }
    for res in (ds.query(), ds.query(bbox=([50, 50, 50], [400, 500, 450])), ds.objects([0])):
        assert len(res.edge_attributes["w"]) == len(res.edges) and res.edge_attributes["rgb"].shape == (
            len(res.edges),
            3,
        )
        for (a, b), w, c in zip(
            res.edges.tolist(), res.edge_attributes["w"].tolist(), res.edge_attributes["rgb"].tolist()
        ):
            assert want[(tuple(res.positions[a]), tuple(res.positions[b]))] == (w, tuple(c))
    with pytest.raises(InputError, match=r"edge attribute 'w' must have shape \(700,\)"):
        zv.write_graph(tmp_path / "x.zarr", pos, edges, chunk_shape=100, edge_attributes={"w": weight[:5]})


@pytest.mark.slow
def test_duplicate_store_policy_reads_each_edge_once(tmp_path, rng):
    """Rewrite a graph's cross-chunk links under store="duplicate" (a policy our writer does not use)."""
    import json
    import shutil

    from zarr_vectors.engine.write.builder import StoreBuilder
    from zarr_vectors.format.links import encode_ragged, place_links
    from zarr_vectors.storage.local import LocalBackend

    pos, edges = _graph(rng, n=200, e=400)
    path = tmp_path / "g.zarr"
    ds = zv.write_graph(path, pos, edges, chunk_shape=100)
    lv = ds.level(0)
    full = ds.query()
    grid = lv.grid
    index = {tuple(map(float, p)): i for i, p in enumerate(full.positions.tolist())}
    chunk_of = np.floor(full.positions / 100).astype(int)
    local = np.zeros(len(full.positions), int)
    for c in {tuple(c) for c in chunk_of.tolist()}:
        rows = lv.vertices.rows(lv.backend.get_many([lv.vertices.key(c)])[0], c, 3)
        for r, p in enumerate(rows.tolist()):
            local[index[tuple(map(float, p))]] = r
    e = full.edges
    cross = e[np.any(chunk_of[e[:, 0]] != chunk_of[e[:, 1]], axis=1)]
    for name in list(lv.links):
        if name != "0.0.0":
            shutil.rmtree(path / "0/links/0" / name)
    placed = place_links(
        np.stack([chunk_of[cross[:, 0]], chunk_of[cross[:, 1]]], axis=1),
        local[cross],
        directed=False,
        store="duplicate",
    )
    builder = StoreBuilder(LocalBackend(path))
    by_seg: dict = {}
    for lc in placed.cells():
        by_seg.setdefault(lc.segment, ([], [], lc.has_perm))
        by_seg[lc.segment][0].append(np.asarray(lc.chunk) - grid.origin)
        by_seg[lc.segment][1].append(encode_ragged([lc.rows], np.uint16))
    for seg, (cells, payloads, has_perm) in by_seg.items():
        from zarr_vectors.format.links import parse_offsets

        builder.cell_array(
            f"0/links/0/{seg}",
            grid,
            np.asarray(cells),
            payloads,
            {
                "zv_array": "links",
                "dtype": "uint16",
                "link_width": 2,
                "level_delta": 0,
                "offsets": parse_offsets(seg, 2, 3).tolist(),
                "has_perm": has_perm,
            },
            kind="links",
        )
    builder.flush()
    for p, doc in builder.arrays.items():
        (path / p / "zarr.json").write_text(json.dumps(doc))
    fam = json.loads((path / "0/links/0/zarr.json").read_text())
    fam["attributes"]["store"] = "duplicate"
    intra = zv.open(path).level(0).links["0.0.0"]  # the intra-chunk records stay as written
    stored = sum(
        len(intra.records(raw, c)[0])
        for c, raw in zip(intra.nonempty, lv.backend.get_many(intra.keys(intra.nonempty)))
    )
    fam["attributes"]["num_physical_records"] = stored + sum(len(lc.rows) for lc in placed.cells())
    (path / "0/links/0/zarr.json").write_text(json.dumps(fam))
    again = zv.open(path).query()
    assert _edge_set(again.positions, again.edges) == _edge_set(pos, edges)
    lo, hi = np.array([0.0, 0, 0]), np.array([300.0, 600, 600])
    box = zv.open(path).query(bbox=(lo, hi))
    inside = np.all((pos >= lo) & (pos <= hi), axis=1)
    keep = inside[edges[:, 0]] & inside[edges[:, 1]]
    assert _edge_set(box.positions, box.edges) == _edge_set(pos, edges[keep])
