"""The rules the validator checks: ``id -> (level, what the rule requires)``.

Levels are cumulative and follow the conformance levels of Zarr Vectors 0.9 (§13):
1 structure, 2 metadata, 3 consistency of the bytes of every cell and across arrays,
4 geometry rules per kind, 5 multi-resolution rules.
"""

from __future__ import annotations

__all__ = ["RULES", "MAX_LEVEL", "LEVEL_NAMES"]

MAX_LEVEL = 5
LEVEL_NAMES = {1: "structure", 2: "metadata", 3: "consistency", 4: "geometry", 5: "multi-resolution"}

RULES: dict[str, tuple[int, str]] = {
    # 1: structure
    "structure.root": (1, "the root holds a Zarr v3 group zarr.json"),
    "structure.node": (1, "every zarr.json is a JSON object describing a Zarr v3 group or array"),
    "structure.zv-block": (1, "the root group carries a 'zarr_vectors' attribute block"),
    "structure.levels": (1, "levels are groups named 0, 1, ... without gaps"),
    "structure.vertices": (1, "every level has a vertices array"),
    "structure.node-type": (1, "each known node is an array or a group as the format says"),
    "structure.pre-0.9": (1, "no cross_chunk_links nodes (they mark a pre-0.9 store)"),
    "structure.unknown-node": (1, "level children have format names (warning only)"),
    "structure.leftovers": (1, "no staging folder of a killed write lies beside the store (warning only)"),
    # 2: metadata
    "metadata.version": (2, "zv_version is X.Y.Z with major.minor 0.9"),
    "metadata.root": (2, "chunk_shape, bounds, base_bin_shape and numeric root fields are well formed"),
    "metadata.enum": (2, "conventions, strategies and storage modes hold canonical values"),
    "metadata.geometry-types": (2, "geometry_types is a list of names (unknown names warn)"),
    "metadata.capabilities": (2, "no retired capability token (unknown tokens warn)"),
    "metadata.multiscales": (2, "the NGFF 0.4 multiscales block names the axes and every level"),
    "metadata.geozarr": (2, "GeoZarr proj: / spatial: root attributes agree with crs, bounds and axes"),
    "metadata.unknown-key": (2, "metadata keys are known (warning only)"),
    "metadata.level": (2, "each level's zarr_vectors_level block is well formed"),
    "metadata.arrays-present": (2, "arrays_present holds family names (one naming an absent family warns)"),
    "metadata.array": (2, "per-chunk arrays are vlen-bytes over the chunk grid with (1, ...) chunks"),
    "metadata.zv-array": (2, "each format node carries the right zv_array discriminator"),
    "metadata.dtype": (2, "dtype attributes name a usable numeric type (integers for links)"),
    "metadata.encoding": (2, "encodings are known: raw or draco vertices, fragment_index_v1 fragments"),
    "metadata.codecs": (2, "codec lists are ones the validator can decode (warning otherwise)"),
    "metadata.grid": (
        2,
        "per-chunk arrays of a level share the grid; nonempty_chunks lists chunks inside it",
    ),
    "metadata.links": (2, "link families and offsets arrays have consistent policy, names and has_perm"),
    "metadata.link-attributes": (2, "each link attribute array mirrors a links array"),
    "metadata.attribute": (2, "vertex and fragment attributes name themselves and give a row_shape"),
    "metadata.object-index": (2, "object_index declares a known layout, counts and its manifests array"),
    "metadata.tables": (2, "object attributes, groups and group attributes are well-formed arrays"),
    # 3: consistency
    "cells.present": (3, "nonempty_chunks matches the cells stored"),
    "cells.decode": (3, "every cell decodes through the array's codecs"),
    "cells.read": (3, "every stored cell can be read: a regular file inside the store"),
    "cells.vertices": (3, "vertex cells hold whole rows (draco cells are not empty)"),
    "cells.fragments": (3, "fragment indices decode, sit beside vertex cells and stay inside their rows"),
    "cells.attribute-rows": (3, "attribute cells have one row per vertex (or per fragment)"),
    "cells.links": (3, "link cells decode as flat rows or ragged blobs with valid perm_idx"),
    "cells.link-fragments": (
        3,
        "link_fragments cells exist exactly beside intra link cells and cover their rows",
    ),
    "cells.link-attribute-rows": (3, "link attribute cells have one row per link record"),
    "cells.table-chunks": (
        3,
        "tables store chunks only inside their shape; manifests and object_ids store every chunk",
    ),
    "consistency.vertex-count": (3, "vertex_count equals the rows stored"),
    "consistency.fragments-tile": (3, "fragments_tile holds when claimed: each row in exactly one fragment"),
    "consistency.link-index": (3, "every link endpoint names an existing chunk and a row inside it"),
    "consistency.num-links": (3, "num_links and num_physical_records agree with the records stored"),
    "consistency.manifests": (3, "every object manifest decodes"),
    "consistency.manifest-refs": (3, "manifests name existing chunks and fragments"),
    "consistency.num-present": (3, "num_present counts the non-empty manifests"),
    "consistency.object-ids": (3, "object_ids (layout v2) increase strictly from 0 or more"),
    "consistency.object-attributes": (3, "object attributes have one row per object id"),
    "consistency.groups": (3, "group rows are int64 lists of existing object ids"),
    "consistency.group-attributes": (3, "group attributes have one row per group"),
    # 4: geometry
    "geometry.links-convention": (4, "links_convention suits every geometry type"),
    "geometry.link-width": (4, "link_width suits the geometry (2 for lines and graphs, 3+ for meshes)"),
    "geometry.point-links": (4, "point clouds have no links (warning only)"),
    "geometry.vertex-chunk": (4, "every vertex lies in the chunk whose cell holds it"),
    "geometry.bounds": (4, "every vertex lies inside the root bounds"),
    "geometry.finite": (4, "vertex coordinates are finite"),
    "geometry.bins": (4, "per-bin point fragments hold only points of their bin"),
    "geometry.skeleton-parents": (4, "a skeleton vertex has at most one explicit parent"),
    "geometry.mesh-faces": (4, "a mesh face joins distinct vertices"),
    # 5: multi-resolution
    "pyramid.levels": (5, "coarser levels name their parent and coarsening method"),
    "pyramid.chunk-shape": (5, "level chunk shapes are whole multiples of the root's and nest"),
    "pyramid.bin-shape": (5, "bin shapes from multiscales tile the chunks and grow with the level"),
    "pyramid.vertex-count": (5, "coarser levels hold no more vertices than finer ones"),
    "pyramid.object-ids": (5, "levels that preserve object ids say how many they inherit"),
    "pyramid.cross-level": (5, "cross-level link families match cross_level_storage and the tokens"),
    # collections (docs/format-collections.md): the collection node, then each member as a store
    "collection.node": (
        2,
        "the RFC-8 collection node lists zv:vectors members at ./name and known id spaces",
    ),
    "collection.member": (1, "every member's path holds a store (its own findings carry its name)"),
    "collection.index-missing": (2, "every relationship has an index (warning only)"),
    "collection.index": (3, "a relationship index's buckets hold the counted, sorted, correctly hashed rows"),
    "collection.index-stale": (3, "a relationship index matches its member's generation (warning only)"),
    "collection.dangling": (
        3,
        "every relationship value is an object id of a member of its id space (warning only)",
    ),
}
