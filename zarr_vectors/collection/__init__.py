"""Collections (``docs/collections.md``): several Zarr Vectors stores of one dataset as members
of an OME-Zarr RFC-8 collection, with shared id spaces, relationships and their indexes.

The face of the room: modules outside ``collection`` import these names from here."""

from zarr_vectors.collection.core import WRITERS, Collection, create_collection
from zarr_vectors.collection.index import StaleIndexError
from zarr_vectors.collection.layout import Member, is_collection_doc, member_target

__all__ = [
    "WRITERS",
    "Collection",
    "Member",
    "StaleIndexError",
    "create_collection",
    "is_collection_doc",
    "member_target",
]
