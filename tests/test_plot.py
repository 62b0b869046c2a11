"""``Result.plot()`` and ``render``: what is drawn equals the result's rows, edges and faces."""

from __future__ import annotations

import numpy as np
import pytest

import zarr_vectors as zv
from zarr_vectors.errors import InputError
from zarr_vectors.plot import colours, plot, render, resolve_view
from zarr_vectors.result import Result

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

from matplotlib import colormaps  # noqa: E402
from matplotlib.collections import LineCollection, PathCollection, PolyCollection  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from mpl_toolkits.mplot3d.art3d import Line3DCollection, Poly3DCollection  # noqa: E402


def _axes(three: bool = False):
    return Figure().add_subplot(projection="3d" if three else None)


def _points(n: int = 200, d: int = 3, seed: int = 0) -> Result:
    rng = np.random.default_rng(seed)
    return Result(
        positions=rng.uniform(0, 100, (n, d)).astype(np.float32),
        attributes={
            "v": rng.random(n).astype(np.float32),
            "rgb": rng.integers(0, 256, (n, 3)).astype(np.uint8),
            "two": rng.random((n, 2)),
        },
        object_ids=rng.integers(0, 5, n),
        axes=tuple("xyz"[:d]),
    )


def _only(ax, kind):
    found = [c for c in ax.collections if type(c) is kind]
    assert len(found) == 1, [type(c).__name__ for c in ax.collections]
    return found[0]


def test_points_projected_on_two_named_axes_coloured_by_an_attribute():
    res = _points()
    ax = plot(res, ax=_axes(), view="zx", color_by="v")
    sc = _only(ax, PathCollection)
    np.testing.assert_array_equal(sc.get_offsets(), res.positions[:, [2, 0]].astype(np.float64))
    v = res.attributes["v"].astype(np.float64)
    expected = colormaps["viridis"]((v - v.min()) / (v.max() - v.min()))
    np.testing.assert_allclose(sc.get_facecolors(), expected, atol=1e-12)
    assert ax.get_xlabel() == "z" and ax.get_ylabel() == "x"
    assert len(ax.figure.axes) == 2  # the colour bar


def test_points_in_3d_by_object_and_by_rgb():
    res = _points()
    ax = plot(res, ax=_axes(True), color_by="object", colorbar=True)
    sc = _only(ax, type(ax.collections[0]))
    xs, ys, zs = sc._offsets3d
    np.testing.assert_array_equal(np.column_stack([xs, ys, zs]), res.positions.astype(np.float64))
    rgba, _, mappable = colours(res, "object")
    assert mappable is None and len(ax.figure.axes) == 1
    for obj in np.unique(res.object_ids):  # one colour per object, a different one for each
        assert len(np.unique(rgba[res.object_ids == obj], axis=0)) == 1
    assert len(np.unique(rgba, axis=0)) == len(np.unique(res.object_ids))
    rgb, _, _ = colours(res, "rgb")
    np.testing.assert_allclose(rgb[:, :3], res.attributes["rgb"] / 255.0)
    np.testing.assert_array_equal(rgb[:, 3], 1.0)


def test_line_pieces_drawn_as_segments_and_lone_vertices_as_dots():
    pos = np.array([[0, 0], [1, 0], [1, 1], [5, 5], [6, 6], [7, 6]], np.float64)
    res = Result(
        positions=pos,
        line_offsets=np.array([0, 3, 4, 6]),
        object_ids=np.array([0, 0, 0, 1, 2, 2]),
        axes=("x", "y"),
    )
    ax = plot(res, ax=_axes(), color_by="object")
    lc = _only(ax, LineCollection)
    segs = np.array(lc.get_segments())
    np.testing.assert_array_equal(segs, pos[[[0, 1], [1, 2], [4, 5]]])
    np.testing.assert_array_equal(_only(ax, PathCollection).get_offsets(), pos[[3]])


def test_graph_edges_coloured_by_an_edge_attribute_in_3d():
    rng = np.random.default_rng(3)
    pos = rng.uniform(0, 10, (20, 3))
    edges = np.array([[0, 1], [1, 2], [5, 9], [9, 19]])
    w = np.array([0.0, 1.0, 2.0, 4.0])
    res = Result(positions=pos, edges=edges, edge_attributes={"w": w})
    ax = plot(res, ax=_axes(True), color_by="w")
    lc = _only(ax, Line3DCollection)
    np.testing.assert_allclose(np.array(lc._segments3d), pos[edges])
    np.testing.assert_allclose(lc.get_colors(), colormaps["viridis"](w / 4.0), atol=1e-12)
    assert len(ax.collections) == 2  # the 15 vertices no edge touches are dots


def _mesh() -> Result:
    # two triangles of a square, then one lying above them (drawn last in the 'xy' view)
    pos = np.array([[0, 0, 0], [1, 0, 0], [1, 1, 0], [0, 1, 0], [0, 0, 5], [1, 0, 5], [0, 1, 5]], np.float64)
    faces = np.array([[4, 5, 6], [0, 1, 2], [0, 2, 3]])
    return Result(positions=pos, faces=faces, attributes={"h": pos[:, 2]})


def test_mesh_faces_in_3d_and_depth_sorted_in_2d():
    res = _mesh()
    ax = plot(res, ax=_axes(True), color_by="h")
    poly = _only(ax, Poly3DCollection)
    assert poly.get_facecolor().shape == (3, 4)
    if hasattr(poly, "_faces"):  # matplotlib >= 3.9 keeps the 3-D polygons here
        np.testing.assert_array_equal(poly._faces, res.positions[res.faces])
    assert not [c for c in ax.collections if not isinstance(c, Poly3DCollection)]  # no dots for a mesh
    ax2 = plot(res, ax=_axes(), view="xy")
    pc = _only(ax2, PolyCollection)
    drawn = [p.vertices[:3] for p in pc.get_paths()]
    np.testing.assert_array_equal(drawn[0], res.positions[[0, 1, 2]][:, :2])
    np.testing.assert_array_equal(drawn[2], res.positions[[4, 5, 6]][:, :2])  # the top face last


