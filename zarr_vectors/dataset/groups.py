"""Reads of a store's groups, part of :class:`~zarr_vectors.Dataset`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from zarr_vectors.engine import table_values
from zarr_vectors.errors import AttributeNotFoundError
from zarr_vectors.result import Result

if TYPE_CHECKING:
    from zarr_vectors.engine import Level

__all__ = ["GroupReads"]


class GroupReads:
    """The group reads of :class:`~zarr_vectors.Dataset` (which provides the methods below
    that are declared for type checking only)."""

    if TYPE_CHECKING:

        def level(self, index: int = 0) -> Level: ...

        def object_attribute_names(self, level: int = 0) -> list[str]: ...

        def objects(
            self, ids: Sequence[int], *, level: int = 0, attributes: Sequence[str] | bool | None = None
        ) -> Result: ...

    def group_ids(self, *, level: int = 0) -> np.ndarray:
        """The groups' ids, ascending: the user's group ids when the store remaps them
        (``group_attributes/group_id``), else the group indices that have members (small ids
        are kept as given; an index between them without members is no group).

        Parameters
        ----------
        level
            The level to list.

        Returns
        -------
        numpy.ndarray
            (G,) int64 or uint64; empty when the level has no groups.

        Examples
        --------
        >>> import zarr_vectors as zv
        >>> pts = [[0, 0], [1, 1], [5, 5]]
        >>> ds = zv.write_points(
        ...     "memory://doc-group-ids", pts, chunk_shape=4, object_ids=[10, 20, 30],
        ...     groups={70_000: [10, 30], 80_000: [20]}, group_names=["left", "right"],
        ...     group_attributes={"size": [2, 1]},
        ... )
        >>> ds.group_ids().tolist()
        [70000, 80000]
        """
        lv = self.level(level)
        return lv.group_id_map.to_user(lv.listed_groups)

    def groups(self, *, level: int = 0) -> list[np.ndarray]:
        """Member object ids (the user's ids) of every group, in the order of :meth:`group_ids`.

        Parameters
        ----------
        level
            The level to read.

        Returns
        -------
        list of numpy.ndarray
            One array of object ids per group; an empty list when the level has no groups.

        Raises
        ------
        CorruptCellError
            A stored group is not a whole number of 64-bit ids.

        Examples
        --------
        >>> import zarr_vectors as zv
        >>> pts = [[0, 0], [1, 1], [5, 5]]
        >>> ds = zv.write_points(
        ...     "memory://doc-groups", pts, chunk_shape=4, object_ids=[10, 20, 30],
        ...     groups={70_000: [10, 30], 80_000: [20]}, group_names=["left", "right"],
        ...     group_attributes={"size": [2, 1]},
        ... )
        >>> [members.tolist() for members in ds.groups()]
        [[10, 30], [20]]
        """
        lv = self.level(level)
        members = lv.group_members
        return [lv.object_id_map.to_user(members[g]) for g in lv.listed_groups.tolist()]

    def group_names(self, *, level: int = 0) -> list[str] | None:
        """Names of the groups in the order of :meth:`group_ids`, when the writer recorded them
        (``group_names`` on ``groups``); else None.

        Parameters
        ----------
        level
            The level to read.

        Returns
        -------
        list of str or None

        Examples
        --------
        >>> import zarr_vectors as zv
        >>> pts = [[0, 0], [1, 1], [5, 5]]
        >>> ds = zv.write_points(
        ...     "memory://doc-group-names", pts, chunk_shape=4, object_ids=[10, 20, 30],
        ...     groups={70_000: [10, 30], 80_000: [20]}, group_names=["left", "right"],
        ...     group_attributes={"size": [2, 1]},
        ... )
        >>> ds.group_names()
        ['left', 'right']
        """
        lv = self.level(level)
        names = None if lv.groups is None else lv.groups.attrs.get("group_names")
        if names is None:
            return None
        if len(names) == len(lv.group_members):  # one per stored group: the listed ones
            names = [names[g] for g in lv.listed_groups.tolist()]
        return [str(n) for n in names]

    def group_attributes(self, name: str, *, level: int = 0) -> np.ndarray:
        """Values of one group attribute, one row per group in the order of :meth:`group_ids`.

        Parameters
        ----------
        name
            The attribute.
        level
            The level to read.

        Returns
        -------
        numpy.ndarray
            (G,) or (G, C), in the attribute's dtype.

        Raises
        ------
        AttributeNotFoundError
            The level has no group attribute ``name`` (a ``KeyError``).

        Examples
        --------
        >>> import zarr_vectors as zv
        >>> pts = [[0, 0], [1, 1], [5, 5]]
        >>> ds = zv.write_points(
        ...     "memory://doc-group-attributes", pts, chunk_shape=4, object_ids=[10, 20, 30],
        ...     groups={70_000: [10, 30], 80_000: [20]}, group_names=["left", "right"],
        ...     group_attributes={"size": [2, 1]},
        ... )
        >>> ds.group_attributes("size").tolist()
        [2, 1]
        """
        lv = self.level(level)
        if name not in lv.group_attributes:
            raise AttributeNotFoundError("group", [name], level, lv.group_attributes)
        values = table_values(lv, lv.group_attributes[name])
        return values[lv.listed_groups] if len(values) == len(lv.group_members) else values

    def group(self, gid: int, *, level: int = 0, attributes: Sequence[str] | bool | None = None) -> Result:
        """All vertices of the objects in group ``gid`` (the user's group id, see :meth:`group_ids`),
        as :meth:`objects` reads them.

        Parameters
        ----------
        gid
            The group's id.
        level
            The level to read.
        attributes
            Vertex attribute names to read; default all, ``False`` none.

        Returns
        -------
        Result

        Raises
        ------
        UnknownIdError
            The level has no group ``gid`` (a ``KeyError``).

        Examples
        --------
        >>> import zarr_vectors as zv
        >>> pts = [[0, 0], [1, 1], [5, 5]]
        >>> ds = zv.write_points(
        ...     "memory://doc-group", pts, chunk_shape=4, object_ids=[10, 20, 30],
        ...     groups={70_000: [10, 30], 80_000: [20]}, group_names=["left", "right"],
        ...     group_attributes={"size": [2, 1]},
        ... )
        >>> ds.group(70_000).object_ids.tolist()
        [10, 30]
        """
        lv = self.level(level)
        (index,) = lv.group_id_map.to_oids([gid])
        members: Any = lv.object_id_map.to_user(lv.group_members[index])  # an id array
        return self.objects(members, level=level, attributes=attributes)
