"""The level block: ``zarr_vectors_level`` in the attributes of each level group.

:class:`LevelMeta` holds the block. :func:`parse_level` checks its types and values and returns
it with every :class:`~zarr_vectors.format.findings.Finding`; :meth:`LevelMeta.from_json` raises
one :class:`~zarr_vectors.errors.FormatError` for those that block reading.
:func:`check_arrays_present` compares ``arrays_present`` with the nodes a level holds. Unknown
keys are kept in ``extra`` and written back unchanged.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field, fields
from typing import Any

from zarr_vectors.errors import choice_message
from zarr_vectors.format.findings import NONCONFORMING, WARNING, Finding, Findings, raise_for, short
from zarr_vectors.format.metadata_values import is_int, numbers_problem

__all__ = [
    "COARSENING_METHODS",
    "LEVEL_KEYS",
    "LIBRARY_LEVEL_KEYS",
    "FORBIDDEN_LEVEL_KEYS",
    "LEVEL_ARRAYS",
    "LEVEL_GROUPS",
    "DECLARED_FAMILIES",
    "LevelMeta",
    "parse_level",
    "check_arrays_present",
]

COARSENING_METHODS = ("per_object", "manual", "none")


@dataclass(frozen=True)
class LevelMeta:
    """The ``zarr_vectors_level`` block of a level group."""

    level: int
    vertex_count: int
    arrays_present: tuple[str, ...]
    chunk_shape: tuple[float, ...] | None = None
    fragments_tile: bool = False
    object_sparsity: float = 1.0
    coarsening_method: str = "none"
    parent_level: int | None = None
    preserves_object_ids: bool = False
    inherited_num_objects: int | None = None
    shared_fragments: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = dict(self.extra)
        out.update(
            {
                "level": self.level,
                "vertex_count": self.vertex_count,
                "arrays_present": list(self.arrays_present),
                "fragments_tile": self.fragments_tile,
                "object_sparsity": self.object_sparsity,
                "coarsening_method": self.coarsening_method,
                "parent_level": self.parent_level,
                "preserves_object_ids": self.preserves_object_ids,
                "shared_fragments": self.shared_fragments,
            }
        )
        if self.chunk_shape is not None:
            out["chunk_shape"] = list(self.chunk_shape)
        if self.inherited_num_objects is not None:
            out["inherited_num_objects"] = self.inherited_num_objects
        return out

    @classmethod
    def from_json(cls, block: Any, where: str) -> LevelMeta:
        """Parse a ``zarr_vectors_level`` block (``where`` names the level in messages, e.g.
        ``"level 0"``); raise FormatError on anything unusable (see :func:`parse_level`)."""
        meta, findings = _parse_level(block, where, "zarr.json", None, None)
        raise_for(findings)
        assert meta is not None
        return meta


# ------------------------------------------------------------------ parsing
#
# The parser returns its best reading of the block plus every finding. A field that is
# unusable gets its default so that the validator can go on; readers never see those values,
# as every such field is a finding that blocks reading.

#: Keys that are fields of :class:`LevelMeta` (the others are kept in ``extra``).
_LEVEL_FIELDS = frozenset(f.name for f in fields(LevelMeta)) - {"extra"}
#: Keys of a level's ``zarr_vectors_level`` block (the ``chunk_*`` ones: a reference 0.9.2 writer's).
LEVEL_KEYS = _LEVEL_FIELDS | {"chunk_dims", "chunk_attribute_name", "chunk_attribute_values"}
#: Keys this library adds to the level blocks of pyramid levels, recording how they were
#: built (kept in ``extra``; the format leaves room for such keys).
LIBRARY_LEVEL_KEYS = frozenset(
    {
        "coarsening_algorithm",
        "simplify_tolerance",
        "face_fraction",
        "attribute_reductions",
        "object_sparsity_strategy",
        "object_sparsity_seed",
        "object_sparsity_attribute",
        "object_sparsity_largest",
        "stale",  # set on coarser levels once level 0 changed under them (an append)
        "pyramid_build",  # the settings a level was built with (factor, strategy, reductions, ...)
    }
)
#: Keys a level block must not hold: bin shapes live in the root multiscales, bounds in the root.
FORBIDDEN_LEVEL_KEYS = ("bin_shape", "bin_ratio", "bin_size", "bounds")
#: The array and group families a level may hold (what ``arrays_present`` names).
LEVEL_ARRAYS = ("vertices", "vertex_fragments", "link_fragments", "groups")
LEVEL_GROUPS = (
    "links",
    "vertex_attributes",
    "fragment_attributes",
    "link_attributes",
    "object_index",
    "object_attributes",
    "group_attributes",
)


def _int_field(
    block: dict[str, Any], key: str, default: Any, where: str, path: str, out: Findings, *, minimum: int = 0
) -> Any:
    """``block[key]`` as an int >= ``minimum`` (``default`` when absent, null or unusable)."""
    value = block.get(key)
    if value is None:
        return default
    if not is_int(value) or value < minimum:
        out.add(path, _LEVEL_CODE, f"{where}.{key} must be an integer >= {minimum}, got {short(value)}")
        return default
    return value


_LEVEL_CODE = "metadata.level"


def parse_level(block: Any, index: int, nd: int | None = None) -> tuple[LevelMeta | None, list[Finding]]:
    """Parse the ``zarr_vectors_level`` block of level ``index`` (``nd``: the store's space axes,
    to check a ``chunk_shape`` override). Returns the block (None when there is none) and every
    finding."""
    return _parse_level(block, f"level {index}", f"{index}/zarr.json", index, nd)


def _flag(block: dict[str, Any], key: str, where: str, path: str, out: Findings) -> bool:
    value = block.get(key, False)
    if not isinstance(value, bool):
        out.add(path, _LEVEL_CODE, f"{where}.{key} must be true or false, got {short(value)}")
        return False
    return value


def _arrays_present(block: dict[str, Any], where: str, path: str, out: Findings) -> tuple[str, ...]:
    present = block.get("arrays_present", [])
    if not isinstance(present, (list, tuple)) or not all(isinstance(a, str) for a in present):
        out.add(
            path,
            "metadata.arrays-present",
            f"{where}.arrays_present must be a list of array family names, got {short(present)}",
        )
        return ()
    for name in present:
        if name not in LEVEL_ARRAYS + LEVEL_GROUPS:
            out.add(
                path,
                "metadata.arrays-present",
                f"{where}: arrays_present lists {name!r}, which is not a family name",
                NONCONFORMING,
            )
    return tuple(present)


def _level_numbers(
    block: dict[str, Any], where: str, path: str, nd: int | None, out: Findings
) -> tuple[tuple[float, ...] | None, float]:
    """The ``chunk_shape`` override (None: the root's) and ``object_sparsity``."""
    cs = block.get("chunk_shape")
    chunk_shape = None
    if cs is not None:
        if (why := numbers_problem(cs, f"{where}.chunk_shape", positive=True)) is not None:
            out.add(path, _LEVEL_CODE, why)
        elif nd is not None and len(cs) != nd:
            out.add(
                path,
                _LEVEL_CODE,
                f"{where}: chunk_shape {[float(v) for v in cs]} has {len(cs)} entries for {nd} space axes",
            )
        else:
            chunk_shape = tuple(float(v) for v in cs)
    sparsity = block.get("object_sparsity", 1.0)
    if (why := numbers_problem([sparsity], f"{where}.object_sparsity")) is not None:
        out.add(path, _LEVEL_CODE, why)
        sparsity = 1.0
    elif not 0 < sparsity <= 1:
        out.add(
            path, _LEVEL_CODE, f"{where}.object_sparsity must be in (0, 1], got {sparsity!r}", NONCONFORMING
        )
    return chunk_shape, float(sparsity)


def _level_keys(block: dict[str, Any], where: str, path: str, out: Findings) -> None:
    """Keys a level block must not hold, and keys 0.9 does not know."""
    for bad in FORBIDDEN_LEVEL_KEYS:
        if bad in block:
            out.add(
                path,
                _LEVEL_CODE,
                f"{where}: level metadata must not hold {bad!r} (bin shapes live in the root multiscales "
                "transforms, bounds in the root block)",
                NONCONFORMING,
            )
    for key in sorted(set(block) - LEVEL_KEYS - LIBRARY_LEVEL_KEYS - set(FORBIDDEN_LEVEL_KEYS), key=str):
        out.add(
            path,
            "metadata.unknown-key",
            f"unknown key zarr_vectors_level.{key} (kept, but not part of 0.9)",
            WARNING,
        )


def _parse_level(
    block: Any, where: str, path: str, index: int | None, nd: int | None
) -> tuple[LevelMeta | None, list[Finding]]:
    out = Findings()
    if not isinstance(block, dict):
        out.add(path, _LEVEL_CODE, f"{where}: the level group has no 'zarr_vectors_level' attribute block")
        return None, out
    raw_level = block.get("level")
    level = _int_field(block, "level", -1, where, path, out, minimum=-1)
    if index is not None and level != index and (raw_level is None or raw_level == level):
        out.add(
            path,
            _LEVEL_CODE,
            f"{where}: zarr_vectors_level.level is {short(raw_level)} but the group is level {index}",
            NONCONFORMING,
        )
    if block.get("vertex_count") is None:
        out.add(path, _LEVEL_CODE, f"{where}.vertex_count is missing; it must be an integer >= 0")
    count = _int_field(block, "vertex_count", -1, where, path, out)
    present = _arrays_present(block, where, path, out)
    inherited = _int_field(block, "inherited_num_objects", None, where, path, out)
    parent = _int_field(block, "parent_level", None, where, path, out)
    chunk_shape, sparsity = _level_numbers(block, where, path, nd, out)
    method = block.get("coarsening_method", "none")
    if method not in COARSENING_METHODS:
        out.add(
            path,
            _LEVEL_CODE,
            choice_message(f"{where}.coarsening_method", method, COARSENING_METHODS),
            WARNING,
        )
    flags = {
        k: _flag(block, k, where, path, out)
        for k in ("fragments_tile", "preserves_object_ids", "shared_fragments")
    }
    _level_keys(block, where, path, out)
    meta = LevelMeta(
        level=level,
        vertex_count=count,
        arrays_present=present,
        chunk_shape=chunk_shape,
        object_sparsity=sparsity,
        coarsening_method=str(method),
        parent_level=parent,
        inherited_num_objects=inherited,
        extra={k: v for k, v in block.items() if k not in _LEVEL_FIELDS},
        **flags,
    )
    return meta, out


#: ``arrays_present`` families whose loss would silently change what a read returns
#: (attributes, edges and faces, objects): one declared whose ``zarr.json`` is missing blocks
#: reading. The others (``link_fragments``, ``fragment_attributes``, ...) are not needed to
#: answer correctly: their absence is a warning.
DECLARED_FAMILIES = (
    "vertex_fragments",
    "vertex_attributes",
    "links",
    "object_index",
    "object_attributes",
    "groups",
    "group_attributes",
)


def check_arrays_present(meta: LevelMeta, index: int, present: Collection[str]) -> list[Finding]:
    """Level ``index``'s ``arrays_present`` against the families it holds (``present``: the
    names of its child nodes that have a ``zarr.json``)."""
    out = Findings()
    p = str(index)
    for name in meta.arrays_present:
        if name in present or name not in LEVEL_ARRAYS + LEVEL_GROUPS:
            continue
        if name in DECLARED_FAMILIES:
            out.add(
                f"{p}/zarr.json",
                "metadata.arrays-present",
                f"level {p} declares {name!r} in arrays_present but {p}/{name}/zarr.json is missing "
                "(deleted or never written); the level cannot be read completely",
            )
        else:
            out.add(
                f"{p}/zarr.json",
                "metadata.arrays-present",
                f"arrays_present lists {name!r} but level {p} has no such node "
                "(readers look nodes up, so this misleads only)",
                WARNING,
            )
    return out
