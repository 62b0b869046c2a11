"""A quick look at a :class:`~zarr_vectors.result.Result` with matplotlib (the ``plot`` extra).

What is drawn follows what the result holds: faces as a mesh (``faces`` not None), else
edges or line pieces as segments (plus any vertex no edge touches, as a dot), else points.
Colours come from nothing (one colour), ``"object"`` (one colour per object id, cycling
through 20, with a legend when there are at most :data:`MAX_LEGEND`), a scalar attribute
(a colour map and a colour bar; an integer attribute of at most :data:`MAX_CATEGORIES`
values, such as an SWC ``type`` or a LiDAR class, is a category: one colour per value and
a legend), an attribute of 3 or 4 channels (read as RGB(A): ``uint8`` 0-255 or floats
0-1), or an edge attribute (edges only). The view is a 2-D projection onto two axes or a
3-D view of three, with equal scales.

Clouds of more than :data:`DENSITY_FROM` points are drawn as density, not as markers that
hide each other: in 2-D an image of the point count per pixel (log scale), or of the mean
of a scalar attribute per pixel when colouring by one; in 3-D an even subsample of
:data:`MARKERS_3D` points, translucent.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from zarr_vectors._extras import needs
from zarr_vectors.errors import InputError, ZarrVectorsError
from zarr_vectors.result import Result
from zarr_vectors.tables import axis_names, edges_of

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.cm import ScalarMappable
    from mpl_toolkits.mplot3d.axes3d import Axes3D

__all__ = ["image_format", "plot", "render", "resolve_view"]

#: Points from which a cloud is drawn as density (see the module docstring).
DENSITY_FROM = 100_000
#: Markers a dense cloud is drawn with in 3-D (an even subsample): Agg draws about 100,000 a second.
MARKERS_3D = 30_000
#: Integer attributes with at most this many distinct values are drawn as categories.
MAX_CATEGORIES = 20
#: Objects (or categories) from which no legend is drawn.
MAX_LEGEND = 12

#: Direction the light of 3-D mesh shading comes from (any length).
LIGHT = np.array([0.4, -0.6, 0.7])
MESH_COLOUR = (0.62, 0.72, 0.85, 1.0)


def _require_matplotlib() -> Any:
    try:
        import matplotlib
    except ImportError as exc:
        raise ZarrVectorsError(needs("drawing", "matplotlib", "plot")) from exc
    return matplotlib


def resolve_view(view: str | Sequence[int | str] | None, names: Sequence[str]) -> tuple[int, ...]:
    """Axis indices to draw: two for a 2-D projection, three for a 3-D view.

    Parameters
    ----------
    view
        ``None`` (3-D when there are 3 or more axes, else the first two), ``"3d"``,
        ``"2d"``, a string of one-letter axis names (``"xz"``), comma-separated names
        (``"x,z"``), or a sequence of names or indices.
    names
        The axis names of the data, in coordinate order.

    Returns
    -------
    tuple of int

    Raises
    ------
    InputError
        An unknown axis name or index, a repeated axis, or a count other than two or three.

    Examples
    --------
    >>> from zarr_vectors.plot import resolve_view
    >>> resolve_view(None, ["x", "y", "z"]), resolve_view("xz", ["x", "y", "z"])
    ((0, 1, 2), (0, 2))
    >>> resolve_view(["z", 0], ["x", "y", "z"])
    (2, 0)
    """
    d = len(names)
    if view is None or view in ("3d", "2d"):
        want = 3 if (view == "3d" or (view is None and d >= 3)) else 2
        if want > max(d, 2):
            raise InputError(f"a 3-D view needs 3 axes; this result has {d}")
        return tuple(range(want))
    if isinstance(view, str):
        parts: Sequence[int | str] = view.split(",") if "," in view else list(view)
    else:
        parts = list(view)
    out = []
    for p in parts:
        if isinstance(p, (int, np.integer)) and 0 <= p < d:
            out.append(int(p))
        elif isinstance(p, str) and p.strip() in names:
            out.append(list(names).index(p.strip()))
        else:
            raise InputError(
                f"view {view!r}: {p!r} is not an axis; the axes are {list(names)} (or use '2d', '3d')"
            )
    if len(out) not in (2, 3) or len(set(out)) != len(out):
        raise InputError(f"view {view!r} must name two or three different axes of {list(names)}")
    return tuple(out)


def _scalar_colours(values: np.ndarray, cmap: str) -> tuple[np.ndarray, ScalarMappable]:
    from matplotlib import colormaps
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize

    values = np.asarray(values, np.float64)
    finite = values[np.isfinite(values)]
    lo, hi = (float(finite.min()), float(finite.max())) if len(finite) else (0.0, 1.0)
    mappable = ScalarMappable(Normalize(lo, hi), colormaps[cmap])
    mappable.set_array(values)
    return mappable.to_rgba(values), mappable


def _attribute_colours(values: np.ndarray, name: str, cmap: str) -> tuple[np.ndarray, ScalarMappable | None]:
    values = np.asarray(values)
    flat = values.reshape(len(values), int(np.prod(values.shape[1:])))
    if flat.shape[1] == 1:
        return _scalar_colours(flat[:, 0], cmap)
    if flat.shape[1] in (3, 4):
        rgb = flat / 255.0 if values.dtype == np.uint8 else np.clip(flat.astype(np.float64), 0.0, 1.0)
        if rgb.shape[1] == 3:
            rgb = np.column_stack([rgb, np.ones(len(rgb))])
        return rgb, None
    raise InputError(
        f"attribute {name!r} has {flat.shape[1]} channels; colour by a scalar attribute, "
        "or one with 3 or 4 channels (RGB or RGBA)"
    )


def _categories(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``(RGBA per row, the distinct values, their RGBA)`` of an integer attribute with few
    values, else None."""
    values = np.asarray(values)
    if values.dtype.kind not in "iub" or values.ndim != 1:
        return None
    uniq, index = np.unique(values, return_inverse=True)
    if len(uniq) > MAX_CATEGORIES:
        return None
    from matplotlib import colormaps

    palette = colormaps["tab10" if len(uniq) <= 10 else "tab20"](np.arange(len(uniq)))
    return palette[index.ravel()], uniq, palette


