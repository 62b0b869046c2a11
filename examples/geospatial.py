"""A georeferenced store: districts (polygons with holes, multi-part) and bus stops, a polygon
region-of-interest query, geometries back as shapely, a GeoJSON export.

Run: python examples/geospatial.py [STORE]   (default: a temporary directory)
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import shapely

import zarr_vectors as zv
from zarr_vectors.io.geojson import export_geojson


def districts(rng: np.random.Generator, n: int = 30) -> list[shapely.Geometry]:
    """Star-shaped districts in UTM metres; every third has a lake, every fifth an island."""
    out = []
    for i in range(n):
        cx, cy = 500_000 + (i % 6) * 8_000.0, 5_400_000 + (i // 6) * 8_000.0
        a = (np.arange(24) + rng.uniform(0, 0.5, 24)) * (2 * np.pi / 24)
        r = rng.uniform(2_500, 3_800, 24)
        shell = np.c_[cx + r * np.cos(a), cy + r * np.sin(a)]
        lake = [[(cx - 400, cy - 300), (cx + 500, cy - 300), (cx + 200, cy + 600)]] if i % 3 == 0 else []
        part = shapely.Polygon(shell, lake)
        out.append(
            shapely.MultiPolygon([part, shapely.box(cx + 3_900, cy, cx + 4_000, cy + 150)])
            if i % 5 == 0
            else part
        )
    return out


def main(store: Path) -> None:
    rng = np.random.default_rng(3)
    shapes = districts(rng)
    stops = [shapely.Point(p) for p in rng.uniform([498_000, 5_398_000], [546_000, 5_438_000], (2_000, 2))]
    layer = shapes + stops
    kind = np.r_[np.zeros(len(shapes)), np.ones(len(stops))].astype(np.uint8)  # 0 district, 1 stop
    ds = zv.write_geometries(
        store, layer, chunk_shape=4_000, crs="EPSG:32633", object_attributes={"kind": kind}
    )
    print(ds, ds.crs)
    attrs = json.loads((store / "zarr.json").read_text())["attributes"]
    print("GeoZarr:", {k: v for k, v in attrs.items() if k.startswith(("proj:", "spatial:"))})

    ids, back = ds.objects(range(len(layer))).to_shapely()
    assert all(shapely.equals_exact(a, b, tolerance=0) for a, b in zip(back, layer))
    print(f"{len(ids)} geometries read back exactly")

    roi = shapely.Point(520_000, 5_415_000).buffer(6_000)  # a 6 km circle
    res = ds.query(polygon=roi)
    print(f"{len(res)} vertices strictly inside the circle, from {len(np.unique(res.object_ids))} objects")
    ids, clipped, extra = res.to_shapely(clip=True, object_attributes=["kind"])
    stops_inside = int((extra["kind"] == 1).sum())
    print(
        f"clipped: {stops_inside} stops, {len(ids) - stops_inside} district pieces, area "
        f"{sum(g.area for g in clipped) / 1e6:.1f} km2"
    )
    n = export_geojson(res, store.with_suffix(".geojson"), clip=True)
    print(f"wrote {n} features to {store.with_suffix('.geojson')}")


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(Path(sys.argv[1]))
    else:
        with tempfile.TemporaryDirectory() as tmp:
            main(Path(tmp) / "districts.zarr")
