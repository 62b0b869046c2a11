"""One deliberately broken store per rule: each must be reported under that rule."""

from __future__ import annotations

import json
import os
import shutil
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from zarr_vectors.format.fragments import FragmentIndex, encode_fragments
from zarr_vectors.format.manifests import ManifestBlock, encode_manifest
from zarr_vectors.format.zarr_json import dense_array_doc
from zarr_vectors.validation import RULES, validate

from .conftest import add_level, attrs, cells, chunk_of, edit_json, items, payload, set_items, set_payload


def _root(fn: Callable[[dict[str, Any]], Any]) -> Callable[[Path], None]:
    return lambda s: edit_json(s, "", lambda d: fn(attrs(d)["zarr_vectors"]))


def _level(fn: Callable[[dict[str, Any]], Any], lv: str = "0") -> Callable[[Path], None]:
    return lambda s: edit_json(s, lv, lambda d: fn(attrs(d)["zarr_vectors_level"]))


def _node(node: str, fn: Callable[[dict[str, Any]], Any]) -> Callable[[Path], None]:
    return lambda s: edit_json(s, node, fn)


def _new_group(node: str, attributes: dict[str, Any] | None = None) -> Callable[[Path], None]:
    def make(s: Path) -> None:
        (s / node).mkdir(parents=True)
        (s / node / "zarr.json").write_text(
            json.dumps({"zarr_format": 3, "node_type": "group", "attributes": attributes or {}})
        )

    return make


def _first_cell(
    array: str, fn: Callable[[Path, Path], None], pick: Callable[[list[Path]], Path] = lambda c: c[0]
):
    return lambda s: fn(s, pick(cells(s, array)))


def _rows(cell: Path, dtype: str, width: int) -> np.ndarray:
    return np.frombuffer(payload(cell), dtype).reshape(-1, width).copy()


def _vertex_edit(
    fn: Callable[[np.ndarray, tuple[int, ...]], None], pick_x: int = 1
) -> Callable[[Path], None]:
    """Edit the float32 rows of the first vertices cell whose chunk has x index ``pick_x``."""

    def run(s: Path) -> None:
        for cell in cells(s, "0/vertices"):
            chunk = chunk_of(s, "0/vertices", cell)
            if chunk[0] == pick_x:
                rows = _rows(cell, "<f4", 3)
                fn(rows, chunk)
                set_payload(cell, rows.tobytes())
                return
        raise AssertionError("no cell to edit")

    return run


def _swap_bins(rows: np.ndarray, chunk: tuple[int, ...]) -> None:
    lo = chunk[0] * 150.0
    rows[0, 0] = lo + (rows[0, 0] - lo + 50.0) % 150.0


