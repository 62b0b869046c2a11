"""The ``collection`` subcommand of ``zarr-vectors``: create a collection, add stores to it,
describe it, ask it for related rows and rebuild its relationship indexes
(``docs/collections.md``)."""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import sys
from typing import Any

from zarr_vectors.cli.arguments import add_storage_options, object_id, storage_options_arg
from zarr_vectors.errors import ZarrVectorsError

__all__ = [
    "COLLECTION_EXAMPLES",
    "add_collection_parser",
    "collection_at",
    "collection_command",
    "collection_info",
]

COLLECTION_EXAMPLES = (
    "examples:\n"
    "  zarr-vectors collection create connectome.zarr --id-space segments\n"
    "  zarr-vectors collection add connectome.zarr synapses --source syn.zarr \\\n"
    "      --relationship post_segment=segments --relationship pre_segment=segments\n"
    "  zarr-vectors collection add connectome.zarr meshes --source meshes.zarr --id-space segments\n"
    "  zarr-vectors collection info connectome.zarr\n"
    "  zarr-vectors collection related connectome.zarr 720575940 --relationship post_segment\n"
    "  zarr-vectors collection reindex connectome.zarr --memory-limit 512"
)


def _open(args: argparse.Namespace, mode: str = "r") -> Any:
    from zarr_vectors.api import open as open_any
    from zarr_vectors.collection import Collection

    opened = open_any(args.collection, mode=mode, storage_options=storage_options_arg(args.storage_options))
    if not isinstance(opened, Collection):
        raise ZarrVectorsError(
            f"{args.collection} is a store, not a collection (zarr-vectors info describes it)"
        )
    return opened


def collection_at(target: str, storage_options: dict[str, Any] | None) -> Any:
    """The :class:`~zarr_vectors.Collection` at ``target`` when its root document is a
    collection node, else None (a store, or nothing readable: the store commands report it)."""
    from zarr_vectors.collection import Collection, is_collection_doc
    from zarr_vectors.storage import open_backend

    try:
        raw = open_backend(target, read_only=True, storage_options=storage_options).get_many(["zarr.json"])[0]
        doc = json.loads(raw) if raw is not None else None
    except (ZarrVectorsError, OSError, ValueError):  # the store commands give their own error
        return None
    if not is_collection_doc(doc):
        return None
    return Collection.open(target, storage_options=storage_options)


def _create(args: argparse.Namespace) -> int:
    from zarr_vectors.collection import create_collection

    create_collection(
        args.collection,
        name=args.name,
        id_spaces=args.id_space or [],
        storage_options=storage_options_arg(args.storage_options),
    )
    print(f"created collection {args.collection} (id spaces: {', '.join(args.id_space or []) or '-'})")
    return 0


def _relationships(items: list[str] | None) -> dict[str, str]:
    out = {}
    for item in items or []:
        attribute, sep, space = item.partition("=")
        if not sep or not attribute or not space:
            raise ZarrVectorsError(f"--relationship takes ATTRIBUTE=ID_SPACE, got {item!r}")
        out[attribute] = space
    return out


def _add(args: argparse.Namespace) -> int:
    from zarr_vectors.collection import member_target

    coll = _open(args, "r+")
    relationships = _relationships(args.relationship)
    if args.source is not None and not args.move:
        if not os.path.isdir(args.source) or not os.path.isfile(os.path.join(args.source, "zarr.json")):
            raise ZarrVectorsError(f"--source {args.source} is not a local store directory (no zarr.json)")
        target = member_target(args.collection, args.member)
        if os.path.exists(target):
            raise ZarrVectorsError(f"{target} already exists")
        shutil.copytree(args.source, target)  # then registered where it lies
        source = None
    else:
        source = args.source
    try:
        coll.add_member(
            args.member, source=source, role=args.role, id_space=args.id_space, relationships=relationships
        )
    except ZarrVectorsError:
        if args.source is not None and not args.move:  # the copy made above goes again
            shutil.rmtree(member_target(args.collection, args.member), ignore_errors=True)
        raise
    print(f"added member {args.member} ({coll.members[args.member].kind}) to {args.collection}")
    return 0


def _info(args: argparse.Namespace) -> int:
    return collection_info(_open(args), args.collection, args.json)


