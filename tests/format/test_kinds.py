"""The table of geometry kinds: its rows agree with the writers and decide every dispatch."""

from __future__ import annotations

import numpy as np
import pytest
import shapely

import zarr_vectors as zv
from zarr_vectors.format.kinds import CANONICAL_KINDS, FAMILIES, FAMILY, KINDS, family_of, kind


def test_canonical_kinds_are_the_formats_seven():
    assert set(CANONICAL_KINDS) == {
        "point_cloud",
        "line",
        "polyline",
        "streamline",
        "skeleton",
        "graph",
        "mesh",
    }
    assert {"polygon", "multi_polyline"} <= set(KINDS) - set(CANONICAL_KINDS)


@pytest.mark.parametrize("name", sorted(KINDS))
def test_every_row_names_a_public_writer_and_a_family(name):
    row = KINDS[name]
    assert callable(getattr(zv, row.writer))
    assert row.family in FAMILIES
    assert (row.link_width is None) == (row.family == "points")
    family = FAMILY[row.family]
    assert family.linked == (row.link_width == 2)  # edges are the two-vertex link records
    assert family.has_faces == (row.link_width == 3)


def test_family_of_a_store_listing_several_kinds_takes_the_first_family():
    assert family_of(["point_cloud"]) == "points"
    assert family_of(["point_cloud", "mesh"]) == "mesh"
    assert family_of(["polyline", "skeleton"]) == "lines"
    assert family_of(["polygon", "polyline"]) == "shapes"
    assert family_of(["my_custom_kind"]) is None
    assert family_of(["my_custom_kind", "graph"]) == "graph"
    assert kind("my_custom_kind") is None


def _written(tmp_path):
    pts = np.array([[0, 0, 0], [1, 1, 1], [2, 2, 0], [3, 0, 1]], np.float32)
    yield zv.write_points(tmp_path / "p", pts, chunk_shape=2)
    yield zv.write_lines(tmp_path / "l", [pts[:2], pts[2:]], chunk_shape=2)
    yield zv.write_lines(tmp_path / "s", [pts[:2], pts[2:]], chunk_shape=2, kind="streamline")
    yield zv.write_graph(tmp_path / "g", pts, [[0, 1], [1, 2]], chunk_shape=2)
    yield zv.write_skeleton(tmp_path / "k", pts, [-1, 0, 1, 1], chunk_shape=2)
    yield zv.write_mesh(tmp_path / "m", pts, [[0, 1, 2], [1, 2, 3]], chunk_shape=2)
    square = shapely.Polygon([(0, 0), (2, 0), (2, 2), (0, 2)])
    yield zv.write_geometries(tmp_path / "x", [square], chunk_shape=2)
    two = shapely.MultiLineString([[(0, 0), (1, 1)], [(2, 2), (3, 1)]])
    yield zv.write_geometries(tmp_path / "y", [two], chunk_shape=2)


def test_each_store_declares_a_kind_of_the_table_and_reads_as_its_family(tmp_path):
    seen = set()
    for ds in _written(tmp_path):
        (name,) = ds.geometry_types
        row = KINDS[name]
        seen.add(name)
        res = ds.read()
        assert (res.edges is not None) == FAMILY[row.family].linked, name
        assert (res.faces is not None) == FAMILY[row.family].has_faces, name
        assert (res.line_offsets is not None) == FAMILY[row.family].line_like, name
        assert ds.root.links_convention in row.conventions or not row.conventions, name
    assert seen == {
        "point_cloud",
        "polyline",
        "streamline",
        "graph",
        "skeleton",
        "mesh",
        "polygon",
        "multi_polyline",
    }


def test_geometry_codec_reads_a_codec_list_or_tuple():
    from zarr_vectors.format.codecs import geometry_codec

    draco = [{"name": "draco", "configuration": {}}, {"name": "vlen-bytes"}]
    assert geometry_codec(draco) == geometry_codec(tuple(draco)) == "draco"
    assert geometry_codec([{"name": "vlen-bytes"}, {"name": "zstd"}]) is None
    assert geometry_codec([]) is None and geometry_codec(None) is None and geometry_codec([5]) is None


def test_the_kind_table_is_the_only_vocabulary() -> None:
    """No module but ``format/kinds.py`` spells a kind name or a group of families: such a
    literal (``"point_cloud"``, ``("lines", "graph", "shapes")``) fails with its place."""
    import ast
    from pathlib import Path

    import zarr_vectors
    from zarr_vectors.format.kinds import FAMILIES, POINT_CLOUD

    package = Path(zarr_vectors.__file__).parent
    found = []
    for path in sorted(package.rglob("*.py")):
        if path == package / "format" / "kinds.py":
            continue
        tree = ast.parse(path.read_text())
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and node.body
            and isinstance(node.body[0], ast.Expr)
        }
        for node in ast.walk(tree):
            where = f"{path.relative_to(package)}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Constant) and node.value == POINT_CLOUD and id(node) not in docstrings:
                found.append(f"{where} {POINT_CLOUD!r}")
            if isinstance(node, (ast.Tuple, ast.Set, ast.List)) and len(node.elts) >= 2:
                values = [e.value for e in node.elts if isinstance(e, ast.Constant)]
                if len(values) == len(node.elts) and set(values) <= set(FAMILIES):
                    found.append(f"{where} {values}")
    assert not found, "kind vocabulary spelled outside format/kinds.py:\n" + "\n".join(found)


def test_create_accepts_every_streamed_kind_and_its_aliases() -> None:
    from zarr_vectors.format.kinds import KINDS, writer_kinds

    names = writer_kinds()
    assert names["point_cloud"] == names["points"] == "points"
    assert names["streamlines"] == names["polyline"] == "lines"
    assert names["skeleton"] == "skeletons" and names["mesh"] == names["meshes"] == "meshes"
    assert "polygon" not in names  # written by write_geometries, not streamed
    assert {k.streamed for k in KINDS.values() if k.streamed} == {
        "points",
        "lines",
        "skeletons",
        "graphs",
        "meshes",
    }
