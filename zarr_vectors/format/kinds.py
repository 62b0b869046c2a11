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
    "CANONICAL_KINDS",
    "FAMILIES",
    "KINDS",
    "GeometryKind",
    "family_of",
    "kind",
]

#: Families in the order that decides a store listing several kinds (first match wins).
FAMILIES = ("mesh", "shapes", "lines", "graph", "points")


@dataclass(frozen=True)
class GeometryKind:
    """One row of the table.

    ``conventions``: the ``links_convention`` values a store of this kind may declare
    (empty: any). ``link_width``: vertices per link record (None: no links; for meshes
    the minimum, a face). ``writer``: the public function writing it.
    """

    name: str
    family: str
    conventions: tuple[str, ...]
    link_width: int | None
    writer: str
    canonical: bool = True

    @property
    def linked(self) -> bool:
        """Reads return edges between vertices."""
        return self.family in ("lines", "graph", "shapes")

    @property
    def line_like(self) -> bool:
        """Each object is one chain: box reads cut it into pieces with ``line_offsets``."""
        return self.family == "lines"

    @property
    def has_faces(self) -> bool:
        return self.family == "mesh"


_SEQ, _BRANCHES, _EXPLICIT = "implicit_sequential", "implicit_sequential_with_branches", "explicit"

KINDS: dict[str, GeometryKind] = {
    k.name: k
    for k in (
        GeometryKind("point_cloud", "points", (), None, "write_points"),
        GeometryKind("line", "lines", (_SEQ, _EXPLICIT), 2, "write_lines"),
        GeometryKind("polyline", "lines", (_SEQ,), 2, "write_lines"),
        GeometryKind("streamline", "lines", (_SEQ,), 2, "write_lines"),
        GeometryKind("skeleton", "graph", (_BRANCHES, _EXPLICIT), 2, "write_skeleton"),
        GeometryKind("graph", "graph", (_EXPLICIT,), 2, "write_graph"),
        GeometryKind("mesh", "mesh", (_EXPLICIT,), 3, "write_mesh"),
        GeometryKind("polygon", "shapes", (_SEQ,), 2, "write_geometries", canonical=False),
        GeometryKind("multi_polyline", "shapes", (_SEQ,), 2, "write_geometries", canonical=False),
    )
}

#: The format's own kinds (others are custom values, Appendix H).
CANONICAL_KINDS = tuple(name for name, k in KINDS.items() if k.canonical)


def kind(name: str) -> GeometryKind | None:
    """The row for ``name`` (None for a custom kind this library does not know)."""
    return KINDS.get(name)


def family_of(types: Iterable[str]) -> str | None:
    """The family that reads a store listing ``types``: the first of :data:`FAMILIES` any
    known kind belongs to (None when no listed kind is known)."""
    present = {KINDS[t].family for t in types if t in KINDS}
    return next((f for f in FAMILIES if f in present), None)
