"""The collection node of ``docs/format-collections.md`` as pure JSON functions.

A collection's root ``zarr.json`` holds an OME-Zarr RFC-8 ``Collection`` node under ``ome``;
each member is a node of type ``zv:vectors`` whose ``path`` (type ``zarr``) is ``./<name>``.
Every key this project adds carries the ``zv:`` prefix. No I/O here.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from zarr_vectors.errors import FormatError, InputError

__all__ = [
    "FORMAT",
    "MEMBER_TYPE",
    "Member",
    "CollectionDoc",
    "collection_doc",
    "is_collection_doc",
    "parse_collection",
    "member_target",
    "check_name",
]

FORMAT = "Zarr Vectors 0.9"
MEMBER_TYPE = "zv:vectors"
#: RFC-8 gives no released version yet; its examples write this draft string.
RFC8_VERSION = "0.x"
_NAME = re.compile(r"[a-zA-Z0-9_.-]+")


def check_name(name: Any, what: str) -> str:
    """``name`` when it is a valid RFC-8 id (``[a-zA-Z0-9-_.]+``, not ``.`` or ``..``)."""
    if not isinstance(name, str) or not _NAME.fullmatch(name) or name in (".", ".."):
        raise InputError(f"{what} {name!r} must match [a-zA-Z0-9-_.]+ (and not be '.' or '..')")
    return name


@dataclass(frozen=True)
class Member:
    """One member node: a Zarr Vectors store at ``./<name>`` of the collection.

    Invariant: every value of ``relationships`` is an id space of the collection.
    """

    name: str
    role: str | None = None
    kind: str | None = None
    id_space: str | None = None
    relationships: dict[str, str] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    def node(self) -> dict[str, Any]:
        """The RFC-8 node of this member (unknown attribute keys kept)."""
        attributes = {
            **self.extra,
            "zv:role": self.role,
            "zv:kind": self.kind,
            "zv:idSpace": self.id_space,
            "zv:relationships": dict(self.relationships),
        }
        return {
            "type": MEMBER_TYPE,
            "id": self.name,
            "name": self.name,
            "path": {"type": "zarr", "path": f"./{self.name}"},
            "attributes": attributes,
        }


@dataclass
class CollectionDoc:
    """A parsed collection node: its name, id spaces, members (in order) and the nodes and
    attributes this library does not interpret (written back unchanged)."""

    name: str
    id_spaces: dict[str, dict[str, Any]]
    members: dict[str, Member]
    other_nodes: list[dict[str, Any]] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    def check_member(self, member: Member) -> None:
        """Raise InputError when ``member`` names an id space the collection does not list."""
        spaces = [member.id_space] if member.id_space is not None else []
        for attribute, space in member.relationships.items():
            check_name(attribute, "relationship attribute")
            spaces.append(space)
        unknown = sorted({s for s in spaces if s not in self.id_spaces})
        if unknown:
            raise InputError(
                f"member {member.name!r} names id space(s) {unknown} the collection does not list "
                f"(id spaces: {sorted(self.id_spaces)})"
            )


def collection_doc(doc: CollectionDoc) -> dict[str, Any]:
    """The root ``zarr.json`` group document of a collection."""
    attributes = {**doc.extra, "zv:format": FORMAT, "zv:idSpaces": doc.id_spaces}
    ome = {
        "version": RFC8_VERSION,
        "type": "collection",
        "name": doc.name,
        "nodes": [m.node() for m in doc.members.values()] + doc.other_nodes,
        "attributes": attributes,
    }
    return {"zarr_format": 3, "node_type": "group", "attributes": {"ome": ome}}


def is_collection_doc(doc: Any) -> bool:
    """Whether a root document holds an RFC-8 collection node written by this library."""
    ome = doc.get("attributes", {}).get("ome") if isinstance(doc, dict) else None
    return (
        isinstance(ome, dict)
        and ome.get("type") == "collection"
        and isinstance(ome.get("attributes"), dict)
        and "zv:idSpaces" in ome["attributes"]
    )


def _member(node: dict[str, Any], where: str) -> Member:
    name = node.get("name")
    path = node.get("path")
    if not isinstance(path, dict) or path.get("type") != "zarr" or path.get("path") != f"./{name}":
        raise FormatError(f"{where}: member {name!r} must have path {{'type': 'zarr', 'path': './{name}'}}")
    attrs = dict(node.get("attributes") or {})
    relationships = attrs.pop("zv:relationships", None) or {}
    if not isinstance(relationships, dict) or not all(isinstance(v, str) for v in relationships.values()):
        raise FormatError(f"{where}: zv:relationships of {name!r} must map attribute names to id spaces")
    return Member(
        name=check_name(name, "member name"),
        role=attrs.pop("zv:role", None),
        kind=attrs.pop("zv:kind", None),
        id_space=attrs.pop("zv:idSpace", None),
        relationships=dict(relationships),
        extra=attrs,
    )


def parse_collection(doc: Any, where: str) -> CollectionDoc:
    """The :class:`CollectionDoc` of a root document (FormatError when it is not one)."""
    if not is_collection_doc(doc):
        raise FormatError(
            f"{where} is not a Zarr Vectors collection (no RFC-8 collection node with zv:idSpaces)"
        )
    ome = doc["attributes"]["ome"]
    attrs = dict(ome["attributes"])
    attrs.pop("zv:format", None)
    spaces = attrs.pop("zv:idSpaces")
    if not isinstance(spaces, dict):
        raise FormatError(f"{where}: zv:idSpaces must be an object")
    members: dict[str, Member] = {}
    others = []
    for node in ome.get("nodes") or []:
        if isinstance(node, dict) and node.get("type") == MEMBER_TYPE:
            member = _member(node, where)
            members[member.name] = member
        else:
            others.append(node)
    out = CollectionDoc(str(ome.get("name") or ""), dict(spaces), members, others, attrs)
    for member in members.values():
        try:
            out.check_member(member)
        except InputError as exc:
            raise FormatError(f"{where}: {exc}") from None
    return out


def member_target(target: Any, name: str) -> Any:
    """The target of member ``name`` of the collection at ``target`` (a path or URL)."""
    if isinstance(target, Path):
        return target / name
    if isinstance(target, (str, os.PathLike)):
        text = os.fspath(target)
        return f"{text.rstrip('/')}/{name}"
    raise InputError(
        f"collections are opened from a path or URL, not {type(target).__name__} (members live in sub-paths)"
    )