def test_result_plot_delegates_and_render_writes_an_image_of_the_size(tmp_path):
    import matplotlib.pyplot as plt
    from matplotlib.image import imread

    res = _points(d=2)
    ax = res.plot(color_by="v", title="t")
    assert ax.get_title() == "t" and ax.name != "3d"
    plt.close(ax.figure)
    render(_mesh(), tmp_path / "m.png", size=(3.0, 2.0), dpi=100)
    img = imread(tmp_path / "m.png")
    assert img.shape[:2] == (200, 300)
    assert len(np.unique(img.reshape(-1, img.shape[2]), axis=0)) > 10


def test_store_results_draw_without_error(tmp_path):
    rng = np.random.default_rng(1)
    ds = zv.write_skeleton(
        tmp_path / "s.zarr", rng.uniform(0, 100, (30, 3)), np.arange(-1, 29), chunk_shape=40
    )
    ax = ds.query(([0, 0, 0], [60, 60, 60])).plot(ax=_axes(True), color_by="object")
    assert len(ax.collections) >= 1
    render(Result(positions=np.zeros((0, 3))), tmp_path / "empty.png")  # an empty result still renders
    render(Result(positions=np.arange(5.0)[:, None]), tmp_path / "one_axis.png")
    assert (tmp_path / "empty.png").stat().st_size > 0 and (tmp_path / "one_axis.png").stat().st_size > 0


@pytest.mark.parametrize(
    "view, names, expected",
    [
        (None, "xyz", (0, 1, 2)),
        (None, "xy", (0, 1)),
        ("2d", "xyz", (0, 1)),
        ("yz", "xyz", (1, 2)),
        ("x,z", "xyz", (0, 2)),
        (("z", 0), "xyz", (2, 0)),
        ("zyx", "xyz", (2, 1, 0)),
    ],
)
def test_resolve_view(view, names, expected):
    assert resolve_view(view, list(names)) == expected


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"color_by": "nope"}, r"cannot colour by 'nope': this result has \['object', 'v', 'rgb', 'two'\]"),
        ({"color_by": "two"}, "has 2 channels"),
        ({"view": "xq"}, "'q' is not an axis"),
        ({"view": "xx"}, "two or three different axes"),
        ({"view": "3d", "ax": "2d"}, "needs axes made with projection='3d'"),
    ],
)
def test_plot_errors(kwargs, message):
    if kwargs.get("ax") == "2d":
        kwargs["ax"] = _axes()
    with pytest.raises(InputError, match=message):
        plot(_points(), **kwargs)


def test_object_colours_need_object_ids_and_3d_needs_three_axes():
    with pytest.raises(InputError, match="no object ids to colour by"):
        plot(Result(positions=np.zeros((2, 2))), ax=_axes(), color_by="object")
    with pytest.raises(InputError, match="a 3-D view needs 3 axes; this result has 2"):
        resolve_view("3d", ["x", "y"])


def test_dense_clouds_are_drawn_as_a_density_image_of_every_point():
    from zarr_vectors.plot import DENSITY_FROM, MARKERS_3D

    rng = np.random.default_rng(3)
    n = DENSITY_FROM + 5000
    res = Result(rng.normal(0, 1, (n, 2)), attributes={"t": rng.random(n)}, axes=("x", "y"))
    ax = plot(res, ax=_axes())
    (image,) = ax.get_images()
    assert not ax.collections  # no markers at all
    counts = np.asarray(image.get_array())
    assert counts.sum() == n  # every point counted once
    assert counts.max() > 10 * np.median(counts[counts > 0])  # the centre is denser than the edge
    coloured = plot(res, ax=_axes(), color_by="t")
    rgba = np.asarray(coloured.get_images()[0].get_array())
    assert rgba.shape[-1] == 4 and 0.0 < rgba[..., :3].max() <= 1.0
    three = plot(Result(rng.normal(0, 1, (n, 3))), ax=_axes(True))
    assert len(three.collections[0].get_offsets()) == MARKERS_3D  # an even subsample in 3-D


def test_small_integer_attributes_are_categories_with_a_legend():
    rng = np.random.default_rng(4)
    kinds = rng.integers(1, 5, 300).astype(np.int16)  # SWC-like types 1..4
    res = Result(
        rng.uniform(0, 10, (300, 2)), attributes={"type": kinds, "w": rng.random(300)}, axes=("x", "y")
    )
    ax = plot(res, ax=_axes(), color_by="type")
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["type 1", "type 2", "type 3", "type 4"]
    assert len(ax.figure.axes) == 1  # a legend, no colour bar
    faces = ax.collections[0].get_facecolors()
    palette = colormaps["tab10"](np.arange(4))
    assert np.allclose(faces, palette[kinds - 1])
    assert plot(res, ax=_axes(), color_by="w").get_legend() is None  # floats keep the colour bar


def test_few_objects_get_a_legend_many_do_not():
    rng = np.random.default_rng(5)
    few = Result(rng.uniform(0, 10, (60, 2)), object_ids=np.repeat([7, 2**40, 9], 20), axes=("x", "y"))
    labels = [t.get_text() for t in plot(few, ax=_axes(), color_by="object").get_legend().get_texts()]
    assert labels == ["object 7", "object 9", f"object {2**40}"]
    many = Result(rng.uniform(0, 10, (60, 2)), object_ids=np.arange(60), axes=("x", "y"))
    assert plot(many, ax=_axes(), color_by="object").get_legend() is None
