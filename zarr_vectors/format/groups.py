"""The group documents of a level, parsed: links families (``links/<delta>``), the layout of each
links array in its family, link-attribute families and the object index.

Like :mod:`zarr_vectors.format.documents`, each parser returns a frozen description (None
when unusable) plus every :class:`~zarr_vectors.format.findings.Finding`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from zarr_vectors.errors import DecodeError, choice_message
from zarr_vectors.format.documents import MAX_CELLS, TableDoc
from zarr_vectors.format.findings import ERROR, NONCONFORMING, Finding, Findings, short
from zarr_vectors.format.links import STORE_POLICIES, links_has_perm, parse_offsets

__all__ = [
    "GROUP_ID_ATTRIBUTE",
    "NO_OBJECT",
    "OBJECT_ID_ATTRIBUTE",
    "owned",
    "LinksFamily",
    "LinkLayout",
    "ObjectIndexDoc",
    "parse_links_family",
    "parse_link_layout",
    "parse_link_attribute_family",
    "parse_object_index",
    "check_object_index",
    "MANIFEST_LAYOUTS",
    "MAX_LINK_WIDTH",
]

#: Object index layouts this library reads. ``vlen_manifests_v2`` (written by the reference
#: implementation 0.9.2, not in spec 0.9) adds ``object_ids``: row r of ``manifests``
#: describes object ``object_ids[r]``.
MANIFEST_LAYOUTS = ("vlen_manifests_v1", "vlen_manifests_v2")
#: Most endpoints one link record may join.
MAX_LINK_WIDTH = 20


#: Object attribute holding the user's id of each object, when ids are not ``0 .. B-1``.
OBJECT_ID_ATTRIBUTE = "object_id"
#: Group attribute holding the user's id of each group, when group ids are not ``0 .. G-1``.
GROUP_ID_ATTRIBUTE = "group_id"
#: Object id of rows no object claims: -1, or its bit pattern ``2**64 - 1`` for uint64 ids.
#: Only stores written elsewhere have such rows; where the user's ids are kept, -1 and
#: ``2**64 - 1`` can also be real ids (writers here claim every row, so no clash arises).
NO_OBJECT = -1


def owned(ids: np.ndarray, id_map: Any = None) -> np.ndarray:
    """Distinct object ids of a result's rows (ascending), without :data:`NO_OBJECT` where it
    cannot be an object: OIDs (``id_map``, a level's id map with its ``user`` ids or None, the identity, or int64 ids without a map). The
    user's ids may take any value, -1 and ``2**64 - 1`` included, so they are all kept."""
    u = np.unique(ids)
    translated = id_map.user is not None if id_map is not None else u.dtype.kind == "u"
    return u if translated or not len(u) else u[u != NO_OBJECT]


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _count(attrs: dict[str, Any], key: str, path: str, code: str, out: Findings) -> int | None:
    """A non-negative integer attribute; None when absent (or unusable: a finding)."""
    value = attrs.get(key)
    if value is None:
        return None
    if not _is_int(value) or not 0 <= value < MAX_CELLS:
        out.add(path, code, f"{path}: {key} must be a non-negative integer, got {short(value)}")
        return None
    return value


def _discriminator(path: str, attrs: dict[str, Any], want: str, out: Findings) -> None:
    if attrs.get("zv_array") != want:
        out.add(
            path,
            "metadata.zv-array",
            f"{path}: zv_array is {short(attrs.get('zv_array'))}, expected {want!r}",
            NONCONFORMING,
        )


@dataclass(frozen=True)
class LinksFamily:
    """A ``links/<delta>`` group: the policy every links array of the family follows."""

    delta: int
    link_width: int
    directed: bool = False
    store: str = "canonical"
    num_links: int | None = None
    num_physical_records: int | None = None
    attributes: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


def parse_links_family(
    path: str, attrs: Any, delta: int, ndim: int | None = None
) -> tuple[LinksFamily | None, list[Finding]]:
    """Parse the attributes of the links family group at ``path`` (``delta``: its folder's level
    delta; ``ndim``: the store's space axes, when known)."""
    out = Findings()
    code = "metadata.links"
    attrs = attrs if isinstance(attrs, dict) else {}
    _discriminator(path, attrs, "links_family", out)
    width = attrs.get("link_width")
    if not _is_int(width) or not 1 <= width <= MAX_LINK_WIDTH:
        out.add(
            path,
            code,
            f"{path}: link_width must be an integer from 1 to {MAX_LINK_WIDTH}, got {short(width)}",
        )
        width = None
    directed = attrs.get("directed", False)
    if not isinstance(directed, bool):
        out.add(path, code, f"{path}: directed must be true or false, got {short(directed)}")
        directed = None
    store = attrs.get("store", "canonical")
    if store not in STORE_POLICIES:
        out.add(path, code, choice_message(f"{path}: store", store, STORE_POLICIES))
        store = None
    if ndim is not None and attrs.get("sid_ndim", ndim) != ndim:
        out.add(
            path,
            code,
            f"{path}: sid_ndim is {short(attrs.get('sid_ndim'))} but the store has {ndim} space axes",
            NONCONFORMING,
        )
    if attrs.get("level_delta", delta) != delta:
        out.add(
            path,
            code,
            f"{path}: level_delta is {short(attrs.get('level_delta'))} but the folder names delta {delta}",
            NONCONFORMING,
        )
    links = _count(attrs, "num_links", path, code, out)
    records = _count(attrs, "num_physical_records", path, code, out)
    if width is None or directed is None or store is None:
        return None, out
    return LinksFamily(delta, width, directed, store, links, records, attrs), out


@dataclass(frozen=True, eq=False)
class LinkLayout:
    """How the rows of one ``links/<delta>/<offsets>`` array are laid out.

    Stored endpoint k of a record lies in chunk ``chunk + offsets[k - 1]`` (k = 0: the cell's
    own chunk); a row is ``link_width`` indices, after a ``perm_idx`` when ``has_perm``.
    ``intra`` arrays (delta 0, every offset zero) hold flat rows, the others ragged blobs.
    """

    segment: str
    delta: int
    link_width: int
    offsets: np.ndarray
    has_perm: bool
    intra: bool

    @property
    def row_width(self) -> int:
        return self.link_width + int(self.has_perm)


def parse_link_layout(
    path: str,
    attrs: dict[str, Any],
    segment: str,
    link_width: int,
    delta: int,
    ndim: int,
    family: LinksFamily | None = None,
) -> tuple[LinkLayout | None, list[Finding]]:
    """The layout of the links array ``path`` named ``segment``. With its ``family``, the
    declared ``has_perm`` must be what the family's policy gives for these offsets (absent, it
    is that value); without, ``has_perm`` is read as declared (absent: false)."""
    out = Findings()
    code = "metadata.links"
    try:
        offsets = parse_offsets(segment, link_width, ndim)
    except DecodeError as exc:
        out.add(path, code, f"{path!r}: {exc}")
        return None, out
    declared = attrs.get("has_perm")
    if declared is not None and not isinstance(declared, bool):
        out.add(path, code, f"{path}: has_perm must be true or false, got {short(declared)}")
        return None, out
    has_perm = bool(declared)
    if family is not None:
        expected = links_has_perm(offsets, delta=delta, directed=family.directed, store=family.store)
        if declared is None:
            out.add(
                path,
                code,
                f"{path}: has_perm is missing; the family's policy gives {expected}",
                NONCONFORMING,
            )
        elif declared is not expected:
            out.add(
                path,
                code,
                f"{path}: has_perm is {declared!r} but a {'directed' if family.directed else 'undirected'} "
                f"{family.store} family stores perm_idx {'with' if expected else 'without'} these offsets",
            )
        has_perm = expected if declared is None else declared
    if "offsets" in attrs and attrs["offsets"] != offsets.tolist():
        out.add(
            path,
            code,
            f"{path}: offsets attribute {short(attrs['offsets'])} disagrees with the array name "
            f"{segment!r} ({offsets.tolist()})",
            NONCONFORMING,
        )
    for key, value in (("link_width", link_width), ("level_delta", delta)):
        if attrs.get(key, value) != value:
            out.add(
                path,
                code,
                f"{path}: {key} is {short(attrs.get(key))} but its family says {value}",
                NONCONFORMING,
            )
    intra = delta == 0 and not np.any(offsets)
    return LinkLayout(segment, delta, link_width, offsets, has_perm, intra), out


def parse_link_attribute_family(path: str, attrs: Any, name: str) -> list[Finding]:
    """Findings of a ``link_attributes/<name>/<delta>`` group."""
    out = Findings()
    attrs = attrs if isinstance(attrs, dict) else {}
    _discriminator(path, attrs, "link_attribute_family", out)
    if attrs.get("name", name) != name:
        out.add(
            path,
            "metadata.link-attributes",
            f"{path}: name is {short(attrs.get('name'))} but the folder is {name!r}",
            NONCONFORMING,
        )
    return out


@dataclass(frozen=True)
class ObjectIndexDoc:
    """The ``object_index`` group: the manifests' layout and the declared object counts."""

    layout: str
    num_objects: int | None = None
    num_present: int | None = None
    attributes: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


def parse_object_index(
    path: str, attrs: Any, ndim: int | None = None
) -> tuple[ObjectIndexDoc | None, list[Finding]]:
    """Parse the attributes of the ``object_index`` group at ``path``."""
    out = Findings()
    code = "metadata.object-index"
    attrs = attrs if isinstance(attrs, dict) else {}
    _discriminator(path, attrs, "object_index", out)
    layout = attrs.get("layout", "vlen_manifests_v1")
    if layout not in MANIFEST_LAYOUTS:
        out.add(
            path,
            code,
            f"{path} has layout {short(layout)}; this library reads {', '.join(MANIFEST_LAYOUTS)}",
        )
        return None, out
    counts = {}
    for key in ("num_objects", "num_present"):
        if attrs.get(key) is None:
            out.add(path, code, f"{path}: {key} is missing; it must be an integer >= 0", NONCONFORMING)
        counts[key] = _count(attrs, key, path, code, out)
    n, present = counts["num_objects"], counts["num_present"]
    if n is not None and present is not None and present > n:
        out.add(path, code, f"{path}: num_present {present} exceeds num_objects {n}", NONCONFORMING)
    if ndim is not None and attrs.get("sid_ndim", ndim) != ndim:
        out.add(
            path,
            code,
            f"{path}: sid_ndim is {short(attrs.get('sid_ndim'))} but the store has {ndim} space axes",
            NONCONFORMING,
        )
    return ObjectIndexDoc(layout, n, present, attrs), out


def check_object_index(
    path: str, index: ObjectIndexDoc, manifests: TableDoc | None, object_ids: TableDoc | None
) -> list[Finding]:
    """The object index against its arrays: the manifests exist, have ``num_objects`` rows (layout
    v1; v2 counts objects by ``object_ids``) and, for v2, an ``object_ids`` row each."""
    out = Findings()
    code = "metadata.object-index"
    if manifests is None:
        out.add(path, code, f"{path} has no usable manifests array ({path}/manifests/zarr.json)")
        return out
    rows = manifests.shape[0]
    if index.num_objects is not None and rows != index.num_objects:
        out.add(
            manifests.path,
            code,
            f"{manifests.path} has {rows} rows but {path} says num_objects is {index.num_objects}",
            ERROR if index.layout == "vlen_manifests_v1" else NONCONFORMING,
        )
    if index.layout == "vlen_manifests_v2":
        if object_ids is None:
            out.add(path, code, f"{path} has layout vlen_manifests_v2 but no usable object_ids array")
        elif object_ids.shape[0] != rows:
            out.add(
                object_ids.path,
                code,
                f"{object_ids.path} has {object_ids.shape[0]} rows but the manifests have {rows}",
            )
    return out
