"""Level 1: the node tree. Zarr v3 documents everywhere, a Zarr Vectors root, level groups
``0..N-1`` each with a ``vertices`` array, and format names of the right node type."""

from __future__ import annotations

from zarr_vectors.format.metadata import LEVEL_ARRAYS, LEVEL_GROUPS
from zarr_vectors.validation._report import Collector
from zarr_vectors.validation._store import StoreView

__all__ = ["check_structure", "LEVEL_ARRAYS", "LEVEL_GROUPS"]

# Families whose children are all arrays.
_ARRAY_FAMILIES = ("vertex_attributes", "fragment_attributes", "object_attributes", "group_attributes")
PRE_09 = ("cross_chunk_links", "cross_chunk_link_attributes")


def _node_docs(view: StoreView, out: Collector) -> None:
    for path, msg in sorted(view.bad_docs.items()):
        out.error("structure.node", f"{path}/zarr.json".lstrip("/"), f"zarr.json is not valid JSON ({msg})")
    nodes = set(view.docs) | set(view.bad_docs)
    parents = {"/".join(n.split("/")[:i]) for n in nodes if n for i in range(1, n.count("/") + 1)}
    for path in sorted(parents - nodes):
        out.error(
            "structure.node",
            path,
            "holds Zarr nodes but has no zarr.json of its own (Zarr v3 has no implicit groups)",
        )
    for path, message in sorted(view.node_problems.items()):
        out.error("structure.node", f"{path}/zarr.json".lstrip("/"), message)


def _orphan_arrays(view: StoreView, out: Collector) -> None:
    """Chunk keys in a folder without ``zarr.json``: an array whose metadata is gone, so readers
    would skip its data without a word. The folder is the child of the deepest node above the key."""
    nodes = set(view.docs) | set(view.bad_docs)
    found: dict[str, int] = {}
    for key in view.loose:
        parts = key.split("/")
        depth = max((i for i in range(len(parts)) if "/".join(parts[:i]) in nodes), default=0)
        folder = "/".join(parts[: depth + 1])
        if depth + 2 < len(parts) and parts[depth + 1] == "c" and folder not in nodes:
            found[folder] = found.get(folder, 0) + 1
    for folder, n in sorted(found.items()):
        out.error(
            "structure.node",
            folder,
            f"holds {n} chunk key{'s' * (n != 1)} ({folder}/c/...) but no zarr.json: "
            "the array's metadata is missing, so readers cannot see its data; restore it or rewrite the store",
        )


def _expect(view: StoreView, path: str, kind: str, out: Collector) -> bool:
    """Report a node of the wrong type; True when ``path`` is a node of type ``kind``."""
    if path not in view.docs:
        return False
    actual = view.docs[path].get("node_type") if isinstance(view.docs[path], dict) else None
    if actual != kind:
        out.error(
            "structure.node-type",
            path,
            f"should be a Zarr {kind} but its zarr.json says node_type {actual!r}",
        )
        return False
    return True


def _check_level(view: StoreView, p: str, out: Collector) -> None:
    if not _expect(view, f"{p}/vertices", "array", out) and f"{p}/vertices" not in view.docs:
        out.error(
            "structure.vertices", p, f"level {p} has no vertices array ({p}/vertices/zarr.json is missing)"
        )
    for name in view.children(p):
        path = f"{p}/{name}"
        if name in PRE_09:
            out.error(
                "structure.pre-0.9",
                path,
                f"{name} is a pre-0.9 node (0.9 keeps every link in links/); rewrite the store from source",
            )
        elif name in LEVEL_ARRAYS:
            _expect(view, path, "array", out)
        elif name in LEVEL_GROUPS:
            if _expect(view, path, "group", out):
                _check_family(view, path, name, out)
        else:
            out.warn(
                "structure.unknown-node",
                path,
                f"{name!r} is not a Zarr Vectors array name; readers ignore it",
            )


def _check_family(view: StoreView, path: str, name: str, out: Collector) -> None:
    for child in view.children(path):
        cpath = f"{path}/{child}"
        if name in _ARRAY_FAMILIES:
            _expect(view, cpath, "array", out)
        elif name == "object_index":
            if child in ("manifests", "object_ids"):
                _expect(view, cpath, "array", out)
            else:
                out.warn("structure.unknown-node", cpath, f"{child!r} is not a known object_index array")
        elif name == "links":
            if _expect(view, cpath, "group", out):
                for seg in view.children(cpath):
                    _expect(view, f"{cpath}/{seg}", "array", out)
        elif name == "link_attributes" and _expect(view, cpath, "group", out):
            for delta in view.children(cpath):
                dpath = f"{cpath}/{delta}"
                if _expect(view, dpath, "group", out):
                    for seg in view.children(dpath):
                        _expect(view, f"{dpath}/{seg}", "array", out)


def _leftovers(view: StoreView, out: Collector) -> None:
    from zarr_vectors.storage import find_leftovers

    if view.backend.local_dir is not None:
        for path in find_leftovers(view.backend.local_dir):
            out.warn(
                "structure.leftovers",
                f"../{path.name}",
                f"{path} was left by a write that was killed; "
                "the next write to this store removes it, or delete it by hand",
            )


def check_structure(view: StoreView, out: Collector) -> list[int] | None:
    """Run the level-1 rules; return the level indices, or None when nothing more can be checked."""
    _leftovers(view, out)
    _node_docs(view, out)
    _orphan_arrays(view, out)
    root = view.docs.get("")
    if not isinstance(root, dict) or root.get("node_type") != "group" or root.get("zarr_format") != 3:
        if "" not in view.bad_docs:
            what = "no zarr.json" if root is None else "a zarr.json that is not a Zarr v3 group"
            out.error(
                "structure.root",
                "zarr.json",
                f"the store root has {what}; a Zarr Vectors store is a Zarr v3 group",
            )
        return None
    if not isinstance(view.attrs("").get("zarr_vectors"), dict):
        out.error(
            "structure.zv-block",
            "zarr.json",
            "the root group has no 'zarr_vectors' attribute block, so it is not a Zarr Vectors store",
        )
        return None
    levels: list[int] = []
    for name in view.children(""):
        if name.isdigit() and str(int(name)) == name:
            levels.append(int(name))
        elif name.startswith("resolution_"):
            out.error(
                "structure.levels", name, f"{name} is a pre-0.4.1 level name; levels are named 0, 1, ..."
            )
        elif name in PRE_09:
            out.error("structure.pre-0.9", name, f"{name} is a pre-0.9 node; rewrite the store from source")
        else:
            out.warn(
                "structure.unknown-node", name, f"{name!r} at the root is not a level; readers ignore it"
            )
    levels.sort()
    if not levels:
        out.error("structure.levels", "", "the store has no level groups (expected at least 0/)")
        return None
    if levels != list(range(len(levels))):
        out.error("structure.levels", "", f"level groups are {levels}; they must be 0, 1, ... without gaps")
    good = []
    for lv in levels:
        if _expect(view, str(lv), "group", out):
            _check_level(view, str(lv), out)
            good.append(lv)
    return good
