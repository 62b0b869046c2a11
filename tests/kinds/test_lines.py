"""Polylines and streamlines: whole lines back in order, exact box pieces, edges and I/O."""

from __future__ import annotations

import numpy as np
import pytest

import zarr_vectors as zv
from tests._builders import random_walks
from tests._io import open_counting
from zarr_vectors.errors import InputError


def _brute_pieces(lines, lo, hi):
    """Runs of consecutive in-box vertices of every line, as tuples of positions."""
    pieces = []
    for line in lines:
        inside = np.all((line >= lo) & (line <= hi), axis=1)
        start = None
        for i, ok in enumerate(np.append(inside, False)):
            if ok and start is None:
                start = i
            elif not ok and start is not None:
                pieces.append(tuple(map(tuple, line[start:i])))
                start = None
    return pieces


@pytest.mark.parametrize("kind", ["polyline", "streamline"])
def test_objects_come_back_whole_and_in_order(tmp_path, rng, kind):
    lines = random_walks(rng, 60)
    t = [np.arange(len(x), dtype=np.float32) for x in lines]
    ds = zv.write_lines(
        tmp_path / "l.zarr",
        lines,
        chunk_shape=100,
        kind=kind,
        attributes={"t": np.concatenate(t)},
        object_attributes={"length": np.array([len(x) for x in lines], np.int32)},
    )
    assert ds.geometry_types == (kind,)
    res = ds.objects([5, 2, 5])  # a repeated id is read once
    assert [len(x) for x in res.lines] == [len(lines[5]), len(lines[2])]
    for got, want in zip(res.lines, [lines[5], lines[2]]):
        assert np.array_equal(got, want)
    o = res.line_offsets
    assert np.array_equal(res.attributes["t"][o[0] : o[1]], t[5])
    assert np.array_equal(ds.object_attributes("length"), [len(x) for x in lines])
    assert len(res.edges) == sum(len(x) - 1 for x in res.lines)


@pytest.mark.parametrize("d", [2, 3])
def test_box_pieces_and_edges_match_brute_force(tmp_path, rng, d):
    lines = random_walks(rng, 60, d=d)
    ds = zv.write_lines(tmp_path / "l.zarr", lines, chunk_shape=80)
    for _ in range(8):
        lo = rng.uniform(0, 800, d)
        hi = lo + rng.uniform(50, 400, d)
        res = ds.query(bbox=(lo, hi))
        want = _brute_pieces(lines, lo, hi)
        got = [tuple(map(tuple, p)) for p in res.lines]
        assert sorted(got) == sorted(want)
        assert len(res.edges) == sum(len(p) - 1 for p in want)
        a, b = res.positions[res.edges[:, 0]], res.positions[res.edges[:, 1]]
        assert np.all((a >= lo) & (a <= hi)) and np.all((b >= lo) & (b <= hi))
        inside_ids = {i for i, x in enumerate(lines) if np.any(np.all((x >= lo) & (x <= hi), axis=1))}
        assert set(np.unique(res.object_ids).tolist()) == inside_ids
        whole = ds.query(bbox=(lo, hi), whole_objects=True)
        assert sorted(set(whole.object_ids.tolist())) == sorted(inside_ids)
        assert len(whole) == sum(len(lines[i]) for i in inside_ids)


def test_tuple_input_and_single_vertex_lines(tmp_path):
    pos = np.array([[1.0, 1.0], [150.0, 1.0], [5.0, 5.0], [250.0, 250.0], [251.0, 251.0]])
    ds = zv.write_lines(tmp_path / "l.zarr", (pos, [0, 2, 3, 5]), chunk_shape=100)
    res = ds.objects([0, 1, 2])
    assert [x.tolist() for x in res.lines] == [pos[:2].tolist(), pos[2:3].tolist(), pos[3:].tolist()]
    box = ds.query(bbox=([0, 0], [160, 10]))
    assert [p.tolist() for p in box.lines] == [pos[:2].tolist(), pos[2:3].tolist()] or sorted(
        p.tolist() for p in box.lines
    ) == sorted([pos[:2].tolist(), pos[2:3].tolist()])


def test_bad_lines_are_refused(tmp_path):
    with pytest.raises(InputError, match="line 1 has no vertices"):
        zv.write_lines(tmp_path / "l.zarr", [np.zeros((2, 3)), np.zeros((0, 3))], chunk_shape=1)
    with pytest.raises(InputError, match="same D"):
        zv.write_lines(tmp_path / "l.zarr", [np.zeros((2, 3)), np.zeros((2, 2))], chunk_shape=1)
    with pytest.raises(InputError, match=r"must have shape \(4,\)"):
        zv.write_lines(
            tmp_path / "l.zarr",
            [np.zeros((2, 3)), np.ones((2, 3))],
            chunk_shape=1,
            attributes={"a": np.zeros(3)},
        )
    with pytest.raises(InputError, match="kind must be"):
        zv.write_lines(tmp_path / "l.zarr", [np.zeros((2, 3))], chunk_shape=1, kind="zigzag")
    assert not (tmp_path / "l.zarr").exists()