def collection_info(coll: Any, target: str, as_json: bool) -> int:
    """Print :meth:`Collection.describe` of ``coll`` as text or JSON (``info`` and
    ``collection info``)."""
    info = coll.describe()
    if as_json:
        print(json.dumps(info, indent=2))
        return 0
    print(f"{target}: collection {info['name']!r}, id spaces {', '.join(info['id_spaces']) or '-'}")
    for m in info["members"]:
        space = m["id_space"] or "-"
        print(
            f"  {m['name']}: {m['kind']}, role {m['role'] or '-'}, object ids in {space}, "
            f"{m['vertices']:,} vertices, {m['objects']:,} objects"
        )
        for attribute, index in m["relationships"].items():
            state = (
                "no index"
                if index["index"] is None
                else f"index {index['index']['state']}, {index['index']['rows']:,} rows "
                f"in {index['index']['buckets']:,} buckets"
            )
            print(f"    {attribute} -> {index['id_space']}: {state}")
    return 0


def _related(args: argparse.Namespace) -> int:
    coll = _open(args)
    res = coll.related(
        args.ids, args.relationship, member=args.member, attributes=False if args.positions_only else None
    )
    writer = csv.writer(sys.stdout, lineterminator="\n")
    names = [n for n in sorted(res.attributes) if res.attributes[n].ndim == 1]
    header = ["object_id"] if res.object_ids is not None else []
    writer.writerow([*header, *res.axes, *names])
    columns = ([res.object_ids.tolist()] if res.object_ids is not None else []) + [
        res.positions[:, i].tolist() for i in range(res.positions.shape[1])
    ]
    columns += [res.attributes[n].tolist() for n in names]
    writer.writerows(zip(*columns, strict=True))
    print(f"{len(res)} rows", file=sys.stderr)
    return 0


def _reindex(args: argparse.Namespace) -> int:
    coll = _open(args, "r+")
    names = args.members or [n for n, m in coll.members.items() if m.relationships]
    limit = None if args.memory_limit == 0 else int(args.memory_limit * 2**20)
    for name in names:
        coll.build_index(name, memory_limit=limit)
        print(f"reindexed {name}: {', '.join(coll.members[name].relationships) or 'no relationships'}")
    return 0


def collection_command(args: argparse.Namespace) -> int:
    """Run ``zarr-vectors collection ACTION``."""
    return int(
        {"create": _create, "add": _add, "info": _info, "related": _related, "reindex": _reindex}[
            args.action
        ](args)
    )


def add_collection_parser(sub: Any, fmt: Any) -> argparse.ArgumentParser:
    """The ``collection`` subparser and its actions."""
    p = sub.add_parser(
        "collection",
        help="create, extend, describe and query a collection of stores",
        epilog=COLLECTION_EXAMPLES,
        formatter_class=fmt,
    )
    actions = p.add_subparsers(dest="action", required=True)

    def action(name: str, text: str) -> argparse.ArgumentParser:
        q = actions.add_parser(name, help=text, formatter_class=fmt)
        q.add_argument("collection", help="the collection (path or URL)")
        add_storage_options(q)
        return q

    c = action("create", "an empty collection")
    c.add_argument("--id-space", action="append", help="a shared id space (repeat for several)")
    c.add_argument("--name", help="display name (default: the last part of the path)")
    a = action("add", "add a member store (copied in, or --move)")
    a.add_argument("member", help="the member's name (its sub-path)")
    a.add_argument(
        "--source", help="a local store to copy in (without it: the store already at the sub-path)"
    )
    a.add_argument("--move", action="store_true", help="move --source in instead of copying it")
    a.add_argument("--role", help="what the member is in the dataset (free text)")
    a.add_argument("--id-space", help="the id space the member's object ids belong to")
    a.add_argument("--relationship", action="append", metavar="ATTRIBUTE=ID_SPACE", help="repeatable")
    i = action("info", "members, id spaces, relationships and index states")
    i.add_argument("--json", action="store_true", help="machine-readable")
    r = action("related", "rows whose relationship names IDS, as CSV on stdout")
    r.add_argument("ids", nargs="+", type=object_id, metavar="ID")
    r.add_argument("--relationship", required=True, help="the relationship attribute")
    r.add_argument("--member", help="the member (when several declare the relationship)")
    r.add_argument("--positions-only", action="store_true", help="positions and ids only")
    x = action("reindex", "rebuild relationship indexes")
    x.add_argument("members", nargs="*", help="members to reindex (default: every member with relationships)")
    x.add_argument(
        "--memory-limit",
        type=float,
        default=1024,
        metavar="MB",
        help="rows held at once while building (default 1024; 0: no limit)",
    )
    p.set_defaults(func=collection_command)
    return p