def _object_colours(object_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    from matplotlib import colormaps

    uniq, index = np.unique(object_ids, return_inverse=True)
    slot = np.arange(len(uniq)) % 20  # the 10 strong hues of tab20 first, then their light twins
    palette = colormaps["tab20"](2 * (slot % 10) + slot // 10)
    return palette[index.ravel()], uniq, palette


def colours(
    result: Result, color_by: str | None, cmap: str = "viridis"
) -> tuple[np.ndarray | None, np.ndarray | None, ScalarMappable | None]:
    """RGBA per vertex and per edge (either may be None: a single colour), and the colour map used.

    Edge colours are those of edge attribute ``color_by`` when it names one, else the mean
    of the two endpoint colours.
    """
    rgba_v, rgba_e, mappable, _ = _colours_and_legend(result, color_by, cmap)
    return rgba_v, rgba_e, mappable


def _colours_and_legend(
    result: Result, color_by: str | None, cmap: str
) -> tuple[np.ndarray | None, np.ndarray | None, ScalarMappable | None, list[tuple[str, Any]]]:
    """:func:`colours`, plus legend entries ``(label, RGBA)`` for objects and categories."""
    if color_by is None:
        return None, None, None, []
    if color_by == "object":
        if result.object_ids is None:
            raise InputError(
                "this result has no object ids to colour by; read with object_ids=True or colour "
                "by an attribute"
            )
        rgba, uniq, palette = _object_colours(result.object_ids)
        legend = (
            [(f"object {v}", c) for v, c in zip(uniq.tolist(), palette)] if len(uniq) <= MAX_LEGEND else []
        )
        return rgba, None, None, legend
    if color_by in result.attributes:
        cats = _categories(result.attributes[color_by])
        if cats is not None:
            rgba, uniq, palette = cats
            return rgba, None, None, [(f"{color_by} {v}", c) for v, c in zip(uniq.tolist(), palette)]
        rgba, mappable = _attribute_colours(result.attributes[color_by], color_by, cmap)
        return rgba, None, mappable, []
    if color_by in result.edge_attributes:
        edge_rgba, mappable = _attribute_colours(result.edge_attributes[color_by], color_by, cmap)
        return None, edge_rgba, mappable, []
    names = ["object", *result.attributes, *result.edge_attributes]
    raise InputError(f"cannot colour by {color_by!r}: this result has {names}")


def _shade(tri: np.ndarray, rgba: np.ndarray, light: np.ndarray) -> np.ndarray:
    """Lambert-like shading of triangles (F, 3, 3): brighter where a face looks at the light."""
    normal = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
    length = np.linalg.norm(normal, axis=1)
    cos = np.abs(normal @ (light / np.linalg.norm(light))) / np.where(length > 0, length, 1.0)
    out = rgba.copy()
    out[:, :3] *= (0.35 + 0.65 * cos)[:, None]
    return out


def _per_face(colours_v: np.ndarray | None, items: np.ndarray, default: tuple[float, ...]) -> np.ndarray:
    """One RGBA per edge or face: the mean of its vertices' colours, or ``default``."""
    if colours_v is None:
        return np.tile(np.asarray(default, np.float64), (len(items), 1))
    return colours_v[items].mean(axis=1)


def _draw(
    ax: Axes,
    pos: np.ndarray,
    full: np.ndarray,
    result: Result,
    idx: tuple[int, ...],
    colour_args: tuple[Any, ...],
    point_size: float | None,
    line_width: float,
) -> None:
    """Add the result's faces, segments and points to ``ax`` (3-D when ``pos`` has 3 columns)."""
    from matplotlib.colors import to_rgba

    rgba_v, rgba_e = colour_args
    three = pos.shape[1] == 3
    faces = getattr(result, "faces", None)
    edges = None if faces is not None else edges_of(result)
    alone = np.ones(len(pos), bool)
    if faces is not None and len(faces):
        faces = np.asarray(faces, np.int64).reshape(-1, 3)
        alone[:] = False
        face_rgba = _per_face(rgba_v, faces, MESH_COLOUR)
        if full.shape[1] == 3:
            light = LIGHT if three else np.eye(3)[[i for i in range(3) if i not in idx][0]]
            face_rgba = _shade(full[faces], face_rgba, light)
        if three:
            from mpl_toolkits.mplot3d.art3d import Poly3DCollection

            cast("Axes3D", ax).add_collection3d(
                Poly3DCollection(pos[faces], facecolors=face_rgba, edgecolors="none")
            )
        else:
            from matplotlib.collections import PolyCollection

            depth = full[faces][:, :, [i for i in range(full.shape[1]) if i not in idx]].sum(axis=(1, 2))
            order = np.argsort(depth, kind="stable")
            ax.add_collection(
                PolyCollection(
                    pos[faces][order],  # type: ignore[arg-type]  # an (F, 3, 2) array is a sequence of polygons
                    facecolors=face_rgba[order],
                    edgecolors="none",
                )
            )
    elif edges is not None and len(edges):
        alone[edges.ravel()] = False
        edge_rgba = rgba_e if rgba_e is not None else _per_face(rgba_v, edges, to_rgba("C0"))
        if three:
            from mpl_toolkits.mplot3d.art3d import Line3DCollection

            cast("Axes3D", ax).add_collection3d(
                Line3DCollection(pos[edges], colors=edge_rgba, linewidths=line_width)
            )
        else:
            from matplotlib.collections import LineCollection

            ax.add_collection(LineCollection(pos[edges], colors=edge_rgba, linewidths=line_width))
    if alone.any():
        n_alone = int(alone.sum())
        if n_alone > DENSITY_FROM and faces is None and (edges is None or not len(edges)):
            _density(ax, pos, rgba_v, point_size)
            return
        size = point_size if point_size is not None else float(np.clip(4e4 / max(len(pos), 1), 0.5, 20.0))
        colour = rgba_v[alone] if rgba_v is not None else "C0"
        xyz = pos[alone].T
        if three:
            cast("Axes3D", ax).scatter(*xyz, s=size, c=colour, linewidths=0)
        else:
            ax.scatter(xyz[0], xyz[1], s=size, c=colour, linewidths=0)


def _density(ax: Axes, pos: np.ndarray, rgba: np.ndarray | None, point_size: float | None) -> None:
    """A dense cloud: in 2-D the count (or mean colour) per pixel as an image, in 3-D an even
    subsample of :data:`MARKERS_3D` translucent markers."""
    if pos.shape[1] == 3:
        keep = np.linspace(0, len(pos) - 1, MARKERS_3D).astype(np.int64)
        size = point_size if point_size is not None else 2.0
        colour = rgba[keep] if rgba is not None else "C0"
        cast("Axes3D", ax).scatter(*pos[keep].T, s=size, c=colour, linewidths=0, alpha=0.35)
        return
    from matplotlib.colors import LogNorm

    bbox = ax.get_window_extent()  # the axes in pixels
    lo, hi = pos.min(axis=0), pos.max(axis=0)
    span = np.where(hi > lo, hi - lo, 1.0)
    # At most one bin per pixel, and about 8 points per bin on average, so that a uniform
    # cloud reads as a tone rather than as speckle.
    per_axis = min(
        max(bbox.width, bbox.height), float(np.sqrt(len(pos) / 8 * span.max() ** 2 / np.prod(span)))
    )
    bins = np.maximum((per_axis * span / span.max()).astype(int), 1)
    extent = (lo[0], lo[0] + span[0], lo[1], lo[1] + span[1])
    count, _, _ = np.histogram2d(
        pos[:, 0], pos[:, 1], bins=bins, range=[(extent[0], extent[1]), (extent[2], extent[3])]
    )
    if rgba is None:
        ax.imshow(
            count.T,
            origin="lower",
            extent=extent,
            norm=LogNorm(vmin=1, vmax=max(count.max(), 1)),
            cmap="magma",
            interpolation="nearest",
            aspect="equal",
        )
        return
    image = np.zeros((*count.shape, 4))
    for c in range(4):
        sums, _, _ = np.histogram2d(
            pos[:, 0],
            pos[:, 1],
            bins=bins,
            range=[(extent[0], extent[1]), (extent[2], extent[3])],
            weights=rgba[:, c],
        )
        image[..., c] = np.divide(sums, count, out=np.zeros_like(sums), where=count > 0)
    ax.imshow(
        np.transpose(image, (1, 0, 2)), origin="lower", extent=extent, interpolation="nearest", aspect="equal"
    )


def _frame(ax: Axes, pos: np.ndarray, labels: list[str]) -> None:
    """Limits, equal scales and axis labels."""
    if pos.shape[1] != 3:
        ax.set_aspect("equal", adjustable="datalim")
        ax.autoscale_view()
        ax.set_xlabel(labels[0])
        ax.set_ylabel(labels[1])
        return
    ax3 = cast("Axes3D", ax)
    if len(pos):
        lo, hi = pos.min(axis=0), pos.max(axis=0)
        span = float((hi - lo).max()) or 1.0
        half = np.maximum((hi - lo) / 2, span * 0.05) * 1.04  # flat axes get 10% of the widest
        lo, hi = (lo + hi) / 2 - half, (lo + hi) / 2 + half
        for i, setter in enumerate((ax3.set_xlim, ax3.set_ylim, ax3.set_zlim)):
            setter(lo[i], hi[i])
        ax3.set_box_aspect(tuple(hi - lo))
        from matplotlib.ticker import MaxNLocator

        for axis, extent in zip((ax3.xaxis, ax3.yaxis, ax3.zaxis), (hi - lo) / float((hi - lo).max())):
            if extent < 0.25:  # a thin side of the box: few ticks, so their labels do not overlap
                axis.set_major_locator(MaxNLocator(2))
    for setter, label in zip((ax3.set_xlabel, ax3.set_ylabel, ax3.set_zlabel), labels):
        setter(label)


def plot(
    result: Result,
    *,
    ax: Axes | None = None,
    view: str | Sequence[int | str] | None = None,
    color_by: str | None = None,
    cmap: str = "viridis",
    point_size: float | None = None,
    line_width: float = 1.5,
    colorbar: bool = True,
    title: str | None = None,
) -> Axes:
    """Draw ``result`` on ``ax`` (a new pyplot figure when None) and return the axes.

    Coordinates are drawn as float64; rows keep the result's order. The module
    documentation says what is drawn and how colours are chosen.

    Parameters
    ----------
    result
        What to draw.
    ax
        Matplotlib axes to draw on; a 3-D view needs axes made with ``projection="3d"``.
    view
        The axes to show; see :func:`resolve_view`.
    color_by
        ``"object"``, a vertex attribute or an edge attribute name; default one colour.
    cmap
        Colour map for a scalar attribute.
    point_size
        Marker size; default a size that shrinks with the vertex count.
    line_width
        Width of edges and line pieces.
    colorbar
        Add a colour bar when colouring by a scalar attribute.
    title
        Title of the axes.

    Returns
    -------
    matplotlib.axes.Axes

    Raises
    ------
    InputError
        A view that does not fit the data or ``ax``, or an unknown ``color_by``.
    ZarrVectorsError
        Matplotlib is not installed (extra ``plot``).

    Examples
    --------
    >>> import numpy as np, zarr_vectors as zv
    >>> from matplotlib.figure import Figure
    >>> from zarr_vectors.plot import plot
    >>> pts = np.random.default_rng(0).uniform(0, 10, (50, 3))
    >>> ds = zv.write_points("memory://doc-plot", pts, chunk_shape=5, attributes={"t": np.arange(50.0)})
    >>> ax = plot(ds.read(), ax=Figure().add_subplot(), view="xz", color_by="t")
    >>> ax.get_xlabel(), ax.get_ylabel(), len(ax.figure.axes)  # the plot and its colour bar
    ('x', 'z', 2)
    """
    _require_matplotlib()
    names = axis_names(result)
    full = np.asarray(result.positions, np.float64)
    if full.shape[1] == 1:
        full, names = np.column_stack([full, np.zeros(len(full))]), [*names, ""]
    idx = resolve_view(view, names)
    three = len(idx) == 3
    if ax is None:
        import matplotlib.pyplot as plt

        ax = plt.figure().add_subplot(projection="3d" if three else None)
    if three != (ax.name == "3d"):
        need = "projection='3d'" if three else "a 2-D projection"
        raise InputError(f"view {view!r} needs axes made with {need}; got {ax.name!r} axes")
    rgba_v, rgba_e, mappable, legend = _colours_and_legend(result, color_by, cmap)
    pos = full[:, idx]
    _draw(ax, pos, full, result, idx, (rgba_v, rgba_e), point_size, line_width)
    _frame(ax, pos, [names[i] for i in idx])
    if mappable is not None and colorbar:
        ax.figure.colorbar(mappable, ax=ax, label=color_by, shrink=0.8)
    if legend:
        from matplotlib.patches import Patch

        ax.legend(handles=[Patch(color=c, label=label) for label, c in legend], loc="best", fontsize="small")
    if title is not None:
        ax.set_title(title)
    return ax


def image_format(path: str | Path) -> str:
    """The image format matplotlib writes for ``path``'s extension (``"png"``, ``"svg"``, ...).

    Parameters
    ----------
    path
        An image file name.

    Returns
    -------
    str
        The extension, lower case, without the dot.

    Raises
    ------
    InputError
        Matplotlib writes no format for the extension (the message names those it writes).

    Examples
    --------
    >>> from zarr_vectors.plot import image_format
    >>> image_format("cells.PNG"), image_format("figures/cells.svg")
    ('png', 'svg')
    """
    _require_matplotlib()
    from matplotlib.backend_bases import FigureCanvasBase

    known = FigureCanvasBase.get_supported_filetypes()
    fmt = Path(path).suffix.lower().lstrip(".")
    if fmt not in known:
        said = f"extension .{fmt}" if fmt else "no extension"
        raise InputError(
            f"cannot draw to {str(path)!r}: it has {said}; give the image one of the extensions "
            f"{', '.join('.' + k for k in sorted(known))}"
        )
    return fmt


def render(
    result: Result,
    path: str | Path,
    *,
    size: tuple[float, float] = (8.0, 6.0),
    dpi: float = 100,
    **kwargs: Any,
) -> None:
    """Draw ``result`` into an image file; its extension picks the format.

    No pyplot state is touched, so this works without a display and inside servers.

    Parameters
    ----------
    result
        What to draw.
    path
        The image to write: ``.png``, ``.svg``, ``.pdf``, ... (see :func:`image_format`).
    size
        Width and height in inches.
    dpi
        Dots per inch.
    **kwargs
        The keywords of :func:`plot` (``view``, ``color_by``, ...), except ``ax``.

    Raises
    ------
    InputError
        An extension matplotlib cannot write, or options :func:`plot` refuses.

    Examples
    --------
    >>> import tempfile, pathlib, zarr_vectors as zv
    >>> from zarr_vectors.plot import render
    >>> ds = zv.write_points("memory://doc-render", [[0, 0, 0], [1, 2, 3], [3, 1, 2]], chunk_shape=2)
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = pathlib.Path(folder) / "cloud.png"
    ...     render(ds.read(), path, size=(3, 2), dpi=50, view="xz")
    ...     print(path.read_bytes()[1:4])
    b'PNG'
    """
    fmt = image_format(path)
    from matplotlib.figure import Figure

    names = axis_names(result)
    three = len(resolve_view(kwargs.get("view"), names if len(names) > 1 else [*names, ""])) == 3
    fig = Figure(figsize=size, dpi=dpi)
    ax = fig.add_subplot(projection="3d" if three else None)
    plot(result, ax=ax, **kwargs)
    fig.savefig(path, format=fmt)