@pytest.mark.slow
def test_small_box_reads_only_link_cells_it_can_use(tmp_path, rng):
    lines = random_walks(rng, 200, start=(0, 1000))
    path = tmp_path / "l.zarr"
    zv.write_lines(path, lines, chunk_shape=100)
    ds, counter = open_counting(path)
    lo, hi = np.array([410.0, 410.0, 410.0]), np.array([480.0, 480.0, 480.0])  # inside chunk 4.4.4
    ds.query(bbox=(lo, hi), object_ids=False)
    assert len(counter.gets) == 1
    keys = counter.gets[0]
    cell = "/".join(map(str, np.array([4, 4, 4]) - ds.level(0).grid.origin))
    assert all(k.endswith(f"/c/{cell}") for k in keys), keys
    assert not any("/links/" in k for k in keys)  # a link must join two touched chunks


def _expected_box_keys(path, lo, hi, chunk, families, with_ids, outside_parents=False):
    """Brute force from the store's own metadata: the cells a box over ``[lo, hi]`` needs —
    every listed cell of the per-chunk arrays in touched chunks, and every link cell whose
    anchor chunk and every other endpoint chunk are touched; with ``outside_parents``
    (skeletons: a record may give a touched row a parent outside) every link cell with any
    endpoint chunk (its anchor included) touched."""
    import itertools
    import json

    c_lo, c_hi = np.floor(lo / chunk).astype(int), np.floor(hi / chunk).astype(int)
    touched = {tuple(c) for c in itertools.product(*[range(a, b + 1) for a, b in zip(c_lo, c_hi)])}
    level = path / "0"
    keys = set()
    arrays = ["vertices", "vertex_fragments"] + (["fragment_attributes/object_id"] if with_ids else [])

    def cell_key(prefix, attrs, chunk):  # cells are chunk coordinates minus the grid origin
        return f"{prefix}/c/" + "/".join(map(str, chunk - np.array(attrs.get("chunk_grid_origin", [0] * 3))))

    for name in arrays:
        attrs = json.loads((level / name / "zarr.json").read_text())["attributes"]
        for k in attrs["nonempty_chunks"]:
            chunk = np.array(list(map(int, k.split("."))))
            if tuple(chunk) in touched:
                keys.add(cell_key(f"0/{name}", attrs, chunk))
    for fam in families:
        for arr in sorted((level / fam).iterdir()):
            if not (arr / "zarr.json").exists():
                continue
            attrs = json.loads((arr / "zarr.json").read_text())["attributes"]
            for k in attrs["nonempty_chunks"]:
                anchor = np.array(list(map(int, k.split("."))))
                ends = [tuple(anchor + np.array(o)) for o in attrs["offsets"]]
                inner = tuple(anchor) in touched and all(e in touched for e in ends)
                half = outside_parents and any(e in touched for e in [tuple(anchor), *ends])
                if inner or half:
                    keys.add(cell_key(f"0/{fam}/{arr.name}", attrs, anchor))
    return keys, touched


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["polyline", "graph", "skeleton"])
def test_box_reads_exactly_the_cells_it_needs(tmp_path, rng, kind):
    """On a store of 10 x 10 x 10 chunks, a box over 2 x 2 x 2 of them reads, in one batch,
    exactly the cells brute force from the metadata says it needs — a few percent of the
    store's cells — and returns exactly the brute-force vertices."""
    path = tmp_path / "s.zarr"
    lines = random_walks(rng, 1500, start=(0, 1000))
    pos = np.concatenate(lines)
    if kind == "polyline":
        zv.write_lines(path, lines, chunk_shape=100)
    else:
        starts = np.cumsum([0] + [len(x) for x in lines[:-1]])
        par = np.arange(len(pos)) - 1
        par[starts] = -1
        if kind == "graph":
            zv.write_graph(
                path,
                pos,
                np.stack([par[par >= 0], np.flatnonzero(par >= 0)], axis=1),
                chunk_shape=100,
                object_ids=np.repeat(np.arange(len(lines)), [len(x) for x in lines]),
            )
        else:
            zv.write_skeleton(path, pos, par, chunk_shape=100)
    lo, hi = np.array([310.0, 420.0, 150.0]), np.array([480.0, 590.0, 260.0])
    ds, counter = open_counting(path)
    res = ds.query(bbox=(lo, hi))
    assert len(counter.gets) == 1
    got = set(counter.gets[0])
    want, touched = _expected_box_keys(
        path, lo, hi, 100.0, ["links/0"], with_ids=True, outside_parents=kind == "skeleton"
    )
    assert len(touched) == 8 and got == want
    total = sum(1 for f in (path / "0").rglob("c/*/*/*") if f.is_file())
    assert len(got) < 0.05 * total
    inside = np.all((pos >= lo) & (pos <= hi), axis=1)
    assert sorted(map(tuple, res.positions.tolist())) == sorted(map(tuple, pos[inside].tolist()))
    # whole_objects: exactly the objects with a vertex inside, whole; the box pass reads
    # only what tells the owners of its rows (no link cells), then one batch for the objects
    counter.gets.clear()
    whole = ds.query(bbox=(lo, hi), whole_objects=True)
    oid = np.repeat(np.arange(len(lines)), [len(x) for x in lines])
    hit = np.unique(oid[inside])
    assert np.array_equal(np.unique(whole.object_ids), hit)
    assert sorted(map(tuple, whole.positions.tolist())) == sorted(map(tuple, pos[np.isin(oid, hit)].tolist()))
    assert not any("/links/" in k or "/vertex_attributes/" in k for k in counter.gets[0])


