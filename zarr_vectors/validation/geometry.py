"""Level 4, store-wide geometry rules: the links convention and link width each geometry
type needs. (Per-vertex and per-record rules run while the cells are read.)"""

from __future__ import annotations

from zarr_vectors.format.kinds import KINDS, POINT_CLOUD
from zarr_vectors.validation._report import Collector
from zarr_vectors.validation.arrays import LevelModel
from zarr_vectors.validation.metadata import RootInfo

__all__ = ["check_geometry", "CONVENTIONS"]

#: links_convention values each known geometry type allows (from the kind table; point clouds: any).
CONVENTIONS: dict[str, tuple[str, ...]] = {name: k.conventions for name, k in KINDS.items() if k.conventions}
#: Kinds whose link records join two vertices.
_PAIRS = tuple(name for name, k in KINDS.items() if k.link_width == 2)


def check_geometry(root: RootInfo, models: dict[int, LevelModel], out: Collector) -> None:
    kinds = set(root.geometry_types)
    for kind in sorted(kinds & set(CONVENTIONS)):
        if root.links_convention not in CONVENTIONS[kind]:
            out.error(
                "geometry.links-convention",
                "zarr.json",
                f"geometry {kind!r} needs links_convention "
                f"{' or '.join(CONVENTIONS[kind])}, not {root.links_convention!r}",
            )
    for lv, model in sorted(models.items()):
        fam = model.families.get(0)
        if fam is None:
            continue
        path = f"{lv}/links/0"
        width = fam.get("link_width")
        if kinds == {POINT_CLOUD}:
            out.warn("geometry.point-links", path, "a point cloud has no links; readers ignore this family")
        if "mesh" in kinds and isinstance(width, int) and width < 3:
            out.error("geometry.link-width", path, f"mesh faces need link_width 3 or more, got {width}")
        pair_kinds = sorted(kinds & set(_PAIRS))
        if pair_kinds and "mesh" not in kinds and width != 2:
            out.error(
                "geometry.link-width",
                path,
                f"{', '.join(pair_kinds)} links join two vertices: link_width must be 2, got {width}",
            )
