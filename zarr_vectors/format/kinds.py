"""The geometry kinds this library knows: one table every dispatch site reads.

A kind is a value of the root's ``geometry_types``. The seven canonical kinds of the
format come first; ``polygon`` and ``multi_polyline`` are this library's custom kinds
(format Appendix H: stores of :func:`zarr_vectors.write_geometries`). Each row states the
format's facts about the kind (the ``links_convention`` values it allows, the width of
its link records) and the family that decides how it is read and coarsened:

``points``  vertices only; ``lines``  one chain per object, read as line pieces;
``graph``  explicit edges (skeletons, graphs); ``shapes``  chains of rings and parts
(polygons, multi-part lines); ``mesh``  faces.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = [
    "EDITED_LINKED_FAMILIES",
    "PART_ATTRIBUTE",
    "RING_ATTRIBUTE",
    "TYPE_ATTRIBUTE",
    "CANONICAL_KINDS",
    "FAMILIES",
    "FAMILY",
    "KINDS",
    "LINKED_FAMILIES",
    "POINT_CLOUD",
    "Family",
    "GeometryKind",
    "family_of",
    "kind",
    "read_family",
    "writer_kinds",
]


@dataclass(frozen=True)
class Family:
    """How the kinds of a family are read: ``linked`` reads return edges between vertices,
    ``line_like`` objects are single chains (box reads cut them into ``line_offsets`` pieces),
    ``has_faces`` reads return triangles."""

    name: str
    linked: bool = False
    line_like: bool = False
    has_faces: bool = False


#: Every family, in the order that decides a store listing several kinds (first match wins).
FAMILY: dict[str, Family] = {
    f.name: f
    for f in (
        Family("mesh", has_faces=True),
        Family("shapes", linked=True),
        Family("lines", linked=True, line_like=True),
        Family("graph", linked=True),
        Family("points"),
    )
}
FAMILIES = tuple(FAMILY)
#: The families whose reads return edges.
LINKED_FAMILIES = tuple(name for name, f in FAMILY.items() if f.linked)
#: The families whose objects ``append``/``replace``/``delete`` edit as linked geometry
#: (2-D shapes are not among them; point clouds have their own editor).
EDITED_LINKED_FAMILIES = ("lines", "graph", "mesh")


@dataclass(frozen=True)
class GeometryKind:
    """One row of the table.

    ``conventions``: the ``links_convention`` values a store of this kind may declare
    (empty: any). ``link_width``: vertices per link record (None: no links; for meshes
    the minimum, a face). ``writer``: the public function writing it. ``streamed``: the
    ``create()`` kind that writes it (None: none does), which accepts ``aliases`` too.
    """

    name: str
    family: str
    conventions: tuple[str, ...]
    link_width: int | None
    writer: str
    streamed: str | None = None
    aliases: tuple[str, ...] = ()
    canonical: bool = True


_SEQ, _BRANCHES, _EXPLICIT = "implicit_sequential", "implicit_sequential_with_branches", "explicit"

KINDS: dict[str, GeometryKind] = {
    k.name: k
    for k in (
        GeometryKind("point_cloud", "points", (), None, "write_points", "points"),
        GeometryKind("line", "lines", (_SEQ, _EXPLICIT), 2, "write_lines", "lines"),
        GeometryKind("polyline", "lines", (_SEQ,), 2, "write_lines", "lines", ("polylines",)),
        GeometryKind("streamline", "lines", (_SEQ,), 2, "write_lines", "lines", ("streamlines",)),
        GeometryKind("skeleton", "graph", (_BRANCHES, _EXPLICIT), 2, "write_skeleton", "skeletons"),
        GeometryKind("graph", "graph", (_EXPLICIT,), 2, "write_graph", "graphs"),
        GeometryKind("mesh", "mesh", (_EXPLICIT,), 3, "write_mesh", "meshes"),
        GeometryKind("polygon", "shapes", (_SEQ,), 2, "write_geometries", canonical=False),
        GeometryKind("multi_polyline", "shapes", (_SEQ,), 2, "write_geometries", canonical=False),
    )
}

#: The format's own kinds (others are custom values, Appendix H).
CANONICAL_KINDS = tuple(name for name, k in KINDS.items() if k.canonical)
#: Vertex attributes of ``polygon`` and ``multi_polyline`` stores: the part and ring of each
#: vertex, and each object's shapely geometry type (Appendix H custom kinds).
PART_ATTRIBUTE = "geom_part"
RING_ATTRIBUTE = "geom_ring"
TYPE_ATTRIBUTE = "geom_type"
#: The kind of a store of points (and the default ``geometry_types``).
POINT_CLOUD = "point_cloud"


def writer_kinds() -> dict[str, str]:
    """Every name ``create()`` accepts -> the writer kind it means: each row's ``streamed``
    kind, the row's own name, and its aliases."""
    out: dict[str, str] = {}
    for k in KINDS.values():
        if k.streamed is not None:
            out.update({name: k.streamed for name in (k.streamed, k.name, *k.aliases)})
    return out


def kind(name: str) -> GeometryKind | None:
    """The row for ``name`` (None for a custom kind this library does not know)."""
    return KINDS.get(name)


def read_family(types: Iterable[str]) -> Family:
    """The row of the family that reads a store listing ``types`` (points when no listed kind
    is known: such a store reads as points)."""
    return FAMILY[family_of(types) or "points"]


def family_of(types: Iterable[str]) -> str | None:
    """The family that reads a store listing ``types``: the first of :data:`FAMILIES` any
    known kind belongs to (None when no listed kind is known)."""
    present = {KINDS[t].family for t in types if t in KINDS}
    return next((f for f in FAMILIES if f in present), None)