def test_straight_segments(tmp_path, rng):
    seg = rng.uniform(0, 300, (200, 2, 3))
    ds = zv.write_lines(tmp_path / "s.zarr", seg, chunk_shape=100, kind="line")
    assert ds.geometry_types == ("line",)
    res = ds.objects(list(range(200)))
    assert np.array_equal(np.stack(res.lines), seg)
    lo, hi = np.array([50.0, 50, 50]), np.array([200.0, 250, 220])
    box = ds.query(bbox=(lo, hi))
    inside = np.all((seg >= lo) & (seg <= hi), axis=2)
    assert len(box.edges) == int(inside.all(axis=1).sum())
    assert len(box) == int(inside.sum())
    with pytest.raises(InputError, match=r"\(M, 2, D\)"):
        zv.write_lines(tmp_path / "x.zarr", np.zeros((3, 3, 3)), chunk_shape=1, kind="line")


def test_attributes_given_per_line(tmp_path, rng):
    lines = [rng.random((n, 3)) * 100 for n in (3, 5, 2)]
    per_line = [np.arange(len(x), dtype=np.int32) for x in lines]
    rgb_rows = [[k, 2 * k, 3 * k] for k in range(10)]  # one row per vertex, as a plain list
    ds = zv.write_lines(
        tmp_path / "l.zarr", lines, chunk_shape=50, attributes={"i": per_line, "rgb": rgb_rows}
    )
    res = ds.objects([1])
    assert res.attributes["i"].tolist() == [0, 1, 2, 3, 4]
    assert res.attributes["rgb"].tolist() == rgb_rows[3:8]
    with pytest.raises(InputError, match="line 1 has 5 vertices but 4 values"):
        zv.write_lines(
            tmp_path / "x.zarr",
            lines,
            chunk_shape=50,
            attributes={"i": [np.zeros(3), np.zeros(4), np.zeros(2)]},
        )


@pytest.mark.slow
def test_box_object_ids_come_from_the_owner_table_not_the_manifests(tmp_path, rng):
    lines = random_walks(rng, 300, start=(0, 1000))
    path = tmp_path / "l.zarr"
    zv.write_lines(path, lines, chunk_shape=100)
    ds, counter = open_counting(path)
    lo, hi = np.array([300.0, 300.0, 300.0]), np.array([520.0, 520.0, 520.0])
    res = ds.query(bbox=(lo, hi))
    keys = [k for batch in counter.gets for k in batch]
    assert not any("object_index" in k for k in keys)
    owners = [k for k in keys if "/fragment_attributes/object_id/" in k]
    assert len(owners) == len([k for k in keys if "/vertex_fragments/" in k]) > 0
    # ids agree with brute force: each returned vertex belongs to the line it says
    expect = sorted(
        (i, *map(float, p))
        for i, line in enumerate(lines)
        for p in line[np.all((line >= lo) & (line <= hi), axis=1)]
    )
    got = sorted((int(i), *map(float, p)) for i, p in zip(res.object_ids, res.positions))
    assert got == expect


def test_owner_table_with_the_wrong_length_is_a_corrupt_cell(tmp_path, rng):
    from zarr_vectors.errors import CorruptCellError

    lines = random_walks(rng, 50, start=(0, 1000))
    path = tmp_path / "l.zarr"
    zv.write_lines(path, lines, chunk_shape=100, shards=None)  # one file per cell: edited below
    cell = next((path / "0" / "fragment_attributes" / "object_id" / "c").rglob("*"))
    while cell.is_dir():
        cell = next(cell.iterdir())
    import struct

    raw = cell.read_bytes()  # vlen-bytes framing: count 1, length, payload (no compression)
    payload = raw[8:] + b"\0" * 8  # one more id than the chunk has fragments
    cell.write_bytes(struct.pack("<II", 1, len(payload)) + payload)
    parts = cell.relative_to(path / "0" / "fragment_attributes" / "object_id" / "c").parts
    lo = (np.array([int(c) for c in parts]) + zv.open(path).level(0).grid.origin) * 100.0
    with pytest.raises(CorruptCellError, match=r"object_id.*object ids for \d+ fragments"):
        zv.open(path).query(bbox=(lo, lo + 99))