def _fragments_not_tiling(s: Path) -> None:
    for cell in cells(s, "0/vertex_fragments"):
        raw = payload(cell)
        f = struct.unpack_from("<I", raw, 8)[0]
        start = 16 + ((f + 7) // 8 + 7) // 8 * 8
        table = np.frombuffer(raw, "<i8", 2 * f, start).reshape(f, 2).copy()
        nz = np.flatnonzero(table[:, 1])
        if len(nz) >= 2:  # the second range starts where the first does: rows overlap, others are left out
            table[nz[1], 0] = table[nz[0], 0]
            set_payload(cell, raw[:start] + table.tobytes() + raw[start + 16 * f :])
            return
    raise AssertionError("no chunk with two non-empty bins")


def _manifest(s: Path, blocks: list[ManifestBlock] | bytes) -> None:
    cell = cells(s, "0/object_index/manifests")[0]
    values = items(cell)
    values[0] = blocks if isinstance(blocks, bytes) else encode_manifest(blocks)
    set_items(cell, values)


def _link_cell(array: str, fn: Callable[[bytes], bytes]) -> Callable[[Path], None]:
    def run(s: Path) -> None:
        cell = cells(s, array)[0]
        set_payload(cell, fn(payload(cell)))

    return run


def _ragged_index(data: bytes) -> bytes:
    """Set the last column of the first row of a uint8 ragged cell (K=1) to 250."""
    raw = bytearray(data)
    raw[16 + 2] = 250
    return bytes(raw)


def _object_ids_v2(s: Path) -> None:
    n = json.loads((s / "0/object_index/manifests/zarr.json").read_text())["shape"][0]
    node = s / "0/object_index/object_ids"
    (node / "c").mkdir(parents=True)
    doc = dense_array_doc((n,), (n,), np.dtype("int64"), 0, [], {})
    (node / "zarr.json").write_text(json.dumps(doc))
    (node / "c" / "0").write_bytes(np.arange(n)[::-1].astype("<i8").tobytes())
    edit_json(s, "0/object_index", lambda d: attrs(d).update(layout="vlen_manifests_v2"))


def _two_levels(kind_for_level1: str) -> Callable[[Path], None]:
    """Mark for the test body: level 1 comes from another pristine store."""
    return lambda s: None  # replaced in the test by add_level (needs the fixture)


def _skeleton_duplicate(s: Path) -> None:
    for cell in cells(s, "0/links/0/0.0.0"):
        data = payload(cell)
        dt = json.loads((s / "0/links/0/0.0.0/zarr.json").read_text())["attributes"]["dtype"]
        if data:
            row = np.dtype(dt).itemsize * 2
            set_payload(cell, data + data[:row])
            return


def _degenerate_face(data: bytes) -> bytes:
    raw = bytearray(data)
    raw[1] = raw[0]
    return bytes(raw)


# rule -> (store kind, mutation); the mutated copy must break exactly that rule (others may follow)
CASES: dict[str, tuple[str, Callable[[Path], None]]] = {
    "structure.root": ("points", lambda s: (s / "zarr.json").unlink()),
    "structure.node": ("points", lambda s: (s / "0/vertex_attributes/a/zarr.json").write_text("{not json")),
    "structure.zv-block": ("points", _node("", lambda d: attrs(d).pop("zarr_vectors"))),
    "structure.levels": ("points", lambda s: shutil.copytree(s / "0", s / "2")),
    "structure.vertices": ("points", lambda s: (s / "0/vertices/zarr.json").unlink()),
    "structure.node-type": ("points", _node("0/vertex_fragments", lambda d: d.update(node_type="group"))),
    "structure.pre-0.9": ("lines", _new_group("0/cross_chunk_links")),
    "metadata.version": ("points", _root(lambda b: b.update(zv_version="0.8.0"))),
    "metadata.root": ("points", _root(lambda b: b.update(bounds=[b["bounds"][1], b["bounds"][0]]))),
    "metadata.enum": ("points", _root(lambda b: b.update(cross_chunk_strategy="teleport"))),
    "metadata.geometry-types": ("points", _root(lambda b: b.update(geometry_types="point_cloud"))),
    "metadata.capabilities": (
        "points",
        _root(lambda b: b["format_capabilities"].append("partitioned_cross_chunk_links")),
    ),
    "metadata.multiscales": ("points", _node("", lambda d: attrs(d).pop("multiscales"))),
    "metadata.geozarr": ("points_geo", _node("", lambda d: attrs(d).update({"proj:code": "EPSG:3857"}))),
    "metadata.level": ("points", _level(lambda b: b.update(bin_shape=[50.0, 50.0, 50.0]))),
    "metadata.arrays-present": ("points", _level(lambda b: b["arrays_present"].append("vertex_attribute"))),
    "metadata.array": (
        "points",
        _node("0/vertices", lambda d: d["chunk_grid"]["configuration"].update(chunk_shape=[2, 1, 1])),
    ),
    "metadata.zv-array": (
        "points",
        _node("0/vertex_fragments", lambda d: attrs(d).update(zv_array="vertices")),
    ),
    "metadata.dtype": ("lines", _node("0/links/0/+1.0.0", lambda d: attrs(d).update(dtype="float32"))),
    "metadata.encoding": ("points", _node("0/vertices", lambda d: attrs(d).update(encoding="lz4-points"))),
    "metadata.grid": (
        "points",
        _node("0/vertex_attributes/a", lambda d: attrs(d)["nonempty_chunks"].append("7.7.7")),
    ),
    "metadata.links": ("graph", _node("0/links/0/+1.0.0", lambda d: attrs(d).update(has_perm=False))),
    "metadata.link-attributes": (
        "graph",
        _node("0/link_attributes/w/0/+1.0.0", lambda d: attrs(d).update(offsets=[[0, 1, 0]])),
    ),
    "metadata.attribute": (
        "points",
        _node("0/vertex_attributes/rgb", lambda d: attrs(d).update(row_shape=[0])),
    ),
    "metadata.object-index": (
        "points",
        _node("0/object_index", lambda d: attrs(d).update(layout="vlen_manifests_v9")),
    ),
    "metadata.tables": ("points", _node("0/groups", lambda d: attrs(d).update(num_groups=5))),
    "cells.present": ("points", lambda s: [c.unlink() for c in cells(s, "0/vertex_attributes/a")[:1]]),
    "cells.decode": ("points", _first_cell("0/vertices", lambda s, c: c.write_bytes(b"\x05\x00\x00\x00abc"))),
    "cells.read": ("points", _first_cell("0/vertices", lambda s, c: (c.unlink(), os.mkfifo(c)))),
    "cells.vertices": ("points", _first_cell("0/vertices", lambda s, c: set_payload(c, payload(c)[:-3]))),
    "cells.fragments": (
        "points",
        _first_cell("0/vertex_fragments", lambda s, c: set_payload(c, b"XXXX" + payload(c)[4:])),
    ),
    "cells.attribute-rows": (
        "points",
        _first_cell("0/vertex_attributes/a", lambda s, c: set_payload(c, payload(c)[:-4])),
    ),
    "cells.links": ("graph", _link_cell("0/links/0/0.0.0", lambda d: d + b"\x01")),
    "cells.link-fragments": (
        "graph",
        _first_cell(
            "0/link_fragments",
            lambda s, c: set_payload(
                c, encode_fragments(FragmentIndex.from_ranges(np.array([0]), np.array([999])))
            ),
        ),
    ),
    "cells.link-attribute-rows": (
        "graph",
        _first_cell("0/link_attributes/w/0/0.0.0", lambda s, c: set_payload(c, payload(c)[:-4])),
    ),
    "cells.table-chunks": ("points", lambda s: cells(s, "0/object_index/manifests")[0].unlink()),
    "consistency.vertex-count": ("points", _level(lambda b: b.update(vertex_count=b["vertex_count"] + 1))),
    "consistency.fragments-tile": ("points_plain", _fragments_not_tiling),
    "consistency.link-index": ("lines", _link_cell("0/links/0/+1.0.0", _ragged_index)),
    "consistency.num-links": (
        "graph",
        _node("0/links/0", lambda d: attrs(d).update(num_links=attrs(d)["num_links"] + 1)),
    ),
    "consistency.manifests": (
        "points",
        lambda s: _manifest(s, b"\x01\x00\x00\x00" + b"\x00" * 24 + b"\x07" + b"\x00" * 8),
    ),
    "consistency.manifest-refs": (
        "points",
        lambda s: _manifest(s, [ManifestBlock((0, 0, 0), np.array([999]))]),
    ),
    "consistency.num-present": ("points", _node("0/object_index", lambda d: attrs(d).update(num_present=9))),
    "consistency.object-ids": ("points", _object_ids_v2),
    "consistency.object-attributes": (
        "points",
        _node("0/object_attributes/w", lambda d: d.update(shape=[9])),
    ),
    "consistency.groups": (
        "points",
        lambda s: set_items(
            cells(s, "0/groups")[0], [np.array([0, 99], "<i8").tobytes(), np.array([2], "<i8").tobytes()]
        ),
    ),
    "consistency.group-attributes": ("points", _node("0/group_attributes/s", lambda d: d.update(shape=[3]))),
    "geometry.links-convention": ("graph", _root(lambda b: b.update(links_convention="implicit_sequential"))),
    "geometry.link-width": ("mesh", _root(lambda b: b.update(geometry_types=["graph"]))),
    "geometry.vertex-chunk": ("points", _vertex_edit(lambda r, c: r.__setitem__((0, 0), 60.0))),
    "geometry.bounds": ("points", _vertex_edit(lambda r, c: r.__setitem__((0, 0), 1.0), pick_x=0)),
    "geometry.finite": ("points", _vertex_edit(lambda r, c: r.__setitem__((0, 1), np.nan))),
    "geometry.bins": ("points_plain", _vertex_edit(_swap_bins)),
    "geometry.skeleton-parents": ("skeleton", _skeleton_duplicate),
    "geometry.mesh-faces": ("mesh", _link_cell("0/links/0/0.0.0_0.0.0", _degenerate_face)),
    "pyramid.levels": ("points", lambda s: None),
    "pyramid.chunk-shape": ("points", lambda s: None),
    "pyramid.bin-shape": ("points", lambda s: None),
    "pyramid.vertex-count": ("points_small", lambda s: None),
    "pyramid.object-ids": ("points", lambda s: None),
    "pyramid.cross-level": (
        "points",
        _new_group(
            "0/links/+1",
            {
                "zv_array": "links_family",
                "level_delta": 1,
                "link_width": 1,
                "directed": True,
                "store": "canonical",
            },
        ),
    ),
}

# Level-1 overrides of the two-level cases (level 1 copied from the "points" store).
PYRAMID = {
    "pyramid.levels": {"parent_level": 3},
    "pyramid.chunk-shape": {"chunk_shape": [225.0, 225.0, 225.0]},
    "pyramid.bin-shape": {},
    "pyramid.vertex-count": {},
    "pyramid.object-ids": {"preserves_object_ids": True},
}
WARNING_RULES = {
    "structure.unknown-node",
    "metadata.unknown-key",
    "metadata.codecs",
    "geometry.point-links",
    "structure.leftovers",
}  # leftovers: tests/storage/test_overwrite_rules.py


#: The rules of a collection node are broken in tests/collection/test_collection_validate.py.
COLLECTION_RULES = {rule for rule in RULES if rule.startswith("collection.")}


def test_every_rule_has_a_broken_store() -> None:
    assert set(RULES) - WARNING_RULES - COLLECTION_RULES == set(CASES)


@pytest.mark.parametrize("rule", sorted(CASES))
def test_broken_store_is_reported(rule: str, copy_of, pristine) -> None:
    kind, mutate = CASES[rule]
    store = copy_of(kind)
    mutate(store)
    if rule in PYRAMID:
        add_level(store, pristine("points"), **PYRAMID[rule])
        if rule == "pyramid.bin-shape":
            edit_json(
                store,
                "",
                lambda d: attrs(d)["multiscales"][0]["datasets"][1]["coordinateTransformations"][1].update(
                    translation=[15.0, 15.0, 15.0]
                ),
            )
    report = validate(store)
    assert not report.ok
    assert rule in report.rules_broken(), str(report)
    hit = [p for p in report.problems if p.rule == rule]
    assert all(p.level == RULES[rule][0] and p.message for p in hit)
    at_root = (
        "structure.root",
        "structure.zv-block",
        "structure.levels",
        "metadata.version",
        "metadata.geozarr",
    )
    if rule in at_root:
        assert hit[0].path in ("", "zarr.json")
    level = RULES[rule][0]
    if level > 1:  # the levels are cumulative: checking less never reports this rule's level
        below = validate(store, level=level - 1)
        assert below.level == level - 1
        assert all(p.level < level for p in below.problems + below.warnings)
